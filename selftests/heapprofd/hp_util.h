/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Small helpers for the heapprofd kselftests: the ioctls as functions that
 * return -errno, sysfs reads, a pipe-based handshake between a test and the
 * processes it forks, and a record producer/consumer built on the ring
 * protocol in proto/ring.h.
 */
#ifndef HP_UTIL_H
#define HP_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../proto/ring.h"

#define HP_DEV		"/dev/heapprofd"
#define HP_SYSFS	"/sys/kernel/heapprofd"
#define HP_SMALL	HEAPPROFD_DATA_SIZE_MIN	/* 64 KiB rings keep tests fast */

static inline int hp_dev_open(void)
{
	return open(HP_DEV, O_RDWR | O_CLOEXEC);
}

/* ioctl() returning the result or -errno. */
static inline long hp_ioctl(int fd, unsigned long cmd, void *arg)
{
	long ret = ioctl(fd, cmd, arg);

	return ret < 0 ? -errno : ret;
}

/* Register the calling process; returns the session fd or -errno. */
static inline int hp_register(int dev, uint64_t data_size, uint32_t flags,
			      struct heapprofd_register *out)
{
	struct heapprofd_register r = {
		.size = sizeof(r), .flags = flags, .data_size = data_size,
	};
	long ret = hp_ioctl(dev, HEAPPROFD_IOC_REGISTER, &r);

	if (out)
		*out = r;
	return (int)ret;
}

static inline int hp_attach_pid(int dev, pid_t pid, struct heapprofd_attach *out)
{
	struct heapprofd_attach a = {
		.size = sizeof(a), .flags = HEAPPROFD_ATTACH_BY_PID, .pid = pid,
	};
	long ret = hp_ioctl(dev, HEAPPROFD_IOC_ATTACH, &a);

	if (out)
		*out = a;
	return (int)ret;
}

static inline int hp_attach_id(int dev, uint64_t id, struct heapprofd_attach *out)
{
	struct heapprofd_attach a = {
		.size = sizeof(a), .flags = HEAPPROFD_ATTACH_BY_ID, .session_id = id,
	};
	long ret = hp_ioctl(dev, HEAPPROFD_IOC_ATTACH, &a);

	if (out)
		*out = a;
	return (int)ret;
}

static inline int hp_info(int fd, struct heapprofd_session_info *info)
{
	memset(info, 0, sizeof(*info));
	info->size = sizeof(*info);
	return (int)hp_ioctl(fd, HEAPPROFD_IOC_INFO, info);
}

static inline int hp_deposit(int sfd, uint32_t slot, int fd)
{
	struct heapprofd_fd_arg a = { .size = sizeof(a), .slot = slot, .fd = fd };

	return (int)hp_ioctl(sfd, HEAPPROFD_IOC_DEPOSIT_FD, &a);
}

/* Returns the received fd or -errno. */
static inline int hp_receive(int cfd, uint32_t slot)
{
	struct heapprofd_fd_arg a = { .size = sizeof(a), .slot = slot, .fd = -1 };
	long ret = hp_ioctl(cfd, HEAPPROFD_IOC_RECEIVE_FD, &a);

	if (ret < 0)
		return (int)ret;
	return a.fd;
}

/* Map a session or consumer fd the one allowed way. */
static inline void *hp_map(int fd, uint32_t ctl_size, uint64_t data_size,
			   size_t *len)
{
	*len = (size_t)ctl_size + 2 * (size_t)data_size;
	return mmap(NULL, *len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
}

/* Read a sysfs file as an unsigned number; returns -1 on any error. */
static inline long long hp_sysfs_u64(const char *path)
{
	char buf[64];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return strtoll(buf, NULL, 0);
}

static inline long long hp_stat(const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), HP_SYSFS "/%s", name);
	return hp_sysfs_u64(path);
}

static inline long long hp_sess_stat(uint64_t id, const char *name)
{
	char path[256];

	snprintf(path, sizeof(path), HP_SYSFS "/sessions/%llu/%s",
		 (unsigned long long)id, name);
	return hp_sysfs_u64(path);
}

/* Read a sysfs text file into buf without the trailing newline. */
static inline int hp_sysfs_str(const char *path, char *buf, size_t len)
{
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = 0;
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = 0;
	return 0;
}

/*
 * A handshake between two processes: two pipes. Each side sends one byte
 * per step and waits for the other's; a dead peer reads as EOF (-1).
 */
struct hp_sync {
	int to_child[2];
	int to_parent[2];
};

static inline int hp_sync_init(struct hp_sync *s)
{
	if (pipe2(s->to_child, O_CLOEXEC) || pipe2(s->to_parent, O_CLOEXEC))
		return -1;
	return 0;
}

/*
 * After fork(): each side closes the ends it does not use, so that when one
 * side dies the other reads EOF instead of waiting forever (and a child
 * never outlives a failed test holding a session).
 */
static inline void hp_sync_child(struct hp_sync *s)
{
	close(s->to_child[1]);
	close(s->to_parent[0]);
}

static inline void hp_sync_parent(struct hp_sync *s)
{
	close(s->to_child[0]);
	close(s->to_parent[1]);
}

/* Send a 64-bit value (a step number, a pid or an id). */
static inline int hp_sync_send(int fd, uint64_t v)
{
	return write(fd, &v, sizeof(v)) == sizeof(v) ? 0 : -1;
}

static inline int hp_sync_recv(int fd, uint64_t *v)
{
	uint64_t tmp;
	ssize_t n = read(fd, &tmp, sizeof(tmp));

	if (n != sizeof(tmp))
		return -1;
	if (v)
		*v = tmp;
	return 0;
}

/*
 * A test record: a header and a sequence number and a fill pattern that
 * the consumer checks, so a torn or misplaced record is caught.
 */
struct hp_test_rec {
	struct heapprofd_rec_hdr hdr;
	uint64_t seq;
	uint64_t pattern[5];
};

#define HP_TEST_TYPE	(HEAPPROFD_REC_KERNEL_FIRST - 1)

static inline uint64_t hp_pattern(uint64_t seq, int i)
{
	return (seq * 0x9E3779B97F4A7C15ULL) ^ (uint64_t)i;
}

/*
 * Try to produce one test record of len bytes (>= sizeof(struct
 * hp_test_rec)). Returns 1 if the consumer has to be woken, 0 if not, -1 if
 * the ring was full (not counted: the caller retries).
 */
static inline int hp_try_produce(struct hp_ring *r, uint64_t seq, uint32_t len)
{
	struct heapprofd_rec_hdr *h = hp_ring_reserve(r, len, HP_TEST_TYPE);
	struct hp_test_rec *t = (struct hp_test_rec *)h;
	int i;

	if (!h)
		return -1;
	t->seq = seq;
	for (i = 0; i < 5; i++)
		t->pattern[i] = hp_pattern(seq, i);
	hp_ring_count_write(r, len);
	return hp_ring_commit(r, h);
}

/* The same, but a record that does not fit is dropped and counted exactly. */
static inline int hp_produce(struct hp_ring *r, uint64_t seq, uint32_t len)
{
	int ret = hp_try_produce(r, seq, len);

	if (ret < 0)
		hp_ring_count_drop(r, len, 0);
	return ret;
}

/*
 * Consume one record. Returns 1 and its sequence number, 0 if the ring is
 * empty, -1 if the record is not what a producer of hp_produce() wrote.
 */
static inline int hp_consume(struct hp_ring *r, uint64_t *seq)
{
	const struct heapprofd_rec_hdr *h;
	struct hp_test_rec t;
	uint32_t len;
	int i, spins = 0;

	for (;;) {
		switch (hp_ring_peek(r, &h, &len)) {
		case HP_RING_EMPTY:
			return 0;
		case HP_RING_CORRUPT:
			return -1;
		case HP_RING_NOT_READY:
			if (++spins > 1000000)
				return -1;
			continue;
		case HP_RING_READY:
			break;
		}
		break;
	}
	if (len < sizeof(t) || h->type != HP_TEST_TYPE)
		return -1;
	memcpy(&t, h, sizeof(t));
	for (i = 0; i < 5; i++)
		if (t.pattern[i] != hp_pattern(t.seq, i))
			return -1;
	*seq = t.seq;
	hp_ring_advance(r, len);
	return 1;
}

#endif /* HP_UTIL_H */
