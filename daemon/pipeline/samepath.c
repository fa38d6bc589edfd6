// SPDX-License-Identifier: GPL-2.0
/*
 * Same-path records (uapi HEAPPROFD_ALLOC_STACK_SAME): a client that
 * found its thread's stack unchanged at every word that can steer an
 * unwind sends no stack, only its previous record's registers; reuse.c
 * completes the stack from the thread's saved top as for any reused
 * record, and the memo finds the previous unwind.
 *
 * The claim rests on the client's rule for "can steer": a stack address
 * or an address in one of its code granules. Here, in the feeding thread,
 * the claim is checked against the previous unwind (the memo entry): the
 * return addresses it stepped through must lie in the client's code set
 * that the record names. One that does not (code the set lacks: a library
 * loaded or JIT code made since it was built) makes the claim uncovered:
 * its sample keeps the previous path (most likely still right) and is
 * counted, and the consumer asks the client for a new set.
 *
 * Why the return addresses are enough: an unwind the memo remembers read
 * nothing but the stack copy and read-only file mappings (memo.c), so
 * every frame address it computed from a register or a word was a stack
 * address, which the client's rule covers whatever its code set; the
 * other words it read (registers saved by a frame) only restore values
 * that no later step used as an address. What is left is the words it
 * took as return addresses.
 *
 * The client's code sets come as HEAPPROFD_REC_CODE records; the last two
 * are kept (a thread may still claim under the older one after a new one
 * was written), each sorted for a binary search. Memory: at most
 * 2 * HEAPPROFD_CODE_MAX granules per process.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct codeset {
	uint32_t gen, n;
	uint64_t *g;		/* sorted */
};

struct hp_samepath {
	struct codeset set[2];	/* [0] the newest */
	/* written by the feeding thread (hp_bump), read by anyone */
	uint64_t checked, unchecked, uncovered;
};

struct hp_samepath *hp_samepath_new(void)
{
	return calloc(1, sizeof(struct hp_samepath));
}

void hp_samepath_free(struct hp_samepath *s)
{
	if (!s)
		return;
	free(s->set[0].g);
	free(s->set[1].g);
	free(s);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int hp_samepath_code(struct hp_samepath *s, const struct heapprofd_rec_code *c)
{
	uint64_t *g = malloc((c->n ? c->n : 1) * sizeof(*g));

	if (!g)
		return -1;
	memcpy(g, c->granule, c->n * sizeof(*g));
	qsort(g, c->n, sizeof(*g), cmp_u64);
	free(s->set[1].g);
	s->set[1] = s->set[0];
	s->set[0] = (struct codeset){ c->gen, c->n, g };
	return 0;
}

size_t hp_samepath_mem(const struct hp_samepath *s)
{
	return s ? sizeof(*s) + (s->set[0].n + s->set[1].n) * sizeof(uint64_t) : 0;
}

struct covers {
	const struct codeset *cs;
	uint64_t top;
};

/* The client's rule (uapi): a stack address near the top, or code. */
static int covered(void *arg, uint64_t v)
{
	const struct covers *c = arg;
	uint64_t key = (v & HEAPPROFD_CODE_VA_MASK) >> HEAPPROFD_CODE_SHIFT;
	uint32_t lo = 0, hi = c->cs->n;

	if (c->top - v - 1 < HEAPPROFD_STACK_REUSE_MAX)
		return 1;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (c->cs->g[mid] == key)
			return 1;
		if (c->cs->g[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return 0;
}

int hp_samepath_check(struct hp_samepath *s, struct hp_memo *m,
		      const struct heapprofd_rec_alloc *a, uint64_t memo_id)
{
	struct covers c = { NULL, a->stack_top };
	int rc;

	for (int i = 0; i < 2; i++)
		if (s->set[i].gen && s->set[i].gen == a->code_gen)
			c.cs = &s->set[i];
	/* A set we were never sent: as good as code outside it. */
	rc = !c.cs ? 0 : m && memo_id ? hp_memo_returns_all(m, a, memo_id, covered, &c) : -1;
	hp_bump(rc < 0 ? &s->unchecked : rc ? &s->checked : &s->uncovered, 1);
	/* Under an older set: the client has built a newer one already. */
	return !rc && c.cs == &s->set[1] ? 2 : rc;
}

void hp_samepath_unchecked(struct hp_samepath *s)
{
	hp_bump(&s->unchecked, 1);
}

void hp_samepath_stats(const struct hp_samepath *s, uint64_t *checked, uint64_t *unchecked,
		       uint64_t *uncovered)
{
	*checked = s ? __atomic_load_n(&s->checked, __ATOMIC_RELAXED) : 0;
	*unchecked = s ? __atomic_load_n(&s->unchecked, __ATOMIC_RELAXED) : 0;
	*uncovered = s ? __atomic_load_n(&s->uncovered, __ATOMIC_RELAXED) : 0;
}
