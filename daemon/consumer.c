// SPDX-License-Identifier: GPL-2.0
/*
 * One profiled process as the daemon sees it: its ring (mapped from the
 * module's consumer fd or the client's memfd), the drain that copies each
 * record out of shared memory before anyone parses it, and the hand-off to
 * the pipeline (unwinding, books, outputs).
 *
 * Everything in the ring is written by the profiled process and is hostile:
 * ring.h checks positions and lengths, the pipeline checks record contents,
 * and a SIGBUS from a memfd the client shrank is caught around every access
 * to shared memory. Any of these ends that one session with a logged reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hpd.h"
#include "../proto/ctlproto.h"
#include "pipeline/formats.h"
#include "pipeline/outfile.h"

struct hpd_session *hpd_sessions;
struct hp_pipeline *hpd_pipe;
static uint64_t next_id = 1;

/*
 * A record whose writer has not committed it after this long is given up.
 * The time counted is the time the drain watched it stay so, each look
 * adding at most STALL_STEP_MAX_MS since the last: a machine that stood
 * still (a virtual machine whose host did not run it) stopped the writer
 * and this daemon alike, and its writer must get to run again first.
 */
#define STALL_BOUND_MS		1000
#define STALL_STEP_MAX_MS	100
/* Records drained in one go before other sessions get their turn. */
#define DRAIN_BATCH		8192
/*
 * And the time one drain may hold the event loop. Records slow to unwind
 * (a slow machine; a process that makes them slow on purpose) could hold
 * the loop for seconds: root's heapprofctl, other programs' hellos and
 * hang-ups all wait on it. The clock is read every DRAIN_CLOCK_EVERY
 * records; and a drain stops before a record that would wait for room in
 * the pipeline (pipeline.c, wait_for_room: one such wait held a loaded
 * guest's loop 11.5 s).
 */
#define DRAIN_HOLD_MS		20
#define DRAIN_CLOCK_EVERY	16
/*
 * While the pipeline holds all it may of a process's records, the drain
 * tells the client it is behind, not stopped (uapi: consumer.behind), and
 * the client waits on past its stall bound (10 s): on a loaded machine the
 * pipeline may take that long to make room. Not for ever: a pipeline that
 * took none of a process's records for this long (watched as the stall
 * above is) is stuck, and the session ends, which lets the program go.
 */
#define PIPE_STUCK_MS		60000

/* ---- SIGBUS guard around shared memory ---- */
static sigjmp_buf guard_env;
static volatile sig_atomic_t guard_on;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	(void)si;
	(void)uc;
	if (guard_on) {
		guard_on = 0;
		siglongjmp(guard_env, 1);
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

static void guard_install(void)
{
	static int done;
	struct sigaction sa;

	if (done)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sigbus;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGBUS, &sa, NULL);
	done = 1;
}

uint64_t hpd_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void hpd_clean_comm(char *out, size_t len, const char *comm)
{
	snprintf(out, len, "%s", comm);
	/* The process chose its name and it ends up in file names and in
	 * lines of text: no '/', no "..", no space, nothing unprintable. */
	for (char *c = out; *c; c++)
		if (*c == '/' || *c == '\\' || (unsigned char)*c < ' ' || (unsigned char)*c > '~' ||
		    *c == ' ' || (c == out && *c == '.'))
			*c = '_';
}

struct hpd_session *hpd_session_new(enum hpd_transport t, pid_t pid, const char *comm)
{
	struct hpd_session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	guard_install();
	s->transport = t;
	s->id = next_id++;
	s->pid = pid;
	hpd_clean_comm(s->comm, sizeof(s->comm), comm && *comm ? comm : "unknown");
	s->conn_fd = s->wake_fd = s->ring_fd = -1;
	s->maps_fd = s->mem_fd = s->exe_fd = -1;
	s->pidfd = s->proc_fd = -1;
	s->oom.w.fd = -1;	/* its cgroup: not watched until enabled (oom.c) */
	s->uid = (uid_t)-1;	/* until the transport learns it */
	s->next = hpd_sessions;
	hpd_sessions = s;
	return s;
}

/*
 * The live session of pid. One whose process is gone or became another
 * program (exec of a setuid binary with the session's socket kept open)
 * is ended here rather than handed to a request for that pid.
 */
struct hpd_session *hpd_session_by_pid(pid_t pid)
{
	struct hpd_session *s, *best = NULL;

	for (s = hpd_sessions; s; s = s->next) {
		if (s->pid != pid || s->ending)
			continue;
		if (!hpd_session_current(s)) {
			if (s->enabled)
				hpd_session_drain(s, 1);
			hpd_session_end(s, "the process exited or exec'd another program");
			continue;
		}
		if (!best || s->id > best->id)
			best = s;
	}
	return best;
}

/* hp_ring_open reads the client's header: guarded against a short memfd. */
static __attribute__((noinline)) int guarded_open(struct hpd_session *s)
{
	int rc;

	guard_on = 1;
	if (sigsetjmp(guard_env, 0))
		return -EFAULT;	/* the memfd is shorter than it claims */
	rc = hp_ring_open(&s->ring, s->map, s->map_len);
	/* The tick drains every session whatever wakes it: producers may skip
	 * their barrier after a commit (uapi, timer_us). Before any sleep. */
	if (!rc)
		__atomic_store_n(&s->ring.cons->timer_us, HPD_TICK_MS * 1000,
				 __ATOMIC_RELAXED);
	guard_on = 0;
	return rc;
}

const char *hpd_ring_refusal(int rc)
{
	static __thread char buf[200];

	if (rc != -EPROTONOSUPPORT)
		return strerror(-rc);
	snprintf(buf, sizeof(buf), "its client was built for another ring ABI version than "
		 "this daemon's (%d): preload the libheapprofd_client.so installed with this "
		 "heapprofd", HEAPPROFD_ABI_VERSION);
	return buf;
}

int hpd_session_map(struct hpd_session *s, int fd, int is_memfd,
		    uint32_t ctl_size, uint64_t data_size)
{
	void *m;
	int rc;

	if (ctl_size < sizeof(struct heapprofd_ctl) || ctl_size > (1U << 20) ||
	    !hp_is_pow2(data_size) || data_size < HEAPPROFD_DATA_SIZE_MIN ||
	    data_size > HP_RING_SIZE_MAX)
		return -EINVAL;
	m = hp_ring_map_fd(fd, is_memfd, ctl_size, data_size, &s->map_len);
	if (m == MAP_FAILED)
		return -errno;
	s->map = m;
	rc = guarded_open(s);
	if (rc) {
		munmap(m, s->map_len);
		s->map = NULL;
	}
	return rc;
}

void hpd_default_prefix(struct hpd_session *s, char *out, size_t len)
{
	snprintf(out, len, "%s/%s.%d.%llu", hpd_opts.outdir, s->comm, (int)s->pid,
		 (unsigned long long)s->id);
}

/* New code sets asked of a client before its same-path records are refused. */
#define CODE_ASKS_MAX	8

/* Write the configuration the producer reads, then publish it. */
static void write_config(struct hpd_session *s, const struct hpd_rule *r, int enabled)
{
	struct heapprofd_config *cfg = s->ring.cfg;

	if (enabled) {
		cfg->interval = r && r->interval ? r->interval :
			(hpd_opts.interval ? hpd_opts.interval : HEAPPROFD_INTERVAL_DEFAULT);
		cfg->stack_cap = r && r->stack_cap ? r->stack_cap : HEAPPROFD_STACK_CAP_DEFAULT;
		if (cfg->stack_cap > HP_STACK_CAP_MAX)
			cfg->stack_cap = HP_STACK_CAP_MAX;
		/* Without a rule (system mode) too, a full ring waits for room:
		 * dropping would bias the estimates of the sites that lost
		 * records; and the client samples less while its ring fills,
		 * so that it seldom has to wait (client.rst, "Ring full"). */
		cfg->flags = (r ? r->cfg_flags : HEAPPROFD_CFG_BLOCK) | HEAPPROFD_CFG_ADAPTIVE;
		/* The stall bound: only a daemon that read nothing for this
		 * long ends a client's wait, and its profiling (uapi). */
		cfg->block_timeout_us = 10000000;
		cfg->consumer_caps = HEAPPROFD_CAP_STACK_DELTA |	/* pipeline/reuse.c */
				     HEAPPROFD_CAP_PYFRAMES;	/* pipeline/python.c */
		/* pipeline/samepath.c; not for a process whose code keeps
		 * outgrowing its code sets (code_set_tick) */
		if (s->code_asks < CODE_ASKS_MAX)
			cfg->consumer_caps |= HEAPPROFD_CAP_STACK_SAME;
		memcpy(cfg->heaps_off, s->heaps_off, sizeof(cfg->heaps_off));
	}
	cfg->enabled = enabled;
	__atomic_fetch_add(&cfg->generation, 1, __ATOMIC_RELEASE);
}

/* Tell the rule's owner that an image's profile is now under another prefix. */
static void moved_event(struct hpd_rule *r, uint64_t sid, pid_t pid, const char *prefix)
{
	char ev[1024] = "event";

	hpc_put(ev, sizeof(ev), "kind", "moved");
	hpc_putu(ev, sizeof(ev), "pid", pid);
	hpc_putu(ev, sizeof(ev), "session", sid);
	hpc_put(ev, sizeof(ev), "prefix", prefix);
	hpd_event(r, ev);
}

static const char *const profile_ext[] = {
	".pb.gz", ".svg", ".folded", ".txt",
	".peak.pb.gz", ".peak.svg", ".peak.folded", ".peak.txt",
};

/* Is name ".NNNN<ext>" (a continuous dump's suffix, N >= 4 digits)? */
static int numbered_suffix(const char *name)
{
	size_t d = name[0] == '.' ? strspn(name + 1, "0123456789") : 0;

	if (d < 4)
		return 0;
	for (size_t k = 0; k < sizeof(profile_ext) / sizeof(profile_ext[0]); k++)
		if (!strcmp(name + 1 + d, profile_ext[k]))
			return 1;
	return 0;
}

/* Continuous dumps PREFIX.NNNN.* -> TO.NNNN.* */
static void move_numbered(const char *prefix, const char *to)
{
	char pat[PATH_MAX + 32], dst[PATH_MAX + 64];
	size_t plen = strlen(prefix);
	char why[2 * PATH_MAX + 200];
	glob_t g;
	int rc;

	snprintf(pat, sizeof(pat), "%s.[0-9][0-9][0-9][0-9]*", prefix);
	if (glob(pat, GLOB_NOSORT, NULL, &g))
		return;
	for (size_t i = 0; i < g.gl_pathc; i++) {
		/* The prefix itself may hold glob characters: only its own files. */
		if (strncmp(g.gl_pathv[i], prefix, plen) ||
		    !numbered_suffix(g.gl_pathv[i] + plen))
			continue;	/* or PREFIX.PID.N.*: an image moved before */
		snprintf(dst, sizeof(dst), "%s%s", to, g.gl_pathv[i] + plen);
		if ((rc = hp_out_rename(g.gl_pathv[i], dst, why, sizeof(why))) < 0 && rc != -ENOENT)
			hpd_log(HPD_WARN, "%s", why);
	}
	globfree(&g);
}

/*
 * The recorded pid registered a session again: it exec'd (a shell script, a
 * shim that execs the real program). The newest image is what the user
 * asked about, so it takes PREFIX.*; the image before it moves to
 * PREFIX.<pid>.<n>.* (n counts images from 1): renamed on disk when it has
 * already been written, or simply written there when its end comes later.
 */
static void take_main_prefix(struct hpd_session *s, struct hpd_rule *r)
{
	char moved[sizeof(s->prefix)], why[2 * sizeof(moved) + 300];
	struct hpd_session *p;
	size_t k;
	int rc;

	snprintf(s->prefix, sizeof(s->prefix), "%s", r->prefix);
	if (r->images++ == 0) {
		r->main_sid = s->id;
		return;
	}
	snprintf(moved, sizeof(moved), "%s.%d.%d", r->prefix, (int)s->pid, r->images - 1);
	for (p = hpd_sessions; p; p = p->next)
		if (p != s && p->id == r->main_sid && p->rule == r)
			break;
	/* Its later dumps go to the new name... */
	if (p && !p->ending)
		snprintf(p->prefix, sizeof(p->prefix), "%s", moved);
	/* ...and what it wrote already (at its end, or continuous dumps while
	 * it ran) moves there, before the new image overwrites it. */
	for (k = 0; k < sizeof(profile_ext) / sizeof(profile_ext[0]); k++) {
		char from[sizeof(s->prefix) + 16], to[sizeof(moved) + 16];

		snprintf(from, sizeof(from), "%s%s", r->prefix, profile_ext[k]);
		snprintf(to, sizeof(to), "%s%s", moved, profile_ext[k]);
		if ((rc = hp_out_rename(from, to, why, sizeof(why))) < 0 && rc != -ENOENT)
			hpd_log(HPD_WARN, "%s", why);
	}
	move_numbered(r->prefix, moved);
	hpd_log(HPD_INFO, "pid %d exec'd: the earlier image's profile is %s.*", (int)s->pid, moved);
	moved_event(r, r->main_sid, s->pid, moved);
	r->main_sid = s->id;
}

/* A prefix no other session of this daemon uses and no profile file has. */
static int prefix_taken(const struct hpd_session *s, const char *prefix)
{
	const struct hpd_session *p;
	char f[sizeof(s->prefix) + 16];

	for (p = hpd_sessions; p; p = p->next)
		if (p != s && !strcmp(p->prefix, prefix))
			return 1;
	snprintf(f, sizeof(f), "%s.txt", prefix);
	if (!access(f, F_OK))
		return 1;
	snprintf(f, sizeof(f), "%s.folded", prefix);
	return !access(f, F_OK);
}

/*
 * A followed child: PREFIX.<comm>.<pid>, and when that pid exec'd a program
 * of the same name (bash execs bash), PREFIX.<comm>.<pid>.<n> for the
 * later images, so no image overwrites another.
 */
static void child_prefix(struct hpd_session *s, struct hpd_rule *r)
{
	int n;

	snprintf(s->prefix, sizeof(s->prefix), "%s.%s.%d", r->prefix, s->comm, (int)s->pid);
	for (n = 2; n < 1000 && prefix_taken(s, s->prefix); n++)
		snprintf(s->prefix, sizeof(s->prefix), "%s.%s.%d.%d", r->prefix, s->comm,
			 (int)s->pid, n);
}

/* Start profiling: config, pipeline process, where the dumps go. */
/*
 * The process's executable and command line, for the formats that name
 * the process (OTLP's resource): what it says about itself, so only text
 * (made printable by the formats that need it), never trusted.
 */
static void read_ident(const struct hpd_session *s, char *exe, size_t elen, char *cmd,
		       size_t clen)
{
	char path[64];
	ssize_t n;
	int fd;

	exe[0] = cmd[0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/exe", (int)s->pid);
	n = s->proc_fd >= 0 ? readlinkat(s->proc_fd, "exe", exe, elen - 1) :
	    readlink(path, exe, elen - 1);
	exe[n > 0 ? n : 0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)s->pid);
	fd = s->proc_fd >= 0 ? openat(s->proc_fd, "cmdline", O_RDONLY | O_CLOEXEC) :
	     open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, cmd, clen - 1);
	close(fd);
	if (n <= 0)
		return;
	/* Arguments end in NUL: joined by spaces, the last one's dropped. */
	while (n > 0 && cmd[n - 1] == 0)
		n--;
	for (ssize_t i = 0; i < n; i++)
		if (cmd[i] == 0)
			cmd[i] = ' ';
	cmd[n] = 0;
}

/* The rule's destinations, else the daemon's; the pipeline's sink if any. */
static void setup_exports(struct hpd_session *s, const struct hpd_rule *r)
{
	char why[300];

	memset(&s->exp.targets, 0, sizeof(s->exp.targets));
	if (r && r->exports[0]) {
		if (hpd_export_parse(r->exports, &s->exp.targets, why, sizeof(why))) {
			hpd_log(HPD_WARN, "pid %d: no exports: %s", (int)s->pid, why);
			memset(&s->exp.targets, 0, sizeof(s->exp.targets));
		}
	} else {
		s->exp.targets = *hpd_export_default();
	}
	if (!s->exp.targets.n)
		return;
	if (!s->exp.acct)
		s->exp.acct = hpd_export_acct_new();
	if (hpd_export_start() == 0)
		hp_proc_set_sink(s->proc, hpd_export_sink, &s->exp);
	else
		hpd_log(HPD_WARN, "pid %d: its dumps are written but not sent (the sender did not start)",
			(int)s->pid);
}

int hpd_session_enable(struct hpd_session *s, struct hpd_rule *r)
{
	char exe[512], cmdline[1024];
	struct hp_proc_info info;

	if (hpd_opts.test_enable_delay_ms)
		usleep(hpd_opts.test_enable_delay_ms * 1000U);
	memset(&info, 0, sizeof(info));
	info.pid = s->pid;
	info.session_id = s->id;
	info.comm = s->comm;
	info.maps_fd = s->maps_fd;
	info.mem_fd = s->mem_fd;
	info.exe_fd = s->exe_fd;
	info.foreign = s->foreign;
	if (s->proc_fd >= 0) {
		info.has_proc_fd = 1;
		info.proc_fd = fcntl(s->proc_fd, F_DUPFD_CLOEXEC, 0);
	}
	info.flags = r && r->dump_at_max ? HP_PROC_DUMP_AT_MAX : 0;
	read_ident(s, exe, sizeof(exe), cmdline, sizeof(cmdline));
	info.exe = exe[0] ? exe : NULL;
	info.cmdline = cmdline[0] ? cmdline : NULL;
	s->proc = hp_proc_new(hpd_pipe, &info);
	if (!s->proc)
		return -ENOMEM;
	setup_exports(s, r);
	hpd_oom_watch(s, r ? r->pressure_pct : 0);
	s->maps_fd = s->mem_fd = s->exe_fd = -1;	/* the pipeline owns them */
	s->rule = r;
	s->formats = r && r->formats ? r->formats : hp_formats_with(HP_FMT_DEFAULT);
	if (r && r->prefix[0]) {
		if (r->pid == s->pid)
			take_main_prefix(s, r);
		else
			child_prefix(s, r);
	} else {
		hpd_default_prefix(s, s->prefix, sizeof(s->prefix));
	}
	memset(s->heaps_off, 0, sizeof(s->heaps_off));
	if (!hpd_rule_wants_heap(r, "libc.malloc"))
		s->heaps_off[0] |= 1ULL << HEAPPROFD_HEAP_MALLOC;
	if (!hpd_rule_wants_heap(r, "dmabuf"))
		s->heaps_off[0] |= 1ULL << HEAPPROFD_HEAP_DMABUF;
	s->continuous_ms = r ? r->continuous_ms : 0;
	if (s->continuous_ms)
		s->next_dump_ms = hpd_now_ms() + s->continuous_ms;
	if (r) {
		r->nsessions++;
		r->live++;
	}
	guard_on = 1;
	if (sigsetjmp(guard_env, 0)) {
		hpd_session_end(s, "shared memory vanished while writing the configuration");
		return -EFAULT;
	}
	if (s->transport != HPD_T_KERNEL) {
		s->ring.kstate->state = HEAPPROFD_STATE_ATTACHED;
		s->ring.kstate->consumer_pid = getpid();
		s->ring.kstate->attach_count++;
	}
	write_config(s, r, 1);
	guard_on = 0;
	s->enabled = 1;
	s->dormant = 0;
	hpd_log(HPD_INFO, "profiling pid %d (%s), session %llu, %s transport, interval %llu, output %s",
		(int)s->pid, s->comm, (unsigned long long)s->id,
		s->transport == HPD_T_KERNEL ? "module" :
		s->transport == HPD_T_SOCKET ? "user-space socket" : "user-space (found by scan)",
		(unsigned long long)s->ring.cfg->interval, s->prefix);
	{
		char ev[1024] = "event";

		hpc_put(ev, sizeof(ev), "kind", "session");
		hpc_putu(ev, sizeof(ev), "pid", s->pid);
		hpc_putu(ev, sizeof(ev), "session", s->id);
		hpc_put(ev, sizeof(ev), "comm", s->comm);
		hpc_put(ev, sizeof(ev), "prefix", s->prefix);
		hpd_event(r, ev);
	}
	return 0;
}

/*
 * A custom heap was announced (s->buf holds the record, validated by the
 * pipeline): if the user's --heaps list leaves it out, tell the client not
 * to sample it.
 */
static void heap_announced(struct hpd_session *s)
{
	const struct heapprofd_rec_heap *h = (const void *)s->buf;
	struct heapprofd_config *cfg = s->ring.cfg;

	if (h->hdr.type != HEAPPROFD_REC_HEAP || h->heap_id > HEAPPROFD_HEAP_MAX ||
	    hpd_rule_wants_heap(s->rule, h->name))
		return;
	s->heaps_off[h->heap_id / 64] |= 1ULL << (h->heap_id % 64);
	cfg->heaps_off[h->heap_id / 64] = s->heaps_off[h->heap_id / 64];
	__atomic_fetch_add(&cfg->generation, 1, __ATOMIC_RELEASE);
	hpd_log(HPD_INFO, "pid %d: heap %u \"%s\" is not in --heaps: not sampled",
		(int)s->pid, h->heap_id, h->name);
}

/*
 * Copy records out of the ring and feed them. producer_gone: the process
 * has exited or hung up, so a record still not committed never will be.
 * Returns with the ring empty and the consumer marked sleeping, or with a
 * stalled record noted for the tick, or with the session ended.
 */
/* How drain_ring goes: a live producer, a gone one's ring read to its end
 * now, or a gone one's read a bounded time per call (hpd_session_gone). */
enum drain_mode { DRAIN_LIVE, DRAIN_GONE_ALL, DRAIN_GONE_BOUNDED };

static int drain_ring(struct hpd_session *s, enum drain_mode mode);

void hpd_session_drain(struct hpd_session *s, int producer_gone)
{
	/* A gone producer's ring is the tick's (hpd_session_gone) unless the
	 * caller wants it read to the end now. */
	if (s->gone_ms && !producer_gone)
		return;
	drain_ring(s, producer_gone ? DRAIN_GONE_ALL : DRAIN_LIVE);
	hpd_session_read_kernel(s, producer_gone);
	/* What the pipeline batched goes to its books now (s->proc is NULL
	 * if the session ended). */
	hp_proc_flush(s->proc);
}

/*
 * The copy buffer grows to the largest record (HP_REC_LEN_MAX at most);
 * after a big one it goes back to the usual size rather than keeping the
 * peak for the session's life. Called with the record copied and consumed.
 */
#define REC_BUF_KEEP	(256U << 10)

static void shrink_buf(struct hpd_session *s, uint32_t len)
{
	uint8_t *nb;

	if (s->buflen <= REC_BUF_KEEP || len > REC_BUF_KEEP)
		return;
	nb = malloc(REC_BUF_KEEP);
	if (!nb)
		return;
	memcpy(nb, s->buf, len);
	free(s->buf);
	s->buf = nb;
	s->buflen = REC_BUF_KEEP;
}

/* A watch's time since its last look, at most STALL_STEP_MAX_MS (above). */
static uint64_t watched_step(uint64_t looked_ms, uint64_t now)
{
	return now - looked_ms < STALL_STEP_MAX_MS ? now - looked_ms : STALL_STEP_MAX_MS;
}

/* The pipeline holds all it may of s's records, again: stuck by now? */
static int pipe_stuck(struct hpd_session *s)
{
	uint64_t now = hpd_now_ms();

	if (s->full_looked_ms)
		s->full_watched_ms += watched_step(s->full_looked_ms, now);
	else
		s->full_watched_ms = 0;
	s->full_looked_ms = now;
	return s->full_watched_ms >= PIPE_STUCK_MS;
}

/* 1: stopped with records left (the loop comes back), else 0. */
static int drain_ring(struct hpd_session *s, enum drain_mode mode)
{
	const struct heapprofd_rec_hdr *rec;
	const int producer_gone = mode != DRAIN_LIVE;
	char why[160];
	uint32_t len;
	volatile int n = 0, more = 0;
	uint64_t waited, t0 = hpd_now_ms();

	if (!s->enabled || s->ending)
		return 0;
	if (mode == DRAIN_GONE_ALL)
		s->gone_taken = 0;
	/* The memory budget waits for memory to come back (mem_budget.c),
	 * the CPU budget for the time spent to average out (cpu_budget.c). */
	if (!producer_gone && (hpd_mem_hold() || hpd_cpu_hold()))
		return 0;
	guard_on = 1;
	if (sigsetjmp(guard_env, 0)) {
		hpd_session_end(s, "SIGBUS reading the ring: the process shrank its shared memory");
		return 0;
	}
	for (;;) {
		enum hp_ring_status st;

		/* The pipeline holds all it may of this process's records:
		 * the rest stays in the ring, serving everything else
		 * meanwhile; the loop drains again once the pipeline has
		 * taken its queue down to half (hp_pipeline_room_fd), or in
		 * a millisecond at the latest. The client is told that we are
		 * behind, not stopped. (A gone producer's ring read to its
		 * end now waits in the feed.) */
		if (mode != DRAIN_GONE_ALL && !hp_proc_has_room(s->proc)) {
			hp_proc_flush(s->proc);	/* the books may wait for our batch */
			if (pipe_stuck(s)) {
				guard_on = 0;
				hpd_session_end(s, "the daemon's pipeline took none of its records for 60 s");
				return 0;
			}
			hp_ring_behind(&s->ring);
			hpd_pipe_wait = 1;
			more = 1;
			break;
		}
		st = hp_ring_peek(&s->ring, &rec, &len);
		s->detach_empty = st == HP_RING_EMPTY;	/* as of the last look */

		if (st == HP_RING_READY) {
			uint64_t fed_at;

			if (len > s->buflen) {
				uint8_t *nb = realloc(s->buf, len);

				if (!nb) {
					guard_on = 0;
					hpd_session_end(s, "out of memory");
					return 0;
				}
				s->buf = nb;
				s->buflen = len;
			}
			memcpy(s->buf, rec, len);
			hp_ring_advance(&s->ring, len);
			shrink_buf(s, len);
			s->stall_since_ms = 0;
			s->full_looked_ms = 0;
			s->records++;
			s->bytes += len;
			guard_on = 0;
			fed_at = hpd_verbosity >= HPD_DEBUG ? hpd_now_ms() : 0;
			if (hp_proc_feed(s->proc, s->buf, len, why, sizeof(why)) < 0) {
				char msg[200];

				snprintf(msg, sizeof(msg), "malformed record: %s", why);
				hpd_session_end(s, msg);
				return 0;
			}
			/* Read to its end now (DRAIN_GONE_ALL), the feed waits
			 * while the pipeline holds too much of this process's
			 * records. Said, so that a long wait has a cause. (Other
			 * drains stop before such a wait; either way the ring is
			 * not read meanwhile, and a client that sees it unread
			 * for its stall bound stops profiling.) */
			if (fed_at && hpd_now_ms() - fed_at >= 1000)
				hpd_log(HPD_DEBUG, "pid %d: one record (type %u, %u bytes) took %llu ms to feed",
					(int)s->pid, (unsigned)((const struct heapprofd_rec_hdr *)(const void *)s->buf)->type, len,
					(unsigned long long)(hpd_now_ms() - fed_at));
			waited = hp_proc_take_room_wait_ms(s->proc);
			if (waited >= 1000)
				hpd_log(HPD_DEBUG, "pid %d: the pipeline took %llu ms to take a record (its queue for the process was full)",
					(int)s->pid, (unsigned long long)waited);
			guard_on = 1;	/* the sigsetjmp above still holds */
			heap_announced(s);
			/* A gone producer left a ring's worth at most; a live
			 * one that writes on past its detach gets no more. */
			if (producer_gone && (s->gone_taken += len) > s->ring.size)
				break;
			++n;
			if ((mode == DRAIN_LIVE && (n >= DRAIN_BATCH || hpd_mem_fed(1) ||
						    hpd_cpu_fed(1))) ||
			    (mode != DRAIN_GONE_ALL && n % DRAIN_CLOCK_EVERY == 0 &&
			     hpd_now_ms() - t0 >= DRAIN_HOLD_MS)) {
				/* Be fair to the others, or let the memory budget
				 * look first (mem_budget.c), or wait for the CPU
				 * budget (cpu_budget.c), or let the loop serve its
				 * other descriptors: the loop comes back. */
				hpd_backlog = 1;
				more = 1;
				break;
			}
			continue;
		}
		if (st == HP_RING_CORRUPT) {
			guard_on = 0;
			hpd_session_end(s, "ring positions or record length out of range");
			return 0;
		}
		if (st == HP_RING_NOT_READY) {
			uint64_t now = hpd_now_ms();

			if (s->stall_since_ms && s->stall_head == s->ring.chead) {
				s->stall_watched_ms += watched_step(s->stall_looked_ms, now);
				s->stall_looked_ms = now;
			}
			if (s->stall_since_ms && s->stall_head == s->ring.chead &&
			    (producer_gone || s->stall_watched_ms >= STALL_BOUND_MS)) {
				const struct heapprofd_rec_hdr *r2;
				uint32_t l2;

				/* It may have been committed just now. */
				if (hp_ring_peek(&s->ring, &r2, &l2) != HP_RING_NOT_READY) {
					s->stall_since_ms = 0;
					continue;
				}
				if (hp_ring_skip_stalled(&s->ring)) {
					const uint64_t *w = (const uint64_t *)(s->ring.data +
						(s->ring.chead & s->ring.mask));

					hpd_log(HPD_DEBUG, "pid %d: stalled %llu ms at head %llu tail %llu word %016llx gone %d",
						(int)s->pid, (unsigned long long)(now - s->stall_since_ms),
						(unsigned long long)s->ring.chead,
						(unsigned long long)__atomic_load_n(&s->ring.prod->tail, __ATOMIC_RELAXED),
						(unsigned long long)__atomic_load_n(w, __ATOMIC_RELAXED), producer_gone);
					guard_on = 0;
					hpd_session_end(s, "a writer died mid-record and the ring cannot be resynchronised");
					return 0;
				}
				hpd_log(HPD_WARN, "pid %d: skipped a record its writer never committed",
					(int)s->pid);
				s->stall_since_ms = 0;
				continue;
			}
			if (!s->stall_since_ms || s->stall_head != s->ring.chead) {
				s->stall_head = s->ring.chead;
				s->stall_since_ms = now;
				s->stall_looked_ms = now;
				s->stall_watched_ms = 0;
				if (producer_gone) {
					s->stall_since_ms = now - STALL_BOUND_MS;
					continue;
				}
			}
			break;	/* the tick looks again */
		}
		/*
		 * Empty: send the producers back to the front of the ring
		 * once they are a sixteenth of it into this lap (ring.h,
		 * hp_ring_rewind), so that a program we keep up with writes
		 * the same few pages over and over instead of faulting in
		 * the whole ring.
		 */
		if (!producer_gone)
			hp_ring_rewind(&s->ring, s->ring.size / HPD_REWIND_DIV);
		/*
		 * Empty: sleep unless a record slipped in. The watermark asks
		 * producers to wake us only once a quarter of the ring is
		 * unread; less waits for the tick (HPD_TICK_MS), so a commit
		 * almost never costs the producer a system call.
		 */
		if (producer_gone || s->poll_only ||
		    hp_ring_prepare_sleep_wm(&s->ring, hpd_sleep_watermark(&s->ring)))
			break;
	}
	guard_on = 0;
	return more;
}

/*
 * The producer is gone (the process exited or hung up). What it left in the
 * ring may take the pipeline a while when it is behind, and the event loop
 * must not wait for it: root's heapprofctl, other programs' hellos and
 * hang-ups would. So the rest is drained on the ticks, DRAIN_HOLD_MS at a
 * time (gone_step), and the session ends once the pipeline has it all.
 * The caller has stopped watching the descriptor that said so
 * (level-triggered, it would say so again and again).
 */
void hpd_session_gone(struct hpd_session *s)
{
	if (s->ending || s->gone_ms)
		return;
	if (!s->enabled) {
		hpd_session_end(s, NULL);
		return;
	}
	s->gone_ms = hpd_now_ms();
	s->gone_taken = 0;
	hpd_backlog = 1;	/* the next tick begins at once */
}

static void gone_step(struct hpd_session *s)
{
	if (drain_ring(s, DRAIN_GONE_BOUNDED) || s->ending)
		return;
	hpd_session_read_kernel(s, 1);
	hp_proc_flush(s->proc);
	/* The final dump waits for the pipeline to apply all of it: the
	 * ticks wait instead, until that is done, a millisecond apart (the
	 * user of heapprofctl record waits for the dump). */
	if (!hp_proc_caught_up(s->proc)) {
		hpd_pipe_wait = 1;
		return;
	}
	hpd_session_end(s, NULL);
}

/*
 * Kernel records: what the module adds to the session (DMA-BUF exports and
 * releases, ABI 5), read(2) from the consumer fd, whole records, never
 * blocking. The module hands out a DMABUF record and its ALLOC as one unit
 * and copies at most a default stack cap (64 KiB) of stack, so 128 KiB
 * holds any unit; EINVAL means the first did not fit all the same, so it
 * is read once more into a buffer of the largest record there can be. From
 * a module without kernel records read(2) fails with EINVAL or ENOSYS
 * whatever the size: the session goes on without them.
 */
#define KREC_BUF	HPD_KREC_BUF
/* Reads per drain: a flood of kernel records waits for the next turn. */
#define KREC_READS	16
/* Once the process is gone: its queue (1 MiB at most) is read to the end. */
#define KREC_READS_GONE	1024

static int feed_kernel_buf(struct hpd_session *s, const uint8_t *b, size_t n)
{
	char why[160];
	size_t off = 0;

	while (off < n) {
		struct heapprofd_rec_hdr h;
		size_t len = n - off;

		/* A record that overruns the bytes read is fed as the rest, to
		 * be refused and counted; nothing after it can be framed. */
		if (len >= sizeof(h)) {
			memcpy(&h, b + off, sizeof(h));
			if ((h.len & HEAPPROFD_REC_LEN_MASK) >= sizeof(h) &&
			    (h.len & HEAPPROFD_REC_LEN_MASK) <= len)
				len = h.len & HEAPPROFD_REC_LEN_MASK;
		}
		/* The OOM killer chose the process (kmod/oom.c): for the daemon, not the books. */
		if (len == sizeof(struct heapprofd_rec_oom) && h.type == HEAPPROFD_REC_OOM &&
		    (h.len & HEAPPROFD_REC_LEN_MASK) == len) {
			hpd_oom_chosen(s);
			s->krecords++;
		} else if (hp_proc_feed_kernel(s->proc, b + off, len, why, sizeof(why)) < 0) {
			s->kbad++;
			if (!s->kbad_logged) {
				s->kbad_logged = 1;
				hpd_log(HPD_WARN, "pid %d: a malformed kernel record was left out: %s",
					(int)s->pid, why);
			}
		} else {
			s->krecords++;
		}
		off += len;
	}
	return 0;
}

void hpd_session_read_kernel(struct hpd_session *s, int producer_gone)
{
	int reads = producer_gone ? KREC_READS_GONE : KREC_READS;

	if (s->transport != HPD_T_KERNEL || s->krec_off || !s->enabled || s->ending ||
	    s->conn_fd < 0 || !s->proc)
		return;
	if (!s->kbuf && !(s->kbuf = malloc(KREC_BUF)))
		return;
	while (reads-- > 0) {
		ssize_t n;

		/* As the ring's drain: the kernel keeps them meanwhile. */
		if (!producer_gone && !hp_proc_has_room(s->proc)) {
			hpd_pipe_wait = 1;
			return;
		}
		n = read(s->conn_fd, s->kbuf, KREC_BUF);

		if (n < 0 && errno == EINVAL) {
			uint8_t *big = malloc(HP_REC_LEN_MAX);

			n = big ? read(s->conn_fd, big, HP_REC_LEN_MAX) : -1;
			if (n > 0)
				feed_kernel_buf(s, big, (size_t)n);
			free(big);
			if (n > 0)
				continue;
			if (!big)
				errno = EAGAIN;	/* out of memory: try again later */
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			/* An older module (no kernel records), or a consumer fd
			 * that cannot be read: the ring alone, as before. */
			if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP)
				hpd_log(HPD_WARN, "pid %d: reading kernel records: %s; going on without them",
					(int)s->pid, strerror(errno));
			else
				hpd_log(HPD_DEBUG, "pid %d: the module has no kernel records (%s)",
					(int)s->pid, strerror(errno));
			s->krec_off = 1;
			return;
		}
		if (n == 0)
			return;
		feed_kernel_buf(s, s->kbuf, (size_t)n);
	}
	/* Records may be left: the loop comes back at once, after the others. */
	hpd_backlog = 1;
}

/* Copy the client's exact counters for the books. */
static void copy_totals(struct hpd_session *s)
{
	struct heapprofd_counters c;

	guard_on = 1;
	if (sigsetjmp(guard_env, 0))
		return;
	memcpy(&c, (const void *)s->ring.cnt, sizeof(c));
	s->drop_records = c.records_dropped;
	s->drop_frees = c.frees_dropped;
	s->drop_est_bytes = c.est_bytes_dropped;
	guard_on = 0;
	hp_proc_set_totals(s->proc, &c);
}

/*
 * What the dump to prefix wrote, for heapprofctl (hpd_put_dump): the files
 * of the formats it has (none of one the output budget left out, whose
 * older file may still be there, nor of one removed after), and what was
 * left out and why.
 */
static void note_written(struct hpd_session *s, const char *prefix, int rc,
			 const struct hp_out_limit *lim)
{
	unsigned left = lim ? lim->left_out : 0;
	size_t o = 0, l = 0;

	s->dump_files[0] = s->dump_left[0] = 0;
	for (size_t i = 0; rc == 0 && hp_formats[i]; i++) {
		const struct hp_format *f = hp_formats[i];
		char path[sizeof(s->prefix) + 80];
		struct stat st;

		if (!(s->formats & hp_format_bit(f)))
			continue;
		snprintf(path, sizeof(path), "%s%s", prefix, f->ext);
		if (left & hp_format_bit(f))
			l += snprintf(s->dump_left + l, sizeof(s->dump_left) - l, "%s%s", l ? "," : "",
				      f->ext);
		else if (!stat(path, &st))
			o += snprintf(s->dump_files + o, sizeof(s->dump_files) - o, "%s%s",
				      o ? "," : "", f->ext);
	}
	snprintf(s->dump_left_why, sizeof(s->dump_left_why), "%s", left ? lim->why : "");
}

void hpd_put_dump(const struct hpd_session *s, char *msg, size_t len)
{
	hpc_put(msg, len, "files", s->dump_files);
	if (s->dump_left[0]) {
		hpc_put(msg, len, "left_out", s->dump_left);
		hpc_put(msg, len, "left_why", s->dump_left_why);
	}
}

static int dump_to(struct hpd_session *s, unsigned which, const char *suffix, char *path,
		   size_t pathlen)
{
	char prefix[640], dflt[sizeof(s->prefix)];
	struct hp_out_limit lim;
	int rc, bounded, charged;

	if (!s->proc)
		return -ENOENT;
	copy_totals(s);
	if (suffix)
		snprintf(prefix, sizeof(prefix), "%s%s", s->prefix, suffix);
	else if (which == HP_DUMP_NOW && s->continuous_ms && !s->ending)
		snprintf(prefix, sizeof(prefix), "%s.%04u", s->prefix, ++s->dumps);
	else
		snprintf(prefix, sizeof(prefix), "%s", s->prefix);
	/* What the system policy writes to the output directory is charged
	 * to the process's user (out_budget.c); every dump keeps the
	 * file system's reserve. */
	hpd_default_prefix(s, dflt, sizeof(dflt));
	charged = !strcmp(s->prefix, dflt);
	bounded = hpd_budget_begin(s->uid, prefix, charged, &lim, s->dump_error,
				   sizeof(s->dump_error));
	if (bounded < 0) {
		rc = bounded;
		hpd_log(HPD_WARN, "pid %d (uid %d): %s.* not written: %s", (int)s->pid, (int)s->uid,
			prefix, s->dump_error);
	} else {
		rc = hp_proc_dump_limited(s->proc, prefix, s->formats, which, bounded ? &lim : NULL,
					  s->dump_error, sizeof(s->dump_error));
		if (bounded)
			hpd_budget_end(s->uid, prefix, charged, &lim, rc);
		if (rc < 0) {
			hpd_log(HPD_ERR, "pid %d: writing %s.* failed: %s", (int)s->pid, prefix,
				s->dump_error);
		} else if (bounded && lim.left_out) {
			char f[64];

			hp_formats_names(lim.left_out, ", ", f, sizeof(f));
			hpd_log(HPD_WARN, "pid %d (uid %d): wrote %s.* without its %s: %s", (int)s->pid,
				(int)s->uid, prefix, f, lim.why);
		} else {
			hpd_log(HPD_INFO, "pid %d: wrote %s.*", (int)s->pid, prefix);
		}
	}
	note_written(s, prefix, rc, bounded > 0 ? &lim : NULL);
	if (path)
		snprintf(path, pathlen, "%s", prefix);
	return rc;
}

int hpd_session_dump(struct hpd_session *s, unsigned which, char *path, size_t pathlen)
{
	return dump_to(s, which, NULL, path, pathlen);
}

int hpd_session_dump_as(struct hpd_session *s, unsigned which, const char *suffix,
			const char *kind, const char *note)
{
	int rc;

	if (!s->proc)
		return -ENOENT;
	hp_proc_set_dump_kind(s->proc, kind);
	hp_proc_note(s->proc, note);
	rc = dump_to(s, which, suffix, NULL, 0);
	hp_proc_note(s->proc, NULL);
	hp_proc_set_dump_kind(s->proc, NULL);
	return rc;
}

static void release_fds(struct hpd_session *s)
{
	int *fds[] = { &s->conn_fd, &s->wake_fd, &s->ring_fd, &s->maps_fd,
		       &s->mem_fd, &s->exe_fd, &s->pidfd, &s->proc_fd };
	size_t i;

	hpd_oom_unwatch(s);
	if (s->conn_fd >= 0)
		hpd_loop_del(s->conn_fd);
	if (s->wake_fd >= 0)
		hpd_loop_del(s->wake_fd);
	for (i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
}

/*
 * The end of a session: the process exited, it was detached, or its data
 * was bad (why != NULL says so). What was collected is still dumped.
 */
void hpd_session_end(struct hpd_session *s, const char *why)
{
	char path[700] = "";
	int rc = -1;

	if (s->ending)
		return;
	s->ending = 1;
	guard_on = 0;
	if (why) {
		char note[256];

		snprintf(s->end_reason, sizeof(s->end_reason), "%s", why);
		hpd_log(HPD_WARN, "pid %d (%s): session ended: %s", (int)s->pid, s->comm, why);
		snprintf(note, sizeof(note), "WARNING: the session ended early: %s; the books end there", why);
		hp_proc_note(s->proc, note);
	}
	if (s->proc) {
		unsigned which = HP_DUMP_NOW | HP_DUMP_FINAL |
				 (s->rule && s->rule->dump_at_max ? HP_DUMP_PEAK : 0);
		char oom[400];

		/* With dump-at-max: PREFIX.* now and PREFIX.peak.* at the peak.
		 * The last dump may wait (bounded) for names still looked up.
		 * The OOM killer's victim: PREFIX.oom.*, saying so (oom.c). */
		if (!why && hpd_oom_victim(s, oom, sizeof(oom))) {
			hpd_log(HPD_WARN, "pid %d (%s): %s", (int)s->pid, s->comm, oom);
			hp_proc_set_dump_kind(s->proc, "oom");
			hp_proc_note(s->proc, oom);
			rc = dump_to(s, which, ".oom", path, sizeof(path));
		} else {
			rc = hpd_session_dump(s, which, path, sizeof(path));
		}
		hp_proc_end(s->proc);
		s->proc = NULL;
	}
	if (s->enabled) {
		char ev[1400] = "event";

		hpc_put(ev, sizeof(ev), "kind", "done");
		hpc_putu(ev, sizeof(ev), "pid", s->pid);
		hpc_put(ev, sizeof(ev), "comm", s->comm);
		hpc_putu(ev, sizeof(ev), "session", s->id);
		hpc_put(ev, sizeof(ev), "prefix", path);
		hpc_putu(ev, sizeof(ev), "ok", rc == 0);
		if (rc)
			hpc_put(ev, sizeof(ev), "error", s->dump_error);
		else
			hpd_put_dump(s, ev, sizeof(ev));
		hpc_putu(ev, sizeof(ev), "records", s->records);
		hpc_putu(ev, sizeof(ev), "dropped", s->drop_records);
		hpc_putu(ev, sizeof(ev), "dropped_frees", s->drop_frees);
		hpc_putu(ev, sizeof(ev), "dropped_bytes", s->drop_est_bytes);
		hpc_put(ev, sizeof(ev), "reason", why ? why : "exit");
		hpd_event(s->rule, ev);
	}
	if (s->rule && s->enabled)
		s->rule->live--;
	hpd_ctl_session_ended(s, rc == 0 ? path : NULL);
	release_fds(s);
	if (s->map) {
		munmap(s->map, s->map_len);
		s->map = NULL;
	}
}

/*
 * Stop profiling but leave the process alone: sampling off, the rest of
 * the ring read, a final dump, and the connection closed so the client
 * goes quiet (module: the session fd reports EPOLLHUP; socket: EOF).
 *
 * The process still runs, so closing the gate does not stop a thread that
 * already passed it: its record may be reserved and not yet committed (a
 * stack copy takes a while, and far longer when the thread is preempted),
 * or not reserved yet. Treating such a record as its dead writer's would
 * skip it, or, caught before its commit word was written, end the session
 * with every record behind it unread. So the session stays open, drained
 * on the tick, until its ring was found empty at least DETACH_QUIET_MS
 * after the gate closed, or until STALL_BOUND_MS passed (a writer that
 * never commits, a process that ignores the gate); then the final drain
 * and dump. The event loop never waits for it: the ctl request's answer
 * waits instead (hpd_ctl_session_ended).
 */
#define DETACH_QUIET_MS		HPD_TICK_MS

/* The last drain takes what is left, the kernel's queue to its end too;
 * a record still not committed is given up. A ring found by scan is then
 * open to another consumer again. */
static void detach_finish(struct hpd_session *s)
{
	hpd_session_drain(s, 1);
	if (s->transport == HPD_T_SCAN && !s->ending && s->map) {
		guard_on = 1;
		if (!sigsetjmp(guard_env, 0)) {
			s->ring.kstate->state = HEAPPROFD_STATE_OPEN;
			s->ring.kstate->consumer_pid = 0;
		}
		guard_on = 0;
	}
	hpd_session_end(s, NULL);
}

void hpd_session_detach(struct hpd_session *s)
{
	if (s->ending)
		return;
	if (!s->enabled || !s->map) {
		hpd_session_end(s, NULL);
		return;
	}
	if (s->detach_since_ms)
		return;		/* under way */
	guard_on = 1;
	if (!sigsetjmp(guard_env, 0))
		write_config(s, s->rule, 0);
	guard_on = 0;
	s->detach_since_ms = hpd_now_ms();
	s->detach_empty = 0;
	hpd_session_drain(s, 0);
}

/* Where a detach stands, on the tick: finished once quiet or out of time. */
static void detach_step(struct hpd_session *s, uint64_t now)
{
	uint64_t waited = now - s->detach_since_ms;

	if (waited >= STALL_BOUND_MS || (s->detach_empty && waited >= DETACH_QUIET_MS))
		detach_finish(s);
}

/* Every session ends now, a detach under way included (the daemon stops):
 * the same wait for writers, shared by all, on a clock of its own. */
void hpd_sessions_finish(void)
{
	struct hpd_session *s;
	int left;

	for (s = hpd_sessions; s; s = s->next)
		hpd_session_detach(s);
	for (;;) {
		struct timespec ts = { 0, HPD_TICK_MS * 1000000L };

		left = 0;
		for (s = hpd_sessions; s; s = s->next)
			left += !s->ending;
		if (!left)
			break;
		/* A drain that stopped with records left comes back at once;
		 * an exited program's rest in the pipeline, within 1 ms. */
		if (hpd_pipe_wait)
			ts.tv_nsec = 1000000L;
		if (!hpd_backlog)
			nanosleep(&ts, NULL);
		hpd_backlog = 0;
		hpd_pipe_wait = 0;
		hpd_session_tick(hpd_now_ms());
	}
}

/*
 * A same-path claim leaned on code the client's set lacked (code mapped
 * since it was built: an extension module imported, a JIT's new pages):
 * the config written again, same as it is, makes the client build a new
 * set (uapi HEAPPROFD_ALLOC_STACK_SAME). Looked at on every tick, asked at
 * most every CODE_ASK_MS: each new config also makes the client send its
 * next stacks whole. A process that maps code all the time (a JIT) would
 * keep outrunning its sets: after CODE_ASKS_MAX asks its config no longer
 * offers same-path records at all, nor once too many of its claims could
 * not be checked.
 */
#define CODE_ASK_MS	100

static void code_set_tick(struct hpd_session *s, uint64_t now)
{
	uint64_t stale = hp_proc_code_stale(s->proc), ok, unchecked, uncovered, unsure;

	if (s->code_asks >= CODE_ASKS_MAX || now - s->code_asked_ms < CODE_ASK_MS)
		return;
	/* Claims whose unwind read the process's writable memory (JIT
	 * code, frame pointers through it) cannot be checked: a process
	 * that makes many sends no more. */
	hp_proc_same_stats(s->proc, &ok, &unchecked, &uncovered, &unsure);
	if (unsure >= 64 && unsure * 8 > ok + unchecked + uncovered) {
		s->code_asks = CODE_ASKS_MAX;
		hpd_log(HPD_INFO, "pid %d: %llu of its same-path records could not be checked: no more from it",
			(int)s->pid, (unsigned long long)unsure);
	} else if (stale > s->code_stale_seen) {
		s->code_stale_seen = stale;
		if (++s->code_asks == CODE_ASKS_MAX)
			hpd_log(HPD_INFO, "pid %d: its code outgrew %d code sets: no same-path records from it",
				(int)s->pid, CODE_ASKS_MAX);
	} else {
		return;
	}
	s->code_asked_ms = now;
	guard_on = 1;
	if (!sigsetjmp(guard_env, 0))
		write_config(s, s->rule, 1);
	guard_on = 0;
}

/* Continuous dumps, stalled records, rings without a wake channel. */
/* A drain stopped with records left: the event loop must not sleep. */
int hpd_backlog;
int hpd_pipe_wait;

/*
 * A tick serves every live session once (a round), but holds the event loop
 * at most TICK_HOLD_MS: past it, the sessions not yet served this round
 * are served by the next tick, which the loop runs at once (hpd_backlog).
 * With each drain bounded too, root's heapprofctl and a new program's hello
 * wait for at most about one drain, however many sessions are slow.
 */
#define TICK_HOLD_MS	50

/* With -v: which step of which session held the tick a second or more
 * (the loop's own line says only that the tick did). */
static void slow_step(const struct hpd_session *s, const char *what, uint64_t t0)
{
	uint64_t ms = hpd_now_ms() - t0;

	if (hpd_verbosity >= HPD_DEBUG && ms >= 1000)
		hpd_log(HPD_DEBUG, "pid %d (session %llu): %s held the tick %llu ms",
			(int)s->pid, (unsigned long long)s->id, what, (unsigned long long)ms);
}

void hpd_session_tick(uint64_t now)
{
	static uint64_t round = 1;
	struct hpd_session *s;
	uint64_t t;
	int rest = 0;

	for (s = hpd_sessions; s; s = s->next) {
		if (!s->enabled || s->ending || s->tick_round == round)
			continue;
		if (hpd_now_ms() - now >= TICK_HOLD_MS) {
			rest = 1;
			hpd_backlog = 1;
			break;
		}
		s->tick_round = round;
		t = hpd_now_ms();
		if (s->gone_ms) {
			gone_step(s);
			slow_step(s, "the end of its producer", t);
			continue;
		}
		hpd_session_drain(s, 0);
		slow_step(s, "its drain", t);
		if (s->ending)
			continue;
		if (s->detach_since_ms) {
			t = hpd_now_ms();
			detach_step(s, now);
			slow_step(s, "its detach", t);
			continue;
		}
		if (s->continuous_ms && now >= s->next_dump_ms) {
			t = hpd_now_ms();
			hpd_session_dump(s, HP_DUMP_NOW, NULL, 0);
			slow_step(s, "its periodic dump", t);
			s->next_dump_ms = now + s->continuous_ms;
		}
		t = hpd_now_ms();
		hpd_pressure_tick(s, now);
		code_set_tick(s, now);
		slow_step(s, "its pressure and code set looks", t);
	}
	if (!rest)
		round++;
}

void hpd_sessions_reap(void)
{
	struct hpd_session **pp = &hpd_sessions, *s;

	while ((s = *pp) != NULL) {
		if (s->ending) {
			*pp = s->next;
			free(s->buf);
			free(s->kbuf);
			free(s->tpriv);
			hpd_export_acct_put(s->exp.acct);
			free(s);
		} else {
			pp = &s->next;
		}
	}
}
