/* SPDX-License-Identifier: GPL-2.0 */
#ifndef HP_PIPELINE_ARCH_H
#define HP_PIPELINE_ARCH_H
/*
 * The pipeline's architecture seam: arch/<arch>.h maps libunwind's
 * register numbers of the daemon's own architecture to a record's
 * (uapi HEAPPROFD_<ARCH>_*) and says how a frame record links to its
 * caller. The daemon unwinds the records of its own architecture
 * (parse.c checks HEAPPROFD_ARCH_NATIVE); everything else reads a
 * record's registers through the uapi's accessors.
 */
#include <libunwind.h>

#include "../../uapi/linux/heapprofd.h"

#if defined(__x86_64__)
#include "arch/x86_64.h"
#elif defined(__aarch64__)
#include "arch/aarch64.h"
#else
#error "heapprofd pipeline: no architecture file for this target (write daemon/pipeline/arch/<arch>.h)"
#endif
#endif
