/* SPDX-License-Identifier: GPL-2.0 */
#ifndef HP_PYFRAMES_H
#define HP_PYFRAMES_H
#include <stdint.h>

#include "../uapi/linux/heapprofd.h"

/* Look for a CPython whose frames we can read (once, at start or attach). */
void hp_py_init(void);
/* The sampling thread's Python frames: how many (at most
 * HEAPPROFD_PYFRAMES_MAX), then the same frames written, innermost first
 * (at most max); 0 when the thread runs no Python or it is off. */
uint32_t hp_py_count(void);
uint32_t hp_py_write(struct heapprofd_pyframe *out, uint32_t max);
#endif
