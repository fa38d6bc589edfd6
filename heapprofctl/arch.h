/* SPDX-License-Identifier: GPL-2.0 */
#ifndef HEAPPROFCTL_ARCH_H
#define HEAPPROFCTL_ARCH_H
/*
 * attach's architecture seam (inject.c, ptrace_stop.c, remote_call.c):
 * arch/<arch>.c has a thread's registers through ptrace, the return
 * trampoline, the signal frame rt_sigreturn restores a thread from, the
 * calling convention and the system call rules. A target without such a
 * file builds arch/attach-none.c instead (the Makefile picks).
 */
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

/* The thread's program counter and stack pointer in its registers. */
uint64_t arch_regs_pc(const struct user_regs_struct *r);
uint64_t arch_regs_sp(const struct user_regs_struct *r);
/* ptrace's general registers of a stopped thread: 0, or -1 with errno. */
int arch_get_regs(pid_t tid, struct user_regs_struct *r);
int arch_set_regs(pid_t tid, const struct user_regs_struct *r);

/*
 * The return trampoline: the call returns into it and it makes
 * rt_sigreturn (system call arch_nr_rt_sigreturn), whose entry stop shows
 * instruction pointer tramp + arch_tramp_after_syscall; a skipped
 * rt_sigreturn loops back to make it again.
 */
extern const uint8_t arch_tramp_code[];
extern const size_t arch_tramp_size, arch_tramp_after_syscall;
extern const long arch_nr_rt_sigreturn;
/* Bytes below the stack pointer the ABI lets a function use unasked. */
extern const uint64_t arch_red_zone;

/* What the thread resumes with had no call been made: its registers at
 * the stop with a system call it was in made again. */
void arch_resume_state(const struct user_regs_struct *in, struct user_regs_struct *r);

/* The thread's floating-point and vector state, as saved. */
struct arch_fp;

/* The kernel's stack_t inside a signal frame's ucontext: the same on
 * every 64-bit architecture (each arch file lays out the rest). */
struct k_stack {
	uint64_t ss_sp;
	int32_t ss_flags, pad;
	uint64_t ss_size;
};
/* 0 with *fp (free it with arch_fp_free), or -errno. */
int arch_fp_save(pid_t tid, struct arch_fp **fp);
void arch_fp_restore(pid_t tid, const struct arch_fp *fp);
void arch_fp_free(struct arch_fp *fp);

/* Where the called function's stack begins when the signal frame (and
 * the state it points to) go below address below. */
uint64_t arch_frame_sp(uint64_t below, const struct arch_fp *fp);
/* Write that frame (mem: the process's /proc/PID/mem, open for writing):
 * rt_sigreturn at the trampoline restores resume, fp and mask from it.
 * 0, or -1 with errno. */
int arch_write_frame(int mem, uint64_t sp, uint64_t below, uint64_t tramp,
		     const struct user_regs_struct *resume, const struct arch_fp *fp,
		     uint64_t mask);
/* The registers that enter fn(args) on stack sp, returning to tramp. */
void arch_call_regs(struct user_regs_struct *r, uint64_t fn, uint64_t sp, uint64_t tramp,
		    const uint64_t *args, int nargs);
/* At the trampoline's rt_sigreturn entry stop: the call's result, and the
 * system call made not to happen. 0, or -1 with errno. */
int arch_take_result(pid_t tid, uint64_t *result);
#endif
