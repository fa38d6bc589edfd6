// SPDX-License-Identifier: GPL-2.0
/*
 * For tests/hostile/root-tools: did a terminal get bytes it would act on?
 *
 *   termcheck FILE
 *
 * prints "unprintable N" (N: the bytes of FILE that are neither printable
 * ASCII nor newline or tab: ESC, BEL, the other controls, DEL, non-ASCII)
 * and, for the first three, "at OFFSET 0xXX"; exits 0, or 2 when FILE
 * cannot be read.
 */
#include <stdio.h>

int main(int argc, char **argv)
{
	unsigned long long n = 0, off = 0;
	FILE *f;
	int c;

	if (argc != 2 || !(f = fopen(argv[1], "rb"))) {
		fprintf(stderr, "usage: termcheck FILE (a readable file)\n");
		return 2;
	}
	for (; (c = getc(f)) != EOF; off++) {
		if ((c >= ' ' && c < 0x7f) || c == '\n' || c == '\t')
			continue;
		if (n++ < 3)
			printf("at %llu 0x%02x\n", off, c);
	}
	fclose(f);
	printf("unprintable %llu\n", n);
	return 0;
}
