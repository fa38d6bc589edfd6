// SPDX-License-Identifier: GPL-2.0
/*
 * The client loaded as heapprofctl attach loads it (dlopen, RTLD_LOCAL)
 * into this test, which plays the process: heapprofd_client_attach routes
 * the GOT slots of the malloc family through the hooks, a library dlopen'ed
 * afterwards (and again after dlclose) is patched too, detach puts every
 * slot back, and a block allocated before the attach is freed after it
 * without harm. No daemon: the dormant session keeps its ring for one
 * that would come later. TAP lines. (Not under ASan: its allocator would
 * be the real one behind the hooks.)
 *   test_got LIBCLIENT LIBDLSITE
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../tests/tap.h"

#define ok(cond, ...) tap_ok(cond, "client got: " __VA_ARGS__)

/* The program's own GOT slot for malloc, through a GLOB_DAT reference. */
static void *(*volatile malloc_ref)(size_t) = malloc;

int main(int argc, char **argv)
{
	void *h, *before, *l, *real_malloc;
	int (*att)(const char *), (*det)(void), *injected;
	unsigned long (*dl_site)(int);
	void (*dl_free)(void);
	int rc, first;

	if (argc != 3)
		return 2;
	before = malloc(1000);
	real_malloc = dlsym(RTLD_DEFAULT, "malloc");
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	ok(h != NULL, "the client loads with dlopen RTLD_LOCAL (%s)", h ? "" : dlerror());
	if (!h)
		return 1;
	att = (int (*)(const char *))dlsym(h, "heapprofd_client_attach");
	det = (int (*)(void))dlsym(h, "heapprofd_client_detach");
	injected = (int *)dlsym(h, "heapprofd_client_injected");
	ok(att && det && injected && *injected == 1,
	   "it knows it was not preloaded (heapprofd_client_injected %d)", injected ? *injected : -1);
	rc = first = att("transport=socket socket=/nonexistent/sock");
	ok(rc >= 2 && *injected == 2, "attach routes the program's slots through the hooks (%d)", rc);
	ok(dlsym(RTLD_DEFAULT, "malloc") == real_malloc,
	   "the global scope still binds malloc to the real one (not interposed)");
	free(before);
	ok(1, "a block allocated before the attach is freed through the hooks");
	for (int i = 0; i < 3; i++) {
		l = dlopen(argv[2], RTLD_NOW);
		dl_site = l ? (unsigned long (*)(int))dlsym(l, "dl_site") : NULL;
		dl_free = l ? (void (*)(void))dlsym(l, "dl_free") : NULL;
		ok(dl_site && dl_free && dl_site(8) > 0,
		   "a library dlopen'ed after the attach (round %d, dlclose'd in between) works", i);
		if (dl_free)
			dl_free();
		if (l && i < 2)
			dlclose(l);
	}
	rc = att("transport=socket socket=/nonexistent/sock");
	ok(rc == -114 /* EALREADY */, "a second attach while attached says so (%d)", rc);
	before = malloc_ref(300);
	rc = det();
	ok(rc == 0 && *injected == 1, "detach puts the slots back (%d)", rc);
	free(before);
	ok(1, "a block allocated while attached is freed by the real free after detach");
	rc = att("transport=socket socket=/nonexistent/sock");
	ok(rc >= first + 2, "attach again: the library loaded meanwhile has its malloc and free "
	   "slots routed too (%d, %d before)", rc, first);
	ok(det() == 0, "and detach again");
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
