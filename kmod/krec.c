// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel records: what the module itself adds to a session (DMA-BUF
 * exports and their releases), queued per session and read(2) from the
 * consumer fd.
 *
 * They never enter the shared ring: the producer may write anything there
 * at any time, and a record the kernel vouches for must be neither
 * forgeable nor corruptible by it. The daemon reads copies.
 *
 * The queue is a separate, reference-counted object (struct hp_kq) rather
 * than part of the session because a buffer outlives the call that
 * exported it: its release may come from any process, in a context that
 * may not sleep, after the session is gone. Everything here is therefore
 * safe in atomic context: a spinlock taken with interrupts off, no
 * allocation, and a last reference that only frees memory.
 *
 * The queue holds at most HP_KQ_MAX_BYTES; what does not fit is counted
 * and reported by the next HEAPPROFD_REC_KLOST record the consumer reads.
 */
#include <linux/poll.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include "compat.h"
#include "heapprofd_kmod.h"

/**
 * hp_krec_alloc() - allocate a queue item for @len bytes of records
 * @len: bytes, a multiple of HEAPPROFD_REC_ALIGN
 * @gfp: allocation flags
 *
 * Return: the item (its data zeroed), or NULL.
 */
struct hp_krec *hp_krec_alloc(size_t len, gfp_t gfp)
{
	struct hp_krec *r;

	if (WARN_ON_ONCE(len % HEAPPROFD_REC_ALIGN))
		return NULL;
	r = kzalloc(struct_size(r, data, len), gfp);
	if (r)
		r->len = len;
	return r;
}
EXPORT_SYMBOL_NS_GPL(hp_krec_alloc, HEAPPROFD_NS);

/**
 * hp_kq_create() - a queue for a new session
 * @wq: the session's wait queue, woken when records arrive
 *
 * Return: the queue with one reference (the session's), or NULL.
 */
struct hp_kq *hp_kq_create(wait_queue_head_t *wq)
{
	struct hp_kq *q = kzalloc(sizeof(*q), GFP_KERNEL_ACCOUNT);

	if (!q)
		return NULL;
	kref_init(&q->ref);
	spin_lock_init(&q->lock);
	INIT_LIST_HEAD(&q->items);
	q->wq = wq;
	return q;
}
EXPORT_SYMBOL_NS_GPL(hp_kq_create, HEAPPROFD_NS);

static void hp_kq_free(struct kref *ref)
{
	struct hp_kq *q = container_of(ref, struct hp_kq, ref);
	struct hp_krec *r, *tmp;

	list_for_each_entry_safe(r, tmp, &q->items, node)
		kfree(r);
	kfree(q);
}

void hp_kq_get(struct hp_kq *q)
{
	kref_get(&q->ref);
}
EXPORT_SYMBOL_NS_GPL(hp_kq_get, HEAPPROFD_NS);

/* Any context: the last reference only frees memory. */
void hp_kq_put(struct hp_kq *q)
{
	if (q)
		kref_put(&q->ref, hp_kq_free);
}
EXPORT_SYMBOL_NS_GPL(hp_kq_put, HEAPPROFD_NS);

/**
 * hp_kq_close() - the session is being freed: queue nothing more
 * @q: its queue
 *
 * Buffers that still hold the queue may try to add their release; it is
 * dropped. Drops the session's reference.
 */
void hp_kq_close(struct hp_kq *q)
{
	unsigned long flags;

	spin_lock_irqsave(&q->lock, flags);
	q->closed = true;
	q->wq = NULL;
	spin_unlock_irqrestore(&q->lock, flags);
	hp_kq_put(q);
}
EXPORT_SYMBOL_NS_GPL(hp_kq_close, HEAPPROFD_NS);

/**
 * hp_kq_push() - queue an item, or count it as lost
 * @q: the queue
 * @r: the item; the queue owns it from here on (freed if it is dropped)
 * @est_bytes: what the item's ALLOC record stands for, for the lost count
 *
 * Any context.
 *
 * Return: true if queued.
 */
bool hp_kq_push(struct hp_kq *q, struct hp_krec *r, u64 est_bytes)
{
	unsigned long flags;
	bool queued = false;

	spin_lock_irqsave(&q->lock, flags);
	if (!q->closed && q->bytes + r->len <= HP_KQ_MAX_BYTES) {
		list_add_tail(&r->node, &q->items);
		q->bytes += r->len;
		queued = true;
		if (q->wq)
			wake_up_interruptible_poll(q->wq, EPOLLIN | EPOLLRDNORM);
	} else if (!q->closed) {
		q->lost_records++;
		q->lost_bytes += est_bytes;
	}
	spin_unlock_irqrestore(&q->lock, flags);
	if (!queued)
		kfree(r);
	return queued;
}
EXPORT_SYMBOL_NS_GPL(hp_kq_push, HEAPPROFD_NS);

/**
 * hp_kq_lost() - count a record that could not even be built
 * @q: the queue
 * @est_bytes: what it would have stood for
 */
void hp_kq_lost(struct hp_kq *q, u64 est_bytes)
{
	unsigned long flags;

	spin_lock_irqsave(&q->lock, flags);
	if (!q->closed) {
		q->lost_records++;
		q->lost_bytes += est_bytes;
	}
	spin_unlock_irqrestore(&q->lock, flags);
}

/* The next kernel sequence number of the session. */
u64 hp_kq_next_seq(struct hp_kq *q)
{
	return atomic64_inc_return(&q->seq);
}

/**
 * hp_kq_pending() - does a read(2) have something to return?
 * @q: the queue
 *
 * Return: true while items or a lost count wait.
 */
bool hp_kq_pending(struct hp_kq *q)
{
	unsigned long flags;
	bool pending;

	spin_lock_irqsave(&q->lock, flags);
	pending = !list_empty(&q->items) || q->lost_records;
	spin_unlock_irqrestore(&q->lock, flags);
	return pending;
}
EXPORT_SYMBOL_NS_GPL(hp_kq_pending, HEAPPROFD_NS);

/**
 * hp_kq_read() - read(2) on a consumer fd
 * @q: the session's queue
 * @buf: user buffer
 * @count: its size
 *
 * Whole items only, in order; a pending lost count first, as a
 * HEAPPROFD_REC_KLOST record. Items are taken off the queue before they are
 * copied: if the copy faults they are gone (the consumer's own doing).
 *
 * Return: bytes read, -EAGAIN when nothing is queued, -EINVAL when the
 * first item does not fit, -EFAULT.
 */
ssize_t hp_kq_read(struct hp_kq *q, char __user *buf, size_t count)
{
	struct heapprofd_rec_klost lost = { };
	struct hp_krec *r, *tmp;
	unsigned long flags;
	LIST_HEAD(batch);
	size_t done = 0, taken = 0;
	int ret = 0;

	spin_lock_irqsave(&q->lock, flags);
	if (q->lost_records && count >= sizeof(lost)) {
		lost.hdr.len = sizeof(lost);
		lost.hdr.type = HEAPPROFD_REC_KLOST;
		lost.records = q->lost_records;
		lost.bytes = q->lost_bytes;
		q->lost_records = 0;
		q->lost_bytes = 0;
		taken = sizeof(lost);
	}
	list_for_each_entry_safe(r, tmp, &q->items, node) {
		if (r->len > count - taken)
			break;
		list_move_tail(&r->node, &batch);
		q->bytes -= r->len;
		taken += r->len;
	}
	if (!taken)
		ret = list_empty(&q->items) ? -EAGAIN : -EINVAL;
	spin_unlock_irqrestore(&q->lock, flags);
	if (ret)
		return ret;

	if (lost.hdr.len) {
		if (copy_to_user(buf, &lost, sizeof(lost)))
			ret = -EFAULT;
		done = sizeof(lost);
	}
	list_for_each_entry_safe(r, tmp, &batch, node) {
		if (!ret && copy_to_user(buf + done, r->data, r->len))
			ret = -EFAULT;
		done += r->len;
		kfree(r);
	}
	return ret ? ret : done;
}
