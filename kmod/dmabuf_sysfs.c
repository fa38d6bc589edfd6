// SPDX-License-Identifier: GPL-2.0
/*
 * /sys/kernel/heapprofd/dmabuf: totals, one directory per exporter and one
 * per live buffer (buffers/<inode>/), the same view as the kernel's own
 * /sys/kernel/dmabuf/buffers on kernels that lack it.
 *
 * The kernel dropped its per-buffer sysfs objects because creating them
 * made every export much slower. Here an export costs no sysfs work at
 * all: the per-buffer and per-exporter directories are built by a work
 * item, in batches, and only once someone has read dmabuf/ (until then
 * no view exists and nothing is queued for one). Reading
 * total_exported_bytes or buffer_count brings the directories up to date
 * before it answers, so a reader who looks at the count first and lists
 * buffers/ next sees what the count says (as of that read).
 *
 * Every file finds its object by its directory's name under
 * hp_dmabuf_lock, so a view never keeps a buffer alive and a buffer
 * released while its view exists reads as gone (ENODEV). Removing a view
 * waits for reads in progress; the work item never waits for anything a
 * per-buffer or per-exporter read holds, and only the top-level files
 * (which no work item removes) wait for the work item.
 *
 * exporter_pid names a process, which hidepid may hide in /proc: it is
 * 0400 like the session files. Everything else is world-readable.
 */
#include <linux/kobject.h>
#include <linux/kstrtox.h>
#include <linux/slab.h>
#include <linux/sysfs.h>
#include <linux/workqueue.h>

#include "heapprofd_kmod.h"

static struct kobject *hp_dmabuf_kobj;
static struct kobject *hp_buffers_kobj;
static struct kobject *hp_exporters_kobj;
static bool hp_views_stopping;

static void hp_views_work_fn(struct work_struct *work);
static DECLARE_WORK(hp_views_work, hp_views_work_fn);

/* ------------------------------------------------------------------ */
/* Per-buffer and per-exporter files                                   */
/* ------------------------------------------------------------------ */

enum hp_buf_field { HP_BF_EXPORTER, HP_BF_SIZE, HP_BF_PID };

static ssize_t hp_buf_show(struct kobject *kobj, char *buf,
			   enum hp_buf_field field)
{
	char exporter[HP_EXPORTER_LEN];
	struct hp_dmabuf *b;
	unsigned long flags;
	u64 ino, size = 0;
	pid_t pid = 0;

	if (kstrtou64(kobject_name(kobj), 10, &ino))
		return -ENODEV;
	spin_lock_irqsave(&hp_dmabuf_lock, flags);
	b = hp_dmabuf_find_ino(ino);
	if (b) {
		memcpy(exporter, b->exporter, sizeof(exporter));
		size = b->size;
		pid = b->exporter_pid;
	}
	spin_unlock_irqrestore(&hp_dmabuf_lock, flags);
	if (!b)
		return -ENODEV;
	switch (field) {
	case HP_BF_EXPORTER:
		return sysfs_emit(buf, "%s\n", exporter);
	case HP_BF_SIZE:
		return sysfs_emit(buf, "%llu\n", size);
	default:
		return sysfs_emit(buf, "%d\n", pid);
	}
}

#define HP_BUF_ATTR(name, mode, field)					\
static ssize_t hp_buf_##name##_show(struct kobject *kobj,		\
				    struct kobj_attribute *attr,	\
				    char *buf)				\
{									\
	return hp_buf_show(kobj, buf, field);				\
}									\
static struct kobj_attribute hp_buf_attr_##name =			\
	__ATTR(name, mode, hp_buf_##name##_show, NULL)

HP_BUF_ATTR(exporter_name, 0444, HP_BF_EXPORTER);
HP_BUF_ATTR(size, 0444, HP_BF_SIZE);
HP_BUF_ATTR(exporter_pid, 0400, HP_BF_PID);

static struct attribute *hp_buf_attrs[] = {
	&hp_buf_attr_exporter_name.attr,
	&hp_buf_attr_size.attr,
	&hp_buf_attr_exporter_pid.attr,
	NULL,
};

static const struct attribute_group hp_buf_group = {
	.attrs = hp_buf_attrs,
};

static ssize_t hp_exp_show(struct kobject *kobj, char *buf, bool bytes)
{
	struct hp_dmabuf_exp *e;
	unsigned long flags;
	bool found = false;
	u64 v = 0;

	spin_lock_irqsave(&hp_dmabuf_lock, flags);
	list_for_each_entry(e, &hp_dmabuf_exps, node) {
		if (!strcmp(e->name, kobject_name(kobj))) {
			v = bytes ? e->bytes : e->count;
			found = true;
			break;
		}
	}
	spin_unlock_irqrestore(&hp_dmabuf_lock, flags);
	if (!found)
		return -ENODEV;
	return sysfs_emit(buf, "%llu\n", v);
}

static ssize_t hp_exp_count_show(struct kobject *kobj,
				 struct kobj_attribute *attr, char *buf)
{
	return hp_exp_show(kobj, buf, false);
}

static ssize_t hp_exp_bytes_show(struct kobject *kobj,
				 struct kobj_attribute *attr, char *buf)
{
	return hp_exp_show(kobj, buf, true);
}

static struct kobj_attribute hp_exp_attr_count =
	__ATTR(count, 0444, hp_exp_count_show, NULL);
static struct kobj_attribute hp_exp_attr_bytes =
	__ATTR(bytes, 0444, hp_exp_bytes_show, NULL);

static struct attribute *hp_exp_attrs[] = {
	&hp_exp_attr_count.attr,
	&hp_exp_attr_bytes.attr,
	NULL,
};

static const struct attribute_group hp_exp_group = {
	.attrs = hp_exp_attrs,
};

/* ------------------------------------------------------------------ */
/* The work item that builds and removes views                         */
/* ------------------------------------------------------------------ */

static struct kobject *hp_view_create(const char *name, struct kobject *dir,
				      const struct attribute_group *grp)
{
	struct kobject *kobj;

	kobj = kobject_create_and_add(name, dir);
	if (!kobj)
		return NULL;
	if (sysfs_create_group(kobj, grp)) {
		kobject_put(kobj);
		return NULL;
	}
	return kobj;
}

static void hp_view_destroy(struct kobject *kobj,
			    const struct attribute_group *grp)
{
	sysfs_remove_group(kobj, grp);
	kobject_put(kobj);
}

/* Views of released buffers go first, so an inode name is free again. */
static bool hp_views_reap_one(void)
{
	struct hp_dmabuf *b;
	unsigned long flags;

	spin_lock_irqsave(&hp_dmabuf_lock, flags);
	b = list_first_entry_or_null(&hp_dmabuf_dead, struct hp_dmabuf,
				     lnode);
	if (b)
		list_del(&b->lnode);
	spin_unlock_irqrestore(&hp_dmabuf_lock, flags);
	if (!b)
		return false;
	hp_view_destroy(b->kobj, &hp_buf_group);
	kfree(b);
	return true;
}

static bool hp_views_build_one(void)
{
	struct kobject *kobj;
	struct hp_dmabuf *b;
	unsigned long flags;
	const void *key;
	char name[24];
	u64 ino;

	spin_lock_irqsave(&hp_dmabuf_lock, flags);
	b = list_first_entry_or_null(&hp_dmabuf_unviewed, struct hp_dmabuf,
				     vnode);
	if (b) {
		list_del_init(&b->vnode);
		ino = b->ino;
		key = b->key;
	}
	spin_unlock_irqrestore(&hp_dmabuf_lock, flags);
	if (!b)
		return false;

	/* b may be released meanwhile: find it again before linking. */
	snprintf(name, sizeof(name), "%llu", ino);
	kobj = hp_view_create(name, hp_buffers_kobj, &hp_buf_group);
	if (!kobj)
		return true;
	spin_lock_irqsave(&hp_dmabuf_lock, flags);
	b = hp_dmabuf_find_ino(ino);
	if (b && b->key == key && !b->kobj) {
		b->kobj = kobj;
		kobj = NULL;
	}
	spin_unlock_irqrestore(&hp_dmabuf_lock, flags);
	if (kobj)
		hp_view_destroy(kobj, &hp_buf_group);
	return true;
}

/* The first exporter without a view yet, or NULL. */
static struct hp_dmabuf_exp *hp_views_next_exporter(void)
{
	struct hp_dmabuf_exp *e, *found = NULL;
	unsigned long flags;

	spin_lock_irqsave(&hp_dmabuf_lock, flags);
	list_for_each_entry(e, &hp_dmabuf_exps, node) {
		if (!e->kobj && !e->view_failed) {
			found = e;
			break;
		}
	}
	spin_unlock_irqrestore(&hp_dmabuf_lock, flags);
	return found;
}

/* Exporters are never freed before exit: their kobj may be set unlocked. */
static void hp_views_exporters(void)
{
	struct hp_dmabuf_exp *e;

	while ((e = hp_views_next_exporter())) {
		e->kobj = hp_view_create(e->name, hp_exporters_kobj,
					 &hp_exp_group);
		e->view_failed = !e->kobj;
	}
}

static void hp_views_work_fn(struct work_struct *work)
{
	while (!READ_ONCE(hp_views_stopping) && hp_views_reap_one())
		cond_resched();
	hp_views_exporters();
	while (!READ_ONCE(hp_views_stopping) && hp_views_build_one())
		cond_resched();
}

/**
 * hp_dmabuf_sysfs_changed() - a buffer came or went (any context)
 */
void hp_dmabuf_sysfs_changed(void)
{
	if (READ_ONCE(hp_dmabuf_views_on) && !READ_ONCE(hp_views_stopping))
		schedule_work(&hp_views_work);
}

/* First read: from now on every buffer gets a view. */
static void hp_views_want(void)
{
	struct hp_dmabuf *b;
	unsigned long flags;

	if (READ_ONCE(hp_dmabuf_views_on))
		return;
	spin_lock_irqsave(&hp_dmabuf_lock, flags);
	if (!hp_dmabuf_views_on) {
		hp_dmabuf_views_on = true;
		list_for_each_entry(b, &hp_dmabuf_live, lnode)
			list_add_tail(&b->vnode, &hp_dmabuf_unviewed);
	}
	spin_unlock_irqrestore(&hp_dmabuf_lock, flags);
}

/* Top-level files: bring the views up to date, then answer. */
static void hp_views_sync(void)
{
	hp_views_want();
	schedule_work(&hp_views_work);
	flush_work(&hp_views_work);
}

/* ------------------------------------------------------------------ */
/* dmabuf/ itself                                                      */
/* ------------------------------------------------------------------ */

static ssize_t source_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	hp_views_want();
	return sysfs_emit(buf, "%s\n", hp_dmabuf_source);
}

/* Bring the views up to date, then read one total. */
static ssize_t hp_dmabuf_total_show(char *buf, const u64 *total)
{
	unsigned long flags;
	u64 v;

	hp_views_sync();
	spin_lock_irqsave(&hp_dmabuf_lock, flags);
	v = *total;
	spin_unlock_irqrestore(&hp_dmabuf_lock, flags);
	return sysfs_emit(buf, "%llu\n", v);
}

static ssize_t total_exported_bytes_show(struct kobject *kobj,
					 struct kobj_attribute *attr,
					 char *buf)
{
	return hp_dmabuf_total_show(buf, &hp_dmabuf_total_bytes);
}

static ssize_t buffer_count_show(struct kobject *kobj,
				 struct kobj_attribute *attr, char *buf)
{
	return hp_dmabuf_total_show(buf, &hp_dmabuf_count);
}

static ssize_t missed_exports_show(struct kobject *kobj,
				   struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%lu\n", hp_dmabuf_missed());
}

static ssize_t found_at_load_show(struct kobject *kobj,
				  struct kobj_attribute *attr, char *buf)
{
	hp_views_want();
	return sysfs_emit(buf, "%lu\n", READ_ONCE(hp_dmabuf_found_at_load));
}

static struct kobj_attribute hp_attr_source = __ATTR_RO(source);
static struct kobj_attribute hp_attr_total = __ATTR_RO(total_exported_bytes);
static struct kobj_attribute hp_attr_count = __ATTR_RO(buffer_count);
static struct kobj_attribute hp_attr_missed = __ATTR_RO(missed_exports);
static struct kobj_attribute hp_attr_found = __ATTR_RO(found_at_load);

static struct attribute *hp_dmabuf_attrs[] = {
	&hp_attr_source.attr,
	&hp_attr_total.attr,
	&hp_attr_count.attr,
	&hp_attr_missed.attr,
	&hp_attr_found.attr,
	NULL,
};

static const struct attribute_group hp_dmabuf_group = {
	.attrs = hp_dmabuf_attrs,
};

int hp_dmabuf_sysfs_init(struct kobject *parent)
{
	int ret = -ENOMEM;

	hp_dmabuf_kobj = kobject_create_and_add("dmabuf", parent);
	if (!hp_dmabuf_kobj)
		return -ENOMEM;
	hp_buffers_kobj = kobject_create_and_add("buffers", hp_dmabuf_kobj);
	if (!hp_buffers_kobj)
		goto err;
	hp_exporters_kobj = kobject_create_and_add("exporters",
						   hp_dmabuf_kobj);
	if (!hp_exporters_kobj)
		goto err_buffers;
	ret = sysfs_create_group(hp_dmabuf_kobj, &hp_dmabuf_group);
	if (ret)
		goto err_exporters;
	return 0;

err_exporters:
	kobject_put(hp_exporters_kobj);
err_buffers:
	kobject_put(hp_buffers_kobj);
err:
	kobject_put(hp_dmabuf_kobj);
	return ret;
}

/* After hp_dmabuf_exit(): no handler changes the table any more. */
void hp_dmabuf_sysfs_exit(void)
{
	struct hp_dmabuf_exp *e;
	struct hp_dmabuf *b;

	sysfs_remove_group(hp_dmabuf_kobj, &hp_dmabuf_group);
	WRITE_ONCE(hp_views_stopping, true);
	cancel_work_sync(&hp_views_work);
	/* Nothing else touches the lists now; dead ones keep their memory. */
	list_for_each_entry(b, &hp_dmabuf_live, lnode) {
		if (b->kobj)
			hp_view_destroy(b->kobj, &hp_buf_group);
		b->kobj = NULL;
	}
	list_for_each_entry(b, &hp_dmabuf_dead, lnode) {
		if (b->kobj)
			hp_view_destroy(b->kobj, &hp_buf_group);
		b->kobj = NULL;
	}
	list_for_each_entry(e, &hp_dmabuf_exps, node) {
		if (e->kobj)
			hp_view_destroy(e->kobj, &hp_exp_group);
		e->kobj = NULL;
	}
	kobject_put(hp_exporters_kobj);
	kobject_put(hp_buffers_kobj);
	kobject_put(hp_dmabuf_kobj);
}
