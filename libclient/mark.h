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
 *   u[-2]  the key: a per-process random value xor the address u;
 *   u[-1]  the tag word: HP_MARK_TAG in the top byte, the fork generation
 *          the block was made in, the offset back to the block glibc
 *          handed out, and the QUIET flag.
 *
 * For every block glibc hands out, the word below the address, u[-1], is
 * the chunk's size field: glibc writes it when it makes the chunk, and a
 * size is below 2^57 on any x86-64 (four- or five-level page tables) and
 * below 2^52 on arm64 (at most 52-bit user addresses), so its top byte is
 * never the tag. So only a marked block's u[-1] carries
 * the tag; nothing the program writes into its blocks can put it there
 * for a block glibc made. A free reads u[-1] anyway (the chunk header, for
 * the exact counters), so the common free pays one compare of a word it
 * loads regardless: no table, no filter, whatever the number of sampled
 * blocks alive. u[-2], in the same 16 bytes, is checked as well before
 * the offset is trusted, so that a pointer glibc never made (whose u[-1]
 * is anything at all) is handed to glibc as it is and diagnosed there.
 *
 * The rest of a marked block's state lives in its tag word too:
 * - QUIET: the daemon was not told of the block (its record was dropped,
 *   its heap is off, or a realloc kept it marked but unsampled), so its
 *   free writes no record;
 * - the generation: a fork child counts one more (fork.c), so the blocks
 *   it inherited are quiet for it (its daemon never saw them) while they
 *   are still marked blocks it must free at their base. (24 bits: only a
 *   chain of 2^24 nested forks could meet its own ancestor's blocks with
 *   the same generation again.)
 * Nothing else is kept anywhere: a block's state is written by the thread
 * that makes it, before the program sees its address, and read by the one
 * that frees it.
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

/* The tag word: tag (8 bits) | generation (24) | offset (32, its low 4
 * bits the flags: offsets are multiples of 16). */
#define HP_MARK_TAG		0xa5ULL
#define HP_MARK_TAG_SHIFT	56
#define HP_MARK_GEN_SHIFT	32
#define HP_MARK_GEN_MASK	0xffffffULL
#define HP_MARK_OFF_MASK	0xfffffff0ULL
#define HP_MARK_QUIET		1ULL

/* The key (never 0 once set); 0 while marking is off (not glibc's heap). */
extern uint64_t hp_mark_key;
/* The process's fork generation (one more in each fork child). */
extern uint32_t hp_mark_gen;
/* Set before the first marked block is handed out, never cleared: from
 * then on every path that frees or resizes a block looks for the mark. */
extern int hp_marks_made;

/* Does the word below a block say "marked"? (No block glibc made has it:
 * the one test a free makes, on the word it reads anyway.) */
static inline int hp_mark_tagged(uint64_t below)
{
	return (below >> HP_MARK_TAG_SHIFT) == HP_MARK_TAG;
}

/* Is u a marked block? The tag, the key, and an offset marks can have. */
static inline int hp_mark_matches(const void *u)
{
	const uint64_t *w = u;
	uint64_t t = w[-1], off = t & HP_MARK_OFF_MASK;

	return hp_mark_tagged(t) && hp_mark_key &&
	       (w[-2] ^ (uint64_t)(uintptr_t)u) == hp_mark_key &&
	       off >= HP_MARK_OFF && off <= HP_MARK_ALIGN_MAX && !(off & (off - 1));
}

/* The offset of a marked block. */
static inline size_t hp_mark_off(const void *u)
{
	return (size_t)(((const uint64_t *)u)[-1] & HP_MARK_OFF_MASK);
}

static inline void *hp_mark_base(void *u)
{
	return (uint8_t *)u - hp_mark_off(u);
}

/* Is a marked block unknown to this process's daemon (no record for its
 * free)? Quiet, or made before the last fork. */
static inline int hp_mark_quiet(const void *u)
{
	uint64_t t = ((const uint64_t *)u)[-1];

	return (t & HP_MARK_QUIET) ||
	       ((t >> HP_MARK_GEN_SHIFT) & HP_MARK_GEN_MASK) != hp_mark_gen;
}

/* The daemon was told of the marked block u: its free is recorded. */
static inline void hp_mark_loud(void *u)
{
	((uint64_t *)u)[-1] &= ~HP_MARK_QUIET;
}

/* Mark the block glibc returned at base, off bytes in, as a quiet one of
 * this generation: the program's address. */
static inline void *hp_mark_put(void *base, size_t off)
{
	uint64_t *u = (uint64_t *)((uint8_t *)base + off);

	u[-2] = hp_mark_key ^ (uint64_t)(uintptr_t)u;
	u[-1] = HP_MARK_TAG << HP_MARK_TAG_SHIFT |
		((uint64_t)hp_mark_gen & HP_MARK_GEN_MASK) << HP_MARK_GEN_SHIFT |
		(uint64_t)off | HP_MARK_QUIET;
	return u;
}

/* Unmark u before its block goes back to glibc: a stale tag word in freed
 * memory is never taken for a mark (a block glibc makes at u writes its
 * size there), but a program's second free of u then reaches glibc as the
 * wrong pointer it is. */
static inline void hp_mark_clear(void *u)
{
	((uint64_t *)u)[-1] = 0;
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
