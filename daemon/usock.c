// SPDX-License-Identifier: GPL-2.0
/*
 * The user-space transport (libclient/socket_proto.h): a client without the
 * module connects to our SOCK_SEQPACKET socket and sends one hello with its
 * memfd ring, eventfd, /proc/self/maps and /proc/self/mem. We check it, map
 * the ring, answer, and from then on the connection only says, by closing,
 * that the process is gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "hpd.h"
#include "../libclient/socket_proto.h"

struct usock_conn {
	struct hpd_watch w;		/* on the connection */
	struct hpd_watch ww;		/* on the eventfd */
	struct hpd_session *s;
};

static struct hpd_watch listen_w;

static void conn_event(struct hpd_watch *w, uint32_t ev)
{
	struct usock_conn *c = (struct usock_conn *)w;
	struct hpd_session *s = c->s;
	char b[64];

	if (s->ending)
		return;
	/* Nothing is sent after the hello: any readable event is EOF or junk. */
	if (ev & (EPOLLHUP | EPOLLERR | EPOLLRDHUP) ||
	    recv(w->fd, b, sizeof(b), MSG_DONTWAIT) <= 0) {
		if (s->enabled) {
			hpd_session_drain(s, 1);
			hpd_session_end(s, NULL);
		} else {
			hpd_log(HPD_DEBUG, "dormant pid %d hung up", (int)s->pid);
			hpd_session_end(s, NULL);
		}
	}
}

static void wake_event(struct hpd_watch *w, uint32_t ev)
{
	struct usock_conn *c = (struct usock_conn *)((char *)w - offsetof(struct usock_conn, ww));
	uint64_t v;

	(void)ev;
	if (read(w->fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		return;
	hp_ring_awake(&c->s->ring);
	hpd_session_drain(c->s, 0);
}

static void reply(int fd, int status, uint64_t id)
{
	struct hp_hello_reply r;

	memset(&r, 0, sizeof(r));
	r.magic = HP_REPLY_MAGIC;
	r.status = status;
	r.session_id = id;
	if (send(fd, &r, sizeof(r), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		hpd_log(HPD_DEBUG, "hello reply: %s", strerror(errno));
}

/* The memfd must not shrink under us; seal it if the client allowed that. */
static void seal_ring(int fd, pid_t pid)
{
	int seals = fcntl(fd, F_GET_SEALS);

	if (seals >= 0 && (seals & F_SEAL_SHRINK))
		return;
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0)
		hpd_log(HPD_DEBUG, "pid %d: ring memfd cannot be sealed (%s); a SIGBUS guard protects the reads",
			(int)pid, strerror(errno));
}

static void accept_hello(int fd)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 8)];
	struct hp_hello h;
	struct iovec iov = { &h, sizeof(h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	int fds[8], nfds = 0, i, rc, status = 0, enabled = 0;
	struct hpd_session *s = NULL;
	struct usock_conn *c;
	struct hpd_rule *r;
	struct stat st;
	ssize_t n;

	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	for (cm = CMSG_FIRSTHDR(&mh); n >= 0 && cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			int k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			for (i = 0; i < k && nfds < 8; i++)
				memcpy(&fds[nfds++], CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
		}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0) {
		status = -EPROTO;
		goto bad;
	}
	if (n != (ssize_t)sizeof(h) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
	    h.magic != HP_HELLO_MAGIC || h.version != HP_PROTO_VERSION ||
	    h.nfds < 4 || h.nfds > 5 || (int)h.nfds != nfds) {
		hpd_log(HPD_WARN, "pid %d: malformed hello (%zd bytes, %d fds): refused",
			(int)cred.pid, n, nfds);
		status = -EPROTO;
		goto bad;
	}
	h.comm[sizeof(h.comm) - 1] = 0;
	/* The ring must really be that big before we map it. */
	if (fstat(fds[0], &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size < (uint64_t)h.ctl_size + h.data_size) {
		hpd_log(HPD_WARN, "pid %d: ring memfd smaller than announced: refused", (int)cred.pid);
		status = -EINVAL;
		goto bad;
	}
	seal_ring(fds[0], cred.pid);
	s = hpd_session_new(HPD_T_SOCKET, cred.pid, h.comm);
	if (!s) {
		status = -ENOMEM;
		goto bad;
	}
	/* From here the session owns the fds and closes them when it ends. */
	s->ring_fd = fds[0];
	s->wake_fd = fds[1];
	s->maps_fd = fds[2];
	s->mem_fd = fds[3];
	s->exe_fd = nfds > 4 ? fds[4] : -1;
	s->dormant = !!(h.flags & HP_HELLO_DORMANT);
	rc = hpd_session_map(s, fds[0], 1, h.ctl_size, h.data_size);
	if (rc) {
		hpd_log(HPD_WARN, "pid %d: ring rejected: %s", (int)cred.pid, hpd_ring_refusal(rc));
		status = rc;
		goto bad_session;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		status = -ENOMEM;
		goto bad_session;
	}
	s->tpriv = c;
	c->s = s;
	c->w.fn = conn_event;
	c->ww.fn = wake_event;
	r = hpd_rule_match(s->pid, s->comm, s->dormant);
	if (!r && !s->dormant && !hpd_opts.attach_all_default) {
		/* A private daemon serves only its own recording. */
		hpd_log(HPD_DEBUG, "pid %d (%s): not ours to profile", (int)s->pid, s->comm);
		status = -EPERM;
		goto bad_session;
	}
	s->conn_fd = fd;
	/*
	 * Enable before the reply: enabling takes the first snapshot of the
	 * process's maps and opens its files, and the process, blocked in
	 * its hello until the reply, surely still exists. Replying first let
	 * a program that allocates and _exits at once be gone by then, and
	 * none of its samples could be unwound.
	 */
	if (r || !s->dormant)
		enabled = hpd_session_enable(s, r) == 0;
	else
		hpd_log(HPD_INFO, "pid %d (%s) is dormant: `heapprofctl attach %d` profiles it",
			(int)s->pid, s->comm, (int)s->pid);
	if (s->ending)
		return;	/* it closed the connection: the client sees its hello fail */
	reply(fd, 0, s->id);
	hpd_loop_add(fd, EPOLLIN | EPOLLRDHUP, &c->w);
	hpd_loop_add(s->wake_fd, EPOLLIN, &c->ww);
	if (enabled)
		hpd_session_drain(s, 0);
	return;

bad_session:
	hpd_session_end(s, NULL);
bad:
	reply(fd, status, 0);
	if (!s)
		for (i = 0; i < nfds; i++)
			close(fds[i]);
	close(fd);
}

/* `attach` of a dormant client connected to us. */
int hpd_usock_enable_dormant(struct hpd_session *s, struct hpd_rule *r)
{
	int rc = hpd_session_enable(s, r);

	if (!rc)
		hpd_session_drain(s, 0);
	return rc;
}

/* A new connection: its hello may not have arrived yet. */
struct pending {
	struct hpd_watch w;
};

static void pending_event(struct hpd_watch *w, uint32_t ev)
{
	int fd = w->fd;

	(void)ev;
	hpd_loop_del(fd);
	free(w);
	accept_hello(fd);
}

static void listen_event(struct hpd_watch *w, uint32_t ev)
{
	struct pending *p;
	int fd;

	(void)ev;
	while ((fd = accept4(w->fd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		p = calloc(1, sizeof(*p));
		if (!p) {
			close(fd);
			continue;
		}
		p->w.fn = pending_event;
		if (hpd_loop_add(fd, EPOLLIN | EPOLLRDHUP, &p->w) < 0) {
			free(p);
			close(fd);
		}
	}
}

int hpd_usock_listen(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path)) {
		hpd_log(HPD_ERR, "socket path too long: %s", path);
		return -ENAMETOOLONG;
	}
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	unlink(path);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
		int e = errno;

		hpd_log(HPD_ERR, "cannot listen on %s: %s", path, strerror(e));
		close(fd);
		return -e;
	}
	/* Any local process may offer itself for profiling. */
	chmod(path, 0666);
	listen_w.fn = listen_event;
	hpd_loop_add(fd, EPOLLIN, &listen_w);
	return 0;
}
