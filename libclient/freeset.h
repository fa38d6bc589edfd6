/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The set of sampled live addresses. A free has to learn whether its
 * address was sampled; almost never is it, so the lookup must be a few
 * nanoseconds with no lock and no write to shared memory:
 *
 *   0. the number of entries (zero: nothing is sampled and alive);
 *   1. a filter of one-byte counters indexed by a hash of the address
 *      (zero: certainly not in the set; nothing else is read);
 *   2. otherwise an open-addressing table with linear probing, read
 *      without a lock.
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
 */
#ifndef HP_FREESET_H
#define HP_FREESET_H

#include <pthread.h>
#include <stdint.h>

#define HP_FS_EMPTY	0ULL
#define HP_FS_TOMB	1ULL
#define HP_FS_FILTER_BITS 15		/* 32 KiB of counters */
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
	/* Entries in the set. Read relaxed before anything else: a process
	 * with no sampled block alive (no sample yet, or all freed) answers
	 * every free with this one load. An address the program got from a
	 * sampled malloc was counted before that malloc returned, so a free
	 * of it cannot read zero here. */
	uint64_t nlive;
	pthread_mutex_t lock;
	/* A retired table no reader can be in any more, kept for the next
	 * rebuild of the same size: mapping a fresh table each time cost two
	 * system calls and page faults (the tombstones that frees leave in
	 * the middle of probe chains still call for a rebuild now and then). */
	struct hp_fs_table *spare;
	uint64_t bytes;			/* memory held by tables */
	uint64_t tables_mapped;		/* mmaps of tables, ever */
	uint64_t rebuilds;		/* tables built, ever */
	/* lookups past the filter, in flight, by epoch; a line of their own */
	uint32_t epoch __attribute__((aligned(64)));
	uint32_t readers[2];
	uint8_t filter[1U << HP_FS_FILTER_BITS] __attribute__((aligned(64)));
};

static inline uint64_t hp_fs_hash(uint64_t key)
{
	return (key >> 3) * 0x9e3779b97f4a7c15ULL;
}

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

/* Lock-free: might key be in the set? (A "yes" is confirmed under the lock
 * by hp_freeset_remove.) Almost always answered by one byte of the filter. */
static inline int hp_freeset_maybe(struct hp_freeset *fs, uint64_t key)
{
	if (__builtin_expect(!__atomic_load_n(&fs->nlive, __ATOMIC_RELAXED), 1))
		return 0;
	if (__builtin_expect(!__atomic_load_n(
		&fs->filter[hp_fs_hash(key) >> (64 - HP_FS_FILTER_BITS)],
		__ATOMIC_RELAXED), 1))
		return 0;
	return hp_freeset_lookup(fs, key);
}

/*
 * The filter alone (and the live count): 0 means certainly not in the set.
 * For a caller that goes on to hp_freeset_remove anyway, which looks under
 * the lock: the lock-free table lookup would only add two locked
 * read-modify-writes of the reader counters to every sampled free.
 */
static inline int hp_freeset_filter(struct hp_freeset *fs, uint64_t key)
{
	if (__builtin_expect(!__atomic_load_n(&fs->nlive, __ATOMIC_RELAXED), 1))
		return 0;
	return __atomic_load_n(&fs->filter[hp_fs_hash(key) >> (64 - HP_FS_FILTER_BITS)],
			       __ATOMIC_RELAXED) != 0;
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
