// SPDX-License-Identifier: GPL-2.0
/*
 * Attaching to a dormant client that has no daemon connection and no module
 * (socket_proto.h): its ring is a memfd named "heapprofd-ring" among its
 * fds. We take copies of the fds with pidfd_getfd (the kernel checks ptrace
 * access for us), open its maps and mem ourselves, and watch a pidfd for
 * its exit. Without a known wake channel we read the ring on the tick.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hpd.h"
#include "../proto/socket_proto.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

struct scan_conn {
	struct hpd_watch w;	/* pidfd: readable when the process exits */
	struct hpd_watch ww;	/* its eventfd, when it has exactly one */
	struct hpd_session *s;
};

static void exit_event(struct hpd_watch *w, uint32_t ev)
{
	struct scan_conn *c = (struct scan_conn *)w;

	(void)ev;
	if (c->s->ending)
		return;
	hpd_loop_del(w->fd);
	hpd_session_gone(c->s);
}

static void wake_event(struct hpd_watch *w, uint32_t ev)
{
	struct scan_conn *c = (struct scan_conn *)((char *)w - offsetof(struct scan_conn, ww));
	uint64_t v;

	(void)ev;
	if (read(w->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	hp_ring_awake(&c->s->ring);
	hpd_session_drain(c->s, 0);
}

int hpd_scan_attach(pid_t pid, struct hpd_rule *r, char *err, size_t errlen)
{
	char dir[64], path[400], link[300], comm[32] = "?";
	int memfd_no = -1, evfd_no = -1, nev = 0, pidfd, fd, rc;
	struct hpd_session *s;
	struct scan_conn *c;
	struct dirent *de;
	struct stat st;
	FILE *f;
	DIR *d;

	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)pid);
	d = opendir(dir);
	if (!d) {
		snprintf(err, errlen, "cannot read %s: %s%s", dir, strerror(errno),
			 errno == EACCES ? " (run as the process's user or as root)" : "");
		return -errno;
	}
	while ((de = readdir(d)) != NULL) {
		ssize_t n;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n < 0)
			continue;
		link[n] = 0;
		if (!strncmp(link, "/memfd:" HP_MEMFD_NAME, strlen("/memfd:" HP_MEMFD_NAME)))
			memfd_no = atoi(de->d_name);
		else if (!strcmp(link, "anon_inode:[eventfd]")) {
			evfd_no = atoi(de->d_name);
			nev++;
		}
	}
	closedir(d);
	if (memfd_no < 0) {
		snprintf(err, errlen, "pid %d has no heapprofd ring: start it with the client preloaded (HEAPPROFD_DORMANT=1) or install-preload",
			 (int)pid);
		return -ENOENT;
	}
	pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0) {
		snprintf(err, errlen, "pidfd_open(%d): %s", (int)pid, strerror(errno));
		return -errno;
	}
	/* Its user's share of the daemon's descriptors (fd_budget.c). */
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	rc = stat(path, &st) ? -errno : hpd_fd_admit(st.st_uid, pid);
	if (rc) {
		snprintf(err, errlen, "pid %d not taken on: %s", (int)pid,
			 rc == -EUSERS ? "its user has as many sessions as the daemon allows one user" :
			 strerror(-rc));
		close(pidfd);
		return rc;
	}
	fd = syscall(SYS_pidfd_getfd, pidfd, memfd_no, 0);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot take the ring of pid %d: %s%s", (int)pid, strerror(-rc),
			 rc == -EPERM ? " (needs ptrace access: same user and ptrace_scope, or root)" : "");
		close(pidfd);
		return rc;
	}
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	f = fopen(path, "re");
	if (f) {
		if (fgets(comm, sizeof(comm), f))
			comm[strcspn(comm, "\n")] = 0;
		fclose(f);
	}
	s = hpd_session_new(HPD_T_SCAN, pid, comm);
	if (!s) {
		close(fd);
		close(pidfd);
		return -ENOMEM;
	}
	s->ring_fd = fd;
	s->conn_fd = pidfd;
	/* Its user (the owner of /proc/PID), for its profiles: read while the
	 * pidfd still names that process. */
	snprintf(path, sizeof(path), "/proc/%d", (int)pid);
	if (!stat(path, &st) && !hpd_pidfd_check(pidfd, pid))
		s->uid = st.st_uid;
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	s->maps_fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	s->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
	s->exe_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->maps_fd < 0 || s->mem_fd < 0) {
		snprintf(err, errlen, "cannot open /proc/%d/maps or mem: %s", (int)pid, strerror(errno));
		hpd_session_end(s, NULL);
		return -EACCES;
	}
	/* The control header says how big the ring is. */
	{
		struct heapprofd_ctl hdr;

		if (fstat(fd, &st) < 0 || pread(fd, &hdr, sizeof(hdr), 0) != sizeof(hdr) ||
		    (uint64_t)st.st_size < (uint64_t)hdr.ctl_size + hdr.data_size) {
			snprintf(err, errlen, "pid %d: its ring memfd is malformed", (int)pid);
			hpd_session_end(s, NULL);
			return -EINVAL;
		}
		rc = hpd_session_map(s, fd, 1, hdr.ctl_size, hdr.data_size);
	}
	if (rc) {
		snprintf(err, errlen, "pid %d: ring rejected: %s", (int)pid, hpd_ring_refusal(rc));
		hpd_session_end(s, NULL);
		return rc;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		hpd_session_end(s, NULL);
		return -ENOMEM;
	}
	s->tpriv = c;
	c->s = s;
	c->w.fn = exit_event;
	c->ww.fn = wake_event;
	hpd_loop_add(pidfd, EPOLLIN, &c->w);
	s->poll_only = 1;
	if (nev == 1) {
		s->wake_fd = syscall(SYS_pidfd_getfd, pidfd, evfd_no, 0);
		if (s->wake_fd >= 0 && hpd_loop_add(s->wake_fd, EPOLLIN, &c->ww) == 0)
			s->poll_only = 0;
	}
	rc = hpd_session_enable(s, r);
	if (rc) {
		snprintf(err, errlen, "pid %d: could not start profiling", (int)pid);
		return rc;
	}
	hpd_session_drain(s, 0);
	return 0;
}
