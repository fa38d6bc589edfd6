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

#include "heapprofctl.h"

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
			struct hp_drop dr;

			ro.drop_frames = argv[++i];
			if (hp_drop_init(&dr, NULL, ro.drop_frames, why, sizeof(why))) {
				fprintf(stderr, "report: --drop-frames: %s\n", why);
				return 2;
			}
			hp_drop_free(&dr);
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
