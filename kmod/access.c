// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofd attach policy: who may become the consumer of a session.
 *
 * A consumer can read everything the profiled process writes into its ring
 * and receives the fds it deposited (its /proc/self/mem among them), which
 * is as much as a debugger gets. So the rule follows ptrace's spirit:
 *
 *   - CAP_SYS_ADMIN in the initial user namespace may attach to any session;
 *   - otherwise the caller's effective uid must equal the owner's real,
 *     effective and saved uid, and the owner's mm must be dumpable
 *     (SUID_DUMP_USER): a process that changed credentials or declared
 *     itself undumpable (prctl(PR_SET_DUMPABLE, 0)) is off limits;
 *   - everyone else gets EPERM; a session whose owner is gone gets ESRCH.
 *
 * ptrace_may_access() is not exported to modules, so LSM ptrace hooks and
 * Yama do not take part in this decision. The profiled process consents by
 * registering; /proc/<pid>/mem it deposits was opened by itself.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/errno.h>
#include <linux/module.h>
#include <linux/pid.h>
#include <linux/rcupdate.h>
#include <linux/sched/coredump.h>
#include <linux/sched/mm.h>
#include <linux/sched/task.h>
#include <linux/user_namespace.h>

#include "compat.h"
#include "internal.h"

/**
 * hp_access_decide() - the attach decision, from gathered facts only
 * @r: the caller's and the owner's credentials and state
 *
 * Return: 0 if allowed, -ESRCH if the owner is gone, -EPERM otherwise.
 */
int hp_access_decide(const struct hp_access_req *r)
{
	if (!r->owner_alive)
		return -ESRCH;
	if (r->caller_admin)
		return 0;
	if (r->owner_dumpable != SUID_DUMP_USER)
		return -EPERM;
	if (!uid_eq(r->caller_euid, r->owner_uid) ||
	    !uid_eq(r->caller_euid, r->owner_euid) ||
	    !uid_eq(r->caller_euid, r->owner_suid))
		return -EPERM;
	return 0;
}
EXPORT_SYMBOL_NS_GPL(hp_access_decide, HEAPPROFD_NS);

/**
 * hp_access_check() - may the current task attach to @s?
 * @s: the session
 *
 * Return: as hp_access_decide().
 */
int hp_access_check(struct hp_session *s)
{
	struct hp_access_req r = {
		.caller_admin = capable(CAP_SYS_ADMIN),
		.caller_euid = current_euid(),
		.owner_dumpable = SUID_DUMP_DISABLE,
	};
	struct task_struct *task;
	const struct cred *cred;

	task = get_pid_task(s->owner, PIDTYPE_TGID);
	if (task) {
		rcu_read_lock();
		cred = __task_cred(task);
		r.owner_uid = cred->uid;
		r.owner_euid = cred->euid;
		r.owner_suid = cred->suid;
		rcu_read_unlock();

		/* task_lock keeps task->mm from going away under us. */
		task_lock(task);
		if (task->mm) {
			r.owner_alive = true;
			r.owner_dumpable = get_dumpable(task->mm);
		}
		task_unlock(task);
		put_task_struct(task);
	}
	return hp_access_decide(&r);
}
