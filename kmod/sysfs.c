// SPDX-License-Identifier: GPL-2.0
/*
 * /sys/kernel/heapprofd: global counters and one directory per live session
 * (sessions/<id>/). Documentation/ABI/testing/sysfs-kernel-heapprofd
 * describes every file.
 *
 * The kobjects are plain kobject_create_and_add() ones, whose release lives
 * in the core kernel, so no release code of this module can run after it is
 * unloaded. The global files are world-readable totals; the files under
 * sessions/ name processes (pid, comm), which hidepid may hide in /proc,
 * so they are 0400 (root only). A session file finds its session by the directory's name (the
 * id) in the live list; removing a directory waits for running reads.
 */
#include <linux/kernel.h>
#include <linux/kobject.h>
#include <linux/kstrtox.h>
#include <linux/string.h>
#include <linux/sysfs.h>

#include "compat.h"
#include "heapprofd_kmod.h"

struct kobject *hp_sysfs_root;
static struct kobject *hp_sessions_kobj;

/* ------------------------------------------------------------------ */
/* Global files                                                        */
/* ------------------------------------------------------------------ */

static void hp_total_snap(struct hp_snap *total)
{
	struct hp_session *s;
	struct hp_snap snap;

	mutex_lock(&hp_lock);
	*total = hp_stats.retired;
	list_for_each_entry(s, &hp_sessions, node) {
		hp_session_snap(s, &snap);
		hp_snap_add(total, &snap);
	}
	mutex_unlock(&hp_lock);
}

static ssize_t version_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	return sysfs_emit(buf, "%d\n", HEAPPROFD_ABI_VERSION);
}

static ssize_t sessions_active_show(struct kobject *kobj,
				    struct kobj_attribute *attr, char *buf)
{
	u64 n;

	mutex_lock(&hp_lock);
	n = hp_stats.sessions_active;
	mutex_unlock(&hp_lock);
	return sysfs_emit(buf, "%llu\n", n);
}

#define HP_ATOMIC_SHOW(name)						\
static ssize_t name##_show(struct kobject *kobj,			\
			   struct kobj_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%lld\n", atomic64_read(&hp_stats.name));\
}

HP_ATOMIC_SHOW(sessions_total)
HP_ATOMIC_SHOW(attaches_total)
HP_ATOMIC_SHOW(fds_passed_total)
HP_ATOMIC_SHOW(ring_bytes)
HP_ATOMIC_SHOW(wakeups_total)

static ssize_t records_dropped_total_show(struct kobject *kobj,
					  struct kobj_attribute *attr,
					  char *buf)
{
	struct hp_snap total;

	hp_total_snap(&total);
	return sysfs_emit(buf, "%llu\n", total.records_dropped);
}

static ssize_t bytes_dropped_total_show(struct kobject *kobj,
					struct kobj_attribute *attr, char *buf)
{
	struct hp_snap total;

	hp_total_snap(&total);
	return sysfs_emit(buf, "%llu\n", total.bytes_dropped);
}

static struct kobj_attribute hp_attr_version = __ATTR_RO(version);
static struct kobj_attribute hp_attr_sessions_active =
	__ATTR_RO(sessions_active);
static struct kobj_attribute hp_attr_sessions_total =
	__ATTR_RO(sessions_total);
static struct kobj_attribute hp_attr_attaches_total =
	__ATTR_RO(attaches_total);
static struct kobj_attribute hp_attr_fds_passed_total =
	__ATTR_RO(fds_passed_total);
static struct kobj_attribute hp_attr_ring_bytes = __ATTR_RO(ring_bytes);
static struct kobj_attribute hp_attr_wakeups_total = __ATTR_RO(wakeups_total);
static struct kobj_attribute hp_attr_records_dropped_total =
	__ATTR_RO(records_dropped_total);
static struct kobj_attribute hp_attr_bytes_dropped_total =
	__ATTR_RO(bytes_dropped_total);

static struct attribute *hp_attrs[] = {
	&hp_attr_version.attr,
	&hp_attr_sessions_active.attr,
	&hp_attr_sessions_total.attr,
	&hp_attr_attaches_total.attr,
	&hp_attr_fds_passed_total.attr,
	&hp_attr_ring_bytes.attr,
	&hp_attr_wakeups_total.attr,
	&hp_attr_records_dropped_total.attr,
	&hp_attr_bytes_dropped_total.attr,
	NULL,
};

static const struct attribute_group hp_group = {
	.attrs = hp_attrs,
};

/* ------------------------------------------------------------------ */
/* sessions/<id>/                                                      */
/* ------------------------------------------------------------------ */

enum hp_sess_field {
	HP_SF_PID,
	HP_SF_COMM,
	HP_SF_RING_SIZE,
	HP_SF_PRODUCED,
	HP_SF_CONSUMED,
	HP_SF_DROPPED,
};

static ssize_t hp_sess_show(struct kobject *kobj, char *buf,
			    enum hp_sess_field field)
{
	struct hp_session *s;
	struct hp_snap snap;
	ssize_t ret;
	u64 id;

	if (kstrtou64(kobject_name(kobj), 10, &id))
		return -ENODEV;
	s = hp_session_get_by_id(id);
	if (!s)
		return -ENODEV;

	hp_session_snap(s, &snap);
	switch (field) {
	case HP_SF_PID:
		/* The initial namespace's number, as everywhere in sysfs. */
		ret = sysfs_emit(buf, "%d\n", pid_nr(s->owner));
		break;
	case HP_SF_COMM:
		ret = sysfs_emit(buf, "%s\n", s->comm);
		break;
	case HP_SF_RING_SIZE:
		ret = sysfs_emit(buf, "%llu\n", s->ring.geom.data_size);
		break;
	case HP_SF_PRODUCED:
		ret = sysfs_emit(buf, "%llu\n", snap.produced);
		break;
	case HP_SF_CONSUMED:
		ret = sysfs_emit(buf, "%llu\n", snap.consumed);
		break;
	default:
		ret = sysfs_emit(buf, "%llu\n", snap.records_dropped);
		break;
	}
	hp_session_put(s);
	return ret;
}

#define HP_SESS_ATTR(name, field)					\
static ssize_t hp_sess_##name##_show(struct kobject *kobj,		\
				     struct kobj_attribute *attr,	\
				     char *buf)				\
{									\
	return hp_sess_show(kobj, buf, field);				\
}									\
static struct kobj_attribute hp_sess_attr_##name =			\
	__ATTR(name, 0400, hp_sess_##name##_show, NULL)

HP_SESS_ATTR(pid, HP_SF_PID);
HP_SESS_ATTR(comm, HP_SF_COMM);
HP_SESS_ATTR(ring_size, HP_SF_RING_SIZE);
HP_SESS_ATTR(produced_bytes, HP_SF_PRODUCED);
HP_SESS_ATTR(consumed_bytes, HP_SF_CONSUMED);
HP_SESS_ATTR(dropped_records, HP_SF_DROPPED);

static struct attribute *hp_sess_attrs[] = {
	&hp_sess_attr_pid.attr,
	&hp_sess_attr_comm.attr,
	&hp_sess_attr_ring_size.attr,
	&hp_sess_attr_produced_bytes.attr,
	&hp_sess_attr_consumed_bytes.attr,
	&hp_sess_attr_dropped_records.attr,
	NULL,
};

static const struct attribute_group hp_sess_group = {
	.attrs = hp_sess_attrs,
};

/**
 * hp_sysfs_session_add() - create sessions/<id>/ for a new session
 * @s: the session, already on the live list
 *
 * A failure only costs the directory; the session works without it.
 */
void hp_sysfs_session_add(struct hp_session *s)
{
	char name[24];
	struct kobject *kobj;

	snprintf(name, sizeof(name), "%llu", s->id);
	kobj = kobject_create_and_add(name, hp_sessions_kobj);
	if (!kobj)
		return;
	if (sysfs_create_group(kobj, &hp_sess_group)) {
		kobject_put(kobj);
		return;
	}
	s->kobj = kobj;
}

/**
 * hp_sysfs_session_del() - remove sessions/<id>/ (the session closed)
 * @s: the session
 */
void hp_sysfs_session_del(struct hp_session *s)
{
	struct kobject *kobj = s->kobj;

	s->kobj = NULL;
	if (!kobj)
		return;
	sysfs_remove_group(kobj, &hp_sess_group);
	kobject_put(kobj);
}

int hp_sysfs_init(void)
{
	int ret;

	hp_sysfs_root = kobject_create_and_add("heapprofd", kernel_kobj);
	if (!hp_sysfs_root)
		return -ENOMEM;
	ret = sysfs_create_group(hp_sysfs_root, &hp_group);
	if (ret)
		goto err;
	hp_sessions_kobj = kobject_create_and_add("sessions", hp_sysfs_root);
	if (!hp_sessions_kobj) {
		ret = -ENOMEM;
		goto err_group;
	}
	return 0;

err_group:
	sysfs_remove_group(hp_sysfs_root, &hp_group);
err:
	kobject_put(hp_sysfs_root);
	return ret;
}

void hp_sysfs_exit(void)
{
	kobject_put(hp_sessions_kobj);
	sysfs_remove_group(hp_sysfs_root, &hp_group);
	kobject_put(hp_sysfs_root);
}
