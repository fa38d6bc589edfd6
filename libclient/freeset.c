// SPDX-License-Identifier: GPL-2.0
/* The set of sampled live addresses: mutations under a mutex, lookups
 * lock-free (see freeset.h). Tables come from mmap, never from malloc, so
 * the set can be used inside the malloc hooks. */
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "freeset.h"

static size_t table_bytes(uint64_t nslots)
{
	return sizeof(struct hp_fs_table) + nslots * sizeof(uint64_t);
}

static struct hp_fs_table *table_new(uint64_t nslots)
{
	struct hp_fs_table *t;

	t = mmap(NULL, table_bytes(nslots), PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED)
		return NULL;
	t->mask = nslots - 1;
	t->shift = 64 - __builtin_ctzll(nslots);
	return t;
}

static void table_put(struct hp_fs_table *t, uint64_t key)
{
	uint64_t i = hp_fs_hash(key) >> t->shift;

	for (;;) {
		uint64_t v = t->slots[i];

		if (v == HP_FS_EMPTY || v == HP_FS_TOMB) {
			if (v == HP_FS_EMPTY)
				t->used++;
			t->live++;
			__atomic_store_n(&t->slots[i], key, __ATOMIC_RELEASE);
			return;
		}
		i = (i + 1) & t->mask;
	}
}

/*
 * Zero n bytes at p with no other thread looking (init). The whole pages
 * inside are given back instead of written (the arrays are in .bss, private
 * anonymous memory, so they read as zeros again): a fork child of a
 * process with a large filter copies no page of it.
 */
static void zero_bytes(uint8_t *p, size_t n)
{
	uintptr_t ps = (uintptr_t)sysconf(_SC_PAGESIZE), s = (uintptr_t)p, e = s + n;
	uintptr_t a = (s + ps - 1) & ~(ps - 1), b = e & ~(ps - 1);

	if (b > a && !madvise((void *)a, b - a, MADV_DONTNEED)) {
		memset(p, 0, a - s);
		memset((void *)b, 0, e - b);
		return;
	}
	memset(p, 0, n);
}

/* fs is zeroed (static) or was set up before; no other thread uses it.
 * Only the parts of the filter arrays that were ever used are cleared: the
 * others were never touched (and stay unmapped pages). */
void hp_freeset_init(struct hp_freeset *fs)
{
	int a;

	for (a = 0; a < 2; a++)
		if (fs->fused[a])
			zero_bytes(fs->filter[a], (size_t)1 << fs->fused[a]);
	memset(fs, 0, offsetof(struct hp_freeset, filter));
	pthread_mutex_init(&fs->lock, NULL);
}

int hp_freeset_filter_again(struct hp_freeset *fs, uint64_t key)
{
	uint64_t w = __atomic_load_n(&fs->fword, __ATOMIC_ACQUIRE), w2;

	for (;;) {
		if (!w)
			return 0;
		if (__atomic_load_n(hp_fs_counter(fs, w, key), __ATOMIC_ACQUIRE))
			return 1;
		w2 = __atomic_load_n(&fs->fword, __ATOMIC_ACQUIRE);
		if (w2 == w)
			return 0;
		w = w2;
	}
}

/* key's counter in array arr at bits bits (lock held). */
static uint8_t *counter_at(struct hp_freeset *fs, uint32_t arr, uint32_t bits, uint64_t key)
{
	return &fs->filter[arr][hp_fs_hash(key) >> (64 - bits)];
}

/* 255 is sticky: the count is no longer known. */
static void count_up(struct hp_freeset *fs, uint8_t *f)
{
	if (*f == 255)
		return;
	__atomic_store_n(f, *f + 1, __ATOMIC_RELAXED);
	if (*f == 255)
		fs->fsticky = 1;
}

/*
 * Zero the first 2^bits counters of array arr (lock held). Lookups may be
 * reading it still, with a word published before this began: release
 * stores, so that one that reads a zero from here also reads that newer
 * word when it checks again. Counters already zero are not written (their
 * pages may never have been touched).
 */
static void clear_counters(struct hp_freeset *fs, uint32_t arr, uint32_t bits)
{
	uint8_t *f = fs->filter[arr];
	size_t i, n = bits ? (size_t)1 << bits : 0;

	for (i = 0; i < n; i++)
		if (__atomic_load_n(&f[i], __ATOMIC_RELAXED))
			__atomic_store_n(&f[i], 0, __ATOMIC_RELEASE);
}

/* Publish the filter's shape (lock held): 0 for an empty set. */
static void publish_filter(struct hp_freeset *fs)
{
	fs->fgen++;
	__atomic_store_n(&fs->fword, fs->table && fs->table->live ?
			 HP_FS_FW(fs->fgen, fs->farr, fs->fbits) : 0, __ATOMIC_RELEASE);
}

/* Build the filter twice as large in the other array, from the table, and
 * switch to it (lock held). */
static void grow_filter(struct hp_freeset *fs)
{
	uint32_t arr = !fs->farr, bits = fs->fbits + 1;
	const struct hp_fs_table *t = fs->table;
	uint64_t i;

	clear_counters(fs, arr, fs->fused[arr]);
	fs->fused[arr] = bits;
	fs->fsticky = 0;
	if (t)
		for (i = 0; i <= t->mask; i++)
			if (t->slots[i] > HP_FS_TOMB)
				count_up(fs, counter_at(fs, arr, bits, t->slots[i]));
	fs->farr = arr;
	fs->fbits = bits;
	fs->fgrowths++;
	publish_filter(fs);
}

int hp_freeset_lookup(struct hp_freeset *fs, uint64_t key)
{
	const struct hp_fs_table *t;
	uint32_t e;
	int r;

	if (key <= HP_FS_TOMB)
		return 0;	/* the empty and tombstone marks are never keys */
	for (;;) {
		e = __atomic_load_n(&fs->epoch, __ATOMIC_SEQ_CST);
		__atomic_fetch_add(&fs->readers[e & 1], 1, __ATOMIC_SEQ_CST);
		/* Counted in the epoch that is still current: a rebuild that
		 * flips it from now on waits for us. */
		if (__atomic_load_n(&fs->epoch, __ATOMIC_SEQ_CST) == e)
			break;
		__atomic_fetch_sub(&fs->readers[e & 1], 1, __ATOMIC_RELEASE);
	}
	t = __atomic_load_n(&fs->table, __ATOMIC_SEQ_CST);
	r = t && hp_fs_table_has(t, key);
	__atomic_fetch_sub(&fs->readers[e & 1], 1, __ATOMIC_RELEASE);
	return r;
}

/* Wait until no lookup can still be in a table unpublished before this
 * call; lock held. */
static void grace_period(struct hp_freeset *fs)
{
	uint32_t e = __atomic_fetch_add(&fs->epoch, 1, __ATOMIC_SEQ_CST);

	while (__atomic_load_n(&fs->readers[e & 1], __ATOMIC_SEQ_CST))
		sched_yield();
}

/* Rebuild into a table sized for the live keys; lock held. */
static int grow(struct hp_freeset *fs)
{
	struct hp_fs_table *old = fs->table, *t;
	uint64_t n = HP_FS_MIN_SLOTS, i;

	while (old && n < 4 * (old->live + 1))
		n <<= 1;
	t = fs->spare;
	if (t && t->mask + 1 == n) {
		/* Unpublished since its grace period: ours alone to clear. */
		fs->spare = NULL;
		memset(t->slots, 0, n * sizeof(t->slots[0]));
		t->used = t->live = 0;
	} else {
		t = table_new(n);
		if (!t)
			return -1;
		fs->bytes += table_bytes(n);
		fs->tables_mapped++;
	}
	if (old)
		for (i = 0; i <= old->mask; i++)
			if (old->slots[i] > HP_FS_TOMB)
				table_put(t, old->slots[i]);
	__atomic_store_n(&fs->table, t, __ATOMIC_SEQ_CST);
	fs->rebuilds++;
	if (old) {
		grace_period(fs);
		/* Keep the newest retired table as the spare. */
		if (fs->spare) {
			fs->bytes -= table_bytes(fs->spare->mask + 1);
			munmap(fs->spare, table_bytes(fs->spare->mask + 1));
		}
		fs->spare = old;
	}
	return 0;
}

/* Would one more entry load the table past half? (lock held) */
static int full(const struct hp_freeset *fs)
{
	return !fs->table || 2 * (fs->table->used + 1) > fs->table->mask + 1;
}

int hp_freeset_insert(struct hp_freeset *fs, uint64_t key)
{
	int ret = 0;

	if (key <= HP_FS_TOMB)
		return -1;
	pthread_mutex_lock(&fs->lock);
	if (full(fs) && grow(fs)) {
		ret = -1;
		goto out;
	}
	if (!fs->fbits)
		fs->fbits = fs->fused[fs->farr] = HP_FS_FILTER_BITS_MIN;
	if (fs->fbits < HP_FS_FILTER_BITS_MAX &&
	    fs->table->live + 1 > ((uint64_t)1 << fs->fbits) >> HP_FS_FILTER_LOAD_SHIFT)
		grow_filter(fs);
	/* The filter first: a reader that finds the key in the table must
	 * not have been turned away by the filter. All becomes visible before
	 * the program can hand the address to another thread. */
	count_up(fs, counter_at(fs, fs->farr, fs->fbits, key));
	table_put(fs->table, key);
	if (fs->table->live == 1)
		publish_filter(fs);	/* no longer empty */
out:
	pthread_mutex_unlock(&fs->lock);
	return ret;
}

/*
 * Empty slot i (lock held). In the middle of a probe chain it becomes a
 * tombstone, so that readers go on past it to the keys beyond. Before an
 * empty slot no chain goes on, so it is emptied, with the tombstones
 * right before it, which now end a chain too: a key placed beyond any of
 * them would need the empty slot to be in use. Only lookups of keys that
 * are absent can stop sooner, and they find nothing either way. Without
 * this the tombstones of a sampled program's frees fill the table, and
 * it is rebuilt after about as many inserts as it has live keys.
 */
static void clear_slot(struct hp_fs_table *t, uint64_t i)
{
	if (t->slots[(i + 1) & t->mask] != HP_FS_EMPTY) {
		__atomic_store_n(&t->slots[i], HP_FS_TOMB, __ATOMIC_RELAXED);
		return;
	}
	do {
		__atomic_store_n(&t->slots[i], HP_FS_EMPTY, __ATOMIC_RELAXED);
		t->used--;
		i = (i - 1) & t->mask;
	} while (t->slots[i] == HP_FS_TOMB);
}

/* The slot of an entry key, or -1 (lock held). */
static int64_t find(const struct hp_fs_table *t, uint64_t key)
{
	uint64_t i = hp_fs_hash(key) >> t->shift;

	for (;;) {
		uint64_t v = t->slots[i];

		if (v == key)
			return (int64_t)i;
		if (v == HP_FS_EMPTY)
			return -1;
		i = (i + 1) & t->mask;
	}
}

int hp_freeset_remove(struct hp_freeset *fs, uint64_t key)
{
	struct hp_fs_table *t;
	int64_t at;
	uint8_t *f;
	int found = 0;

	if (key <= HP_FS_TOMB)
		return 0;	/* never inserted (hp_freeset_insert) */
	pthread_mutex_lock(&fs->lock);
	t = fs->table;
	if (!t)
		goto out;
	at = find(t, key);
	if (at >= 0) {
		clear_slot(t, (uint64_t)at);
		t->live--;
		found = 1;
		/* 255 is sticky: the count is no longer known. */
		f = counter_at(fs, fs->farr, fs->fbits, key);
		/* Release: a lookup that reads a zero written here must also
		 * read every filter word published before this remove (it may
		 * hold a word two growths old, for which this array was
		 * cleared and rebuilt; see clear_counters). */
		if (*f != 255 && *f)
			__atomic_store_n(f, *f - 1, __ATOMIC_RELEASE);
		if (!t->live) {
			publish_filter(fs);	/* empty: the word is 0 */
			/* Nothing is in the set: sticky counters can go. */
			if (fs->fsticky)
				clear_counters(fs, fs->farr, fs->fbits);
			fs->fsticky = 0;
		}
	}
out:
	pthread_mutex_unlock(&fs->lock);
	return found;
}

uint64_t hp_freeset_live(struct hp_freeset *fs)
{
	uint64_t n;

	pthread_mutex_lock(&fs->lock);
	n = fs->table ? fs->table->live : 0;
	pthread_mutex_unlock(&fs->lock);
	return n;
}

void hp_freeset_reset(struct hp_freeset *fs)
{
	if (fs->table)
		munmap(fs->table, table_bytes(fs->table->mask + 1));
	if (fs->spare)
		munmap(fs->spare, table_bytes(fs->spare->mask + 1));
	hp_freeset_init(fs);
}
