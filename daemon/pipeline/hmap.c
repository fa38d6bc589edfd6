// SPDX-License-Identifier: GPL-2.0
/*
 * A hash map with 128-bit keys and pointer values: linear probing, deletion
 * by backward shift (no tombstones, so lookups stay short after many frees).
 * The books use it for live allocations, call-site children and frames.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static uint64_t mix(uint64_t k1, uint64_t k2)
{
	uint64_t h = k1 * 0x9E3779B97F4A7C15ULL ^ (k2 + 0x632BE59BD9B4E019ULL);

	h ^= h >> 31;
	h *= 0xD6E8FEB86659FD93ULL;
	h ^= h >> 32;
	return h;
}

struct hp_hent *hp_hmap_find(const struct hp_hmap *m, uint64_t k1, uint64_t k2)
{
	size_t i;

	if (!m->cap)
		return NULL;
	for (i = mix(k1, k2) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct hp_hent *e = &m->t[i];

		if (!e->v)
			return NULL;
		if (e->k1 == k1 && e->k2 == k2)
			return e;
	}
}

void *hp_hmap_get(const struct hp_hmap *m, uint64_t k1, uint64_t k2)
{
	const struct hp_hent *e = hp_hmap_find(m, k1, k2);

	return e ? e->v : NULL;
}

static int grow(struct hp_hmap *m)
{
	size_t ncap = m->cap ? m->cap * 2 : 16, i;
	struct hp_hent *nt = calloc(ncap, sizeof(*nt));

	if (!nt)
		return -1;
	for (i = 0; i < m->cap; i++) {
		struct hp_hent *e = &m->t[i];
		size_t j;

		if (!e->v)
			continue;
		for (j = mix(e->k1, e->k2) & (ncap - 1); nt[j].v; j = (j + 1) & (ncap - 1))
			;
		nt[j] = *e;
	}
	free(m->t);
	m->t = nt;
	m->cap = ncap;
	return 0;
}

/* Room for one more member: grow at three quarters full. */
static int room(struct hp_hmap *m)
{
	return (m->n + 1) * 4 > m->cap * 3 ? grow(m) : 0;
}

struct hp_hent *hp_hmap_probe(struct hp_hmap *m, uint64_t k1, uint64_t k2)
{
	size_t i;

	if (room(m))
		return NULL;
	for (i = mix(k1, k2) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct hp_hent *e = &m->t[i];

		if (!e->v || (e->k1 == k1 && e->k2 == k2))
			return e;
	}
}

int hp_hmap_set_at(struct hp_hmap *m, struct hp_hent *e, uint64_t k1, uint64_t k2, void *v)
{
	if (!v)
		return -1;
	if (!e->v) {
		e->k1 = k1;
		e->k2 = k2;
		m->n++;
	}
	e->v = v;
	return 0;
}

int hp_hmap_put(struct hp_hmap *m, uint64_t k1, uint64_t k2, void *v)
{
	struct hp_hent *e;

	if (!v)
		return -1;
	e = hp_hmap_probe(m, k1, k2);
	return e ? hp_hmap_set_at(m, e, k1, k2, v) : -1;
}

void *hp_hmap_del_at(struct hp_hmap *m, struct hp_hent *e)
{
	size_t i = (size_t)(e - m->t), j, mask = m->cap - 1;
	void *v = e->v;

	m->t[i].v = NULL;
	m->n--;
	/* Backward shift: move later members of the cluster into the hole. */
	for (j = (i + 1) & mask; m->t[j].v; j = (j + 1) & mask) {
		size_t home = mix(m->t[j].k1, m->t[j].k2) & mask;

		/* Move j to i unless home lies cyclically in (i, j]. */
		if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
			m->t[i] = m->t[j];
			m->t[j].v = NULL;
			i = j;
		}
	}
	return v;
}

void *hp_hmap_del(struct hp_hmap *m, uint64_t k1, uint64_t k2)
{
	struct hp_hent *e = hp_hmap_find(m, k1, k2);

	return e ? hp_hmap_del_at(m, e) : NULL;
}

void hp_hmap_free(struct hp_hmap *m)
{
	free(m->t);
	memset(m, 0, sizeof(*m));
}

uint64_t hp_hash_str(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 1099511628211ULL;
	return h;
}

/*
 * Strings are keyed by (hash, length); on the (unlikely) clash of both the
 * second key is perturbed until a free or equal slot is found.
 */
const char *hp_intern(struct hp_strtab *t, const char *s)
{
	uint64_t h, l;
	char *c;

	if (!s)
		return NULL;
	h = hp_hash_str(s);
	l = strlen(s);
	for (;; l += 1ULL << 40) {
		const char *v = hp_hmap_get(&t->m, h, l);

		if (!v)
			break;
		if (!strcmp(v, s))
			return v;
	}
	c = strdup(s);
	if (!c)
		return NULL;
	if (hp_hmap_put(&t->m, h, l, c)) {
		free(c);
		return NULL;
	}
	return c;
}

void hp_strtab_free(struct hp_strtab *t)
{
	struct hp_hent *e;

	hp_hmap_for_each(&t->m, e)
		free(e->v);
	hp_hmap_free(&t->m);
}
