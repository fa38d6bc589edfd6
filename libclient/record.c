// SPDX-License-Identifier: GPL-2.0
/*
 * The record writer: reserving room in the ring under the ring-full policy
 * (wait while the daemon reads, or drop and count), the allocation record
 * with its stack (and the part reused from the thread's previous one), the
 * free and heap records, and the sequence numbers that order them.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "codeset.h"
#include "pyframes.h"
#include "stack.h"

uint64_t hp_interval_base = HEAPPROFD_INTERVAL_DEFAULT;
static uint64_t hp_seq;
/*
 * Without HEAPPROFD_CFG_BLOCK (--no-block): set after a free waited in vain
 * for room, so that no free waits again until the consumer moves. A daemon
 * that is alive but stuck then costs the program one bounded wait, not one
 * per free.
 */
static uint64_t hp_wait_failed_head = ~0ULL;

/* A free (or heap) record waits this long for room even without
 * HEAPPROFD_CFG_BLOCK. */
#define HP_FREE_WAIT_US 2000

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

/*
 * A sample's timestamp: the coarse clock, which the vDSO answers from its
 * data page without reading the TSC. CLOCK_MONOTONIC cost ~60 ns per
 * sample here (a tenth of the sampled path); a tick's resolution (1-4 ms)
 * is enough to place samples in time, and order comes from seq.
 */
static uint64_t coarse_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC_COARSE);
}

uint64_t hp_next_seq(void)
{
	return __atomic_add_fetch(&hp_seq, 1, __ATOMIC_SEQ_CST);
}

void hp_interval_reset(uint64_t base)
{
	hp_adapt_reset();
	__atomic_store_n(&hp_interval_base, base, __ATOMIC_RELAXED);
}

void hp_record_forget(void)
{
	hp_adapt_reset();
	hp_wait_failed_head = ~0ULL;
}

/*
 * Allocation records leave this share of the ring to the small records:
 * when the ring is nearly full the frees of sampled blocks still find room
 * at once while allocations wait (a free that waits holds up the program's
 * free, which is often on a lock's critical path).
 */
#define HP_FREE_HEADROOM_SHIFT 4	/* 1/16 */

/*
 * The consumer read nothing for the stall bound while a record waited for
 * room: it is stopped or stuck. Profiling ends here, said in the counters
 * for the profile; the program runs on unhooked. Nothing is dropped: the
 * records end at this point, and the daemon, should it come back, reads
 * them all.
 */
static void stall_stop(uint32_t bound_us)
{
	struct hp_ring *r = &hp_sess.ring;

	__atomic_store_n(&r->cnt->stall_stop_ns, clock_ns(CLOCK_REALTIME) | 1,
			 __ATOMIC_RELAXED);
	/* With the monotonic time, which the daemon's -v log also shows. */
	hp_debug("the daemon read nothing for %u ms while the ring was full (at %.3f s)",
		 bound_us / 1000, (double)now_ns() / 1e9);
	hp_session_stop("the daemon stalled");
}

/*
 * How much of one look's interval counts towards the stall bound: a wait
 * is counted by the time this thread watched the ring not move, not by the
 * clock alone. A machine that stood still (a virtual machine whose host did
 * not run it, a stopped process group) advances the clock for every process
 * at once; the first to run again must not find the daemon, which had no
 * chance to read either, stalled.
 */
#define HP_WAIT_STEP_MAX_NS	(200ULL * 1000000)

/*
 * Reserve a record. A full ring, with HEAPPROFD_CFG_BLOCK (the default):
 * wait for room for as long as the consumer keeps reading, however slowly
 * (the adaptive interval makes that rare: the ring fills only once the
 * interval is at its top); only a consumer that read nothing and did not
 * say it is behind (uapi: consumer.behind) for block_timeout_us ends the
 * wait, and profiling with it (stall_stop).
 * Without the flag a record that does not fit is dropped and counted (a
 * free after a short wait). Returns NULL when nothing is to be written.
 */
static struct heapprofd_rec_hdr *reserve(uint32_t len, uint16_t type)
{
	struct hp_ring *r = &hp_sess.ring;
	int block = (hp_cfg.flags & HEAPPROFD_CFG_BLOCK) != 0;
	int is_free = type == HEAPPROFD_REC_FREE;
	uint32_t bound_us = block ? hp_cfg.block_timeout_us :
			    type != HEAPPROFD_REC_ALLOC ? HP_FREE_WAIT_US : 0;
	struct heapprofd_rec_hdr *h;
	uint64_t looked_ns = 0, watched_ns = 0, head, last_head = 0, behind, last_behind = 0, t;
	unsigned spins = 0;

	for (;;) {
		h = hp_ring_reserve_keep(r, len, type, type == HEAPPROFD_REC_ALLOC ?
					 r->size >> HP_FREE_HEADROOM_SHIFT : 0);
		if (h)
			return h;
		if (hp_daemon_gone()) {
			hp_session_stop("the daemon went away");
			return NULL;
		}
		if (__atomic_load_n(&hp_sess.stopped, __ATOMIC_RELAXED))
			return NULL;	/* another thread ended it (a stall) */
		if ((!block && !bound_us) || !hp_consumer_present())
			break;
		head = __atomic_load_n(&r->cons->head, __ATOMIC_RELAXED);
		if (!block && head == __atomic_load_n(&hp_wait_failed_head, __ATOMIC_RELAXED))
			break;
		/* A consumer that says it is behind (it holds all it may of
		 * ours and works through them) is not stalled either; a wait
		 * that must stay short (without the flag) heeds only head. */
		behind = block ? __atomic_load_n(&r->cons->behind, __ATOMIC_RELAXED) : 0;
		t = now_ns();
		if (!looked_ns || head != last_head || behind != last_behind) {
			last_head = head;
			last_behind = behind;
			watched_ns = 0;
		} else {
			watched_ns += t - looked_ns < HP_WAIT_STEP_MAX_NS ? t - looked_ns :
									 HP_WAIT_STEP_MAX_NS;
		}
		looked_ns = t;
		if (bound_us && watched_ns > (uint64_t)bound_us * 1000) {
			if (block) {
				stall_stop(bound_us);
				return NULL;
			}
			__atomic_store_n(&hp_wait_failed_head, head, __ATOMIC_RELAXED);
			break;
		}
		/* The consumer may be asleep with a full ring only if it
		 * missed nothing; wake it to be safe, then back off. */
		if (__atomic_load_n(&r->cons->sleeping, __ATOMIC_RELAXED))
			hp_wake();
		if (++spins < 16) {
			sched_yield();
		} else {
			struct timespec ts = { 0, 50000 };

			nanosleep(&ts, NULL);
		}
	}
	hp_ring_count_drop(r, len, is_free);
	return NULL;
}

/*
 * A registered thread counts its records in its own counters, published
 * with the exact counters (counters.c); a thread that is not registered (it
 * never allocated through the hooks, or its exit handler already ran) adds
 * to the shared counters at once, so the totals are exact either way once
 * published.
 */
static void commit(struct heapprofd_rec_hdr *h, uint32_t len)
{
	struct hp_thread *t = &hp_self;

	if (likely(t->registered)) {
		__atomic_store_n(&t->rec_written, t->rec_written + 1, __ATOMIC_RELAXED);
		__atomic_store_n(&t->rec_bytes, t->rec_bytes + hp_ring_align(len),
				 __ATOMIC_RELAXED);
	} else {
		hp_ring_count_write(&hp_sess.ring, len);
	}
	if (hp_ring_commit(&hp_sess.ring, h))
		hp_wake();
}

static uint32_t gettid_cached(void)
{
	if (!hp_self.tid)
		hp_self.tid = (uint32_t)syscall(SYS_gettid);
	return hp_self.tid;
}

/*
 * The ring's lines were zeroed by the consumer and sit in its cache. Asking
 * for them (for writing) right after the reservation lets the transfers
 * overlap the work that fills the record, instead of stalling its stores
 * and then the commit's fence. The header and a small stack copy only:
 * copies of 2 KiB and more use streaming stores (stack.c), which fetch
 * nothing. prefetchw is a no-op on processors without it.
 */
static inline void prefetch_for_write(const void *p, uint32_t n)
{
	const char *c = p, *e = c + n;

	for (; c < e; c += 64)
		hp_prefetch_write(c);
}

uint32_t hp_reuse_gen;

/*
 * The topmost bytes of the stack in this thread's last ALLOC record (stack
 * reuse, uapi HEAPPROFD_ALLOC_STACK_REUSED) are hp_self.shadow (client.h).
 * Its mapping: the stack bytes (HEAPPROFD_STACK_REUSE_MAX, the topmost at
 * its end), then one bit per word of them, the marks: bit j says whether
 * the word j + 1 words below the top can steer an unwind (steers(), below).
 */
#define HP_MARK_BYTES	(HEAPPROFD_STACK_REUSE_MAX / 64)
#define HP_SHADOW_MAP	(HEAPPROFD_STACK_REUSE_MAX + HP_MARK_BYTES)

void hp_stack_shadow_free(void)
{
	struct hp_shadow *sh = &hp_self.shadow;

	if (sh->buf)
		munmap(sh->buf, HP_SHADOW_MAP);
	sh->buf = NULL;
	sh->len = 0;
}

/*
 * How many of the topmost bytes of [sp, top) are the same as in the last
 * record this thread wrote (its shadow)? Compared from the top down, in
 * blocks that memcmp does fast, then word by word in the block that
 * differs; a multiple of 8.
 *
 * Most of the time the part that was the same last time still is (the
 * outer frames of a program stay where they are while its inner ones come
 * and go), and it can be large: sqlite3's is 15 KiB. So that part is
 * compared first, with one memcmp of all of it (one call where the blocks
 * took sixty), and only the bytes below it block by block. If it differs,
 * the blocks start from the top again.
 */
static uint32_t same_top(const struct hp_shadow *sh, uint64_t sp, uint64_t top,
			 uint32_t gen)
{
	const uint8_t *live, *old;
	uint32_t n, k = 0;

	if (!sh->buf || !sh->len || sh->gen != gen || sh->top != top)
		return 0;
	n = sh->len;
	if (n > top - sp)
		n = (uint32_t)(top - sp) & ~7U;
	live = (const uint8_t *)(uintptr_t)top;
	old = sh->buf + HEAPPROFD_STACK_REUSE_MAX;
	if (sh->same >= 256 && sh->same <= n &&
	    !memcmp(live - sh->same, old - sh->same, sh->same))
		k = sh->same;
	while (k + 256 <= n && !memcmp(live - k - 256, old - k - 256, 256))
		k += 256;
	while (k + 8 <= n && !memcmp(live - k - 8, old - k - 8, 8))
		k += 8;
	return k;
}

/*
 * Stack delta (uapi HEAPPROFD_ALLOC_STACK_DELTA): below the part that is
 * the same as last time from the top down, most words of a thread's stack
 * still are (Python's interpreter: 3,850 bytes beyond that part per sample,
 * of which 230 differed); only the words that changed go into the record.
 * A run of changed words goes on through one unchanged word (a new run's
 * header costs as much). Words below what the shadow holds are new.
 * Returns the runs, or -1 when more than max would be needed (the stack
 * then goes as it is).
 */
#define HP_DELTA_MAX_RUNS	64

static int delta_scan(const struct hp_shadow *sh, uint64_t sp, uint32_t own,
		      struct heapprofd_delta_run *runs, uint32_t *lit)
{
	const uint64_t *live = (const uint64_t *)(uintptr_t)sp, *old;
	uint64_t held_lo = sh->top - sh->len;
	uint32_t nw = own / 8, i = 0, start, n = 0, total = 0;

	if (sp < held_lo) {
		i = (uint32_t)((held_lo - sp + 7) / 8);
		if (i > nw)
			i = nw;
		runs[n++] = (struct heapprofd_delta_run){ 0, i * 8 };
		total = i * 8;
	}
	/* old[i] is the shadow's word at the address of live[i] (i past the
	 * words below the shadow). */
	old = (const uint64_t *)(sh->buf + HEAPPROFD_STACK_REUSE_MAX - (sh->top - sp));
	while (i < nw) {
		while (i + 8 <= nw && hp_same64(live + i, old + i))
			i += 8;
		while (i < nw && live[i] == old[i])
			i++;
		if (i == nw)
			break;
		start = i;
		while (i < nw && (live[i] != old[i] || (i + 1 < nw && live[i + 1] != old[i + 1])))
			i++;
		total += (i - start) * 8;
		if (n && runs[n - 1].off + runs[n - 1].len == start * 8) {
			runs[n - 1].len += (i - start) * 8;
			continue;
		}
		if (n == HP_DELTA_MAX_RUNS)
			return -1;
		runs[n++] = (struct heapprofd_delta_run){ start * 8, (i - start) * 8 };
	}
	*lit = total;
	return (int)n;
}

/* ---- Same call path (uapi HEAPPROFD_ALLOC_STACK_SAME) ----------------- */

static inline uint64_t *marks_of(const struct hp_shadow *sh)
{
	return (uint64_t *)(void *)(sh->buf + HEAPPROFD_STACK_REUSE_MAX);
}

/*
 * Can a word with this value steer an unwind? A return address (code) or
 * a saved stack pointer (within the topmost HEAPPROFD_STACK_REUSE_MAX bytes
 * of this stack); the uapi's rule, which the daemon checks.
 */
static inline uint64_t steers(uint64_t v, uint64_t top, const struct hp_codeset *c)
{
	return (uint64_t)(top - v - 1 < HEAPPROFD_STACK_REUSE_MAX) | hp_code_may(c, v);
}

/*
 * Mark the shadow's words in [lo, hi) (within what it holds), without a
 * branch on each word's answer, which no predictor could guess (a stack
 * mixes return addresses and data word by word).
 */
static void mark_range(struct hp_shadow *sh, uint64_t lo, uint64_t hi,
		       const struct hp_codeset *c)
{
	const uint64_t *w = (const uint64_t *)(const void *)(sh->buf + HEAPPROFD_STACK_REUSE_MAX -
							     (sh->top - lo));
	uint64_t *m = marks_of(sh), top = sh->top, set, keep;
	uint32_t j = (uint32_t)((top - lo) / 8), end = (uint32_t)((top - hi) / 8), k, stop;

	/* Word a is bit j - 1 (from lo upwards j falls): the bits of one
	 * marks word gathered in a register, written once. */
	for (; j > end; j = stop) {
		stop = (j - 1) & ~63U;		/* this marks word's lowest bit */
		if (stop < end)
			stop = end;
		set = 0;
		keep = ~0ULL;
		for (k = j; k > stop; k--, w++) {
			set |= steers(*w, top, c) << ((k - 1) & 63);
			keep &= ~(1ULL << ((k - 1) & 63));
		}
		m[(j - 1) / 64] = (m[(j - 1) / 64] & keep) | set;
	}
}

/*
 * After the shadow changed in [lo, hi) (whole: everything it holds may
 * have), bring its marks up to date with the code set: those words only if
 * the rest are up to date, all of them if not.
 */
static void shadow_marks(struct hp_shadow *sh, uint64_t lo, uint64_t hi, int whole)
{
	const struct hp_codeset *c;
	uint32_t cg;

	if (!hp_cfg.stack_same || !sh->marking || !sh->len || !(c = hp_code_begin(&cg))) {
		sh->mark_gen = 0;
		return;
	}
	if (whole || sh->mark_gen != cg)
		mark_range(sh, sh->top - sh->len, sh->top, c);
	else if (hi > lo)
		mark_range(sh, lo, hi, c);
	sh->mark_gen = hp_code_end(c, cg) ? cg : 0;
}

/*
 * Marks cost a little on every sample that changes the shadow, and pay
 * only where samples repeat their thread's path (Python's interpreter: 60%
 * of them; clang compiling templates: 4%). So a thread keeps them while at
 * least a quarter of a window of samples were the same path, and takes
 * them up again once a third of a window had the previous record's pc, sp
 * and frame pointer (the first condition of a same path; three compares).
 */
#define HP_SAME_WINDOW	64

static void same_window(struct hp_shadow *sh, int hit)
{
	sh->win_hits += !!hit;
	if (++sh->win_n < HP_SAME_WINDOW)
		return;
	sh->marking = sh->marking ? sh->win_hits >= HP_SAME_WINDOW / 4 :
				    sh->win_hits >= HP_SAME_WINDOW / 3;
	if (!sh->marking)
		sh->mark_gen = 0;	/* the marks go stale from here */
	sh->win_n = 0;
	sh->win_hits = 0;
}

static inline int same_frame_regs(const struct hp_shadow *sh, const uint64_t *regs)
{
	return sh->len && regs[HEAPPROFD_REG_PC] == sh->regs[HEAPPROFD_REG_PC] &&
	       regs[HEAPPROFD_REG_SP] == sh->regs[HEAPPROFD_REG_SP] &&
	       regs[HEAPPROFD_REG_FP] == sh->regs[HEAPPROFD_REG_FP];
}

/*
 * Is this sample's call path the one of the record the shadow stands
 * for? pc, sp and the frame pointer the same, and every other register and
 * stack word that could steer the unwind (marked) the same too. Most
 * samples of a loop that allocates are (Python's interpreter: 60-64%), and
 * their few dozen marked words are compared instead of the whole stack
 * (Python's: 4 KB). Returns the code set's generation the claim rests on,
 * or 0.
 */
static uint32_t same_path(struct hp_shadow *sh, const uint64_t *regs, uint64_t top,
			  uint32_t gen)
{
	const struct hp_codeset *c;
	const uint64_t *live = (const uint64_t *)(uintptr_t)top;
	const uint64_t *old, *m;
	uint64_t sp = regs[HEAPPROFD_REG_SP];
	uint32_t cg, nw;

	if (!sh->buf || !sh->len || !sh->mark_gen || sh->gen != gen || sh->top != top ||
	    top - sp > sh->len || (top & 7) ||
	    regs[HEAPPROFD_REG_PC] != sh->regs[HEAPPROFD_REG_PC] ||
	    regs[HEAPPROFD_REG_SP] != sh->regs[HEAPPROFD_REG_SP] ||
	    regs[HEAPPROFD_REG_FP] != sh->regs[HEAPPROFD_REG_FP] ||
	    !(c = hp_code_begin(&cg)) || cg != sh->mark_gen)
		return 0;
	for (int i = HEAPPROFD_REG_FP + 1; i < HEAPPROFD_NREGS_NATIVE; i++)
		if (regs[i] != sh->regs[i] && steers(sh->regs[i], top, c))
			return 0;
	old = (const uint64_t *)(const void *)(sh->buf + HEAPPROFD_STACK_REUSE_MAX);
	m = marks_of(sh);
	nw = (uint32_t)((top - sp) / 8);
	for (uint32_t b = 0; b < nw; b += 64) {
		uint64_t bits = m[b / 64];

		if (nw - b < 64)
			bits &= (1ULL << (nw - b)) - 1;
		while (bits) {
			uint32_t j = b + (uint32_t)__builtin_ctzll(bits);

			if (live[-1 - (int64_t)j] != old[-1 - (int64_t)j])
				return 0;
			bits &= bits - 1;
		}
	}
	return hp_code_end(c, cg) ? cg : 0;
}

/* After a record is written: its topmost bytes become the shadow. */
static void shadow_update(struct hp_shadow *sh, uint64_t sp, uint64_t top,
			  uint32_t same, uint32_t gen, int whole, const uint64_t *regs)
{
	uint32_t n;

	if (!whole || !hp_cfg.stack_reuse || hp_self.exited) {
		sh->len = 0;	/* (an exited thread would leak a new buffer) */
		return;
	}
	if (!sh->buf) {
		void *m = mmap(NULL, HP_SHADOW_MAP, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

		if (m == MAP_FAILED)
			return;
		sh->buf = m;
	}
	n = top - sp < HEAPPROFD_STACK_REUSE_MAX ? (uint32_t)(top - sp) & ~7U :
						    HEAPPROFD_STACK_REUSE_MAX;
	if (sh->gen != gen || sh->top != top || same > n)
		same = 0;
	sh->same = same;
	/* [top - same, top) is in the shadow already. */
	memcpy(sh->buf + HEAPPROFD_STACK_REUSE_MAX - n,
	       (const uint8_t *)(uintptr_t)(top - n), n - same);
	sh->len = n;
	sh->top = top;
	sh->gen = gen;
	memcpy(sh->regs, regs, sizeof(sh->regs));
	shadow_marks(sh, top - n, top - same, !same);
}

/*
 * After a delta record: the shadow was the same as the stack but for the
 * runs, so only they are copied in, not the whole stack again (Python's
 * interpreter: ~4 KB a sample, of which ~230 bytes changed). The same
 * bounds as shadow_update: the topmost HEAPPROFD_STACK_REUSE_MAX bytes.
 */
static void shadow_apply(struct hp_shadow *sh, uint64_t sp, uint64_t top, uint32_t same,
			 const struct heapprofd_delta_run *runs, int nruns, const uint64_t *regs)
{
	uint64_t lo = top - sp > HEAPPROFD_STACK_REUSE_MAX ? top - HEAPPROFD_STACK_REUSE_MAX : sp;
	uint8_t *at_top = sh->buf + HEAPPROFD_STACK_REUSE_MAX;

	for (int i = 0; i < nruns; i++) {
		uint64_t a = sp + runs[i].off, e = a + runs[i].len;

		if (e <= lo)
			continue;
		if (a < lo)
			a = lo;
		memcpy(at_top - (top - a), (const uint8_t *)(uintptr_t)a, e - a);
	}
	sh->len = (uint32_t)(top - lo) & ~7U;
	sh->same = same <= sh->len ? same : 0;
	memcpy(sh->regs, regs, sizeof(sh->regs));
	/* The runs' words: their marks anew (all of them if they were stale). */
	if (hp_cfg.stack_same && sh->marking && sh->mark_gen) {
		const struct hp_codeset *c;
		uint32_t cg;

		if (!(c = hp_code_begin(&cg)) || cg != sh->mark_gen) {
			shadow_marks(sh, lo, top, 1);
			return;
		}
		for (int i = 0; i < nruns; i++) {
			uint64_t a = sp + runs[i].off, e = a + runs[i].len;

			if (e > lo)
				mark_range(sh, a < lo ? lo : a, e, c);
		}
		if (!hp_code_end(c, cg))
			sh->mark_gen = 0;
	} else {
		shadow_marks(sh, lo, top, 1);
	}
}

int hp_write_alloc(const void *addr, uint64_t req, uint64_t usable,
		   uint64_t est, uint64_t interval, uint32_t count,
		   uint32_t heap_id, int exact, const uint64_t *regs)
{
	struct hp_thread *t = &hp_self;
	struct heapprofd_delta_run runs[HP_DELTA_MAX_RUNS];
	struct heapprofd_rec_alloc *rec;
	struct heapprofd_rec_hdr *h;
	uint64_t sp = regs[HEAPPROFD_REG_SP], want;
	uint32_t cap, len, stack_len, same = 0, gen, lit = 0, npy, py_len, code_gen = 0;
	uintptr_t py_top;
	int truncated = 0, nruns = -1;

	if (!hp_sess.live)
		return -1;
	hp_stack_bounds(t);
	cap = hp_cfg.stack_cap;
	/* The exact size: the registers, so sp, were taken by the caller. */
	want = t->stack_top > sp ? t->stack_top - sp : 0;
	if (want > cap) {
		want = cap;
		truncated = 1;
	}
	gen = __atomic_load_n(&hp_reuse_gen, __ATOMIC_ACQUIRE);
	/* The call path of our last record again: no stack at all. */
	if (!truncated && hp_cfg.stack_reuse && hp_cfg.stack_same && want && !(sp & 7)) {
		struct hp_shadow *sh = &hp_self.shadow;

		if (sh->marking)
			code_gen = same_path(sh, regs, t->stack_top, gen);
		same_window(sh, sh->marking ? code_gen != 0 : same_frame_regs(sh, regs));
	}
	/* The top of the stack the daemon has from our last record. */
	if (code_gen)
		same = (uint32_t)want;
	else if (!truncated && hp_cfg.stack_reuse)
		same = same_top(&hp_self.shadow, sp, t->stack_top, gen);
	/* The rest as changes to the shadow, when that is much smaller. (The
	 * runs lie in this frame, below the sp the copy starts at.) */
	if (!code_gen && !truncated && hp_cfg.stack_reuse && hp_cfg.stack_delta && want - same >= 512 &&
	    !(sp & 7) &&
	    hp_self.shadow.buf && hp_self.shadow.len && hp_self.shadow.gen == gen &&
	    hp_self.shadow.top == t->stack_top) {
		nruns = delta_scan(&hp_self.shadow, sp, (uint32_t)(want - same) & ~7U, runs, &lit);
		if (nruns >= 0 && 8 + 8 * (uint32_t)nruns + lit >= (want - same) / 2)
			nruns = -1;	/* not worth it */
	}
	len = (uint32_t)sizeof(*rec) + (nruns >= 0 ?
		8 + 8 * (uint32_t)nruns + lit : (uint32_t)(want - same));
	/* The thread's Python frames go last (uapi HEAPPROFD_ALLOC_PYFRAMES). */
	py_top = hp_py_top();
	npy = py_top ? hp_py_count(py_top) : 0;
	py_len = npy ? npy * (uint32_t)sizeof(struct heapprofd_pyframe) +
		       (uint32_t)sizeof(struct heapprofd_pyframes) : 0;
	len = hp_ring_align(len) + py_len;
	h = reserve(len, HEAPPROFD_REC_ALLOC);
	if (!h) {
		hp_self.shadow.len = 0;	/* the daemon will not see this one */
		/* Counted as dropped (not a stop): what it stood for is lost. */
		if (!__atomic_load_n(&hp_sess.stopped, __ATOMIC_RELAXED))
			__atomic_fetch_add(&hp_sess.ring.cnt->est_bytes_dropped, est,
					   __ATOMIC_RELAXED);
		hp_adapt_note();
		return -1;
	}
	hp_adapt_note();
	prefetch_for_write(h, len - (uint32_t)sizeof(*rec) < 2048 ? len : (uint32_t)sizeof(*rec));
	rec = (struct heapprofd_rec_alloc *)h;
	rec->seq = hp_next_seq();
	rec->addr = (uint64_t)(uintptr_t)addr;
	rec->req_size = req;
	rec->usable_size = usable;
	rec->est_size = est;
	rec->interval = interval;
	rec->count = count;
	rec->heap_id = heap_id;
	rec->tid = gettid_cached();
	rec->arch = HEAPPROFD_ARCH_NATIVE;
	rec->timestamp_ns = coarse_ns();
	rec->stack_top = t->stack_top;
	rec->nregs = HEAPPROFD_NREGS_NATIVE;
	/* A same-path record stands for its predecessor's unwind: its registers. */
	memcpy(rec->regs, code_gen ? hp_self.shadow.regs : regs,
	       HEAPPROFD_NREGS_NATIVE * sizeof(rec->regs[0]));
	memset(rec->regs + HEAPPROFD_NREGS_NATIVE, 0,
	       (HEAPPROFD_MAX_REGS - HEAPPROFD_NREGS_NATIVE) * sizeof(rec->regs[0]));
	if (nruns >= 0) {
		struct heapprofd_stack_delta *d = (struct heapprofd_stack_delta *)(rec + 1);
		uint8_t *out = (uint8_t *)((struct heapprofd_delta_run *)(d + 1) + nruns);

		d->nruns = (uint32_t)nruns;
		d->resv = 0;
		memcpy(d + 1, runs, (size_t)nruns * sizeof(runs[0]));
		for (int i = 0; i < nruns; i++) {
			memcpy(out, (const uint8_t *)(uintptr_t)(sp + runs[i].off), runs[i].len);
			out += runs[i].len;
		}
		stack_len = (uint32_t)(want - same) & ~7U;
	} else if (code_gen) {
		stack_len = 0;
	} else {
		stack_len = hp_stack_copy(regs, (uint8_t *)(rec + 1), t->stack_top,
					  (uint32_t)(want - same));
	}
	rec->stack_len = stack_len;
	rec->stack_reused = same;
	rec->code_gen = code_gen;
	if (npy) {
		struct heapprofd_pyframes *pt = (struct heapprofd_pyframes *)((uint8_t *)h + len) - 1;
		struct heapprofd_pyframe *pf = (struct heapprofd_pyframe *)pt - npy;

		pt->nframes = hp_py_write(py_top, pf, npy);
		pt->resv = 0;
		/* (the same walk as the count: this thread's frames stood still) */
		for (uint32_t i = pt->nframes; i < npy; i++)
			pf[i] = (struct heapprofd_pyframe){ 0, 0 };
		pt->nframes = npy;
	}
	h->flags = (truncated ? HEAPPROFD_ALLOC_STACK_TRUNCATED : 0) |
		   (exact ? HEAPPROFD_ALLOC_EXACT : 0) |
		   (same ? HEAPPROFD_ALLOC_STACK_REUSED : 0) |
		   (nruns >= 0 ? HEAPPROFD_ALLOC_STACK_DELTA : 0) |
		   (code_gen ? HEAPPROFD_ALLOC_STACK_SAME : 0) |
		   (npy ? HEAPPROFD_ALLOC_PYFRAMES : 0);
	/* (a same-path record leaves the shadow as it is: so does the daemon) */
	if (!code_gen && nruns >= 0 && hp_cfg.stack_reuse && !hp_self.exited &&
	    sp + stack_len + same == t->stack_top)
		shadow_apply(&hp_self.shadow, sp, t->stack_top, same, runs, nruns, regs);
	else if (!code_gen)
		shadow_update(&hp_self.shadow, sp, t->stack_top, same, gen,
			      !truncated && sp + stack_len + same == t->stack_top, regs);
	commit(h, len);
	return 0;
}

/* The code set (codeset.c), before any record that leans on it. */
int hp_write_code(uint32_t gen, const uint64_t *granules, uint32_t n)
{
	struct heapprofd_rec_code *rec;
	struct heapprofd_rec_hdr *h;
	uint32_t len = (uint32_t)sizeof(*rec) + n * (uint32_t)sizeof(granules[0]);

	if (!hp_sess.live || n > HEAPPROFD_CODE_MAX)
		return -1;
	h = reserve(len, HEAPPROFD_REC_CODE);
	if (!h)
		return -1;
	rec = (struct heapprofd_rec_code *)h;
	rec->gen = gen;
	rec->n = n;
	memcpy(rec->granule, granules, n * sizeof(granules[0]));
	commit(h, len);
	return 0;
}

int hp_write_free(const void *addr, uint32_t heap_id, uint64_t seq)
{
	struct heapprofd_rec_free *rec;
	struct heapprofd_rec_hdr *h;

	if (!hp_sess.live)
		return -1;
	h = reserve(sizeof(*rec), HEAPPROFD_REC_FREE);
	if (!h)
		return -1;
	rec = (struct heapprofd_rec_free *)h;
	rec->seq = seq;
	rec->addr = (uint64_t)(uintptr_t)addr;
	rec->heap_id = heap_id;
	rec->tid = gettid_cached();
	commit(h, sizeof(*rec));
	return 0;
}

int hp_write_heap(uint32_t heap_id, uint64_t interval, const char *name)
{
	struct heapprofd_rec_heap *rec;
	struct heapprofd_rec_hdr *h;

	if (!hp_sess.live)
		return -1;
	h = reserve(sizeof(*rec), HEAPPROFD_REC_HEAP);
	if (!h)
		return -1;
	rec = (struct heapprofd_rec_heap *)h;
	rec->heap_id = heap_id;
	rec->resv = 0;
	rec->interval = interval;
	memset(rec->name, 0, sizeof(rec->name));
	strncpy(rec->name, name, sizeof(rec->name) - 1);
	commit(h, sizeof(*rec));
	return 0;
}
