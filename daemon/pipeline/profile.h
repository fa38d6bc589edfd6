/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A profile as the files hold it, for the daemon's writers and for the
 * user's command (heapprofctl report, symbolize): the in-memory model
 * (prof.c), pprof read and write (pprof.c), the renderers (render.c;
 * timeline.c, memory over time) and the frames they show (frames.c),
 * differences (prof_diff.c) and offline symbolization (prof_symbolize.c).
 * The rest of the pipeline is internal.h's.
 */
#ifndef HEAPPROFD_PIPELINE_PROFILE_H
#define HEAPPROFD_PIPELINE_PROFILE_H

#include <regex.h>
#include <stdint.h>
#include <stdio.h>
#include <stddef.h>

#include "outfile.h"

/*
 * Sums of a profile's values: a profile read from a file may carry any
 * int64 (report, symbolize), so they saturate instead of overflowing.
 */
static inline int64_t hp_sat_add(int64_t a, int64_t b)
{
	int64_t r;

	if (!__builtin_add_overflow(a, b, &r))
		return r;
	return b > 0 ? INT64_MAX : INT64_MIN;
}

static inline int64_t hp_sat_sub(int64_t a, int64_t b)
{
	int64_t r;

	if (!__builtin_sub_overflow(a, b, &r))
		return r;
	return b < 0 ? INT64_MAX : INT64_MIN;
}

/* ---- hmap.c ------------------------------------------------------------ */

struct hp_hent {
	uint64_t k1, k2;
	void *v;		/* NULL: empty slot */
};

struct hp_hmap {
	struct hp_hent *t;
	size_t cap;		/* power of two or 0 */
	size_t n;
};

void *hp_hmap_get(const struct hp_hmap *m, uint64_t k1, uint64_t k2);
int hp_hmap_put(struct hp_hmap *m, uint64_t k1, uint64_t k2, void *v);	/* replaces */
void *hp_hmap_del(struct hp_hmap *m, uint64_t k1, uint64_t k2);
/*
 * One probe where a lookup is followed by a change, as in the books' hot
 * path: hp_hmap_find gives the member's slot (or NULL), hp_hmap_del_at
 * removes it; hp_hmap_probe makes room for one more member and gives the
 * member's slot or the empty one it would take (NULL: out of memory), and
 * hp_hmap_set_at fills it. A slot is good until the map next changes.
 */
struct hp_hent *hp_hmap_find(const struct hp_hmap *m, uint64_t k1, uint64_t k2);
void *hp_hmap_del_at(struct hp_hmap *m, struct hp_hent *e);
struct hp_hent *hp_hmap_probe(struct hp_hmap *m, uint64_t k1, uint64_t k2);
int hp_hmap_set_at(struct hp_hmap *m, struct hp_hent *e, uint64_t k1, uint64_t k2, void *v);
void hp_hmap_free(struct hp_hmap *m);
#define hp_hmap_for_each(m, e) \
	for ((e) = (m)->t; (m)->t && (e) < (m)->t + (m)->cap; (e)++) if ((e)->v)

uint64_t hp_hash_str(const char *s);

/* Interned strings: one copy of each, freed with the table. */
struct hp_strtab {
	struct hp_hmap m;
};
const char *hp_intern(struct hp_strtab *t, const char *s);
void hp_strtab_free(struct hp_strtab *t);

/* ---- prof.c: the shared in-memory profile ------------------------------ */

enum {
	HP_V_ALLOC_OBJ, HP_V_ALLOC_SPACE, HP_V_INUSE_OBJ, HP_V_INUSE_SPACE,
	HP_V_ALLOC_USABLE, HP_V_INUSE_USABLE, HP_NV
};
extern const char *const hp_v_names[HP_NV];
extern const char *const hp_v_units[HP_NV];

struct hp_prof_map {
	uint64_t start, limit, off;
	const char *file, *build_id;	/* build id as hex */
};

struct hp_prof_line {
	const char *func, *file;
	int64_t line;
};

struct hp_prof_loc {
	uint64_t addr;
	uint32_t map;		/* index + 1, 0 = none */
	const char *func;	/* NULL = unknown; the innermost (inlined) function */
	const char *file;
	int64_t line;
	/* the functions func was inlined into, innermost first: p->lines[inl..] */
	uint32_t inl, ninl;
	const struct hp_prof_line *inl_src;	/* hp_prof_add_loc input only */
};

struct hp_prof_sample {
	uint32_t *locs;		/* location indexes, leaf first */
	uint32_t nlocs;
	int64_t v[HP_NV];
	const char *heap;
	const char *exporter;	/* dmabuf: the buffer's exporter (label "exporter") */
};

/*
 * The heaps of a profile. In memory every sample has the same values
 * (v[HP_NV]) and its heap's name. Most heaps share the sample types of
 * malloc (alloc_space, ...); the dmabuf heap (DMA-BUF exports, device
 * memory) has its own in pprof files, dmabuf_alloc_objects,
 * dmabuf_alloc_space, dmabuf_inuse_objects and dmabuf_inuse_space (pprof.c
 * maps them), so that no view sums it with the process's heap.
 */
#define HP_HEAP_DMABUF_NAME	"dmabuf"
struct hp_prof;
/* Does this heap have sample types of its own (it is never summed with others)? */
int hp_heap_own_types(const char *heap);
/*
 * A report's choice of heap: NULL is the default, every heap that shares
 * malloc's sample types; "malloc" stands for "libc.malloc"; any other name
 * is that heap only.
 */
int hp_sample_in_heap(const struct hp_prof_sample *s, const char *sel);
/* The heaps p has samples of, with their counts: "libc.malloc (12 samples)". */
void hp_prof_heaps(const struct hp_prof *p, FILE *f, const char *indent);
/* Is there a sample of this heap selection in p? */
int hp_prof_has_heap(const struct hp_prof *p, const char *sel);

struct hp_prof {
	struct hp_prof_map *maps;
	size_t nmaps, cmaps;
	struct hp_prof_loc *locs;
	size_t nlocs, clocs;
	struct hp_prof_sample *samples;
	size_t nsamples, csamples;
	const char **comments;
	size_t ncomments, ccomments;
	struct hp_prof_line *lines;	/* inline callers of locations */
	size_t nlines, clines;
	int64_t time_ns, period;
	const char *drop_frames;	/* the file's drop_frames (frames.c), or NULL */
	int64_t duration_ns;	/* from time_ns to when the profile was taken */
	int has_v[HP_NV];	/* reader: which values the file carried */
	struct hp_strtab strs;
};

void hp_prof_init(struct hp_prof *p);
void hp_prof_free(struct hp_prof *p);
const char *hp_prof_str(struct hp_prof *p, const char *s);	/* interned, NULL ok */
uint32_t hp_prof_add_map(struct hp_prof *p, const struct hp_prof_map *m);
uint32_t hp_prof_add_loc(struct hp_prof *p, const struct hp_prof_loc *l);
int hp_prof_add_sample(struct hp_prof *p, const uint32_t *locs, uint32_t n,
		       const int64_t *v, const char *heap);
/* The same with the exporter label (NULL: none). */
int hp_prof_add_sample_l(struct hp_prof *p, const uint32_t *locs, uint32_t n,
			 const int64_t *v, const char *heap, const char *exporter);
void hp_prof_add_comment(struct hp_prof *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* "func" or "0xaddr (file)" for display */
const char *hp_prof_loc_name(const struct hp_prof *p, uint32_t loc, char *buf,
			     size_t len);
/* Frames of a location, innermost first: 0 is the location's own name,
 * 1.. the functions it was inlined into. Returns the count (>= 1). */
uint32_t hp_prof_loc_frames(const struct hp_prof *p, uint32_t loc);
void hp_prof_set_inline(struct hp_prof *p, uint32_t loc, const struct hp_prof_line *src,
			uint32_t n);
const char *hp_prof_loc_frame(const struct hp_prof *p, uint32_t loc, uint32_t k,
			      char *buf, size_t len);

/* ---- pprof.c / render.c ---------------------------------------------- */

/* Write p to path safely (outfile.h): 0, or -errno with a reason in why. */
int hp_pprof_write(const struct hp_prof *p, const char *path, char *why, size_t wl);
/* Into an open output file, not committed: 0 or -errno (o->why). */
int hp_pprof_write_out(const struct hp_prof *p, struct hp_out *o);
int hp_pprof_read(struct hp_prof *p, const char *path, char *why, size_t wl);
/* buf: the uncompressed profile.proto message (untrusted) */
int hp_pprof_parse(struct hp_prof *p, const uint8_t *buf, size_t len, char *why, size_t wl);
int hp_folded_write(const struct hp_prof *p, int metric, FILE *f);
int hp_svg_write(const struct hp_prof *p, int metric, const char *title, FILE *f);
int hp_text_write(const struct hp_prof *p, int top, FILE *f);

/* How report and the dumps render (render.c). */
struct hp_render_opts {
	int metric;		/* -1: hp_prof_metric() (SVG, folded); the table's order */
	int top;		/* rows of each table, 0 = all */
	const char *drop_frames;	/* NULL: the profile's or the default; "": none */
	const char *title;	/* SVG: what the graph shows, e.g. "sqlite3: at the peak" */
	const char *heap;	/* the samples shown: hp_sample_in_heap's selection */
	int all_heaps;		/* text, heap NULL: then a section per heap with
				 * sample types of its own (the daemon's .txt) */
};
int hp_svg_write_opts(const struct hp_prof *p, const struct hp_render_opts *o, FILE *f);
int hp_text_write_opts(const struct hp_prof *p, const struct hp_render_opts *o, FILE *f);
int hp_folded_write_opts(const struct hp_prof *p, const struct hp_render_opts *o, FILE *f);
/* "bytes allocated (alloc_space)" and the like, for titles and headers */
const char *hp_metric_words(int metric);
/* "alloc_space" (or a unit-less alias pprof takes: "alloc", "inuse") -> index, or -1 */
int hp_metric_by_name(const char *name);

/* ---- frames.c: allocator frames folded into their callers ---------------- */

extern const char HP_DROP_FRAMES_DEFAULT[];
struct hp_drop {
	regex_t re;
	int on;
	struct hp_hmap seen;	/* interned name -> 1 keep, 2 drop */
	/* The names made up for unnamed locations ("lib.so+0x3b50a"), one per
	 * location of made_p, interned once rather than at every frame of
	 * every sample (hp_sample_frames). */
	const struct hp_prof *made_p;
	const char **made;
	size_t nmade;
	const char *unknown;	/* "?", interned in made_p */
};
struct hp_frame {
	const char *name;	/* interned in the profile */
	const char *file;
	int64_t line;
};
/* rx NULL: p's drop_frames or the default; "" drops nothing. 0, or -1 + why. */
int hp_drop_init(struct hp_drop *d, const struct hp_prof *p, const char *rx,
		 char *why, size_t wl);
void hp_drop_free(struct hp_drop *d);
/* s's frames, leaf first, inline frames expanded, allocator frames dropped
 * by pprof's drop_frames rule; returns how many were written (<= max). */
size_t hp_sample_frames(const struct hp_prof *p, const struct hp_prof_sample *s,
			struct hp_drop *d, struct hp_frame *out, size_t max);
/* The call site those frames name (the leaf; an unnamed one with its nearest
 * named caller: "lib.so+0x3b50a (called from f)"), interned in p (render.c). */
/* Intern s in p's strings (the formats of a dump may call it at once). */
const char *hp_prof_intern(const struct hp_prof *p, const char *s);
const char *hp_site_name(const struct hp_prof *p, const struct hp_frame *fr, size_t n,
			 char *buf, size_t len);
#define HP_MAX_FRAMES	2048	/* frames of one sample, inline ones included */
int hp_prof_metric(const struct hp_prof *p);	/* inuse_space unless all 0 */
/* The same over the samples of a heap selection (hp_sample_in_heap). */
int hp_prof_metric_heap(const struct hp_prof *p, const char *heap);
/* fn's output into o's stream, not committed: 0 or -errno (o->why). */
int hp_write_out(struct hp_out *o, int (*fn)(const struct hp_prof *, int, FILE *),
		 const struct hp_prof *p, int arg);


/* ---- timeline.c: memory in use over time, from a series of dumps -------- */

struct hp_tl_val {
	uint32_t site;		/* index into sites */
	int64_t bytes;
};

struct hp_tl_point {
	int64_t t_ns;		/* when the dump was taken (time_ns + duration_ns) */
	int64_t session_ns;	/* the profile's time_ns: its session's start */
	int64_t total;		/* in-use bytes, estimated from the samples */
	int64_t exact;		/* in use by the client's exact counters, or -1 */
	const char *label;	/* the file it came from */
	struct hp_tl_val *v;	/* per call site */
	size_t nv;
};

struct hp_timeline {
	struct hp_tl_point *pts;	/* in time order */
	size_t npts, cpts;
	const char **sites;	/* call-site names, interned in strs */
	size_t nsites, csites;
	struct hp_hmap idx;	/* interned name -> site index + 1 */
	struct hp_strtab strs;
	size_t skipped;		/* reader: dumps of another recording left out */
	char what[128];		/* "comm (pid N)", from the first dump's comment */
	int64_t peak_any;	/* the highest in use the dumps saw, between dumps
				 * too (their "peak in-use bytes" comment); 0: unknown */
};

void hp_timeline_init(struct hp_timeline *t);
void hp_timeline_free(struct hp_timeline *t);
/* p's in-use bytes per call site as a point at t_ns (absolute): 0 or -ENOMEM. */
int hp_timeline_add(struct hp_timeline *t, const struct hp_prof *p, int64_t t_ns,
		    const char *label);
/* One pprof file, timed by its time_nanos + duration_nanos (else its mtime). */
int hp_timeline_read_file(struct hp_timeline *t, const char *path, char *why, size_t wl);
/* A continuous recording: PREFIX.0001.pb.gz, PREFIX.0002.pb.gz, ... and the
 * final PREFIX.pb.gz; dumps of an earlier recording under the same prefix
 * are left out (counted in skipped). 0 (no dump found: -ENOENT), or -errno. */
int hp_timeline_read_prefix(struct hp_timeline *t, const char *prefix, char *why, size_t wl);
/* The point with the most bytes in use (the first of equals); npts if none. */
size_t hp_timeline_peak(const struct hp_timeline *t);
/* "14 dumps over 1.52 s; peak 15.0 MiB in use at 1.05 s (FILE)" */
void hp_timeline_summary(const struct hp_timeline *t, char *buf, size_t len);
/* The chart: in-use bytes over time, the top call sites stacked; title
 * NULL: what the dumps say they are of. */
int hp_timeline_svg(const struct hp_timeline *t, int top, const char *title, FILE *f);
/* The same numbers as CSV: time, total, exact, the top sites, other, file. */
int hp_timeline_csv(const struct hp_timeline *t, int top, FILE *f);

/* ---- prof_diff.c ------------------------------------------------------- */

/* d (initialised) = a - base, locations matched by name and file:line. */
int hp_prof_diff(struct hp_prof *d, const struct hp_prof *a, const struct hp_prof *base);

/* ---- prof_symbolize.c --------------------------------------------------- */

struct hp_prof_symbolized {
	size_t done;		/* locations that got a name */
	size_t missing;		/* in a known file, but no symbol there */
	size_t nomap;		/* no usable mapping (file not found, no build id) */
};

/*
 * Name the unnamed locations of p from the ELF files its mappings name
 * (by build id under /usr/lib/debug, or the file itself if its build id
 * matches); says on warn which files were not found. Returns 0.
 */
int hp_prof_symbolize(struct hp_prof *p, struct hp_prof_symbolized *n, FILE *warn);

#endif
