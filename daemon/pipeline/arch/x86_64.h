/* SPDX-License-Identifier: GPL-2.0 */
/* x86-64: libunwind's registers in a record (included by ../arch.h only). */
#ifndef HP_PIPELINE_ARCH_X86_64_H
#define HP_PIPELINE_ARCH_X86_64_H

/* The frame pointer, as libunwind numbers it (unw_get_reg). */
#define HP_UNW_FP	UNW_X86_64_RBP

/*
 * The record's index of libunwind's register reg; -1 for a register the
 * record does not carry and no CFA rule needs (caller-saved: read as 0),
 * -2 for one libunwind should not ask for.
 */
static inline int hp_arch_unw_reg(unw_regnum_t reg)
{
	switch (reg) {
	case UNW_X86_64_RIP: return HEAPPROFD_X86_64_IP;
	case UNW_X86_64_RSP: return HEAPPROFD_X86_64_SP;
	case UNW_X86_64_RBP: return HEAPPROFD_X86_64_BP;
	case UNW_X86_64_RBX: return HEAPPROFD_X86_64_BX;
	case UNW_X86_64_R12: return HEAPPROFD_X86_64_R12;
	case UNW_X86_64_R13: return HEAPPROFD_X86_64_R13;
	case UNW_X86_64_R14: return HEAPPROFD_X86_64_R14;
	case UNW_X86_64_R15: return HEAPPROFD_X86_64_R15;
	default:
		return reg >= 0 && reg <= UNW_X86_64_RIP ? -1 : -2;
	}
}

/* The caller's stack pointer of a frame whose frame record is at fp: the
 * record (saved rbp, return address) sits right below it. */
static inline uint64_t hp_arch_fp_caller_sp(uint64_t fp)
{
	return fp + 16;
}
#endif
