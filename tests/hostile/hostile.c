// SPDX-License-Identifier: GPL-2.0
/*
 * The hostile local user of security.rst, for tests/hostile/run: each mode is one
 * attack on the root daemon, or a helper the runner needs (timing, /proc
 * figures) that busybox in the VM does not have.
 *
 *   hostile [-u UID] MODE ARGS...
 *
 * -u UID: drop to uid and gid UID, no supplementary groups, before anything
 * else (as root only; no /etc/passwd entry needed), and stay dumpable so
 * that /proc/self/{maps,mem} stay ours.
 *
 * Hellos are protocol 2 (socket_proto.h): a pidfd of the sender follows
 * the four fds. Attacks (SOCK is the daemon's user-space socket; `kernel` instead of SOCK
 * where said registers with /dev/heapprofd). Each prints one line of what
 * it got ("reply STATUS", "noreply", "hup", counts) and, with
 * HOLD = --hold FILE, keeps its connections open until FILE exists (at most
 * 120 s):
 *
 *   forged SOCK|kernel KIND [ARG] [--ip ADDR] [--hold FILE]
 *        a hello whose maps fd is not /proc/self/maps: KIND is
 *        file PATH (a file we wrote), pipe (nothing ever written, the write
 *        end kept open), socket (a socketpair end, never written), big MIB
 *        (a memfd of MIB MiB of maps lines). --ip ADDR: then commit one
 *        ALLOC sample whose IP is ADDR (an address in a forged line).
 *   silent SOCK N [--hold FILE]
 *        N connections that never say hello (nonblocking connects: stops
 *        when the listen backlog stayed full for 1 s); prints
 *        "connected C eagain E other O" at once, then after the hold
 *        "closed X" (how many the daemon closed on us).
 *   sessions SOCK N [--hold FILE]
 *        N valid sessions (64 KiB rings) from this uid, one after another;
 *        prints "accepted A refused R noreply Z".
 *   bigring SOCK BYTES   a hello announcing a data area of BYTES (a sparse
 *        memfd really that big); prints "reply STATUS" or "noreply".
 *   records SOCK KIND [--hold FILE]   a valid session, then one bad record:
 *        huge    a committed ALLOC record claiming 1 GiB (ring 2 GiB if the
 *                daemon takes it, else 64 MiB: then the length is impossible)
 *        freebig a FREE record 32 MiB long (FREE records are 32 bytes)
 *        stack   an ALLOC record whose stack_len claims 1 GiB in 512 bytes
 *        tail    tail 5 ring sizes ahead of head
 *        Prints "reply STATUS ring BYTES" and then "hup AFTER_MS" when the
 *        daemon closed the session within --hup-ms MS (default 3000), or
 *        "alive" if it did not; then, if it closes it within 30 s more,
 *        "late AFTER_MS" (a slow daemon told apart from one that never ends
 *        the session).
 *   borrow SOCK [--hold FILE]   connect() in a child, let it exit, send the
 *        hello from the parent: prints "parent P child C reply STATUS".
 *
 * Helpers:
 *   statdev PATH          "MAJ:MIN INO" as /proc/PID/maps writes them
 *   symoff LIB SYMBOL     offset of SYMBOL from LIB's load base (hex)
 *   fifo_reader PATH      exit 1 if someone has the FIFO open for reading
 *                         (a nonblocking open for write succeeds), 0 if not
 *                         (ENXIO), 2 on another error
 *   timeit LIMIT_MS ERRFILE [NAME=VALUE | -NAME]... CMD ARGS...
 *        run CMD with stderr to ERRFILE (stdout to /dev/null), NAME set or
 *        unset in its environment only;
 *        prints "elapsed_ms N exit S" or "elapsed_ms N killed" (SIGKILL
 *        to its process group at LIMIT_MS); CLOCK_MONOTONIC
 *   procstat PID WINDOW_MS   "rss_kb R hwm_kb H cpu_pct P fds F threads T"
 *        (CPU: utime+stime over the window, in % of one core)
 *   watch PATH... --hold FILE   print "watching", then "open PATH" for
 *        each open of a watched file (inotify IN_OPEN) until FILE exists
 *   exec CMD ARGS...      (with -u) run CMD as that user
 */
#include <dlfcn.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../proto/ring.h"
#include "../../proto/socket_proto.h"

#define SMALL_RING	(64ULL << 10)
#define HOLD_MAX_MS	120000

static const char *hold_file;
static int hup_ms = 3000;	/* records: the bound on ending the session */

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void out(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void out(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void hold(void)
{
	uint64_t end = now_ms() + HOLD_MAX_MS;

	if (!hold_file)
		return;
	while (access(hold_file, F_OK) && now_ms() < end)
		sleep_ms(20);
}

static void raise_nofile(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl)) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void drop_to(unsigned id)
{
	if (setgroups(0, NULL) || setresgid(id, id, id) || setresuid(id, id, id)) {
		perror("hostile: dropping privileges");
		exit(3);
	}
	if (getuid() != id || geteuid() != id || getgid() != id) {
		fprintf(stderr, "hostile: still privileged\n");
		exit(3);
	}
	/* A uid change makes us undumpable: /proc/self would be root's. */
	prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
}

static int connect_to(const char *path, int nonblock)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);

	if (fd < 0)
		return -errno;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/* A memfd ring of data bytes, formatted; mapped unless too big to touch. */
struct ring {
	int memfd, efd;
	struct hp_ring r;
	int mapped;
};

static int ring_make(struct ring *x, uint64_t data)
{
	size_t len;
	void *m;

	memset(x, 0, sizeof(*x));
	x->memfd = memfd_create(HP_MEMFD_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	x->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (x->memfd < 0 || x->efd < 0 || ftruncate(x->memfd, (off_t)(HEAPPROFD_CTL_SIZE + data)))
		return -1;
	m = hp_ring_map_fd(x->memfd, 1, HEAPPROFD_CTL_SIZE, data, &len);
	if (m == MAP_FAILED) {
		/* Only the control area: enough for a hello. */
		m = mmap(NULL, HEAPPROFD_CTL_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, x->memfd, 0);
		if (m == MAP_FAILED)
			return -1;
		hp_ring_format(m, HEAPPROFD_CTL_SIZE, data, 0, 0);
		return 0;
	}
	hp_ring_format(m, HEAPPROFD_CTL_SIZE, data, 0, 0);
	if (hp_ring_open(&x->r, m, len))
		return -1;
	x->mapped = 1;
	return 0;
}

static void ring_wake(struct ring *x)
{
	uint64_t one = 1;

	if (write(x->efd, &one, sizeof(one)) < 0)
		perror("eventfd");
}

/*
 * Send a hello with these fds (ring, eventfd, maps, mem): a pidfd of
 * ourselves goes after them (protocol 2), then /proc/self/exe when given
 * as a fifth.
 */
static int send_hello(int sock, uint64_t data, const int *in, int nin, const char *comm)
{
	char cbuf[CMSG_SPACE(sizeof(int) * HP_HELLO_FDS_MAX)];
	int fds[HP_HELLO_FDS_MAX], nfds = 0, i;
	struct hp_hello h;
	struct iovec iov = { &h, sizeof(h) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct cmsghdr *cm;

	for (i = 0; i < 4 && i < nin; i++)
		fds[nfds++] = in[i];
	fds[nfds] = (int)syscall(SYS_pidfd_open, getpid(), 0);
	if (fds[nfds] < 0)
		return -errno;
	nfds++;
	if (nin > 4)
		fds[nfds++] = in[4];
	memset(&h, 0, sizeof(h));
	memset(cbuf, 0, sizeof(cbuf));
	h.magic = HP_HELLO_MAGIC;
	h.version = HP_PROTO_VERSION;
	h.pid = (uint32_t)getpid();
	h.data_size = data;
	h.ctl_size = HEAPPROFD_CTL_SIZE;
	h.nfds = (uint32_t)nfds;
	snprintf(h.comm, sizeof(h.comm), "%s", comm);
	mh.msg_control = cbuf;
	mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * nfds);
	i = sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)sizeof(h) ? 0 : -errno;
	close(fds[4]);
	return i;
}

/* 1: got a reply (status in *st), 0: none within ms, -1: closed/error. */
static int get_reply(int sock, int ms, int *st)
{
	struct pollfd p = { .fd = sock, .events = POLLIN };
	struct hp_hello_reply rep;
	ssize_t n;

	if (poll(&p, 1, ms) <= 0)
		return 0;
	n = recv(sock, &rep, sizeof(rep), MSG_DONTWAIT);
	if (n != (ssize_t)sizeof(rep) || rep.magic != HP_REPLY_MAGIC)
		return -1;
	*st = rep.status;
	return 1;
}

static void print_reply(int rc, int st)
{
	if (rc > 0)
		out("reply %d", st);
	else if (rc == 0)
		out("noreply");
	else
		out("closed");
}

/* Has the daemon closed this connection (within ms)? */
static int wait_hup(int sock, int ms)
{
	uint64_t end = now_ms() + (uint64_t)ms;
	char c;

	for (;;) {
		struct pollfd p = { .fd = sock, .events = POLLIN | POLLRDHUP };
		int left = (int)(end - now_ms());

		if ((int64_t)(end - now_ms()) <= 0)
			return 0;
		if (poll(&p, 1, left) > 0) {
			if (p.revents & (POLLHUP | POLLERR | POLLRDHUP))
				return 1;
			if (recv(sock, &c, 1, MSG_DONTWAIT) == 0)
				return 1;
			sleep_ms(5);
		}
	}
}

/* One ALLOC sample at ip, written by the rules (a valid record). */
static int put_sample(struct hp_ring *r, uint64_t ip)
{
	struct heapprofd_rec_alloc *a;
	uint64_t sp = (uint64_t)(uintptr_t)__builtin_frame_address(0);

	a = (void *)hp_ring_reserve(r, sizeof(*a), HEAPPROFD_REC_ALLOC);
	if (!a)
		return -1;
	a->seq = 1;
	a->addr = 0x10000;
	a->req_size = a->usable_size = 1 << 20;
	a->est_size = 1 << 20;
	a->interval = 4096;
	a->count = 256;
	a->heap_id = HEAPPROFD_HEAP_MALLOC;
	a->tid = (uint32_t)syscall(SYS_gettid);
	a->arch = HEAPPROFD_ARCH_NATIVE;	/* the daemon's, which unwinds it */
	a->timestamp_ns = 1;
	a->stack_top = sp + 4096;
	a->nregs = HEAPPROFD_NREGS_NATIVE;
	a->stack_len = 0;
	memset(a->regs, 0, sizeof(a->regs));
	a->regs[HEAPPROFD_REG_PC] = ip;
	a->regs[HEAPPROFD_REG_SP] = sp;
	a->regs[HEAPPROFD_REG_FP] = 0;
	a->stack_reused = 0;
	a->code_gen = 0;
	hp_ring_commit(r, &a->hdr);
	return 0;
}

/* ---------------------------------------------------------------- */

/* The maps fd of KIND; *keep is an fd we must keep open (or -1). */
static int forged_maps_fd(const char *kind, const char *arg, int *keep)
{
	int fd = -1, p[2];

	*keep = -1;
	if (!strcmp(kind, "file")) {
		fd = open(arg, O_RDONLY | O_CLOEXEC);
	} else if (!strcmp(kind, "pipe")) {
		if (pipe2(p, O_CLOEXEC))
			return -1;
		fd = p[0];
		*keep = p[1];
	} else if (!strcmp(kind, "socket")) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p))
			return -1;
		fd = p[0];
		*keep = p[1];
	} else if (!strcmp(kind, "big")) {
		size_t want = (size_t)strtoul(arg, NULL, 0) << 20, have = 0, n;
		char line[160];
		unsigned long i = 0;
		char *buf = malloc(1 << 20);
		size_t bl = 0;

		fd = memfd_create("maps", MFD_CLOEXEC);
		if (fd < 0 || !buf)
			return -1;
		while (have < want) {
			uint64_t a = 0x100000000ULL + (uint64_t)i * 0x2000;

			n = (size_t)snprintf(line, sizeof(line),
					     "%012" PRIx64 "-%012" PRIx64 " r-xp 00000000 00:00 0 "
					     "/nonexistent/hostile/lib%lu.so\n", a, a + 0x1000, i);
			i++;
			if (bl + n > (1 << 20)) {
				if (write(fd, buf, bl) != (ssize_t)bl)
					return -1;
				bl = 0;
			}
			memcpy(buf + bl, line, n);
			bl += n;
			have += n;
		}
		if (bl && write(fd, buf, bl) != (ssize_t)bl)
			return -1;
		free(buf);
		lseek(fd, 0, SEEK_SET);
	} else {
		fprintf(stderr, "forged: unknown kind %s\n", kind);
		exit(2);
	}
	return fd;
}

/* Register with the module, deposit the forged maps fd, map the ring. */
static int kernel_session(struct hp_ring *r, int maps_fd, int *sfd)
{
	struct heapprofd_register reg = { .size = sizeof(reg), .data_size = SMALL_RING };
	struct heapprofd_fd_arg fa = { .size = sizeof(fa) };
	int dev = open("/dev/heapprofd", O_RDWR | O_CLOEXEC), fd;
	size_t len;
	void *m;

	if (dev < 0)
		return -1;
	fd = ioctl(dev, HEAPPROFD_IOC_REGISTER, &reg);
	if (fd < 0)
		return -1;
	fa.slot = HEAPPROFD_FD_MAPS;
	fa.fd = maps_fd;
	if (ioctl(fd, HEAPPROFD_IOC_DEPOSIT_FD, &fa))
		return -2;	/* the module would not take it: refused */
	fa.slot = HEAPPROFD_FD_MEM;
	fa.fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	ioctl(fd, HEAPPROFD_IOC_DEPOSIT_FD, &fa);
	m = hp_ring_map_fd(fd, 0, reg.ctl_size, SMALL_RING, &len);
	if (m == MAP_FAILED || hp_ring_open(r, m, len))
		return -1;
	*sfd = fd;
	return 0;
}

static int do_forged(int argc, char **argv)
{
	const char *sock = argv[0], *kind = argv[1], *arg = NULL;
	uint64_t ip = 0;
	int i, keep, maps, rc, st = 0;

	i = 2;
	if (strcmp(kind, "pipe") && strcmp(kind, "socket"))
		arg = argv[i++];
	for (; i < argc; i++)
		if (!strcmp(argv[i], "--ip") && i + 1 < argc)
			ip = strtoull(argv[++i], NULL, 0);
	maps = forged_maps_fd(kind, arg, &keep);
	if (maps < 0) {
		perror("forged: maps fd");
		return 1;
	}
	/* The runner's clock for the answer starts here, not while a 64 MiB
	 * file is being written (slow in an emulated guest). */
	out("made");
	if (!strcmp(sock, "kernel")) {
		struct hp_ring r;
		uint64_t end = now_ms() + 5000;	/* the runner looks after 6 s */
		int sfd;

		rc = kernel_session(&r, maps, &sfd);
		if (rc == -2) {
			out("refused");
			hold();
			return 0;
		}
		if (rc) {
			perror("forged: kernel session");
			return 4;
		}
		while (__atomic_load_n(&r.kstate->state, __ATOMIC_ACQUIRE) != HEAPPROFD_STATE_ATTACHED &&
		       now_ms() < end)
			sleep_ms(10);
		out(r.kstate->state == HEAPPROFD_STATE_ATTACHED ? "attached" : "noattach");
		if (ip && !put_sample(&r, ip))
			ioctl(sfd, HEAPPROFD_IOC_WAKE);
		hold();
		return 0;
	} else {
		struct ring x;
		int s = connect_to(sock, 0), fds[4];

		if (s < 0 || ring_make(&x, SMALL_RING)) {
			fprintf(stderr, "forged: connect/ring: %s\n", strerror(-s));
			return 1;
		}
		fds[0] = x.memfd;
		fds[1] = x.efd;
		fds[2] = maps;
		fds[3] = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
		if (send_hello(s, SMALL_RING, fds, 4, "hostile_forged")) {
			perror("forged: hello");
			return 1;
		}
		rc = get_reply(s, 5000, &st);
		print_reply(rc, st);
		if (rc > 0 && !st && ip && x.mapped && !put_sample(&x.r, ip))
			ring_wake(&x);
		hold();
		(void)keep;
		return 0;
	}
}

static int do_silent(int argc, char **argv)
{
	int n = atoi(argv[1]), i, c = 0, eagain = 0, other = 0, closed = 0, *fds;

	(void)argc;
	raise_nofile();
	fds = calloc((size_t)n, sizeof(int));
	if (!fds)
		return 1;
	for (i = 0; i < n; i++) {
		int fd = connect_to(argv[0], 1);
		uint64_t full_since = 0;

		/* EAGAIN: the backlog is full for now; it stays full only if
		 * the daemon stopped accepting (1 s of it ends the attack). */
		while (fd == -EAGAIN) {
			eagain++;
			if (!full_since)
				full_since = now_ms();
			else if (now_ms() - full_since > 1000)
				break;
			sleep_ms(10);
			fd = connect_to(argv[0], 1);
		}
		if (fd == -EAGAIN)
			break;
		if (fd < 0) {
			other++;
			if (other == 1)
				fprintf(stderr, "silent: connect %d: %s\n", i, strerror(-fd));
			if (fd == -EMFILE || fd == -ENFILE)
				break;
			continue;
		}
		fds[c++] = fd;
	}
	out("connected %d eagain %d other %d", c, eagain, other);
	hold();
	for (i = 0; i < c; i++) {
		struct pollfd p = { .fd = fds[i], .events = POLLIN | POLLRDHUP };
		char b;

		if (poll(&p, 1, 0) > 0 &&
		    ((p.revents & (POLLHUP | POLLERR | POLLRDHUP)) || recv(fds[i], &b, 1, MSG_DONTWAIT) == 0))
			closed++;
	}
	out("closed %d", closed);
	return 0;
}

static int do_sessions(int argc, char **argv)
{
	int n = atoi(argv[1]), i, acc = 0, ref = 0, none = 0, conn_fail = 0;
	uint64_t end = now_ms() + 60000;

	(void)argc;
	raise_nofile();
	for (i = 0; i < n && now_ms() < end; i++) {
		struct ring x;
		int s = connect_to(argv[0], 0), fds[4], st = 0, rc;

		if (s < 0) {
			conn_fail++;
			continue;
		}
		if (ring_make(&x, SMALL_RING)) {
			perror("sessions: ring");
			return 1;
		}
		fds[0] = x.memfd;
		fds[1] = x.efd;
		fds[2] = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
		fds[3] = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
		if (fds[2] < 0 || fds[3] < 0 || send_hello(s, SMALL_RING, fds, 4, "hostile_sess")) {
			conn_fail++;
			close(s);
		} else {
			rc = get_reply(s, 2000, &st);
			if (rc > 0 && !st)
				acc++;
			else if (rc > 0 || rc < 0)
				ref++;
			else
				none++;
		}
		/* The daemon has its copies; we keep only the connection. */
		close(fds[2]);
		close(fds[3]);
		close(x.efd);
		close(x.memfd);
		if (x.mapped)
			munmap(x.r.map, x.r.map_len);
	}
	out("accepted %d refused %d noreply %d connfail %d tried %d", acc, ref, none, conn_fail, i);
	hold();
	return 0;
}

static int do_bigring(int argc, char **argv)
{
	uint64_t data = strtoull(argv[1], NULL, 0);
	int s = connect_to(argv[0], 0), fds[4], rc, st = 0;
	struct ring x;

	(void)argc;
	if (s < 0 || ring_make(&x, data)) {
		perror("bigring");
		return 1;
	}
	fds[0] = x.memfd;
	fds[1] = x.efd;
	fds[2] = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	fds[3] = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	if (send_hello(s, data, fds, 4, "hostile_bigring"))
		return 1;
	rc = get_reply(s, 5000, &st);
	print_reply(rc, st);
	hold();
	return 0;
}

/* A committed-looking record header at position pos, len bytes, no checks. */
static void raw_record(struct hp_ring *r, uint64_t pos, uint32_t len, uint16_t type)
{
	struct heapprofd_rec_hdr *h = (void *)(r->data + (pos & r->mask));

	h->type = type;
	h->flags = 0;
	h->resv = 0;
	__atomic_store_n((uint64_t *)h, hp_commit_word(len, HEAPPROFD_REC_STAMP(pos)), __ATOMIC_RELEASE);
}

static int do_records(int argc, char **argv)
{
	const char *kind = argv[1];
	uint64_t data = !strcmp(kind, "huge") ? (2ULL << 30) : (64ULL << 20), t0;

	if (argc > 2)	/* the ring to ask for first (a VM has no 2 GiB to lose) */
		data = strtoull(argv[2], NULL, 0);
	int s, fds[4], rc, st = 0;
	struct ring x;

	(void)argc;
again:
	s = connect_to(argv[0], 0);
	if (s < 0 || ring_make(&x, data) || !x.mapped) {
		perror("records");
		return 1;
	}
	fds[0] = x.memfd;
	fds[1] = x.efd;
	fds[2] = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	fds[3] = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	if (send_hello(s, data, fds, 4, "hostile_records"))
		return 1;
	rc = get_reply(s, 5000, &st);
	if (rc > 0 && st && data > (64ULL << 20)) {
		/* Refused (rings over 64 MiB): then a 1 GiB length is impossible. */
		out("reply %d ring %" PRIu64, st, data);
		close(s);
		munmap(x.r.map, x.r.map_len);
		close(x.memfd);
		close(x.efd);
		data = 64ULL << 20;
		goto again;
	}
	if (rc <= 0 || st) {
		print_reply(rc, st);
		return 0;
	}
	out("reply %d ring %" PRIu64, st, data);
	sleep_ms(100);
	if (!strcmp(kind, "huge")) {
		uint32_t len = (1U << 30) - 8;

		raw_record(&x.r, 0, len, HEAPPROFD_REC_ALLOC);
		__atomic_store_n(&x.r.prod->tail, (uint64_t)len, __ATOMIC_RELEASE);
	} else if (!strcmp(kind, "freebig")) {
		uint32_t len = 32U << 20;
		struct heapprofd_rec_free *f = (void *)x.r.data;

		f->seq = 1;
		f->addr = 0x10000;
		raw_record(&x.r, 0, len, HEAPPROFD_REC_FREE);
		__atomic_store_n(&x.r.prod->tail, (uint64_t)len, __ATOMIC_RELEASE);
	} else if (!strcmp(kind, "stack")) {
		struct heapprofd_rec_alloc *a = (void *)x.r.data;

		memset(a, 0, 512);
		a->arch = HEAPPROFD_ARCH_NATIVE;
		a->nregs = HEAPPROFD_NREGS_NATIVE;
		a->interval = 4096;
		a->est_size = 4096;
		a->count = 1;
		a->stack_len = 1U << 30;
		a->stack_top = 0x7fff00000000ULL;
		a->regs[HEAPPROFD_REG_SP] = a->stack_top - (1U << 30);
		raw_record(&x.r, 0, 512, HEAPPROFD_REC_ALLOC);
		__atomic_store_n(&x.r.prod->tail, 512, __ATOMIC_RELEASE);
	} else if (!strcmp(kind, "tail")) {
		raw_record(&x.r, 0, 64, HEAPPROFD_REC_FREE);
		__atomic_store_n(&x.r.prod->tail, x.r.size * 5 + 64, __ATOMIC_RELEASE);
	} else {
		fprintf(stderr, "records: unknown kind %s\n", kind);
		return 2;
	}
	ring_wake(&x);
	t0 = now_ms();
	if (wait_hup(s, hup_ms)) {
		out("hup %" PRIu64, now_ms() - t0);
	} else {
		out("alive");
		if (wait_hup(s, 30000))
			out("late %" PRIu64, now_ms() - t0);
	}
	hold();
	return 0;
}

static int do_borrow(int argc, char **argv)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0), fds[5], nfds = 4, rc, st = 0, ws;
	struct ring x;
	pid_t c;

	(void)argc;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", argv[0]);
	if (s < 0 || ring_make(&x, SMALL_RING))
		return 1;
	c = fork();
	if (c == 0)
		_exit(connect(s, (struct sockaddr *)&a, sizeof(a)) ? 1 : 0);
	if (c < 0 || waitpid(c, &ws, 0) != c || !WIFEXITED(ws) || WEXITSTATUS(ws)) {
		fprintf(stderr, "borrow: the child's connect failed\n");
		return 1;
	}
	/* The child is gone and reaped: its pid is free for anyone. */
	fds[0] = x.memfd;
	fds[1] = x.efd;
	fds[2] = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	fds[3] = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	fds[4] = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (fds[4] >= 0)
		nfds = 5;
	if (send_hello(s, SMALL_RING, fds, nfds, "hostile_borrow"))
		return 1;
	rc = get_reply(s, 5000, &st);
	printf("parent %d child %d ", (int)getpid(), (int)c);
	print_reply(rc, st);
	hold();
	return 0;
}

/* ---------------------------------------------------------------- */

static int do_statdev(const char *path)
{
	struct stat st;

	if (stat(path, &st)) {
		perror(path);
		return 1;
	}
	out("%02x:%02x %lu", major(st.st_dev), minor(st.st_dev), (unsigned long)st.st_ino);
	return 0;
}

static int do_symoff(const char *lib, const char *sym)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL), *p;
	Dl_info di;

	if (!h || !(p = dlsym(h, sym)) || !dladdr(p, &di)) {
		fprintf(stderr, "symoff: %s\n", dlerror());
		return 1;
	}
	out("0x%lx", (unsigned long)((char *)p - (char *)di.dli_fbase));
	return 0;
}

static int do_fifo_reader(const char *path)
{
	int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0) {
		close(fd);
		return 1;
	}
	return errno == ENXIO ? 0 : 2;
}

static int do_timeit(int argc, char **argv)
{
	unsigned limit = (unsigned)atoi(argv[0]);
	uint64_t t0 = now_ms(), el;
	int ws, killed = 0;
	pid_t c;

	(void)argc;
	c = fork();
	if (c == 0) {
		int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		int nul = open("/dev/null", O_WRONLY | O_CLOEXEC), k = 2;

		setpgid(0, 0);
		if (fd >= 0)
			dup2(fd, 2);
		if (nul >= 0)
			dup2(nul, 1);
		for (; argv[k] && (strchr(argv[k], '=') || argv[k][0] == '-'); k++)
			if (argv[k][0] == '-')
				unsetenv(argv[k] + 1);
			else
				putenv(argv[k]);
		if (!argv[k])
			_exit(127);
		execvp(argv[k], argv + k);
		_exit(127);
	}
	if (c < 0)
		return 1;
	setpgid(c, c);
	for (;;) {
		pid_t w = waitpid(c, &ws, WNOHANG);

		if (w == c)
			break;
		if (!killed && now_ms() - t0 > limit) {
			el = now_ms() - t0;
			kill(-c, SIGKILL);
			kill(c, SIGKILL);
			killed = 1;
		}
		sleep_ms(1);
	}
	if (killed) {
		out("elapsed_ms %" PRIu64 " killed", el);
		return 0;
	}
	el = now_ms() - t0;
	out("elapsed_ms %" PRIu64 " exit %d", el, WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws));
	return 0;
}

static int read_stat(int pid, unsigned long long *ticks)
{
	char p[64], b[4096], *q;
	unsigned long long ut, st;
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/stat", pid);
	fd = open(p, O_RDONLY);
	if (fd < 0)
		return -1;
	n = read(fd, b, sizeof(b) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	b[n] = 0;
	q = strrchr(b, ')');
	/* after ")": state(3) ... utime(14) stime(15) */
	if (!q || sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
		return -1;
	*ticks = ut + st;
	return 0;
}

static long status_kb(int pid, const char *key)
{
	char p[64], line[256];
	size_t kl = strlen(key);
	long v = -1;
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%d/status", pid);
	f = fopen(p, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':')
			v = atol(line + kl + 1);
	fclose(f);
	return v;
}

static int do_procstat(int argc, char **argv)
{
	int pid = atoi(argv[0]), fds = 0;
	unsigned window = (unsigned)atoi(argv[1]);
	unsigned long long a, b;
	uint64_t t0, t1;
	char p[64];
	struct dirent *d;
	DIR *dir;

	(void)argc;
	t0 = now_ms();
	if (read_stat(pid, &a))
		return 1;
	sleep_ms(window);
	t1 = now_ms();
	if (read_stat(pid, &b))
		return 1;
	snprintf(p, sizeof(p), "/proc/%d/fd", pid);
	dir = opendir(p);
	while (dir && (d = readdir(dir)))
		fds += d->d_name[0] != '.';
	if (dir)
		closedir(dir);
	out("rss_kb %ld hwm_kb %ld cpu_pct %llu fds %d threads %ld", status_kb(pid, "VmRSS"),
	    status_kb(pid, "VmHWM"),
	    (b - a) * 1000ULL * 100 / (unsigned long long)sysconf(_SC_CLK_TCK) / (t1 - t0 ? t1 - t0 : 1),
	    fds, status_kb(pid, "Threads"));
	return 0;
}

static int do_watch(int argc, char **argv)
{
	int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK), i, *wd;
	uint64_t end = now_ms() + HOLD_MAX_MS;
	char buf[4096] __attribute__((aligned(8)));

	wd = calloc((size_t)argc, sizeof(int));
	if (fd < 0 || !wd)
		return 1;
	for (i = 0; i < argc; i++) {
		wd[i] = inotify_add_watch(fd, argv[i], IN_OPEN);
		if (wd[i] < 0) {
			fprintf(stderr, "watch %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
	}
	out("watching");
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, 50) > 0 && (n = read(fd, buf, sizeof(buf))) > 0) {
			for (char *q = buf; q < buf + n;) {
				struct inotify_event *e = (void *)q;

				for (i = 0; i < argc; i++)
					if (wd[i] == e->wd)
						out("open %s", argv[i]);
				q += sizeof(*e) + e->len;
			}
			continue;
		}
		if ((hold_file && !access(hold_file, F_OK)) || now_ms() > end)
			break;
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: hostile [-u UID] MODE ARGS... (see the header of tests/hostile/hostile.c)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *mode;
	int i;

	signal(SIGPIPE, SIG_IGN);
	argv++;
	argc--;
	if (argc >= 2 && !strcmp(argv[0], "-u")) {
		drop_to((unsigned)atoi(argv[1]));
		argv += 2;
		argc -= 2;
	}
	if (argc < 1)
		usage();
	mode = argv[0];
	argv++;
	argc--;
	/* --hold FILE and --hup-ms MS anywhere after the mode */
	for (i = 0; i < argc; i++)
		if ((!strcmp(argv[i], "--hold") || !strcmp(argv[i], "--hup-ms")) && i + 1 < argc) {
			if (!strcmp(argv[i], "--hold"))
				hold_file = argv[i + 1];
			else
				hup_ms = atoi(argv[i + 1]);
			memmove(argv + i, argv + i + 2, sizeof(char *) * (size_t)(argc - i - 1));
			argc -= 2;
			i--;
		}
#define NEED(k) do { if (argc < (k)) usage(); } while (0)
	if (!strcmp(mode, "forged")) {
		NEED(2);
		return do_forged(argc, argv);
	} else if (!strcmp(mode, "silent")) {
		NEED(2);
		return do_silent(argc, argv);
	} else if (!strcmp(mode, "sessions")) {
		NEED(2);
		return do_sessions(argc, argv);
	} else if (!strcmp(mode, "bigring")) {
		NEED(2);
		return do_bigring(argc, argv);
	} else if (!strcmp(mode, "records")) {
		NEED(2);
		return do_records(argc, argv);
	} else if (!strcmp(mode, "borrow")) {
		NEED(1);
		return do_borrow(argc, argv);
	} else if (!strcmp(mode, "statdev")) {
		NEED(1);
		return do_statdev(argv[0]);
	} else if (!strcmp(mode, "symoff")) {
		NEED(2);
		return do_symoff(argv[0], argv[1]);
	} else if (!strcmp(mode, "fifo_reader")) {
		NEED(1);
		return do_fifo_reader(argv[0]);
	} else if (!strcmp(mode, "timeit")) {
		NEED(3);
		return do_timeit(argc, argv);
	} else if (!strcmp(mode, "procstat")) {
		NEED(2);
		return do_procstat(argc, argv);
	} else if (!strcmp(mode, "watch")) {
		NEED(1);
		return do_watch(argc, argv);
	} else if (!strcmp(mode, "exec")) {
		NEED(1);
		execvp(argv[0], argv);
		perror(argv[0]);
		return 127;
	}
	usage();
	return 2;
}
