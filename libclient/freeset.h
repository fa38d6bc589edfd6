/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The set of sampled live addresses. A free has to learn whether its
 * address was sampled; almost never is it, so the lookup must be a few
 * nanoseconds with no lock and no write to shared memory:
 *
 *   0. one word saying what the filter is (zero: the set is empty);
 *   1. a filter of one-byte counters indexed by a hash of the address
 *      (zero: certainly not in the set; nothing else is read);
 *   2. otherwise an open-addressing table with linear probing, read
 *      without a lock.
 *
 * The filter grows with the set, so that about one free in eight or fewer
 * gets past it for nothing: 2^15 counters to start with, doubled when the
 * set holds more than one entry per 8 counters, up to 2^18 (a program
 * keeping 150 MB alive at a 4 KiB interval has ~37000 sampled blocks
 * alive; a fixed 2^15 let two frees in three through). A growth builds the
 * larger filter from the table in the other of two arrays and publishes
 * it with a new generation in that word; a lookup whose byte is zero reads
 * the word again and starts over if it changed, so that a lookup racing
 * with a growth (or with the clearing of a retired array) never answers a
 * false no. Pages of the arrays that were never used are never touched.
 *
 * Mutations (a sample inserts, the free of a sampled address removes) are
 * rare and already pay for a ring record, so they take a mutex. Removal
 * leaves a tombstone so lock-free readers never miss a key beyond it (at
 * the end of a probe chain, where no key lies beyond, the slot is emptied
 * instead); the table is rebuilt into a fresh one (published with a store)
 * when it fills.
 * A lookup that got past the filter (rare) announces itself in one of two
 * reader counters, chosen by an epoch it re-checks after counting itself;
 * a rebuild flips the epoch and waits until the old counter is zero before
 * it unmaps the old table (a grace period in the manner of RCU: lookups are
 * a few dozen instructions, so the wait is short).
 *
 * An address is inserted after the allocator returned it and removed before
 * it is handed back to the allocator, so a reader that can see an address
 * (it got it from the program) sees the table it was inserted into. The one
 * exception is realloc (hooks.c), which removes the old address only after
 * the real realloc succeeded: another thread may then insert the same
 * address first. The set is a multiset for that reason: every insert adds
 * one entry and every remove takes one away.
 *
 * The set serves allocators other than glibc's, and heaps a program
 * registers (heaps.c); glibc's sampled blocks are marked instead (mark.h).
 */
#ifndef HP_FREESET_H
#define HP_FREESET_H

#include <pthread.h>
#include <stdint.h>

#define HP_FS_EMPTY	0ULL
#define HP_FS_TOMB	1ULL
#define HP_FS_FILTER_BITS_MIN 15	/* 32 KiB of counters to start with */
#define HP_FS_FILTER_BITS_MAX 18	/* 256 KiB at most */
#define HP_FS_FILTER_LOAD_SHIFT 3	/* grow past one entry per 8 counters */
#define HP_FS_MIN_SLOTS 1024

struct hp_fs_table {
	uint64_t mask;
	uint32_t shift;
	uint64_t used;		/* live + tombstones */
	uint64_t live;
	uint64_t slots[];
};

struct hp_freeset {
	struct hp_fs_table *table;	/* current, read lock-free */
	/*
	 * The filter as lookups see it, read before anything else: 0 while
	 * the set is empty (a process with no sampled block alive answers
	 * every free with this one load), else HP_FS_FW(generation, array,
	 * bits). An address the program got from a sampled malloc was
	 * counted, and the word published, before that malloc returned, so a
	 * free of it cannot read zero here.
	 */
	uint64_t fword;
	pthread_mutex_t lock;
	/* A retired table no reader can be in any more, kept for the next
	 * rebuild of the same size: mapping a fresh table each time cost two
	 * system calls and page faults (the tombstones that frees leave in
	 * the middle of probe chains still call for a rebuild now and then). */
	struct hp_fs_table *spare;
	uint64_t bytes;			/* memory held by tables */
	uint64_t tables_mapped;		/* mmaps of tables, ever */
	uint64_t rebuilds;		/* tables built, ever */
	/* The filter's shape (lock), also while the set is empty. */
	uint64_t fgen;
	uint32_t fbits, farr;
	uint32_t fused[2];		/* the bits each array was last built at */
	uint32_t fgrowths;		/* filters built larger, ever */
	int fsticky;			/* a counter of the array in use reached 255 */
	/* lookups past the filter, in flight, by epoch; a line of their own */
	uint32_t epoch __attribute__((aligned(64)));
	uint32_t readers[2];
	uint8_t filter[2][1U << HP_FS_FILTER_BITS_MAX] __attribute__((aligned(64)));
};

/* The filter word: the array's index in bit 8, the hash's shift (64 - bits)
 * in the low byte, and the generation above them. */
#define HP_FS_FW(gen, arr, bits) \
	(((uint64_t)(gen) << 16) | ((uint64_t)(arr) << 8) | (uint64_t)(64 - (bits)))

static inline uint64_t hp_fs_hash(uint64_t key)
{
	return (key >> 3) * 0x9e3779b97f4a7c15ULL;
}

/* key's counter in the filter that the word w describes. */
static inline const uint8_t *hp_fs_counter(const struct hp_freeset *fs, uint64_t w,
					   uint64_t key)
{
	return &fs->filter[(w >> 8) & 1][hp_fs_hash(key) >> (w & 63)];
}

/* Is key (> HP_FS_TOMB) in the table? (Lock-free.) */
static inline int hp_fs_table_has(const struct hp_fs_table *t, uint64_t key)
{
	uint64_t i = hp_fs_hash(key) >> t->shift;

	for (;;) {
		uint64_t v = __atomic_load_n(&t->slots[i], __ATOMIC_RELAXED);

		if (v == key)
			return 1;
		if (v == HP_FS_EMPTY)
			return 0;
		i = (i + 1) & t->mask;
	}
}

/* The part of a lookup past the filter (freeset.c). */
int hp_freeset_lookup(struct hp_freeset *fs, uint64_t key);
/* The filter's answer, looked at again until its shape holds still
 * (freeset.c). */
int hp_freeset_filter_again(struct hp_freeset *fs, uint64_t key);

/*
 * The filter's quick look, with no call in it (a free's fast path tail-
 * calls the real free): 0 means certainly not in the set; nonzero that key
 * may be in it, or that the filter changed shape while it looked (the
 * caller then asks hp_freeset_filter).
 */
static inline int hp_freeset_filter_quick(struct hp_freeset *fs, uint64_t key)
{
	uint64_t w = __atomic_load_n(&fs->fword, __ATOMIC_ACQUIRE);

	if (__builtin_expect(!w, 1))
		return 0;
	if (__atomic_load_n(hp_fs_counter(fs, w, key), __ATOMIC_ACQUIRE))
		return 1;
	/* A zero counter: no, unless the filter changed shape meanwhile. */
	return __atomic_load_n(&fs->fword, __ATOMIC_ACQUIRE) != w;
}

/*
 * The filter alone: 0 means certainly not in the set. For a caller that
 * goes on to hp_freeset_remove anyway, which looks under the lock: the
 * lock-free table lookup would only add two locked read-modify-writes of
 * the reader counters to every sampled free.
 */
static inline int hp_freeset_filter(struct hp_freeset *fs, uint64_t key)
{
	if (__builtin_expect(!hp_freeset_filter_quick(fs, key), 1))
		return 0;
	return hp_freeset_filter_again(fs, key);
}

/* Lock-free: might key be in the set? (A "yes" is confirmed under the lock
 * by hp_freeset_remove.) Almost always answered by one byte of the filter. */
static inline int hp_freeset_maybe(struct hp_freeset *fs, uint64_t key)
{
	if (__builtin_expect(!hp_freeset_filter(fs, key), 1))
		return 0;
	return hp_freeset_lookup(fs, key);
}

void hp_freeset_init(struct hp_freeset *fs);
/* 0: inserted; -1: no memory (the sample is then not recorded as live). */
int hp_freeset_insert(struct hp_freeset *fs, uint64_t key);
/* 1: was present and is removed; 0: was not present. */
int hp_freeset_remove(struct hp_freeset *fs, uint64_t key);
/* Forget everything (fork child; single-threaded). */
void hp_freeset_reset(struct hp_freeset *fs);

uint64_t hp_freeset_live(struct hp_freeset *fs);

#endif /* HP_FREESET_H */
