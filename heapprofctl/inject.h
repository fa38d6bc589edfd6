/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Loading the client into a running process (heapprofctl attach of a
 * process started without it), and taking its hooks out again (detach).
 *
 *   target.c      the process's mappings, their files and the symbols of
 *                 its objects
 *   linkmap.c     the objects its loader loaded (which libc, which loader)
 *   ptrace_stop.c stopping every thread (PTRACE_SEIZE + INTERRUPT), letting
 *                 them run a little, releasing them with their signals;
 *                 who the process is (an exec, new credentials)
 *   remote_call.c calling a function in one stopped thread, which returns
 *                 through a trampoline that puts the thread back as it was
 *                 even when heapprofctl dies meanwhile
 *   inject.c      the checks before, the safe point, attach and detach
 */
#ifndef HPC_INJECT_H
#define HPC_INJECT_H

#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

/* ---- target.c ---- */
struct tmap {
	uint64_t start, end, off, ino;
	char perms[5];
	char path[512];
};

struct target_maps {
	struct tmap *m;
	int n;
};

int tmaps_read(pid_t pid, struct target_maps *tm);
void tmaps_free(struct target_maps *tm);
/* The file mapped at m, opened as the mapping (never by a name the process
 * chose, never blocking, only a regular file); -errno. */
int tmap_open(pid_t pid, const struct tmap *m);

/* An object (the executable, a library) as its loader placed it. */
struct tobj {
	const struct tmap *first;	/* the mapping of its first PT_LOAD */
	int nmaps;			/* that one and the next ones of its file */
	uint64_t bias;
};
/* The object loaded at bias (a link map entry's l_addr); -ENOENT. */
int tobj_at(pid_t pid, const struct target_maps *tm, uint64_t bias, struct tobj *o);
/* Addresses (and sizes) in the process of n symbols of o; 0 where absent. */
int tobj_syms(pid_t pid, const struct tobj *o, const char *const *names, size_t n,
	      uint64_t *addr, uint64_t *size);
int tobj_sym(pid_t pid, const struct tobj *o, const char *name, uint64_t *addr);
/* Where need bytes are mapped executable in o after the end of its code
 * (up to the end of that page): never run, free for a trampoline. */
int tobj_code_tail(pid_t pid, const struct tobj *o, size_t need, uint64_t *at);
/* A symbol's value in a file of ours (not yet in the process). */
int file_sym(const char *path, const char *name, uint64_t *value);

/* ---- linkmap.c ---- */
struct lobj {
	uint64_t lm;		/* its struct link_map in the process */
	uint64_t bias;		/* l_addr */
	char name[512];		/* l_name, as the loader has it */
};

struct linkmap {
	struct lobj *o;
	int n;
	uint64_t ldbase;	/* the loader's base (AT_BASE) */
};

/* -ENOEXEC: no loader (a static program); -EAGAIN: not set up yet. */
int linkmap_read(pid_t pid, struct linkmap *lm);
void linkmap_free(struct linkmap *lm);
/* The first object whose file name (after the last '/') is base. */
const struct lobj *linkmap_find(const struct linkmap *lm, const char *base);

/* ---- ptrace_stop.c ---- */
struct sthread {
	pid_t tid;
	int stopped;
	siginfo_t sigs[64];	/* signals held back while stopped: given back */
	int nsigs;
	struct user_regs_struct regs;	/* at the stop */
};

/* Who the process is: what an exec or new credentials change. */
struct target_id {
	uint64_t exe_dev, exe_ino;
	char creds[512];	/* its status's Uid, Gid, Groups, CapPrm, CapEff */
};

struct stopset {
	pid_t pid;
	struct sthread *t;
	int n, cap;
	struct target_id id;	/* at the stop */
	/* The process is not the one stopped any more (an exec was seen, or
	 * its program or credentials changed): nothing more is written. */
	int changed;
	/* A call was let go unfinished (Ctrl-C, a timeout): its thread
	 * comes back through the trampoline alone; nothing is put back. */
	int abandoned;
	uint64_t tramp;		/* where the return trampoline is, or 0 */
	uint8_t tramp_saved[16];
};

/* Seize and stop every thread; -errno with err set. */
int stop_all(struct stopset *s, pid_t pid, char *err, size_t errlen);
/* Let them run for about us microseconds, then stop them all again. */
int run_briefly(struct stopset *s, unsigned us, char *err, size_t errlen);
/* The same for all threads but the one with tid except; the threads they
 * create meanwhile are held too. */
void run_others_briefly(struct stopset *s, pid_t except, unsigned us);
/* Detach from every thread (one left running is stopped first), then
 * give back the signals they received. */
void release_all(struct stopset *s);
/* Hold back the signal of t's signal-delivery-stop (its siginfo). */
void stopset_note_signal(struct sthread *t, int sig);
int target_id_read(pid_t pid, struct target_id *id);
int target_id_same(const struct target_id *a, const struct target_id *b);

/* ---- remote_call.c ---- */
/* An argument that is the address of byte off of the blob on the stack. */
#define RC_BLOB(off) (0xb10b000000000000ULL | (uint64_t)(off))
/* Write the return trampoline at at (code of the process's that is never
 * run: see inject.c) and, once no call is left running, put back what was
 * there. */
int rc_place_trampoline(struct stopset *s, uint64_t at, char *err, size_t errlen);
void rc_remove_trampoline(struct stopset *s);
size_t rc_trampoline_size(void);
/*
 * fn(args) in thread t; 0 with *ret. others_run: the other threads run for
 * a moment now and then while the call has not returned (a lock one of
 * them holds); else they stay stopped. -ECANCELED (inject_cancelled said
 * so) or -ETIMEDOUT: the call was let go and finishes alone; -ESRCH: the
 * process ended or changed, nothing was written; other -errno: failed,
 * the thread is as it was.
 */
int remote_call(struct stopset *s, struct sthread *t, int others_run, uint64_t fn,
		const uint64_t *args, int nargs, const void *blob, size_t bloblen, uint64_t *ret,
		char *err, size_t errlen);
int remote_read(pid_t pid, uint64_t addr, void *buf, size_t len);
/* A NUL-terminated string of at most len - 1 bytes. */
int remote_str(pid_t pid, uint64_t addr, char *buf, size_t len);
/* A SIGALRM every 10 ms, without SA_RESTART, from start to stop (they
 * nest): no system call of the attach (an open() of a FIFO inside
 * libunwind, say) blocks longer than that, and every wait looks at
 * inject_cancelled. */
void rc_tick_start(void);
void rc_tick_stop(void);
/* Asked at every wait: non-zero ends the attach (Ctrl-C), leaving the
 * process as it was or, during a call, to finish it alone. */
extern int (*inject_cancelled)(void);

/* ---- inject.c ---- */
struct inject_times {
	uint64_t stopped_us;	/* every thread stopped, start to release */
	int tries;		/* stops until a safe point */
	/* Its parts: stopping the threads, finding a safe point (unwinding
	 * them), dlopen (attach only), the client's function. */
	uint64_t stop_us, safe_us, dlopen_us, call_us;
};

/*
 * 0: the client is loaded and its session open (dormant: the daemon's
 * attach enables it). 1: the client is there already, preloaded: attach
 * the usual way. -errno with err set: the process is as it was.
 */
int hp_inject_attach(pid_t pid, const char *lib, const char *config, struct inject_times *tt,
		     char *err, size_t errlen);
/* 0: hooks out, session closed; 1: no attach-loaded client there
 * (nothing to do); -errno with err set. */
int hp_inject_detach(pid_t pid, struct inject_times *tt, char *err, size_t errlen);

#endif
