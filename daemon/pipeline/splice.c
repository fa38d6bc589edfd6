// SPDX-License-Identifier: GPL-2.0
/*
 * Spliced call paths remembered: a Python program's samples come from a
 * few call paths too, and splicing each one anew (python.c: a copy of the
 * native frames with the interpreter's replaced, a reference taken on
 * every file in it, the books' own look-up by hashing all of its frames,
 * then every reference given back) was a fifth of the daemon's time on a
 * multi-threaded Python program, most of it in the reference counts that
 * the feeding thread took and the books thread gave back on every sample,
 * a cache line handed from one core to the other each time.
 *
 * A splice is a function of the native frames and the resolved Python
 * frames alone (the interpreter's extent and the names file are fixed once
 * the Python frames are read). The native frames here are always a memo
 * entry's, and a memo id always comes with the same frames (memo.c), so
 * (memo id, Python frame keys and entry marks) names the result. The cache
 * keeps the result with its references and an id of its own; the books
 * find the path by that id as they do a memo entry's (hp_books_alloc's
 * path_id), and its frames are lent as a memo entry's are: one evicted is
 * freed once the books have applied every job fed while it was in the
 * table (hp_splices_tick, the memo's rule).
 *
 * The table: sets of SPLICE_WAYS entries by a hash of the key, most
 * recently used first; bounded in entries and in bytes (past the bound a
 * splice is made as before, for the one sample). It follows the memo's
 * generation: once the memo is cleared, its ids never come again, and the
 * whole table is retired.
 *
 * Threads: the feeding thread only, but for the counters.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define SPLICE_SETS	256U		/* power of two */
#define SPLICE_WAYS	4
#define SPLICE_MAX_BYTES (4U << 20)

/* Ids of spliced paths: a space of their own, apart from the memo's
 * (which count up from 1), for the books' path cache. */
#define SPLICE_ID_BASE	(1ULL << 62)

struct splice_ent {
	struct hp_lent_node lent;	/* out of the table: on s->lent */
	uint64_t hash, memo_id, id;
	int np, n;
	struct hp_pyframe *pf;		/* [np]: the key's Python part */
	struct hp_uframe *frames;	/* [n], references held */
};

struct hp_splices {
	uint32_t memo_gen;		/* the memo generation the table is of */
	uint64_t last_id;
	struct hp_lent lent;		/* out of the table, lent still */
	uint64_t hits, misses;		/* read by anyone (stats) */
	uint64_t bytes;			/* likewise: what the entries hold */
	struct splice_ent *set[SPLICE_SETS][SPLICE_WAYS];
	struct hp_uframe scratch[HP_MAX_FRAMES_LIMIT];	/* a splice, before it is kept */
};

struct hp_splices *hp_splices_new(void)
{
	return calloc(1, sizeof(struct hp_splices));
}

static size_t ent_bytes(const struct splice_ent *e)
{
	return sizeof(*e) + e->np * sizeof(*e->pf) + e->n * sizeof(*e->frames);
}

static void ent_free(struct hp_splices *s, struct splice_ent *e)
{
	hp_bump(&s->bytes, -(uint64_t)ent_bytes(e));
	hp_uframes_put(e->frames, e->n);
	free(e);
}

/* Out of the table: jobs fed until now may hold its frames (lent). */
static void ent_retire(struct hp_splices *s, struct splice_ent *e)
{
	if (e)
		hp_lent_retire(&s->lent, &e->lent);
}

void hp_splices_tick(struct hp_splices *s, uint64_t fed, uint64_t applied)
{
	struct hp_lent_node *n;

	if (!s)
		return;
	while ((n = hp_lent_due(&s->lent, fed, applied)) != NULL)
		ent_free(s, hp_lent_entry(n, struct splice_ent, lent));
}

static void retire_all(struct hp_splices *s)
{
	for (unsigned i = 0; i < SPLICE_SETS; i++)
		for (int w = 0; w < SPLICE_WAYS; w++) {
			ent_retire(s, s->set[i][w]);
			s->set[i][w] = NULL;
		}
}

void hp_splices_free(struct hp_splices *s)
{
	if (!s)
		return;
	/* Nothing is lent any more: the books are done. */
	retire_all(s);
	hp_splices_tick(s, s->lent.fed, UINT64_MAX);
	free(s);
}

static uint64_t key_hash(uint64_t memo_id, const struct hp_pyframe *pf, int np)
{
	uint64_t h = memo_id * 0x9e3779b97f4a7c15ULL ^ (uint64_t)np;

	for (int i = 0; i < np; i++) {
		h ^= pf[i].key * 2 + !!pf[i].entry;
		h *= 0xff51afd7ed558ccdULL;
		h ^= h >> 31;
	}
	return h;
}

static int key_is(const struct splice_ent *e, uint64_t hash, uint64_t memo_id,
		  const struct hp_pyframe *pf, int np)
{
	if (e->hash != hash || e->memo_id != memo_id || e->np != np)
		return 0;
	for (int i = 0; i < np; i++)
		if (e->pf[i].key != pf[i].key || !e->pf[i].entry != !pf[i].entry)
			return 0;
	return 1;
}

int hp_splices_get(struct hp_splices *s, const struct hp_py *py, uint32_t memo_gen,
		   uint64_t memo_id, const struct hp_uframe *nat, int nn,
		   const struct hp_pyframe *pf, int np, int max,
		   const struct hp_uframe **out, uint64_t *id)
{
	struct splice_ent **set, *e;
	uint64_t hash;
	int n;

	if (!s || !memo_id || np <= 0 || max <= 0)
		return -1;
	if (memo_gen != s->memo_gen) {
		retire_all(s);	/* the memo's ids of before never come again */
		s->memo_gen = memo_gen;
	}
	hash = key_hash(memo_id, pf, np);
	set = s->set[hash & (SPLICE_SETS - 1)];
	for (int w = 0; w < SPLICE_WAYS && set[w]; w++) {
		e = set[w];
		if (!key_is(e, hash, memo_id, pf, np) || e->n > max)
			continue;
		memmove(&set[1], &set[0], w * sizeof(set[0]));
		set[0] = e;
		hp_bump(&s->hits, 1);
		*out = e->frames;	/* lent: see hp_splices_tick */
		*id = e->id;
		return e->n;
	}
	hp_bump(&s->misses, 1);
	if (__atomic_load_n(&s->bytes, __ATOMIC_RELAXED) > SPLICE_MAX_BYTES)
		return -1;
	if (max > HP_MAX_FRAMES_LIMIT)
		max = HP_MAX_FRAMES_LIMIT;
	n = hp_py_splice(py, nat, nn, pf, np, s->scratch, max);
	if (n <= 0)
		return -1;
	/* One allocation: the entry, the key, then the frames. */
	e = malloc(sizeof(*e) + (size_t)np * sizeof(*pf) + (size_t)n * sizeof(*nat));
	if (!e) {
		hp_uframes_put(s->scratch, n);
		return -1;
	}
	e->pf = (struct hp_pyframe *)(e + 1);
	e->frames = (struct hp_uframe *)(e->pf + np);
	memcpy(e->pf, pf, (size_t)np * sizeof(*pf));
	memcpy(e->frames, s->scratch, (size_t)n * sizeof(*nat));	/* the references with them */
	e->hash = hash;
	e->memo_id = memo_id;
	e->id = SPLICE_ID_BASE + ++s->last_id;
	e->np = np;
	e->n = n;
	hp_bump(&s->bytes, ent_bytes(e));
	ent_retire(s, set[SPLICE_WAYS - 1]);
	memmove(&set[1], &set[0], (SPLICE_WAYS - 1) * sizeof(set[0]));
	set[0] = e;
	*out = e->frames;
	*id = e->id;
	return n;
}

void hp_splices_stats(struct hp_splices *s, uint64_t *hits, uint64_t *misses, size_t *bytes)
{
	*hits = s ? __atomic_load_n(&s->hits, __ATOMIC_RELAXED) : 0;
	*misses = s ? __atomic_load_n(&s->misses, __ATOMIC_RELAXED) : 0;
	*bytes = s ? sizeof(*s) + __atomic_load_n(&s->bytes, __ATOMIC_RELAXED) : 0;
}
