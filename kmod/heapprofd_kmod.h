/* SPDX-License-Identifier: GPL-2.0 */
/*
 * heapprofd.ko internals shared between the files of the module.
 *
 * main.c      module init/exit, parameters, /dev/heapprofd
 * session.c   session object, lifetime, id allocation, lookup, the session
 *             and consumer files (mmap, poll, ioctl dispatch)
 * ring.c      ring geometry, memory, charging, mmap
 * fdpass.c    fd slots: deposit and receive
 * access.c    who may attach
 * validate.c  ioctl argument copy-in and checks
 * stats.c     global counters and reading the control page safely
 * sysfs.c     /sys/kernel/heapprofd
 * netlink.c   generic netlink family "heapprofd"
 * krec.c      kernel records: per-session queue the consumer read(2)s
 * dmabuf.c    DMA-BUF export/release sources, the buffer table, samples
 * dmabuf_sysfs.c  /sys/kernel/heapprofd/dmabuf, built off the export path
 * gpu.c       the gpu_mem_total tracepoint, /sys/kernel/heapprofd/gpu
 * arch-<arch>.c  what differs between architectures (arch.h)
 */
#ifndef _HEAPPROFD_INTERNAL_H
#define _HEAPPROFD_INTERNAL_H

#include <linux/atomic.h>
#include <linux/bits.h>
#include <linux/cred.h>
#include <linux/kref.h>
#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/spinlock.h>
#include <linux/types.h>
#include <linux/wait.h>

#include "../uapi/linux/heapprofd.h"

struct dma_buf;
struct file;
struct kobject;
struct user_struct;
struct mm_struct;
struct page;
struct pid;
struct vm_area_struct;

/* ------------------------------------------------------------------ */
/* ring.c                                                              */
/* ------------------------------------------------------------------ */

/* Largest data area whatever max_data_size says (records carry 30 bits). */
#define HP_DATA_SIZE_HARD_MAX	BIT_ULL(30)

/* Where each part of the control area lives; see hp_geom_compute(). */
struct hp_geom {
	u64 data_size;		/* bytes, power of two */
	u64 map_size;		/* ctl_size + 2 * data_size */
	u32 ctl_size;		/* bytes, whole pages */
	u32 ctl_pages;
	u32 data_pages;
	u32 off_producer;
	u32 off_consumer;
	u32 off_kstate;
	u32 off_counters;
	u32 off_config;
};

int hp_geom_compute(u64 data_size, u64 max_data_size, struct hp_geom *g);
int hp_mmap_check(const struct hp_geom *g, unsigned long pgoff,
		  unsigned long len, unsigned long vm_flags);
void hp_ctl_init(void *ctl, const struct hp_geom *g, u64 session_id,
		 u32 reg_flags);

struct hp_ring {
	struct hp_geom geom;
	struct page **pages;	/* ctl, data, data again (vmap order) */
	unsigned int nr_distinct; /* ctl_pages + data_pages */
	void *vaddr;		/* the vmap of all of pages[] */
	struct user_struct *user; /* charged for RLIMIT_MEMLOCK, or NULL */
	unsigned long locked;	/* pages charged to user->locked_vm */
};

bool hp_memlock_fits(unsigned long locked, unsigned long pages,
		     unsigned long limit);
int hp_ring_alloc(struct hp_ring *r, const struct hp_geom *g,
		  bool charge_memlock);
void hp_ring_free(struct hp_ring *r);
int hp_ring_mmap(struct hp_ring *r, struct vm_area_struct *vma);

static inline void *hp_ring_part(const struct hp_ring *r, u32 off)
{
	return (u8 *)r->vaddr + off;
}

/* ------------------------------------------------------------------ */
/* stats.c                                                             */
/* ------------------------------------------------------------------ */

/* What a control page says, read once per field and made consistent. */
struct hp_snap {
	u64 produced;		/* producer tail */
	u64 consumed;		/* consumer head, never above tail */
	u64 records_dropped;
	u64 bytes_dropped;
};

u64 hp_sat_add(u64 a, u64 b);
void hp_snap_read(const void *ctl, const struct hp_geom *g,
		  struct hp_snap *s);
void hp_snap_add(struct hp_snap *acc, const struct hp_snap *s);

struct hp_stats {
	atomic64_t sessions_total;
	atomic64_t attaches_total;
	atomic64_t fds_passed_total;
	atomic64_t ring_bytes;
	atomic64_t wakeups_total;
	/* under hp_lock */
	u64 sessions_active;
	struct hp_snap retired;	/* folded in from closed sessions */
};

extern struct hp_stats hp_stats;

/* ------------------------------------------------------------------ */
/* session.c                                                           */
/* ------------------------------------------------------------------ */

/* ------------------------------------------------------------------ */
/* krec.c                                                              */
/* ------------------------------------------------------------------ */

/*
 * Most bytes of kernel records queued for one session: 15 samples with
 * whole 64 KiB stacks, hundreds with the usual few KiB. Charged to the
 * exporter's memory cgroup.
 */
#define HP_KQ_MAX_BYTES		SZ_1M

/* One or more whole kernel records, queued and read together. */
struct hp_krec {
	struct list_head node;
	u32 len;
	u8 data[];
};

struct hp_kq {
	struct kref ref;	/* the session's, and each sampled buffer's */
	spinlock_t lock;	/* irqsave: taken from probe handlers */
	struct list_head items;
	u32 bytes;
	bool closed;		/* the session is gone */
	wait_queue_head_t *wq;	/* the session's, NULL once closed */
	u64 lost_records;
	u64 lost_bytes;
	atomic64_t seq;
};

struct hp_krec *hp_krec_alloc(size_t len, gfp_t gfp);
struct hp_kq *hp_kq_create(wait_queue_head_t *wq);
void hp_kq_get(struct hp_kq *q);
void hp_kq_put(struct hp_kq *q);
void hp_kq_close(struct hp_kq *q);
bool hp_kq_push(struct hp_kq *q, struct hp_krec *r, u64 est_bytes);
void hp_kq_lost(struct hp_kq *q, u64 est_bytes);
u64 hp_kq_next_seq(struct hp_kq *q);
bool hp_kq_pending(struct hp_kq *q);
ssize_t hp_kq_read(struct hp_kq *q, char __user *buf, size_t count);

struct hp_session {
	struct kref ref;
	struct list_head node;	/* on hp_sessions while not closed */
	u64 id;
	u32 reg_flags;

	/* Fixed at registration. */
	struct pid *owner;	/* thread-group leader pid */
	/* The owner's mm then (mmgrab'ed); another one means it exec'ed. */
	struct mm_struct *mm;
	kuid_t owner_euid;
	kuid_t owner_uid;	/* real uid: counted in hp_user_sessions */
	bool counted;		/* counted against max_sessions_per_user */
	char comm[TASK_COMM_LEN];

	struct hp_ring ring;
	wait_queue_head_t wq;	/* consumer and producer pollers */

	/* Under hp_lock; the kernel's own copy of kstate. */
	u32 state;		/* HEAPPROFD_STATE_* */
	u64 attach_count;
	struct pid *consumer;	/* attached consumer's tgid, or NULL */

	spinlock_t slot_lock;	/* guards slots[] */
	struct file *slots[HEAPPROFD_FD_SLOTS];

	struct kobject *kobj;	/* sessions/<id>, NULL once closed */
	struct hp_kq *kq;	/* kernel records for the consumer */
};

extern struct mutex hp_lock;
extern struct list_head hp_sessions;

struct hp_session *hp_session_get_by_id(u64 id);
struct hp_session *hp_session_get_by_pid(struct pid *tgid);
void hp_session_put(struct hp_session *s);
void hp_session_snap(struct hp_session *s, struct hp_snap *snap);

long hp_register(void __user *uarg);
long hp_attach(void __user *uarg);

bool hp_session_owner_current(struct hp_session *s);
bool hp_tgid_has_session(pid_t tgid);
int hp_user_sessions_decide(unsigned long count, unsigned int max);

extern unsigned long hp_max_data_size;
extern bool hp_charge_memlock;
extern unsigned int hp_max_sessions_per_user;

/* ------------------------------------------------------------------ */
/* fdpass.c                                                            */
/* ------------------------------------------------------------------ */

long hp_fd_deposit(struct hp_session *s, void __user *uarg);
long hp_fd_receive(struct hp_session *s, void __user *uarg);
u32 hp_fd_slot_mask(struct hp_session *s);
void hp_fd_slots_release(struct hp_session *s);
bool hp_is_heapprofd_file(const struct file *file);

/* ------------------------------------------------------------------ */
/* access.c                                                            */
/* ------------------------------------------------------------------ */

/* Everything the attach decision depends on, gathered beforehand. */
struct hp_access_req {
	bool owner_alive;	/* the owner task exists and has an mm */
	bool owner_same_mm;	/* ... the mm it registered from */
	bool same_thread_group;	/* the caller is the owner */
	bool caller_ptrace_cap;	/* CAP_SYS_PTRACE in the owner's user ns */
	bool caller_ptrace_cap_mm; /* ... in the owner's mm's user ns */
	kuid_t caller_uid;	/* real ids, as PTRACE_MODE_REALCREDS */
	kgid_t caller_gid;
	kuid_t owner_uid;
	kuid_t owner_euid;
	kuid_t owner_suid;
	kgid_t owner_gid;
	kgid_t owner_egid;
	kgid_t owner_sgid;
	int owner_dumpable;	/* SUID_DUMP_* of the owner's mm */
};

int hp_access_decide(const struct hp_access_req *r);
int hp_access_check(struct hp_session *s);

/* ------------------------------------------------------------------ */
/* validate.c                                                          */
/* ------------------------------------------------------------------ */

/* Largest argument structure accepted (the tail must be zero). */
#define HP_ARG_MAX	4096U

int hp_copy_arg(void *karg, size_t ksize, const void __user *uarg,
		u32 *usize);
int hp_copy_arg_out(void __user *uarg, const void *karg, size_t ksize,
		    u32 usize);
int hp_check_register(const struct heapprofd_register *a);
int hp_check_attach(const struct heapprofd_attach *a);
int hp_check_fd_arg(const struct heapprofd_fd_arg *a);
int hp_check_info(const struct heapprofd_session_info *a);

/* ------------------------------------------------------------------ */
/* sysfs.c, netlink.c                                                  */
/* ------------------------------------------------------------------ */

int hp_sysfs_init(void);
void hp_sysfs_exit(void);
void hp_sysfs_session_add(struct hp_session *s);
void hp_sysfs_session_del(struct hp_session *s);

int hp_nl_init(void);
void hp_nl_exit(void);
void hp_nl_event(u8 cmd, struct hp_session *s);

/* A DMA-BUF or GPU event, captured where it happens (any context). */
struct hp_nl_res_ev {
	u8 cmd;			/* HEAPPROFD_CMD_DMABUF_*, _GPU_TOTAL */
	u32 pid;
	u32 gpu_id;
	u64 inode;
	u64 size;
	char exporter[32];
	char comm[TASK_COMM_LEN];
};

bool hp_nl_res_wanted(void);
void hp_nl_res_event(const struct hp_nl_res_ev *ev);

/* ------------------------------------------------------------------ */
/* dmabuf.c, dmabuf_sysfs.c, gpu.c                                     */
/* ------------------------------------------------------------------ */

#define HP_EXPORTER_LEN		32

/* What the module knows of one exported DMA-BUF. */
struct hp_dmabuf {
	struct hlist_node hnode;	/* by key (the struct dma_buf) */
	struct hlist_node inode_node;	/* by inode number */
	struct list_head lnode;		/* live or dead list */
	struct list_head vnode;		/* waiting for its view */
	const void *key;		/* the struct dma_buf */
	u64 ino;
	u64 size;
	pid_t exporter_pid;		/* tgid in the initial namespace */
	char exporter[HP_EXPORTER_LEN];
	struct hp_dmabuf_exp *exp;
	/* The session that sampled it, and its release record. */
	struct hp_kq *kq;
	struct hp_krec *free_rec;
	struct kobject *kobj;		/* buffers/<ino>, built by a worker */
};

/* Per exporter name. Never freed before module exit. */
struct hp_dmabuf_exp {
	struct list_head node;
	char name[HP_EXPORTER_LEN];	/* sanitised for a sysfs name */
	u64 count;
	u64 bytes;
	struct kobject *kobj;		/* exporters/<name> */
	bool view_failed;
};

/* Global state, under hp_dmabuf_lock (irqsave). */
extern spinlock_t hp_dmabuf_lock;
extern struct list_head hp_dmabuf_live;	/* export order */
extern struct list_head hp_dmabuf_dead;	/* released, view still up */
extern struct list_head hp_dmabuf_exps;
extern u64 hp_dmabuf_total_bytes;
extern u64 hp_dmabuf_count;
extern const char *hp_dmabuf_source;

extern struct list_head hp_dmabuf_unviewed;
extern bool hp_dmabuf_views_on;

void hp_exporter_name(char *dst, const char *src);
bool hp_dmabuf_sample(u64 size, u64 interval, u64 *est, bool *exact);
int hp_dmabuf_init(void);
void hp_dmabuf_exit(void);

/* oom.c */
int hp_oom_init(void);
void hp_oom_exit(void);
void hp_dmabuf_forget_all(void);
unsigned long hp_dmabuf_missed(void);
bool hp_dmabuf_adopt(struct dma_buf *db, gfp_t gfp);

/* dmabuf_scan.c: the buffers alive when the module loads */
extern unsigned long hp_dmabuf_found_at_load;
void hp_dmabuf_scan(void);
struct hp_dmabuf *hp_dmabuf_find_ino(u64 ino);

int hp_dmabuf_sysfs_init(struct kobject *parent);
void hp_dmabuf_sysfs_exit(void);
void hp_dmabuf_sysfs_changed(void);

int hp_gpu_init(struct kobject *parent);
void hp_gpu_exit(void);

/* The /sys/kernel/heapprofd kobject. */
extern struct kobject *hp_sysfs_root;

#endif /* _HEAPPROFD_INTERNAL_H */
