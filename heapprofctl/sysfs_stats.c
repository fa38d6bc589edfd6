// SPDX-License-Identifier: GPL-2.0
/* `heapprofctl stats`: /sys/kernel/heapprofd as a readable table. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "printable.h"
#include "sysfs_stats.h"

/*
 * One value: its first line, printable (printable.h). A session's comm is
 * what its process named itself (prctl, or the name of the file it ran).
 */
static int read_val(const char *dir, const char *name, char *out, size_t len)
{
	char path[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "re");
	if (!f) {
		snprintf(out, len, "-");
		return -1;
	}
	if (!fgets(out, (int)len, f))
		out[0] = 0;
	out[strcspn(out, "\n")] = 0;
	hp_printable(out, len, out, len, NULL);
	fclose(f);
	return 0;
}

static void human(const char *v, char *out, size_t len)
{
	char *end;
	double d = strtod(v, &end);

	if (end == v || *end) {
		snprintf(out, len, "%s", v);
		return;
	}
	if (d >= 1 << 30)
		snprintf(out, len, "%.1f GiB", d / (1 << 30));
	else if (d >= 1 << 20)
		snprintf(out, len, "%.1f MiB", d / (1 << 20));
	else if (d >= 1 << 10)
		snprintf(out, len, "%.1f KiB", d / (1 << 10));
	else
		snprintf(out, len, "%s B", v);
}

int hp_stats_main(const char *root)
{
	static const struct { const char *file, *label; int bytes; } g[] = {
		{ "version", "ABI version", 0 },
		{ "sessions_active", "sessions now", 0 },
		{ "sessions_total", "sessions ever", 0 },
		{ "attaches_total", "consumer attaches", 0 },
		{ "fds_passed_total", "fds passed", 0 },
		{ "ring_bytes", "ring memory now", 1 },
		{ "wakeups_total", "consumer wake-ups", 0 },
		{ "records_dropped_total", "records dropped", 0 },
		{ "bytes_dropped_total", "bytes dropped", 1 },
	};
	char v[128], h[64], sdir[1024];
	struct dirent **ents = NULL;
	size_t i;
	int n, k;

	if (read_val(root, "version", v, sizeof(v)) < 0) {
		fprintf(stderr,
			"heapprofctl: %s is missing: the heapprofd module is not loaded.\n"
			"  Load it (modprobe heapprofd, or insmod kmod/heapprofd.ko) to get kernel statistics;\n"
			"  without it profiling uses the user-space transport (see `heapprofctl sessions`).\n",
			root);
		return 1;
	}
	printf("heapprofd module (%s)\n", root);
	for (i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
		read_val(root, g[i].file, v, sizeof(v));
		if (g[i].bytes) {
			human(v, h, sizeof(h));
			printf("  %-20s %14s  (%s)\n", g[i].label, h, v);
		} else {
			printf("  %-20s %14s\n", g[i].label, v);
		}
	}
	snprintf(sdir, sizeof(sdir), "%s/sessions", root);
	n = scandir(sdir, &ents, NULL, alphasort);
	printf("\n  %-8s %-7s %-16s %10s %14s %14s %10s\n", "session", "pid", "comm", "ring",
	       "produced", "consumed", "dropped");
	for (k = 0; k < n; k++) {
		char d[1300], pid[32], comm[64], ring[64], prod[64], cons[64], drop[64];

		if (ents[k]->d_name[0] != '.') {
			snprintf(d, sizeof(d), "%s/%s", sdir, ents[k]->d_name);
			read_val(d, "pid", pid, sizeof(pid));
			read_val(d, "comm", comm, sizeof(comm));
			read_val(d, "ring_size", v, sizeof(v));
			human(v, ring, sizeof(ring));
			read_val(d, "produced_bytes", v, sizeof(v));
			human(v, prod, sizeof(prod));
			read_val(d, "consumed_bytes", v, sizeof(v));
			human(v, cons, sizeof(cons));
			read_val(d, "dropped_records", drop, sizeof(drop));
			printf("  %-8s %-7s %-16s %10s %14s %14s %10s\n", ents[k]->d_name, pid, comm,
			       ring, prod, cons, drop);
		}
		free(ents[k]);
	}
	if (n <= 2)
		printf("  (no live sessions)\n");
	free(ents);
	return 0;
}
