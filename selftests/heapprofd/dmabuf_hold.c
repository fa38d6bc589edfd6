// SPDX-License-Identifier: GPL-2.0
/*
 * dmabuf_hold N SIZE [mapped]: export N DMA-BUFs of SIZE bytes, print
 * their inode numbers on one line, then hold them until standard input
 * reaches EOF (or the process is killed). For tests that need buffers
 * alive across something else: unloading the module, a process dying with
 * them. With "mapped", each buffer is held by a shared mapping only: its
 * fd is closed once it is mapped (exit 4 if the exporter cannot mmap).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "hp_dmabuf.h"

int main(int argc, char **argv)
{
	unsigned long n, size, i;
	struct stat st;
	int fd, mapped;
	void *p;
	char c;

	mapped = argc == 4 && !strcmp(argv[3], "mapped");
	if (argc != 3 && !mapped) {
		fprintf(stderr, "usage: %s N SIZE [mapped]\n", argv[0]);
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
		if (mapped) {
			p = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
			if (p == MAP_FAILED) {
				fprintf(stderr, "dmabuf_hold: mmap: %s\n",
					strerror(errno));
				return 4;
			}
			close(fd);
		}
		printf("%s%llu", i ? " " : "", (unsigned long long)st.st_ino);
	}
	printf("\n");
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return 0;
}
