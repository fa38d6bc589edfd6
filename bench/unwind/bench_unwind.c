// SPDX-License-Identifier: GPL-2.0
/*
 * Pipeline benchmark (make -C daemon -f pipeline.mk pipeline-bench):
 *  1. unwind cost of a 30-frame stack (-O2 -fomit-frame-pointer code, so
 *     DWARF CFI is needed) with warm caches: median/p90 microseconds per
 *     sample over many unwinds of the same record, plus the first (cold) one;
 *  2. end-to-end records per second through hp_proc_feed -> workers -> books;
 *  3. daemon memory per profiled process (RssAnon delta) after 20000 samples
 *     from 200 distinct stacks with 10000 allocations live.
 * Figures, not assertions. "bench_unwind unwind" measures 1 only (2 and 3
 * take long under an emulator).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "capture.h"

static uint8_t recbuf[128 << 10];

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* Anonymous resident memory of this process, KiB (all malloc arenas). */
static long rss_anon_kib(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "RssAnon:", 8))
			v = strtol(line + 8, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	enum { N = 20000 };
	static double t[N];
	static struct hp_uframe fr[HP_DEFAULT_MAX_FRAMES];
	struct hp_elfcache cache;
	struct hp_unwinder *u;
	struct hp_parsed ps;
	char why[200];
	double cold, t0;
	int i, nf = 0;
	size_t len;

	if (argc > 2 || (argc == 2 && strcmp(argv[1], "unwind"))) {
		fprintf(stderr, "usage: %s [unwind]  (unwind: the unwind cost only)\n", argv[0]);
		return 2;
	}
	hp_test_stack_init();
	len = o2_recurse(30, recbuf, sizeof(recbuf));
	if (hp_parse_record(recbuf, len, &ps, why, sizeof(why))) {
		fprintf(stderr, "bad record: %s\n", why);
		return 1;
	}
	hp_elfcache_init(&cache);
	/* Unwind on this thread as a pipeline worker does: all signals blocked,
	 * libunwind's sigprocmask calls without system calls (sigmask.c).
	 * HP_BENCH_SYSCALL_MASK=1 measures the old way. */
	if (!getenv("HP_BENCH_SYSCALL_MASK"))
		hp_sigmask_worker_init();
	u = hp_unwinder_new(getpid(), open("/proc/self/maps", O_RDONLY | O_CLOEXEC),
			    open("/proc/self/mem", O_RDONLY | O_CLOEXEC), -1, &cache);
	for (i = 0; i < N + 1; i++) {
		t0 = now_us();
		nf = hp_unwind(u, ps.alloc, ps.stack, ps.stack_len, fr, HP_DEFAULT_MAX_FRAMES, NULL);
		if (i)
			t[i - 1] = now_us() - t0;
		else
			cold = now_us() - t0;
		hp_uframes_put(fr, nf);
	}
	qsort(t, N, sizeof(t[0]), cmp);
	printf("unwind: %d frames (30 of them o2_recurse, -O2 -fomit-frame-pointer), stack copy %u bytes\n",
	       nf, ps.stack_len);
	printf("unwind: cold first sample %.1f us; warm median %.2f us, p90 %.2f us, p99 %.2f us (%d samples)\n",
	       cold, t[N / 2], t[N * 9 / 10], t[N * 99 / 100], N);
	hp_unwinder_free(u);
	if (argc == 2)
		return 0;

	/* End to end (one process, then eight), and memory per process. */
	for (int PROCS = 1; PROCS <= 8; PROCS += 7) {
		enum { SAMPLES = 20000 };
		struct hp_pipeline_opts o = { .unwind_workers = 2 };
		struct hp_pipeline *p;
		struct hp_proc *pr[8];
		struct heapprofd_rec_alloc *a = (void *)recbuf;
		long m0, m1;
		int j;

		m0 = rss_anon_kib();
		p = hp_pipeline_new(&o);
		for (j = 0; j < PROCS; j++) {
			struct hp_proc_info pi = { .pid = getpid() + j, .comm = "bench",
						   .maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC),
						   .mem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC),
						   .exe_fd = -1 };

			pr[j] = hp_proc_new(p, &pi);
		}
		/* 200 distinct stacks: depths 20..39 times 10 leaf addresses */
		t0 = now_us();
		for (i = 0; i < SAMPLES; i++) {
			len = o2_recurse(20 + i % 20, recbuf, sizeof(recbuf));
			a->addr = 0x100000 + (uint64_t)i * 64;
			a->seq = 2 * i;
			a->regs[HEAPPROFD_REG_PC] = heapprofd_rec_pc(a) + (i / 20) % 10;
			a->est_size = 4096;
			for (j = 0; j < PROCS; j++)
				hp_proc_feed(pr[j], recbuf, len, why, sizeof(why));
			if (i % 2) {	/* free every other one: 10000 live */
				struct heapprofd_rec_free f = {
					.hdr = { .len = sizeof(f), .type = HEAPPROFD_REC_FREE },
					.seq = 2 * i + 1, .addr = a->addr,
				};
				for (j = 0; j < PROCS; j++)
					hp_proc_feed(pr[j], &f, sizeof(f), why, sizeof(why));
			}
		}
		for (j = 0; j < PROCS; j++)
			hp_proc_sync(pr[j]);
		t0 = now_us() - t0;
		m1 = rss_anon_kib();
		printf("pipeline, %d process%s: %d alloc records (~%zu bytes each, 20-39 frames) + %d frees through 2 workers + books: %.0f records/s (%.1f us per alloc record, wall)\n",
		       PROCS, PROCS > 1 ? "es" : "", SAMPLES * PROCS, len, SAMPLES * PROCS / 2,
		       1.5 * SAMPLES * PROCS / (t0 / 1e6), t0 / (SAMPLES * PROCS));
		{
			struct hp_proc_stats st;
			double acc = 0;

			for (j = 0; j < PROCS; j++) {
				hp_proc_get_stats(pr[j], &st);
				acc += st.mem_bytes;
			}
			printf("memory per profiled process (200 stacks, %d live allocations): books + maps %.0f KiB (accounted); RssAnon growth %.0f KiB (includes the record queue's high-water mark, <= 8 MiB)\n",
			       SAMPLES / 2, acc / PROCS / 1024, (double)(m1 - m0) / PROCS);
		}
		for (j = 0; j < PROCS; j++)
			hp_proc_end(pr[j]);
		hp_pipeline_free(p);
	}
	return 0;
}
