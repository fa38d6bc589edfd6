// SPDX-License-Identifier: GPL-2.0
/*
 * attach on x86-64 (arch.h): the System V calling convention, the
 * kernel's rt_sigframe with the FPU/SSE/AVX state (XSAVE layout, or the
 * legacy fxsave area), and its system call restart rules.
 */
#include <cpuid.h>
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../arch.h"

#define XSTATE_MAX	16384
#define NR_RESTART_SYSCALL	219

/* The trampoline: the call's result to rdi, then rt_sigreturn; a skipped
 * rt_sigreturn (heapprofctl's, remote_call.c) loops back to make it again. */
const uint8_t arch_tramp_code[] = {
	0x48, 0x89, 0xc7,		/* mov %rax,%rdi */
	0xb8, 0x0f, 0x00, 0x00, 0x00,	/* mov $15,%eax (rt_sigreturn) */
	0x0f, 0x05,			/* syscall */
	0xeb, 0xf7,			/* jmp to the mov $15 */
};
const size_t arch_tramp_size = sizeof(arch_tramp_code);
const size_t arch_tramp_after_syscall = 10;	/* rip at its system call's stops */
const long arch_nr_rt_sigreturn = 15;
const uint64_t arch_red_zone = 128;

/* The kernel's x86-64 signal frame (arch/x86/include/asm/sigframe.h). */
struct k_sigcontext {
	uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
	uint64_t di, si, bp, bx, dx, ax, cx, sp, ip, flags;
	uint16_t cs, gs, fs, ss;
	uint64_t err, trapno, oldmask, cr2, fpstate, reserved1[8];
};

struct k_ucontext {
	uint64_t uc_flags, uc_link;
	struct k_stack uc_stack;
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

uint64_t arch_regs_pc(const struct user_regs_struct *r)
{
	return r->rip;
}

uint64_t arch_regs_sp(const struct user_regs_struct *r)
{
	return r->rsp;
}

int arch_get_regs(pid_t tid, struct user_regs_struct *r)
{
	return ptrace(PTRACE_GETREGS, tid, NULL, r) ? -1 : 0;
}

int arch_set_regs(pid_t tid, const struct user_regs_struct *r)
{
	return ptrace(PTRACE_SETREGS, tid, NULL, r) ? -1 : 0;
}

/*
 * A thread stopped in a system call (orig_rax set, rax -ERESTART...) gets
 * back what the kernel would have given it had no call been made: the
 * call again (rip on the syscall instruction, rax its number), or
 * restart_syscall for one with a restart block. (Only when the trampoline
 * does it alone does a call with a restart block, a nanosleep, say, end
 * with EINTR: rt_sigreturn forgets the block.)
 */
void arch_resume_state(const struct user_regs_struct *in, struct user_regs_struct *r)
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

/* The extended state: the ptrace regset in the user ABI's layout, which
 * is also the layout rt_sigreturn reads (with the software bytes saying
 * so and an end marker, added when a frame is written). */
struct arch_fp {
	uint8_t *xs;		/* as ptrace gave it */
	size_t len;		/* what goes into the frame */
	size_t regset_len;	/* what goes back through ptrace */
	size_t frame_xsize;	/* the frame's XSAVE area, without the end marker */
	uint64_t xcr0;		/* the features the state was taken under */
	uint64_t frame_features; /* the features the frame's copy says it holds */
	int xstate;
};

#define XFEATURE_XTILE_DATA	18	/* AMX tiles: a feature a process must ask for */
#define XSAVE_HDR_OFF		512
#define XSAVE_MIN_SIZE		576	/* the fxsave area and the XSAVE header */

/*
 * The XSAVE area a signal frame of this thread may hold. ptrace's copy is
 * as large as the largest state any process may have (the machine's whole
 * XCR0: with AMX, its 8 KiB of tiles), but rt_sigreturn takes a frame's
 * extended state only if it is no larger than the thread's own (which
 * holds the tiles only if the process asked for them, arch_prctl
 * ARCH_REQ_XCOMP_PERM); a larger one it takes as the legacy fxsave area
 * alone, and the AVX and AVX-512 registers come back as zeroes. So the
 * frame holds the features up to the end of the last one the thread can
 * have: all of XCR0 but the tiles, and the tiles only when the thread's
 * copy says they are in use (then it asked for them). The offsets are the
 * standard (non-compacted) layout's, CPUID leaf 0xd.
 */
static void frame_xstate(struct arch_fp *fp)
{
	uint64_t in_use, features = fp->xcr0;
	size_t end = XSAVE_MIN_SIZE;

	memcpy(&in_use, fp->xs + XSAVE_HDR_OFF, sizeof(in_use));
	if (!(in_use & (1ULL << XFEATURE_XTILE_DATA)))
		features &= ~(1ULL << XFEATURE_XTILE_DATA);
	for (unsigned int i = 2; i < 64; i++) {
		unsigned int size, offset, ecx, edx;

		if (!(features & (1ULL << i)) ||
		    !__get_cpuid_count(0xd, i, &size, &offset, &ecx, &edx) || !size)
			continue;
		if ((size_t)offset + size > end)
			end = (size_t)offset + size;
	}
	if (end > fp->regset_len)
		end = fp->regset_len;
	fp->frame_xsize = end;
	fp->frame_features = features;
}

int arch_fp_save(pid_t tid, struct arch_fp **out)
{
	struct arch_fp *fp = calloc(1, sizeof(*fp));
	struct iovec iov;
	uint64_t xcr0;

	*out = fp;
	if (!fp || !(fp->xs = calloc(1, XSTATE_MAX)))
		return -ENOMEM;
	iov.iov_base = fp->xs;
	iov.iov_len = XSTATE_MAX - 8;	/* a whole number of words (else EINVAL), room for the marker */
	/*
	 * The whole extended state (AVX, AVX-512, ...) in the user ABI's
	 * layout. ptrace's copy holds, in the fxsave area's software bytes,
	 * the feature mask (XCR0) it was taken under, not a signal frame's
	 * description of itself: that is written for the frame only
	 * (arch_write_frame). It goes back through ptrace as it came.
	 */
	if (!ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov) && iov.iov_len >= 576) {
		memcpy(&xcr0, fp->xs + FX_SW_OFF, sizeof(xcr0));
		fp->xcr0 = xcr0;
		fp->regset_len = iov.iov_len;
		frame_xstate(fp);
		fp->len = fp->frame_xsize + 4;	/* and the end marker */
		fp->xstate = 1;
		return 0;
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

void arch_fp_restore(pid_t tid, const struct arch_fp *fp)
{
	struct iovec iov = { fp->xs, fp->regset_len };

	if (fp->regset_len)
		ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &iov);
	else
		ptrace(PTRACE_SETFPREGS, tid, NULL, fp->xs);
}

void arch_fp_free(struct arch_fp *fp)
{
	if (fp)
		free(fp->xs);
	free(fp);
}

/* The extended state 64-byte aligned below the blob, the frame below it;
 * the function is entered as right after a call: sp + 8 aligned to 16,
 * the return address (the frame's first word) at sp. */
static uint64_t fp_at(uint64_t below, const struct arch_fp *fp)
{
	return (below - fp->len) & ~63ULL;
}

uint64_t arch_frame_sp(uint64_t below, const struct arch_fp *fp)
{
	return ((fp_at(below, fp) - sizeof(struct k_rt_sigframe)) & ~15ULL) - 8;
}

int arch_write_frame(int mem, uint64_t sp, uint64_t below, uint64_t tramp,
		     const struct user_regs_struct *r, const struct arch_fp *fp, uint64_t mask)
{
	struct k_rt_sigframe f;
	struct k_sigcontext *sc = &f.uc.uc_mcontext;
	uint64_t at = fp_at(below, fp);

	memset(&f, 0, sizeof(f));
	f.pretcode = tramp;
	f.uc.uc_flags = UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS | (fp->xstate ? UC_FP_XSTATE : 0);
	f.uc.uc_stack.ss_flags = SS_FLAGS_KEEP;
	f.uc.uc_sigmask = mask;
	sc->r8 = r->r8, sc->r9 = r->r9, sc->r10 = r->r10, sc->r11 = r->r11;
	sc->r12 = r->r12, sc->r13 = r->r13, sc->r14 = r->r14, sc->r15 = r->r15;
	sc->di = r->rdi, sc->si = r->rsi, sc->bp = r->rbp, sc->bx = r->rbx;
	sc->dx = r->rdx, sc->ax = r->rax, sc->cx = r->rcx, sc->sp = r->rsp;
	sc->ip = r->rip, sc->flags = r->eflags;
	sc->cs = (uint16_t)r->cs, sc->ss = (uint16_t)r->ss;
	sc->fpstate = at;
	if (fp->xstate) {
		/* The frame's copy says what it holds (the software bytes
		 * rt_sigreturn checks) and ends with the second magic. */
		uint8_t *x = malloc(fp->len);
		struct fx_sw sw;
		uint32_t m2 = FP_XSTATE_MAGIC2;
		ssize_t w;

		if (!x)
			return -1;
		memcpy(x, fp->xs, fp->frame_xsize);
		memset(&sw, 0, sizeof(sw));
		sw.magic1 = FP_XSTATE_MAGIC1;
		sw.extended_size = (uint32_t)fp->len;
		sw.xfeatures = fp->frame_features;
		sw.xstate_size = (uint32_t)fp->frame_xsize;
		memcpy(x + FX_SW_OFF, &sw, sizeof(sw));
		memcpy(x + fp->frame_xsize, &m2, sizeof(m2));
		w = pwrite(mem, x, fp->len, (off_t)at);
		free(x);
		if (w != (ssize_t)fp->len)
			return -1;
	} else if (pwrite(mem, fp->xs, fp->len, (off_t)at) != (ssize_t)fp->len) {
		return -1;
	}
	return pwrite(mem, &f, sizeof(f), (off_t)sp) == (ssize_t)sizeof(f) ? 0 : -1;
}

void arch_call_regs(struct user_regs_struct *r, uint64_t fn, uint64_t sp, uint64_t tramp,
		    const uint64_t *args, int nargs)
{
	(void)tramp;	/* the frame's first word, at sp */
	r->rip = fn;
	r->rsp = sp;
	r->rax = 0;
	r->orig_rax = (unsigned long long)-1;	/* not in a system call */
	r->eflags &= ~0x400ULL;			/* DF clear, as the ABI wants */
	for (int i = 0; i < nargs; i++) {
		switch (i) {
		case 0: r->rdi = args[i]; break;
		case 1: r->rsi = args[i]; break;
		case 2: r->rdx = args[i]; break;
		case 3: r->rcx = args[i]; break;
		case 4: r->r8 = args[i]; break;
		case 5: r->r9 = args[i]; break;
		}
	}
}

int arch_take_result(pid_t tid, uint64_t *result)
{
	struct user_regs_struct r;

	if (ptrace(PTRACE_GETREGS, tid, NULL, &r))
		return -1;
	*result = r.rdi;
	r.orig_rax = (unsigned long long)-1;	/* skip it */
	return ptrace(PTRACE_SETREGS, tid, NULL, &r) ? -1 : 0;
}
