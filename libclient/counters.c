// SPDX-License-Identifier: GPL-2.0
/*
 * Exact totals: every thread counts its calls and bytes in thread-local
 * memory and adds what is new to the control page counters every
 * HP_PUBLISH_EVERY allocations, when it exits and when the process exits.
 *
 * "published" is swapped atomically so that the exit-time flush of another
 * thread's counters and that thread's own publication never count the same
 * delta twice (the deltas telescope).
 */
#include "internal.h"

static pthread_key_t exit_key;
static int exit_key_ok;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hp_thread *reg_head;

static void add(__u64 *dst, uint64_t *pub, const uint64_t *cur)
{
	uint64_t now = __atomic_load_n(cur, __ATOMIC_RELAXED);
	uint64_t was = __atomic_exchange_n(pub, now, __ATOMIC_RELAXED);

	if (now != was)
		__atomic_fetch_add(dst, now - was, __ATOMIC_RELAXED);
}

void hp_counters_publish(struct hp_thread *t)
{
	struct heapprofd_counters *c;

	if (!hp_sess.live || !hp_sess.ring.cnt)
		return;
	c = hp_sess.ring.cnt;
	add(&c->alloc_calls, &t->pub_alloc_calls, &t->alloc_calls);
	add(&c->alloc_bytes, &t->pub_alloc_bytes, &t->alloc_bytes);
	add(&c->free_calls, &t->pub_free_calls, &t->free_calls);
	add(&c->free_bytes, &t->pub_free_bytes, &t->free_bytes);
}

static void thread_exit(void *arg)
{
	struct hp_thread *t = arg;

	hp_counters_publish(t);
	pthread_mutex_lock(&reg_lock);
	if (t->prev)
		t->prev->next = t->next;
	else if (reg_head == t)
		reg_head = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->next = t->prev = NULL;
	pthread_mutex_unlock(&reg_lock);
}

void hp_counters_register(struct hp_thread *t)
{
	pthread_mutex_lock(&reg_lock);
	if (!exit_key_ok)
		exit_key_ok = !pthread_key_create(&exit_key, thread_exit) ? 1 : -1;
	t->prev = NULL;
	t->next = reg_head;
	if (reg_head)
		reg_head->prev = t;
	reg_head = t;
	pthread_mutex_unlock(&reg_lock);
	if (exit_key_ok == 1)
		pthread_setspecific(exit_key, t);
}

/* Process exit: publish every thread still registered. */
void hp_counters_flush_all(void)
{
	struct hp_thread *t;

	pthread_mutex_lock(&reg_lock);
	for (t = reg_head; t; t = t->next)
		hp_counters_publish(t);
	pthread_mutex_unlock(&reg_lock);
	/* The exiting thread may not have taken the slow path yet. */
	hp_counters_publish(&hp_self);
}

/* Fork child: the forking thread is the only one; it starts from zero. */
void hp_counters_reset_child(struct hp_thread *t)
{
	pthread_mutex_init(&reg_lock, NULL);
	t->alloc_calls = t->alloc_bytes = t->free_calls = t->free_bytes = 0;
	t->pub_alloc_calls = t->pub_alloc_bytes = 0;
	t->pub_free_calls = t->pub_free_bytes = 0;
	t->next = t->prev = NULL;
	reg_head = t->inited ? t : NULL;
}

void hp_counters_lock(int lock)
{
	if (lock)
		pthread_mutex_lock(&reg_lock);
	else
		pthread_mutex_unlock(&reg_lock);
}
