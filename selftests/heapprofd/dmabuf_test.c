// SPDX-License-Identifier: GPL-2.0
/*
 * kselftests for heapprofd.ko's DMA-BUF accounting: the buffer table and
 * its sysfs views against buffers this test exports, the kernel's own
 * /sys/kernel/dmabuf/buffers where the kernel has it, and exports sampled
 * into the exporter's session as kernel records read(2) from the consumer
 * fd (uapi "Kernel records").
 *
 * Buffers come from the system DMA heap (/dev/dma_heap/system), from
 * udmabuf (/dev/udmabuf with a sealed memfd) or from a PRIME export of a
 * vgem dumb buffer (/dev/dri/card*), whichever the kernel has first;
 * without any, or without a DMA-BUF source in the module, the tests skip.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <poll.h>
#include <stdbool.h>

#include "kselftest_harness.h"
#include "hp_util.h"
#include "hp_nl.h"
#include "hp_dmabuf.h"

#define DMABUF_SYSFS	HP_SYSFS "/dmabuf"

/* "kprobe"/"tracepoint" when the module follows exports, else "none". */
static bool dmabuf_source_active(void)
{
	char buf[32] = "";
	int fd = open(DMABUF_SYSFS "/source", O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 && strncmp(buf, "none", 4);
}


static uint64_t ino_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? 0 : st.st_ino;
}

static long long buf_u64(uint64_t ino, const char *file)
{
	char path[128];

	snprintf(path, sizeof(path), DMABUF_SYSFS "/buffers/%llu/%s",
		 (unsigned long long)ino, file);
	return hp_sysfs_u64(path);
}

#define NEED_DMABUF() do {						\
	if (access(HP_DEV, F_OK))					\
		SKIP(return, "no /dev/heapprofd");			\
	if (!dmabuf_source_active())					\
		SKIP(return, "the module follows no DMA-BUF source");	\
	if (!buf_kind())						\
		SKIP(return, "no DMA heap, udmabuf or vgem");		\
} while (0)

/* Buffers of one exporter appear with the right size and pid, and vanish. */
static void appear_and_vanish(struct __test_metadata *_metadata,
			      const char *kind)
{
	static const size_t sizes[] = { 4096, 65536, 1 << 20 };
	long long count0, total0, exp0;
	char path[160], name[64];
	int fds[3], i;
	uint64_t inos[3];

	count0 = hp_sysfs_u64(DMABUF_SYSFS "/buffer_count");
	total0 = hp_sysfs_u64(DMABUF_SYSFS "/total_exported_bytes");
	ASSERT_LE(0, count0);
	for (i = 0; i < 3; i++) {
		fds[i] = make_buf_of(kind, sizes[i]);
		ASSERT_LE(0, fds[i]) TH_LOG("%s export: %s", kind,
					    strerror(-fds[i]));
		inos[i] = ino_of(fds[i]);
	}
	/* Reading the count brings buffers/ up to date. */
	EXPECT_EQ(count0 + 3, hp_sysfs_u64(DMABUF_SYSFS "/buffer_count"));
	EXPECT_EQ(total0 + 4096 + 65536 + (1 << 20),
		  hp_sysfs_u64(DMABUF_SYSFS "/total_exported_bytes"));
	snprintf(path, sizeof(path), DMABUF_SYSFS "/exporters/%s/count", kind);
	exp0 = hp_sysfs_u64(path);
	EXPECT_LE(3, exp0) TH_LOG("%s", path);
	for (i = 0; i < 3; i++) {
		EXPECT_EQ((long long)sizes[i], buf_u64(inos[i], "size"));
		EXPECT_EQ(getpid(), buf_u64(inos[i], "exporter_pid"));
		snprintf(path, sizeof(path),
			 DMABUF_SYSFS "/buffers/%llu/exporter_name",
			 (unsigned long long)inos[i]);
		ASSERT_EQ(0, hp_sysfs_str(path, name, sizeof(name)));
		EXPECT_STREQ(kind, name);
		/* The kernel's own view, where it has one, agrees. */
		snprintf(path, sizeof(path),
			 "/sys/kernel/dmabuf/buffers/%llu/size",
			 (unsigned long long)inos[i]);
		if (access(path, R_OK) == 0) {
			EXPECT_EQ((long long)sizes[i], hp_sysfs_u64(path));
			snprintf(path, sizeof(path),
				 "/sys/kernel/dmabuf/buffers/%llu/exporter_name",
				 (unsigned long long)inos[i]);
			ASSERT_EQ(0, hp_sysfs_str(path, name, sizeof(name)));
			EXPECT_STREQ(kind, name);
		}
	}
	for (i = 0; i < 3; i++)
		close(fds[i]);
	EXPECT_EQ(count0, hp_sysfs_u64(DMABUF_SYSFS "/buffer_count"));
	EXPECT_EQ(total0, hp_sysfs_u64(DMABUF_SYSFS "/total_exported_bytes"));
	snprintf(path, sizeof(path), DMABUF_SYSFS "/exporters/%s/count", kind);
	EXPECT_EQ(exp0 - 3, hp_sysfs_u64(path));
	for (i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), DMABUF_SYSFS "/buffers/%llu",
			 (unsigned long long)inos[i]);
		EXPECT_NE(0, access(path, F_OK)) TH_LOG("%s still there", path);
	}
}

/* Every exporter the kernel has: DMA heap, udmabuf, vgem PRIME. */
TEST(buffers_appear_and_vanish)
{
	int i, tried = 0;

	NEED_DMABUF();
	for (i = 0; i < HP_BUF_KINDS; i++) {
		if (!buf_kind_available(hp_buf_kinds[i]))
			continue;
		TH_LOG("exporter %s", hp_buf_kinds[i]);
		appear_and_vanish(_metadata, hp_buf_kinds[i]);
		tried++;
	}
	EXPECT_LT(0, tried);
}

/* Every buffer the kernel lists in /sys/kernel/dmabuf/buffers, we list. */
TEST(matches_kernel_sysfs_buffer_by_buffer)
{
	char path[400], a[64], b[64];
	struct dirent *de;
	int fds[4], i, compared = 0;
	DIR *d;

	NEED_DMABUF();
	if (access("/sys/kernel/dmabuf/buffers", F_OK))
		SKIP(return, "kernel without DMA-BUF sysfs statistics");
	for (i = 0; i < 4; i++) {
		fds[i] = make_buf(4096 << i);
		ASSERT_LE(0, fds[i]);
	}
	hp_sysfs_u64(DMABUF_SYSFS "/buffer_count");	/* sync the views */
	d = opendir("/sys/kernel/dmabuf/buffers");
	ASSERT_NE(NULL, d);
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), DMABUF_SYSFS "/buffers/%s",
			 de->d_name);
		/* Exported before the module was loaded: unknown to it. */
		if (access(path, F_OK))
			continue;
		snprintf(path, sizeof(path),
			 "/sys/kernel/dmabuf/buffers/%s/exporter_name", de->d_name);
		ASSERT_EQ(0, hp_sysfs_str(path, a, sizeof(a)));
		snprintf(path, sizeof(path),
			 DMABUF_SYSFS "/buffers/%s/exporter_name", de->d_name);
		ASSERT_EQ(0, hp_sysfs_str(path, b, sizeof(b)));
		EXPECT_STREQ(a, b);
		snprintf(path, sizeof(path),
			 "/sys/kernel/dmabuf/buffers/%s/size", de->d_name);
		ASSERT_EQ(0, hp_sysfs_str(path, a, sizeof(a)));
		snprintf(path, sizeof(path),
			 DMABUF_SYSFS "/buffers/%s/size", de->d_name);
		ASSERT_EQ(0, hp_sysfs_str(path, b, sizeof(b)));
		EXPECT_STREQ(a, b);
		compared++;
	}
	closedir(d);
	EXPECT_LE(4, compared);
	for (i = 0; i < 4; i++)
		close(fds[i]);
}

/* A process that dies holding buffers releases them all. */
TEST(buffers_of_a_dying_process_released)
{
	long long count0;
	int i, status;
	pid_t pid;

	NEED_DMABUF();
	count0 = hp_sysfs_u64(DMABUF_SYSFS "/buffer_count");
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		for (i = 0; i < 8; i++)
			if (make_buf(8192) < 0)
				_exit(1);
		raise(SIGKILL);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFSIGNALED(status));
	EXPECT_EQ(count0, hp_sysfs_u64(DMABUF_SYSFS "/buffer_count"));
}

/* ------------------------------------------------------------------ */
/* Kernel records in the exporter's session                            */
/* ------------------------------------------------------------------ */

struct self_session {
	int dev, sfd, cfd;
	struct hp_ring r;
	void *map;
	size_t len;
};

/* Register and attach to ourselves, sampling at @interval. */
static int self_session_open(struct self_session *ss, uint64_t interval)
{
	struct heapprofd_register reg;
	struct heapprofd_attach att;

	ss->dev = hp_dev_open();
	if (ss->dev < 0)
		return -1;
	ss->sfd = hp_register(ss->dev, HP_SMALL, 0, &reg);
	if (ss->sfd < 0)
		return -2;
	ss->map = hp_map(ss->sfd, reg.ctl_size, HP_SMALL, &ss->len);
	if (ss->map == MAP_FAILED || hp_ring_open(&ss->r, ss->map, ss->len))
		return -3;
	ss->r.cfg->interval = interval;
	ss->r.cfg->stack_cap = HEAPPROFD_STACK_CAP_DEFAULT;
	ss->r.cfg->enabled = 1;
	ss->cfd = hp_attach_pid(ss->dev, getpid(), &att);
	return ss->cfd < 0 ? -4 : 0;
}

static void self_session_close(struct self_session *ss)
{
	close(ss->cfd);
	munmap(ss->map, ss->len);
	close(ss->sfd);
	close(ss->dev);
}

/* Read kernel records; returns bytes or -errno. */
static ssize_t krec_read(int cfd, void *buf, size_t len)
{
	ssize_t n = read(cfd, buf, len);

	return n < 0 ? -errno : n;
}

static const struct heapprofd_rec_hdr *rec_at(const uint8_t *buf, size_t off)
{
	return (const void *)(buf + off);
}

/* The call whose stack the sample must carry. */
static int __attribute__((noinline)) export_for_sample(size_t size)
{
	int fd = make_buf(size);

	__asm__ volatile("" ::: "memory");	/* not a tail call */
	return fd;
}

TEST(export_sampled_with_user_stack_and_freed)
{
	static uint8_t buf[256 << 10];
	const struct heapprofd_rec_dmabuf *d;
	const struct heapprofd_rec_alloc *a;
	const struct heapprofd_rec_free *f;
	struct self_session ss;
	struct pollfd p;
	uint64_t ino, lo, hi, i, alloc_seq = 0;
	const uint64_t *words;
	bool found = false;
	ssize_t n;
	int fd;

	NEED_DMABUF();
	ASSERT_EQ(0, self_session_open(&ss, 4096));
	EXPECT_EQ(-EAGAIN, krec_read(ss.cfd, buf, sizeof(buf)));

	fd = export_for_sample(1 << 20);
	ASSERT_LE(0, fd);
	ino = ino_of(fd);
	p = (struct pollfd){ .fd = ss.cfd, .events = POLLIN };
	ASSERT_EQ(1, poll(&p, 1, 10000));
	/* Too small for the first record: nothing is lost. */
	EXPECT_EQ(-EINVAL, krec_read(ss.cfd, buf, 16));
	n = krec_read(ss.cfd, buf, sizeof(buf));
	ASSERT_LT(0, n) TH_LOG("read: %s", strerror((int)-n));

	d = (const void *)rec_at(buf, 0);
	ASSERT_EQ(HEAPPROFD_REC_DMABUF, d->hdr.type);
	EXPECT_EQ(sizeof(*d), d->hdr.len);
	EXPECT_EQ(0, d->hdr.stamp);
	EXPECT_EQ(ino, d->inode);
	EXPECT_EQ(1 << 20, d->size);
	EXPECT_EQ(getpid(), d->exporter_pid);
	EXPECT_STREQ(buf_kind(), d->exporter);

	ASSERT_LE(sizeof(*d) + sizeof(*a), (size_t)n);
	a = (const void *)rec_at(buf, sizeof(*d));
	ASSERT_EQ(HEAPPROFD_REC_ALLOC, a->hdr.type);
	EXPECT_EQ(sizeof(*d) + a->hdr.len, (size_t)n);
	EXPECT_EQ(d->seq, a->seq);
	alloc_seq = a->seq;
	EXPECT_EQ(ino, a->addr);
	EXPECT_EQ(HEAPPROFD_HEAP_DMABUF, a->heap_id);
	EXPECT_EQ(1 << 20, a->est_size);
	EXPECT_TRUE(a->hdr.flags & HEAPPROFD_ALLOC_EXACT);
	ASSERT_NE(0, HEAPPROFD_ARCH_NATIVE);
	EXPECT_EQ(HEAPPROFD_ARCH_NATIVE, a->arch);
	EXPECT_EQ(HEAPPROFD_NREGS_NATIVE, a->nregs);
	EXPECT_EQ(heapprofd_arch_nregs(a->arch), a->nregs);
	EXPECT_EQ(gettid(), (pid_t)a->tid);
	EXPECT_EQ(0, a->stack_reused);
	ASSERT_LT(0, a->stack_len);
	EXPECT_EQ(sizeof(*a) + a->stack_len, a->hdr.len);
	EXPECT_GE(a->stack_top, heapprofd_rec_sp(a) + a->stack_len);
	EXPECT_NE(0, heapprofd_rec_pc(a));
	/*
	 * The copied stack is ours: it, or the link register where the
	 * system call's wrapper keeps it (aarch64), holds a return address
	 * into the caller.
	 */
	lo = (uint64_t)(uintptr_t)export_for_sample;
	hi = lo + 256;
	words = (const void *)(a + 1);
	for (i = 0; i < a->stack_len / 8; i++)
		if (words[i] > lo && words[i] < hi)
			found = true;
	if (heapprofd_rec_lr(a) > lo && heapprofd_rec_lr(a) < hi)
		found = true;
	EXPECT_TRUE(found) TH_LOG("no return address into export_for_sample (lr 0x%llx)",
				  (unsigned long long)heapprofd_rec_lr(a));
#if defined(__aarch64__)
	/*
	 * This program keeps frame records (-fno-omit-frame-pointer): x29
	 * points at one in the copied stack, whose saved x29 is higher up.
	 */
	{
		uint64_t fp = heapprofd_rec_fp(a), sp = heapprofd_rec_sp(a);

		EXPECT_LE(sp, fp) TH_LOG("fp 0x%llx below sp 0x%llx",
					 (unsigned long long)fp, (unsigned long long)sp);
		EXPECT_GT(sp + a->stack_len, fp + 16);
		EXPECT_EQ(0, fp % 16);
		if (fp >= sp && fp + 16 <= sp + a->stack_len)
			EXPECT_LT(fp, words[(fp - sp) / 8]);
	}
#endif

	/* The release is the matching free. */
	close(fd);
	ASSERT_EQ(1, poll(&p, 1, 10000));
	n = krec_read(ss.cfd, buf, sizeof(buf));
	ASSERT_EQ(sizeof(*f), (size_t)n);
	f = (const void *)rec_at(buf, 0);
	EXPECT_EQ(HEAPPROFD_REC_FREE, f->hdr.type);
	EXPECT_EQ(ino, f->addr);
	EXPECT_EQ(HEAPPROFD_HEAP_DMABUF, f->heap_id);
	EXPECT_LT(alloc_seq, f->seq);
	self_session_close(&ss);
}

/* Below the interval a buffer is a Bernoulli trial standing for interval. */
TEST(small_exports_sampled_unbiased)
{
	static uint8_t buf[256 << 10];
	const unsigned int nbuf = 96, size = 65536;
	const uint64_t interval = 6 * 65536;
	unsigned int i, samples = 0;
	struct self_session ss;
	size_t off;
	ssize_t n;
	int fd;

	NEED_DMABUF();
	ASSERT_EQ(0, self_session_open(&ss, interval));
	for (i = 0; i < nbuf; i++) {
		fd = make_buf(size);
		ASSERT_LE(0, fd);
		close(fd);
		/* Drain as we go: the queue is bounded. */
		while ((n = krec_read(ss.cfd, buf, sizeof(buf))) > 0) {
			for (off = 0; off < (size_t)n;
			     off += rec_at(buf, off)->len) {
				const struct heapprofd_rec_alloc *a =
					(const void *)rec_at(buf, off);

				if (a->hdr.type != HEAPPROFD_REC_ALLOC)
					continue;
				samples++;
				EXPECT_EQ(interval, a->est_size);
				EXPECT_FALSE(a->hdr.flags &
					     HEAPPROFD_ALLOC_EXACT);
			}
		}
		ASSERT_EQ(-EAGAIN, n);
	}
	/* Expected 16 (binomial, p = 1/6): 0 or 48 and more is a broken rule. */
	EXPECT_LT(0, samples);
	EXPECT_GT(48, samples) TH_LOG("%u samples", samples);
	self_session_close(&ss);
}

/* A dormant session (sampling off) gets no kernel records. */
TEST(no_records_while_disabled)
{
	static uint8_t buf[4096];
	struct self_session ss;
	int fd;

	NEED_DMABUF();
	ASSERT_EQ(0, self_session_open(&ss, 4096));
	ss.r.cfg->enabled = 0;
	fd = make_buf(1 << 20);
	ASSERT_LE(0, fd);
	close(fd);
	EXPECT_EQ(-EAGAIN, krec_read(ss.cfd, buf, sizeof(buf)));
	self_session_close(&ss);
}

/* Wait for a DMA-BUF event about one buffer; 1 found, 0 timeout. */
static int wait_buf_event(struct hp_nl *nl, uint8_t cmd, uint64_t ino,
			  struct hp_nl_msg *m)
{
	int i, ret;

	for (i = 0; i < 64; i++) {
		ret = hp_nl_wait(nl, cmd, 0, m, 10000);
		if (ret != 1 || m->inode == ino)
			return ret;
	}
	return 0;
}

TEST(netlink_export_and_release_events)
{
	struct hp_nl_msg m;
	struct hp_nl nl;
	uint64_t ino;
	int fd;

	NEED_DMABUF();
	ASSERT_EQ(0, hp_nl_open(&nl));
	ASSERT_EQ(0, hp_nl_join_events(&nl));
	fd = make_buf(1 << 20);
	ASSERT_LE(0, fd);
	ino = ino_of(fd);
	ASSERT_EQ(1, wait_buf_event(&nl, HEAPPROFD_CMD_DMABUF_EXPORT, ino, &m));
	EXPECT_EQ(1 << 20, m.size);
	EXPECT_STREQ(buf_kind(), m.exporter);
	if (m.has_pid)
		EXPECT_EQ((uint32_t)getpid(), m.pid);
	close(fd);
	ASSERT_EQ(1, wait_buf_event(&nl, HEAPPROFD_CMD_DMABUF_RELEASE, ino, &m));
	EXPECT_EQ(1 << 20, m.size);
	close(nl.fd);
}

TEST_HARNESS_MAIN
