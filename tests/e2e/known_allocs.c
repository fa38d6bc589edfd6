// SPDX-License-Identifier: GPL-2.0
/*
 * A program with known allocation sites and sizes, for the end-to-end
 * tests. Every site is its own non-inlined function so the profile must
 * name it; the sizes are printed so the test can compare.
 *
 *   known_allocs sites            big 32 MiB, mid 8 MiB, small 1 MiB (kept live)
 *   known_allocs threads N        N threads, each thread_site 8 MiB
 *   known_allocs fork             parent_site 4 MiB; child child_site 8 MiB
 *   known_allocs quick            quick_site 2 MiB, then _exit at once
 *   known_allocs loop SECS|STOP   loop_site allocates and frees for SECS seconds,
 *                                 or, when the argument contains a '/', until the
 *                                 file STOP exists (the tests' way: no timing)
 *   known_allocs spin SECS|STOP   the same; both print "ready PID" first
 *   known_allocs steady SECS      steady_site allocates (and frees) 16 blocks of
 *                                 4 KiB every millisecond for SECS seconds: a
 *                                 rate the daemon keeps up with, so any record
 *                                 dropped is the daemon's stall
 *   known_allocs heaps            a custom heap "pool" (pool_site reports 16 MiB
 *                                 to it) beside alloc_big's 32 MiB of malloc
 *   known_allocs twins            twin_a and twin_b, two sites of one shape
 *                                 called from one place at one depth, and
 *                                 twin_site reached through via_p or via_q,
 *                                 in an order the program draws: 20000 calls
 *                                 that free what they get, then 20000 more
 *                                 below a 2 KiB frame (same-path and delta
 *                                 records: which site is which must stay exact)
 *   known_allocs rise             memory that grows then is freed: 20 steps of
 *                                 50 ms, each rise_big 512 KiB and rise_small
 *                                 256 KiB more (15 MiB at the top), then all
 *                                 freed and 500 ms more (the timeline's test)
 *
 * With a STOP file the program never exits on its own before the test says
 * so; a bound of STOP_SAFETY_S is only a safety net (then it exits 3 and
 * says why, so a stuck test cannot hang forever and is seen to fail). It
 * also stops when STOP's directory is gone (the test cleaned up).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HEAPPROFD_CLIENT_WEAK	/* runs with and without the client */
#include "libclient/include/heapprofd_client.h"

#define NOINLINE __attribute__((noinline, noclone))
#define MiB (1024UL * 1024)
#define STOP_SAFETY_S 300

static volatile unsigned long sink;
static void *keep[1 << 16];
static unsigned nkeep;

static NOINLINE void *touch(void *p, size_t n)
{
	if (p) {
		memset(p, 1, n);
		sink += ((unsigned char *)p)[n - 1];
	}
	return p;
}

/* n allocations of size bytes at the caller's site, kept live */
#define SITE(name) \
	NOINLINE void name(size_t total, size_t size) \
	{ \
		size_t i; \
		for (i = 0; i < total / size; i++) { \
			void *p = touch(malloc(size), size); \
			if (nkeep < sizeof(keep) / sizeof(keep[0])) \
				keep[__atomic_fetch_add(&nkeep, 1, __ATOMIC_RELAXED)] = p; \
		} \
		__asm__ volatile("" ::: "memory"); \
	}

SITE(alloc_big)
SITE(alloc_mid)
SITE(alloc_small)
SITE(thread_site)
SITE(parent_site)
SITE(child_site)
SITE(quick_site)

/* 64 objects of 256 KiB carved from one arena, reported to heap id. */
static NOINLINE void pool_site(int id, char *arena)
{
	for (int i = 0; i < 64; i++)
		heapprofd_report_alloc(id, arena + (size_t)i * 256 * 1024, 256 * 1024);
}

static NOINLINE void loop_site(void)
{
	void *p = touch(malloc(4096), 4096);

	free(p);
}

static NOINLINE void steady_site(void)
{
	void *p[16];
	int i;

	for (i = 0; i < 16; i++)
		p[i] = touch(malloc(4096), 4096);
	for (i = 0; i < 16; i++)
		free(p[i]);
}

/* n blocks of size bytes at the caller's site, into out[] */
static NOINLINE void rise_big(void **out, size_t n, size_t size)
{
	for (size_t i = 0; i < n; i++)
		out[i] = touch(malloc(size), size);
}

static NOINLINE void rise_small(void **out, size_t n, size_t size)
{
	for (size_t i = 0; i < n; i++)
		out[i] = touch(malloc(size), size);
}

static void rise(void)
{
	static void *big[20 * 32], *small[20 * 16];
	struct timespec step = { 0, 50 * 1000000 }, tail = { 0, 500 * 1000000 };
	int i;

	for (i = 0; i < 20; i++) {
		rise_big(big + i * 32, 32, 16384);
		rise_small(small + i * 16, 16, 16384);
		nanosleep(&step, NULL);
	}
	for (i = 0; i < 20 * 32; i++)
		free(big[i]);
	for (i = 0; i < 20 * 16; i++)
		free(small[i]);
	nanosleep(&tail, NULL);
	printf("rise_big %lu\nrise_small %lu\n", 10 * MiB, 5 * MiB);
}

/*
 * Same shape, same frame, same caller: only the return address into the
 * caller (and the size) tells them apart. Their bodies differ so that the
 * compiler cannot fold them into one function.
 */
static NOINLINE void *twin_a(size_t n)
{
	return touch(malloc(n), n);
}

static NOINLINE void *twin_b(size_t n)
{
	void *p = malloc(n);

	if (p)
		memset(p, 2, n);
	return p;
}

static NOINLINE void *twin_site(size_t n)
{
	return touch(malloc(n), n);
}

/* Two ways to one site: the difference lies a frame further out. */
static NOINLINE void *via_p(size_t n)
{
	void *p = twin_site(n);

	sink += 1;
	return p;
}

static NOINLINE void *via_q(size_t n)
{
	void *p = twin_site(n);

	sink += 2;
	return p;
}

/* One allocation through one of the four, in a drawn order. */
static NOINLINE void twin_round(unsigned *x, unsigned long tot[4])
{
	void *m;

	*x = *x * 1103515245U + 12345U;	/* the order: drawn, and a local that changes */
	switch ((*x >> 16) & 3) {
	case 0:
		m = twin_a(48);
		tot[0] += 48;
		break;
	case 1:
		m = twin_b(80);
		tot[1] += 80;
		break;
	case 2:
		m = via_p(112);
		tot[2] += 112;
		break;
	default:
		m = via_q(144);
		tot[3] += 144;
		break;
	}
	free(m);
}

/*
 * The same below a frame of 2 KiB of which a few words change each time:
 * the records' stacks go as changes to the previous one (uapi
 * HEAPPROFD_ALLOC_STACK_DELTA), and the words that tell the paths apart
 * lie in the changed runs, so the producer's list of words that can steer
 * an unwind is brought up to date from them.
 */
static NOINLINE void twin_deep(unsigned *x, unsigned long tot[4], int i)
{
	volatile uint64_t pad[256];

	for (int k = 0; k < 256; k++)
		pad[k] = 0;
	pad[i & 255] = (uint64_t)i;
	pad[(i * 7) & 255] = *x;
	twin_round(x, tot);
	pad[0] = pad[1];
}

static NOINLINE void twins(void)
{
	unsigned long tot[4] = { 0 };
	unsigned x = 12345;

	for (int i = 0; i < 20000; i++)
		twin_round(&x, tot);
	for (int i = 0; i < 20000; i++)
		twin_deep(&x, tot, i);
	printf("twin_a %lu\ntwin_b %lu\nvia_p %lu\nvia_q %lu\n", tot[0], tot[1], tot[2], tot[3]);
}

static void *thread_main(void *arg)
{
	(void)arg;
	thread_site(8 * MiB, 2048);
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "sites";

	if (!strcmp(mode, "sites")) {
		alloc_big(32 * MiB, 4096);
		alloc_mid(8 * MiB, 1024);
		alloc_small(1 * MiB, 256);
		printf("alloc_big %lu\nalloc_mid %lu\nalloc_small %lu\n", 32 * MiB, 8 * MiB, 1 * MiB);
	} else if (!strcmp(mode, "heaps")) {
		char *arena = malloc(16 * MiB);
		int id = heapprofd_register_heap ? heapprofd_register_heap("pool", 4096) : -1;

		/* Let the daemon read the heap's announcement first (--heaps). */
		sleep(1);
		if (id >= 0 && arena)
			pool_site(id, arena);
		alloc_big(32 * MiB, 4096);
		printf("pool_site %lu\nalloc_big %lu\n", 16 * MiB, 32 * MiB);
	} else if (!strcmp(mode, "twins")) {
		twins();
	} else if (!strcmp(mode, "rise")) {
		rise();
	} else if (!strcmp(mode, "threads")) {
		int n = argc > 2 ? atoi(argv[2]) : 4, i;
		pthread_t t[64];

		if (n < 1 || n > 64)
			n = 4;
		for (i = 0; i < n; i++)
			pthread_create(&t[i], NULL, thread_main, NULL);
		for (i = 0; i < n; i++)
			pthread_join(t[i], NULL);
		printf("thread_site %lu\n", n * 8 * MiB);
	} else if (!strcmp(mode, "fork")) {
		pid_t c;
		int st;

		parent_site(4 * MiB, 1024);
		c = fork();
		if (c == 0) {
			child_site(8 * MiB, 1024);
			printf("child %d child_site %lu\n", (int)getpid(), 8 * MiB);
			fflush(stdout);
			_exit(0);
		}
		waitpid(c, &st, 0);
		printf("parent_site %lu\n", 4 * MiB);
	} else if (!strcmp(mode, "quick")) {
		quick_site(2 * MiB, 512);
		printf("quick_site %lu\n", 2 * MiB);
		fflush(stdout);
		_exit(0);
	} else if (!strcmp(mode, "loop") || !strcmp(mode, "spin")) {
		const char *arg = argc > 2 ? argv[2] : "2";
		const char *stop = strchr(arg, '/') ? arg : NULL;
		char dir[4096];
		double end = now() + (stop ? STOP_SAFETY_S : atof(arg));
		unsigned long n = 0;

		snprintf(dir, sizeof(dir), "%s", stop ? stop : ".");
		*(strrchr(dir, '/') ? strrchr(dir, '/') : dir + 1) = 0;
		if (!dir[0])
			strcpy(dir, "/");
		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		for (;;) {
			int i;

			if (stop && access(stop, F_OK) == 0)
				break;
			if (stop && access(dir, F_OK) != 0) {
				fprintf(stderr, "known_allocs: %s is gone\n", dir);
				return 3;
			}
			if (now() >= end) {
				if (stop) {
					fprintf(stderr, "known_allocs: %s never appeared in %d s\n",
						stop, STOP_SAFETY_S);
					return 3;
				}
				break;
			}
			for (i = 0; i < 1000; i++)
				loop_site();
			n += 1000;
		}
		printf("loop done %lu\n", n);
	} else if (!strcmp(mode, "steady")) {
		double end = now() + (argc > 2 ? atof(argv[2]) : 4);
		unsigned long n = 0;
		struct timespec ms = { 0, 1000000 };

		while (now() < end) {
			steady_site();
			n += 16;
			nanosleep(&ms, NULL);
		}
		printf("steady_site %lu\n", n * 4096);
	} else {
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}
	return 0;
}
