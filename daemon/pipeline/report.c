// SPDX-License-Identifier: GPL-2.0
/*
 * `heapprofctl report FILE [--top N] [--svg out.svg] [--folded] [--base OTHER]
 *                         [--sample-index NAME] [--title TEXT]
 *                         [--drop-frames REGEX | --no-drop-frames]`
 *
 * Reads a pprof file (ours or any other with the usual sample types) and
 * prints the top call sites and the functions by cumulative bytes, or
 * folded stacks, and/or writes an SVG flame graph. --base subtracts another
 * profile, stack by stack (matched by function names, so two runs of the
 * same program compare). Allocator frames are folded into their callers by
 * pprof's drop_frames rule (frames.c).
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int hp_parse_num(const char *s, unsigned long long min, unsigned long long max,
		 unsigned long long *out, char *why, size_t wl)
{
	unsigned long long v;
	char *end;

	if (!s || !*s) {
		snprintf(why, wl, "an empty value where a number belongs");
		return -1;
	}
	/* strtoull would take "-5" (and wrap it), " 5" and "+5": digits only. */
	if (!isdigit((unsigned char)s[0])) {
		snprintf(why, wl, "'%s' is not a number (digits only, no sign)", s);
		return -1;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end) {
		snprintf(why, wl, "'%s' is not a number", s);
		return -1;
	}
	if (errno == ERANGE || v < min || v > max) {
		snprintf(why, wl, "%s is out of range (%llu to %llu)", s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: heapprofctl report FILE [--top N] [--svg OUT.svg] [--folded] [--base OTHER]\n"
		   "                          [--sample-index NAME] [--title TEXT]\n"
		   "                          [--drop-frames REGEX | --no-drop-frames]\n"
		   "  --top N      show the N biggest call sites and functions (default 20, 0 = all)\n"
		   "  --svg FILE   write a flame graph (open it in a browser)\n"
		   "  --folded     print folded stacks instead of the tables\n"
		   "  --base FILE  show FILE's profile subtracted (growth since then)\n"
		   "  --sample-index NAME  what the graph and the order show: alloc_space,\n"
		   "               inuse_space, alloc_objects, inuse_objects (default: inuse_space,\n"
		   "               or alloc_space when nothing is in use)\n"
		   "  --title TEXT the flame graph's title (default: FILE)\n"
		   "  --drop-frames REGEX  allocator frames to fold into their callers (pprof's\n"
		   "               drop_frames rule; default: the profile's own expression)\n"
		   "  --no-drop-frames     show every frame down to malloc\n");
}

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
		si = (uintptr_t)hp_hmap_get(stkidx, h1, h2);
		if (!si) {
			int64_t zero[HP_NV] = { 0 };

			if (hp_prof_add_sample(dst, stk, s->nlocs, zero, s->heap)) {
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

int hp_report_main(int argc, char **argv)
{
	const char *file = NULL, *svg = NULL, *base = NULL;
	struct hp_render_opts ro = { .metric = -1 };
	int top = 20, folded = 0, i, rc = 0;
	struct hp_prof a, b, d, *show = &a;
	char why[256];

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--top") && i + 1 < argc) {
			unsigned long long n;

			if (hp_parse_num(argv[++i], 0, INT_MAX, &n, why, sizeof(why))) {
				fprintf(stderr, "report: --top: %s\n", why);
				return 2;
			}
			top = (int)n;
		} else if (!strcmp(argv[i], "--svg") && i + 1 < argc) {
			svg = argv[++i];
		} else if (!strcmp(argv[i], "--folded")) {
			folded = 1;
		} else if (!strcmp(argv[i], "--sample-index") && i + 1 < argc) {
			ro.metric = hp_metric_by_name(argv[++i]);
			if (ro.metric < 0) {
				fprintf(stderr, "report: --sample-index: '%s' is none of alloc_space, "
					"inuse_space, alloc_objects, inuse_objects\n", argv[i]);
				return 2;
			}
		} else if (!strcmp(argv[i], "--title") && i + 1 < argc) {
			ro.title = argv[++i];
		} else if (!strcmp(argv[i], "--drop-frames") && i + 1 < argc) {
			struct hp_drop d;

			ro.drop_frames = argv[++i];
			if (hp_drop_init(&d, NULL, ro.drop_frames, why, sizeof(why))) {
				fprintf(stderr, "report: --drop-frames: %s\n", why);
				return 2;
			}
			hp_drop_free(&d);
		} else if (!strcmp(argv[i], "--no-drop-frames")) {
			ro.drop_frames = "";
		} else if (!strcmp(argv[i], "--base") && i + 1 < argc) {
			base = argv[++i];
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else if (argv[i][0] == '-' || file) {
			fprintf(stderr, "report: unexpected argument '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		} else {
			file = argv[i];
		}
	}
	if (!file) {
		usage(stderr);
		return 2;
	}
	if (hp_pprof_read(&a, file, why, sizeof(why))) {
		fprintf(stderr, "report: %s\n", why);
		return 1;
	}
	hp_prof_init(&d);
	if (base) {
		struct hp_hmap li = { 0 }, si = { 0 };

		if (hp_pprof_read(&b, base, why, sizeof(why))) {
			fprintf(stderr, "report: base: %s\n", why);
			hp_prof_free(&a);
			return 1;
		}
		hp_prof_add_comment(&d, "difference: %s minus %s", file, base);
		if (add_all(&d, &li, &si, &a, 1) || add_all(&d, &li, &si, &b, -1))
			rc = 1;
		hp_hmap_free(&li);
		hp_hmap_free(&si);
		hp_prof_free(&b);
		show = &d;
	}
	ro.top = top;
	if (!ro.title)
		ro.title = file;
	if (!rc && svg) {
		struct hp_out o;
		FILE *f = NULL;

		if (!hp_out_open(&o, svg, 0644))
			f = hp_out_stdio(&o);
		if (f && (hp_svg_write_opts(show, &ro, f) || fflush(f)))
			hp_out_fail(&o, EIO, "writing");
		if (!f || hp_out_commit(&o)) {
			hp_out_abort(&o);
			fprintf(stderr, "report: cannot write the flame graph: %s\n", o.why);
			rc = 1;
		}
	}
	if (!rc) {
		errno = 0;
		if (folded)
			rc = hp_folded_write_opts(show, &ro, stdout) ? 1 : 0;
		else
			rc = hp_text_write_opts(show, &ro, stdout) ? 1 : 0;
		/* `report > /dev/full`: the error shows at the flush, if not before. */
		if (fflush(stdout) || rc || ferror(stdout)) {
			fprintf(stderr, "report: writing to standard output: %s\n",
				errno ? strerror(errno) : "write error");
			rc = 1;
		}
	}
	hp_prof_free(&a);
	hp_prof_free(&d);
	return rc;
}
