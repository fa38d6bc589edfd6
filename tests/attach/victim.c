// SPDX-License-Identifier: GPL-2.0
/*
 * The targets of tests/attach/hostile: programs that an unprivileged user
 * runs to turn root's `heapprofctl attach` against root, or to hang or
 * freeze it. Each prints "ready PID", allocates until the file STOP
 * exists, checks its own work and exits 0 (1 when that work went wrong).
 *
 *   victim loop STOP         a plain allocating loop (with LD_AUDIT, the
 *                            audit library of audit.c acts during attach)
 *   victim decoy STOP LIB    first maps LIB, a library of its own named
 *                            libc.so.6 (decoy.c), by hand below the real
 *                            libc: the first libc.so.6 in its maps
 *   victim swap STOP DIR     maps DIR/x/libc.so.6 (the decoy) so, then a
 *                            thread swaps DIR/x and DIR/y (a FIFO named
 *                            libc.so.6) without pause (RENAME_EXCHANGE)
 *   victim spin STOP         its own allocator, one spin lock, which a
 *                            second thread holds most of the time
 *   victim control - LIB     the test's control: calls the decoy LIB's
 *                            dlopen itself; exit 0 when it left its mark
 *                            (mark.decoy in the working directory)
 */
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- spin: the program's own allocator (a bump arena under a spin
 * lock; what it did not hand out goes to libc's) ---- */
#define ARENA_SIZE (512UL << 20)
static atomic_flag spin = ATOMIC_FLAG_INIT;
static char *arena, *arena_next;
static int own_alloc;

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_calloc(size_t, size_t);

static void lock(void)
{
	while (atomic_flag_test_and_set_explicit(&spin, memory_order_acquire))
		;	/* spins: no futex, no yield */
}

static void unlock(void)
{
	atomic_flag_clear_explicit(&spin, memory_order_release);
}

static int ours(void *p)
{
	return arena && (char *)p >= arena && (char *)p < arena + ARENA_SIZE;
}

void *malloc(size_t n)
{
	char *p;

	if (!own_alloc)
		return __libc_malloc(n);
	lock();
	p = arena_next;
	arena_next += 16 + ((n + 15) & ~15UL);
	if (arena_next > arena + ARENA_SIZE)
		arena_next = arena + 16;	/* the test never keeps this much */
	unlock();
	*(size_t *)p = n;
	return p + 16;
}

void free(void *p)
{
	if (p && !ours(p))
		__libc_free(p);
	/* ours: a bump arena frees nothing, but takes the lock as one would */
	if (p && ours(p)) {
		lock();
		unlock();
	}
}

void *calloc(size_t a, size_t b)
{
	void *p;

	if (!own_alloc)
		return __libc_calloc(a, b);
	p = malloc(a * b);
	memset(p, 0, a * b);
	return p;
}

void *realloc(void *p, size_t n)
{
	void *q;

	if (p && !ours(p))
		return __libc_realloc(p, n);
	q = malloc(n);
	if (p)
		memcpy(q, p, *(size_t *)((char *)p - 16) < n ? *(size_t *)((char *)p - 16) : n);
	free(p);
	return q;
}

size_t malloc_usable_size(void *p)
{
	extern size_t __malloc_usable_size(void *) __attribute__((weak));

	if (p && ours(p))
		return *(size_t *)((char *)p - 16);
	return p && __malloc_usable_size ? __malloc_usable_size(p) : 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Holds the lock 10 ms at a time, lets it go for a moment. */
static void *hog(void *arg)
{
	(void)arg;
	for (;;) {
		uint64_t t0;

		lock();
		t0 = now_ms();
		while (now_ms() - t0 < 10)
			;
		unlock();
		usleep(200);
	}
	return NULL;
}

/* ---- decoy: a library mapped as a loader would, below libc ---- */
static int map_below_libc(const char *path)
{
	unsigned long long libc = 0, lo, hi;
	char line[4200], p[4096];
	Elf64_Ehdr eh;
	Elf64_Phdr ph[16];
	uint64_t span = 0;
	char *base;
	FILE *f = fopen("/proc/self/maps", "r");
	int fd;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx %*s %*s %*s %*s %4095s", &lo, &hi, p) == 3 &&
		    strstr(p, "/libc.so.6")) {
			libc = lo;
			break;
		}
	if (f)
		fclose(f);
	fd = open(path, O_RDONLY);
	if (!libc || fd < 0 || pread(fd, &eh, sizeof(eh), 0) != sizeof(eh) || eh.e_phnum > 16 ||
	    pread(fd, ph, eh.e_phnum * sizeof(ph[0]), (off_t)eh.e_phoff) !=
		    (ssize_t)(eh.e_phnum * sizeof(ph[0])))
		return -1;
	for (int i = 0; i < eh.e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr + ph[i].p_memsz > span)
			span = ph[i].p_vaddr + ph[i].p_memsz;
	span = (span + 4095) & ~4095ULL;
	base = mmap((void *)((libc - span - (16 << 20)) & ~4095ULL), span, PROT_NONE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (base == MAP_FAILED)
		return -1;
	for (int i = 0; i < eh.e_phnum; i++) {
		uint64_t pg = ph[i].p_vaddr & 4095;
		int prot = (ph[i].p_flags & PF_R ? PROT_READ : 0) |
			   (ph[i].p_flags & PF_W ? PROT_WRITE : 0) |
			   (ph[i].p_flags & PF_X ? PROT_EXEC : 0);

		if (ph[i].p_type == PT_LOAD &&
		    mmap(base + ph[i].p_vaddr - pg, ph[i].p_filesz + pg, prot, MAP_PRIVATE | MAP_FIXED,
			 fd, (off_t)(ph[i].p_offset - pg)) == MAP_FAILED)
			return -1;
	}
	close(fd);
	return 0;
}

/* ---- swap ---- */
static char swap_x[4096], swap_y[4096];

static void *swapper(void *arg)
{
	(void)arg;
	for (;;)
		syscall(SYS_renameat2, AT_FDCWD, swap_x, AT_FDCWD, swap_y, 2 /* RENAME_EXCHANGE */);
	return NULL;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 2 ? argv[1] : "", *stop = argc > 2 ? argv[2] : "";
	unsigned long sum = 0, expect = 0;
	pthread_t th;

	if (!strcmp(mode, "control") && argc > 3) {
		void *h = dlopen(argv[3], RTLD_NOW | RTLD_LOCAL);
		void *(*fn)(const char *, int) = h ? (void *(*)(const char *, int))dlsym(h, "dlopen") :
						 NULL;

		if (!fn)
			return 2;
		fn("x", 0);
		return access("mark.decoy", F_OK) ? 1 : 0;
	}
	if (!strcmp(mode, "decoy") && argc > 3) {
		if (map_below_libc(argv[3])) {
			fprintf(stderr, "victim: cannot map %s\n", argv[3]);
			return 2;
		}
	} else if (!strcmp(mode, "swap") && argc > 3) {
		char lib[4200];

		snprintf(swap_x, sizeof(swap_x), "%s/x", argv[3]);
		snprintf(swap_y, sizeof(swap_y), "%s/y", argv[3]);
		snprintf(lib, sizeof(lib), "%s/libc.so.6", swap_x);
		if (map_below_libc(lib)) {
			fprintf(stderr, "victim: cannot map %s\n", lib);
			return 2;
		}
		pthread_create(&th, NULL, swapper, NULL);
	} else if (!strcmp(mode, "spin")) {
		arena = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS |
			     MAP_NORESERVE, -1, 0);
		if (arena == MAP_FAILED)
			return 2;
		arena_next = arena + 16;
		own_alloc = 1;
		pthread_create(&th, NULL, hog, NULL);
	} else if (strcmp(mode, "loop")) {
		fprintf(stderr, "usage: victim loop|decoy|swap|spin STOP [LIB|DIR]\n");
		return 2;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (unsigned long i = 0; access(stop, F_OK); i++) {
		unsigned char *p = malloc(100 + i % 900);

		p[0] = (unsigned char)i;
		sum += p[0];
		expect += (unsigned char)i;
		free(p);
		if (!(i % 64))
			usleep(1000);
	}
	return sum == expect ? 0 : 1;
}
