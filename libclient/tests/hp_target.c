// SPDX-License-Identifier: GPL-2.0
/*
 * A program for the client tests to run under LD_PRELOAD. Each mode does a
 * known set of allocations with marker sizes the test looks for.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define HEAPPROFD_CLIENT_WEAK
#include "../include/heapprofd_client.h"

static void *keep[100000];

/* Use the memory so the compiler keeps every malloc/free pair. */
static void touch(void *p, size_t n)
{
	if (p && n)
		memset(p, 0x5a, n);
	__asm__ volatile("" : : "r"(p) : "memory");
}

static int check_usable(void *p, size_t n)
{
	if (!p || malloc_usable_size(p) < n) {
		fprintf(stderr, "usable size wrong for %zu\n", n);
		exit(3);
	}
	return 0;
}

static int mode_basic(int n, size_t size)
{
	void *p, *q;
	int i;

	for (i = 0; i < n; i++) {
		p = malloc(size);
		touch(p, size);
		check_usable(p, size);
		free(p);
	}
	/* One of each entry point, each with its own marker size. */
	p = calloc(10, 101);			/* 1010 */
	check_usable(p, 1010);
	for (i = 0; i < 1010; i++)
		if (((char *)p)[i])
			exit(4);
	free(p);
	p = malloc(1020);
	p = realloc(p, 1030);
	check_usable(p, 1030);
	p = reallocarray(p, 2, 520);		/* 1040 */
	check_usable(p, 1040);
	free(p);
	p = memalign(64, 1050);
	if ((uintptr_t)p % 64)
		exit(5);
	free(p);
	if (posix_memalign(&q, 128, 1060) || (uintptr_t)q % 128)
		exit(6);
	free(q);
	p = aligned_alloc(256, 1280);
	touch(p, 1280);
	if ((uintptr_t)p % 256)
		exit(7);
	free(p);
	p = valloc(1070);
	free(p);
	p = pvalloc(1080);
	free(p);
	/* Overflowing products; volatile so the compiler cannot see them. */
	volatile size_t big = (size_t)1 << 40;
	if (calloc(big, big) || reallocarray(NULL, big, big))
		exit(8);
	if (posix_memalign(&q, 3, 10) != 22)
		exit(9);
	/* For the stack check: where this function's code is. */
	printf("fn=%p\n", (void *)mode_basic);
	return 0;
}

static int mode_count(int n, size_t size)
{
	int i;

	for (i = 0; i < n; i++) {
		keep[i] = malloc(size);
		touch(keep[i], 1);
	}
	for (i = 0; i < n; i++)
		free(keep[i]);
	return 0;
}

static int mode_fork(void)
{
	pid_t pid;
	int i, st;

	keep[0] = malloc(2001);
	pid = fork();
	if (pid == 0) {
		for (i = 0; i < 100; i++)
			keep[i + 1] = malloc(2002);
		free(keep[0]);
		_exit(0);
	}
	waitpid(pid, &st, 0);
	for (i = 0; i < 100; i++) {
		void *p = malloc(2003);

		touch(p, 1);
		free(p);
	}
	free(keep[0]);
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : 1;
}

/* fork, let the child allocate and exit, then wait for the test (kernel
 * transport: the test attaches only after this point). */
static int mode_forkwait(void)
{
	int st = 0;
	char c;

	if (mode_fork())
		return 1;
	printf("ready\n");
	fflush(stdout);
	if (read(0, &c, 1) != 1)
		return 1;
	(void)st;
	return 0;
}

static int mode_printpre(void)
{
	const char *s = getenv("LD_PRELOAD");
	int i;

	printf("LD_PRELOAD=%s\n", s ? s : "");
	for (i = 0; i < 100; i++) {
		void *p = malloc(2004);

		touch(p, 1);
		free(p);
	}
	return 0;
}

static int mode_exec(const char *self)
{
	fflush(stdout);
	execl(self, self, "printpre", (char *)NULL);
	return 1;
}

static int mode_dormant(void)
{
	char c;
	int i;

	for (i = 0; i < 100; i++)
		keep[i] = malloc(111);
	printf("ready\n");
	fflush(stdout);
	if (read(0, &c, 1) != 1)
		return 1;
	for (i = 0; i < 100; i++)
		keep[100 + i] = malloc(222);
	for (i = 0; i < 200; i++)
		free(keep[i]);
	return 0;
}

/* A realloc that fails keeps the old block: its free comes at free(). */
static int mode_reallocfail(void)
{
	volatile size_t huge = (size_t)1 << 62;
	void *p = malloc(5000), *q, *m;

	touch(p, 5000);
	q = realloc(p, huge);
	if (q)
		return 10;
	m = malloc(5001);		/* marker between the two */
	touch(m, 1);
	touch(p, 5000);			/* still ours */
	free(p);
	free(m);
	p = malloc(5002);
	q = realloc(p, 0);		/* glibc: frees, returns NULL */
	if (q)
		free(q);
	return 0;
}

static int mode_heap(void)
{
	int heap, i;
	static char pool[64 * 50];

	if (!heapprofd_register_heap) {
		printf("client absent\n");
		return 0;
	}
	heap = heapprofd_register_heap("testpool", 1);
	if (heap < 16)
		return 1;
	for (i = 0; i < 50; i++)
		heapprofd_report_alloc(heap, pool + 64 * i, 64);
	for (i = 0; i < 20; i++)
		heapprofd_report_free(heap, pool + 64 * i);
	printf("heap %d\n", heap);
	return 0;
}

static void *thr(void *arg)
{
	int i, n = (int)(intptr_t)arg;

	for (i = 0; i < n; i++) {
		void *p = malloc(3001);

		touch(p, 8);
		free(p);
	}
	return NULL;
}

static int mode_threads(int n)
{
	pthread_t th[4];
	int i;

	for (i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, thr, (void *)(intptr_t)n);
	for (i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	return 0;
}

int main(int argc, char **argv)
{
	const char *m = argc > 1 ? argv[1] : "";

	if (!strcmp(m, "basic"))
		return mode_basic(atoi(argv[2]), (size_t)atol(argv[3]));
	if (!strcmp(m, "count"))
		return mode_count(atoi(argv[2]), (size_t)atol(argv[3]));
	if (!strcmp(m, "fork"))
		return mode_fork();
	if (!strcmp(m, "forkwait"))
		return mode_forkwait();
	if (!strcmp(m, "printpre"))
		return mode_printpre();
	if (!strcmp(m, "exec"))
		return mode_exec(argv[0]);
	if (!strcmp(m, "dormant"))
		return mode_dormant();
	if (!strcmp(m, "reallocfail"))
		return mode_reallocfail();
	if (!strcmp(m, "heap"))
		return mode_heap();
	if (!strcmp(m, "threads"))
		return mode_threads(atoi(argv[2]));
	if (!strcmp(m, "nothing"))
		return 0;
	fprintf(stderr, "unknown mode\n");
	return 2;
}
