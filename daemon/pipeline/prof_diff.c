// SPDX-License-Identifier: GPL-2.0
/*
 * The difference of two profiles (`heapprofctl report --base`): the
 * locations of both re-created by name and file:line in a new profile,
 * the first one's samples added, the base's subtracted.
 */
#include <stdlib.h>

#include "profile.h"

/* A location of src, re-created in dst by name (for diffs). */
static uint32_t copy_loc(struct hp_prof *dst, struct hp_hmap *idx,
			 const struct hp_prof *src, uint32_t li)
{
	char buf[256];
	const char *name = hp_prof_loc_name(src, li, buf, sizeof(buf));
	const struct hp_prof_loc *l = li < src->nlocs ? &src->locs[li] : NULL;
	const char *file = l && l->file ? l->file : "";
	uint64_t k1 = hp_hash_str(name), k2 = hp_hash_str(file) * 31 + (uint64_t)(l ? l->line : 0);
	uintptr_t v = (uintptr_t)hp_hmap_get(idx, k1, k2);
	struct hp_prof_loc nl = { 0 };

	if (v)
		return (uint32_t)v - 1;
	nl.func = name;
	nl.file = file[0] ? file : NULL;
	nl.line = l ? l->line : 0;
	v = hp_prof_add_loc(dst, &nl);
	hp_hmap_put(idx, k1, k2, (void *)(v + 1));
	return (uint32_t)v;
}

static int add_all(struct hp_prof *dst, struct hp_hmap *locidx, struct hp_hmap *stkidx,
		   const struct hp_prof *src, int sign)
{
	uint32_t *stk = NULL;
	size_t i;

	for (i = 0; i < src->nsamples; i++) {
		const struct hp_prof_sample *s = &src->samples[i];
		uint64_t h1 = 1469598103934665603ULL, h2 = (uint64_t)s->nlocs;
		uintptr_t si;
		uint32_t k;
		int j;

		free(stk);
		stk = calloc(s->nlocs + 1, sizeof(*stk));
		if (!stk)
			return -1;
		for (k = 0; k < s->nlocs; k++) {
			stk[k] = copy_loc(dst, locidx, src, s->locs[k]);
			h1 = (h1 ^ stk[k]) * 1099511628211ULL;
			h2 = h2 * 31 + stk[k];
		}
		if (s->heap)
			h2 ^= hp_hash_str(s->heap);
		if (s->exporter)
			h2 ^= hp_hash_str(s->exporter) << 1;
		si = (uintptr_t)hp_hmap_get(stkidx, h1, h2);
		if (!si) {
			int64_t zero[HP_NV] = { 0 };

			if (hp_prof_add_sample_l(dst, stk, s->nlocs, zero, s->heap, s->exporter)) {
				free(stk);
				return -1;
			}
			si = dst->nsamples;
			hp_hmap_put(stkidx, h1, h2, (void *)si);
		}
		for (j = 0; j < HP_NV; j++)
			dst->samples[si - 1].v[j] = sign > 0 ?
				hp_sat_add(dst->samples[si - 1].v[j], s->v[j]) :
				hp_sat_sub(dst->samples[si - 1].v[j], s->v[j]);
	}
	free(stk);
	return 0;
}

int hp_prof_diff(struct hp_prof *d, const struct hp_prof *a, const struct hp_prof *base)
{
	struct hp_hmap li = { 0 }, si = { 0 };
	int rc = add_all(d, &li, &si, a, 1) || add_all(d, &li, &si, base, -1) ? -1 : 0;

	hp_hmap_free(&li);
	hp_hmap_free(&si);
	return rc;
}
