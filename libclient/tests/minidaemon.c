// SPDX-License-Identifier: GPL-2.0
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "minidaemon.h"

/*
 * The whole stack of an ALLOC record into whole (*n bytes): its own part
 * and, with HEAPPROFD_ALLOC_STACK_REUSED, the reused top from the thread's
 * previous record. Then remember this stack's top for the thread's next.
 * Returns 0 when the reuse does not fit what this thread wrote before.
 */
static int rebuild(struct md_session *s, const struct heapprofd_rec_alloc *a,
		   const uint8_t *st, uint8_t *whole, uint32_t *n, uint32_t *reused)
{
	struct md_top *t = NULL;
	uint64_t sp = a->regs[HEAPPROFD_X86_64_SP];
	uint32_t k = 0, keep;
	size_t i;
	int ok = 1;

	if (a->stack_len > HEAPPROFD_STACK_CAP_DEFAULT)
		return 0;
	for (i = 0; i < s->ntops; i++)
		if (s->tops[i].tid == a->tid)
			t = &s->tops[i];
	if (!t) {
		s->tops = realloc(s->tops, (s->ntops + 1) * sizeof(*s->tops));
		t = &s->tops[s->ntops++];
		memset(t, 0, sizeof(*t));
		t->tid = a->tid;
	}
	if (a->hdr.flags & HEAPPROFD_ALLOC_STACK_DELTA) {
		/* The runs, and the previous stack's words between them. */
		const struct heapprofd_stack_delta *d = (const void *)st;
		const struct heapprofd_delta_run *run = (const void *)(d + 1);
		const uint8_t *lit = (const uint8_t *)(run + d->nruns);
		uint64_t held_lo = t->top == a->stack_top ? a->stack_top - t->len : UINT64_MAX;
		uint32_t off = 0, j;

		s->delta_recs++;
		for (j = 0; j <= d->nruns; j++) {
			uint32_t end = j < d->nruns ? run[j].off : a->stack_len;

			if (end > off && (sp + off < held_lo || end > a->stack_len ||
					  (j < d->nruns && run[j].off + run[j].len > a->stack_len))) {
				ok = 0;
				break;
			}
			if (end > off)
				memcpy(whole + off, t->b + HEAPPROFD_STACK_REUSE_MAX -
				       (a->stack_top - (sp + off)), end - off);
			if (j == d->nruns)
				break;
			memcpy(whole + run[j].off, lit, run[j].len);
			lit += run[j].len;
			off = run[j].off + run[j].len;
		}
		if (!ok) {
			s->reuse_unknown++;
			t->len = 0;
			*n = 0;
			*reused = 0;
			return 0;
		}
	} else {
		memcpy(whole, st, a->stack_len);
	}
	if (a->hdr.flags & HEAPPROFD_ALLOC_STACK_REUSED) {
		k = a->stack_reused;
		s->reused_recs++;
		if (k > t->len || t->top != a->stack_top ||
		    sp + a->stack_len + k != a->stack_top) {
			s->reuse_unknown++;
			ok = 0;
			k = 0;
		} else {
			memcpy(whole + a->stack_len, t->b + HEAPPROFD_STACK_REUSE_MAX - k, k);
		}
	} else if (a->stack_reused) {
		ok = 0;
	}
	*n = a->stack_len + k;
	*reused = k;
	t->top = a->stack_top;
	t->len = 0;
	if (ok && sp + *n == a->stack_top) {
		keep = *n < HEAPPROFD_STACK_REUSE_MAX ? *n : HEAPPROFD_STACK_REUSE_MAX;
		memcpy(t->b + HEAPPROFD_STACK_REUSE_MAX - keep, whole + *n - keep, keep);
		t->len = keep;
	}
	return ok;
}

static void add_rec(struct md_session *s, const struct heapprofd_rec_hdr *h,
		    uint32_t len)
{
	struct md_rec *r;
	size_t n = len < sizeof(r->u) ? len : sizeof(r->u);

	if (s->nrec == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 1024;
		s->recs = realloc(s->recs, s->cap * sizeof(*s->recs));
	}
	r = &s->recs[s->nrec++];
	memset(r, 0, sizeof(*r));
	memcpy(&r->u, h, n);
	r->type = r->u.hdr.type;
	r->flags = r->u.hdr.flags;
	r->len = len;
	if (r->type == HEAPPROFD_REC_ALLOC && len >= sizeof(r->u.alloc)) {
		/* The copied stack: its first word must be what was on the
		 * stack at regs[SP] when the copy was made; we cannot read the
		 * client's memory here, so check the copy fits in the record. */
		s->stack_checked++;
		if (!(r->flags & HEAPPROFD_ALLOC_STACK_DELTA) &&
		    sizeof(r->u.alloc) + r->u.alloc.stack_len > len) {
			s->stack_bad++;
		} else {
			static uint8_t whole[HEAPPROFD_STACK_CAP_DEFAULT + HEAPPROFD_STACK_REUSE_MAX];
			const uint8_t *st = (const uint8_t *)h + sizeof(r->u.alloc);
			uint32_t k, n = r->u.alloc.stack_len;

			if (!rebuild(s, &r->u.alloc, st, whole, &n, &r->reused))
				s->stack_bad++;
			r->u.alloc.stack_len = n;
			for (k = 0; k + 8 <= n; k += 8) {
				uint64_t w;

				memcpy(&w, whole + k, 8);
				if (((w >> 40) == 0x55 || (w >> 40) == 0x56) && r->nexe < 32)
					r->exe_words[r->nexe++] = w;
				if ((w >> 32) == HP_MARK_OUTER)
					r->mark_outer = (uint32_t)w + 1ULL;
				if ((w >> 32) == HP_MARK_INNER)
					r->mark_inner = (uint32_t)w + 1ULL;
				if ((w >> 32) == HP_MARK_CHURN)
					r->mark_churn = (uint32_t)w + 1ULL;
			}
		}
	}
}

void md_drain_session(struct md_session *s)
{
	const struct heapprofd_rec_hdr *h;
	uint32_t len;
	int stalls = 0;

	if (!s->ring.map || s->corrupt)
		return;
	for (;;) {
		enum hp_ring_status st = hp_ring_peek(&s->ring, &h, &len);

		if (st == HP_RING_READY) {
			if (s->no_store)
				s->nrec++;
			else
				add_rec(s, h, len);
			hp_ring_advance(&s->ring, len);
			stalls = 0;
			if (s->nap_every && ++s->since_nap >= s->nap_every &&
			    (!s->naps_max || s->naps < s->naps_max)) {
				struct timespec nap = { s->nap_us / 1000000,
							(long)(s->nap_us % 1000000) * 1000 };
				struct timespec ms = { 0, 1000000 };

				s->since_nap = 0;
				s->naps++;
				if (!s->nap_behind) {
					nanosleep(&nap, NULL);
					continue;
				}
				for (unsigned t = 0; t < s->nap_us / 1000; t++) {
					hp_ring_behind(&s->ring);
					nanosleep(&ms, NULL);
				}
			}
			continue;
		}
		if (st == HP_RING_NOT_READY) {
			struct timespec ts = { 0, 100000 };

			/* 2 s without progress (even on a loaded machine): a
			 * writer that died mid-record. */
			if (++stalls > 20000) {
				if (hp_ring_skip_stalled(&s->ring))
					s->corrupt = 1;
				stalls = 0;
				if (s->corrupt)
					return;
			}
			nanosleep(&ts, NULL);
			continue;
		}
		if (st == HP_RING_CORRUPT)
			s->corrupt = 1;
		return;
	}
}

static void accept_one(struct md *d)
{
	struct md_session *s;
	struct hp_hello_reply reply;
	char cbuf[CMSG_SPACE(HP_HELLO_FDS_MAX * sizeof(int))];
	struct msghdr m;
	struct iovec iov;
	struct cmsghdr *cm;
	size_t maplen;
	void *map;
	int c, i;
	ssize_t n;

	c = accept4(d->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (c < 0)
		return;
	if (d->nsess == MD_MAX_SESSIONS) {
		close(c);
		return;
	}
	s = &d->s[d->nsess];
	memset(s, 0, sizeof(*s));
	memset(&m, 0, sizeof(m));
	iov.iov_base = &s->hello;
	iov.iov_len = sizeof(s->hello);
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = cbuf;
	m.msg_controllen = sizeof(cbuf);
	n = recvmsg(c, &m, MSG_CMSG_CLOEXEC);
	if (n != (ssize_t)sizeof(s->hello) || s->hello.magic != HP_HELLO_MAGIC) {
		close(c);
		return;
	}
	for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			s->nfds = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
			if (s->nfds > HP_HELLO_FDS_MAX)
				s->nfds = HP_HELLO_FDS_MAX;
			memcpy(s->fds, CMSG_DATA(cm), s->nfds * sizeof(int));
		}
	memset(&reply, 0, sizeof(reply));
	reply.magic = HP_REPLY_MAGIC;
	reply.status = __atomic_load_n(&d->refuse, __ATOMIC_RELAXED);
	reply.session_id = (uint64_t)d->nsess + 1;
	if (s->nfds < HP_HELLO_FD_EXE || s->hello.nfds != (uint32_t)s->nfds)
		reply.status = -EINVAL;
	if (!reply.status) {
		map = hp_ring_map_fd(s->fds[0], 1, s->hello.ctl_size,
				     s->hello.data_size, &maplen);
		if (map == MAP_FAILED || hp_ring_open(&s->ring, map, maplen))
			reply.status = -EINVAL;
		else {
			__atomic_store_n(&s->ring.kstate->state,
					 HEAPPROFD_STATE_ATTACHED, __ATOMIC_RELAXED);
			/* It reads stack deltas (rebuild()): a new config
			 * generation, the client's own values otherwise. */
			if (!d->no_caps) {
				s->ring.cfg->consumer_caps = HEAPPROFD_CAP_STACK_DELTA;
				__atomic_fetch_add(&s->ring.cfg->generation, 1,
						   __ATOMIC_RELEASE);
			}
		}
	}
	if (send(c, &reply, sizeof(reply), MSG_NOSIGNAL) != sizeof(reply) ||
	    reply.status) {
		close(c);
		for (i = 0; i < s->nfds; i++)
			close(s->fds[i]);
		return;
	}
	s->conn = c;
	if (d->hangup) {
		close(c);
		s->conn = -1;
	}
	s->paused = d->pause_all;
	s->no_store = d->no_store;
	s->nap_every = d->nap_every;
	s->nap_us = d->nap_us;
	s->naps_max = d->naps_max;
	s->nap_behind = d->nap_behind;
	pthread_mutex_lock(&d->lock);
	d->nsess++;
	pthread_mutex_unlock(&d->lock);
}

static void *loop(void *arg)
{
	struct md *d = arg;

	while (!__atomic_load_n(&d->stop, __ATOMIC_ACQUIRE)) {
		struct pollfd p[1 + MD_MAX_SESSIONS];
		int i, n = 1;

		p[0].fd = d->lfd;
		p[0].events = POLLIN;
		for (i = 0; i < d->nsess; i++) {
			p[n].fd = d->s[i].fds[1];	/* the eventfd */
			p[n].events = POLLIN;
			n++;
		}
		/* Sleep only after telling the producers (prepare_sleep). */
		for (i = 0; i < d->nsess && !d->spin; i++)
			if (!d->s[i].paused && !hp_ring_prepare_sleep(&d->s[i].ring))
				break;
		poll(p, n, d->spin || i < d->nsess ? 0 : 20);
		for (i = 0; i < d->nsess; i++) {
			uint64_t v;

			if (d->s[i].paused)
				continue;
			hp_ring_awake(&d->s[i].ring);
			if (read(d->s[i].fds[1], &v, sizeof(v)) < 0)
				v = 0;
			md_drain_session(&d->s[i]);
		}
		if (p[0].revents & POLLIN)
			accept_one(d);
	}
	return NULL;
}

int md_start(struct md *d, const char *path)
{
	struct sockaddr_un a;

	memset(d, 0, sizeof(*d));
	pthread_mutex_init(&d->lock, NULL);
	strncpy(d->path, path, sizeof(d->path) - 1);
	unlink(path);
	d->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (d->lfd < 0)
		return -1;
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	memcpy(a.sun_path, path, strlen(path));
	if (bind(d->lfd, (struct sockaddr *)&a, sizeof(a)) || listen(d->lfd, 16))
		return -1;
	return pthread_create(&d->th, NULL, loop, d) ? -1 : 0;
}

void md_stop(struct md *d)
{
	int i;

	__atomic_store_n(&d->stop, 1, __ATOMIC_RELEASE);
	pthread_join(d->th, NULL);
	for (i = 0; i < d->nsess; i++)
		md_drain_session(&d->s[i]);
	close(d->lfd);
	unlink(d->path);
}

void md_free(struct md *d)
{
	int i, j;

	for (i = 0; i < d->nsess; i++) {
		struct md_session *s = &d->s[i];

		if (s->ring.map)
			munmap(s->ring.map, s->ring.map_len);
		for (j = 0; j < s->nfds; j++)
			close(s->fds[j]);
		if (s->conn > 0)
			close(s->conn);
		free(s->recs);
		free(s->tops);
	}
	d->nsess = 0;
}

size_t md_count_alloc(const struct md_session *s, uint32_t heap, uint64_t size)
{
	size_t i, n = 0;

	for (i = 0; i < s->nrec; i++)
		if (s->recs[i].type == HEAPPROFD_REC_ALLOC &&
		    s->recs[i].u.alloc.heap_id == heap &&
		    s->recs[i].u.alloc.req_size == size)
			n++;
	return n;
}
