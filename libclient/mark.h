/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Marked blocks: how a free tells a sampled block from all the others
 * without looking anything up.
 *
 * With glibc's allocator (hooks.c checks that once), a sampled block is
 * allocated with some bytes more in front of it: HP_MARK_OFF, or its
 * alignment if that is larger. The program gets the address after them,
 * and the two words just below that address hold
 *
 *   u[-2]  the mark: a per-process random key xor the address u,
 *   u[-1]  the offset back to the block glibc handed out.
 *
 * A free reads u[-1] anyway (glibc's chunk header, for the exact
 * counters), and u[-2] lies in the same 16 bytes, so looking for the mark
 * costs one load from a cache line already being read and one compare:
 * no hash, no filter, no table (freeset.h), whatever the number of sampled
 * blocks alive.
 *
 * For any other block u[-2] is glibc's prev_size field: the last word of
 * the block before, or what an old block left there. It equals the mark
 * only by chance (2^-64 for data that never saw the key) or as a stale
 * copy of a mark for the same address, from a marked block freed before.
 * So a match is only a question, which the set of marked blocks
 * (hp_fs_malloc in hooks.c, freeset.h) answers exactly: a marked block's
 * entry goes in before the program sees its address (its room reserved
 * before the block is made, so the insert cannot fail), and is taken out,
 * or held for a realloc, before glibc gets the block back. Only then is
 * the offset trusted.
 *
 * Every free of the process must come through the client: a marked block
 * handed to glibc's free directly would be a wrong pointer to it. An
 * LD_PRELOAD'ed or /etc/ld.so.preload'ed client interposes them all; a
 * client loaded into a running process (attach without the client, to
 * come) must not mark.
 *
 * The cost: the offset's bytes on each sampled block alive (16, or the
 * alignment; alignments above HP_MARK_ALIGN_MAX are not sampled), and a
 * copy when realloc turns a plain block into a marked one.
 */
#ifndef HP_MARK_H
#define HP_MARK_H

#include <stddef.h>
#include <stdint.h>

#define HP_MARK_OFF 16U
/* Larger alignments are not sampled: their offset would cost too much. */
#define HP_MARK_ALIGN_MAX ((size_t)16 << 20)

/* The key (never 0 once set); 0 while marking is off (not glibc's heap). */
extern uint64_t hp_mark_key;
/* Set before the first marked block is handed out, never cleared: from
 * then on every path that frees or resizes a block looks for the mark. */
extern int hp_marks_made;

static inline uint64_t hp_mark_of(const void *u)
{
	return ((const uint64_t *)u)[-2] ^ (uint64_t)(uintptr_t)u;
}

/* Might u be a marked block? (Confirmed by the caller in the sets.) */
static inline int hp_mark_matches(const void *u)
{
	return hp_mark_of(u) == hp_mark_key;
}

/* The offset of a confirmed marked block. */
static inline size_t hp_mark_off(const void *u)
{
	return (size_t)((const uint64_t *)u)[-1];
}

static inline void *hp_mark_base(void *u)
{
	return (uint8_t *)u - hp_mark_off(u);
}

/* Mark the block glibc returned at base, off bytes in: the program's
 * address. */
static inline void *hp_mark_put(void *base, size_t off)
{
	uint64_t *u = (uint64_t *)((uint8_t *)base + off);

	u[-2] = hp_mark_key ^ (uint64_t)(uintptr_t)u;
	u[-1] = off;
	return u;
}

/* The offset for an alignment: a power of two, at least HP_MARK_OFF
 * (memalign rounds other alignments up the same way). */
static inline size_t hp_mark_off_for(size_t align)
{
	size_t a = HP_MARK_OFF;

	while (a < align && a <= (SIZE_MAX >> 1))
		a <<= 1;
	return a;
}

#endif /* HP_MARK_H */
