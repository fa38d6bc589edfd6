// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofd generic netlink family "heapprofd".
 *
 *   multicast group "events": SESSION_NEW, SESSION_ATTACHED and
 *                             SESSION_CLOSED, one message per event;
 *   SESSION_GET (dump):       one SESSION_NEW-shaped message per live
 *                             session.
 *
 * The messages name processes (pid, uid, comm), which /proc with hidepid
 * may hide from other users, so both are for administrators only:
 * SESSION_GET needs CAP_NET_ADMIN (GENL_ADMIN_PERM) and joining "events"
 * CAP_SYS_ADMIN (GENL_MCAST_CAP_SYS_ADMIN). The family is not netnsok, so
 * it exists in the initial network namespace alone and both capabilities
 * are checked against the initial user namespace. On a kernel without the
 * multicast flag anyone may join, and events then carry no PID, UID or
 * COMM (an administrator dumps for those).
 *
 * Attributes are validated strictly (resv_start_op is 0, so the core
 * rejects unknown attributes and non-zero reserved header bytes).
 *
 * Events are captured where they happen (copying what they report) and sent
 * from a work item: messages are never built or sent in the caller's
 * context. DMA-BUF and GPU events come from probe handlers in atomic
 * context: they go through a fixed array (no allocation) and a token
 * bucket of HEAPPROFD_EVENTS_PER_SEC per second; what is dropped either
 * way is counted and reported with the next event sent (EVENTS_LOST).
 */
#include <linux/list.h>
#include <linux/math64.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <linux/user_namespace.h>
#include <linux/workqueue.h>
#include <net/genetlink.h>

#include "compat.h"
#include "heapprofd_kmod.h"

/* What one message says about a session, captured at event time. */
struct hp_nl_ev {
	struct list_head node;
	u8 cmd;
	u64 id;
	u32 pid;
	u32 uid;
	u32 state;
	u32 flags;
	u64 data_size;
	struct hp_snap snap;
	char comm[TASK_COMM_LEN];
};

static const struct nla_policy hp_nl_policy[HEAPPROFD_A_MAX + 1] = {
	[HEAPPROFD_A_SESSION_ID]	= { .type = NLA_U64 },
	[HEAPPROFD_A_PID]		= { .type = NLA_U32 },
	[HEAPPROFD_A_UID]		= { .type = NLA_U32 },
	[HEAPPROFD_A_COMM]		= { .type = NLA_NUL_STRING,
					    .len = TASK_COMM_LEN - 1 },
	[HEAPPROFD_A_STATE]		= NLA_POLICY_MAX(NLA_U32,
						HEAPPROFD_STATE_CLOSED),
	[HEAPPROFD_A_FLAGS]		= NLA_POLICY_MASK(NLA_U32,
						HEAPPROFD_REGISTER_ALL),
	[HEAPPROFD_A_DATA_SIZE]		= { .type = NLA_U64 },
	[HEAPPROFD_A_PRODUCED_BYTES]	= { .type = NLA_U64 },
	[HEAPPROFD_A_CONSUMED_BYTES]	= { .type = NLA_U64 },
	[HEAPPROFD_A_DROPPED_RECORDS]	= { .type = NLA_U64 },
	[HEAPPROFD_A_DMABUF_INODE]	= { .type = NLA_U64 },
	[HEAPPROFD_A_DMABUF_SIZE]	= { .type = NLA_U64 },
	[HEAPPROFD_A_DMABUF_EXPORTER]	= { .type = NLA_NUL_STRING,
					    .len = HP_EXPORTER_LEN - 1 },
	[HEAPPROFD_A_GPU_ID]		= { .type = NLA_U32 },
	[HEAPPROFD_A_GPU_SIZE]		= { .type = NLA_U64 },
	[HEAPPROFD_A_EVENTS_LOST]	= { .type = NLA_U64 },
};

static int hp_nl_dump(struct sk_buff *skb, struct netlink_callback *cb);

static const struct genl_small_ops hp_nl_ops[] = {
	{
		.cmd	= HEAPPROFD_CMD_SESSION_GET,
		.flags	= GENL_ADMIN_PERM,
		.dumpit	= hp_nl_dump,
	},
};

static const struct genl_multicast_group hp_nl_mcgrps[] = {
	{ .name = HEAPPROFD_GENL_MCGRP_EVENTS, .flags = HP_MCGRP_FLAGS },
};

static struct genl_family hp_nl_family = {
	.name		= HEAPPROFD_GENL_NAME,
	.version	= HEAPPROFD_GENL_VERSION,
	.maxattr	= HEAPPROFD_A_MAX,
	.policy		= hp_nl_policy,
	.module		= THIS_MODULE,
	.small_ops	= hp_nl_ops,
	.n_small_ops	= ARRAY_SIZE(hp_nl_ops),
	.mcgrps		= hp_nl_mcgrps,
	.n_mcgrps	= ARRAY_SIZE(hp_nl_mcgrps),
};

static LIST_HEAD(hp_nl_queue);
static DEFINE_SPINLOCK(hp_nl_queue_lock);
static void hp_nl_work_fn(struct work_struct *work);
static DECLARE_WORK(hp_nl_work, hp_nl_work_fn);

static void hp_nl_capture(struct hp_nl_ev *ev, u8 cmd, struct hp_session *s)
{
	ev->cmd = cmd;
	ev->id = s->id;
	ev->pid = pid_nr(s->owner);
	ev->uid = from_kuid_munged(&init_user_ns, s->owner_euid);
	ev->state = READ_ONCE(s->state);
	ev->flags = s->reg_flags;
	ev->data_size = s->ring.geom.data_size;
	hp_session_snap(s, &ev->snap);
	memcpy(ev->comm, s->comm, sizeof(ev->comm));
}

/* @who: include PID, UID and COMM */
static int hp_nl_fill(struct sk_buff *skb, const struct hp_nl_ev *ev,
		      u32 portid, u32 seq, int flags, bool who)
{
	void *hdr;

	hdr = genlmsg_put(skb, portid, seq, &hp_nl_family, flags, ev->cmd);
	if (!hdr)
		return -EMSGSIZE;
	if (nla_put_u64_64bit(skb, HEAPPROFD_A_SESSION_ID, ev->id,
			      HEAPPROFD_A_PAD) ||
	    (who && (nla_put_u32(skb, HEAPPROFD_A_PID, ev->pid) ||
		     nla_put_u32(skb, HEAPPROFD_A_UID, ev->uid) ||
		     nla_put_string(skb, HEAPPROFD_A_COMM, ev->comm))) ||
	    nla_put_u32(skb, HEAPPROFD_A_STATE, ev->state) ||
	    nla_put_u32(skb, HEAPPROFD_A_FLAGS, ev->flags) ||
	    nla_put_u64_64bit(skb, HEAPPROFD_A_DATA_SIZE, ev->data_size,
			      HEAPPROFD_A_PAD) ||
	    nla_put_u64_64bit(skb, HEAPPROFD_A_PRODUCED_BYTES,
			      ev->snap.produced, HEAPPROFD_A_PAD) ||
	    nla_put_u64_64bit(skb, HEAPPROFD_A_CONSUMED_BYTES,
			      ev->snap.consumed, HEAPPROFD_A_PAD) ||
	    nla_put_u64_64bit(skb, HEAPPROFD_A_DROPPED_RECORDS,
			      ev->snap.records_dropped, HEAPPROFD_A_PAD)) {
		genlmsg_cancel(skb, hdr);
		return -EMSGSIZE;
	}
	genlmsg_end(skb, hdr);
	return 0;
}

/* SESSION_GET dump: live sessions in id order, resuming after args[0]. */
static int hp_nl_dump(struct sk_buff *skb, struct netlink_callback *cb)
{
	struct hp_session *s;
	struct hp_nl_ev ev;
	u64 last = cb->args[0];

	mutex_lock(&hp_lock);
	list_for_each_entry(s, &hp_sessions, node) {
		if (s->id <= last)
			continue;
		hp_nl_capture(&ev, HEAPPROFD_CMD_SESSION_NEW, s);
		if (hp_nl_fill(skb, &ev, NETLINK_CB(cb->skb).portid,
			       cb->nlh->nlmsg_seq, NLM_F_MULTI, true))
			break;
		last = s->id;
	}
	mutex_unlock(&hp_lock);
	cb->args[0] = last;
	return skb->len;
}

static void hp_nl_send(const struct hp_nl_ev *ev)
{
	struct sk_buff *skb;

	skb = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
	if (!skb)
		return;
	if (hp_nl_fill(skb, ev, 0, 0, 0, HP_MCGRP_FLAGS != 0)) {
		nlmsg_free(skb);
		return;
	}
	/* -ESRCH (nobody listens) is not an error here. */
	genlmsg_multicast(&hp_nl_family, skb, 0, 0, GFP_KERNEL);
}

static void hp_nl_work_fn(struct work_struct *work)
{
	struct hp_nl_ev *ev;

	for (;;) {
		spin_lock(&hp_nl_queue_lock);
		ev = list_first_entry_or_null(&hp_nl_queue, struct hp_nl_ev,
					      node);
		if (ev)
			list_del(&ev->node);
		spin_unlock(&hp_nl_queue_lock);
		if (!ev)
			return;
		hp_nl_send(ev);
		kfree(ev);
	}
}

/**
 * hp_nl_event() - queue an event message about a session
 * @cmd: HEAPPROFD_CMD_SESSION_{NEW,ATTACHED,CLOSED}
 * @s: the session; what the message reports is copied now
 *
 * Events are best effort: if memory is short the event is lost.
 */
void hp_nl_event(u8 cmd, struct hp_session *s)
{
	struct hp_nl_ev *ev;

	ev = kmalloc(sizeof(*ev), GFP_KERNEL);
	if (!ev)
		return;
	hp_nl_capture(ev, cmd, s);
	spin_lock(&hp_nl_queue_lock);
	list_add_tail(&ev->node, &hp_nl_queue);
	spin_unlock(&hp_nl_queue_lock);
	schedule_work(&hp_nl_work);
}

/* ------------------------------------------------------------------ */
/* DMA-BUF and GPU events                                              */
/* ------------------------------------------------------------------ */

#define HP_NL_RES_SLOTS	256

static struct {
	spinlock_t lock;	/* irqsave: probe handlers queue */
	struct hp_nl_res_ev ev[HP_NL_RES_SLOTS];
	unsigned int head;	/* next to send */
	unsigned int len;
	u64 lost;		/* not queued since the last one sent */
	u64 tokens;
	u64 refill_ns;		/* when tokens were last topped up */
	bool stopping;
} hp_nl_res = {
	.lock = __SPIN_LOCK_UNLOCKED(hp_nl_res.lock),
	.tokens = HEAPPROFD_EVENTS_PER_SEC,
};

static void hp_nl_res_work_fn(struct work_struct *work);
static DECLARE_WORK(hp_nl_res_work, hp_nl_res_work_fn);

/* Token bucket: HEAPPROFD_EVENTS_PER_SEC a second, as many at once. */
static bool hp_nl_res_take_token(u64 now)
{
	u64 add;

	if (now > hp_nl_res.refill_ns) {
		add = div_u64(now - hp_nl_res.refill_ns,
			      NSEC_PER_SEC / HEAPPROFD_EVENTS_PER_SEC);
		if (add) {
			hp_nl_res.tokens = min_t(u64, hp_nl_res.tokens + add,
						 HEAPPROFD_EVENTS_PER_SEC);
			hp_nl_res.refill_ns = now;
		}
	}
	if (!hp_nl_res.tokens)
		return false;
	hp_nl_res.tokens--;
	return true;
}

/**
 * hp_nl_res_wanted() - does anyone listen to resource events? (any context)
 *
 * Lets a hot path skip building an event nobody would get.
 */
bool hp_nl_res_wanted(void)
{
	return genl_has_listeners(&hp_nl_family, &init_net, 0);
}

/**
 * hp_nl_res_event() - queue a DMA-BUF or GPU event (any context)
 * @ev: what the message says, copied
 */
void hp_nl_res_event(const struct hp_nl_res_ev *ev)
{
	unsigned long flags;
	bool queued = false;

	/* Nobody listening: nothing to queue, and no token spent. */
	if (!hp_nl_res_wanted())
		return;
	spin_lock_irqsave(&hp_nl_res.lock, flags);
	if (!hp_nl_res.stopping) {
		if (hp_nl_res.len < HP_NL_RES_SLOTS &&
		    hp_nl_res_take_token(ktime_get_mono_fast_ns())) {
			hp_nl_res.ev[(hp_nl_res.head + hp_nl_res.len) %
				     HP_NL_RES_SLOTS] = *ev;
			hp_nl_res.len++;
			queued = true;
		} else {
			hp_nl_res.lost++;
		}
	}
	spin_unlock_irqrestore(&hp_nl_res.lock, flags);
	if (queued)
		schedule_work(&hp_nl_res_work);
}

static int hp_nl_res_fill(struct sk_buff *skb, const struct hp_nl_res_ev *ev,
			  u64 lost)
{
	bool who = HP_MCGRP_FLAGS != 0;
	void *hdr;
	int err;

	hdr = genlmsg_put(skb, 0, 0, &hp_nl_family, 0, ev->cmd);
	if (!hdr)
		return -EMSGSIZE;
	if (ev->cmd == HEAPPROFD_CMD_GPU_TOTAL)
		err = nla_put_u32(skb, HEAPPROFD_A_GPU_ID, ev->gpu_id) ||
		      nla_put_u32(skb, HEAPPROFD_A_PID, ev->pid) ||
		      nla_put_u64_64bit(skb, HEAPPROFD_A_GPU_SIZE, ev->size,
					HEAPPROFD_A_PAD);
	else
		err = nla_put_u64_64bit(skb, HEAPPROFD_A_DMABUF_INODE,
					ev->inode, HEAPPROFD_A_PAD) ||
		      nla_put_u64_64bit(skb, HEAPPROFD_A_DMABUF_SIZE, ev->size,
					HEAPPROFD_A_PAD) ||
		      nla_put_string(skb, HEAPPROFD_A_DMABUF_EXPORTER,
				     ev->exporter) ||
		      (who && nla_put_u32(skb, HEAPPROFD_A_PID, ev->pid)) ||
		      (who && ev->comm[0] &&
		       nla_put_string(skb, HEAPPROFD_A_COMM, ev->comm));
	if (!err && lost)
		err = nla_put_u64_64bit(skb, HEAPPROFD_A_EVENTS_LOST, lost,
					HEAPPROFD_A_PAD);
	if (err) {
		genlmsg_cancel(skb, hdr);
		return -EMSGSIZE;
	}
	genlmsg_end(skb, hdr);
	return 0;
}

static void hp_nl_res_work_fn(struct work_struct *work)
{
	struct hp_nl_res_ev ev;
	struct sk_buff *skb;
	unsigned long flags;
	u64 lost;

	for (;;) {
		spin_lock_irqsave(&hp_nl_res.lock, flags);
		if (!hp_nl_res.len) {
			spin_unlock_irqrestore(&hp_nl_res.lock, flags);
			return;
		}
		ev = hp_nl_res.ev[hp_nl_res.head];
		hp_nl_res.head = (hp_nl_res.head + 1) % HP_NL_RES_SLOTS;
		hp_nl_res.len--;
		lost = hp_nl_res.lost;
		hp_nl_res.lost = 0;
		spin_unlock_irqrestore(&hp_nl_res.lock, flags);

		skb = genlmsg_new(NLMSG_DEFAULT_SIZE, GFP_KERNEL);
		if (skb && hp_nl_res_fill(skb, &ev, lost)) {
			nlmsg_free(skb);
			skb = NULL;
		}
		if (!skb) {
			spin_lock_irqsave(&hp_nl_res.lock, flags);
			hp_nl_res.lost += lost + 1;
			spin_unlock_irqrestore(&hp_nl_res.lock, flags);
			continue;
		}
		genlmsg_multicast(&hp_nl_family, skb, 0, 0, GFP_KERNEL);
		cond_resched();
	}
}

int __init hp_nl_init(void)
{
	return genl_register_family(&hp_nl_family);
}

void hp_nl_exit(void)
{
	struct hp_nl_ev *ev, *tmp;
	unsigned long flags;

	/* The probes are gone: nothing queues after this. */
	spin_lock_irqsave(&hp_nl_res.lock, flags);
	hp_nl_res.stopping = true;
	spin_unlock_irqrestore(&hp_nl_res.lock, flags);
	cancel_work_sync(&hp_nl_res_work);
	flush_work(&hp_nl_work);
	genl_unregister_family(&hp_nl_family);
	/* No session is left, so nothing can have been queued since. */
	list_for_each_entry_safe(ev, tmp, &hp_nl_queue, node)
		kfree(ev);
}
