// SPDX-License-Identifier: GPL-2.0
/*
 * The client over the kernel transport, run inside the VM (tests/guest.list;
 * cwd /hp, heapprofd.ko loaded). This program plays the daemon: it starts
 * build/tests/client/hp_target under the client with
 * HEAPPROFD_TRANSPORT=kernel, attaches to its session by pid, maps the ring,
 * drains the records and checks them and the deposited fds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../proto/ring.h"
#include "../../tests/tap.h"

#define LIB "build/libheapprofd_client.so"
#define TARGET "build/tests/client/hp_target"
#define HP_CTL_PATH "/run/heapprofd/ctl.sock"

struct counts {
	size_t a3333;
	size_t a111, a222, a2001, a2002, a2003, frees, bad, total;
};

static void drain(struct hp_ring *r, struct counts *c)
{
	const struct heapprofd_rec_hdr *h;
	uint32_t len;
	int stalls = 0;

	for (;;) {
		enum hp_ring_status st = hp_ring_peek(r, &h, &len);

		if (st == HP_RING_READY) {
			struct heapprofd_rec_alloc a;

			c->total++;
			if (h->type == HEAPPROFD_REC_ALLOC && len >= sizeof(a)) {
				memcpy(&a, h, sizeof(a));
				c->a3333 += a.req_size == 3333;
				c->a111 += a.req_size == 111;
				c->a222 += a.req_size == 222;
				c->a2001 += a.req_size == 2001;
				c->a2002 += a.req_size == 2002;
				c->a2003 += a.req_size == 2003;
				/* With stack reuse a record may carry less than
				 * the whole stack, never more, and says so. */
				if (a.usable_size < a.req_size || a.nregs != HEAPPROFD_NREGS_NATIVE ||
				    a.arch != HEAPPROFD_ARCH_NATIVE ||
				    a.regs[HEAPPROFD_REG_SP] >= a.stack_top ||
				    sizeof(a) + a.stack_len > len ||
				    (!(a.hdr.flags & HEAPPROFD_ALLOC_STACK_TRUNCATED) &&
				     a.regs[HEAPPROFD_REG_SP] + a.stack_len + a.stack_reused !=
				     a.stack_top) ||
				    !!a.stack_reused != !!(a.hdr.flags & HEAPPROFD_ALLOC_STACK_REUSED))
					c->bad++;
			} else if (h->type == HEAPPROFD_REC_FREE) {
				c->frees++;
			}
			hp_ring_advance(r, len);
			stalls = 0;
			continue;
		}
		if (st == HP_RING_NOT_READY && ++stalls < 1000) {
			usleep(1000);
			continue;
		}
		if (st == HP_RING_NOT_READY)
			hp_ring_skip_stalled(r);
		return;
	}
}

static int run(int dormant)
{
	int in[2], out[2], dev, cfd = -1, st, i;
	struct heapprofd_attach at;
	struct heapprofd_session_info info;
	struct heapprofd_fd_arg fa;
	struct hp_ring r;
	struct counts c;
	char buf[256], maps[65536];
	const char *tag = dormant ? "dormant" : "active";
	size_t len;
	ssize_t n;
	void *map;
	pid_t pid;

	memset(&c, 0, sizeof(c));
	if (pipe(in) || pipe(out))
		return 1;
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		setenv("LD_PRELOAD", LIB, 1);
		setenv("HEAPPROFD_TRANSPORT", "kernel", 1);
		setenv("HEAPPROFD_INTERVAL", "1", 1);
		if (dormant)
			setenv("HEAPPROFD_DORMANT", "1", 1);
		execl(TARGET, TARGET, "dormant", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	n = read(out[0], buf, sizeof(buf) - 1);	/* "ready" */
	if (n <= 0) {
		tap_ok(0, "client/kernel %s: target did not start", tag);
		return 1;
	}
	dev = open("/dev/heapprofd", O_RDWR | O_CLOEXEC);
	memset(&at, 0, sizeof(at));
	at.size = sizeof(at);
	at.flags = HEAPPROFD_ATTACH_BY_PID;
	at.pid = pid;
	cfd = dev >= 0 ? ioctl(dev, HEAPPROFD_IOC_ATTACH, &at) : -1;
	tap_ok(cfd >= 0, "client/kernel %s: the client registered a session and we attached (%s)",
	       tag, cfd >= 0 ? "ok" : strerror(errno));
	if (cfd < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		return 1;
	}
	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	i = ioctl(cfd, HEAPPROFD_IOC_INFO, &info);
	tap_ok(!i && (info.fd_slots & 3) == 3 &&
	       !!(info.reg_flags & HEAPPROFD_REGISTER_DORMANT) == dormant,
	       "client/kernel %s: maps and mem deposited (slots %#x), reg_flags %#x",
	       tag, info.fd_slots, info.reg_flags);
	memset(&fa, 0, sizeof(fa));
	fa.size = sizeof(fa);
	fa.slot = HEAPPROFD_FD_MAPS;
	n = -1;
	errno = 0;
	/* The new fd comes back in fa.fd (the module also returns it). */
	i = ioctl(cfd, HEAPPROFD_IOC_RECEIVE_FD, &fa);
	if (i >= 0 && fa.fd >= 0) {
		size_t got = 0;

		while (got < sizeof(maps) - 1 &&
		       (n = read(fa.fd, maps + got, sizeof(maps) - 1 - got)) > 0)
			got += (size_t)n;
		n = (ssize_t)got;
		close(fa.fd);
	}
	maps[n > 0 ? n : 0] = 0;
	tap_ok(n > 0 && strstr(maps, "hp_target") && strstr(maps, "libheapprofd_client"),
	       "client/kernel %s: the received maps fd shows the target and the client (ioctl %d, %zd bytes, %s)",
	       tag, i, n, strerror(errno));

	map = hp_ring_map_fd(cfd, 0, at.ctl_size, at.data_size, &len);
	if (map == MAP_FAILED || hp_ring_open(&r, map, len)) {
		tap_ok(0, "client/kernel %s: map the ring", tag);
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		return 1;
	}
	if (dormant) {
		/* Enable it as a daemon does: fields, generation, enabled. */
		r.cfg->interval = 1;
		r.cfg->stack_cap = HEAPPROFD_STACK_CAP_DEFAULT;
		__atomic_add_fetch(&r.cfg->generation, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&r.cfg->enabled, 1, __ATOMIC_RELEASE);
	}
	drain(&r, &c);
	if (write(in[1], "g", 1) != 1)
		return 1;
	close(in[1]);
	for (i = 0; i < 50; i++) {
		struct pollfd p = { cfd, POLLIN, 0 };

		poll(&p, 1, 100);
		drain(&r, &c);
		if (waitpid(pid, &st, WNOHANG) == pid) {
			pid = 0;
			drain(&r, &c);
			break;
		}
	}
	if (pid)
		waitpid(pid, &st, 0);
	tap_ok(WIFEXITED(st) && !WEXITSTATUS(st), "client/kernel %s: the target ran normally", tag);
	tap_ok(c.a111 == (dormant ? 0u : 100u) && c.a222 == 100 && c.frees >= 100 && !c.bad,
	       "client/kernel %s: samples arrive: %zu x 111 (want %d), %zu x 222, %zu frees, %zu bad of %zu",
	       tag, c.a111, dormant ? 0 : 100, c.a222, c.frees, c.bad, c.total);
	tap_ok(r.cnt->alloc_calls >= (dormant ? 100u : 200u) && r.cnt->records_written >= c.total,
	       "client/kernel %s: counters published (alloc_calls %llu, written %llu)",
	       tag, (unsigned long long)r.cnt->alloc_calls,
	       (unsigned long long)r.cnt->records_written);
	munmap(map, len);
	close(cfd);
	close(dev);
	close(out[0]);
	return 0;
}

/* fork under the kernel transport: the ring mapping is VM_DONTCOPY, so the
 * child must not touch it (it would crash) and writes nothing into it. */
static void run_fork(void)
{
	int in[2], out[2], dev, cfd, st = 0, i;
	struct heapprofd_attach at;
	struct hp_ring r;
	struct counts c;
	char buf[64];
	size_t len;
	void *map;
	pid_t pid;

	memset(&c, 0, sizeof(c));
	if (pipe(in) || pipe(out))
		return;
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[1]);
		close(out[0]);
		setenv("LD_PRELOAD", LIB, 1);
		setenv("HEAPPROFD_TRANSPORT", "kernel", 1);
		setenv("HEAPPROFD_INTERVAL", "1", 1);
		execl(TARGET, TARGET, "forkwait", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	if (read(out[0], buf, sizeof(buf)) <= 0) {
		tap_ok(0, "client/kernel fork: the target and its child ran (no output)");
		return;
	}
	dev = open("/dev/heapprofd", O_RDWR | O_CLOEXEC);
	memset(&at, 0, sizeof(at));
	at.size = sizeof(at);
	at.flags = HEAPPROFD_ATTACH_BY_PID;
	at.pid = pid;
	cfd = dev >= 0 ? ioctl(dev, HEAPPROFD_IOC_ATTACH, &at) : -1;
	map = cfd >= 0 ? hp_ring_map_fd(cfd, 0, at.ctl_size, at.data_size, &len) : MAP_FAILED;
	if (map != MAP_FAILED && !hp_ring_open(&r, map, len))
		drain(&r, &c);
	if (write(in[1], "g", 1) != 1)
		i = 0;
	close(in[1]);
	waitpid(pid, &st, 0);
	tap_ok(map != MAP_FAILED && WIFEXITED(st) && !WEXITSTATUS(st) &&
	       c.a2001 == 1 && c.a2002 == 0 && c.a2003 == 100,
	       "client/kernel fork: the child ran normally and wrote nothing into the parent's ring (%zu/%zu/%zu)",
	       c.a2001, c.a2002, c.a2003);
	if (map != MAP_FAILED)
		munmap(map, len);
	if (cfd >= 0)
		close(cfd);
	if (dev >= 0)
		close(dev);
	close(out[0]);
	(void)i;
}

/* Start hp_target "basic 50 3333" under the client; it exits at once.
 * With exec set, "execafter 50 3333" instead: the same samples, then the
 * program execs itself to exit at once without the client. */
static pid_t start_quick_mode(const char *wait_ms, int err_w, int exec)
{
	pid_t pid = fork();

	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		dup2(null, 1);
		if (err_w >= 0) {
			dup2(err_w, 2);
			setenv("HEAPPROFD_DEBUG", "1", 1);
		}
		setenv("LD_PRELOAD", LIB, 1);
		setenv("HEAPPROFD_TRANSPORT", "kernel", 1);
		setenv("HEAPPROFD_INTERVAL", "1", 1);
		if (wait_ms)
			setenv("HEAPPROFD_EXIT_WAIT_MS", wait_ms, 1);
		else
			unsetenv("HEAPPROFD_EXIT_WAIT_MS");
		execl(TARGET, TARGET, exec ? "execafter" : "basic", "50", "3333", (char *)NULL);
		_exit(127);
	}
	return pid;
}

static pid_t start_quick(const char *wait_ms, int err_w)
{
	return start_quick_mode(wait_ms, err_w, 0);
}

static int attach_pid(int dev, pid_t pid, struct heapprofd_attach *at)
{
	memset(at, 0, sizeof(*at));
	at->size = sizeof(*at);
	at->flags = HEAPPROFD_ATTACH_BY_PID;
	at->pid = pid;
	return ioctl(dev, HEAPPROFD_IOC_ATTACH, at);
}

/*
 * A program that exits before any consumer attached: its destructor waits
 * (HEAPPROFD_EXIT_WAIT_MS) for a consumer, then for the ring to drain, so a
 * daemon attaching late still gets every record. Without the wait the
 * session is gone by then.
 */
static void run_exit_before_attach(int exec)
{
	const char *what = exec ? "exec" : "exit";
	struct heapprofd_attach at;
	struct hp_ring r;
	struct counts c;
	int dev, cfd, st = 0, alive_undrained, i;
	size_t len;
	void *map;
	pid_t pid;

	int errp[2];
	char ebuf[4096];
	size_t elen = 0;

	memset(&c, 0, sizeof(c));
	dev = open("/dev/heapprofd", O_RDWR | O_CLOEXEC);
	if (pipe(errp))
		return;
	pid = start_quick_mode("5000", errp[1], exec);
	close(errp[1]);
	/* HEAPPROFD_DEBUG: the client says when its destructor starts to
	 * wait; the program is over by then. Attach a little later still. */
	ebuf[0] = 0;
	while (!strstr(ebuf, "exit: waiting") && elen < sizeof(ebuf) - 1) {
		struct pollfd p = { errp[0], POLLIN, 0 };
		ssize_t k;

		if (poll(&p, 1, 20000) <= 0)
			break;
		k = read(errp[0], ebuf + elen, sizeof(ebuf) - 1 - elen);
		if (k <= 0)
			break;
		elen += (size_t)k;
		ebuf[elen] = 0;
	}
	close(errp[0]);
	usleep(300000);
	cfd = dev >= 0 ? attach_pid(dev, pid, &at) : -1;
	map = cfd >= 0 ? hp_ring_map_fd(cfd, 0, at.ctl_size, at.data_size, &len) : MAP_FAILED;
	if (map == MAP_FAILED || hp_ring_open(&r, map, len)) {
		tap_ok(0, "client/kernel %s: a consumer attaching 0.3 s after the target finished finds its session (%s)",
		       what, strerror(errno));
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		if (dev >= 0)
			close(dev);
		return;
	}
	/* Attached but not draining yet: the target must still be waiting. */
	usleep(200000);
	alive_undrained = waitpid(pid, &st, WNOHANG) == 0;
	for (i = 0; i < 100 && pid; i++) {
		drain(&r, &c);
		if (waitpid(pid, &st, WNOHANG) == pid)
			pid = 0;
		else
			usleep(10000);
	}
	if (pid)
		waitpid(pid, &st, 0);
	drain(&r, &c);
	tap_ok(c.a3333 == 50 && !c.bad && c.frees >= 50,
	       "client/kernel %s: a consumer attaching 0.3 s after the target %s reads all its samples (%zu x 3333 of 50, %zu frees, %zu bad)",
	       what, exec ? "called exec" : "finished", c.a3333, c.frees, c.bad);
	tap_ok(alive_undrained && WIFEXITED(st) && !WEXITSTATUS(st),
	       "client/kernel %s: the target waits for the drain after the attach, then %s normally (%d, status %#x)",
	       what, exec ? "execs and exits" : "exits", alive_undrained, st);
	munmap(map, len);
	close(cfd);
	if (exec) {
		close(dev);
		return;
	}

	/* HEAPPROFD_EXIT_WAIT_MS=0, and the default with no daemon socket:
	 * no wait, the session is gone once the process is. */
	for (i = 0; i < 2; i++) {
		int skip = i == 1 && !access(HP_CTL_PATH, F_OK);

		pid = start_quick(i ? NULL : "0", -1);
		waitpid(pid, &st, 0);
		cfd = attach_pid(dev, pid, &at);
		if (skip)
			tap_ok(1, "client/kernel exit: no wait without a daemon # SKIP %s exists", HP_CTL_PATH);
		else
			tap_ok(cfd < 0 && errno == ESRCH && WIFEXITED(st) && !WEXITSTATUS(st),
			       "client/kernel exit: %s: no wait, the session is gone after exit (attach: %s)",
			       i ? "no daemon socket (default)" : "HEAPPROFD_EXIT_WAIT_MS=0",
			       cfd < 0 ? strerror(errno) : "attached");
		if (cfd >= 0)
			close(cfd);
	}
	close(dev);
}

int main(void)
{
	if (access("/dev/heapprofd", F_OK)) {
		printf("ok 1 - client/kernel # SKIP no /dev/heapprofd\n");
		return 4;
	}
	run(0);
	run(1);
	run_fork();
	run_exit_before_attach(0);
	run_exit_before_attach(1);
	return tap_failed ? 1 : 0;
}
