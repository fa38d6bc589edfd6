// SPDX-License-Identifier: GPL-2.0
/*
 * attach and detach where the ptrace machinery (inject.c, ptrace_stop.c,
 * remote_call.c: x86-64 registers, trampoline and signal frame) has not
 * been written for the architecture yet. A process with the client
 * preloaded (dormant or not) is attached and detached the usual way,
 * through the daemon; loading the client into one without it is refused,
 * saying how to profile such a program instead.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../inject.h"

int (*inject_cancelled)(void);

/* 1: the process maps the client library; 0: it does not; -errno. */
static int has_client(pid_t pid)
{
	static const char lib[] = "/libheapprofd_client.so";
	char path[64], line[4096];
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (!found && fgets(line, sizeof(line), f)) {
		size_t n = strcspn(line, "\n");

		line[n] = 0;
		found = n >= sizeof(lib) - 1 && !strcmp(line + n - (sizeof(lib) - 1), lib);
	}
	fclose(f);
	return found;
}

int hp_inject_attach(pid_t pid, const char *lib, const char *config, struct inject_times *tt,
		     char *err, size_t errlen)
{
	int rc = has_client(pid);

	(void)lib; (void)config;
	memset(tt, 0, sizeof(*tt));
	if (rc > 0)
		return 1;	/* preloaded: the usual attach */
	if (rc < 0) {
		snprintf(err, errlen, "cannot read /proc/%d/maps: %s", (int)pid, strerror(-rc));
		return rc;
	}
	snprintf(err, errlen, "pid %d has no client, and loading one into a running process "
		 "is not available on this architecture yet (start the program under "
		 "`heapprofctl record`, or with the client preloaded)", (int)pid);
	return -EOPNOTSUPP;
}

/* Nothing here was loaded by attach: the usual detach. */
int hp_inject_detach(pid_t pid, struct inject_times *tt, char *err, size_t errlen)
{
	(void)pid; (void)err; (void)errlen;
	memset(tt, 0, sizeof(*tt));
	return 1;
}
