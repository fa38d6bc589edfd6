// SPDX-License-Identifier: GPL-2.0
/* A library that tests/attach/storm dlopens after the attach: its
 * allocations must be profiled too (the client patches it when dlopen
 * returns). */
#include <stdlib.h>
#include <string.h>

static unsigned char *keep[1024];
static int nkeep;

/* n blocks of 32 KiB, in use until dl_free. */
__attribute__((noinline)) unsigned long dl_site(int n)
{
	unsigned long sum = 0;

	for (int i = 0; i < n && nkeep < 1024; i++) {
		unsigned char *p = malloc(32 * 1024);

		memset(p, i, 32 * 1024);
		sum += p[i];
		keep[nkeep++] = p;
	}
	return sum;
}

void dl_free(void)
{
	while (nkeep)
		free(keep[--nkeep]);
}
