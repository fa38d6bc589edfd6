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

int main(void)
{
	struct target_maps tm;
	const struct tmap *libc;
	struct stopset s;
	char err[400] = "";
	uint64_t bias, a, sz, ret = 0;
	pid_t pid;
	int rc, st, vals[2] = { -1, -1 };

	/* Our own process: the symbol found in the file is where dlsym says. */
	rc = tmaps_read(getpid(), &tm);
	libc = rc ? NULL : tmaps_find(&tm, "/libc.so.6");
	ok(libc != NULL, "maps of this process name libc.so.6");
	if (libc) {
		rc = tmaps_bias(getpid(), &tm, libc, &bias) ||
		     target_sym(getpid(), libc->path, bias, "getpid", &a, &sz);
		ok(!rc && a == (uint64_t)(uintptr_t)dlsym(RTLD_DEFAULT, "getpid") && sz > 0,
		   "getpid's address from libc's symbol table is dlsym's");
	}
	tmaps_free(&tm);

	if (pipe(go) || pipe(report))
		return 1;
	pid = fork();
	if (pid == 0)
		child();
	close(go[0]);
	close(report[1]);
	/* Wait until it has its second thread and sits in read(2). */
	for (int i = 0; i < 10000 && !in_read(pid); i++)
		usleep(1000);

	rc = stop_all(&s, pid, err, sizeof(err));
	ok(!rc && s.n == 2, "stop_all holds both threads of the child (%d, %s)", s.n, err);
	if (!rc) {
		struct user_regs_struct before;
		struct sthread *t = NULL;
		uint64_t atoi_at = 0, getpid_at = 0, args[1] = { RC_BLOB(0) };

		for (int i = 0; i < s.n; i++)
			if (s.t[i].tid == pid)
				t = &s.t[i];
		rc = tmaps_read(pid, &tm);
		libc = rc ? NULL : tmaps_find(&tm, "/libc.so.6");
		if (libc && !tmaps_bias(pid, &tm, libc, &bias)) {
			target_sym(pid, libc->path, bias, "atoi", &atoi_at, NULL);
			target_sym(pid, libc->path, bias, "getpid", &getpid_at, NULL);
		}
		tmaps_free(&tm);
		ok(t && (long long)t->regs.orig_rax == 0 /* read */,
		   "the main thread was stopped in read(2) (orig_rax %lld)",
		   t ? (long long)t->regs.orig_rax : -2LL);
		if (t && atoi_at && getpid_at) {
			before = t->regs;
			rc = remote_call(pid, &s, t, getpid_at, NULL, 0, NULL, 0, &ret, err, sizeof(err));
			ok(!rc && (pid_t)ret == pid, "getpid() called in the child returns its pid (%lld)",
			   (long long)ret);
			rc = remote_call(pid, &s, t, atoi_at, args, 1, "4242", 5, &ret, err,
					 sizeof(err));
			ok(!rc && ret == 4242, "atoi(a string put on its stack) returns 4242 (%lld, %s)",
			   (long long)ret, err);
			ptrace(PTRACE_GETREGS, t->tid, NULL, &t->regs);
			ok(!memcmp(&before, &t->regs, sizeof(before)),
			   "its registers are as they were (rip, rsp, orig_rax, rax included)");
		}
		/* A signal sent while it is held arrives after the release. */
		kill(pid, SIGUSR1);
		release_all(&s);
	}
	if (write(go[1], "x", 1) != 1)
		return 1;
	if (read(report[0], vals, sizeof(vals)) != sizeof(vals))
		vals[0] = vals[1] = -1;
	ok(vals[0] == 1, "its read(2) was restarted and returned the byte (%d)", vals[0]);
	ok(vals[1] == 1, "the SIGUSR1 sent while it was stopped was handled once (%d)", vals[1]);
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child exits normally (status %#x)", st);

	/* A pid that is gone: an error, no hang. */
	rc = stop_all(&s, pid, err, sizeof(err));
	ok(rc == -ESRCH, "stop_all of a pid that has exited: ESRCH (%d: %s)", rc, err);
	release_all(&s);
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
