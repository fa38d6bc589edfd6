// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of attach's machinery (heapprofctl/target.c, ptrace_stop.c,
 * remote_call.c) against a child of this test: its maps and symbols, every
 * thread stopped, functions called in it, its registers, stack and signals
 * as they were afterwards. TAP lines; built with ASan/UBSan too.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../tests/tap.h"
#include "../inject.h"

#define ok(cond, ...) tap_ok(cond, "heapprofctl inject: " __VA_ARGS__)

static volatile sig_atomic_t got_usr1;
static int report[2];	/* child -> parent: its counters at the end */
static int go[2];	/* parent -> child: stop now */

static void on_usr1(int sig)
{
	(void)sig;
	got_usr1++;
}

static void *spinner(void *arg)
{
	volatile unsigned long *n = arg;

	for (;;)
		(*n)++;
	return NULL;
}

/* The child: a thread that spins, a main thread asleep in read(2) (a
 * system call interrupted by the stop and restarted afterwards). */
static void child(void)
{
	static volatile unsigned long spins;
	pthread_t th;
	char c;
	ssize_t n;
	int vals[2];

	signal(SIGUSR1, on_usr1);
	pthread_create(&th, NULL, spinner, (void *)&spins);
	close(go[1]);
	close(report[0]);
	do
		n = read(go[0], &c, 1);
	while (n < 0 && errno == EINTR);
	vals[0] = (int)n;
	/* 's': a SIGUSR1 was sent to the process, and the spinning thread
	 * may be the one that takes it, on a busy machine after this read
	 * returned. Wait for it (a lost one stays 0), then a little for a
	 * second one. */
	for (int i = 0; n == 1 && c == 's' && i < 10000 && !got_usr1; i++)
		usleep(1000);
	if (n == 1 && c == 's')
		usleep(50000);
	vals[1] = got_usr1;
	if (write(report[1], vals, sizeof(vals)) < 0)
		_exit(3);
	_exit(0);
}

/* Two threads, the main one blocked in read(2) (its syscall file). */
static int in_read(pid_t pid)
{
	char p[64], buf[64] = "";
	FILE *f;
	int n = 0;

	snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
	f = fopen(p, "r");
	while (f && fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "Threads: %d", &n) == 1)
			break;
	if (f)
		fclose(f);
	snprintf(p, sizeof(p), "/proc/%d/syscall", (int)pid);
	f = fopen(p, "r");
	buf[0] = 0;
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
	}
	return n == 2 && !strncmp(buf, "0 ", 2);
}

/* libc of pid, by its loader's link map; its getpid and atoi. */
static int libc_fns(pid_t pid, struct target_maps *tm, struct tobj *libc, uint64_t *getpid_at,
		    uint64_t *atoi_at)
{
	struct linkmap lm;
	const struct lobj *l;
	int rc = linkmap_read(pid, &lm);

	if (rc)
		return rc;
	l = linkmap_find(&lm, "libc.so.6");
	rc = !l ? -ENOENT : tobj_at(pid, tm, l->bias, libc);
	if (!rc)
		rc = tobj_sym(pid, libc, "getpid", getpid_at) || tobj_sym(pid, libc, "atoi", atoi_at);
	linkmap_free(&lm);
	return rc;
}

/* Stop the child and make ready for calls: the trampoline after libc's
 * code. *t: its main thread. */
static int hold(pid_t pid, struct stopset *s, struct target_maps *tm, struct tobj *libc,
		struct sthread **t, uint64_t *getpid_at, uint64_t *atoi_at, char *err, size_t len)
{
	uint64_t at;
	int rc = stop_all(s, pid, err, len);

	*t = NULL;
	if (rc)
		return rc;
	for (int i = 0; i < s->n; i++)
		if (s->t[i].tid == pid)
			*t = &s->t[i];
	if ((rc = tmaps_read(pid, tm)) != 0 || (rc = libc_fns(pid, tm, libc, getpid_at, atoi_at)))
		return rc;
	rc = tobj_code_tail(pid, libc, rc_trampoline_size(), &at);
	return rc ? rc : rc_place_trampoline(s, at, err, len);
}

static pid_t start_child(void)
{
	pid_t pid;

	if (pipe(go) || pipe(report))
		return -1;
	pid = fork();
	if (pid == 0)
		child();
	close(go[0]);
	close(report[1]);
	/* Wait until it has its second thread and sits in read(2). */
	for (int i = 0; i < 10000 && !in_read(pid); i++)
		usleep(1000);
	return pid;
}

/* Let the child go on: it reports what its read(2) returned and how
 * many SIGUSR1 it handled (after waiting for one if signalled), and
 * exits. 0: it exited normally. */
static int finish_child(pid_t pid, int signalled, int vals[2])
{
	int st = -1;

	vals[0] = vals[1] = -1;
	if (write(go[1], signalled ? "s" : "x", 1) != 1)
		return -1;
	if (read(report[0], vals, 2 * sizeof(int)) != 2 * sizeof(int))
		vals[0] = vals[1] = -1;
	waitpid(pid, &st, 0);
	close(go[1]);
	close(report[0]);
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : st;
}

int main(void)
{
	struct target_maps tm;
	struct tobj libc;
	struct stopset s;
	struct linkmap lm;
	char err[400] = "";
	uint64_t a = 0, g = 0, ret = 0;
	pid_t pid;
	int rc, vals[2] = { -1, -1 };

	/* Our own process: the link map's libc, its symbol where dlsym says. */
	rc = linkmap_read(getpid(), &lm);
	ok(!rc && lm.ldbase == getauxval(AT_BASE) && linkmap_find(&lm, "libc.so.6"),
	   "the link map of this process has libc.so.6, the loader at AT_BASE (%d)", rc);
	if (!rc)
		linkmap_free(&lm);
	rc = tmaps_read(getpid(), &tm) || libc_fns(getpid(), &tm, &libc, &g, &a);
	ok(!rc && g == (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "getpid"),
	   "getpid's address from libc's symbol table is dlsym's");
	tmaps_free(&tm);

	pid = start_child();
	rc = stop_all(&s, pid, err, sizeof(err));
	ok(!rc && s.n == 2, "stop_all holds both threads of the child (%d, %s)", s.n, err);
	release_all(&s);
	rc = hold(pid, &s, &tm, &libc, &(struct sthread *){ NULL }, &g, &a, err, sizeof(err));
	ok(!rc && s.tramp, "the return trampoline is placed after libc's code (%d %s)", rc, err);
	if (!rc) {
		struct user_regs_struct before, expect;
		struct sthread *t = NULL;
		uint64_t args[1] = { RC_BLOB(0) };

		for (int i = 0; i < s.n; i++)
			if (s.t[i].tid == pid)
				t = &s.t[i];
		ok(t && (long long)t->regs.orig_rax == 0 /* read */,
		   "the main thread was stopped in read(2) (orig_rax %lld)",
		   t ? (long long)t->regs.orig_rax : -2LL);
		if (t) {
			before = t->regs;
			rc = remote_call(&s, t, 1, g, NULL, 0, NULL, 0, &ret, err, sizeof(err));
			ok(!rc && (pid_t)ret == pid, "getpid() called in the child returns its pid (%lld)",
			   (long long)ret);
			rc = remote_call(&s, t, 1, a, args, 1, "4242", 5, &ret, err, sizeof(err));
			ok(!rc && ret == 4242, "atoi(a string put on its stack) returns 4242 (%lld, %s)",
			   (long long)ret, err);
			ptrace(PTRACE_GETREGS, t->tid, NULL, &t->regs);
			/* As the kernel restarts an interrupted read(2). */
			expect = before;
			expect.rip -= 2;
			expect.rax = before.orig_rax;
			expect.orig_rax = (unsigned long long)-1;
			ok(!memcmp(&expect, &t->regs, sizeof(expect)),
			   "its registers are as they were, read(2) to be made again (rip %#llx vs %#llx)",
			   (unsigned long long)t->regs.rip, (unsigned long long)expect.rip);
		}
		/* A signal sent while it is held arrives after the release. */
		kill(pid, SIGUSR1);
		rc_remove_trampoline(&s);
	}
	release_all(&s);
	tmaps_free(&tm);
	rc = finish_child(pid, 1, vals);
	ok(vals[0] == 1, "its read(2) was restarted and returned the byte (%d)", vals[0]);
	ok(vals[1] == 1, "the SIGUSR1 sent while it was stopped was handled once (%d)", vals[1]);
	ok(rc == 0, "the child exits normally (status %#x)", rc);

	/* The tracer killed in the middle of a call (usleep(300 ms) in the
	 * child): the child comes back through the trampoline by itself. */
	for (int round = 0; round < 3; round++) {
		static const unsigned kill_ms[] = { 5, 100, 250 };
		pid_t tracer;

		pid = start_child();
		tracer = fork();
		if (tracer == 0) {
			struct sthread *t;
			uint64_t us, arg[1] = { 300000 };

			if (hold(pid, &s, &tm, &libc, &t, &g, &a, err, sizeof(err)) || !t ||
			    tobj_sym(pid, &libc, "usleep", &us))
				_exit(3);
			remote_call(&s, t, 0, us, arg, 1, NULL, 0, &ret, err, sizeof(err));
			_exit(4);	/* should have been killed first */
		}
		usleep(kill_ms[round] * 1000);
		kill(tracer, SIGKILL);
		waitpid(tracer, &rc, 0);
		rc = finish_child(pid, 0, vals);
		ok(rc == 0 && vals[0] == 1,
		   "a tracer killed %u ms into a call: the child resumes its read(2) and exits normally "
		   "(status %#x, read %d)", kill_ms[round], rc, vals[0]);
	}

	/* A pid that is gone: an error, no hang. */
	rc = stop_all(&s, pid, err, sizeof(err));
	ok(rc == -ESRCH, "stop_all of a pid that has exited: ESRCH (%d: %s)", rc, err);
	release_all(&s);
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
