// SPDX-License-Identifier: GPL-2.0
/*
 * DMA-BUF accounting: every buffer exported in the system, who exported
 * it, and, for a profiled process, the user call stack that did.
 *
 * Sources, attached by name when the module loads:
 *
 *   export   the kernel's dma_buf_export tracepoint where the target kernel
 *            has one (include/trace/events/dma_buf.h; a compile-time probe),
 *            else a return probe on dma_buf_export(), for the buffer it
 *            returns;
 *   release  a probe on dma_buf_release(), the d_release of every dma-buf
 *            dentry, which runs once the last reference to the buffer's
 *            file is gone, in whatever process or work item dropped it.
 *
 * If a probe cannot be registered (the kernel lacks kprobes or the symbol)
 * the module works without DMA-BUF accounting; dmabuf/source says "none".
 * Buffers alive before the probes were registered are found once by a
 * walk of file tables and mappings (dmabuf_scan.c).
 *
 * Both handlers run in atomic context: they take hp_dmabuf_lock with
 * interrupts off, allocate with GFP_ATOMIC and copy nothing from user
 * space. The export handler records the buffer (one small allocation and
 * two hash insertions; sysfs views are built elsewhere, see
 * dmabuf_sysfs.c) and, when the exporting process owns a session, queues
 * a task work. That work runs in the exporter's own
 * process context on its way back to user space, where reading its stack is
 * allowed: if the process has a session with a consumer, the export is
 * sampled as an allocation of the "dmabuf" heap (uapi: "Kernel records")
 * with the registers and stack of that moment, and the buffer remembers
 * the session's record queue so that its release becomes the matching
 * free, whoever releases it.
 *
 * A pending task work holds a reference to this module, so rmmod fails
 * with EBUSY rather than leave a callback pointing into freed code; the
 * work drops it as its last act.
 */
#include <linux/dma-buf.h>
#include <linux/fs.h>
#include <linux/hashtable.h>
#include <linux/kprobes.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/pid_namespace.h>
#include <linux/random.h>
#include <linux/sched/task_stack.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/task_work.h>
#include <linux/timekeeping.h>
#include <linux/tracepoint.h>

#include "arch.h"
#include "compat.h"
#include "heapprofd_kmod.h"

#ifdef HEAPPROFD_HAVE_DMA_BUF_TRACE
#include <trace/events/dma_buf.h>
#endif

DEFINE_SPINLOCK(hp_dmabuf_lock);
LIST_HEAD(hp_dmabuf_live);
LIST_HEAD(hp_dmabuf_dead);
LIST_HEAD(hp_dmabuf_exps);
LIST_HEAD(hp_dmabuf_unviewed);
bool hp_dmabuf_views_on;
u64 hp_dmabuf_total_bytes;
u64 hp_dmabuf_count;
const char *hp_dmabuf_source = "none";

/* Buffers by struct dma_buf (the probes' key) and by inode (sysfs). */
static DEFINE_HASHTABLE(hp_dmabuf_by_key, 10);
static DEFINE_HASHTABLE(hp_dmabuf_by_ino, 10);
static unsigned int hp_dmabuf_nr_exps;

/* Exporter names beyond this many are counted under "other". */
#define HP_DMABUF_MAX_EXPORTERS	64

/* Kernel records: the largest user stack a DMA-BUF sample carries. */
#define HP_DMABUF_STACK_MAX	HEAPPROFD_STACK_CAP_DEFAULT

/* ------------------------------------------------------------------ */
/* The buffer table                                                    */
/* ------------------------------------------------------------------ */

static struct hp_dmabuf *hp_dmabuf_find_key(const void *key)
{
	struct hp_dmabuf *b;

	lockdep_assert_held(&hp_dmabuf_lock);
	hash_for_each_possible(hp_dmabuf_by_key, b, hnode, (unsigned long)key)
		if (b->key == key)
			return b;
	return NULL;
}

/**
 * hp_dmabuf_find_ino() - a live buffer by inode number
 * @ino: the buffer's inode number
 *
 * Return: the buffer, valid while hp_dmabuf_lock is held, or NULL.
 */
struct hp_dmabuf *hp_dmabuf_find_ino(u64 ino)
{
	struct hp_dmabuf *b;

	lockdep_assert_held(&hp_dmabuf_lock);
	hash_for_each_possible(hp_dmabuf_by_ino, b, inode_node, ino)
		if (b->ino == ino)
			return b;
	return NULL;
}

/**
 * hp_exporter_name() - an exporter's name as a sysfs directory name
 * @dst: HP_EXPORTER_LEN bytes
 * @src: the driver's exp_name, may be NULL
 *
 * No '/' or newline, not "." or "..", not empty ("unknown" instead).
 */
void hp_exporter_name(char *dst, const char *src)
{
	char *p;

	if (!src || strscpy(dst, src, HP_EXPORTER_LEN) == 0)
		strscpy(dst, "unknown", HP_EXPORTER_LEN);
	for (p = dst; *p; p++)
		if (*p == '/' || *p == '\n')
			*p = '_';
	if (!strcmp(dst, ".") || !strcmp(dst, ".."))
		strscpy(dst, "unknown", HP_EXPORTER_LEN);
}
EXPORT_SYMBOL_NS_GPL(hp_exporter_name, HEAPPROFD_NS);

static struct hp_dmabuf_exp *hp_dmabuf_exp_get(const char *name)
{
	struct hp_dmabuf_exp *e, *other = NULL;

	lockdep_assert_held(&hp_dmabuf_lock);
	list_for_each_entry(e, &hp_dmabuf_exps, node) {
		if (!strcmp(e->name, name))
			return e;
		if (!strcmp(e->name, "other"))
			other = e;
	}
	if (hp_dmabuf_nr_exps >= HP_DMABUF_MAX_EXPORTERS && other)
		return other;
	e = kzalloc(sizeof(*e), GFP_ATOMIC | __GFP_NOWARN);
	if (!e)
		return other;
	strscpy(e->name, hp_dmabuf_nr_exps >= HP_DMABUF_MAX_EXPORTERS ?
		"other" : name, sizeof(e->name));
	list_add_tail(&e->node, &hp_dmabuf_exps);
	hp_dmabuf_nr_exps++;
	return e;
}

/* ------------------------------------------------------------------ */
/* Samples: the exporter's stack, in its own process context           */
/* ------------------------------------------------------------------ */

struct hp_dmabuf_tw {
	struct callback_head cb;
	const void *key;
	u64 ino;
	u64 size;
	char exporter[HP_EXPORTER_LEN];
};

/* Where the stack holding @sp ends (its highest address), or 0. */
static u64 hp_dmabuf_stack_top(u64 sp)
{
	struct mm_struct *mm = current->mm;
	struct vm_area_struct *vma;
	u64 top = 0;

	if (mmap_read_lock_killable(mm))
		return 0;
	vma = find_vma(mm, sp);
	if (vma && vma->vm_start <= sp)
		top = vma->vm_end;
	mmap_read_unlock(mm);
	return top;
}

/*
 * Decide whether this export is a sample (seed 000's rule for one
 * allocation, as a Bernoulli trial): a buffer of at least the interval is
 * always recorded, exactly; a smaller one with probability size/interval,
 * standing for interval bytes. Either way the estimate is unbiased.
 */
bool hp_dmabuf_sample(u64 size, u64 interval, u64 *est, bool *exact)
{
	*exact = size >= interval;
	if (*exact) {
		*est = size;
		return true;
	}
	*est = interval;
	return get_random_u64() % interval < size;
}
EXPORT_SYMBOL_NS_GPL(hp_dmabuf_sample, HEAPPROFD_NS);

/* A session's sampling settings, read once from the shared control page. */
struct hp_dmabuf_cfg {
	bool on;
	u64 interval;
	u32 stack_cap;
};

static void hp_dmabuf_read_cfg(struct hp_session *s, struct hp_dmabuf_cfg *c)
{
	struct heapprofd_config *cfg = hp_ring_part(&s->ring,
						    s->ring.geom.off_config);
	u64 off = READ_ONCE(cfg->heaps_off[HEAPPROFD_HEAP_DMABUF / 64]);

	c->on = READ_ONCE(cfg->enabled) &&
		!(off & BIT_ULL(HEAPPROFD_HEAP_DMABUF % 64));
	c->interval = clamp_t(u64, READ_ONCE(cfg->interval), 1, 1ULL << 40);
	c->stack_cap = min_t(u32, READ_ONCE(cfg->stack_cap),
			     HP_DMABUF_STACK_MAX) & ~7U;
}

/* Build DMABUF + ALLOC records with the current user stack. */
static struct hp_krec *hp_dmabuf_build(struct hp_dmabuf_tw *tw,
				       struct hp_kq *kq,
				       const struct hp_dmabuf_cfg *c,
				       u64 est, bool exact)
{
	struct heapprofd_rec_dmabuf *d;
	struct heapprofd_rec_alloc *a;
	struct pt_regs *regs = task_pt_regs(current);
	u64 uregs[HEAPPROFD_MAX_REGS] = { };
	u64 sp, top, len = 0;
	struct hp_krec *r;
	u32 nregs, arch = 0;
	size_t size;

	nregs = hp_arch_user_regs(regs, uregs, &arch);
	if (!nregs)
		return NULL;
	sp = uregs[HEAPPROFD_REG_SP];
	top = hp_dmabuf_stack_top(sp);
	if (top > sp)
		len = min_t(u64, top - sp, c->stack_cap) & ~7ULL;

	size = sizeof(*d) + sizeof(*a) + len;
	/* Up to 64 KiB of stack: an order-5 allocation that may fail. */
	r = hp_krec_alloc(size, GFP_KERNEL_ACCOUNT | __GFP_NOWARN);
	if (!r)
		return NULL;
	d = (void *)r->data;
	a = (void *)(r->data + sizeof(*d));

	/* A stack the copy cannot read whole is cut where it failed. */
	if (len) {
		u64 left = copy_from_user(a + 1, (const void __user *)sp, len);

		if (left) {
			len = (len - left) & ~7ULL;
			r->len = sizeof(*d) + sizeof(*a) + len;
		}
	}

	d->hdr.len = sizeof(*d);
	d->hdr.type = HEAPPROFD_REC_DMABUF;
	d->seq = hp_kq_next_seq(kq);
	d->inode = tw->ino;
	d->size = tw->size;
	d->exporter_pid = task_tgid_nr(current);
	memcpy(d->exporter, tw->exporter, sizeof(d->exporter));

	a->hdr.len = sizeof(*a) + len;
	a->hdr.type = HEAPPROFD_REC_ALLOC;
	if (exact)
		a->hdr.flags |= HEAPPROFD_ALLOC_EXACT;
	if (len && top - sp > len)
		a->hdr.flags |= HEAPPROFD_ALLOC_STACK_TRUNCATED;
	a->seq = d->seq;
	a->addr = tw->ino;
	a->req_size = tw->size;
	a->usable_size = tw->size;
	a->est_size = est;
	a->interval = c->interval;
	a->count = 1;
	a->heap_id = HEAPPROFD_HEAP_DMABUF;
	a->tid = task_pid_vnr(current);
	a->arch = arch;
	a->timestamp_ns = ktime_get_coarse_ns();
	a->stack_top = top;
	a->nregs = nregs;
	a->stack_len = len;
	memcpy(a->regs, uregs, sizeof(a->regs));
	return r;
}

/* The FREE record a sampled buffer's release will queue. */
static struct hp_krec *hp_dmabuf_build_free(u64 ino)
{
	struct heapprofd_rec_free *f;
	struct hp_krec *r;

	r = hp_krec_alloc(sizeof(*f), GFP_KERNEL_ACCOUNT);
	if (!r)
		return NULL;
	f = (void *)r->data;
	f->hdr.len = sizeof(*f);
	f->hdr.type = HEAPPROFD_REC_FREE;
	f->addr = ino;
	f->heap_id = HEAPPROFD_HEAP_DMABUF;
	return r;
}

/* Sample one export for the session of current, if it has one. */
static void hp_dmabuf_sample_export(struct hp_dmabuf_tw *tw)
{
	struct hp_krec *rec, *free_rec;
	struct hp_dmabuf_cfg cfg;
	struct hp_session *s;
	struct hp_dmabuf *b;
	unsigned long flags;
	struct hp_kq *kq;
	bool exact;
	u64 est;

	s = hp_session_get_by_pid(task_tgid(current));
	if (!s)
		return;
	/* Only the program that registered, and only while attached. */
	if (s->mm != current->mm ||
	    READ_ONCE(s->state) != HEAPPROFD_STATE_ATTACHED)
		goto out;
	hp_dmabuf_read_cfg(s, &cfg);
	if (!cfg.on || !hp_dmabuf_sample(tw->size, cfg.interval, &est, &exact))
		goto out;

	kq = s->kq;
	rec = hp_dmabuf_build(tw, kq, &cfg, est, exact);
	free_rec = hp_dmabuf_build_free(tw->ino);
	if (!rec || !free_rec) {
		/* Out of memory: the consumer hears of it as a lost sample. */
		kfree(rec);
		kfree(free_rec);
		hp_kq_lost(kq, est);
		goto out;
	}
	/*
	 * Queue the sample under the table lock, so that the release (which
	 * takes it too) can only queue the free after it.
	 */
	spin_lock_irqsave(&hp_dmabuf_lock, flags);
	b = hp_dmabuf_find_key(tw->key);
	if (b && b->ino == tw->ino && !b->kq) {
		hp_kq_get(kq);
		b->kq = kq;
		b->free_rec = free_rec;
		free_rec = NULL;
	}
	hp_kq_push(kq, rec, est);
	if (free_rec) {
		/* Released already (another thread closed it): free it now. */
		struct heapprofd_rec_free *f = (void *)free_rec->data;

		f->seq = hp_kq_next_seq(kq);
		hp_kq_push(kq, free_rec, 0);
	}
	spin_unlock_irqrestore(&hp_dmabuf_lock, flags);
out:
	hp_session_put(s);
}

static void hp_dmabuf_twork(struct callback_head *cb)
{
	struct hp_dmabuf_tw *tw = container_of(cb, struct hp_dmabuf_tw, cb);

	if (current->mm && !(current->flags & PF_EXITING))
		hp_dmabuf_sample_export(tw);
	kfree(tw);
	module_put(THIS_MODULE);
}

/* ------------------------------------------------------------------ */
/* Handlers (atomic context)                                           */
/* ------------------------------------------------------------------ */

/* The export event; built only when someone listens (get_task_comm costs). */
static void hp_dmabuf_export_event(const struct hp_dmabuf *b)
{
	struct hp_nl_res_ev ev = {
		.cmd = HEAPPROFD_CMD_DMABUF_EXPORT,
		.pid = b->exporter_pid,
		.inode = b->ino,
		.size = b->size,
	};

	if (!hp_nl_res_wanted())
		return;
	memcpy(ev.exporter, b->exporter, sizeof(ev.exporter));
	get_task_comm(ev.comm, current);
	hp_nl_res_event(&ev);
}

/* A table entry for @db, not in the table yet; NULL without memory. */
static struct hp_dmabuf *hp_dmabuf_new(struct dma_buf *db, gfp_t gfp)
{
	struct hp_dmabuf *b;

	b = kzalloc(sizeof(*b), gfp | __GFP_NOWARN);
	if (!b)
		return NULL;
	INIT_LIST_HEAD(&b->vnode);
	b->key = db;
	b->ino = file_inode(db->file)->i_ino;
	b->size = db->size;
	hp_exporter_name(b->exporter, db->exp_name);
	return b;
}

/*
 * Put @b in the table and count it, unless its buffer is there already
 * (the load-time scan meets a buffer in several file tables): false then.
 */
static bool hp_dmabuf_insert(struct hp_dmabuf *b)
{
	unsigned long flags;

	spin_lock_irqsave(&hp_dmabuf_lock, flags);
	if (hp_dmabuf_find_key(b->key)) {
		spin_unlock_irqrestore(&hp_dmabuf_lock, flags);
		return false;
	}
	b->exp = hp_dmabuf_exp_get(b->exporter);
	if (b->exp) {
		b->exp->count++;
		b->exp->bytes += b->size;
	}
	hash_add(hp_dmabuf_by_key, &b->hnode, (unsigned long)b->key);
	hash_add(hp_dmabuf_by_ino, &b->inode_node, b->ino);
	list_add_tail(&b->lnode, &hp_dmabuf_live);
	if (hp_dmabuf_views_on)
		list_add_tail(&b->vnode, &hp_dmabuf_unviewed);
	hp_dmabuf_total_bytes += b->size;
	hp_dmabuf_count++;
	spin_unlock_irqrestore(&hp_dmabuf_lock, flags);
	return true;
}

static void hp_dmabuf_exported(struct dma_buf *db)
{
	struct hp_dmabuf_tw *tw = NULL;
	struct hp_dmabuf *b;
	bool user;

	if (!db || !db->file)
		return;
	b = hp_dmabuf_new(db, GFP_ATOMIC);
	if (!b)
		return;
	user = current->mm && !(current->flags & (PF_KTHREAD | PF_EXITING));
	if (user)
		b->exporter_pid = task_tgid_nr(current);

	/* The sample is taken on the way back to user space. */
	if (user && hp_tgid_has_session(b->exporter_pid) &&
	    try_module_get(THIS_MODULE)) {
		tw = kzalloc(sizeof(*tw), GFP_ATOMIC | __GFP_NOWARN);
		if (tw) {
			init_task_work(&tw->cb, hp_dmabuf_twork);
			tw->key = db;
			tw->ino = b->ino;
			tw->size = b->size;
			memcpy(tw->exporter, b->exporter, sizeof(tw->exporter));
			if (task_work_add(current, &tw->cb, TWA_RESUME)) {
				kfree(tw);
				tw = NULL;
			}
		}
		if (!tw)
			module_put(THIS_MODULE);
	}

	if (!hp_dmabuf_insert(b)) {
		kfree(b);
		return;
	}
	hp_dmabuf_export_event(b);
	hp_dmabuf_sysfs_changed();
}

/**
 * hp_dmabuf_adopt() - add a buffer that was alive before the probes were
 * (dmabuf_scan.c); its exporter is unknown and it has no sample
 * @db: the buffer, kept alive by the caller
 * @gfp: how the caller may allocate
 *
 * Return: true if it was added, false if known already or out of memory.
 */
bool hp_dmabuf_adopt(struct dma_buf *db, gfp_t gfp)
{
	struct hp_dmabuf *b;

	if (!db || !db->file)
		return false;
	b = hp_dmabuf_new(db, gfp);
	if (!b)
		return false;
	if (!hp_dmabuf_insert(b)) {
		kfree(b);
		return false;
	}
	hp_dmabuf_sysfs_changed();
	return true;
}

static void hp_dmabuf_released(const void *key)
{
	struct hp_nl_res_ev ev = { .cmd = HEAPPROFD_CMD_DMABUF_RELEASE };
	struct hp_dmabuf *b;
	unsigned long flags;
	bool view;

	spin_lock_irqsave(&hp_dmabuf_lock, flags);
	b = hp_dmabuf_find_key(key);
	if (!b) {
		spin_unlock_irqrestore(&hp_dmabuf_lock, flags);
		return;
	}
	hash_del(&b->hnode);
	hash_del(&b->inode_node);
	list_del_init(&b->vnode);
	hp_dmabuf_total_bytes -= b->size;
	hp_dmabuf_count--;
	if (b->exp) {
		b->exp->count--;
		b->exp->bytes -= b->size;
	}
	if (b->kq) {
		struct heapprofd_rec_free *f = (void *)b->free_rec->data;

		f->seq = hp_kq_next_seq(b->kq);
		hp_kq_push(b->kq, b->free_rec, 0);
		b->free_rec = NULL;
		hp_kq_put(b->kq);
		b->kq = NULL;
	}
	ev.pid = b->exporter_pid;
	ev.inode = b->ino;
	ev.size = b->size;
	memcpy(ev.exporter, b->exporter, sizeof(ev.exporter));
	/* A buffer with a sysfs view is freed by the view worker. */
	view = b->kobj;
	if (view)
		list_move_tail(&b->lnode, &hp_dmabuf_dead);
	else
		list_del(&b->lnode);
	spin_unlock_irqrestore(&hp_dmabuf_lock, flags);

	if (!view)
		kfree(b);
	hp_nl_res_event(&ev);
	hp_dmabuf_sysfs_changed();
}

/* ------------------------------------------------------------------ */
/* Attaching the sources                                               */
/* ------------------------------------------------------------------ */

static int hp_dmabuf_export_ret(struct kretprobe_instance *ri,
				struct pt_regs *regs)
{
	void *ret = (void *)regs_return_value(regs);

	if (!IS_ERR_OR_NULL(ret))
		hp_dmabuf_exported(ret);
	return 0;
}

static struct kretprobe hp_export_krp = {
	.kp.symbol_name	= "dma_buf_export",
	.handler	= hp_dmabuf_export_ret,
	.maxactive	= 64,
};

static int hp_dmabuf_release_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct dentry *dentry;

	dentry = (struct dentry *)regs_get_kernel_argument(regs, 0);
	if (dentry)
		hp_dmabuf_released(READ_ONCE(dentry->d_fsdata));
	return 0;
}

static struct kprobe hp_release_kp = {
	.symbol_name	= "dma_buf_release",
	.pre_handler	= hp_dmabuf_release_pre,
};

#ifdef HEAPPROFD_HAVE_DMA_BUF_TRACE
static struct tracepoint *hp_export_tp;

static void hp_dmabuf_export_tp(void *data, struct dma_buf *db)
{
	hp_dmabuf_exported(db);
}

static void hp_dmabuf_find_tp(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "dma_buf_export"))
		hp_export_tp = tp;
}

static bool hp_dmabuf_attach_tp(void)
{
	for_each_kernel_tracepoint(hp_dmabuf_find_tp, NULL);
	return hp_export_tp &&
	       !tracepoint_probe_register(hp_export_tp,
					  (void *)hp_dmabuf_export_tp, NULL);
}

static void hp_dmabuf_detach_tp(void)
{
	tracepoint_probe_unregister(hp_export_tp, (void *)hp_dmabuf_export_tp,
				    NULL);
	tracepoint_synchronize_unregister();
}
#else
static bool hp_dmabuf_attach_tp(void)
{
	return false;
}

static void hp_dmabuf_detach_tp(void)
{
}
#endif

static bool hp_export_by_tp, hp_export_by_krp, hp_release_by_kp;

/*
 * How exports are followed, chosen at load: "auto" (the kernel's
 * tracepoint where it has one, else the probes), "kprobe" (the probes
 * even where the tracepoint exists: for comparing the two, or to step
 * around a broken tracepoint), "off" (no DMA-BUF accounting at all:
 * nothing is hooked, so exports cost nothing extra).
 */
static char *hp_dmabuf_source_param = "auto";
module_param_named(dmabuf_source, hp_dmabuf_source_param, charp, 0444);
MODULE_PARM_DESC(dmabuf_source,
		 "how to follow DMA-BUF exports: auto, kprobe or off (default auto)");

/** hp_dmabuf_missed() - exports the return probe could not follow */
unsigned long hp_dmabuf_missed(void)
{
	return hp_export_by_krp ? READ_ONCE(hp_export_krp.nmissed) : 0;
}

int hp_dmabuf_init(void)
{
	const char *want = hp_dmabuf_source_param;
	int ret;

	if (strcmp(want, "auto") && strcmp(want, "kprobe") &&
	    strcmp(want, "off")) {
		pr_err("heapprofd: dmabuf_source=%s: not auto, kprobe or off\n",
		       want);
		return -EINVAL;
	}
	if (!strcmp(want, "off")) {
		pr_info("heapprofd: DMA-BUF accounting off (dmabuf_source=off)\n");
		return 0;
	}
	/* Without the release side the totals would only grow: both or none. */
	ret = register_kprobe(&hp_release_kp);
	if (ret) {
		pr_info("heapprofd: no DMA-BUF accounting: cannot probe dma_buf_release (%d)\n",
			ret);
		return 0;
	}
	hp_release_by_kp = true;
	if (strcmp(want, "kprobe") && hp_dmabuf_attach_tp()) {
		hp_export_by_tp = true;
		hp_dmabuf_source = "tracepoint";
		hp_dmabuf_scan();
		return 0;
	}
	ret = register_kretprobe(&hp_export_krp);
	if (ret) {
		pr_info("heapprofd: no DMA-BUF accounting: cannot probe dma_buf_export (%d)\n",
			ret);
		unregister_kprobe(&hp_release_kp);
		hp_release_by_kp = false;
		return 0;
	}
	hp_export_by_krp = true;
	hp_dmabuf_source = "kprobe";
	hp_dmabuf_scan();
	return 0;
}

/*
 * After this no handler runs. The table is emptied by
 * hp_dmabuf_forget_all() once the sysfs views are gone.
 */
void hp_dmabuf_exit(void)
{
	if (hp_export_by_tp)
		hp_dmabuf_detach_tp();
	if (hp_export_by_krp)
		unregister_kretprobe(&hp_export_krp);
	if (hp_release_by_kp)
		unregister_kprobe(&hp_release_kp);
	hp_export_by_tp = false;
	hp_export_by_krp = false;
	hp_release_by_kp = false;
}

/**
 * hp_dmabuf_forget_all() - free the table (module exit, probes and views
 * gone)
 *
 * Buffers alive now stay alive; their release is simply not seen.
 */
void hp_dmabuf_forget_all(void)
{
	struct hp_dmabuf_exp *e, *etmp;
	struct hp_dmabuf *b, *tmp;
	unsigned long flags;
	LIST_HEAD(bufs);
	LIST_HEAD(exps);

	spin_lock_irqsave(&hp_dmabuf_lock, flags);
	list_for_each_entry(b, &hp_dmabuf_live, lnode) {
		hash_del(&b->hnode);
		hash_del(&b->inode_node);
		list_del_init(&b->vnode);
	}
	list_splice_init(&hp_dmabuf_live, &bufs);
	list_splice_init(&hp_dmabuf_dead, &bufs);
	list_splice_init(&hp_dmabuf_exps, &exps);
	hp_dmabuf_total_bytes = 0;
	hp_dmabuf_count = 0;
	hp_dmabuf_nr_exps = 0;
	spin_unlock_irqrestore(&hp_dmabuf_lock, flags);

	list_for_each_entry_safe(b, tmp, &bufs, lnode) {
		hp_kq_put(b->kq);
		kfree(b->free_rec);
		kfree(b);
	}
	list_for_each_entry_safe(e, etmp, &exps, node)
		kfree(e);
}
