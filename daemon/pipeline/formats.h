/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The output formats, as one table: each format is a name (what
 * `heapprofctl record --format` and `report --format` take), the extension
 * of its file and one writer. The daemon's dumps, heapprofctl and the
 * exports all find a format here, so a new format is its own file plus one
 * line in formats.c's list.
 *
 * Each format has a bit in a set of formats: its place in the list
 * (hp_format_bit). The first four keep the HP_OUT_* names of pipeline.h.
 */
#ifndef HEAPPROFD_PIPELINE_FORMATS_H
#define HEAPPROFD_PIPELINE_FORMATS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct hp_prof;
struct hp_out;
struct hp_out_limit;

/* Whose profile it is, for the formats that say so (OTLP's resource). */
struct hp_prof_who {
	pid_t pid;
	const char *comm;	/* may be NULL */
	const char *exe;	/* the executable's path, or NULL */
	const char *cmdline;	/* arguments joined by spaces, or NULL */
	const char *host;	/* NULL: this machine's name */
	const char *kind;	/* "" (now), "peak", "oom", ... */
};

struct hp_format_args {
	int metric;		/* what SVG and folded show: hp_prof_metric() */
	const char *title;	/* SVG */
	const struct hp_prof_who *who;	/* may be NULL */
};

#define HP_FMT_DEFAULT	(1U << 0)	/* in a dump's set when none is asked for */
#define HP_FMT_HEAVY	(1U << 1)	/* costly to render: dropped first under memory pressure */

struct hp_format {
	const char *name;	/* "pprof" */
	const char *ext;	/* ".pb.gz" */
	const char *what;	/* for lists and messages: "pprof (go tool pprof)" */
	unsigned flags;		/* HP_FMT_* */
	/* Write p into o (not committed): 0 or -errno, o->why saying what. */
	int (*write)(const struct hp_prof *p, const struct hp_format_args *a, struct hp_out *o);
};

extern const struct hp_format hp_format_pprof, hp_format_folded, hp_format_text,
	hp_format_svg, hp_format_otlp;

/* The formats, in the order a dump writes them (pprof first); NULL-ended. */
extern const struct hp_format *const hp_formats[];

unsigned hp_format_bit(const struct hp_format *f);
/* The set of the formats whose flags have any of these bits. */
unsigned hp_formats_with(unsigned flags);
const struct hp_format *hp_format_by_name(const char *name);
/*
 * "pprof,svg" -> their set. 0, or -1 with why naming the unknown one and
 * the formats there are.
 */
int hp_formats_parse(const char *list, unsigned *set, char *why, size_t wl);
/* "pprof, folded" (separator sep) for messages; "" for none. */
void hp_formats_names(unsigned set, const char *sep, char *buf, size_t len);

/*
 * The files of one profile, PREFIX MID EXT for each format of set, all or
 * none (outfile.h), in the table's order. Under a limit (lim, may be NULL)
 * the first must fit or the profile fails with the limit's reason; a later
 * one that would pass it is left out (its bit added to lim->left_out) and
 * the next are still tried. 0, or -errno with why.
 */
int hp_formats_write(const struct hp_prof *p, const char *prefix, const char *mid,
		     unsigned set, const struct hp_format_args *a, struct hp_out_limit *lim,
		     char *why, size_t wl);

/*
 * One format's bytes in memory, for sending: *buf (malloc'ed, the caller
 * frees) and *len. 0, or -errno with why.
 */
int hp_format_encode(const struct hp_format *f, const struct hp_prof *p,
		     const struct hp_format_args *a, uint8_t **buf, size_t *len,
		     char *why, size_t wl);

#endif /* HEAPPROFD_PIPELINE_FORMATS_H */
