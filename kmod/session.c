// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofd sessions: the object, its lifetime and the two files that
 * reach it.
 *
 * A session is created by HEAPPROFD_IOC_REGISTER and reached through
 *
 *   the session fd   held by the profiled process (the producer);
 *   a consumer fd    held by the daemon after HEAPPROFD_IOC_ATTACH.
 *
 * Each file holds a reference (kref) to the session; a mapping holds its
 * file, so the ring memory lives until the last fd is closed and the last
 * mapping is gone. When the session file is released (the process closed
 * it and unmapped the ring, or exited) the session is CLOSED: it leaves the
 * list of live sessions and sysfs, drops its fd slots and wakes the
 * consumer, which may still read what the ring holds.
 *
 * hp_lock (a mutex) guards the list, the state, the consumer and the ids:
 * a session gets its id in the same critical section that adds it to the
 * list, so the list is always in id order and a netlink dump that resumes
 * after the last id it sent misses no session registered meanwhile. Every
 * path that takes it runs in process context.
 *
 * A session is bound to the mm its owner had when it registered. An owner
 * that exec'ed (keeping its session fd across the exec, perhaps into a
 * setuid program) has another mm: its session then counts as closed for
 * attach and INFO, so nobody attaches to the new program through the old
 * program's session, its ring or its deposited files.
 *
 * Sessions count against max_sessions_per_user for the real uid that
 * registered them until their memory is freed (a session lives on while
 * any fd or mapping of it exists, in whatever process).
 */
#include <linux/anon_inodes.h>
#include <linux/cred.h>
#include <linux/err.h>
#include <linux/fcntl.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/pid.h>
#include <linux/pid_namespace.h>
#include <linux/poll.h>
#include <linux/capability.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/uaccess.h>
#include <linux/user_namespace.h>
#include <linux/xarray.h>

#include "compat.h"
#include "heapprofd_kmod.h"

/*
 * Guards hp_sessions, hp_last_id and each session's state, consumer and
 * attach_count.
 */
DEFINE_MUTEX(hp_lock);
LIST_HEAD(hp_sessions);
static u64 hp_last_id;

/*
 * Sessions whose memory exists, per real uid (init_user_ns numbers), under
 * hp_users_lock (not hp_lock: the last put of a session, which uncounts
 * it, must not depend on who holds hp_lock).
 */
static DEFINE_MUTEX(hp_users_lock);
static DEFINE_XARRAY(hp_user_sessions);

static const struct file_operations hp_session_fops;
static const struct file_operations hp_consumer_fops;

/*
 * Live sessions per owner tgid (initial namespace), under hp_lock for
 * writers. Probe handlers in atomic context read it (xa_load is RCU-safe)
 * to skip processes without a session cheaply.
 */
static DEFINE_XARRAY(hp_owner_tgids);

static void hp_owner_count(struct hp_session *s, bool add)
{
	unsigned long key = pid_nr(s->owner);
	unsigned long n;
	void *old;

	lockdep_assert_held(&hp_lock);
	old = xa_load(&hp_owner_tgids, key);
	n = old ? xa_to_value(old) : 0;
	if (add)
		n++;
	else if (n)
		n--;
	if (n)	/* a failure only costs the session its DMA-BUF samples */
		xa_store(&hp_owner_tgids, key, xa_mk_value(n), GFP_KERNEL);
	else
		xa_erase(&hp_owner_tgids, key);
}

/**
 * hp_tgid_has_session() - might this process own a live session?
 * @tgid: thread-group id in the initial pid namespace
 *
 * Any context. A hint: the caller looks the session up properly later.
 *
 * Return: true if it registered one that is not closed.
 */
bool hp_tgid_has_session(pid_t tgid)
{
	return !!xa_load(&hp_owner_tgids, tgid);
}

/**
 * hp_user_sessions_decide() - may a user with @count sessions add one?
 * @count: sessions of the user whose memory exists
 * @max: max_sessions_per_user (0: no limit)
 *
 * Return: 0 or -EDQUOT.
 */
int hp_user_sessions_decide(unsigned long count, unsigned int max)
{
	if (max && count >= max)
		return -EDQUOT;
	return 0;
}
EXPORT_SYMBOL_NS_GPL(hp_user_sessions_decide, HEAPPROFD_NS);

/* Count a new session for @uid; -EDQUOT over the limit. */
static int hp_user_sessions_add(kuid_t uid)
{
	unsigned long key = from_kuid(&init_user_ns, uid);
	unsigned long n;
	void *old;
	int ret;

	mutex_lock(&hp_users_lock);
	old = xa_load(&hp_user_sessions, key);
	n = old ? xa_to_value(old) : 0;
	ret = hp_user_sessions_decide(n, READ_ONCE(hp_max_sessions_per_user));
	if (!ret)
		ret = xa_err(xa_store(&hp_user_sessions, key,
				      xa_mk_value(n + 1), GFP_KERNEL));
	mutex_unlock(&hp_users_lock);
	return ret;
}

static void hp_user_sessions_sub(kuid_t uid)
{
	unsigned long key = from_kuid(&init_user_ns, uid);
	unsigned long n;
	void *old;

	mutex_lock(&hp_users_lock);
	old = xa_load(&hp_user_sessions, key);
	n = old ? xa_to_value(old) : 0;
	if (n > 1)	/* replaces an existing entry: cannot fail */
		xa_store(&hp_user_sessions, key, xa_mk_value(n - 1),
			 GFP_KERNEL);
	else
		xa_erase(&hp_user_sessions, key);
	mutex_unlock(&hp_users_lock);
}

static void hp_session_free(struct kref *ref)
{
	struct hp_session *s = container_of(ref, struct hp_session, ref);

	hp_ring_free(&s->ring);
	if (s->kq)
		hp_kq_close(s->kq);
	if (s->counted)
		hp_user_sessions_sub(s->owner_uid);
	if (s->mm)
		mmdrop(s->mm);
	put_pid(s->owner);
	kfree(s);
}

/**
 * hp_session_owner_current() - is the owner still the registering program?
 * @s: the session
 *
 * Return: true while the owner process exists and has the mm it registered
 * from; false once it exited or exec'ed.
 */
bool hp_session_owner_current(struct hp_session *s)
{
	struct task_struct *task;
	bool same;

	task = get_pid_task(s->owner, PIDTYPE_TGID);
	if (!task)
		return false;
	task_lock(task);
	same = task->mm && task->mm == s->mm;
	task_unlock(task);
	put_task_struct(task);
	return same;
}

/**
 * hp_session_put() - drop a reference; the last one frees the ring
 * @s: the session
 *
 * Process context only (freeing the ring may take an mmap lock).
 */
void hp_session_put(struct hp_session *s)
{
	might_sleep();
	kref_put(&s->ref, hp_session_free);
}

/**
 * hp_session_get_by_id() - find a live session by id
 * @id: session id
 *
 * Return: the session with a reference held, or NULL.
 */
struct hp_session *hp_session_get_by_id(u64 id)
{
	struct hp_session *s, *found = NULL;

	mutex_lock(&hp_lock);
	list_for_each_entry(s, &hp_sessions, node) {
		if (s->id == id) {
			kref_get(&s->ref);
			found = s;
			break;
		}
	}
	mutex_unlock(&hp_lock);
	return found;
}

/**
 * hp_session_get_by_pid() - find the newest live session of a process
 * @tgid: the process's thread-group pid
 *
 * Return: the session with a reference held, or NULL.
 */
struct hp_session *hp_session_get_by_pid(struct pid *tgid)
{
	struct hp_session *s, *found = NULL;

	mutex_lock(&hp_lock);
	list_for_each_entry(s, &hp_sessions, node) {
		if (s->owner == tgid && (!found || s->id > found->id))
			found = s;
	}
	if (found)
		kref_get(&found->ref);
	mutex_unlock(&hp_lock);
	return found;
}

/**
 * hp_session_snap() - read a session's counters from its control page
 * @s: the session
 * @snap: filled, see hp_snap_read()
 */
void hp_session_snap(struct hp_session *s, struct hp_snap *snap)
{
	hp_snap_read(s->ring.vaddr, &s->ring.geom, snap);
}

/*
 * Publish the kernel's view of the session to the producer. Called with
 * hp_lock held after every change; the state word goes last.
 */
static void hp_kstate_publish(struct hp_session *s)
{
	struct heapprofd_kstate *ks = hp_ring_part(&s->ring,
						   s->ring.geom.off_kstate);
	u32 cpid = 0;

	lockdep_assert_held(&hp_lock);
	if (s->consumer)
		cpid = pid_nr_ns(s->consumer, ns_of_pid(s->owner));
	WRITE_ONCE(ks->consumer_pid, cpid);
	WRITE_ONCE(ks->attach_count, s->attach_count);
	/* Pairs with the producer's load-acquire of state. */
	smp_store_release(&ks->state, s->state);
}

static void hp_wake(struct hp_session *s, __poll_t events)
{
	wake_up_interruptible_poll(&s->wq, events);
}

/* ------------------------------------------------------------------ */
/* Registration and attach                                             */
/* ------------------------------------------------------------------ */

/**
 * hp_register() - HEAPPROFD_IOC_REGISTER: create a session for current
 * @uarg: struct heapprofd_register
 *
 * Return: the new session fd, or a negative errno: -EDQUOT (the user has
 * max_sessions_per_user sessions), -ENOMEM (also over RLIMIT_MEMLOCK), ...
 * Nothing is left allocated or charged on failure.
 */
long hp_register(void __user *uarg)
{
	struct heapprofd_register a;
	struct hp_session *s;
	struct hp_geom g;
	struct file *file;
	u32 usize;
	int fd, ret;

	ret = hp_copy_arg(&a, sizeof(a), uarg, &usize);
	if (ret)
		return ret;
	ret = hp_check_register(&a);
	if (ret)
		return ret;
	ret = hp_geom_compute(a.data_size, READ_ONCE(hp_max_data_size), &g);
	if (ret)
		return ret;
	if (!current->mm)
		return -EINVAL;

	s = kzalloc(sizeof(*s), GFP_KERNEL_ACCOUNT);
	if (!s)
		return -ENOMEM;
	kref_init(&s->ref);
	INIT_LIST_HEAD(&s->node);
	init_waitqueue_head(&s->wq);
	spin_lock_init(&s->slot_lock);
	s->reg_flags = a.flags;
	s->owner = get_pid(task_tgid(current));
	mmgrab(current->mm);
	s->mm = current->mm;
	s->owner_euid = current_euid();
	s->owner_uid = current_uid();
	get_task_comm(s->comm, current);
	s->state = HEAPPROFD_STATE_OPEN;

	if (!capable(CAP_SYS_RESOURCE)) {
		ret = hp_user_sessions_add(s->owner_uid);
		if (ret)
			goto err_free;
		s->counted = true;
	}
	ret = hp_ring_alloc(&s->ring, &g, READ_ONCE(hp_charge_memlock));
	if (ret)
		goto err_free;
	ret = -ENOMEM;
	s->kq = hp_kq_create(&s->wq);
	if (!s->kq)
		goto err_free;

	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		ret = fd;
		goto err_free;
	}
	/* From here on the file owns the initial reference. */
	file = anon_inode_getfile("[heapprofd]", &hp_session_fops, s,
				  O_RDWR | O_CLOEXEC);
	if (IS_ERR(file)) {
		put_unused_fd(fd);
		ret = PTR_ERR(file);
		goto err_free;
	}

	/* The id and the list position under one lock: see above. */
	mutex_lock(&hp_lock);
	s->id = ++hp_last_id;
	hp_ctl_init(s->ring.vaddr, &g, s->id, a.flags);
	list_add_tail(&s->node, &hp_sessions);
	hp_owner_count(s, true);
	hp_stats.sessions_active++;
	mutex_unlock(&hp_lock);

	a.session_id = s->id;
	a.ctl_size = g.ctl_size;
	a.version = HEAPPROFD_ABI_VERSION;
	ret = hp_copy_arg_out(uarg, &a, sizeof(a), usize);
	if (ret) {
		/* Releasing the file closes the session. */
		put_unused_fd(fd);
		fput(file);
		return ret;
	}

	atomic64_inc(&hp_stats.sessions_total);
	hp_sysfs_session_add(s);
	hp_nl_event(HEAPPROFD_CMD_SESSION_NEW, s);
	fd_install(fd, file);
	return fd;

err_free:
	hp_session_free(&s->ref);
	return ret;
}

/* Give up the consumer role; hp_lock held. */
static void hp_detach_locked(struct hp_session *s)
{
	put_pid(s->consumer);
	WRITE_ONCE(s->consumer, NULL);
	if (s->state != HEAPPROFD_STATE_CLOSED)
		WRITE_ONCE(s->state, HEAPPROFD_STATE_OPEN);
	hp_kstate_publish(s);
}

static struct hp_session *hp_attach_lookup(const struct heapprofd_attach *a)
{
	struct hp_session *s;
	struct pid *pid;

	if (a->flags == HEAPPROFD_ATTACH_BY_ID)
		return hp_session_get_by_id(a->session_id);

	/* The pid is a number in the caller's pid namespace. */
	rcu_read_lock();
	pid = get_pid(find_vpid(a->pid));
	rcu_read_unlock();
	if (!pid)
		return NULL;
	s = hp_session_get_by_pid(pid);
	put_pid(pid);
	return s;
}

/**
 * hp_attach() - HEAPPROFD_IOC_ATTACH: become the consumer of a session
 * @uarg: struct heapprofd_attach
 *
 * Return: the consumer fd; -ESRCH (no such live session), -EPERM (see
 * access.c), -EBUSY (a consumer is attached), or another negative errno.
 */
long hp_attach(void __user *uarg)
{
	struct heapprofd_attach a;
	struct hp_session *s;
	struct file *file;
	u32 usize;
	int fd, ret;

	ret = hp_copy_arg(&a, sizeof(a), uarg, &usize);
	if (ret)
		return ret;
	ret = hp_check_attach(&a);
	if (ret)
		return ret;

	s = hp_attach_lookup(&a);
	if (!s)
		return -ESRCH;
	ret = hp_access_check(s);
	if (ret)
		goto err_put;

	/* Claim the consumer role first: one consumer at a time. */
	mutex_lock(&hp_lock);
	if (s->state == HEAPPROFD_STATE_CLOSED)
		ret = -ESRCH;
	else if (s->consumer)
		ret = -EBUSY;
	if (ret) {
		mutex_unlock(&hp_lock);
		goto err_put;
	}
	WRITE_ONCE(s->consumer, get_pid(task_tgid(current)));
	WRITE_ONCE(s->state, HEAPPROFD_STATE_ATTACHED);
	WRITE_ONCE(s->attach_count, s->attach_count + 1);
	hp_kstate_publish(s);
	mutex_unlock(&hp_lock);

	a.session_id = s->id;
	a.pid = pid_vnr(s->owner);
	a.ctl_size = s->ring.geom.ctl_size;
	a.data_size = s->ring.geom.data_size;
	ret = hp_copy_arg_out(uarg, &a, sizeof(a), usize);
	if (ret)
		goto err_detach;

	fd = get_unused_fd_flags(O_CLOEXEC);
	if (fd < 0) {
		ret = fd;
		goto err_detach;
	}
	file = anon_inode_getfile("[heapprofd-consumer]", &hp_consumer_fops,
				  s, O_RDWR | O_CLOEXEC);
	if (IS_ERR(file)) {
		put_unused_fd(fd);
		ret = PTR_ERR(file);
		goto err_detach;
	}
	atomic64_inc(&hp_stats.attaches_total);
	hp_nl_event(HEAPPROFD_CMD_SESSION_ATTACHED, s);
	fd_install(fd, file);
	return fd;

err_detach:
	mutex_lock(&hp_lock);
	WRITE_ONCE(s->attach_count, s->attach_count - 1);
	hp_detach_locked(s);
	mutex_unlock(&hp_lock);
err_put:
	hp_session_put(s);
	return ret;
}

/* ------------------------------------------------------------------ */
/* File operations shared by both files                                */
/* ------------------------------------------------------------------ */

static int hp_file_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct hp_session *s = file->private_data;

	return hp_ring_mmap(&s->ring, vma);
}

static long hp_info(struct hp_session *s, void __user *uarg)
{
	struct heapprofd_session_info a;
	bool current_ok;
	u32 usize;
	int ret;

	ret = hp_copy_arg(&a, sizeof(a), uarg, &usize);
	if (ret)
		return ret;
	ret = hp_check_info(&a);
	if (ret)
		return ret;

	a.session_id = s->id;
	a.uid = from_kuid_munged(current_user_ns(), s->owner_euid);
	a.data_size = s->ring.geom.data_size;
	a.ctl_size = s->ring.geom.ctl_size;
	a.reg_flags = s->reg_flags;
	memcpy(a.comm, s->comm, sizeof(a.comm));
	a.fd_slots = hp_fd_slot_mask(s);
	current_ok = hp_session_owner_current(s);
	mutex_lock(&hp_lock);
	a.state = current_ok ? s->state : HEAPPROFD_STATE_CLOSED;
	a.pid = a.state == HEAPPROFD_STATE_CLOSED ? 0 : pid_vnr(s->owner);
	mutex_unlock(&hp_lock);

	return hp_copy_arg_out(uarg, &a, sizeof(a), usize);
}

/* ------------------------------------------------------------------ */
/* The session fd (producer)                                           */
/* ------------------------------------------------------------------ */

static long hp_session_ioctl(struct file *file, unsigned int cmd,
			     unsigned long arg)
{
	struct hp_session *s = file->private_data;
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case HEAPPROFD_IOC_WAKE:
		atomic64_inc(&hp_stats.wakeups_total);
		hp_wake(s, EPOLLIN | EPOLLRDNORM);
		return 0;
	case HEAPPROFD_IOC_DEPOSIT_FD:
		return hp_fd_deposit(s, uarg);
	case HEAPPROFD_IOC_INFO:
		return hp_info(s, uarg);
	default:
		return -ENOTTY;
	}
}

/* EPOLLHUP once a consumer has come and gone (until the next attaches). */
static __poll_t hp_session_poll(struct file *file, poll_table *pt)
{
	struct hp_session *s = file->private_data;

	poll_wait(file, &s->wq, pt);
	if (READ_ONCE(s->attach_count) && !READ_ONCE(s->consumer))
		return EPOLLHUP;
	return 0;
}

static int hp_session_release(struct inode *inode, struct file *file)
{
	struct hp_session *s = file->private_data;
	struct hp_snap snap;

	mutex_lock(&hp_lock);
	list_del_init(&s->node);
	WRITE_ONCE(s->state, HEAPPROFD_STATE_CLOSED);
	hp_kstate_publish(s);
	hp_owner_count(s, false);
	hp_stats.sessions_active--;
	/* The producer is gone: its counters are final. */
	hp_session_snap(s, &snap);
	hp_snap_add(&hp_stats.retired, &snap);
	mutex_unlock(&hp_lock);

	hp_sysfs_session_del(s);
	hp_nl_event(HEAPPROFD_CMD_SESSION_CLOSED, s);
	hp_fd_slots_release(s);
	hp_wake(s, EPOLLHUP | EPOLLIN | EPOLLRDNORM);
	hp_session_put(s);
	return 0;
}

static const struct file_operations hp_session_fops = {
	.owner		= THIS_MODULE,
	.release	= hp_session_release,
	.unlocked_ioctl	= hp_session_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.mmap		= hp_file_mmap,
	.poll		= hp_session_poll,
	.llseek		= noop_llseek,
};

/* ------------------------------------------------------------------ */
/* The consumer fd (daemon)                                            */
/* ------------------------------------------------------------------ */

static long hp_consumer_ioctl(struct file *file, unsigned int cmd,
			      unsigned long arg)
{
	struct hp_session *s = file->private_data;
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case HEAPPROFD_IOC_RECEIVE_FD:
		return hp_fd_receive(s, uarg);
	case HEAPPROFD_IOC_INFO:
		return hp_info(s, uarg);
	default:
		return -ENOTTY;
	}
}

/*
 * EPOLLIN while the ring is not empty as far as the control page says (a
 * hint: the consumer checks the records itself), EPOLLHUP once closed.
 */
static __poll_t hp_consumer_poll(struct file *file, poll_table *pt)
{
	struct hp_session *s = file->private_data;
	struct hp_snap snap;
	__poll_t mask = 0;

	poll_wait(file, &s->wq, pt);
	hp_session_snap(s, &snap);
	if (snap.produced != snap.consumed || hp_kq_pending(s->kq))
		mask |= EPOLLIN | EPOLLRDNORM;
	if (READ_ONCE(s->state) == HEAPPROFD_STATE_CLOSED)
		mask |= EPOLLHUP;
	return mask;
}

/* Kernel records (uapi "Kernel records"); never blocks. */
static ssize_t hp_consumer_read(struct file *file, char __user *buf,
				size_t count, loff_t *ppos)
{
	struct hp_session *s = file->private_data;

	return hp_kq_read(s->kq, buf, count);
}

static int hp_consumer_release(struct inode *inode, struct file *file)
{
	struct hp_session *s = file->private_data;

	mutex_lock(&hp_lock);
	hp_detach_locked(s);
	mutex_unlock(&hp_lock);
	hp_wake(s, EPOLLHUP);
	hp_session_put(s);
	return 0;
}

static const struct file_operations hp_consumer_fops = {
	.owner		= THIS_MODULE,
	.release	= hp_consumer_release,
	.read		= hp_consumer_read,
	.unlocked_ioctl	= hp_consumer_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.mmap		= hp_file_mmap,
	.poll		= hp_consumer_poll,
	.llseek		= noop_llseek,
};

/**
 * hp_is_heapprofd_file() - is @file a session or consumer file?
 * @file: any file
 *
 * Such files may not be deposited into a slot: a session holding a
 * reference to its own file would never be released.
 *
 * Return: true for our files.
 */
bool hp_is_heapprofd_file(const struct file *file)
{
	return file->f_op == &hp_session_fops ||
	       file->f_op == &hp_consumer_fops;
}
