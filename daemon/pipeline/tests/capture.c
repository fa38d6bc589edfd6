// SPDX-License-Identifier: GPL-2.0
/*
 * The registers and the raw stack of the caller, as the client sends them:
 * registers taken at one instruction inside hp_test_capture, then the bytes
 * from that stack pointer up to the top of the stack. Built without
 * sanitizers so the stack is an ordinary one. The registers are taken as
 * the client takes them, by its architecture seam's hp_regs_capture, in
 * the uapi's order for the architecture this is built for.
 */
#include <stdio.h>
#include <string.h>

#include "../../../libclient/arch.h"
#include "capture.h"

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

	hp_regs_capture(regs);
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
