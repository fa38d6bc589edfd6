// SPDX-License-Identifier: GPL-2.0
/*
 * Human-facing outputs of a profile: folded stacks (one line per stack,
 * root first, for flame graph tools), a self-contained SVG flame graph
 * (rectangles with <title> for hover; opens in any browser) and a text
 * table of the top call sites with requested vs usable bytes.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "internal.h"

/* A folded line's frame: runs of plain bytes in one fwrite (a character
 * at a time, with its lock, was most of writing clang's 12 MB file). */
static void put_name(FILE *f, const char *s)
{
	while (*s) {
		size_t n = strcspn(s, ";\n");

		fwrite(s, 1, n, f);
		s += n;
		if (*s) {
			fputc(*s == ';' ? ':' : ' ', f);
			s++;
		}
	}
}

#define MAX_FRAMES	2048

/* "" when a metric is left to the profile; else its index. */
static int pick_metric(const struct hp_prof *p, const struct hp_render_opts *o)
{
	return o && o->metric >= 0 && o->metric < HP_NV ? o->metric :
		hp_prof_metric_heap(p, o ? o->heap : NULL);
}

static const char *sel_heap(const struct hp_render_opts *o)
{
	return o ? o->heap : NULL;
}

int hp_folded_write_opts(const struct hp_prof *p, const struct hp_render_opts *o, FILE *f)
{
	int metric = pick_metric(p, o);
	struct hp_frame *fr = malloc(MAX_FRAMES * sizeof(*fr));
	struct hp_drop d;
	char why[200];
	size_t i;

	if (!fr || hp_drop_init(&d, p, o ? o->drop_frames : NULL, why, sizeof(why))) {
		free(fr);
		return -1;
	}
	for (i = 0; i < p->nsamples; i++) {
		const struct hp_prof_sample *s = &p->samples[i];
		size_t n;

		if (s->v[metric] <= 0 || !hp_sample_in_heap(s, sel_heap(o)))
			continue;
		n = hp_sample_frames(p, s, &d, fr, MAX_FRAMES);
		if (!n)
			fputs("[unknown]", f);
		while (n--) {	/* outermost first */
			put_name(f, fr[n].name);
			if (n)
				fputc(';', f);
		}
		fprintf(f, " %" PRId64 "\n", s->v[metric]);
	}
	hp_drop_free(&d);
	free(fr);
	return ferror(f) ? -1 : 0;
}

int hp_folded_write(const struct hp_prof *p, int metric, FILE *f)
{
	struct hp_render_opts o = { .metric = metric };

	return hp_folded_write_opts(p, &o, f);
}

static const char *const metric_words[HP_NV] = {
	"allocations (alloc_objects)", "bytes allocated (alloc_space)",
	"objects in use (inuse_objects)", "bytes in use (inuse_space)",
	"usable bytes allocated (alloc_usable_space)",
	"usable bytes in use (inuse_usable_space)",
};

const char *hp_metric_words(int metric)
{
	return metric >= 0 && metric < HP_NV ? metric_words[metric] : "?";
}

int hp_metric_by_name(const char *name)
{
	int i;

	for (i = 0; i < HP_NV; i++)
		if (!strcmp(name, hp_v_names[i]))
			return i;
	/* pprof's own short forms */
	if (!strcmp(name, "alloc"))
		return HP_V_ALLOC_SPACE;
	if (!strcmp(name, "inuse"))
		return HP_V_INUSE_SPACE;
	return -1;
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

/* A value in its metric's unit: "1.2 MiB" for bytes, "1234" for counts. */
static void amount(char *b, size_t l, int metric, int64_t v)
{
	if (!strcmp(hp_v_units[metric], "bytes"))
		human(b, l, v);
	else
		snprintf(b, l, "%" PRId64, v);
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
		if (c->name == name)	/* interned (hp_sample_frames) */
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

/* Biggest first, so the picture reads left to right by size. */
static struct fnode *fsort(struct fnode *l)
{
	struct fnode *a = NULL, **pp, *nx;

	for (; l; l = nx) {
		nx = l->next;
		l->kids = fsort(l->kids);
		for (pp = &a; *pp && ((*pp)->value > l->value ||
				      ((*pp)->value == l->value && strcmp((*pp)->name, l->name) < 0));
		     pp = &(*pp)->next)
			;
		l->next = *pp;
		*pp = l;
	}
	return a;
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
				putc_unlocked(*s, f);	/* this thread's own file */
		}
	}
	if (*s)
		fputs("..", f);
}

#define SVG_W		1200.0
#define SVG_ROW		18
#define SVG_PAD		10.0
#define SVG_TOP		64
#define SVG_CHAR	7.2	/* width of a 12px monospace character */

/*
 * A string's hash, computed once per string pointer: the same C++ names
 * come back at many places in a graph or at many samples of a table.
 * Kept as hash + 1 so that 0 can mean "not yet"; the one hash that cannot
 * be kept (all ones) is simply computed again.
 */
static uint64_t hash_memo(struct hp_hmap *m, const char *s)
{
	uintptr_t v = (uintptr_t)hp_hmap_get(m, (uintptr_t)s, 0);

	if (v)
		return (uint64_t)v - 1;
	v = (uintptr_t)hp_hash_str(s) + 1;
	if (v)
		hp_hmap_put(m, (uintptr_t)s, 0, (void *)v);	/* or not kept */
	return (uint64_t)v - 1;
}

struct fctx {
	FILE *f;
	int maxd, metric;
	double scale;
	int64_t total;
	struct hp_hmap *hashes;	/* hash_memo of each name: its colour */
};

/*
 * A frame without a symbol is "libsqlite3.so.0.8.6+0x3b50a": its label on
 * the graph drops the version ("libsqlite3+0x3b50a"); the hover keeps all.
 */
static const char *short_label(const char *name, char *buf, size_t len)
{
	const char *so = strstr(name, ".so"), *off = strstr(name, "+0x");

	if (!so || !off || so > off || (size_t)(so - name) + strlen(off) >= len)
		return name;
	snprintf(buf, len, "%.*s%s", (int)(so - name), name, off);
	return buf;
}

static void fdraw(const struct fctx *c, const struct fnode *n, double x, int depth)
{
	double w = n->value * c->scale, cx = x;
	int y = SVG_TOP + (c->maxd - depth - 1) * SVG_ROW;
	uint64_t h = hash_memo(c->hashes, n->name);
	int r = 205 + (int)(h % 50), g = 80 + (int)((h >> 8) % 130), b = (int)((h >> 16) % 55);
	double pct = c->total ? 100.0 * n->value / c->total : 0.0;
	char amt[32], lab[48], sbuf[128];
	const char *name;
	size_t fit, len;

	if (w < 0.3)
		return;
	amount(amt, sizeof(amt), c->metric, n->value);
	fprintf(c->f, "<g><title>");
	xml(c->f, n->name, 400);
	fprintf(c->f, " (%s, %.2f%%)</title>", amt, pct);
	fprintf(c->f, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"rgb(%d,%d,%d)\" rx=\"2\"/>",
		x, y, w, SVG_ROW - 1, r, g, b);
	fit = w > 8 ? (size_t)((w - 6) / SVG_CHAR) : 0;
	name = short_label(n->name, sbuf, sizeof(sbuf));
	len = strlen(name);
	if (fit >= 4) {
		/* the name, and its share when there is room: what a picture
		 * without hovering (a PNG, a printout) still tells */
		snprintf(lab, sizeof(lab), " %.1f%%", pct);
		fprintf(c->f, "<text x=\"%.1f\" y=\"%d\">", x + 3, y + SVG_ROW - 5);
		if (len + strlen(lab) <= fit) {
			xml(c->f, name, len);
			fputs(lab, c->f);
		} else {
			xml(c->f, name, fit - 2);
		}
		fputs("</text>", c->f);
	}
	fputs("</g>\n", c->f);
	for (const struct fnode *k = n->kids; k; k = k->next) {
		fdraw(c, k, cx, depth + 1);
		cx += k->value * c->scale;
	}
}

int hp_svg_write_opts(const struct hp_prof *p, const struct hp_render_opts *o, FILE *f)
{
	struct fnode root = { .name = "all" };
	int metric = pick_metric(p, o), maxd, height, rc = 0;
	struct hp_frame *fr = malloc(MAX_FRAMES * sizeof(*fr));
	int64_t stacks = 0;
	struct hp_drop d;
	char why[200], tot[32];
	size_t i;

	if (!fr || hp_drop_init(&d, p, o ? o->drop_frames : NULL, why, sizeof(why))) {
		free(fr);
		return -1;
	}
	for (i = 0; i < p->nsamples; i++) {
		const struct hp_prof_sample *s = &p->samples[i];
		struct fnode *n = &root;
		size_t k;

		if (s->v[metric] <= 0 || !hp_sample_in_heap(s, sel_heap(o)))
			continue;
		stacks++;
		root.value = hp_sat_add(root.value, s->v[metric]);
		k = hp_sample_frames(p, s, &d, fr, MAX_FRAMES);
		while (k-- > 0 && n) {
			n = fchild(n, fr[k].name);
			if (n)
				n->value = hp_sat_add(n->value, s->v[metric]);
		}
		if (!n)
			rc = -1;
	}
	root.kids = fsort(root.kids);
	maxd = fdepth(&root);
	height = SVG_TOP + maxd * SVG_ROW + 30;
	amount(tot, sizeof(tot), metric, root.value);
	fprintf(f, "<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"xmlns=\"http://www.w3.org/2000/svg\">\n"
		"<style>text{font-family:monospace;font-size:12px;fill:#000;pointer-events:none}"
		"rect:hover{stroke:#000;stroke-width:1}</style>\n"
		"<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#f8f8f0\"/>\n"
		"<text x=\"%.0f\" y=\"24\" style=\"font-size:17px;font-weight:bold\">",
		(int)SVG_W, height, (int)SVG_W, height, SVG_PAD);
	xml(f, o && o->title ? o->title : "heapprofd", 120);
	fprintf(f, "</text>\n<text x=\"%.0f\" y=\"44\" style=\"font-size:13px\">", SVG_PAD);
	if (sel_heap(o)) {
		xml(f, sel_heap(o), 40);
		fputs(" heap, ", f);
	}
	fprintf(f, "%s: %s in %" PRId64 " stacks. Width = share, callers below callees; "
		"allocator frames folded into their callers.</text>\n",
		hp_metric_words(metric), tot, stacks);
	if (root.value > 0) {
		struct hp_hmap hashes = { 0 };
		struct fctx c = {
			.f = f, .maxd = maxd, .metric = metric, .total = root.value,
			.scale = (SVG_W - 2 * SVG_PAD) / root.value, .hashes = &hashes,
		};

		fdraw(&c, &root, SVG_PAD, 0);
		hp_hmap_free(&hashes);
	} else {
		fprintf(f, "<text x=\"%.0f\" y=\"%d\">(nothing: every sample is 0 here)</text>\n",
			SVG_PAD, SVG_TOP + 12);
	}
	fprintf(f, "<text x=\"%.0f\" y=\"%d\">hover a frame for its name and size</text>\n</svg>\n",
		SVG_PAD, height - 8);
	ffree(root.kids);
	hp_drop_free(&d);
	free(fr);
	return rc || ferror(f) ? -1 : 0;
}

int hp_svg_write(const struct hp_prof *p, int metric, const char *title, FILE *f)
{
	struct hp_render_opts o = { .metric = metric, .title = title };

	return hp_svg_write_opts(p, &o, f);
}

/* ---- text tables ----------------------------------------------------------- */

/* A call site (the leaf after folding) or, in the second table, a function. */
struct agg {
	const char *name, *file, *heap, *exporter;
	int64_t line;
	int64_t v[HP_NV];	/* call sites: their values; functions: self */
	int64_t cum[HP_NV];	/* functions: every stack they are on, once */
	size_t last;		/* functions: the sample last counted + 1 */
};

/* qsort has no context argument; formats are written in parallel (formats.c) */
static __thread int sort_metric = -1;

static int agg_cmp(const void *a, const void *b)
{
	const struct agg *x = *(struct agg *const *)a, *y = *(struct agg *const *)b;

	if (sort_metric >= 0 && x->v[sort_metric] != y->v[sort_metric])
		return x->v[sort_metric] < y->v[sort_metric] ? 1 : -1;
	if (x->v[HP_V_INUSE_SPACE] != y->v[HP_V_INUSE_SPACE])
		return x->v[HP_V_INUSE_SPACE] < y->v[HP_V_INUSE_SPACE] ? 1 : -1;
	if (x->v[HP_V_ALLOC_SPACE] != y->v[HP_V_ALLOC_SPACE])
		return x->v[HP_V_ALLOC_SPACE] < y->v[HP_V_ALLOC_SPACE] ? 1 : -1;
	return strcmp(x->name, y->name);
}

static int cum_cmp(const void *a, const void *b)
{
	const struct agg *x = *(struct agg *const *)a, *y = *(struct agg *const *)b;

	if (x->cum[sort_metric] != y->cum[sort_metric])
		return x->cum[sort_metric] < y->cum[sort_metric] ? 1 : -1;
	if (x->v[sort_metric] != y->v[sort_metric])
		return x->v[sort_metric] < y->v[sort_metric] ? 1 : -1;
	return strcmp(x->name, y->name);
}

struct aggs {
	struct hp_hmap idx;
	struct agg **list;
	size_t n, cap;
};

static struct agg *agg_get(struct aggs *t, uint64_t k1, uint64_t k2)
{
	struct agg *a = hp_hmap_get(&t->idx, k1, k2);

	if (a)
		return a;
	if (t->n == t->cap) {
		size_t nc = t->cap ? t->cap * 2 : 64;
		struct agg **nl = realloc(t->list, nc * sizeof(*nl));

		if (!nl)
			return NULL;
		t->list = nl;
		t->cap = nc;
	}
	a = calloc(1, sizeof(*a));
	if (!a || hp_hmap_put(&t->idx, k1, k2, a)) {
		free(a);
		return NULL;
	}
	t->list[t->n++] = a;
	return a;
}

static void aggs_free(struct aggs *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->list[i]);
	free(t->list);
	hp_hmap_free(&t->idx);
}

/*
 * What text_tables learns of a name once rather than at every sample (C++
 * names run to hundreds of bytes, and clang's profile has hundreds of
 * thousands of frames): keyed by the name's pointer, answers that depend
 * only on its bytes, so a string met at two pointers gets the same ones.
 */
struct name_memo {
	struct hp_hmap hash;	/* hash_memo */
	struct hp_hmap named;	/* name -> 1 made up ("lib.so+0x..."), 2 a symbol's */
	struct hp_hmap site;	/* (leaf, named caller) -> the interned site name */
};

/* A symbol's name, rather than one made up from a file and an offset. */
static bool is_named(struct name_memo *m, const char *s)
{
	uintptr_t v = m ? (uintptr_t)hp_hmap_get(&m->named, (uintptr_t)s, 0) : 0;

	if (!v) {
		v = !strstr(s, "+0x") && strncmp(s, "0x", 2) ? 2 : 1;
		if (m)
			hp_hmap_put(&m->named, (uintptr_t)s, 0, (void *)v);
	}
	return v == 2;
}

/*
 * The call site of a sample: the leaf once allocator frames are folded into
 * their callers (frames.c). A frame without a symbol (lib+0xOFFSET) also
 * names its nearest caller that has one, so that the site reads as
 * something: "libsqlite3.so.0+0x3b50a (called from sqlite3BtreeInsert)".
 * With a memo, each pair of names is formatted and interned once.
 */
static const char *site_name(struct name_memo *m, const struct hp_prof *p,
			     const struct hp_frame *fr, size_t n, char *buf, size_t len)
{
	const char *r;

	if (!n)
		return "[unknown]";
	if (is_named(m, fr[0].name))
		return fr[0].name;
	for (size_t k = 1; k < n; k++) {
		if (!is_named(m, fr[k].name))
			continue;
		r = m ? hp_hmap_get(&m->site, (uintptr_t)fr[0].name, (uintptr_t)fr[k].name) : NULL;
		if (r)
			return r;
		snprintf(buf, len, "%s (called from %s)", fr[0].name, fr[k].name);
		r = hp_prof_intern(p, buf) ?: fr[0].name;
		if (m)
			hp_hmap_put(&m->site, (uintptr_t)fr[0].name, (uintptr_t)fr[k].name,
				    (void *)r);
		return r;
	}
	return fr[0].name;
}

const char *hp_site_name(const struct hp_prof *p, const struct hp_frame *fr, size_t n,
			 char *buf, size_t len)
{
	return site_name(NULL, p, fr, n, buf, len);
}

static void name_memo_free(struct name_memo *m)
{
	hp_hmap_free(&m->hash);
	hp_hmap_free(&m->named);
	hp_hmap_free(&m->site);
}

/*
 * The tables of one heap selection (hp_sample_in_heap). A heap with sample
 * types of its own (dmabuf) is shown as buffers, with their exporter.
 */
static int text_tables(const struct hp_prof *p, const struct hp_render_opts *o,
		       const char *heap_sel, struct hp_drop *d, struct hp_frame *fr, FILE *f)
{
	struct aggs sites = { 0 }, funcs = { 0 };
	struct name_memo nm = { 0 };
	int64_t tot[HP_NV] = { 0 };
	char buf[512], b1[32], b2[32], b3[32];
	int rc = 0, other_heaps = 0, top = o ? o->top : 20, cm;
	int bufs = hp_heap_own_types(heap_sel && !strcmp(heap_sel, "malloc") ? NULL : heap_sel);
	size_t i, nsel = 0;

	for (i = 0; i < p->nsamples; i++) {
		const struct hp_prof_sample *s = &p->samples[i];
		size_t n, k;
		const char *name, *file, *heap, *exp;
		int64_t line;
		struct agg *a;
		int j;

		if (!hp_sample_in_heap(s, heap_sel))
			continue;
		nsel++;
		n = hp_sample_frames(p, s, d, fr, MAX_FRAMES);
		name = site_name(&nm, p, fr, n, buf, sizeof(buf));
		file = n && fr[0].file ? fr[0].file : "";
		line = n ? fr[0].line : 0;
		heap = s->heap ? s->heap : "";
		exp = s->exporter ? s->exporter : "";
		a = agg_get(&sites, hash_memo(&nm.hash, name) ^ (hash_memo(&nm.hash, heap) << 1) ^
			    (hash_memo(&nm.hash, exp) << 2),
			    hash_memo(&nm.hash, file) * 31 + (uint64_t)line);
		if (!a) {
			rc = -1;
			goto out;
		}
		if (!a->name) {
			a->name = name;
			a->file = file;
			a->line = line;
			a->heap = heap;
			a->exporter = exp;
			if (heap[0] && strcmp(heap, "libc.malloc"))
				other_heaps = 1;
		}
		for (j = 0; j < HP_NV; j++) {
			a->v[j] = hp_sat_add(a->v[j], s->v[j]);
			tot[j] = hp_sat_add(tot[j], s->v[j]);
		}
		/* cumulative: each function once per stack (recursion counts once) */
		for (k = 0; k < n; k++) {
			/* by pointer: hp_sample_frames gives interned names */
			struct agg *fa = agg_get(&funcs, (uint64_t)(uintptr_t)fr[k].name, 0);

			if (!fa) {
				rc = -1;
				goto out;
			}
			fa->name = fr[k].name;
			for (j = 0; j < HP_NV; j++) {
				if (!k)
					fa->v[j] = hp_sat_add(fa->v[j], s->v[j]);
				if (fa->last != i + 1)
					fa->cum[j] = hp_sat_add(fa->cum[j], s->v[j]);
			}
			fa->last = i + 1;
		}
	}
	human(b1, sizeof(b1), tot[HP_V_INUSE_SPACE]);
	human(b2, sizeof(b2), tot[HP_V_ALLOC_SPACE]);
	human(b3, sizeof(b3), tot[HP_V_INUSE_USABLE]);
	if (bufs)
		fprintf(f, "total (estimated): in use %s in %" PRId64 " buffers; allocated %s in %" PRId64 " buffers\n",
			b1, tot[HP_V_INUSE_OBJ], b2, tot[HP_V_ALLOC_OBJ]);
	else
		fprintf(f, "total (estimated): in use %s in %" PRId64 " objects (usable %s); allocated %s in %" PRId64 " objects\n",
			b1, tot[HP_V_INUSE_OBJ], b3, b2, tot[HP_V_ALLOC_OBJ]);
	if (!nsel)
		fprintf(f, "no samples\n");
	sort_metric = o && o->metric >= 0 && o->metric < HP_NV ? o->metric : -1;
	if (sites.list)
		qsort(sites.list, sites.n, sizeof(*sites.list), agg_cmp);
	fprintf(f, "\ncall sites (allocator frames folded into their callers)%s%s:\n",
		sort_metric >= 0 ? ", by " : "", sort_metric >= 0 ? hp_metric_words(sort_metric) : "");
	if (bufs)
		fprintf(f, "%12s %10s %12s %10s  %-16s %s\n", "inuse_bytes", "inuse_bufs",
			"alloc_bytes", "alloc_bufs", "exporter", "call site");
	else
		fprintf(f, "%12s %10s %12s %10s %9s  %s\n", "inuse_bytes", "inuse_objs",
			"alloc_bytes", "alloc_objs", "usable/req", "call site");
	for (i = 0; i < sites.n && (top <= 0 || (int)i < top); i++) {
		const struct agg *a = sites.list[i];
		int64_t req = a->v[HP_V_INUSE_SPACE] ? a->v[HP_V_INUSE_SPACE] : a->v[HP_V_ALLOC_SPACE];
		int64_t use = a->v[HP_V_INUSE_SPACE] ? a->v[HP_V_INUSE_USABLE] : a->v[HP_V_ALLOC_USABLE];

		fprintf(f, "%12" PRId64 " %10" PRId64 " %12" PRId64 " %10" PRId64 " ",
			a->v[HP_V_INUSE_SPACE], a->v[HP_V_INUSE_OBJ],
			a->v[HP_V_ALLOC_SPACE], a->v[HP_V_ALLOC_OBJ]);
		if (bufs)
			fprintf(f, " %-16s ", a->exporter[0] ? a->exporter : "?");
		else if (req > 0 && use > 0)
			fprintf(f, "%8.1f%%  ", 100.0 * use / req);
		else
			fprintf(f, "%9s  ", "-");
		if (other_heaps && !bufs)
			fprintf(f, "[%s] ", a->heap[0] ? a->heap : "?");
		fputs(a->name, f);
		if (a->file[0])
			fprintf(f, " %s:%" PRId64, a->file, a->line);
		fputc('\n', f);
	}
	/* Functions by what passed through them, as pprof -top -cum shows. */
	cm = sort_metric >= 0 ? sort_metric : hp_prof_metric_heap(p, heap_sel);
	sort_metric = cm;
	if (funcs.list)
		qsort(funcs.list, funcs.n, sizeof(*funcs.list), cum_cmp);
	fprintf(f, "\nfunctions by cumulative %s (self: as the call site; cum: on the stack):\n",
		hp_metric_words(cm));
	fprintf(f, "%12s %12s %6s %12s %12s  %s\n", "inuse_self", "inuse_cum", "cum%",
		"alloc_self", "alloc_cum", "function");
	for (i = 0; i < funcs.n && (top <= 0 || (int)i < top); i++) {
		const struct agg *a = funcs.list[i];

		fprintf(f, "%12" PRId64 " %12" PRId64 " %5.1f%% %12" PRId64 " %12" PRId64 "  %s\n",
			a->v[HP_V_INUSE_SPACE], a->cum[HP_V_INUSE_SPACE],
			tot[cm] > 0 ? 100.0 * a->cum[cm] / tot[cm] : 0.0,
			a->v[HP_V_ALLOC_SPACE], a->cum[HP_V_ALLOC_SPACE], a->name);
	}
out:
	aggs_free(&sites);
	aggs_free(&funcs);
	name_memo_free(&nm);
	return rc;
}

int hp_text_write_opts(const struct hp_prof *p, const struct hp_render_opts *o, FILE *f)
{
	struct hp_frame *fr = malloc(MAX_FRAMES * sizeof(*fr));
	const char *heap = sel_heap(o);
	struct hp_drop d;
	char why[200];
	int rc;
	size_t i;

	if (!fr)
		return -1;
	if (hp_drop_init(&d, p, o ? o->drop_frames : NULL, why, sizeof(why))) {
		fprintf(f, "%s\n", why);
		free(fr);
		return -1;
	}
	for (i = 0; i < p->ncomments; i++)
		fprintf(f, "# %s\n", p->comments[i]);
	if (heap)
		fprintf(f, "heap %s%s\n", heap, hp_heap_own_types(heap) ?
			" (DMA-BUF exports: pprof sample types dmabuf_*, label exporter)" : "");
	rc = text_tables(p, o, heap, &d, fr, f);
	/* The dmabuf heap is device memory: never in the totals above. */
	if (!rc && !heap && hp_prof_has_heap(p, HP_HEAP_DMABUF_NAME)) {
		if (o && o->all_heaps) {
			fprintf(f, "\nheap %s (DMA-BUF exports: pprof sample types dmabuf_*, label exporter)\n",
				HP_HEAP_DMABUF_NAME);
			rc = text_tables(p, o, HP_HEAP_DMABUF_NAME, &d, fr, f);
		} else {
			fprintf(f, "\nalso in this profile, apart: the %s heap (--heap %s)\n",
				HP_HEAP_DMABUF_NAME, HP_HEAP_DMABUF_NAME);
		}
	}
	hp_drop_free(&d);
	free(fr);
	return rc || ferror(f) ? -1 : 0;
}

int hp_text_write(const struct hp_prof *p, int top, FILE *f)
{
	struct hp_render_opts o = { .metric = -1, .top = top, .all_heaps = 1 };

	return hp_text_write_opts(p, &o, f);
}

/* ---- their entries in the table of formats (formats.h) --------------------- */

static int folded_fmt(const struct hp_prof *p, const struct hp_format_args *a, struct hp_out *o)
{
	return hp_write_out(o, hp_folded_write, p, a ? a->metric : hp_prof_metric(p));
}

static int text_fmt(const struct hp_prof *p, const struct hp_format_args *a, struct hp_out *o)
{
	(void)a;
	return hp_write_out(o, hp_text_write, p, 0);
}

static int svg_fmt(const struct hp_prof *p, const struct hp_format_args *a, struct hp_out *o)
{
	FILE *f = hp_out_stdio(o);

	if (f && (hp_svg_write(p, a ? a->metric : hp_prof_metric(p), a ? a->title : NULL, f) ||
		  fflush(f)))
		hp_out_fail(o, EIO, "writing");
	return o->err ? -o->err : 0;
}

const struct hp_format hp_format_folded = {
	.name = "folded", .ext = ".folded", .what = "folded stacks (flamegraph.pl, speedscope)",
	.flags = HP_FMT_DEFAULT | HP_FMT_HEAVY, .write = folded_fmt,
};
const struct hp_format hp_format_text = {
	.name = "text", .ext = ".txt", .what = "tables of call sites and functions",
	.flags = HP_FMT_DEFAULT, .write = text_fmt,
};
const struct hp_format hp_format_svg = {
	.name = "svg", .ext = ".svg", .what = "a flame graph",
	.flags = HP_FMT_DEFAULT | HP_FMT_HEAVY, .write = svg_fmt,
};
