// SPDX-License-Identifier: GPL-2.0
/*
 * Calling a function inside a stopped thread of another process (x86-64
 * System V ABI): the arguments in registers, strings in a blob on the
 * thread's stack below its red zone.
 *
 * The call returns into a trampoline of ours, and the trampoline puts the
 * thread back as it was by itself: below the return address the stack
 * holds a signal frame (rt_sigreturn's) made of the thread's registers,
 * its FPU/SSE/AVX state, its signal mask, and the trampoline makes that
 * system call. So whatever happens to heapprofctl (killed by SIGKILL
 * halfway, or giving up on a call that does not return), the thread
 * resumes where it was; nothing depends on the tracer being there to
 * catch the return.
 *
 * While heapprofctl is there, the thread runs under PTRACE_SYSCALL: the
 * trampoline's rt_sigreturn is seen at its entry (the call's result is in
 * rdi), skipped, and the registers and extended state are put back through
 * ptrace exactly, as is every byte of stack the call may have used.
 *
 * A thread stopped in a system call (orig_rax set, rax -ERESTART...) gets
 * back what the kernel would have given it had no call been made: the
 * call again (rip on the syscall instruction, rax its number), or
 * restart_syscall for one with a restart block. (Only when the trampoline
 * does it alone does a call with a restart block, a nanosleep, say, end
 * with EINTR: rt_sigreturn forgets the block.)
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

#include "inject.h"

#define RED_ZONE	128
/* The stack below the thread's sp saved and put back: what the called
 * code may touch (dlopen with the client's constructor, a connect and
 * hello to the daemon). */
#define SAVE_BELOW	(64U << 10)
#define XSTATE_MAX	16384
/* A call that has not returned after this long is left to finish alone. */
#define CALL_TIMEOUT_MS	10000
/* While a call has not returned, the other threads run this long in each
 * period: a lock one of them holds (futex or spin) is let go. */
#define OTHERS_EVERY_MS	20
#define OTHERS_RUN_US	2000

/* The trampoline: the call's result to rdi, then rt_sigreturn; a skipped
 * rt_sigreturn (heapprofctl's, below) loops back to make it again. */
static const uint8_t tramp_code[] = {
	0x48, 0x89, 0xc7,		/* mov %rax,%rdi */
	0xb8, 0x0f, 0x00, 0x00, 0x00,	/* mov $15,%eax (rt_sigreturn) */
	0x0f, 0x05,			/* syscall */
	0xeb, 0xf7,			/* jmp to the mov $15 */
};
#define TRAMP_AFTER_SYSCALL	10	/* rip at its system call's stops */
#define NR_RT_SIGRETURN		15
#define NR_RESTART_SYSCALL	219

/* The kernel's x86-64 signal frame (arch/x86/include/asm/sigframe.h). */
struct k_sigcontext {
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t di, si, bp, bx, dx, ax, cx, sp, ip, flags;
	uint16_t cs, gs, fs, ss;
	uint64_t err, trapno, oldmask, cr2, fpstate, reserved1[8];
};

struct k_ucontext {
	uint64_t uc_flags, uc_link;
	struct {
		uint64_t ss_sp;
		int32_t ss_flags, pad;
		uint64_t ss_size;
	} uc_stack;
	struct k_sigcontext uc_mcontext;
	uint64_t uc_sigmask;
};

struct k_rt_sigframe {
	uint64_t pretcode;
	struct k_ucontext uc;
	uint8_t info[128];
};
_Static_assert(sizeof(struct k_rt_sigframe) == 440, "x86-64 rt_sigframe");

#define UC_FP_XSTATE		0x1
#define UC_SIGCONTEXT_SS	0x2
#define UC_STRICT_RESTORE_SS	0x4
/* An ss_flags sigaltstack refuses: rt_sigreturn then leaves the thread's
 * alternate stack as it is (it ignores that error), which we cannot read. */
#define SS_FLAGS_KEEP		3
#define FX_SW_OFF		464	/* struct _fpx_sw_bytes in the fxsave area */
#define FP_XSTATE_MAGIC1	0x46505853U
#define FP_XSTATE_MAGIC2	0x46505845U

struct fx_sw {
	uint32_t magic1, extended_size;
	uint64_t xfeatures;
	uint32_t xstate_size, padding[7];
};

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

	if (fd < 0 || pread(fd, s->tramp_saved, sizeof(tramp_code), (off_t)at) !=
		       (ssize_t)sizeof(tramp_code) ||
	    pwrite(fd, tramp_code, sizeof(tramp_code), (off_t)at) != (ssize_t)sizeof(tramp_code)) {
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
		if (pwrite(fd, s->tramp_saved, sizeof(tramp_code), (off_t)s->tramp) < 0)
			s->tramp = 0;
		close(fd);
	}
	s->tramp = 0;
}

size_t rc_trampoline_size(void)
{
	return sizeof(tramp_code);
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

/* What the thread would resume with had no call been made (see above). */
static void resume_state(const struct user_regs_struct *in, struct user_regs_struct *r)
{
	*r = *in;
	if ((long long)in->orig_rax < 0)
		return;
	switch ((long long)in->rax) {
	case -512:	/* ERESTARTSYS */
	case -513:	/* ERESTARTNOINTR */
	case -514:	/* ERESTARTNOHAND */
		r->rax = in->orig_rax;
		r->rip -= 2;
		break;
	case -516:	/* ERESTART_RESTARTBLOCK */
		r->rax = NR_RESTART_SYSCALL;
		r->rip -= 2;
		break;
	}
	r->orig_rax = (unsigned long long)-1;
}

/* The extended state as rt_sigreturn reads it: the ptrace regset (the
 * user ABI's layout, its software bytes filled in) and the end marker. */
struct fpbuf {
	uint8_t *xs;
	size_t len;		/* what goes into the frame */
	size_t regset_len;	/* what goes back through ptrace */
	int xstate;
};

static int save_fp(pid_t tid, struct fpbuf *fp)
{
	struct iovec iov = { fp->xs, XSTATE_MAX };
	struct fx_sw sw;

	fp->xstate = 0;
	if (!ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov) && iov.iov_len >= 576) {
		memcpy(&sw, fp->xs + FX_SW_OFF, sizeof(sw));
		fp->regset_len = iov.iov_len;
		if (sw.magic1 == FP_XSTATE_MAGIC1 && sw.xstate_size >= 576 &&
		    sw.xstate_size <= iov.iov_len && sw.xstate_size + 4 <= XSTATE_MAX) {
			uint32_t m2 = FP_XSTATE_MAGIC2;

			memcpy(fp->xs + sw.xstate_size, &m2, 4);
			fp->len = sw.xstate_size + 4;
			fp->xstate = 1;
			return 0;
		}
	}
	/* The legacy fxsave area alone: rt_sigreturn takes it without the
	 * software bytes' magic. */
	if (ptrace(PTRACE_GETFPREGS, tid, NULL, fp->xs))
		return -errno;
	memset(fp->xs + FX_SW_OFF, 0, 512 - FX_SW_OFF);
	fp->len = 512;
	fp->regset_len = 0;
	return 0;
}

static void restore_fp(pid_t tid, struct fpbuf *fp)
{
	struct iovec iov = { fp->xs, fp->regset_len };

	if (fp->regset_len)
		ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &iov);
	else
		ptrace(PTRACE_SETFPREGS, tid, NULL, fp->xs);
}

static void make_frame(struct k_rt_sigframe *f, uint64_t tramp, const struct user_regs_struct *r,
		       uint64_t fpstate, int xstate, uint64_t mask)
{
	struct k_sigcontext *sc = &f->uc.uc_mcontext;

	memset(f, 0, sizeof(*f));
	f->pretcode = tramp;
	f->uc.uc_flags = UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS | (xstate ? UC_FP_XSTATE : 0);
	f->uc.uc_stack.ss_flags = SS_FLAGS_KEEP;
	f->uc.uc_sigmask = mask;
	sc->r8 = r->r8, sc->r9 = r->r9, sc->r10 = r->r10, sc->r11 = r->r11;
	sc->r12 = r->r12, sc->r13 = r->r13, sc->r14 = r->r14, sc->r15 = r->r15;
	sc->di = r->rdi, sc->si = r->rsi, sc->bp = r->rbp, sc->bx = r->rbx;
	sc->dx = r->rdx, sc->ax = r->rax, sc->cx = r->rcx, sc->sp = r->rsp;
	sc->ip = r->rip, sc->flags = r->eflags;
	sc->cs = (uint16_t)r->cs, sc->ss = (uint16_t)r->ss;
	sc->fpstate = fpstate;
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
				ptrace(PTRACE_GETREGS, t->tid, NULL, &r);
				snprintf(err, errlen, "the call in pid %d faulted (signal %d at %#llx)",
					 (int)s->pid, sg, (unsigned long long)r.rip);
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
		    si.entry.nr == NR_RT_SIGRETURN &&
		    si.instruction_pointer == s->tramp + TRAMP_AFTER_SYSCALL) {
			if (ptrace(PTRACE_GETREGS, t->tid, NULL, &r))
				continue;
			*result = r.rdi;
			r.orig_rax = (unsigned long long)-1;	/* skip it */
			if (!ptrace(PTRACE_SETREGS, t->tid, NULL, &r))
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
	struct k_rt_sigframe frame;
	struct fpbuf fp = { 0 };
	struct target_id now;
	uint8_t *stack = NULL;
	uint64_t blob_at, fp_at, sp, mask = 0;
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
	if (ptrace(PTRACE_GETREGS, t->tid, NULL, &saved) ||
	    ptrace(PTRACE_GETSIGMASK, t->tid, (void *)sizeof(mask), &mask)) {
		snprintf(err, errlen, "reading thread %d: %s", (int)t->tid, strerror(errno));
		return -errno;
	}
	resume_state(&saved, &resume);
	/* Opened now, the file stays bound to this memory: after an exec it
	 * writes nothing anywhere. */
	fd = mem_fd(s->pid, 1);
	stack = malloc(SAVE_BELOW);
	fp.xs = calloc(1, XSTATE_MAX);
	if (fd < 0 || !stack || !fp.xs) {
		snprintf(err, errlen, "cannot open /proc/%d/mem: %s", (int)s->pid, strerror(errno));
		rc = -EIO;
		goto out;
	}
	if ((rc = save_fp(t->tid, &fp)) != 0) {
		snprintf(err, errlen, "reading thread %d's FPU state: %s", (int)t->tid, strerror(-rc));
		goto out;
	}
	saved_len = save_stack(fd, saved.rsp, stack);
	blob_at = (saved.rsp - RED_ZONE - bloblen) & ~15ULL;
	fp_at = (blob_at - fp.len) & ~63ULL;
	/* The function is entered as right after a call: sp + 8 aligned to
	 * 16, the return address (the frame's first word) at sp. */
	sp = ((fp_at - sizeof(frame)) & ~15ULL) - 8;
	if (saved.rsp - sp + 4096 > saved_len) {
		snprintf(err, errlen, "the stack of thread %d is not readable", (int)t->tid);
		rc = -EFAULT;
		goto out;
	}
	make_frame(&frame, s->tramp, &resume, fp_at, fp.xstate, mask);
	if ((bloblen && pwrite(fd, blob, bloblen, (off_t)blob_at) != (ssize_t)bloblen) ||
	    pwrite(fd, fp.xs, fp.len, (off_t)fp_at) != (ssize_t)fp.len ||
	    pwrite(fd, &frame, sizeof(frame), (off_t)sp) != (ssize_t)sizeof(frame)) {
		snprintf(err, errlen, "cannot write the stack of pid %d: %s", (int)s->pid,
			 strerror(errno));
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
	if (ptrace(PTRACE_SETREGS, t->tid, NULL, &resume) && !rc) {
		snprintf(err, errlen, "restoring the registers of thread %d: %s", (int)t->tid,
			 strerror(errno));
		rc = -errno;
	}
	restore_fp(t->tid, &fp);
	t->regs = resume;
restore_mem:
	if (saved_len && pwrite(fd, stack + SAVE_BELOW - saved_len, saved_len,
				(off_t)(saved.rsp - saved_len)) != (ssize_t)saved_len && !rc) {
		snprintf(err, errlen, "restoring the stack of thread %d: %s", (int)t->tid,
			 strerror(errno));
		rc = -EIO;
	}
out:
	if (fd >= 0)
		close(fd);
	free(stack);
	free(fp.xs);
	return rc;
}
