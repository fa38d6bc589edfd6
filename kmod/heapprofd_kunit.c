// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for heapprofd.ko's pure logic: ring geometry and the mmap
 * rule, the attach permission decision, statistics read from a hostile
 * control page, ioctl argument checks, and the DMA-BUF side: exporter
 * names, the sampling rule and the kernel record queue.
 *
 * Built as heapprofd_kunit.ko when the target kernel has CONFIG_KUNIT; load
 * it after heapprofd.ko (it uses symbols that module exports in the
 * HEAPPROFD_INTERNAL namespace) and the results appear in the kernel log as
 * KTAP.
 */
#include <kunit/test.h>
#include <linux/limits.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/sched/coredump.h>
#include <linux/slab.h>
#include <linux/uidgid.h>

#include "compat.h"
#include "heapprofd_kmod.h"

/* ------------------------------------------------------------------ */
/* Ring geometry                                                       */
/* ------------------------------------------------------------------ */

#define BIG_MAX	BIT_ULL(40)

static void geom_default_size(struct kunit *test)
{
	struct hp_geom g;

	KUNIT_ASSERT_EQ(test, hp_geom_compute(0, BIG_MAX, &g), 0);
	KUNIT_EXPECT_EQ(test, g.data_size, HEAPPROFD_DATA_SIZE_DEFAULT);
	KUNIT_EXPECT_EQ(test, g.map_size,
			(u64)g.ctl_size + 2 * HEAPPROFD_DATA_SIZE_DEFAULT);
	KUNIT_EXPECT_EQ(test, (u64)g.data_pages << PAGE_SHIFT, g.data_size);
	KUNIT_EXPECT_EQ(test, (u64)g.ctl_pages << PAGE_SHIFT, (u64)g.ctl_size);
	KUNIT_EXPECT_GE(test, g.ctl_size, HEAPPROFD_CTL_SIZE);
}

static void geom_bad_sizes(struct kunit *test)
{
	struct hp_geom g;

	KUNIT_EXPECT_EQ(test, hp_geom_compute(HEAPPROFD_DATA_SIZE_MIN + 4096,
					      BIG_MAX, &g), -EINVAL);
	KUNIT_EXPECT_EQ(test, hp_geom_compute(HEAPPROFD_DATA_SIZE_MIN / 2,
					      BIG_MAX, &g), -EINVAL);
	KUNIT_EXPECT_EQ(test, hp_geom_compute(1, BIG_MAX, &g), -EINVAL);
	KUNIT_EXPECT_EQ(test, hp_geom_compute(U64_MAX, BIG_MAX, &g), -EINVAL);
	KUNIT_EXPECT_EQ(test, hp_geom_compute(HEAPPROFD_DATA_SIZE_MIN,
					      BIG_MAX, &g), 0);
}

static void geom_bound(struct kunit *test)
{
	struct hp_geom g;

	KUNIT_EXPECT_EQ(test, hp_geom_compute(1ULL << 20, 1ULL << 20, &g), 0);
	KUNIT_EXPECT_EQ(test, hp_geom_compute(1ULL << 21, 1ULL << 20, &g),
			-ENOSPC);
	/* The default is refused too when the bound is below it. */
	KUNIT_EXPECT_EQ(test, hp_geom_compute(0, 1ULL << 20, &g), -ENOSPC);
	/* Whatever the parameter says, 2^31 is too much for a record. */
	KUNIT_EXPECT_EQ(test, hp_geom_compute(1ULL << 31, BIG_MAX, &g),
			-ENOSPC);
}

static void geom_parts_fit(struct kunit *test)
{
	const struct {
		u32 off;
		size_t len;
	} parts[] = {
		{ 0, sizeof(struct heapprofd_ctl) },
		{ 0, sizeof(struct heapprofd_producer) },
		{ 0, sizeof(struct heapprofd_consumer) },
		{ 0, sizeof(struct heapprofd_kstate) },
		{ 0, sizeof(struct heapprofd_counters) },
		{ 0, sizeof(struct heapprofd_config) },
	};
	u32 offs[ARRAY_SIZE(parts)];
	struct hp_geom g;
	int i, j;

	KUNIT_ASSERT_EQ(test, hp_geom_compute(0, BIG_MAX, &g), 0);
	offs[0] = 0;
	offs[1] = g.off_producer;
	offs[2] = g.off_consumer;
	offs[3] = g.off_kstate;
	offs[4] = g.off_counters;
	offs[5] = g.off_config;
	for (i = 0; i < ARRAY_SIZE(parts); i++) {
		KUNIT_EXPECT_EQ(test, offs[i] % 64, 0U);
		KUNIT_EXPECT_LE(test, (u64)offs[i] + parts[i].len,
				(u64)g.ctl_size);
		for (j = 0; j < i; j++) {
			bool apart = offs[i] >= offs[j] + parts[j].len ||
				     offs[j] >= offs[i] + parts[i].len;

			KUNIT_EXPECT_TRUE_MSG(test, apart, "parts %d and %d overlap",
					      i, j);
		}
	}
	/* Producer and consumer never share a cache line. */
	KUNIT_EXPECT_GE(test, abs((int)g.off_producer - (int)g.off_consumer),
			64);
}

static void geom_ctl_init(struct kunit *test)
{
	struct heapprofd_config *cfg;
	struct heapprofd_kstate *ks;
	struct heapprofd_ctl *c;
	struct hp_geom g;
	void *ctl;

	KUNIT_ASSERT_EQ(test, hp_geom_compute(1ULL << 16, BIG_MAX, &g), 0);
	ctl = kunit_kzalloc(test, g.ctl_size, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, ctl);

	hp_ctl_init(ctl, &g, 42, HEAPPROFD_REGISTER_DORMANT);
	c = ctl;
	cfg = ctl + c->off.config;
	ks = ctl + c->off.kstate;
	KUNIT_EXPECT_EQ(test, c->magic, HEAPPROFD_CTL_MAGIC);
	KUNIT_EXPECT_EQ(test, c->version, HEAPPROFD_ABI_VERSION);
	KUNIT_EXPECT_EQ(test, c->header_size, sizeof(*c));
	KUNIT_EXPECT_EQ(test, c->ctl_size, g.ctl_size);
	KUNIT_EXPECT_EQ(test, c->data_size, 1ULL << 16);
	KUNIT_EXPECT_EQ(test, c->data_offset, (u64)g.ctl_size);
	KUNIT_EXPECT_EQ(test, c->session_id, 42ULL);
	KUNIT_EXPECT_EQ(test, c->flags, HEAPPROFD_CTL_KERNEL);
	KUNIT_EXPECT_EQ(test, c->off.kring, 0U);
	KUNIT_EXPECT_EQ(test, cfg->enabled, 0U);
	KUNIT_EXPECT_EQ(test, cfg->interval, HEAPPROFD_INTERVAL_DEFAULT);
	KUNIT_EXPECT_EQ(test, cfg->stack_cap, HEAPPROFD_STACK_CAP_DEFAULT);
	KUNIT_EXPECT_EQ(test, ks->state, HEAPPROFD_STATE_OPEN);

	memset(ctl, 0, g.ctl_size);
	hp_ctl_init(ctl, &g, 1, 0);
	KUNIT_EXPECT_EQ(test, cfg->enabled, 1U);
}

static void geom_mmap_rule(struct kunit *test)
{
	unsigned long ok = VM_SHARED | VM_MAYSHARE | VM_READ | VM_WRITE;
	struct hp_geom g;

	KUNIT_ASSERT_EQ(test, hp_geom_compute(1ULL << 16, BIG_MAX, &g), 0);
	KUNIT_EXPECT_EQ(test, hp_mmap_check(&g, 0, g.map_size, ok), 0);
	KUNIT_EXPECT_EQ(test, hp_mmap_check(&g, 1, g.map_size, ok), -EINVAL);
	KUNIT_EXPECT_EQ(test, hp_mmap_check(&g, HEAPPROFD_MMAP_KRING >>
					    PAGE_SHIFT, g.map_size, ok),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, hp_mmap_check(&g, 0, g.map_size - PAGE_SIZE, ok),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, hp_mmap_check(&g, 0, g.map_size + PAGE_SIZE, ok),
			-EINVAL);
	KUNIT_EXPECT_EQ(test, hp_mmap_check(&g, 0, g.map_size,
					    VM_READ | VM_WRITE), -EINVAL);
	KUNIT_EXPECT_EQ(test, hp_mmap_check(&g, 0, g.map_size, ok | VM_EXEC),
			-EINVAL);
}

/* ------------------------------------------------------------------ */
/* Attach permission                                                   */
/* ------------------------------------------------------------------ */

static struct hp_access_req owner_1000(void)
{
	struct hp_access_req r = {
		.owner_alive = true,
		.owner_same_mm = true,
		.caller_uid = KUIDT_INIT(1000),
		.caller_gid = KGIDT_INIT(1000),
		.owner_uid = KUIDT_INIT(1000),
		.owner_euid = KUIDT_INIT(1000),
		.owner_suid = KUIDT_INIT(1000),
		.owner_gid = KGIDT_INIT(1000),
		.owner_egid = KGIDT_INIT(1000),
		.owner_sgid = KGIDT_INIT(1000),
		.owner_dumpable = SUID_DUMP_USER,
	};
	return r;
}

static void access_same_uid(struct kunit *test)
{
	struct hp_access_req r = owner_1000();

	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), 0);
}

static void access_other_uid(struct kunit *test)
{
	struct hp_access_req r = owner_1000();

	r.caller_uid = KUIDT_INIT(1001);
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), -EPERM);
	r.caller_ptrace_cap = true;
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), 0);
}

/* Same uid, another group: ptrace says no, and so do we. */
static void access_other_gid(struct kunit *test)
{
	struct hp_access_req r = owner_1000();

	r.caller_gid = KGIDT_INIT(1001);
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), -EPERM);
	r = owner_1000();
	r.owner_egid = KGIDT_INIT(0);	/* a setgid owner */
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), -EPERM);
	r = owner_1000();
	r.owner_sgid = KGIDT_INIT(0);
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), -EPERM);
	r.caller_ptrace_cap = true;
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), 0);
}

static void access_undumpable(struct kunit *test)
{
	struct hp_access_req r = owner_1000();

	r.owner_dumpable = SUID_DUMP_DISABLE;
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), -EPERM);
	r.owner_dumpable = SUID_DUMP_ROOT;
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), -EPERM);
	/* The capability in the owner's ns does not cover the mm's ns. */
	r.caller_ptrace_cap = true;
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), -EPERM);
	r.caller_ptrace_cap_mm = true;
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), 0);
}

static void access_changed_creds(struct kunit *test)
{
	struct hp_access_req r = owner_1000();

	/* A setuid owner: real uid matches, effective does not. */
	r.owner_euid = GLOBAL_ROOT_UID;
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), -EPERM);
	r = owner_1000();
	r.owner_suid = GLOBAL_ROOT_UID;
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), -EPERM);
	r = owner_1000();
	r.owner_uid = GLOBAL_ROOT_UID;
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), -EPERM);
}

static void access_owner_gone(struct kunit *test)
{
	struct hp_access_req r = owner_1000();

	r.owner_alive = false;
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), -ESRCH);
	r.caller_ptrace_cap = true;
	r.caller_ptrace_cap_mm = true;
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), -ESRCH);
}

/* An owner with another mm exec'ed: its session counts as closed. */
static void access_owner_exec(struct kunit *test)
{
	struct hp_access_req r = owner_1000();

	r.owner_same_mm = false;
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), -ESRCH);
	r.caller_ptrace_cap = true;
	r.caller_ptrace_cap_mm = true;
	r.same_thread_group = true;
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), -ESRCH);
}

static void access_same_thread_group(struct kunit *test)
{
	struct hp_access_req r = owner_1000();

	r.caller_uid = KUIDT_INIT(1001);
	r.owner_dumpable = SUID_DUMP_DISABLE;
	r.same_thread_group = true;
	KUNIT_EXPECT_EQ(test, hp_access_decide(&r), 0);
}

/* ------------------------------------------------------------------ */
/* Limits                                                              */
/* ------------------------------------------------------------------ */

static void limits_memlock(struct kunit *test)
{
	KUNIT_EXPECT_TRUE(test, hp_memlock_fits(0, 17, 17));
	KUNIT_EXPECT_FALSE(test, hp_memlock_fits(1, 17, 17));
	KUNIT_EXPECT_TRUE(test, hp_memlock_fits(100, 0, 100));
	KUNIT_EXPECT_FALSE(test, hp_memlock_fits(ULONG_MAX, 1, ULONG_MAX));
	KUNIT_EXPECT_FALSE(test, hp_memlock_fits(2, ULONG_MAX - 1,
						 ULONG_MAX));
	KUNIT_EXPECT_TRUE(test, hp_memlock_fits(1, ULONG_MAX - 1, ULONG_MAX));
}

static void limits_sessions_per_user(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, hp_user_sessions_decide(0, 128), 0);
	KUNIT_EXPECT_EQ(test, hp_user_sessions_decide(127, 128), 0);
	KUNIT_EXPECT_EQ(test, hp_user_sessions_decide(128, 128), -EDQUOT);
	KUNIT_EXPECT_EQ(test, hp_user_sessions_decide(1000, 1), -EDQUOT);
	KUNIT_EXPECT_EQ(test, hp_user_sessions_decide(1000, 0), 0);
}

/* ------------------------------------------------------------------ */
/* Statistics                                                          */
/* ------------------------------------------------------------------ */

static void stats_sat_add(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, hp_sat_add(1, 2), 3ULL);
	KUNIT_EXPECT_EQ(test, hp_sat_add(U64_MAX, 1), U64_MAX);
	KUNIT_EXPECT_EQ(test, hp_sat_add(U64_MAX - 1, 1), U64_MAX);
	KUNIT_EXPECT_EQ(test, hp_sat_add(1ULL << 63, 1ULL << 63), U64_MAX);
}

static void stats_hostile_page(struct kunit *test)
{
	struct heapprofd_counters *n;
	struct heapprofd_consumer *co;
	struct heapprofd_producer *p;
	struct hp_snap snap, acc = { };
	struct hp_geom g;
	void *ctl;

	KUNIT_ASSERT_EQ(test, hp_geom_compute(1ULL << 16, BIG_MAX, &g), 0);
	ctl = kunit_kzalloc(test, g.ctl_size, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, ctl);
	p = ctl + g.off_producer;
	co = ctl + g.off_consumer;
	n = ctl + g.off_counters;

	/* A consumer head beyond the producer's tail is clamped. */
	p->tail = 100;
	co->head = 5000;
	n->records_dropped = U64_MAX;
	n->bytes_dropped = 17;
	hp_snap_read(ctl, &g, &snap);
	KUNIT_EXPECT_EQ(test, snap.produced, 100ULL);
	KUNIT_EXPECT_EQ(test, snap.consumed, 100ULL);
	KUNIT_EXPECT_EQ(test, snap.records_dropped, U64_MAX);

	/* Totals saturate instead of wrapping. */
	hp_snap_add(&acc, &snap);
	hp_snap_add(&acc, &snap);
	KUNIT_EXPECT_EQ(test, acc.records_dropped, U64_MAX);
	KUNIT_EXPECT_EQ(test, acc.bytes_dropped, 34ULL);
	KUNIT_EXPECT_EQ(test, acc.produced, 200ULL);

	co->head = 40;
	hp_snap_read(ctl, &g, &snap);
	KUNIT_EXPECT_EQ(test, snap.consumed, 40ULL);
}

/* ------------------------------------------------------------------ */
/* ioctl argument checks                                               */
/* ------------------------------------------------------------------ */

static void validate_register(struct kunit *test)
{
	struct heapprofd_register a = { .size = sizeof(a) };

	KUNIT_EXPECT_EQ(test, hp_check_register(&a), 0);
	a.flags = HEAPPROFD_REGISTER_DORMANT;
	KUNIT_EXPECT_EQ(test, hp_check_register(&a), 0);
	a.flags = 1U << 7;
	KUNIT_EXPECT_EQ(test, hp_check_register(&a), -EINVAL);
	a.flags = 0;
	a.resv[3] = 1;
	KUNIT_EXPECT_EQ(test, hp_check_register(&a), -EINVAL);
	/* Output fields are not inputs. */
	a.resv[3] = 0;
	a.session_id = 7;
	a.version = 99;
	KUNIT_EXPECT_EQ(test, hp_check_register(&a), 0);
}

static void validate_attach(struct kunit *test)
{
	struct heapprofd_attach a = { .size = sizeof(a) };

	KUNIT_EXPECT_EQ(test, hp_check_attach(&a), -EINVAL);
	a.flags = HEAPPROFD_ATTACH_BY_PID | HEAPPROFD_ATTACH_BY_ID;
	KUNIT_EXPECT_EQ(test, hp_check_attach(&a), -EINVAL);
	a.flags = HEAPPROFD_ATTACH_BY_ID;
	KUNIT_EXPECT_EQ(test, hp_check_attach(&a), 0);
	a.flags = HEAPPROFD_ATTACH_BY_PID;
	KUNIT_EXPECT_EQ(test, hp_check_attach(&a), -EINVAL);
	a.pid = -1;
	KUNIT_EXPECT_EQ(test, hp_check_attach(&a), -EINVAL);
	a.pid = 1;
	KUNIT_EXPECT_EQ(test, hp_check_attach(&a), 0);
	a.flags |= 1U << 5;
	KUNIT_EXPECT_EQ(test, hp_check_attach(&a), -EINVAL);
	a.flags = HEAPPROFD_ATTACH_BY_PID;
	a.resv[0] = 1;
	KUNIT_EXPECT_EQ(test, hp_check_attach(&a), -EINVAL);
}

static void validate_fd_arg(struct kunit *test)
{
	struct heapprofd_fd_arg a = { .size = sizeof(a) };

	KUNIT_EXPECT_EQ(test, hp_check_fd_arg(&a), 0);
	a.slot = HEAPPROFD_FD_SLOTS - 1;
	KUNIT_EXPECT_EQ(test, hp_check_fd_arg(&a), 0);
	a.slot = HEAPPROFD_FD_SLOTS;
	KUNIT_EXPECT_EQ(test, hp_check_fd_arg(&a), -EINVAL);
	a.slot = U32_MAX;
	KUNIT_EXPECT_EQ(test, hp_check_fd_arg(&a), -EINVAL);
	a.slot = 0;
	a.flags = 1;
	KUNIT_EXPECT_EQ(test, hp_check_fd_arg(&a), -EINVAL);
	a.flags = 0;
	a.resv[1] = 1;
	KUNIT_EXPECT_EQ(test, hp_check_fd_arg(&a), -EINVAL);
}

static void validate_info(struct kunit *test)
{
	struct heapprofd_session_info a = { .size = sizeof(a) };

	KUNIT_EXPECT_EQ(test, hp_check_info(&a), 0);
	a.flags = 1;
	KUNIT_EXPECT_EQ(test, hp_check_info(&a), -EINVAL);
	a.flags = 0;
	a.resv[2] = 1;
	KUNIT_EXPECT_EQ(test, hp_check_info(&a), -EINVAL);
}

/* ------------------------------------------------------------------ */
/* DMA-BUF: exporter names, sampling, the kernel record queue          */
/* ------------------------------------------------------------------ */

static void dmabuf_exporter_names(struct kunit *test)
{
	char n[HP_EXPORTER_LEN];

	hp_exporter_name(n, "system");
	KUNIT_EXPECT_STREQ(test, n, "system");
	hp_exporter_name(n, NULL);
	KUNIT_EXPECT_STREQ(test, n, "unknown");
	hp_exporter_name(n, "");
	KUNIT_EXPECT_STREQ(test, n, "unknown");
	hp_exporter_name(n, "..");
	KUNIT_EXPECT_STREQ(test, n, "unknown");
	hp_exporter_name(n, "a/b\nc");
	KUNIT_EXPECT_STREQ(test, n, "a_b_c");
	hp_exporter_name(n, "a-name-much-longer-than-thirty-one-bytes");
	KUNIT_EXPECT_EQ(test, strlen(n), (size_t)HP_EXPORTER_LEN - 1);
}

static void dmabuf_sample_rule(struct kunit *test)
{
	const u64 interval = 1 << 20, size = interval / 8;
	const unsigned int trials = 20000;
	unsigned int i, hits = 0;
	bool exact;
	u64 est;

	/* At least the interval: always, exactly. */
	KUNIT_EXPECT_TRUE(test, hp_dmabuf_sample(interval, interval, &est,
						 &exact));
	KUNIT_EXPECT_TRUE(test, exact);
	KUNIT_EXPECT_EQ(test, est, interval);
	KUNIT_EXPECT_TRUE(test, hp_dmabuf_sample(3 * interval, interval,
						 &est, &exact));
	KUNIT_EXPECT_EQ(test, est, 3 * interval);
	/* Below: p = size/interval, standing for interval: unbiased. */
	for (i = 0; i < trials; i++) {
		if (hp_dmabuf_sample(size, interval, &est, &exact)) {
			hits++;
			KUNIT_EXPECT_FALSE(test, exact);
			KUNIT_EXPECT_EQ(test, est, interval);
		}
	}
	/* Expected 2500, sd 47: six sd either way. */
	KUNIT_EXPECT_GT(test, hits, 2500U - 282);
	KUNIT_EXPECT_LT(test, hits, 2500U + 282);
}

static void dmabuf_kq_bounded(struct kunit *test)
{
	wait_queue_head_t wq;
	struct hp_krec *r;
	struct hp_kq *q;
	unsigned int i, n = HP_KQ_MAX_BYTES / (64 << 10);

	init_waitqueue_head(&wq);
	q = hp_kq_create(&wq);
	KUNIT_ASSERT_NOT_NULL(test, q);
	KUNIT_EXPECT_FALSE(test, hp_kq_pending(q));
	for (i = 0; i < n; i++) {
		r = hp_krec_alloc(64 << 10, GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, r);
		KUNIT_EXPECT_TRUE(test, hp_kq_push(q, r, 4096));
	}
	KUNIT_EXPECT_EQ(test, q->bytes, HP_KQ_MAX_BYTES);
	/* Full: the next one is counted, with what it stood for. */
	r = hp_krec_alloc(64, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, r);
	KUNIT_EXPECT_FALSE(test, hp_kq_push(q, r, 12345));
	KUNIT_EXPECT_EQ(test, q->lost_records, 1ULL);
	KUNIT_EXPECT_EQ(test, q->lost_bytes, 12345ULL);
	KUNIT_EXPECT_TRUE(test, hp_kq_pending(q));
	/* A closed queue takes nothing and counts nothing. */
	hp_kq_get(q);
	hp_kq_close(q);
	r = hp_krec_alloc(64, GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, r);
	KUNIT_EXPECT_FALSE(test, hp_kq_push(q, r, 1));
	KUNIT_EXPECT_EQ(test, q->lost_records, 1ULL);
	hp_kq_put(q);	/* frees what is still queued */
}

static struct kunit_case heapprofd_dmabuf_cases[] = {
	KUNIT_CASE(dmabuf_exporter_names),
	KUNIT_CASE(dmabuf_sample_rule),
	KUNIT_CASE(dmabuf_kq_bounded),
	{}
};

static struct kunit_case heapprofd_geom_cases[] = {
	KUNIT_CASE(geom_default_size),
	KUNIT_CASE(geom_bad_sizes),
	KUNIT_CASE(geom_bound),
	KUNIT_CASE(geom_parts_fit),
	KUNIT_CASE(geom_ctl_init),
	KUNIT_CASE(geom_mmap_rule),
	{}
};

static struct kunit_case heapprofd_access_cases[] = {
	KUNIT_CASE(access_same_uid),
	KUNIT_CASE(access_other_uid),
	KUNIT_CASE(access_undumpable),
	KUNIT_CASE(access_changed_creds),
	KUNIT_CASE(access_owner_gone),
	KUNIT_CASE(access_other_gid),
	KUNIT_CASE(access_owner_exec),
	KUNIT_CASE(access_same_thread_group),
	KUNIT_CASE(limits_memlock),
	KUNIT_CASE(limits_sessions_per_user),
	{}
};

static struct kunit_case heapprofd_stats_cases[] = {
	KUNIT_CASE(stats_sat_add),
	KUNIT_CASE(stats_hostile_page),
	{}
};

static struct kunit_case heapprofd_validate_cases[] = {
	KUNIT_CASE(validate_register),
	KUNIT_CASE(validate_attach),
	KUNIT_CASE(validate_fd_arg),
	KUNIT_CASE(validate_info),
	{}
};

static struct kunit_suite heapprofd_geom_suite = {
	.name = "heapprofd_geom",
	.test_cases = heapprofd_geom_cases,
};

static struct kunit_suite heapprofd_access_suite = {
	.name = "heapprofd_access",
	.test_cases = heapprofd_access_cases,
};

static struct kunit_suite heapprofd_stats_suite = {
	.name = "heapprofd_stats",
	.test_cases = heapprofd_stats_cases,
};

static struct kunit_suite heapprofd_validate_suite = {
	.name = "heapprofd_validate",
	.test_cases = heapprofd_validate_cases,
};

static struct kunit_suite heapprofd_dmabuf_suite = {
	.name = "heapprofd_dmabuf",
	.test_cases = heapprofd_dmabuf_cases,
};

kunit_test_suites(&heapprofd_geom_suite, &heapprofd_access_suite,
		  &heapprofd_stats_suite, &heapprofd_validate_suite,
		  &heapprofd_dmabuf_suite);

MODULE_DESCRIPTION("KUnit tests for heapprofd.ko");
MODULE_LICENSE("GPL");
MODULE_IMPORT_NS(HEAPPROFD_NS);
