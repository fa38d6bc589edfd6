// SPDX-License-Identifier: GPL-2.0
/*
 * attach and detach where the ptrace machinery (inject.c, ptrace_stop.c,
 * remote_call.c: x86-64 registers, trampoline and signal frame) has not
 * been written for the architecture yet: both refuse, saying how to
 * profile such a program instead. Everything else of heapprofctl works.
 */
#include <errno.h>
#include <stdio.h>

#include "../inject.h"

int (*inject_cancelled)(void);

int hp_inject_attach(pid_t pid, const char *lib, const char *config, struct inject_times *tt,
		     char *err, size_t errlen)
{
	(void)lib; (void)config; (void)tt;
	snprintf(err, errlen, "attach to %d: not available on this architecture yet "
		 "(start the program under `heapprofctl record`, or with the client preloaded)",
		 (int)pid);
	return -EOPNOTSUPP;
}

int hp_inject_detach(pid_t pid, struct inject_times *tt, char *err, size_t errlen)
{
	(void)tt;
	snprintf(err, errlen, "detach from %d: not available on this architecture yet", (int)pid);
	return -EOPNOTSUPP;
}
