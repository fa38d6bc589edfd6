// SPDX-License-Identifier: GPL-2.0
/*
 * Start-up and shut-down: read the environment, install the fork handlers,
 * decide what exec'd children inherit, open the session; publish the exact
 * counters at exit and give a late daemon its chance (attach_wait.c).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "pyframes.h"
#include "stack.h"

/*
 * Without follow-forks (and outside whole-system mode, HEAPPROFD_NAME) an
 * exec'd program should run without the client: take this library out of
 * LD_PRELOAD. Entries are separated by ':' or spaces.
 */
static void strip_preload(void)
{
	const char *pre = getenv("LD_PRELOAD"), *self, *base, *p;
	char out[4096];
	size_t o = 0, blen;
	Dl_info di;

	if (!pre || !dladdr((void *)strip_preload, &di) || !di.dli_fname)
		return;
	self = di.dli_fname;
	base = strrchr(self, '/');
	base = base ? base + 1 : self;
	blen = strlen(base);
	if (strlen(pre) >= sizeof(out))
		return;
	p = pre;
	while (*p) {
		const char *e = p + strcspn(p, ": ");
		size_t n = (size_t)(e - p);
		const char *b = p;

		for (const char *q = p; q < e; q++)
			if (*q == '/')
				b = q + 1;
		if (n && !((size_t)(e - b) == blen && !memcmp(b, base, blen))) {
			if (o)
				out[o++] = ':';
			memcpy(out + o, p, n);
			o += n;
		}
		p = *e ? e + 1 : e;
	}
	out[o] = 0;
	if (o)
		setenv("LD_PRELOAD", out, 1);
	else
		unsetenv("LD_PRELOAD");
}

/*
 * The pid `heapprofctl record` started (HEAPPROFD_ROOT_PID), or 0. That
 * process keeps profiling through exec (a wrapper script or shim that
 * execs the real program is the common case); without follow-forks the
 * programs its children run are not profiled.
 */
static pid_t root_pid(void)
{
	const char *v = getenv("HEAPPROFD_ROOT_PID");
	char *end;
	long n;

	if (!v || !*v)
		return 0;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || *end || n <= 0 || n > INT_MAX)
		return 0;
	return (pid_t)n;
}

__attribute__((constructor)) static void hp_init(void)
{
	pid_t root;

	/* Loaded into a running process by heapprofctl attach: wait for
	 * heapprofd_client_attach (injected.c); the environment is not ours. */
	if (hp_detect_injected()) {
		hp_resolve();
		hp_stack_copy_init();
		hp_hooks_init();
		hp_py_init();
		hp_fork_install();
		return;
	}
	hp_resolve();
	hp_stack_copy_init();
	hp_hooks_init();
	hp_config_from_env();
	hp_py_init();
	hp_fork_install();
	hp_exec_init();
	if (!(hp_cfg.flags & HEAPPROFD_CFG_FOLLOW_FORKS) && !hp_cfg.name[0]) {
		root = root_pid();
		if (root && root != getpid()) {
			/* A descendant of the recorded process: pass through. */
			strip_preload();
			return;
		}
		if (!root)
			strip_preload();	/* plain LD_PRELOAD: this image only */
	}
	if (!hp_name_matches())
		return;
	hp_session_start();
}

/* A preloaded library is initialised first and finalised last: this runs
 * after the program's atexit handlers and the other destructors. */
__attribute__((destructor)) static void hp_fini(void)
{
	if (hp_injected)
		return;	/* never unloaded while a session runs (detach ends it) */
	hp_counters_flush_all();
	hp_exit_wait();
}
