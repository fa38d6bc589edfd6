// SPDX-License-Identifier: GPL-2.0
/*
 * x86-64: the user registers of a sample (kmod/arch.h). A 32-bit or x32
 * task in compatibility mode has no 64-bit register set to report.
 */
#include <asm/ptrace.h>

#include "arch.h"

u32 hp_arch_user_regs(struct pt_regs *regs, u64 out[HEAPPROFD_MAX_REGS],
		      u32 *arch)
{
	if (!user_64bit_mode(regs))
		return 0;
	out[HEAPPROFD_X86_64_IP] = regs->ip;
	out[HEAPPROFD_X86_64_SP] = regs->sp;
	out[HEAPPROFD_X86_64_BP] = regs->bp;
	out[HEAPPROFD_X86_64_BX] = regs->bx;
	out[HEAPPROFD_X86_64_R12] = regs->r12;
	out[HEAPPROFD_X86_64_R13] = regs->r13;
	out[HEAPPROFD_X86_64_R14] = regs->r14;
	out[HEAPPROFD_X86_64_R15] = regs->r15;
	*arch = HEAPPROFD_ARCH_X86_64;
	return HEAPPROFD_X86_64_NREGS;
}
