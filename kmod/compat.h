/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernels heapprofd builds for. Every switch here
 * is set by a feature probe in kmod/Kbuild (a grep of the target kernel's
 * headers), never by a version number: distribution kernels backport.
 */
#ifndef _HEAPPROFD_COMPAT_H
#define _HEAPPROFD_COMPAT_H

#include <linux/fdtable.h>
#include <linux/file.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/uaccess.h>

/* vm_flags became read-only behind vm_flags_set()/vm_flags_clear() in 6.3. */
static inline void hp_vm_flags_set(struct vm_area_struct *vma,
				   unsigned long flags)
{
#ifdef HEAPPROFD_HAVE_VM_FLAGS_SET
	vm_flags_set(vma, flags);
#else
	vma->vm_flags |= flags;
#endif
}

static inline void hp_vm_flags_clear(struct vm_area_struct *vma,
				     unsigned long flags)
{
#ifdef HEAPPROFD_HAVE_VM_FLAGS_SET
	vm_flags_clear(vma, flags);
#else
	vma->vm_flags &= ~flags;
#endif
}

/*
 * receive_fd() installs a file as a new fd through the same path as
 * SCM_RIGHTS, so security_file_receive() runs. Since 6.8 it takes a user
 * pointer and stores the fd there before installing it, giving the fd back
 * if that store faults. Before, it installs at once and neither
 * __receive_fd() nor security_file_receive() is exported: we store the fd
 * after installing it and, if that faults, close the fd again, which gives
 * the same result unless another thread of the caller itself plays with
 * that fd in between. @ufd may be NULL.
 */
static inline int hp_receive_fd(struct file *file, int __user *ufd,
				unsigned int o_flags)
{
#ifdef HEAPPROFD_RECEIVE_FD_UFD
	return receive_fd(file, ufd, o_flags);
#else
	int fd = receive_fd(file, o_flags);

	if (fd >= 0 && ufd && put_user(fd, ufd)) {
		close_fd(fd);
		return -EFAULT;
	}
	return fd;
#endif
}

/*
 * Multicast groups that only CAP_SYS_ADMIN may join: the flag came with
 * 6.7 and was backported to some 6.1 kernels (Debian's has it). Without it
 * netlink.c leaves the identifying attributes out of event messages.
 */
#ifdef HEAPPROFD_HAVE_MCAST_CAP_SYS_ADMIN
#define HP_MCGRP_FLAGS	GENL_MCAST_CAP_SYS_ADMIN
#else
#define HP_MCGRP_FLAGS	0
#endif

/*
 * The symbol namespace the core module exports its pure helpers in, for
 * heapprofd_kunit.ko only. 6.13 turned the namespace argument into a string.
 */
#ifdef HEAPPROFD_NS_IS_STRING
#define HEAPPROFD_NS "HEAPPROFD_INTERNAL"
#else
#define HEAPPROFD_NS HEAPPROFD_INTERNAL
#endif

#endif /* _HEAPPROFD_COMPAT_H */
