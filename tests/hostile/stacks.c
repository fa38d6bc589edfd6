// SPDX-License-Identifier: GPL-2.0
/*
 * A program whose heap profile is large, for tests/hostile/user-budget: it
 * allocates from 2^BITS distinct call stacks (default 12: 4096), each a
 * path through BITS levels of two functions with names of their own, so
 * that every format (pprof locations, folded lines, flame graph boxes,
 * table rows) grows with the number of stacks.
 *
 *   stacks [BITS]     allocate 16 KiB once per stack (almost surely
 *                     sampled at the default interval of 4 KiB) and keep
 *                     it, so the in-use profile has every stack; print
 *                     "stacks N" and exit (64 MiB in use at the default)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXBITS 16

typedef void level_fn(unsigned level, unsigned path);
static level_fn *levels[MAXBITS][2];
static unsigned nbits = 12;
static void *volatile sink;

static __attribute__((noinline)) void stacks_leaf(void)
{
	void *p = malloc(16 << 10);

	if (p)
		memset(p, 0x5a, 64);
	sink = p;	/* kept: in use at the exit */
}

/* Down one level, by the next bit of path. */
static __attribute__((noinline)) void stacks_next(unsigned level, unsigned path)
{
	if (level == nbits)
		stacks_leaf();
	else
		levels[level][(path >> level) & 1](level + 1, path);
}

#define LEVEL(n)								\
	static __attribute__((noinline)) void stacks_l##n##_a(unsigned l, unsigned p) \
	{ stacks_next(l, p); __asm__ volatile("" ::: "memory"); }		\
	static __attribute__((noinline)) void stacks_l##n##_b(unsigned l, unsigned p) \
	{ stacks_next(l, p); __asm__ volatile("" ::: "memory"); }
LEVEL(0) LEVEL(1) LEVEL(2) LEVEL(3) LEVEL(4) LEVEL(5) LEVEL(6) LEVEL(7)
LEVEL(8) LEVEL(9) LEVEL(10) LEVEL(11) LEVEL(12) LEVEL(13) LEVEL(14) LEVEL(15)
#define SET(n) levels[n][0] = stacks_l##n##_a, levels[n][1] = stacks_l##n##_b

int main(int argc, char **argv)
{
	SET(0); SET(1); SET(2); SET(3); SET(4); SET(5); SET(6); SET(7);
	SET(8); SET(9); SET(10); SET(11); SET(12); SET(13); SET(14); SET(15);
	if (argc > 1) {
		nbits = (unsigned)atoi(argv[1]);
		if (nbits < 1 || nbits > MAXBITS) {
			fprintf(stderr, "usage: stacks [BITS 1..%d]\n", MAXBITS);
			return 2;
		}
	}
	for (unsigned path = 0; path < (1U << nbits); path++)
		stacks_next(0, path);
	printf("stacks %u\n", 1U << nbits);
	return 0;
}
