// SPDX-License-Identifier: GPL-2.0
/*
 * The user-space transport (proto/socket_proto.h): a client without the
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
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "hpd.h"
#include "../proto/socket_proto.h"

struct socket_conn {
	struct hpd_watch w;		/* on the connection */
	struct hpd_watch ww;		/* on the eventfd */
	struct hpd_session *s;
};

static struct hpd_watch listen_w;

static void conn_event(struct hpd_watch *w, uint32_t ev)
{
	struct socket_conn *c = (struct socket_conn *)w;
	struct hpd_session *s = c->s;
	char b[64];

	if (s->ending)
		return;
	/* Nothing is sent after the hello: any readable event is EOF or junk. */
	if (ev & (EPOLLHUP | EPOLLERR | EPOLLRDHUP) ||
	    recv(w->fd, b, sizeof(b), MSG_DONTWAIT) <= 0) {
		if (s->enabled) {
			hpd_loop_del(w->fd);
			hpd_session_gone(s);
		} else {
			hpd_log(HPD_DEBUG, "dormant pid %d hung up", (int)s->pid);
			hpd_session_end(s, NULL);
		}
	}
}

static void wake_event(struct hpd_watch *w, uint32_t ev)
{
	struct socket_conn *c = (struct socket_conn *)((char *)w - offsetof(struct socket_conn, ww));

	(void)ev;
	/* An event of the same epoll_wait batch may have ended it already. */
	if (c->s->ending || !c->s->map)
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

/* A new connection: it has HPD_HELLO_DEADLINE_MS to say hello. */
struct pending {
	struct hpd_watch w;
	struct pending *next;
	uid_t uid;
	uint64_t deadline;
};

static struct pending *pendings;
static unsigned npending;

static unsigned pending_of_uid(uid_t uid)
{
	unsigned n = 0;

	for (struct pending *p = pendings; p; p = p->next)
		n += p->uid == uid;
	return n;
}

/* Is fd a file of procfs (what /proc/self/maps and mem must be)? */
static int on_procfs(int fd)
{
	struct statfs sf;

	return !fstatfs(fd, &sf) && sf.f_type == PROC_SUPER_MAGIC;
}

/*
 * Take the process's own /proc files where we may (a system daemon may
 * open any process's): then nothing the client sent decides what we read.
 * A daemon of the client's own user that Yama keeps from opening mem
 * uses the client's descriptors, which must at least be procfs files.
 */
static int take_proc_files(struct hpd_session *s, int maps_fd, int mem_fd)
{
	int fd;

	fd = s->proc_fd >= 0 ? openat(s->proc_fd, "maps", O_RDONLY | O_CLOEXEC) : -1;
	if (fd >= 0) {
		close(maps_fd);
		maps_fd = fd;
	}
	fd = s->proc_fd >= 0 ? openat(s->proc_fd, "mem", O_RDONLY | O_CLOEXEC) : -1;
	if (fd >= 0) {
		close(mem_fd);
		mem_fd = fd;
	}
	s->maps_fd = maps_fd;
	s->mem_fd = mem_fd;
	return on_procfs(maps_fd) && on_procfs(mem_fd) ? 0 : -EINVAL;
}

/*
 * Everything in a hello is the client's word except what the kernel says:
 * the sender's pid and uid (SCM_CREDENTIALS, filled in at the send) and
 * what its descriptors are. Checked here before anything is mapped.
 */
static void accept_hello(int fd, uid_t conn_uid)
{
	char cbuf[CMSG_SPACE(sizeof(int) * HP_HELLO_FDS_MAX) + CMSG_SPACE(sizeof(struct ucred))];
	struct hp_hello h;
	struct iovec iov = { &h, sizeof(h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;
	struct ucred cred = { .pid = 0 };
	int fds[HP_HELLO_FDS_MAX], nfds = 0, i, rc, status = 0, enabled = 0, have_cred = 0;
	struct hpd_session *s = NULL;
	struct socket_conn *c;
	struct hpd_rule *r;
	struct stat st;
	ssize_t n;

	n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	for (cm = CMSG_FIRSTHDR(&mh); n >= 0 && cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET)
			continue;
		if (cm->cmsg_type == SCM_RIGHTS) {
			int k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

			for (i = 0; i < k; i++) {
				int f;

				memcpy(&f, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				if (nfds < HP_HELLO_FDS_MAX)
					fds[nfds++] = f;
				else
					close(f);
			}
		} else if (cm->cmsg_type == SCM_CREDENTIALS &&
			   cm->cmsg_len == CMSG_LEN(sizeof(cred))) {
			memcpy(&cred, CMSG_DATA(cm), sizeof(cred));
			have_cred = 1;
		}
	}
	if (n != (ssize_t)sizeof(h) || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || !have_cred ||
	    h.magic != HP_HELLO_MAGIC || h.version != HP_PROTO_VERSION ||
	    h.nfds < HP_HELLO_FD_EXE || h.nfds > HP_HELLO_FDS_MAX || (int)h.nfds != nfds) {
		hpd_log(HPD_WARN, "uid %u pid %d: malformed hello (%zd bytes, %d fds%s): refused",
			(unsigned)conn_uid, (int)cred.pid, n, nfds,
			have_cred ? "" : ", no credentials");
		status = n == (ssize_t)sizeof(h) && h.version != HP_PROTO_VERSION ?
			 -EPROTONOSUPPORT : -EPROTO;
		goto bad;
	}
	h.comm[sizeof(h.comm) - 1] = 0;
	/* The pidfd must hold the very process that sent this. */
	if (hpd_pidfd_check(fds[HP_HELLO_FD_PIDFD], cred.pid)) {
		hpd_log(HPD_WARN, cred.pid ?
			"uid %u pid %d: the hello's pidfd is not the sender's: refused" :
			"uid %u pid %d: the hello came without its sender's credentials: refused",
			(unsigned)cred.uid, (int)cred.pid);
		status = -EPERM;
		goto bad;
	}
	status = hpd_fd_admit(cred.uid, cred.pid);
	if (status)
		goto bad;
	/* The ring must really be that big before we map it. */
	if (fstat(fds[HP_HELLO_FD_RING], &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size < (uint64_t)h.ctl_size + h.data_size) {
		hpd_log(HPD_WARN, "pid %d: ring memfd smaller than announced: refused", (int)cred.pid);
		status = -EINVAL;
		goto bad;
	}
	seal_ring(fds[HP_HELLO_FD_RING], cred.pid);
	s = hpd_session_new(HPD_T_SOCKET, cred.pid, h.comm);
	if (!s) {
		status = -ENOMEM;
		goto bad;
	}
	/* From here the session owns the fds and closes them when it ends. */
	s->uid = cred.uid;
	s->foreign = cred.uid != geteuid();
	s->ring_fd = fds[HP_HELLO_FD_RING];
	s->wake_fd = fds[HP_HELLO_FD_WAKE];
	s->pidfd = fds[HP_HELLO_FD_PIDFD];
	s->exe_fd = nfds > HP_HELLO_FD_EXE ? fds[HP_HELLO_FD_EXE] : -1;
	s->dormant = !!(h.flags & HP_HELLO_DORMANT);
	rc = hpd_proc_dir_open(cred.pid, s->pidfd);
	if (rc < 0 && s->foreign) {
		/* Without it a foreign process's files cannot be opened safely. */
		hpd_log(HPD_WARN, "pid %d: /proc/%d: %s: refused", (int)cred.pid, (int)cred.pid,
			strerror(-rc));
		s->maps_fd = fds[HP_HELLO_FD_MAPS];
		s->mem_fd = fds[HP_HELLO_FD_MEM];
		status = rc;
		goto bad_session;
	}
	s->proc_fd = rc >= 0 ? rc : -1;
	if (s->proc_fd >= 0 && hpd_ident_read(s->proc_fd, &s->ident))
		memset(&s->ident, 0, sizeof(s->ident));
	if (take_proc_files(s, fds[HP_HELLO_FD_MAPS], fds[HP_HELLO_FD_MEM])) {
		hpd_log(HPD_WARN, "pid %d: its maps or mem descriptor is not a /proc file: refused",
			(int)cred.pid);
		status = -EINVAL;
		goto bad_session;
	}
	rc = hpd_session_map(s, s->ring_fd, 1, h.ctl_size, h.data_size);
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
	/*
	 * Edge-triggered, and the eventfd is never read: the client shares
	 * its file description and could make a read block us for good (clear
	 * O_NONBLOCK, then empty it between our epoll and our read). Every
	 * write to an eventfd is an edge.
	 */
	if (hpd_loop_add(s->wake_fd, EPOLLIN | EPOLLET, &c->ww) < 0)
		s->poll_only = 1;
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
int hpd_socket_enable_dormant(struct hpd_session *s, struct hpd_rule *r)
{
	int rc = hpd_session_enable(s, r);

	if (!rc)
		hpd_session_drain(s, 0);
	return rc;
}

static void pending_del(struct pending *p)
{
	struct pending **pp;

	for (pp = &pendings; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			npending--;
			break;
		}
	hpd_loop_del(p->w.fd);
}

static void pending_event(struct hpd_watch *w, uint32_t ev)
{
	struct pending *p = (struct pending *)w;
	int fd = w->fd;
	uid_t uid = p->uid;

	(void)ev;
	pending_del(p);
	free(p);
	accept_hello(fd, uid);
}

int hpd_socket_expire(uint64_t now)
{
	struct pending *p, *nx;
	uint64_t next = 0;

	for (p = pendings; p; p = nx) {
		nx = p->next;
		if (now >= p->deadline) {
			hpd_log(HPD_DEBUG, "uid %u: no hello within %u ms: closed",
				(unsigned)p->uid, HPD_HELLO_DEADLINE_MS);
			pending_del(p);
			close(p->w.fd);
			free(p);
		} else if (!next || p->deadline < next) {
			next = p->deadline;
		}
	}
	return next ? (int)(next - now) : -1;
}

int hpd_socket_adopt(int fd)
{
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	struct pending *p;
	int one = 1;

	/* Already so if it came from our listener; not if handed in otherwise. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0)
		return -errno;
	/* One user's silent connections cannot crowd out the others'. */
	if (npending >= HPD_PENDING_MAX ||
	    (cred.uid != 0 && pending_of_uid(cred.uid) >= HPD_PENDING_PER_UID)) {
		hpd_log(HPD_DEBUG, "uid %u: too many connections without a hello: refused",
			(unsigned)cred.uid);
		return -EUSERS;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->w.fn = pending_event;
	p->uid = cred.uid;
	p->deadline = hpd_now_ms() + HPD_HELLO_DEADLINE_MS;
	if (hpd_loop_add(fd, EPOLLIN | EPOLLRDHUP, &p->w) < 0) {
		free(p);
		return -EINVAL;
	}
	p->next = pendings;
	pendings = p;
	npending++;
	return 0;
}

static void listen_event(struct hpd_watch *w, uint32_t ev)
{
	(void)ev;
	hpd_loop_accept(w, SOCK_NONBLOCK, hpd_socket_adopt);
}

int hpd_socket_listen(const char *path)
{
	listen_w.fn = listen_event;
	/* Any local process may offer itself for profiling; its hello is
	 * believed only with the credentials the kernel attached. */
	return hpd_loop_listen(path, 0666, 64, 1, &listen_w);
}
