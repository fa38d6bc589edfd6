// SPDX-License-Identifier: GPL-2.0
/*
 * DMA-BUFs exported before the module loaded.
 *
 * The probes see exports from the moment they are registered, yet the
 * module is often loaded long after a compositor, a camera service or a
 * GPU driver made the buffers that matter: without this, totals and
 * buffers/ would leave all of those out until they are freed. So once
 * both probes are in place (nothing the scan adds can then be released
 * unseen), every task's file table and every process's mappings are
 * walked once for files of the dma-buf filesystem, and each buffer not
 * yet in the table is added with its exporter's name and its size.
 * Who exported it is not known (exporter_pid 0) and it has no stack: it
 * is never a sample of any session.
 *
 * Not found: a buffer that only the kernel holds (imported by a driver,
 * its last fd closed, not mapped), and one exported while the probes were
 * being registered that reaches a file table only after the walk passed.
 * dmabuf/found_at_load counts what the walk added.
 */
#include <linux/dma-buf.h>
#include <linux/fdtable.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/mm.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>

#include "heapprofd_kmod.h"

unsigned long hp_dmabuf_found_at_load;

/* The buffer behind a dma-buf file, or NULL for any other file. */
static struct dma_buf *hp_file_dmabuf(struct file *file)
{
	struct dentry *dentry = file->f_path.dentry;

	if (!dentry || dentry->d_sb->s_magic != DMA_BUF_MAGIC)
		return NULL;
	/* Set by dma_buf_export() before the file can be installed. */
	return file->private_data;
}

/*
 * iterate_fd() callback, under the file table's lock: the table holds a
 * reference to @file, so its buffer is alive throughout.
 */
static int hp_scan_fd(const void *unused, struct file *file, unsigned int fd)
{
	struct dma_buf *db = hp_file_dmabuf(file);

	if (db && hp_dmabuf_adopt(db, GFP_ATOMIC))
		hp_dmabuf_found_at_load++;
	return 0;
}

/* Mapped buffers, whose fds may be closed; the mapping holds the file. */
static void hp_scan_mm(struct task_struct *task)
{
	struct vm_area_struct *vma;
	struct mm_struct *mm;
	struct dma_buf *db;

	mm = get_task_mm(task);
	if (!mm)
		return;
	if (!mmap_read_lock_killable(mm)) {
		VMA_ITERATOR(vmi, mm, 0);

		for_each_vma(vmi, vma) {
			if (!vma->vm_file)
				continue;
			db = hp_file_dmabuf(vma->vm_file);
			if (db && hp_dmabuf_adopt(db, GFP_KERNEL))
				hp_dmabuf_found_at_load++;
		}
		mmap_read_unlock(mm);
	}
	mmput(mm);
}

static void hp_scan_task(struct task_struct *task)
{
	/* Each thread: one may have left the process's file table. */
	task_lock(task);
	if (task->files)
		iterate_fd(task->files, 0, hp_scan_fd, NULL);
	task_unlock(task);
	if (thread_group_leader(task))
		hp_scan_mm(task);
}

/**
 * hp_dmabuf_scan() - add the live buffers found in file tables and
 * mappings (module load, process context, probes registered)
 */
void hp_dmabuf_scan(void)
{
	struct task_struct *task;
	struct pid *pid;
	int nr = 1;

	hp_dmabuf_found_at_load = 0;
	/* By pid number rather than under one long RCU read section. */
	for (;;) {
		rcu_read_lock();
		pid = find_ge_pid(nr, &init_pid_ns);
		task = NULL;
		if (pid) {
			nr = pid_nr(pid) + 1;
			task = pid_task(pid, PIDTYPE_PID);
			if (task)
				get_task_struct(task);
		}
		rcu_read_unlock();
		if (!pid)
			break;
		if (task) {
			hp_scan_task(task);
			put_task_struct(task);
		}
		if (fatal_signal_pending(current))
			break;
		cond_resched();
	}
	if (hp_dmabuf_found_at_load)
		pr_info("heapprofd: %lu DMA-BUFs alive at load found in file tables and mappings\n",
			hp_dmabuf_found_at_load);
}
