/* SPDX-License-Identifier: GPL-2.0 */
/*
 * heapprofd client API for custom allocators.
 *
 * A pool, arena or slab allocator registers a heap of its own and reports
 * its allocations and frees; the daemon then shows it as a separate heap
 * next to "libc.malloc". Allocations are sampled like malloc's (seed 000),
 * with the heap's own interval.
 *
 * The functions live in libheapprofd_client.so, which is normally loaded
 * with LD_PRELOAD. A program that should also run without it declares them
 * weak and checks before calling:
 *
 *   #define HEAPPROFD_CLIENT_WEAK
 *   #include <heapprofd_client.h>
 *
 *   int heap = heapprofd_register_heap ?
 *              heapprofd_register_heap("my_pool", 0) : -1;
 *   ...
 *   if (heap >= 0)
 *           heapprofd_report_alloc(heap, obj, size);
 *
 * With HEAPPROFD_CLIENT_WEAK defined the declarations below carry
 * __attribute__((weak)): when the client is absent their addresses are
 * NULL, and the program links without -lheapprofd_client.
 *
 * All three functions are thread-safe and never block on the daemon for
 * longer than the configured bound. They do nothing while the client is
 * not profiling (dormant, or no daemon).
 */
#ifndef HEAPPROFD_CLIENT_H
#define HEAPPROFD_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef HEAPPROFD_CLIENT_WEAK
#define HEAPPROFD_CLIENT_DECL __attribute__((weak))
#else
#define HEAPPROFD_CLIENT_DECL
#endif

/*
 * Register a heap. name: up to 31 bytes shown by the daemon. interval: mean
 * bytes between samples, 0 for the process's malloc interval, 1 to record
 * every allocation. Returns the heap id (16..255) or -1 when the name is
 * empty or all ids are taken.
 */
HEAPPROFD_CLIENT_DECL int heapprofd_register_heap(const char *name,
						  uint64_t interval);

/*
 * An allocation of size bytes at addr (any unique id will do) in heap.
 * An address must be reported freed before it is reported allocated again.
 */
HEAPPROFD_CLIENT_DECL void heapprofd_report_alloc(int heap, const void *addr,
						  size_t size);

/* The object at addr in heap was freed. */
HEAPPROFD_CLIENT_DECL void heapprofd_report_free(int heap, const void *addr);

#ifdef __cplusplus
}
#endif

#endif /* HEAPPROFD_CLIENT_H */
