/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Differences between the kernels heapprofd builds for. Every switch here
 * is set by a feature probe in kmod/Kbuild (a grep of the target kernel's
 * headers), never by a version number: distribution kernels backport.
 */
#ifndef _HEAPPROFD_COMPAT_H
#define _HEAPPROFD_COMPAT_H

#include <linux/file.h>
#include <linux/mm.h>
#include <linux/module.h>

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
 * SCM_RIGHTS, so security_file_receive() runs. 6.8 added a user pointer
 * argument that we do not need.
 */
static inline int hp_receive_fd(struct file *file, unsigned int o_flags)
{
#ifdef HEAPPROFD_RECEIVE_FD_UFD
	return receive_fd(file, NULL, o_flags);
#else
	return receive_fd(file, o_flags);
#endif
}

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
