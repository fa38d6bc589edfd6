/* SPDX-License-Identifier: GPL-2.0 */
#ifndef HP_ARCH_H
#define HP_ARCH_H
/*
 * The client's architecture seam: each architecture has arch/<arch>.h
 * (inline: register capture, the 64-byte compare of the stack delta, the
 * write prefetch) and arch/<arch>.c (the stack copy into the ring). The
 * Makefile compiles the .c of the compiler's target; this picks the .h.
 * HEAPPROFD_ARCH_NATIVE and HEAPPROFD_NREGS_NATIVE (uapi) name its
 * register set.
 */
#include <stddef.h>
#include <stdint.h>

#include "../uapi/linux/heapprofd.h"

#if defined(__x86_64__)
#include "arch/x86_64.h"
#elif defined(__aarch64__)
#include "arch/aarch64.h"
#else
#error "libheapprofd_client: no architecture file for this target (write libclient/arch/<arch>.h and .c)"
#endif

/* arch/<arch>.c: copy n bytes of stack into the ring (dst), with the
 * stores that suit a buffer another process reads. */
void hp_arch_copy_out(uint8_t *dst, const uint8_t *src, size_t n);

/* arch/<arch>.c: once, at start-up: choose how hp_arch_copy_out copies. */
void hp_stack_copy_init(void);
#endif
