/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Loading the client into a running process (heapprofctl attach of a
 * process started without it), and taking its hooks out again (detach).
 *
 *   target.c      the process's mappings and the symbols of its objects
 *   ptrace_stop.c stopping every thread (PTRACE_SEIZE + INTERRUPT), letting
 *                 them run a little, releasing them with their signals
 *   remote_call.c calling a function in one stopped thread and putting its
 *                 registers and stack back exactly
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
	uint64_t start, end, off;
	char perms[5];
	char path[512];
};

struct target_maps {
	struct tmap *m;
	int n;
};

int tmaps_read(pid_t pid, struct target_maps *tm);
void tmaps_free(struct target_maps *tm);
/* The first mapping of an object whose path ends with name ("/libc.so.6"),
 * or NULL. */
const struct tmap *tmaps_find(const struct target_maps *tm, const char *suffix);
/* Where the object whose path is that of mp is loaded (its bias). */
int tmaps_bias(pid_t pid, const struct target_maps *tm, const struct tmap *mp, uint64_t *bias);
/* The same in two steps: the ELF's lowest PT_LOAD (page) and its file
 * offset, then where the mapping of that offset is. */
int elf_load0(pid_t pid, const char *path, uint64_t *vaddr, uint64_t *off);
int tmaps_bias_at(const struct target_maps *tm, const char *path, uint64_t vaddr, uint64_t off,
		  uint64_t *bias);
/* The address and size of a function or object in the process: the
 * symbol of the object mapped from path (read through /proc/PID/root). */
int target_sym(pid_t pid, const char *path, uint64_t bias, const char *name,
	       uint64_t *addr, uint64_t *size);
/* The same for n names at once (one pass over the file); 0 where absent. */
int target_syms(pid_t pid, const char *path, uint64_t bias, const char *const *names, size_t n,
		uint64_t *addr, uint64_t *size);

/* ---- ptrace_stop.c ---- */
struct sthread {
	pid_t tid;
	int stopped;
	siginfo_t sigs[64];	/* signals held back while stopped: given back */
	int nsigs;
	struct user_regs_struct regs;	/* at the stop */
};

struct stopset {
	pid_t pid;
	struct sthread *t;
	int n, cap;
};

/* Seize and stop every thread; -errno with err set. */
int stop_all(struct stopset *s, pid_t pid, char *err, size_t errlen);
/* Let them run for about us microseconds, then stop them all again. */
int run_briefly(struct stopset *s, unsigned us, char *err, size_t errlen);
/* The same for all threads but the one with tid except (no new ones). */
void run_others_briefly(struct stopset *s, pid_t except, unsigned us);
/* Detach from every thread, then give back the signals they received. */
void release_all(struct stopset *s);
/* Hold back the signal of t's signal-delivery-stop (its siginfo). */
void stopset_note_signal(struct sthread *t, int sig);

/* ---- remote_call.c ---- */
/* An argument that is the address of byte off of the blob on the stack. */
#define RC_BLOB(off) (0xb10b000000000000ULL | (uint64_t)(off))
/* others: the other threads, let run for a moment when the call waits
 * for a lock one of them holds; NULL: they stay stopped. */
int remote_call(pid_t pid, struct stopset *others, struct sthread *t, uint64_t fn, const uint64_t *args, int nargs,
		const void *blob, size_t bloblen, uint64_t *ret, char *err, size_t errlen);
int remote_read(pid_t pid, uint64_t addr, void *buf, size_t len);

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
