// SPDX-License-Identifier: GPL-2.0
/*
 * Numbers from a command line, strictly (pipeline.h, hp_parse_num): both
 * heapprofd's and heapprofctl's options go through here.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "pipeline.h"

int hp_parse_num(const char *s, unsigned long long min, unsigned long long max,
		 unsigned long long *out, char *why, size_t wl)
{
	unsigned long long v;
	char *end;

	if (!s || !*s) {
		snprintf(why, wl, "an empty value where a number belongs");
		return -1;
	}
	/* strtoull would take "-5" (and wrap it), " 5" and "+5": digits only. */
	if (!isdigit((unsigned char)s[0])) {
		snprintf(why, wl, "'%s' is not a number (digits only, no sign)", s);
		return -1;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end) {
		snprintf(why, wl, "'%s' is not a number", s);
		return -1;
	}
	if (errno == ERANGE || v < min || v > max) {
		snprintf(why, wl, "%s is out of range (%llu to %llu)", s, min, max);
		return -1;
	}
	*out = v;
	return 0;
}
