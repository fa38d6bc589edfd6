// SPDX-License-Identifier: GPL-2.0
/*
 * ring.h with many producer threads and one consumer on a memfd ring laid
 * out as the user-space transport does: nothing lost or torn, drops counted
 * exactly, a writer that dies mid-record does not stall the reader, and
 * the wake-up protocol (with and without the consumer's timer) loses no
 * record and, without a timer, no wake-up.
 */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>

#include "../../proto/ring.h"
#include "../../tests/tap.h"

#define NPROD 4
#define PER_THREAD 50000

struct payload {
	struct heapprofd_rec_hdr hdr;
	uint32_t thread, n;
	uint64_t check;
	/* variable tail of (n % 13) * 8 bytes, each = check */
};

static struct hp_ring ring;
static uint64_t drops[NPROD], drop_bytes[NPROD];
static int done, pause_producers;

static uint64_t mix(uint32_t t, uint32_t n)
{
	uint64_t x = ((uint64_t)t << 32 | n) * 0x9e3779b97f4a7c15ULL;

	return x ^ (x >> 29);
}

static void *producer(void *arg)
{
	uint32_t t = (uint32_t)(uintptr_t)arg, n;

	for (n = 0; n < PER_THREAD; n++) {
		uint32_t extra = (n % 13) * 8, len = sizeof(struct payload) + extra, i;
		struct heapprofd_rec_hdr *h = hp_ring_reserve(&ring, len, HEAPPROFD_REC_FREE);
		struct payload *p;

		if (!h) {
			hp_ring_count_drop(&ring, len, 1);
			drops[t]++;
			drop_bytes[t] += hp_ring_align(len);
			continue;
		}
		p = (struct payload *)h;
		p->thread = t;
		p->n = n;
		p->check = mix(t, n);
		for (i = 0; i < extra / 8; i++)
			((uint64_t *)(p + 1))[i] = p->check;
		hp_ring_count_write(&ring, len);
		hp_ring_commit(&ring, h);
		if (pause_producers && n % 64 == 63) {
			/* Let the consumer catch up: the ring runs empty. */
			struct timespec ts = { 0, 20000 };

			nanosleep(&ts, NULL);
		}
	}
	__atomic_fetch_add(&done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void *map_ring(uint64_t data_size)
{
	size_t len;
	int fd = memfd_create("test-ring", MFD_CLOEXEC);
	void *m;

	if (fd < 0 || ftruncate(fd, HEAPPROFD_CTL_SIZE + data_size))
		return NULL;
	m = hp_ring_map_fd(fd, 1, HEAPPROFD_CTL_SIZE, data_size, &len);
	close(fd);
	if (m == MAP_FAILED)
		return NULL;
	hp_ring_format(m, HEAPPROFD_CTL_SIZE, data_size, 0, 0);
	if (hp_ring_open(&ring, m, len))
		return NULL;
	return m;
}

static void test_mpsc(uint64_t data_size, int slow_consumer, int rewind)
{
	pthread_t th[NPROD];
	uint32_t *next = calloc(NPROD, sizeof(*next));
	uint64_t got = 0, got_bytes = 0, total_drops = 0, total_drop_bytes = 0, rewinds = 0;
	int torn = 0, order = 0, i;

	if (!map_ring(data_size)) {
		tap_ok(0, "ring: map");
		return;
	}
	memset(drops, 0, sizeof(drops));
	done = 0;
	pause_producers = rewind;
	memset(drop_bytes, 0, sizeof(drop_bytes));
	for (i = 0; i < NPROD; i++)
		pthread_create(&th[i], NULL, producer, (void *)(uintptr_t)i);
	for (;;) {
		const struct heapprofd_rec_hdr *h;
		uint32_t len;
		enum hp_ring_status st = hp_ring_peek(&ring, &h, &len);

		if (st == HP_RING_READY) {
			struct payload p;
			uint32_t k;

			memcpy(&p, h, sizeof(p));
			if (p.thread >= NPROD || p.check != mix(p.thread, p.n) ||
			    len != hp_ring_align(sizeof(p) + (p.n % 13) * 8))
				torn++;
			else {
				for (k = 0; k < (p.n % 13); k++)
					if (((const uint64_t *)((const struct payload *)h + 1))[k] != p.check)
						torn++;
				/* per-thread order: n grows */
				if (p.n < next[p.thread])
					order++;
				next[p.thread] = p.n + 1;
			}
			got++;
			got_bytes += len;
			hp_ring_advance(&ring, len);
			if (slow_consumer && got % 64 == 0) {
				struct timespec ts = { 0, 20000 };

				nanosleep(&ts, NULL);
			}
			continue;
		}
		if (st == HP_RING_CORRUPT) {
			torn++;
			break;
		}
		if (st == HP_RING_EMPTY && rewind)
			rewinds += hp_ring_rewind(&ring, data_size / 16);
		/* Stop only on an empty ring seen after all producers were
		 * done (a status read before that may be stale). */
		if (__atomic_load_n(&done, __ATOMIC_ACQUIRE) == NPROD &&
		    hp_ring_peek(&ring, &h, &len) == HP_RING_EMPTY)
			break;
	}
	for (i = 0; i < NPROD; i++)
		pthread_join(th[i], NULL);
	for (i = 0; i < NPROD; i++) {
		total_drops += drops[i];
		total_drop_bytes += drop_bytes[i];
	}
	tap_ok(!torn && !order,
	       "ring: %d producers, ring %llu KiB%s%s: %llu records, none torn (%d) or out of order (%d)",
	       NPROD, (unsigned long long)(data_size >> 10),
	       slow_consumer ? ", slow consumer" : "", rewind ? ", rewound when empty" : "",
	       (unsigned long long)got, torn, order);
	if (rewind)
		tap_ok(rewinds > 0, "ring: the consumer sent the producers back to the front %llu times",
		       (unsigned long long)rewinds);
	tap_ok(got + total_drops == (uint64_t)NPROD * PER_THREAD &&
	       ring.cnt->records_written == got &&
	       ring.cnt->bytes_written == got_bytes &&
	       ring.cnt->records_dropped == total_drops &&
	       ring.cnt->bytes_dropped == total_drop_bytes &&
	       ring.cnt->frees_dropped == total_drops,
	       "ring: written %llu + dropped %llu = %d, counters exact (records and bytes)%s",
	       (unsigned long long)got, (unsigned long long)total_drops,
	       NPROD * PER_THREAD, slow_consumer ? "" : "");
	if (slow_consumer)
		tap_ok(total_drops > 0, "ring: the slow consumer made producers drop (%llu)",
		       (unsigned long long)total_drops);
	munmap(ring.map, ring.map_len);
	free(next);
}

/* Is [from, to) of the data area all zero? */
static int zero_between(uint64_t from, uint64_t to)
{
	for (; from < to; from++)
		if (ring.data[from & ring.mask])
			return 0;
	return 1;
}

static int put_record(uint32_t len)
{
	struct heapprofd_rec_hdr *h = hp_ring_reserve(&ring, len, HEAPPROFD_REC_FREE);

	if (!h)
		return -1;
	memset(h + 1, 0x5a, len - sizeof(*h));
	hp_ring_commit(&ring, h);
	return 0;
}

static int take_record(uint32_t *len)
{
	const struct heapprofd_rec_hdr *h;

	if (hp_ring_peek(&ring, &h, len) != HP_RING_READY)
		return -1;
	hp_ring_advance(&ring, *len);
	return 0;
}

/*
 * hp_ring_rewind: only an empty ring whose producers are window bytes or
 * more into a lap is rewound, to the start of the next lap; the bytes
 * skipped are zero, and the producers write the front of the ring next.
 */
static void test_rewind(void)
{
	const uint64_t size = 64 << 10, window = 4096;
	struct heapprofd_rec_hdr *held;
	uint64_t t;
	uint32_t len;
	int i, bad = 0;

	if (!map_ring(size)) {
		tap_ok(0, "rewind: map");
		return;
	}
	/* 2 KiB in: below the window, nothing happens. */
	for (i = 0; i < 8; i++)
		bad |= put_record(256) | take_record(&len);
	tap_ok(!bad && !hp_ring_rewind(&ring, window) && ring.prod->tail == 2048 &&
	       ring.cons->head == 2048, "rewind: not before the producers are a window into the lap");
	/* Past the window, one record reserved and not committed: refused. */
	for (i = 0; i < 24; i++)
		bad |= put_record(256) | take_record(&len);
	held = hp_ring_reserve(&ring, 256, HEAPPROFD_REC_FREE);
	tap_ok(!bad && held && !hp_ring_rewind(&ring, window) && ring.prod->tail == 8192 + 256,
	       "rewind: not while a record is reserved");
	hp_ring_commit(&ring, held);
	bad |= take_record(&len);
	/* Empty, 8448 bytes into the lap: rewound to the next lap. */
	t = ring.prod->tail;
	i = hp_ring_rewind(&ring, window);
	tap_ok(!bad && i && ring.prod->tail == size && ring.cons->head == size &&
	       zero_between(t, size),
	       "rewind: an empty ring past the window goes to the next lap (%llu -> %llu), "
	       "the bytes skipped all zero", (unsigned long long)t,
	       (unsigned long long)ring.prod->tail);
	tap_ok(!hp_ring_rewind(&ring, window), "rewind: not at the start of a lap");
	/* The producers carry on at the front; the consumer reads on. */
	bad |= put_record(512);
	tap_ok(!bad && ring.prod->tail == size + 512 && !take_record(&len) && len == 512 &&
	       hp_ring_peek(&ring, &(const struct heapprofd_rec_hdr *){ NULL }, &len) == HP_RING_EMPTY,
	       "rewind: the next record is written at the front and read back whole");
	munmap(ring.map, ring.map_len);
}

/* A child reserves a record and dies without committing. */
static void test_dead_writer(void)
{
	const struct heapprofd_rec_hdr *h;
	struct timespec t0, t1;
	uint32_t len;
	int st, ok_seen = 0, skipped = 0;
	pid_t pid;

	if (!map_ring(64 << 10)) {
		tap_ok(0, "ring: map");
		return;
	}
	pid = fork();
	if (pid == 0) {
		struct heapprofd_rec_hdr *r = hp_ring_reserve(&ring, 64, HEAPPROFD_REC_FREE);

		(void)r;
		_exit(0);	/* never commits */
	}
	waitpid(pid, &st, 0);
	/* Then a healthy record after it. */
	{
		struct heapprofd_rec_hdr *r = hp_ring_reserve(&ring, 32, HEAPPROFD_REC_HEAP);

		hp_ring_commit(&ring, r);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		enum hp_ring_status s = hp_ring_peek(&ring, &h, &len);

		if (s == HP_RING_READY) {
			ok_seen = h->type == HEAPPROFD_REC_HEAP;
			hp_ring_advance(&ring, len);
			break;
		}
		if (s != HP_RING_NOT_READY)
			break;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		/* The reader's bound: 50 ms without progress. */
		if ((t1.tv_sec - t0.tv_sec) * 1000000000L + (t1.tv_nsec - t0.tv_nsec) > 50000000L) {
			if (hp_ring_skip_stalled(&ring))
				break;
			skipped++;
		}
	}
	tap_ok(skipped == 1 && ok_seen && hp_ring_peek(&ring, &h, &len) == HP_RING_EMPTY,
	       "ring: a writer killed mid-record is skipped after the bound; the next record is read");
	munmap(ring.map, ring.map_len);
}

/*
 * Allocation records leave room for frees: fill a ring with allocation-sized
 * records kept off the last 1/16, then small records still fit in it.
 */
static void test_keep(void)
{
	uint64_t size = 64 << 10, keep = size / 16;
	unsigned allocs = 0, frees = 0;

	if (!map_ring(size)) {
		tap_ok(0, "ring: map");
		return;
	}
	for (;;) {
		struct heapprofd_rec_hdr *h = hp_ring_reserve_keep(&ring, 1024,
								   HEAPPROFD_REC_ALLOC, keep);

		if (!h)
			break;
		hp_ring_commit(&ring, h);
		allocs++;
	}
	for (;;) {
		struct heapprofd_rec_hdr *h = hp_ring_reserve(&ring, 48, HEAPPROFD_REC_FREE);

		if (!h)
			break;
		hp_ring_commit(&ring, h);
		frees++;
	}
	tap_ok(allocs == (size - keep) / 1024 && frees >= keep / 48,
	       "ring: records reserved with keep stop short of the last %llu bytes (%u of 1 KiB fit), which %u small records then use",
	       (unsigned long long)keep, allocs, frees);
	/* A record too big to fit beside the kept bytes needs only the ring. */
	munmap(ring.map, ring.map_len);
	if (!map_ring(size)) {
		tap_ok(0, "ring: map");
		return;
	}
	{
		/* One small record in the ring, then a big one that fits
		 * beside it only without the keep: it needs only the ring. */
		struct heapprofd_rec_hdr *small = hp_ring_reserve(&ring, 64, HEAPPROFD_REC_FREE);

		if (small)
			hp_ring_commit(&ring, small);
		tap_ok(small && hp_ring_reserve_keep(&ring, (uint32_t)(size - 128),
						     HEAPPROFD_REC_ALLOC, keep) != NULL,
		       "ring: a record larger than the ring minus keep fits wherever the ring has room for it");
	}
	munmap(ring.map, ring.map_len);
}

/* ---- waking: producers wake a sleeping consumer through an eventfd ---- */

#define WAKE_PER_THREAD 20000
static int wake_fd;
static uint64_t wakes[NPROD];

static void *wake_producer(void *arg)
{
	uint32_t t = (uint32_t)(uintptr_t)arg, n;

	for (n = 0; n < WAKE_PER_THREAD; n++) {
		struct heapprofd_rec_hdr *h = hp_ring_reserve(&ring, sizeof(struct payload),
							      HEAPPROFD_REC_FREE);
		struct payload *p;
		uint64_t one = 1;

		if (!h) {
			drops[t]++;
			continue;
		}
		p = (struct payload *)h;
		p->thread = t;
		p->n = n;
		p->check = mix(t, n);
		if (hp_ring_commit(&ring, h)) {
			wakes[t]++;
			if (write(wake_fd, &one, sizeof(one)) != sizeof(one))
				abort();
		}
		if (!(n % 256))
			sched_yield();	/* let the consumer fall asleep now and then */
	}
	__atomic_fetch_add(&done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/*
 * The consumer sleeps whenever the ring is empty. timer_us 0: it sleeps
 * until woken, so a lost wake-up shows as a 5 s poll timeout (producers
 * keep their barrier). timer_us set: it polls with that period, and
 * producers skip the barrier; every record must still arrive.
 */
static void test_wake(uint32_t timer_us)
{
	pthread_t th[NPROD];
	uint64_t got = 0, total_drops = 0, total_wakes = 0, sleeps = 0, lost = 0, v;
	int i;

	if (!map_ring(1 << 20)) {
		tap_ok(0, "ring: map");
		return;
	}
	wake_fd = eventfd(0, EFD_CLOEXEC);
	memset(drops, 0, sizeof(drops));
	memset(wakes, 0, sizeof(wakes));
	done = 0;
	__atomic_store_n(&ring.cons->timer_us, timer_us, __ATOMIC_RELAXED);
	for (i = 0; i < NPROD; i++)
		pthread_create(&th[i], NULL, wake_producer, (void *)(uintptr_t)i);
	for (;;) {
		const struct heapprofd_rec_hdr *h;
		uint32_t len;
		enum hp_ring_status st = hp_ring_peek(&ring, &h, &len);
		struct pollfd pfd = { .fd = wake_fd, .events = POLLIN };

		if (st == HP_RING_READY) {
			got++;
			hp_ring_advance(&ring, len);
			continue;
		}
		if (st == HP_RING_CORRUPT)
			break;
		if (__atomic_load_n(&done, __ATOMIC_ACQUIRE) == NPROD &&
		    hp_ring_peek(&ring, &h, &len) == HP_RING_EMPTY)
			break;
		if (!hp_ring_prepare_sleep(&ring))
			continue;
		sleeps++;
		if (poll(&pfd, 1, timer_us ? (int)(timer_us / 1000) : 5000) == 0 && !timer_us &&
		    __atomic_load_n(&done, __ATOMIC_ACQUIRE) != NPROD)
			lost++;
		hp_ring_awake(&ring);
		if (pfd.revents & POLLIN) {
			if (read(wake_fd, &v, sizeof(v)) != sizeof(v))
				break;
		}
	}
	for (i = 0; i < NPROD; i++) {
		pthread_join(th[i], NULL);
		total_drops += drops[i];
		total_wakes += wakes[i];
	}
	tap_ok(got + total_drops == (uint64_t)NPROD * WAKE_PER_THREAD && !lost,
	       "ring: wake-ups, consumer timer %u us: %llu records + %llu dropped, %llu sleeps, %llu wake-ups, %llu lost",
	       timer_us, (unsigned long long)got, (unsigned long long)total_drops,
	       (unsigned long long)sleeps, (unsigned long long)total_wakes,
	       (unsigned long long)lost);
	close(wake_fd);
	munmap(ring.map, ring.map_len);
}

int main(void)
{
	test_mpsc(8 << 20, 0, 0);
	test_mpsc(64 << 10, 1, 0);
	test_mpsc(1 << 20, 0, 1);
	test_rewind();
	test_dead_writer();
	test_keep();
	test_wake(0);
	test_wake(2000);
	return tap_failed ? 1 : 0;
}
