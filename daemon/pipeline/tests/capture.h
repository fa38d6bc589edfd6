/* SPDX-License-Identifier: GPL-2.0 */
/* Test harness: make genuine allocation records without the client. */
#ifndef HP_TEST_CAPTURE_H
#define HP_TEST_CAPTURE_H
#include <stddef.h>
#include <stdint.h>

/* Build a full HEAPPROFD_REC_ALLOC record for the caller's stack in buf. */
size_t hp_test_capture(void *buf, size_t cap, uint64_t addr, uint64_t size, uint64_t seq);
void hp_test_stack_init(void);

/* Call chains ending in hp_test_capture (target_o0.c / target_o2.c). */
size_t o0_level1(void *buf, size_t cap);
size_t o2_level1(void *buf, size_t cap);
size_t o2_recurse(int depth, void *buf, size_t cap);
#endif
