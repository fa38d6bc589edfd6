// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: `heapprofctl report` on a hostile profile. Arbitrary
 * bytes as a profile.proto message, then every renderer (text table,
 * folded stacks, SVG), for the default heaps and the dmabuf heap (its own
 * sample types and exporter labels), and the pprof writer's input path.
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
	{
		struct hp_render_opts o = { .metric = -1, .top = 10, .heap = HP_HEAP_DMABUF_NAME };

		hp_text_write_opts(&p, &o, devnull);
		hp_folded_write_opts(&p, &o, devnull);
		hp_svg_write_opts(&p, &o, devnull);
		hp_prof_heaps(&p, devnull, "");
	}
	hp_prof_free(&p);
	return 0;
}
