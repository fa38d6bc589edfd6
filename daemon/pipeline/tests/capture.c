// SPDX-License-Identifier: GPL-2.0
/*
 * The registers and the raw stack of the caller, as the client sends them:
 * registers taken at one instruction inside hp_test_capture, then the bytes
 * from that stack pointer up to the top of the stack. Built without
 * sanitizers so the stack is an ordinary one.
 */
#include <stdio.h>
#include <string.h>

#include "../../../uapi/linux/heapprofd.h"
#include "capture.h"

/*
 * The registers in the uapi's order for the architecture this is built
 * for, as the client's hp_regs_capture (libclient/arch/<arch>.h) takes
 * them. A macro, not that inline function: an inlined function is a frame
 * of its own in the symbolized stacks the tests compare.
 */
#if defined(__x86_64__)
#define CAPTURE_REGS(regs)							\
	__asm__ volatile("leaq 0(%%rip), %%rax\n\t"				\
			 "movq %%rax, 0(%0)\n\t"				\
			 "movq %%rsp, 8(%0)\n\t"				\
			 "movq %%rbp, 16(%0)\n\t"				\
			 "movq %%rbx, 24(%0)\n\t"				\
			 "movq %%r12, 32(%0)\n\t"				\
			 "movq %%r13, 40(%0)\n\t"				\
			 "movq %%r14, 48(%0)\n\t"				\
			 "movq %%r15, 56(%0)\n\t"				\
			 : : "r"(regs) : "rax", "memory")
#elif defined(__aarch64__)
/* pc sp x29 x30 x19 .. x28; x30 is still the return address here
 * (hp_test_capture has called nothing yet, or has saved it). */
_Static_assert(HEAPPROFD_AARCH64_PC == 0 && HEAPPROFD_AARCH64_SP == 1 &&
	       HEAPPROFD_AARCH64_FP == 2 && HEAPPROFD_AARCH64_LR == 3 &&
	       HEAPPROFD_AARCH64_X19 == 4 && HEAPPROFD_AARCH64_NREGS == 14,
	       "CAPTURE_REGS's offsets follow the uapi's aarch64 order");
#define CAPTURE_REGS(regs)							\
	__asm__ volatile("adr x16, .\n\t"					\
			 "mov x17, sp\n\t"					\
			 "stp x16, x17, [%0, #0]\n\t"				\
			 "stp x29, x30, [%0, #16]\n\t"			\
			 "stp x19, x20, [%0, #32]\n\t"			\
			 "stp x21, x22, [%0, #48]\n\t"			\
			 "stp x23, x24, [%0, #64]\n\t"			\
			 "stp x25, x26, [%0, #80]\n\t"			\
			 "stp x27, x28, [%0, #96]\n\t"			\
			 : : "r"(regs) : "x16", "x17", "memory")
#else
#error "capture.c: no register capture for this architecture"
#endif

static uint64_t stack_top;

void hp_test_stack_init(void)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;

		if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2)
			stack_top = hi;
	}
	if (f)
		fclose(f);
}

__attribute__((noinline)) size_t hp_test_capture(void *buf, size_t cap, uint64_t addr,
						  uint64_t size, uint64_t seq)
{
	struct heapprofd_rec_alloc *a = buf;
	uint64_t regs[HEAPPROFD_NREGS_NATIVE], sp, n;

	CAPTURE_REGS(regs);
	if (cap < sizeof(*a))
		return 0;
	memset(a, 0, sizeof(*a));
	sp = regs[HEAPPROFD_REG_SP];
	n = stack_top > sp ? stack_top - sp : 0;
	if (n > cap - sizeof(*a))
		n = (cap - sizeof(*a)) & ~7ULL;
	/* Word by word: the sanitizers' memcpy would object to stack redzones. */
	for (uint64_t i = 0; i < n / 8; i++)
		((uint64_t *)((char *)buf + sizeof(*a)))[i] =
			((const volatile uint64_t *)(uintptr_t)sp)[i];
	a->hdr.type = HEAPPROFD_REC_ALLOC;
	a->hdr.len = (uint32_t)((sizeof(*a) + n + 7) & ~7ULL);
	a->seq = seq;
	a->addr = addr;
	a->req_size = size;
	a->usable_size = size;
	a->est_size = size;
	a->interval = 1;
	a->count = 1;
	a->hdr.flags = HEAPPROFD_ALLOC_EXACT;
	a->arch = HEAPPROFD_ARCH_NATIVE;
	a->stack_top = stack_top;
	a->nregs = HEAPPROFD_NREGS_NATIVE;
	a->stack_len = (uint32_t)n;
	memcpy(a->regs, regs, sizeof(regs));
	return a->hdr.len;
}
