// SPDX-License-Identifier: GPL-2.0
/*
 * Custom heaps (include/heapprofd_client.h): an allocator registers a named
 * heap with its own interval and reports its allocations and frees. Each
 * heap has one sampler shared by all threads behind a mutex: custom
 * allocators report far less often than malloc runs, and the per-thread
 * state for up to 240 heaps would not pay for itself.
 *
 * Addresses of different heaps may coincide (a pool's first object is at the
 * address of the malloc block that holds the pool), so the set of sampled
 * live objects of custom heaps is separate from malloc's and keyed by
 * address and heap together.
 */
#include <string.h>

#include "freeset.h"
#include "client.h"
#include "stack.h"
#include "include/heapprofd_client.h"

struct hp_heap {
	char name[32];
	uint64_t interval;	/* 0: follow the malloc interval */
	struct hp_sampler smp;
	pthread_mutex_t lock;
};

static struct hp_heap heaps[HEAPPROFD_HEAP_MAX + 1];
static int next_heap = HEAPPROFD_HEAP_USER;
static pthread_mutex_t heaps_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hp_freeset hp_fs_custom;

static uint64_t heap_key(uint32_t heap, const void *addr)
{
	return (uint64_t)(uintptr_t)addr ^ ((uint64_t)heap << 56);
}

HP_EXPORT int heapprofd_register_heap(const char *name, uint64_t interval)
{
	struct hp_thread *t = &hp_self;
	struct hp_heap *h;
	int id, guard = t->in_hook;

	if (!name || !*name)
		return -1;
	pthread_mutex_lock(&heaps_lock);
	if (next_heap > HEAPPROFD_HEAP_MAX) {
		pthread_mutex_unlock(&heaps_lock);
		return -1;
	}
	id = next_heap++;
	h = &heaps[id];
	strncpy(h->name, name, sizeof(h->name) - 1);
	h->interval = interval;
	pthread_mutex_init(&h->lock, NULL);
	hp_sampler_init(&h->smp, interval ? interval : hp_cfg.interval,
			hp_cfg.have_seed ? hp_cfg.seed ^ (uint64_t)id :
			(uint64_t)(uintptr_t)h ^ (uint64_t)id << 40);
	pthread_mutex_unlock(&heaps_lock);
	t->in_hook = 1;
	hp_write_heap((uint32_t)id, interval ? interval : hp_cfg.interval, h->name);
	t->in_hook = guard;
	return id;
}

static struct hp_heap *get_heap(int id)
{
	if (id < HEAPPROFD_HEAP_USER || id > HEAPPROFD_HEAP_MAX)
		return NULL;
	if (id >= __atomic_load_n(&next_heap, __ATOMIC_ACQUIRE))
		return NULL;
	return &heaps[id];
}

HP_EXPORT void heapprofd_report_alloc(int heap, const void *addr, size_t size)
{
	struct hp_thread *t = &hp_self;
	struct hp_count_snap snap;
	struct hp_heap *h;
	/* Only the registers the record uses: this frame is the first the
	 * stack copy takes in (hooks.c keeps them in TLS instead; here a
	 * signal handler may report into another heap meanwhile). */
	uint64_t interval, want, regs[HEAPPROFD_NREGS_NATIVE];
	uint32_t count;
	int exact, guard;

	if (likely(!*hp_gate) || !(h = get_heap(heap)))
		return;
	pthread_mutex_lock(&h->lock);
	/* Decided at the interval that covered these bytes; a new one (the
	 * daemon's, or adaptive) only for the bytes to come (hooks.c, decide). */
	count = hp_sampler_account(&h->smp, size, &exact);
	interval = h->smp.interval;
	want = hp_adapt_interval(h->interval ? h->interval :
				 __atomic_load_n(&hp_interval_base, __ATOMIC_RELAXED));
	if (want != h->smp.interval)
		hp_sampler_set_interval(&h->smp, want);
	pthread_mutex_unlock(&h->lock);
	if (!count || hp_heap_off((uint32_t)heap))
		return;
	guard = t->in_hook;
	t->in_hook = 1;
	hp_count_save(t, &snap);
	hp_regs_capture(regs);
	if (!hp_write_alloc(addr, size, size, exact ? size : count * interval,
			    interval, count, (uint32_t)heap, exact, regs))
		hp_freeset_insert(&hp_fs_custom, heap_key((uint32_t)heap, addr));
	hp_count_restore(t, &snap);
	t->in_hook = guard;
}

HP_EXPORT void heapprofd_report_free(int heap, const void *addr)
{
	struct hp_thread *t = &hp_self;
	uint64_t key;
	int guard;

	if (likely(!*hp_gate) || !get_heap(heap))
		return;
	key = heap_key((uint32_t)heap, addr);
	if (!hp_freeset_maybe(&hp_fs_custom, key))
		return;
	guard = t->in_hook;
	t->in_hook = 1;
	if (hp_freeset_remove(&hp_fs_custom, key))
		hp_write_free(addr, (uint32_t)heap, hp_next_seq());
	t->in_hook = guard;
}

/* A new session: tell the daemon about every heap registered so far. */
void hp_heaps_announce(void)
{
	int id, n = __atomic_load_n(&next_heap, __ATOMIC_ACQUIRE);

	for (id = HEAPPROFD_HEAP_USER; id < n; id++)
		hp_write_heap((uint32_t)id,
			      heaps[id].interval ? heaps[id].interval : hp_cfg.interval,
			      heaps[id].name);
}

void hp_heaps_lock(int lock)
{
	if (lock) {
		pthread_mutex_lock(&heaps_lock);
		pthread_mutex_lock(&hp_fs_custom.lock);
	} else {
		pthread_mutex_unlock(&hp_fs_custom.lock);
		pthread_mutex_unlock(&heaps_lock);
	}
}

void hp_heaps_fork_child(void)
{
	int id;

	pthread_mutex_init(&heaps_lock, NULL);
	hp_freeset_reset(&hp_fs_custom);
	for (id = HEAPPROFD_HEAP_USER; id < next_heap; id++)
		pthread_mutex_init(&heaps[id].lock, NULL);
}
