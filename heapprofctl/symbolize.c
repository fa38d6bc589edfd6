// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofctl symbolize FILE [-o OUT]: name the locations of a profile
 * recorded without symbols (or on another machine) from the ELF and debug
 * files found here, and write it back.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "heapprofctl.h"

int hp_symbolize_main(int argc, char **argv)
{
	const char *in = NULL, *out = NULL;
	struct hp_prof_symbolized n;
	struct hp_prof p;
	char why[256];
	int rc;

	for (int a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "-o") && a + 1 < argc)
			out = argv[++a];
		else if (argv[a][0] == '-' || in) {
			fprintf(stderr, "usage: heapprofctl symbolize FILE [-o OUT]\n");
			return 2;
		} else
			in = argv[a];
	}
	if (!in) {
		fprintf(stderr, "usage: heapprofctl symbolize FILE [-o OUT]\n");
		return 2;
	}
	if (!out)
		out = in;
	if (hp_pprof_read(&p, in, why, sizeof(why))) {
		fprintf(stderr, "symbolize: %s\n", why);
		return 1;
	}
	rc = hp_prof_symbolize(&p, &n, stderr);
	if (rc) {
		fprintf(stderr, "symbolize: %s\n", strerror(-rc));
	} else if (!n.done && n.missing + n.nomap) {
		/* Nothing gained: say so rather than write the same profile out. */
		fprintf(stderr, "symbolize: no location could be symbolized (%zu not found, %zu without a usable mapping); %s not written\n",
			n.missing, n.nomap, out);
		rc = -ENOENT;
	} else if ((rc = hp_pprof_write(&p, out, why, sizeof(why))) != 0) {
		fprintf(stderr, "symbolize: cannot write the profile: %s\n", why);
	} else {
		fprintf(stderr, "symbolize: %zu locations symbolized, %zu not found, %zu without a usable mapping -> %s\n",
			n.done, n.missing, n.nomap, out);
	}
	hp_prof_free(&p);
	return rc ? 1 : 0;
}
