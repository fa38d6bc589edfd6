// SPDX-License-Identifier: GPL-2.0
/*
 * attach on aarch64 (arch.h): AAPCS64 (arguments in x0..x5, the return
 * address in x30, sp 16-byte aligned, no red zone), the kernel's arm64
 * rt_sigframe with its FP/SIMD record, and the arm64 system call rules.
 *
 * Registers go through PTRACE_GETREGSET/SETREGSET (NT_PRSTATUS: x0..x30,
 * sp, pc, pstate; NT_PRFPREG: v0..v31, fpsr, fpcr; NT_ARM_SVE: the
 * scalable z, p and ffr registers, when the thread's are live); arm64 has
 * no PTRACE_GETREGS. A system call is skipped by setting its number to -1
 * (NT_ARM_SYSTEM_CALL).
 */
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <unistd.h>
#include <asm/ptrace.h>

#include "../arch.h"

/* The trampoline: rt_sigreturn (the call's result stays in x0, read at
 * the system call's entry); a skipped one branches back to make it again.
 * Instructions are little-endian words. */
#define NR_RT_SIGRETURN_A64	139
const uint8_t arch_tramp_code[] = {
	0x68, 0x11, 0x80, 0xd2,	/* mov x8, #139 (movz, 0xd2801168) */
	0x01, 0x00, 0x00, 0xd4,	/* svc #0 (0xd4000001) */
	0xfe, 0xff, 0xff, 0x17,	/* b to the mov (0x17fffffe) */
};
const size_t arch_tramp_size = sizeof(arch_tramp_code);
const size_t arch_tramp_after_syscall = 8;	/* pc at its system call's stops */
const long arch_nr_rt_sigreturn = NR_RT_SIGRETURN_A64;
const uint64_t arch_red_zone = 0;

/* The kernel's arm64 signal frame (arch/arm64/kernel/signal.c, uapi
 * asm/sigcontext.h and asm/ucontext.h). */
#define FPSIMD_MAGIC	0x46508001U
#define SVE_MAGIC	0x53564501U
struct k_ctx {
	uint32_t magic, size;
};

struct k_fpsimd_context {
	struct k_ctx head;
	uint32_t fpsr, fpcr;
	__uint128_t vregs[32];
};

/* Then the z, p and ffr registers, laid out as in NT_ARM_SVE's payload. */
struct k_sve_context {
	struct k_ctx head;
	uint16_t vl, flags, resv[2];
};

struct k_sigcontext {
	uint64_t fault_address;
	uint64_t regs[31];
	uint64_t sp, pc, pstate;
	uint8_t reserved[4096] __attribute__((aligned(16)));
};

struct k_ucontext {
	uint64_t uc_flags, uc_link;
	struct k_stack uc_stack;
	uint64_t uc_sigmask;
	uint8_t unused[1024 / 8 - 8];
	struct k_sigcontext uc_mcontext;
};

struct k_rt_sigframe {
	uint8_t info[128];
	struct k_ucontext uc;
};
_Static_assert(sizeof(struct k_fpsimd_context) == 528, "arm64 fpsimd_context");
_Static_assert(sizeof(struct k_sve_context) == 16, "arm64 sve_context");
_Static_assert(__builtin_offsetof(struct k_ucontext, uc_mcontext) == 176, "arm64 ucontext");
_Static_assert(sizeof(struct k_rt_sigframe) == 4688, "arm64 rt_sigframe");

/* An ss_flags sigaltstack refuses: rt_sigreturn then leaves the thread's
 * alternate stack as it is (it ignores that error), which we cannot read. */
#define SS_FLAGS_KEEP		3

uint64_t arch_regs_pc(const struct user_regs_struct *r)
{
	return r->pc;
}

uint64_t arch_regs_sp(const struct user_regs_struct *r)
{
	return r->sp;
}

int arch_get_regs(pid_t tid, struct user_regs_struct *r)
{
	struct iovec iov = { r, sizeof(*r) };

	return ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &iov) ? -1 : 0;
}

int arch_set_regs(pid_t tid, const struct user_regs_struct *r)
{
	struct iovec iov = { (void *)r, sizeof(*r) };

	return ptrace(PTRACE_SETREGSET, tid, (void *)NT_PRSTATUS, &iov) ? -1 : 0;
}

/*
 * Nothing to do: on arm64 the kernel has already rewound a system call
 * that is to be restarted when the thread reaches its ptrace stop (pc on
 * the svc, x0 its first argument again, in do_signal before get_signal),
 * so resuming at the registers of the stop makes the call again. One with
 * a restart block (nanosleep) is made again from its start, as when the
 * trampoline restores the thread alone.
 */
void arch_resume_state(const struct user_regs_struct *in, struct user_regs_struct *r)
{
	*r = *in;
}

/* The most NT_ARM_SVE state taken: the architecture's largest vector
 * length (2048 bits) needs about 9 KiB; more is not a real thread's. */
#define SVE_STATE_MAX	(64U << 10)

struct arch_fp {
	struct user_fpsimd_struct v;
	/*
	 * NT_ARM_SVE as read, when the thread's SVE registers were live
	 * (SVE_PT_REGS_SVE): the v registers are only the low 128 bits of
	 * its z registers, and the call's system calls discard the rest
	 * (the kernel's SVE ABI), so they are put back whole. NULL without
	 * SVE, or with its state not live (then v is the whole of it).
	 */
	void *sve;
	size_t sve_len;
};

static void sve_save(pid_t tid, struct arch_fp *fp)
{
	struct user_sve_header h;
	struct iovec iov = { &h, sizeof(h) };
	void *b;

	/* EINVAL without SVE (CPU or kernel): nothing more to keep. */
	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_ARM_SVE, &iov) || iov.iov_len < sizeof(h) ||
	    (h.flags & SVE_PT_REGS_MASK) != SVE_PT_REGS_SVE || h.size <= sizeof(h) ||
	    h.size > SVE_STATE_MAX)
		return;
	b = calloc(1, h.size);
	if (!b)
		return;
	iov.iov_base = b;
	iov.iov_len = h.size;
	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_ARM_SVE, &iov) || iov.iov_len != h.size) {
		free(b);
		return;
	}
	fp->sve = b;
	fp->sve_len = iov.iov_len;
}

int arch_fp_save(pid_t tid, struct arch_fp **out)
{
	struct arch_fp *fp = calloc(1, sizeof(*fp));
	struct iovec iov;

	*out = fp;
	if (!fp)
		return -ENOMEM;
	iov.iov_base = &fp->v;
	iov.iov_len = sizeof(fp->v);
	if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRFPREG, &iov))
		return -errno;
	sve_save(tid, fp);
	return 0;
}

void arch_fp_restore(pid_t tid, const struct arch_fp *fp)
{
	struct iovec iov = { (void *)&fp->v, sizeof(fp->v) };

	ptrace(PTRACE_SETREGSET, tid, (void *)NT_PRFPREG, &iov);
	/* Then the whole z, p and ffr registers (and fpsr, fpcr: the same
	 * values), the thread's SVE state live again as it was. */
	if (fp->sve) {
		iov.iov_base = fp->sve;
		iov.iov_len = fp->sve_len;
		ptrace(PTRACE_SETREGSET, tid, (void *)NT_ARM_SVE, &iov);
	}
}

void arch_fp_free(struct arch_fp *fp)
{
	if (fp)
		free(fp->sve);
	free(fp);
}

/*
 * The SVE record of a signal frame (the kernel's sve_context): the header,
 * then at 16 bytes the registers as NT_ARM_SVE's payload has them after its
 * own 16-byte header (32 z of VL bytes, 16 p and ffr of VL/8; its fpsr and
 * fpcr after them are the FP/SIMD record's). rt_sigreturn takes it at the
 * thread's vector length. Without live SVE state, or where it would not
 * fit in the frame (vectors over 768 bits need the kernel's extra_context,
 * not written here), none: the thread then gets its v registers back and
 * zeroes above them, as the SVE ABI gives after a system call.
 */
static void sve_record(uint8_t *at, size_t room, const struct arch_fp *fp)
{
	struct user_sve_header h;
	struct k_sve_context c;
	size_t vq, regs, size;

	if (!fp->sve || fp->sve_len < sizeof(h))
		return;
	memcpy(&h, fp->sve, sizeof(h));
	if (!h.vl || h.vl % 16)
		return;
	vq = h.vl / 16;
	regs = 32 * vq * 16 + 17 * vq * 2;	/* z, then p and ffr */
	size = (16 + regs + 15) & ~(size_t)15;
	if (size > room || fp->sve_len < 16 + regs)
		return;
	memset(&c, 0, sizeof(c));
	c.head.magic = SVE_MAGIC;
	c.head.size = (uint32_t)size;
	c.vl = h.vl;
	memcpy(at, &c, sizeof(c));
	memcpy(at + 16, (const uint8_t *)fp->sve + 16, regs);
}

/* The frame at sp, 16-byte aligned (rt_sigreturn refuses another), its
 * FP/SIMD and SVE records inside it. */
uint64_t arch_frame_sp(uint64_t below, const struct arch_fp *fp)
{
	(void)fp;
	return (below - sizeof(struct k_rt_sigframe)) & ~15ULL;
}

int arch_write_frame(int mem, uint64_t sp, uint64_t below, uint64_t tramp,
		     const struct user_regs_struct *r, const struct arch_fp *fp, uint64_t mask)
{
	struct k_rt_sigframe *f = calloc(1, sizeof(*f));
	struct k_sigcontext *sc;
	struct k_fpsimd_context fc;
	ssize_t w;

	(void)below;
	(void)tramp;	/* the return goes through x30 (arch_call_regs) */
	if (!f)
		return -1;
	sc = &f->uc.uc_mcontext;
	f->uc.uc_stack.ss_flags = SS_FLAGS_KEEP;
	f->uc.uc_sigmask = mask;
	memcpy(sc->regs, r->regs, sizeof(sc->regs));
	sc->sp = r->sp;
	sc->pc = r->pc;
	sc->pstate = r->pstate;
	/* The FP/SIMD record, the SVE record when the thread's SVE state was
	 * live, then the terminator (zeroes: calloc). This frame is used
	 * only when heapprofctl is gone before the call returns
	 * (arch_fp_restore puts the state back otherwise). */
	memset(&fc, 0, sizeof(fc));
	fc.head.magic = FPSIMD_MAGIC;
	fc.head.size = sizeof(fc);
	fc.fpsr = fp->v.fpsr;
	fc.fpcr = fp->v.fpcr;
	memcpy(fc.vregs, fp->v.vregs, sizeof(fc.vregs));
	memcpy(sc->reserved, &fc, sizeof(fc));
	sve_record(sc->reserved + sizeof(fc), sizeof(sc->reserved) - sizeof(fc) - sizeof(struct k_ctx),
		   fp);
	w = pwrite(mem, f, sizeof(*f), (off_t)sp);
	free(f);
	return w == (ssize_t)sizeof(*f) ? 0 : -1;
}

void arch_call_regs(struct user_regs_struct *r, uint64_t fn, uint64_t sp, uint64_t tramp,
		    const uint64_t *args, int nargs)
{
	r->pc = fn;
	r->sp = sp;
	r->regs[30] = tramp;	/* the return address */
	for (int i = 0; i < nargs && i < 8; i++)
		r->regs[i] = args[i];
}

int arch_take_result(pid_t tid, uint64_t *result)
{
	struct user_regs_struct r;
	int nr = -1;
	struct iovec iov = { &nr, sizeof(nr) };

	if (arch_get_regs(tid, &r))
		return -1;
	*result = r.regs[0];
	/* skip it */
	return ptrace(PTRACE_SETREGSET, tid, (void *)NT_ARM_SYSTEM_CALL, &iov) ? -1 : 0;
}
