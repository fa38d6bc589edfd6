// SPDX-License-Identifier: GPL-2.0
/* The set of sampled live addresses: exactness, growth with tombstones,
 * and lock-free lookups racing with mutations (run under TSan too). */
#include <pthread.h>
#include <stdlib.h>

#include "../freeset.h"
#include "../../tests/tap.h"

static struct hp_freeset fs;

static void test_basic(void)
{
	uint64_t i, miss = 0, extra = 0;
	int round;

	hp_freeset_init(&fs);
	for (round = 0; round < 5; round++) {
		for (i = 1; i <= 20000; i++)
			if (hp_freeset_insert(&fs, (i + round * 7) << 4))
				miss++;
		for (i = 1; i <= 20000; i++)
			if (!hp_freeset_maybe(&fs, (i + round * 7) << 4))
				miss++;
		for (i = 1; i <= 20000; i++)
			if (hp_freeset_remove(&fs, ((i + round * 7) << 4) + 8))
				extra++;
		for (i = 1; i <= 20000; i++)
			if (!hp_freeset_remove(&fs, (i + round * 7) << 4))
				miss++;
	}
	for (i = 1; i <= 100000; i++)
		if (hp_freeset_maybe(&fs, i << 4))
			extra++;
	tap_ok(!miss && !extra && hp_freeset_live(&fs) == 0,
	       "freeset: 5 rounds of 20000 inserts/lookups/removes exact (miss %llu, extra %llu)",
	       (unsigned long long)miss, (unsigned long long)extra);
	tap_ok(fs.bytes < (2u << 20), "freeset: tables hold %llu KiB after churn",
	       (unsigned long long)(fs.bytes >> 10));
	hp_freeset_reset(&fs);
}

/* The steady state of a sampling process: a window of sampled blocks
 * alive, each freed (a tombstone) as a new one is sampled. The rebuilds
 * that clear the tombstones reuse the retired table instead of mapping. */
static void test_churn(void)
{
	uint64_t i, miss = 0;

	hp_freeset_init(&fs);
	for (i = 1; i <= 200000; i++) {
		hp_freeset_insert(&fs, i << 4);
		if (i > 200) {
			if (!hp_freeset_remove(&fs, (i - 200) << 4))
				miss++;
		}
	}
	tap_ok(!miss && hp_freeset_live(&fs) == 200 && fs.tables_mapped <= 3,
	       "freeset: 200000 samples through a window of 200: %llu tables mapped (a rebuild reuses the retired one), %llu KiB held",
	       (unsigned long long)fs.tables_mapped, (unsigned long long)(fs.bytes >> 10));
	/* A free at the end of a probe chain leaves no tombstone: the table
	 * does not fill with them (it used to be rebuilt every ~300 here). */
	tap_ok(fs.rebuilds <= 10, "freeset: that churn built %llu tables",
	       (unsigned long long)fs.rebuilds);
	hp_freeset_reset(&fs);
}

#define NT 4
#define PER 20000
static uint64_t lost[NT];

/* Each thread owns its keys: insert, look up lock-free, remove; while the
 * others force rebuilds. A lookup of an inserted key must never miss. */
static void *worker(void *arg)
{
	uint64_t t = (uint64_t)(uintptr_t)arg, i, base = (t + 1) << 40;

	for (i = 0; i < PER; i++) {
		uint64_t k = base + (i << 4);

		hp_freeset_insert(&fs, k);
		if (!hp_freeset_maybe(&fs, k))
			lost[t]++;
		if (i >= 64) {
			uint64_t old = base + ((i - 64) << 4);

			if (!hp_freeset_maybe(&fs, old) || !hp_freeset_remove(&fs, old))
				lost[t]++;
		}
		/* An address never inserted is not found. */
		if (hp_freeset_maybe(&fs, base + (i << 4) + 8) &&
		    hp_freeset_remove(&fs, base + (i << 4) + 8))
			lost[t]++;
	}
	return NULL;
}

static void test_threads(void)
{
	pthread_t th[NT];
	uint64_t bad = 0, j, k;
	int i;

	hp_freeset_init(&fs);
	for (i = 0; i < NT; i++)
		pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
	/* Meanwhile, rebuilds: the set grows past each table's half, twice
	 * over, and shrinks back; the filter grows twice (past 4096 and 8192
	 * entries) while the workers look up. */
	for (k = 1; k <= 2; k++) {
		for (j = 0; j < 12000; j++)
			hp_freeset_insert(&fs, ((uint64_t)k << 50) + (j << 4));
		for (j = 0; j < 12000; j++)
			hp_freeset_remove(&fs, ((uint64_t)k << 50) + (j << 4));
	}
	for (i = 0; i < NT; i++) {
		pthread_join(th[i], NULL);
		bad += lost[i];
	}
	tap_ok(!bad && hp_freeset_live(&fs) == NT * 64 && fs.rebuilds >= 3 && fs.fgrowths >= 2,
	       "freeset: %d threads racing lookups with inserts/removes/%llu rebuilds/%u filter growths: no key lost (%llu), live %llu",
	       NT, (unsigned long long)fs.rebuilds, fs.fgrowths, (unsigned long long)bad,
	       (unsigned long long)hp_freeset_live(&fs));
	hp_freeset_reset(&fs);
}

/* realloc may insert an address that is still in the set: a multiset. */
/* The keys that mean "empty" and "tombstone" in the table are never
 * members: looking them up or removing them finds nothing and changes
 * nothing (a free of NULL in a registered heap has key 0). */
static void test_reserved_keys(void)
{
	uint64_t i, live;
	int found = 0;

	hp_freeset_init(&fs);
	for (i = 1; i <= 100; i++)
		hp_freeset_insert(&fs, i << 4);
	for (i = 0; i < 10; i++)
		hp_freeset_remove(&fs, (i + 1) << 4);	/* leave tombstones */
	live = hp_freeset_live(&fs);
	found += hp_freeset_lookup(&fs, HP_FS_EMPTY) + hp_freeset_lookup(&fs, HP_FS_TOMB);
	found += hp_freeset_remove(&fs, HP_FS_EMPTY) + hp_freeset_remove(&fs, HP_FS_TOMB);
	found += hp_freeset_insert(&fs, HP_FS_EMPTY) == 0;
	tap_ok(!found && hp_freeset_live(&fs) == live && live == 90 &&
	       hp_freeset_lookup(&fs, 11 << 4) && !hp_freeset_lookup(&fs, 1 << 4),
	       "freeset: keys 0 and 1 are never found, removed or inserted (%d), live stays %llu",
	       found, (unsigned long long)hp_freeset_live(&fs));
	hp_freeset_reset(&fs);
}

static void test_twice(void)
{
	int r1, r2, r3, m1, m2;

	hp_freeset_init(&fs);
	hp_freeset_insert(&fs, 0x1230);
	hp_freeset_insert(&fs, 0x1230);
	r1 = hp_freeset_remove(&fs, 0x1230);
	m1 = hp_freeset_maybe(&fs, 0x1230);
	r2 = hp_freeset_remove(&fs, 0x1230);
	m2 = hp_freeset_maybe(&fs, 0x1230);
	r3 = hp_freeset_remove(&fs, 0x1230);
	tap_ok(r1 && m1 && r2 && !m2 && !r3 && hp_freeset_live(&fs) == 0,
	       "freeset: an address inserted twice is removed twice, then gone (%d %d %d %d %d)",
	       r1, m1, r2, m2, r3);
	hp_freeset_reset(&fs);
}

/*
 * The live count, and the filter-only check the free paths use before the
 * locked remove: no false "no" for a member, the count follows inserts and
 * removes (also of a duplicate), and an empty set answers no without
 * looking at the filter (its word is 0).
 */
static void test_nlive(void)
{
	uint64_t n0, n1, n2, n3, i;
	int miss = 0, f_empty;

	hp_freeset_init(&fs);
	n0 = hp_freeset_live(&fs);
	for (i = 1; i <= 300; i++)
		hp_freeset_insert(&fs, i * 48);
	hp_freeset_insert(&fs, 48);		/* a duplicate (realloc) */
	n1 = hp_freeset_live(&fs);
	for (i = 1; i <= 300; i++)
		miss += !hp_freeset_filter(&fs, i * 48);
	for (i = 1; i <= 300; i++)
		hp_freeset_remove(&fs, i * 48);
	n2 = hp_freeset_live(&fs);
	hp_freeset_remove(&fs, 48);
	n3 = hp_freeset_live(&fs);
	/* Empty again: no even for an address whose filter byte is set
	 * (the filter never forgets a byte that reached 255; make one). */
	for (i = 0; i < 300; i++)
		hp_freeset_insert(&fs, 0x5000);
	for (i = 0; i < 300; i++)
		hp_freeset_remove(&fs, 0x5000);
	f_empty = hp_freeset_filter(&fs, 0x5000) || hp_freeset_maybe(&fs, 0x5000);
	tap_ok(!n0 && n1 == 301 && !miss && n2 == 1 && !n3 && !f_empty && !hp_freeset_live(&fs),
	       "freeset: live count %llu -> %llu -> %llu -> %llu, filter finds every member (%d missed), empty set answers no (%d)",
	       (unsigned long long)n0, (unsigned long long)n1, (unsigned long long)n2,
	       (unsigned long long)n3, miss, f_empty);
	hp_freeset_reset(&fs);
}

/*
 * The filter grows with the set: a large set (a program keeping much
 * memory alive) still turns most non-members away at the filter, every
 * member passes it at every size, and an emptied set answers no at once.
 */
static void test_filter_growth(void)
{
	uint64_t i, miss = 0, pass = 0, n = 40000, probes = 200000;
	uint32_t bits;
	int empty_no;

	hp_freeset_init(&fs);
	for (i = 1; i <= n; i++) {
		hp_freeset_insert(&fs, i * 112);
		if (!hp_freeset_filter(&fs, i * 112) || !hp_freeset_filter(&fs, (i / 2 + 1) * 112))
			miss++;
	}
	for (i = 0; i < probes; i++)
		pass += hp_freeset_filter(&fs, (n + 1 + i) * 112);
	bits = fs.fbits;
	for (i = 1; i <= n; i++)
		if (!hp_freeset_remove(&fs, i * 112))
			miss++;
	empty_no = !fs.fword && !hp_freeset_filter(&fs, 112);
	tap_ok(!miss && bits == HP_FS_FILTER_BITS_MAX && fs.fgrowths == 3 &&
	       pass * 100 < probes * 20 && empty_no,
	       "freeset: the filter grows to 2^%u counters for %llu entries (%u growths), every member "
	       "passes it (%llu missed), %.1f%% of non-members do (2^15 counters would all be set), "
	       "empty answers no (%d)",
	       bits, (unsigned long long)n, fs.fgrowths, (unsigned long long)miss,
	       100.0 * (double)pass / (double)probes, empty_no);
	hp_freeset_reset(&fs);
	/* A reset (a fork child) with a grown filter full of counts: both
	 * arrays read as zeros again (whole pages are given back). */
	{
		size_t k, nonzero = 0;

		for (i = 1; i <= n; i++)
			hp_freeset_insert(&fs, i * 112);
		bits = fs.fbits;
		hp_freeset_reset(&fs);
		for (k = 0; k < sizeof(fs.filter); k++)
			nonzero += ((const uint8_t *)fs.filter)[k] != 0;
		tap_ok(bits == HP_FS_FILTER_BITS_MAX && !nonzero && !fs.fword && !fs.fbits &&
		       !hp_freeset_filter(&fs, 112),
		       "freeset: a reset with %llu entries and the filter at 2^%u leaves both arrays "
		       "zero (%zu bytes not) and the set empty",
		       (unsigned long long)n, bits, nonzero);
		hp_freeset_reset(&fs);
	}
}

int main(void)
{
	test_basic();
	test_churn();
	test_twice();
	test_reserved_keys();
	test_nlive();
	test_filter_growth();
	test_threads();
	return tap_failed ? 1 : 0;
}
