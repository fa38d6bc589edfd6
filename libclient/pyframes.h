/* SPDX-License-Identifier: GPL-2.0 */
#ifndef HP_PYFRAMES_H
#define HP_PYFRAMES_H
#include <stdint.h>

#include "../uapi/linux/heapprofd.h"

/* Look for a CPython whose frames we can read (once, at start or attach). */
void hp_py_init(void);
/* The sampling thread's innermost Python frame, or 0 (no Python in this
 * thread, or Python frames off). */
uintptr_t hp_py_top(void);
/* From that frame: how many (at most HEAPPROFD_PYFRAMES_MAX), then the
 * same frames written, innermost first (at most max). */
uint32_t hp_py_count(uintptr_t top);
uint32_t hp_py_write(uintptr_t top, struct heapprofd_pyframe *out, uint32_t max);
#endif
