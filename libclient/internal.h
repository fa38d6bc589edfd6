/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal declarations shared by the files of libheapprofd_client. Nothing
 * here is exported: the library is built with -fvisibility=hidden and only
 * the malloc family and the public heapprofd_* API carry default visibility.
 */
#ifndef HP_INTERNAL_H
#define HP_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ring.h"
#include "sampler.h"

#define HP_EXPORT __attribute__((visibility("default")))
#define HP_TLS __attribute__((tls_model("initial-exec")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- config.c ---------------------------------------------------------- */

enum hp_transport_kind { HP_TR_AUTO, HP_TR_KERNEL, HP_TR_SOCKET };

struct hp_config {
	uint64_t interval;
	uint32_t stack_cap;
	uint32_t flags;			/* HEAPPROFD_CFG_* */
	uint32_t block_timeout_us;
	int dormant;
	int transport;			/* enum hp_transport_kind */
	uint64_t ring_size;
	int have_seed;
	uint64_t seed;
	int quiet;
	int debug;
	char socket_path[108];
	char name[64];			/* HEAPPROFD_NAME, "" = any process */
	int exit_wait_ms;		/* HEAPPROFD_EXIT_WAIT_MS, -1 = unset */
	int system_preload;		/* loaded without LD_PRELOAD naming us */
};

extern struct hp_config hp_cfg;

void hp_config_from_env(void);
int hp_name_matches(void);
void hp_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parsers, exposed for the tests. Return 0 on success, -1 on a bad value. */
int hp_parse_u64(const char *s, uint64_t *out, int allow_suffix);

/* ---- session.c: the process-wide session and the record writer --------- */

struct hp_session {
	struct hp_ring ring;
	int live;		/* ring mapped and usable */
	int kernel;		/* transport: 1 kernel, 0 socket */
	int session_fd;		/* kernel: session fd */
	int sock_fd;		/* socket: connection to the daemon, -1 if none */
	int event_fd;		/* socket: wake-up eventfd */
	int memfd;		/* socket: ring memfd */
	uint32_t cfg_gen;	/* last config generation applied */
	int stopped;		/* the daemon went away: profiling over */
};

extern struct hp_session hp_sess;
/* The hot-path gate: non-zero while sampling. Points at the control page's
 * config.enabled while a ring is live, else at a static zero. */
extern const volatile uint32_t *hp_gate;
extern pthread_mutex_t hp_lock;

/* Effective interval (base << adaptive shift) and its generation. */
extern uint64_t hp_interval_eff;
extern uint32_t hp_interval_gen;

void hp_session_start(void);		/* from the constructor / lazily */
void hp_session_stop(const char *why);	/* the daemon is gone */
void hp_session_forget_child(void);	/* after fork, in the child */
void hp_config_poll(void);		/* reread the control page config */
void hp_wake(void);
uint64_t hp_next_seq(void);

int hp_write_alloc(const void *addr, uint64_t req, uint64_t usable,
		   uint64_t est, uint64_t interval, uint32_t count,
		   uint32_t heap_id, int exact);
int hp_write_free(const void *addr, uint32_t heap_id, uint64_t seq);
int hp_write_heap(uint32_t heap_id, uint64_t interval, const char *name);

/* transport_kernel.c / transport_socket.c */
int hp_kernel_open(struct hp_session *s, int dormant, uint64_t data_size);
void hp_kernel_wake(struct hp_session *s);
int hp_socket_open(struct hp_session *s, int dormant, uint64_t data_size);
void hp_socket_wake(struct hp_session *s);
int hp_socket_peer_gone(struct hp_session *s);

/* ---- per-thread state (hooks.c owns the TLS) --------------------------- */

struct hp_thread {
	struct hp_sampler smp;		/* countdown first: the hot field */
	uint64_t alloc_calls, alloc_bytes, free_calls, free_bytes;
	uint64_t pub_alloc_calls, pub_alloc_bytes, pub_free_calls, pub_free_bytes;
	uint64_t stack_lo, stack_top;
	uint32_t interval_gen;
	int inited;
	int in_hook;			/* reentrancy guard */
	int resolving;			/* inside dlsym bootstrap */
	uint32_t tid;
	struct hp_thread *next, *prev;	/* registry for process exit */
};

extern __thread struct hp_thread hp_self HP_TLS;

void hp_thread_init(struct hp_thread *t);

/* ---- counters.c --------------------------------------------------------- */
void hp_counters_publish(struct hp_thread *t);
void hp_counters_register(struct hp_thread *t);
void hp_counters_flush_all(void);
void hp_counters_reset_child(struct hp_thread *t);
#define HP_PUBLISH_EVERY 1024

/* ---- stack.c ------------------------------------------------------------ */
void hp_stack_bounds(struct hp_thread *t);

/* ---- attach_wait.c ------------------------------------------------------------- */
void hp_start_wait(void);	/* kernel session: wait for the consumer */
void hp_exit_wait(void);

/* ---- fork.c ------------------------------------------------------------- */
void hp_fork_install(void);
extern int hp_child_pending;	/* follow-forks: register lazily */

/* ---- heaps.c ------------------------------------------------------------ */
void hp_heaps_announce(void);

/* ---- the real allocator (hooks.c) -------------------------------------- */
extern size_t (*hp_real_usable)(void *);
void *hp_internal_alloc(size_t n);	/* for our own needs, not sampled */
void hp_resolve(void);
void hp_hooks_init(void);

#endif /* HP_INTERNAL_H */
