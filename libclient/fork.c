// SPDX-License-Identifier: GPL-2.0
/*
 * fork: the child never writes into the parent's ring. The kernel mapping
 * is VM_DONTCOPY and simply absent in the child; the memfd mapping of the
 * user-space transport is inherited and is unmapped here, and the inherited
 * descriptors are closed. With follow-forks the child registers a session
 * of its own at its next allocation; without, it is plain pass-through.
 */
#include <unistd.h>

#include "freeset.h"
#include "mark.h"
#include "client.h"

int hp_child_pending;
static const uint32_t hp_one = 1;
extern struct hp_freeset hp_fs_malloc;
void hp_heaps_fork_child(void);
void hp_heaps_lock(int lock);
void hp_counters_lock(int lock);

static void prepare(void)
{
	hp_dispatch_fork(0);
	hp_heaps_lock(1);
	pthread_mutex_lock(&hp_lock);
	pthread_mutex_lock(&hp_fs_malloc.lock);
	hp_counters_lock(1);
}

static void parent(void)
{
	hp_counters_lock(0);
	pthread_mutex_unlock(&hp_fs_malloc.lock);
	pthread_mutex_unlock(&hp_lock);
	hp_heaps_lock(0);
	hp_dispatch_fork(1);
}

static void child(void)
{
	struct hp_thread *t = &hp_self;
	int was_live = hp_sess.live;

	hp_session_forget_child();	/* also re-inits hp_lock */
	/* The parent's sampled blocks are not the child's daemon's business:
	 * its marked ones are of an older generation, so quiet (mark.h), and
	 * the set (no marking) forgets the others. */
	hp_mark_gen = (hp_mark_gen + 1) & HP_MARK_GEN_MASK;
	hp_freeset_reset(&hp_fs_malloc);
	hp_heaps_fork_child();
	/* A fresh sampler state at the next allocation (an inherited
	 * countdown of 0 would count as a sample). */
	t->inited = 0;
	t->smp.countdown = 0;
	hp_counters_reset_child(t);
	t->tid = 0;
	if (was_live && (hp_cfg.flags & HEAPPROFD_CFG_FOLLOW_FORKS)) {
		/* Register lazily: the next allocation takes the slow path. */
		hp_child_pending = 1;
		__atomic_store_n(&hp_gate, &hp_one, __ATOMIC_RELAXED);
	} else {
		hp_sess.stopped = 1;
	}
	hp_dispatch_fork(2);	/* re-inits its lock, then follows the gate */
}

void hp_fork_install(void)
{
	pthread_atfork(prepare, parent, child);
}
