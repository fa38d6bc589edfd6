// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofctl: talking to a daemon over its control socket (ctlproto.h),
 * with a bound on every wait, or starting a private one for this command.
 */
#include <sys/syscall.h>

#include "heapprofctl.h"
/* ------------------------------------------------------------------ */
/* Talking to a daemon                                                */
/* ------------------------------------------------------------------ */


event_fn on_event;

static const char *ctl_path(void)
{
	return getenv(CTL_ENV) ? getenv(CTL_ENV) : CTL_DEFAULT;
}

static int ctl_connect(const char *path, int *err)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path)) {
		*err = ENAMETOOLONG;
		return -1;
	}
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		*err = errno;
		return -1;
	}
	/*
	 * A full listen queue (the daemon stopped or frozen) blocks connect()
	 * for the send timeout, then it fails with EAGAIN. (A UNIX socket has
	 * no connect in progress to poll: nonblocking, it fails at once.)
	 */
	{
		struct timeval tv = { CTL_TIMEOUT_MS / 1000, 0 };

		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		*err = errno == EAGAIN || errno == EINPROGRESS ? ETIMEDOUT : errno;
		close(fd);
		return -1;
	}
	return fd;
}

/* Handle one message from the daemon: events go to on_event. */
int recv_msg(int fd, char *buf, size_t len)
{
	ssize_t n;

	errno = 0;
	n = recv(fd, buf, len - 1, MSG_DONTWAIT);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return 0;
}

/*
 * Send a request and wait up to timeout_ms for its reply; events meanwhile
 * go to on_event. 0 ok, 1 refused (rep says why), -1 no answer: errno
 * ETIMEDOUT when the daemon stayed silent, else what the socket said
 * (rep is then empty).
 */
static int last_timeout_ms = CTL_TIMEOUT_MS;

int request_to(struct daemon *d, const char *req, char *rep, size_t replen,
		      int timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)timeout_ms;

	last_timeout_ms = timeout_ms;
	rep[0] = 0;
	/* The send too (a daemon that reads nothing fills the queue) is
	 * within the one bound of the request. */
	while (send(d->fd, req, strlen(req), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
		struct pollfd pf = { d->fd, POLLOUT, 0 };
		uint64_t now = now_ms();
		int n;

		if (errno != EAGAIN && errno != EINTR)
			return -1;
		n = now >= end ? 0 : poll(&pf, 1, (int)(end - now));
		if (n < 0 && errno != EINTR)
			return -1;
		if (n == 0) {
			errno = ETIMEDOUT;
			return -1;
		}
	}
	for (;;) {
		struct pollfd pf = { d->fd, POLLIN, 0 };
		uint64_t now = now_ms();
		int n;

		n = now >= end ? 0 : poll(&pf, 1, (int)(end - now));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = ETIMEDOUT;
			return -1;
		}
		if (recv_msg(d->fd, rep, replen) < 0) {
			if (!errno || errno == EAGAIN)
				errno = ECONNRESET;	/* 0 bytes: the daemon closed */
			rep[0] = 0;
			return -1;
		}
		if (hpc_verb_is(rep, "event")) {
			if (on_event)
				on_event(rep);
			continue;
		}
		return hpc_verb_is(rep, "ok") ? 0 : 1;
	}
}

int request(struct daemon *d, const char *req, char *rep, size_t replen)
{
	return request_to(d, req, rep, replen, CTL_TIMEOUT_MS);
}

/* Why a request failed, for a message naming the daemon's socket. */
const char *no_answer(const struct daemon *d, int rc, const char *rep, char *buf,
			     size_t len)
{
	char msg[512] = "";

	if (rc > 0) {
		/* The daemon's words may quote a process's name or file. */
		hpc_get(rep, "msg", msg, sizeof(msg));
		hp_printable(msg, sizeof(msg), msg, sizeof(msg), NULL);
		snprintf(buf, len, "%s", msg[0] ? msg : "refused without a reason");
	} else if (errno == ETIMEDOUT) {
		snprintf(buf, len, "the daemon at %.200s did not answer within %d s (stopped, frozen or overloaded?)",
			 d->ctl, last_timeout_ms / 1000);
	} else {
		snprintf(buf, len, "lost the daemon at %.200s: %s", d->ctl, strerror(errno));
	}
	return buf;
}

static int dev_usable(void)
{
	int fd = open("/dev/heapprofd", O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

static void cleanup_private(struct daemon *d)
{
	if (d->dir[0]) {
		unlink(d->ctl);
		unlink(d->socket);
		rmdir(d->dir);
	}
}

/*
 * Start a daemon that serves only us. It runs in its own process group so
 * a Ctrl-C meant for the program does not stop it before the final dump.
 */
static void start_private(struct daemon *d, int want)
{
	char bin[PATH_MAX], rfd[16], tmpl[200], c;
	const char *base = getenv("XDG_RUNTIME_DIR");
	int p[2], dev, err = 0;
	struct pollfd pf;
	pid_t pid;

	daemon_bin(bin, sizeof(bin));
	if (!base || access(base, W_OK))
		base = "/tmp";
	snprintf(tmpl, sizeof(tmpl), "%s/heapprofctl.XXXXXX", base);
	if (!mkdtemp(tmpl))
		die("cannot create a directory in %s: %s", base, strerror(errno));
	snprintf(d->dir, sizeof(d->dir), "%s", tmpl);
	snprintf(d->ctl, sizeof(d->ctl), "%s/ctl", tmpl);
	snprintf(d->socket, sizeof(d->socket), "%s/sock", tmpl);
	dev = want == 2 ? -ENOENT : dev_usable();
	if (want == 1 && dev)
		die("--transport kernel: /dev/heapprofd is not usable (%s); load the module (modprobe heapprofd) or drop the option",
		    strerror(-dev));
	if (pipe2(p, O_CLOEXEC) < 0)
		die("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		die("fork: %s", strerror(errno));
	if (pid == 0) {
		char *av[16];
		int n = 0;

		setpgid(0, 0);
		fcntl(p[1], F_SETFD, 0);
		snprintf(rfd, sizeof(rfd), "%d", p[1]);
		av[n++] = bin;
		av[n++] = "--private";
		av[n++] = "--ctl";
		av[n++] = d->ctl;
		av[n++] = "--socket";
		av[n++] = d->socket;
		av[n++] = "--transport";
		av[n++] = dev ? "socket" : "auto";
		av[n++] = "--ready-fd";
		av[n++] = rfd;
		av[n++] = "--output-dir";
		av[n++] = ".";
		if (verbose > 1)
			av[n++] = "-v";
		else if (!verbose)
			av[n++] = "-q";
		av[n] = NULL;
		execv(bin, av);
		fprintf(stderr, "%s: cannot run %s: %s\n", prog, bin, strerror(errno));
		_exit(127);
	}
	close(p[1]);
	d->private_pid = pid;
	pf.fd = p[0];
	pf.events = POLLIN;
	if (poll(&pf, 1, 15000) != 1 || read(p[0], &c, 1) != 1) {
		kill(pid, SIGTERM);
		waitpid(pid, NULL, 0);
		cleanup_private(d);
		die("the private heapprofd (%s) did not start; run it by hand with -v to see why", bin);
	}
	close(p[0]);
	d->fd = ctl_connect(d->ctl, &err);
	if (d->fd < 0)
		die("cannot reach the private heapprofd at %s: %s", d->ctl, strerror(err));
	if (dev && want != 2)
		note("/dev/heapprofd is not usable (%s): using the user-space transport (load the module for the kernel one)",
		     dev == -ENOENT ? "module not loaded" : strerror(-dev));
}

static void die_timed_out(const char *path) __attribute__((noreturn));
static void die_timed_out(const char *path)
{
	die("heapprofd at %s does not accept connections within %d s (stopped, frozen or overloaded?)",
	    path, CTL_TIMEOUT_MS / 1000);
}

int daemon_there(void)
{
	int err = 0, fd = ctl_connect(ctl_path(), &err);

	if (fd >= 0) {
		close(fd);
		return 1;
	}
	if (err == ETIMEDOUT)
		die_timed_out(ctl_path());
	return 0;
}

/*
 * Reach a daemon: the system's (or $HEAPPROFD_CTL), else a private one when
 * allowed. want: 0 auto, 1 kernel, 2 socket.
 */
void reach_daemon(struct daemon *d, int allow_private, int want)
{
	const char *path = ctl_path();
	char rep[MSG_MAX], why[700];
	int err = 0, rc;

	memset(d, 0, sizeof(*d));
	snprintf(d->ctl, sizeof(d->ctl), "%s", path);
	d->fd = ctl_connect(path, &err);
	if (d->fd >= 0) {
		rc = request(d, "hello", rep, sizeof(rep));
		if (rc) {
			no_answer(d, rc, rep, why, sizeof(why));
			close(d->fd);
			d->fd = -1;
			if (!allow_private)
				die("%s", why);
			note("%s: starting a private one", why);
			err = -1;
		} else if (want) {
			/* A running daemon serves us if it has the transport asked for. */
			if (hpc_get(rep, "transport", d->transport, sizeof(d->transport)) ||
			    !strstr(d->transport, want == 1 ? "kernel" : "socket")) {
				close(d->fd);
				d->fd = -1;
				err = ENOENT;
			}
		}
	}
	if (d->fd < 0) {
		if (!allow_private) {
			if (err == EACCES)
				die("no permission to talk to heapprofd at %s: it runs as another user (use sudo)", path);
			if (err == ETIMEDOUT)
				die_timed_out(path);
			die("no heapprofd is reachable at %s (%s): start it (systemctl start heapprofd) or set %s",
			    path, strerror(err ? err : ENOENT), CTL_ENV);
		}
		if (err == ETIMEDOUT)
			note("heapprofd at %s does not accept connections within %d s: starting a private one",
			     path, CTL_TIMEOUT_MS / 1000);
		if (err == EACCES) {
			/*
			 * The system daemon attaches module sessions by itself and
			 * would race ours for them: take the socket transport.
			 */
			note("heapprofd at %s is not ours to use (permission denied): starting a private one%s",
			     path, want ? "" : " with the user-space transport");
			if (!want)
				want = 2;
		}
		memset(d, 0, sizeof(*d));
		start_private(d, want);
		rc = request(d, "hello", rep, sizeof(rep));
		if (rc)
			die("%s", no_answer(d, rc, rep, why, sizeof(why)));
	}
	hpc_get(rep, "transport", d->transport, sizeof(d->transport));
	hpc_get(rep, "socket", d->socket, sizeof(d->socket));
	if (verbose)
		note("daemon %s at %s, transport %s", d->private_pid ? "(private)" : "", d->ctl, d->transport);
}

int finish_daemon(struct daemon *d)
{
	int st = 0;

	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
	if (d->private_pid) {
		/* It exits by itself once we are gone and its sessions are written:
		 * its pidfd says when (without one, a look every 10 ms). */
		uint64_t t0 = now_ms();
		int termed = 0, pfd = (int)syscall(SYS_pidfd_open, d->private_pid, 0);

		while (waitpid(d->private_pid, &st, WNOHANG) == 0) {
			uint64_t t = now_ms() - t0;

			if (t > 35000) {
				/* one that SIGTERM did not end (stopped, say) */
				kill(d->private_pid, SIGKILL);
				waitpid(d->private_pid, &st, 0);
				break;
			}
			if (t > 30000 && !termed) {
				kill(d->private_pid, SIGTERM);
				termed = 1;
			}
			if (pfd >= 0) {
				struct pollfd p = { pfd, POLLIN, 0 };

				poll(&p, 1, 100);
			} else {
				usleep(10000);
			}
		}
		if (pfd >= 0)
			close(pfd);
		cleanup_private(d);
	}
	return st;
}
