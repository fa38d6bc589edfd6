// SPDX-License-Identifier: GPL-2.0
/*
 * Marked blocks (mark.h): a block glibc makes never has the tag below it,
 * whatever its size or alignment; a marked block is recognised with its
 * offset, quiet until the daemon is told of it and again in a fork child;
 * a tag word with the wrong key or an offset marks never have is not a
 * mark; an unmarked block is not one any more.
 */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "mark.h"
#include "../../tests/tap.h"

uint64_t hp_mark_key;
uint32_t hp_mark_gen;
int hp_marks_made;

/* The word below p, read as memory (it is outside the block). */
static uint64_t below(const void *p)
{
	const uint64_t *w = p;

	__asm__("" : "+r"(w));
	return w[-1];
}

static void test_glibc_blocks(void)
{
#if defined(__SANITIZE_ADDRESS__)
	tap_ok(1, "mark: glibc's blocks # SKIP ASan's allocator replaces glibc's");
#else
	static const size_t sizes[] = { 0, 1, 16, 24, 100, 1000, 4096, 70000, 300000, 5 << 20 };
	static const size_t aligns[] = { 32, 64, 4096, 1 << 20 };
	size_t i, j, n = 0, tagged = 0;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		void *p = malloc(sizes[i]), *q = calloc(1, sizes[i] + 1), *r;

		tagged += hp_mark_tagged(below(p)) + hp_mark_tagged(below(q));
		r = realloc(q, sizes[i] * 2 + 1);
		tagged += hp_mark_tagged(below(r));
		n += 3;
		for (j = 0; j < sizeof(aligns) / sizeof(aligns[0]); j++) {
			void *a = memalign(aligns[j], sizes[i]);

			tagged += hp_mark_tagged(below(a));
			n++;
			free(a);
		}
		free(p);
		free(r);
	}
	tap_ok(n == 70 && !tagged,
	       "mark: none of %zu blocks glibc made (malloc, calloc, realloc, memalign; small, "
	       "large, mmap'ed) has the tag below it (%zu have)", n, tagged);
#endif
}

static void test_words(void)
{
	uint64_t buf[64] __attribute__((aligned(64)));
	uint8_t *base = (uint8_t *)buf;
	void *u;
	int ok = 1;

	memset(buf, 0x5a, sizeof(buf));
	hp_mark_key = 0x1234567890abcdefULL;
	hp_mark_gen = 7;
	u = hp_mark_put(base, 16);
	ok &= u == base + 16 && hp_mark_matches(u) && hp_mark_off(u) == 16 &&
	      hp_mark_base(u) == base && hp_mark_tagged(below(u));
	ok &= hp_mark_quiet(u);		/* until the daemon is told */
	hp_mark_loud(u);
	ok &= !hp_mark_quiet(u) && hp_mark_matches(u) && hp_mark_off(u) == 16;
	tap_ok(ok, "mark: a marked block has its offset and base, quiet until made loud");

	/* A fork child: the parent's blocks are quiet, its own are not. */
	hp_mark_gen = 8;
	ok = hp_mark_matches(u) && hp_mark_quiet(u) && hp_mark_base(u) == base;
	u = hp_mark_put(base + 256, 64);
	hp_mark_loud(u);
	ok &= hp_mark_matches(u) && !hp_mark_quiet(u) && hp_mark_off(u) == 64;
	/* The generation wraps within its bits. */
	hp_mark_gen = HP_MARK_GEN_MASK;
	u = hp_mark_put(base + 128, 16);
	hp_mark_loud(u);
	ok &= !hp_mark_quiet(u);
	hp_mark_gen = (hp_mark_gen + 1) & HP_MARK_GEN_MASK;
	ok &= hp_mark_quiet(u) && hp_mark_matches(u);
	tap_ok(ok, "mark: after a fork the inherited marked blocks are quiet and still marked");

	/* Not marks: the wrong key, offsets marks never have, marking off,
	 * an unmarked block. */
	hp_mark_gen = 0;
	u = hp_mark_put(base, 16);
	ok = 1;
	((uint64_t *)u)[-2] ^= 1;
	ok &= hp_mark_tagged(below(u)) && !hp_mark_matches(u);
	((uint64_t *)u)[-2] ^= 1;
	ok &= hp_mark_matches(u);
	((uint64_t *)u)[-1] += 16;		/* 32: a power of two, still fine */
	ok &= hp_mark_matches(u);
	((uint64_t *)u)[-1] += 16;		/* 48 */
	ok &= !hp_mark_matches(u);
	((uint64_t *)u)[-1] = (((uint64_t *)u)[-1] & ~HP_MARK_OFF_MASK) | 0x2000000;	/* 32 MiB */
	ok &= !hp_mark_matches(u);
	((uint64_t *)u)[-1] &= ~HP_MARK_OFF_MASK;	/* 0 */
	ok &= !hp_mark_matches(u);
	u = hp_mark_put(base, 16);
	hp_mark_key = 0;
	ok &= !hp_mark_matches(u);
	hp_mark_key = 0x1234567890abcdefULL;
	hp_mark_clear(u);
	ok &= !hp_mark_tagged(below(u)) && !hp_mark_matches(u);
	tap_ok(ok, "mark: a wrong key, an offset that is no power of two, too large or 0, "
	       "marking off, or a cleared block: no mark");
}

int main(void)
{
	test_glibc_blocks();
	test_words();
	return tap_failed ? 1 : 0;
}
