// SPDX-License-Identifier: GPL-2.0
/*
 * The daemon's file descriptors, shared fairly between users.
 *
 * A session holds a dozen or more descriptors for its whole life (ring,
 * wake, pidfd, exe, maps, mem, the /proc directory, the runtime map's
 * directories, the cgroup watch), and writing a profile needs a few more
 * for a moment (the output files, the ELF files it names). If one user's
 * sessions could take them all, every other process would be accepted and
 * then fail to write its profile. So, root excepted:
 *
 *   - one uid holds at most half of the descriptors: its sessions are
 *     capped at the limit over twice HPD_FDS_PER_SESSION, and never more
 *     than HPD_SESSIONS_PER_UID;
 *   - a new session is refused while fewer than a quarter of them are free,
 *     the room kept for profiles being written, control connections and
 *     root's sessions.
 *
 * Root's sessions are refused only when the daemon is nearly out.
 */
#include <dirent.h>
#include <errno.h>
#include <sys/resource.h>

#include "hpd.h"

#define HPD_FDS_ROOT_MIN	16	/* root's sessions: at least this many free */

static unsigned long fd_limit = 1024;

void hpd_fd_budget_init(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY)
		fd_limit = rl.rlim_cur;
	else
		fd_limit = 1UL << 20;
}

/* Descriptors open now (/proc/self/fd, less the one reading it). */
static unsigned long fds_open(void)
{
	unsigned long n = 0;
	struct dirent *d;
	DIR *dir = opendir("/proc/self/fd");

	if (!dir)
		return fd_limit;	/* cannot tell: out of them, likely */
	while ((d = readdir(dir)))
		n += d->d_name[0] != '.';
	closedir(dir);
	return n ? n - 1 : 0;
}

unsigned hpd_fd_sessions_cap(void)
{
	unsigned long cap = fd_limit / (2 * HPD_FDS_PER_SESSION);

	return cap < HPD_SESSIONS_PER_UID ? (unsigned)cap : HPD_SESSIONS_PER_UID;
}

unsigned hpd_sessions_of_uid(uid_t uid)
{
	unsigned n = 0;

	for (struct hpd_session *s = hpd_sessions; s; s = s->next)
		n += !s->ending && s->uid == uid;
	return n;
}

int hpd_fd_admit(uid_t uid, pid_t pid)
{
	unsigned long open = fds_open(), free = open < fd_limit ? fd_limit - open : 0;
	unsigned cap = hpd_fd_sessions_cap();

	if (uid == 0) {
		if (free >= HPD_FDS_ROOT_MIN)
			return 0;
		hpd_log(HPD_WARN, "pid %d: only %lu of %lu file descriptors free: refused",
			(int)pid, free, fd_limit);
		return -EMFILE;
	}
	if (hpd_sessions_of_uid(uid) >= cap) {
		hpd_log(HPD_WARN, "uid %u pid %d: %u sessions of that user already (its share of %lu file descriptors): refused",
			(unsigned)uid, (int)pid, cap, fd_limit);
		return -EUSERS;
	}
	if (free < fd_limit / 4) {
		hpd_log(HPD_WARN, "uid %u pid %d: only %lu of %lu file descriptors free, the rest kept for profiles and root: refused",
			(unsigned)uid, (int)pid, free, fd_limit);
		return -EMFILE;
	}
	return 0;
}
