// SPDX-License-Identifier: GPL-2.0
/*
 * Ground truth for "unbiased under load" (tests/e2e/busy): call sites in
 * several threads that allocate in bursts, each with its own exact count of
 * bytes allocated and bytes still in use at exit.
 *
 *   burst_sites [MIB_PER_SITE [PAUSE_US]]    default 24 MiB, 200 us
 *
 * Thread k (0..NSITES-1; site 0 runs in the main thread) calls its own
 * site function burst_site_k through a few frames of its own. Each round
 * a site allocates a burst of BURST bytes as fast as it can (blocks of the
 * site's size), frees three blocks in four of them and keeps the fourth,
 * then pauses briefly: bursts, not a steady stream, are what fill a ring.
 * The blocks kept stay allocated until exit, so each site's bytes in use
 * at exit are known exactly.
 *
 * Prints one line per site: "burst_site_K ALLOC_BYTES INUSE_BYTES"
 * (requested bytes, which is what the sampler counts).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NOINLINE __attribute__((noinline, noclone))
#define NSITES 5
#define BURST (1UL << 20)

static volatile unsigned long sink;

struct site {
	size_t size;		/* block size of this site */
	size_t total;		/* bytes to allocate in all */
	size_t alloc_bytes, inuse_bytes;
	void **kept, **burst;
	size_t nkept;
	void (*fn)(struct site *);
	pthread_t th;
};

/* Between bursts; a longer pause gives the run a length of its own,
 * whatever the machine's speed (tests/e2e/slow-daemon). */
static long pause_us = 200;

static void pause_briefly(void)
{
	struct timespec ts = { pause_us / 1000000, (pause_us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

/* One site's whole life: bursts of BURST bytes, a quarter kept. The two
 * arrays are allocated here, outside the site function, and are not
 * counted as the site's. */
static void run_site(struct site *s)
{
	size_t per_burst = BURST / s->size;

	s->burst = malloc(per_burst * sizeof(void *));
	s->kept = malloc((s->total / s->size / 4 + per_burst) * sizeof(void *));
	if (!s->burst || !s->kept)
		abort();
	while (s->alloc_bytes + s->size <= s->total) {
		s->fn(s);
		pause_briefly();
	}
	free(s->burst);
}

/*
 * A site: one burst per call. Allocates BURST bytes (or what is left) in
 * blocks of s->size, touching one byte of each, frees three of every four
 * and keeps the fourth. Each site is its own function so the profile names
 * it, and allocates at one line.
 */
#define SITE(k) \
	static NOINLINE void burst_site_##k(struct site *s) \
	{ \
		size_t n = BURST / s->size, i, left = s->total - s->alloc_bytes; \
		void **blk = s->burst; \
		if (n > left / s->size) \
			n = left / s->size; \
		for (i = 0; i < n; i++) { \
			blk[i] = malloc(s->size); \
			if (!blk[i]) \
				abort(); \
			((volatile char *)blk[i])[0] = (char)i; \
		} \
		s->alloc_bytes += n * s->size; \
		for (i = 0; i < n; i++) { \
			if (i % 4 == 3) { \
				s->kept[s->nkept++] = blk[i]; \
				s->inuse_bytes += s->size; \
			} else { \
				free(blk[i]); \
			} \
		} \
		__asm__ volatile("" ::: "memory"); \
	}

SITE(0)
SITE(1)
SITE(2)
SITE(3)
SITE(4)

/* A few frames between the thread's start and its site, as in a program. */
static NOINLINE void depth(struct site *s, int d)
{
	if (d > 0)
		depth(s, d - 1);
	else
		run_site(s);
	sink += (unsigned long)d;
}

static void *thread_main(void *arg)
{
	depth(arg, 6);
	return NULL;
}

int main(int argc, char **argv)
{
	static struct site sites[NSITES];
	static const size_t sizes[NSITES] = { 128, 64, 256, 512, 96 };
	static void (*const fns[NSITES])(struct site *) = {
		burst_site_0, burst_site_1, burst_site_2, burst_site_3, burst_site_4,
	};
	size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 24;
	int k;

	if (argc > 2)
		pause_us = strtol(argv[2], NULL, 10);
	if (mib < 1 || mib > 4096 || pause_us < 0 || pause_us > 1000000) {
		fprintf(stderr, "usage: burst_sites [MIB_PER_SITE (1..4096) [PAUSE_US (0..1000000)]]\n");
		return 2;
	}
	for (k = 0; k < NSITES; k++) {
		sites[k].size = sizes[k];
		sites[k].total = mib << 20;
		sites[k].fn = fns[k];
	}
	for (k = 1; k < NSITES; k++)
		if (pthread_create(&sites[k].th, NULL, thread_main, &sites[k]))
			abort();
	depth(&sites[0], 3);
	for (k = 1; k < NSITES; k++)
		pthread_join(sites[k].th, NULL);
	for (k = 0; k < NSITES; k++)
		printf("burst_site_%d %zu %zu\n", k, sites[k].alloc_bytes, sites[k].inuse_bytes);
	return 0;
}
