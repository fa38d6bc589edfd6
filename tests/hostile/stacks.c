// SPDX-License-Identifier: GPL-2.0
/*
 * A program whose heap profile is large, for tests/hostile/user-budget: it
 * allocates from 2^BITS distinct call stacks (default 12: 4096), each a
 * path through BITS levels of two functions with names of their own, so
 * that every format (pprof locations, folded lines, flame graph boxes,
 * table rows) grows with the number of stacks. And one whose books grow
 * without end, for tests/e2e/mem-budget.
 *
 *   stacks [BITS]     allocate 16 KiB once per stack (almost surely
 *                     sampled at the default interval of 4 KiB) and keep
 *                     it, so the in-use profile has every stack; print
 *                     "stacks N" and exit (64 MiB in use at the default)
 *   stacks flood STOP [LIVE]
 *                     print "ready PID", then allocate 40-byte blocks
 *                     until the file STOP exists, each from a stack of its
 *                     own (20 levels: 2^20 stacks, in an order where
 *                     consecutive paths part near main, so that each new
 *                     one is a long new branch of the call-site tree),
 *                     keeping the last LIVE (default 262144) allocated;
 *                     then print "flood N" (blocks allocated). It gives up
 *                     after FLOOD_SAFETY_S (exit 3, saying why) or when
 *                     STOP's directory is gone, so a stuck test cannot hang
 *   stacks churn STOP  the same, but over the 4096 stacks of 12 levels, each
 *                     entered with the stack pointer at one of 17 depths
 *                     and every block freed at once: the daemon unwinds
 *                     nearly every sample (its memo knows few of 69,632
 *                     stack pointers and paths) while its books stay
 *                     small, for tests/e2e/cpu-budget
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXBITS 20
#define FLOOD_SAFETY_S 600

typedef void level_fn(unsigned level, unsigned path);
static level_fn *levels[MAXBITS][2];
static unsigned nbits = 12;
static void *volatile sink;
/* flood: the blocks kept, a ring of them; churn: none kept */
static void **live;
static unsigned long nlive, slot, total;
static int churn;

static __attribute__((noinline)) void stacks_leaf(void)
{
	void *p;

	if (churn) {
		free(malloc(40));
		total++;
		return;
	}
	if (live) {
		p = malloc(40);
		if (p)
			memset(p, 0x5a, 40);
		free(live[slot]);
		live[slot] = p;
		slot = (slot + 1) % nlive;
		total++;
		return;
	}
	p = malloc(16 << 10);
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
LEVEL(16) LEVEL(17) LEVEL(18) LEVEL(19)
#define SET(n) levels[n][0] = stacks_l##n##_a, levels[n][1] = stacks_l##n##_b

/* Down the tree from a stack pointer depth bytes lower. */
static __attribute__((noinline)) void from_depth(unsigned depth, unsigned path)
{
	volatile char *pad = __builtin_alloca(depth + 1);

	pad[0] = 0;
	stacks_next(0, path);
	__asm__ volatile("" ::: "memory");
}

static int flood(const char *stop, const char *live_arg)
{
	char dir[4096];
	time_t t0 = time(NULL);
	unsigned path = 0;

	if (!strchr(stop, '/')) {
		fprintf(stderr, "stacks %s: STOP must be a path with a '/'\n", churn ? "churn" : "flood");
		return 2;
	}
	nbits = churn ? 12 : MAXBITS;
	nlive = live_arg ? strtoul(live_arg, NULL, 10) : 262144;
	live = churn ? NULL : calloc(nlive ? nlive : 1, sizeof(*live));
	if (!live && !churn)
		return 1;
	if (!nlive)
		nlive = 1;
	snprintf(dir, sizeof(dir), "%s", stop);
	*strrchr(dir, '/') = 0;
	if (!dir[0])
		strcpy(dir, "/");
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (;;) {
		for (int i = 0; i < 1024; i++, path++) {
			if (churn)
				from_depth(16 * (path / 4096 % 17), path & 4095);
			else
				stacks_next(0, path & ((1U << MAXBITS) - 1));
		}
		if (!access(stop, F_OK))
			break;
		if (access(dir, F_OK)) {
			fprintf(stderr, "stacks: %s is gone\n", dir);
			return 3;
		}
		if (time(NULL) - t0 > FLOOD_SAFETY_S) {
			fprintf(stderr, "stacks: %s never appeared in %d s\n", stop, FLOOD_SAFETY_S);
			return 3;
		}
	}
	printf("%s %lu\n", churn ? "churn" : "flood", total);
	return 0;
}

int main(int argc, char **argv)
{
	SET(0); SET(1); SET(2); SET(3); SET(4); SET(5); SET(6); SET(7);
	SET(8); SET(9); SET(10); SET(11); SET(12); SET(13); SET(14); SET(15);
	SET(16); SET(17); SET(18); SET(19);
	if (argc > 2 && !strcmp(argv[1], "flood"))
		return flood(argv[2], argc > 3 ? argv[3] : NULL);
	if (argc > 2 && !strcmp(argv[1], "churn")) {
		churn = 1;
		return flood(argv[2], NULL);
	}
	if (argc > 1) {
		nbits = (unsigned)atoi(argv[1]);
		if (nbits < 1 || nbits > 16) {
			fprintf(stderr, "usage: stacks [BITS 1..16] | stacks flood STOP [LIVE] | stacks churn STOP\n");
			return 2;
		}
	}
	for (unsigned path = 0; path < (1U << nbits); path++)
		stacks_next(0, path);
	printf("stacks %u\n", 1U << nbits);
	return 0;
}
