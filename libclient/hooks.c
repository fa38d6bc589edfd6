// SPDX-License-Identifier: GPL-2.0
/*
 * The malloc family, interposed by symbol (LD_PRELOAD). The real functions
 * are found with dlsym(RTLD_NEXT); allocations made while dlsym runs (it may
 * allocate) are served from a static bootstrap arena. A block from the arena
 * is never freed (free is a no-op), reports its size through
 * malloc_usable_size and is copied out by realloc.
 *
 * malloc and free test a mode for the variant the state calls for
 * (hp_dispatch_update): without a session, or while it is dormant (or the
 * allocator is not glibc's, or bootstrap blocks exist), a malloc that
 * checks the gate on every call, and with glibc's allocator a free that
 * does not (free_plain: nothing is sampled until free has switched);
 * while sampling with glibc's allocator, malloc_fast and free_fast, which
 * do not read the gate at all (free_fast also once sampling stopped, while
 * marked blocks may be alive). Their common path: in malloc, one
 * thread-local subtraction (the countdown) and a branch, the real call,
 * one addition for the calls and one for the bytes (read from the chunk
 * header glibc just wrote); in free, a look for the mark of a sampled
 * block in the 16 bytes below it (mark.h) and the same two additions. No
 * lock, no system call, no write to a shared cache line. Everything else
 * (the gate closing, a new interval, publishing the counters, sampling) is
 * on the sampler's slow path, which runs at least every HP_SLOW_EVERY
 * bytes and before the allocation it decides on, so that a sampled block
 * is allocated marked.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "freeset.h"
#include "mark.h"
#include "stack.h"
#include "client.h"

__thread struct hp_thread hp_self HP_TLS;
/*
 * The sampled blocks alive that the daemon knows, when blocks cannot be
 * marked (another allocator than glibc's): the free path finds them
 * through the set's filter. With marking (mark.h) the set stays empty: a
 * marked block carries its own state.
 */
struct hp_freeset hp_fs_malloc;
uint64_t hp_mark_key;
int hp_marks_made;
uint32_t hp_mark_gen;
/* A dispatch update ran after hp_marks_made was set (decide()). */
static int marks_ready;

static void *(*r_malloc)(size_t);
static void (*r_free)(void *);
static void *(*r_calloc)(size_t, size_t);
static void *(*r_realloc)(void *, size_t);
static void *(*r_memalign)(size_t, size_t);
static int (*r_posix_memalign)(void **, size_t, size_t);
static void *(*r_aligned_alloc)(size_t, size_t);
static void *(*r_valloc)(size_t);
static void *(*r_pvalloc)(size_t);
size_t (*hp_real_usable)(void *);

/*
 * Which variant malloc and free run (hp_dispatch_update). A mode tested
 * inline, not a function pointer: every variant ends in one indirect jump
 * or call to the real function, and a second indirect jump costs more time
 * here than the three instructions of the test (bench/RESULTS.md). The
 * first calls (HP_M_FIRST) resolve the real functions.
 */
enum { HP_M_FIRST, HP_M_GATED, HP_M_GATED_BOOT, HP_M_FAST, HP_M_PLAIN, HP_M_MARKS };
static int malloc_mode = HP_M_FIRST, free_mode = HP_M_FIRST;

/* ---- bootstrap arena ---------------------------------------------------- */

#define BOOT_SIZE (64U << 10)
#define BOOT_HDR 16U
static uint8_t boot_arena[BOOT_SIZE] __attribute__((aligned(4096)));
static size_t boot_used;

static inline int is_boot(const void *p)
{
	return (uintptr_t)p - (uintptr_t)boot_arena < BOOT_SIZE;
}

static void *boot_alloc(size_t align, size_t n)
{
	size_t old, off, end;

	if (align < 16)
		align = 16;
	if (align > 4096 || (align & (align - 1)) || n > BOOT_SIZE) {
		errno = ENOMEM;
		return NULL;
	}
	old = __atomic_load_n(&boot_used, __ATOMIC_RELAXED);
	do {
		off = (old + BOOT_HDR + align - 1) & ~(align - 1);
		end = off + ((n + 15) & ~(size_t)15);
		if (end > BOOT_SIZE) {
			errno = ENOMEM;
			return NULL;
		}
	} while (!__atomic_compare_exchange_n(&boot_used, &old, end, 1,
					      __ATOMIC_SEQ_CST, __ATOMIC_RELAXED));
	*(size_t *)(boot_arena + off - BOOT_HDR) = n;
	/* free must look for arena blocks from now on: before the block
	 * can reach it (dispatch_update reads boot_used under its lock). */
	hp_dispatch_update();
	return boot_arena + off;	/* static, hence zeroed, never reused */
}

static size_t boot_size(const void *p)
{
	return *(const size_t *)((const uint8_t *)p - BOOT_HDR);
}

/* Loaded by heapprofctl attach (got.c), this library is not in the global
 * scope: the real function is the one the program is bound to. */
#define RESOLVE(var, name) \
	__atomic_store_n(&var, (__typeof__(var))(hp_injected ? hp_got_real(name) : \
						   dlsym(RTLD_NEXT, name)), \
			 __ATOMIC_RELEASE)

/*
 * HEAPPROFD_TEST_BOOTSTRAP=1 (for the tests): allocate through the bootstrap
 * arena while nothing is resolved yet, as a dlsym that allocates would, and
 * check those blocks once the real functions are known (boot_selftest()).
 */
static void *boot_test[4];
static int boot_test_on;

static void resolve(void)
{
	struct hp_thread *t = &hp_self;

	if (t->resolving)
		return;
	t->resolving = 1;
	if (!r_malloc && !boot_test_on && getenv("HEAPPROFD_TEST_BOOTSTRAP")) {
		boot_test_on = 1;
		boot_test[0] = malloc(100);
		boot_test[1] = calloc(10, 10);
		boot_test[2] = memalign(64, 50);
		if (posix_memalign(&boot_test[3], 32, 70))
			boot_test[3] = NULL;
	}
	RESOLVE(hp_real_usable, "malloc_usable_size");
	RESOLVE(r_free, "free");
	RESOLVE(r_calloc, "calloc");
	RESOLVE(r_realloc, "realloc");
	RESOLVE(r_memalign, "memalign");
	RESOLVE(r_posix_memalign, "posix_memalign");
	RESOLVE(r_aligned_alloc, "aligned_alloc");
	RESOLVE(r_valloc, "valloc");
	RESOLVE(r_pvalloc, "pvalloc");
	RESOLVE(r_malloc, "malloc");
	t->resolving = 0;
}

void hp_resolve(void)
{
	resolve();
}

/* ---- per-thread state --------------------------------------------------- */

static uint64_t thread_index;

void hp_thread_init(struct hp_thread *t)
{
	uint64_t seed, idx = __atomic_fetch_add(&thread_index, 1, __ATOMIC_RELAXED);

	if (hp_cfg.have_seed) {
		uint64_t x = hp_cfg.seed + idx * 0x632be59bd9b4e019ULL;

		seed = hp_splitmix64(&x);
	} else if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != sizeof(seed)) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		seed = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32) ^
		       ((uint64_t)syscall(SYS_gettid) << 16) ^ (uintptr_t)t;
	}
	t->deferred = 0;
	hp_sampler_init(&t->smp,
			hp_adapt_interval(__atomic_load_n(&hp_interval_base, __ATOMIC_RELAXED)),
			seed);
	t->inited = 1;
	hp_counters_register(t);
}

/*
 * The usable size of a block in use, for the exact counters (both count
 * usable bytes, so that allocated - freed is what is in use). With glibc's
 * allocator (checked once, at start-up) it is read from the chunk header,
 * which malloc just wrote and free is about to read anyway: the size field
 * minus one word, or two for an mmap'ed chunk -- what malloc_usable_size
 * returns, without the call.
 */
static int glibc_heap;

static int usable_size_ok(void *p)
{
	size_t h = ((const size_t *)p)[-1];

	return (h & ~(size_t)7) - (h & 2 ? 16 : 8) == hp_real_usable(p);
}

/* usable + 8 (the unit of the byte counters, internal.h) from glibc's
 * chunk header: the size field without its 3 flag bits, less one more word
 * for an mmap'ed chunk (flag bit 1, rare: a branch costs less than the
 * arithmetic). */
static inline size_t glibc_bytes8_of(size_t h)
{
	if (unlikely(h & 2)) {
		/* The empty asm keeps this a branch (not a cmov). */
		__asm__ volatile("" : "+r"(h));
		h -= 8;
	}
	return h & ~(size_t)7;
}

static inline size_t glibc_bytes8(const void *p)
{
	return glibc_bytes8_of(((const size_t *)p)[-1]);
}

static inline size_t bytes8_of(void *p)
{
	if (likely(glibc_heap))
		return glibc_bytes8(p);
	return hp_real_usable(p) + 8;
}

/* The same for a confirmed marked block: what the program can use, + 8. */
static inline size_t marked_bytes8(void *u)
{
	size_t off = hp_mark_off(u);

	return glibc_bytes8((uint8_t *)u - off) - off;
}

static inline size_t block_bytes8(void *p, int marked)
{
	return marked ? marked_bytes8(p) : bytes8_of(p);
}

/* ---- the sampled path --------------------------------------------------- */

/*
 * Always inlined into slow_alloc, the outermost frame of the sampled path
 * under the hook: the registers are taken here, so the copy starts at this
 * frame and leaves out hp_write_alloc's (about 150 bytes per sample less to
 * move, and two frames less to unwind).
 */
static inline __attribute__((always_inline)) void record(void *p, size_t n,
							 uint32_t count, int exact,
							 int marked, uint64_t at)
{
	uint64_t est = exact ? n : (uint64_t)count * at;
	uint64_t key = (uint64_t)(uintptr_t)p;

	if (hp_heap_off(HEAPPROFD_HEAP_MALLOC))
		goto quiet;	/* not in the user's --heaps */
	hp_regs_capture(hp_self.regs);
	if (hp_write_alloc(p, n, block_bytes8(p, marked) - 8, est,
			   at, count, HEAPPROFD_HEAP_MALLOC,
			   exact, hp_self.regs))
		goto quiet;
	/* The daemon knows this address: its free is recorded. */
	if (marked)
		hp_mark_loud(p);
	else
		hp_freeset_insert(&hp_fs_malloc, key);
	return;
quiet:
	/* Unknown to the daemon: a marked block stays quiet (mark.h), a
	 * plain one stays out of the set. */
	return;
}

/* Hold back what exceeds HP_SLOW_EVERY of the countdown (client.h). */
static inline void cap_countdown(struct hp_thread *t)
{
	if (t->smp.countdown > (int64_t)HP_SLOW_EVERY) {
		t->deferred = (uint64_t)t->smp.countdown - HP_SLOW_EVERY;
		t->smp.countdown = HP_SLOW_EVERY;
	}
}

/*
 * The countdown fell to zero or below (n already subtracted): a sample
 * perhaps, or only the end of a HP_SLOW_EVERY stretch. Here, not on the
 * common path: the counters are published, the control page config and the
 * interval (configured, and adaptive: adapt.c) are looked at, and the gate
 * is checked by the fast variants, which do not read it themselves.
 * Returns the number of samples (0: not sampled) and in *at the interval
 * they were drawn at. The caller holds in_hook and a snapshot of the
 * counters.
 */
static inline __attribute__((always_inline)) uint32_t decide(struct hp_thread *t,
							      size_t n, int *exact,
							      uint64_t *at)
{
	uint32_t count = 0;
	uint64_t want;

	*exact = 0;
	if (unlikely(hp_child_pending)) {
		hp_child_pending = 0;
		hp_session_start();
		if (!hp_sess.live) {
			__atomic_store_n(&hp_sess.stopped, 1, __ATOMIC_RELAXED);
			hp_session_stop("no session in the child");
		}
	}
	hp_config_poll();	/* one load unless the daemon changed it */
	if (!t->inited) {
		hp_thread_init(t);	/* also clears deferred */
		count = hp_sampler_account(&t->smp, n, exact);
		*at = t->smp.interval;
	} else {
		/* Publishing adds to shared counters: at most once per
		 * HP_PUBLISH_CALLS allocations, so that sampling at a small
		 * interval does not pay it per sample, and at the end of a
		 * stretch (at least every HP_SLOW_EVERY bytes). */
		if (t->smp.countdown + (int64_t)t->deferred > 0 ||
		    t->alloc_calls - __atomic_load_n(&t->pub_alloc_calls, __ATOMIC_RELAXED) >=
		    HP_PUBLISH_CALLS)
			hp_counters_publish(t);
		/*
		 * This allocation's bytes were under the countdown drawn at
		 * the thread's interval: they are decided with it, and a
		 * sample stands for that interval. The true countdown is
		 * countdown + deferred: only where that is used up is a byte
		 * sampled.
		 */
		t->smp.countdown += (int64_t)t->deferred;
		t->deferred = 0;
		if (t->smp.countdown <= 0)
			count = hp_sampler_slow(&t->smp, n, exact);
		*at = t->smp.interval;
		/* Only then a new interval for the bytes to come, if the
		 * daemon's or the ring's (adapt.c) changed: a countdown drawn
		 * afresh is as good as the rest of the old one (memoryless). */
		if (!count && __atomic_load_n(&hp_adapt_level, __ATOMIC_RELAXED))
			hp_adapt_note();	/* no record of ours says it */
		want = hp_adapt_interval(__atomic_load_n(&hp_interval_base, __ATOMIC_RELAXED));
		if (unlikely(want != t->smp.interval))
			hp_sampler_set_interval(&t->smp, want);
	}
	cap_countdown(t);
	if (!*hp_gate) {
		count = 0;
		if (__atomic_load_n(&malloc_mode, __ATOMIC_RELAXED) == HP_M_FAST)
			hp_dispatch_update();	/* the gate closed: stop counting */
	} else if (count) {
		int f;

		/* calloc, realloc and the aligned family find the gate open
		 * without switching the variants: free must look for what is
		 * sampled from now on, before the block is handed out. */
		if (hp_mark_key && !__atomic_load_n(&marks_ready, __ATOMIC_ACQUIRE)) {
			/* An update that began before the flag was set may still
			 * store a free that does not look for marks; ours, under
			 * the same lock, comes after it. Only once one update
			 * has run after the flag is every later one safe. */
			__atomic_store_n(&hp_marks_made, 1, __ATOMIC_SEQ_CST);
			hp_dispatch_update();
			__atomic_store_n(&marks_ready, 1, __ATOMIC_RELEASE);
		}
		f = __atomic_load_n(&free_mode, __ATOMIC_RELAXED);
		if (unlikely(f == HP_M_PLAIN || f == HP_M_MARKS))
			hp_dispatch_update();
	}
	return count;
}

/* What the slow paths allocate again: the function the program called. */
enum { K_MALLOC, K_CALLOC, K_MEMALIGN, K_POSIX_MEMALIGN, K_ALIGNED_ALLOC,
       K_VALLOC, K_PVALLOC };

static void *real_alloc(int kind, size_t n, size_t align)
{
	void *p;

	switch (kind) {
	case K_CALLOC:
		return r_calloc(1, n);
	case K_MEMALIGN:
		return r_memalign(align, n);
	case K_POSIX_MEMALIGN:
		return r_posix_memalign(&p, align, n) ? NULL : p;
	case K_ALIGNED_ALLOC:
		return r_aligned_alloc(align, n);
	case K_VALLOC:
		return r_valloc(n);
	case K_PVALLOC:
		return r_pvalloc(n);
	default:
		return r_malloc(n);
	}
}

/* The same, as a marked block (mark.h): the offset's bytes in front. */
static void *marked_alloc(int kind, size_t n, size_t align)
{
	size_t off = kind >= K_MEMALIGN ? hp_mark_off_for(align) : HP_MARK_OFF;
	void *base;

	if (n > SIZE_MAX - off) {
		errno = ENOMEM;
		return NULL;
	}
	if (kind == K_MALLOC)
		base = r_malloc(n + off);
	else if (kind == K_CALLOC)
		base = r_calloc(1, n + off);
	else
		base = r_memalign(off, n + off);
	return base ? hp_mark_put(base, off) : NULL;
}

/*
 * An allocation of n bytes whose countdown ran out (n already taken from
 * it): the housekeeping and the decision, then the allocation itself,
 * marked if it is sampled, and its record. The registers are taken in this
 * frame (record() is inlined), the outermost of the sampled path under
 * the hook. The bytes of an allocation that fails were consumed from the
 * countdown without a chance of being sampled: the Poisson process over
 * the bytes of the allocations that succeed is unchanged by that
 * (disjoint stretches are independent), so no estimate is biased.
 */
__attribute__((noinline, cold)) static void *slow_alloc(int kind, size_t n, size_t align)
{
	struct hp_thread *t = &hp_self;
	uint32_t count;
	uint64_t at;
	int exact, marked;
	void *p;

	if (t->in_hook || t->resolving) {
		/* Our own allocation: never sampled (its count is undone by
		 * the slow path it happens in). */
		p = real_alloc(kind, n, align);
		marked = 0;
		goto counted;
	}
	t->in_hook = 1;
	hp_count_save(t, &t->snap);
	count = decide(t, n, &exact, &at);
	marked = count && hp_mark_key;
	/*
	 * No sample for an alignment the mark's offset cannot carry (mark.h),
	 * or one that aligned_alloc may refuse where memalign, which marks
	 * use, would not.
	 */
	if (marked && kind >= K_MEMALIGN &&
	    (align > HP_MARK_ALIGN_MAX ||
	     (kind == K_ALIGNED_ALLOC && (align & (align - 1)))))
		marked = count = 0;
	p = marked ? marked_alloc(kind, n, align) : real_alloc(kind, n, align);
	if (p && count)
		record(p, n, count, exact, marked, at);
	hp_count_restore(t, &t->snap);
	t->in_hook = 0;
counted:
	if (likely(p)) {
		t->alloc_calls++;
		t->alloc_bytes8 += block_bytes8(p, marked);
	}
	return p;
}

static const char *boot_selftest(void)
{
	size_t used;
	char *q;
	int i;

	for (i = 0; i < 4; i++)
		if (!boot_test[i] || !is_boot(boot_test[i]))
			return "a block is not from the arena";
	if (malloc_usable_size(boot_test[0]) != 100 ||
	    malloc_usable_size(boot_test[1]) != 100 ||
	    malloc_usable_size(boot_test[2]) != 50 ||
	    malloc_usable_size(boot_test[3]) != 70)
		return "malloc_usable_size";
	if ((uintptr_t)boot_test[2] % 64 || (uintptr_t)boot_test[3] % 32)
		return "alignment";
	for (i = 0; i < 100; i++)
		if (((char *)boot_test[1])[i])
			return "calloc not zeroed";
	memset(boot_test[0], 0x5a, 100);
	used = boot_used;
	free(boot_test[1]);		/* a no-op */
	q = realloc(boot_test[0], 300);	/* moves to the real heap */
	if (!q || is_boot(q) || boot_used != used)
		return "realloc/free";
	for (i = 0; i < 100; i++)
		if (q[i] != 0x5a)
			return "realloc lost the contents";
	free(q);
	return NULL;
}

/*
 * The key of the marks (mark.h): random, so that no data the program
 * writes equals a mark but by chance.
 */
static uint64_t mark_key(void)
{
	uint64_t k = 0;

	if (getrandom(&k, sizeof(k), GRND_NONBLOCK) != sizeof(k))
		k = (uint64_t)(uintptr_t)&k * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid();
	return k ? k : 0x6865617070726f66ULL;
}

void hp_hooks_init(void)
{
	if (boot_test_on) {
		const char *why = boot_selftest();
		char msg[128];
		int n = snprintf(msg, sizeof(msg), "heapprofd_client: bootstrap self-test %s%s\n",
				 why ? "failed: " : "ok", why ? why : "");

		if (write(2, msg, (size_t)n) < 0)
			why = NULL;
	}

	Dl_info di;

	/* Loaded by attach: no marks (injected.c), as for another allocator. */
	if (!hp_injected && r_malloc && hp_real_usable && dladdr((void *)r_malloc, &di) &&
	    di.dli_fname && strstr(di.dli_fname, "/libc.so.6")) {
		/* Check the header reading against the real thing once. */
		void *p = r_malloc(100), *q = r_malloc(300000);

		glibc_heap = p && q && usable_size_ok(p) && usable_size_ok(q);
		r_free(p);
		r_free(q);
	}
	if (glibc_heap)
		hp_mark_key = mark_key();	/* sampled blocks are marked */
	hp_dispatch_update();
}

/*
 * An allocation on a path with the gate open, other than malloc's fast
 * variant: the countdown first, so that a sampled block can be marked.
 */
static inline void *alloc_counted(int kind, size_t n, size_t align)
{
	struct hp_thread *t = &hp_self;
	void *p;

	if (unlikely((t->smp.countdown -= (int64_t)n) <= 0))
		return slow_alloc(kind, n, align);
	p = real_alloc(kind, n, align);
	if (likely(p)) {
		t->alloc_calls++;
		t->alloc_bytes8 += bytes8_of(p);
	}
	return p;
}

/*
 * A thread's first free: a thread that frees but has not allocated (a
 * consumer of another thread's blocks) is not in the registry yet, and its
 * counts would never be published. Mallocs register through the slow path
 * (a new thread's countdown starts at 0). A thread past its exit handler
 * stays out.
 */
__attribute__((noinline, cold)) static void first_free(struct hp_thread *t)
{
	if (t->registered || t->exited || t->in_hook || t->resolving)
		return;
	t->in_hook = 1;
	hp_counters_register(t);
	t->in_hook = 0;
}

/*
 * A free whose block carries the tag (mark.h): recorded if the daemon
 * knows it, counted (with the gate open), unmarked, and handed back to
 * glibc at the address glibc gave out. A tag without the key is on no
 * block glibc or we made: the pointer goes to glibc as it is, which
 * reports it.
 */
__attribute__((noinline, cold)) static void free_marked(void *u, int counting)
{
	struct hp_thread *t = &hp_self;
	int guard = t->in_hook;
	struct hp_count_snap snap;
	void *base;
	size_t b8;

	if (!hp_mark_matches(u))
		return r_free(u);
	if (counting && unlikely(!t->registered))
		first_free(t);
	b8 = marked_bytes8(u);
	if (counting && !hp_mark_quiet(u)) {
		t->in_hook = 1;
		hp_count_save(t, &snap);
		hp_write_free(u, HEAPPROFD_HEAP_MALLOC, hp_next_seq());
		/* Counted in the snapshot, stored once (realloc_slow says why). */
		snap.fc++;
		snap.fb += b8;
		hp_count_restore(t, &snap);
		t->in_hook = guard;
	} else if (counting) {
		t->free_calls++;
		t->free_bytes8 += b8;
	}
	base = hp_mark_base(u);
	hp_mark_clear(u);
	r_free(base);
}

/* Without marking: the filter said this free may be of a sampled block. */
__attribute__((noinline, cold)) static void slow_free(void *p)
{
	struct hp_thread *t = &hp_self;
	int guard = t->in_hook;
	struct hp_count_snap snap;

	t->in_hook = 1;
	hp_count_save(t, &snap);
	if (hp_freeset_remove(&hp_fs_malloc, (uint64_t)(uintptr_t)p))
		hp_write_free(p, HEAPPROFD_HEAP_MALLOC, hp_next_seq());
	hp_count_restore(t, &snap);
	t->in_hook = guard;
}

/* Everything the free of a block that carries no mark does besides handing
 * it back; without marking, the filter says whether it may be sampled. */
static inline void account_free(void *p)
{
	struct hp_thread *t = &hp_self;

	if (unlikely(!t->registered))
		first_free(t);
	t->free_calls++;
	t->free_bytes8 += bytes8_of(p);
	if (!hp_mark_key &&
	    unlikely(hp_freeset_filter(&hp_fs_malloc, (uint64_t)(uintptr_t)p)))
		slow_free(p);
}

/*
 * The new block of a realloc that cannot stay what the old one was (a
 * plain block becoming marked; a marked one with an alignment offset, or
 * for which the set has no room, becoming plain): a new block, the
 * contents, the old block back to glibc. n > 0.
 */
static void *realloc_move(void *old, int old_marked, size_t n, int mark_new)
{
	void *base = old_marked ? hp_mark_base(old) : old;
	size_t have;
	void *p;

	p = mark_new ? marked_alloc(K_MALLOC, n, 0) : r_malloc(n);
	if (!p)
		return NULL;
	have = old_marked ? marked_bytes8(old) - 8 : hp_real_usable(old);
	memcpy(p, old, have < n ? have : n);
	if (old_marked)
		hp_mark_clear(old);
	r_free(base);
	return p;
}

/* glibc's realloc, for blocks that are marked or are to be. */
static void *realloc_block(void *old, int old_marked, size_t n, int mark_new)
{
	void *base;

	if (!old_marked && !mark_new)
		return r_realloc(old, n);
	if (!n) {
		/* glibc's realloc(p, 0): a free, and NULL. */
		base = old_marked ? hp_mark_base(old) : old;
		if (old_marked)
			hp_mark_clear(old);
		r_free(base);
		return NULL;
	}
	if (old_marked && mark_new && hp_mark_off(old) == HP_MARK_OFF) {
		/* Marked to marked: the offset moves with the contents, and the
		 * mark is written again (glibc copied the old one, or left it
		 * in place). The old words are left alone meanwhile: a fork
		 * child of this moment must still find the old block marked. */
		if (n > SIZE_MAX - HP_MARK_OFF) {
			errno = ENOMEM;
			return NULL;
		}
		base = r_realloc(hp_mark_base(old), n + HP_MARK_OFF);
		return base ? hp_mark_put(base, HP_MARK_OFF) : NULL;
	}
	return realloc_move(old, old_marked, n, mark_new);
}

/*
 * realloc, the rare cases: the old block is marked (or, without marking,
 * may be sampled), or the new one may be sampled (expired: the countdown
 * ran out, n already taken from it); counting: the gate is open. A free of
 * the old block, then an allocation, but only once the real realloc
 * succeeded, so that a failed realloc leaves the old block tracked as it
 * was. The FREE record's seq is taken before the real realloc can give the
 * old address back to the allocator: a sample of that address by another
 * thread afterwards has a larger seq, whatever the order of the records in
 * the ring. A block glibc hands out again at the old address meanwhile
 * has glibc's size field below it, so no free takes it for marked
 * (mark.h). Without marking, another thread's sample may put the address
 * into the set a second time until our remove (the set counts each
 * insert).
 */
__attribute__((noinline, cold)) static void *realloc_slow(void *old, size_t n, int expired,
							   int counting)
{
	struct hp_thread *t = &hp_self;
	uint64_t key = (uint64_t)(uintptr_t)old, seq = 0, at = 0;
	int guard = t->in_hook, was = 0, exact = 0, mark_new;
	struct hp_count_snap snap;
	size_t old_bytes8;
	uint32_t count = 0;
	void *p;

	t->in_hook = 1;
	hp_count_save(t, &snap);
	if (hp_mark_key) {
		was = hp_mark_matches(old);
		if (was && !hp_mark_quiet(old) && counting)
			seq = hp_next_seq();
	} else if (hp_freeset_maybe(&hp_fs_malloc, key)) {
		seq = hp_next_seq();
	}
	old_bytes8 = block_bytes8(old, was);
	if (expired && !guard && !t->resolving)
		count = decide(t, n, &exact, &at);
	/* A marked block stays marked (a quiet one if this size is not
	 * sampled): glibc's realloc then resizes it in place or by mremap, where
	 * making it plain would copy it. */
	mark_new = hp_mark_key && n && (count || (was && hp_mark_off(old) == HP_MARK_OFF));
	p = realloc_block(old, was, n, mark_new);
	if (!p && n) {
		/* The old block is alive and as it was, marked or not. */
		hp_count_restore(t, &snap);
		t->in_hook = guard;
		return NULL;
	}
	if (seq && (was || hp_freeset_remove(&hp_fs_malloc, key)))
		hp_write_free(old, HEAPPROFD_HEAP_MALLOC, seq);
	if (p && count)
		record(p, n, count, exact, mark_new, at);
	/* The call's own counts go into the snapshot, and are stored once:
	 * adding them to what the restore had just stored made the (wide)
	 * loads wait for those stores, a third of this function's time. */
	if (counting) {
		snap.fc++;
		snap.fb += old_bytes8;
		if (p) {
			snap.ac++;
			snap.ab += block_bytes8(p, mark_new);
		}
	}
	hp_count_restore(t, &snap);
	t->in_hook = guard;
	return p;
}

/* realloc of a block with the gate open: the common case inline. */
static inline void *realloc_tracked(void *old, size_t n)
{
	struct hp_thread *t = &hp_self;
	size_t old_bytes8;
	int expired;
	void *p;

	expired = (t->smp.countdown -= (int64_t)n) <= 0;
	if (unlikely(expired) ||
	    (hp_mark_key ? hp_mark_tagged(((const uint64_t *)old)[-1]) :
	     hp_freeset_maybe(&hp_fs_malloc, (uint64_t)(uintptr_t)old)))
		return realloc_slow(old, n, expired, 1);
	old_bytes8 = bytes8_of(old);
	p = r_realloc(old, n);
	/* glibc frees the block and returns NULL for size 0. */
	if (!p && n)
		return NULL;
	t->free_calls++;
	t->free_bytes8 += old_bytes8;
	if (p) {
		t->alloc_calls++;
		t->alloc_bytes8 += bytes8_of(p);
	}
	return p;
}

/* ---- malloc and free: the variants ------------------------------------- */

/* countdown -= n; is it now <= 0? (arch.h: as one instruction where there is one) */
static inline __attribute__((always_inline)) int countdown_expired(size_t n)
{
	return hp_countdown_expired(&hp_self.smp.countdown, n);
}

/*
 * Sampling with glibc's allocator. The countdown is taken before the real
 * call, so the common path keeps nothing across it but the return value,
 * and a sampled block can be marked (slow_alloc).
 */
static inline __attribute__((always_inline)) void *malloc_fast(size_t n)
{
	void *p;

	if (unlikely(countdown_expired(n)))
		return slow_alloc(K_MALLOC, n, 0);
	p = r_malloc(n);
	if (likely(p)) {
		hp_self.alloc_calls++;
		hp_self.alloc_bytes8 += glibc_bytes8(p);
	}
	return p;
}

/* free_fast's rare part: the thread's first free. */
__attribute__((noinline, cold)) static void free_fast_rare(void *p)
{
	first_free(&hp_self);
	r_free(p);
}

/*
 * Glibc's allocator (marking on) and no bootstrap block in existence:
 * while sampling, and after sampling while marked blocks may be alive.
 * The word below the block is read once: glibc's size field, for the
 * count, or the tag of a marked block (mark.h), the only kind for which a
 * call is made.
 */
static inline __attribute__((always_inline)) void free_fast(void *p)
{
	if (likely(p)) {
		size_t below = ((const size_t *)p)[-1];

		if (unlikely(hp_mark_tagged(below)))
			return free_marked(p, 1);
		hp_self.free_calls++;
		hp_self.free_bytes8 += glibc_bytes8_of(below);
		if (unlikely(!hp_self.registered))
			return free_fast_rare(p);
	}
	r_free(p);
}

/* The paths with the gate open in the gate-checking variants. */
__attribute__((noinline)) static void *malloc_profiled(size_t n)
{
	return alloc_counted(K_MALLOC, n, 0);
}

__attribute__((noinline)) static void free_profiled(void *p)
{
	if (p && hp_mark_key && hp_mark_matches(p))
		return free_marked(p, 1);
	if (p)
		account_free(p);
	r_free(p);
}

/* Could the fast variants take over now that the gate is open? */
static inline int fast_possible(int for_free)
{
	return glibc_heap && (!for_free || !__atomic_load_n(&boot_used, __ATOMIC_RELAXED));
}

/* The gated variants found the gate open: switch to the fast variants when
 * they can serve (glibc's allocator; for free, no bootstrap block), and
 * count this call out of line. */
__attribute__((noinline)) static void *malloc_gate_open(size_t n)
{
	if (fast_possible(0))
		hp_dispatch_update();
	return malloc_profiled(n);
}

__attribute__((noinline)) static void free_gate_open(void *p)
{
	if (fast_possible(1))
		hp_dispatch_update();
	free_profiled(p);
}

/* No session (the gate points at a constant zero), a dormant one, or an
 * allocator that is not glibc's: the gate is read on every call. */
static inline void *malloc_gated(size_t n)
{
	if (likely(!*__atomic_load_n(&hp_gate, __ATOMIC_RELAXED)))
		return r_malloc(n);
	return malloc_gate_open(n);
}

/*
 * The gate closed, glibc's allocator and no bootstrap block (dormant, or no
 * session): straight on to the real free, without reading the gate. No
 * block is sampled while free is in this mode: the gate-checking
 * allocation paths that find the gate open switch free to free_fast before
 * they sample (malloc_gate_open, and slow_alloc for the others).
 */
static inline void free_plain(void *p)
{
	/* A volatile load keeps the compiler from merging this tail with
	 * free's other jumps to the real free, which would cost the dormant
	 * path a taken jump. */
	(*(void (*volatile *)(void *))&r_free)(p);
}

/* The gate closed with glibc's allocator after blocks were marked: free
 * looks for marks, and counts nothing (counting is for the gate open). */
static void free_marks(void *p)
{
	if (p && hp_mark_matches(p))
		return free_marked(p, 0);
	free_plain(p);
}

static inline void free_gated(void *p)
{
	if (unlikely(*__atomic_load_n(&hp_gate, __ATOMIC_RELAXED)))
		return free_gate_open(p);
	/* Marked blocks outlive the sampling that made them. */
	if (unlikely(__atomic_load_n(&hp_marks_made, __ATOMIC_RELAXED)))
		return free_marks(p);
	free_plain(p);
}

/* free_gated for a process in which bootstrap blocks exist (dlsym
 * allocated): those are never handed to the real free. */
static void free_gated_boot(void *p)
{
	if (unlikely(is_boot(p)))
		return;
	free_gated(p);
}

__attribute__((noinline, cold)) static void *malloc_first(size_t n)
{
	resolve();
	if (!r_malloc)
		return boot_alloc(16, n);	/* dlsym is allocating */
	hp_dispatch_update();
	return malloc_gated(n);
}

__attribute__((noinline, cold)) static void free_first(void *p)
{
	if (is_boot(p) || !p)
		return;
	resolve();
	if (!r_free)
		return;	/* cannot happen after dlsym; leak rather than crash */
	hp_dispatch_update();
	free_gated_boot(p);
}

static pthread_mutex_t dispatch_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Choose the variants from the state, under a lock so that the last update
 * reflects the last state: every change of hp_gate or boot_used is followed
 * by an update, and a gate value the daemon changes on its own is noticed
 * by the variants themselves (the gated ones on every call, the fast ones
 * on the slow path). When the gate opens, free switches before malloc, so
 * no sampled block reaches a free that does not look it up.
 */
void hp_dispatch_update(void)
{
	int open, boot, m, f;

	if (!__atomic_load_n(&r_malloc, __ATOMIC_ACQUIRE) || !r_free)
		return;		/* still resolving: the first variants */
	pthread_mutex_lock(&dispatch_lock);
	open = *hp_gate != 0;
	boot = __atomic_load_n(&boot_used, __ATOMIC_SEQ_CST) != 0;
	m = open && glibc_heap ? HP_M_FAST : HP_M_GATED;
	/* Closed, with glibc's allocator: free need not read the gate (see
	 * free_plain), unless marked blocks may be alive. */
	f = boot ? HP_M_GATED_BOOT : !glibc_heap ? HP_M_GATED : open ? HP_M_FAST :
	    __atomic_load_n(&hp_marks_made, __ATOMIC_SEQ_CST) ? HP_M_MARKS : HP_M_PLAIN;
	if (open) {
		__atomic_store_n(&free_mode, f, __ATOMIC_RELEASE);
		__atomic_store_n(&malloc_mode, m, __ATOMIC_RELEASE);
	} else {
		__atomic_store_n(&malloc_mode, m, __ATOMIC_RELEASE);
		__atomic_store_n(&free_mode, f, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&dispatch_lock);
}

void hp_dispatch_fork(int phase)
{
	if (phase == 0) {
		pthread_mutex_lock(&dispatch_lock);
	} else if (phase == 1) {
		pthread_mutex_unlock(&dispatch_lock);
	} else {
		pthread_mutex_init(&dispatch_lock, NULL);
		hp_dispatch_update();
	}
}

/* ---- the interposed functions ------------------------------------------ */

/* The rare modes, out of line. */
__attribute__((noinline, cold)) static void *malloc_other(int mode, size_t n)
{
	(void)mode;
	return malloc_first(n);
}

__attribute__((noinline, cold)) static void free_other(int mode, void *p)
{
	if (mode == HP_M_GATED)
		return free_gated(p);
	if (mode == HP_M_GATED_BOOT)
		return free_gated_boot(p);
	if (mode == HP_M_MARKS)
		return free_marks(p);
	free_first(p);
}

/*
 * See the top of this file. Sampling is tested first and falls through;
 * dormant and pass-through (the gate then points at a constant zero) take
 * one branch, to malloc's gate check or to free_plain; each ends in one
 * indirect call or jump. Measured here, each further taken branch or
 * indirect jump costs more than the few instructions saved, and testing
 * dormant first only moves the taken branch onto sampling
 * (bench/RESULTS.md).
 */
HP_EXPORT void *malloc(size_t n)
{
	int mode = __atomic_load_n(&malloc_mode, __ATOMIC_RELAXED);

	if (likely(mode == HP_M_FAST))
		return malloc_fast(n);
	if (likely(mode == HP_M_GATED))
		return malloc_gated(n);
	return malloc_other(mode, n);
}

HP_EXPORT void free(void *p)
{
	int mode = __atomic_load_n(&free_mode, __ATOMIC_RELAXED);

	/* free(NULL) is passed on: the real free accepts it. */
	if (likely(mode == HP_M_FAST))
		return free_fast(p);
	if (likely(mode == HP_M_PLAIN))
		return free_plain(p);
	free_other(mode, p);
}

/* calloc and realloc before the real functions are known (dlsym may
 * allocate), and realloc of a bootstrap block: out of line, so that the
 * common paths need no frame and end in a jump to glibc's function. */
__attribute__((noinline, cold)) static void *calloc_first(size_t nmemb, size_t size)
{
	resolve();
	if (!r_calloc)
		return boot_alloc(16, nmemb * size);	/* checked by the caller */
	return calloc(nmemb, size);
}

__attribute__((noinline, cold)) static void *realloc_boot(void *old, size_t n)
{
	size_t m = boot_size(old);
	void *p = malloc(n ? n : 1);

	if (p)
		memcpy(p, old, m < n ? m : n);
	return p;
}

__attribute__((noinline, cold)) static void *realloc_first(void *old, size_t n)
{
	resolve();
	if (!r_realloc)
		return old ? NULL : boot_alloc(16, n);
	return realloc(old, n);
}

/* The gate open. */
__attribute__((noinline)) static void *calloc_profiled(size_t n)
{
	return alloc_counted(K_CALLOC, n, 0);
}

__attribute__((noinline)) static void *realloc_profiled(void *old, size_t n)
{
	if (old)
		return realloc_tracked(old, n);
	return alloc_counted(K_MALLOC, n, 0);	/* realloc(NULL, n) */
}

/* The gate closed, but marked blocks may be alive. */
__attribute__((noinline)) static void *realloc_unprofiled(void *old, size_t n)
{
	if (old && hp_mark_matches(old))
		return realloc_slow(old, n, 0, 0);
	return r_realloc(old, n);
}

HP_EXPORT void *calloc(size_t nmemb, size_t size)
{
	size_t n;

	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	if (unlikely(!r_calloc))
		return calloc_first(nmemb, size);
	if (likely(!*hp_gate))
		return r_calloc(nmemb, size);
	return calloc_profiled(n);
}

HP_EXPORT void *realloc(void *old, size_t n)
{
	if (unlikely(is_boot(old)))
		return realloc_boot(old, n);
	if (unlikely(!r_realloc))
		return realloc_first(old, n);
	if (likely(!*hp_gate)) {
		if (unlikely(__atomic_load_n(&hp_marks_made, __ATOMIC_RELAXED)))
			return realloc_unprofiled(old, n);
		return r_realloc(old, n);
	}
	return realloc_profiled(old, n);
}

HP_EXPORT void *reallocarray(void *old, size_t nmemb, size_t size)
{
	size_t n;

	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc(old, n);
}

HP_EXPORT void *memalign(size_t align, size_t n)
{
	if (unlikely(!r_memalign)) {
		resolve();
		if (!r_memalign)
			return boot_alloc(align, n);
	}
	if (likely(!*hp_gate))
		return r_memalign(align, n);
	return alloc_counted(K_MEMALIGN, n, align);
}

HP_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;

	if (!align || (align & (align - 1)) || align % sizeof(void *))
		return EINVAL;
	if (unlikely(!r_posix_memalign)) {
		resolve();
		if (!r_posix_memalign) {
			p = boot_alloc(align, n);
			if (!p)
				return ENOMEM;
			*out = p;
			return 0;
		}
	}
	if (likely(!*hp_gate))
		return r_posix_memalign(out, align, n);
	/* The alignment is valid: the real function can only lack memory. */
	p = alloc_counted(K_POSIX_MEMALIGN, n, align);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

HP_EXPORT void *aligned_alloc(size_t align, size_t n)
{
	if (unlikely(!r_aligned_alloc)) {
		resolve();
		if (!r_aligned_alloc)
			return boot_alloc(align, n);
	}
	if (likely(!*hp_gate))
		return r_aligned_alloc(align, n);
	return alloc_counted(K_ALIGNED_ALLOC, n, align);
}

static size_t page_size(void)
{
	static size_t ps;

	if (!ps)
		ps = (size_t)sysconf(_SC_PAGESIZE);
	return ps;
}

HP_EXPORT void *valloc(size_t n)
{
	if (unlikely(!r_valloc)) {
		resolve();
		if (!r_valloc)
			return boot_alloc(4096, n);
	}
	if (likely(!*hp_gate))
		return r_valloc(n);
	return alloc_counted(K_VALLOC, n, page_size());
}

HP_EXPORT void *pvalloc(size_t n)
{
	size_t ps = page_size(), rounded;

	if (n > SIZE_MAX - ps) {
		errno = ENOMEM;
		return NULL;
	}
	rounded = n ? (n + ps - 1) & ~(ps - 1) : ps;
	if (unlikely(!r_pvalloc)) {
		resolve();
		if (!r_pvalloc)
			return boot_alloc(4096, rounded);
	}
	if (likely(!*hp_gate))
		return r_pvalloc(n);
	/* What pvalloc hands out: whole pages (the same call to glibc). */
	return alloc_counted(K_PVALLOC, rounded, ps);
}

HP_EXPORT size_t malloc_usable_size(void *p)
{
	if (!p)
		return 0;
	if (unlikely(is_boot(p)))
		return boot_size(p);
	if (unlikely(!hp_real_usable)) {
		resolve();
		if (!hp_real_usable)
			return 0;
	}
	if (unlikely(__atomic_load_n(&hp_marks_made, __ATOMIC_RELAXED)) && hp_mark_matches(p))
		return marked_bytes8(p) - 8;
	return hp_real_usable(p);
}

/* Allocation for the library's own needs: never sampled or counted. */
void *hp_internal_alloc(size_t n)
{
	if (!r_malloc)
		resolve();
	return r_malloc ? r_malloc(n) : boot_alloc(16, n);
}
