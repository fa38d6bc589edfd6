// SPDX-License-Identifier: GPL-2.0
/*
 * The producer's side of the process-wide session: which transport holds
 * the ring, the hot-path gate, the config page the daemon writes, waking
 * the daemon, and the end of profiling when the daemon goes away. The
 * records themselves are written by record.c.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "client.h"
#include "codeset.h"

struct hp_session hp_sess = { .session_fd = -1, .sock_fd = -1,
			      .event_fd = -1, .memfd = -1 };

static const uint32_t hp_zero;
const volatile uint32_t *hp_gate = &hp_zero;
pthread_mutex_t hp_lock = PTHREAD_MUTEX_INITIALIZER;

/* Reread the control page config when its generation moved. */
void hp_config_poll(void)
{
	struct heapprofd_config *c;
	uint32_t gen, v32;
	uint64_t v;

	if (!hp_sess.live)
		return;
	c = hp_sess.ring.cfg;
	gen = __atomic_load_n(&c->generation, __ATOMIC_ACQUIRE);
	if (gen == __atomic_load_n(&hp_sess.cfg_gen, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&hp_lock);
	if (gen != hp_sess.cfg_gen) {
		hp_sess.cfg_gen = gen;
		/* Perhaps another reader: it has none of our earlier records. */
		__atomic_add_fetch(&hp_reuse_gen, 1, __ATOMIC_RELEASE);
		v = __atomic_load_n(&c->interval, __ATOMIC_RELAXED);
		hp_cfg.interval = (v >= 1 && v <= (1ULL << 40)) ? v :
				  HEAPPROFD_INTERVAL_DEFAULT;
		v32 = __atomic_load_n(&c->stack_cap, __ATOMIC_RELAXED);
		hp_cfg.stack_cap = v32 <= (8U << 20) ? (v32 & ~7U) :
				   HEAPPROFD_STACK_CAP_DEFAULT;
		v32 = __atomic_load_n(&c->flags, __ATOMIC_RELAXED);
		hp_cfg.flags = (v32 & ~HEAPPROFD_CFG_ALL) ? 0 : v32;
		v32 = __atomic_load_n(&c->block_timeout_us, __ATOMIC_RELAXED);
		hp_cfg.block_timeout_us = v32 <= HP_STALL_US_MAX ? v32 : HP_STALL_US_DEFAULT;
		/* Encodings the reader knows: none until it says so. */
		v32 = __atomic_load_n(&c->consumer_caps, __ATOMIC_RELAXED);
		hp_cfg.stack_delta = !!(v32 & HEAPPROFD_CAP_STACK_DELTA);
		hp_cfg.pyframes = !!(v32 & HEAPPROFD_CAP_PYFRAMES);
		/* Same-path records lean on a code set the consumer has: a
		 * new one with every config (the consumer writes its config
		 * again when a claim leaned on code the set lacked). */
		hp_cfg.stack_same = 0;
		if ((v32 & HEAPPROFD_CAP_STACK_SAME) && hp_stack_same_wanted &&
		    hp_cfg.stack_reuse && !hp_codeset_refresh())
			hp_cfg.stack_same = 1;
		hp_interval_reset(hp_cfg.interval);
		hp_debug("config generation %u: interval %llu stack_cap %u flags %#x",
			 gen, (unsigned long long)hp_cfg.interval,
			 hp_cfg.stack_cap, hp_cfg.flags);
	}
	pthread_mutex_unlock(&hp_lock);
}

void hp_wake(void)
{
	__atomic_fetch_add(&hp_sess.ring.cnt->wakeups, 1, __ATOMIC_RELAXED);
	if (hp_sess.kernel)
		hp_kernel_wake(&hp_sess);
	else
		hp_socket_wake(&hp_sess);
}

/* Profiling ends: the hot path goes back to pass-through. The mapping is
 * left in place because other threads may be writing into it right now. */
void hp_session_stop(const char *why)
{
	if (__atomic_exchange_n(&hp_sess.stopped, 1, __ATOMIC_ACQ_REL))
		return;
	__atomic_store_n(&hp_gate, &hp_zero, __ATOMIC_RELEASE);
	hp_dispatch_update();
	hp_debug("profiling stopped: %s", why);
}

/*
 * Is the daemon gone for good? Checked only when the ring is full, and the
 * socket (two system calls) at most every 10 ms, so that a burst of drops
 * stays cheap.
 */
int hp_daemon_gone(void)
{
	static uint64_t last_check_ns;
	uint32_t st = __atomic_load_n(&hp_sess.ring.kstate->state,
				      __ATOMIC_RELAXED);
	struct timespec ts;
	uint64_t t, last;

	if (st == HEAPPROFD_STATE_CLOSED)
		return 1;
	if (hp_sess.kernel || hp_sess.sock_fd < 0)
		return 0;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	t = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
	last = __atomic_load_n(&last_check_ns, __ATOMIC_RELAXED);
	if (t - last < 10000000ULL ||
	    !__atomic_compare_exchange_n(&last_check_ns, &last, t, 0,
					 __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		return 0;
	return hp_socket_peer_gone(&hp_sess);
}

int hp_consumer_present(void)
{
	if (hp_sess.kernel)
		return __atomic_load_n(&hp_sess.ring.kstate->state,
				       __ATOMIC_RELAXED) == HEAPPROFD_STATE_ATTACHED;
	return hp_sess.sock_fd >= 0 ||
	       __atomic_load_n(&hp_sess.ring.kstate->state, __ATOMIC_RELAXED) ==
	       HEAPPROFD_STATE_ATTACHED;
}

/* Open the transport, map the ring and open the gate. */
void hp_session_start(void)
{
	int ret = -1, dormant = hp_cfg.dormant;

	if (hp_sess.live || hp_sess.stopped)
		return;
	if (hp_cfg.transport != HP_TR_SOCKET) {
		ret = hp_kernel_open(&hp_sess, dormant, hp_cfg.ring_size);
		if (ret && hp_cfg.transport == HP_TR_KERNEL) {
			hp_debug("no kernel session (%d); not profiling", ret);
			return;
		}
	}
	if (ret)
		ret = hp_socket_open(&hp_sess, dormant, hp_cfg.ring_size);
	if (ret == -EPROTONOSUPPORT)
		hp_warn("the daemon speaks another ABI version than this client (%d): "
			"not profiling; preload the libheapprofd_client.so installed "
			"with the running heapprofd", HEAPPROFD_ABI_VERSION);
	if (ret) {
		if (ret != -ETIMEDOUT)	/* the transport said so already */
			hp_debug("no session (%d); not profiling", ret);
		return;
	}
	hp_sess.live = 1;
	hp_sess.pid = (int)getpid();
	hp_sess.cfg_gen = 0;
	hp_codeset_forget();	/* this session's daemon has none of our sets */
	__atomic_add_fetch(&hp_reuse_gen, 1, __ATOMIC_RELEASE);
	hp_start_wait();
	hp_interval_reset(hp_cfg.interval);
	hp_config_poll();
	hp_heaps_announce();
	__atomic_store_n(&hp_gate, (const volatile uint32_t *)&hp_sess.ring.cfg->enabled,
			 __ATOMIC_RELEASE);
	hp_dispatch_update();
	hp_debug("session up (%s%s), interval %llu",
		 hp_sess.kernel ? "kernel" : "socket", dormant ? ", dormant" : "",
		 (unsigned long long)hp_cfg.interval);
}

/*
 * Give back what the session holds: its fds and, when @unmap, its ring
 * mapping. No record is written; the caller makes sure no hook runs.
 */
void hp_session_release(bool unmap)
{
	if (unmap && hp_sess.ring.map)
		munmap(hp_sess.ring.map, hp_sess.ring.map_len);
	if (hp_sess.session_fd >= 0)
		close(hp_sess.session_fd);
	if (hp_sess.sock_fd >= 0)
		close(hp_sess.sock_fd);
	if (hp_sess.event_fd >= 0)
		close(hp_sess.event_fd);
	if (hp_sess.memfd >= 0)
		close(hp_sess.memfd);
	memset(&hp_sess, 0, sizeof(hp_sess));
	hp_sess.session_fd = hp_sess.sock_fd = hp_sess.event_fd = hp_sess.memfd = -1;
	hp_record_forget();
}

/* In a fork child: drop everything that belongs to the parent's session
 * without writing to it. */
void hp_session_forget_child(void)
{
	__atomic_store_n(&hp_gate, &hp_zero, __ATOMIC_RELAXED);
	/* The kernel mapping is VM_DONTCOPY: it is not there to unmap. */
	hp_session_release(hp_sess.live && !hp_sess.kernel);
	pthread_mutex_init(&hp_lock, NULL);
}
