// SPDX-License-Identifier: GPL-2.0
/*
 * Calling a function inside a stopped thread of another process (x86-64
 * System V ABI): the arguments in registers, strings in a blob on the
 * thread's stack below its red zone, and a return address of 0, so that
 * the return faults (SIGSEGV at rip 0), which we catch before the process
 * sees it. Afterwards every register (general, and the FPU/SSE/AVX state
 * through NT_X86_XSTATE) and every byte of stack the call may have used
 * are put back as they were.
 *
 * A thread stopped in a system call has orig_rax set and rax -ERESTART...:
 * the call runs with orig_rax = -1 (no restart of anything), and the
 * registers put back afterwards make the kernel restart the interrupted
 * call when the thread resumes, as if nothing had happened.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject.h"

#define RED_ZONE	128
/* The stack below the thread's sp saved and put back: what the called
 * code may touch (dlopen with the client's constructor, a connect and
 * hello to the daemon). */
#define SAVE_BELOW	(64U << 10)
#define XSTATE_MAX	16384
/* A call that has not returned after this long is not waited for. */
#define CALL_TIMEOUT_MS	30000

static int mem_fd(pid_t pid, int wr)
{
	char p[64];

	snprintf(p, sizeof(p), "/proc/%d/mem", (int)pid);
	return open(p, (wr ? O_RDWR : O_RDONLY) | O_CLOEXEC);
}

int remote_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	int fd = mem_fd(pid, 0);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = pread(fd, buf, len, (off_t)addr);
	close(fd);
	return n == (ssize_t)len ? 0 : -EIO;
}

/* Save the stack below top: at once, or else page by page downwards while
 * readable (the bottom of a stack may be unmapped or a guard page). */
static size_t save_stack(int fd, uint64_t top, uint8_t *buf)
{
	size_t got = 0;

	if (pread(fd, buf, SAVE_BELOW, (off_t)(top - SAVE_BELOW)) == (ssize_t)SAVE_BELOW)
		return SAVE_BELOW;
	while (got < SAVE_BELOW) {
		uint64_t hi = top - got, lo = (hi - 1) & ~4095ULL;
		size_t chunk = (size_t)(hi - lo);

		if (got + chunk > SAVE_BELOW)
			chunk = SAVE_BELOW - got, lo = hi - chunk;
		if (pread(fd, buf + SAVE_BELOW - got - chunk, chunk, (off_t)lo) != (ssize_t)chunk)
			break;
		got += chunk;
	}
	return got;
}

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int wait_call(pid_t pid, struct stopset *others, struct sthread *t,
		     struct user_regs_struct *out, int *stp, int *sigp, uint64_t deadline,
		     uint64_t next_look, char *err, size_t errlen);

static void on_alarm(int sig)
{
	(void)sig;	/* only to interrupt waitpid */
}

/* Run the thread until the call returns (rip 0). 0, or -errno with err.
 * waitpid blocks (the return wakes us at once); a 10 ms interval timer
 * interrupts it to look at the deadline and at lock waits. */
/* Is the thread waiting on a futex (a lock)? */
static int in_futex_wait(pid_t pid, pid_t tid)
{
	char p[80], buf[32];
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = 0;
	return !strncmp(buf, "202 ", 4);	/* __NR_futex */
}

static int run_call(pid_t pid, struct stopset *others, struct sthread *t,
		    struct user_regs_struct *out, char *err, size_t errlen)
{
	uint64_t start = mono_ms(), deadline = start + CALL_TIMEOUT_MS, next_look = start + 50;
	struct itimerval tick = { { 0, 10000 }, { 0, 10000 } }, old_tick;
	struct sigaction sa, old_sa;
	int st = 0, sig = 0, rc;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;	/* no SA_RESTART: waitpid returns EINTR */
	sigaction(SIGALRM, &sa, &old_sa);
	setitimer(ITIMER_REAL, &tick, &old_tick);
	rc = wait_call(pid, others, t, out, &st, &sig, deadline, next_look, err, errlen);
	setitimer(ITIMER_REAL, &old_tick, NULL);
	sigaction(SIGALRM, &old_sa, NULL);
	return rc;
}

static int wait_call(pid_t pid, struct stopset *others, struct sthread *t,
		     struct user_regs_struct *out, int *stp, int *sigp, uint64_t deadline,
		     uint64_t next_look, char *err, size_t errlen)
{
	int st = *stp, sig = *sigp;

	for (;;) {
		pid_t r;

		if (ptrace(PTRACE_CONT, t->tid, NULL, (void *)(long)sig)) {
			snprintf(err, errlen, "resuming thread %d: %s", (int)t->tid, strerror(errno));
			return -errno;
		}
		sig = 0;
		while ((r = waitpid(t->tid, &st, __WALL)) < 0 && errno == EINTR) {
			if (mono_ms() > deadline) {
				snprintf(err, errlen, "the call in pid %d did not return within %d s",
					 (int)pid, CALL_TIMEOUT_MS / 1000);
				ptrace(PTRACE_INTERRUPT, t->tid, NULL, NULL);
				waitpid(t->tid, &st, __WALL);
				return -ETIMEDOUT;
			}
			/* Waiting for a lock that a stopped thread holds (an arena
			 * it shares with us): let the others run a moment. */
			if (others && mono_ms() >= next_look) {
				next_look = mono_ms() + 20;
				if (in_futex_wait(pid, t->tid))
					run_others_briefly(others, t->tid, 2000);
			}
		}
		if (r < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
			snprintf(err, errlen, "pid %d ended during the call", (int)pid);
			return -ESRCH;
		}
		if (!WIFSTOPPED(st))
			continue;
		if ((st >> 16) != 0)
			continue;	/* a group-stop or event: resume */
		if (ptrace(PTRACE_GETREGS, t->tid, NULL, out))
			return -errno;
		if ((WSTOPSIG(st) == SIGSEGV || WSTOPSIG(st) == SIGBUS) && out->rip == 0)
			return 0;	/* returned to our address 0 */
		if (WSTOPSIG(st) == SIGSEGV || WSTOPSIG(st) == SIGBUS || WSTOPSIG(st) == SIGILL ||
		    WSTOPSIG(st) == SIGFPE || WSTOPSIG(st) == SIGABRT) {
			siginfo_t si;

			if (!ptrace(PTRACE_GETSIGINFO, t->tid, NULL, &si) && si.si_code > 0) {
				snprintf(err, errlen, "the call in pid %d faulted (signal %d at %#llx)",
					 (int)pid, WSTOPSIG(st), (unsigned long long)out->rip);
				return -EFAULT;
			}
		}
		/* Someone else's signal: given back after the release. */
		stopset_note_signal(t, WSTOPSIG(st));
	}
}

int remote_call(pid_t pid, struct stopset *others, struct sthread *t, uint64_t fn, const uint64_t *args, int nargs,
		const void *blob, size_t bloblen, uint64_t *ret, char *err, size_t errlen)
{
	struct user_regs_struct saved = t->regs, r, out;
	uint8_t *stack = NULL, *xs = NULL;
	struct iovec xiov;
	uint64_t sp, blob_at, zero = 0;
	size_t saved_len = 0;
	int fd, rc = 0, have_xs;

	if (nargs > 6)
		return -EINVAL;
	fd = mem_fd(pid, 1);
	stack = malloc(SAVE_BELOW);
	xs = malloc(XSTATE_MAX);
	if (fd < 0 || !stack || !xs) {
		snprintf(err, errlen, "cannot open /proc/%d/mem: %s", (int)pid, strerror(errno));
		rc = -EIO;
		goto out;
	}
	xiov.iov_base = xs;
	xiov.iov_len = XSTATE_MAX;
	have_xs = !ptrace(PTRACE_GETREGSET, t->tid, (void *)NT_X86_XSTATE, &xiov);
	saved_len = save_stack(fd, saved.rsp, stack);
	blob_at = (saved.rsp - RED_ZONE - 64 - bloblen) & ~15ULL;
	sp = blob_at - 8;	/* as right after a call: rsp + 8 aligned to 16 */
	if (saved.rsp - sp + 256 > saved_len) {
		snprintf(err, errlen, "the stack of thread %d is not readable", (int)t->tid);
		rc = -EFAULT;
		goto out;
	}
	if ((bloblen && pwrite(fd, blob, bloblen, (off_t)blob_at) != (ssize_t)bloblen) ||
	    pwrite(fd, &zero, 8, (off_t)sp) != 8) {
		snprintf(err, errlen, "cannot write the stack of pid %d: %s", (int)pid, strerror(errno));
		rc = -EIO;
		goto restore_mem;
	}
	r = saved;
	r.rip = fn;
	r.rsp = sp;
	r.rax = 0;
	r.orig_rax = (unsigned long long)-1;	/* not in a system call */
	r.eflags &= ~0x400ULL;			/* DF clear, as the ABI wants */
	for (int i = 0; i < nargs; i++) {
		uint64_t a = (args[i] >> 48) == 0xb10b ? blob_at + (args[i] & 0xffffffffffffULL) : args[i];

		switch (i) {
		case 0: r.rdi = a; break;
		case 1: r.rsi = a; break;
		case 2: r.rdx = a; break;
		case 3: r.rcx = a; break;
		case 4: r.r8 = a; break;
		case 5: r.r9 = a; break;
		}
	}
	if (ptrace(PTRACE_SETREGS, t->tid, NULL, &r)) {
		snprintf(err, errlen, "setting the registers of thread %d: %s", (int)t->tid, strerror(errno));
		rc = -errno;
		goto restore_mem;
	}
	rc = run_call(pid, others, t, &out, err, errlen);
	if (!rc)
		*ret = out.rax;
	if (ptrace(PTRACE_SETREGS, t->tid, NULL, &saved) && !rc) {
		snprintf(err, errlen, "restoring the registers of thread %d: %s", (int)t->tid,
			 strerror(errno));
		rc = -errno;
	}
	if (have_xs)
		ptrace(PTRACE_SETREGSET, t->tid, (void *)NT_X86_XSTATE, &xiov);
restore_mem:
	if (saved_len && pwrite(fd, stack + SAVE_BELOW - saved_len, saved_len,
				(off_t)(saved.rsp - saved_len)) != (ssize_t)saved_len && !rc) {
		snprintf(err, errlen, "restoring the stack of thread %d: %s", (int)t->tid, strerror(errno));
		rc = -EIO;
	}
out:
	if (fd >= 0)
		close(fd);
	free(stack);
	free(xs);
	return rc;
}
