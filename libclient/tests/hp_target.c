// SPDX-License-Identifier: GPL-2.0
/*
 * A program for the client tests to run under LD_PRELOAD. Each mode does a
 * known set of allocations with marker sizes the test looks for.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
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
extern void *__libc_stack_end;
int main(int argc, char **argv);

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
	/* For the stack checks: where this function's code and main's are,
	 * and where the main thread's stack began (the client's copies of
	 * this thread end just above it). */
	printf("fn=%p\n", (void *)mode_basic);
	printf("main=%p\n", (void *)main);
	printf("stack_end=%p\n", __libc_stack_end);
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

/*
 * Profiled, then the gate closes and opens again, and the first
 * allocations after it opens are callocs: calloc, not malloc, finds the
 * gate open, and their frees must still be looked up (free's variant
 * switches before the first sample). The thread's stack bounds are known
 * by then, so nothing in the first sample calls malloc on its own.
 */
static int mode_reattach_calloc(void)
{
	char c;
	int i;

	printf("ready\n");
	fflush(stdout);
	if (read(0, &c, 1) != 1)	/* enabled */
		return 1;
	for (i = 0; i < 10; i++) {
		keep[i] = malloc(4441);
		touch(keep[i], 1);
		free(keep[i]);
	}
	if (read(0, &c, 1) != 1)	/* disabled: the next malloc sees it */
		return 1;
	keep[0] = malloc(4442);
	touch(keep[0], 1);
	free(keep[0]);
	if (read(0, &c, 1) != 1)	/* enabled again */
		return 1;
	for (i = 0; i < 100; i++)
		keep[i] = calloc(1, 333);
	for (i = 0; i < 100; i++)
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

/*
 * Exact counters against the program's own sums: every entry point, sizes
 * from 0 up, blocks mmap'ed by glibc (growing sizes above the dynamic mmap
 * threshold), two threads. Prints the sums of this mode's own calls (usable
 * sizes from malloc_usable_size); the test compares differences between two
 * runs with the differences of the published counters.
 */
struct mix { unsigned long long ac, ab, fc, fb; int n; };

static void mix_alloc(struct mix *m, void *p)
{
	if (!p)
		exit(10);
	m->ac++;
	m->ab += malloc_usable_size(p);
}

static void mix_free(struct mix *m, void *p)
{
	m->fc++;
	m->fb += malloc_usable_size(p);
	free(p);
}

static void *mix_thr(void *arg)
{
	struct mix *m = arg;
	void *p, *q, *r;
	size_t sz, u;
	int i;

	for (i = 0; i < m->n; i++) {
		sz = (size_t)(i * 37) % 700;
		p = malloc(sz);
		mix_alloc(m, p);
		touch(p, sz);
		q = calloc(3, sz / 3 + 1);
		mix_alloc(m, q);
		u = malloc_usable_size(p);
		p = realloc(p, 2 * sz + 1);	/* a free and an allocation */
		m->fc++;
		m->fb += u;
		mix_alloc(m, p);
		if (posix_memalign(&r, 64, sz + 1))
			exit(11);
		mix_alloc(m, r);
		mix_free(m, r);
		r = memalign(128, sz + 8);
		mix_alloc(m, r);
		mix_free(m, r);
		if (i % 16 == 0) {
			r = malloc(200000 + (size_t)i * 5000);	/* mmap'ed */
			mix_alloc(m, r);
			touch(r, 64);
			mix_free(m, r);
		}
		mix_free(m, q);
		mix_free(m, p);
	}
	return NULL;
}

/* A thread that only frees (blocks another thread allocated): its frees
 * count too, although it never allocates. */
struct freeonly { struct mix *m; void **blocks; int n; };

static void *freeonly_thr(void *arg)
{
	struct freeonly *f = arg;

	for (int i = 0; i < f->n; i++)
		mix_free(f->m, f->blocks[i]);
	return NULL;
}

static int mode_countmix(int n)
{
	struct mix m[3];
	struct freeonly fo;
	pthread_t th;

	memset(m, 0, sizeof(m));
	m[0].n = m[1].n = n;
	pthread_create(&th, NULL, mix_thr, &m[1]);
	mix_thr(&m[0]);
	pthread_join(th, NULL);
	fo.m = &m[2];
	fo.n = n;
	fo.blocks = malloc(n * sizeof(void *));
	mix_alloc(&m[0], fo.blocks);
	for (int i = 0; i < n; i++) {
		fo.blocks[i] = malloc(48 + (size_t)i % 100);
		mix_alloc(&m[0], fo.blocks[i]);
	}
	pthread_create(&th, NULL, freeonly_thr, &fo);
	pthread_join(th, NULL);
	mix_free(&m[0], fo.blocks);
	printf("mix %llu %llu %llu %llu\n", m[0].ac + m[1].ac, m[0].ab + m[1].ab,
	       m[0].fc + m[1].fc + m[2].fc, m[0].fb + m[1].fb + m[2].fb);
	return 0;
}

/* Every exec function the client wraps, each in a child that runs this
 * program again and exits with a code the parent checks; and a failing
 * exec that must return -1 with errno ENOENT. */
static int exec_child(int k, const char *self)
{
	char code[16], envv[32];
	char *argv[] = { (char *)self, "exitcode", code, NULL };
	char *envp[] = { envv, NULL };
	pid_t pid;
	int st, fd;

	snprintf(code, sizeof(code), "%d", 40 + k);
	snprintf(envv, sizeof(envv), "HP_EXIT=%d", 40 + k);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		switch (k) {
		case 0: execl(self, self, "exitcode", code, (char *)NULL); break;
		case 1: execle(self, self, "exitenv", (char *)NULL, envp); break;
		case 2: execv(self, argv); break;
		case 3: execve(self, (char *[]){ (char *)self, "exitenv", NULL }, envp); break;
		case 4: execvpe(self, (char *[]){ (char *)self, "exitenv", NULL }, envp); break;
		case 5: execvp(self, argv); break;
		case 6: execlp("sh", "sh", "-c", "exit 46", (char *)NULL); break;
		case 7:
			fd = open(self, O_RDONLY | O_CLOEXEC);
			if (fd >= 0)
				fexecve(fd, argv, environ);
			break;
		}
		_exit(99);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static int mode_execall(const char *self)
{
	int k, bad = 0, rc;

	for (k = 0; k < 8; k++) {
		rc = exec_child(k, self);
		if (rc != 40 + k) {
			printf("exec variant %d: exit %d\n", k, rc);
			bad = 1;
		}
	}
	errno = 0;
	rc = execl("/nonexistent/hp", "hp", (char *)NULL);
	if (rc != -1 || errno != ENOENT) {
		printf("failing exec: %d errno %d\n", rc, errno);
		bad = 1;
	}
	printf("execall %s\n", bad ? "failed" : "ok");
	return bad;
}

/* Allocations the exact counters must show although this image never
 * exits: it execs a program that does nothing. */
static int mode_execcount(const char *self, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		keep[i] = malloc(64);
		touch(keep[i], 1);
	}
	for (i = 0; i < n; i++)
		free(keep[i]);
	fflush(stdout);
	execl(self, self, "nothing", (char *)NULL);
	return 1;
}

/*
 * Marked blocks (libclient/mark.h), under the dormant client with the
 * gate opened, closed and opened again (reattach_session). Every block
 * sampled is marked (interval 1): realloc of plain and marked blocks
 * keeps the contents, the aligned family keeps its alignment with the
 * mark's offset in front, and a plain block that carries a forged mark is
 * freed, resized and measured as the plain block it is. Marked blocks
 * are freed and resized after the gate closed. Any mismatch exits with
 * its own code; glibc aborts on a wrong pointer.
 */
static void fill(void *p, size_t n, int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		((unsigned char *)p)[i] = (unsigned char)(i * 7 + seed);
}

static int same(const void *p, size_t n, int seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (((const unsigned char *)p)[i] != (unsigned char)(i * 7 + seed))
			return 0;
	return 1;
}

/* The words around p as memory, not as a block the compiler knows: the
 * mark lies below the block, outside what malloc returned. */
static uint64_t *words(void *p)
{
	uint64_t *w = p;

	__asm__("" : "+r"(w));
	return w;
}

/* Two plain blocks next to each other, b right after a (40 bytes usable:
 * a's last word is the word below b's chunk header, b[-2]). */
static int plain_pair(void **a, void **b)
{
	int i;

	for (i = 0; i < 1000; i++) {
		*a = malloc(40);
		*b = malloc(40);
		if ((char *)*b - (char *)*a == 48 && malloc_usable_size(*a) == 40)
			return 0;
		keep[99000 + i % 1000] = *a;	/* not adjacent: leave them */
	}
	return 1;
}

static int mode_marks(void)
{
	void *pa[3], *pb[3], *p, *q, *m, *al;
	uint64_t key;
	char c;
	int i;

	for (i = 0; i < 3; i++)
		if (plain_pair(&pa[i], &pb[i]))
			return 20;
	p = malloc(100);
	fill(p, 100, 1);
	printf("ready\n");
	fflush(stdout);
	if (read(0, &c, 1) != 1)	/* enabled, interval 1 */
		return 1;
	/* plain -> marked */
	p = realloc(p, 3000);
	if (!p || !same(p, 100, 1) || malloc_usable_size(p) < 3000)
		return 21;
	/* marked -> marked, in place or moved with its offset */
	m = malloc(700);
	fill(m, 700, 2);
	m = realloc(m, 5000);
	if (!m || !same(m, 700, 2) || malloc_usable_size(m) < 5000)
		return 22;
	/* marked with an alignment offset -> marked */
	al = memalign(4096, 6000);
	if (!al || (uintptr_t)al % 4096 || malloc_usable_size(al) < 6000)
		return 23;
	fill(al, 6000, 3);
	al = realloc(al, 7000);
	if (!al || !same(al, 6000, 3))
		return 24;
	if (posix_memalign(&q, 64, 1500) || (uintptr_t)q % 64 || malloc_usable_size(q) < 1500)
		return 25;
	free(q);
	q = aligned_alloc(256, 2560);
	if (!q || (uintptr_t)q % 256 || malloc_usable_size(q) < 2560)
		return 26;
	free(q);
	q = valloc(1234);
	if (!q || (uintptr_t)q % 4096 || malloc_usable_size(q) < 1234)
		return 27;
	free(q);
	q = pvalloc(10);
	if (!q || (uintptr_t)q % 4096 || malloc_usable_size(q) < 4096)
		return 28;
	free(q);
	q = calloc(3, 333);
	for (i = 0; q && i < 999; i++)
		if (((char *)q)[i])
			return 29;
	free(q);
	/* The key, as the mark of a block known to be marked shows it. */
	key = words(m)[-2] ^ (uint64_t)(uintptr_t)m;
	for (i = 0; i < 3; i++) {
		((uint64_t *)pa[i])[4] = key ^ (uint64_t)(uintptr_t)pb[i];
		if (words(pb[i])[-2] != ((uint64_t *)pa[i])[4])
			return 30;
	}
	fill(pb[1], 40, 4);
	if (malloc_usable_size(pb[0]) != 40)
		return 31;
	free(pb[0]);			/* forged mark: a plain free */
	pb[1] = realloc(pb[1], 50000);	/* forged mark: a plain realloc */
	if (!pb[1] || !same(pb[1], 40, 4))
		return 32;
	free(pb[1]);
	if (read(0, &c, 1) != 1)	/* disabled */
		return 1;
	/* marked blocks resized (they stay marked, as quiet ones) and freed
	 * with the gate closed (which this malloc's slow path notices) */
	q = malloc(4442);
	touch(q, 1);
	free(q);
	fill(m, 5000, 5);
	m = realloc(m, 300000);
	if (!m || !same(m, 5000, 5) || malloc_usable_size(m) < 300000)
		return 33;
	if (malloc_usable_size(p) < 3000 || malloc_usable_size(pb[2]) != 40)
		return 34;
	free(p);
	free(al);
	free(m);
	free(pb[2]);			/* forged mark, gate closed */
	if (read(0, &c, 1) != 1)	/* enabled again */
		return 1;
	for (i = 0; i < 3; i++)
		free(pa[i]);
	p = malloc(4443);
	touch(p, 4443);
	free(p);
	malloc_trim(0);
	return 0;
}

/* As minidaemon.h reads them. */
#define HP_MARK_OUTER	0x4d4b524fULL
#define HP_MARK_INNER	0x4d4b5249ULL
#define HP_MARK_CHURN	0x4d4b5243ULL

/*
 * Stack reuse must send what changed, wherever it is: each malloc of
 * 5000 + i comes from a frame that holds HP_MARK_INNER | i, below a frame
 * with a 4 KiB buffer (as sqlite3's outer frames have) whose word near the
 * top of the stack holds HP_MARK_OUTER | (i rounded down to 50): most
 * samples find the whole top as it was, every fiftieth finds it changed.
 */
static __attribute__((noinline)) void *marks_leaf(size_t n)
{
	void *p = malloc(n);

	touch(p, n);
	return p;
}

static __attribute__((noinline)) void marks_inner(int i)
{
	volatile uint64_t mark[8];

	mark[3] = HP_MARK_INNER << 32 | (uint32_t)i;
	free(marks_leaf(5000 + (size_t)i));
	__asm__ volatile("" : : "r"(mark) : "memory");
}

static __attribute__((noinline)) int mode_stackmarks(int n)
{
	volatile uint64_t outer[512];
	int i;

	memset((void *)outer, 0, sizeof(outer));
	for (i = 0; i < n; i++) {
		if (i % 50 == 0)
			outer[500] = HP_MARK_OUTER << 32 | (uint32_t)i;
		/* Lower in the outer frame: a word that changes every call (so
		 * each record below the top is a delta) and a mark that changes
		 * every other one (unchanged, it is right only if the record
		 * before left both ends with the same words). */
		outer[300] = (uint64_t)i * 0x9e3779b97f4a7c15ULL;
		outer[320] = HP_MARK_CHURN << 32 | (uint32_t)(i - i % 2);
		marks_inner(i);
	}
	__asm__ volatile("" : : "r"(outer) : "memory");
	return 0;
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

	if (!strcmp(m, "basic")) {
		int rc = mode_basic(atoi(argv[2]), (size_t)atol(argv[3]));

		/* Not a tail call: the stack tests look for main's frame. */
		__asm__ volatile("" : : : "memory");
		return rc;
	}
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
	if (!strcmp(m, "reattach_calloc"))
		return mode_reattach_calloc();
	if (!strcmp(m, "reallocfail"))
		return mode_reallocfail();
	if (!strcmp(m, "marks"))
		return mode_marks();
	if (!strcmp(m, "heap"))
		return mode_heap();
	if (!strcmp(m, "countmix"))
		return mode_countmix(atoi(argv[2]));
	if (!strcmp(m, "execall"))
		return mode_execall(argv[0]);
	if (!strcmp(m, "execafter")) {
		/* n blocks of size, each freed, then exec this program to
		 * exit at once (client_kernel_test: the wait before exec). */
		int i, n = atoi(argv[2]);
		size_t size = (size_t)atol(argv[3]);

		for (i = 0; i < n; i++) {
			void *p = malloc(size);

			touch(p, size);
			free(p);
		}
		fflush(stdout);
		execl(argv[0], argv[0], "exitcode", "0", (char *)NULL);
		return 1;
	}
	if (!strcmp(m, "execcount"))
		return mode_execcount(argv[0], atoi(argv[2]));
	if (!strcmp(m, "exitcode"))
		return atoi(argv[2]);
	if (!strcmp(m, "exitenv"))
		return getenv("HP_EXIT") ? atoi(getenv("HP_EXIT")) : 98;
	if (!strcmp(m, "threads"))
		return mode_threads(atoi(argv[2]));
	if (!strcmp(m, "nothing"))
		return 0;
	if (!strcmp(m, "stackmarks")) {
		int rc = mode_stackmarks(atoi(argv[2]));

		__asm__ volatile("" : : : "memory");
		return rc;
	}
	fprintf(stderr, "unknown mode\n");
	return 2;
}
