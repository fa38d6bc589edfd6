// SPDX-License-Identifier: GPL-2.0
/*
 * Stack reuse (uapi: HEAPPROFD_ALLOC_STACK_REUSED). The outer part of a
 * thread's stack rarely changes between two of its samples (sqlite3: 9.2 KiB
 * of a 10 KiB stack on average), so the client leaves out the top bytes
 * that are the same as in its previous record and says how many. Here, in
 * the feeding thread and in ring order, the record is made whole again from
 * the topmost bytes of the thread's previous record, kept per thread, so
 * that nothing after this (memo, unwinder, books) knows about reuse.
 *
 * The previous record is missing when this daemon attached after it was
 * written (or when the table of threads was cleared): the record is then
 * passed on as truncated at the top, which the books show as such.
 *
 * A stack delta (HEAPPROFD_ALLOC_STACK_DELTA) is made whole the same way
 * first: the words it does not carry are the saved top's at the same
 * addresses (undelta).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Threads remembered at once; past this the table starts over. */
#define HP_REUSE_MAX_THREADS	4096

/*
 * A thread's stack top: the len bytes below top, at the end of b. b grows
 * with the deepest stack the thread has sent (up to
 * HEAPPROFD_STACK_REUSE_MAX), so a thread with a shallow stack costs little.
 */
struct saved {
	uint64_t top;		/* the thread's stack_top */
	uint32_t len;		/* bytes below top held in b (0: nothing) */
	uint32_t cap;		/* size of b */
	uint8_t *b;
	/* memo entries matched by the records whose top b holds */
	struct hp_reuse_match m[HP_REUSE_MATCHES];
};

struct hp_reuse {
	struct hp_hmap threads;	/* tid -> struct saved */
	uint64_t held;		/* the buffers' sizes, summed */
	uint8_t *scratch;	/* a delta's stack made whole (one record at a time) */
	uint32_t scap;
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

	hp_hmap_for_each(&r->threads, e) {
		struct saved *s = e->v;

		free(s->b);
		free(s);
	}
	hp_hmap_free(&r->threads);
	r->held = 0;
}

void hp_reuse_free(struct hp_reuse *r)
{
	if (!r)
		return;
	forget_all(r);
	free(r->scratch);
	free(r);
}

/* Owner: publish what the table and buffer hold now. */
static void account(struct hp_reuse *r)
{
	__atomic_store_n(&r->mem, sizeof(*r) + r->threads.n * sizeof(struct saved) +
			 r->held + r->scap + r->threads.cap * sizeof(struct hp_hent),
			 __ATOMIC_RELAXED);
}

size_t hp_reuse_mem(const struct hp_reuse *r)
{
	return r ? __atomic_load_n(&r->mem, __ATOMIC_RELAXED) : 0;
}

static void forget_matches(struct saved *s)
{
	if (s)
		memset(s->m, 0, sizeof(s->m));
}

/* The thread's saved top, made (empty) if it has none. */
static struct saved *saved_of(struct hp_reuse *r, uint32_t tid)
{
	struct saved *s = hp_hmap_get(&r->threads, tid, 0);

	if (s)
		return s;
	if (r->threads.n >= HP_REUSE_MAX_THREADS)
		forget_all(r);
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (hp_hmap_put(&r->threads, tid, 0, s)) {
		free(s);
		return NULL;
	}
	account(r);
	return s;
}

/*
 * Room for n bytes below top, keeping the len bytes held (they stay the
 * topmost ones). Returns 0, or -1 if the buffer could not grow (it is then
 * as it was).
 */
static int make_room(struct hp_reuse *r, struct saved *s, uint32_t n)
{
	uint32_t cap = s->cap ? s->cap : 1024;
	uint8_t *b;

	if (n <= s->cap)
		return 0;
	while (cap < n)
		cap *= 2;
	if (cap > HEAPPROFD_STACK_REUSE_MAX)
		cap = HEAPPROFD_STACK_REUSE_MAX;
	b = malloc(cap);
	if (!b)
		return -1;
	if (s->len)
		memcpy(b + cap - s->len, s->b + s->cap - s->len, s->len);
	free(s->b);
	r->held += cap - s->cap;
	s->b = b;
	s->cap = cap;
	account(r);
	return 0;
}

/* How many of a whole stack's topmost bytes a thread keeps. */
static uint32_t kept(uint64_t whole)
{
	return whole < HEAPPROFD_STACK_REUSE_MAX ? (uint32_t)whole : HEAPPROFD_STACK_REUSE_MAX;
}

/*
 * Keep the top of a record's whole stack (own bytes, then held bytes of
 * the saved copy, which are still in place) for the thread's next record.
 * held is 0 unless the caller made room for the whole stack already (the
 * held bytes then stay where they are).
 */
static void remember(struct hp_reuse *r, struct saved *s, const struct heapprofd_rec_alloc *a,
		     const uint8_t *own, uint32_t own_len, uint32_t held)
{
	uint64_t sp = heapprofd_rec_sp(a), whole = (uint64_t)own_len + held;
	uint32_t n;

	if (!s)
		return;
	if (s->top != a->stack_top)
		held = 0;
	s->top = a->stack_top;
	/* Only a copy that reaches the top can be reused from. */
	if (!a->stack_top || sp + whole != a->stack_top) {
		s->len = 0;
		return;
	}
	n = kept(whole);
	if (held > n)
		held = n;
	if (!held)
		s->len = 0;	/* nothing to keep while growing */
	if (!n || make_room(r, s, n)) {
		s->len = 0;
		return;
	}
	/* The held bytes are the topmost ones: only the record's own go in. */
	memcpy(s->b + s->cap - n, own + own_len - (n - held), n - held);
	s->len = n;
}

/*
 * A delta's stack_len bytes from sp into r->scratch: its runs, and the
 * saved top's bytes between them. Returns how many bytes from sp are known
 * (stack_len unless the saved top lacks some: the stack is then cut there).
 * parse.c checked the runs: in order, within stack_len and the record.
 */
static uint32_t undelta(struct hp_reuse *r, const struct saved *s,
			const struct heapprofd_rec_alloc *a, const uint8_t *q)
{
	const struct heapprofd_stack_delta *d = (const void *)q;
	const struct heapprofd_delta_run *run = (const void *)(d + 1);
	const uint8_t *lit = (const uint8_t *)(run + d->nruns);
	uint64_t sp = heapprofd_rec_sp(a), top = a->stack_top;
	uint64_t held_lo = s && s->len && s->top == top ? top - s->len : UINT64_MAX;
	uint32_t n = a->stack_len, off = 0;

	if (n > r->scap) {
		uint8_t *b = malloc(n);

		if (!b)
			return 0;
		free(r->scratch);
		r->scratch = b;
		r->scap = n;
		account(r);
	}
	for (uint32_t i = 0; i <= d->nruns; i++) {
		uint32_t gap_end = i < d->nruns ? run[i].off : n;

		if (gap_end > off) {
			/* parse.c: sp + stack_len <= top, so only the bottom
			 * of the gap can lie below what is held */
			if (sp + off < held_lo)
				return off;
			memcpy(r->scratch + off, s->b + s->cap - (top - (sp + off)), gap_end - off);
		}
		if (i == d->nruns)
			break;
		memcpy(r->scratch + run[i].off, lit, run[i].len);
		lit += run[i].len;
		off = run[i].off + run[i].len;
	}
	return n;
}

/*
 * A delta whose whole stack, from sp to the top, lies in the thread's
 * saved top (the common case: the client's shadow and this copy hold the
 * same stack) is applied where it lies: its runs are written over the
 * saved bytes, which then are this record's stack and the next one's
 * base. That spares copying the whole stack twice per sample (into the
 * scratch buffer, then back into the saved top), a tenth of the daemon's
 * time on a threaded Python program. Returns what hp_reuse_view returns,
 * or -1 when the saved top does not hold the stack (undelta then).
 */
static int delta_in_place(struct hp_reuse *r, struct saved *s,
			  const struct heapprofd_rec_alloc *a, const uint8_t *q,
			  struct hp_stack_view *v)
{
	const struct heapprofd_stack_delta *d = (const void *)q;
	const struct heapprofd_delta_run *run = (const void *)(d + 1);
	const uint8_t *lit = (const uint8_t *)(run + d->nruns);
	uint64_t sp = heapprofd_rec_sp(a), top = a->stack_top, whole;
	int reused = !!(a->hdr.flags & HEAPPROFD_ALLOC_STACK_REUSED);
	uint32_t k = reused ? a->stack_reused : 0;
	uint8_t *base;

	if (!s || !s->len || !top || s->top != top || sp + a->stack_len + k != top)
		return -1;
	whole = top - sp;
	if (whole > s->len)
		return -1;
	/* parse.c checked the runs: in order, within stack_len and the record */
	base = s->b + s->cap - whole;
	for (uint32_t i = 0; i < d->nruns; i++) {
		memcpy(base + run[i].off, lit, run[i].len);
		lit += run[i].len;
	}
	s->len = (uint32_t)whole;	/* below sp: an older stack's bytes */
	v->own = base;
	v->own_len = a->stack_len;
	v->top = NULL;
	v->top_len = 0;
	v->matched = NULL;
	v->saved = s;
	v->sp = sp;
	if (!reused) {
		forget_matches(s);	/* a stack all new */
		return 1;
	}
	/* As below: only the reused bytes are the same as before. */
	for (int i = 0; i < HP_REUSE_MATCHES && s->m[i].id; i++)
		if (s->m[i].floor < top - k)
			s->m[i].floor = top - k;
	v->matched = s->m;
	v->top = s->b + s->cap - k;
	v->top_len = k;
	hp_bump(&r->rebuilt, 1);
	return 1;
}

int hp_reuse_view(struct hp_reuse *r, const struct heapprofd_rec_alloc *a,
		  const uint8_t *stack, struct hp_stack_view *v)
{
	struct saved *s = saved_of(r, a->tid);
	int delta = !!(a->hdr.flags & HEAPPROFD_ALLOC_STACK_DELTA);
	uint32_t k, own_len = a->stack_len;
	int rc;

	if (delta && (rc = delta_in_place(r, s, a, stack, v)) >= 0)
		return rc;
	if (delta) {
		own_len = undelta(r, s, a, stack);
		stack = r->scratch;
	}
	v->own = stack;
	v->own_len = own_len;
	v->top = NULL;
	v->top_len = 0;
	v->matched = NULL;
	v->saved = s;
	v->sp = heapprofd_rec_sp(a);
	if (own_len < a->stack_len) {
		/* A delta whose base is not here: cut where it is missing. */
		hp_bump(&r->missing, 1);
		forget_matches(s);
		remember(r, s, a, stack, own_len, 0);
		return 2;
	}
	if (!(a->hdr.flags & HEAPPROFD_ALLOC_STACK_REUSED)) {
		forget_matches(s);	/* a stack all new */
		remember(r, s, a, stack, a->stack_len, 0);
		return delta;	/* a delta's record is rebuilt */
	}
	/* parse.c checked: reused <= the maximum, and the two parts end at
	 * stack_top. */
	k = a->stack_reused;
	if (!s || s->top != a->stack_top || s->len < k ||
	    make_room(r, s, kept((uint64_t)a->stack_len + k))) {
		/* Not ours to rebuild: the unwinder stops where the copy does. */
		hp_bump(&r->missing, 1);
		forget_matches(s);
		remember(r, s, a, stack, a->stack_len, 0);
		return 2;
	}
	/* Only the reused bytes are the same as before: each match's floor
	 * rises to where they begin, if it lies below. */
	for (int i = 0; i < HP_REUSE_MATCHES && s->m[i].id; i++)
		if (s->m[i].floor < a->stack_top - k)
			s->m[i].floor = a->stack_top - k;
	v->matched = s->m;
	/* The room is made first: remember() must not move what v->top
	 * points at, the topmost k bytes, which it leaves as they are. */
	v->top = s->b + s->cap - k;
	v->top_len = k;
	hp_bump(&r->rebuilt, 1);
	remember(r, s, a, stack, a->stack_len, k);
	return 1;
}

void hp_reuse_matched(const struct hp_stack_view *v, uint64_t id)
{
	struct saved *s = v->saved;
	int i;

	/* Only a stack that b now holds the top of can be reused from. */
	if (!s || !s->len)
		return;
	for (i = 0; i < HP_REUSE_MATCHES - 1 && s->m[i].id && s->m[i].id != id; i++)
		;
	/* Newest first: the one found (or the oldest) moves to the front,
	 * with the whole stack of this record as matched. */
	memmove(&s->m[1], &s->m[0], i * sizeof(s->m[0]));
	s->m[0].id = id;
	s->m[0].floor = v->sp;
}

size_t hp_reuse_whole_len(const struct hp_stack_view *v)
{
	return (sizeof(struct heapprofd_rec_alloc) + (size_t)v->own_len + v->top_len + 7) &
	       ~(size_t)7;
}

void hp_reuse_build(const struct heapprofd_rec_alloc *a, const struct hp_stack_view *v,
		    int unknown, void *out)
{
	size_t hdr = sizeof(*a), need = hp_reuse_whole_len(v);
	struct heapprofd_rec_alloc *w = out;
	uint8_t *b = out;

	memcpy(w, a, hdr);
	w->hdr.flags = hp_reuse_flags(a->hdr.flags, unknown);
	w->stack_reused = 0;
	w->code_gen = 0;	/* a same-path claim is settled: the stack is whole */
	w->stack_len = v->own_len + v->top_len;
	w->hdr.len = (uint32_t)need;	/* a was validated: no BUSY, no DISCARD */
	memcpy(b + hdr, v->own, v->own_len);
	if (v->top_len)
		memcpy(b + hdr + v->own_len, v->top, v->top_len);
	memset(b + hdr + v->own_len + v->top_len, 0, need - hdr - v->own_len - v->top_len);
}

uint16_t hp_reuse_flags(uint16_t flags, int unknown)
{
	/* Python frames travel resolved (python.c); a same-path record is now
	 * whole like any other. */
	flags &= ~(HEAPPROFD_ALLOC_PYFRAMES | HEAPPROFD_ALLOC_STACK_SAME);
	if (!(flags & (HEAPPROFD_ALLOC_STACK_REUSED | HEAPPROFD_ALLOC_STACK_DELTA)))
		return flags;
	flags &= ~(HEAPPROFD_ALLOC_STACK_REUSED | HEAPPROFD_ALLOC_STACK_DELTA);
	return unknown ? flags | HEAPPROFD_ALLOC_STACK_TRUNCATED : flags;
}

void hp_reuse_stats(const struct hp_reuse *r, uint64_t *rebuilt, uint64_t *missing)
{
	*rebuilt = r ? __atomic_load_n(&r->rebuilt, __ATOMIC_RELAXED) : 0;
	*missing = r ? __atomic_load_n(&r->missing, __ATOMIC_RELAXED) : 0;
}
