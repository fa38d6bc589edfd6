// SPDX-License-Identifier: GPL-2.0
/*
 * Exact totals: every thread counts its calls and bytes in thread-local
 * memory and adds what is new to the control page counters from the
 * sampler's slow path (at most once per HP_PUBLISH_CALLS allocations, at
 * least every HP_SLOW_EVERY bytes it allocates), when it exits, when the
 * process exits and before an exec. The ring's records_written and
 * bytes_written are counted and published the same way.
 *
 * "published" is swapped atomically so that the exit-time flush of another
 * thread's counters and that thread's own publication never count the same
 * delta twice (the deltas telescope).
 */
#include "client.h"

static pthread_key_t exit_key;
static int exit_key_ok;
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hp_thread *reg_head;

static void add(__u64 *dst, uint64_t *pub, uint64_t now)
{
	uint64_t was = __atomic_exchange_n(pub, now, __ATOMIC_RELAXED);

	/* Modular: a transiently smaller value (calls read after a byte
	 * counter another thread is still updating, at process exit) is
	 * corrected by the next publication. */
	if (now != was)
		__atomic_fetch_add(dst, now - was, __ATOMIC_RELAXED);
}

static uint64_t rd(const uint64_t *v)
{
	return __atomic_load_n(v, __ATOMIC_RELAXED);
}

void hp_counters_publish(struct hp_thread *t)
{
	struct heapprofd_counters *c;
	uint64_t ac, fc;

	if (!hp_sess.live || !hp_sess.ring.cnt)
		return;
	c = hp_sess.ring.cnt;
	/* The byte counters hold usable + 8 per block (client.h). Calls
	 * and bytes are not read as one pair: read while their thread still
	 * runs (the exit-time flush of other threads), the bytes may be off
	 * by a block, which the next publication of that thread settles. */
	ac = rd(&t->alloc_calls);
	fc = rd(&t->free_calls);
	add(&c->alloc_calls, &t->pub_alloc_calls, ac);
	add(&c->alloc_bytes, &t->pub_alloc_bytes, rd(&t->alloc_bytes8) - 8 * ac);
	add(&c->free_calls, &t->pub_free_calls, fc);
	add(&c->free_bytes, &t->pub_free_bytes, rd(&t->free_bytes8) - 8 * fc);
	add(&c->records_written, &t->pub_rec_written, rd(&t->rec_written));
	add(&c->bytes_written, &t->pub_rec_bytes, rd(&t->rec_bytes));
}

static void thread_exit(void *arg)
{
	struct hp_thread *t = arg;

	hp_counters_publish(t);
	hp_stack_shadow_free();
	pthread_mutex_lock(&reg_lock);
	t->exited = 1;
	__atomic_store_n(&t->registered, 0, __ATOMIC_RELAXED);
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
	if (__atomic_load_n(&t->registered, __ATOMIC_RELAXED))
		return;		/* its first free did it already */
	pthread_mutex_lock(&reg_lock);
	if (!exit_key_ok)
		exit_key_ok = !pthread_key_create(&exit_key, thread_exit) ? 1 : -1;
	t->prev = NULL;
	t->next = reg_head;
	if (reg_head)
		reg_head->prev = t;
	reg_head = t;
	__atomic_store_n(&t->registered, 1, __ATOMIC_RELAXED);
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
	t->alloc_calls = t->alloc_bytes8 = t->free_calls = t->free_bytes8 = 0;
	t->pub_alloc_calls = t->pub_alloc_bytes = 0;
	t->pub_free_calls = t->pub_free_bytes = 0;
	t->rec_written = t->rec_bytes = t->pub_rec_written = t->pub_rec_bytes = 0;
	t->next = t->prev = NULL;
	reg_head = t->inited ? t : NULL;
	t->registered = t->inited;
}

void hp_counters_lock(int lock)
{
	if (lock)
		pthread_mutex_lock(&reg_lock);
	else
		pthread_mutex_unlock(&reg_lock);
}

/* Is a registered thread inside a hook's slow path (detach waits)? */
int hp_threads_busy(void)
{
	struct hp_thread *t;
	int busy = 0;

	if (pthread_mutex_trylock(&reg_lock))
		return 1;
	for (t = reg_head; t && !busy; t = t->next)
		busy = __atomic_load_n(&t->in_hook, __ATOMIC_RELAXED) != 0;
	pthread_mutex_unlock(&reg_lock);
	return busy;
}
