// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofd attach policy: who may become the consumer of a session.
 *
 * A consumer reads everything the profiled process writes into its ring and
 * receives the fds it deposited (its /proc/self/mem among them): as much as
 * a debugger gets. So attaching follows the kernel's own rule for that,
 * ptrace_may_access(owner, PTRACE_MODE_ATTACH_REALCREDS). That function is
 * not exported to modules (nor is security_ptrace_access_check() or
 * mm_access(); Module.symvers of Debian's 6.1 has none of them), so the
 * decision is made in two steps, both of which must allow it:
 *
 *  1. hp_access_decide(), the credential part of __ptrace_may_access() with
 *     the caller's real ids: the caller's uid must equal the owner's uid,
 *     euid and suid and the caller's gid the owner's gid, egid and sgid,
 *     unless the caller has CAP_SYS_PTRACE in the owner's user namespace;
 *     and the owner must be dumpable, unless the caller has CAP_SYS_PTRACE
 *     in the user namespace of the owner's mm. The owner's own thread group
 *     is always allowed.
 *
 *  2. hp_access_lsm(): the kernel itself runs the whole of
 *     ptrace_may_access() - commoncap, Yama's ptrace_scope, SELinux,
 *     AppArmor and any other LSM's ptrace_access_check hook - when the
 *     caller opens /proc/<owner>/mem (PTRACE_MODE_ATTACH_FSCREDS). We open
 *     it with the caller's credentials and then make sure the file we got
 *     is a procfs "mem" file bound to the very mm the session was
 *     registered from (procfs keeps that mm in file->private_data), so a
 *     reused pid number, a different procfs or a file bind-mounted over the
 *     path is refused rather than trusted. The file is closed at once.
 *
 * A caller that cannot see the owner in its /proc (another pid namespace,
 * no procfs in its root) is refused: the check fails closed.
 *
 * Resolving ptrace_may_access() through kallsyms or a kprobe was rejected:
 * an indirect call to a function the kernel never takes the address of
 * faults under IBT (CONFIG_X86_KERNEL_IBT seals such functions) and is not
 * an interface.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/dcache.h>
#include <linux/err.h>
#include <linux/errno.h>
#include <linux/fcntl.h>
#include <linux/file.h>
#include <linux/fs.h>
#include <linux/magic.h>
#include <linux/module.h>
#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/sched/coredump.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/string.h>
#include <linux/user_namespace.h>

#include "compat.h"
#include "heapprofd_kmod.h"

/**
 * hp_access_decide() - the credential part of the attach decision
 * @r: the caller's and the owner's credentials and state, gathered before
 *
 * Return: 0 if allowed, -ESRCH if the owner is gone or is no longer the
 * process that registered (it exec'ed), -EPERM otherwise.
 */
int hp_access_decide(const struct hp_access_req *r)
{
	if (!r->owner_alive || !r->owner_same_mm)
		return -ESRCH;
	if (r->same_thread_group)
		return 0;
	if (!r->caller_ptrace_cap &&
	    (!uid_eq(r->caller_uid, r->owner_uid) ||
	     !uid_eq(r->caller_uid, r->owner_euid) ||
	     !uid_eq(r->caller_uid, r->owner_suid) ||
	     !gid_eq(r->caller_gid, r->owner_gid) ||
	     !gid_eq(r->caller_gid, r->owner_egid) ||
	     !gid_eq(r->caller_gid, r->owner_sgid)))
		return -EPERM;
	if (r->owner_dumpable != SUID_DUMP_USER && !r->caller_ptrace_cap_mm)
		return -EPERM;
	return 0;
}
EXPORT_SYMBOL_NS_GPL(hp_access_decide, HEAPPROFD_NS);

/**
 * hp_proc_mem_matches() - is @file a procfs mem file of @mm?
 * @file: what opening /proc/<pid>/mem gave
 * @mm: the session's mm
 *
 * Return: true only for a file named "mem" on procfs whose open bound it
 * to @mm (the mm pointer is compared, never dereferenced).
 */
static bool hp_proc_mem_matches(struct file *file, struct mm_struct *mm)
{
	const struct dentry *d = file->f_path.dentry;

	if (file_inode(file)->i_sb->s_magic != PROC_SUPER_MAGIC)
		return false;
	if (strcmp(d->d_name.name, "mem"))
		return false;
	return file->private_data == mm;
}

/*
 * Step 2 above: let the kernel run ptrace_may_access() with every LSM hook
 * for the caller against the task whose mm is @s->mm.
 */
static int hp_access_lsm(struct hp_session *s)
{
	char path[32];
	struct file *file;
	pid_t nr;
	int ret;

	nr = pid_vnr(s->owner);
	if (!nr)
		return -EPERM;
	snprintf(path, sizeof(path), "/proc/%d/mem", nr);
	file = filp_open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0);
	if (IS_ERR(file))
		return PTR_ERR(file) == -ENOENT ? -ESRCH : -EPERM;
	ret = hp_proc_mem_matches(file, s->mm) ? 0 : -EPERM;
	fput(file);
	return ret;
}

/**
 * hp_access_check() - may the current task attach to @s?
 * @s: the session
 *
 * Return: 0, -ESRCH (owner gone or exec'ed), -EPERM.
 */
int hp_access_check(struct hp_session *s)
{
	const struct cred *me = current_cred();
	struct hp_access_req r = {
		.caller_uid = me->uid,
		.caller_gid = me->gid,
		.owner_dumpable = SUID_DUMP_DISABLE,
	};
	struct user_namespace *mm_ns = NULL;
	const struct cred *tcred;
	struct task_struct *task;
	int ret;

	task = get_pid_task(s->owner, PIDTYPE_TGID);
	if (!task)
		return -ESRCH;

	/* task_lock keeps task->mm from changing or going away under us. */
	task_lock(task);
	if (task->mm) {
		r.owner_alive = true;
		r.owner_same_mm = task->mm == s->mm;
		r.owner_dumpable = get_dumpable(task->mm);
		mm_ns = get_user_ns(task->mm->user_ns);
	}
	task_unlock(task);

	tcred = get_task_cred(task);
	r.owner_uid = tcred->uid;
	r.owner_euid = tcred->euid;
	r.owner_suid = tcred->suid;
	r.owner_gid = tcred->gid;
	r.owner_egid = tcred->egid;
	r.owner_sgid = tcred->sgid;
	r.same_thread_group = same_thread_group(task, current);
	r.caller_ptrace_cap = ns_capable(tcred->user_ns, CAP_SYS_PTRACE);
	put_cred(tcred);
	if (mm_ns) {
		r.caller_ptrace_cap_mm = ns_capable(mm_ns, CAP_SYS_PTRACE);
		put_user_ns(mm_ns);
	}
	put_task_struct(task);

	ret = hp_access_decide(&r);
	if (ret || r.same_thread_group)
		return ret;
	return hp_access_lsm(s);
}
