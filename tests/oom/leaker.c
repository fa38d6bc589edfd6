// SPDX-License-Identifier: GPL-2.0
/*
 * For tests/oom/run: holds 1 MiB from other_site, then leaks 256 KiB
 * blocks from leak_site, each written (so it is charged to the cgroup),
 * until the OOM killer ends it.
 *
 *   oom_leaker [PAUSE_BYTES WAIT_PATH]
 *
 * With both: once PAUSE_BYTES are leaked it waits (up to 120 s) for
 * WAIT_PATH to exist before leaking on. The daemon looks at the cgroup's
 * usage every 100 ms or so, and the leak climbs from half the limit to
 * the limit in less than that: the test of --dump-on-pressure waits for
 * the pressure dump this way instead of racing the daemon.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((noinline)) static void *other_site(size_t n)
{
	void *p = malloc(n);

	if (p)
		memset(p, 1, n);
	return p;
}

__attribute__((noinline)) static void *leak_site(size_t n)
{
	void *p = malloc(n);

	if (p)
		memset(p, 2, n);
	return p;
}

int main(int argc, char **argv)
{
	volatile void *keep = other_site(1 << 20);
	unsigned long long pause_at = argc > 2 ? strtoull(argv[1], NULL, 0) : 0;
	unsigned long long leaked = 0;
	unsigned long n = 0;

	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (;;) {
		if (!leak_site(256 << 10))
			return 1;
		leaked += 256 << 10;
		if (pause_at && leaked >= pause_at) {
			int waited = 0;

			while (access(argv[2], F_OK) != 0 && waited++ < 12000)
				usleep(10000);
			printf("paused at %llu bytes for %d ms: %s %s\n", leaked,
			       waited * 10, argv[2],
			       access(argv[2], F_OK) == 0 ? "appeared" : "did not appear");
			fflush(stdout);
			pause_at = 0;
		}
		/* Slow enough that the daemon keeps up, fast enough to end soon. */
		if (++n % 16 == 0)
			usleep(2000);
	}
	return keep ? 0 : 1;
}
