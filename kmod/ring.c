// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofd ring memory: geometry, allocation, charging and mmap.
 *
 * A ring is ctl_pages pages of control area followed by data_pages pages of
 * data. The kernel maps them once into its own address space with vmap() in
 * the order ctl, data, data: the data pages appear twice back to back, so a
 * record that starts near the end of the data area runs on into the second
 * copy and is always contiguous. mmap() hands user space exactly that
 * layout with remap_vmalloc_range().
 *
 * The memory is charged to the registering process's memory cgroup (every
 * page is allocated with __GFP_ACCOUNT) and, when the charge_memlock
 * parameter is set, to its user: every page of the ring, the control page
 * included, is added to user_struct->locked_vm and checked against the
 * registering process's RLIMIT_MEMLOCK, as io_uring does for its rings.
 * The pages cannot be swapped out, and a ring lives as long as any fd or
 * mapping of it, whatever process holds that: charging the process's mm
 * would let helpers that exit leave uncharged rings behind. The charge is
 * dropped when the memory is freed. CAP_IPC_LOCK skips the charge.
 */
#include <linux/capability.h>
#include <linux/cred.h>
#include <linux/err.h>
#include <linux/gfp.h>
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/sched.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/user.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>

#include "compat.h"
#include "heapprofd_kmod.h"

/*
 * Offsets of the control area's parts. They match the user-space
 * transport's layout (proto/ring.h) so both look alike in a debugger;
 * readers still go through the offsets table. Producer and consumer lines
 * are two cache lines apart so adjacent-line prefetch does not couple them.
 */
#define HP_OFF_PRODUCER		256U
#define HP_OFF_CONSUMER		384U
#define HP_OFF_KSTATE		512U
#define HP_OFF_COUNTERS		640U
#define HP_OFF_CONFIG		896U
#define HP_OFF_END		(HP_OFF_CONFIG + sizeof(struct heapprofd_config))

/**
 * hp_geom_compute() - lay out a ring for a requested data size
 * @data_size: requested bytes of data area, 0 for the default
 * @max_data_size: the administrator's bound (module parameter)
 * @g: filled on success
 *
 * Return: 0; -EINVAL if data_size is not a power of two or is below
 * HEAPPROFD_DATA_SIZE_MIN or smaller than a page; -ENOSPC if it is above
 * the bound (or above HP_DATA_SIZE_HARD_MAX).
 */
int hp_geom_compute(u64 data_size, u64 max_data_size, struct hp_geom *g)
{
	u64 ctl_size = max_t(u64, HEAPPROFD_CTL_SIZE, PAGE_SIZE);

	BUILD_BUG_ON(sizeof(struct heapprofd_ctl) > HP_OFF_PRODUCER);
	BUILD_BUG_ON(HP_OFF_END > HEAPPROFD_CTL_SIZE);

	if (!data_size)
		data_size = HEAPPROFD_DATA_SIZE_DEFAULT;
	if (!is_power_of_2(data_size) || data_size < HEAPPROFD_DATA_SIZE_MIN ||
	    data_size < PAGE_SIZE)
		return -EINVAL;
	if (data_size > max_data_size || data_size > HP_DATA_SIZE_HARD_MAX)
		return -ENOSPC;

	memset(g, 0, sizeof(*g));
	g->data_size = data_size;
	g->ctl_size = ctl_size;
	g->ctl_pages = ctl_size >> PAGE_SHIFT;
	g->data_pages = data_size >> PAGE_SHIFT;
	g->map_size = ctl_size + 2 * data_size;
	g->off_producer = HP_OFF_PRODUCER;
	g->off_consumer = HP_OFF_CONSUMER;
	g->off_kstate = HP_OFF_KSTATE;
	g->off_counters = HP_OFF_COUNTERS;
	g->off_config = HP_OFF_CONFIG;
	return 0;
}
EXPORT_SYMBOL_NS_GPL(hp_geom_compute, HEAPPROFD_NS);

/**
 * hp_mmap_check() - is this mmap() request the one mapping we allow?
 * @g: the ring's geometry
 * @pgoff: vma->vm_pgoff
 * @len: length of the vma
 * @vm_flags: the vma's flags
 *
 * Return: 0 or -EINVAL (wrong offset or length, private or executable).
 */
int hp_mmap_check(const struct hp_geom *g, unsigned long pgoff,
		  unsigned long len, unsigned long vm_flags)
{
	if (pgoff != HEAPPROFD_MMAP_RING >> PAGE_SHIFT)
		return -EINVAL;
	if ((u64)len != g->map_size)
		return -EINVAL;
	if (!(vm_flags & VM_SHARED) || (vm_flags & VM_EXEC))
		return -EINVAL;
	return 0;
}
EXPORT_SYMBOL_NS_GPL(hp_mmap_check, HEAPPROFD_NS);

/**
 * hp_ctl_init() - write a fresh control area
 * @ctl: zeroed control area of g->ctl_size bytes
 * @g: the ring's geometry
 * @session_id: the session's id
 * @reg_flags: HEAPPROFD_REGISTER_* the session was registered with
 */
void hp_ctl_init(void *ctl, const struct hp_geom *g, u64 session_id,
		 u32 reg_flags)
{
	struct heapprofd_ctl *c = ctl;
	struct heapprofd_config *cfg = ctl + g->off_config;
	struct heapprofd_kstate *ks = ctl + g->off_kstate;

	c->magic = HEAPPROFD_CTL_MAGIC;
	c->version = HEAPPROFD_ABI_VERSION;
	c->header_size = sizeof(*c);
	c->ctl_size = g->ctl_size;
	c->data_size = g->data_size;
	c->data_offset = g->ctl_size;
	c->session_id = session_id;
	c->flags = HEAPPROFD_CTL_KERNEL;
	c->off.producer = g->off_producer;
	c->off.consumer = g->off_consumer;
	c->off.kstate = g->off_kstate;
	c->off.counters = g->off_counters;
	c->off.config = g->off_config;
	c->off.kring = 0;	/* no kernel-written ring yet */

	cfg->enabled = !(reg_flags & HEAPPROFD_REGISTER_DORMANT);
	cfg->interval = HEAPPROFD_INTERVAL_DEFAULT;
	cfg->stack_cap = HEAPPROFD_STACK_CAP_DEFAULT;

	ks->state = HEAPPROFD_STATE_OPEN;
}
EXPORT_SYMBOL_NS_GPL(hp_ctl_init, HEAPPROFD_NS);

static void hp_ring_free_pages(struct hp_ring *r, unsigned int n)
{
	while (n--)
		__free_page(r->pages[n]);
}

/**
 * hp_memlock_fits() - may @pages more pages be locked?
 * @locked: pages the user has locked now
 * @pages: pages to add
 * @limit: RLIMIT_MEMLOCK in pages
 *
 * Return: true if @locked + @pages does not overflow and stays within
 * @limit.
 */
bool hp_memlock_fits(unsigned long locked, unsigned long pages,
		     unsigned long limit)
{
	unsigned long sum;

	return !check_add_overflow(locked, pages, &sum) && sum <= limit;
}
EXPORT_SYMBOL_NS_GPL(hp_memlock_fits, HEAPPROFD_NS);

/* Add @pages to @user's locked_vm if RLIMIT_MEMLOCK allows it. */
static int hp_user_charge(struct user_struct *user, unsigned long pages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	long cur = atomic_long_read(&user->locked_vm);

	do {
		if (!hp_memlock_fits(cur, pages, limit))
			return -ENOMEM;
	} while (!atomic_long_try_cmpxchg(&user->locked_vm, &cur,
					  cur + pages));
	return 0;
}

static void hp_ring_uncharge(struct hp_ring *r)
{
	if (!r->user)
		return;
	atomic_long_sub(r->locked, &r->user->locked_vm);
	free_uid(r->user);
	r->user = NULL;
	r->locked = 0;
}

/**
 * hp_ring_alloc() - allocate, charge and vmap the memory of a ring
 * @r: zeroed ring, filled on success
 * @g: geometry from hp_geom_compute()
 * @charge_memlock: charge every page to the calling user's locked memory
 *                  (RLIMIT_MEMLOCK of the calling process) unless it has
 *                  CAP_IPC_LOCK
 *
 * Return: 0, -ENOMEM (out of memory or over RLIMIT_MEMLOCK). On failure
 * nothing stays allocated or charged.
 */
int hp_ring_alloc(struct hp_ring *r, const struct hp_geom *g,
		  bool charge_memlock)
{
	unsigned int distinct = g->ctl_pages + g->data_pages;
	unsigned int total = distinct + g->data_pages;
	unsigned int i;
	int ret;

	r->geom = *g;
	if (charge_memlock && !capable(CAP_IPC_LOCK)) {
		struct user_struct *user = get_current_user();

		ret = hp_user_charge(user, distinct);
		if (ret) {
			free_uid(user);
			return ret;
		}
		r->user = user;
		r->locked = distinct;
	}

	ret = -ENOMEM;
	r->pages = kvmalloc_array(total, sizeof(*r->pages), GFP_KERNEL_ACCOUNT);
	if (!r->pages)
		goto err_uncharge;

	for (i = 0; i < distinct; i++) {
		r->pages[i] = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO |
					 __GFP_NOWARN);
		if (!r->pages[i]) {
			hp_ring_free_pages(r, i);
			goto err_array;
		}
		cond_resched();
	}
	/* The data pages once more, for the second copy. */
	for (i = 0; i < g->data_pages; i++)
		r->pages[distinct + i] = r->pages[g->ctl_pages + i];

	/* VM_USERMAP: remap_vmalloc_range() maps only such areas. */
	r->vaddr = vmap(r->pages, total, VM_MAP | VM_USERMAP, PAGE_KERNEL);
	if (!r->vaddr) {
		hp_ring_free_pages(r, distinct);
		goto err_array;
	}
	r->nr_distinct = distinct;
	atomic64_add(g->ctl_size + g->data_size, &hp_stats.ring_bytes);
	return 0;

err_array:
	kvfree(r->pages);
	r->pages = NULL;
err_uncharge:
	hp_ring_uncharge(r);
	return ret;
}

/**
 * hp_ring_free() - undo hp_ring_alloc()
 * @r: the ring; no mapping of it may remain
 */
void hp_ring_free(struct hp_ring *r)
{
	if (!r->vaddr)
		return;
	vunmap(r->vaddr);
	hp_ring_free_pages(r, r->nr_distinct);
	kvfree(r->pages);
	atomic64_sub(r->geom.ctl_size + r->geom.data_size,
		     &hp_stats.ring_bytes);
	hp_ring_uncharge(r);
	memset(r, 0, sizeof(*r));
}

/**
 * hp_ring_mmap() - map a ring into user space
 * @r: the ring
 * @vma: the new mapping
 *
 * The mapping may never become executable, is not inherited across fork()
 * (a child must not write into its parent's ring), cannot grow with mremap()
 * and is left out of core dumps. VM_IO pins VM_DONTCOPY: madvise() refuses
 * MADV_DOFORK (and MADV_DONTFORK) on such a mapping with EINVAL, so the
 * process cannot make a child inherit the ring. It also keeps
 * get_user_pages() and so process_vm_readv() and /proc/<pid>/mem away from
 * the ring, which nothing needs.
 *
 * Return: 0 or a negative errno.
 */
int hp_ring_mmap(struct hp_ring *r, struct vm_area_struct *vma)
{
	int ret;

	ret = hp_mmap_check(&r->geom, vma->vm_pgoff,
			    vma->vm_end - vma->vm_start, vma->vm_flags);
	if (ret)
		return ret;
	hp_vm_flags_clear(vma, VM_MAYEXEC);
	hp_vm_flags_set(vma, VM_DONTCOPY | VM_DONTEXPAND | VM_DONTDUMP | VM_IO);
	return remap_vmalloc_range(vma, r->vaddr, 0);
}
