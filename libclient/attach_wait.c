// SPDX-License-Identifier: GPL-2.0
/*
 * Waiting for the daemon under the kernel transport, at both ends of a
 * session.
 *
 * Start: the daemon attaches only after it has seen SESSION_NEW, received the
 * fds and mapped the ring, which takes a while on a slow machine. A recorded
 * program (a daemon is expected) that sampled meanwhile would fill the ring
 * and drop, or block on it. So right after registering, such a session waits
 * a bounded time for the consumer to attach and enable it (read its maps,
 * write its configuration) before it takes its first sample.
 *
 * Exit: the module frees a session whose
 * producer closed it before any consumer attached, and the attach has to
 * find the process by pid: a short program that exits before the daemon
 * reacted to SESSION_NEW would lose every sample. So at exit (the library's
 * destructor, which runs after the program's atexit handlers and the other
 * libraries' destructors), a session that is not dormant, wrote records and
 * never saw a consumer waits a bounded time for one to attach, and then for
 * it to drain the ring, so the records and the process's maps are still
 * there when the daemon reads them.
 *
 * The user-space transport needs none of this: the hello waits for the
 * daemon's reply, which a non-dormant session gets only once the daemon
 * has enabled it (and so read the process's maps and opened its files),
 * and the daemon keeps the memfd and drains it after EOF.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <time.h>

#include "detect.h"
#include "client.h"

#define HP_EXIT_WAIT_DEFAULT_MS	1000
/*
 * At the start of a program that heapprofctl record runs, the daemon it
 * started will attach: the wait ends as soon as it does, so the bound only
 * matters where the attach is slow (a debug kernel under emulation took
 * over a second), and there a program that exits at once (_exit, no
 * destructor) would lose every sample.
 */
#define HP_START_WAIT_RECORD_MS	10000
#define HP_EXIT_POLL_NS		1000000L	/* 1 ms between looks */

static uint64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void nap(void)
{
	struct timespec ts = { 0, HP_EXIT_POLL_NS };

	nanosleep(&ts, NULL);
}

/* How long to wait: HEAPPROFD_EXIT_WAIT_MS if set (0 disables), else the
 * default when a daemon seems to be running, else not at all. */
static uint32_t wait_budget_ms(int at_start)
{
	const char *ctl;

	if (hp_cfg.exit_wait_ms >= 0)
		return (uint32_t)hp_cfg.exit_wait_ms;
	/* heapprofctl record names the recorded process: a daemon is coming. */
	if (getenv("HEAPPROFD_ROOT_PID"))
		return at_start ? HP_START_WAIT_RECORD_MS : HP_EXIT_WAIT_DEFAULT_MS;
	/*
	 * A daemon that runs but does not attach (stopped, frozen, busy)
	 * must not hold up every program on the machine: the same bound as
	 * the user-space transport's hello (HEAPPROFD_HELLO_TIMEOUT_MS).
	 */
	ctl = getenv(HP_CTL_ENV);
	return hp_daemon_expected(hp_cfg.socket_path, ctl ? ctl : HP_CTL_DEFAULT) ?
	       hp_cfg.hello_timeout_ms : 0;
}

static uint32_t kstate_state(void)
{
	return __atomic_load_n(&hp_sess.ring.kstate->state, __ATOMIC_ACQUIRE);
}

/*
 * Where the start stands: 1 when a consumer is attached and has enabled us
 * (its configuration, generation > 0, is written after it read our maps
 * and opened our files: attached alone is not enough, a program that then
 * sampled and _exited at once could be gone before that); -1 when there
 * is nothing to wait for (the session closed, or a consumer came and went
 * without enabling us); 0 while a consumer may still come.
 */
static int start_state(void)
{
	uint32_t st = kstate_state();

	if (st == HEAPPROFD_STATE_ATTACHED &&
	    __atomic_load_n(&hp_sess.ring.cfg->generation, __ATOMIC_ACQUIRE))
		return 1;
	if (st == HEAPPROFD_STATE_CLOSED ||
	    (st != HEAPPROFD_STATE_ATTACHED &&
	     __atomic_load_n(&hp_sess.ring.kstate->attach_count, __ATOMIC_RELAXED)))
		return -1;
	return 0;
}

void hp_start_wait(void)
{
	uint64_t deadline, budget;

	if (!hp_sess.live || !hp_sess.kernel || hp_cfg.dormant || start_state())
		return;
	/* (A private daemon often attaches before we get here; it is waited
	 * for all the same until it has enabled us.) */
	budget = wait_budget_ms(1);
	if (!budget)
		return;
	hp_debug("start: waiting up to %llu ms for a consumer",
		 (unsigned long long)budget);
	deadline = mono_ms() + budget;
	while (!start_state()) {
		if (mono_ms() >= deadline)
			break;
		nap();
	}
	if (start_state() <= 0)
		hp_debug("start: no daemon attached within %llu ms: running unprofiled until one does",
			 (unsigned long long)budget);
}

void hp_exit_wait(void)
{
	struct hp_ring *r = &hp_sess.ring;
	uint64_t deadline, budget;
	unsigned naps = 0;

	if (!hp_sess.live || !hp_sess.kernel || hp_sess.stopped || hp_cfg.dormant)
		return;
	if (!__atomic_load_n(&r->cnt->records_written, __ATOMIC_RELAXED) ||
	    __atomic_load_n(&r->kstate->attach_count, __ATOMIC_RELAXED))
		return;
	budget = wait_budget_ms(0);
	if (!budget)
		return;
	hp_debug("exit: waiting up to %llu ms for a consumer",
		 (unsigned long long)budget);
	deadline = mono_ms() + budget;
	while (kstate_state() != HEAPPROFD_STATE_ATTACHED) {
		if (kstate_state() == HEAPPROFD_STATE_CLOSED || mono_ms() >= deadline) {
			hp_debug("exit: no consumer came");
			return;
		}
		nap();
	}
	/* Attached: let it drain what is there. Wake it now rather than
	 * leave it to its timer, and again now and then if it sleeps. */
	hp_wake();
	deadline = mono_ms() + budget;
	while (__atomic_load_n(&r->cons->head, __ATOMIC_ACQUIRE) !=
	       __atomic_load_n(&r->prod->tail, __ATOMIC_ACQUIRE)) {
		if (kstate_state() != HEAPPROFD_STATE_ATTACHED || mono_ms() >= deadline) {
			hp_debug("exit: the consumer left or did not drain in time");
			return;
		}
		if (!(++naps % 16) && __atomic_load_n(&r->cons->sleeping, __ATOMIC_RELAXED))
			hp_wake();
		nap();
	}
	hp_debug("exit: the consumer drained the ring");
}
