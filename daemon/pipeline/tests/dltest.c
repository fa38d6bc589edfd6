// SPDX-License-Identifier: GPL-2.0
/* A library the test child dlopens after the daemon took its maps snapshot. */
#include <stddef.h>

static volatile int sink;

__attribute__((noinline)) size_t dl_entry(size_t (*fn)(void *, size_t), void *buf, size_t cap)
{
	size_t r = fn(buf, cap);

	sink += (int)r;
	return r + sink * 0;
}
