/* SPDX-License-Identifier: GPL-2.0 */
/* x86-64 inline parts of the client (included by ../arch.h only). */
#ifndef HP_ARCH_X86_64_H
#define HP_ARCH_X86_64_H
#include <elf.h>
#include <emmintrin.h>

/*
 * Take the registers an unwinder starts from (HEAPPROFD_X86_64_* order)
 * into regs[HEAPPROFD_X86_64_NREGS], as they are at this point of the calling
 * function: always inlined, so ip and sp are its own. That frame must stay
 * live until the stack is copied (hp_write_alloc, called from it, copies).
 */
static inline __attribute__((always_inline)) void hp_regs_capture(uint64_t *regs)
{
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
}

/* Are 64 bytes the same? SSE2 (every x86-64): a quarter of the
 * instructions of comparing words, on what is mostly equal. */
static inline int hp_same64(const uint64_t *a, const uint64_t *b)
{
	const __m128i *x = (const __m128i *)a, *y = (const __m128i *)b;
	__m128i e01 = _mm_and_si128(_mm_cmpeq_epi8(_mm_loadu_si128(x), _mm_loadu_si128(y)),
				    _mm_cmpeq_epi8(_mm_loadu_si128(x + 1), _mm_loadu_si128(y + 1)));
	__m128i e23 = _mm_and_si128(_mm_cmpeq_epi8(_mm_loadu_si128(x + 2), _mm_loadu_si128(y + 2)),
				    _mm_cmpeq_epi8(_mm_loadu_si128(x + 3), _mm_loadu_si128(y + 3)));

	return _mm_movemask_epi8(_mm_and_si128(e01, e23)) == 0xffff;
}

/*
 * *countdown -= n; is it now <= 0? As one read-modify-write instruction and
 * a branch on its flags (the compiler emits load, subtract, store and test):
 * jle after the subtraction is the signed "countdown <= n" of the old value.
 */
static inline __attribute__((always_inline)) int hp_countdown_expired(int64_t *countdown, size_t n)
{
	/* No output operands: with a "+m" output, gcc 12 here dropped the
	 * code at the label (the call of the slow path). The countdown is an
	 * input memory operand and the "memory" clobber says it changed. */
	__asm__ goto("subq %1, %0\n\tjle %l[expired]"
		     :
		     : "m"(*countdown), "r"(n)
		     : "cc", "memory"
		     : expired);
	return 0;
expired:
	return 1;
}

/* The alignment of struct hp_thread (client.h), a cache line. */
#define HP_THREAD_ALIGN	64

/* The relocations of a GOT slot that names a function (got.c). */
#define HP_R_JUMP_SLOT	R_X86_64_JUMP_SLOT
#define HP_R_GLOB_DAT	R_X86_64_GLOB_DAT

/* Ask for the line in a writable state before the record is written. */
static inline void hp_prefetch_write(const char *c)
{
	__asm__ volatile("prefetchw %0" : : "m"(*c));
}
#endif
