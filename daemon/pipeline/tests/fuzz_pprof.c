// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: `heapprofctl report` on a hostile profile. Arbitrary
 * bytes as a profile.proto message, then every renderer (text table,
 * folded stacks, SVG) and the pprof writer's input path.
 */
#include <stdint.h>
#include <stdio.h>

#include "../internal.h"

static FILE *devnull;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hp_prof p;
	char why[256];

	if (!devnull)
		devnull = fopen("/dev/null", "w");
	if (hp_pprof_parse(&p, data, size, why, sizeof(why)))
		return 0;
	hp_text_write(&p, 10, devnull);
	hp_folded_write(&p, hp_prof_metric(&p), devnull);
	hp_svg_write(&p, hp_prof_metric(&p), "fuzz", devnull);
	hp_prof_free(&p);
	return 0;
}
