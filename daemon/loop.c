// SPDX-License-Identifier: GPL-2.0
/*
 * The daemon's event loop: one epoll set over the transports' listening
 * sockets, the sessions' connections and wake channels, the control
 * connections and the module's netlink socket. Each watch carries the
 * function its events go to. Listening sockets out of descriptors are
 * unwatched for a while (accept would fail at once, again and again).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "hpd.h"

/* The daemon's options: main sets them before the loop runs. */
struct hpd_opts hpd_opts;

static int epfd = -1;

int hpd_loop_init(void)
{
	epfd = epoll_create1(EPOLL_CLOEXEC);
	return epfd < 0 ? -errno : 0;
}
int hpd_loop_add(int fd, uint32_t events, struct hpd_watch *w)
{
	struct epoll_event e = { .events = events, .data.ptr = w };

	w->fd = fd;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
		hpd_log(HPD_WARN, "epoll add %d: %s", fd, strerror(errno));
		return -1;
	}
	return 0;
}

void hpd_loop_del(int fd)
{
	epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
}

/*
 * A listening socket whose accept fails for want of descriptors stays
 * readable: watched, it would spin the loop. It is left out for a while
 * instead (sessions ending meanwhile give descriptors back).
 */
#define MAX_PAUSED	4
static struct hpd_watch *paused[MAX_PAUSED];
static int npaused;
static uint64_t resume_at;

void hpd_loop_backoff(struct hpd_watch *w)
{
	if (npaused == MAX_PAUSED)
		return;
	for (int i = 0; i < npaused; i++)
		if (paused[i] == w)
			return;
	hpd_log(HPD_WARN, "out of file descriptors: not accepting connections for %d ms",
		HPD_ACCEPT_BACKOFF_MS);
	hpd_loop_del(w->fd);
	paused[npaused++] = w;
	resume_at = hpd_now_ms() + HPD_ACCEPT_BACKOFF_MS;
}

/* ms until the paused sockets are watched again, or -1; resumes them when due. */
static int loop_resume(uint64_t now)
{
	if (!npaused)
		return -1;
	if (now < resume_at)
		return (int)(resume_at - now);
	while (npaused) {
		struct hpd_watch *w = paused[--npaused];

		hpd_loop_add(w->fd, EPOLLIN, w);
	}
	return -1;
}

/*
 * With -v: a handler that held the loop a second or more is said, with
 * what its descriptor is (a session's connection, wake channel or module
 * fd, a control connection) and the handler's offset in this binary
 * (`nm heapprofd` names it). Every ring waits while the loop is held, and
 * a client stops profiling after 10 s of that: this says where they went.
 */
static void say_held(const struct hpd_watch *w, uint64_t t0)
{
	uint64_t ms = hpd_now_ms() - t0;
	char fdpath[64], what[128];
	ssize_t n;

	if (ms < 1000)
		return;
	snprintf(fdpath, sizeof(fdpath), "/proc/self/fd/%d", w->fd);
	n = readlink(fdpath, what, sizeof(what) - 1);
	what[n > 0 ? n : 0] = 0;
	hpd_log(HPD_DEBUG, "the event loop was held %llu ms by the handler at +%#lx (fd %d, %s)",
		(unsigned long long)ms,
		(unsigned long)((uintptr_t)w->fn - (uintptr_t)hpd_loop_init), w->fd,
		n > 0 ? what : "closed by then");
}

int hpd_sooner(int a, int b)
{
	return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

int hpd_loop_listen(const char *path, mode_t mode, int backlog, int passcred,
		    struct hpd_watch *w)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	mode_t old;
	int fd, rc, one = 1;

	if (strlen(path) >= sizeof(a.sun_path)) {
		hpd_log(HPD_ERR, "socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/*
	 * Asked of the listener, not of each accepted socket: an accepted
	 * socket inherits it at accept4(), and a message a client sent in the
	 * moment between accept4() and a setsockopt() on the accepted socket
	 * would carry no credentials (pid 0, the overflow uid) unless the
	 * client attached its own.
	 */
	if (passcred && setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	unlink(path);
	/* Born with its final mode: no moment in which others may connect. */
	old = umask(~mode & 0777);
	rc = bind(fd, (struct sockaddr *)&a, sizeof(a));
	umask(old);
	if (rc < 0 || listen(fd, backlog) < 0 || chmod(path, mode) < 0) {
		int e = errno;

		hpd_log(HPD_ERR, "cannot listen on %s: %s", path, strerror(e));
		close(fd);
		return -e;
	}
	return hpd_loop_add(fd, EPOLLIN, w);
}

void hpd_loop_accept(struct hpd_watch *w, int flags, int (*adopt)(int fd))
{
	int fd;

	while ((fd = accept4(w->fd, NULL, NULL, SOCK_CLOEXEC | flags)) >= 0)
		if (adopt(fd))
			close(fd);
	if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
		hpd_loop_backoff(w);
}

int hpd_loop_run(int timeout)
{
	struct epoll_event evs[64];
	uint64_t now = hpd_now_ms();
	int n, i;

	timeout = hpd_sooner(timeout, hpd_socket_expire(now));
	timeout = hpd_sooner(timeout, hpd_kernel_expire(now));
	timeout = hpd_sooner(timeout, loop_resume(now));
	n = epoll_wait(epfd, evs, 64, timeout);
	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	for (i = 0; i < n; i++) {
		struct hpd_watch *w = evs[i].data.ptr;
		uint64_t t0 = hpd_verbosity >= HPD_DEBUG ? hpd_now_ms() : 0;

		w->fn(w, evs[i].events);
		if (t0)
			say_held(w, t0);
	}
	return n;
}
