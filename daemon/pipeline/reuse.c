// SPDX-License-Identifier: GPL-2.0
/*
 * Stack reuse (uapi: HEAPPROFD_ALLOC_STACK_REUSED). The outer part of a
 * thread's stack rarely changes between two of its samples (sqlite3: 9 KiB
 * of a 10 KiB stack on average), so the client leaves out the top bytes
 * that are the same as in its previous record and says how many. Here, in
 * the feeding thread and in ring order, the record is made whole again from
 * the topmost bytes of the thread's previous record, kept per thread, so
 * that nothing after this (memo, unwinder, books) knows about reuse.
 *
 * The previous record is missing when this daemon attached after it was
 * written (or when the table of threads was cleared): the record is then
 * passed on as truncated at the top, which the books show as such.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Threads remembered at once; past this the table starts over. */
#define HP_REUSE_MAX_THREADS	4096

struct saved {
	uint64_t top;		/* the thread's stack_top */
	uint32_t len;		/* bytes below top held in b (0: nothing) */
	uint8_t b[HEAPPROFD_STACK_REUSE_MAX];
};

struct hp_reuse {
	struct hp_hmap threads;	/* tid -> struct saved */
	uint8_t *buf;		/* the record made whole */
	size_t buflen;
	/* written by the feeding thread (hp_bump), read by anyone */
	uint64_t rebuilt, missing, mem;
};

struct hp_reuse *hp_reuse_new(void)
{
	return calloc(1, sizeof(struct hp_reuse));
}

static void forget_all(struct hp_reuse *r)
{
	struct hp_hent *e;

	hp_hmap_for_each(&r->threads, e)
		free(e->v);
	hp_hmap_free(&r->threads);
}

void hp_reuse_free(struct hp_reuse *r)
{
	if (!r)
		return;
	forget_all(r);
	free(r->buf);
	free(r);
}

/* Owner: publish what the table and buffer hold now. */
static void account(struct hp_reuse *r)
{
	__atomic_store_n(&r->mem, sizeof(*r) + r->buflen + r->threads.n * sizeof(struct saved) +
			 r->threads.cap * sizeof(struct hp_hent), __ATOMIC_RELAXED);
}

size_t hp_reuse_mem(const struct hp_reuse *r)
{
	return r ? __atomic_load_n(&r->mem, __ATOMIC_RELAXED) : 0;
}

/*
 * Keep the top of a whole record's stack for the thread's next record. Its
 * topmost `held` bytes came from the saved copy and are still there.
 */
static void remember(struct hp_reuse *r, const struct heapprofd_rec_alloc *a,
		     const uint8_t *stack, uint32_t held)
{
	uint64_t sp = a->regs[HEAPPROFD_X86_64_SP];
	struct saved *s = hp_hmap_get(&r->threads, a->tid, 0);
	uint32_t n;

	if (!s) {
		if (r->threads.n >= HP_REUSE_MAX_THREADS)
			forget_all(r);
		s = malloc(sizeof(*s));
		if (!s)
			return;
		if (hp_hmap_put(&r->threads, a->tid, 0, s)) {
			free(s);
			return;
		}
		account(r);
	}
	if (s->top != a->stack_top)
		held = 0;
	s->top = a->stack_top;
	s->len = 0;
	/* Only a copy that reaches the top can be reused from. */
	if (!a->stack_top || sp + a->stack_len != a->stack_top)
		return;
	n = a->stack_len < HEAPPROFD_STACK_REUSE_MAX ? a->stack_len :
							HEAPPROFD_STACK_REUSE_MAX;
	if (held > n)
		held = n;
	memcpy(s->b + HEAPPROFD_STACK_REUSE_MAX - n, stack + a->stack_len - n, n - held);
	s->len = n;
}

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

int hp_reuse_apply(struct hp_reuse *r, const struct heapprofd_rec_alloc *a,
		   const uint8_t *stack, const void **out, size_t *outlen)
{
	size_t hdr = sizeof(*a), need;
	struct heapprofd_rec_alloc *w;
	struct saved *s;
	uint32_t k;

	*out = NULL;
	if (!(a->hdr.flags & HEAPPROFD_ALLOC_STACK_REUSED)) {
		remember(r, a, stack, 0);
		return 0;
	}
	/* parse.c checked: reused <= the maximum, and the two parts end at
	 * stack_top. */
	k = a->stack_reused;
	need = align8(hdr + a->stack_len + k);
	if (need > r->buflen) {
		uint8_t *nb = realloc(r->buf, need);

		if (!nb)
			return -1;
		r->buf = nb;
		r->buflen = need;
		account(r);
	}
	w = (struct heapprofd_rec_alloc *)r->buf;
	memcpy(w, a, hdr);
	memcpy(r->buf + hdr, stack, a->stack_len);
	w->hdr.flags &= ~HEAPPROFD_ALLOC_STACK_REUSED;
	w->stack_reused = 0;
	s = hp_hmap_get(&r->threads, a->tid, 0);
	if (s && s->top == a->stack_top && s->len >= k) {
		memcpy(r->buf + hdr + a->stack_len, s->b + HEAPPROFD_STACK_REUSE_MAX - k, k);
		w->stack_len = a->stack_len + k;
		hp_bump(&r->rebuilt, 1);
	} else {
		/* Not ours to rebuild: the unwinder stops where the copy does. */
		w->hdr.flags |= HEAPPROFD_ALLOC_STACK_TRUNCATED;
		hp_bump(&r->missing, 1);
		k = 0;
	}
	need = align8(hdr + w->stack_len);
	w->hdr.len = (uint32_t)need;	/* a was validated: no BUSY, no DISCARD */
	memset(r->buf + hdr + w->stack_len, 0, need - hdr - w->stack_len);
	remember(r, w, r->buf + hdr, k);
	*out = r->buf;
	*outlen = need;
	return 1;
}

void hp_reuse_stats(const struct hp_reuse *r, uint64_t *rebuilt, uint64_t *missing)
{
	*rebuilt = r ? __atomic_load_n(&r->rebuilt, __ATOMIC_RELAXED) : 0;
	*missing = r ? __atomic_load_n(&r->missing, __ATOMIC_RELAXED) : 0;
}
