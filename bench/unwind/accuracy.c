// SPDX-License-Identifier: GPL-2.0
/*
 * A workload with known allocation sites for the accuracy benchmark
 * (bench/unwind/accuracy.sh): every site's allocated and in-use bytes at
 * exit are known exactly, and printed to stderr for comparison.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_SMALL		200000
#define N_MEDIUM	20000
#define N_LARGE		64
#define N_ODD		50000

static void *keep[N_SMALL + N_MEDIUM + N_LARGE + N_ODD];
static size_t nkeep;

__attribute__((noinline)) void acc_small(void)	/* 32 B each, half freed */
{
	for (int i = 0; i < N_SMALL; i++) {
		char *p = malloc(32);

		memset(p, 1, 32);
		if (i % 2)
			free(p);
		else
			keep[nkeep++] = p;
	}
}

__attribute__((noinline)) void acc_medium(void)	/* 1000 B each, all live */
{
	for (int i = 0; i < N_MEDIUM; i++) {
		char *p = malloc(1000);

		p[0] = 1;
		keep[nkeep++] = p;
	}
}

__attribute__((noinline)) void acc_large(void)	/* 1 MiB each, all freed */
{
	for (int i = 0; i < N_LARGE; i++) {
		char *p = malloc(1 << 20);

		p[0] = 1;
		free(p);
	}
}

__attribute__((noinline)) void acc_odd(void)	/* 100 B each, all live */
{
	for (int i = 0; i < N_ODD; i++) {
		char *p = malloc(100);

		p[0] = 1;
		keep[nkeep++] = p;
	}
}

int main(void)
{
	acc_small();
	acc_medium();
	acc_large();
	acc_odd();
	fprintf(stderr, "truth acc_small alloc %d inuse %d\n", N_SMALL * 32, N_SMALL / 2 * 32);
	fprintf(stderr, "truth acc_medium alloc %d inuse %d\n", N_MEDIUM * 1000, N_MEDIUM * 1000);
	fprintf(stderr, "truth acc_large alloc %d inuse 0\n", N_LARGE << 20);
	fprintf(stderr, "truth acc_odd alloc %d inuse %d\n", N_ODD * 100, N_ODD * 100);
	return 0;
}
