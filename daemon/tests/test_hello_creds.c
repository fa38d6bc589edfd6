// SPDX-License-Identifier: GPL-2.0
/*
 * A hello that carries no credentials of its own still gets the sender's,
 * whenever it was sent: before the daemon accepted the connection, in the
 * moment between the daemon's accept4() and its first look at the new
 * socket, or after. The daemon believes only credentials the kernel
 * attached; a hello that came without them is refused (the overflow uid,
 * pid 0), so a client that leaves them to the kernel (our libclient sends
 * its own, other clients may not) must never be refused for its timing.
 *
 * The daemon's own listener, loop and hello code (everything but main);
 * accept4 is wrapped (-Wl,--wrap=accept4) so the middle case is certain
 * rather than a race: the wrapper sends the hello right after the real
 * accept4 returns.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <fcntl.h>
#include <unistd.h>

#include "../hpd.h"
#include "../../proto/ring.h"
#include "../../proto/socket_proto.h"

#define RING_DATA	(64U << 10)

static char dir[] = "/tmp/hp_hello_creds.XXXXXX";
static char sock_path[sizeof(dir) + 8];
static int failed, ntest;
static struct hpd_rule all_rule;	/* profile every process that says hello */

/* The client whose hello the accept4 wrapper sends, or -1. */
static int send_in_accept = -1;

static void ok(int cond, const char *what)
{
	printf("%sok %d - %s\n", cond ? "" : "not ", ++ntest, what);
	if (!cond)
		failed++;
}

/* A hello as a client that leaves its credentials to the kernel sends it. */
static int send_hello(int sock)
{
	char cbuf[CMSG_SPACE(sizeof(int) * HP_HELLO_FDS_MAX)];
	struct hp_hello h = {
		.magic = HP_HELLO_MAGIC, .version = HP_PROTO_VERSION,
		.pid = (uint32_t)getpid(), .data_size = RING_DATA,
		.ctl_size = HEAPPROFD_CTL_SIZE,
	};
	struct iovec iov = { &h, sizeof(h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf };
	struct cmsghdr *cm;
	int fds[6], nfds = 0, i, rc;
	size_t len;
	void *m;

	fds[nfds] = memfd_create("hello-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fds[nfds] < 0 || ftruncate(fds[nfds], HEAPPROFD_CTL_SIZE + RING_DATA))
		return -1;
	m = hp_ring_map_fd(fds[nfds], 1, HEAPPROFD_CTL_SIZE, RING_DATA, &len);
	if (m == MAP_FAILED)
		return -1;
	hp_ring_format(m, HEAPPROFD_CTL_SIZE, RING_DATA, 0, 0);
	munmap(m, len);
	nfds++;
	fds[nfds++] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	fds[nfds++] = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	fds[nfds++] = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	fds[nfds++] = (int)syscall(SYS_pidfd_open, getpid(), 0);
	fds[nfds++] = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	for (i = 0; i < nfds; i++)
		if (fds[i] < 0)
			return -1;
	h.nfds = (uint32_t)nfds;
	snprintf(h.comm, sizeof(h.comm), "hello_creds");
	memset(cbuf, 0, sizeof(cbuf));
	mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	rc = sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(h) ? 0 : -1;
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	return rc;
}

int __real_accept4(int fd, struct sockaddr *a, socklen_t *al, int flags);
int __wrap_accept4(int fd, struct sockaddr *a, socklen_t *al, int flags)
{
	int r = __real_accept4(fd, a, al, flags);

	if (r >= 0 && send_in_accept >= 0) {
		if (send_hello(send_in_accept))
			fprintf(stderr, "# the hello could not be sent: %s\n", strerror(errno));
		send_in_accept = -1;
	}
	return r;
}

static int connect_daemon(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		exit(2);
	}
	return s;
}

/* Run the daemon's loop until the client has its reply: its status, or 1 if none. */
static int reply_of(int sock)
{
	struct hp_hello_reply rep;
	int i;

	for (i = 0; i < 200; i++) {
		struct pollfd p = { .fd = sock, .events = POLLIN };

		hpd_loop_run(10);
		if (poll(&p, 1, 0) == 1) {
			if (recv(sock, &rep, sizeof(rep), MSG_DONTWAIT) != (ssize_t)sizeof(rep) ||
			    rep.magic != HP_REPLY_MAGIC)
				return 1;
			return rep.status;
		}
	}
	return 1;
}

static void end_sessions(void)
{
	struct hpd_session *s;
	DIR *d;
	struct dirent *e;

	for (s = hpd_sessions; s; s = s->next)
		if (!s->ending)
			hpd_session_end(s, NULL);
	hpd_sessions_reap();
	d = opendir(dir);
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && strcmp(e->d_name, "sock"))
			unlinkat(dirfd(d), e->d_name, 0);
	if (d)
		closedir(d);
}

int main(void)
{
	struct hp_pipeline_opts po = { .unwind_workers = 1 };
	int c, st, round;

	hpd_verbosity = getenv("HPD_TEST_VERBOSE") ? 3 : -1;
	if (!mkdtemp(dir) || hpd_loop_init() < 0)
		return 2;
	snprintf(sock_path, sizeof(sock_path), "%s/sock", dir);
	hpd_opts.outdir = dir;
	hpd_opts.private_mode = 1;
	hpd_pipe = hp_pipeline_new(&po);
	if (!hpd_pipe || hpd_socket_listen(sock_path) < 0)
		return 2;
	all_rule.all = 1;
	all_rule.formats = HP_OUT_TEXT;
	snprintf(all_rule.prefix, sizeof(all_rule.prefix), "%s/p", dir);
	hpd_rule_add(&all_rule);
	printf("TAP version 13\n1..3\n");

	/* Before the daemon's accept4: the connection is not yet accepted. */
	c = connect_daemon();
	ok(send_hello(c) == 0 && (st = reply_of(c)) == 0,
	   "a hello sent before the daemon accepted the connection is taken (status 0)");
	close(c);
	end_sessions();

	/* Between accept4 and the daemon's first look at the socket, 20 times. */
	st = 0;
	for (round = 0; round < 20 && st == 0; round++) {
		c = connect_daemon();
		send_in_accept = c;
		st = reply_of(c);
		close(c);
		end_sessions();
	}
	ok(st == 0, "a hello sent just after the daemon's accept4 carries the sender's credentials "
	   "and is taken, 20 times out of 20");
	if (st)
		printf("# round %d: status %d (-EPERM: refused for no credentials)\n", round, st);

	/* After the daemon has adopted the connection. */
	c = connect_daemon();
	hpd_loop_run(50);
	ok(send_hello(c) == 0 && (st = reply_of(c)) == 0,
	   "a hello sent after the daemon took the connection in is taken (status 0)");
	close(c);
	end_sessions();

	hpd_rule_del(&all_rule);
	unlink(sock_path);
	rmdir(dir);
	printf("%d passed, %d failed\n", ntest - failed, failed);
	return failed ? 1 : 0;
}
