// SPDX-License-Identifier: GPL-2.0
/*
 * What a sample's draw costs: hp_sampler_draw (the ziggurat, sampler.c)
 * against the textbook ceil(-ln U / -ln(1 - 1/interval)) it replaced, each
 * 10 million draws at interval 4096 in a loop, the best and the median of
 * seven rounds, interleaved. In a loop the tables and libm stay in cache;
 * in a program a draw comes once per sample and finds them colder.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "sampler.h"

#define N 10000000
#define ROUNDS 7

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The draw as it was: the same generator, -log(u), ceil(). */
static uint64_t textbook(struct hp_sampler *s)
{
	uint64_t a = s->rng[0], b = s->rng[1];
	double u, g;

	s->rng[0] = b;
	a ^= a << 23;
	s->rng[1] = a ^ b ^ (a >> 17) ^ (b >> 26);
	u = (((s->rng[1] + b) >> 11) + 1) * (1.0 / 9007199254740992.0);
	g = ceil(-log(u) * s->neg_inv_log1mp);
	return g < 1 ? 1 : (uint64_t)g;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(void)
{
	double zig[ROUNDS], old[ROUNDS], t;
	struct hp_sampler s;
	uint64_t sum = 0;
	int r, i;

	hp_sampler_init(&s, 4096, 1);
	for (r = 0; r < ROUNDS; r++) {
		t = now_ns();
		for (i = 0; i < N; i++)
			sum += hp_sampler_draw(&s);
		zig[r] = (now_ns() - t) / N;
		t = now_ns();
		for (i = 0; i < N; i++)
			sum += textbook(&s);
		old[r] = (now_ns() - t) / N;
	}
	qsort(zig, ROUNDS, sizeof(zig[0]), cmp);
	qsort(old, ROUNDS, sizeof(old[0]), cmp);
	printf("| draw at interval 4096 | best ns | median ns |\n|---|---|---|\n");
	printf("| hp_sampler_draw (ziggurat) | %.2f | %.2f |\n", zig[0], zig[ROUNDS / 2]);
	printf("| ceil(-ln U / -ln(1 - 1/interval)) | %.2f | %.2f |\n", old[0], old[ROUNDS / 2]);
	printf("# mean draw %.1f (interval 4096)\n", (double)sum / (2.0 * ROUNDS * N));
	return 0;
}
