/* SPDX-License-Identifier: GPL-2.0 */
/* Editing /etc/ld.so.preload for whole-system profiling (heapprofctl). */
#ifndef HPD_PRELOAD_H
#define HPD_PRELOAD_H
#include <stddef.h>

#define HP_PRELOAD_FILE	"/etc/ld.so.preload"
#define HP_PRELOAD_LIB	"/usr/lib/heapprofd/libheapprofd_client.so"

/*
 * Add lib to the preload file unless some entry already names it; other
 * entries are kept as they are; the file is replaced atomically with its
 * mode kept. Returns 0 added, 1 already there, -errno (err says why).
 */
int hp_preload_add(const char *file, const char *lib, char *err, size_t errlen);
/*
 * Remove every entry naming lib or any other libheapprofd_client.so; other
 * entries stay. An emptied file is removed. Returns 0 removed, 1 absent,
 * -errno.
 */
int hp_preload_remove(const char *file, const char *lib, char *err, size_t errlen);
/* 1 if the file names lib (or another libheapprofd_client.so). */
int hp_preload_present(const char *file, const char *lib);

#endif
