/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The code set (uapi HEAPPROFD_ALLOC_STACK_SAME): the 2 MiB granules of
 * the process's executable mappings. record.c asks of each word of a
 * thread's stack "could this be a code address?" to decide which words can
 * steer an unwind (return addresses and saved stack pointers), and compares
 * only those with the thread's previous sample.
 *
 * The question is answered by a filter of HP_CODE_FILTER_BITS bits, one
 * per hash of a granule: every granule of the set has its bit, so a word
 * in the set's code always says yes; a word elsewhere says yes only if its
 * granule's hash meets one of the set's (a few in a thousand for a program
 * with a dozen granules), and is then compared when it need not be, which
 * costs a compare, never a wrong claim. One load and a few shifts a word,
 * no branch: the marks are made for every word a sample changes.
 *
 * Two filters, one published: a new set is built in the other one, its
 * record written to the daemon, and then published. A reader takes the
 * filter's generation before and after it looks (hp_code_begin and
 * hp_code_end): a filter rebuilt meanwhile (two refreshes during one
 * sample) has another generation, and the sample claims nothing.
 */
#ifndef HP_CODESET_H
#define HP_CODESET_H

#include <stdint.h>

#include "../uapi/linux/heapprofd.h"

#define HP_CODE_FILTER_SHIFT	12
#define HP_CODE_FILTER_BITS	(1U << HP_CODE_FILTER_SHIFT)

struct hp_codeset {
	uint32_t gen;			/* 0 while being built */
	uint32_t n;			/* granules in the set */
	uint64_t bits[HP_CODE_FILTER_BITS / 64];
};

/* The published set, or NULL (none yet, or the last one failed). */
extern struct hp_codeset *hp_code_cur;

/* A granule's bit in the filter. */
static inline uint32_t hp_code_bit(uint64_t v)
{
	uint64_t g = (v & HEAPPROFD_CODE_VA_MASK) >> HEAPPROFD_CODE_SHIFT;

	return (uint32_t)((g * 0x9e3779b97f4a7c15ULL) >> (64 - HP_CODE_FILTER_SHIFT));
}

/* 1 if v may be in the set's code (always when it is), else 0. */
static inline uint64_t hp_code_may(const struct hp_codeset *c, uint64_t v)
{
	uint32_t b = hp_code_bit(v);

	return (__atomic_load_n(&c->bits[b / 64], __ATOMIC_RELAXED) >> (b % 64)) & 1;
}

/* The published set and its generation (0: none, claim nothing). */
static inline const struct hp_codeset *hp_code_begin(uint32_t *gen)
{
	const struct hp_codeset *c = __atomic_load_n(&hp_code_cur, __ATOMIC_ACQUIRE);

	*gen = c ? __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE) : 0;
	return *gen ? c : NULL;
}

/* Was the set the same all along since hp_code_begin? */
static inline int hp_code_end(const struct hp_codeset *c, uint32_t gen)
{
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	return __atomic_load_n(&c->gen, __ATOMIC_RELAXED) == gen;
}

/*
 * Build a new set from /proc/self/maps, write its HEAPPROFD_REC_CODE
 * record and publish it; with hp_lock held. Returns 0, or -1 (nothing is
 * published then: samples claim nothing until the next refresh).
 */
int hp_codeset_refresh(void);

/* A new session (fork child, exec, attach): no set until it writes one. */
void hp_codeset_forget(void);

#endif
