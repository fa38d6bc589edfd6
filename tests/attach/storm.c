// SPDX-License-Identifier: GPL-2.0
/*
 * A program started without the client, for heapprofctl attach to load it
 * (tests/attach/run). Everything it prints but its first line is the same
 * whatever happens to it from outside, so that a run with attaches can be
 * compared with one without; its exit status is 7.
 *
 *   storm storm THREADS DIR LIB  THREADS threads allocate and free without
 *                 pause (churn_site) while the main thread waits for files
 *                 in DIR: go1 -> site_a allocates 256 x 64 KiB (16 MiB),
 *                 then done1; go2 -> dlopen(LIB) and its dl_site allocates
 *                 256 x 32 KiB (8 MiB), site_b 128 x 64 KiB (8 MiB), then
 *                 done2; stop -> the threads end, the program exits. A
 *                 thread also sigqueue()s SIGRTMIN to the process all along;
 *                 at the end it says whether each one was handled.
 *   storm locks DIR LIB  the same, and two threads that keep the locks busy:
 *                 one inside dl_iterate_phdr (its callback sleeps, holding
 *                 the loader's lock), one in malloc_trim on a fragmented heap
 *   storm seccomp-strict | seccomp-filter | traced   a process attach must
 *                 refuse (strict seccomp, a seccomp filter, one traced by its
 *                 parent); prints "ready PID" and waits to be killed
 *   storm idle    prints "ready PID" and waits to be killed
 *   storm spin    8 threads allocate and free without pause (churn), so
 *                 at any moment some thread is inside the allocator or the
 *                 client's hooks; prints "ready PID" once they run
 *   storm stale   the same, single-threaded, with a word on its live stack
 *                 that points into malloc (as an interpreter's allocator
 *                 table, or a return address an earlier call left in an
 *                 uninitialised local, would): not a frame, so attach
 *                 must find this a safe point
 *
 * The first line is "ready PID". With a STOP file no timing is involved.
 */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline, noclone))
#define KiB 1024UL

static const char *dir;
static volatile int stopping;
static volatile unsigned long sink;
static unsigned long sig_sent, sig_got;

static void nap_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int has(const char *name)
{
	char p[4096];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

static void create(const char *name)
{
	char p[4096];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "w");
	if (f)
		fclose(f);
}

/* Wait for DIR/name; the directory gone (the test ended) ends us too. */
static void await(const char *name)
{
	while (!has(name)) {
		if (access(dir, F_OK)) {
			fprintf(stderr, "storm: %s is gone\n", dir);
			exit(3);
		}
		nap_us(2000);
	}
}

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
	return *s >> 33;
}

static NOINLINE void *churn_site(size_t n)
{
	return malloc(n);
}

static void *churn(void *arg)
{
	uint64_t s = (uintptr_t)arg;
	void *win[64] = { 0 };
	unsigned i = 0;

	while (!stopping) {
		unsigned k = i++ % 64;
		size_t n = 16 + lcg(&s) % 4096;

		free(win[k]);
		win[k] = churn_site(n);
		if (win[k])
			((char *)win[k])[0] = 1;
		if (!(i % 7)) {
			void *q = realloc(win[k], n * 2);

			if (q)
				win[k] = q;
		}
		if (!(i % 11)) {
			void *c = calloc(4, n);

			free(c);
		}
	}
	for (unsigned k = 0; k < 64; k++)
		free(win[k]);
	return NULL;
}

/* The known sites' blocks stay in use until the end (a profile shows
 * what is in use), and are freed at stop, perhaps after a detach. */
static void *keep_a[256], *keep_b[128];

static NOINLINE unsigned long site_a(void)
{
	unsigned long sum = 0;

	for (int i = 0; i < 256; i++) {
		keep_a[i] = malloc(64 * KiB);
		memset(keep_a[i], i, 64 * KiB);
		sum += ((unsigned char *)keep_a[i])[i];
	}
	return sum;
}

static NOINLINE unsigned long site_b(void)
{
	unsigned long sum = 0;

	for (int i = 0; i < 128; i++) {
		keep_b[i] = malloc(64 * KiB);
		memset(keep_b[i], i + 1, 64 * KiB);
		sum += ((unsigned char *)keep_b[i])[i];
	}
	return sum;
}

static void on_rt(int sig)
{
	(void)sig;
	__atomic_add_fetch(&sig_got, 1, __ATOMIC_RELAXED);
}

static void *signaller(void *arg)
{
	union sigval v = { .sival_int = 1 };

	(void)arg;
	while (!stopping) {
		if (!sigqueue(getpid(), SIGRTMIN, v))
			__atomic_add_fetch(&sig_sent, 1, __ATOMIC_RELAXED);
		nap_us(200);
	}
	return NULL;
}

/* Holds the loader's lock (dl_iterate_phdr's) much of the time. */
static int slow_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)info;
	(void)size;
	(void)arg;
	nap_us(1000);
	return 1;
}

static void *loader_holder(void *arg)
{
	(void)arg;
	while (!stopping) {
		dl_iterate_phdr(slow_cb, NULL);
		nap_us(1000);
	}
	return NULL;
}

/* Keeps the allocator's lock busy: malloc_trim over a fragmented heap. */
static void *trimmer(void *arg)
{
	static void *frag[4096];

	(void)arg;
	while (!stopping) {
		for (int i = 0; i < 4096; i++)
			frag[i] = malloc(256 + (i % 7) * 64);
		for (int i = 0; i < 4096; i += 2)
			free(frag[i]);
		malloc_trim(0);
		for (int i = 1; i < 4096; i += 2)
			free(frag[i]);
	}
	return NULL;
}

static void wait_forever(void)
{
	for (;;)
		pause();
}

static int refusing(const char *mode)
{
	if (!strcmp(mode, "traced")) {
		pid_t c = fork();

		if (c == 0) {
			ptrace(PTRACE_TRACEME, 0, NULL, NULL);
			printf("ready %d\n", (int)getpid());
			fflush(stdout);
			wait_forever();
		}
		waitpid(c, NULL, 0);
		return 0;
	}
	if (!strcmp(mode, "stale")) {
		volatile uintptr_t word = (uintptr_t)&malloc + 8;

		printf("ready %d\n", (int)getpid());
		fflush(stdout);
		wait_forever();
		return word ? 0 : 2;
	}
	if (!strcmp(mode, "spin")) {
		pthread_t t;

		for (uintptr_t i = 1; i <= 8; i++)
			if (pthread_create(&t, NULL, churn, (void *)i))
				return 2;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	if (!strcmp(mode, "idle") || !strcmp(mode, "spin"))
		wait_forever();
	if (!strcmp(mode, "seccomp-filter")) {
		struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
		struct sock_fprog prog = { 1, &allow };

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
			return 2;
		wait_forever();
	}
	if (!strcmp(mode, "seccomp-strict")) {
		int p[2];
		char c;

		if (pipe(p) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT))
			return 2;
		/* Only read, write, exit and sigreturn from here: a read that
		 * never returns (we hold the pipe's write end). */
		for (;;)
			if (read(p[0], &c, 1) < 0)
				continue;
	}
	return 2;
}

int main(int argc, char **argv)
{
	pthread_t th[64], sg, extra[2];
	unsigned long a, b, d;
	unsigned long (*dl_site)(int);
	void (*dl_free)(void);
	int n, locks, i;
	void *h;

	if (argc == 2)
		return refusing(argv[1]);
	if (argc != 5 && !(argc == 4 && !strcmp(argv[1], "locks"))) {
		fprintf(stderr, "usage: storm storm THREADS DIR LIB | locks DIR LIB | seccomp-strict | seccomp-filter | traced\n");
		return 2;
	}
	locks = !strcmp(argv[1], "locks");
	n = locks ? 2 : atoi(argv[2]);
	if (n < 1 || n > 64)
		return 2;
	dir = argv[locks ? 2 : 3];
	signal(SIGRTMIN, on_rt);
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (i = 0; i < n; i++)
		pthread_create(&th[i], NULL, churn, (void *)(uintptr_t)(i + 1));
	pthread_create(&sg, NULL, signaller, NULL);
	if (locks) {
		pthread_create(&extra[0], NULL, loader_holder, NULL);
		pthread_create(&extra[1], NULL, trimmer, NULL);
	}
	await("go1");
	a = site_a();
	printf("phase 1 done %lu\n", a);
	fflush(stdout);
	create("done1");
	await("go2");
	h = dlopen(argv[locks ? 3 : 4], RTLD_NOW);
	dl_site = h ? (unsigned long (*)(int))dlsym(h, "dl_site") : NULL;
	d = dl_site ? dl_site(256) : 0;
	b = site_b();
	printf("phase 2 done %lu %lu %s\n", d, b, h ? "dlopen ok" : dlerror());
	fflush(stdout);
	create("done2");
	await("stop");
	stopping = 1;
	for (i = 0; i < 256; i++)
		free(keep_a[i]);
	for (i = 0; i < 128; i++)
		free(keep_b[i]);
	if (h && (dl_free = (void (*)(void))dlsym(h, "dl_free")) != NULL)
		dl_free();
	for (i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_join(sg, NULL);
	if (locks) {
		pthread_join(extra[0], NULL);
		pthread_join(extra[1], NULL);
	}
	/* A queued real-time signal is delivered once, never merged: each one
	 * sent must be handled. */
	for (i = 0; i < 5000 && __atomic_load_n(&sig_got, __ATOMIC_RELAXED) != sig_sent; i++)
		nap_us(1000);
	if (sig_got == sig_sent)
		printf("signals: none lost\n");
	else
		printf("signals: %lu sent, %lu handled\n", sig_sent, sig_got);
	printf("exit\n");
	return 7;
}
