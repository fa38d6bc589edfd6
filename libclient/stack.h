/* SPDX-License-Identifier: GPL-2.0 */
#ifndef HP_STACK_H
#define HP_STACK_H
#include <stdint.h>

#include "../uapi/linux/heapprofd.h"

/*
 * Take the registers an unwinder starts from (HEAPPROFD_X86_64_* order)
 * into regs[HEAPPROFD_X86_64_NREGS], as they are at this point of the calling
 * function: always inlined, so ip and sp are its own. That frame must stay
 * live until the stack is copied (hp_write_alloc, called from it, copies).
 */
static inline __attribute__((always_inline)) void hp_regs_capture(uint64_t *regs)
{
#if defined(__x86_64__)
	__asm__ volatile("leaq 0(%%rip), %%rax\n\t"
			 "movq %%rax, %c[ip](%[r])\n\t"
			 "movq %%rsp, %c[sp](%[r])\n\t"
			 "movq %%rbp, %c[bp](%[r])\n\t"
			 "movq %%rbx, %c[bx](%[r])\n\t"
			 "movq %%r12, %c[r12](%[r])\n\t"
			 "movq %%r13, %c[r13](%[r])\n\t"
			 "movq %%r14, %c[r14](%[r])\n\t"
			 "movq %%r15, %c[r15](%[r])\n\t"
			 :
			 : [r] "r"(regs),
			   [ip] "i"(8 * HEAPPROFD_X86_64_IP),
			   [sp] "i"(8 * HEAPPROFD_X86_64_SP),
			   [bp] "i"(8 * HEAPPROFD_X86_64_BP),
			   [bx] "i"(8 * HEAPPROFD_X86_64_BX),
			   [r12] "i"(8 * HEAPPROFD_X86_64_R12),
			   [r13] "i"(8 * HEAPPROFD_X86_64_R13),
			   [r14] "i"(8 * HEAPPROFD_X86_64_R14),
			   [r15] "i"(8 * HEAPPROFD_X86_64_R15)
			 : "rax", "memory");
#else
#error "heapprofd_client: only x86_64 stack capture is implemented"
#endif
}

/* Copy min(want, top - sp) bytes of stack from the captured sp to dst;
 * returns the bytes copied. */
uint32_t hp_stack_copy(const uint64_t *regs, uint8_t *dst, uint64_t top,
		       uint32_t want);

/* Choose how large copies are made (the processor's widest streaming
 * store); before it runs, copies use memcpy. */
void hp_stack_copy_init(void);
#endif
