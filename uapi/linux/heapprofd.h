/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * heapprofd: the contract between the heapprofd kernel module, the profiled
 * process (libheapprofd_client) and the profiling daemon.
 *
 * Three parties share one session:
 *
 *   producer  the profiled process. It registers a session on /dev/heapprofd,
 *             maps the ring and writes records (many threads at once).
 *   consumer  the daemon. It attaches to the session (one at a time), maps
 *             the same ring and reads the records (one thread).
 *   kernel    owns the memory, checks who may attach, passes file
 *             descriptors, wakes the consumer and publishes statistics. It
 *             never trusts what either side wrote into shared memory.
 *
 * The same ring layout is used without the module (the "user-space
 * transport"): the producer then builds the mapping itself on a memfd and
 * hands it to the daemon over a UNIX socket. Nothing in the layout depends
 * on who allocated it.
 *
 * Documentation/heapprofd/ring.rst explains the ring protocol in prose.
 */
#ifndef _UAPI_LINUX_HEAPPROFD_H
#define _UAPI_LINUX_HEAPPROFD_H

#include <linux/types.h>
#include <linux/ioctl.h>
#include <linux/const.h>

#define HEAPPROFD_DEVICE_NAME	"heapprofd"	/* /dev/heapprofd */
#define HEAPPROFD_ABI_VERSION	5
#define HEAPPROFD_CTL_MAGIC	0x48505244	/* "HPRD" */

/*
 * Geometry.
 *
 * A session is mapped with exactly one call:
 *
 *   mmap(NULL, ctl_size + 2 * data_size, PROT_READ | PROT_WRITE,
 *        MAP_SHARED, fd, 0)
 *
 * The first ctl_size bytes are the control area (struct heapprofd_ctl at
 * offset 0). The data area of data_size bytes (a power of two, at least
 * HEAPPROFD_DATA_SIZE_MIN) follows and is mapped twice back to back, so a
 * record that starts near the end of the data area continues into the second
 * copy and is always contiguous in memory. Any other offset, length,
 * PROT_EXEC or a private mapping is refused with EINVAL.
 *
 * Records the kernel adds to a session (DMA-BUF exports and releases, ABI
 * 5) never enter this shared memory: the consumer read(2)s them from its
 * consumer fd (see "Kernel records" below). ctl->off.kring stays 0 and the
 * offset HEAPPROFD_MMAP_KRING stays refused.
 */
#define HEAPPROFD_CTL_SIZE		4096U
#define HEAPPROFD_DATA_SIZE_MIN		(64ULL << 10)	/* 64 KiB */
#define HEAPPROFD_DATA_SIZE_DEFAULT	(8ULL << 20)	/* 8 MiB */
#define HEAPPROFD_MMAP_RING		0ULL
#define HEAPPROFD_MMAP_KRING		_BITULL(32)

/* Records are 8-byte aligned; a record is never longer than the data area. */
#define HEAPPROFD_REC_ALIGN		8U

/* ------------------------------------------------------------------------ */
/* The control area                                                          */
/* ------------------------------------------------------------------------ */

/*
 * Byte offsets of the parts of the control area, measured from its start,
 * in the manner of io_uring's offsets tables: a reader finds every part
 * through this table, so later versions can move or grow parts without
 * breaking old readers. Written by whoever created the ring.
 */
struct heapprofd_ctl_offsets {
	__u32 producer;		/* struct heapprofd_producer */
	__u32 consumer;		/* struct heapprofd_consumer */
	__u32 kstate;		/* struct heapprofd_kstate */
	__u32 counters;		/* struct heapprofd_counters */
	__u32 config;		/* struct heapprofd_config */
	__u32 kring;		/* 0: no kernel ring (reserved) */
	__u32 resv[10];
};

/* At offset 0 of the control area. */
struct heapprofd_ctl {
	__u32 magic;		/* HEAPPROFD_CTL_MAGIC */
	__u32 version;		/* HEAPPROFD_ABI_VERSION */
	__u32 header_size;	/* sizeof(struct heapprofd_ctl) */
	__u32 ctl_size;		/* bytes of the control area */
	__u64 data_size;	/* bytes of the data area (power of two) */
	__u64 data_offset;	/* offset of the data area in the mapping */
	__u64 session_id;	/* 0 in the user-space transport */
	__u32 flags;		/* HEAPPROFD_CTL_* */
	__u32 resv0;
	struct heapprofd_ctl_offsets off;
};

/* heapprofd_ctl.flags */
#define HEAPPROFD_CTL_KERNEL	_BITUL(0)	/* ring owned by the module */

/*
 * The producers' cache line. tail is the number of bytes ever reserved in
 * the ring, or skipped by a rewind (it only grows; the position in the
 * data area is tail & (data_size - 1)). Producers advance it with
 * compare-and-swap. So may the consumer, to rewind an empty ring: with
 * head == tail it moves tail from head to the start of the next lap, and
 * then head with it, so that producers keep writing the pages at the front
 * of the data area (the bytes skipped are zero already: see below). A
 * producer whose compare-and-swap fails retries at the tail it finds,
 * whoever moved it.
 */
/* Each part below fills whole 64-byte cache lines (its resv fields pad it). */
struct heapprofd_producer {
	__u64 tail;
	__u64 resv[7];
};

/*
 * The consumer's two cache lines. head is the number of bytes consumed; the
 * consumer stores it after every record. sleeping has a line of its own:
 * producers read it after every commit and the consumer writes it only when
 * it goes to sleep or wakes, so it stays in the producers' caches instead of
 * being pulled across with every store to head.
 *
 * sleeping is 0 while the consumer is awake. Before it sleeps in poll() the
 * consumer stores a watermark there (at least 1: the number of unread bytes
 * it wants to be woken for) and then checks the ring once more. A producer
 * that committed a record and then finds sleeping != 0 and at least that many
 * bytes unread swaps sleeping to 0 and, if it was the one to do so, makes one
 * HEAPPROFD_IOC_WAKE call (or, in the user-space transport, writes the
 * eventfd). Fewer bytes wait for the consumer's own timer, whose period
 * bounds the latency. While the consumer is awake, or while less than the
 * watermark is unread, producing costs no system call.
 *
 * timer_us, when not 0, says that the consumer drains the ring at least
 * every timer_us microseconds whether it is woken or not (it sets it before
 * it first sleeps and never clears it). A producer may then read sleeping
 * without a full barrier after its commit: a wake-up it misses because the
 * two crossed costs at most timer_us of latency, never a record. With 0
 * (a consumer that sleeps until woken) the barrier is required.
 *
 * behind is a count the consumer bumps each time it looks at the ring and
 * leaves the records in it on purpose: it holds as many of this producer's
 * records as it may and is still working through them (behind, not
 * stopped). A producer waiting for room (HEAPPROFD_CFG_BLOCK) counts
 * towards block_timeout_us only the time in which neither head nor behind
 * moved. A consumer that bumps behind bounds for itself how long it may
 * go on doing so without reading (heapprofd: a minute, then it ends the
 * session). 0 from a consumer that never sets it.
 */
struct heapprofd_consumer {
	__u64 head;
	__u64 behind;		/* see above */
	__u64 resv0[6];
	__u32 sleeping;
	__u32 timer_us;
	__u64 resv[7];
};

/*
 * Written by the kernel (or, in the user-space transport, by the daemon) for
 * the producer to read. The kernel keeps its own copy and never reads these
 * back.
 */
struct heapprofd_kstate {
	__u32 state;		/* HEAPPROFD_STATE_* */
	__u32 consumer_pid;	/* 0 while no consumer is attached */
	__u64 attach_count;	/* attaches so far */
	__u64 resv[6];
};

#define HEAPPROFD_STATE_OPEN		0	/* no consumer */
#define HEAPPROFD_STATE_ATTACHED	1	/* a consumer is attached */
#define HEAPPROFD_STATE_CLOSED		2	/* the producer is gone */

/*
 * Counters the producer keeps. Drops are exact: a record that does not fit
 * is counted here, with its bytes, and nowhere else. The exact totals are
 * every allocation and free the client saw, sampled or not, summed from
 * per-thread counters. The kernel reads these (once, clamped) for sysfs.
 */
struct heapprofd_counters {
	__u64 records_written;
	__u64 bytes_written;
	__u64 records_dropped;
	__u64 bytes_dropped;
	__u64 frees_dropped;	/* free records among records_dropped */
	__u64 wakeups;		/* wake calls the producer made */
	__u64 alloc_calls;	/* exact totals */
	__u64 alloc_bytes;
	__u64 free_calls;
	__u64 free_bytes;
	/*
	 * The estimates (est_size) of the ALLOC records among records_dropped:
	 * the bytes of allocations missing from the profile because of drops.
	 */
	__u64 est_bytes_dropped;
	/*
	 * Not 0: CLOCK_REALTIME (ns) at which the producer stopped profiling
	 * because a record waited for room while the consumer read nothing
	 * for block_timeout_us (HEAPPROFD_CFG_BLOCK). Nothing was dropped:
	 * the records end there. (In resv[0] before; readers that do not know
	 * it see a reserved field.)
	 */
	__u64 stall_stop_ns;
	__u64 resv[4];
};

/*
 * Configuration the consumer writes and the producer reads. The consumer
 * fills the fields, then increments generation (release); a producer that
 * sees a new generation (acquire) rereads them all. Every value is checked
 * by the producer; a value out of range is replaced by the default.
 */
struct heapprofd_config {
	__u32 generation;
	__u32 enabled;		/* 0: dormant, 1: sampling */
	__u64 interval;		/* mean bytes between samples; 1 = every byte */
	__u32 stack_cap;	/* bytes of stack copied at most */
	__u32 flags;		/* HEAPPROFD_CFG_* */
	__u32 block_timeout_us;	/* HEAPPROFD_CFG_BLOCK: stall bound (below) */
	__u32 consumer_caps;	/* HEAPPROFD_CAP_*: what the consumer reads */
	/*
	 * Heaps not to sample: bit (n % 64) of heaps_off[n / 64] for heap id
	 * n (HEAPPROFD_HEAP_*, or an id a HEAPPROFD_REC_HEAP record
	 * announced). All zero: every heap is sampled.
	 */
	__u64 heaps_off[4];
};

/*
 * HEAPPROFD_CFG_BLOCK: a record that does not fit waits for room, never
 * dropped, for as long as the consumer keeps reading; once the consumer
 * has read nothing for block_timeout_us the producer stops profiling and
 * says so (counters.stall_stop_ns). Without it a record that does not fit
 * is dropped and counted.
 *
 * HEAPPROFD_CFG_ADAPTIVE: the producer raises its sampling interval while
 * the ring fills (by a power of two per step of fill) and lowers it as the
 * ring drains; every ALLOC record carries the interval its sample was
 * drawn at, so estimates stay unbiased.
 */
#define HEAPPROFD_CFG_BLOCK		_BITUL(0) /* wait for room: no drop */
#define HEAPPROFD_CFG_FOLLOW_FORKS	_BITUL(1) /* children register too */
#define HEAPPROFD_CFG_ADAPTIVE		_BITUL(2) /* raise interval as ring fills */
#define HEAPPROFD_CFG_ALL	(HEAPPROFD_CFG_BLOCK | \
				 HEAPPROFD_CFG_FOLLOW_FORKS | \
				 HEAPPROFD_CFG_ADAPTIVE)

/*
 * consumer_caps (resv0 until the first was added, so 0 from an older
 * consumer): record encodings beyond ABI 5's first that the consumer
 * reads; a producer uses one only when its bit is set. Unknown bits are
 * ignored (unlike flags, whose unknown bits void the config).
 */
#define HEAPPROFD_CAP_STACK_DELTA	_BITUL(0) /* HEAPPROFD_ALLOC_STACK_DELTA */
#define HEAPPROFD_CAP_PYFRAMES		_BITUL(1) /* HEAPPROFD_ALLOC_PYFRAMES */
#define HEAPPROFD_CAP_STACK_SAME	_BITUL(2) /* HEAPPROFD_ALLOC_STACK_SAME */

#define HEAPPROFD_STACK_CAP_DEFAULT	(64U << 10)
#define HEAPPROFD_INTERVAL_DEFAULT	(4096ULL)

/* ------------------------------------------------------------------------ */
/* Records                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * Every record starts with this header. Writing a record:
 *
 *   1. reserve len bytes: compare-and-swap tail from t to t + len, after
 *      checking t + len - head <= data_size (if not, drop and count);
 *   2. store the commit word at t: len | HEAPPROFD_REC_BUSY together with
 *      stamp = HEAPPROFD_REC_STAMP(t);
 *   3. write the rest of the record;
 *   4. store-release the commit word again with len (without BUSY), or
 *      with len | HEAPPROFD_REC_DISCARD to abandon the record.
 *
 * The commit word is the first eight bytes of the header, len and stamp
 * together: it is always stored and loaded as one naturally aligned 64-bit
 * access, so a reader never pairs a new stamp with a stale length.
 *
 * Reading at head: load the commit word (acquire). The record is ready when
 * stamp == HEAPPROFD_REC_STAMP(head) and BUSY is clear; the reader then
 * consumes it (skipping it if DISCARD is set), zeroes its len bytes and
 * advances head by len with a store-release. Because every byte a reader
 * gives back is zero, and the ring starts zeroed, space that a writer has
 * reserved but not yet marked reads as a zero commit word, which never
 * matches a stamp (the stamp's top bit is always set): stale bytes can never
 * pass for a record. A record that stays not ready for longer than the reader's
 * bound while tail > head was left by a writer that died: if its stamp
 * matches, the reader skips len bytes; otherwise the session is broken and
 * the reader ends it. Neither side ever waits without a bound.
 *
 * len counts the header and is a multiple of HEAPPROFD_REC_ALIGN.
 */
struct heapprofd_rec_hdr {
	__u32 len;		/* commit word */
	__u32 stamp;		/* HEAPPROFD_REC_STAMP(position) */
	__u16 type;		/* HEAPPROFD_REC_* */
	__u16 flags;		/* per type */
	__u32 resv;
};

#define HEAPPROFD_REC_BUSY	_BITUL(31)
#define HEAPPROFD_REC_DISCARD	_BITUL(30)
#define HEAPPROFD_REC_LEN_MASK	(_BITUL(30) - 1)
#define HEAPPROFD_REC_STAMP(pos) ((__u32)(0x80000000U | (__u32)((pos) >> 3)))

enum heapprofd_rec_type {
	HEAPPROFD_REC_ALLOC	= 1,	/* struct heapprofd_rec_alloc + stack */
	HEAPPROFD_REC_FREE	= 2,	/* struct heapprofd_rec_free */
	HEAPPROFD_REC_HEAP	= 3,	/* struct heapprofd_rec_heap */
	HEAPPROFD_REC_MAPS	= 4,	/* struct heapprofd_rec_maps */
	HEAPPROFD_REC_CODE	= 5,	/* struct heapprofd_rec_code */
	/* 0x100 and up: records only the kernel writes (read(2), below) */
	HEAPPROFD_REC_KERNEL_FIRST = 0x100,
	HEAPPROFD_REC_KLOST	= 0x100,	/* struct heapprofd_rec_klost */
	HEAPPROFD_REC_DMABUF	= 0x101,	/* struct heapprofd_rec_dmabuf */
	HEAPPROFD_REC_OOM	= 0x102,	/* struct heapprofd_rec_oom */
};

/*
 * Register sets copied with a sample, for the unwinder: regs[0 .. nregs)
 * of struct heapprofd_rec_alloc in the order of the HEAPPROFD_<ARCH>_*
 * indices below. Every set starts with the same three registers, so that a
 * reader finds them without knowing the architecture:
 *
 *   HEAPPROFD_REG_PC  the program counter (x86-64 rip, aarch64 pc)
 *   HEAPPROFD_REG_SP  the stack pointer; the copied stack starts there
 *   HEAPPROFD_REG_FP  the frame pointer (x86-64 rbp, aarch64 x29)
 *
 * and goes on with the registers a caller's frame may keep values in
 * (callee-saved), which the unwinder needs to restore them. A writer fills
 * at least HEAPPROFD_<ARCH>_NREGS registers; a reader refuses fewer. The
 * accessors heapprofd_rec_pc() and friends below read a record's.
 */
enum heapprofd_arch {
	HEAPPROFD_ARCH_X86_64	= 1,	/* ip sp bp bx r12 r13 r14 r15 */
	HEAPPROFD_ARCH_AARCH64	= 2,	/* pc sp x29 x30 x19 .. x28 */
};

#define HEAPPROFD_REG_PC	0
#define HEAPPROFD_REG_SP	1
#define HEAPPROFD_REG_FP	2

#define HEAPPROFD_X86_64_IP	0
#define HEAPPROFD_X86_64_SP	1
#define HEAPPROFD_X86_64_BP	2
#define HEAPPROFD_X86_64_BX	3
#define HEAPPROFD_X86_64_R12	4
#define HEAPPROFD_X86_64_R13	5
#define HEAPPROFD_X86_64_R14	6
#define HEAPPROFD_X86_64_R15	7
#define HEAPPROFD_X86_64_NREGS	8

/*
 * aarch64 (AAPCS64): x29 is the frame pointer and x30 the link register
 * (the return address of a function that has not saved it yet), x19 .. x28
 * are callee-saved. LR and the return addresses in frame records may carry
 * a pointer authentication code in their top bits (user space with
 * PAC enabled): a reader strips the bits above the virtual address size
 * before using them as addresses.
 */
#define HEAPPROFD_AARCH64_PC	0
#define HEAPPROFD_AARCH64_SP	1
#define HEAPPROFD_AARCH64_FP	2	/* x29 */
#define HEAPPROFD_AARCH64_LR	3	/* x30 */
#define HEAPPROFD_AARCH64_X19	4	/* x19 + n at HEAPPROFD_AARCH64_X19 + n */
#define HEAPPROFD_AARCH64_X28	13
#define HEAPPROFD_AARCH64_NREGS	14

#define HEAPPROFD_MAX_REGS	16

/*
 * The architecture this code is compiled for, and its register set's size,
 * for a writer; 0 where heapprofd has no register set for it.
 */
#if defined(__x86_64__)
#define HEAPPROFD_ARCH_NATIVE		HEAPPROFD_ARCH_X86_64
#define HEAPPROFD_NREGS_NATIVE		HEAPPROFD_X86_64_NREGS
#elif defined(__aarch64__)
#define HEAPPROFD_ARCH_NATIVE		HEAPPROFD_ARCH_AARCH64
#define HEAPPROFD_NREGS_NATIVE		HEAPPROFD_AARCH64_NREGS
#else
#define HEAPPROFD_ARCH_NATIVE		0
#define HEAPPROFD_NREGS_NATIVE		0
#endif

/* heapprofd_rec_alloc.hdr.flags */
#define HEAPPROFD_ALLOC_STACK_TRUNCATED	_BITUL(0) /* stack_cap was reached */
#define HEAPPROFD_ALLOC_EXACT		_BITUL(1) /* est_size is the size */
#define HEAPPROFD_ALLOC_STACK_REUSED	_BITUL(2) /* stack_reused is set */
#define HEAPPROFD_ALLOC_STACK_DELTA	_BITUL(3) /* the stack as changes (below) */
#define HEAPPROFD_ALLOC_PYFRAMES	_BITUL(4) /* Python frames at the end (below) */
#define HEAPPROFD_ALLOC_STACK_SAME	_BITUL(5) /* the previous record's path (below) */

/*
 * The most a record may take from its thread's previous record (below):
 * the default stack cap, so that a whole stack can be reused (ABI 4; 8 KiB
 * in ABI 3, which left 1.9 KiB of sqlite3's 10 KiB stacks in every record).
 */
#define HEAPPROFD_STACK_REUSE_MAX	(64U << 10)

/*
 * A sampled allocation. est_size is what this sample stands for: count *
 * interval, or req_size when the allocation was recorded exactly. The raw
 * stack, stack_len bytes copied from address regs[HEAPPROFD_REG_SP]
 * upwards, follows the structure (padded to HEAPPROFD_REC_ALIGN).
 *
 * Stack reuse (ABI 3): the outer part of a thread's stack rarely changes
 * between two of its samples. With HEAPPROFD_ALLOC_STACK_REUSED the record
 * carries only [sp, sp + stack_len); the stack_reused bytes above it, up to
 * stack_top (sp + stack_len + stack_reused == stack_top), are byte for
 * byte those at the same addresses in the previous ALLOC record written by
 * the same thread (tid) in this session, which had the same stack_top and
 * covered them within its topmost HEAPPROFD_STACK_REUSE_MAX bytes.
 * stack_reused is a multiple of 8 and at most HEAPPROFD_STACK_REUSE_MAX;
 * without the flag it is 0. A reader that does not have that previous
 * record (it attached in between) treats the record as truncated there.
 * Records written by the kernel never reuse and are never reused from.
 */
struct heapprofd_rec_alloc {
	struct heapprofd_rec_hdr hdr;
	__u64 seq;		/* process-wide order of sampled events */
	__u64 addr;
	__u64 req_size;		/* what the caller asked for */
	__u64 usable_size;	/* what the allocator handed out */
	__u64 est_size;
	__u64 interval;		/* interval the sample was taken at */
	__u32 count;		/* samples the allocation crossed */
	__u32 heap_id;		/* HEAPPROFD_HEAP_* or a registered heap */
	__u32 tid;
	__u32 arch;		/* enum heapprofd_arch */
	__u64 timestamp_ns;	/* CLOCK_MONOTONIC_COARSE: a tick's resolution */
	__u64 stack_top;	/* highest address of the thread's stack */
	__u32 nregs;
	__u32 stack_len;
	__u64 regs[HEAPPROFD_MAX_REGS];
	__u32 stack_reused;	/* bytes taken from the previous record */
	__u32 code_gen;		/* HEAPPROFD_ALLOC_STACK_SAME: its code set; else 0 */
};

/*
 * The fewest registers a record of architecture @arch carries (its
 * HEAPPROFD_<ARCH>_NREGS), or 0 for an architecture this header does not
 * know: a reader refuses such a record.
 */
static inline __u32 heapprofd_arch_nregs(__u32 arch)
{
	switch (arch) {
	case HEAPPROFD_ARCH_X86_64:
		return HEAPPROFD_X86_64_NREGS;
	case HEAPPROFD_ARCH_AARCH64:
		return HEAPPROFD_AARCH64_NREGS;
	}
	return 0;
}

/*
 * A record's registers by role, whatever its architecture. Call them on a
 * copy that was checked (arch known, nregs >= heapprofd_arch_nregs()), not
 * on shared memory another party may still be writing.
 */
static inline __u64 heapprofd_rec_pc(const struct heapprofd_rec_alloc *a)
{
	return a->regs[HEAPPROFD_REG_PC];
}

static inline __u64 heapprofd_rec_sp(const struct heapprofd_rec_alloc *a)
{
	return a->regs[HEAPPROFD_REG_SP];
}

static inline __u64 heapprofd_rec_fp(const struct heapprofd_rec_alloc *a)
{
	return a->regs[HEAPPROFD_REG_FP];
}

/* The link register; 0 on an architecture without one (x86-64). */
static inline __u64 heapprofd_rec_lr(const struct heapprofd_rec_alloc *a)
{
	if (a->arch == HEAPPROFD_ARCH_AARCH64)
		return a->regs[HEAPPROFD_AARCH64_LR];
	return 0;
}

/*
 * Stack delta (an addition to ABI 5): most words of a thread's stack below
 * the part stack reuse leaves out are still the same as in its previous
 * sample too, only not all of them (a few locals and spilled registers
 * change in frames that stay). With HEAPPROFD_ALLOC_STACK_DELTA the
 * stack_len bytes [sp, sp + stack_len) are not carried as they are: a
 * struct heapprofd_stack_delta follows the structure, then its nruns runs
 * (sorted by off, not overlapping, off and len multiples of 8, len > 0,
 * within stack_len), then the bytes of each run, in that order, padded to
 * HEAPPROFD_REC_ALIGN. The bytes of [sp, sp + stack_len) outside every run
 * are byte for byte those at the same addresses in the thread's previous
 * ALLOC record (the one stack reuse names, with the same stack_top; its
 * topmost HEAPPROFD_STACK_REUSE_MAX bytes), which must hold them. stack_len
 * is a multiple of 8 and stack_top is not 0. A reader without that record
 * treats the stack as truncated at the first byte it lacks. Combines with
 * HEAPPROFD_ALLOC_STACK_REUSED. Written only to a consumer that set
 * HEAPPROFD_CAP_STACK_DELTA in config.consumer_caps; the kernel never
 * writes it.
 */
struct heapprofd_stack_delta {
	__u32 nruns;
	__u32 resv;		/* zero */
};

struct heapprofd_delta_run {
	__u32 off;		/* bytes from sp */
	__u32 len;
};

/*
 * Same call path (an addition to ABI 5): a thread that allocates in a loop
 * calls malloc with the same stack again and again, but for locals and
 * spilled values the unwinder never reads. A record with
 * HEAPPROFD_ALLOC_STACK_SAME says: unwind the thread's previous ALLOC
 * record again. It is a stack reuse record that carries no stack
 * (HEAPPROFD_ALLOC_STACK_REUSED, stack_len 0, stack_reused reaching from
 * sp to stack_top) and whose registers are the previous record's; the
 * producer wrote it because, in the live stack and registers, every word
 * that can steer an unwind was found equal to the previous record's:
 *
 *   - pc, sp and the frame pointer;
 *   - every other register and every stack word of [sp, stack_top) whose
 *     value in the previous record was "code or stack": an address within
 *     HEAPPROFD_STACK_REUSE_MAX bytes below stack_top, or one whose
 *     granule ((value & HEAPPROFD_CODE_VA_MASK) >> HEAPPROFD_CODE_SHIFT:
 *     without the bits a pointer authentication code may set in a saved
 *     return address) is in the producer's code set number code_gen (a
 *     HEAPPROFD_REC_CODE record written before).
 *
 * An unwinder steps from frame to frame through return addresses (code)
 * and the stack pointers saved in frames (stack); other words it reads
 * only to restore registers, which do not change the path. A consumer
 * checks the claim where it can: if the previous unwind read a register or
 * word whose value was neither, the claim did not cover it (a code address
 * outside the producer's set: code mapped since). Written only to a
 * consumer that set HEAPPROFD_CAP_STACK_SAME; a consumer that finds a
 * claim it cannot check writes its config again (generation + 1), after
 * which the producer builds its code set anew.
 */
#define HEAPPROFD_CODE_SHIFT		21	/* 2 MiB granules */
#define HEAPPROFD_CODE_VA_MASK		(_BITULL(48) - 1)
#define HEAPPROFD_CODE_MAX		2048	/* granules in a set, at most */

/*
 * The producer's code set: the granules of its executable mappings (a
 * superset of its code; every mapping with execute permission when it
 * read them, all below 2^48: a producer with code above writes none; the
 * kernel's half, [vsyscall], left out). A producer with code not from a
 * file (a JIT's) writes none either: the unwinds of its stacks read its
 * memory, which no compare of the stack covers. gen is not 0 and grows
 * with each set the producer writes; the granules follow, n of them (at
 * most HEAPPROFD_CODE_MAX), in any order.
 */
struct heapprofd_rec_code {
	struct heapprofd_rec_hdr hdr;
	__u32 gen;
	__u32 n;
	__u64 granule[];
};

/*
 * Python frames (an addition to ABI 5): with HEAPPROFD_ALLOC_PYFRAMES the
 * record ends with nframes struct heapprofd_pyframe, innermost first, and
 * then a struct heapprofd_pyframes (its last 8 bytes); they come after
 * everything else the record carries (stack or delta, padded to
 * HEAPPROFD_REC_ALIGN). Each is one frame of the CPython interpreter the
 * sampling thread was running: the address of the frame's code object and
 * of the last instruction it started (in the process's memory, where the
 * consumer reads names, files and line tables); bit 0 of instr, never set
 * in an instruction's address, says that the frame was the first of its
 * call of the interpreter's C function (so the consumer knows which Python
 * frames replace which native interpreter frame). nframes is at most
 * HEAPPROFD_PYFRAMES_MAX; the outermost frames of a deeper stack are left
 * out. Written only to a consumer that set HEAPPROFD_CAP_PYFRAMES; the
 * kernel never writes it. The producer writes these only for an
 * interpreter whose layout it knows (client.rst, Python frames).
 */
#define HEAPPROFD_PYFRAMES_MAX		256
#define HEAPPROFD_PYFRAME_ENTRY		1ULL	/* in instr */

struct heapprofd_pyframe {
	__u64 code;
	__u64 instr;
};

struct heapprofd_pyframes {
	__u32 nframes;
	__u32 resv;		/* zero */
};

/* The free of a sampled address, ordered after its allocation by seq. */
struct heapprofd_rec_free {
	struct heapprofd_rec_hdr hdr;
	__u64 seq;
	__u64 addr;
	__u32 heap_id;
	__u32 tid;
};

/* A heap registered by a custom allocator (heap_id >= HEAPPROFD_HEAP_USER). */
struct heapprofd_rec_heap {
	struct heapprofd_rec_hdr hdr;
	__u32 heap_id;
	__u32 resv;
	__u64 interval;
	char name[32];		/* NUL-terminated */
};

/* The producer's mappings changed (dlopen, dlclose): reread the maps. */
struct heapprofd_rec_maps {
	struct heapprofd_rec_hdr hdr;
	__u64 seq;
};

/*
 * Kernel records (ABI 5). read(2) on a consumer fd returns the records the
 * kernel queued for the session, whole records only, as many as fit in the
 * buffer (EINVAL if the first does not fit: 128 KiB always suffices, as
 * the kernel copies at most HEAPPROFD_STACK_CAP_DEFAULT bytes of stack),
 * -EAGAIN when none is queued; it never blocks. poll()
 * on the consumer fd reports EPOLLIN while kernel records are queued too.
 * The framing is the ring's (struct heapprofd_rec_hdr, len a multiple of
 * HEAPPROFD_REC_ALIGN) with stamp 0 and neither BUSY nor DISCARD set.
 *
 * A DMA-BUF the session's process exports (a DMA heap allocation, a
 * udmabuf, a PRIME export) is sampled like an allocation of the "dmabuf"
 * heap (HEAPPROFD_HEAP_DMABUF): with probability min(1, size / interval),
 * est_size = size / that probability (so exact, HEAPPROFD_ALLOC_EXACT, for
 * a buffer at least the interval). A sampled one yields a HEAPPROFD_REC_DMABUF
 * record (what the exporter said) followed by a HEAPPROFD_REC_ALLOC record
 * with addr = the buffer's inode number, the exporting thread's user
 * registers and stack as it returned to user space, seq from the kernel's
 * own per-session counter (ordering kernel records only). When the buffer
 * is released (by whichever process drops the last reference) a
 * HEAPPROFD_REC_FREE with the same addr and heap_id follows. The queue
 * holds at most 1 MiB per session; what does not fit is counted and
 * reported by the next HEAPPROFD_REC_KLOST.
 */
struct heapprofd_rec_klost {
	struct heapprofd_rec_hdr hdr;
	__u64 records;		/* kernel records dropped since the last KLOST */
	__u64 bytes;		/* est_size of the dropped ALLOC records */
};

/*
 * The OOM killer chose the session's process (the kernel's oom:mark_victim
 * event, seen by the module): queued for the session as soon as it is
 * chosen, before the process is gone. Nothing follows from the process.
 */
struct heapprofd_rec_oom {
	struct heapprofd_rec_hdr hdr;
	__u32 pid;		/* the victim, in the module's (initial) pid namespace */
	__u32 uid;		/* its uid, as the event gives it */
};

struct heapprofd_rec_dmabuf {
	struct heapprofd_rec_hdr hdr;
	__u64 seq;		/* that of the ALLOC record that follows */
	__u64 inode;		/* the buffer's inode number */
	__u64 size;		/* bytes */
	__s32 exporter_pid;	/* tgid, in the initial pid namespace */
	__u32 resv;		/* zero */
	char exporter[32];	/* dma_buf exp_name, NUL-terminated */
};

#define HEAPPROFD_HEAP_MALLOC	0	/* "libc.malloc" */
#define HEAPPROFD_HEAP_DMABUF	1	/* "dmabuf", written by the kernel */
#define HEAPPROFD_HEAP_USER	16	/* first id for custom heaps */
#define HEAPPROFD_HEAP_MAX	255

/* ------------------------------------------------------------------------ */
/* ioctls                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * Every argument structure starts with its size as the caller knows it and
 * is copied as copy_struct_from_user() does: a shorter structure is padded
 * with zeroes, a longer one is accepted only if its extra bytes are zero
 * (E2BIG otherwise). Reserved fields and unknown flags must be zero
 * (EINVAL). Output fields are copied back up to the caller's size. The
 * ioctl numbers carry the size of version 1 of each structure.
 */

/* On /dev/heapprofd: register the calling process; returns the session fd. */
struct heapprofd_register {
	__u32 size;
	__u32 flags;		/* HEAPPROFD_REGISTER_* */
	__u64 data_size;	/* in: 0 = HEAPPROFD_DATA_SIZE_DEFAULT */
	__u64 session_id;	/* out */
	__u32 ctl_size;		/* out */
	__u32 version;		/* out: HEAPPROFD_ABI_VERSION */
	__u64 resv[4];
};

#define HEAPPROFD_REGISTER_DORMANT	_BITUL(0) /* wait for `attach` */
#define HEAPPROFD_REGISTER_ALL		(HEAPPROFD_REGISTER_DORMANT)

/*
 * On /dev/heapprofd: attach as the consumer of a session named by pid (the
 * newest live session of that process) or by id; returns the consumer fd.
 * Allowed to CAP_SYS_ADMIN in the initial user namespace, or to the session
 * owner's uid while the owner is dumpable (EPERM otherwise). One consumer at
 * a time (EBUSY). ESRCH: no such live session.
 */
struct heapprofd_attach {
	__u32 size;
	__u32 flags;		/* exactly one of HEAPPROFD_ATTACH_BY_* */
	__u64 session_id;	/* in (BY_ID) / out */
	__s32 pid;		/* in (BY_PID) / out */
	__u32 ctl_size;		/* out */
	__u64 data_size;	/* out */
	__u64 resv[4];
};

#define HEAPPROFD_ATTACH_BY_PID	_BITUL(0)
#define HEAPPROFD_ATTACH_BY_ID	_BITUL(1)

/*
 * File descriptor slots. DEPOSIT (on the session fd) stores a reference to
 * the file behind fd in a slot, replacing what was there. RECEIVE (on the
 * consumer fd) installs that file as a new fd in the caller (O_CLOEXEC,
 * through the kernel's receive path so LSM hooks run) and returns it in fd.
 * ENOENT: slot empty.
 */
enum heapprofd_fd_slot {
	HEAPPROFD_FD_MAPS	= 0,	/* /proc/self/maps */
	HEAPPROFD_FD_MEM	= 1,	/* /proc/self/mem */
	HEAPPROFD_FD_EXE	= 2,	/* /proc/self/exe (optional) */
	HEAPPROFD_FD_SLOTS	= 8,
};

struct heapprofd_fd_arg {
	__u32 size;
	__u32 slot;		/* enum heapprofd_fd_slot */
	__s32 fd;		/* DEPOSIT: in, RECEIVE: out */
	__u32 flags;		/* must be 0 */
	__u64 resv[2];
};

/* On a session or consumer fd: what the kernel knows of the session. */
struct heapprofd_session_info {
	__u32 size;
	__u32 flags;		/* must be 0 */
	__u64 session_id;
	__s32 pid;		/* owner, in the caller's pid namespace; 0 if none */
	__u32 uid;		/* owner, in the caller's user namespace */
	__u32 state;		/* HEAPPROFD_STATE_* */
	__u32 fd_slots;		/* bit n: slot n holds a file */
	__u64 data_size;
	__u32 ctl_size;
	__u32 reg_flags;	/* HEAPPROFD_REGISTER_* given at registration */
	char comm[16];
	__u64 resv[4];
};

#define HEAPPROFD_IOC_MAGIC	0xE7

#define HEAPPROFD_IOC_REGISTER	_IOWR(HEAPPROFD_IOC_MAGIC, 0x01, struct heapprofd_register)
#define HEAPPROFD_IOC_ATTACH	_IOWR(HEAPPROFD_IOC_MAGIC, 0x02, struct heapprofd_attach)
#define HEAPPROFD_IOC_DEPOSIT_FD _IOW(HEAPPROFD_IOC_MAGIC, 0x03, struct heapprofd_fd_arg)
#define HEAPPROFD_IOC_RECEIVE_FD _IOWR(HEAPPROFD_IOC_MAGIC, 0x04, struct heapprofd_fd_arg)
#define HEAPPROFD_IOC_WAKE	_IO(HEAPPROFD_IOC_MAGIC, 0x05)
#define HEAPPROFD_IOC_INFO	_IOWR(HEAPPROFD_IOC_MAGIC, 0x06, struct heapprofd_session_info)

/*
 * poll() on a consumer fd: EPOLLIN while tail != head (as read from the
 * control area: a hint, never trusted), EPOLLHUP once the session is
 * closed. poll() on a session fd: EPOLLHUP once the consumer detaches.
 */

/* ------------------------------------------------------------------------ */
/* Generic netlink family "heapprofd"                                        */
/* ------------------------------------------------------------------------ */

#define HEAPPROFD_GENL_NAME		"heapprofd"
#define HEAPPROFD_GENL_VERSION		1
#define HEAPPROFD_GENL_MCGRP_EVENTS	"events"

enum heapprofd_genl_cmd {
	HEAPPROFD_CMD_UNSPEC,
	HEAPPROFD_CMD_SESSION_NEW,	/* event: a session was registered */
	HEAPPROFD_CMD_SESSION_CLOSED,	/* event: a session closed */
	HEAPPROFD_CMD_SESSION_GET,	/* dump: one SESSION_NEW per session */
	HEAPPROFD_CMD_SESSION_ATTACHED,	/* event: a consumer attached */
	HEAPPROFD_CMD_DMABUF_EXPORT,	/* event: a DMA-BUF was exported */
	HEAPPROFD_CMD_DMABUF_RELEASE,	/* event: a DMA-BUF was released */
	HEAPPROFD_CMD_GPU_TOTAL,	/* event: a gpu_mem_total update */
	__HEAPPROFD_CMD_MAX,
};

#define HEAPPROFD_CMD_MAX (__HEAPPROFD_CMD_MAX - 1)

enum heapprofd_genl_attr {
	HEAPPROFD_A_UNSPEC,
	HEAPPROFD_A_PAD,
	HEAPPROFD_A_SESSION_ID,		/* u64 */
	HEAPPROFD_A_PID,		/* u32, in the initial pid namespace */
	HEAPPROFD_A_UID,		/* u32, in the initial user namespace */
	HEAPPROFD_A_COMM,		/* string */
	HEAPPROFD_A_STATE,		/* u32 HEAPPROFD_STATE_* */
	HEAPPROFD_A_FLAGS,		/* u32 HEAPPROFD_REGISTER_* */
	HEAPPROFD_A_DATA_SIZE,		/* u64 */
	HEAPPROFD_A_PRODUCED_BYTES,	/* u64 */
	HEAPPROFD_A_CONSUMED_BYTES,	/* u64 */
	HEAPPROFD_A_DROPPED_RECORDS,	/* u64 */
	HEAPPROFD_A_DMABUF_INODE,	/* u64 */
	HEAPPROFD_A_DMABUF_SIZE,	/* u64, bytes */
	HEAPPROFD_A_DMABUF_EXPORTER,	/* string, exp_name */
	HEAPPROFD_A_GPU_ID,		/* u32 */
	HEAPPROFD_A_GPU_SIZE,		/* u64, bytes: the new total */
	HEAPPROFD_A_EVENTS_LOST,	/* u64: events not sent before this one */
	__HEAPPROFD_A_MAX,
};

#define HEAPPROFD_A_MAX (__HEAPPROFD_A_MAX - 1)

/*
 * DMA-BUF and GPU events (ABI 5) go to the "events" group from process
 * context (a work item), at most HEAPPROFD_EVENTS_PER_SEC per second
 * (burst as much); the first event sent after a drop carries
 * HEAPPROFD_A_EVENTS_LOST. DMABUF_EXPORT: INODE, SIZE, EXPORTER, PID (the
 * exporter's tgid), COMM. DMABUF_RELEASE: INODE, SIZE, EXPORTER, PID (the
 * exporter). GPU_TOTAL: GPU_ID, PID (0: the GPU's global total), GPU_SIZE.
 */
#define HEAPPROFD_EVENTS_PER_SEC	1000

#endif /* _UAPI_LINUX_HEAPPROFD_H */
