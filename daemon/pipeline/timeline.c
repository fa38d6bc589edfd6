// SPDX-License-Identifier: GPL-2.0
/*
 * Memory in use over time, from the dumps of a continuous recording
 * (`heapprofctl record --continuous-dump MS` writes PREFIX.0001.pb.gz,
 * PREFIX.0002.pb.gz, ... and PREFIX.pb.gz at the end): for each dump, the
 * bytes in use in all and per call site, as a self-contained SVG chart
 * (the biggest call sites stacked, the rest as "other", the peak marked)
 * or as CSV for scripts. Call sites are named as the text table names
 * them: allocator frames folded into their callers (frames.c).
 *
 * A dump's time is its pprof time_nanos (the session's start) plus its
 * duration_nanos (when it was taken); files without a duration are timed
 * by their modification time.
 */
#include <errno.h>
#include <glob.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "profile.h"

void hp_timeline_init(struct hp_timeline *t)
{
	memset(t, 0, sizeof(*t));
}

void hp_timeline_free(struct hp_timeline *t)
{
	for (size_t i = 0; i < t->npts; i++)
		free(t->pts[i].v);
	free(t->pts);
	free(t->sites);
	hp_hmap_free(&t->idx);
	hp_strtab_free(&t->strs);
	memset(t, 0, sizeof(*t));
}

/* The index of the call site named name (interned in t), added if new; -1: no memory. */
static int64_t site_index(struct hp_timeline *t, const char *name)
{
	const char *s = hp_intern(&t->strs, name);
	uintptr_t v;

	if (!s)
		return -1;
	v = (uintptr_t)hp_hmap_get(&t->idx, (uint64_t)(uintptr_t)s, 0);
	if (v)
		return (int64_t)v - 1;
	if (t->nsites == t->csites) {
		size_t c = t->csites ? 2 * t->csites : 32;
		const char **n = realloc(t->sites, c * sizeof(*n));

		if (!n)
			return -1;
		t->sites = n;
		t->csites = c;
	}
	if (hp_hmap_put(&t->idx, (uint64_t)(uintptr_t)s, 0, (void *)(uintptr_t)(t->nsites + 1)))
		return -1;
	t->sites[t->nsites] = s;
	return (int64_t)t->nsites++;
}

/*
 * The call site of a sample, named as the text table names it: allocator
 * frames folded into their callers (frames.c, pprof's drop_frames rule).
 */
static int64_t sample_site(struct hp_timeline *t, const struct hp_prof *p,
			   const struct hp_prof_sample *s, struct hp_drop *d,
			   struct hp_frame *fr)
{
	char buf[600];
	size_t n = hp_sample_frames(p, s, d, fr, HP_MAX_FRAMES);

	return site_index(t, hp_site_name(p, fr, n, buf, sizeof(buf)));
}

/*
 * The client's exact bytes in use, from the dump's comment, or -1 (also
 * when it counted no allocation yet: its counters were not published).
 * For the CSV and the points' data only: the client publishes its counters
 * now and then, so while it runs they may lag the samples; the chart draws
 * the samples' estimate alone.
 */
static int64_t exact_in_use(const struct hp_prof *p)
{
	for (size_t i = 0; i < p->ncomments; i++) {
		const char *c = strstr(p->comments[i], "exact totals (client): ");

		if (c && strtoll(c + 23, NULL, 10) > 0 && (c = strstr(c, "in use ")))
			return strtoll(c + 7, NULL, 10);
	}
	return -1;
}

/* The highest in use the books saw up to this dump (books.c), or 0. */
static int64_t books_peak(const struct hp_prof *p)
{
	for (size_t i = 0; i < p->ncomments; i++) {
		const char *c = strstr(p->comments[i], "peak in-use bytes (estimated): ");

		if (c)
			return strtoll(c + 31, NULL, 10);
	}
	return 0;
}

int hp_timeline_add(struct hp_timeline *t, const struct hp_prof *p, int64_t t_ns,
		    const char *label)
{
	struct hp_tl_point pt = { .t_ns = t_ns, .session_ns = p->time_ns,
				  .exact = exact_in_use(p) };
	int64_t *acc = NULL;
	size_t nacc = 0, i;
	struct hp_frame *fr = malloc(HP_MAX_FRAMES * sizeof(*fr));
	struct hp_drop d;
	char why[200];

	pt.label = hp_intern(&t->strs, label ? label : "");
	if (!pt.label || !fr || hp_drop_init(&d, p, NULL, why, sizeof(why))) {
		free(fr);
		return -ENOMEM;
	}
	for (i = 0; i < p->nsamples; i++) {
		int64_t b = p->samples[i].v[HP_V_INUSE_SPACE], k;

		/* Device memory (dmabuf) is not the process's heap in use. */
		if (!b || !hp_sample_in_heap(&p->samples[i], NULL))
			continue;
		k = sample_site(t, p, &p->samples[i], &d, fr);
		if (k < 0)
			goto oom;
		if ((size_t)k >= nacc) {
			size_t n = t->csites > (size_t)k ? t->csites : (size_t)k + 1;
			int64_t *a = realloc(acc, n * sizeof(*a));

			if (!a)
				goto oom;
			memset(a + nacc, 0, (n - nacc) * sizeof(*a));
			acc = a;
			nacc = n;
		}
		acc[k] = hp_sat_add(acc[k], b);
		pt.total = hp_sat_add(pt.total, b);
	}
	for (i = 0; i < nacc; i++)
		pt.nv += acc[i] != 0;
	pt.v = calloc(pt.nv + 1, sizeof(*pt.v));
	if (!pt.v)
		goto oom;
	pt.nv = 0;
	for (i = 0; i < nacc; i++)
		if (acc[i])
			pt.v[pt.nv++] = (struct hp_tl_val){ .site = (uint32_t)i, .bytes = acc[i] };
	free(acc);
	acc = NULL;
	hp_drop_free(&d);
	free(fr);
	fr = NULL;
	if (t->npts == t->cpts) {
		size_t c = t->cpts ? 2 * t->cpts : 64;
		struct hp_tl_point *n = realloc(t->pts, c * sizeof(*n));

		if (!n)
			goto oom;
		t->pts = n;
		t->cpts = c;
	}
	/* in time order (dumps of equal time in the order given) */
	for (i = t->npts; i > 0 && t->pts[i - 1].t_ns > t_ns; i--)
		t->pts[i] = t->pts[i - 1];
	t->pts[i] = pt;
	t->npts++;
	for (i = 0; i < p->ncomments && !t->what[0]; i++) {
		const char *c = strstr(p->comments[i], "profile of pid "), *e;

		/* "heapprofd profile of pid 123 (comm), session 1, now" */
		if (c && (e = strstr(c, "), ")))
			snprintf(t->what, sizeof(t->what), "%.*s)", (int)(e - c - 11), c + 11);
	}
	if (books_peak(p) > t->peak_any)
		t->peak_any = books_peak(p);
	return 0;
oom:
	if (fr) {
		hp_drop_free(&d);
		free(fr);
	}
	free(acc);
	free(pt.v);
	return -ENOMEM;
}

int hp_timeline_read_file(struct hp_timeline *t, const char *path, char *why, size_t wl)
{
	struct hp_prof p;
	struct stat st;
	int64_t when = 0;
	int rc;

	rc = hp_pprof_read(&p, path, why, wl);
	if (rc)
		return rc;
	if (p.time_ns > 0 && p.duration_ns > 0)
		when = hp_sat_add(p.time_ns, p.duration_ns);
	else if (!stat(path, &st))
		when = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
	rc = hp_timeline_add(t, &p, when, path);
	if (rc)
		snprintf(why, wl, "%s: out of memory", path);
	hp_prof_free(&p);
	return rc;
}

struct numbered {
	unsigned long n;
	char *path;
};

static int numbered_cmp(const void *a, const void *b)
{
	const struct numbered *x = a, *y = b;

	return x->n < y->n ? -1 : x->n > y->n;
}

int hp_timeline_read_prefix(struct hp_timeline *t, const char *prefix, char *why, size_t wl)
{
	size_t plen = strlen(prefix), n = 0, i;
	struct numbered *list = NULL;
	char *pat, *final;
	glob_t g;
	int rc = 0;

	pat = malloc(plen + 32);
	final = malloc(plen + 8);
	if (!pat || !final) {
		free(pat);
		free(final);
		snprintf(why, wl, "out of memory");
		return -ENOMEM;
	}
	snprintf(pat, plen + 32, "%s.[0-9][0-9][0-9][0-9]*.pb.gz", prefix);
	snprintf(final, plen + 8, "%s.pb.gz", prefix);
	memset(&g, 0, sizeof(g));
	if (!glob(pat, 0, NULL, &g))
		list = calloc(g.gl_pathc + 1, sizeof(*list));
	for (i = 0; list && i < g.gl_pathc; i++) {
		const char *s = g.gl_pathv[i] + plen;
		size_t d;

		/* the prefix may hold glob characters: only its own PREFIX.NNNN.pb.gz */
		if (strncmp(g.gl_pathv[i], prefix, plen) || s[0] != '.')
			continue;
		d = strspn(s + 1, "0123456789");
		if (d < 4 || strcmp(s + 1 + d, ".pb.gz"))
			continue;
		list[n].n = strtoul(s + 1, NULL, 10);
		list[n++].path = g.gl_pathv[i];
	}
	if (list)
		qsort(list, n, sizeof(*list), numbered_cmp);
	for (i = 0; i < n && !rc; i++)
		rc = hp_timeline_read_file(t, list[i].path, why, wl);
	if (!rc && !access(final, F_OK))
		rc = hp_timeline_read_file(t, final, why, wl);
	else if (!rc && !n) {
		snprintf(why, wl, "no profiles %.400s.NNNN.pb.gz nor %.400s.pb.gz", prefix, prefix);
		rc = -ENOENT;
	}
	/* An earlier recording's dumps beyond this one's count: not this run. */
	if (!rc && t->npts) {
		int64_t s = t->pts[t->npts - 1].session_ns;
		size_t k = 0;

		for (i = 0; i < t->npts; i++) {
			if (s && t->pts[i].session_ns && t->pts[i].session_ns != s) {
				free(t->pts[i].v);
				t->skipped++;
			} else {
				t->pts[k++] = t->pts[i];
			}
		}
		t->npts = k;
	}
	free(list);
	globfree(&g);
	free(pat);
	free(final);
	return rc;
}

size_t hp_timeline_peak(const struct hp_timeline *t)
{
	size_t pk = t->npts;

	for (size_t i = 0; i < t->npts; i++)
		if (pk == t->npts || t->pts[i].total > t->pts[pk].total)
			pk = i;
	return pk;
}

/* Time 0 of the chart: the session's start, or the first dump's time. */
static int64_t origin(const struct hp_timeline *t, int *session)
{
	int64_t o = INT64_MAX;

	*session = 1;
	for (size_t i = 0; i < t->npts; i++) {
		const struct hp_tl_point *p = &t->pts[i];
		int64_t z = p->session_ns > 0 && p->session_ns <= p->t_ns ? p->session_ns : p->t_ns;

		if (z == p->t_ns)
			*session = 0;
		if (z < o)
			o = z;
	}
	return t->npts ? o : 0;
}

/*
 * What a chart shows: the top call sites (most bytes in use at any one
 * dump first), and per point m[i * (nl + 1) + j] the bytes of site j, the
 * last column the rest.
 */
struct tl_view {
	size_t nl;
	uint32_t *site;		/* nl top sites */
	int64_t *max;		/* their most bytes at one dump */
	int64_t *m;
	size_t peak;
	int64_t t0;
	int session;		/* t0 is the session's start */
};

static const struct hp_timeline *sort_t;
static const int64_t *sort_max;

static int site_cmp(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	if (sort_max[x] != sort_max[y])
		return sort_max[x] < sort_max[y] ? 1 : -1;
	return strcmp(sort_t->sites[x], sort_t->sites[y]);
}

static void view_free(struct tl_view *v)
{
	free(v->site);
	free(v->max);
	free(v->m);
}

static int view_build(const struct hp_timeline *t, int top, struct tl_view *v)
{
	int64_t *smax = calloc(t->nsites + 1, sizeof(*smax));
	uint32_t *order = calloc(t->nsites + 1, sizeof(*order));
	int64_t *rank = calloc(t->nsites + 1, sizeof(*rank));
	size_t i, j, cols;

	memset(v, 0, sizeof(*v));
	if (!smax || !order || !rank)
		goto oom;
	for (i = 0; i < t->npts; i++)
		for (j = 0; j < t->pts[i].nv; j++)
			if (t->pts[i].v[j].bytes > smax[t->pts[i].v[j].site])
				smax[t->pts[i].v[j].site] = t->pts[i].v[j].bytes;
	for (i = 0; i < t->nsites; i++)
		order[i] = (uint32_t)i;
	sort_t = t;
	sort_max = smax;
	qsort(order, t->nsites, sizeof(*order), site_cmp);
	/* only sites that held something */
	while (v->nl < t->nsites && smax[order[v->nl]] > 0 && (top <= 0 || v->nl < (size_t)top))
		v->nl++;
	cols = v->nl + 1;
	v->site = calloc(cols, sizeof(*v->site));
	v->max = calloc(cols, sizeof(*v->max));
	v->m = calloc(t->npts * cols + 1, sizeof(*v->m));
	if (!v->site || !v->max || !v->m)
		goto oom;
	for (i = 0; i < t->nsites; i++)
		rank[i] = -1;
	for (j = 0; j < v->nl; j++) {
		v->site[j] = order[j];
		v->max[j] = smax[order[j]];
		rank[order[j]] = (int64_t)j;
	}
	for (i = 0; i < t->npts; i++) {
		int64_t *row = &v->m[i * cols], rest = t->pts[i].total;

		for (j = 0; j < t->pts[i].nv; j++) {
			int64_t r = rank[t->pts[i].v[j].site];

			if (r >= 0) {
				row[r] = t->pts[i].v[j].bytes;
				rest = hp_sat_sub(rest, row[r]);
			}
		}
		row[v->nl] = rest;
		if (rest > v->max[v->nl])
			v->max[v->nl] = rest;
	}
	v->peak = hp_timeline_peak(t);
	v->t0 = origin(t, &v->session);
	free(smax);
	free(order);
	free(rank);
	return 0;
oom:
	free(smax);
	free(order);
	free(rank);
	view_free(v);
	return -1;
}

/* 3 significant digits and a binary unit: "512 KiB", "12.3 MiB" */
static const char *bytes_str(char *b, size_t l, int64_t v)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double d = fabs((double)v);
	int i = 0;

	while (d >= 1024 && i < 4) {
		d /= 1024;
		i++;
	}
	snprintf(b, l, "%s%.*f %s", v < 0 ? "-" : "", !i || d >= 100 ? 0 : d >= 10 ? 1 : 2, d, u[i]);
	return b;
}

static const char *secs_str(char *b, size_t l, double s)
{
	if (s < 10)
		snprintf(b, l, "%.2f s", s);
	else if (s < 600)
		snprintf(b, l, "%.1f s", s);
	else
		snprintf(b, l, "%.1f min", s / 60);
	return b;
}

void hp_timeline_summary(const struct hp_timeline *t, char *buf, size_t len)
{
	size_t pk = hp_timeline_peak(t);
	int session;
	int64_t t0 = origin(t, &session);
	char b1[32], b2[32], b3[32];

	if (pk >= t->npts) {
		snprintf(buf, len, "no dumps");
		return;
	}
	snprintf(buf, len, "%zu dump%s over %s; peak %s in use at %s (%s)", t->npts,
		 t->npts == 1 ? "" : "s", secs_str(b1, sizeof(b1), (double)(t->pts[t->npts - 1].t_ns - t0) / 1e9),
		 bytes_str(b2, sizeof(b2), t->pts[pk].total),
		 secs_str(b3, sizeof(b3), (double)(t->pts[pk].t_ns - t0) / 1e9), t->pts[pk].label);
}

/* ---- CSV --------------------------------------------------------------------- */

static void csv_field(FILE *f, const char *s)
{
	if (!strpbrk(s, ",\"\n\r")) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
	}
	fputc('"', f);
}

int hp_timeline_csv(const struct hp_timeline *t, int top, FILE *f)
{
	struct tl_view v;
	size_t i, j, cols;

	if (view_build(t, top, &v))
		return -1;
	cols = v.nl + 1;
	fprintf(f, "# heapprofd timeline: bytes in use at each of %zu dumps (estimated from the samples); "
		"exact_bytes by the client's counters as last published (they may lag while it runs); the %zu call sites that held the most, then other\n",
		t->npts, v.nl);
	if (v.peak < t->npts)
		fprintf(f, "# peak: %" PRId64 " bytes at %.3f s (%s)\n", t->pts[v.peak].total,
			(double)(t->pts[v.peak].t_ns - v.t0) / 1e9, t->pts[v.peak].label);
	if (t->peak_any > 0)
		fprintf(f, "# highest in use, between dumps too: %" PRId64 " bytes\n", t->peak_any);
	fputs("time_s,total_bytes,exact_bytes", f);
	for (j = 0; j < v.nl; j++) {
		fputc(',', f);
		csv_field(f, t->sites[v.site[j]]);
	}
	fputs(",other,file\n", f);
	for (i = 0; i < t->npts; i++) {
		const struct hp_tl_point *p = &t->pts[i];

		fprintf(f, "%.3f,%" PRId64 ",", (double)(p->t_ns - v.t0) / 1e9, p->total);
		if (p->exact >= 0)
			fprintf(f, "%" PRId64, p->exact);
		for (j = 0; j < cols; j++)
			fprintf(f, ",%" PRId64, v.m[i * cols + j]);
		fputc(',', f);
		csv_field(f, p->label);
		fputc('\n', f);
	}
	view_free(&v);
	return ferror(f) ? -1 : 0;
}

/* ---- SVG chart ---------------------------------------------------------------- */

#define TL_W	1200.0
#define TL_L	90.0	/* left of the plot: the byte axis */
#define TL_R	30.0
#define TL_T	72.0	/* above the plot: title, subtitle, the peak's label */
#define TL_PH	400.0
#define TL_PW	(TL_W - TL_L - TL_R)
#define TL_ROW	20

static const char *const palette[] = {
	"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#86bcb6",
};
#define OTHER_COLOR "#c9c9c9"

static void esc(FILE *f, const char *s, size_t max)
{
	size_t n;

	for (n = 0; s[n] && n < max; n++) {
		unsigned char c = (unsigned char)s[n];

		if (c == '<')
			fputs("&lt;", f);
		else if (c == '>')
			fputs("&gt;", f);
		else if (c == '&')
			fputs("&amp;", f);
		else if (c == '"')
			fputs("&quot;", f);
		else if (c >= 0x20)
			fputc(c, f);
	}
	if (s[n])
		fputs("...", f);
}

/* A tick step of 1, 2, 2.5 or 5 times a power of ten, at most about n ticks. */
static double tick_step(double range, int n)
{
	double raw = range / n, mag = pow(10, floor(log10(raw))), r = raw / mag;

	return mag * (r <= 1 ? 1 : r <= 2 ? 2 : r <= 2.5 ? 2.5 : r <= 5 ? 5 : 10);
}

struct scale {
	double x_span_s, y_top;		/* seconds, bytes at the top of the plot */
	int64_t t0;
};

static double sx(const struct scale *s, int64_t t_ns)
{
	return TL_L + TL_PW * ((double)(t_ns - s->t0) / 1e9) / s->x_span_s;
}

static double sy(const struct scale *s, double bytes)
{
	if (bytes < 0)
		bytes = 0;
	return TL_T + TL_PH - TL_PH * bytes / s->y_top;
}

static void axes(FILE *f, struct scale *sc, double ymax, double tmax_s, int session)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double unit = 1, step, v, tstep, tdiv = 1;
	const char *tu = "s";
	int k = 0;

	/* bytes: a binary unit so that the labels are small numbers */
	while (ymax >= unit * 1024 && k < 4) {
		unit *= 1024;
		k++;
	}
	step = tick_step(ymax / unit, 5);
	sc->y_top = ceil(ymax / unit / step - 1e-9) * step * unit;
	if (sc->y_top <= 0)
		sc->y_top = unit;
	fputs("<g class=\"axis\">\n", f);
	for (v = 0; v <= sc->y_top / unit + step / 2; v += step) {
		double y = sy(sc, v * unit);

		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g %s</text>\n",
			TL_L, y, TL_L + TL_PW, y, TL_L - 6, y + 4, v, u[k]);
	}
	/* time: ms for short runs, minutes for long ones */
	if (tmax_s < 2) {
		tdiv = 1e-3;
		tu = "ms";
	} else if (tmax_s >= 600) {
		tdiv = 60;
		tu = "min";
	}
	sc->x_span_s = tmax_s > 0 ? tmax_s : 1;
	tstep = tick_step(sc->x_span_s / tdiv, 10);
	for (v = 0; v <= sc->x_span_s / tdiv + 1e-9; v += tstep) {
		double x = TL_L + TL_PW * v * tdiv / sc->x_span_s;

		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g %s</text>\n",
			x, TL_T, x, TL_T + TL_PH + 4, x, TL_T + TL_PH + 18, v, tu);
	}
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n"
		"<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#444\"/>\n",
		TL_L, TL_T, TL_L, TL_T + TL_PH, TL_L, TL_T + TL_PH, TL_L + TL_PW, TL_T + TL_PH);
	fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">time since %s</text>\n",
		TL_L + TL_PW / 2, TL_T + TL_PH + 36,
		session ? "the recording started" : "the first dump");
	fprintf(f, "<text transform=\"translate(18,%.1f) rotate(-90)\" text-anchor=\"middle\">"
		"bytes in use</text>\n</g>\n", TL_T + TL_PH / 2);
}

/* One stacked layer: between the running sum lo and lo + its column j. */
static void layer(FILE *f, const struct hp_timeline *t, const struct tl_view *v,
		  const struct scale *sc, size_t j, double *lo, const char *color, const char *name)
{
	size_t i, cols = v->nl + 1;
	char b[32];

	fprintf(f, "<g class=\"layer\"><title>");
	esc(f, name, 400);
	fprintf(f, " (at most %s)</title>", bytes_str(b, sizeof(b), v->max[j]));
	if (t->npts == 1) {
		double x = sx(sc, t->pts[0].t_ns), h = v->m[j] > 0 ? (double)v->m[j] : 0;

		fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"12\" height=\"%.1f\" fill=\"%s\"/>",
			x - 6, sy(sc, lo[0] + h), sy(sc, lo[0]) - sy(sc, lo[0] + h), color);
		lo[0] += h;
		fputs("</g>\n", f);
		return;
	}
	fprintf(f, "<polygon fill=\"%s\" stroke=\"#fff\" stroke-width=\"0.5\" points=\"", color);
	for (i = 0; i < t->npts; i++) {
		double h = v->m[i * cols + j] > 0 ? (double)v->m[i * cols + j] : 0;

		fprintf(f, "%.1f,%.1f ", sx(sc, t->pts[i].t_ns), sy(sc, lo[i] + h));
	}
	for (i = t->npts; i-- > 0;)
		fprintf(f, "%.1f,%.1f ", sx(sc, t->pts[i].t_ns), sy(sc, lo[i]));
	fputs("\"/></g>\n", f);
	for (i = 0; i < t->npts; i++)
		if (v->m[i * cols + j] > 0)
			lo[i] += (double)v->m[i * cols + j];
}

/* A layer's name inside it, where it is thickest, if there is room. */
static void layer_label(FILE *f, const struct hp_timeline *t, const struct tl_view *v,
			const struct scale *sc, size_t j, const double *lo, const char *name)
{
	size_t i, best = 0, cols = v->nl + 1;
	double x, y, h;
	const char *anchor = "middle";

	for (i = 1; i < t->npts; i++)
		if (v->m[i * cols + j] > v->m[best * cols + j])
			best = i;
	h = v->m[best * cols + j] > 0 ? (double)v->m[best * cols + j] : 0;
	if (t->npts < 2 || sy(sc, lo[best]) - sy(sc, lo[best] + h) < 15)
		return;
	x = sx(sc, t->pts[best].t_ns);
	y = sy(sc, lo[best] + h / 2) + 4;
	if (x < TL_L + TL_PW * 0.2) {
		anchor = "start";
		x += 6;
	} else if (x > TL_L + TL_PW * 0.8) {
		anchor = "end";
		x -= 6;
	}
	fprintf(f, "<text class=\"in\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">", x, y, anchor);
	esc(f, name, 48);
	fputs("</text>\n", f);
}

int hp_timeline_svg(const struct hp_timeline *t, int top, const char *title, FILE *f)
{
	struct tl_view v;
	struct scale sc = { 0 };
	size_t i, j, cols, rows;
	double ymax = 0, tmax_s = 0, *lo, *lo_before, height, ly;
	char b1[32], b2[32];
	const struct hp_tl_point *pk;

	if (view_build(t, top, &v))
		return -1;
	cols = v.nl + 1;
	lo = calloc(t->npts + 1, sizeof(*lo));
	lo_before = calloc((t->npts + 1) * cols, sizeof(*lo_before));
	if (!lo || !lo_before) {
		free(lo);
		free(lo_before);
		view_free(&v);
		return -1;
	}
	for (i = 0; i < t->npts; i++) {
		const struct hp_tl_point *p = &t->pts[i];
		double stack = 0;

		for (j = 0; j < cols; j++)
			stack += v.m[i * cols + j] > 0 ? (double)v.m[i * cols + j] : 0;
		ymax = fmax(ymax, fmax(stack, fmax((double)p->total, (double)t->peak_any)));
		tmax_s = fmax(tmax_s, (double)(p->t_ns - v.t0) / 1e9);
	}
	if (ymax <= 0)
		ymax = 1024;
	sc.t0 = v.t0;
	rows = cols + 1;
	height = TL_T + TL_PH + 60 + (rows + 1) * TL_ROW + 12;
	pk = v.peak < t->npts ? &t->pts[v.peak] : NULL;

	fprintf(f, "<?xml version=\"1.0\" standalone=\"no\"?>\n"
		"<svg version=\"1.1\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
		"xmlns=\"http://www.w3.org/2000/svg\" data-points=\"%zu\"",
		(int)TL_W, (int)height, (int)TL_W, (int)height, t->npts);
	if (pk)
		fprintf(f, " data-peak-bytes=\"%" PRId64 "\" data-peak-t-ns=\"%" PRId64 "\" data-peak-any=\"%" PRId64 "\"",
			pk->total, pk->t_ns - v.t0, t->peak_any);
	fputs(">\n<style>text{font-family:sans-serif;font-size:12px;fill:#222}"
	      ".title{font-size:18px;font-weight:bold}.sub{fill:#555}"
	      ".in{font-size:11px;fill:#111;pointer-events:none}"
	      ".peak{fill:#c0392b;font-weight:bold}"
	      "polygon:hover,rect.sw:hover{opacity:0.8}</style>\n"
	      "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n", f);
	fprintf(f, "<text class=\"title\" x=\"%.0f\" y=\"26\">Memory in use over time", TL_L);
	if (!title && t->what[0])
		title = t->what;
	if (title && *title) {
		fputs(": ", f);
		esc(f, title, 120);
	}
	fprintf(f, "</text>\n<text class=\"sub\" x=\"%.0f\" y=\"46\">", TL_L);
	fprintf(f, "bytes in use at each of %zu dump%s (estimated from the samples), the %zu call "
		"site%s that held the most stacked, the rest as other", t->npts,
		t->npts == 1 ? "" : "s", v.nl, v.nl == 1 ? "" : "s");
	if (t->skipped)
		fprintf(f, "; %zu dump%s of an earlier recording left out", t->skipped,
			t->skipped == 1 ? "" : "s");
	fputs("</text>\n", f);
	axes(f, &sc, ymax, tmax_s, v.session);
	if (!t->npts)
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">no dumps</text>\n",
			TL_L + TL_PW / 2, TL_T + TL_PH / 2);

	/* the stack: the biggest site at the bottom, other on top */
	for (j = 0; j < cols; j++) {
		for (i = 0; i < t->npts; i++)
			lo_before[i * cols + j] = lo[i];
		layer(f, t, &v, &sc, j, lo, j < v.nl ? palette[j % 10] : OTHER_COLOR,
		      j < v.nl ? t->sites[v.site[j]] : "other call sites");
	}
	for (j = 0; j < cols; j++) {
		double *l = calloc(t->npts + 1, sizeof(*l));

		if (!l)
			break;
		for (i = 0; i < t->npts; i++)
			l[i] = lo_before[i * cols + j];
		layer_label(f, t, &v, &sc, j, l, j < v.nl ? t->sites[v.site[j]] : "other");
		free(l);
	}

	/* the total, each dump a point to hover */
	if (t->npts > 1) {
		fputs("<polyline fill=\"none\" stroke=\"#222\" stroke-width=\"1.5\" points=\"", f);
		for (i = 0; i < t->npts; i++)
			fprintf(f, "%.1f,%.1f ", sx(&sc, t->pts[i].t_ns), sy(&sc, (double)t->pts[i].total));
		fputs("\"/>\n", f);
	}
	fputs("<g class=\"points\">\n", f);
	for (i = 0; i < t->npts; i++) {
		const struct hp_tl_point *p = &t->pts[i];

		fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#222\" "
			"data-t-ns=\"%" PRId64 "\" data-total=\"%" PRId64 "\"",
			sx(&sc, p->t_ns), sy(&sc, (double)p->total), p->t_ns - v.t0, p->total);
		if (p->exact >= 0)
			fprintf(f, " data-exact=\"%" PRId64 "\"", p->exact);
		fprintf(f, "><title>%s: %s in use", secs_str(b1, sizeof(b1), (double)(p->t_ns - v.t0) / 1e9),
			bytes_str(b2, sizeof(b2), p->total));
		fputs(" - ", f);
		esc(f, p->label, 300);
		fputs("</title></circle>\n", f);
	}
	fputs("</g>\n", f);

	/* the peak */
	if (pk) {
		double x = sx(&sc, pk->t_ns), y = sy(&sc, (double)pk->total);
		const char *anchor = x > TL_L + TL_PW * 0.75 ? "end" :
				     x < TL_L + TL_PW * 0.25 ? "start" : "middle";

		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c0392b\" "
			"stroke-width=\"1.5\" stroke-dasharray=\"4,3\"/>\n"
			"<circle cx=\"%.1f\" cy=\"%.1f\" r=\"6\" fill=\"none\" stroke=\"#c0392b\" stroke-width=\"2\"/>\n",
			x, TL_T - 4, x, TL_T + TL_PH, x, y);
		fprintf(f, "<text class=\"peak\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">peak %s at %s</text>\n",
			x, TL_T - 8, anchor, bytes_str(b1, sizeof(b1), pk->total),
			secs_str(b2, sizeof(b2), (double)(pk->t_ns - v.t0) / 1e9));
	}

	/* the books saw more between two dumps than any dump did */
	if (pk && t->peak_any > pk->total) {
		double y = sy(&sc, (double)t->peak_any);

		fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c0392b\" "
			"stroke-dasharray=\"2,3\"/>\n<text class=\"peak\" x=\"%.1f\" y=\"%.1f\" "
			"style=\"font-weight:normal\">highest between dumps: %s</text>\n",
			TL_L, y, TL_L + TL_PW, y, TL_L + 6, y + 14,
			bytes_str(b1, sizeof(b1), t->peak_any));
	}

	/* the legend: every layer with its most and its bytes at the peak */
	ly = TL_T + TL_PH + 60;
	fprintf(f, "<text class=\"sub\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">at most</text>"
		"<text class=\"sub\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">at the peak</text>"
		"<text class=\"sub\" x=\"%.1f\" y=\"%.1f\">call site (top to bottom as stacked)</text>\n",
		TL_L + 100, ly, TL_L + 190, ly, TL_L + 205, ly);
	for (j = cols, ly += TL_ROW; j-- > 0; ly += TL_ROW) {
		const char *name = j < v.nl ? t->sites[v.site[j]] : "other call sites";

		if (j == v.nl && v.max[j] <= 0) {
			ly -= TL_ROW;	/* nothing else held memory */
			continue;
		}

		fprintf(f, "<rect class=\"sw\" x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>",
			TL_L, ly - 11, j < v.nl ? palette[j % 10] : OTHER_COLOR);
		fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>"
			"<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text><text x=\"%.1f\" y=\"%.1f\">",
			TL_L + 100, ly, bytes_str(b1, sizeof(b1), v.max[j]), TL_L + 190, ly,
			pk ? bytes_str(b2, sizeof(b2), v.m[v.peak * cols + j]) : "-", TL_L + 205, ly);
		esc(f, name, 120);
		fputs("</text>\n", f);
	}
	fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#222\" stroke-width=\"1.5\"/>"
		"<text x=\"%.1f\" y=\"%.1f\">total in use (estimated from the samples), a point per dump: hover it</text>\n",
		TL_L, ly - 4, TL_L + 14, ly - 4, TL_L + 22, ly);
	fputs("</svg>\n", f);
	free(lo);
	free(lo_before);
	view_free(&v);
	return ferror(f) ? -1 : 0;
}
