// SPDX-License-Identifier: GPL-2.0
/*
 * GPU memory totals from the gpu_mem_total(gpu_id, pid, size) tracepoint,
 * which GPU drivers fire when their memory per process (pid > 0) or in all
 * (pid 0) changes. /sys/kernel/heapprofd/gpu/<gpu_id>/total_bytes and
 * gpu/<gpu_id>/pids/<pid> show the last value of each.
 *
 * The tracepoint is found by name wherever it is defined: in vmlinux
 * (CONFIG_TRACE_GPU_MEM) or in any module, loaded before or after this one
 * (the tracepoint module notifier replays the modules already loaded).
 * When a module that defines it goes away our probe leaves it first; when
 * we go away we leave every tracepoint we joined. The values stay.
 *
 * The probe runs in whatever context the driver fires it: it takes
 * hp_gpu_lock with interrupts off and allocates with GFP_ATOMIC. The
 * sysfs directories and files are made and removed by a work item; a file
 * finds its value by its directory's and its own name. Entries are freed
 * only by that work item or at exit, so it may use them unlocked.
 */
#include <linux/kobject.h>
#include <linux/kstrtox.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/sysfs.h>
#include <linux/tracepoint.h>
#include <linux/workqueue.h>

#include "heapprofd_kmod.h"

/* Processes with a value, over all GPUs; more are not recorded. */
#define HP_GPU_MAX_PROCS	4096
/* Tracepoints named gpu_mem_total we attach to at once. */
#define HP_GPU_MAX_TPS		8

struct hp_gpu_proc {
	struct list_head node;
	u32 pid;
	u64 size;
	bool gone;		/* its total went to 0: remove the file */
	bool tried;		/* the work item tried to make its file */
	bool has_file;
	char name[12];
	struct kobj_attribute attr;
};

struct hp_gpu {
	struct list_head node;
	u32 gpu_id;
	u64 total;		/* the pid 0 value */
	struct list_head procs;
	struct kobject *kobj;	/* gpu/<gpu_id> */
	struct kobject *pids;	/* gpu/<gpu_id>/pids */
	bool view_failed;
};

static DEFINE_SPINLOCK(hp_gpu_lock);
static LIST_HEAD(hp_gpus);
static unsigned int hp_gpu_nr_procs;
static struct kobject *hp_gpu_kobj;
static bool hp_gpu_stopping;

static void hp_gpu_work_fn(struct work_struct *work);
static DECLARE_WORK(hp_gpu_work, hp_gpu_work_fn);

/* The tracepoints we joined, under hp_gpu_tp_lock. */
static DEFINE_MUTEX(hp_gpu_tp_lock);
static struct tracepoint *hp_gpu_tps[HP_GPU_MAX_TPS];

static struct hp_gpu *hp_gpu_find(u32 gpu_id)
{
	struct hp_gpu *g;

	list_for_each_entry(g, &hp_gpus, node)
		if (g->gpu_id == gpu_id)
			return g;
	return NULL;
}

static struct hp_gpu_proc *hp_gpu_find_proc(struct hp_gpu *g, u32 pid)
{
	struct hp_gpu_proc *p;

	list_for_each_entry(p, &g->procs, node)
		if (p->pid == pid)
			return p;
	return NULL;
}

/* ------------------------------------------------------------------ */
/* The probe (any context)                                             */
/* ------------------------------------------------------------------ */

static void hp_gpu_probe(void *data, u32 gpu_id, u32 pid, u64 size)
{
	struct hp_nl_res_ev ev = {
		.cmd = HEAPPROFD_CMD_GPU_TOTAL,
		.gpu_id = gpu_id,
		.pid = pid,
		.size = size,
	};
	struct hp_gpu_proc *p;
	struct hp_gpu *g;
	unsigned long flags;

	spin_lock_irqsave(&hp_gpu_lock, flags);
	g = hp_gpu_find(gpu_id);
	if (!g) {
		g = kzalloc(sizeof(*g), GFP_ATOMIC | __GFP_NOWARN);
		if (!g)
			goto out;
		g->gpu_id = gpu_id;
		INIT_LIST_HEAD(&g->procs);
		list_add_tail(&g->node, &hp_gpus);
	}
	if (!pid) {
		g->total = size;
		goto out;
	}
	p = hp_gpu_find_proc(g, pid);
	if (!p && size && hp_gpu_nr_procs < HP_GPU_MAX_PROCS) {
		p = kzalloc(sizeof(*p), GFP_ATOMIC | __GFP_NOWARN);
		if (p) {
			p->pid = pid;
			list_add_tail(&p->node, &g->procs);
			hp_gpu_nr_procs++;
		}
	}
	if (p) {
		p->size = size;
		p->gone = !size;
	}
out:
	spin_unlock_irqrestore(&hp_gpu_lock, flags);
	if (!READ_ONCE(hp_gpu_stopping))
		schedule_work(&hp_gpu_work);
	hp_nl_res_event(&ev);
}

/* ------------------------------------------------------------------ */
/* Finding gpu_mem_total by name                                       */
/* ------------------------------------------------------------------ */

static void hp_gpu_join(struct tracepoint *tp)
{
	int i, slot = -1;

	lockdep_assert_held(&hp_gpu_tp_lock);
	if (strcmp(tp->name, "gpu_mem_total"))
		return;
	for (i = 0; i < HP_GPU_MAX_TPS; i++) {
		if (hp_gpu_tps[i] == tp)
			return;
		if (!hp_gpu_tps[i] && slot < 0)
			slot = i;
	}
	if (slot < 0 || tracepoint_probe_register(tp, (void *)hp_gpu_probe,
						  NULL))
		return;
	hp_gpu_tps[slot] = tp;
}

static void hp_gpu_leave(struct tracepoint *tp)
{
	int i;

	lockdep_assert_held(&hp_gpu_tp_lock);
	for (i = 0; i < HP_GPU_MAX_TPS; i++) {
		if (hp_gpu_tps[i] != tp)
			continue;
		tracepoint_probe_unregister(tp, (void *)hp_gpu_probe, NULL);
		hp_gpu_tps[i] = NULL;
	}
}

static void hp_gpu_join_kernel_tp(struct tracepoint *tp, void *priv)
{
	hp_gpu_join(tp);
}

static int hp_gpu_module_event(struct notifier_block *nb, unsigned long val,
			       void *data)
{
	struct tp_module *tp_mod = data;
	tracepoint_ptr_t *begin = tp_mod->mod->tracepoints_ptrs;
	unsigned int i, n = tp_mod->mod->num_tracepoints;

	mutex_lock(&hp_gpu_tp_lock);
	for (i = 0; i < n; i++) {
		struct tracepoint *tp = tracepoint_ptr_deref(&begin[i]);

		if (val == MODULE_STATE_COMING)
			hp_gpu_join(tp);
		else if (val == MODULE_STATE_GOING)
			hp_gpu_leave(tp);
	}
	mutex_unlock(&hp_gpu_tp_lock);
	return NOTIFY_OK;
}

static struct notifier_block hp_gpu_module_nb = {
	.notifier_call = hp_gpu_module_event,
};

/* ------------------------------------------------------------------ */
/* sysfs                                                               */
/* ------------------------------------------------------------------ */

static ssize_t total_bytes_show(struct kobject *kobj,
				struct kobj_attribute *attr, char *buf)
{
	unsigned long flags;
	struct hp_gpu *g;
	u32 gpu_id;
	u64 v = 0;

	if (kstrtou32(kobject_name(kobj), 10, &gpu_id))
		return -ENODEV;
	spin_lock_irqsave(&hp_gpu_lock, flags);
	g = hp_gpu_find(gpu_id);
	if (g)
		v = g->total;
	spin_unlock_irqrestore(&hp_gpu_lock, flags);
	return g ? sysfs_emit(buf, "%llu\n", v) : -ENODEV;
}

static struct kobj_attribute hp_gpu_attr_total = __ATTR_RO(total_bytes);

/* A pid file lives while its entry does: the work item frees both. */
static ssize_t hp_gpu_pid_show(struct kobject *kobj,
			       struct kobj_attribute *attr, char *buf)
{
	struct hp_gpu_proc *p = container_of(attr, struct hp_gpu_proc, attr);
	unsigned long flags;
	u64 v;

	spin_lock_irqsave(&hp_gpu_lock, flags);
	v = p->size;
	spin_unlock_irqrestore(&hp_gpu_lock, flags);
	return sysfs_emit(buf, "%llu\n", v);
}

static void hp_gpu_view_gpu(struct hp_gpu *g)
{
	char name[12];

	snprintf(name, sizeof(name), "%u", g->gpu_id);
	g->kobj = kobject_create_and_add(name, hp_gpu_kobj);
	if (!g->kobj)
		goto fail;
	if (sysfs_create_file(g->kobj, &hp_gpu_attr_total.attr))
		goto fail_kobj;
	g->pids = kobject_create_and_add("pids", g->kobj);
	if (!g->pids)
		goto fail_file;
	return;

fail_file:
	sysfs_remove_file(g->kobj, &hp_gpu_attr_total.attr);
fail_kobj:
	kobject_put(g->kobj);
	g->kobj = NULL;
fail:
	g->view_failed = true;
}

static void hp_gpu_unview_gpu(struct hp_gpu *g)
{
	if (!g->kobj)
		return;
	kobject_put(g->pids);
	sysfs_remove_file(g->kobj, &hp_gpu_attr_total.attr);
	kobject_put(g->kobj);
	g->kobj = NULL;
	g->pids = NULL;
}

/* One change to one pid file; false when nothing is left to do. */
static bool hp_gpu_sync_one(void)
{
	struct hp_gpu_proc *p, *proc = NULL;
	struct hp_gpu *g, *gpu = NULL;
	unsigned long flags;

	spin_lock_irqsave(&hp_gpu_lock, flags);
	list_for_each_entry(g, &hp_gpus, node) {
		if (!g->kobj && !g->view_failed) {
			gpu = g;	/* its directory first */
			break;
		}
		if (!g->pids)
			continue;
		list_for_each_entry(p, &g->procs, node) {
			if (p->gone || !p->tried) {
				proc = p;
				gpu = g;
				break;
			}
		}
		if (proc)
			break;
	}
	/* Off the list now; the probe may add the pid again later. */
	if (proc && proc->gone) {
		list_del(&proc->node);
		hp_gpu_nr_procs--;
	}
	spin_unlock_irqrestore(&hp_gpu_lock, flags);

	if (!gpu)
		return false;
	if (!proc) {
		hp_gpu_view_gpu(gpu);
	} else if (!proc->gone) {
		snprintf(proc->name, sizeof(proc->name), "%u", proc->pid);
		sysfs_attr_init(&proc->attr.attr);
		proc->attr.attr.name = proc->name;
		proc->attr.attr.mode = 0400;
		proc->attr.show = hp_gpu_pid_show;
		/* A failure leaves the value without a file: not retried. */
		proc->has_file = !sysfs_create_file(gpu->pids,
						    &proc->attr.attr);
		proc->tried = true;
	} else {
		if (proc->has_file)
			sysfs_remove_file(gpu->pids, &proc->attr.attr);
		kfree(proc);
	}
	return true;
}

static void hp_gpu_work_fn(struct work_struct *work)
{
	while (!READ_ONCE(hp_gpu_stopping) && hp_gpu_sync_one())
		cond_resched();
}

int hp_gpu_init(struct kobject *parent)
{
	int ret;

	hp_gpu_kobj = kobject_create_and_add("gpu", parent);
	if (!hp_gpu_kobj)
		return -ENOMEM;
	mutex_lock(&hp_gpu_tp_lock);
	for_each_kernel_tracepoint(hp_gpu_join_kernel_tp, NULL);
	mutex_unlock(&hp_gpu_tp_lock);
	/* Replays MODULE_STATE_COMING for the modules already loaded. */
	ret = register_tracepoint_module_notifier(&hp_gpu_module_nb);
	if (ret)
		pr_info("heapprofd: gpu_mem_total in modules not followed (%d)\n",
			ret);
	return 0;
}

void hp_gpu_exit(void)
{
	struct hp_gpu_proc *p, *ptmp;
	struct hp_gpu *g, *gtmp;
	int i;

	unregister_tracepoint_module_notifier(&hp_gpu_module_nb);
	mutex_lock(&hp_gpu_tp_lock);
	for (i = 0; i < HP_GPU_MAX_TPS; i++)
		if (hp_gpu_tps[i])
			hp_gpu_leave(hp_gpu_tps[i]);
	mutex_unlock(&hp_gpu_tp_lock);
	/* No probe runs after this. */
	tracepoint_synchronize_unregister();
	WRITE_ONCE(hp_gpu_stopping, true);
	cancel_work_sync(&hp_gpu_work);

	list_for_each_entry_safe(g, gtmp, &hp_gpus, node) {
		list_for_each_entry_safe(p, ptmp, &g->procs, node) {
			if (p->has_file && g->pids)
				sysfs_remove_file(g->pids, &p->attr.attr);
			kfree(p);
		}
		hp_gpu_unview_gpu(g);
		kfree(g);
	}
	INIT_LIST_HEAD(&hp_gpus);
	kobject_put(hp_gpu_kobj);
}
