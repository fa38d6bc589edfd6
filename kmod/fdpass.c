// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofd fd slots: the profiled process deposits files (its
 * /proc/self/maps, /proc/self/mem, ...) on its session fd; the attached
 * consumer receives them on its consumer fd.
 *
 * The producer opened those files itself, so the kernel's own checks ran
 * at open time. Receiving goes through receive_fd(), the SCM_RIGHTS path,
 * so security_file_receive() (LSM) runs for the consumer as well.
 *
 * Only regular files that are not heapprofd files may be deposited: a slot
 * holding a session file, or a socket or io_uring that holds one in flight,
 * would keep the session alive forever (nothing collects such cycles here).
 * The slots are emptied when the session closes.
 */
#include <linux/bitops.h>
#include <linux/fcntl.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/spinlock.h>
#include <linux/stddef.h>
#include <linux/uaccess.h>

#include "compat.h"
#include "heapprofd_kmod.h"

/**
 * hp_fd_deposit() - HEAPPROFD_IOC_DEPOSIT_FD on a session fd
 * @s: the session
 * @uarg: struct heapprofd_fd_arg
 *
 * Return: 0; -EBADF (fd not open), -EINVAL (bad argument or a file that
 * may not be deposited), -ESRCH (session closed), -EFAULT.
 */
long hp_fd_deposit(struct hp_session *s, void __user *uarg)
{
	struct heapprofd_fd_arg a;
	struct file *file, *old;
	u32 usize;
	int ret;

	ret = hp_copy_arg(&a, sizeof(a), uarg, &usize);
	if (ret)
		return ret;
	ret = hp_check_fd_arg(&a);
	if (ret)
		return ret;

	file = fget(a.fd);
	if (!file)
		return -EBADF;
	if (!S_ISREG(file_inode(file)->i_mode) || hp_is_heapprofd_file(file)) {
		fput(file);
		return -EINVAL;
	}

	spin_lock(&s->slot_lock);
	if (READ_ONCE(s->state) == HEAPPROFD_STATE_CLOSED) {
		spin_unlock(&s->slot_lock);
		fput(file);
		return -ESRCH;
	}
	old = s->slots[a.slot];
	s->slots[a.slot] = file;
	spin_unlock(&s->slot_lock);

	if (old)
		fput(old);
	return 0;
}

/**
 * hp_fd_receive() - HEAPPROFD_IOC_RECEIVE_FD on a consumer fd
 * @s: the session
 * @uarg: struct heapprofd_fd_arg; fd is written back
 *
 * The new fd is O_CLOEXEC. The result is written back before the fd
 * exists (everything but fd, with fd = -1), and fd itself is stored as the
 * fd is installed: when the result cannot be written the caller gets
 * -EFAULT and no fd (see hp_receive_fd()).
 *
 * Return: the new fd; -ENOENT (slot empty), -EINVAL, -EFAULT, or what
 * receive_fd() returned (-EMFILE, an LSM's refusal).
 */
long hp_fd_receive(struct hp_session *s, void __user *uarg)
{
	struct heapprofd_fd_arg a;
	struct file *file;
	int __user *ufd;
	u32 usize;
	int ret, fd;

	ret = hp_copy_arg(&a, sizeof(a), uarg, &usize);
	if (ret)
		return ret;
	ret = hp_check_fd_arg(&a);
	if (ret)
		return ret;

	spin_lock(&s->slot_lock);
	file = s->slots[a.slot];
	if (file)
		get_file(file);
	spin_unlock(&s->slot_lock);
	if (!file)
		return -ENOENT;

	a.fd = -1;
	if (hp_copy_arg_out(uarg, &a, sizeof(a), usize)) {
		fput(file);
		return -EFAULT;
	}
	ufd = NULL;
	if (usize >= offsetofend(struct heapprofd_fd_arg, fd))
		ufd = (int __user *)(uarg + offsetof(struct heapprofd_fd_arg,
						     fd));
	fd = hp_receive_fd(file, ufd, O_CLOEXEC);
	fput(file);
	if (fd < 0)
		return fd;
	atomic64_inc(&hp_stats.fds_passed_total);
	return fd;
}

/**
 * hp_fd_slot_mask() - which slots hold a file
 * @s: the session
 *
 * Return: bit n set when slot n holds a file.
 */
u32 hp_fd_slot_mask(struct hp_session *s)
{
	u32 mask = 0;
	int i;

	spin_lock(&s->slot_lock);
	for (i = 0; i < HEAPPROFD_FD_SLOTS; i++)
		if (s->slots[i])
			mask |= BIT(i);
	spin_unlock(&s->slot_lock);
	return mask;
}

/**
 * hp_fd_slots_release() - empty every slot (the session closed)
 * @s: the session, already marked closed so no deposit can follow
 */
void hp_fd_slots_release(struct hp_session *s)
{
	struct file *files[HEAPPROFD_FD_SLOTS];
	int i;

	spin_lock(&s->slot_lock);
	for (i = 0; i < HEAPPROFD_FD_SLOTS; i++) {
		files[i] = s->slots[i];
		s->slots[i] = NULL;
	}
	spin_unlock(&s->slot_lock);

	for (i = 0; i < HEAPPROFD_FD_SLOTS; i++)
		if (files[i])
			fput(files[i]);
}
