// SPDX-License-Identifier: GPL-2.0
/*
 * The same chain built -O2 -fomit-frame-pointer: only DWARF call frame
 * information can unwind through it. The extra work around each call keeps
 * the compiler from turning the calls into jumps.
 */
#include "capture.h"

static volatile int sink;

__attribute__((noinline)) static size_t o2_level3(void *buf, size_t cap)
{
	size_t r = hp_test_capture(buf, cap, 0x2000, 200, 2);

	sink += (int)r;
	return r + sink * 0;
}

/* Inlined into o2_level2: the profile must still show it as a frame. */
static inline __attribute__((always_inline)) size_t o2_inlined(void *buf, size_t cap)
{
	size_t r = o2_level3(buf, cap);

	sink += (int)r;
	return r;
}

__attribute__((noinline)) static size_t o2_level2(void *buf, size_t cap)
{
	size_t r = o2_inlined(buf, cap);

	sink += (int)r;
	return r + sink * 0;
}

__attribute__((noinline)) size_t o2_level1(void *buf, size_t cap)
{
	size_t r = o2_level2(buf, cap);

	sink += (int)r;
	return r + sink * 0;
}

/* depth frames of o2_recurse, then the capture (for the benchmark). */
__attribute__((noinline)) size_t o2_recurse(int depth, void *buf, size_t cap)
{
	size_t r;

	if (depth <= 1)
		r = hp_test_capture(buf, cap, 0x3000, 64, 3);
	else
		r = o2_recurse(depth - 1, buf, cap);
	sink += (int)r;
	return r + sink * 0;
}
