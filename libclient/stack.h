/* SPDX-License-Identifier: GPL-2.0 */
#ifndef HP_STACK_H
#define HP_STACK_H
#include <stdint.h>

/* Take the registers (HEAPPROFD_X86_64_* order) into regs and copy the
 * stack from the captured sp upwards, at most min(cap, room) bytes and never
 * past top. Returns the bytes copied. */
uint32_t hp_stack_capture(uint64_t *regs, uint8_t *dst, uint32_t room,
			  uint64_t top, uint32_t cap, int *truncated);
/* Choose how large copies are made (the processor's widest streaming
 * store); before it runs, copies use memcpy. */
void hp_stack_copy_init(void);
#endif
