/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal declarations shared by the files of libheapprofd_client. Nothing
 * here is exported: the library is built with -fvisibility=hidden and only
 * the malloc family, the exec family, pthread_getattr_np and the
 * heapprofd_* functions and variables (HP_EXPORT) carry default visibility.
 */
#ifndef HP_INTERNAL_H
#define HP_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../proto/ring.h"
#include "arch.h"
#include "sampler.h"

#define HP_EXPORT __attribute__((visibility("default")))
#define HP_TLS __attribute__((tls_model("initial-exec")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- config.c ---------------------------------------------------------- */

enum hp_transport_kind { HP_TR_AUTO, HP_TR_KERNEL, HP_TR_SOCKET };

struct hp_config {
	uint64_t interval;
	uint32_t stack_cap;
	uint32_t flags;			/* HEAPPROFD_CFG_* */
	uint32_t block_timeout_us;
	int dormant;
	int transport;			/* enum hp_transport_kind */
	uint64_t ring_size;
	int have_seed;
	uint64_t seed;
	int quiet;
	int debug;
	char socket_path[108];
	char name[64];			/* HEAPPROFD_NAME, "" = any process */
	int exit_wait_ms;		/* HEAPPROFD_EXIT_WAIT_MS, -1 = unset */
	uint32_t hello_timeout_ms;	/* HEAPPROFD_HELLO_TIMEOUT_MS */
	int system_preload;		/* loaded without LD_PRELOAD naming us */
	int stack_reuse;		/* HEAPPROFD_STACK_REUSE (default 1) */
	int no_adapt;			/* HEAPPROFD_ADAPTIVE=0: never adapt */
	int stack_delta;		/* the consumer reads stack deltas (caps) */
	int pyframes;			/* the consumer reads Python frames (caps) */
	int stack_same;			/* ... same-path claims (caps), code set up */
};

extern struct hp_config hp_cfg;
/* HEAPPROFD_STACK_SAME (default 1): same-path records when the consumer reads them */
extern int hp_stack_same_wanted;

/*
 * The stall bound (block_timeout_us, uapi HEAPPROFD_CFG_BLOCK): a daemon
 * that reads nothing for this long while a record waits for room is taken
 * for stopped or stuck. Long, because a busy machine may keep a working
 * daemon off the CPU for a good while; 0 means no bound.
 */
#define HP_STALL_US_DEFAULT	10000000U	/* 10 s */
#define HP_STALL_US_MAX		600000000U	/* 10 min */

void hp_config_from_env(void);
int hp_name_matches(void);
void hp_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* What the user must see (unless HEAPPROFD_QUIET): a misconfiguration. */
void hp_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parsers, exposed for the tests. Return 0 on success, -1 on a bad value. */
int hp_parse_u64(const char *s, uint64_t *out, int allow_suffix);

/* ---- producer.c: the process-wide session -------------------------------- */

struct hp_session {
	struct hp_ring ring;
	int live;		/* ring mapped and usable */
	int kernel;		/* transport: 1 kernel, 0 socket */
	int session_fd;		/* kernel: session fd */
	int sock_fd;		/* socket: connection to the daemon, -1 if none */
	int event_fd;		/* socket: wake-up eventfd */
	int memfd;		/* socket: ring memfd */
	uint32_t cfg_gen;	/* last config generation applied */
	int stopped;		/* the daemon went away: profiling over */
	int pid;		/* the process that opened it (exec.c) */
};

extern struct hp_session hp_sess;

/*
 * Is heap id left out by the daemon (config.heaps_off, the user's --heaps)?
 * Read straight from the control page at each sample, so it takes effect
 * at once; any bit pattern there is valid.
 */
static inline int hp_heap_off(uint32_t id)
{
	if (!hp_sess.live || !hp_sess.ring.cfg || id > HEAPPROFD_HEAP_MAX)
		return 0;
	return (int)((__atomic_load_n(&hp_sess.ring.cfg->heaps_off[id / 64],
				      __ATOMIC_RELAXED) >> (id % 64)) & 1);
}
/* The hot-path gate: non-zero while sampling. Points at the control page's
 * config.enabled while a ring is live, else at a static zero. */
extern const volatile uint32_t *hp_gate;
extern pthread_mutex_t hp_lock;

/* The configured interval (the daemon's), for every thread to read. */
extern uint64_t hp_interval_base;

void hp_session_start(void);		/* from the constructor / lazily */
void hp_session_stop(const char *why);	/* the daemon is gone */
void hp_session_forget_child(void);	/* after fork, in the child */
void hp_session_release(bool unmap);	/* fds, ring, the session state */
void hp_config_poll(void);		/* reread the control page config */
void hp_wake(void);
/* The ring is full: is the daemon gone for good? Is one attached? */
int hp_daemon_gone(void);
int hp_consumer_present(void);

/* ---- record.c: the record writer ----------------------------------------- */

uint64_t hp_next_seq(void);
/* A new configured interval: the adaptive level starts again from 0. */
void hp_interval_reset(uint64_t base);
/* After fork, in the child: the writer's own state starts afresh. */
void hp_record_forget(void);
/* Moves whenever the reader of the ring may have changed (session start,
 * a new config generation: an attach): no record reuses across it. */
extern uint32_t hp_reuse_gen;
/* At thread exit: this thread's stack-reuse buffer (record.c). */
void hp_stack_shadow_free(void);

/* regs: taken by hp_regs_capture() in a frame that is still live (the
 * stack is copied from their sp up to the thread's stack top). */
int hp_write_alloc(const void *addr, uint64_t req, uint64_t usable,
		   uint64_t est, uint64_t interval, uint32_t count,
		   uint32_t heap_id, int exact, const uint64_t *regs);
int hp_write_free(const void *addr, uint32_t heap_id, uint64_t seq);
int hp_write_heap(uint32_t heap_id, uint64_t interval, const char *name);
int hp_write_code(uint32_t gen, const uint64_t *granules, uint32_t n);

/* ---- adapt.c: the adaptive interval ------------------------------------- */

#define HP_ADAPT_MAX_SHIFT 8
/* The doublings of the interval the ring's fill asks for (0: none). */
extern uint32_t hp_adapt_level;
/* Read the ring's fill again and set the level from it. */
void hp_adapt_note(void);
void hp_adapt_reset(void);

/* The interval a countdown drawn now uses, for a configured base. Interval
 * 1 (every allocation, exactly) never adapts. */
static inline uint64_t hp_adapt_interval(uint64_t base)
{
	uint32_t l = __atomic_load_n(&hp_adapt_level, __ATOMIC_RELAXED);

	if (!l || base <= 1)
		return base;
	return base < (1ULL << 40) >> l ? base << l : 1ULL << 40;
}

/* transport_kernel.c / transport_socket.c */
int hp_kernel_open(struct hp_session *s, int dormant, uint64_t data_size);
void hp_kernel_wake(struct hp_session *s);
int hp_socket_open(struct hp_session *s, int dormant, uint64_t data_size);
void hp_socket_wake(struct hp_session *s);
int hp_socket_peer_gone(struct hp_session *s);

/* ---- per-thread state (hooks.c owns the TLS) --------------------------- */

/* The exact counters as they were before the hooks' own work (slow paths). */
struct hp_count_snap {
	uint64_t ac, ab, fc, fb;
};

/*
 * The hot fields come first and share one cache line: the exact counters,
 * the registry flag free tests and the sampler's countdown (hp_sampler
 * starts with it). The byte counters hold usable size + 8 per block (the
 * chunk size as glibc's header gives it, so the hot path needs no per-call
 * constant); hp_counters_publish subtracts 8 per call.
 */
struct hp_thread {
	uint64_t alloc_calls, alloc_bytes8, free_calls, free_bytes8;
	int registered;			/* in the registry: published at exit */
	struct hp_sampler smp;		/* countdown first: the hot field */
	/* Bytes of the countdown held back so that the slow path runs at
	 * least every HP_SLOW_EVERY bytes (publication, config, gate). */
	uint64_t deferred;
	uint64_t pub_alloc_calls, pub_alloc_bytes, pub_free_calls, pub_free_bytes;
	/* Ring records this thread wrote (records_written, bytes_written of
	 * the control page), published with the exact counters so that a
	 * sample does not add to two shared counters. */
	uint64_t rec_written, rec_bytes, pub_rec_written, pub_rec_bytes;
	uint64_t stack_lo, stack_top;
	/* Inside pthread_getattr_np, which allocates with the thread's lock
	 * held: a sample there must not ask for the stack bounds (stack.c). */
	int in_bounds;
	int inited;
	int exited;			/* its exit handler ran: stays out */
	int in_hook;			/* reentrancy guard */
	int resolving;			/* inside dlsym bootstrap */
	uint32_t tid;
	struct hp_thread *next, *prev;	/* registry for process exit */
	/*
	 * The topmost bytes of the stack in this thread's last ALLOC record
	 * (stack reuse, uapi HEAPPROFD_ALLOC_STACK_REUSED): len bytes below
	 * top, at the end of a HEAPPROFD_STACK_REUSE_MAX buffer (mmap, at the
	 * first sample), valid while gen == hp_reuse_gen. Last, in what was
	 * padding: the fields the common paths use keep their offsets and
	 * the structure its size.
	 */
	struct hp_shadow {
		uint8_t *buf;	/* the bytes, then the marks (record.c) */
		uint64_t top;
		uint32_t len, gen;
		uint32_t same;	/* how much of the top was the same last time */
		uint32_t mark_gen;	/* the code set the marks were made with */
		/* marks kept (and claims tried) at all; the samples of the
		 * current window, and of them those that were the same path (or,
		 * while not marking, had the previous record's pc, sp and fp) */
		uint8_t marking;
		uint8_t win_n, win_hits;
		/* the registers of the record whose stack buf holds */
		uint64_t regs[HEAPPROFD_NREGS_NATIVE];
	} shadow;
	/*
	 * The sampled malloc path's scratch (slow_alloc, which in_hook keeps
	 * from nesting), here rather than in its frame: a sample's stack copy
	 * starts in that frame, so each byte of it would go into the ring,
	 * through the daemon's copies and into the reuse buffers with every
	 * sample.
	 */
	uint64_t regs[HEAPPROFD_NREGS_NATIVE];
	struct hp_count_snap snap;
} __attribute__((aligned(HP_THREAD_ALIGN)));

/* The countdown never exceeds this; the rest waits in deferred. */
#define HP_SLOW_EVERY (64U << 10)
/* Slow paths publish the counters at most once per this many allocations
 * (and at the end of every HP_SLOW_EVERY stretch). */
#define HP_PUBLISH_CALLS 1024

extern __thread struct hp_thread hp_self HP_TLS;

/*
 * The exact counters count the program's calls, not those that the
 * library's own slow paths cause (pthread_getattr_np, for instance, opens
 * /proc/self/maps with malloc'ed buffers the first time a thread records a
 * sample). The common paths count before they know whether the slow path
 * follows, so the slow paths take a snapshot when they start and put it
 * back when they end.
 */
static inline void hp_count_save(const struct hp_thread *t, struct hp_count_snap *s)
{
	s->ac = t->alloc_calls;
	s->ab = t->alloc_bytes8;
	s->fc = t->free_calls;
	s->fb = t->free_bytes8;
}

static inline void hp_count_restore(struct hp_thread *t, const struct hp_count_snap *s)
{
	/* Atomic: the exit-time flush may read another thread's counters. */
	__atomic_store_n(&t->alloc_calls, s->ac, __ATOMIC_RELAXED);
	__atomic_store_n(&t->alloc_bytes8, s->ab, __ATOMIC_RELAXED);
	__atomic_store_n(&t->free_calls, s->fc, __ATOMIC_RELAXED);
	__atomic_store_n(&t->free_bytes8, s->fb, __ATOMIC_RELAXED);
}

void hp_thread_init(struct hp_thread *t);

/* ---- counters.c --------------------------------------------------------- */
void hp_counters_publish(struct hp_thread *t);
void hp_counters_register(struct hp_thread *t);
void hp_counters_flush_all(void);
void hp_counters_reset_child(struct hp_thread *t);
int hp_threads_busy(void);

/* ---- stack.c ------------------------------------------------------------ */
void hp_stack_bounds(struct hp_thread *t);

/* ---- attach_wait.c ------------------------------------------------------------- */
void hp_start_wait(void);	/* kernel session: wait for the consumer */
void hp_exit_wait(void);

/* ---- exec.c ------------------------------------------------------------- */
void hp_exec_init(void);

/* ---- injected.c, got.c: loaded by heapprofctl attach (not preloaded) ---- */
extern int hp_injected;
int hp_detect_injected(void);
int hp_got_patch(void);		/* slots written, or -errno */
/* The function the program's calls of name reach (its definition, not a
 * non-PIE program's PLT entry for it), for a client loaded by attach. */
void *hp_got_real(const char *name);
void hp_got_unpatch(void);
int hp_got_unpatch_try(void);		/* 0, or -EBUSY: a thread holds the lock */
void hp_got_patch_loaded(void);		/* after the program's dlopen */
int hp_got_slots(void);

/* ---- fork.c ------------------------------------------------------------- */
void hp_fork_install(void);
extern int hp_child_pending;	/* follow-forks: register lazily */

/* ---- heaps.c ------------------------------------------------------------ */
void hp_heaps_announce(void);

/* ---- the real allocator (hooks.c) -------------------------------------- */
extern size_t (*hp_real_usable)(void *);
void *hp_internal_alloc(size_t n);	/* for our own needs, not sampled */
void hp_resolve(void);
void hp_hooks_init(void);
/* Set the mode of malloc and free (hooks.c) from the current state (the
 * gate, the allocator, bootstrap blocks); after every change of hp_gate. */
void hp_dispatch_update(void);
void hp_dispatch_fork(int phase);	/* 0 prepare, 1 parent, 2 child */

#endif /* HP_INTERNAL_H */
