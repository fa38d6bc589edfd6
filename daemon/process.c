// SPDX-License-Identifier: GPL-2.0
/*
 * The process behind a session, held by something a pid number cannot be
 * borrowed for: the pidfd it sent with its hello, its /proc directory
 * opened while that pidfd said it was alive, and what it ran then (its
 * executable), so that a session whose process exec'd another program (a
 * setuid one, with the session's socket kept open) is not taken for that
 * program. The ids are kept for the logs only: a process may drop its
 * privileges (a server that starts as root) and is still the same program.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hpd.h"

/* Is the pidfd's process still running? (POLLIN: it has exited.) */
static int pidfd_alive(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	return poll(&p, 1, 0) == 0;
}

int hpd_pidfd_check(int pidfd, pid_t pid)
{
	char path[64], line[128];
	int found = 0;
	FILE *f;

	/* Only a pidfd's fdinfo has a "Pid:" line. */
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
	f = fopen(path, "re");
	if (!f)
		return -EBADF;
	while (fgets(line, sizeof(line), f)) {
		int p;

		if (sscanf(line, "Pid: %d", &p) == 1) {
			found = p == pid ? 1 : -1;
			break;
		}
	}
	fclose(f);
	if (found <= 0)
		return -EBADF;
	return pidfd_alive(pidfd) ? 0 : -ESRCH;
}

int hpd_proc_dir_open(pid_t pid, int pidfd)
{
	char path[32];
	int fd;

	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/*
	 * Alive after the open: then the pid was never freed in between,
	 * and the directory is that process's.
	 */
	if (!pidfd_alive(pidfd)) {
		close(fd);
		return -ESRCH;
	}
	return fd;
}

int hpd_ident_read(int proc_fd, struct hpd_ident *id)
{
	char line[256];
	struct stat st;
	int fd, n = 0;
	FILE *f;

	memset(id, 0, sizeof(*id));
	fd = openat(proc_fd, "status", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	f = fdopen(fd, "re");
	if (!f) {
		close(fd);
		return -ENOMEM;
	}
	while (fgets(line, sizeof(line), f)) {
		unsigned a, b, c, d;

		if (sscanf(line, "Uid: %u %u %u %u", &a, &b, &c, &d) == 4) {
			id->uid[0] = a, id->uid[1] = b, id->uid[2] = c, id->uid[3] = d;
			n++;
		} else if (sscanf(line, "Gid: %u %u %u %u", &a, &b, &c, &d) == 4) {
			id->gid[0] = a, id->gid[1] = b, id->gid[2] = c, id->gid[3] = d;
			n++;
		}
	}
	fclose(f);
	if (n != 2)
		return -EPROTO;
	if (!fstatat(proc_fd, "exe", &st, 0)) {
		id->exe_dev = st.st_dev;
		id->exe_ino = st.st_ino;
	}
	id->ok = 1;
	return 0;
}

/* Gaining privileges takes an exec of another file: compare the executable. */
int hpd_ident_same(const struct hpd_ident *a, const struct hpd_ident *b)
{
	return a->ok && b->ok && a->exe_dev == b->exe_dev && a->exe_ino == b->exe_ino;
}

int hpd_session_current(struct hpd_session *s)
{
	struct hpd_ident now;

	if (s->pidfd < 0)
		return 1;	/* nothing to hold it by (module and scan sessions) */
	if (!pidfd_alive(s->pidfd))
		return 0;
	if (s->proc_fd < 0 || !s->ident.ok || !s->ident.exe_ino)
		return 1;	/* its executable could not be seen at the hello */
	return !hpd_ident_read(s->proc_fd, &now) && hpd_ident_same(&now, &s->ident);
}
