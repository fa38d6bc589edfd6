// SPDX-License-Identifier: GPL-2.0
/*
 * The normal program of tests/hostile/run: what a well-behaved user runs
 * with the client preloaded while the attacks go on. Its allocations come
 * from known functions, so its profile shows whether it was served.
 *
 *   normal quick             print "main reached" and exit (start-up timing)
 *   normal loop STOPFILE     print "ready PID", then allocate in
 *                            normal_site_loop until STOPFILE exists (at most
 *                            900 s), print "done"
 *
 * Every test that runs the loop creates STOPFILE when it is done with it;
 * the bound only ends a loop a killed test left behind. It must outlast the
 * slowest test: 120 s did not in a loaded 6.12 guest, where mem-budget's
 * flood took 62 s to reach the budget (its wait: 300 s) and the loop had
 * ended by then, failing "the normal program as still profiling".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *volatile keep[256];

__attribute__((noinline)) void *normal_site_loop(size_t n)
{
	void *p = malloc(n);

	if (p)
		memset(p, 1, 64);
	return p;
}

int main(int argc, char **argv)
{
	struct timespec ts = { 0, 2000000 }, t0, t;
	unsigned i = 0;

	if (argc >= 2 && !strcmp(argv[1], "quick")) {
		free(normal_site_loop(4096));
		puts("main reached");
		return 0;
	}
	if (argc < 3 || strcmp(argv[1], "loop")) {
		fprintf(stderr, "usage: normal quick | normal loop STOPFILE\n");
		return 2;
	}
	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		unsigned k = i++ % 256;

		free(keep[k]);
		keep[k] = normal_site_loop(64 << 10);
		if (i % 16 == 0) {
			if (!access(argv[2], F_OK))
				break;
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec > 900)
				break;
			nanosleep(&ts, NULL);
		}
	}
	/* keep[] stays allocated: the in-use profile at exit shows the site */
	puts("done");
	return 0;
}
