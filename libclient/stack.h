/* SPDX-License-Identifier: GPL-2.0 */
#ifndef HP_STACK_H
#define HP_STACK_H
#include <stdint.h>

#include "arch.h"

/* Copy min(want, top - sp) bytes of stack from the captured sp to dst;
 * returns the bytes copied. */
uint32_t hp_stack_copy(const uint64_t *regs, uint8_t *dst, uint64_t top,
		       uint32_t want);
#endif
