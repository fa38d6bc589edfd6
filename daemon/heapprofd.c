// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofd: the profiling daemon. One thread runs an epoll loop over the
 * module's netlink events, the user-space transport socket, the control
 * socket heapprofctl talks to, and the rings of attached sessions; the
 * pipeline's workers unwind. See heapprofd(8).
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "hpd.h"
#include "ctlproto.h"
#include "../libclient/socket_proto.h"

struct hpd_opts hpd_opts;
static int epfd = -1;
static int quit;
static int had_owner;		/* private mode: a heapprofctl has connected */
static int nctl;		/* control connections open */
static const char *transport_name = "socket";

/* ---- the loop ---- */
int hpd_loop_add(int fd, uint32_t events, struct hpd_watch *w)
{
	struct epoll_event e = { .events = events, .data.ptr = w };

	w->fd = fd;
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &e) < 0) {
		hpd_log(HPD_WARN, "epoll add %d: %s", fd, strerror(errno));
		return -1;
	}
	return 0;
}

void hpd_loop_del(int fd)
{
	epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
}

/*
 * A listening socket whose accept fails for want of descriptors stays
 * readable: watched, it would spin the loop. It is left out for a while
 * instead (sessions ending meanwhile give descriptors back).
 */
#define MAX_PAUSED	4
static struct hpd_watch *paused[MAX_PAUSED];
static int npaused;
static uint64_t resume_at;

void hpd_loop_backoff(struct hpd_watch *w)
{
	if (npaused == MAX_PAUSED)
		return;
	for (int i = 0; i < npaused; i++)
		if (paused[i] == w)
			return;
	hpd_log(HPD_WARN, "out of file descriptors: not accepting connections for %d ms",
		HPD_ACCEPT_BACKOFF_MS);
	hpd_loop_del(w->fd);
	paused[npaused++] = w;
	resume_at = hpd_now_ms() + HPD_ACCEPT_BACKOFF_MS;
}

/* ms until the paused sockets are watched again, or -1; resumes them when due. */
static int loop_resume(uint64_t now)
{
	if (!npaused)
		return -1;
	if (now < resume_at)
		return (int)(resume_at - now);
	while (npaused) {
		struct hpd_watch *w = paused[--npaused];

		hpd_loop_add(w->fd, EPOLLIN, w);
	}
	return -1;
}

/* The nearer of two timeouts, -1 being none. */
static int sooner(int a, int b)
{
	return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* ---- control connections ---- */
struct ctlconn {
	struct hpd_watch w;
	struct ctlconn *next;
	int dead;
};
static struct ctlconn *ctlconns;
static struct hpd_watch ctl_listen_w, sig_w;

static void ctl_send(int fd, const char *msg)
{
	if (send(fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		hpd_log(HPD_DEBUG, "control reply: %s", strerror(errno));
}

/* Send an event line (already encoded with hpc_put) to the rule's owner. */
void hpd_event(struct hpd_rule *r, const char *msg)
{
	struct ctlconn *c;

	if (!r || !r->owner)
		return;
	c = (struct ctlconn *)r->owner;
	if (!c->dead)
		ctl_send(c->w.fd, msg);
}

static struct hpd_rule *rule_from(const char *m, struct ctlconn *c)
{
	struct hpd_rule *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->owner = (struct hpd_ctlconn *)c;
	r->pid = (pid_t)hpc_getu(m, "pid", 0);
	hpc_get(m, "name", r->name, sizeof(r->name));
	r->all = (int)hpc_getu(m, "all", 0);
	r->follow_forks = (int)hpc_getu(m, "follow", 0);
	r->dormant_too = (int)hpc_getu(m, "dormant", 0);
	r->interval = hpc_getu(m, "interval", 0);
	r->stack_cap = (uint32_t)hpc_getu(m, "stack_cap", 0);
	r->cfg_flags = (uint32_t)hpc_getu(m, "cfg_flags", 0) & HEAPPROFD_CFG_ALL;
	hpc_get(m, "heaps", r->heaps, sizeof(r->heaps));
	if (r->follow_forks)
		r->cfg_flags |= HEAPPROFD_CFG_FOLLOW_FORKS;
	r->formats = (unsigned)hpc_getu(m, "formats", 0);
	r->dump_at_max = (int)hpc_getu(m, "dump_at_max", 0);
	r->continuous_ms = (unsigned)hpc_getu(m, "continuous", 0);
	hpc_get(m, "prefix", r->prefix, sizeof(r->prefix));
	return r;
}

static const char *tname(const struct hpd_session *s)
{
	return s->transport == HPD_T_KERNEL ? "module" :
	       s->transport == HPD_T_SOCKET ? "socket" : "scan";
}

struct list_out {
	char *out;
	size_t n, cap;
};

/* A module session nobody is attached to (a dormant one, usually). */
static void list_kernel(void *arg, uint64_t id, pid_t pid, const char *comm, uint32_t flags,
			uint32_t state)
{
	struct list_out *lo = arg;
	struct hpd_session *s;

	for (s = hpd_sessions; s; s = s->next)
		if (s->transport == HPD_T_KERNEL && s->id == id && !s->ending)
			return;
	if (state == HEAPPROFD_STATE_CLOSED || lo->n >= lo->cap - 512)
		return;
	lo->n += snprintf(lo->out + lo->n, lo->cap - lo->n, "%d %s %llu module %s 0 0 0 -\n",
			  (int)pid, comm[0] ? comm : "?", (unsigned long long)id,
			  flags & HEAPPROFD_REGISTER_DORMANT ? "dormant" :
			  state == HEAPPROFD_STATE_ATTACHED ? "attached-elsewhere" : "open");
}

static void ctl_sessions(int fd)
{
	static char out[HPD_MSG_MAX];
	struct hpd_session *s;
	struct list_out lo;
	size_t n;

	n = snprintf(out, sizeof(out), "ok\n");
	for (s = hpd_sessions; s && n < sizeof(out) - 512; s = s->next) {
		if (s->ending)
			continue;
		n += snprintf(out + n, sizeof(out) - n,
			      "%d %s %llu %s %s %llu %llu %llu %s\n", (int)s->pid, s->comm,
			      (unsigned long long)s->id, tname(s),
			      s->enabled ? "profiling" : "dormant",
			      (unsigned long long)s->records, (unsigned long long)s->bytes,
			      s->enabled && s->map ? (unsigned long long)
				__atomic_load_n(&s->ring.cnt->records_dropped, __ATOMIC_RELAXED) : 0ULL,
			      s->enabled ? s->prefix : "-");
	}
	lo.out = out;
	lo.n = n;
	lo.cap = sizeof(out);
	hpd_kmod_list(list_kernel, &lo);
	ctl_send(fd, out);
}

static void ctl_attach(struct ctlconn *c, const char *m)
{
	char err[400] = "", rep[1200] = "ok";
	struct hpd_session *s;
	struct hpd_rule *r;
	pid_t pid = (pid_t)hpc_getu(m, "pid", 0);
	int rc;

	if (pid <= 0) {
		ctl_send(c->w.fd, "err msg=attach:%20no%20pid");
		return;
	}
	s = hpd_session_by_pid(pid);
	if (s && s->enabled && (!s->rule || !s->rule->owner)) {
		/* Profiled by the system policy: this heapprofctl takes it over. */
		r = rule_from(m, c);
		if (!r)
			return;
		hpd_rule_add(r);
		if (s->rule)
			s->rule->live--;
		s->rule = r;
		r->nsessions++;
		r->live++;
		if (r->prefix[0])
			snprintf(s->prefix, sizeof(s->prefix), "%s", r->prefix);
		hpc_put(rep, sizeof(rep), "prefix", s->prefix);
		hpc_put(rep, sizeof(rep), "transport", tname(s));
		ctl_send(c->w.fd, rep);
		return;
	}
	if (s && s->enabled) {
		snprintf(rep, sizeof(rep), "err");
		hpc_put(rep, sizeof(rep), "msg", "that process is already being profiled; detach it first");
		ctl_send(c->w.fd, rep);
		return;
	}
	r = rule_from(m, c);
	if (!r)
		return;
	r->dormant_too = 1;
	hpd_rule_add(r);
	if (s && s->transport == HPD_T_SOCKET)
		rc = hpd_usock_enable_dormant(s, r);
	else if (hpd_kmod_available() && (rc = hpd_kmod_attach(0, pid, r)) != -ESRCH && rc != -ENODEV)
		snprintf(err, sizeof(err), "the module refused: %s%s", strerror(-rc),
			 rc == -EPERM ? " (another user's or a non-dumpable process: run heapprofd as root)" :
			 rc == -EBUSY ? " (another consumer is attached)" : "");
	else
		rc = hpd_scan_attach(pid, r, err, sizeof(err));
	if (rc) {
		hpd_rule_del(r);
		free(r);
		snprintf(rep, sizeof(rep), "err");
		hpc_put(rep, sizeof(rep), "msg", err[0] ? err : strerror(-rc));
		ctl_send(c->w.fd, rep);
		return;
	}
	s = hpd_session_by_pid(pid);
	hpc_put(rep, sizeof(rep), "prefix", s ? s->prefix : "");
	hpc_put(rep, sizeof(rep), "transport", s ? tname(s) : "?");
	ctl_send(c->w.fd, rep);
}

static void ctl_request(struct ctlconn *c, char *m)
{
	char rep[1200] = "ok";
	struct hpd_session *s;
	pid_t pid;

	hpd_log(HPD_DEBUG, "control: %s", m);
	if (hpc_verb_is(m, "hello")) {
		hpc_put(rep, sizeof(rep), "version", "1");
		hpc_put(rep, sizeof(rep), "transport", transport_name);
		hpc_put(rep, sizeof(rep), "socket", hpd_opts.socket_path);
		hpc_putu(rep, sizeof(rep), "private", hpd_opts.private_mode);
		hpc_putu(rep, sizeof(rep), "pid", getpid());
	} else if (hpc_verb_is(m, "watch")) {
		struct hpd_rule *r = rule_from(m, c);

		if (!r)
			snprintf(rep, sizeof(rep), "err msg=out%%20of%%20memory");
		else
			hpd_rule_add(r);
	} else if (hpc_verb_is(m, "attach")) {
		ctl_attach(c, m);
		return;
	} else if (hpc_verb_is(m, "detach") || hpc_verb_is(m, "dump")) {
		char path[700] = "";

		pid = (pid_t)hpc_getu(m, "pid", 0);
		s = hpd_session_by_pid(pid);
		if (!s || !s->enabled) {
			snprintf(rep, sizeof(rep), "err");
			hpc_put(rep, sizeof(rep), "msg", "no profiled process with that pid (see `heapprofctl sessions`)");
		} else if (hpc_verb_is(m, "dump")) {
			hpd_session_drain(s, 0);
			if (hpd_session_dump(s, HP_DUMP_NOW, path, sizeof(path)) < 0) {
				snprintf(rep, sizeof(rep), "err");
				hpc_put(rep, sizeof(rep), "msg", "writing the profile failed (see the daemon's log)");
			} else {
				hpc_put(rep, sizeof(rep), "prefix", path);
			}
		} else {
			snprintf(path, sizeof(path), "%s", s->prefix);
			hpd_session_detach(s);
			hpc_put(rep, sizeof(rep), "prefix", path);
		}
	} else if (hpc_verb_is(m, "sessions")) {
		ctl_sessions(c->w.fd);
		return;
	} else if (hpc_verb_is(m, "quit")) {
		quit = 1;
	} else {
		snprintf(rep, sizeof(rep), "err msg=unknown%%20request");
	}
	ctl_send(c->w.fd, rep);
}

/* The heapprofctl went away: its rules go, and their sessions are finished. */
static void ctl_close(struct ctlconn *c)
{
	struct hpd_session *s;

	c->dead = 1;
	hpd_loop_del(c->w.fd);
	for (s = hpd_sessions; s; s = s->next)
		if (s->rule && s->rule->owner == (struct hpd_ctlconn *)c && !s->ending)
			hpd_session_detach(s);
	for (;;) {
		struct hpd_rule *r = hpd_rule_owned_by((struct hpd_ctlconn *)c);

		if (!r)
			break;
		hpd_rule_del(r);
		for (s = hpd_sessions; s; s = s->next)
			if (s->rule == r)
				s->rule = NULL;
		free(r);
	}
	close(c->w.fd);
	nctl--;
}

static void ctl_event(struct hpd_watch *w, uint32_t ev)
{
	struct ctlconn *c = (struct ctlconn *)w;
	static char m[HPD_MSG_MAX];
	ssize_t n;

	if (c->dead)
		return;
	n = recv(w->fd, m, sizeof(m) - 1, MSG_DONTWAIT);
	if (n > 0) {
		m[n] = 0;
		ctl_request(c, m);
		return;
	}
	if (n == 0 || (n < 0 && errno != EAGAIN) || (ev & (EPOLLHUP | EPOLLERR)))
		ctl_close(c);
}

static void ctl_accept(struct hpd_watch *w, uint32_t ev)
{
	struct ctlconn *c;
	int fd;

	(void)ev;
	while ((fd = accept4(w->fd, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->w.fn = ctl_event;
		c->next = ctlconns;
		ctlconns = c;
		hpd_loop_add(fd, EPOLLIN | EPOLLRDHUP, &c->w);
		nctl++;
		had_owner = 1;
	}
	if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
		hpd_loop_backoff(w);
}

static void reap_ctl(void)
{
	struct ctlconn **pp = &ctlconns, *c;

	while ((c = *pp) != NULL) {
		if (c->dead) {
			*pp = c->next;
			free(c);
		} else {
			pp = &c->next;
		}
	}
}

static int mkparent(const char *path, mode_t mode)
{
	char tmp[512], *d;

	snprintf(tmp, sizeof(tmp), "%s", path);
	d = dirname(tmp);
	if (mkdir(d, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int ctl_listen(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path))
		return -ENAMETOOLONG;
	strcpy(a.sun_path, path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	unlink(path);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0) {
		int e = errno;

		hpd_log(HPD_ERR, "cannot listen on %s: %s", path, strerror(e));
		close(fd);
		return -e;
	}
	/* Only the daemon's user (root for the system daemon) may control it. */
	chmod(path, 0600);
	ctl_listen_w.fn = ctl_accept;
	return hpd_loop_add(fd, EPOLLIN, &ctl_listen_w);
}

static void sig_event(struct hpd_watch *w, uint32_t ev)
{
	struct signalfd_siginfo si;

	(void)ev;
	if (read(w->fd, &si, sizeof(si)) == sizeof(si))
		quit = 1;
}

/*
 * Every session holds a few descriptors (ring, wake, maps, mem, exe,
 * pidfd, /proc dir, one per ELF file kept): take all the kernel lets us.
 */
static void raise_fd_limit(void)
{
	struct rlimit rl;

	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: heapprofd [options]\n"
"  --socket PATH          user-space transport socket (default $%s or %s)\n"
"  --ctl PATH             control socket for heapprofctl (default $%s or %s)\n"
"  --output-dir DIR       where profiles of sessions nobody asked for go\n"
"                         (default /var/lib/heapprofd)\n"
"  --transport auto|kernel|socket   (default auto: both when the module is loaded)\n"
"  -i, --interval BYTES   sampling interval for sessions attached by policy\n"
"  --continuous-dump MS   dump those sessions every MS milliseconds\n"
"  --dump-at-max          their profiles show the peak of in-use memory\n"
"  --workers N            unwinding threads (default 2)\n"
"  --private              serve only the heapprofctl that started it; exit after\n"
"  --ready-fd FD          write one byte to FD once listening\n"
"  --syslog               log to syslog instead of stderr\n"
"  -v, --verbose / -q, --quiet\n", HP_SOCKET_ENV, HP_SOCKET_DEFAULT, HPD_CTL_ENV, HPD_CTL_DEFAULT);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "ctl", required_argument, NULL, 'c' },
		{ "output-dir", required_argument, NULL, 'o' },
		{ "transport", required_argument, NULL, 't' },
		{ "interval", required_argument, NULL, 'i' },
		{ "continuous-dump", required_argument, NULL, 'C' },
		{ "dump-at-max", no_argument, NULL, 'M' },
		{ "workers", required_argument, NULL, 'w' },
		{ "private", no_argument, NULL, 'P' },
		{ "ready-fd", required_argument, NULL, 'R' },
		{ "syslog", no_argument, NULL, 'S' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct hp_pipeline_opts po;
	struct hpd_rule *dflt;
	struct epoll_event evs[64];
	uint64_t last_tick = 0;
	int ready_fd = -1, opt, rc, i, kmod_ok = 0;
	unsigned continuous = 0;
	int dump_at_max = 0;
	sigset_t ss;

	/*
	 * Records pass through the daemon in batches that are allocated by
	 * one thread and freed by another at a high rate. With glibc's
	 * defaults the freed top of each arena was given back to the kernel
	 * and faulted in again moments later: ~200 brk and ~150 madvise
	 * calls, with their page faults, in a 1 s recording of 870 k
	 * records (bench/peers). Keep up to 16 MiB of free memory per arena
	 * instead, and serve blocks up to 4 MiB from the arenas.
	 */
	mallopt(M_TRIM_THRESHOLD, 16 << 20);
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
	hpd_opts.socket_path = getenv(HP_SOCKET_ENV) ? getenv(HP_SOCKET_ENV) : HP_SOCKET_DEFAULT;
	hpd_opts.ctl_path = getenv(HPD_CTL_ENV) ? getenv(HPD_CTL_ENV) : HPD_CTL_DEFAULT;
	if (getenv("HEAPPROFD_TEST_ENABLE_DELAY_MS"))
		hpd_opts.test_enable_delay_ms =
			(unsigned)strtoul(getenv("HEAPPROFD_TEST_ENABLE_DELAY_MS"), NULL, 10);
	hpd_opts.outdir = "/var/lib/heapprofd";
	hpd_opts.workers = 2;
	while ((opt = getopt_long(argc, argv, "i:vqh", lo, NULL)) != -1) {
		switch (opt) {
		case 's': hpd_opts.socket_path = optarg; break;
		case 'c': hpd_opts.ctl_path = optarg; break;
		case 'o': hpd_opts.outdir = optarg; break;
		case 't':
			if (!strcmp(optarg, "auto"))
				hpd_opts.transport = 0;
			else if (!strcmp(optarg, "kernel"))
				hpd_opts.transport = 1;
			else if (!strcmp(optarg, "socket"))
				hpd_opts.transport = 2;
			else {
				fprintf(stderr, "heapprofd: --transport must be auto, kernel or socket\n");
				return 2;
			}
			break;
		case 'i': hpd_opts.interval = strtoull(optarg, NULL, 0); break;
		case 'C': continuous = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'M': dump_at_max = 1; break;
		case 'w': hpd_opts.workers = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'P': hpd_opts.private_mode = 1; break;
		case 'R': ready_fd = atoi(optarg); break;
		case 'S': hpd_log_to_syslog(); break;
		case 'v': hpd_verbosity++; break;
		case 'q': hpd_verbosity = HPD_WARN; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	hpd_opts.attach_all_default = !hpd_opts.private_mode;
	raise_fd_limit();

	sigemptyset(&ss);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGHUP);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);

	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0) {
		hpd_log(HPD_ERR, "epoll: %s", strerror(errno));
		return 1;
	}
	sig_w.fn = sig_event;
	hpd_loop_add(signalfd(-1, &ss, SFD_CLOEXEC | SFD_NONBLOCK), EPOLLIN, &sig_w);

	memset(&po, 0, sizeof(po));
	po.unwind_workers = hpd_opts.workers;
	hpd_pipe = hp_pipeline_new(&po);
	if (!hpd_pipe) {
		hpd_log(HPD_ERR, "cannot start the profile pipeline");
		return 1;
	}
	if (!hpd_opts.private_mode) {
		/* The system policy: attach every session not registered dormant. */
		dflt = calloc(1, sizeof(*dflt));
		dflt->all = 1;
		dflt->interval = hpd_opts.interval;
		dflt->continuous_ms = continuous;
		dflt->dump_at_max = dump_at_max;
		hpd_rule_add(dflt);
		if (mkdir(hpd_opts.outdir, 0750) < 0 && errno != EEXIST)
			hpd_log(HPD_WARN, "cannot create %s: %s", hpd_opts.outdir, strerror(errno));
	}

	if (hpd_opts.transport != 2) {
		rc = hpd_kmod_init();
		if (rc == 0) {
			kmod_ok = 1;
		} else if (hpd_opts.transport == 1) {
			hpd_log(HPD_ERR, "the heapprofd module is not usable (%s): load it (modprobe heapprofd) or use --transport socket",
				rc == -ENOENT ? "no /dev/heapprofd" : strerror(-rc));
			return 1;
		} else {
			hpd_log(HPD_INFO, "module not available (%s): serving the user-space transport only",
				rc == -ENOENT ? "no /dev/heapprofd" : strerror(-rc));
		}
	}
	if (hpd_opts.transport != 1) {
		mkparent(hpd_opts.socket_path, 0755);
		if (hpd_usock_listen(hpd_opts.socket_path) < 0)
			return 1;
	}
	transport_name = kmod_ok ? (hpd_opts.transport == 1 ? "kernel" : "kernel+socket") : "socket";
	mkparent(hpd_opts.ctl_path, 0755);
	if (ctl_listen(hpd_opts.ctl_path) < 0)
		return 1;
	hpd_log(HPD_INFO, "ready: transport %s, control %s%s%s", transport_name, hpd_opts.ctl_path,
		hpd_opts.transport != 1 ? ", socket " : "",
		hpd_opts.transport != 1 ? hpd_opts.socket_path : "");
	if (ready_fd >= 0) {
		if (write(ready_fd, kmod_ok ? "k" : "s", 1) < 0)
			hpd_log(HPD_DEBUG, "ready fd: %s", strerror(errno));
		close(ready_fd);
	}

	while (!quit) {
		int live = 0, n, timeout;
		struct hpd_session *s;
		uint64_t now;

		for (s = hpd_sessions; s; s = s->next)
			live += s->enabled && !s->ending;
		if (hpd_opts.private_mode && had_owner && !nctl && !live)
			break;
		/*
		 * Live sessions are drained every HPD_TICK_MS: producers wake
		 * us only when a ring is a quarter full (session.c), so the
		 * tick bounds the latency of the rest. Hang-ups and exits come
		 * through epoll at once.
		 */
		timeout = -1;
		if (live && hpd_backlog) {
			timeout = 0;
		} else if (live) {
			now = hpd_now_ms();
			timeout = now - last_tick >= HPD_TICK_MS ? 0 :
				  (int)(HPD_TICK_MS - (now - last_tick));
		}
		now = hpd_now_ms();
		timeout = sooner(timeout, hpd_usock_expire(now));
		timeout = sooner(timeout, loop_resume(now));
		n = epoll_wait(epfd, evs, 64, timeout);
		if (n < 0 && errno != EINTR) {
			hpd_log(HPD_ERR, "epoll_wait: %s", strerror(errno));
			break;
		}
		for (i = 0; i < n; i++) {
			struct hpd_watch *w = evs[i].data.ptr;

			w->fn(w, evs[i].events);
		}
		now = hpd_now_ms();
		if (hpd_backlog || now - last_tick >= HPD_TICK_MS) {
			hpd_backlog = 0;
			hpd_session_tick(now);
			last_tick = now;
		}
		hpd_sessions_reap();
		reap_ctl();
	}
	/* Finish every session: what was collected is written out. */
	{
		struct hpd_session *s;

		for (s = hpd_sessions; s; s = s->next)
			if (!s->ending)
				hpd_session_detach(s);
		hpd_sessions_reap();
	}
	hp_pipeline_free(hpd_pipe);
	if (hpd_opts.transport != 1)
		unlink(hpd_opts.socket_path);
	unlink(hpd_opts.ctl_path);
	hpd_log(HPD_INFO, "stopped");
	return 0;
}
