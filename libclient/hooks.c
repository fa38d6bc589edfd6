// SPDX-License-Identifier: GPL-2.0
/*
 * The malloc family, interposed by symbol (LD_PRELOAD). The real functions
 * are found with dlsym(RTLD_NEXT); allocations made while dlsym runs (it may
 * allocate) are served from a static bootstrap arena. A block from the arena
 * is never freed (free is a no-op), reports its size through
 * malloc_usable_size and is copied out by realloc.
 *
 * The common path of malloc is: call the real malloc, read the gate, two
 * thread-local additions, one thread-local subtraction and a branch. free:
 * the gate, two thread-local additions, malloc_usable_size for the exact
 * byte counter and one byte of the free filter (freeset.h). No lock, no
 * system call, no write to a shared cache line.
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
#include "internal.h"

__thread struct hp_thread hp_self HP_TLS;
struct hp_freeset hp_fs_malloc;

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
					      __ATOMIC_ACQ_REL, __ATOMIC_RELAXED));
	*(size_t *)(boot_arena + off - BOOT_HDR) = n;
	return boot_arena + off;	/* static, hence zeroed, never reused */
}

static size_t boot_size(const void *p)
{
	return *(const size_t *)((const uint8_t *)p - BOOT_HDR);
}

#define RESOLVE(var, name) \
	__atomic_store_n(&var, (__typeof__(var))dlsym(RTLD_NEXT, name), __ATOMIC_RELEASE)

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
	t->interval_gen = __atomic_load_n(&hp_interval_gen, __ATOMIC_ACQUIRE);
	hp_sampler_init(&t->smp, __atomic_load_n(&hp_interval_eff, __ATOMIC_RELAXED),
			seed);
	t->inited = 1;
	hp_counters_register(t);
}

/* ---- the sampled path --------------------------------------------------- */

static void record(void *p, size_t n, uint32_t count, int exact)
{
	uint64_t est = exact ? n : (uint64_t)count * hp_self.smp.interval;

	if (hp_write_alloc(p, n, hp_real_usable(p), est,
			   hp_self.smp.interval, count, HEAPPROFD_HEAP_MALLOC,
			   exact))
		return;
	/* Only addresses the daemon knows are remembered. */
	hp_freeset_insert(&hp_fs_malloc, (uint64_t)(uintptr_t)p);
}

__attribute__((noinline, cold)) static void slow_alloc(struct hp_thread *t,
							void *p, size_t n)
{
	uint32_t count = 0, gen;
	int exact = 0;

	if (t->in_hook || t->resolving)
		return;		/* our own allocation: never sampled */
	t->in_hook = 1;
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
		hp_thread_init(t);
		count = hp_sampler_account(&t->smp, n, &exact);
	} else {
		if (!(t->alloc_calls % HP_PUBLISH_EVERY))
			hp_counters_publish(t);
		gen = __atomic_load_n(&hp_interval_gen, __ATOMIC_ACQUIRE);
		if (gen != t->interval_gen) {
			/* A new interval: redraw (memoryless), then account. */
			t->interval_gen = gen;
			hp_sampler_set_interval(&t->smp,
				__atomic_load_n(&hp_interval_eff, __ATOMIC_RELAXED));
			count = hp_sampler_account(&t->smp, n, &exact);
		} else if (t->smp.countdown <= 0) {
			count = hp_sampler_slow(&t->smp, n, &exact);
		}
	}
	if (count && *hp_gate)
		record(p, n, count, exact);
	t->in_hook = 0;
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

static inline size_t usable_of(void *p)
{
	if (likely(glibc_heap)) {
		size_t h = ((const size_t *)p)[-1];

		return (h & ~(size_t)7) - (h & 2 ? 16 : 8);
	}
	return hp_real_usable(p);
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

	if (r_malloc && hp_real_usable && dladdr((void *)r_malloc, &di) &&
	    di.dli_fname && strstr(di.dli_fname, "/libc.so.6")) {
		/* Check the header reading against the real thing once. */
		void *p = r_malloc(100), *q = r_malloc(300000);

		glibc_heap = p && q && usable_size_ok(p) && usable_size_ok(q);
		r_free(p);
		r_free(q);
	}
}

static inline void account_alloc(void *p, size_t n)
{
	struct hp_thread *t = &hp_self;

	t->alloc_calls++;
	t->alloc_bytes += usable_of(p);
	if (unlikely((t->smp.countdown -= (int64_t)n) <= 0) ||
	    unlikely(!(t->alloc_calls % HP_PUBLISH_EVERY)))
		slow_alloc(t, p, n);
}

__attribute__((noinline, cold)) static void slow_free(void *p)
{
	struct hp_thread *t = &hp_self;
	int guard = t->in_hook;

	t->in_hook = 1;
	if (hp_freeset_remove(&hp_fs_malloc, (uint64_t)(uintptr_t)p))
		hp_write_free(p, HEAPPROFD_HEAP_MALLOC, hp_next_seq());
	t->in_hook = guard;
}

/* Everything a free does besides handing the block back. */
static inline void account_free(void *p)
{
	struct hp_thread *t = &hp_self;

	t->free_calls++;
	t->free_bytes += usable_of(p);
	if (unlikely(hp_freeset_maybe(&hp_fs_malloc, (uint64_t)(uintptr_t)p)))
		slow_free(p);
}

/*
 * realloc of a block while profiling: a free of the old block, then an
 * allocation, but only once the real realloc succeeded, so a failed
 * realloc leaves the old block tracked as it was. The FREE record's seq is
 * taken before the real realloc can give the old address back to the
 * allocator: a sample of that address by another thread afterwards has a
 * larger seq, whatever the order of the records in the ring. Until our
 * remove, that sample's insert may put the address into the free set a
 * second time (the set counts each insert; freeset.h).
 */
__attribute__((noinline)) static void *realloc_tracked(void *old, size_t n)
{
	struct hp_thread *t = &hp_self;
	size_t old_usable = usable_of(old);
	uint64_t seq = 0;
	void *p;

	if (unlikely(hp_freeset_maybe(&hp_fs_malloc, (uint64_t)(uintptr_t)old)))
		seq = hp_next_seq();
	p = r_realloc(old, n);
	/* glibc frees the block and returns NULL for size 0. */
	if (!p && n)
		return NULL;
	t->free_calls++;
	t->free_bytes += old_usable;
	if (unlikely(seq)) {
		int guard = t->in_hook;

		t->in_hook = 1;
		if (hp_freeset_remove(&hp_fs_malloc, (uint64_t)(uintptr_t)old))
			hp_write_free(old, HEAPPROFD_HEAP_MALLOC, seq);
		t->in_hook = guard;
	}
	if (p)
		account_alloc(p, n);
	return p;
}

/* ---- the interposed functions ------------------------------------------ */

/* The paths with the gate open, out of line so that the closed-gate paths
 * need no stack frame. */
__attribute__((noinline)) static void *malloc_profiled(void *(*rm)(size_t), size_t n)
{
	void *p = rm(n);

	if (likely(p))
		account_alloc(p, n);
	return p;
}

__attribute__((noinline)) static void free_profiled(void (*rf)(void *), void *p)
{
	if (p)
		account_free(p);
	rf(p);
}

__attribute__((noinline, cold)) static void *malloc_unresolved(size_t n)
{
	resolve();
	return r_malloc ? malloc(n) : boot_alloc(16, n);
}

/*
 * The closed gate is checked before the real call so that the common case
 * is a tail call: no frame, no work after the allocator returns.
 */
HP_EXPORT void *malloc(size_t n)
{
	void *(*rm)(size_t) = r_malloc;

	if (unlikely(!rm))
		return malloc_unresolved(n);
	if (likely(!*hp_gate))
		return rm(n);
	return malloc_profiled(rm, n);
}

__attribute__((noinline, cold)) static void free_unusual(void *p)
{
	if (is_boot(p) || !p)
		return;
	if (!r_free) {
		resolve();
		if (!r_free)
			return;	/* cannot happen after dlsym; leak rather than crash */
	}
	free(p);
}

HP_EXPORT void free(void *p)
{
	void (*rf)(void *) = r_free;

	/* free(NULL) is passed on: the real free accepts it. */
	if (unlikely(!rf) || unlikely(is_boot(p)))
		return free_unusual(p);
	if (unlikely(*hp_gate))
		return free_profiled(rf, p);
	rf(p);
}

HP_EXPORT void *calloc(size_t nmemb, size_t size)
{
	size_t n;
	void *p;

	if (__builtin_mul_overflow(nmemb, size, &n)) {
		errno = ENOMEM;
		return NULL;
	}
	if (unlikely(!r_calloc)) {
		resolve();
		if (!r_calloc)
			return boot_alloc(16, n);
	}
	p = r_calloc(nmemb, size);
	if (likely(!*hp_gate) || unlikely(!p))
		return p;
	account_alloc(p, n);
	return p;
}

HP_EXPORT void *realloc(void *old, size_t n)
{
	void *p;

	if (unlikely(is_boot(old))) {
		size_t m = boot_size(old);

		p = malloc(n ? n : 1);
		if (p)
			memcpy(p, old, m < n ? m : n);
		return p;
	}
	if (unlikely(!r_realloc)) {
		resolve();
		if (!r_realloc)
			return old ? NULL : boot_alloc(16, n);
	}
	if (likely(!*hp_gate))
		return r_realloc(old, n);
	if (!old) {
		p = r_realloc(old, n);
		if (p)
			account_alloc(p, n);
		return p;
	}
	return realloc_tracked(old, n);
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
	void *p;

	if (unlikely(!r_memalign)) {
		resolve();
		if (!r_memalign)
			return boot_alloc(align, n);
	}
	p = r_memalign(align, n);
	if (likely(!*hp_gate) || unlikely(!p))
		return p;
	account_alloc(p, n);
	return p;
}

HP_EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
	void *p;
	int ret;

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
	ret = r_posix_memalign(&p, align, n);
	if (ret)
		return ret;
	*out = p;
	if (unlikely(*hp_gate))
		account_alloc(p, n);
	return 0;
}

HP_EXPORT void *aligned_alloc(size_t align, size_t n)
{
	void *p;

	if (unlikely(!r_aligned_alloc)) {
		resolve();
		if (!r_aligned_alloc)
			return boot_alloc(align, n);
	}
	p = r_aligned_alloc(align, n);
	if (likely(!*hp_gate) || unlikely(!p))
		return p;
	account_alloc(p, n);
	return p;
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
	void *p;

	if (unlikely(!r_valloc)) {
		resolve();
		if (!r_valloc)
			return boot_alloc(4096, n);
	}
	p = r_valloc(n);
	if (likely(!*hp_gate) || unlikely(!p))
		return p;
	account_alloc(p, n);
	return p;
}

HP_EXPORT void *pvalloc(size_t n)
{
	size_t ps = page_size(), rounded;
	void *p;

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
	p = r_pvalloc(n);
	if (likely(!*hp_gate) || unlikely(!p))
		return p;
	account_alloc(p, rounded);
	return p;
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
	return hp_real_usable(p);
}

/* Allocation for the library's own needs: never sampled or counted. */
void *hp_internal_alloc(size_t n)
{
	if (!r_malloc)
		resolve();
	return r_malloc ? r_malloc(n) : boot_alloc(16, n);
}
