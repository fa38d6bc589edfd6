// SPDX-License-Identifier: GPL-2.0
/*
 * aarch64's stack copy into the ring (arch.h). Plain memcpy: the
 * non-temporal pair stores (STNP) that would keep the ring's lines out of
 * the program's cache, as x86-64's streaming stores do, are left until
 * they can be measured on arm64 hardware (under QEMU's TCG the cache is
 * not modelled, so a figure there would say nothing).
 */
#include <string.h>

#include "../arch.h"

void hp_stack_copy_init(void)
{
}

void hp_arch_copy_out(uint8_t *dst, const uint8_t *src, size_t n)
{
	memcpy(dst, src, n);
}
