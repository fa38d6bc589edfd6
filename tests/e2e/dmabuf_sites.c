// SPDX-License-Identifier: GPL-2.0
/*
 * DMA-BUF exports from known call stacks, for the dmabuf heap's end-to-end
 * test (tests/e2e/dmabuf): the module samples them into the exporter's
 * session as kernel records, the daemon unwinds and books them.
 *
 *   dmabuf_sites --kind   print the exporter the buffers come from (a DMA
 *                         heap, udmabuf or vgem: selftests' hp_dmabuf.h),
 *                         or exit 4 when the kernel has none
 *   dmabuf_sites STOP     export_kept: 2 buffers of 1 MiB, kept until the
 *                         end; export_released: 1 of 1 MiB, released at
 *                         once; then print "ready KIND" and wait until the
 *                         file STOP exists (the tests' way: no timing)
 *
 * A bound of STOP_SAFETY_S is only a safety net: then it exits 3 and says
 * why. It also stops when STOP's directory is gone (the test cleaned up).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hp_dmabuf.h"

#define NOINLINE __attribute__((noinline, noclone))
#define MiB (1024UL * 1024)
#define STOP_SAFETY_S 300

static volatile int sink;

static NOINLINE int export_kept(const char *kind)
{
	int fd = make_buf_of(kind, MiB);

	sink++;
	return fd;
}

static NOINLINE int export_released(const char *kind)
{
	int fd = make_buf_of(kind, MiB);

	sink++;
	return fd;
}

int main(int argc, char **argv)
{
	const char *kind = buf_kind();
	char dir[4096];
	int kept[2], gone, waited;

	if (argc != 2) {
		fprintf(stderr, "usage: dmabuf_sites --kind | STOPFILE\n");
		return 2;
	}
	if (!kind) {
		printf("no DMA-BUF exporter (no DMA heap, udmabuf or vgem)\n");
		return 4;
	}
	if (!strcmp(argv[1], "--kind")) {
		printf("%s\n", kind);
		return 0;
	}
	kept[0] = export_kept(kind);
	kept[1] = export_kept(kind);
	gone = export_released(kind);
	if (kept[0] < 0 || kept[1] < 0 || gone < 0) {
		fprintf(stderr, "dmabuf_sites: exporting from %s: %s\n", kind,
			strerror(-(kept[0] < 0 ? kept[0] : kept[1] < 0 ? kept[1] : gone)));
		return 1;
	}
	close(gone);
	printf("ready %s\n", kind);
	fflush(stdout);
	snprintf(dir, sizeof(dir), "%s", argv[1]);
	for (waited = 0; access(argv[1], F_OK); waited++) {
		if (access(dirname(dir), F_OK))
			return 0;	/* the test is gone */
		snprintf(dir, sizeof(dir), "%s", argv[1]);
		if (waited >= STOP_SAFETY_S * 20) {
			fprintf(stderr, "dmabuf_sites: no %s after %d s\n", argv[1], STOP_SAFETY_S);
			return 3;
		}
		usleep(50000);
	}
	close(kept[0]);
	close(kept[1]);
	return 0;
}
