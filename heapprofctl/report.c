// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofctl report: read a profile, optionally minus a base profile, and
 * print its top call sites and its functions by cumulative bytes, or folded
 * stacks, or write a flame graph. Allocator frames are folded into their
 * callers by pprof's drop_frames rule (daemon/pipeline/frames.c);
 * --sample-index chooses what the graph and the order show.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "heapprofctl.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: heapprofctl report FILE [--top N] [--svg OUT.svg] [--folded] [--base OTHER]\n"
		   "                          [--sample-index NAME] [--title TEXT] [--heap NAME|list]\n"
		   "                          [--drop-frames REGEX | --no-drop-frames]\n"
		   "       heapprofctl report --timeline OUT.svg [--timeline-csv OUT.csv|-] [--top N]\n"
		   "                          PREFIX | FILE...\n"
		   "  --top N      show the N biggest call sites and functions (default 20, 0 = all;\n"
		   "               a timeline stacks 8 by default)\n"
		   "  --svg FILE   write a flame graph (open it in a browser)\n"
		   "  --format NAME -o FILE  write the profile in that format, as the daemon\n"
		   "               writes it (--format list: the formats there are)\n"
		   "  --folded     print folded stacks instead of the tables\n"
		   "  --base FILE  show FILE's profile subtracted (growth since then)\n"
		   "  --sample-index NAME  what the graph and the order show: alloc_space,\n"
		   "               inuse_space, alloc_objects, inuse_objects (default: inuse_space,\n"
		   "               or alloc_space when nothing is in use)\n"
		   "  --title TEXT the flame graph's title (default: FILE)\n"
		   "  --heap NAME  the heap shown by the tables, --svg and --folded: libc.malloc\n"
		   "               (or malloc), a custom heap's name, or dmabuf (DMA-BUF exports,\n"
		   "               with their exporter); default: malloc and the custom heaps.\n"
		   "               --heap list lists the profile's heaps\n"
		   "  --drop-frames REGEX  allocator frames to fold into their callers (pprof's\n"
		   "               drop_frames rule; default: the profile's own expression)\n"
		   "  --no-drop-frames     show every frame down to malloc\n"
		   "  --timeline FILE      a chart of bytes in use over time from the dumps of\n"
		   "               `record --continuous-dump` (PREFIX.0001.pb.gz, ... and PREFIX.pb.gz)\n"
		   "               or from the profiles given, the top call sites stacked\n"
		   "  --timeline-csv FILE  the same numbers as CSV (- for standard output)\n");
}

/* An existing file, or the prefix of a continuous recording? */
static int is_file(const char *a)
{
	struct stat st;

	return !stat(a, &st) && S_ISREG(st.st_mode);
}

static int timeline_read(struct hp_timeline *t, char *const *in, int nin, char *why, size_t wl)
{
	int i, rc = 0;

	for (i = 0; i < nin && !rc; i++) {
		size_t n = strlen(in[i]);
		char *pre = NULL;

		/* "PREFIX.pb.gz" alone names the recording when it has numbered dumps */
		if (nin == 1 && n > 6 && !strcmp(in[i] + n - 6, ".pb.gz") &&
		    (pre = strndup(in[i], n - 6))) {
			struct hp_timeline probe;
			char w[64];

			hp_timeline_init(&probe);
			if (hp_timeline_read_prefix(&probe, pre, w, sizeof(w)) || probe.npts < 2) {
				free(pre);
				pre = NULL;
			}
			hp_timeline_free(&probe);
		}
		if (pre)
			rc = hp_timeline_read_prefix(t, pre, why, wl);
		else if (is_file(in[i]))
			rc = hp_timeline_read_file(t, in[i], why, wl);
		else
			rc = hp_timeline_read_prefix(t, in[i], why, wl);
		free(pre);
	}
	return rc;
}

int hp_timeline_write(char *const *in, int nin, const char *svg, const char *csv, int top,
		      const char *title, const char *who)
{
	struct hp_timeline t;
	char why[1200], sum[PATH_MAX + 200];
	int rc = 0;

	hp_timeline_init(&t);
	if (timeline_read(&t, in, nin, why, sizeof(why))) {
		fprintf(stderr, "%s: timeline: %s\n", who, why);
		hp_timeline_free(&t);
		return 1;
	}
	for (int k = 0; k < 2 && !rc; k++) {
		const char *path = k ? csv : svg;
		struct hp_out o;
		FILE *f = NULL;
		int w;

		if (!path)
			continue;
		if (!strcmp(path, "-") && k) {
			errno = 0;
			if (hp_timeline_csv(&t, top, stdout) || fflush(stdout)) {
				fprintf(stderr, "%s: writing to standard output: %s\n", who,
					errno ? strerror(errno) : "write error");
				rc = 1;
			}
			continue;
		}
		if (!hp_out_open(&o, path, 0644))
			f = hp_out_stdio(&o);
		w = f ? (k ? hp_timeline_csv(&t, top, f) : hp_timeline_svg(&t, top, title, f)) : 0;
		if (f && (w || fflush(f)))
			hp_out_fail(&o, EIO, "writing");
		if (!f || hp_out_commit(&o)) {
			hp_out_abort(&o);
			fprintf(stderr, "%s: cannot write the timeline: %s\n", who, o.why);
			rc = 1;
		}
	}
	if (!rc) {
		hp_timeline_summary(&t, sum, sizeof(sum));
		fprintf(csv && !strcmp(csv, "-") ? stderr : stdout, "%s: timeline: %s%s%s\n", who,
			sum, svg ? "; wrote " : "", svg ? svg : "");
		if (t.skipped)
			fprintf(stderr, "%s: timeline: left out %zu dumps of an earlier recording under the same prefix\n",
				who, t.skipped);
	}
	hp_timeline_free(&t);
	return rc;
}

int hp_report_main(int argc, char **argv)
{
	const char *file = NULL, *svg = NULL, *base = NULL, *tl = NULL, *tl_csv = NULL,
		   *extra = NULL, *heap = NULL;
	struct hp_render_opts ro = { .metric = -1 };
	const struct hp_format *fmt = NULL;
	int converting = 0;
	int top = 20, folded = 0, i, rc = 0, top_set = 0, nin = 0;
	char **in = calloc((size_t)argc + 1, sizeof(*in));
	struct hp_prof a, b, d, *show = &a;
	char why[256];

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--top") && i + 1 < argc) {
			unsigned long long n;

			if (hp_parse_num(argv[++i], 0, INT_MAX, &n, why, sizeof(why))) {
				fprintf(stderr, "report: --top: %s\n", why);
				free(in);
				return 2;
			}
			top = (int)n;
			top_set = 1;
		} else if (!strcmp(argv[i], "--timeline") && i + 1 < argc) {
			tl = argv[++i];
		} else if (!strcmp(argv[i], "--timeline-csv") && i + 1 < argc) {
			tl_csv = argv[++i];
		} else if (!strcmp(argv[i], "--svg") && i + 1 < argc) {
			svg = argv[++i];
			fmt = &hp_format_svg;
		} else if (!strcmp(argv[i], "--format") && i + 1 < argc &&
			   !strcmp(argv[i + 1], "list")) {
			for (int k = 0; hp_formats[k]; k++)
				printf("%-8s %-10s %s\n", hp_formats[k]->name, hp_formats[k]->ext,
				       hp_formats[k]->what);
			free(in);
			return fflush(stdout) ? 1 : 0;
		} else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
			converting = 1;	/* the file is the output: no tables */
			fmt = hp_format_by_name(argv[++i]);
			if (!fmt) {
				hp_formats_names(~0U, ", ", why, sizeof(why));
				fprintf(stderr, "report: --format: '%s' is none of %s\n", argv[i], why);
				free(in);
				return 2;
			}
		} else if ((!strcmp(argv[i], "--output") || !strcmp(argv[i], "-o")) && i + 1 < argc) {
			svg = argv[++i];
		} else if (!strcmp(argv[i], "--folded")) {
			folded = 1;
		} else if (!strcmp(argv[i], "--sample-index") && i + 1 < argc) {
			ro.metric = hp_metric_by_name(argv[++i]);
			if (ro.metric < 0) {
				fprintf(stderr, "report: --sample-index: '%s' is none of alloc_space, "
					"inuse_space, alloc_objects, inuse_objects\n", argv[i]);
				free(in);
				return 2;
			}
		} else if (!strcmp(argv[i], "--heap") && i + 1 < argc) {
			heap = argv[++i];
		} else if (!strcmp(argv[i], "--title") && i + 1 < argc) {
			ro.title = argv[++i];
		} else if (!strcmp(argv[i], "--drop-frames") && i + 1 < argc) {
			struct hp_drop dr;

			ro.drop_frames = argv[++i];
			if (hp_drop_init(&dr, NULL, ro.drop_frames, why, sizeof(why))) {
				fprintf(stderr, "report: --drop-frames: %s\n", why);
				free(in);
				return 2;
			}
			hp_drop_free(&dr);
		} else if (!strcmp(argv[i], "--no-drop-frames")) {
			ro.drop_frames = "";
		} else if (!strcmp(argv[i], "--base") && i + 1 < argc) {
			base = argv[++i];
		} else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage(stdout);
			free(in);
			return 0;
		} else if (argv[i][0] == '-') {
			fprintf(stderr, "report: unexpected argument '%s'\n", argv[i]);
			usage(stderr);
			free(in);
			return 2;
		} else {
			if (in)
				in[nin] = argv[i];
			if (nin++ == 1)
				extra = argv[i];
			file = file ? file : argv[i];
		}
	}
	if (!in) {
		fprintf(stderr, "report: out of memory\n");
		return 1;
	}
	if ((tl || tl_csv) && nin && !svg && !base && !folded) {
		rc = hp_timeline_write(in, nin, tl, tl_csv, top_set ? top : 8, ro.title, "report");
		free(in);
		return rc;
	}
	free(in);
	if (!fmt != !svg) {
		fprintf(stderr, "report: %s\n", fmt ? "--format goes with -o FILE" :
			"-o FILE goes with --format NAME");
		usage(stderr);
		return 2;
	}
	if (!file || nin != 1 || tl || tl_csv) {
		if (tl || tl_csv)
			fprintf(stderr, "report: --timeline goes with PREFIX or FILE..., not with --svg, --folded or --base\n");
		else if (extra)
			fprintf(stderr, "report: unexpected argument '%s'\n", extra);
		usage(stderr);
		return 2;
	}
	if (hp_pprof_read(&a, file, why, sizeof(why))) {
		fprintf(stderr, "report: %s\n", why);
		return 1;
	}
	hp_prof_init(&d);
	if (base) {
		if (hp_pprof_read(&b, base, why, sizeof(why))) {
			fprintf(stderr, "report: base: %s\n", why);
			hp_prof_free(&a);
			return 1;
		}
		hp_prof_add_comment(&d, "difference: %s minus %s", file, base);
		if (hp_prof_diff(&d, &a, &b))
			rc = 1;
		hp_prof_free(&b);
		show = &d;
	}
	ro.top = top;
	if (!ro.title)
		ro.title = file;
	/* A heap the profile does not have would print an empty report. */
	if (heap && (!strcmp(heap, "list") ||
		     (!hp_prof_has_heap(show, heap) && strcmp(heap, "malloc") &&
		      strcmp(heap, "libc.malloc")))) {
		int list = !strcmp(heap, "list");

		if (!list)
			fprintf(stderr, "report: %s has no samples of heap '%s'; its heaps:\n",
				file, heap);
		hp_prof_heaps(show, list ? stdout : stderr, list ? "" : "  ");
		hp_prof_free(&a);
		hp_prof_free(&d);
		return list ? (fflush(stdout) ? 1 : 0) : 2;
	}
	ro.heap = heap;
	if (!rc && svg && fmt == &hp_format_svg) {
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
	} else if (!rc && svg) {
		/* Any other format of the table, as the daemon writes it. */
		struct hp_format_args fa = { .metric = ro.metric >= 0 ? ro.metric :
						   hp_prof_metric(show), .title = ro.title };
		struct hp_out o;

		if (hp_out_open(&o, svg, 0644) || fmt->write(show, &fa, &o) || hp_out_commit(&o)) {
			hp_out_abort(&o);
			fprintf(stderr, "report: cannot write %s: %s\n", svg, o.why);
			rc = 1;
		}
	}
	if (!rc && !converting) {
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
