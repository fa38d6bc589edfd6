// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofd ioctl arguments: copying them in and out, and checking them.
 *
 * Every argument structure begins with a __u32 holding its size as the
 * caller knows it. It is copied as copy_struct_from_user() does: a shorter
 * structure is zero-extended, a longer one is accepted only if the bytes we
 * do not know are zero (E2BIG otherwise). A size too small to hold the size
 * field itself is EINVAL. Output goes back up to the caller's size.
 */
#include <linux/errno.h>
#include <linux/minmax.h>
#include <linux/module.h>
#include <linux/uaccess.h>

#include "compat.h"
#include "heapprofd_kmod.h"

/**
 * hp_copy_arg() - copy an extensible argument structure from user space
 * @karg: kernel copy, @ksize bytes
 * @ksize: the size this module knows
 * @uarg: user pointer
 * @usize: set to the caller's size
 *
 * Return: 0, -EFAULT, -EINVAL (size below 4 bytes), -E2BIG (non-zero bytes
 * beyond what we know, or a size above HP_ARG_MAX).
 */
int hp_copy_arg(void *karg, size_t ksize, const void __user *uarg, u32 *usize)
{
	u32 size;
	int ret;

	if (get_user(size, (const u32 __user *)uarg))
		return -EFAULT;
	if (size < sizeof(u32))
		return -EINVAL;
	if (size > HP_ARG_MAX)
		return -E2BIG;
	ret = copy_struct_from_user(karg, ksize, uarg, size);
	if (ret)
		return ret;
	/* The first word was read twice; use the copy we checked. */
	*(u32 *)karg = size;
	*usize = size;
	return 0;
}

/**
 * hp_copy_arg_out() - copy an argument structure back to user space
 * @uarg: user pointer
 * @karg: kernel copy, @ksize bytes
 * @ksize: the size this module knows
 * @usize: the caller's size; the caller's size field is left alone
 *
 * Return: 0 or -EFAULT.
 */
int hp_copy_arg_out(void __user *uarg, const void *karg, size_t ksize,
		    u32 usize)
{
	size_t n = min_t(size_t, ksize, usize);

	if (n <= sizeof(u32))
		return 0;
	if (copy_to_user(uarg + sizeof(u32), karg + sizeof(u32),
			 n - sizeof(u32)))
		return -EFAULT;
	return 0;
}

static bool hp_all_zero(const u64 *v, size_t n)
{
	while (n--)
		if (v[n])
			return false;
	return true;
}

/**
 * hp_check_register() - check a HEAPPROFD_IOC_REGISTER argument
 * @a: the kernel copy
 *
 * data_size is checked by hp_geom_compute(); output fields are ignored.
 *
 * Return: 0 or -EINVAL.
 */
int hp_check_register(const struct heapprofd_register *a)
{
	if (a->flags & ~HEAPPROFD_REGISTER_ALL)
		return -EINVAL;
	if (!hp_all_zero(a->resv, ARRAY_SIZE(a->resv)))
		return -EINVAL;
	return 0;
}
EXPORT_SYMBOL_NS_GPL(hp_check_register, HEAPPROFD_NS);

/**
 * hp_check_attach() - check a HEAPPROFD_IOC_ATTACH argument
 * @a: the kernel copy
 *
 * Return: 0 or -EINVAL (not exactly one BY_* flag, unknown flags, reserved
 * fields set, or a pid that is not positive).
 */
int hp_check_attach(const struct heapprofd_attach *a)
{
	if (a->flags != HEAPPROFD_ATTACH_BY_PID &&
	    a->flags != HEAPPROFD_ATTACH_BY_ID)
		return -EINVAL;
	if (!hp_all_zero(a->resv, ARRAY_SIZE(a->resv)))
		return -EINVAL;
	if (a->flags == HEAPPROFD_ATTACH_BY_PID && a->pid <= 0)
		return -EINVAL;
	return 0;
}
EXPORT_SYMBOL_NS_GPL(hp_check_attach, HEAPPROFD_NS);

/**
 * hp_check_fd_arg() - check a DEPOSIT_FD or RECEIVE_FD argument
 * @a: the kernel copy
 *
 * Return: 0 or -EINVAL (slot out of range, flags or reserved fields set).
 */
int hp_check_fd_arg(const struct heapprofd_fd_arg *a)
{
	if (a->slot >= HEAPPROFD_FD_SLOTS)
		return -EINVAL;
	if (a->flags || !hp_all_zero(a->resv, ARRAY_SIZE(a->resv)))
		return -EINVAL;
	return 0;
}
EXPORT_SYMBOL_NS_GPL(hp_check_fd_arg, HEAPPROFD_NS);

/**
 * hp_check_info() - check a HEAPPROFD_IOC_INFO argument
 * @a: the kernel copy
 *
 * Return: 0 or -EINVAL (flags or reserved fields set).
 */
int hp_check_info(const struct heapprofd_session_info *a)
{
	if (a->flags || !hp_all_zero(a->resv, ARRAY_SIZE(a->resv)))
		return -EINVAL;
	return 0;
}
EXPORT_SYMBOL_NS_GPL(hp_check_info, HEAPPROFD_NS);
