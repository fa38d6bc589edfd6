// SPDX-License-Identifier: GPL-2.0
/*
 * The cost of DMA-BUF export and release: make a buffer (system DMA heap,
 * udmabuf or vgem, see hp_dmabuf.h) and close it, in a loop, and print
 * the mean time per pair. With --session the process first registers a heapprofd
 * session, attaches to it and turns sampling on with interval 4096, so
 * every export is recorded with its user stack (the worst case), and the
 * kernel records are drained as it goes.
 *
 *   export_bench [--session] [--iterations N] [--size BYTES]
 *
 * Output: one line "mode=... iterations=N size=B ns_per_op=X".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../../proto/ring.h"
#include "../../selftests/heapprofd/hp_dmabuf.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	static uint8_t kbuf[256 << 10];
	unsigned long iters = 20000, i, samples = 0;
	size_t size = 4096;
	int session = 0, cfd = -1;
	uint64_t t0, t1;

	for (int a = 1; a < argc; a++) {
		if (!strcmp(argv[a], "--session"))
			session = 1;
		else if (!strcmp(argv[a], "--iterations") && a + 1 < argc)
			iters = strtoul(argv[++a], NULL, 10);
		else if (!strcmp(argv[a], "--size") && a + 1 < argc)
			size = strtoul(argv[++a], NULL, 10);
		else {
			fprintf(stderr, "usage: %s [--session] [--iterations N] [--size B]\n",
				argv[0]);
			return 2;
		}
	}
	if (!buf_kind()) {
		fprintf(stderr, "export_bench: no DMA heap, udmabuf or vgem\n");
		return 4;
	}
	if (session) {
		struct heapprofd_register reg = { .size = sizeof(reg),
						  .data_size = HEAPPROFD_DATA_SIZE_MIN };
		struct heapprofd_attach att = { .size = sizeof(att),
						.flags = HEAPPROFD_ATTACH_BY_PID,
						.pid = getpid() };
		int dev = open("/dev/heapprofd", O_RDWR | O_CLOEXEC), sfd;
		struct hp_ring r;
		size_t len;
		void *map;

		if (dev < 0 || (sfd = ioctl(dev, HEAPPROFD_IOC_REGISTER, &reg)) < 0) {
			perror("export_bench: register");
			return 1;
		}
		len = reg.ctl_size + 2 * HEAPPROFD_DATA_SIZE_MIN;
		map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
		if (map == MAP_FAILED || hp_ring_open(&r, map, len)) {
			fprintf(stderr, "export_bench: map\n");
			return 1;
		}
		r.cfg->interval = 4096;
		r.cfg->stack_cap = HEAPPROFD_STACK_CAP_DEFAULT;
		r.cfg->enabled = 1;
		cfd = ioctl(dev, HEAPPROFD_IOC_ATTACH, &att);
		if (cfd < 0) {
			perror("export_bench: attach");
			return 1;
		}
	}
	/* Warm up the heap's page pools and the caches. */
	for (i = 0; i < iters / 10; i++)
		close(make_buf(size));
	t0 = now_ns();
	for (i = 0; i < iters; i++) {
		int fd = make_buf(size);

		if (fd < 0) {
			perror("export_bench: export");
			return 1;
		}
		close(fd);
		if (cfd >= 0 && (i & 63) == 63)
			while (read(cfd, kbuf, sizeof(kbuf)) > 0)
				samples++;
	}
	t1 = now_ns();
	printf("mode=%s iterations=%lu size=%zu ns_per_op=%.0f%s\n",
	       session ? "session" : "plain", iters, size,
	       (double)(t1 - t0) / iters, session && !samples ?
	       " (no kernel records read!)" : "");
	return 0;
}
