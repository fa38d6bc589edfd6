// SPDX-License-Identifier: GPL-2.0
/*
 * Calling a function inside a stopped thread of another process: the
 * arguments in registers, strings in a blob on the thread's stack below
 * its red zone (the architecture's parts are in arch/<arch>.c, arch.h).
 *
 * The call returns into a trampoline of ours, and the trampoline puts the
 * thread back as it was by itself: below the return address the stack
 * holds a signal frame (rt_sigreturn's) made of the thread's registers,
 * its floating-point and vector state, its signal mask, and the trampoline makes that
 * system call. So whatever happens to heapprofctl (killed by SIGKILL
 * halfway, or giving up on a call that does not return), the thread
 * resumes where it was; nothing depends on the tracer being there to
 * catch the return.
 *
 * While heapprofctl is there, the thread runs under PTRACE_SYSCALL: the
 * trampoline's rt_sigreturn is seen at its entry (the call's result read
 * there), skipped, and the registers and extended state are put back through
 * ptrace exactly, as is every byte of stack the call may have used.
 *
 * A thread stopped in a system call gets back what the kernel would have
 * given it had no call been made (arch_resume_state).
 *
 * Nothing is written into the process once it is not the one that was
 * stopped: an exec (PTRACE_O_TRACEEXEC) or new credentials seen at any
 * step end the attach there, with no register or byte written.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
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
#include <linux/ptrace.h>

#include "arch.h"
#include "inject.h"

/* The stack below the thread's sp saved and put back: what the called
 * code may touch (dlopen with the client's constructor, a connect and
 * hello to the daemon). */
#define SAVE_BELOW	(64U << 10)
/* A call that has not returned after this long is left to finish alone. */
#define CALL_TIMEOUT_MS	10000
/* While a call has not returned, the other threads run this long in each
 * period: a lock one of them holds (futex or spin) is let go. */
#define OTHERS_EVERY_MS	20
#define OTHERS_RUN_US	2000

int (*inject_cancelled)(void);

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

int remote_str(pid_t pid, uint64_t addr, char *buf, size_t len)
{
	int fd = mem_fd(pid, 0);
	size_t got = 0;

	buf[0] = 0;
	if (fd < 0)
		return -errno;
	while (got < len - 1) {
		size_t chunk = 4096 - ((addr + got) & 4095);
		ssize_t n;

		if (chunk > len - 1 - got)
			chunk = len - 1 - got;
		n = pread(fd, buf + got, chunk, (off_t)(addr + got));
		if (n <= 0)
			break;
		if (memchr(buf + got, 0, (size_t)n)) {
			got += (size_t)n;
			break;
		}
		got += (size_t)n;
	}
	close(fd);
	buf[got < len ? got : len - 1] = 0;
	buf[len - 1] = 0;
	return got ? 0 : -EIO;
}

int rc_place_trampoline(struct stopset *s, uint64_t at, char *err, size_t errlen)
{
	int fd = mem_fd(s->pid, 1);

	if (fd < 0 || pread(fd, s->tramp_saved, arch_tramp_size, (off_t)at) !=
		       (ssize_t)arch_tramp_size ||
	    pwrite(fd, arch_tramp_code, arch_tramp_size, (off_t)at) != (ssize_t)arch_tramp_size) {
		snprintf(err, errlen, "cannot write pid %d's memory: %s", (int)s->pid, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -EIO;
	}
	close(fd);
	s->tramp = at;
	return 0;
}

void rc_remove_trampoline(struct stopset *s)
{
	int fd;

	/* A call left running still returns through it; after an exec it
	 * is not there to remove. */
	if (!s->tramp || s->abandoned || s->changed)
		return;
	fd = mem_fd(s->pid, 1);
	if (fd >= 0) {
		if (pwrite(fd, s->tramp_saved, arch_tramp_size, (off_t)s->tramp) < 0)
			s->tramp = 0;
		close(fd);
	}
	s->tramp = 0;
}

size_t rc_trampoline_size(void)
{
	return arch_tramp_size;
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

static int fail(char *err, size_t errlen, int rc, const char *fmt, pid_t pid)
{
	snprintf(err, errlen, fmt, (int)pid);
	return rc;
}

static void on_alarm(int sig)
{
	(void)sig;	/* only to interrupt waitpid */
}

enum { CALLING, RETURNING };

/*
 * Run the thread until its call is back in the trampoline and the
 * trampoline's rt_sigreturn skipped. 0 with *result; -ECANCELED or
 * -ETIMEDOUT: left to finish alone (s->abandoned); -ESRCH: the process
 * ended or is another one now (s->changed); -EFAULT: the call faulted.
 */
static int wait_return(struct stopset *s, struct sthread *t, int others_run, uint64_t *result,
		       char *err, size_t errlen)
{
	uint64_t start = mono_ms(), next_others = start + OTHERS_EVERY_MS;
	int sig = 0, phase = CALLING;

	for (;;) {
		struct user_regs_struct r;
		struct ptrace_syscall_info si;
		int st;
		pid_t w;

		if (ptrace(PTRACE_SYSCALL, t->tid, NULL, (void *)(long)sig)) {
			snprintf(err, errlen, "resuming thread %d: %s", (int)t->tid, strerror(errno));
			s->changed = 1;
			return -ESRCH;
		}
		t->stopped = 0;
		sig = 0;
		while ((w = waitpid(t->tid, &st, __WALL)) < 0 && errno == EINTR) {
			if (inject_cancelled && inject_cancelled()) {
				s->abandoned = 1;
				return fail(err, errlen, -ECANCELED, "interrupted: pid %d was let go; "
					    "the call in it finishes on its own", s->pid);
			}
			if (mono_ms() - start > CALL_TIMEOUT_MS) {
				s->abandoned = 1;
				snprintf(err, errlen, "the call in pid %d did not return within %d s: it "
					 "was let go and finishes the call on its own", (int)s->pid,
					 CALL_TIMEOUT_MS / 1000);
				return -ETIMEDOUT;
			}
			/* A lock another thread holds (a futex, or a spin lock
			 * of the program's own allocator): let them run. */
			if (others_run && mono_ms() >= next_others) {
				run_others_briefly(s, t->tid, OTHERS_RUN_US);
				next_others = mono_ms() + OTHERS_EVERY_MS;
				if (s->changed)
					return fail(err, errlen, -ESRCH, "pid %d executed another program "
						    "during the attach: let go, nothing written", s->pid);
			}
		}
		if (w < 0 || WIFEXITED(st) || WIFSIGNALED(st)) {
			s->changed = 1;
			return fail(err, errlen, -ESRCH, "pid %d ended (or this thread did) during "
				    "the call", s->pid);
		}
		if (!WIFSTOPPED(st))
			continue;
		t->stopped = 1;
		if ((st >> 16) == PTRACE_EVENT_EXEC) {
			s->changed = 1;
			return fail(err, errlen, -ESRCH, "pid %d executed another program during the "
				    "call: let go, nothing written", s->pid);
		}
		if ((st >> 16) != 0)
			continue;	/* a group-stop or our interrupt: resume */
		if (WSTOPSIG(st) != (SIGTRAP | 0x80)) {
			siginfo_t inf;
			int sg = WSTOPSIG(st);

			if ((sg == SIGSEGV || sg == SIGBUS || sg == SIGILL || sg == SIGFPE ||
			     sg == SIGTRAP) &&
			    !ptrace(PTRACE_GETSIGINFO, t->tid, NULL, &inf) && inf.si_code > 0) {
				if (arch_get_regs(t->tid, &r))
					memset(&r, 0, sizeof(r));
				snprintf(err, errlen, "the call in pid %d faulted (signal %d at %#llx)",
					 (int)s->pid, sg, (unsigned long long)arch_regs_pc(&r));
				return -EFAULT;
			}
			/* Someone else's signal: given back after the release. */
			stopset_note_signal(t, sg);
			continue;
		}
		if (ptrace(PTRACE_GET_SYSCALL_INFO, t->tid, (void *)sizeof(si), &si) <= 0)
			continue;
		if (phase == RETURNING && si.op == PTRACE_SYSCALL_INFO_EXIT)
			return 0;
		if (phase == CALLING && si.op == PTRACE_SYSCALL_INFO_ENTRY &&
		    (long)si.entry.nr == arch_nr_rt_sigreturn &&
		    si.instruction_pointer == s->tramp + arch_tramp_after_syscall) {
			if (!arch_take_result(t->tid, result))	/* and skip it */
				phase = RETURNING;
		}
	}
}

static struct itimerval old_tick;
static struct sigaction old_alarm;
static int ticking;

void rc_tick_start(void)
{
	struct itimerval tick = { { 0, 10000 }, { 0, 10000 } };
	struct sigaction sa;

	if (ticking++)
		return;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;	/* no SA_RESTART: a blocked call returns EINTR */
	sigaction(SIGALRM, &sa, &old_alarm);
	setitimer(ITIMER_REAL, &tick, &old_tick);
}

void rc_tick_stop(void)
{
	if (!ticking || --ticking)
		return;
	setitimer(ITIMER_REAL, &old_tick, NULL);
	sigaction(SIGALRM, &old_alarm, NULL);
}

static int run_call(struct stopset *s, struct sthread *t, int others_run, uint64_t *result,
		    char *err, size_t errlen)
{
	int rc;

	rc_tick_start();
	rc = wait_return(s, t, others_run, result, err, errlen);
	rc_tick_stop();
	return rc;
}

int remote_call(struct stopset *s, struct sthread *t, int others_run, uint64_t fn,
		const uint64_t *args, int nargs, const void *blob, size_t bloblen, uint64_t *ret,
		char *err, size_t errlen)
{
	struct user_regs_struct saved, resume, r;
	struct arch_fp *fp = NULL;
	struct target_id now;
	uint8_t *stack = NULL;
	uint64_t blob_at, sp, mask = 0, a[6];
	size_t saved_len = 0;
	int fd = -1, rc = 0;

	if (nargs > 6 || !s->tramp)
		return -EINVAL;
	if (s->changed || s->abandoned)
		return fail(err, errlen, -ESRCH, "pid %d is not the process that was stopped", s->pid);
	if (target_id_read(s->pid, &now) || !target_id_same(&now, &s->id)) {
		s->changed = 1;
		return fail(err, errlen, -ESRCH, "pid %d changed (another program, or other "
			    "credentials) while stopped: let go, nothing written", s->pid);
	}
	if (arch_get_regs(t->tid, &saved) ||
	    ptrace(PTRACE_GETSIGMASK, t->tid, (void *)sizeof(mask), &mask)) {
		snprintf(err, errlen, "reading thread %d: %s", (int)t->tid, strerror(errno));
		return -errno;
	}
	arch_resume_state(&saved, &resume);
	/* Opened now, the file stays bound to this memory: after an exec it
	 * writes nothing anywhere. */
	fd = mem_fd(s->pid, 1);
	stack = malloc(SAVE_BELOW);
	if (fd < 0 || !stack) {
		snprintf(err, errlen, "cannot open /proc/%d/mem: %s", (int)s->pid, strerror(errno));
		rc = -EIO;
		goto out;
	}
	if ((rc = arch_fp_save(t->tid, &fp)) != 0) {
		snprintf(err, errlen, "reading thread %d's FPU state: %s", (int)t->tid, strerror(-rc));
		goto out;
	}
	saved_len = save_stack(fd, arch_regs_sp(&saved), stack);
	blob_at = (arch_regs_sp(&saved) - arch_red_zone - bloblen) & ~15ULL;
	sp = arch_frame_sp(blob_at, fp);
	if (arch_regs_sp(&saved) - sp + 4096 > saved_len) {
		snprintf(err, errlen, "the stack of thread %d is not readable", (int)t->tid);
		rc = -EFAULT;
		goto out;
	}
	if ((bloblen && pwrite(fd, blob, bloblen, (off_t)blob_at) != (ssize_t)bloblen) ||
	    arch_write_frame(fd, sp, blob_at, s->tramp, &resume, fp, mask)) {
		snprintf(err, errlen, "cannot write the stack of pid %d: %s", (int)s->pid,
			 strerror(errno));
		rc = -EIO;
		goto restore_mem;
	}
	for (int i = 0; i < nargs; i++)
		a[i] = (args[i] >> 48) == 0xb10b ? blob_at + (args[i] & 0xffffffffffffULL) : args[i];
	r = saved;
	arch_call_regs(&r, fn, sp, s->tramp, a, nargs);
	if (arch_set_regs(t->tid, &r)) {
		snprintf(err, errlen, "setting the registers of thread %d: %s", (int)t->tid,
			 strerror(errno));
		rc = -errno;
		goto restore_mem;
	}
	/* From here on the thread comes back by itself, whatever we do. */
	rc = run_call(s, t, others_run, ret, err, errlen);
	if (s->abandoned || s->changed)
		goto out;	/* nothing is written: the frame is still in use */
	if (target_id_read(s->pid, &now) || !target_id_same(&now, &s->id)) {
		s->changed = 1;
		rc = fail(err, errlen, -ESRCH, "pid %d changed (another program, or other "
			  "credentials) during the call: let go, nothing written", s->pid);
		goto out;
	}
	if (arch_set_regs(t->tid, &resume) && !rc) {
		snprintf(err, errlen, "restoring the registers of thread %d: %s", (int)t->tid,
			 strerror(errno));
		rc = -errno;
	}
	arch_fp_restore(t->tid, fp);
	t->regs = resume;
restore_mem:
	if (saved_len && pwrite(fd, stack + SAVE_BELOW - saved_len, saved_len,
				(off_t)(arch_regs_sp(&saved) - saved_len)) != (ssize_t)saved_len && !rc) {
		snprintf(err, errlen, "restoring the stack of thread %d: %s", (int)t->tid,
			 strerror(errno));
		rc = -EIO;
	}
out:
	if (fd >= 0)
		close(fd);
	free(stack);
	arch_fp_free(fp);
	return rc;
}
