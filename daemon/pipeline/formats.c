// SPDX-License-Identifier: GPL-2.0
/*
 * The table of output formats (formats.h) and what goes through it: the
 * files of a dump, all or none, and a format's bytes in memory for the
 * exports. Each format's entry lives beside its writer (pprof.c,
 * render.c, otlp.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "internal.h"

/* The order a dump writes them in: the first must fit a bounded dump. The
 * first four are HP_OUT_PPROF, _FOLDED, _TEXT and _SVG (pipeline.h). */
const struct hp_format *const hp_formats[] = {
	&hp_format_pprof, &hp_format_folded, &hp_format_text, &hp_format_svg,
	&hp_format_otlp, NULL,
};

_Static_assert(sizeof(hp_formats) / sizeof(hp_formats[0]) <= 17,
	       "a set of formats is the low 16 bits; HP_OUT_NOSYMS is above");
#define HP_FORMATS_MAX	16

unsigned hp_format_bit(const struct hp_format *f)
{
	for (unsigned i = 0; hp_formats[i]; i++)
		if (hp_formats[i] == f)
			return 1U << i;
	return 0;
}

unsigned hp_formats_with(unsigned flags)
{
	unsigned set = 0;

	for (unsigned i = 0; hp_formats[i]; i++)
		if (hp_formats[i]->flags & flags)
			set |= 1U << i;
	return set;
}

const struct hp_format *hp_format_by_name(const char *name)
{
	for (unsigned i = 0; hp_formats[i]; i++)
		if (!strcmp(hp_formats[i]->name, name))
			return hp_formats[i];
	return NULL;
}

void hp_formats_names(unsigned set, const char *sep, char *buf, size_t len)
{
	size_t o = 0;

	if (!len)
		return;
	buf[0] = 0;
	for (unsigned i = 0; hp_formats[i] && o < len; i++)
		if (set & (1U << i))
			o += snprintf(buf + o, len - o, "%s%s", o ? sep : "", hp_formats[i]->name);
}

int hp_formats_parse(const char *list, unsigned *set, char *why, size_t wl)
{
	char name[64], all[256];
	const char *p = list;

	*set = 0;
	while (*p) {
		size_t n = strcspn(p, ",");
		const struct hp_format *f;

		if (n >= sizeof(name))
			n = sizeof(name) - 1;
		memcpy(name, p, n);
		name[n] = 0;
		f = n ? hp_format_by_name(name) : NULL;
		if (!f) {
			hp_formats_names(~0U, ", ", all, sizeof(all));
			snprintf(why, wl, "unknown format '%s' (there are: %s)", name, all);
			return -1;
		}
		*set |= hp_format_bit(f);
		p += strcspn(p, ",");
		if (*p == ',')
			p++;
	}
	if (!*set) {
		snprintf(why, wl, "no format named");
		return -1;
	}
	return 0;
}

/*
 * Without a limit the files do not depend on each other: they are written
 * by two threads, each taking the next format not yet taken (the longest
 * first). The user waits for a dump at a program's end, and clang's four
 * files took 115 ms one after another. Only the names the formats make
 * up are written to the profile meanwhile (hp_prof_intern).
 */
struct par_write {
	const struct hp_prof *p;
	const struct hp_format_args *a;
	const struct hp_format **f;
	struct hp_out *o;
	int *rc;
	const size_t *order;	/* the indices of f, o and rc, longest to write first */
	size_t n;
	size_t next;		/* atomic: the next of order to take */
};

/* f writes o; 0 or -errno, o failed with the reason. */
static int write_one(const struct hp_prof *p, const struct hp_format_args *a,
		     const struct hp_format *f, struct hp_out *o)
{
	int rc = f->write(p, a, o);

	if (!rc && o->err)
		rc = -o->err;
	if (rc && !o->err)
		hp_out_fail(o, -rc, "writing");
	return rc;
}

static void *par_worker(void *arg)
{
	struct par_write *w = arg;
	size_t k;

	while ((k = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED)) < w->n) {
		size_t i = w->order[k];

		w->rc[i] = write_one(w->p, w->a, w->f[i], &w->o[i]);
		/* Flushed and synced here, while the other thread still renders
		 * (clang's 16 MB took 10-15 ms of syncing one file after another);
		 * the files are still put in place together (hp_out_commit_all). */
		if (!w->rc[i])
			w->rc[i] = hp_out_close(&w->o[i]);
	}
	return NULL;
}

/* f[0..n) into o[0..n), longest first; 0 or -errno (*bad: which failed). */
static int write_parallel(const struct hp_prof *p, const struct hp_format_args *a,
			  const struct hp_format **f, struct hp_out *o, size_t n, size_t *bad)
{
	/* Longest first (clang's: svg 40 ms, pprof 25, text 25, folded 20), so
	 * that the two threads end close together. */
	static const struct hp_format *const by_size[] = {
		&hp_format_svg, &hp_format_pprof, &hp_format_text, &hp_format_folded,
		&hp_format_otlp,
	};
	size_t order[HP_FORMATS_MAX], m = 0;
	int started, rc[HP_FORMATS_MAX] = { 0 };
	struct par_write w = { .p = p, .a = a, .f = f, .o = o, .rc = rc, .order = order };
	pthread_t t;

	for (size_t k = 0; k < sizeof(by_size) / sizeof(by_size[0]); k++)
		for (size_t i = 0; i < n; i++)
			if (f[i] == by_size[k])
				order[m++] = i;
	for (size_t i = 0; i < n; i++) {	/* any other, after them */
		size_t k = 0;

		while (k < m && order[k] != i)
			k++;
		if (k == m)
			order[m++] = i;
	}
	w.n = m;
	started = n > 1 && !pthread_create(&t, NULL, par_worker, &w);
	par_worker(&w);
	if (started)
		pthread_join(t, NULL);
	for (size_t i = 0; i < n; i++)
		if (rc[i]) {
			*bad = i;
			return rc[i];
		}
	return 0;
}

int hp_formats_write(const struct hp_prof *p, const char *prefix, const char *mid,
		     unsigned set, const struct hp_format_args *a, struct hp_out_limit *lim,
		     char *why, size_t wl)
{
	const struct hp_format *pf[HP_FORMATS_MAX];
	size_t nf = sizeof(hp_formats) / sizeof(hp_formats[0]) - 1, n = 0, k, bad = 0;
	char path[HP_OUT_PATH_MAX + 64];
	struct hp_out *o;
	int rc = 0;

	o = calloc(nf, sizeof(*o));
	if (!o) {
		snprintf(why, wl, "out of memory");
		return -ENOMEM;
	}
	/* Every file opened, in the table's order: they are put in place so. */
	for (k = 0; k < nf && !rc; k++) {
		const struct hp_format *f = hp_formats[k];

		if (!(set & (1U << k)))
			continue;
		if (snprintf(path, sizeof(path), "%s%s%s", prefix, mid, f->ext) >=
		    HP_OUT_PATH_MAX) {
			snprintf(why, wl, "%s%s%s: %s", prefix, mid, f->ext, strerror(ENAMETOOLONG));
			rc = -ENAMETOOLONG;
			break;
		}
		pf[n] = f;
		rc = hp_out_open(&o[n], path, 0644);
		bad = n++;
	}
	if (!rc && !lim) {
		rc = write_parallel(p, a, pf, o, n, &bad);
	} else if (!rc) {
		/* One after another, each within what the limit has left. */
		size_t kept = 0, i;

		for (i = 0; i < n; i++) {
			hp_out_set_limit(&o[i], lim);
			rc = write_one(p, a, pf[i], &o[i]);
			if (rc && o[i].over && kept > 0) {
				/* Past the limit: this one is left out, the next may fit. */
				lim->left_out |= hp_format_bit(pf[i]);
				hp_out_abort(&o[i]);
				rc = 0;
				continue;
			}
			o[kept++] = o[i];
			if (rc)
				break;
		}
		bad = kept ? kept - 1 : 0;
		while (rc && ++i < n)	/* those never written */
			hp_out_abort(&o[i]);
		n = kept;
	}
	if (!rc)
		rc = hp_out_commit_all(o, n, &bad);
	if (rc) {
		if (o[bad].why[0])
			snprintf(why, wl, "%s", o[bad].why);
		for (k = 0; k < n; k++)
			hp_out_abort(&o[k]);
	}
	free(o);
	return rc;
}

int hp_format_encode(const struct hp_format *f, const struct hp_prof *p,
		     const struct hp_format_args *a, uint8_t **buf, size_t *len,
		     char *why, size_t wl)
{
	struct hp_out o;
	int rc;

	*buf = NULL;
	*len = 0;
	rc = hp_out_open_mem(&o, f->name);
	if (!rc) {
		rc = f->write(p, a, &o);
		if (rc && !o.err)
			hp_out_fail(&o, -rc, "encoding");
		if (rc)
			hp_out_abort(&o);
		else
			rc = hp_out_take(&o, buf, len);
	}
	if (rc)
		snprintf(why, wl, "%s", o.why[0] ? o.why : strerror(-rc));
	return rc;
}
