/* SPDX-License-Identifier: GPL-2.0 */
/*
 * A minimal daemon for the client tests: it listens on a SOCK_SEQPACKET
 * socket, accepts the clients' hellos (socket_proto.h), maps their rings
 * with hp_ring_map_fd(is_memfd=1) and drains the records into memory.
 */
#ifndef HP_MINIDAEMON_H
#define HP_MINIDAEMON_H

#include <pthread.h>
#include <stdint.h>

#include "../../proto/ring.h"
#include "../../proto/socket_proto.h"

struct md_rec {
	uint16_t type;
	uint16_t flags;		/* as written (STACK_REUSED kept) */
	uint32_t len;		/* as written in the ring */
	uint32_t reused;	/* stack bytes taken from the thread's last record */
	uint32_t nexe;
	uint64_t exe_words[32];	/* stack words that look like PIE text addresses */
	/* The last stack words whose top half is HP_MARK_OUTER / HP_MARK_INNER
	 * (hp_target's "stackmarks"), low halves + 1; 0: none. */
	uint64_t mark_outer, mark_inner, mark_churn;
	union {
		struct heapprofd_rec_alloc alloc;
		struct heapprofd_rec_free free;
		struct heapprofd_rec_heap heap;
		struct heapprofd_rec_hdr hdr;
	} u;
};

#define HP_MARK_OUTER	0x4d4b524fULL	/* "MKRO" */
#define HP_MARK_INNER	0x4d4b5249ULL	/* "MKRI" */
#define HP_MARK_CHURN	0x4d4b5243ULL	/* "MKRC" */

struct md_session {
	struct hp_hello hello;
	int conn, fds[HP_HELLO_FDS_MAX], nfds;
	struct hp_ring ring;
	struct md_rec *recs;
	size_t nrec, cap;
	uint64_t stack_checked, stack_bad;	/* stack copies vs regs */
	/*
	 * Stack reuse, undone as the daemon does: the topmost bytes of each
	 * thread's last ALLOC stack. u.alloc.stack_len of a stored record is
	 * the whole stack's (the record's own part plus what it reused).
	 */
	struct md_top {
		uint32_t tid, len;
		uint64_t top;
		uint8_t b[HEAPPROFD_STACK_REUSE_MAX];
	} *tops;
	size_t ntops;
	uint64_t reused_recs, reuse_unknown, delta_recs;
	int corrupt;
	int paused;		/* do not drain (ring-full tests) */
	int no_store;
	/* A slow daemon: nap_us without reading after every nap_every
	 * records (naps_max of them at most, if not 0); with nap_behind it
	 * says it is behind (uapi consumer.behind) every ms of a nap. */
	unsigned nap_every, nap_us, since_nap, naps_max, naps;
	int nap_behind;
};

#define MD_MAX_SESSIONS 16

struct md {
	char path[108];
	int lfd;
	pthread_t th;
	int stop;
	int refuse;		/* nonzero: reply with this status (-errno) */
	int pause_all;
	int hangup;		/* close the connection after the reply */
	int no_store;		/* count records, keep none (benchmarks) */
	int spin;		/* never sleep: producers never need to wake us */
	unsigned nap_every, nap_us;	/* a slow daemon (md_session) */
	unsigned naps_max;
	int nap_behind;
	int no_caps;		/* an older daemon: no consumer_caps, no config */
	pthread_mutex_t lock;
	struct md_session s[MD_MAX_SESSIONS];
	int nsess;
};

int md_start(struct md *d, const char *path);
void md_stop(struct md *d);	/* joins; a final drain; sessions stay mapped */
void md_free(struct md *d);
void md_drain_session(struct md_session *s);
/* Count ALLOC records of heap with req_size == size. */
size_t md_count_alloc(const struct md_session *s, uint32_t heap, uint64_t size);
#endif
