/* SPDX-License-Identifier: GPL-2.0 */
/* aarch64 inline parts of the client (included by ../arch.h only). */
#ifndef HP_ARCH_AARCH64_H
#define HP_ARCH_AARCH64_H
#include <elf.h>
#include <arm_neon.h>

/* The stores below write the uapi's order: pc, sp, x29, x30, x19 .. x28. */
_Static_assert(HEAPPROFD_AARCH64_PC == 0 && HEAPPROFD_AARCH64_SP == 1 &&
	       HEAPPROFD_AARCH64_FP == 2 && HEAPPROFD_AARCH64_LR == 3 &&
	       HEAPPROFD_AARCH64_X19 == 4 && HEAPPROFD_AARCH64_NREGS == 14,
	       "hp_regs_capture's offsets follow the uapi's aarch64 order");

/*
 * Take the registers an unwinder starts from (HEAPPROFD_AARCH64_* order)
 * into regs[HEAPPROFD_AARCH64_NREGS] as they are at this point of the
 * calling function: always inlined, so pc, sp and the frame record (x29)
 * are its own. x30 is whatever the last call left there: the caller's
 * return address is in its frame record by now (a function that calls has
 * saved it), where the unwinder's CFI finds it. That frame must stay live
 * until the stack is copied (hp_write_alloc, called from it, copies).
 */
static inline __attribute__((always_inline)) void hp_regs_capture(uint64_t *regs)
{
	__asm__ volatile("adr x16, .\n\t"
			 "mov x17, sp\n\t"
			 "stp x16, x17, [%[r], #0]\n\t"
			 "stp x29, x30, [%[r], #16]\n\t"
			 "stp x19, x20, [%[r], #32]\n\t"
			 "stp x21, x22, [%[r], #48]\n\t"
			 "stp x23, x24, [%[r], #64]\n\t"
			 "stp x25, x26, [%[r], #80]\n\t"
			 "stp x27, x28, [%[r], #96]\n\t"
			 :
			 : [r] "r"(regs)
			 : "x16", "x17", "memory");
}

/* Are 64 bytes the same? Advanced SIMD (every aarch64): four 16-byte
 * compares and one reduction. */
static inline int hp_same64(const uint64_t *a, const uint64_t *b)
{
	uint8x16_t e0 = vceqq_u8(vld1q_u8((const uint8_t *)a), vld1q_u8((const uint8_t *)b));
	uint8x16_t e1 = vceqq_u8(vld1q_u8((const uint8_t *)(a + 2)), vld1q_u8((const uint8_t *)(b + 2)));
	uint8x16_t e2 = vceqq_u8(vld1q_u8((const uint8_t *)(a + 4)), vld1q_u8((const uint8_t *)(b + 4)));
	uint8x16_t e3 = vceqq_u8(vld1q_u8((const uint8_t *)(a + 6)), vld1q_u8((const uint8_t *)(b + 6)));

	return vminvq_u8(vandq_u8(vandq_u8(e0, e1), vandq_u8(e2, e3))) == 0xff;
}

/* *countdown -= n; is it now <= 0? (aarch64 has no read-modify-write on
 * memory: load, subtract, store and a compare-and-branch.) */
static inline __attribute__((always_inline)) int hp_countdown_expired(int64_t *countdown, size_t n)
{
	return (*countdown -= (int64_t)n) <= 0;
}

/*
 * The alignment of struct hp_thread (client.h). Not a cache line: attach
 * dlopens the client into a running process, where glibc places its
 * initial-exec TLS in the static TLS block's optional surplus (512 bytes,
 * glibc.rtld.optional_static_tls); with aarch64's 14 registers the thread
 * block is 432 bytes, and rounded up to 64 (448, plus the slack of
 * aligning it) it did not fit: "cannot allocate memory in static TLS block".
 */
#define HP_THREAD_ALIGN	16

/* The relocations of a GOT slot that names a function (got.c). */
#define HP_R_JUMP_SLOT	R_AARCH64_JUMP_SLOT
#define HP_R_GLOB_DAT	R_AARCH64_GLOB_DAT

/* Ask for the line in a writable state before the record is written. */
static inline void hp_prefetch_write(const char *c)
{
	__builtin_prefetch(c, 1, 3);
}
#endif
