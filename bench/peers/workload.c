// SPDX-License-Identifier: GPL-2.0
/*
 * The whole-program benchmark's workload: N allocations (default 10 M) made
 * at call depth 10, memory touched, most freed soon after (a window of live
 * blocks), from three leaf sites with known shares of the bytes. It prints
 * the exact bytes per site and its own elapsed time, so accuracy can be
 * checked against the truth and the profiler's start-up separated out.
 *
 *   workload [N]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline))
#define WINDOW 4096

static void *live[WINDOW];
static uint64_t bytes_a, bytes_b, bytes_c;
static volatile uint64_t sink;

static NOINLINE void *touch(void *p, size_t n)
{
	memset(p, (int)n, n < 64 ? n : 64);
	((volatile char *)p)[n - 1] = 1;
	sink += ((unsigned char *)p)[0];
	return p;
}

static NOINLINE void *site_a(size_t n) { bytes_a += n; return touch(malloc(n), n); }
static NOINLINE void *site_b(size_t n) { bytes_b += n; return touch(malloc(n), n); }
static NOINLINE void *site_c(size_t n) { bytes_c += n; return touch(malloc(n), n); }

static NOINLINE void *leaf(uint64_t i)
{
	unsigned r = (unsigned)(i * 2654435761u >> 7);

	switch (r % 10) {
	case 0: return site_c(512 + r % 1536);	/* few, big */
	case 1: case 2: case 3: return site_b(64 + r % 192);
	default: return site_a(16 + r % 48);	/* many, small */
	}
}

static NOINLINE void *depth(int d, uint64_t i)
{
	void *p;

	if (d == 0)
		return leaf(i);
	p = depth(d - 1, i);
	__asm__ volatile("" ::: "memory");	/* no tail call: keep the frames */
	return p;
}

int main(int argc, char **argv)
{
	uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 10000000ULL, i;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (i = 0; i < n; i++) {
		unsigned slot = (unsigned)(i % WINDOW);

		free(live[slot]);
		live[slot] = depth(9, i);	/* + leaf + site = depth 12 below main */
	}
	for (i = 0; i < WINDOW; i++)
		free(live[i]);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("site_a %llu\nsite_b %llu\nsite_c %llu\nelapsed %.3f\n", (unsigned long long)bytes_a,
	       (unsigned long long)bytes_b, (unsigned long long)bytes_c,
	       (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	return 0;
}
