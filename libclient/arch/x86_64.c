// SPDX-License-Identifier: GPL-2.0
/*
 * x86-64's stack copy into the ring (arch.h): streaming stores as wide as
 * the processor has.
 */
#include <immintrin.h>
#include <string.h>

#include "../arch.h"

/*
 * Copy a stack into the ring. Large copies use non-temporal stores: the
 * ring is written once by us and read by another process, so pulling its
 * lines into our cache (from the daemon's cache, where its zeroing left
 * them) only evicts the program's data and is slower. The widest streaming
 * store the processor has is used: a whole 64-byte line per store fills a
 * write-combining buffer at once (16 KiB, the daemon's core zeroing each
 * copy: 16-byte stores 1.6 us, 32-byte 1.5 us, 64-byte 1.35 us; plain
 * memcpy 1.5-2.2 us). The sfence orders the streaming stores before the
 * record's release-store commit.
 */
#define HP_STREAM_MIN 2048

static void stream_16(uint8_t *dst, const uint8_t *src, size_t n)
{
	for (; n >= 64; dst += 64, src += 64, n -= 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)src);
		__m128i b = _mm_loadu_si128((const __m128i *)(src + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(src + 32));
		__m128i d = _mm_loadu_si128((const __m128i *)(src + 48));

		_mm_stream_si128((__m128i *)dst, a);
		_mm_stream_si128((__m128i *)(dst + 16), b);
		_mm_stream_si128((__m128i *)(dst + 32), c);
		_mm_stream_si128((__m128i *)(dst + 48), d);
	}
}

__attribute__((target("avx2"))) static void stream_32(uint8_t *dst, const uint8_t *src,
						      size_t n)
{
	for (; n >= 64; dst += 64, src += 64, n -= 64) {
		__m256i a = _mm256_loadu_si256((const __m256i *)src);
		__m256i b = _mm256_loadu_si256((const __m256i *)(src + 32));

		_mm256_stream_si256((__m256i *)dst, a);
		_mm256_stream_si256((__m256i *)(dst + 32), b);
	}
}

__attribute__((target("avx512f"))) static void stream_64(uint8_t *dst, const uint8_t *src,
							 size_t n)
{
	for (; n >= 64; dst += 64, src += 64, n -= 64)
		_mm512_stream_si512((void *)dst, _mm512_loadu_si512((const void *)src));
}

static void (*stream_lines)(uint8_t *dst, const uint8_t *src, size_t n);

/*
 * Once, at start-up (the constructor): pick the widest streaming store.
 * 512-bit stores only where they do not lower the core's clock: AVX512-VBMI2
 * marks Ice Lake and later, and AMD's Zen 4, where they do not; on Skylake
 * and Cascade Lake servers (AVX-512 without VBMI2) they may, and the program
 * around us would pay for it, so those get 256-bit stores.
 */
void hp_stack_copy_init(void)
{
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vbmi2"))
		stream_lines = stream_64;
	else if (__builtin_cpu_supports("avx2"))
		stream_lines = stream_32;
	else
		stream_lines = stream_16;
}

void hp_arch_copy_out(uint8_t *dst, const uint8_t *src, size_t n)
{
	void (*lines)(uint8_t *, const uint8_t *, size_t) = stream_lines;
	size_t head, body;

	if (n < HP_STREAM_MIN || !lines) {
		memcpy(dst, src, n);
		return;
	}
	/* Up to the next line boundary with ordinary stores, then whole
	 * lines, then the tail. */
	head = (64 - ((uintptr_t)dst & 63)) & 63;
	memcpy(dst, src, head);
	dst += head;
	src += head;
	n -= head;
	body = n & ~(size_t)63;
	lines(dst, src, body);
	memcpy(dst + body, src + body, n - body);
	_mm_sfence();
}
