// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofctl: the user's command. `record` runs a program under the client
 * and writes its profile when it exits; when no heapprofd is reachable it
 * starts a private one for this recording (module when /dev/heapprofd is
 * usable, user-space transport otherwise) and says which. See heapprofctl(1).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctlproto.h"
#include "pipeline/pipeline.h"
#include "preload.h"
#include "stats.h"
#include "../libclient/socket_proto.h"

#define CTL_DEFAULT	"/run/heapprofd/ctl.sock"
#define CTL_ENV		"HEAPPROFD_CTL"
#define MSG_MAX		65536
/*
 * How long a daemon may take to accept us and answer a request before we
 * give up: a stopped or frozen daemon must not hang the command. Writing a
 * profile (dump, detach) may take longer.
 */
#define CTL_TIMEOUT_MS		5000
#define CTL_DUMP_TIMEOUT_MS	120000
/* Bounds of the numeric options (the client takes the same interval). */
#define MAX_INTERVAL	(1ULL << 40)
#define MAX_STACK_CAP	(8U << 20)
#define MAX_SECS	(UINT_MAX / 1000)

static int verbose;
static int progress;		/* show progress on stderr */
static const char *prog = "heapprofctl";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void note(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* A numeric option, strictly (hp_parse_num): anything else exits 2. */
static unsigned long long num_opt(const char *opt, const char *arg, unsigned long long min,
				  unsigned long long max)
{
	unsigned long long v;
	char why[300];

	if (hp_parse_num(arg, min, max, &v, why, sizeof(why))) {
		fprintf(stderr, "%s: %s: %s\n", prog, opt, why);
		exit(2);
	}
	return v;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ */
/* Finding our files                                                  */
/* ------------------------------------------------------------------ */

static const char *self_dir(void)
{
	static char dir[PATH_MAX];
	ssize_t n;

	if (dir[0])
		return dir;
	n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	if (n < 0)
		return strcpy(dir, ".");
	dir[n] = 0;
	return dirname(dir);
}

static int find_file(char *out, size_t len, const char *env, const char *const *cands)
{
	const char *e = getenv(env);

	if (e && *e) {
		snprintf(out, len, "%s", e);
		return access(out, R_OK) ? -1 : 0;
	}
	for (; *cands; cands++) {
		if ((*cands)[0] == '/')
			snprintf(out, len, "%s", *cands);
		else
			snprintf(out, len, "%s/%s", self_dir(), *cands);
		if (!access(out, R_OK))
			return 0;
	}
	return -1;
}

static void client_lib(char *out, size_t len)
{
	static const char *const c[] = { "libheapprofd_client.so",
		"../lib/heapprofd/libheapprofd_client.so", HP_PRELOAD_LIB,
		"/usr/local/lib/heapprofd/libheapprofd_client.so", NULL };

	if (find_file(out, len, "HEAPPROFD_CLIENT_LIB", c))
		die("cannot find libheapprofd_client.so next to %s or in /usr/lib/heapprofd: build it (make) or set HEAPPROFD_CLIENT_LIB",
		    self_dir());
}

static void daemon_bin(char *out, size_t len)
{
	static const char *const c[] = { "heapprofd", "../sbin/heapprofd", "/usr/sbin/heapprofd",
		"/usr/local/sbin/heapprofd", NULL };

	if (find_file(out, len, "HEAPPROFD_DAEMON", c))
		die("cannot find the heapprofd daemon next to %s: build it (make) or set HEAPPROFD_DAEMON",
		    self_dir());
}

/* ------------------------------------------------------------------ */
/* Talking to a daemon                                                */
/* ------------------------------------------------------------------ */

struct daemon {
	int fd;
	pid_t private_pid;	/* a daemon we started, or 0 */
	char dir[PATH_MAX];	/* its sockets' directory */
	char ctl[PATH_MAX];
	char socket[PATH_MAX];
	char transport[32];	/* "kernel", "socket", "kernel+socket" */
};

typedef void (*event_fn)(const char *msg);
static event_fn on_event;

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
	/* A full listen queue (the daemon stopped or frozen) blocks connect()
	 * for the send timeout, then it fails with EAGAIN. */
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
static int recv_msg(int fd, char *buf, size_t len)
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

static int request_to(struct daemon *d, const char *req, char *rep, size_t replen,
		      int timeout_ms)
{
	uint64_t end = now_ms() + (uint64_t)timeout_ms;

	last_timeout_ms = timeout_ms;
	rep[0] = 0;
	/* Bounded by SO_SNDTIMEO (ctl_connect) when the daemon reads nothing. */
	if (send(d->fd, req, strlen(req), MSG_NOSIGNAL) < 0) {
		if (errno == EAGAIN)
			errno = ETIMEDOUT;
		return -1;
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

static int request(struct daemon *d, const char *req, char *rep, size_t replen)
{
	return request_to(d, req, rep, replen, CTL_TIMEOUT_MS);
}

/* Why a request failed, for a message naming the daemon's socket. */
static const char *no_answer(const struct daemon *d, int rc, const char *rep, char *buf,
			     size_t len)
{
	char msg[512] = "";

	if (rc > 0) {
		hpc_get(rep, "msg", msg, sizeof(msg));
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

/*
 * Reach a daemon: the system's (or $HEAPPROFD_CTL), else a private one when
 * allowed. want: 0 auto, 1 kernel, 2 socket.
 */
static void reach_daemon(struct daemon *d, int allow_private, int want)
{
	const char *path = getenv(CTL_ENV) ? getenv(CTL_ENV) : CTL_DEFAULT;
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
				die("heapprofd at %s does not accept connections within %d s (stopped, frozen or overloaded?)",
				    path, CTL_TIMEOUT_MS / 1000);
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

static int finish_daemon(struct daemon *d)
{
	int st = 0;

	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
	if (d->private_pid) {
		/* It exits by itself once we are gone and its sessions are written. */
		uint64_t t0 = now_ms();

		while (waitpid(d->private_pid, &st, WNOHANG) == 0) {
			if (now_ms() - t0 > 30000) {
				kill(d->private_pid, SIGTERM);
				waitpid(d->private_pid, &st, 0);
				break;
			}
			usleep(10000);
		}
		cleanup_private(d);
	}
	return st;
}

/* ------------------------------------------------------------------ */
/* Results                                                            */
/* ------------------------------------------------------------------ */

#define MAXRES 256
struct result {
	int pid;
	unsigned long long sid;	/* one per session: an exec'd image is another */
	char comm[32];
	char prefix[PATH_MAX];
	int done, ok, moved;
	unsigned long long records;
	char reason[200];
	char error[600];	/* why writing failed, when the daemon says */
};
static struct result results[MAXRES];
static int nresults, nlive;

static struct result *result_for(int pid, unsigned long long sid)
{
	int i;

	for (i = 0; i < nresults; i++)
		if (results[i].pid == pid && results[i].sid == sid)
			return &results[i];
	if (nresults == MAXRES)
		return NULL;
	memset(&results[nresults], 0, sizeof(results[0]));
	results[nresults].pid = pid;
	results[nresults].sid = sid;
	return &results[nresults++];
}

static void record_event(const char *m)
{
	char kind[32], v[PATH_MAX];
	struct result *r;
	int pid = (int)hpc_getu(m, "pid", 0);

	hpc_get(m, "kind", kind, sizeof(kind));
	r = result_for(pid, hpc_getu(m, "session", 0));
	if (!r)
		return;
	if (!strcmp(kind, "moved")) {
		/* The pid exec'd: this earlier image's profile went elsewhere. */
		hpc_get(m, "prefix", r->prefix, sizeof(r->prefix));
		r->moved = 1;
		return;
	}
	if (!strcmp(kind, "session")) {
		hpc_get(m, "comm", r->comm, sizeof(r->comm));
		hpc_get(m, "prefix", r->prefix, sizeof(r->prefix));
		nlive++;
		if (progress)
			note("profiling pid %d (%s)", pid, r->comm);
	} else if (!strcmp(kind, "done")) {
		if (!r->comm[0])
			hpc_get(m, "comm", r->comm, sizeof(r->comm));
		hpc_get(m, "prefix", v, sizeof(v));
		if (v[0])
			snprintf(r->prefix, sizeof(r->prefix), "%s", v);
		r->ok = (int)hpc_getu(m, "ok", 0);
		r->records = hpc_getu(m, "records", 0);
		hpc_get(m, "reason", r->reason, sizeof(r->reason));
		hpc_get(m, "error", r->error, sizeof(r->error));
		if (!r->done)
			nlive--;
		r->done = 1;
	}
}

static void print_top(const char *prefix, int lines)
{
	char path[PATH_MAX + 8], line[1024];
	FILE *f;
	int n = 0;

	if (snprintf(path, sizeof(path), "%s.txt", prefix) >= (int)sizeof(path))
		return;
	f = fopen(path, "re");
	if (!f)
		return;
	while (n < lines && fgets(line, sizeof(line), f)) {
		fputs(line, stdout);
		n++;
	}
	fclose(f);
}

/* The files a profile is written as: PREFIX + each of these. */
static const char *const out_ext[] = { ".pb.gz", ".svg", ".folded", ".txt" };
#define N_OUT_EXT (sizeof(out_ext) / sizeof(out_ext[0]))

/*
 * -o names a prefix; "-o prof.pb.gz" (or .svg, .folded, .txt) means the
 * files prof.pb.gz, prof.svg, ... and not prof.pb.gz.pb.gz.
 */
static const char *out_prefix(const char *arg)
{
	size_t n = strlen(arg);

	for (size_t i = 0; i < N_OUT_EXT; i++) {
		size_t e = strlen(out_ext[i]);
		char *p;

		if (n > e && !strcmp(arg + n - e, out_ext[i]) && arg[n - e - 1] != '/') {
			p = strndup(arg, n - e);
			if (!p)
				die("out of memory");
			return p;
		}
	}
	return arg;
}

/*
 * Why the daemon could not write PREFIX.*, as far as we can tell from here
 * (a daemon that says so in its done event is believed first).
 */
static const char *diagnose(const char *prefix, char *buf, size_t len)
{
	char dir[PATH_MAX];
	struct statvfs sv;
	char *slash;

	snprintf(dir, sizeof(dir), "%s", prefix);
	slash = strrchr(dir, '/');
	if (slash)
		slash == dir ? (void)(dir[1] = 0) : (void)(*slash = 0);
	else
		snprintf(dir, sizeof(dir), ".");
	if (access(dir, W_OK) < 0)
		snprintf(buf, len, "directory %.500s: %s", dir, strerror(errno));
	else if (!statvfs(dir, &sv) && sv.f_bavail == 0)
		snprintf(buf, len, "the file system holding %.500s is full (%s)", dir, strerror(ENOSPC));
	else if (!statvfs(dir, &sv) && (unsigned long long)sv.f_bavail * sv.f_frsize < (1ULL << 20))
		snprintf(buf, len, "the file system holding %.500s has only %llu KiB free: probably %s",
			 dir, (unsigned long long)sv.f_bavail * sv.f_frsize >> 10, strerror(ENOSPC));
	else if (!statvfs(dir, &sv) && sv.f_files && sv.f_favail == 0)
		snprintf(buf, len, "the file system holding %.500s has no free inodes", dir);
	else
		snprintf(buf, len, "see the daemon's messages");
	return buf;
}

static int show_results(int top)
{
	int i, bad = 0;
	size_t k;

	for (i = 0; i < nresults; i++) {
		struct result *r = &results[i];
		char path[PATH_MAX + 16];

		if (!r->done)
			continue;
		if (!r->ok) {
			char why[700];

			note("pid %d (%s): the profile %s.* was not written: %s", r->pid, r->comm,
			     r->prefix, r->error[0] ? r->error : diagnose(r->prefix, why, sizeof(why)));
			bad = 1;
			continue;
		}
		if (strcmp(r->reason, "exit") && r->reason[0])
			note("pid %d (%s): the session ended early: %s", r->pid, r->comm, r->reason);
		printf("heapprofctl: pid %d (%s%s): %llu records; wrote", r->pid, r->comm,
		       r->moved ? ", an image it later exec'd away from" : "", r->records);
		for (k = 0; k < N_OUT_EXT; k++) {
			snprintf(path, sizeof(path), "%s%s", r->prefix, out_ext[k]);
			if (!access(path, R_OK))
				printf(" %s", path);
		}
		printf("\n");
	}
	/* The top call sites of the main profile: the recorded pid's last image. */
	for (i = 0; top && i < nresults; i++) {
		if (results[i].done && results[i].ok && !results[i].moved) {
			print_top(results[i].prefix, top);
			break;
		}
	}
	fflush(stdout);
	return bad;
}

/* ------------------------------------------------------------------ */
/* record                                                             */
/* ------------------------------------------------------------------ */

struct rec_opts {
	unsigned long long interval;
	const char *out;
	int dump_at_max;
	unsigned continuous;
	int follow;
	const char *name;
	int all;
	int want;		/* transport: 0 auto 1 kernel 2 socket */
	unsigned duration;
	unsigned stack_cap;
	int top;
	int block;
	const char *heaps;
};

/* -o: a prefix for files, not empty and not a directory's name. */
static const char *out_opt(const char *arg)
{
	size_t n = strlen(arg);

	if (!n) {
		fprintf(stderr, "%s: -o: an empty name; give a prefix for the profile files (e.g. -o out/myprog)\n",
			prog);
		exit(2);
	}
	if (arg[n - 1] == '/') {
		fprintf(stderr, "%s: -o %s: names a directory; give a prefix for the files in it (e.g. -o %sNAME)\n",
			prog, arg, arg);
		exit(2);
	}
	return out_prefix(arg);
}

/*
 * Before anything runs: the directory of PREFIX is there (mkdirs_for made
 * it) and writable, PREFIX itself is no directory, and none of the files
 * is something other than a regular file (the daemon would refuse it).
 */
static void check_output(const char *prefix)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	const char *slash = strrchr(prefix, '/');
	struct stat st;

	if (!slash || slash == prefix)
		snprintf(dir, sizeof(dir), "%s", slash ? "/" : ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - prefix), prefix);
	if (stat(dir, &st) < 0)
		die("cannot write the profile to %s.*: directory %s: %s", prefix, dir,
		    errno == ENOENT ? "does not exist and could not be created" : strerror(errno));
	if (!S_ISDIR(st.st_mode))
		die("cannot write the profile to %s.*: %s is not a directory", prefix, dir);
	if (access(dir, W_OK) < 0)
		die("cannot write the profile to %s.*: directory %s: %s", prefix, dir, strerror(errno));
	if (!lstat(prefix, &st) && S_ISDIR(st.st_mode))
		die("-o %s: is a directory; give a prefix for the files in it (e.g. -o %s/NAME)", prefix,
		    prefix);
	for (size_t k = 0; k < N_OUT_EXT; k++) {
		snprintf(path, sizeof(path), "%s%s", prefix, out_ext[k]);
		if (!lstat(path, &st) && !S_ISREG(st.st_mode))
			die("cannot write the profile to %s: it exists and is not a regular file (%s)", path,
			    S_ISLNK(st.st_mode) ? "a symbolic link" : S_ISDIR(st.st_mode) ? "a directory" :
			    "a special file");
	}
}

static void mkdirs_for(const char *prefix)
{
	char tmp[PATH_MAX], *p;

	snprintf(tmp, sizeof(tmp), "%s", prefix);
	p = strrchr(tmp, '/');
	if (!p)
		return;
	*p = 0;
	for (p = tmp + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			mkdir(tmp, 0755);
			*p = '/';
		}
	mkdir(tmp, 0755);
}

/* An absolute prefix: a system daemon does not share our cwd. */
static void abs_prefix(const char *in, char *out, size_t len)
{
	char cwd[PATH_MAX];

	if (in[0] == '/' || !getcwd(cwd, sizeof(cwd)))
		snprintf(out, len, "%s", in);
	else
		if (snprintf(out, len, "%s/%s", cwd, in) >= (int)len)
			die("path too long: %s", in);
}

static void setenv_prepend(const char *var, const char *val)
{
	const char *old = getenv(var);
	char buf[8192];

	if (old && *old) {
		snprintf(buf, sizeof(buf), "%s:%s", val, old);
		setenv(var, buf, 1);
	} else {
		setenv(var, val, 1);
	}
}

static void child_env(const struct rec_opts *o, const struct daemon *d, int dormant)
{
	char lib[PATH_MAX], v[32];

	client_lib(lib, sizeof(lib));
	setenv_prepend("LD_PRELOAD", lib);
	snprintf(v, sizeof(v), "%llu", o->interval);
	setenv("HEAPPROFD_INTERVAL", v, 1);
	if (o->stack_cap) {
		snprintf(v, sizeof(v), "%u", o->stack_cap);
		setenv("HEAPPROFD_STACK_CAP", v, 1);
	}
	if (d->socket[0])
		setenv("HEAPPROFD_SOCKET", d->socket, 1);
	if (!strcmp(d->transport, "socket") || o->want == 2)
		setenv("HEAPPROFD_TRANSPORT", "socket", 1);
	else if (!strcmp(d->transport, "kernel") || o->want == 1)
		setenv("HEAPPROFD_TRANSPORT", "kernel", 1);
	else
		setenv("HEAPPROFD_TRANSPORT", "auto", 1);
	if (o->block)
		setenv("HEAPPROFD_BLOCK", "200000", 1);
	if (o->follow || dormant)
		setenv("HEAPPROFD_FOLLOW_FORKS", "1", 1);
	else
		unsetenv("HEAPPROFD_FOLLOW_FORKS");
	if (dormant)
		setenv("HEAPPROFD_DORMANT", "1", 1);
	else
		unsetenv("HEAPPROFD_DORMANT");
	/* Runs in the child: the recorded process and the images it execs
	 * keep the client; its descendants drop it unless following forks. */
	if (!dormant) {
		snprintf(v, sizeof(v), "%d", (int)getpid());
		setenv("HEAPPROFD_ROOT_PID", v, 1);
	} else {
		unsetenv("HEAPPROFD_ROOT_PID");
	}
}

static int do_record(struct rec_opts *o, char **cmd)
{
	char prefix[PATH_MAX], req[8192], rep[MSG_MAX];
	int gate[2], errp[2], sfd, child_status = 0, child_done = 0, sel = 0, rc, bad;
	uint64_t t_start, t_exit = 0, t_prog = 0;
	struct daemon d;
	sigset_t ss;
	pid_t child = 0;

	if (!cmd[0] && !o->name && !o->all)
		die("record: nothing to run; usage: heapprofctl record [options] -- COMMAND [ARGS...] (or --name NAME / --all)");
	if (o->all && !o->interval)
		o->interval = 512 * 1024;	/* whole system: bound the data */
	if (!o->interval)
		o->interval = 4096;
	if (o->interval == 1)
		o->block = 1;	/* exact mode: wait for room rather than drop */
	if (o->out) {
		snprintf(prefix, sizeof(prefix), "%s", o->out);
	} else {
		char tmp[PATH_MAX];

		snprintf(tmp, sizeof(tmp), "%s", cmd[0] ? cmd[0] : o->name ? o->name : "all");
		snprintf(prefix, sizeof(prefix), "out/%s", basename(tmp));
	}
	{
		char a[PATH_MAX];

		abs_prefix(prefix, a, sizeof(a));
		snprintf(prefix, sizeof(prefix), "%s", a);
	}
	mkdirs_for(prefix);
	check_output(prefix);

	sigemptyset(&ss);
	sigaddset(&ss, SIGCHLD);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGQUIT);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	sfd = signalfd(-1, &ss, SFD_CLOEXEC);

	on_event = record_event;
	reach_daemon(&d, 1, o->want);
	note("recording with the %s transport%s", !strncmp(d.transport, "kernel", 6) ?
	     "kernel (module)" : "user-space (socket)", d.private_pid ? " (private daemon)" : "");
	if ((o->name || o->all) && !cmd[0] && !hp_preload_present(HP_PRELOAD_FILE, HP_PRELOAD_LIB))
		note("no dormant client in %s: only processes started with the client preloaded can be profiled (see `heapprofctl install-preload`)",
		     HP_PRELOAD_FILE);

	if (cmd[0]) {
		if (pipe2(gate, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0)
			die("pipe: %s", strerror(errno));
		child = fork();
		if (child < 0)
			die("fork: %s", strerror(errno));
		if (child == 0) {
			char c;
			int e;

			close(gate[1]);
			close(errp[0]);
			/* Wait until the daemon knows our pid. */
			if (read(gate[0], &c, 1) != 1)
				_exit(126);
			child_env(o, &d, o->name || o->all);
			sigprocmask(SIG_UNBLOCK, &ss, NULL);
			execvp(cmd[0], cmd);
			e = errno;
			if (write(errp[1], &e, sizeof(e)) < 0)
				_exit(127);
			_exit(127);
		}
		close(gate[0]);
		close(errp[1]);
	}
	snprintf(req, sizeof(req), "watch");
	if (o->name || o->all) {
		if (o->name)
			hpc_put(req, sizeof(req), "name", o->name);
		hpc_putu(req, sizeof(req), "all", o->all);
		hpc_putu(req, sizeof(req), "dormant", 1);
	} else {
		hpc_putu(req, sizeof(req), "pid", child);
	}
	hpc_putu(req, sizeof(req), "follow", o->follow);
	hpc_putu(req, sizeof(req), "interval", o->interval);
	hpc_putu(req, sizeof(req), "stack_cap", o->stack_cap);
	hpc_putu(req, sizeof(req), "cfg_flags", o->block ? HEAPPROFD_CFG_BLOCK : 0);
	if (o->heaps)
		hpc_put(req, sizeof(req), "heaps", o->heaps);
	hpc_putu(req, sizeof(req), "dump_at_max", o->dump_at_max);
	hpc_putu(req, sizeof(req), "continuous", o->continuous);
	hpc_put(req, sizeof(req), "prefix", prefix);
	if ((rc = request(&d, req, rep, sizeof(rep))) != 0) {
		char msg[800];

		no_answer(&d, rc, rep, msg, sizeof(msg));
		if (child)
			kill(child, SIGKILL);
		die("the daemon %s the recording: %s", rc > 0 ? "refused" : "did not start", msg);
	}
	if (child) {
		int e = 0;

		if (write(gate[1], "g", 1) != 1)
			die("cannot start the command");
		close(gate[1]);
		if (read(errp[0], &e, sizeof(e)) == sizeof(e)) {
			waitpid(child, NULL, 0);
			finish_daemon(&d);
			die("cannot run %s: %s", cmd[0], strerror(e));
		}
		close(errp[0]);
	}
	t_start = now_ms();
	if (o->name || o->all)
		note("profiling processes named %s%s; Ctrl-C ends the recording", o->name ? o->name : "*",
		     o->duration ? " for the given duration" : "");

	/* Wait: the command's exit, then every session's final dump. */
	for (;;) {
		struct pollfd pf[2] = { { d.fd, POLLIN, 0 }, { sfd, POLLIN, 0 } };
		uint64_t now = now_ms();
		int n;

		if (child_done && nlive <= 0) {
			/* Sessions may still be announced shortly after exit. */
			if (nresults || now - t_exit > 2000)
				break;
		}
		if (!cmd[0] && o->duration && now - t_start >= o->duration * 1000ULL)
			break;
		if (sel)
			break;	/* interrupted: closing the connection makes the daemon dump the rest */
		if (progress && now - t_prog >= 1000 && now - t_start >= 2000) {
			fprintf(stderr, "\r%s: %llu s, %d process(es) being profiled%s ", prog,
				(unsigned long long)(now - t_start) / 1000, nlive,
				child_done ? ", writing profiles" : "");
			t_prog = now;
		}
		n = poll(pf, 2, 200);
		if (n < 0 && errno != EINTR)
			break;
		if (pf[0].revents & POLLIN) {
			if (recv_msg(d.fd, rep, sizeof(rep)) < 0) {
				note("lost the daemon: profiles may be incomplete");
				break;
			}
			if (hpc_verb_is(rep, "event"))
				record_event(rep);
		} else if (pf[0].revents & (POLLHUP | POLLERR)) {
			note("lost the daemon: profiles may be incomplete");
			break;
		}
		if (pf[1].revents & POLLIN) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof(si)) != sizeof(si))
				continue;
			if (si.ssi_signo == SIGCHLD && child) {
				int st;

				while (waitpid(child, &st, WNOHANG) == child) {
					child_status = st;
					child_done = 1;
					t_exit = now_ms();
				}
			} else if (si.ssi_signo != SIGCHLD) {
				/* The terminal sent it to the command too; without one we end. */
				if (!cmd[0] || child_done)
					sel = 1;	/* e.g. forked children still running */
				else if (si.ssi_signo != SIGINT && si.ssi_signo != SIGQUIT)
					kill(child, (int)si.ssi_signo);
			}
		}
	}
	if (progress && t_prog)
		fputc('\n', stderr);
	finish_daemon(&d);	/* a private daemon finishes the rest and exits */
	if (!nresults)
		note("no profile: %s never connected to heapprofd (a static binary, a setuid program, or LD_PRELOAD was dropped)",
		     cmd[0] ? cmd[0] : "no matching process");
	bad = show_results(o->top);
	/* The program's status; 1 when it succeeded but a profile was not written. */
	if (child_done && WIFEXITED(child_status) && WEXITSTATUS(child_status))
		return WEXITSTATUS(child_status);
	if (child_done && WIFSIGNALED(child_status))
		return 128 + WTERMSIG(child_status);
	if (bad)
		return 1;
	return nresults || child_done ? 0 : 1;
}

/* ------------------------------------------------------------------ */
/* attach / dump / detach / sessions                                  */
/* ------------------------------------------------------------------ */

static int do_attach(int pid, unsigned secs, const char *out, unsigned long long interval, int want)
{
	char req[4096], rep[MSG_MAX], prefix[PATH_MAX], msg[800];
	struct daemon d;
	uint64_t t0;
	sigset_t ss;
	int sfd, stop = 0, rc;

	if (!out) {
		snprintf(prefix, sizeof(prefix), "out/attach.%d", pid);
		out = prefix;
	}
	{
		char a[PATH_MAX];

		abs_prefix(out, a, sizeof(a));
		snprintf(prefix, sizeof(prefix), "%s", a);
	}
	mkdirs_for(prefix);
	check_output(prefix);
	sigemptyset(&ss);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	sfd = signalfd(-1, &ss, SFD_CLOEXEC);
	on_event = record_event;
	reach_daemon(&d, 1, want);
	snprintf(req, sizeof(req), "attach");
	hpc_putu(req, sizeof(req), "pid", pid);
	hpc_putu(req, sizeof(req), "interval", interval ? interval : 4096);
	hpc_put(req, sizeof(req), "prefix", prefix);
	if ((rc = request_to(&d, req, rep, sizeof(rep), CTL_DUMP_TIMEOUT_MS)) != 0) {
		no_answer(&d, rc, rep, msg, sizeof(msg));
		finish_daemon(&d);
		die("attach %d: %s", pid, msg);
	}
	hpc_get(rep, "transport", msg, sizeof(msg));
	note("attached to pid %d (%s transport); %s", pid, msg,
	     secs ? "detaching after the given time" : "Ctrl-C detaches");
	t0 = now_ms();
	while (!stop) {
		struct pollfd pf[2] = { { d.fd, POLLIN, 0 }, { sfd, POLLIN, 0 } };

		if (secs && now_ms() - t0 >= secs * 1000ULL)
			break;
		if (poll(pf, 2, 200) < 0 && errno != EINTR)
			break;
		if (pf[0].revents & POLLIN) {
			if (recv_msg(d.fd, rep, sizeof(rep)) < 0)
				break;
			record_event(rep);
			if (nresults && nlive <= 0 && results[0].done)
				stop = 2;	/* the process exited */
		}
		if (pf[1].revents & POLLIN)
			stop = 1;
	}
	if (stop != 2) {
		snprintf(req, sizeof(req), "detach");
		hpc_putu(req, sizeof(req), "pid", pid);
		if ((rc = request_to(&d, req, rep, sizeof(rep), CTL_DUMP_TIMEOUT_MS)) != 0)
			note("detach: %s", no_answer(&d, rc, rep, msg, sizeof(msg)));
		/* The done event follows the reply or came before it. */
		while (!(nresults && results[0].done)) {
			struct pollfd pf = { d.fd, POLLIN, 0 };

			if (poll(&pf, 1, 5000) != 1 || recv_msg(d.fd, rep, sizeof(rep)) < 0)
				break;
			record_event(rep);
		}
	}
	finish_daemon(&d);
	return show_results(20);
}

static int simple_request(const char *verb, int pid)
{
	char req[256], rep[MSG_MAX], v[PATH_MAX];
	struct daemon d;
	int rc;

	reach_daemon(&d, 0, 0);
	snprintf(req, sizeof(req), "%s", verb);
	hpc_putu(req, sizeof(req), "pid", pid);
	if ((rc = request_to(&d, req, rep, sizeof(rep), CTL_DUMP_TIMEOUT_MS)) != 0)
		die("%s %d: %s", verb, pid, no_answer(&d, rc, rep, v, sizeof(v)));
	hpc_get(rep, "prefix", v, sizeof(v));
	printf("%s %d: wrote %s.pb.gz %s.svg %s.folded %s.txt\n", verb, pid, v, v, v, v);
	close(d.fd);
	return 0;
}

static int do_sessions(void)
{
	char rep[MSG_MAX], *line, *save = NULL, why[800];
	struct daemon d;
	int rc;

	reach_daemon(&d, 0, 0);
	if ((rc = request(&d, "sessions", rep, sizeof(rep))) != 0)
		die("sessions: %s", no_answer(&d, rc, rep, why, sizeof(why)));
	printf("%-7s %-16s %-8s %-9s %-9s %10s %12s %8s  %s\n", "PID", "COMM", "SESSION",
	       "TRANSPORT", "STATE", "RECORDS", "BYTES", "DROPPED", "OUTPUT");
	line = strtok_r(rep, "\n", &save);	/* "ok" */
	while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
		char comm[32], tr[16], state[16], pfx[PATH_MAX];
		unsigned long long id, rec, bytes, drop;
		int pid;

		if (sscanf(line, "%d %31s %llu %15s %15s %llu %llu %llu %4095s", &pid, comm, &id, tr,
			   state, &rec, &bytes, &drop, pfx) == 9)
			printf("%-7d %-16s %-8llu %-9s %-9s %10llu %12llu %8llu  %s\n", pid, comm, id,
			       tr, state, rec, bytes, drop, pfx);
	}
	close(d.fd);
	return 0;
}

/* ------------------------------------------------------------------ */
/* install-preload / uninstall-preload                                */
/* ------------------------------------------------------------------ */

static int copy_file(const char *from, const char *to)
{
	char tmp[PATH_MAX], buf[65536];
	int in, out;
	ssize_t n;

	snprintf(tmp, sizeof(tmp), "%s.new", to);
	in = open(from, O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	if (out < 0) {
		close(in);
		return -errno;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, n) != n) {
			n = -1;
			break;
		}
	close(in);
	if (n < 0 || fsync(out) < 0) {
		close(out);
		unlink(tmp);
		return -EIO;
	}
	close(out);
	/* rename: programs that mapped the old file keep it intact. */
	return rename(tmp, to) < 0 ? -errno : 0;
}

static int do_install_preload(int install)
{
	const char *file = getenv("HEAPPROFD_LD_SO_PRELOAD") ? getenv("HEAPPROFD_LD_SO_PRELOAD") : HP_PRELOAD_FILE;
	const char *dest = getenv("HEAPPROFD_PRELOAD_LIB") ? getenv("HEAPPROFD_PRELOAD_LIB") : HP_PRELOAD_LIB;
	char err[512] = "", lib[PATH_MAX], cmd[PATH_MAX * 2];
	int rc;

	if (!install) {
		rc = hp_preload_remove(file, dest, err, sizeof(err));
		if (rc < 0)
			die("uninstall-preload: %s", err);
		printf("%s: %s\n", file, rc == 1 ? "had no heapprofd entry (nothing to do)" :
		       "heapprofd entry removed; new processes start without the client");
		return 0;
	}
	client_lib(lib, sizeof(lib));
	if (strcmp(lib, dest)) {
		char dir[PATH_MAX];

		snprintf(dir, sizeof(dir), "%s", dest);
		mkdirs_for(dest);
		rc = copy_file(lib, dest);
		if (rc < 0)
			die("install-preload: cannot install %s as %s: %s%s", lib, dest, strerror(-rc),
			    rc == -EACCES ? " (run as root)" : "");
	}
	/* A broken library in ld.so.preload breaks every program: try it first. */
	snprintf(cmd, sizeof(cmd), "env LD_PRELOAD='%s' HEAPPROFD_DORMANT=1 /bin/true", dest);
	if (system(cmd) != 0)
		die("install-preload: %s does not load cleanly into /bin/true; not installing it", dest);
	rc = hp_preload_add(file, dest, err, sizeof(err));
	if (rc < 0)
		die("install-preload: %s", err);
	printf("%s: %s\n", file, rc == 1 ? "already lists the dormant client (nothing to do)" :
	       "dormant client added; processes started from now on can be profiled");
	printf("  profile by name: heapprofctl record --name NAME; everything: heapprofctl record --all\n");
	return 0;
}

/* ------------------------------------------------------------------ */

static void usage(FILE *f)
{
	fprintf(f,
"usage: heapprofctl COMMAND [options]\n"
"  record [-i BYTES] [-o PREFIX] [--dump-at-max] [--continuous-dump MS]\n"
"         [--follow-forks] [--block] [--heaps NAME,...] [--name NAME | --all]\n"
"         [-d SECS]\n"
"         [-- COMMAND ARGS...]\n"
"                        run COMMAND under the profiler; write PREFIX.pb.gz,\n"
"                        .svg, .folded, .txt when it exits (default out/NAME)\n"
"  attach PID [-d SECS] [-o PREFIX] [-i BYTES]   profile a running (dormant) process\n"
"  dump PID              write a profile of a process being profiled now\n"
"  detach PID            stop profiling it and write its profile\n"
"  sessions              processes the daemon knows\n"
"  stats                 the module's statistics (/sys/kernel/heapprofd)\n"
"  report FILE [--top N] [--svg OUT] [--folded] [--base OTHER]\n"
"  symbolize FILE [-o OUT]\n"
"  install-preload       put the dormant client into /etc/ld.so.preload\n"
"  uninstall-preload     take it out again\n"
"common options: -v (progress and details), --transport auto|kernel|socket\n"
"See heapprofctl(1).\n");
}

static int run(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "interval", required_argument, NULL, 'i' },
		{ "output", required_argument, NULL, 'o' },
		{ "dump-at-max", no_argument, NULL, 'M' },
		{ "continuous-dump", required_argument, NULL, 'C' },
		{ "follow-forks", no_argument, NULL, 'F' },
		{ "name", required_argument, NULL, 'n' },
		{ "all", no_argument, NULL, 'A' },
		{ "duration", required_argument, NULL, 'd' },
		{ "transport", required_argument, NULL, 'T' },
		{ "stack-cap", required_argument, NULL, 'S' },
		{ "top", required_argument, NULL, 't' },
		{ "block", no_argument, NULL, 'B' },
		{ "heaps", required_argument, NULL, 'H' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct rec_opts o = { .top = 20 };
	const char *cmd;
	int opt;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	cmd = argv[1];
	if (!strcmp(cmd, "report"))
		return hp_report_main(argc - 1, argv + 1);
	if (!strcmp(cmd, "symbolize"))
		return hp_symbolize_main(argc - 1, argv + 1);

	optind = 2;
	while ((opt = getopt_long(argc, argv, "+i:o:d:vh", lo, NULL)) != -1) {
		switch (opt) {
		case 'i': o.interval = num_opt("-i (bytes)", optarg, 1, MAX_INTERVAL); break;
		case 'o': o.out = out_opt(optarg); break;
		case 'M': o.dump_at_max = 1; break;
		case 'C': o.continuous = (unsigned)num_opt("--continuous-dump (ms)", optarg, 0, UINT_MAX);
			break;
		case 'F': o.follow = 1; break;
		case 'n': o.name = optarg; break;
		case 'A': o.all = 1; break;
		case 'd': o.duration = (unsigned)num_opt("-d (seconds)", optarg, 0, MAX_SECS); break;
		case 'T':
			o.want = !strcmp(optarg, "kernel") ? 1 : !strcmp(optarg, "socket") ? 2 :
				 !strcmp(optarg, "auto") ? 0 : -1;
			if (o.want < 0)
				die("--transport must be auto, kernel or socket");
			break;
		case 'S': o.stack_cap = (unsigned)num_opt("--stack-cap (bytes)", optarg, 0, MAX_STACK_CAP);
			break;
		case 't': o.top = (int)num_opt("--top", optarg, 0, INT_MAX); break;
		case 'B': o.block = 1; break;
		case 'H': o.heaps = optarg; break;
		case 'v': verbose++; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	progress = verbose || isatty(2);
	if (!strcmp(cmd, "record"))
		return do_record(&o, argv + optind);
	if (!strcmp(cmd, "attach") || !strcmp(cmd, "dump") || !strcmp(cmd, "detach")) {
		int pid;

		if (optind >= argc)
			die("%s: which process? usage: heapprofctl %s PID", cmd, cmd);
		pid = (int)num_opt("PID", argv[optind], 1, INT_MAX);
		/* Options may also follow the pid. */
		optind++;
		while ((opt = getopt_long(argc, argv, "+i:o:d:vh", lo, NULL)) != -1) {
			switch (opt) {
			case 'i': o.interval = num_opt("-i (bytes)", optarg, 1, MAX_INTERVAL); break;
			case 'o': o.out = out_opt(optarg); break;
			case 'd': o.duration = (unsigned)num_opt("-d (seconds)", optarg, 0, MAX_SECS); break;
			case 'v': verbose++; break;
			default: usage(stderr); return 2;
			}
		}
		if (!strcmp(cmd, "attach"))
			return do_attach(pid, o.duration, o.out, o.interval, o.want);
		return simple_request(cmd, pid);
	}
	if (!strcmp(cmd, "sessions"))
		return do_sessions();
	if (!strcmp(cmd, "stats"))
		return hp_stats_main(getenv("HEAPPROFD_SYSFS") ? getenv("HEAPPROFD_SYSFS") : HP_SYSFS_ROOT);
	if (!strcmp(cmd, "install-preload"))
		return do_install_preload(1);
	if (!strcmp(cmd, "uninstall-preload"))
		return do_install_preload(0);
	fprintf(stderr, "%s: unknown command '%s'\n", prog, cmd);
	usage(stderr);
	return 2;
}

int main(int argc, char **argv)
{
	int rc = run(argc, argv);

	/* `heapprofctl sessions > /dev/full`: output lost is a failure. */
	errno = 0;
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, "%s: writing to standard output: %s\n", prog,
			errno ? strerror(errno) : "write error");
		return rc ? rc : 1;
	}
	return rc;
}
