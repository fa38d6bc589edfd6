// SPDX-License-Identifier: GPL-2.0
/*
 * The in-memory profile every writer renders and every reader fills: the
 * books export into it, pprof files are read into it. Strings are interned
 * in the profile and live as long as it does.
 */
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

const char *const hp_v_names[HP_NV] = {
	"alloc_objects", "alloc_space", "inuse_objects", "inuse_space",
	"alloc_usable_space", "inuse_usable_space",
};
const char *const hp_v_units[HP_NV] = {
	"count", "bytes", "count", "bytes", "bytes", "bytes",
};

void hp_prof_init(struct hp_prof *p)
{
	memset(p, 0, sizeof(*p));
}

void hp_prof_free(struct hp_prof *p)
{
	size_t i;

	for (i = 0; i < p->nsamples; i++)
		free(p->samples[i].locs);
	free(p->samples);
	free(p->locs);
	free(p->maps);
	free(p->comments);
	free(p->lines);
	hp_strtab_free(&p->strs);
	memset(p, 0, sizeof(*p));
}

const char *hp_prof_str(struct hp_prof *p, const char *s)
{
	return s ? hp_intern(&p->strs, s) : NULL;
}

static int grow(void **arr, size_t *cap, size_t n, size_t sz)
{
	void *na;
	size_t nc;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 16;
	na = realloc(*arr, nc * sz);
	if (!na)
		return -1;
	*arr = na;
	*cap = nc;
	return 0;
}

uint32_t hp_prof_add_map(struct hp_prof *p, const struct hp_prof_map *m)
{
	struct hp_prof_map *d;

	if (grow((void **)&p->maps, &p->cmaps, p->nmaps, sizeof(*m)))
		return 0;
	d = &p->maps[p->nmaps++];
	*d = *m;
	d->file = hp_prof_str(p, m->file);
	d->build_id = hp_prof_str(p, m->build_id);
	return (uint32_t)p->nmaps;
}

uint32_t hp_prof_add_loc(struct hp_prof *p, const struct hp_prof_loc *l)
{
	struct hp_prof_loc *d;

	if (grow((void **)&p->locs, &p->clocs, p->nlocs, sizeof(*l)))
		return 0;
	d = &p->locs[p->nlocs];
	*d = *l;
	d->func = hp_prof_str(p, l->func);
	d->file = hp_prof_str(p, l->file);
	d->inl = (uint32_t)p->nlines;
	d->ninl = 0;
	d->inl_src = NULL;
	for (uint32_t k = 0; l->inl_src && k < l->ninl; k++) {
		struct hp_prof_line *ln;

		if (grow((void **)&p->lines, &p->clines, p->nlines, sizeof(*ln)))
			break;
		ln = &p->lines[p->nlines++];
		ln->func = hp_prof_str(p, l->inl_src[k].func);
		ln->file = hp_prof_str(p, l->inl_src[k].file);
		ln->line = l->inl_src[k].line;
		d->ninl++;
	}
	return (uint32_t)p->nlocs++;
}

int hp_prof_add_sample(struct hp_prof *p, const uint32_t *locs, uint32_t n,
		       const int64_t *v, const char *heap)
{
	return hp_prof_add_sample_l(p, locs, n, v, heap, NULL);
}

int hp_prof_add_sample_l(struct hp_prof *p, const uint32_t *locs, uint32_t n,
			 const int64_t *v, const char *heap, const char *exporter)
{
	struct hp_prof_sample *s;

	if (grow((void **)&p->samples, &p->csamples, p->nsamples, sizeof(*s)))
		return -1;
	s = &p->samples[p->nsamples];
	memset(s, 0, sizeof(*s));
	s->locs = malloc((n ? n : 1) * sizeof(*locs));
	if (!s->locs)
		return -1;
	if (n)
		memcpy(s->locs, locs, n * sizeof(*locs));
	s->nlocs = n;
	memcpy(s->v, v, sizeof(s->v));
	s->heap = hp_prof_str(p, heap);
	s->exporter = hp_prof_str(p, exporter);
	p->nsamples++;
	return 0;
}

void hp_prof_add_comment(struct hp_prof *p, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (grow((void **)&p->comments, &p->ccomments, p->ncomments, sizeof(char *)))
		return;
	p->comments[p->ncomments] = hp_prof_str(p, buf);
	if (p->comments[p->ncomments])
		p->ncomments++;
}

const char *hp_prof_loc_name(const struct hp_prof *p, uint32_t loc, char *buf,
			     size_t len)
{
	const struct hp_prof_loc *l;
	const char *base = NULL;

	if (loc >= p->nlocs) {
		snprintf(buf, len, "?");
		return buf;
	}
	l = &p->locs[loc];
	if (l->func)
		return l->func;
	if (l->map && l->map <= p->nmaps && p->maps[l->map - 1].file) {
		base = strrchr(p->maps[l->map - 1].file, '/');
		base = base ? base + 1 : p->maps[l->map - 1].file;
	}
	if (base)
		snprintf(buf, len, "%s+0x%llx", base,
			 (unsigned long long)(l->addr - p->maps[l->map - 1].start +
					      p->maps[l->map - 1].off));
	else
		snprintf(buf, len, "0x%llx", (unsigned long long)l->addr);
	return buf;
}

void hp_prof_set_inline(struct hp_prof *p, uint32_t loc, const struct hp_prof_line *src,
			uint32_t n)
{
	struct hp_prof_loc *l;

	if (loc >= p->nlocs)
		return;
	l = &p->locs[loc];
	l->inl = (uint32_t)p->nlines;
	l->ninl = 0;
	for (uint32_t k = 0; k < n; k++) {
		struct hp_prof_line *ln;

		if (grow((void **)&p->lines, &p->clines, p->nlines, sizeof(*ln)))
			break;
		ln = &p->lines[p->nlines++];
		ln->func = hp_prof_str(p, src[k].func);
		ln->file = hp_prof_str(p, src[k].file);
		ln->line = src[k].line;
		l->ninl++;
	}
}

uint32_t hp_prof_loc_frames(const struct hp_prof *p, uint32_t loc)
{
	if (loc >= p->nlocs || !p->locs[loc].func)
		return 1;
	return 1 + p->locs[loc].ninl;
}

const char *hp_prof_loc_frame(const struct hp_prof *p, uint32_t loc, uint32_t k,
			      char *buf, size_t len)
{
	const struct hp_prof_loc *l;

	if (!k || loc >= p->nlocs)
		return hp_prof_loc_name(p, loc, buf, len);
	l = &p->locs[loc];
	if (k > l->ninl || l->inl + k - 1 >= p->nlines || !p->lines[l->inl + k - 1].func)
		return "?";
	return p->lines[l->inl + k - 1].func;
}

int hp_heap_own_types(const char *heap)
{
	return heap && !strcmp(heap, HP_HEAP_DMABUF_NAME);
}

int hp_sample_in_heap(const struct hp_prof_sample *s, const char *sel)
{
	const char *h = s->heap ? s->heap : "libc.malloc";

	if (!sel)
		return !hp_heap_own_types(s->heap);
	if (!strcmp(sel, "malloc"))
		sel = "libc.malloc";
	return !strcmp(h, sel);
}

int hp_prof_has_heap(const struct hp_prof *p, const char *sel)
{
	for (size_t i = 0; i < p->nsamples; i++)
		if (hp_sample_in_heap(&p->samples[i], sel))
			return 1;
	return 0;
}

void hp_prof_heaps(const struct hp_prof *p, FILE *f, const char *indent)
{
	const char **names = calloc(p->nsamples + 1, sizeof(*names));
	size_t *counts = calloc(p->nsamples + 1, sizeof(*counts));
	size_t n = 0, i, k;

	if (!names || !counts) {
		free(names);
		free(counts);
		return;
	}
	for (i = 0; i < p->nsamples; i++) {
		const char *h = p->samples[i].heap ? p->samples[i].heap : "libc.malloc";

		for (k = 0; k < n && strcmp(names[k], h); k++)
			;
		if (k == n)
			names[n++] = h;
		counts[k]++;
	}
	for (k = 0; k < n; k++)
		fprintf(f, "%s%s (%zu samples%s)\n", indent, names[k], counts[k],
			hp_heap_own_types(names[k]) ? "; sample types of its own" : "");
	free(names);
	free(counts);
}

int hp_prof_metric_heap(const struct hp_prof *p, const char *heap)
{
	size_t i;

	for (i = 0; i < p->nsamples; i++)
		if (p->samples[i].v[HP_V_INUSE_SPACE] && hp_sample_in_heap(&p->samples[i], heap))
			return HP_V_INUSE_SPACE;
	return HP_V_ALLOC_SPACE;
}

int hp_prof_metric(const struct hp_prof *p)
{
	return hp_prof_metric_heap(p, NULL);
}

int hp_write_out(struct hp_out *o, int (*fn)(const struct hp_prof *, int, FILE *),
		 const struct hp_prof *p, int arg)
{
	FILE *f = hp_out_stdio(o);

	if (!f)
		return -o->err;
	/* A failed write(2) left its errno in o; anything else is EIO. */
	if (fn(p, arg, f) || fflush(f))
		hp_out_fail(o, EIO, "writing");
	return o->err ? -o->err : 0;
}
