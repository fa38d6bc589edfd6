// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer over the user-space transport's hello, through the daemon's
 * own code: each input becomes one message on a fresh connection (its
 * bytes, a chosen set of descriptors, credentials or none), which the
 * event loop hands to transport_socket.c exactly as it would a client's; then the
 * client hangs up and every session is ended.
 *
 * Input: byte 0 = number of fds (low 3 bits), bit 3 = no credentials,
 * bit 4 = a rule that profiles everything (so a good hello is enabled),
 * bit 5 = start from a well-formed hello; then one byte per fd naming its
 * kind (below); the rest is the message, or with bit 5 the hello's flags
 * and comm and then (offset, value) pairs written over the good hello.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../hpd.h"
#include "../../proto/ring.h"
#include "../../proto/socket_proto.h"

#define RING_DATA	(64U << 10)

static char outdir[] = "/tmp/hp_fuzz_hello.XXXXXX";
static struct hpd_rule all_rule;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct hp_pipeline_opts po = { .unwind_workers = 1 };

	(void)argc;
	(void)argv;
	hpd_verbosity = -1;	/* quiet */
	if (!mkdtemp(outdir) || hpd_loop_init() < 0)
		abort();
	hpd_opts.outdir = outdir;
	hpd_opts.private_mode = 1;
	hpd_pipe = hp_pipeline_new(&po);
	if (!hpd_pipe)
		abort();
	all_rule.all = 1;
	all_rule.formats = HP_OUT_TEXT;
	snprintf(all_rule.prefix, sizeof(all_rule.prefix), "%s/p", outdir);
	return 0;
}

/* Profiles written by sessions the loop ended: gone before the next input. */
static void clean_outdir(void)
{
	DIR *d = opendir(outdir);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (e->d_name[0] != '.' || e->d_name[1] > '.')
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

/* A descriptor of one kind, as a client might send in place of another. */
static int make_fd(unsigned kind, unsigned data)
{
	int fd, p[2];
	size_t len;
	void *m;

	switch (kind % 11) {
	case 0:		/* a good ring */
	case 1:		/* ... with its data size announced wrong */
		fd = memfd_create("fuzz-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
		if (fd < 0 || ftruncate(fd, HEAPPROFD_CTL_SIZE + RING_DATA))
			return fd;
		m = hp_ring_map_fd(fd, 1, HEAPPROFD_CTL_SIZE, RING_DATA, &len);
		if (m != MAP_FAILED) {
			hp_ring_format(m, HEAPPROFD_CTL_SIZE, RING_DATA, 0, 0);
			if (kind % 11 == 1)
				((uint8_t *)m)[data % HEAPPROFD_CTL_SIZE] ^= (uint8_t)(data >> 8) | 1;
			munmap(m, len);
		}
		return fd;
	case 2:
		return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	case 3:
		return open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	case 4:
		return open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	case 5:
		return (int)syscall(SYS_pidfd_open, getpid(), 0);
	case 6:
		return open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	case 7:		/* a pipe, its write end closed */
		if (pipe2(p, O_CLOEXEC))
			return -1;
		close(p[1]);
		return p[0];
	case 8:
		return open("/dev/null", O_RDWR | O_CLOEXEC);
	case 9:		/* the pidfd of another process (our parent) */
		return (int)syscall(SYS_pidfd_open, getppid(), 0);
	default:	/* a memfd too small for any ring */
		fd = memfd_create("fuzz-small", MFD_CLOEXEC);
		if (fd >= 0 && ftruncate(fd, data % 8192))
			return fd;
		return fd;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t n)
{
	char cbuf[CMSG_SPACE(8 * sizeof(int)) + CMSG_SPACE(sizeof(struct ucred))];
	struct ucred cred = { .pid = getpid(), .uid = getuid(), .gid = getgid() };
	int fds[8], nfds, sv[2], i;
	struct iovec iov;
	struct msghdr mh;
	struct cmsghdr *cm;
	uint8_t msg[sizeof(struct hp_hello) + 16];
	size_t mlen;

	if (n < 1)
		return 0;
	nfds = in[0] & 7;
	if (n < 1 + (size_t)nfds)
		return 0;
	for (i = 0; i < nfds; i++)
		fds[i] = make_fd(in[1 + i], (unsigned)n * 2654435761U);
	for (i = 0; i < nfds; i++)
		if (fds[i] < 0) {
			while (nfds--)
				if (fds[nfds] >= 0)
					close(fds[nfds]);
			return 0;
		}
	mlen = n - 1 - nfds;
	if (mlen > sizeof(msg))
		mlen = sizeof(msg);
	memcpy(msg, in + 1 + nfds, mlen);
	if (in[0] & 32) {
		const uint8_t *rest = in + 1 + nfds;
		size_t k = n - 1 - nfds;
		struct hp_hello h = {
			.magic = HP_HELLO_MAGIC, .version = HP_PROTO_VERSION,
			.pid = (uint32_t)getpid(), .data_size = RING_DATA,
			.ctl_size = HEAPPROFD_CTL_SIZE, .nfds = (uint32_t)nfds,
		};

		if (k >= 4) {
			memcpy(&h.flags, rest, 4);
			rest += 4, k -= 4;
		}
		if (k >= sizeof(h.comm)) {
			memcpy(h.comm, rest, sizeof(h.comm));
			rest += sizeof(h.comm), k -= sizeof(h.comm);
		}
		for (; k >= 2; rest += 2, k -= 2)
			((uint8_t *)&h)[rest[0] % sizeof(h)] = rest[1];
		memcpy(msg, &h, sizeof(h));
		mlen = sizeof(h);
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv))
		abort();
	if (in[0] & 16)
		hpd_rule_add(&all_rule);

	memset(cbuf, 0, sizeof(cbuf));
	memset(&mh, 0, sizeof(mh));
	iov.iov_base = msg;
	iov.iov_len = mlen;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf;
	mh.msg_controllen = 0;
	cm = (struct cmsghdr *)cbuf;
	if (nfds) {
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
		mh.msg_controllen += CMSG_SPACE(nfds * sizeof(int));
		cm = (struct cmsghdr *)(cbuf + mh.msg_controllen);
	}
	if (!(in[0] & 8)) {
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_CREDENTIALS;
		cm->cmsg_len = CMSG_LEN(sizeof(cred));
		memcpy(CMSG_DATA(cm), &cred, sizeof(cred));
		mh.msg_controllen += CMSG_SPACE(sizeof(cred));
	}
	if (!mh.msg_controllen)
		mh.msg_control = NULL;

	/* The daemon's end first: it asks for credentials before the send. */
	if (hpd_socket_adopt(sv[0]))
		close(sv[0]);
	if (sendmsg(sv[1], &mh, MSG_NOSIGNAL) < 0 && mlen)
		abort();
	for (i = 0; i < nfds; i++)
		close(fds[i]);
	hpd_loop_run(0);		/* the hello */
	close(sv[1]);			/* the client hangs up */
	hpd_loop_run(0);
	for (struct hpd_session *s = hpd_sessions; s; s = s->next)
		if (!s->ending)
			hpd_session_end(s, NULL);
	hpd_sessions_reap();
	hpd_socket_expire(~0ULL);	/* a connection that never said hello */
	if (in[0] & 16)
		hpd_rule_del(&all_rule);
	clean_outdir();
	return 0;
}
