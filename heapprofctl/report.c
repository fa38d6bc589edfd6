// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofctl report: read a profile, optionally minus a base profile, and
 * print its top call sites or folded stacks, or write a flame graph.
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
		   "  --top N      show the N biggest call sites (default 20, 0 = all)\n"
		   "  --svg FILE   write a flame graph (open it in a browser)\n"
		   "  --folded     print folded stacks instead of the table\n"
		   "  --base FILE  show FILE's profile subtracted (growth since then)\n");
}

int hp_report_main(int argc, char **argv)
{
	const char *file = NULL, *svg = NULL, *base = NULL;
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
	if (!rc && svg) {
		struct hp_out o;
		FILE *f = NULL;

		if (!hp_out_open(&o, svg, 0644))
			f = hp_out_stdio(&o);
		if (f && (hp_svg_write(show, hp_prof_metric(show), file, f) || fflush(f)))
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
			rc = hp_folded_write(show, hp_prof_metric(show), stdout) ? 1 : 0;
		else
			rc = hp_text_write(show, top, stdout) ? 1 : 0;
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
