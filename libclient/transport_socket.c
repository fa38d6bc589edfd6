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
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"
#include "socket_proto.h"

static int connect_daemon(const char *path)
{
	struct sockaddr_un a;
	struct timeval tv = { 2, 0 };
	int fd;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path, path, strnlen(path, sizeof(a.sun_path) - 1));
	if (path[0] == '@')	/* abstract namespace */
		a.sun_path[0] = 0;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
		int e = -errno;

		close(fd);
		return e;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

static int send_hello(int sock, struct hp_session *s, int dormant,
		      uint64_t data_size)
{
	int fds[5], nfds = 0, i, ret = 0;
	char cbuf[CMSG_SPACE(sizeof(fds))];
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
	m.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
	cm = CMSG_FIRSTHDR(&m);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
	do {
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
	} while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(hello)) {
		ret = n < 0 ? -errno : -EPROTO;
		goto out;
	}
	do {
		n = recv(sock, &reply, sizeof(reply), 0);
	} while (n < 0 && errno == EINTR);
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
	for (i = 2; i < nfds; i++)
		close(fds[i]);
	return ret;
}

int hp_socket_open(struct hp_session *s, int dormant, uint64_t data_size)
{
	struct heapprofd_config *cfg;
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
	sock = connect_daemon(hp_cfg.socket_path);
	if (sock >= 0) {
		ret = send_hello(sock, s, dormant, data_size);
		if (ret) {
			close(sock);
			sock = ret;
		}
	}
	if (sock < 0) {
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
