// SPDX-License-Identifier: GPL-2.0
/*
 * The OOM killer's victims: the kernel's oom:mark_victim tracepoint, found
 * by name, tells when the OOM killer chose a process. For a process that
 * has a session, a HEAPPROFD_REC_OOM record is queued to the session's
 * consumer, which writes the process's heap as it stood then.
 *
 * The probe runs with the victim's task lock held: it only checks that the
 * process has a session (an xarray lookup) and hands the rest to a work
 * item (GFP_ATOMIC), which finds the session and queues the record. At
 * exit the probe goes first, then the work items are flushed.
 */
#include <linux/module.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/tracepoint.h>
#include <linux/workqueue.h>

#include "heapprofd_kmod.h"

struct hp_oom_work {
	struct work_struct work;
	pid_t tgid;
	u32 uid;
};

static struct tracepoint *hp_oom_tp;
static struct workqueue_struct *hp_oom_wq;

static void hp_oom_queue(struct work_struct *work)
{
	struct hp_oom_work *w = container_of(work, struct hp_oom_work, work);
	struct heapprofd_rec_oom *o;
	struct hp_session *s = NULL;
	struct hp_krec *r;
	struct pid *pid;

	pid = find_get_pid(w->tgid);
	if (pid)
		s = hp_session_get_by_pid(pid);
	put_pid(pid);
	if (!s)
		goto out;
	r = hp_krec_alloc(sizeof(*o), GFP_KERNEL_ACCOUNT);
	if (r) {
		o = (void *)r->data;
		o->hdr.len = sizeof(*o);
		o->hdr.type = HEAPPROFD_REC_OOM;
		o->pid = w->tgid;
		o->uid = w->uid;
		hp_kq_push(s->kq, r, 0);
	} else {
		hp_kq_lost(s->kq, 0);
	}
	hp_session_put(s);
out:
	kfree(w);
}

static void hp_oom_probe(void *data, struct task_struct *task, uid_t uid)
{
	struct hp_oom_work *w;
	pid_t tgid = task_tgid_nr(task);

	if (!hp_tgid_has_session(tgid))
		return;
	w = kzalloc(sizeof(*w), GFP_ATOMIC | __GFP_NOWARN);
	if (!w)
		return;
	INIT_WORK(&w->work, hp_oom_queue);
	w->tgid = tgid;
	w->uid = uid;
	queue_work(hp_oom_wq, &w->work);
}

static void hp_oom_find_tp(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "mark_victim"))
		hp_oom_tp = tp;
}

/**
 * hp_oom_init() - follow the OOM killer's choices where the kernel says them
 *
 * Without the tracepoint the module works on; the daemon then learns of
 * an OOM kill from the process's cgroup.
 *
 * Return: 0 or -ENOMEM.
 */
int hp_oom_init(void)
{
	hp_oom_wq = alloc_workqueue("heapprofd_oom", 0, 0);
	if (!hp_oom_wq)
		return -ENOMEM;
	for_each_kernel_tracepoint(hp_oom_find_tp, NULL);
	if (hp_oom_tp &&
	    tracepoint_probe_register(hp_oom_tp, (void *)hp_oom_probe, NULL))
		hp_oom_tp = NULL;
	if (!hp_oom_tp)
		pr_info("heapprofd: no oom:mark_victim tracepoint: OOM kills are seen from cgroups only\n");
	return 0;
}

/**
 * hp_oom_exit() - leave the tracepoint, then let the queued work finish
 */
void hp_oom_exit(void)
{
	if (hp_oom_tp) {
		tracepoint_probe_unregister(hp_oom_tp, (void *)hp_oom_probe, NULL);
		tracepoint_synchronize_unregister();
		hp_oom_tp = NULL;
	}
	destroy_workqueue(hp_oom_wq);
}
