// SPDX-License-Identifier: GPL-2.0
/*
 * The client loaded into a running process by `heapprofctl attach`
 * (heapprofctl/inject.c): dlopen'ed with RTLD_LOCAL, then
 * heapprofd_client_attach() and, at the end, heapprofd_client_detach() are
 * called in the process by the same remote-call mechanism, while every
 * other thread of it is stopped.
 *
 * Loaded that way, the constructor only resolves the real allocator (the
 * one the program's objects are bound to: RTLD_DEFAULT) and waits: the
 * process's environment says nothing to us. heapprofd_client_attach opens a
 * dormant session on the transport heapprofctl names (the daemon enables
 * it on heapprofctl's attach request) and points the GOT slots at the hooks
 * (got.c). Sampled blocks are not marked in this mode (mark.h puts a header
 * in front of a marked block), so that after detach any block may go
 * straight to the real free: the sampled ones are found through the free
 * set instead.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "client.h"

int hp_injected;
/* Read by heapprofctl in the process's memory: 1 once loaded by attach,
 * 2 while its hooks are in place. */
HP_EXPORT volatile int heapprofd_client_injected;
/* CLOCK_REALTIME nanoseconds of the last attach (the books' start). */
HP_EXPORT volatile unsigned long long heapprofd_client_attach_time_ns;

/*
 * Is this library outside the global scope, i.e. not the interposer? Only
 * this library defines heapprofd_client_attach, so a lookup in the main
 * program's scope (its handle: the program, its dependencies, preloaded
 * and RTLD_GLOBAL objects) finds it exactly when we are there. (RTLD_DEFAULT
 * would search our own dlopen group too; and asking for malloc would not
 * do: a non-PIE program that takes malloc's address has a canonical PLT
 * entry that the lookup returns.)
 */
int hp_detect_injected(void)
{
	void *main_scope = dlopen(NULL, RTLD_LAZY);

	hp_injected = main_scope && !dlsym(main_scope, "heapprofd_client_attach");
	if (main_scope)
		dlclose(main_scope);
	if (hp_injected) {
		dlerror();	/* the failed lookup is no error of the program's */
		heapprofd_client_injected = 1;
	}
	return hp_injected;
}

/* "key=value key=value": the few settings heapprofctl passes. */
static int apply_config(const char *cfg)
{
	const char *p = cfg;
	char key[32], val[sizeof(hp_cfg.socket_path)];

	hp_cfg.dormant = 1;	/* the daemon enables us on its attach */
	hp_cfg.transport = HP_TR_AUTO;
	hp_cfg.quiet = 1;	/* the program's stderr is not ours */
	while (p && *p) {
		size_t k, v;
		uint64_t n;

		p += strspn(p, " ");
		k = strcspn(p, "= ");
		if (!k || p[k] != '=' || k >= sizeof(key))
			return -EINVAL;
		memcpy(key, p, k);
		key[k] = 0;
		p += k + 1;
		v = strcspn(p, " ");
		if (v >= sizeof(val))
			return -EINVAL;
		memcpy(val, p, v);
		val[v] = 0;
		p += v;
		if (!strcmp(key, "transport")) {
			hp_cfg.transport = !strcmp(val, "kernel") ? HP_TR_KERNEL :
					   !strcmp(val, "socket") ? HP_TR_SOCKET : HP_TR_AUTO;
		} else if (!strcmp(key, "socket")) {
			memcpy(hp_cfg.socket_path, val, v + 1);
		} else if (!strcmp(key, "interval") && !hp_parse_u64(val, &n, 0) && n) {
			hp_cfg.interval = n;
		} else if (!strcmp(key, "debug")) {
			hp_cfg.debug = val[0] == '1';
			hp_cfg.quiet = !hp_cfg.debug;
		}
	}
	return 0;
}

/*
 * Called by heapprofctl inside the process. Returns the number of GOT
 * slots routed through the hooks (>= 0), or -errno: -EALREADY when a
 * session is live, -ENOTCONN when no transport took us.
 */
HP_EXPORT int heapprofd_client_attach(const char *config)
{
	struct timespec ts;
	int rc;

	if (!hp_injected)
		return -EPERM;	/* preloaded: heapprofctl attaches the usual way */
	if (hp_sess.live && !hp_sess.stopped)
		return -EALREADY;
	if (hp_sess.live)
		hp_session_release(true);
	if ((rc = apply_config(config)) != 0)
		return rc;
	hp_sess.stopped = 0;
	hp_session_start();
	if (!hp_sess.live)
		return -ENOTCONN;
	clock_gettime(CLOCK_REALTIME, &ts);
	heapprofd_client_attach_time_ns = (unsigned long long)ts.tv_sec * 1000000000ULL +
					  (unsigned long long)ts.tv_nsec;
	rc = hp_got_patch();
	if (rc < 0) {
		hp_got_unpatch();
		hp_session_stop("the GOT could not be patched");
		hp_session_release(true);
		return rc;
	}
	heapprofd_client_injected = 2;
	hp_debug("attached: %d GOT slots routed through the hooks", rc);
	return rc;
}

/*
 * The first half of a detach: the GOT slots get their old values, so that
 * no call enters a hook from now on. heapprofctl calls it with the
 * program's threads stopped anywhere but in the allocator and the loader,
 * in a hook too (in a program whose threads allocate all the time, some
 * thread always is); once the threads have run a moment they are out of
 * our code for good, and the second half can be called. -EBUSY while a
 * thread is stopped patching an object it dlopen'ed (try again).
 */
HP_EXPORT int heapprofd_client_unhook(void)
{
	if (!hp_injected)
		return -EPERM;
	return hp_got_unpatch_try();
}

/*
 * Undo heapprofd_client_attach: the GOT slots get their old values (if
 * heapprofd_client_unhook has not put them back already), the session
 * ends and its fds and ring are given back; the library stays, inert, for
 * the next attach. -EBUSY while a thread is inside a hook's slow path
 * (heapprofctl lets the process run a little and tries again).
 */
HP_EXPORT int heapprofd_client_detach(void)
{
	if (!hp_injected)
		return -EPERM;
	if (hp_threads_busy())
		return -EBUSY;
	hp_got_unpatch();
	if (hp_sess.live) {
		hp_counters_flush_all();
		hp_session_stop("detached");
		hp_session_release(true);
	}
	heapprofd_client_injected = 1;
	return 0;
}
