/* SPDX-License-Identifier: GPL-2.0 */
/*
 * heapprofctl, the user's command: what its subcommands share.
 *
 *   main.c         options, the subcommands' dispatch, usage
 *   printable.c    what other processes chose, made safe for a terminal
 *   util.c         messages, numbers, finding our own files
 *   daemon_link.c  talking to a daemon, or starting a private one
 *   results.c      the events a daemon sends back, and what record prints
 *   record.c       record: run a program under the profiler
 *   attach.c       attach, dump, detach, sessions
 *   install.c, preload.c   install-preload / uninstall-preload
 *   sysfs_stats.c  stats: the module's /sys/kernel/heapprofd
 *   dmabuf_info.c, dmabuf.c  dmabuf, gpu, meminfo: reading, and printing
 *   monitor.c      monitor: the module's netlink events
 *   report.c, symbolize.c  what it does with a profile file (the pipeline's
 *                  profile.h)
 */
#ifndef HEAPPROFCTL_H
#define HEAPPROFCTL_H

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

#include "../proto/ctlproto.h"
#include "../proto/socket_proto.h"
#include "../daemon/pipeline/pipeline.h"
#include "../daemon/pipeline/formats.h"
#include "../daemon/pipeline/profile.h"
#include "preload.h"
#include "printable.h"
#include "sysfs_stats.h"
#include "dmabuf_info.h"
#include "monitor.h"

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

extern int verbose;
extern int progress;
extern const char *prog;
/* The standard error stream before main() made stdout and stderr printable
 * only (printable.h): for our own progress line alone. */
extern FILE *raw_stderr;

void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A numeric option, strictly (hp_parse_num): anything else exits 2. */
unsigned long long num_opt(const char *opt, const char *arg, unsigned long long min,
			   unsigned long long max);
uint64_t now_ms(void);
void client_lib(char *out, size_t len);
void daemon_bin(char *out, size_t len);

/* ---- daemon_link.c ---- */
struct daemon {
	int fd;
	pid_t private_pid;	/* a daemon we started, or 0 */
	char dir[PATH_MAX];	/* its sockets' directory */
	char ctl[PATH_MAX];
	char socket[PATH_MAX];
	char transport[32];	/* "kernel", "socket", "kernel+socket" */
};

typedef void (*event_fn)(const char *msg);
extern event_fn on_event;
int recv_msg(int fd, char *buf, size_t len);
int request_to(struct daemon *d, const char *req, char *rep, size_t replen, int timeout_ms);
int request(struct daemon *d, const char *req, char *rep, size_t replen);
const char *no_answer(const struct daemon *d, int rc, const char *rep, char *buf, size_t len);
/* Does a daemon listen at the control socket? 1 it accepted a connection,
 * 0 nobody does (no socket, refused, not ours); one that does not accept
 * within CTL_TIMEOUT_MS (stopped, its queue full) ends the command. */
int daemon_there(void);
void reach_daemon(struct daemon *d, int allow_private, int want);
int finish_daemon(struct daemon *d);

/* ---- results.c ---- */
#define MAXRES 256
struct result {
	int pid;
	unsigned long long sid;	/* one per session: an exec'd image is another */
	char comm[32];
	char prefix[PATH_MAX];
	int done, ok, moved;
	unsigned long long records;
	/* Records the client dropped (ring full), the frees among them and
	 * the bytes of allocations the dropped samples stood for. */
	unsigned long long dropped, dropped_frees, dropped_bytes;
	char reason[200];
	char error[600];	/* why writing failed, when the daemon says */
	/* The files written (".pb.gz,.txt": has_files when the daemon said),
	 * and what its output budget left out, and why. */
	int has_files;
	char files[64], left_out[64], left_why[300];
};
extern struct result results[MAXRES];
extern int nresults, nlive;
struct result *result_for(int pid, unsigned long long sid);
void record_event(const char *m);
void print_top(const char *prefix, int lines);
/* The files a profile is written as: PREFIX and one of these. */
#define N_OUT_EXT 4
extern const char *const out_ext[N_OUT_EXT];
const char *out_prefix(const char *arg);
const char *diagnose(const char *prefix, char *buf, size_t len);
/* " PREFIX.pb.gz ..." and what was left out, then a newline (results.c). */
void print_written(const char *prefix, int has_files, const char *files, const char *left_out,
		   const char *left_why);
int show_results(int top);

/* ---- record.c ---- */
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
	int drop;		/* --no-block: drop records when the ring is full */
	const char *heaps;
	unsigned formats;	/* --format: a set of formats.h's; 0: the daemon's default */
	char exports[1100];	/* --export KIND=URL ..., space-separated */
	unsigned pressure;	/* --dump-on-pressure PCT */
};
const char *out_opt(const char *arg);
void check_output(const char *prefix);
void mkdirs_for(const char *prefix);
void abs_prefix(const char *in, char *out, size_t len);
int do_record(struct rec_opts *o, char **cmd);

/* ---- attach.c ---- */
int do_attach(int pid, unsigned secs, const char *out, unsigned long long interval, int want);
int simple_request(const char *verb, int pid);
int do_sessions(void);

/* ---- install.c ---- */
int do_install_preload(int install);

/* ---- report.c, symbolize.c ---- */
int hp_report_main(int argc, char **argv);
/* The timeline of a continuous recording (PREFIX) or of profiles (FILE...):
 * an SVG chart and/or CSV ("-": standard output); says what it shows, or
 * why not, as who. 0, or 1. */
int hp_timeline_write(char *const *in, int nin, const char *svg, const char *csv, int top,
		      const char *title, const char *who);
int hp_symbolize_main(int argc, char **argv);

#endif
