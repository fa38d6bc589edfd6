// SPDX-License-Identifier: GPL-2.0
/*
 * A hostile producer for the end-to-end tests: it speaks the user-space
 * transport handshake correctly and then abuses its own ring.
 *
 *   fake_client SOCKET garbage   committed records with bad types/lengths
 *   fake_client SOCKET corrupt   tail far beyond head, then a bad stamp
 *   fake_client SOCKET shrink    truncates the ring memfd under the daemon
 *   fake_client SOCKET stall     reserves a record and never commits it
 *   fake_client SOCKET inflight  not hostile: a writer caught between its
 *                                reservation and its commit word by a
 *                                detach (it asks for it itself), with 8
 *                                allocation records of 1 MiB at
 *                                inflight_site behind it; it commits once
 *                                the gate has closed, prints the answer
 *                                ("detach: ok prefix=P"), exits 0
 *   fake_client SOCKET badhello  a hello with a wrong magic and no fds
 *   fake_client SOCKET evilname  a hello whose comm is "../../hp_evil"
 *   fake_client kernel MODE      the same abuse of a ring from /dev/heapprofd
 *                                (garbage, corrupt, stall), or inflight
 *
 * Exit status 0 means it did its damage; whether the daemon survived is
 * for the test to check.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../proto/ring.h"
#include "../../proto/socket_proto.h"

#define DATA (64u << 10)

static int kernel_fd = -1;

static void wake(int efd)
{
	uint64_t one = 1;

	if (kernel_fd >= 0) {
		ioctl(kernel_fd, HEAPPROFD_IOC_WAKE);
		return;
	}
	if (write(efd, &one, sizeof(one)) < 0)
		perror("eventfd");
}

/* Register with the module and map the session's ring. */
static int kernel_open(struct hp_ring *r)
{
	struct heapprofd_register reg = { .size = sizeof(reg), .data_size = DATA };
	struct heapprofd_fd_arg fa = { .size = sizeof(fa) };
	int dev = open("/dev/heapprofd", O_RDWR), fd;
	size_t len;
	void *m;

	if (dev < 0)
		return -1;
	fd = ioctl(dev, HEAPPROFD_IOC_REGISTER, &reg);
	if (fd < 0)
		return -1;
	fa.slot = HEAPPROFD_FD_MAPS;
	fa.fd = open("/proc/self/maps", O_RDONLY);
	ioctl(fd, HEAPPROFD_IOC_DEPOSIT_FD, &fa);
	fa.slot = HEAPPROFD_FD_MEM;
	fa.fd = open("/proc/self/mem", O_RDONLY);
	ioctl(fd, HEAPPROFD_IOC_DEPOSIT_FD, &fa);
	m = hp_ring_map_fd(fd, 0, reg.ctl_size, DATA, &len);
	if (m == MAP_FAILED || hp_ring_open(r, m, len))
		return -1;
	kernel_fd = fd;
	return 0;
}

#define INFLIGHT_RECORDS	8

/* One exact allocation record of 1 MiB whose stack is this function. */
static __attribute__((noinline)) int inflight_site(struct hp_ring *r, uint64_t seq)
{
	struct heapprofd_rec_alloc *a;

	a = (void *)hp_ring_reserve(r, sizeof(*a), HEAPPROFD_REC_ALLOC);
	if (!a)
		return 0;
	a->hdr.flags = HEAPPROFD_ALLOC_EXACT;
	a->seq = seq;
	a->addr = 0x100000 * seq;
	a->req_size = a->usable_size = a->est_size = 1 << 20;
	a->interval = 4096;
	a->count = 1;
	a->heap_id = HEAPPROFD_HEAP_MALLOC;
	a->tid = (uint32_t)getpid();
	a->arch = HEAPPROFD_ARCH_NATIVE;
	a->nregs = HEAPPROFD_NREGS_NATIVE;
	/* the site itself, no stack */
	a->regs[HEAPPROFD_REG_PC] = (uintptr_t)inflight_site + 1;
	a->regs[HEAPPROFD_REG_SP] = (uintptr_t)__builtin_frame_address(0);
	hp_ring_commit(r, &a->hdr);
	return 1;
}

/* Wait (1 ms steps, bounded) until the gate is open (want 1) or closed. */
static int gate_is(struct hp_ring *r, int want, int secs)
{
	for (int i = 0; i < secs * 1000; i++) {
		if (!!__atomic_load_n(&r->cfg->enabled, __ATOMIC_ACQUIRE) == want)
			return 1;
		usleep(1000);
	}
	return 0;
}

/* Wait (1 ms steps, bounded) until the module says a consumer attached. */
static int attached(struct hp_ring *r, int secs)
{
	for (int i = 0; i < secs * 1000; i++) {
		if (__atomic_load_n(&r->kstate->state, __ATOMIC_ACQUIRE) == HEAPPROFD_STATE_ATTACHED)
			return 1;
		usleep(1000);
	}
	return 0;
}

/*
 * Allocation records as fast as the ring takes them, while a daemon slowed
 * down by the test (HEAPPROFD_TEST_UNWIND_DELAY_US) unwinds them: once its
 * pipeline holds all it may of ours it leaves the rest in the ring, and
 * must say that it is behind, not stopped (uapi consumer.behind), or a
 * client waiting for room would take it for stuck. Prints what it saw.
 */
#define BEHIND_MAX_RECORDS	200000

static int behind(struct hp_ring *r, int efd)
{
	uint64_t seen = 0;
	unsigned full = 0;
	int i = 0;

	if (!gate_is(r, 1, 60) || (kernel_fd >= 0 && !attached(r, 60))) {
		fprintf(stderr, "the daemon never profiled us\n");
		return 3;
	}
	while (i < BEHIND_MAX_RECORDS && full < 60000 && !seen) {
		if (inflight_site(r, (uint64_t)i + 1)) {
			if (!(++i & 63))
				wake(efd);
			continue;
		}
		full++;
		wake(efd);
		seen = __atomic_load_n(&r->cons->behind, __ATOMIC_ACQUIRE);
		usleep(1000);
	}
	printf("behind: %llu after %d records, the ring found full %u times\n",
	       (unsigned long long)seen, i, full);
	fflush(stdout);
	return seen ? 0 : 7;
}

/*
 * Once the daemon profiles us: a record reserved (tail moved) whose commit
 * word is not written yet, records committed behind it, and at once a
 * detach of ourselves on the control socket ($HEAPPROFD_CTL), so that the
 * detach finds the writer mid-record however slow the machine. Once the
 * gate has closed the first record is finished (a free). Prints the
 * daemon's answer ("detach: ok prefix=..."), which comes once the profile
 * is written; every allocation must be in it.
 */
static int inflight(struct hp_ring *r, int sock, int efd)
{
	struct sockaddr_un ca = { .sun_family = AF_UNIX };
	struct pollfd pf = { kernel_fd, POLLIN, 0 };
	struct timeval tv = { 30, 0 };
	struct heapprofd_rec_free *f;
	char msg[1200];
	uint64_t t;
	ssize_t n;
	int ctl, i;

	if (!getenv("HEAPPROFD_CTL"))
		return 2;
	snprintf(ca.sun_path, sizeof(ca.sun_path), "%s", getenv("HEAPPROFD_CTL"));
	ctl = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (ctl < 0 || connect(ctl, (struct sockaddr *)&ca, sizeof(ca)) < 0 ||
	    setsockopt(ctl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		return 2;
	if (!gate_is(r, 1, 60)) {
		fprintf(stderr, "the daemon never enabled the session\n");
		return 3;
	}
	/*
	 * The module opens a session's gate at registration, before any
	 * daemon attached (the first allocations are kept for it), so an open
	 * gate does not say the daemon profiles us yet: a detach sent before
	 * its attach is answered "no profiled process". The module marks the
	 * attach in kstate; the daemon enables the session in the same turn
	 * of its loop, before it reads our request.
	 */
	if (kernel_fd >= 0 && !attached(r, 60)) {
		fprintf(stderr, "no daemon attached to the session\n");
		return 3;
	}
	t = __atomic_fetch_add(&r->prod->tail, sizeof(*f), __ATOMIC_ACQ_REL);
	f = (void *)(r->data + (t & r->mask));
	for (i = 1; i <= INFLIGHT_RECORDS; i++)
		inflight_site(r, i + 1);
	wake(efd);
	snprintf(msg, sizeof(msg), "detach pid=%d", (int)getpid());
	if (send(ctl, msg, strlen(msg), 0) < 0)
		return 2;
	printf("pid %d: a record in flight at %llu, %d behind it, detach asked\n", (int)getpid(),
	       (unsigned long long)t, INFLIGHT_RECORDS);
	fflush(stdout);
	if (!gate_is(r, 0, 30)) {
		/* What the daemon said to the detach, if anything yet. */
		n = recv(ctl, msg, sizeof(msg) - 1, MSG_DONTWAIT);
		msg[n > 0 ? n : 0] = 0;
		printf("pid %d: the gate is still open 30 s after the detach request (head %llu tail %llu); the daemon's answer so far: %s\n",
		       (int)getpid(), (unsigned long long)__atomic_load_n(&r->cons->head, __ATOMIC_ACQUIRE),
		       (unsigned long long)__atomic_load_n(&r->prod->tail, __ATOMIC_ACQUIRE),
		       n > 0 ? msg : "none");
		return 4;
	}
	usleep(10000);		/* a writer preempted a while longer */
	f->hdr.type = HEAPPROFD_REC_FREE;
	f->seq = 1;
	f->addr = 0x42;
	f->heap_id = HEAPPROFD_HEAP_MALLOC;
	f->tid = (uint32_t)getpid();
	__atomic_store_n((uint64_t *)f, hp_commit_word(sizeof(*f), HEAPPROFD_REC_STAMP(t)),
			 __ATOMIC_RELEASE);
	wake(efd);
	n = recv(ctl, msg, sizeof(msg) - 1, 0);
	if (n <= 0)
		return 5;
	msg[n] = 0;
	printf("detach: %s\n", msg);
	fflush(stdout);
	/* The daemon has closed the session (the module: its fd hangs up). */
	if (kernel_fd >= 0)
		return poll(&pf, 1, 10000) == 1 && (pf.revents & POLLHUP) ? 0 : 6;
	return recv(sock, msg, 1, 0) == 0 ? 0 : 6;
}

int main(int argc, char **argv)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int sock, memfd = -1, efd = -1, fds[5], i;
	char cbuf[CMSG_SPACE(sizeof(fds)) + CMSG_SPACE(sizeof(struct ucred))];
	struct ucred cred;
	struct hp_hello h;
	struct hp_hello_reply rep;
	struct iovec iov = { &h, sizeof(h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;
	struct hp_ring r;
	size_t len;
	void *m;
	const char *mode;

	if (argc < 3) {
		fprintf(stderr, "usage: fake_client SOCKET MODE\n");
		return 2;
	}
	mode = argv[2];
	if (!strcmp(argv[1], "kernel")) {
		if (kernel_open(&r)) {
			perror("kernel session");
			return 4;
		}
		efd = -1;
		if (!strcmp(mode, "inflight"))
			return inflight(&r, -1, -1);
		if (!strcmp(mode, "behind"))
			return behind(&r, -1);
		usleep(500000);	/* let the daemon attach */
		goto abuse;
	}
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", argv[1]);
	sock = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	if (connect(sock, (struct sockaddr *)&a, sizeof(a)) < 0) {
		perror("connect");
		return 1;
	}
	memset(&h, 0, sizeof(h));
	if (!strcmp(mode, "badhello")) {
		h.magic = 0xdeadbeef;
		if (send(sock, &h, sizeof(h), 0) < 0)
			return 1;
		recv(sock, &rep, sizeof(rep), 0);
		return rep.status ? 0 : 1;
	}
	memfd = memfd_create(HP_MEMFD_NAME, MFD_CLOEXEC);
	if (ftruncate(memfd, HEAPPROFD_CTL_SIZE + DATA) < 0)
		return 1;
	efd = eventfd(0, EFD_CLOEXEC);
	m = hp_ring_map_fd(memfd, 1, HEAPPROFD_CTL_SIZE, DATA, &len);
	if (m == MAP_FAILED)
		return 1;
	hp_ring_format(m, HEAPPROFD_CTL_SIZE, DATA, 0, 0);
	if (hp_ring_open(&r, m, len))
		return 1;
	if (!strcmp(mode, "oldabi"))	/* a client of an earlier release */
		r.ctl->version = HEAPPROFD_ABI_VERSION - 1;
	fds[0] = memfd;
	fds[1] = efd;
	fds[2] = open("/proc/self/maps", O_RDONLY);
	fds[3] = open("/proc/self/mem", O_RDONLY);
	fds[4] = (int)syscall(SYS_pidfd_open, getpid(), 0);
	h.magic = HP_HELLO_MAGIC;
	h.version = HP_PROTO_VERSION;
	h.pid = getpid();
	h.data_size = DATA;
	h.ctl_size = HEAPPROFD_CTL_SIZE;
	h.nfds = 5;
	if (!strcmp(mode, "evilname"))	/* a name that tries to leave the output dir */
		snprintf(h.comm, sizeof(h.comm), "../../hp_evil");
	else
		snprintf(h.comm, sizeof(h.comm), "fake_%s", mode);
	memset(cbuf, 0, sizeof(cbuf));
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	/* The credentials the daemon believes (socket_proto.h). */
	cred.pid = getpid();
	cred.uid = getuid();
	cred.gid = getgid();
	cm = CMSG_NXTHDR(&mh, cm);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_CREDENTIALS;
	cm->cmsg_len = CMSG_LEN(sizeof(cred));
	memcpy(CMSG_DATA(cm), &cred, sizeof(cred));
	if (sendmsg(sock, &mh, 0) < 0 || recv(sock, &rep, sizeof(rep), 0) != sizeof(rep)) {
		perror("hello");
		return 1;
	}
	if (!strcmp(mode, "oldabi"))	/* refused, and told why */
		return rep.status == -EPROTONOSUPPORT ? 0 : 1;
	if (rep.status) {
		fprintf(stderr, "daemon refused: %d\n", rep.status);
		return 1;
	}
	if (!strcmp(mode, "inflight"))
		return inflight(&r, sock, efd);
	if (!strcmp(mode, "behind"))
		return behind(&r, efd);
	usleep(100000);
abuse:
	if (!strcmp(mode, "garbage")) {
		/* A committed record of an unknown type, then one claiming a huge size. */
		struct heapprofd_rec_hdr *x = hp_ring_reserve(&r, 64, 0x77);

		memset(x + 1, 0xa5, 64 - sizeof(*x));
		hp_ring_commit(&r, x);
		x = hp_ring_reserve(&r, sizeof(struct heapprofd_rec_alloc) + 64, HEAPPROFD_REC_ALLOC);
		memset(x + 1, 0xff, sizeof(struct heapprofd_rec_alloc) + 64 - sizeof(*x));
		hp_ring_commit(&r, x);
		wake(efd);
	} else if (!strcmp(mode, "corrupt")) {
		__atomic_store_n(&r.prod->tail, r.size * 5 + 8, __ATOMIC_RELEASE);
		wake(efd);
		usleep(200000);
		__atomic_store_n(&r.prod->tail, 64, __ATOMIC_RELEASE);
		memset(r.data, 0x5a, 64);
		wake(efd);
	} else if (!strcmp(mode, "shrink") && kernel_fd < 0) {
		struct heapprofd_rec_hdr *x = hp_ring_reserve(&r, 64, HEAPPROFD_REC_MAPS);

		hp_ring_commit(&r, x);
		if (ftruncate(memfd, HEAPPROFD_CTL_SIZE) < 0)
			perror("ftruncate");
		__atomic_store_n(&r.prod->tail, 128, __ATOMIC_RELEASE);
		wake(efd);
	} else if (!strcmp(mode, "stall")) {
		if (!hp_ring_reserve(&r, 64, HEAPPROFD_REC_MAPS))
			return 1;
		wake(efd);
	}
	/* Spam random bytes over the whole ring for a while. */
	for (i = 0; i < 50 && strcmp(mode, "shrink"); i++) {
		size_t k;

		for (k = 0; k < 512; k++)
			r.data[rand() % DATA] = (uint8_t)rand();
		wake(efd);
		usleep(10000);
	}
	usleep(300000);
	return 0;
}
