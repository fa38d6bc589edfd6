// SPDX-License-Identifier: GPL-2.0
/*
 * The adaptive interval (HEAPPROFD_CFG_ADAPTIVE): when the daemon falls
 * behind, the process samples less instead of dropping records. The level
 * is a function of how full the ring is: below half full the configured
 * interval; above, one doubling per sixteenth of the ring, so a ring at
 * its allocation limit (fifteen sixteenths, record.c) samples at 2^8 times
 * the interval (4 KiB: 1 MiB, still fine enough for what matters: seed
 * 000's charts). Beyond that the client waits for room rather than sample
 * ever less: a profile of a handful of samples would not be worth having.
 * The level goes down again as soon as the ring has drained: it is a
 * reading of the ring, not a memory of the past.
 *
 * Why this keeps the estimates unbiased: every byte is sampled with
 * probability 1/I, I the interval of the countdown that covers it, and a
 * sample stands for I bytes (its record says which I). The level only
 * changes a thread's interval between allocations, after the bytes of the
 * allocation at hand were decided with the countdown that covered them,
 * and depends only on what happened before (the ring's fill): a new
 * countdown drawn then is as good as the rest of the old one (the draw is
 * memoryless). So E[sum of I over samples] is the bytes allocated,
 * whatever the level did meanwhile (Horvitz-Thompson with predictable
 * weights).
 *
 * The level is process-wide (one ring): producers update it from the
 * position their reservation reached, and the sampler's slow path, which
 * runs at least every HP_SLOW_EVERY bytes per thread, looks at the ring
 * again while the level is up and no sample was taken (the threads that
 * sample rarely are the ones that would otherwise keep a stale level).
 */
#include "client.h"

uint32_t hp_adapt_level;

/*
 * Unread bytes of the ring for a tail the caller read. head is looked up in
 * the shared line only when the producers' hint of it (a lower bound, so
 * an upper bound of the fill) says the ring may be over the first step:
 * the consumer stores head after every record, and pulling that line over
 * on every sample would cost more than the sample's own stores.
 */
static uint64_t fill_for(struct hp_ring *r, uint64_t tail)
{
	uint64_t head = __atomic_load_n(&r->head_hint, __ATOMIC_ACQUIRE);

	if (tail - head >= r->size / 2) {
		head = __atomic_load_n(&r->cons->head, __ATOMIC_ACQUIRE);
		__atomic_store_n(&r->head_hint, head, __ATOMIC_RELEASE);
	}
	/* A head past tail (a rewind in between, or nonsense): empty. */
	return tail - head > r->size ? 0 : tail - head;
}

static uint32_t level_of(uint64_t fill, uint64_t size)
{
	uint64_t start = size / 2, step = size / 16;
	uint64_t l;

	if (fill < start)
		return 0;
	l = 1 + (fill - start) / step;
	return l < HP_ADAPT_MAX_SHIFT ? (uint32_t)l : HP_ADAPT_MAX_SHIFT;
}

static void set_level(uint32_t l)
{
	if (__atomic_load_n(&hp_adapt_level, __ATOMIC_RELAXED) != l) {
		__atomic_store_n(&hp_adapt_level, l, __ATOMIC_RELAXED);
		hp_debug("adaptive: interval now %llu",
			 (unsigned long long)hp_adapt_interval(hp_cfg.interval));
	}
}

/* After a reservation (tail is then in the writer's cache), and on a slow
 * path without a sample while the level is up. */
void hp_adapt_note(void)
{
	struct hp_ring *r = &hp_sess.ring;

	if (!hp_sess.live || !(hp_cfg.flags & HEAPPROFD_CFG_ADAPTIVE) || hp_cfg.no_adapt)
		return;
	set_level(level_of(fill_for(r, __atomic_load_n(&r->prod->tail, __ATOMIC_RELAXED)),
			   r->size));
}

void hp_adapt_reset(void)
{
	__atomic_store_n(&hp_adapt_level, 0, __ATOMIC_RELAXED);
}
