// SPDX-License-Identifier: GPL-2.0
/*
 * arm64: the user registers of a sample (kmod/arch.h). A 32-bit (AArch32)
 * task has no AArch64 register set to report. x30 is copied as the task
 * has it, pointer authentication code included: the reader strips it.
 */
#include <linux/build_bug.h>

#include <asm/ptrace.h>

#include "arch.h"

u32 hp_arch_user_regs(struct pt_regs *regs, u64 out[HEAPPROFD_MAX_REGS],
		      u32 *arch)
{
	int i;

	BUILD_BUG_ON(HEAPPROFD_AARCH64_X28 - HEAPPROFD_AARCH64_X19 != 28 - 19);
	BUILD_BUG_ON(HEAPPROFD_AARCH64_NREGS > HEAPPROFD_MAX_REGS);

	if (compat_user_mode(regs))
		return 0;
	out[HEAPPROFD_AARCH64_PC] = regs->pc;
	out[HEAPPROFD_AARCH64_SP] = regs->sp;
	out[HEAPPROFD_AARCH64_FP] = regs->regs[29];
	out[HEAPPROFD_AARCH64_LR] = regs->regs[30];
	for (i = 19; i <= 28; i++)
		out[HEAPPROFD_AARCH64_X19 + i - 19] = regs->regs[i];
	*arch = HEAPPROFD_ARCH_AARCH64;
	return HEAPPROFD_AARCH64_NREGS;
}
