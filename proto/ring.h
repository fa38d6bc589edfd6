/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The heapprofd ring protocol (uapi/linux/heapprofd.h), both ends, as
 * header-only inline functions: the client is the producer, the daemon and
 * the tests are the consumer. Keeping both ends in one file keeps them in
 * step.
 *
 * Trust: each side copies what it needs out of the control area once
 * (hp_ring_open) and never re-reads geometry from shared memory. The consumer
 * keeps its own head; positions read from shared memory are checked before
 * they are used to index the data area.
 */
#ifndef HEAPPROFD_RING_H
#define HEAPPROFD_RING_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../uapi/linux/heapprofd.h"

struct hp_ring {
	struct heapprofd_ctl *ctl;
	struct heapprofd_producer *prod;
	struct heapprofd_consumer *cons;
	struct heapprofd_kstate *kstate;
	struct heapprofd_counters *cnt;
	struct heapprofd_config *cfg;
	uint8_t *data;		/* data area; mapped twice back to back */
	uint64_t size;		/* private copies, never re-read */
	uint64_t mask;
	uint32_t ctl_size;
	uint64_t chead;		/* consumer: its own head */
	uint64_t ctail;		/* consumer: tail as last read (a lower bound) */
	uint64_t head_hint;	/* producers: head as last read (a lower bound) */
	uint64_t cbehind;	/* consumer: what it last stored in cons->behind */
	void *map;		/* whole mapping */
	size_t map_len;
};

/* The layout this implementation creates (readers use the offsets table). */
#define HP_OFF_PRODUCER	256U
#define HP_OFF_CONSUMER	384U
#define HP_OFF_KSTATE	512U
#define HP_OFF_COUNTERS	640U
#define HP_OFF_CONFIG	896U

/*
 * Limits both ends keep. A data area is at most HP_RING_SIZE_MAX (the
 * module's own default cap: a daemon maps and may pin that much per
 * session). A producer copies at most HP_STACK_CAP_MAX bytes of stack, so
 * no record is longer than HP_REC_LEN_MAX; the consumer treats a longer
 * one as corruption rather than copying it.
 */
#define HP_RING_SIZE_MAX	(64ULL << 20)
#define HP_STACK_CAP_MAX	(8U << 20)
#define HP_REC_LEN_MAX		(sizeof(struct heapprofd_rec_alloc) + HP_STACK_CAP_MAX)

/* The commit word: len and stamp as one 64-bit value, in struct byte order. */
union hp_commit {
	struct {
		uint32_t len;
		uint32_t stamp;
	};
	uint64_t word;
};

static inline uint64_t hp_commit_word(uint32_t len, uint32_t stamp)
{
	union hp_commit c = { .len = len, .stamp = stamp };

	return c.word;
}

static inline uint32_t hp_ring_align(uint32_t len)
{
	return (len + HEAPPROFD_REC_ALIGN - 1) & ~(HEAPPROFD_REC_ALIGN - 1);
}

static inline int hp_is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* Does [off, off + len) lie inside the control area, suitably aligned? */
static inline int hp_ctl_part_ok(uint32_t off, size_t len, uint32_t ctl_size)
{
	return off >= sizeof(struct heapprofd_ctl) && off % 64 == 0 &&
	       (uint64_t)off + len <= ctl_size;
}

/*
 * Lay out a fresh control area (user-space transport and tests; the kernel
 * module does the same for its rings). ctl must be zeroed.
 */
static inline void hp_ring_format(void *ctl_area, uint32_t ctl_size,
				  uint64_t data_size, uint64_t session_id,
				  uint32_t flags)
{
	struct heapprofd_ctl *c = ctl_area;
	struct heapprofd_config *cfg;

	c->magic = HEAPPROFD_CTL_MAGIC;
	c->version = HEAPPROFD_ABI_VERSION;
	c->header_size = sizeof(*c);
	c->ctl_size = ctl_size;
	c->data_size = data_size;
	c->data_offset = ctl_size;
	c->session_id = session_id;
	c->flags = flags;
	c->off.producer = HP_OFF_PRODUCER;
	c->off.consumer = HP_OFF_CONSUMER;
	c->off.kstate = HP_OFF_KSTATE;
	c->off.counters = HP_OFF_COUNTERS;
	c->off.config = HP_OFF_CONFIG;
	c->off.kring = 0;
	cfg = (struct heapprofd_config *)((uint8_t *)c + HP_OFF_CONFIG);
	cfg->interval = HEAPPROFD_INTERVAL_DEFAULT;
	cfg->stack_cap = HEAPPROFD_STACK_CAP_DEFAULT;
	cfg->enabled = 1;
}

/*
 * Check the control header of a mapping of map_len bytes and fill r.
 * Returns 0, -EPROTONOSUPPORT if it is a ring of another ABI version, or
 * -EINVAL if the header is not one we can trust to index with.
 */
static inline int hp_ring_open(struct hp_ring *r, void *map, size_t map_len)
{
	volatile struct heapprofd_ctl *vc = map;
	struct heapprofd_ctl c;
	uint8_t *base = map;
	uint64_t head, tail;

	memset(r, 0, sizeof(*r));
	if (map_len < sizeof(c))
		return -EINVAL;
	/* One copy; from here on only the copy is used. */
	memcpy(&c, (const void *)vc, sizeof(c));
	if (c.magic != HEAPPROFD_CTL_MAGIC)
		return -EINVAL;
	if (c.version != HEAPPROFD_ABI_VERSION)
		return -EPROTONOSUPPORT;	/* a ring of another release */
	if (c.header_size < sizeof(c) || c.ctl_size < c.header_size ||
	    c.ctl_size > (1U << 20) || c.ctl_size % 64)
		return -EINVAL;
	if (!hp_is_pow2(c.data_size) || c.data_size < HEAPPROFD_DATA_SIZE_MIN ||
	    c.data_size > (1ULL << 40) || c.data_offset != c.ctl_size)
		return -EINVAL;
	if (map_len < c.ctl_size + 2 * c.data_size)
		return -EINVAL;
	if (!hp_ctl_part_ok(c.off.producer, sizeof(*r->prod), c.ctl_size) ||
	    !hp_ctl_part_ok(c.off.consumer, sizeof(*r->cons), c.ctl_size) ||
	    !hp_ctl_part_ok(c.off.kstate, sizeof(*r->kstate), c.ctl_size) ||
	    !hp_ctl_part_ok(c.off.counters, sizeof(*r->cnt), c.ctl_size) ||
	    !hp_ctl_part_ok(c.off.config, sizeof(*r->cfg), c.ctl_size))
		return -EINVAL;

	r->map = map;
	r->map_len = map_len;
	r->ctl = map;
	r->ctl_size = c.ctl_size;
	r->prod = (struct heapprofd_producer *)(base + c.off.producer);
	r->cons = (struct heapprofd_consumer *)(base + c.off.consumer);
	r->kstate = (struct heapprofd_kstate *)(base + c.off.kstate);
	r->cnt = (struct heapprofd_counters *)(base + c.off.counters);
	r->cfg = (struct heapprofd_config *)(base + c.off.config);
	r->data = base + c.data_offset;
	r->size = c.data_size;
	r->mask = c.data_size - 1;

	head = __atomic_load_n(&r->cons->head, __ATOMIC_ACQUIRE);
	tail = __atomic_load_n(&r->prod->tail, __ATOMIC_ACQUIRE);
	if (tail - head > r->size)
		return -EINVAL;
	r->chead = head;
	r->ctail = head;
	r->head_hint = head;
	return 0;
}

/*
 * Map a ring fd. A module session fd is mapped with one call; a memfd of the
 * user-space transport holds ctl + data once, so its data part is mapped a
 * second time right after the first. Returns the mapping or MAP_FAILED.
 */
static inline void *hp_ring_map_fd(int fd, int is_memfd, uint32_t ctl_size,
				   uint64_t data_size, size_t *len_out)
{
	size_t len = (size_t)ctl_size + 2 * (size_t)data_size;
	uint8_t *base, *p;

	*len_out = len;
	if (!is_memfd)
		return mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return MAP_FAILED;
	p = mmap(base, ctl_size + data_size, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	p = mmap(base + ctl_size + data_size, data_size, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_FIXED, fd, ctl_size);
	if (p == MAP_FAILED)
		goto fail;
	return base;
fail:
	munmap(base, len);
	return MAP_FAILED;
}

/* ------------------------------------------------------------------------ */
/* Producer                                                                  */
/* ------------------------------------------------------------------------ */

/*
 * Reserve len bytes (rounded up to the alignment) and mark the record busy,
 * leaving at least keep bytes of the ring free for others (a record that
 * could never fit with that much kept needs only the whole ring). Returns
 * the record, its header filled in and the rest to be written, or NULL if
 * it does not fit (the caller counts the drop) or the consumer's head is
 * nonsense. Lock-free: concurrent producers race on tail with CAS.
 */
static inline struct heapprofd_rec_hdr *
hp_ring_reserve_keep(struct hp_ring *r, uint32_t len, uint16_t type, uint64_t keep)
{
	struct heapprofd_rec_hdr *h;
	uint64_t t, head, room;

	len = hp_ring_align(len);
	if (len < sizeof(*h) || len > r->size || len > HEAPPROFD_REC_LEN_MASK)
		return NULL;
	room = keep < r->size - len ? r->size - keep : r->size;
	t = __atomic_load_n(&r->prod->tail, __ATOMIC_RELAXED);
	do {
		/*
		 * head only grows, so an old value can only make the ring look
		 * fuller than it is: the shared head (a line the consumer
		 * writes after every record) is read only when the hint says
		 * the record might not fit.
		 */
		/*
		 * Acquire/release on the hint too: the producer that read head
		 * passes on the consumer's zeroing of the space below it
		 * (otherwise another thread could write there before those
		 * zeroes are visible to it, on a weakly ordered machine).
		 */
		head = __atomic_load_n(&r->head_hint, __ATOMIC_ACQUIRE);
		if (t - head > r->size || t + len - head > room) {
			head = __atomic_load_n(&r->cons->head, __ATOMIC_ACQUIRE);
			__atomic_store_n(&r->head_hint, head, __ATOMIC_RELEASE);
			if (t - head > r->size)	/* also catches head > t */
				return NULL;
			if (t + len - head > room)
				return NULL;
		}
	} while (!__atomic_compare_exchange_n(&r->prod->tail, &t, t + len, 1,
					      __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));

	h = (struct heapprofd_rec_hdr *)(r->data + (t & r->mask));
	__atomic_store_n((uint64_t *)h,
			 hp_commit_word(len | HEAPPROFD_REC_BUSY, HEAPPROFD_REC_STAMP(t)),
			 __ATOMIC_RELAXED);
	h->type = type;
	h->flags = 0;
	h->resv = 0;
	return h;
}

/* Reserve with nothing kept back: the record may fill the ring. */
static inline struct heapprofd_rec_hdr *
hp_ring_reserve(struct hp_ring *r, uint32_t len, uint16_t type)
{
	return hp_ring_reserve_keep(r, len, type, 0);
}

/*
 * Publish a reserved record (or abandon it with discard). Returns 1 when the
 * consumer was asleep and must be woken by the caller (ioctl or eventfd),
 * 0 when it is awake and will find the record itself.
 */
static inline int hp_ring_finish(struct hp_ring *r, struct heapprofd_rec_hdr *h,
				 int discard)
{
	union hp_commit c;
	uint32_t watermark;

	c.word = __atomic_load_n((uint64_t *)h, __ATOMIC_RELAXED);
	c.len &= ~HEAPPROFD_REC_BUSY;
	if (discard)
		c.len |= HEAPPROFD_REC_DISCARD;
	__atomic_store_n((uint64_t *)h, c.word, __ATOMIC_RELEASE);
	/*
	 * Pairs with the consumer's fence between storing sleeping and its
	 * check. Not needed with a consumer that drains on a timer (uapi,
	 * timer_us): the fence waits for every store of the record to leave
	 * the store buffer, a cross-core fetch per line the consumer zeroed,
	 * and was most of a small record's cost. timer_us sits on sleeping's
	 * line, which is read here anyway.
	 */
	if (!__atomic_load_n(&r->cons->timer_us, __ATOMIC_RELAXED))
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
	watermark = __atomic_load_n(&r->cons->sleeping, __ATOMIC_RELAXED);
	if (!watermark)
		return 0;
	if (watermark > 1) {
		uint64_t unread = __atomic_load_n(&r->prod->tail, __ATOMIC_RELAXED) -
				  __atomic_load_n(&r->cons->head, __ATOMIC_RELAXED);

		if (unread < watermark)
			return 0;	/* the consumer's timer picks it up */
	}
	/* One producer wins the wake-up; the others see 0. */
	return __atomic_exchange_n(&r->cons->sleeping, 0, __ATOMIC_ACQ_REL) != 0;
}

static inline int hp_ring_commit(struct hp_ring *r, struct heapprofd_rec_hdr *h)
{
	return hp_ring_finish(r, h, 0);
}

static inline int hp_ring_discard(struct hp_ring *r, struct heapprofd_rec_hdr *h)
{
	return hp_ring_finish(r, h, 1);
}

/* Count a record that did not fit, exactly. */
static inline void hp_ring_count_drop(struct hp_ring *r, uint32_t len, int is_free)
{
	__atomic_fetch_add(&r->cnt->records_dropped, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&r->cnt->bytes_dropped, hp_ring_align(len),
			   __ATOMIC_RELAXED);
	if (is_free)
		__atomic_fetch_add(&r->cnt->frees_dropped, 1, __ATOMIC_RELAXED);
}

static inline void hp_ring_count_write(struct hp_ring *r, uint32_t len)
{
	__atomic_fetch_add(&r->cnt->records_written, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&r->cnt->bytes_written, hp_ring_align(len),
			   __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------ */
/* Consumer (one thread)                                                     */
/* ------------------------------------------------------------------------ */

/*
 * Give len bytes at head back to the producers: zero them first (see the
 * uapi header: a zero commit word never passes for a record), then publish
 * the new head.
 */
static inline void hp_ring_advance(struct hp_ring *r, uint32_t len)
{
	memset(r->data + (r->chead & r->mask), 0, len);
	r->chead += len;
	__atomic_store_n(&r->cons->head, r->chead, __ATOMIC_RELEASE);
}

/*
 * The consumer looked and left the records where they are: it is behind,
 * not stopped (uapi: heapprofd_consumer.behind), so that a producer
 * waiting for room waits on. Its own count, never read back.
 */
static inline void hp_ring_behind(struct hp_ring *r)
{
	__atomic_store_n(&r->cons->behind, ++r->cbehind, __ATOMIC_RELEASE);
}

enum hp_ring_status {
	HP_RING_EMPTY,		/* nothing to read */
	HP_RING_READY,		/* *rec, *len: a committed record */
	HP_RING_NOT_READY,	/* a writer is still busy at head */
	HP_RING_CORRUPT,	/* positions or lengths make no sense */
};

/*
 * Look at the record at the consumer's head. On HP_RING_READY, *rec points
 * into shared memory (the producer may still scribble on it: copy it before
 * parsing) and *len is its checked length; hp_ring_advance(r, *len) gives
 * it back when done. Discarded records are skipped.
 * On HP_RING_NOT_READY, *len is the record's length if its stamp already
 * matches (a writer is filling it in), else 0 (not even reserved-and-marked
 * yet); a consumer that sees the same state past its bound calls
 * hp_ring_skip_stalled().
 */
static inline enum hp_ring_status
hp_ring_peek(struct hp_ring *r, const struct heapprofd_rec_hdr **rec, uint32_t *len)
{
	for (;;) {
		/*
		 * tail is read only when the last value read says there is
		 * nothing more (or too little for the record at head): then
		 * producers find the line of tail still in their caches when
		 * they reserve. A record is known by its commit word.
		 */
		uint64_t t = r->ctail;
		uint64_t h = r->chead;
		const struct heapprofd_rec_hdr *p;
		union hp_commit c;
		uint32_t n;

		*len = 0;
		if (t == h || t - h > r->size) {
			t = __atomic_load_n(&r->prod->tail, __ATOMIC_ACQUIRE);
			r->ctail = t;
			if (t == h)
				return HP_RING_EMPTY;
			if (t - h > r->size)
				return HP_RING_CORRUPT;
		}
		p = (const struct heapprofd_rec_hdr *)(r->data + (h & r->mask));
		c.word = __atomic_load_n((const uint64_t *)p, __ATOMIC_ACQUIRE);
		if (c.stamp != HEAPPROFD_REC_STAMP(h))
			return HP_RING_NOT_READY;
		n = c.len & HEAPPROFD_REC_LEN_MASK;
		if (n > t - h) {
			t = __atomic_load_n(&r->prod->tail, __ATOMIC_ACQUIRE);
			r->ctail = t;
			if (t - h > r->size)
				return HP_RING_CORRUPT;
		}
		if (n < sizeof(*p) || n % HEAPPROFD_REC_ALIGN || n > t - h ||
		    n > HP_REC_LEN_MAX)
			return HP_RING_CORRUPT;
		*len = n;
		if (c.len & HEAPPROFD_REC_BUSY)
			return HP_RING_NOT_READY;
		if (c.len & HEAPPROFD_REC_DISCARD) {
			hp_ring_advance(r, n);
			continue;
		}
		*rec = p;
		return HP_RING_READY;
	}
}

/*
 * Give up on a record whose writer stalled past the consumer's bound.
 * Returns 0 when it was skipped (its length was known), -1 when the ring
 * cannot be resynchronised and the session must end.
 */
static inline int hp_ring_skip_stalled(struct hp_ring *r)
{
	const struct heapprofd_rec_hdr *rec;
	uint32_t len;

	if (hp_ring_peek(r, &rec, &len) != HP_RING_NOT_READY || !len)
		return -1;
	hp_ring_advance(r, len);
	return 0;
}

/*
 * The ring is empty and the producers have gone window bytes or more into
 * this lap: move them to the start of the next lap, so that they keep
 * writing the few pages at the front of the data area. Each page of the
 * data area costs a page fault (and, in the user-space transport, a page
 * of memory) the first time it is written; a producer that the consumer
 * keeps up with then touches only the front, however large the ring is for
 * bursts. Everything ahead of tail is zero (the consumer zeroed it when it
 * consumed the lap before, or it was never written), so the bytes skipped
 * need no zeroing. tail is moved with the producers' own compare-and-swap,
 * from the value head has: if a producer reserved in the meantime, it wins
 * and nothing is skipped. Returns 1 if the producers were moved.
 */
static inline int hp_ring_rewind(struct hp_ring *r, uint64_t window)
{
	uint64_t t = r->chead, next;

	if ((t & r->mask) < window || (t & r->mask) == 0)
		return 0;
	next = (t | r->mask) + 1;
	if (!__atomic_compare_exchange_n(&r->prod->tail, &t, next, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return 0;
	r->chead = next;
	r->ctail = next;
	__atomic_store_n(&r->cons->head, next, __ATOMIC_RELEASE);
	return 1;
}

/*
 * The consumer is about to sleep and wants a wake-up once watermark bytes
 * are unread (1: for any record). With a watermark above 1 it must sleep
 * with a timeout, which bounds how long fewer bytes wait. Returns 1 if it may
 * sleep (sleeping is set and the ring is still empty), 0 if a record arrived
 * meanwhile.
 */
static inline int hp_ring_prepare_sleep_wm(struct hp_ring *r, uint32_t watermark)
{
	if (!watermark)
		watermark = 1;
	__atomic_store_n(&r->cons->sleeping, watermark, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&r->prod->tail, __ATOMIC_ACQUIRE) != r->chead) {
		__atomic_store_n(&r->cons->sleeping, 0, __ATOMIC_RELAXED);
		return 0;
	}
	return 1;
}

static inline int hp_ring_prepare_sleep(struct hp_ring *r)
{
	return hp_ring_prepare_sleep_wm(r, 1);
}

static inline void hp_ring_awake(struct hp_ring *r)
{
	__atomic_store_n(&r->cons->sleeping, 0, __ATOMIC_RELAXED);
}

#endif /* HEAPPROFD_RING_H */
