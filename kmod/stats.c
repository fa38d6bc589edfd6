// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofd statistics: global counters and reading what user space wrote
 * into a control page.
 *
 * The producer and consumer positions and the drop counters live in memory
 * both processes can write. The kernel reads each field exactly once
 * (READ_ONCE), then makes the copies consistent (the consumer can never be
 * ahead of the producer) and adds with saturation, so nothing a process
 * writes there can make a total wrap or go backwards within one read.
 */
#include <linux/compiler.h>
#include <linux/limits.h>
#include <linux/module.h>

#include "compat.h"
#include "heapprofd_kmod.h"

struct hp_stats hp_stats;

/**
 * hp_sat_add() - add two counters, sticking at U64_MAX
 * @a: first addend
 * @b: second addend
 *
 * Return: a + b, or U64_MAX if that overflows.
 */
u64 hp_sat_add(u64 a, u64 b)
{
	u64 sum;

	if (check_add_overflow(a, b, &sum))
		return U64_MAX;
	return sum;
}
EXPORT_SYMBOL_NS_GPL(hp_sat_add, HEAPPROFD_NS);

/**
 * hp_snap_read() - read the counters of a control page once
 * @ctl: the control area (shared with user space)
 * @g: its geometry, from the kernel's own copy
 * @s: filled with consistent values
 */
void hp_snap_read(const void *ctl, const struct hp_geom *g, struct hp_snap *s)
{
	const struct heapprofd_producer *p = ctl + g->off_producer;
	const struct heapprofd_consumer *c = ctl + g->off_consumer;
	const struct heapprofd_counters *n = ctl + g->off_counters;

	s->produced = READ_ONCE(p->tail);
	s->consumed = min(READ_ONCE(c->head), s->produced);
	s->records_dropped = READ_ONCE(n->records_dropped);
	s->bytes_dropped = READ_ONCE(n->bytes_dropped);
}
EXPORT_SYMBOL_NS_GPL(hp_snap_read, HEAPPROFD_NS);

/**
 * hp_snap_add() - add one session's snapshot to a total, saturating
 * @acc: the total
 * @s: the snapshot
 */
void hp_snap_add(struct hp_snap *acc, const struct hp_snap *s)
{
	acc->produced = hp_sat_add(acc->produced, s->produced);
	acc->consumed = hp_sat_add(acc->consumed, s->consumed);
	acc->records_dropped = hp_sat_add(acc->records_dropped,
					  s->records_dropped);
	acc->bytes_dropped = hp_sat_add(acc->bytes_dropped, s->bytes_dropped);
}
EXPORT_SYMBOL_NS_GPL(hp_snap_add, HEAPPROFD_NS);
