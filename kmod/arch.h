/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What heapprofd.ko needs from the architecture it runs on, one file per
 * architecture: kmod/arch-<arch>.c, chosen by kmod/Kbuild from the target
 * kernel's configuration. Everything else in kmod/ is the same on all.
 */
#ifndef _HEAPPROFD_ARCH_H
#define _HEAPPROFD_ARCH_H

#include <linux/types.h>

#include "../uapi/linux/heapprofd.h"

struct pt_regs;

/**
 * hp_arch_user_regs() - the user registers an unwinder starts from
 * @regs: the task's user register frame (task_pt_regs())
 * @out: HEAPPROFD_MAX_REGS registers, in the uapi's order for the
 *       architecture (HEAPPROFD_<ARCH>_*); the rest are left alone
 * @arch: set to the enum heapprofd_arch of @out
 *
 * Return: the number of registers filled (the architecture's
 * HEAPPROFD_<ARCH>_NREGS), or 0 for a task whose registers are not in
 * that set (a 32-bit task on a 64-bit kernel): no sample is taken then.
 */
u32 hp_arch_user_regs(struct pt_regs *regs, u64 out[HEAPPROFD_MAX_REGS],
		      u32 *arch);

#endif /* _HEAPPROFD_ARCH_H */
