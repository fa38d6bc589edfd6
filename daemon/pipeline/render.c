// SPDX-License-Identifier: GPL-2.0
/*
 * Human-facing outputs of a profile: folded stacks (one line per stack,
 * root first, for flame graph tools), a self-contained SVG flame graph
 * (rectangles with <title> for hover; opens in any browser) and a text
 * table of the top call sites with requested vs usable bytes.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void put_name(FILE *f, const char *s)
{
	for (; *s; s++)
		fputc(*s == ';' ? ':' : *s == '\n' ? ' ' : *s, f);
}

int hp_folded_write(const struct hp_prof *p, int metric, FILE *f)
{
	size_t i;
	char buf[256];

	for (i = 0; i < p->nsamples; i++) {
		const struct hp_prof_sample *s = &p->samples[i];
		int64_t k;

		if (s->v[metric] <= 0)
			continue;
		if (!s->nlocs)
			fputs("[unknown]", f);
		for (k = (int64_t)s->nlocs - 1; k >= 0; k--) {
			int64_t nf = hp_prof_loc_frames(p, s->locs[k]), q;

			/* outermost first: the inline callers, then the inlined */
			for (q = nf - 1; q >= 0; q--) {
				put_name(f, hp_prof_loc_frame(p, s->locs[k], (uint32_t)q, buf,
							      sizeof(buf)));
				if (k || q)
					fputc(';', f);
			}
		}
		fprintf(f, " %" PRId64 "\n", s->v[metric]);
	}
	return ferror(f) ? -1 : 0;
}

/* ---- SVG flame graph ------------------------------------------------------ */

struct fnode {
	const char *name;
	int64_t value;
	struct fnode *kids, *next;
};

static struct fnode *fchild(struct fnode *n, const char *name)
{
	struct fnode *c;

	for (c = n->kids; c; c = c->next)
		if (!strcmp(c->name, name))
			return c;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->name = name;
	c->next = n->kids;
	n->kids = c;
	return c;
}

static void ffree(struct fnode *n)
{
	while (n) {
		struct fnode *nx = n->next;

		ffree(n->kids);
		free(n);
		n = nx;
	}
}

static int fdepth(const struct fnode *n)
{
	int d = 0;

	for (const struct fnode *c = n->kids; c; c = c->next) {
		int cd = fdepth(c);

		if (cd > d)
			d = cd;
	}
	return d + 1;
}

static void xml(FILE *f, const char *s, size_t max)
{
	size_t n = 0;

	for (; *s && n < max; s++, n++) {
		switch (*s) {
		case '<': fputs("&lt;", f); break;
		case '>': fputs("&gt;", f); break;
		case '&': fputs("&amp;", f); break;
		case '"': fputs("&quot;", f); break;
		default:
			if ((unsigned char)*s >= 0x20)
				fputc(*s, f);
		}
	}
	if (*s)
		fputs("..", f);
}

#define SVG_W		1200.0
#define SVG_ROW		17
#define SVG_PAD		10.0
#define SVG_TOP		40

static void fdraw(FILE *f, const struct fnode *n, double x, int depth, int maxd,
		  double scale, int64_t total, const char *unit)
{
	double w = n->value * scale, cx = x;
	int y = SVG_TOP + (maxd - depth - 1) * SVG_ROW;
	uint64_t h = hp_hash_str(n->name);
	int r = 205 + (int)(h % 50), g = 80 + (int)((h >> 8) % 130), b = (int)((h >> 16) % 55);

	if (w < 0.1)
		return;
	fprintf(f, "<g><title>");
	xml(f, n->name, 400);
	fprintf(f, " (%" PRId64 " %s, %.2f%%)</title>", n->value, unit,
		total ? 100.0 * n->value / total : 0.0);
	fprintf(f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"rgb(%d,%d,%d)\" rx=\"2\"/>",
		x, y, w, SVG_ROW - 1, r, g, b);
	if (w > 35) {
		fprintf(f, "<text x=\"%.1f\" y=\"%d\">", x + 3, y + SVG_ROW - 5);
		xml(f, n->name, (size_t)((w - 6) / 7));
		fputs("</text>", f);
	}
	fputs("</g>\n", f);
	for (const struct fnode *c = n->kids; c; c = c->next) {
		fdraw(f, c, cx, depth + 1, maxd, scale, total, unit);
		cx += c->value * scale;
	}
}

int hp_svg_write(const struct hp_prof *p, int metric, const char *title, FILE *f)
{
	struct fnode root = { .name = "all" };
	char buf[256];
	size_t i;
	int maxd, height;

	for (i = 0; i < p->nsamples; i++) {
		const struct hp_prof_sample *s = &p->samples[i];
		struct fnode *n = &root;
		int64_t k;

		if (s->v[metric] <= 0)
			continue;
		root.value = hp_sat_add(root.value, s->v[metric]);
		for (k = (int64_t)s->nlocs - 1; k >= 0 && n; k--) {
			int64_t nf = hp_prof_loc_frames(p, s->locs[k]), q;

			for (q = nf - 1; q >= 0 && n; q--) {
				const char *nm = hp_prof_loc_frame(p, s->locs[k], (uint32_t)q,
								   buf, sizeof(buf));

				/* names from buf must outlive the tree: intern them */
				nm = hp_intern((struct hp_strtab *)&p->strs, nm);
				n = nm ? fchild(n, nm) : NULL;
				if (n)
					n->value = hp_sat_add(n->value, s->v[metric]);
			}
		}
	}
	maxd = fdepth(&root);
	height = SVG_TOP + maxd * SVG_ROW + 30;
	fprintf(f, "<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"xmlns=\"http://www.w3.org/2000/svg\">\n"
		"<style>text{font-family:monospace;font-size:12px;fill:#000;pointer-events:none}"
		"rect:hover{stroke:#000;stroke-width:1}</style>\n"
		"<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#f8f8f0\"/>\n"
		"<text x=\"%.0f\" y=\"22\" style=\"font-size:16px\">",
		(int)SVG_W, height, (int)SVG_W, height, SVG_PAD);
	xml(f, title ? title : "heapprofd", 200);
	fprintf(f, " - %s: %" PRId64 " %s</text>\n", hp_v_names[metric], root.value,
		hp_v_units[metric]);
	if (root.value > 0)
		fdraw(f, &root, SVG_PAD, 0, maxd, (SVG_W - 2 * SVG_PAD) / root.value,
		      root.value, hp_v_units[metric]);
	fprintf(f, "<text x=\"%.0f\" y=\"%d\">hover a frame for its name and size</text>\n</svg>\n",
		SVG_PAD, height - 8);
	ffree(root.kids);
	return ferror(f) ? -1 : 0;
}

/* ---- text table ------------------------------------------------------------ */

struct agg {
	const char *name, *file, *heap;
	int64_t line;
	int64_t v[HP_NV];
};

static int agg_cmp(const void *a, const void *b)
{
	const struct agg *x = *(struct agg *const *)a, *y = *(struct agg *const *)b;

	if (x->v[HP_V_INUSE_SPACE] != y->v[HP_V_INUSE_SPACE])
		return x->v[HP_V_INUSE_SPACE] < y->v[HP_V_INUSE_SPACE] ? 1 : -1;
	if (x->v[HP_V_ALLOC_SPACE] != y->v[HP_V_ALLOC_SPACE])
		return x->v[HP_V_ALLOC_SPACE] < y->v[HP_V_ALLOC_SPACE] ? 1 : -1;
	return strcmp(x->name, y->name);
}

static void human(char *b, size_t l, int64_t v)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double d = v < 0 ? -(double)v : (double)v;
	int i = 0;

	while (d >= 1024 && i < 4) {
		d /= 1024;
		i++;
	}
	snprintf(b, l, "%s%.*f%s", v < 0 ? "-" : "", i ? 1 : 0, d, u[i]);
}

/*
 * Allocator entry points say nothing about who allocated: the table names
 * the first frame below them (pprof's drop_frames does the same in Go).
 */
static int is_allocator(const char *n)
{
	static const char *const pre[] = {
		"operator new", "malloc", "calloc", "realloc", "reallocarray",
		"posix_memalign", "aligned_alloc", "memalign", "valloc", "pvalloc",
		"__libc_malloc", "__libc_calloc", "__libc_realloc", "__libc_memalign",
		"__GI___libc_", "_int_malloc", "__gnu_cxx::new_allocator",
		"std::__new_allocator", "std::allocator", "std::allocator_traits",
		"__strdup", "strdup", "__strndup", "strndup", "xmalloc", "g_malloc",
		"PyMem_", "PyObject_Malloc", "_PyObject_Malloc", "_PyMem_",
		"sqlite3MemMalloc", "sqlite3Malloc", "sqlite3DbMalloc",
	};
	size_t i;

	for (i = 0; i < sizeof(pre) / sizeof(pre[0]); i++)
		if (!strncmp(n, pre[i], strlen(pre[i])))
			return 1;
	return 0;
}

int hp_frame_is_allocator(const char *name)
{
	return is_allocator(name);
}

int hp_text_write(const struct hp_prof *p, int top, FILE *f)
{
	struct hp_hmap idx = { 0 };
	struct agg **list = NULL;
	size_t n = 0, cap = 0, i;
	int64_t tot[HP_NV] = { 0 };
	char buf[256], b1[32], b2[32], b3[32];
	int rc = 0, other_heaps = 0;

	for (i = 0; i < p->nsamples; i++) {
		const struct hp_prof_sample *s = &p->samples[i];
		const char *name = "[unknown]", *file = "", *named = NULL;
		int64_t line = 0;
		int found = 0;

		/* the first frame, leaf first and inline frames included, that is
		 * not an allocator entry point (the outermost if all are); if it
		 * has no symbol (a stripped library shows as lib+0xOFFSET), also
		 * the nearest caller that has one, so the site reads as something */
		for (uint32_t k = 0; k < s->nlocs && !named; k++) {
			uint32_t li = s->locs[k], nf = hp_prof_loc_frames(p, li), q;
			const struct hp_prof_loc *l = li < p->nlocs ? &p->locs[li] : NULL;

			for (q = 0; q < nf && !named; q++) {
				const struct hp_prof_line *ln = l && q && l->inl + q - 1 < p->nlines ?
					&p->lines[l->inl + q - 1] : NULL;
				const char *fr = hp_intern((struct hp_strtab *)&p->strs,
							   hp_prof_loc_frame(p, li, q, buf, sizeof(buf)));

				if (!fr)
					fr = "?";
				if (found) {
					if (!strstr(fr, "+0x"))
						named = fr;
					continue;
				}
				name = fr;
				file = ln ? (ln->file ? ln->file : "") : (l && l->file ? l->file : "");
				line = ln ? ln->line : l ? l->line : 0;
				found = !is_allocator(name);
				if (found && !strstr(name, "+0x"))
					named = name;
			}
		}
		if (named && named != name) {
			snprintf(buf, sizeof(buf), "%s (in %s)", name, named);
			name = hp_intern((struct hp_strtab *)&p->strs, buf);
			if (!name)
				name = "?";
		}
		const char *heap = s->heap ? s->heap : "";
		uint64_t k1 = hp_hash_str(name) ^ (hp_hash_str(heap) << 1),
			 k2 = hp_hash_str(file) * 31 + (uint64_t)line;
		struct agg *a = hp_hmap_get(&idx, k1, k2);
		int j;

		if (!a) {
			if (n == cap) {
				struct agg **nl;

				cap = cap ? cap * 2 : 64;
				nl = realloc(list, cap * sizeof(*nl));
				if (!nl) {
					rc = -1;
					goto out;
				}
				list = nl;
			}
			a = calloc(1, sizeof(*a));
			if (!a) {
				rc = -1;
				goto out;
			}
			a->name = hp_intern((struct hp_strtab *)&p->strs, name);
			a->file = file;
			a->line = line;
			a->heap = heap;
			if (heap[0] && strcmp(heap, "libc.malloc"))
				other_heaps = 1;
			list[n++] = a;
			hp_hmap_put(&idx, k1, k2, a);
		}
		for (j = 0; j < HP_NV; j++) {
			a->v[j] = hp_sat_add(a->v[j], s->v[j]);
			tot[j] = hp_sat_add(tot[j], s->v[j]);
		}
	}
	for (i = 0; i < p->ncomments; i++)
		fprintf(f, "# %s\n", p->comments[i]);
	human(b1, sizeof(b1), tot[HP_V_INUSE_SPACE]);
	human(b2, sizeof(b2), tot[HP_V_ALLOC_SPACE]);
	human(b3, sizeof(b3), tot[HP_V_INUSE_USABLE]);
	fprintf(f, "total (estimated): in use %s in %" PRId64 " objects (usable %s); allocated %s in %" PRId64 " objects\n",
		b1, tot[HP_V_INUSE_OBJ], b3, b2, tot[HP_V_ALLOC_OBJ]);
	if (!p->nsamples)
		fprintf(f, "no samples\n");
	if (list)
		qsort(list, n, sizeof(*list), agg_cmp);
	fprintf(f, "%12s %10s %12s %10s %9s  %s\n", "inuse_bytes", "inuse_objs",
		"alloc_bytes", "alloc_objs", "usable/req", "call site");
	for (i = 0; i < n && (top <= 0 || (int)i < top); i++) {
		const struct agg *a = list[i];
		int64_t req = a->v[HP_V_INUSE_SPACE] ? a->v[HP_V_INUSE_SPACE] : a->v[HP_V_ALLOC_SPACE];
		int64_t use = a->v[HP_V_INUSE_SPACE] ? a->v[HP_V_INUSE_USABLE] : a->v[HP_V_ALLOC_USABLE];

		fprintf(f, "%12" PRId64 " %10" PRId64 " %12" PRId64 " %10" PRId64 " ",
			a->v[HP_V_INUSE_SPACE], a->v[HP_V_INUSE_OBJ],
			a->v[HP_V_ALLOC_SPACE], a->v[HP_V_ALLOC_OBJ]);
		if (req > 0 && use > 0)
			fprintf(f, "%8.1f%%  ", 100.0 * use / req);
		else
			fprintf(f, "%9s  ", "-");
		if (other_heaps)
			fprintf(f, "[%s] ", a->heap[0] ? a->heap : "?");
		fputs(a->name, f);
		if (a->file[0])
			fprintf(f, " %s:%" PRId64, a->file, a->line);
		fputc('\n', f);
	}
out:
	for (i = 0; i < n; i++)
		free(list[i]);
	free(list);
	hp_hmap_free(&idx);
	return rc || ferror(f) ? -1 : 0;
}
