/* SPDX-License-Identifier: GPL-2.0 */
/* aarch64: libunwind's registers in a record (included by ../arch.h only). */
#ifndef HP_PIPELINE_ARCH_AARCH64_H
#define HP_PIPELINE_ARCH_AARCH64_H

/* The frame pointer, as libunwind numbers it (unw_get_reg). */
#define HP_UNW_FP	UNW_AARCH64_X29

/*
 * The record's index of libunwind's register reg; -1 for a register the
 * record does not carry and no CFA rule needs (x0 .. x18, the caller-saved
 * and scratch ones, and PSTATE: read as 0), -2 for one libunwind should not
 * ask for (the vector registers).
 */
static inline int hp_arch_unw_reg(unw_regnum_t reg)
{
	if (reg >= UNW_AARCH64_X19 && reg <= UNW_AARCH64_X28)
		return HEAPPROFD_AARCH64_X19 + (reg - UNW_AARCH64_X19);
	switch (reg) {
	case UNW_AARCH64_PC: return HEAPPROFD_AARCH64_PC;
	case UNW_AARCH64_SP: return HEAPPROFD_AARCH64_SP;
	case UNW_AARCH64_X29: return HEAPPROFD_AARCH64_FP;
	case UNW_AARCH64_X30: return HEAPPROFD_AARCH64_LR;
	default:
		return (reg >= UNW_AARCH64_X0 && reg < UNW_AARCH64_X19) ||
		       reg == UNW_AARCH64_PSTATE ? -1 : -2;
	}
}

/*
 * The caller's stack pointer of a frame whose frame record (saved x29,
 * x30) is at fp. AAPCS64 puts the record anywhere in the frame; compilers
 * put it at the frame's bottom, so fp + 16 is the lowest the caller's sp
 * can be: only the restart below code without CFI uses it, and the
 * caller's CFI then works from its own rules.
 */
static inline uint64_t hp_arch_fp_caller_sp(uint64_t fp)
{
	return fp + 16;
}
#endif
