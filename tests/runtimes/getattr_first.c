// SPDX-License-Identifier: GPL-2.0
/*
 * Threads whose first allocation is made inside pthread_getattr_np on
 * themselves (as the JVM's threads do): glibc allocates there while it
 * holds the thread's lock, and a sampled allocation must not ask for the
 * thread's stack bounds through the same call (it would wait for that lock
 * for ever). Run under the client at interval 1 (every allocation sampled).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static void *thread(void *arg)
{
	pthread_attr_t a;

	(void)arg;
	if (pthread_getattr_np(pthread_self(), &a))
		return NULL;
	pthread_attr_destroy(&a);
	free(malloc(100));
	return arg;
}

int main(void)
{
	for (int i = 0; i < 8; i++) {
		pthread_t t;

		if (pthread_create(&t, NULL, thread, &t) || pthread_join(t, NULL))
			return 1;
	}
	puts("done");
	return 0;
}
