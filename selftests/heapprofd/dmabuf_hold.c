// SPDX-License-Identifier: GPL-2.0
/*
 * dmabuf_hold N SIZE: export N DMA-BUFs of SIZE bytes, print their inode
 * numbers on one line, then hold them until standard input reaches EOF
 * (or the process is killed). For tests that need buffers alive across
 * something else: unloading the module, a process dying with them.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/stat.h>

#include "hp_dmabuf.h"

int main(int argc, char **argv)
{
	unsigned long n, size, i;
	struct stat st;
	char c;
	int fd;

	if (argc != 3) {
		fprintf(stderr, "usage: %s N SIZE\n", argv[0]);
		return 2;
	}
	n = strtoul(argv[1], NULL, 10);
	size = strtoul(argv[2], NULL, 10);
	if (!buf_kind()) {
		fprintf(stderr, "dmabuf_hold: no DMA heap, udmabuf or vgem\n");
		return 4;
	}
	for (i = 0; i < n; i++) {
		fd = make_buf(size);
		if (fd < 0 || fstat(fd, &st)) {
			fprintf(stderr, "dmabuf_hold: export: %s\n",
				strerror(fd < 0 ? -fd : errno));
			return 1;
		}
		printf("%s%llu", i ? " " : "", (unsigned long long)st.st_ino);
	}
	printf("\n");
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
