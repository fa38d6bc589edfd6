// SPDX-License-Identifier: GPL-2.0
/*
 * kselftests for heapprofd.ko: sessions, ring geometry, the ring
 * protocol across processes, exact drops, wakeups, fd passing, attach
 * permissions, lifetime, fork, sysfs, netlink, input validation of every
 * ioctl and of mmap, and rmmod while busy; and each attack of a
 * hostile local user, run as uid/gid 65534 without supplementary groups.
 *
 * Runs as root inside the test VM (scripts/vmtest); exits 4 (KSFT_SKIP)
 * when /dev/heapprofd does not exist. The rmmod test comes last: it unloads
 * the module and loads it again from $HEAPPROFD_KO (default
 * /hp/kmod/heapprofd.ko).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <grp.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"

#include "hp_util.h"
#include "hp_nl.h"

#define NOBODY		65534

/* Every test starts here: the device, or a skip. */
#define OPEN_DEV(dev) do {						\
		(dev) = hp_dev_open();					\
		if ((dev) < 0 && errno == ENOENT)			\
			SKIP(return, "%s missing", HP_DEV);		\
		ASSERT_LE(0, (dev)) TH_LOG("open %s: %m", HP_DEV);	\
	} while (0)

/* Wait for a child and return its exit code (or 128 + signal). */
static int reap(pid_t pid)
{
	int st;

	if (waitpid(pid, &st, 0) != pid)
		return -1;
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return WEXITSTATUS(st);
}

/* ------------------------------------------------------------------------ */
/* Register and mmap geometry                                               */
/* ------------------------------------------------------------------------ */

TEST(register_returns_session)
{
	struct heapprofd_session_info info;
	struct heapprofd_register reg;
	int dev, fd;

	OPEN_DEV(dev);
	fd = hp_register(dev, 0, 0, &reg);
	ASSERT_LE(0, fd) TH_LOG("register: %s", strerror(-fd));
	EXPECT_EQ(FD_CLOEXEC, fcntl(fd, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(HEAPPROFD_ABI_VERSION, reg.version);
	EXPECT_EQ(HEAPPROFD_CTL_SIZE, reg.ctl_size);
	EXPECT_NE(0, reg.session_id);

	ASSERT_EQ(0, hp_info(fd, &info));
	EXPECT_EQ(reg.session_id, info.session_id);
	EXPECT_EQ(getpid(), info.pid);
	EXPECT_EQ(getuid(), info.uid);
	EXPECT_EQ(HEAPPROFD_STATE_OPEN, info.state);
	EXPECT_EQ(0, info.fd_slots);
	EXPECT_EQ(HEAPPROFD_DATA_SIZE_DEFAULT, info.data_size);
	EXPECT_EQ(HEAPPROFD_CTL_SIZE, info.ctl_size);
	EXPECT_EQ(0, info.reg_flags);
	close(fd);

	/* Flags come back in INFO. */
	fd = hp_register(dev, HP_SMALL, HEAPPROFD_REGISTER_DORMANT, &reg);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, hp_info(fd, &info));
	EXPECT_EQ(HEAPPROFD_REGISTER_DORMANT, info.reg_flags);
	EXPECT_EQ(HP_SMALL, info.data_size);
	close(fd);
	close(dev);
}

TEST(mmap_geometry_double_mapping)
{
	struct heapprofd_register reg;
	struct heapprofd_ctl *ctl;
	struct hp_ring r;
	uint8_t *data;
	size_t len, i;
	void *map;
	int dev, fd;

	OPEN_DEV(dev);
	fd = hp_register(dev, 2 * HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	map = hp_map(fd, reg.ctl_size, 2 * HP_SMALL, &len);
	ASSERT_NE(MAP_FAILED, map) TH_LOG("mmap: %m");

	ctl = map;
	EXPECT_EQ(HEAPPROFD_CTL_MAGIC, ctl->magic);
	EXPECT_EQ(HEAPPROFD_ABI_VERSION, ctl->version);
	EXPECT_LE(sizeof(*ctl), ctl->header_size);
	EXPECT_EQ(reg.ctl_size, ctl->ctl_size);
	EXPECT_EQ(2 * HP_SMALL, ctl->data_size);
	EXPECT_EQ(reg.ctl_size, ctl->data_offset);
	EXPECT_EQ(reg.session_id, ctl->session_id);
	EXPECT_EQ(HEAPPROFD_CTL_KERNEL, ctl->flags & HEAPPROFD_CTL_KERNEL);
	EXPECT_EQ(0, ctl->off.kring);
	ASSERT_EQ(0, hp_ring_open(&r, map, len));

	/* The producer and consumer positions are on separate cache lines. */
	EXPECT_NE((uintptr_t)r.prod / 64, (uintptr_t)r.cons / 64);
	EXPECT_EQ(0, r.prod->tail);
	EXPECT_EQ(0, r.cons->head);

	/* The two copies of the data area alias, both ways. */
	data = (uint8_t *)map + ctl->data_offset;
	for (i = 0; i < r.size; i += 4093) {
		data[i] = (uint8_t)(i * 7 + 1);
		ASSERT_EQ((uint8_t)(i * 7 + 1), data[i + r.size]) TH_LOG("at %zu", i);
		data[i + r.size] = (uint8_t)(i * 3 + 2);
		ASSERT_EQ((uint8_t)(i * 3 + 2), data[i]) TH_LOG("at %zu", i);
	}
	data[r.size - 1] = 0x5a;
	EXPECT_EQ(0x5a, data[2 * r.size - 1]);

	EXPECT_EQ(0, munmap(map, len));
	close(fd);
	close(dev);
}

TEST(register_bad_data_sizes)
{
	long long before = hp_stat("ring_bytes");
	long long max = hp_sysfs_u64("/sys/module/heapprofd/parameters/max_data_size");
	struct heapprofd_register reg;
	int dev, fd;

	OPEN_DEV(dev);
	EXPECT_EQ(-EINVAL, hp_register(dev, 3 * HP_SMALL, 0, &reg));
	EXPECT_EQ(-EINVAL, hp_register(dev, HP_SMALL - 8, 0, &reg));
	EXPECT_EQ(-EINVAL, hp_register(dev, HP_SMALL / 2, 0, &reg));
	EXPECT_EQ(-EINVAL, hp_register(dev, 1, 0, &reg));
	EXPECT_EQ(-EINVAL, hp_register(dev, (uint64_t)-1, 0, &reg));
	/* Over the module's bound: an error, whatever the size. */
	fd = hp_register(dev, 1ULL << 40, 0, &reg);
	EXPECT_GT(0, fd);
	if (fd >= 0)
		close(fd);
	if (max > 0) {
		uint64_t over = 1;

		while (over <= (uint64_t)max)
			over <<= 1;
		fd = hp_register(dev, over, 0, &reg);
		EXPECT_EQ(-ENOSPC, fd) TH_LOG("max %lld, asked %llu", max,
					      (unsigned long long)over);
		if (fd >= 0)
			close(fd);
	}
	/* Nothing leaked. */
	EXPECT_EQ(before, hp_stat("ring_bytes"));
	close(dev);
}

/* RLIMIT_MEMLOCK: a ring the caller may not lock is refused, nothing leaks. */
TEST(register_memlock_charged)
{
	long long before = hp_stat("ring_bytes");
	struct rlimit rl = { 128 << 10, 128 << 10 };
	int dev, fd;
	pid_t pid;

	char on[8] = "";

	hp_sysfs_str("/sys/module/heapprofd/parameters/charge_memlock", on, sizeof(on));
	if (on[0] != 'Y' && on[0] != '1')
		SKIP(return, "charge_memlock is off (%s)", on);
	OPEN_DEV(dev);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* Without CAP_IPC_LOCK the limit applies. */
		if (setrlimit(RLIMIT_MEMLOCK, &rl) || setgid(NOBODY) ||
		    setuid(NOBODY))
			_exit(10);
		fd = hp_register(dev, 1 << 20, 0, NULL);
		if (fd >= 0)
			_exit(11);
		fd = hp_register(dev, HP_SMALL, 0, NULL);
		if (fd < 0)
			_exit(12);
		_exit(0);
	}
	EXPECT_EQ(0, reap(pid));
	EXPECT_EQ(before, hp_stat("ring_bytes"));
	close(dev);
}

/* ------------------------------------------------------------------------ */
/* Bad inputs for every ioctl                                               */
/* ------------------------------------------------------------------------ */

/* A structure followed by a tail the kernel must check for zeroes. */
struct big_register {
	struct heapprofd_register r;
	uint64_t tail[4];
};

TEST(ioctl_register_bad_inputs)
{
	struct big_register big;
	struct heapprofd_register r;
	int dev, fd;

	OPEN_DEV(dev);

	/* Unknown flags and reserved fields: EINVAL. */
	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.flags = 1U << 31;
	EXPECT_EQ(-EINVAL, hp_ioctl(dev, HEAPPROFD_IOC_REGISTER, &r));
	memset(&r, 0, sizeof(r));
	r.size = sizeof(r);
	r.resv[3] = 1;
	EXPECT_EQ(-EINVAL, hp_ioctl(dev, HEAPPROFD_IOC_REGISTER, &r));

	/* Longer with a non-zero tail: E2BIG; with a zero tail: fine. */
	memset(&big, 0, sizeof(big));
	big.r.size = sizeof(big);
	big.r.data_size = HP_SMALL;
	big.tail[2] = 1;
	EXPECT_EQ(-E2BIG, hp_ioctl(dev, HEAPPROFD_IOC_REGISTER, &big));
	big.tail[2] = 0;
	fd = hp_ioctl(dev, HEAPPROFD_IOC_REGISTER, &big);
	EXPECT_LE(0, fd);
	EXPECT_NE(0, big.r.session_id);
	if (fd >= 0)
		close(fd);

	/* Shorter: the rest counts as zero; data_size is still read. */
	memset(&r, 0xff, sizeof(r));
	r.size = offsetof(struct heapprofd_register, session_id);
	r.flags = 0;
	r.data_size = 2 * HP_SMALL;
	fd = hp_ioctl(dev, HEAPPROFD_IOC_REGISTER, &r);
	EXPECT_LE(0, fd);
	if (fd >= 0) {
		struct heapprofd_session_info info;

		EXPECT_EQ(0, hp_info(fd, &info));
		EXPECT_EQ(2 * HP_SMALL, info.data_size);
		close(fd);
	}
	/* Output is copied back only up to the caller's size. */
	EXPECT_EQ((uint64_t)-1, r.session_id);

	/* Too short to hold even the size and flags: EINVAL. */
	memset(&r, 0, sizeof(r));
	r.size = 0;
	EXPECT_EQ(-EINVAL, hp_ioctl(dev, HEAPPROFD_IOC_REGISTER, &r));

	/* Bad pointers: EFAULT. */
	EXPECT_EQ(-EFAULT, hp_ioctl(dev, HEAPPROFD_IOC_REGISTER, NULL));
	EXPECT_EQ(-EFAULT, hp_ioctl(dev, HEAPPROFD_IOC_REGISTER, (void *)8));

	/* Unknown commands: ENOTTY. */
	EXPECT_EQ(-ENOTTY, hp_ioctl(dev, _IO(HEAPPROFD_IOC_MAGIC, 0x7f), NULL));
	EXPECT_EQ(-ENOTTY, hp_ioctl(dev, _IOWR('x', 0x01, struct heapprofd_register), &r));
	EXPECT_EQ(-ENOTTY, hp_ioctl(dev, HEAPPROFD_IOC_WAKE, NULL));
	EXPECT_EQ(-ENOTTY, hp_ioctl(dev, HEAPPROFD_IOC_DEPOSIT_FD, &r));
	close(dev);
}

TEST(ioctl_attach_bad_inputs)
{
	struct {
		struct heapprofd_attach a;
		uint64_t tail[2];
	} big;
	struct heapprofd_register reg;
	struct heapprofd_attach a;
	int dev, sfd, cfd;

	OPEN_DEV(dev);
	sfd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, sfd);

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.flags = 0;			/* neither BY_PID nor BY_ID */
	a.pid = getpid();
	EXPECT_EQ(-EINVAL, hp_ioctl(dev, HEAPPROFD_IOC_ATTACH, &a));
	a.flags = HEAPPROFD_ATTACH_BY_PID | HEAPPROFD_ATTACH_BY_ID;
	EXPECT_EQ(-EINVAL, hp_ioctl(dev, HEAPPROFD_IOC_ATTACH, &a));
	a.flags = HEAPPROFD_ATTACH_BY_PID | (1U << 20);
	EXPECT_EQ(-EINVAL, hp_ioctl(dev, HEAPPROFD_IOC_ATTACH, &a));
	a.flags = HEAPPROFD_ATTACH_BY_PID;
	a.resv[0] = 1;
	EXPECT_EQ(-EINVAL, hp_ioctl(dev, HEAPPROFD_IOC_ATTACH, &a));

	/* No such session. */
	EXPECT_EQ(-ESRCH, hp_attach_pid(dev, 0x3fffffff, NULL));
	EXPECT_EQ(-ESRCH, hp_attach_id(dev, reg.session_id + 1000000, NULL));
	EXPECT_EQ(-EFAULT, hp_ioctl(dev, HEAPPROFD_IOC_ATTACH, (void *)16));

	memset(&big, 0, sizeof(big));
	big.a.size = sizeof(big);
	big.a.flags = HEAPPROFD_ATTACH_BY_ID;
	big.a.session_id = reg.session_id;
	big.tail[1] = 7;
	EXPECT_EQ(-E2BIG, hp_ioctl(dev, HEAPPROFD_IOC_ATTACH, &big));

	/* And the good one works, filling the outputs. */
	cfd = hp_attach_id(dev, reg.session_id, &a);
	ASSERT_LE(0, cfd);
	EXPECT_EQ(FD_CLOEXEC, fcntl(cfd, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(getpid(), a.pid);
	EXPECT_EQ(HP_SMALL, a.data_size);
	EXPECT_EQ(reg.ctl_size, a.ctl_size);
	/* Session-fd ioctls are not consumer-fd ioctls and vice versa. */
	EXPECT_EQ(-ENOTTY, hp_ioctl(cfd, HEAPPROFD_IOC_REGISTER, &reg));
	EXPECT_EQ(-ENOTTY, hp_ioctl(sfd, HEAPPROFD_IOC_ATTACH, &a));
	EXPECT_EQ(-ENOTTY, hp_ioctl(cfd, _IO(HEAPPROFD_IOC_MAGIC, 0x55), NULL));
	EXPECT_EQ(-ENOTTY, hp_ioctl(sfd, _IO(HEAPPROFD_IOC_MAGIC, 0x55), NULL));
	close(cfd);
	close(sfd);
	close(dev);
}

TEST(ioctl_fd_and_info_bad_inputs)
{
	struct {
		struct heapprofd_fd_arg a;
		uint64_t tail;
	} big;
	struct {
		struct heapprofd_session_info i;
		uint64_t tail;
	} bi;
	struct heapprofd_session_info info;
	struct heapprofd_register reg;
	struct heapprofd_fd_arg a;
	int dev, sfd, cfd, mfd;

	OPEN_DEV(dev);
	sfd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, sfd);
	cfd = hp_attach_id(dev, reg.session_id, NULL);
	ASSERT_LE(0, cfd);
	mfd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, mfd);

	/* DEPOSIT: slot, flags, reserved, fd. */
	EXPECT_EQ(-EINVAL, hp_deposit(sfd, HEAPPROFD_FD_SLOTS, mfd));
	EXPECT_EQ(-EINVAL, hp_deposit(sfd, 0xffffffff, mfd));
	EXPECT_EQ(-EBADF, hp_deposit(sfd, HEAPPROFD_FD_MAPS, -1));
	EXPECT_EQ(-EBADF, hp_deposit(sfd, HEAPPROFD_FD_MAPS, 9999));
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.fd = mfd;
	a.flags = 1;
	EXPECT_EQ(-EINVAL, hp_ioctl(sfd, HEAPPROFD_IOC_DEPOSIT_FD, &a));
	a.flags = 0;
	a.resv[1] = 1;
	EXPECT_EQ(-EINVAL, hp_ioctl(sfd, HEAPPROFD_IOC_DEPOSIT_FD, &a));
	EXPECT_EQ(-EFAULT, hp_ioctl(sfd, HEAPPROFD_IOC_DEPOSIT_FD, (void *)1));
	memset(&big, 0, sizeof(big));
	big.a.size = sizeof(big);
	big.a.fd = mfd;
	big.tail = 1;
	EXPECT_EQ(-E2BIG, hp_ioctl(sfd, HEAPPROFD_IOC_DEPOSIT_FD, &big));
	/* The session's own fd may not go into its slots (a reference loop). */
	EXPECT_EQ(-EINVAL, hp_deposit(sfd, HEAPPROFD_FD_MAPS, sfd));
	/* Nothing of that stuck. */
	ASSERT_EQ(0, hp_info(sfd, &info));
	EXPECT_EQ(0, info.fd_slots);

	/* RECEIVE: slot range, empty slot, flags, reserved, pointer. */
	EXPECT_EQ(-EINVAL, hp_receive(cfd, HEAPPROFD_FD_SLOTS));
	EXPECT_EQ(-ENOENT, hp_receive(cfd, HEAPPROFD_FD_MAPS));
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.flags = 2;
	EXPECT_EQ(-EINVAL, hp_ioctl(cfd, HEAPPROFD_IOC_RECEIVE_FD, &a));
	EXPECT_EQ(-EFAULT, hp_ioctl(cfd, HEAPPROFD_IOC_RECEIVE_FD, (void *)1));
	/* DEPOSIT is for the producer, RECEIVE for the consumer. */
	EXPECT_GT(0, hp_deposit(cfd, HEAPPROFD_FD_MAPS, mfd));
	EXPECT_GT(0, hp_receive(sfd, HEAPPROFD_FD_MAPS));

	/* INFO: flags, reserved, pointer, long struct. */
	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	info.flags = 1;
	EXPECT_EQ(-EINVAL, hp_ioctl(sfd, HEAPPROFD_IOC_INFO, &info));
	EXPECT_EQ(-EFAULT, hp_ioctl(cfd, HEAPPROFD_IOC_INFO, (void *)1));
	memset(&bi, 0, sizeof(bi));
	bi.i.size = sizeof(bi);
	bi.tail = 3;
	EXPECT_EQ(-E2BIG, hp_ioctl(sfd, HEAPPROFD_IOC_INFO, &bi));
	bi.tail = 0;
	EXPECT_EQ(0, hp_ioctl(sfd, HEAPPROFD_IOC_INFO, &bi));
	EXPECT_EQ(reg.session_id, bi.i.session_id);
	/* WAKE takes no argument and works on either fd. */
	EXPECT_EQ(0, hp_ioctl(sfd, HEAPPROFD_IOC_WAKE, NULL));

	close(mfd);
	close(cfd);
	close(sfd);
	close(dev);
}

/* ------------------------------------------------------------------------ */
/* mmap: offsets, lengths, protections, private, mremap                     */
/* ------------------------------------------------------------------------ */

TEST(mmap_bad_requests)
{
	struct heapprofd_register reg;
	size_t len;
	void *p, *q;
	int dev, fd;

	OPEN_DEV(dev);
	fd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	len = reg.ctl_size + 2 * HP_SMALL;

#define EXPECT_MMAP_EINVAL(l, prot, flags, off) do {			\
		void *m_ = mmap(NULL, (l), (prot), (flags), fd, (off));	\
		int e_ = errno;						\
		EXPECT_EQ(MAP_FAILED, m_);				\
		if (m_ == MAP_FAILED) {					\
			EXPECT_EQ(EINVAL, e_);				\
		} else {						\
			munmap(m_, (l));				\
		}							\
	} while (0)

	EXPECT_MMAP_EINVAL(len, PROT_READ | PROT_WRITE, MAP_SHARED, 4096);
	EXPECT_MMAP_EINVAL(len - 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 4096);
	EXPECT_MMAP_EINVAL(len, PROT_READ | PROT_WRITE, MAP_SHARED,
			   (off_t)HEAPPROFD_MMAP_KRING);
	EXPECT_MMAP_EINVAL(len - 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	EXPECT_MMAP_EINVAL(reg.ctl_size, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	EXPECT_MMAP_EINVAL(len + 4096, PROT_READ | PROT_WRITE, MAP_SHARED, 0);
	EXPECT_MMAP_EINVAL(len, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_SHARED, 0);
	EXPECT_MMAP_EINVAL(len, PROT_READ | PROT_EXEC, MAP_SHARED, 0);
	EXPECT_MMAP_EINVAL(len, PROT_READ | PROT_WRITE, MAP_PRIVATE, 0);

	/* The right mapping can be neither made executable nor grown. */
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ASSERT_NE(MAP_FAILED, p);
	EXPECT_NE(0, mprotect(p, len, PROT_READ | PROT_EXEC));
	q = mremap(p, len, len + 4096, MREMAP_MAYMOVE);
	EXPECT_EQ(MAP_FAILED, q);
	if (q != MAP_FAILED)
		p = q;
	/* Still intact afterwards. */
	EXPECT_EQ(HEAPPROFD_CTL_MAGIC, ((struct heapprofd_ctl *)p)->magic);
	EXPECT_EQ(0, munmap(p, len));
	close(fd);
	close(dev);
}

/* ------------------------------------------------------------------------ */
/* Produce in one process, consume in another                               */
/* ------------------------------------------------------------------------ */

#define XPROC_RECORDS	2000

TEST(produce_consume_across_processes)
{
	struct heapprofd_session_info info;
	struct heapprofd_attach att;
	struct hp_sync s;
	struct hp_ring r;
	uint64_t child_pid, id, seq, expect = 0;
	size_t len;
	void *map;
	int dev, cfd, got;
	pid_t pid;

	OPEN_DEV(dev);
	ASSERT_EQ(0, hp_sync_init(&s));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct heapprofd_register reg;
		struct hp_ring pr;
		uint64_t step, i;
		int fd;

		hp_sync_child(&s);
		fd = hp_register(dev, HP_SMALL, 0, &reg);
		if (fd < 0)
			_exit(10);
		map = hp_map(fd, reg.ctl_size, HP_SMALL, &len);
		if (map == MAP_FAILED || hp_ring_open(&pr, map, len))
			_exit(11);
		hp_sync_send(s.to_parent[1], reg.session_id);
		/* Wait for the consumer to attach, then produce. */
		if (hp_sync_recv(s.to_child[0], &step))
			_exit(12);
		if (__atomic_load_n(&pr.kstate->state, __ATOMIC_ACQUIRE) !=
		    HEAPPROFD_STATE_ATTACHED)
			_exit(13);
		if (pr.kstate->consumer_pid != (uint32_t)getppid())
			_exit(14);
		for (i = 0; i < XPROC_RECORDS; i++) {
			int w;

			/* The ring is smaller than all records: wait for room. */
			while ((w = hp_try_produce(&pr, i, sizeof(struct hp_test_rec) +
						   8 * (i % 7))) < 0)
				sched_yield();
			if (w == 1 && ioctl(fd, HEAPPROFD_IOC_WAKE))
				_exit(15);
		}
		hp_sync_send(s.to_parent[1], 1);
		/* Stay alive until the parent has read everything. */
		hp_sync_recv(s.to_child[0], &step);
		_exit(0);
	}
	hp_sync_parent(&s);
	ASSERT_EQ(0, hp_sync_recv(s.to_parent[0], &id));
	child_pid = (uint64_t)pid;

	cfd = hp_attach_pid(dev, pid, &att);
	ASSERT_LE(0, cfd) TH_LOG("attach: %s", strerror(-cfd));
	EXPECT_EQ(id, att.session_id);
	EXPECT_EQ((pid_t)child_pid, att.pid);
	ASSERT_EQ(0, hp_info(cfd, &info));
	EXPECT_EQ(HEAPPROFD_STATE_ATTACHED, info.state);
	EXPECT_EQ(pid, info.pid);
	map = hp_map(cfd, att.ctl_size, att.data_size, &len);
	ASSERT_NE(MAP_FAILED, map);
	ASSERT_EQ(0, hp_ring_open(&r, map, len));
	ASSERT_EQ(0, hp_sync_send(s.to_child[1], 1));

	while (expect < XPROC_RECORDS) {
		struct pollfd p = { .fd = cfd, .events = POLLIN };

		got = hp_consume(&r, &seq);
		ASSERT_LE(0, got) TH_LOG("corrupt record after %llu",
					 (unsigned long long)expect);
		if (got == 1) {
			ASSERT_EQ(expect, seq);
			expect++;
			continue;
		}
		if (!hp_ring_prepare_sleep(&r))
			continue;
		ASSERT_LT(0, poll(&p, 1, 10000)) TH_LOG("no wakeup at %llu",
							(unsigned long long)expect);
		hp_ring_awake(&r);
	}
	EXPECT_EQ(0, hp_consume(&r, &seq));
	EXPECT_EQ(XPROC_RECORDS, r.cnt->records_written);
	EXPECT_EQ(0, r.cnt->records_dropped);
	EXPECT_EQ(r.prod->tail, r.cons->head);
	/* sysfs saw the same bytes on both sides. */
	EXPECT_EQ((long long)r.prod->tail, hp_sess_stat(id, "produced_bytes"));
	EXPECT_EQ((long long)r.cons->head, hp_sess_stat(id, "consumed_bytes"));

	hp_sync_send(s.to_child[1], 2);
	EXPECT_EQ(0, reap(pid));
	munmap(map, len);
	close(cfd);
	close(dev);
}

/* ------------------------------------------------------------------------ */
/* Exact drops                                                              */
/* ------------------------------------------------------------------------ */

TEST(drops_counted_exactly)
{
	const uint32_t rec = 64;
	struct heapprofd_register reg;
	struct hp_ring r;
	uint64_t i, fits, seq;
	size_t len;
	void *map;
	int dev, fd, cfd;
	long long tot_rec, tot_bytes;

	OPEN_DEV(dev);
	fd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	cfd = hp_attach_id(dev, reg.session_id, NULL);
	ASSERT_LE(0, cfd);
	map = hp_map(fd, reg.ctl_size, HP_SMALL, &len);
	ASSERT_NE(MAP_FAILED, map);
	ASSERT_EQ(0, hp_ring_open(&r, map, len));
	tot_rec = hp_stat("records_dropped_total");
	tot_bytes = hp_stat("bytes_dropped_total");

	fits = HP_SMALL / rec;
	for (i = 0; i < fits; i++)
		ASSERT_LE(0, hp_produce(&r, i, rec)) TH_LOG("record %llu", (unsigned long long)i);
	EXPECT_EQ(HP_SMALL, r.prod->tail);
	/* Full: the next 37 are dropped and counted, records and bytes. */
	for (i = 0; i < 37; i++)
		EXPECT_EQ(-1, hp_produce(&r, fits + i, rec));
	EXPECT_EQ(37, r.cnt->records_dropped);
	EXPECT_EQ(37 * rec, r.cnt->bytes_dropped);
	EXPECT_EQ(fits, r.cnt->records_written);
	EXPECT_EQ(HP_SMALL, r.prod->tail);

	/* The kernel reports the same numbers. */
	EXPECT_EQ(37, hp_sess_stat(reg.session_id, "dropped_records"));
	EXPECT_EQ(tot_rec + 37, hp_stat("records_dropped_total"));
	EXPECT_EQ(tot_bytes + 37 * rec, hp_stat("bytes_dropped_total"));

	/* Consuming one record makes room for exactly one. */
	ASSERT_EQ(1, hp_consume(&r, &seq));
	EXPECT_EQ(0, seq);
	EXPECT_EQ(0, hp_produce(&r, 1000, rec));
	EXPECT_EQ(-1, hp_produce(&r, 1001, rec));
	EXPECT_EQ(38, r.cnt->records_dropped);
	/* What is in the ring is intact, in order. */
	for (i = 1; i < fits; i++) {
		ASSERT_EQ(1, hp_consume(&r, &seq));
		ASSERT_EQ(i, seq);
	}
	ASSERT_EQ(1, hp_consume(&r, &seq));
	EXPECT_EQ(1000, seq);
	EXPECT_EQ(0, hp_consume(&r, &seq));

	/* Hostile counters are clamped, never trusted into an overflow. */
	r.cnt->records_dropped = ~0ULL;
	r.cnt->bytes_dropped = ~0ULL;
	EXPECT_LE(0, hp_stat("records_dropped_total"));
	EXPECT_LE(0, hp_stat("bytes_dropped_total"));

	munmap(map, len);
	close(cfd);
	close(fd);
	close(dev);
}

/* ------------------------------------------------------------------------ */
/* Wakeups                                                                  */
/* ------------------------------------------------------------------------ */

struct poll_arg {
	int fd;
	int ret;
	short revents;
};

static void *poll_thread(void *p)
{
	struct poll_arg *a = p;
	struct pollfd pfd = { .fd = a->fd, .events = POLLIN };

	a->ret = poll(&pfd, 1, 20000);
	a->revents = pfd.revents;
	return NULL;
}

TEST(wake_ioctl_wakes_sleeping_consumer)
{
	struct heapprofd_register reg;
	struct poll_arg pa;
	struct pollfd pfd;
	struct hp_ring pr, cr;
	pthread_t th;
	size_t plen, clen;
	void *pmap, *cmap;
	long long wakes;
	uint64_t seq;
	int dev, fd, cfd;

	OPEN_DEV(dev);
	fd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	cfd = hp_attach_id(dev, reg.session_id, NULL);
	ASSERT_LE(0, cfd);
	pmap = hp_map(fd, reg.ctl_size, HP_SMALL, &plen);
	cmap = hp_map(cfd, reg.ctl_size, HP_SMALL, &clen);
	ASSERT_NE(MAP_FAILED, pmap);
	ASSERT_NE(MAP_FAILED, cmap);
	ASSERT_EQ(0, hp_ring_open(&pr, pmap, plen));
	ASSERT_EQ(0, hp_ring_open(&cr, cmap, clen));

	/* Empty ring: no EPOLLIN. */
	pfd.fd = cfd;
	pfd.events = POLLIN;
	EXPECT_EQ(0, poll(&pfd, 1, 0));

	/* Awake consumer: committing needs no wakeup. */
	EXPECT_EQ(0, hp_produce(&pr, 1, 64));
	EXPECT_EQ(1, poll(&pfd, 1, 0));
	EXPECT_NE(0, pfd.revents & POLLIN);
	ASSERT_EQ(1, hp_consume(&cr, &seq));

	/* Sleeping consumer: the commit asks for one WAKE, which wakes poll. */
	wakes = hp_stat("wakeups_total");
	ASSERT_EQ(1, hp_ring_prepare_sleep(&cr));
	pa.fd = cfd;
	pa.ret = -2;
	ASSERT_EQ(0, pthread_create(&th, NULL, poll_thread, &pa));
	usleep(300 * 1000);	/* let the thread block in poll() */
	EXPECT_EQ(1, hp_produce(&pr, 2, 64));
	/* Only one producer is told to wake. */
	EXPECT_EQ(0, hp_produce(&pr, 3, 64));
	EXPECT_EQ(0, ioctl(fd, HEAPPROFD_IOC_WAKE));
	ASSERT_EQ(0, pthread_join(th, NULL));
	EXPECT_EQ(1, pa.ret);
	EXPECT_NE(0, pa.revents & POLLIN);
	EXPECT_LT(wakes, hp_stat("wakeups_total"));
	hp_ring_awake(&cr);
	ASSERT_EQ(1, hp_consume(&cr, &seq));
	EXPECT_EQ(2, seq);
	ASSERT_EQ(1, hp_consume(&cr, &seq));
	EXPECT_EQ(3, seq);

	munmap(pmap, plen);
	munmap(cmap, clen);
	close(cfd);
	close(fd);
	close(dev);
}

/* ------------------------------------------------------------------------ */
/* fd deposit and receipt                                                   */
/* ------------------------------------------------------------------------ */

#define MARKER "hp-selftest-marker"

TEST(fd_deposit_and_receive)
{
	struct heapprofd_session_info info;
	long long passed = hp_stat("fds_passed_total");
	struct hp_sync s;
	char *buf;
	uint64_t id;
	ssize_t n, total = 0;
	int dev, cfd, mfd, memfd;
	pid_t pid;

	OPEN_DEV(dev);
	ASSERT_EQ(0, hp_sync_init(&s));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct heapprofd_register reg;
		int fd, maps, mem;
		void *m;

		hp_sync_child(&s);
		/* Something recognisable in our maps. */
		memfd = memfd_create(MARKER, MFD_CLOEXEC);
		if (memfd < 0 || ftruncate(memfd, 4096))
			_exit(10);
		m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, memfd, 0);
		if (m == MAP_FAILED)
			_exit(11);
		fd = hp_register(dev, HP_SMALL, 0, &reg);
		maps = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
		mem = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
		if (fd < 0 || maps < 0 || mem < 0)
			_exit(12);
		if (hp_deposit(fd, HEAPPROFD_FD_MAPS, maps) ||
		    hp_deposit(fd, HEAPPROFD_FD_MEM, mem))
			_exit(13);
		/* The slot holds the file, not our fd number. */
		close(maps);
		close(mem);
		hp_sync_send(s.to_parent[1], reg.session_id);
		hp_sync_recv(s.to_child[0], NULL);
		_exit(0);
	}
	hp_sync_parent(&s);
	ASSERT_EQ(0, hp_sync_recv(s.to_parent[0], &id));
	cfd = hp_attach_id(dev, id, NULL);
	ASSERT_LE(0, cfd);
	ASSERT_EQ(0, hp_info(cfd, &info));
	EXPECT_EQ((1U << HEAPPROFD_FD_MAPS) | (1U << HEAPPROFD_FD_MEM), info.fd_slots);

	mfd = hp_receive(cfd, HEAPPROFD_FD_MAPS);
	ASSERT_LE(0, mfd) TH_LOG("receive: %s", strerror(-mfd));
	EXPECT_EQ(FD_CLOEXEC, fcntl(mfd, F_GETFD) & FD_CLOEXEC);
	buf = calloc(1, 1 << 16);
	ASSERT_NE(NULL, buf);
	while ((n = read(mfd, buf + total, (1 << 16) - 1 - total)) > 0)
		total += n;
	EXPECT_LT(0, total);
	/* It is the producer's maps, not ours. */
	EXPECT_NE(NULL, strstr(buf, "/memfd:" MARKER)) TH_LOG("%s", buf);
	free(buf);
	close(mfd);

	/* /proc/<pid>/mem of the producer: a readable page of its memory. */
	memfd = hp_receive(cfd, HEAPPROFD_FD_MEM);
	EXPECT_LE(0, memfd);
	if (memfd >= 0)
		close(memfd);
	/* Empty slot. */
	EXPECT_EQ(-ENOENT, hp_receive(cfd, HEAPPROFD_FD_EXE));
	EXPECT_LE(passed + 2, hp_stat("fds_passed_total"));

	hp_sync_send(s.to_child[1], 1);
	EXPECT_EQ(0, reap(pid));
	close(cfd);
	close(dev);
}

/* ------------------------------------------------------------------------ */
/* Attach permissions                                                       */
/* ------------------------------------------------------------------------ */

TEST(attach_unprivileged_to_root_session_eperm)
{
	struct heapprofd_register reg;
	int dev, fd;
	pid_t pid;

	OPEN_DEV(dev);
	ASSERT_EQ(0, getuid()) TH_LOG("this test runs as root");
	fd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int d;

		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(10);
		d = hp_dev_open();
		if (d < 0)
			_exit(11);
		if (hp_attach_pid(d, getppid(), NULL) != -EPERM)
			_exit(12);
		if (hp_attach_id(d, reg.session_id, NULL) != -EPERM)
			_exit(13);
		_exit(0);
	}
	EXPECT_EQ(0, reap(pid));
	close(fd);
	close(dev);
}

/* CAP_SYS_ADMIN in a child user namespace is not enough. */
TEST(attach_from_user_namespace_eperm)
{
	struct heapprofd_register reg;
	int dev, fd, rc;
	pid_t pid;

	OPEN_DEV(dev);
	fd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(10);
		if (unshare(CLONE_NEWUSER))
			_exit(4);	/* no user namespaces here */
		_exit(hp_attach_id(dev, reg.session_id, NULL) == -EPERM ? 0 : 12);
	}
	rc = reap(pid);
	if (rc == 4)
		SKIP(goto out, "no user namespaces");
	EXPECT_EQ(0, rc);
out:
	close(fd);
	close(dev);
}

TEST(attach_same_uid_depends_on_dumpable)
{
	struct hp_sync s;
	uint64_t id, step;
	int dev, c;
	pid_t prod, cons;

	OPEN_DEV(dev);
	ASSERT_EQ(0, hp_sync_init(&s));
	prod = fork();
	ASSERT_LE(0, prod);
	if (prod == 0) {
		struct heapprofd_register reg;
		int fd;

		hp_sync_child(&s);
		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(10);
		/* A uid change cleared dumpable; a normal process has it. */
		if (prctl(PR_SET_DUMPABLE, 1))
			_exit(11);
		fd = hp_register(dev, HP_SMALL, 0, &reg);
		if (fd < 0)
			_exit(12);
		hp_sync_send(s.to_parent[1], reg.session_id);
		hp_sync_recv(s.to_child[0], &step);	/* consumer tried */
		if (prctl(PR_SET_DUMPABLE, 0))
			_exit(13);
		hp_sync_send(s.to_parent[1], 2);
		hp_sync_recv(s.to_child[0], &step);
		_exit(0);
	}
	hp_sync_parent(&s);
	ASSERT_EQ(0, hp_sync_recv(s.to_parent[0], &id));

	cons = fork();
	ASSERT_LE(0, cons);
	if (cons == 0) {
		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(20);
		c = hp_attach_id(dev, id, NULL);
		if (c < 0)
			_exit(21);
		close(c);
		_exit(0);
	}
	EXPECT_EQ(0, reap(cons)) TH_LOG("same uid, dumpable: attach must work");

	ASSERT_EQ(0, hp_sync_send(s.to_child[1], 1));
	ASSERT_EQ(0, hp_sync_recv(s.to_parent[0], &step));
	cons = fork();
	ASSERT_LE(0, cons);
	if (cons == 0) {
		if (setgid(NOBODY) || setuid(NOBODY))
			_exit(20);
		_exit(hp_attach_id(dev, id, NULL) == -EPERM ? 0 : 22);
	}
	EXPECT_EQ(0, reap(cons)) TH_LOG("owner not dumpable: EPERM expected");
	/* Root still may. */
	c = hp_attach_id(dev, id, NULL);
	EXPECT_LE(0, c);
	if (c >= 0)
		close(c);
	hp_sync_send(s.to_child[1], 3);
	EXPECT_EQ(0, reap(prod));
	close(dev);
}

/* ------------------------------------------------------------------------ */
/* One consumer at a time                                                   */
/* ------------------------------------------------------------------------ */

TEST(second_consumer_ebusy)
{
	struct heapprofd_register reg;
	long long attaches = hp_stat("attaches_total");
	int dev, fd, c1, c2;

	OPEN_DEV(dev);
	fd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	c1 = hp_attach_id(dev, reg.session_id, NULL);
	ASSERT_LE(0, c1);
	EXPECT_EQ(-EBUSY, hp_attach_id(dev, reg.session_id, NULL));
	EXPECT_EQ(-EBUSY, hp_attach_pid(dev, getpid(), NULL));
	close(c1);
	/* The consumer left: the next may come. */
	c2 = hp_attach_id(dev, reg.session_id, NULL);
	EXPECT_LE(0, c2);
	EXPECT_EQ(attaches + 2, hp_stat("attaches_total"));
	if (c2 >= 0)
		close(c2);
	close(fd);
	close(dev);
}

/* poll() on the session fd: EPOLLHUP once the consumer detaches. */
TEST(producer_sees_consumer_detach)
{
	struct heapprofd_register reg;
	struct pollfd p;
	int dev, fd, c;

	OPEN_DEV(dev);
	fd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	c = hp_attach_id(dev, reg.session_id, NULL);
	ASSERT_LE(0, c);
	p.fd = fd;
	p.events = POLLIN;
	EXPECT_EQ(0, poll(&p, 1, 0));
	close(c);
	p.revents = 0;
	EXPECT_EQ(1, poll(&p, 1, 5000));
	EXPECT_NE(0, p.revents & POLLHUP);
	close(fd);
	close(dev);
}

/* ------------------------------------------------------------------------ */
/* Lifetime                                                                 */
/* ------------------------------------------------------------------------ */

TEST(producer_exit_with_consumer_attached)
{
	struct heapprofd_session_info info;
	long long active;
	struct hp_sync s;
	struct hp_ring r;
	struct pollfd p;
	uint64_t id, seq;
	size_t len;
	void *map;
	int dev, cfd, i;
	pid_t pid;

	OPEN_DEV(dev);
	ASSERT_EQ(0, hp_sync_init(&s));
	active = hp_stat("sessions_active");
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct heapprofd_register reg;
		struct hp_ring pr;
		int fd;

		hp_sync_child(&s);
		fd = hp_register(dev, HP_SMALL, 0, &reg);
		if (fd < 0)
			_exit(10);
		map = hp_map(fd, reg.ctl_size, HP_SMALL, &len);
		if (map == MAP_FAILED || hp_ring_open(&pr, map, len))
			_exit(11);
		for (i = 0; i < 3; i++)
			if (hp_produce(&pr, 100 + i, 128) < 0)
				_exit(12);
		hp_sync_send(s.to_parent[1], reg.session_id);
		hp_sync_recv(s.to_child[0], NULL);
		_exit(0);	/* with the session fd and mapping still open */
	}
	hp_sync_parent(&s);
	ASSERT_EQ(0, hp_sync_recv(s.to_parent[0], &id));
	EXPECT_EQ(active + 1, hp_stat("sessions_active"));
	cfd = hp_attach_id(dev, id, NULL);
	ASSERT_LE(0, cfd);
	map = hp_map(cfd, HEAPPROFD_CTL_SIZE, HP_SMALL, &len);
	ASSERT_NE(MAP_FAILED, map);
	ASSERT_EQ(0, hp_ring_open(&r, map, len));

	p.fd = cfd;
	p.events = POLLIN;
	ASSERT_EQ(1, poll(&p, 1, 0));
	EXPECT_EQ(0, p.revents & POLLHUP);

	hp_sync_send(s.to_child[1], 1);
	EXPECT_EQ(0, reap(pid));
	p.revents = 0;
	ASSERT_EQ(1, poll(&p, 1, 10000));
	EXPECT_NE(0, p.revents & POLLHUP);
	ASSERT_EQ(0, hp_info(cfd, &info));
	EXPECT_EQ(HEAPPROFD_STATE_CLOSED, info.state);
	EXPECT_EQ(HEAPPROFD_STATE_CLOSED, r.kstate->state);
	/* Closed, but not gone: a new attach is refused ... */
	EXPECT_GT(0, hp_attach_id(dev, id, NULL));
	/* ... and what the ring holds can still be read. */
	for (i = 0; i < 3; i++) {
		ASSERT_EQ(1, hp_consume(&r, &seq));
		EXPECT_EQ(100 + i, seq);
	}
	EXPECT_EQ(0, hp_consume(&r, &seq));

	/* The last reference frees the session. */
	munmap(map, len);
	close(cfd);
	EXPECT_EQ(active, hp_stat("sessions_active"));
	close(dev);
}

/* Closing the session fd (with no mapping) ends the session. */
TEST(close_frees_session)
{
	struct heapprofd_register reg;
	long long active, bytes;
	char path[128];
	size_t len;
	void *map;
	int dev, fd;

	OPEN_DEV(dev);
	active = hp_stat("sessions_active");
	bytes = hp_stat("ring_bytes");
	fd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	EXPECT_EQ(active + 1, hp_stat("sessions_active"));
	EXPECT_LE(bytes + (long long)HP_SMALL, hp_stat("ring_bytes"));
	map = hp_map(fd, reg.ctl_size, HP_SMALL, &len);
	ASSERT_NE(MAP_FAILED, map);
	/* The mapping alone keeps the memory. */
	close(fd);
	((volatile uint8_t *)map)[reg.ctl_size] = 1;
	EXPECT_EQ(0, munmap(map, len));
	EXPECT_EQ(active, hp_stat("sessions_active"));
	EXPECT_EQ(bytes, hp_stat("ring_bytes"));
	snprintf(path, sizeof(path), HP_SYSFS "/sessions/%llu",
		 (unsigned long long)reg.session_id);
	EXPECT_NE(0, access(path, F_OK));
	close(dev);
}

/* ------------------------------------------------------------------------ */
/* fork                                                                     */
/* ------------------------------------------------------------------------ */

TEST(fork_child_has_no_mapping_and_registers_its_own)
{
	struct heapprofd_register reg;
	struct hp_ring r;
	uint64_t tail;
	size_t len;
	void *map;
	int dev, fd;
	pid_t pid;

	OPEN_DEV(dev);
	fd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	map = hp_map(fd, reg.ctl_size, HP_SMALL, &len);
	ASSERT_NE(MAP_FAILED, map);
	ASSERT_EQ(0, hp_ring_open(&r, map, len));
	ASSERT_EQ(0, hp_produce(&r, 1, 64));
	tail = r.prod->tail;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct heapprofd_register creg;
		unsigned char vec[64];
		int cfd;

		/* Not mapped here (VM_DONTCOPY): mincore says ENOMEM. */
		if (mincore(map, 4096, vec) == 0 || errno != ENOMEM)
			_exit(10);
		/* A write there is a fault, not a write into the ring. */
		pid = fork();
		if (pid == 0) {
			((volatile uint64_t *)r.prod)[0] = 0xdead;
			_exit(0);
		}
		if (reap(pid) != 128 + SIGSEGV)
			_exit(11);
		/* The child may register its own session. */
		cfd = hp_register(dev, HP_SMALL, 0, &creg);
		if (cfd < 0 || creg.session_id == reg.session_id)
			_exit(12);
		_exit(0);
	}
	EXPECT_EQ(0, reap(pid));
	/* The parent's ring is untouched. */
	EXPECT_EQ(tail, r.prod->tail);
	munmap(map, len);
	close(fd);
	close(dev);
}

/* ------------------------------------------------------------------------ */
/* sysfs                                                                    */
/* ------------------------------------------------------------------------ */

TEST(sysfs_files_exist_and_change)
{
	static const char *const files[] = {
		"version", "sessions_active", "sessions_total",
		"attaches_total", "fds_passed_total", "ring_bytes",
		"wakeups_total", "records_dropped_total",
		"bytes_dropped_total",
	};
	struct heapprofd_register reg;
	long long active, total;
	char path[256], comm[32], want[32], missing[64];
	struct hp_ring r;
	size_t len, i;
	void *map;
	int dev, fd, c;
	uint64_t seq;

	OPEN_DEV(dev);
	missing[0] = 0;
	for (i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (hp_stat(files[i]) < 0)
			snprintf(missing, sizeof(missing), "%s", files[i]);
	EXPECT_STREQ("", missing);
	EXPECT_EQ(HEAPPROFD_ABI_VERSION, hp_stat("version"));

	active = hp_stat("sessions_active");
	total = hp_stat("sessions_total");
	fd = hp_register(dev, 2 * HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	EXPECT_EQ(active + 1, hp_stat("sessions_active"));
	EXPECT_EQ(total + 1, hp_stat("sessions_total"));
	EXPECT_EQ(getpid(), hp_sess_stat(reg.session_id, "pid"));
	EXPECT_EQ(2 * HP_SMALL, hp_sess_stat(reg.session_id, "ring_size"));
	EXPECT_EQ(0, hp_sess_stat(reg.session_id, "produced_bytes"));
	snprintf(path, sizeof(path), HP_SYSFS "/sessions/%llu/comm",
		 (unsigned long long)reg.session_id);
	ASSERT_EQ(0, hp_sysfs_str(path, comm, sizeof(comm)));
	ASSERT_EQ(0, prctl(PR_GET_NAME, want));
	EXPECT_STREQ(want, comm);

	map = hp_map(fd, reg.ctl_size, 2 * HP_SMALL, &len);
	ASSERT_NE(MAP_FAILED, map);
	ASSERT_EQ(0, hp_ring_open(&r, map, len));
	c = hp_attach_id(dev, reg.session_id, NULL);
	ASSERT_LE(0, c);
	for (i = 0; i < 5; i++)
		ASSERT_EQ(0, hp_produce(&r, i, 96));
	EXPECT_EQ(5 * 96, hp_sess_stat(reg.session_id, "produced_bytes"));
	ASSERT_EQ(1, hp_consume(&r, &seq));
	ASSERT_EQ(1, hp_consume(&r, &seq));
	EXPECT_EQ(2 * 96, hp_sess_stat(reg.session_id, "consumed_bytes"));
	EXPECT_EQ(0, hp_sess_stat(reg.session_id, "dropped_records"));

	close(c);
	munmap(map, len);
	close(fd);
	EXPECT_EQ(active, hp_stat("sessions_active"));
	EXPECT_EQ(-1, hp_sess_stat(reg.session_id, "pid"));
	close(dev);
}

/* ------------------------------------------------------------------------ */
/* Generic netlink                                                          */
/* ------------------------------------------------------------------------ */

TEST(netlink_events_and_dump)
{
	struct heapprofd_register reg;
	struct hp_nl_msg m;
	struct hp_nl nl, dn;
	struct hp_sync s;
	uint64_t id;
	int dev, fd, ret;
	pid_t pid;

	OPEN_DEV(dev);
	ret = hp_nl_open(&nl);
	ASSERT_EQ(0, ret) TH_LOG("resolve family %s: %s", HEAPPROFD_GENL_NAME,
				 strerror(-ret));
	ASSERT_NE(0, nl.events_grp) TH_LOG("no \"events\" group");
	ASSERT_EQ(0, hp_nl_join_events(&nl));

	ASSERT_EQ(0, hp_sync_init(&s));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		hp_sync_child(&s);
		prctl(PR_SET_NAME, "hp-nl-child");
		fd = hp_register(dev, HP_SMALL, 0, &reg);
		if (fd < 0)
			_exit(10);
		hp_sync_send(s.to_parent[1], reg.session_id);
		hp_sync_recv(s.to_child[0], NULL);
		_exit(0);
	}
	hp_sync_parent(&s);
	ASSERT_EQ(0, hp_sync_recv(s.to_parent[0], &id));
	ASSERT_EQ(1, hp_nl_wait(&nl, HEAPPROFD_CMD_SESSION_NEW, id, &m, 5000));
	EXPECT_EQ((uint32_t)pid, m.pid);
	EXPECT_EQ(1, m.has_comm);
	EXPECT_STREQ("hp-nl-child", m.comm);

	/* The dump lists the live session. */
	ASSERT_EQ(0, hp_nl_open(&dn));
	ASSERT_EQ(1, hp_nl_dump_find(&dn, id, &m));
	EXPECT_EQ((uint32_t)pid, m.pid);
	EXPECT_EQ(HP_SMALL, m.data_size);
	EXPECT_STREQ("hp-nl-child", m.comm);
	close(dn.fd);

	hp_sync_send(s.to_child[1], 1);
	EXPECT_EQ(0, reap(pid));
	ASSERT_EQ(1, hp_nl_wait(&nl, HEAPPROFD_CMD_SESSION_CLOSED, id, &m, 5000));
	EXPECT_EQ(id, m.session_id);
	EXPECT_EQ((uint32_t)pid, m.pid);
	/* Gone from the dump. */
	ASSERT_EQ(0, hp_nl_open(&dn));
	EXPECT_EQ(0, hp_nl_dump_find(&dn, id, &m));
	close(dn.fd);
	close(nl.fd);
	close(dev);
}

/* ------------------------------------------------------------------------ */
/* Each attack of a hostile local user, run unprivileged                   */
/* ------------------------------------------------------------------------ */

/* Become uid/gid 65534 (or the given gid) with no supplementary groups. */
static int drop_to(gid_t gid)
{
	if (setgroups(0, NULL) || setresgid(gid, gid, gid) ||
	    setresuid(NOBODY, NOBODY, NOBODY))
		return -1;
	/* A credential change clears dumpable; an ordinary process has it. */
	return prctl(PR_SET_DUMPABLE, 1);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;	/* the same every time: the DIR's own fd included */
}

static int write_file(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -EIO;
}

struct clone_reg {
	int dev;
	int ret;
};

/* Runs in a clone(CLONE_FILES) helper: register, leave the fd, exit. */
static int clone_register(void *arg)
{
	struct clone_reg *c = arg;
	int fd = hp_register(c->dev, HP_SMALL, 0, NULL);

	c->ret = fd < 0 ? -errno : fd;
	return 0;
}

/*
 * 7a: helpers that share the fd table register sessions and exit; the
 * rings stay. They are charged to the user, so the user's RLIMIT_MEMLOCK
 * bounds them all (each 64 KiB ring costs 68 KiB with its control page).
 */
TEST(memlock_clone_files_helpers_charged_to_user)
{
	char on[8] = "";
	int dev, rc;
	pid_t pid;

	hp_sysfs_str("/sys/module/heapprofd/parameters/charge_memlock", on, sizeof(on));
	if (on[0] != 'Y' && on[0] != '1')
		SKIP(return, "charge_memlock is off (%s)", on);
	OPEN_DEV(dev);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct rlimit rl = { 256 << 10, 256 << 10 };
		static char stack[64 << 10] __attribute__((aligned(16)));
		struct clone_reg c = { .dev = dev };
		int ok = 0, i, last = 0;

		if (setrlimit(RLIMIT_MEMLOCK, &rl) || drop_to(NOBODY))
			_exit(10);
		for (i = 0; i < 10; i++) {
			pid_t h = clone(clone_register, stack + sizeof(stack),
					CLONE_FILES | CLONE_VM | SIGCHLD, &c);

			if (h < 0 || reap(h) != 0)
				_exit(11);
			last = c.ret;
			if (c.ret < 0)
				break;
			ok++;
		}
		/* 3 * 68 KiB fit in 256 KiB, a fourth does not. */
		if (ok != 3)
			_exit(20 + ok);
		if (last != -ENOMEM)
			_exit(12);
		_exit(0);
	}
	rc = reap(pid);
	EXPECT_EQ(0, rc) TH_LOG("20 + n: n rings fit instead of 3");
	close(dev);
}

/* 7a: max_sessions_per_user, EDQUOT beyond it. */
TEST(sessions_per_user_capped)
{
	const char *param = "/sys/module/heapprofd/parameters/max_sessions_per_user";
	char old[32] = "";
	int dev, rc;
	pid_t pid;

	OPEN_DEV(dev);
	ASSERT_EQ(0, hp_sysfs_str(param, old, sizeof(old)));
	ASSERT_EQ(0, write_file(param, "3"));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct rlimit rl = { RLIM_INFINITY, RLIM_INFINITY };
		int i;

		if (setrlimit(RLIMIT_MEMLOCK, &rl) || drop_to(NOBODY))
			_exit(10);
		for (i = 0; i < 3; i++)
			if (hp_register(dev, HP_SMALL, 0, NULL) < 0)
				_exit(11 + i);
		_exit(hp_register(dev, HP_SMALL, 0, NULL) < 0 &&
		      errno == EDQUOT ? 0 : 20);
	}
	rc = reap(pid);
	EXPECT_EQ(0, write_file(param, old));
	EXPECT_EQ(0, rc);
	close(dev);
}

/*
 * 7b: an owner that keeps its session fd across exec (here into busybox
 * sleep; a setuid program would be the attack) no longer owns a session
 * anyone may attach to: the session was bound to the old mm.
 */
TEST(session_closed_for_attach_after_exec)
{
	struct heapprofd_register reg;
	int dev, fd, pfd[2];
	pid_t pid;

	OPEN_DEV(dev);
	if (access("/bin/sleep", X_OK))
		SKIP(return, "no /bin/sleep");
	ASSERT_EQ(0, pipe2(pfd, O_CLOEXEC));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		if (drop_to(NOBODY))
			_exit(10);
		fd = hp_register(dev, HP_SMALL, 0, &reg);
		if (fd < 0)
			_exit(11);
		fcntl(fd, F_SETFD, 0);	/* keep it across exec */
		if (write(pfd[1], &reg.session_id, sizeof(reg.session_id)) != 8)
			_exit(12);
		execl("/bin/sleep", "sleep", "30", (char *)NULL);
		_exit(13);
	}
	close(pfd[1]);
	ASSERT_EQ(8, read(pfd[0], &reg.session_id, 8));
	close(pfd[0]);
	/* Wait for the exec to happen: comm becomes "sleep". */
	for (int i = 0; i < 200; i++) {
		char path[64], comm[32] = "";

		snprintf(path, sizeof(path), "/proc/%d/comm", pid);
		hp_sysfs_str(path, comm, sizeof(comm));
		if (!strncmp(comm, "sleep", 5))
			break;
		usleep(10000);
	}
	EXPECT_EQ(-ESRCH, hp_attach_pid(dev, pid, NULL));
	EXPECT_EQ(-ESRCH, hp_attach_id(dev, reg.session_id, NULL));
	/* Root is no exception (the checks ran as root): another program. */
	kill(pid, SIGKILL);
	reap(pid);
	close(dev);
}

/* 6a: same uid, another group: ptrace refuses, so does attach. */
TEST(attach_same_uid_other_gid_eperm)
{
	struct hp_sync s;
	uint64_t id, step;
	int dev;
	pid_t prod, cons;

	OPEN_DEV(dev);
	ASSERT_EQ(0, hp_sync_init(&s));
	prod = fork();
	ASSERT_LE(0, prod);
	if (prod == 0) {
		struct heapprofd_register reg;

		hp_sync_child(&s);
		if (drop_to(NOBODY))
			_exit(10);
		if (hp_register(dev, HP_SMALL, 0, &reg) < 0)
			_exit(11);
		hp_sync_send(s.to_parent[1], reg.session_id);
		hp_sync_recv(s.to_child[0], &step);
		_exit(0);
	}
	hp_sync_parent(&s);
	ASSERT_EQ(0, hp_sync_recv(s.to_parent[0], &id));
	cons = fork();
	ASSERT_LE(0, cons);
	if (cons == 0) {
		if (drop_to(NOBODY - 1))
			_exit(20);
		_exit(hp_attach_id(dev, id, NULL) == -EPERM ? 0 : 21);
	}
	EXPECT_EQ(0, reap(cons)) TH_LOG("other gid: EPERM expected");
	cons = fork();
	ASSERT_LE(0, cons);
	if (cons == 0) {
		int c;

		if (drop_to(NOBODY))
			_exit(20);
		c = hp_attach_id(dev, id, NULL);
		_exit(c >= 0 ? 0 : 22);
	}
	EXPECT_EQ(0, reap(cons)) TH_LOG("same uid and gid: attach must work");
	hp_sync_send(s.to_child[1], 1);
	EXPECT_EQ(0, reap(prod));
	close(dev);
}

/*
 * Attach as nobody to a session of nobody, from the producer's parent
 * (ancestor) or its sibling. Returns 0 or the errno of the attach.
 */
static int yama_try(int dev, int ancestor)
{
	int p[2], rc = -1;
	uint64_t id;
	pid_t prod, cons;

	if (pipe(p))
		return -1;
	cons = fork();
	if (cons < 0)
		return -1;
	if (cons == 0) {
		if (drop_to(NOBODY))
			_exit(100);
		prod = fork();
		if (prod == 0) {
			struct heapprofd_register reg;

			close(p[0]);
			if (hp_register(dev, HP_SMALL, 0, &reg) < 0)
				_exit(1);
			if (write(p[1], &reg.session_id, 8) != 8)
				_exit(2);
			pause();
			_exit(0);
		}
		close(p[1]);
		if (read(p[0], &id, 8) != 8)
			_exit(101);
		if (ancestor) {
			rc = hp_attach_id(dev, id, NULL);
			rc = rc >= 0 ? 0 : -rc;
		} else {
			/* A sibling: not an ancestor of the producer. */
			pid_t sib = fork();

			if (sib == 0) {
				rc = hp_attach_id(dev, id, NULL);
				_exit(rc >= 0 ? 0 : -rc);
			}
			rc = reap(sib);
		}
		kill(prod, SIGKILL);
		reap(prod);
		_exit(rc);
	}
	close(p[0]);
	close(p[1]);
	rc = reap(cons);
	return rc;
}

TEST(attach_honours_yama_ptrace_scope)
{
	const char *knob = "/proc/sys/kernel/yama/ptrace_scope";
	char old[16] = "";
	struct heapprofd_register reg;
	int dev, fd, c;

	OPEN_DEV(dev);
	if (hp_sysfs_str(knob, old, sizeof(old)))
		SKIP(return, "no Yama in this kernel");
	ASSERT_EQ(0, write_file(knob, "0"));
	EXPECT_EQ(0, yama_try(dev, 0)) TH_LOG("scope 0: a sibling may attach");
	ASSERT_EQ(0, write_file(knob, "1"));
	EXPECT_EQ(EPERM, yama_try(dev, 0)) TH_LOG("scope 1: not an ancestor");
	EXPECT_EQ(0, yama_try(dev, 1)) TH_LOG("scope 1: the parent may");
	ASSERT_EQ(0, write_file(knob, "2"));
	EXPECT_EQ(EPERM, yama_try(dev, 1)) TH_LOG("scope 2: admin only");
	/* Root (CAP_SYS_PTRACE) still may. */
	fd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	c = hp_attach_id(dev, reg.session_id, NULL);
	EXPECT_LE(0, c);
	if (c >= 0)
		close(c);
	close(fd);
	EXPECT_EQ(0, write_file(knob, old));
	close(dev);
}

/* 6b: what names processes is for root only. */
TEST(sysfs_and_netlink_hidden_from_non_admin)
{
	struct heapprofd_register reg;
	struct hp_nl nl;
	int dev, fd, rc;
	pid_t pid;

	OPEN_DEV(dev);
	fd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, hp_nl_open(&nl));
	close(nl.fd);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		char path[128];
		struct hp_nl_msg m;
		struct hp_nl n;
		int ret;

		if (drop_to(NOBODY))
			_exit(10);
		snprintf(path, sizeof(path), HP_SYSFS "/sessions/%llu/pid",
			 (unsigned long long)reg.session_id);
		if (open(path, O_RDONLY) >= 0 || errno != EACCES)
			_exit(11);
		snprintf(path, sizeof(path), HP_SYSFS "/sessions/%llu/comm",
			 (unsigned long long)reg.session_id);
		if (open(path, O_RDONLY) >= 0 || errno != EACCES)
			_exit(12);
		/* The totals stay readable. */
		if (hp_stat("sessions_active") < 1)
			_exit(13);
		if (hp_nl_open(&n))
			_exit(14);
		ret = hp_nl_dump_find(&n, reg.session_id, &m);
		if (ret != -EPERM)
			_exit(15);
		ret = hp_nl_join_events(&n);
		if (ret != -EPERM)
			_exit(16);
		_exit(0);
	}
	rc = reap(pid);
	EXPECT_EQ(0, rc) TH_LOG("11/12: sysfs readable, 15: dump, 16: events");
	close(fd);
	close(dev);
}

/* 7c: a result that cannot be written back leaves no fd behind. */
TEST(receive_fd_bad_result_pointer_leaks_no_fd)
{
	struct heapprofd_register reg;
	struct heapprofd_fd_arg *ro;
	long long passed;
	int dev, fd, c, f, before;

	OPEN_DEV(dev);
	fd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	f = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, f);
	ASSERT_EQ(0, hp_deposit(fd, HEAPPROFD_FD_MAPS, f));
	close(f);
	c = hp_attach_id(dev, reg.session_id, NULL);
	ASSERT_LE(0, c);

	ro = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, ro);
	memset(ro, 0, sizeof(*ro));
	ro->size = sizeof(*ro);
	ro->slot = HEAPPROFD_FD_MAPS;
	ASSERT_EQ(0, mprotect(ro, 4096, PROT_READ));
	passed = hp_stat("fds_passed_total");
	before = count_fds();
	errno = 0;
	EXPECT_EQ(-1, ioctl(c, HEAPPROFD_IOC_RECEIVE_FD, ro));
	EXPECT_EQ(EFAULT, errno);
	EXPECT_EQ(before, count_fds());
	EXPECT_EQ(passed, hp_stat("fds_passed_total"));
	/* A good pointer still works. */
	f = hp_receive(c, HEAPPROFD_FD_MAPS);
	EXPECT_LE(0, f);
	if (f >= 0)
		close(f);
	munmap(ro, 4096);
	close(c);
	close(fd);
	close(dev);
}

/*
 * 7d: a dump spread over several messages lists every session once, in id
 * order, including those registered between its messages.
 */
/*
 * Registering 300 sessions takes a while on a KASAN kernel under emulation:
 * more than the harness's default 30 s. A fixture with nothing in it, for
 * TEST_F_TIMEOUT.
 */
FIXTURE(many_sessions) {
	int unused;
};
FIXTURE_SETUP(many_sessions) { self->unused = 0; }
FIXTURE_TEARDOWN(many_sessions) { }

TEST_F_TIMEOUT(many_sessions, netlink_dump_spanning_messages_is_complete, 300)
{
	enum { N = 300, M = 20 };
	static int fds[N + M];
	static uint64_t ids[N + M], seen[N + M + 64];
	struct heapprofd_register reg;
	int dev, i, nseen = 0, done = 0, msgs = 0, ret;
	struct hp_nl nl;
	char *buf;

	OPEN_DEV(dev);
	for (i = 0; i < N; i++) {
		fds[i] = hp_register(dev, HP_SMALL, HEAPPROFD_REGISTER_DORMANT, &reg);
		ASSERT_LE(0, fds[i]);
		ids[i] = reg.session_id;
	}
	ASSERT_EQ(0, hp_nl_open(&nl));
	ASSERT_EQ(0, hp_nl_send(&nl, nl.family, NLM_F_DUMP,
				HEAPPROFD_CMD_SESSION_GET, NULL, 0));
	buf = malloc(HP_NL_BUF);
	ASSERT_NE(NULL, buf);
	while (!done) {
		int n = hp_nl_recv(&nl, buf, HP_NL_BUF, 5000);
		struct nlmsghdr *h;

		ASSERT_LT(0, n);
		if (msgs++ == 0) {
			/* Mid-dump: more sessions arrive. */
			for (i = N; i < N + M; i++) {
				fds[i] = hp_register(dev, HP_SMALL,
						     HEAPPROFD_REGISTER_DORMANT, &reg);
				ASSERT_LE(0, fds[i]);
				ids[i] = reg.session_id;
			}
		}
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (unsigned int)n);
		     h = NLMSG_NEXT(h, n)) {
			struct hp_nl_msg m;

			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			ASSERT_NE(NLMSG_ERROR, h->nlmsg_type);
			if (h->nlmsg_type != nl.family)
				continue;
			hp_nl_decode(h, &m);
			ASSERT_LT(nseen, N + M + 64);
			if (nseen)
				ASSERT_LT(seen[nseen - 1], m.session_id);
			seen[nseen++] = m.session_id;
		}
	}
	EXPECT_LT(1, msgs) TH_LOG("the dump fit one message: make N larger");
	for (i = 0; i < N + M; i++) {
		int j, found = 0;

		for (j = 0; j < nseen; j++)
			found |= seen[j] == ids[i];
		EXPECT_EQ(1, found) TH_LOG("session %llu missing (%d)",
					   (unsigned long long)ids[i], i);
	}
	ret = 0;
	for (i = 0; i < N + M; i++)
		ret |= close(fds[i]);
	EXPECT_EQ(0, ret);
	free(buf);
	close(nl.fd);
	close(dev);
}

/* 7d: MADV_DOFORK cannot make a child inherit the ring. */
TEST(madv_dofork_refused)
{
	struct heapprofd_register reg;
	size_t len;
	void *map;
	int dev, fd;
	pid_t pid;

	OPEN_DEV(dev);
	fd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	map = hp_map(fd, reg.ctl_size, HP_SMALL, &len);
	ASSERT_NE(MAP_FAILED, map);
	EXPECT_EQ(-1, madvise(map, len, MADV_DOFORK));
	EXPECT_EQ(EINVAL, errno);
	EXPECT_EQ(-1, madvise(map, 4096, MADV_DOFORK));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		unsigned char vec[4];

		_exit(mincore(map, 4096, vec) == -1 && errno == ENOMEM ? 0 : 1);
	}
	EXPECT_EQ(0, reap(pid)) TH_LOG("the child inherited the ring");
	munmap(map, len);
	close(fd);
	close(dev);
}

/* ------------------------------------------------------------------------ */
/* rmmod while busy (last: it unloads and reloads the module)               */
/* ------------------------------------------------------------------------ */

TEST(rmmod_while_busy)
{
	const char *ko = getenv("HEAPPROFD_KO") ?: "/hp/kmod/heapprofd.ko";
	struct heapprofd_register reg;
	size_t len;
	void *map;
	int dev, fd, kfd;
	long ret;

	OPEN_DEV(dev);
	if (access(ko, R_OK))
		SKIP(return, "%s missing: cannot reload the module", ko);
	fd = hp_register(dev, HP_SMALL, 0, &reg);
	ASSERT_LE(0, fd);
	map = hp_map(fd, reg.ctl_size, HP_SMALL, &len);
	ASSERT_NE(MAP_FAILED, map);
	close(dev);

	/* A session fd: busy. */
	ret = syscall(SYS_delete_module, "heapprofd", O_NONBLOCK);
	EXPECT_EQ(-1, ret);
	EXPECT_TRUE(errno == EBUSY || errno == EWOULDBLOCK) TH_LOG("%m");
	close(fd);
	/* Only a mapping: still busy. */
	ret = syscall(SYS_delete_module, "heapprofd", O_NONBLOCK);
	EXPECT_EQ(-1, ret);
	EXPECT_TRUE(errno == EBUSY || errno == EWOULDBLOCK) TH_LOG("%m");
	EXPECT_EQ(0, access(HP_SYSFS "/version", F_OK));
	munmap(map, len);

	/* Nothing left: it unloads, and everything it made is gone. */
	ret = syscall(SYS_delete_module, "heapprofd", O_NONBLOCK);
	EXPECT_EQ(0, ret) TH_LOG("delete_module: %m");
	EXPECT_NE(0, access(HP_SYSFS, F_OK));
	EXPECT_NE(0, access(HP_DEV, F_OK));

	/* Load it again for whatever runs next. */
	kfd = open(ko, O_RDONLY | O_CLOEXEC);
	ASSERT_LE(0, kfd);
	ret = syscall(SYS_finit_module, kfd, "", 0);
	ASSERT_EQ(0, ret) TH_LOG("finit_module %s: %m", ko);
	close(kfd);
	EXPECT_EQ(0, access(HP_DEV, F_OK));
}

int main(int argc, char **argv)
{
	if (access(HP_DEV, F_OK)) {
		printf("1..0 # SKIP %s missing (heapprofd.ko not loaded)\n", HP_DEV);
		return KSFT_SKIP;
	}
	return test_harness_run(argc, argv);
}
