// SPDX-License-Identifier: GPL-2.0
/*
 * For tests/oom/run: holds 1 MiB from other_site, then leaks 256 KiB
 * blocks from leak_site, each written (so it is charged to the cgroup),
 * until the OOM killer ends it.
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

int main(void)
{
	volatile void *keep = other_site(1 << 20);
	unsigned long n = 0;

	printf("ready %d\n", (int)getpid());
	fflush(stdout);
	for (;;) {
		if (!leak_site(256 << 10))
			return 1;
		/* Slow enough that the daemon keeps up, fast enough to end soon. */
		if (++n % 16 == 0)
			usleep(2000);
	}
	return keep ? 0 : 1;
}
