// SPDX-License-Identifier: GPL-2.0
/*
 * The user-space transport (socket_proto.h): a memfd ring, an eventfd for
 * wake-ups, handed to the daemon over a SOCK_SEQPACKET UNIX socket with
 * SCM_RIGHTS. Used when /dev/heapprofd is absent.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.h"
#include "../proto/socket_proto.h"

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Milliseconds left before deadline, at least 1 while any are. */
static int left_ms(uint64_t deadline)
{
	uint64_t now = now_ms();

	return now >= deadline ? 0 : (int)(deadline - now);
}

/*
 * Connect without ever blocking past the deadline: a UNIX socket whose
 * listener's queue is full (a daemon that is stopped, frozen or out of
 * descriptors) answers a non-blocking connect with EAGAIN at once, so
 * try again a few times until the deadline rather than waiting in the
 * kernel for good.
 */
static int connect_daemon(const char *path, uint64_t deadline)
{
	struct sockaddr_un a;
	int fd, e;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path, path, strnlen(path, sizeof(a.sun_path) - 1));
	if (path[0] == '@')	/* abstract namespace */
		a.sun_path[0] = 0;
	for (;;) {
		if (!connect(fd, (struct sockaddr *)&a, sizeof(a)))
			return fd;
		e = errno;
		if (e == EINTR)
			continue;
		if (e != EAGAIN || left_ms(deadline) == 0)
			break;
		poll(NULL, 0, left_ms(deadline) < 10 ? left_ms(deadline) : 10);
	}
	close(fd);
	return e == EAGAIN ? -ETIMEDOUT : -e;
}

/* Wait until fd is ready for events, or the deadline: 0, or -ETIMEDOUT. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	int n;

	for (;;) {
		n = poll(&p, 1, left_ms(deadline));
		if (n > 0)
			return 0;
		if (n == 0)
			return -ETIMEDOUT;
		if (errno != EINTR)
			return -errno;
	}
}

static int send_hello(int sock, struct hp_session *s, int dormant,
		      uint64_t data_size, uint64_t deadline)
{
	int fds[HP_HELLO_FDS_MAX], nfds = 0, i, ret = 0;
	char cbuf[CMSG_SPACE(sizeof(fds)) + CMSG_SPACE(sizeof(struct ucred))];
	struct ucred cred = { .pid = getpid(), .uid = getuid(), .gid = getgid() };
	struct hp_hello hello;
	struct hp_hello_reply reply;
	struct msghdr m;
	struct iovec iov;
	struct cmsghdr *cm;
	ssize_t n;

	memset(&hello, 0, sizeof(hello));
	hello.magic = HP_HELLO_MAGIC;
	hello.version = HP_PROTO_VERSION;
	hello.pid = (uint32_t)getpid();
	hello.flags = dormant ? HP_HELLO_DORMANT : 0;
	hello.data_size = data_size;
	hello.ctl_size = HEAPPROFD_CTL_SIZE;
	prctl(PR_GET_NAME, hello.comm, 0, 0, 0);

	fds[nfds++] = s->memfd;
	fds[nfds++] = s->event_fd;
	fds[nfds] = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fds[nfds] < 0)
		return -errno;
	nfds++;
	fds[nfds] = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	if (fds[nfds] < 0) {
		ret = -errno;
		goto out;
	}
	nfds++;
	/* Binds the session to this process, not to a pid number. */
	fds[nfds] = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (fds[nfds] < 0) {
		ret = -errno;
		goto out;
	}
	nfds++;
	fds[nfds] = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fds[nfds] >= 0)
		nfds++;
	hello.nfds = (uint32_t)nfds;

	memset(&m, 0, sizeof(m));
	memset(cbuf, 0, sizeof(cbuf));
	iov.iov_base = &hello;
	iov.iov_len = sizeof(hello);
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = cbuf;
	m.msg_controllen = CMSG_SPACE(nfds * sizeof(int)) + CMSG_SPACE(sizeof(cred));
	cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	/*
	 * Our credentials, which the kernel checks against us as it sends
	 * them: the daemon believes these, not the hello's pid field. (Sent
	 * explicitly: the kernel adds them by itself only if the daemon's end
	 * asked for them before our send.)
	 */
	cm = CMSG_NXTHDR(&m, cm);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_CREDENTIALS;
	cm->cmsg_len = CMSG_LEN(sizeof(cred));
	memcpy(CMSG_DATA(cm), &cred, sizeof(cred));
	for (;;) {
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
		if (n >= 0 || (errno != EINTR && errno != EAGAIN))
			break;
		if (errno == EAGAIN && (ret = wait_fd(sock, POLLOUT, deadline)))
			goto out;
	}
	if (n != (ssize_t)sizeof(hello)) {
		ret = n < 0 ? -errno : -EPROTO;
		goto out;
	}
	for (;;) {
		n = recv(sock, &reply, sizeof(reply), 0);
		if (n >= 0 || (errno != EINTR && errno != EAGAIN))
			break;
		if (errno == EAGAIN && (ret = wait_fd(sock, POLLIN, deadline)))
			goto out;
	}
	if (n != (ssize_t)sizeof(reply) || reply.magic != HP_REPLY_MAGIC) {
		ret = n < 0 ? -errno : -EPROTO;
		goto out;
	}
	if (reply.status) {
		ret = reply.status < 0 ? reply.status : -EPROTO;
		goto out;
	}
	hp_debug("daemon accepted: session %llu",
		 (unsigned long long)reply.session_id);
out:
	for (i = HP_HELLO_FD_MAPS; i < nfds; i++)
		close(fds[i]);
	return ret;
}

int hp_socket_open(struct hp_session *s, int dormant, uint64_t data_size)
{
	struct heapprofd_config *cfg;
	uint64_t deadline;
	size_t len;
	void *map;
	int ret, sock;

	s->memfd = memfd_create(HP_MEMFD_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (s->memfd < 0)
		return -errno;
	if (ftruncate(s->memfd, (off_t)(HEAPPROFD_CTL_SIZE + data_size))) {
		ret = -errno;
		goto fail;
	}
	/* The size never changes: a daemon mapping it need not fear SIGBUS
	 * (no shrinking), and F_SEAL_SEAL keeps anyone from undoing that.
	 * A kernel without sealing still gets a working ring. */
	if (fcntl(s->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL))
		hp_debug("cannot seal the ring memfd: %s", strerror(errno));
	map = hp_ring_map_fd(s->memfd, 1, HEAPPROFD_CTL_SIZE, data_size, &len);
	if (map == MAP_FAILED) {
		ret = -errno;
		goto fail;
	}
	hp_ring_format(map, HEAPPROFD_CTL_SIZE, data_size, 0, 0);
	/* Our own values, for a daemon that wants to see them; the
	 * generation stays 0 so we do not read them back as its orders. */
	cfg = (struct heapprofd_config *)((uint8_t *)map + HP_OFF_CONFIG);
	cfg->interval = hp_cfg.interval;
	cfg->stack_cap = hp_cfg.stack_cap;
	cfg->flags = hp_cfg.flags;
	cfg->block_timeout_us = hp_cfg.block_timeout_us;
	cfg->enabled = dormant ? 0 : 1;
	if (hp_ring_open(&s->ring, map, len)) {
		munmap(map, len);
		ret = -EPROTO;
		goto fail;
	}
	s->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->event_fd < 0) {
		ret = -errno;
		goto fail_map;
	}
	s->kernel = 0;
	deadline = now_ms() + hp_cfg.hello_timeout_ms;
	sock = connect_daemon(hp_cfg.socket_path, deadline);
	if (sock >= 0) {
		ret = send_hello(sock, s, dormant, data_size, deadline);
		if (ret) {
			close(sock);
			sock = ret;
		}
	}
	if (sock < 0) {
		if (sock == -ETIMEDOUT)
			hp_debug("the daemon at %s did not answer within %u ms: running unprofiled",
				 hp_cfg.socket_path, hp_cfg.hello_timeout_ms);
		else
			hp_debug("no daemon at %s (%s)", hp_cfg.socket_path,
				 strerror(-sock));
		if (!dormant) {
			ret = sock;
			goto fail_ev;
		}
		/* Dormant: keep the memfd and eventfd for a daemon that
		 * finds them later through /proc/<pid>/fd. */
		s->sock_fd = -1;
		return 0;
	}
	s->sock_fd = sock;
	return 0;
fail_ev:
	close(s->event_fd);
	s->event_fd = -1;
fail_map:
	munmap(s->ring.map, s->ring.map_len);
	memset(&s->ring, 0, sizeof(s->ring));
fail:
	close(s->memfd);
	s->memfd = -1;
	return ret;
}

void hp_socket_wake(struct hp_session *s)
{
	uint64_t one = 1;

	if (s->event_fd >= 0 && write(s->event_fd, &one, sizeof(one)) < 0)
		return;
}

/* EOF on the connection means the daemon is gone. */
int hp_socket_peer_gone(struct hp_session *s)
{
	struct pollfd p = { .fd = s->sock_fd, .events = POLLIN };
	char c;

	if (s->sock_fd < 0)
		return 0;
	if (poll(&p, 1, 0) <= 0)
		return 0;
	if (p.revents & (POLLHUP | POLLERR))
		return 1;
	return recv(s->sock_fd, &c, 1, MSG_DONTWAIT | MSG_PEEK) == 0;
}
