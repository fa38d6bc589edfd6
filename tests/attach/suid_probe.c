// SPDX-License-Identifier: GPL-2.0
/*
 * A set-user-ID-root program for tests/attach/hostile: the one a user's
 * process execs in the middle of root's attach. It writes "euid N" to
 * DIR/probe.out, waits (at most 60 s) for DIR/go, then writes "done" and
 * exits 0. Were root's heapprofctl to write the old image's registers
 * into it, it would not get there.
 */
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char out[4096], go[4096];
	FILE *f;

	if (argc < 2)
		return 2;
	snprintf(out, sizeof(out), "%s/probe.out", argv[1]);
	snprintf(go, sizeof(go), "%s/go", argv[1]);
	f = fopen(out, "w");
	if (!f)
		return 3;
	fprintf(f, "euid %d\n", (int)geteuid());
	fflush(f);
	for (int i = 0; i < 600 && access(go, F_OK); i++)
		usleep(100000);
	fprintf(f, "done\n");
	fclose(f);
	return 0;
}
