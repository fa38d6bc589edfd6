// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofctl install-preload / uninstall-preload (the file work is
 * preload.c's).
 */
#include "heapprofctl.h"
/* ------------------------------------------------------------------ */
/* install-preload / uninstall-preload                                */
/* ------------------------------------------------------------------ */

static int copy_file(const char *from, const char *to)
{
	char tmp[PATH_MAX], buf[65536];
	int in, out;
	ssize_t n;

	snprintf(tmp, sizeof(tmp), "%s.new", to);
	in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (out < 0) {
		close(in);
		return -errno;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n) {
			n = -1;
			break;
		}
	close(in);
	if (n < 0 || fsync(out) < 0) {
		close(out);
		unlink(tmp);
		return -EIO;
	}
	close(out);
	/* rename: programs that mapped the old file keep it intact. */
	return rename(tmp, to) < 0 ? -errno : 0;
}

int do_install_preload(int install)
{
	const char *file = getenv("HEAPPROFD_LD_SO_PRELOAD") ? getenv("HEAPPROFD_LD_SO_PRELOAD") : HP_PRELOAD_FILE;
	const char *dest = getenv("HEAPPROFD_PRELOAD_LIB") ? getenv("HEAPPROFD_PRELOAD_LIB") : HP_PRELOAD_LIB;
	char err[512] = "", lib[PATH_MAX], cmd[PATH_MAX * 2];
	int rc;

	if (!install) {
		rc = hp_preload_remove(file, dest, err, sizeof(err));
		if (rc < 0)
			die("uninstall-preload: %s", err);
		printf("%s: %s\n", file, rc == 1 ? "had no heapprofd entry (nothing to do)" :
		       "heapprofd entry removed; new processes start without the client");
		return 0;
	}
	client_lib(lib, sizeof(lib));
	if (strcmp(lib, dest)) {
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s", dest);
		mkdirs_for(dest);
		rc = copy_file(lib, dest);
		if (rc < 0)
			die("install-preload: cannot install %s as %s: %s%s", lib, dest, strerror(-rc),
			    rc == -EACCES ? " (run as root)" : "");
	}
	/* A broken library in ld.so.preload breaks every program: try it first. */
	snprintf(cmd, sizeof(cmd), "env LD_PRELOAD='%s' HEAPPROFD_DORMANT=1 /bin/true", dest);
	if (system(cmd) != 0)
		die("install-preload: %s does not load cleanly into /bin/true; not installing it", dest);
	rc = hp_preload_add(file, dest, err, sizeof(err));
	if (rc < 0)
		die("install-preload: %s", err);
	printf("%s: %s\n", file, rc == 1 ? "already lists the dormant client (nothing to do)" :
	       "dormant client added; processes started from now on can be profiled");
	printf("  profile by name: heapprofctl record --name NAME; everything: heapprofctl record --all\n");
	return 0;
}
