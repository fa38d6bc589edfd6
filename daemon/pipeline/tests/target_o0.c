// SPDX-License-Identifier: GPL-2.0
/* A known call chain, built -O0 -fno-omit-frame-pointer. */
#include "capture.h"

static volatile int sink;

__attribute__((noinline)) static size_t o0_level3(void *buf, size_t cap)
{
	size_t r = hp_test_capture(buf, cap, 0x1000, 100, 1);

	sink++;
	return r;
}

__attribute__((noinline)) static size_t o0_level2(void *buf, size_t cap)
{
	size_t r = o0_level3(buf, cap);

	sink++;
	return r;
}

__attribute__((noinline)) size_t o0_level1(void *buf, size_t cap)
{
	size_t r = o0_level2(buf, cap);

	sink++;
	return r;
}
