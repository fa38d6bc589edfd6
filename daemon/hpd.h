/* SPDX-License-Identifier: GPL-2.0 */
/*
 * heapprofd, the daemon: shared declarations of its parts.
 *
 *   heapprofd.c   main and options
 *   loop.c        the event loop
 *   ctl.c         the control server (heapprofctl's requests, events)
 *   consumer.c    one profiled process: ring, drain, dumps, end
 *   transport_socket.c  the user-space transport (proto/socket_proto.h)
 *   transport_kernel.c  the module transport (/dev/heapprofd, genl events)
 *   transport_scan.c    attaching to a dormant client that has no daemon socket
 *   process.c     the process behind a session: pidfd, /proc dir, identity
 *   rules.c       which sessions to attach and where their profiles go
 *   out_budget.c  what may be written: a budget per user, free space kept
 *   mem_budget.c  what the daemon may hold in memory (--max-memory)
 *   cpu_budget.c  what the daemon may spend of the CPU (--max-cpu)
 *   log.c         logging
 *
 * One thread runs all of this; the pipeline unwinds on its own workers.
 */
#ifndef HPD_H
#define HPD_H

#include <stdarg.h>
#include <stdint.h>
#include <sys/types.h>

#include "../proto/ring.h"
#include "pipeline/pipeline.h"

/* ---- log.c ---- */
enum { HPD_ERR, HPD_WARN, HPD_INFO, HPD_DEBUG };
extern int hpd_verbosity;
void hpd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hpd_log_to_syslog(void);

/* An fd the event loop (loop.c) watches, and what to call. */
struct hpd_watch {
	void (*fn)(struct hpd_watch *w, uint32_t events);
	int fd;
};

/* ---- export.c: dumps sent to an OpenTelemetry Collector or Pyroscope ---- */
#define HPD_EXPORT_MAX		4	/* destinations of one session */
#define HPD_EXPORT_URL_MAX	512
enum { HPD_EXPORT_OTLP = 1, HPD_EXPORT_PYROSCOPE };

struct hpd_export_targets {
	int n;
	struct {
		int kind;
		char url[HPD_EXPORT_URL_MAX];	/* no trailing '/' */
	} t[HPD_EXPORT_MAX];
};

/* What happened to a session's dumps, or to all (counted per request). */
struct hpd_export_counts {
	uint64_t queued;	/* handed to the sender */
	uint64_t sent;		/* answered 2xx */
	uint64_t failed;	/* not sent: errors after the retries, or refused */
	uint64_t dropped;	/* not sent: the queue was full, or no encoding */
	uint64_t retries;
	uint64_t rejected;	/* profiles an OTLP server said it rejected */
	uint64_t bytes;		/* request bodies sent */
};

struct hpd_export_opts {
	unsigned timeout_ms;	/* one request, connecting included */
	unsigned exit_wait_ms;	/* at exit, how long the queue may still take */
	unsigned retries;	/* more tries of a request that failed for a while */
	unsigned queue_max;	/* requests waiting to be sent */
};
extern struct hpd_export_opts hpd_export_opts;

/* "otlp=URL pyroscope=URL" (space-separated) into t. 0, or -1 with why. */
int hpd_export_parse(const char *list, struct hpd_export_targets *t, char *why, size_t wl);
/* heapprofd --export KIND=URL: every session's (a rule's own replace them). */
int hpd_export_option(const char *arg, char *why, size_t wl);
const struct hpd_export_targets *hpd_export_default(void);
/* The sender thread (it loads libcurl: curl_load.c), once. */
int hpd_export_start(void);
/* Send what is queued, within exit_wait_ms, then stop (the rest is counted). */
void hpd_export_stop(void);

struct hpd_export_acct;	/* a session's counts, shared with its queued requests */
struct hpd_export_acct *hpd_export_acct_new(void);
void hpd_export_acct_put(struct hpd_export_acct *a);
void hpd_export_acct_get(const struct hpd_export_acct *a, struct hpd_export_counts *out);
void hpd_export_totals(struct hpd_export_counts *out);

/* A session's exports: the sink of its pipeline (hp_proc_set_sink). */
struct hpd_export_sess {
	struct hpd_export_targets targets;
	struct hpd_export_acct *acct;
};
struct hp_prof;
struct hp_format_args;
void hpd_export_sink(void *arg, const struct hp_prof *prof, const struct hp_format_args *a,
		     int files_rc);

/* ---- rules.c ---- */
struct hpd_ctlconn;

/* What a heapprofctl asked for; owned by its control connection. */
struct hpd_rule {
	struct hpd_rule *next;
	struct hpd_ctlconn *owner;	/* gets the events; NULL: daemon's own */
	pid_t pid;			/* 0: not by pid */
	char name[64];			/* "": not by name */
	int all;
	int follow_forks;
	int dormant_too;		/* attach dormant matches (record --name/--all) */
	uint64_t interval;
	uint32_t stack_cap;
	uint32_t cfg_flags;		/* HEAPPROFD_CFG_* */
	char heaps[256];		/* heap names to sample, comma-separated; "": all */
	unsigned formats;		/* HP_OUT_* */
	char exports[1100];		/* "otlp=URL ...": replaces the daemon's --export */
	unsigned pressure_pct;		/* --dump-on-pressure: dump past this % of memory.max */
	int dump_at_max;
	unsigned continuous_ms;
	char prefix[512];
	int nsessions;			/* sessions started under this rule */
	int live;			/* of those, still running */
	int images;			/* sessions of pid itself: one per exec'd image */
	uint64_t main_sid;		/* the image that owns PREFIX.* now */
};

struct hpd_rule *hpd_rule_match(pid_t pid, const char *comm, int dormant);
void hpd_rule_add(struct hpd_rule *r);
void hpd_rule_del(struct hpd_rule *r);
int hpd_pid_descends_from(pid_t pid, pid_t ancestor);
/* Does the rule sample the heap of this name? (Its --heaps list, or all.) */
int hpd_rule_wants_heap(const struct hpd_rule *r, const char *name);
struct hpd_rule *hpd_rule_owned_by(struct hpd_ctlconn *o);

/*
 * Limits that keep one local user from exhausting the daemon (the admin
 * guide's "Limits" lists them all). Per uid, root excepted.
 */
#define HPD_HELLO_DEADLINE_MS	1000	/* a connection says hello within this */
#define HPD_PENDING_MAX		256	/* connections yet to say hello, all users */
#define HPD_PENDING_PER_UID	32	/* ... of one uid */
#define HPD_SESSIONS_PER_UID	256	/* sessions of one uid, at most (fd_budget.c) */
#define HPD_FDS_PER_SESSION	20	/* descriptors a session may hold (fd_budget.c) */
#define HPD_ACCEPT_BACKOFF_MS	100	/* out of fds: stop accepting this long */

/* ---- out_budget.c: what the daemon may write (admin guide, Limits) ---- */
#define HPD_BUDGET_PROFILES	100		/* profiles per uid in the output dir */
#define HPD_BUDGET_BYTES	(256ULL << 20)	/* their disk, per uid */
#define HPD_MIN_FREE_PCT	5		/* free space kept: this % of the fs, */
#define HPD_MIN_FREE_CAP	(1ULL << 30)	/* ... at most this */
#define HPD_DUMP_FILES_MAX	8		/* files of one dump (now and peak) */

struct hpd_budget_cfg {
	uint64_t max_profiles;		/* per uid; 0: no bound */
	uint64_t max_bytes;		/* per uid; 0: no bound */
	uint64_t min_free;		/* bytes kept free (when min_free_pct is 0) */
	unsigned min_free_pct;		/* or this % of the file system, */
	uint64_t min_free_cap;		/* at most this (0: no cap) */
};
extern struct hpd_budget_cfg hpd_budget_cfg;

struct hpd_budget_stats {
	uint64_t removed;		/* profiles removed for a user's budget */
	uint64_t refused_space;		/* dumps refused: the free space kept */
	uint64_t refused_user;		/* dumps refused: a user's bytes */
	uint64_t left_out;		/* dumps written without some formats */
};

/* --user-max-profiles, --user-max-bytes, --min-free: 0, or -1 with why. */
int hpd_budget_option(const char *name, const char *arg, char *why, size_t wl);
/* The options not given take the defaults of a system or private daemon. */
void hpd_budget_defaults(int private_mode);
/* Count what the output directory holds (and remove unfinished temporary
 * files); each user over the budget loses its oldest profiles now. */
int hpd_budget_init(const char *outdir);
void hpd_budget_fini(void);
struct hp_out_limit;
/*
 * Before a dump to prefix of uid's process (charged: it goes to the output
 * directory under the user's budget): 0 no bound, 1 lim filled (pass it to
 * hp_proc_dump_limited), or -errno with why: refused (no room kept).
 */
int hpd_budget_begin(uid_t uid, const char *prefix, int charged, struct hp_out_limit *lim,
		     char *why, size_t wl);
/* After it (rc: the dump's): the profile counted, the oldest over the budget removed. */
void hpd_budget_end(uid_t uid, const char *prefix, int charged, struct hp_out_limit *lim,
		    int rc);
void hpd_budget_get_stats(struct hpd_budget_stats *st);
/* uid's profiles in the output directory and their disk. */
void hpd_budget_usage(uid_t uid, uint64_t *count, uint64_t *bytes);
/* The parts, for the tests. */
struct statvfs;
int hpd_budget_parse_size(const char *s, uint64_t *bytes, unsigned *pct, char *why, size_t wl);
const char *hpd_budget_size_str(uint64_t n, char *buf, size_t len);
uint64_t hpd_budget_reserve(const struct statvfs *sv);
int hpd_budget_room(const struct statvfs *sv, const char *dir, uint64_t *room, char *why,
		    size_t wl);
int hpd_budget_key(const char *name, char *key, size_t keylen);
int hpd_budget_is_temp(const char *name);

/* ---- mem_budget.c: what the daemon may hold in memory (admin guide, Limits) ---- */
#define HPD_MEM_PCT		25		/* system daemon: this % of the machine's memory, */
#define HPD_MEM_CAP		(1ULL << 30)	/* ... at most this */
#define HPD_MEM_MIN		(16ULL << 20)	/* the least budget taken */
#define HPD_MEM_FED_STEP	1024		/* the drain looks after this many records */
#define HPD_MEM_SHED_EVERY_MS	1000		/* caches dropped at most this often */
#define HPD_MEM_SETTLE_MS	100		/* memory let go of is given back within */
/* A dump's memory: per sample, per frame of a sample's stack, per location. */
#define HPD_MEM_DUMP_BASE	(256U << 10)
#define HPD_MEM_DUMP_PER_SAMPLE	440
#define HPD_MEM_DUMP_PER_FRAME	22
#define HPD_MEM_DUMP_PER_LOC	1400
#define HPD_KREC_BUF		(128U << 10)	/* a kernel session's read(2) buffer */

struct hpd_mem_cfg {
	uint64_t max;			/* bytes; 0: no bound (when pct is 0) */
	unsigned pct;			/* or this % of the machine's memory, */
	uint64_t cap;			/* at most this (0: no cap) */
};
extern struct hpd_mem_cfg hpd_mem_cfg;

struct hpd_mem_stats {
	uint64_t budget;		/* bytes; 0: none */
	uint64_t used, peak;		/* anonymous memory: last and highest seen */
	uint64_t held;			/* of it, the live sessions' (books, queues) */
	uint64_t reserve;		/* what the largest dump would need */
	uint64_t sheds;			/* times caches were dropped for the budget */
	uint64_t holds;			/* times the drains waited for memory to come back */
	uint64_t ended;			/* sessions ended for it */
};

/* --max-memory: 0, or -1 with why. */
int hpd_mem_option(const char *name, const char *arg, char *why, size_t wl);
void hpd_mem_defaults(int private_mode);
/* The budget resolved (a percentage of the machine's memory), first reading. */
int hpd_mem_init(void);
void hpd_mem_fini(void);
/* The tick: measure, and act when the budget is near. */
void hpd_mem_check(uint64_t now_ms);
/* ms until hpd_mem_check wants to run though no session is live, or -1. */
int hpd_mem_wake_ms(uint64_t now_ms);
/* The drain fed n records: 1 when it should stop and let hpd_mem_check act. */
int hpd_mem_fed(unsigned n);
/* 1: the drains wait (memory let go of is being given back). */
int hpd_mem_hold(void);
/* Records in flight per process the pipeline may hold (0: its default). */
uint64_t hpd_mem_queue_max(void);
/* The private copies of files the pipeline may hold together (0: no bound). */
uint64_t hpd_mem_copy_max(void);
/* What session s holds, and what a dump of it would need besides. */
struct hpd_session;
void hpd_mem_session(struct hpd_session *s, uint64_t *held, uint64_t *reserve);
void hpd_mem_get_stats(struct hpd_mem_stats *st);
/* The parts, for the tests. */
enum hpd_mem_act {
	HPD_MEM_OK,		/* nothing to do */
	HPD_MEM_OWN,		/* over, but by the daemon's own memory: said, no more */
	HPD_MEM_HOLD,		/* the drains wait while memory comes back */
	HPD_MEM_SHED,		/* drop what can be rebuilt */
	HPD_MEM_END,		/* end a session */
};
struct hpd_mem_view {
	uint64_t budget, used, held, reserve;	/* held: the sessions' share of used */
	uint64_t now_ms, shed_ms, end_ms;	/* 0: never */
	size_t nsessions;
};
enum hpd_mem_act hpd_mem_decide(const struct hpd_mem_view *v);
struct hpd_mem_use {
	uid_t uid;
	uint64_t held, reserve;
};
int hpd_mem_pick(const struct hpd_mem_use *u, size_t n);
uint64_t hpd_mem_resolve(uint64_t phys);
int hpd_mem_parse_status(const char *buf, uint64_t *anon);
uint64_t hpd_mem_dump_cost(uint64_t samples, uint64_t locs, uint64_t locations);

/* ---- cpu_budget.c: what the daemon may spend of the CPU (admin guide, Limits) ---- */
#define HPD_CPU_WINDOW_MS	1000	/* the CPU spent is averaged over this */
#define HPD_CPU_MIN_WINDOW_MS	100	/* ... once this much of it has passed */
#define HPD_CPU_STEP_MS		50	/* the drains wait at most this long at a time */
#define HPD_CPU_QUEUE_MAX	(256U << 10)	/* records queued per process under a cap */
#define HPD_CPU_FED_STEP	64	/* the drain looks after this many records */

struct hpd_cpu_stats {
	unsigned cap_pct;		/* --max-cpu; 0: none */
	unsigned used_pct;		/* over the last window */
	uint64_t holds, held_ms;	/* times the drains waited, and how long in all */
};
/* --max-cpu: 0, or -1 with why. */
int hpd_cpu_option(const char *name, const char *arg, char *why, size_t wl);
void hpd_cpu_init(void);
/* Every turn of the event loop: the drains wait while over the cap. */
void hpd_cpu_tick(uint64_t now_ms);
int hpd_cpu_hold(void);
/* The drain fed n records: 1 when it should stop (over the cap). */
int hpd_cpu_fed(unsigned n);
/* Records in flight per process under the cap (0: no cap, no bound). */
uint64_t hpd_cpu_queue_max(void);
/* ms until the drains may go on, or -1. */
int hpd_cpu_wake_ms(uint64_t now_ms);
void hpd_cpu_get_stats(struct hpd_cpu_stats *st);
/* For the tests: the wait for spent_ms of CPU in elapsed_ms under pct. */
uint64_t hpd_cpu_pause(uint64_t spent_ms, uint64_t elapsed_ms, unsigned pct);

/* ---- process.c ---- */
struct hpd_ident {		/* what a process was when it said hello */
	uid_t uid[4];		/* real, effective, saved, fs */
	gid_t gid[4];
	dev_t exe_dev;
	ino_t exe_ino;
	int ok;
};
/* 0: pidfd is a pidfd of the running process pid; -EBADF / -ESRCH. */
int hpd_pidfd_check(int pidfd, pid_t pid);
/* /proc/<pid> (O_PATH) of the very process pidfd holds, or -errno. */
int hpd_proc_dir_open(pid_t pid, int pidfd);
int hpd_ident_read(int proc_fd, struct hpd_ident *id);
int hpd_ident_same(const struct hpd_ident *a, const struct hpd_ident *b);
struct hpd_session;
/* Still the process that opened it: alive, running the same executable. */
int hpd_session_current(struct hpd_session *s);

/* ---- consumer.c ---- */
enum hpd_transport { HPD_T_SOCKET, HPD_T_KERNEL, HPD_T_SCAN };

struct hpd_session {
	struct hpd_session *next;
	enum hpd_transport transport;
	uint64_t id;			/* ours; the kernel's for HPD_T_KERNEL */
	pid_t pid;
	uid_t uid;			/* the sender's, by SCM_CREDENTIALS (socket) */
	char comm[17];
	int dormant;			/* registered dormant, not yet enabled */
	int enabled;			/* config written, pipeline running */
	int ending;

	int conn_fd;			/* socket / consumer fd / pidfd */
	int wake_fd;			/* eventfd or -1 */
	int ring_fd;			/* memfd or -1 (kernel: conn_fd) */
	int maps_fd, mem_fd, exe_fd;	/* until handed to the pipeline */
	int pidfd, proc_fd;		/* socket: the process, held (process.c) */
	struct hpd_ident ident;		/* socket: what it was at the hello */
	int foreign;			/* another user's process: open no paths */

	void *map;
	size_t map_len;
	struct hp_ring ring;
	uint8_t *buf;			/* private copy of the current record */
	size_t buflen;

	uint64_t stall_head;		/* head at which a record stalled */
	uint64_t stall_since_ms;
	uint64_t stall_looked_ms;	/* the drain's last look at it */
	uint64_t stall_watched_ms;	/* seen stalled this long (consumer.c) */
	/* the pipeline held all it may of its records: since the drain's
	 * look at (0: it took one since), and for this long (consumer.c) */
	uint64_t full_looked_ms, full_watched_ms;
	uint64_t detach_since_ms;	/* a detach is under way (the gate closed) */
	int detach_empty;		/* the last drain found the ring empty */
	/* same-path claims the client's code set did not cover: seen so far,
	 * and when a new set was last asked for (consumer.c, code_set_tick) */
	uint64_t code_stale_seen, code_asked_ms;
	int code_asks;			/* new code sets asked for so far */
	uint64_t tick_round;		/* the tick round that last served it (consumer.c) */
	uint64_t gone_ms;		/* the producer went then: draining what it left */
	uint64_t gone_taken;		/* bytes drained since */
	int poll_only;			/* no wake channel: poll on the tick */

	struct hp_proc *proc;
	struct hpd_rule *rule;		/* NULL: system default */
	char prefix[600];
	unsigned formats;
	struct hpd_export_sess exp;	/* exp.targets.n == 0: no exports */
	struct {			/* its cgroup (oom.c) */
		struct hpd_watch w;	/* memory.events; fd -1: not watched */
		char cg[512];		/* /sys/fs/cgroup/...; "": none */
		long long kills;	/* oom_kill as last read */
		int rose;		/* it rose while the process was profiled */
		int by_module;		/* the module said the OOM killer chose it */
		uint64_t at_ms;		/* when it was seen to rise */
		long long max, current, peak;	/* then (-1 unknown, -2 "max") */
		unsigned pressure_pct;	/* --dump-on-pressure; 0: none */
		int armed;
		unsigned pressure_dumps;
		uint64_t checked_ms;
	} oom;
	unsigned continuous_ms;
	uint64_t next_dump_ms;
	unsigned dumps;
	uint64_t records, bytes;
	/* The client's drop counters as of the last dump (the done event). */
	uint64_t drop_records, drop_frees, drop_est_bytes;
	uint64_t heaps_off[4];		/* heaps the rule leaves out (config) */
	/* Kernel records (module transport, uapi "Kernel records"). */
	uint8_t *kbuf;			/* read(2) buffer, KREC_BUF bytes */
	int krec_off;			/* the module has none (an older ABI) */
	int kbad_logged;
	uint64_t krecords, kbad;	/* fed, and left out as malformed */
	char end_reason[160];
	char dump_error[600];	/* why the last dump failed (hp_proc_dump_why) */
	/* What the last dump wrote: ".pb.gz,.svg"..., and what the output
	 * budget left out of it and why (hpd_put_dump). */
	char dump_files[48], dump_left[48], dump_left_why[256];
	void *tpriv;			/* transport's state, freed at reap */
};

extern struct hpd_session *hpd_sessions;
extern struct hp_pipeline *hpd_pipe;

struct hpd_session *hpd_session_new(enum hpd_transport t, pid_t pid, const char *comm);
/* A process's name as the daemon uses it (file names, lines of text): '_'
 * for '/', '\\', space, a leading '.' and anything unprintable. */
void hpd_clean_comm(char *out, size_t len, const char *comm);
int hpd_session_map(struct hpd_session *s, int fd, int is_memfd,
		    uint32_t ctl_size, uint64_t data_size);
/* Why hpd_session_map refused a ring (rc < 0), for the log. */
const char *hpd_ring_refusal(int rc);
int hpd_session_enable(struct hpd_session *s, struct hpd_rule *r);
void hpd_session_drain(struct hpd_session *s, int producer_gone);
/* The process exited or hung up: what it left is drained on the ticks, a
 * bounded time each, then the session ends (consumer.c). */
void hpd_session_gone(struct hpd_session *s);
/* Module transport: read(2) the kernel's records and feed them (part of the drain). */
void hpd_session_read_kernel(struct hpd_session *s, int producer_gone);
int hpd_session_dump(struct hpd_session *s, unsigned which, char *path, size_t pathlen);
/* A dump to PREFIX SUFFIX.*, of this kind (exports), with note in its header. */
int hpd_session_dump_as(struct hpd_session *s, unsigned which, const char *suffix,
			const char *kind, const char *note);

/* ---- oom.c: the OOM killer's victim, dumps under memory pressure ---- */
#define HPD_OOM_WINDOW_MS	3000	/* an end this soon after a kill is the kill's */
void hpd_oom_watch(struct hpd_session *s, unsigned pressure_pct);
void hpd_oom_unwatch(struct hpd_session *s);
/* The module's HEAPPROFD_REC_OOM for this session's process. */
void hpd_oom_chosen(struct hpd_session *s);
/* At the session's end: was it the OOM killer's? 1 with the header line in note. */
int hpd_oom_victim(struct hpd_session *s, char *note, size_t len);
void hpd_pressure_tick(struct hpd_session *s, uint64_t now);

/* Add what the last dump wrote to a reply or event: files=.pb.gz,.txt...
 * and, when some were left out, left_out=... left_why=... */
void hpd_put_dump(const struct hpd_session *s, char *msg, size_t len);
void hpd_session_end(struct hpd_session *s, const char *why);
/* Stop profiling a live process: finished on the tick (consumer.c). */
void hpd_session_detach(struct hpd_session *s);
/* The daemon stops: every session detached and ended before it returns. */
void hpd_sessions_finish(void);
struct hpd_session *hpd_session_by_pid(pid_t pid);
void hpd_session_tick(uint64_t now_ms);
uint64_t hpd_now_ms(void);
void hpd_sessions_reap(void);
extern int hpd_backlog;		/* a drain left records behind: tick again now */
extern int hpd_pipe_wait;	/* a session waits for the pipeline (an exited program's rest, room): tick in 1 ms */

/* ---- loop.c: the event loop ---- */
int hpd_loop_init(void);
int hpd_loop_add(int fd, uint32_t events, struct hpd_watch *w);
void hpd_loop_del(int fd);
/* accept4 failed with EMFILE/ENFILE: unwatch w for HPD_ACCEPT_BACKOFF_MS. */
void hpd_loop_backoff(struct hpd_watch *w);
/* A listening SEQPACKET socket at path, created with mode, watched by w;
 * passcred: every message on its connections carries the sender's
 * credentials (SO_PASSCRED), from the first. */
int hpd_loop_listen(const char *path, mode_t mode, int backlog, int passcred,
		    struct hpd_watch *w);
/* Accept what is pending on w (accept4 flags) and hand each to adopt;
 * a failed adopt closes the fd; out of descriptors backs off. */
void hpd_loop_accept(struct hpd_watch *w, int flags, int (*adopt)(int fd));
/* Wait up to timeout ms (-1: no bound) and dispatch: events handled, or -errno. */
int hpd_loop_run(int timeout);
/* The nearer of two timeouts, -1 being none. */
int hpd_sooner(int a, int b);

/* ---- ctl.c: the control server ---- */
int hpd_ctl_listen(const char *path);
int hpd_ctl_adopt(int fd);		/* a connected control socket */
void hpd_ctl_reap(void);
/* A session ended: answer the detach requests that waited for it. */
void hpd_ctl_session_ended(const struct hpd_session *s, const char *prefix);
void hpd_ctl_set_transport(const char *name);
int hpd_ctl_quit_asked(void);
void hpd_ctl_ask_quit(void);
int hpd_ctl_owner_gone(void);
/* Send an event line to the heapprofctl that owns rule r, if any. */
void hpd_event(struct hpd_rule *r, const char *msg);

struct hpd_opts {
	const char *socket_path;
	const char *ctl_path;
	const char *outdir;
	int private_mode;
	int transport;		/* 0 auto, 1 kernel only, 2 socket only */
	uint64_t interval;
	unsigned workers;
	int attach_all_default;	/* system daemon: attach non-dormant sessions */
	/* Tests: HEAPPROFD_TEST_ENABLE_DELAY_MS holds back every enable (the
	 * first read of a process's maps), as a slow machine would. */
	unsigned test_enable_delay_ms;
};
extern struct hpd_opts hpd_opts;
void hpd_default_prefix(struct hpd_session *s, char *out, size_t len);

/* ---- transport_socket.c ---- */
int hpd_socket_listen(const char *path);
/* A connected client socket (non-blocking): it has HPD_HELLO_DEADLINE_MS. */
int hpd_socket_adopt(int fd);
/* Close connections past their hello deadline; ms until the next one, or -1. */
int hpd_socket_expire(uint64_t now_ms);
int hpd_socket_enable_dormant(struct hpd_session *s, struct hpd_rule *r);

/* ---- fd_budget.c: one user's sessions never take the daemon's descriptors ---- */
void hpd_fd_budget_init(void);		/* after the limit is raised */
unsigned hpd_sessions_of_uid(uid_t uid);	/* live sessions, every transport */
unsigned hpd_fd_sessions_cap(void);	/* sessions one uid (not root) may hold */
/* May a session of uid be taken on? 0, or -EUSERS/-EMFILE (said in the log). */
int hpd_fd_admit(uid_t uid, pid_t pid);

/* ---- transport_kernel.c ---- */
int hpd_kernel_init(void);	/* 0: module in use; -errno: not available */
int hpd_kernel_attach(uint64_t session_id, pid_t pid, struct hpd_rule *r);
int hpd_kernel_available(void);
/* Sessions waiting for their process's fds looked at; ms until the next look, or -1. */
int hpd_kernel_expire(uint64_t now_ms);
typedef void (*hpd_kernel_list_fn)(void *arg, uint64_t id, pid_t pid, const char *comm,
				 uint32_t flags, uint32_t state);
void hpd_kernel_list(hpd_kernel_list_fn fn, void *arg);

/* ---- transport_scan.c ---- */
int hpd_scan_attach(pid_t pid, struct hpd_rule *r, char *err, size_t errlen);

/* ---- the loop's tick ---- */
/*
 * The event loop drains every live session each HPD_TICK_MS; producers wake
 * the daemon early only when a quarter of a ring is unread. The tick is the
 * latency bound for a trickle of records (heapprofd(8)).
 */
#ifndef HPD_TICK_MS
#define HPD_TICK_MS		25
#endif
#ifndef HPD_WAKE_DIV		/* watermark = data size / this; 0: wake on every commit */
#define HPD_WAKE_DIV		4
#endif

/* An empty ring is rewound once its producers are size / this into a lap. */
#ifndef HPD_REWIND_DIV
#define HPD_REWIND_DIV		16
#endif

static inline uint32_t hpd_sleep_watermark(const struct hp_ring *r)
{
	uint64_t wm = HPD_WAKE_DIV ? r->size / HPD_WAKE_DIV : 1;

	return wm > UINT32_MAX ? UINT32_MAX : (wm ? (uint32_t)wm : 1);
}

#define HPD_CTL_DEFAULT		"/run/heapprofd/ctl.sock"
#define HPD_CTL_ENV		"HEAPPROFD_CTL"
#define HPD_MSG_MAX		65536

#endif
