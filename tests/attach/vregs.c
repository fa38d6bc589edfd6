// SPDX-License-Identifier: GPL-2.0
/*
 * vregs: a thread whose wide vector registers are live while attach stops
 * it and makes its remote calls in it. The upper bits of a vector register
 * (AVX's ymm above xmm on x86-64, SVE's z above the 128-bit v on aarch64)
 * are not part of the legacy FP/SIMD state: a remote call that saves and
 * restores only that would give the thread back zeroes there.
 *
 *   vregs STOP      prints "ready PID VL" (VL: the register's bytes), then
 *                   until the file STOP exists fills one vector register
 *                   with 0x5a in every byte, spins without a system call,
 *                   and checks every byte of it, again and again. Exits 0
 *                   saying "vregs: N rounds, every byte kept", 1 at the
 *                   first byte lost (saying which), 3 when the CPU has no
 *                   such registers (AVX, SVE).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__aarch64__)
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <asm/hwcap.h>
#endif

#define PATTERN 0x5a
#define SPIN 2000000UL

#if defined(__x86_64__)
/*
 * With AVX-512, zmm16: glibc's string functions (EVEX) write ymm16 and up
 * in the call the thread is lent for, so only a restore of the whole
 * XSTATE gives it back. Else ymm8, whose upper half a VEX function's
 * vzeroupper clears.
 */
static int zmm;

static unsigned vl_bytes(void)
{
	__builtin_cpu_init();
	zmm = __builtin_cpu_supports("avx512f");
	return zmm ? 64 : __builtin_cpu_supports("avx") ? 32 : 0;
}

/* The register filled, the spin, the register stored: one asm block, so
 * that nothing the compiler emits can touch it in between. */
static void round_trip(uint8_t *out)
{
	unsigned long n = SPIN;

	if (zmm)
		__asm__ volatile("vmovdqu64 (%[pat]), %%zmm16\n\t"
				 "1: dec %[n]\n\t"
				 "jnz 1b\n\t"
				 "vmovdqu64 %%zmm16, (%[out])\n\t"
				 "vpxorq %%zmm16, %%zmm16, %%zmm16"
				 : [n] "+r"(n)
				 : [pat] "r"(out + 256), [out] "r"(out)
				 : "memory", "cc");
	else
		__asm__ volatile("vmovdqu (%[pat]), %%ymm8\n\t"
				 "1: dec %[n]\n\t"
				 "jnz 1b\n\t"
				 "vmovdqu %%ymm8, (%[out])\n\t"
				 "vzeroupper"
				 : [n] "+r"(n)
				 : [pat] "r"(out + 256), [out] "r"(out)
				 : "xmm8", "memory", "cc");
}
#elif defined(__aarch64__)
static unsigned vl_bytes(void)
{
	int vl;

	if (!(getauxval(AT_HWCAP) & HWCAP_SVE))
		return 0;
	vl = prctl(PR_SVE_GET_VL);
	return vl < 0 ? 0 : (unsigned)(vl & PR_SVE_VL_LEN_MASK);
}

static void round_trip(uint8_t *out)
{
	unsigned long n = SPIN;

	__asm__ volatile(".arch_extension sve\n\t"
			 "ptrue p0.b\n\t"
			 "mov z8.b, #0x5a\n\t"
			 "1: subs %[n], %[n], #1\n\t"
			 "b.ne 1b\n\t"
			 "st1b {z8.b}, p0, [%[out]]"
			 : [n] "+r"(n)
			 : [out] "r"(out)
			 : "v8", "memory", "cc");
}
#else
static unsigned vl_bytes(void)
{
	return 0;
}

static void round_trip(uint8_t *out)
{
	(void)out;
}
#endif

int main(int argc, char **argv)
{
	static uint8_t buf[512];	/* the register's bytes; x86-64: the pattern at +256 */
	unsigned vl = vl_bytes();
	unsigned long rounds = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: vregs STOPFILE\n");
		return 2;
	}
	if (!vl || vl > 256) {
		printf("vregs: no wide vector registers here (AVX, SVE)\n");
		return 3;
	}
	memset(buf + 256, PATTERN, 256);
	printf("ready %d %u\n", (int)getpid(), vl);
	fflush(stdout);
	do {
		memset(buf, 0, vl);
		round_trip(buf);
		for (unsigned i = 0; i < vl; i++)
			if (buf[i] != PATTERN) {
				printf("vregs: round %lu: byte %u of %u is 0x%02x, not 0x%02x: lost\n",
				       rounds, i, vl, buf[i], PATTERN);
				return 1;
			}
		rounds++;
	} while (access(argv[1], F_OK));
	printf("vregs: %lu rounds, every byte kept\n", rounds);
	return 0;
}
