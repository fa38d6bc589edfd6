// SPDX-License-Identifier: GPL-2.0
/*
 * The workload for the client benchmarks; bench_run starts it with and
 * without the client. Prints "RESULT <name> <value>" lines.
 *
 *   bench_client ops N THREADS   ns per malloc(32)+free pair, per thread
 *   bench_client sampled N       median ns of one malloc+free at 16 KiB stack
 *   bench_client mem             RSS figures after a typical workload
 *   bench_client paired BLOCKS PAIRS THREADS
 *                                the hooks' cost per pair, paired: each
 *                                thread alternates blocks of PAIRS pairs
 *                                through malloc/free (the client's, when it
 *                                is preloaded) and through glibc's own,
 *                                found in libc.so.6 itself; the difference
 *                                of neighbouring blocks cancels the
 *                                machine's drift, which between runs is
 *                                larger than the cost being measured
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static long n_ops;
static pthread_barrier_t bar;
static double per_thread_ns[16];

static void *ops(void *arg)
{
	long i, t = (long)arg;
	uint64_t t0, t1;

	pthread_barrier_wait(&bar);
	t0 = now_ns();
	for (i = 0; i < n_ops; i++) {
		char *p = malloc(32);

		/* Touch it so the compiler keeps the pair. */
		p[0] = (char)i;
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
	t1 = now_ns();
	per_thread_ns[t] = (double)(t1 - t0) / (double)n_ops;
	return NULL;
}

static int mode_ops(long n, int threads)
{
	pthread_t th[16];
	double sum = 0;
	int i;

	n_ops = n;
	pthread_barrier_init(&bar, NULL, (unsigned)threads);
	for (i = 0; i < threads; i++)
		pthread_create(&th[i], NULL, ops, (void *)(long)i);
	for (i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < threads; i++)
		sum += per_thread_ns[i];
	printf("RESULT ns_per_pair %.3f\n", sum / threads);
	return 0;
}

static void *(*libc_malloc)(size_t);
static void (*libc_free)(void *);
static long paired_blocks, paired_pairs;
static double *paired_diff[16];

/*
 * n pairs through m and f. Both sides are called through pointers: the
 * client's side is the program's own malloc and free (so the preloaded
 * hooks), glibc's side is libc.so.6's.
 */
static __attribute__((noinline)) uint64_t block(long n, void *(*m)(size_t), void (*f)(void *))
{
	uint64_t t0 = now_ns();

	for (long i = 0; i < n; i++) {
		char *p = m(32);

		p[0] = (char)i;
		__asm__ volatile("" : : "r"(p) : "memory");
		f(p);
	}
	return now_ns() - t0;
}

static uint64_t block_hooked(long n)
{
	void *(*volatile m)(size_t) = malloc;
	void (*volatile f)(void *) = free;

	return block(n, m, f);
}

static uint64_t block_libc(long n)
{
	return block(n, libc_malloc, libc_free);
}

static void *paired(void *arg)
{
	long t = (long)arg;
	double *d = paired_diff[t];

	block_hooked(paired_pairs);	/* warm both paths */
	block_libc(paired_pairs);
	pthread_barrier_wait(&bar);
	for (long b = 0; b < paired_blocks; b++) {
		/* Alternate which goes first, so neither always follows the other. */
		uint64_t h, l;

		if (b & 1) {
			h = block_hooked(paired_pairs);
			l = block_libc(paired_pairs);
		} else {
			l = block_libc(paired_pairs);
			h = block_hooked(paired_pairs);
		}
		d[b] = ((double)h - (double)l) / (double)paired_pairs;
	}
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int mode_paired(long blocks, long pairs, int threads)
{
	void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	pthread_t th[16];
	double all = 0, q10 = 0, q90 = 0;

	if (!libc || blocks < 2 || pairs < 1 || threads < 1 || threads > 16) {
		fprintf(stderr, "paired: bad arguments or no libc.so.6\n");
		return 2;
	}
	libc_malloc = (void *(*)(size_t))dlsym(libc, "malloc");
	libc_free = (void (*)(void *))dlsym(libc, "free");
	if (!libc_malloc || !libc_free)
		return 2;
	paired_blocks = blocks;
	paired_pairs = pairs;
	pthread_barrier_init(&bar, NULL, (unsigned)threads);
	for (int i = 0; i < threads; i++) {
		paired_diff[i] = calloc((size_t)blocks, sizeof(double));
		pthread_create(&th[i], NULL, paired, (void *)(long)i);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < threads; i++) {
		qsort(paired_diff[i], (size_t)blocks, sizeof(double), cmp_double);
		all += paired_diff[i][blocks / 2];
		q10 += paired_diff[i][blocks / 10];
		q90 += paired_diff[i][blocks * 9 / 10];
	}
	printf("RESULT paired_median_ns %.3f\n", all / threads);
	printf("RESULT paired_p10_ns %.3f\n", q10 / threads);
	printf("RESULT paired_p90_ns %.3f\n", q90 / threads);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t *lat;

/* Called 16 KiB deep in the stack. */
static __attribute__((noinline)) void sampled_ops(long n)
{
	long i;

	for (i = 0; i < n; i++) {
		uint64_t t0 = now_ns(), t1;
		char *p = malloc(64);

		p[0] = 1;
		__asm__ volatile("" : : "r"(p) : "memory");
		t1 = now_ns();
		lat[i] = t1 - t0;
		free(p);
		if (i % 16 == 15)
			usleep(2000);	/* let the daemon drain: no drops */
	}
}

static __attribute__((noinline)) void deep(long n, int depth_left)
{
	volatile char pad[1024];

	memset((char *)pad, depth_left, sizeof(pad));
	if (depth_left)
		deep(n, depth_left - 1);
	else
		sampled_ops(n);
	__asm__ volatile("" : : "r"(pad) : "memory");
}

static int mode_sampled(long n)
{
	uint64_t t0 = now_ns(), base;
	long i;

	lat = calloc((size_t)n, sizeof(*lat));
	/* The clock's own cost, to subtract. */
	for (i = 0; i < 1000; i++) {
		uint64_t a = now_ns();

		lat[i] = now_ns() - a;
	}
	qsort(lat, 1000, sizeof(*lat), cmp_u64);
	base = lat[500];
	deep(n, 15);	/* 15 frames of 1 KiB + the rest: ~16 KiB */
	qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
	printf("RESULT sampled_malloc_median_ns %llu\n",
	       (unsigned long long)(lat[n / 2] > base ? lat[n / 2] - base : 0));
	printf("RESULT sampled_malloc_p90_ns %llu\n",
	       (unsigned long long)(lat[n * 9 / 10] > base ? lat[n * 9 / 10] - base : 0));
	(void)t0;
	return 0;
}

static long status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key))) {
			v = atol(line + strlen(key) + 1);
			break;
		}
	fclose(f);
	return v;
}

static void *mem_thread(void *arg)
{
	long i;

	(void)arg;
	for (i = 0; i < 100000; i++) {
		char *p = malloc((size_t)(i % 512) + 1);

		p[0] = 1;
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
	return NULL;
}

/* A workload with live sampled allocations and a few threads. */
static int mode_mem(void)
{
	static void *keep[20000];
	pthread_t th[4];
	long i;

	for (i = 0; i < 20000; i++) {
		keep[i] = malloc((size_t)(i % 1000) + 16);
		memset(keep[i], 1, 16);
	}
	for (i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, mem_thread, NULL);
	for (i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	printf("RESULT rss_anon_kb %ld\n", status_kb("RssAnon:"));
	printf("RESULT rss_shmem_kb %ld\n", status_kb("RssShmem:"));
	printf("RESULT rss_file_kb %ld\n", status_kb("RssFile:"));
	for (i = 0; i < 20000; i++)
		free(keep[i]);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "ops"))
		return mode_ops(atol(argv[2]), atoi(argv[3]));
	if (argc >= 3 && !strcmp(argv[1], "sampled"))
		return mode_sampled(atol(argv[2]));
	if (argc >= 2 && !strcmp(argv[1], "mem"))
		return mode_mem();
	if (argc >= 5 && !strcmp(argv[1], "paired"))
		return mode_paired(atol(argv[2]), atol(argv[3]), atoi(argv[4]));
	fprintf(stderr, "usage: bench_client ops N THREADS | sampled N | mem | paired BLOCKS PAIRS THREADS\n");
	return 2;
}
