// SPDX-License-Identifier: GPL-2.0
/*
 * An audit library (LD_AUDIT) of the user's: it runs inside the dlopen
 * that root's attach makes in the process, when the client is loaded.
 * $AUDIT_ACTION says what it does there:
 *   exec    execs $AUDIT_EXEC (a set-user-ID program) with $AUDIT_ARGS
 *           (one argument): under a root tracer, the new program would
 *           keep root's privilege and take the tracer's register writes
 *   sleep   sleeps $AUDIT_MS milliseconds (the call lasts that long)
 */
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

unsigned int la_version(unsigned int v)
{
	return v;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
	const char *act = getenv("AUDIT_ACTION");

	(void)lmid;
	(void)cookie;
	if (!act || !map->l_name || !strstr(map->l_name, "libheapprofd_client.so"))
		return 0;
	if (!strcmp(act, "exec") && getenv("AUDIT_EXEC"))
		execl(getenv("AUDIT_EXEC"), getenv("AUDIT_EXEC"), getenv("AUDIT_ARGS"), (char *)NULL);
	if (!strcmp(act, "sleep"))
		usleep((useconds_t)atoi(getenv("AUDIT_MS") ? getenv("AUDIT_MS") : "300") * 1000);
	return 0;
}
