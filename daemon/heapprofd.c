// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofd: the profiling daemon's main: options, the transports and the
 * control socket set up, then the event loop (loop.c) until asked to quit.
 * One thread runs the loop over the module's netlink events, the
 * user-space transport socket, the control socket heapprofctl talks to
 * (ctl.c) and the rings of attached sessions; the pipeline's workers
 * unwind. See heapprofd(8).
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
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "hpd.h"
#include "../proto/ctlproto.h"
#include "../proto/socket_proto.h"

static struct hpd_watch sig_w, room_w;
static const char *transport_name = "socket";

static int mkparent(const char *path, mode_t mode)
{
	char tmp[512], *d;

	snprintf(tmp, sizeof(tmp), "%s", path);
	d = dirname(tmp);
	if (mkdir(d, mode) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}
static void sig_event(struct hpd_watch *w, uint32_t ev)
{
	struct signalfd_siginfo si;

	(void)ev;
	if (read(w->fd, &si, sizeof(si)) == sizeof(si))
		hpd_ctl_ask_quit();
}

/* The pipeline made room for a process whose drain stopped for it: drain
 * again now (hpd_backlog), not on the next look. */
static void room_event(struct hpd_watch *w, uint32_t ev)
{
	uint64_t n;

	(void)ev;
	if (read(w->fd, &n, sizeof(n)) == sizeof(n))
		hpd_backlog = 1;
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

/* A numeric option, strictly (hp_parse_num); says what is wrong. */
static int opt_num(const char *name, const char *arg, unsigned long long min,
		   unsigned long long max, unsigned long long *out)
{
	char why[200];

	if (!hp_parse_num(arg, min, max, out, why, sizeof(why)))
		return 0;
	fprintf(stderr, "heapprofd: %s: %s\n", name, why);
	return -1;
}

static void usage(FILE *f)
{
	fprintf(f,
"usage: heapprofd [options]\n"
"  --socket PATH          user-space transport socket (default $%s or %s)\n"
"  --ctl PATH             control socket for heapprofctl (default $%s or %s)\n"
"  --output-dir DIR       where profiles of sessions nobody asked for go\n"
"                         (default /var/lib/heapprofd)\n"
"  --user-max-profiles N  profiles each user keeps in DIR, oldest removed\n"
"                         first (default 100; 0: no bound; private: 0)\n"
"  --user-max-bytes SIZE  disk their profiles take, per user (default 256M;\n"
"                         0: no bound; private: 0); K, M, G, T: KiB, MiB...\n"
"  --min-free SIZE|N%%     free space no dump takes, on any file system\n"
"                         (default 5%% of it, at most 1G; 0: none; private: 0)\n"
"  --max-memory SIZE|N%%   memory the daemon may hold, or N%% of the machine's\n"
"                         (default 25%%, at most 1G; 0: no bound; private: 0);\n"
"                         near it caches go, then the largest session ends\n"
"  --max-cpu PCT          CPU the daemon may spend, in %% of one CPU (default\n"
"                         0: no cap); over it the drains wait\n"
"  --transport auto|kernel|socket   (default auto: both when the module is loaded)\n"
"  -i, --interval BYTES   sampling interval for sessions attached by policy\n"
"  --continuous-dump MS   dump those sessions every MS milliseconds\n"
"  --dump-at-max          their profiles show the peak of in-use memory\n"
"  --workers N            unwinding threads (default 2)\n"
"  --private              serve only the heapprofctl that started it; exit after\n"
"  --ready-fd FD          write one byte to FD once listening\n"
"  --syslog               log to syslog instead of stderr\n"
"  --export otlp=URL      send every dump to an OpenTelemetry Collector (OTLP/HTTP:\n"
"                         URL/v1development/profiles); repeatable\n"
"  --export pyroscope=URL send every dump to Pyroscope (URL/ingest, pprof)\n"
"  --export-timeout MS    one request's bound, connecting included (default 10000)\n"
"  --export-retries N     more tries of a request that failed for a while (default 5;\n"
"                         0.5 s, 1 s, 2 s... apart)\n"
"  --export-queue N       requests waiting to be sent, at most (default 64; 64 MiB)\n"
"  -v, --verbose / -q, --quiet\n", HP_SOCKET_ENV, HP_SOCKET_DEFAULT, HPD_CTL_ENV, HPD_CTL_DEFAULT);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "ctl", required_argument, NULL, 'c' },
		{ "output-dir", required_argument, NULL, 'o' },
		{ "user-max-profiles", required_argument, NULL, 'B' },
		{ "user-max-bytes", required_argument, NULL, 'B' },
		{ "min-free", required_argument, NULL, 'B' },
		{ "max-memory", required_argument, NULL, 'm' },
		{ "max-cpu", required_argument, NULL, 'u' },
		{ "transport", required_argument, NULL, 't' },
		{ "interval", required_argument, NULL, 'i' },
		{ "continuous-dump", required_argument, NULL, 'C' },
		{ "dump-at-max", no_argument, NULL, 'M' },
		{ "workers", required_argument, NULL, 'w' },
		{ "private", no_argument, NULL, 'P' },
		{ "ready-fd", required_argument, NULL, 'R' },
		{ "syslog", no_argument, NULL, 'S' },
		{ "export", required_argument, NULL, 'E' },
		{ "export-timeout", required_argument, NULL, 'X' },
		{ "export-retries", required_argument, NULL, 'Y' },
		{ "export-queue", required_argument, NULL, 'Q' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	struct hp_pipeline_opts po;
	struct hpd_rule *dflt;
	uint64_t last_tick = 0;
	int ready_fd = -1, opt, rc, kmod_ok = 0, li;
	unsigned continuous = 0;
	unsigned long long v;
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
	/*
	 * No transparent huge pages for the daemon's memory. Where they are
	 * on for every mapping (Debian's kernels: "always"), the arenas were
	 * backed by 2 MiB pages, and what the books let go of did not come
	 * back: after the memory budget ended a 41 MiB session in a stock
	 * 6.1 guest, the daemon held 40 MiB for good, 32 MiB of it huge pages
	 * (malloc_trim's page-sized holes merged back by khugepaged, or
	 * never made), and the budget counted it against every later
	 * session. The books are small blocks: huge pages buy them nothing.
	 */
	if (prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) < 0)
		hpd_log(HPD_DEBUG, "PR_SET_THP_DISABLE: %s", strerror(errno));
	hpd_opts.socket_path = getenv(HP_SOCKET_ENV) ? getenv(HP_SOCKET_ENV) : HP_SOCKET_DEFAULT;
	hpd_opts.ctl_path = getenv(HPD_CTL_ENV) ? getenv(HPD_CTL_ENV) : HPD_CTL_DEFAULT;
	if (getenv("HEAPPROFD_TEST_ENABLE_DELAY_MS"))
		hpd_opts.test_enable_delay_ms =
			(unsigned)strtoul(getenv("HEAPPROFD_TEST_ENABLE_DELAY_MS"), NULL, 10);
	hpd_opts.outdir = "/var/lib/heapprofd";
	hpd_opts.workers = 2;
	while ((opt = getopt_long(argc, argv, "i:vqh", lo, &li)) != -1) {
		char why[300];

		switch (opt) {
		case 'B':	/* the output budget's (out_budget.c) */
			if (hpd_budget_option(lo[li].name, optarg, why, sizeof(why))) {
				fprintf(stderr, "heapprofd: %s\n", why);
				return 2;
			}
			break;
		case 'm':	/* the memory budget's (mem_budget.c) */
			if (hpd_mem_option(lo[li].name, optarg, why, sizeof(why))) {
				fprintf(stderr, "heapprofd: %s\n", why);
				return 2;
			}
			break;
		case 'u':	/* the CPU budget's (cpu_budget.c) */
			if (hpd_cpu_option(lo[li].name, optarg, why, sizeof(why))) {
				fprintf(stderr, "heapprofd: %s\n", why);
				return 2;
			}
			break;
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
		case 'i':
			if (opt_num("--interval", optarg, 1, 1ULL << 40, &v))
				return 2;
			hpd_opts.interval = v;
			break;
		case 'C':
			if (opt_num("--continuous-dump", optarg, 0, 86400000, &v))
				return 2;
			continuous = (unsigned)v;
			break;
		case 'M': dump_at_max = 1; break;
		case 'w':
			if (opt_num("--workers", optarg, 1, 64, &v))
				return 2;
			hpd_opts.workers = (unsigned)v;
			break;
		case 'P': hpd_opts.private_mode = 1; break;
		case 'R':
			if (opt_num("--ready-fd", optarg, 0, 1 << 20, &v))
				return 2;
			ready_fd = (int)v;
			break;
		case 'S': hpd_log_to_syslog(); break;
		case 'E':	/* exports (export.c) */
			if (hpd_export_option(optarg, why, sizeof(why))) {
				fprintf(stderr, "heapprofd: %s\n", why);
				return 2;
			}
			break;
		case 'X':
			if (opt_num("--export-timeout", optarg, 100, 600000, &v))
				return 2;
			hpd_export_opts.timeout_ms = (unsigned)v;
			break;
		case 'Y':
			if (opt_num("--export-retries", optarg, 0, 20, &v))
				return 2;
			hpd_export_opts.retries = (unsigned)v;
			break;
		case 'Q':
			if (opt_num("--export-queue", optarg, 1, 4096, &v))
				return 2;
			hpd_export_opts.queue_max = (unsigned)v;
			break;
		case 'v': hpd_verbosity++; break;
		case 'q': hpd_verbosity = HPD_WARN; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	hpd_opts.attach_all_default = !hpd_opts.private_mode;
	hpd_budget_defaults(hpd_opts.private_mode);
	hpd_mem_defaults(hpd_opts.private_mode);
	raise_fd_limit();
	hpd_fd_budget_init();

	sigemptyset(&ss);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGHUP);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (hpd_loop_init() < 0) {
		hpd_log(HPD_ERR, "epoll: %s", strerror(errno));
		return 1;
	}
	sig_w.fn = sig_event;
	hpd_loop_add(signalfd(-1, &ss, SFD_CLOEXEC | SFD_NONBLOCK), EPOLLIN, &sig_w);

	memset(&po, 0, sizeof(po));
	po.unwind_workers = hpd_opts.workers;
	hpd_mem_init();
	hpd_cpu_init();
	po.max_queued_bytes = hpd_mem_queue_max();
	if (hpd_cpu_queue_max() &&
	    (!po.max_queued_bytes || hpd_cpu_queue_max() < po.max_queued_bytes))
		po.max_queued_bytes = hpd_cpu_queue_max();
	po.max_copied_bytes = hpd_mem_copy_max();
	hpd_pipe = hp_pipeline_new(&po);
	if (!hpd_pipe) {
		hpd_log(HPD_ERR, "cannot start the profile pipeline");
		return 1;
	}
	room_w.fn = room_event;
	if (hp_pipeline_room_fd(hpd_pipe) >= 0)
		hpd_loop_add(hp_pipeline_room_fd(hpd_pipe), EPOLLIN, &room_w);
	if (!hpd_opts.private_mode) {
		/* The system policy: attach every session not registered dormant. */
		dflt = calloc(1, sizeof(*dflt));
		if (!dflt) {
			hpd_log(HPD_ERR, "out of memory");
			return 1;
		}
		dflt->all = 1;
		dflt->interval = hpd_opts.interval;
		dflt->continuous_ms = continuous;
		dflt->dump_at_max = dump_at_max;
		/* As every rule a request makes (ctl.c): a full ring is waited
		 * on and sampled less (adaptive), never dropped. */
		dflt->cfg_flags = HEAPPROFD_CFG_BLOCK;
		hpd_rule_add(dflt);
		if (mkdir(hpd_opts.outdir, 0750) < 0 && errno != EEXIST)
			hpd_log(HPD_WARN, "cannot create %s: %s", hpd_opts.outdir, strerror(errno));
	}
	/* What each user has there already counts (a restart keeps the budget). */
	hpd_budget_init(hpd_opts.outdir);

	if (hpd_opts.transport != 2) {
		rc = hpd_kernel_init();
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
		if (hpd_socket_listen(hpd_opts.socket_path) < 0)
			return 1;
	}
	transport_name = kmod_ok ? (hpd_opts.transport == 1 ? "kernel" : "kernel+socket") : "socket";
	hpd_ctl_set_transport(transport_name);
	mkparent(hpd_opts.ctl_path, 0755);
	if (hpd_ctl_listen(hpd_opts.ctl_path) < 0)
		return 1;
	hpd_log(HPD_INFO, "ready: transport %s, control %s%s%s", transport_name, hpd_opts.ctl_path,
		hpd_opts.transport != 1 ? ", socket " : "",
		hpd_opts.transport != 1 ? hpd_opts.socket_path : "");
	/* --export: the sender starts now, loading libcurl on its own thread,
	 * so that a libcurl that cannot be loaded is said at start. */
	if (hpd_export_default()->n)
		hpd_export_start();
	if (ready_fd >= 0) {
		if (write(ready_fd, kmod_ok ? "k" : "s", 1) < 0)
			hpd_log(HPD_DEBUG, "ready fd: %s", strerror(errno));
		close(ready_fd);
	}

	while (!hpd_ctl_quit_asked()) {
		int live = 0, n, timeout;
		struct hpd_session *s;
		uint64_t now;

		for (s = hpd_sessions; s; s = s->next)
			live += s->enabled && !s->ending;
		if (hpd_opts.private_mode && hpd_ctl_owner_gone() && !live)
			break;
		/*
		 * Live sessions are drained every HPD_TICK_MS: producers wake
		 * us only when a ring is a quarter full (consumer.c), so the
		 * tick bounds the latency of the rest. Hang-ups and exits come
		 * through epoll at once.
		 */
		timeout = -1;
		if (live && hpd_backlog) {
			timeout = 0;
		} else if (live && hpd_pipe_wait) {
			timeout = 1;
		} else if (live) {
			now = hpd_now_ms();
			timeout = now - last_tick >= HPD_TICK_MS ? 0 :
				  (int)(HPD_TICK_MS - (now - last_tick));
		}
		timeout = hpd_sooner(timeout, hpd_mem_wake_ms(hpd_now_ms()));
		timeout = hpd_sooner(timeout, hpd_cpu_wake_ms(hpd_now_ms()));
		n = hpd_loop_run(timeout);
		if (n < 0) {
			hpd_log(HPD_ERR, "epoll_wait: %s", strerror(-n));
			break;
		}
		now = hpd_now_ms();
		hpd_cpu_tick(now);
		if (hpd_backlog || hpd_pipe_wait || now - last_tick >= HPD_TICK_MS) {
			hpd_backlog = 0;
			hpd_pipe_wait = 0;
			hpd_mem_check(now);
			if (hpd_verbosity >= HPD_DEBUG && hpd_now_ms() - now >= 1000)
				hpd_log(HPD_DEBUG, "the memory budget's look held the tick %llu ms",
					(unsigned long long)(hpd_now_ms() - now));
			hpd_session_tick(now);
			last_tick = now;
			/* With -v, a tick that held the loop a second or more
			 * (the drains, dumps and budgets run in it). */
			if (hpd_verbosity >= HPD_DEBUG && hpd_now_ms() - now >= 1000)
				hpd_log(HPD_DEBUG, "the event loop was held %llu ms by the tick (drains, dumps, budgets)",
					(unsigned long long)(hpd_now_ms() - now));
		}
		hpd_sessions_reap();
		hpd_ctl_reap();
	}
	/* Finish every session: what was collected is written out (and sent). */
	hpd_sessions_finish();
	hpd_sessions_reap();
	hpd_export_stop();
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	/*
	 * A private daemon's owner (heapprofctl record) waits for its exit, and
	 * every profile is written and sent by now: freeing the books of a
	 * large one (30 ms for clang's) would only keep the user waiting. The
	 * sanitizer builds free everything, for their leak checks.
	 */
	if (hpd_opts.private_mode) {
		if (hpd_opts.transport != 1)
			unlink(hpd_opts.socket_path);
		unlink(hpd_opts.ctl_path);
		hpd_log(HPD_INFO, "stopped");
		fflush(NULL);
		_exit(0);
	}
#endif
	hp_pipeline_free(hpd_pipe);
	hpd_budget_fini();
	hpd_mem_fini();
	if (hpd_opts.transport != 1)
		unlink(hpd_opts.socket_path);
	unlink(hpd_opts.ctl_path);
	hpd_log(HPD_INFO, "stopped");
	return 0;
}
