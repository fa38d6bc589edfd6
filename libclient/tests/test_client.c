// SPDX-License-Identifier: GPL-2.0
/*
 * End-to-end tests of libheapprofd_client over the user-space transport.
 * This program plays a minimal daemon (minidaemon.c) and runs programs
 * under LD_PRELOAD: its own targets, a C++ program, and python3, sqlite3
 * and git, checking the records that arrive and the programs' output.
 *
 * usage: test_client BUILD_DIR
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "minidaemon.h"
#include "../../tests/tap.h"

extern char **environ;

static char lib[512], target[512], linked[512], cxx[512], sockpath[108], tmpdir[64];

struct run {
	int status;
	char out[1 << 16];
	size_t outlen;
	char err[1 << 14];
	size_t errlen;
};

typedef void (*interact_fn)(struct run *r, int in_w, void *arg);

/*
 * Run argv with the client preloaded (or not) and extra environment
 * entries; collect stdout and stderr. interact, if given, is called once the
 * program printed a line, with the write end of its stdin.
 */
static int run_prog(char *const argv[], const char *const *extra, int preload,
		    struct run *r, interact_fn interact, void *arg)
{
	int in[2], out[2], err[2];
	char *env[256];
	char pre[600], sock[160];
	int n = 0, i, done_out = 0, done_err = 0, interacted = 0;
	pid_t pid;

	memset(r, 0, sizeof(*r));
	for (i = 0; environ[i] && n < 200; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) &&
		    strncmp(environ[i], "HEAPPROFD_", 10))
			env[n++] = environ[i];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", lib);
	snprintf(sock, sizeof(sock), "HEAPPROFD_SOCKET=%s", sockpath);
	if (preload)
		env[n++] = pre;
	env[n++] = sock;
	for (i = 0; extra && extra[i] && n < 253; i++)
		env[n++] = (char *)extra[i];
	/* The minidaemon answers the hello from a thread of this test, which a
	 * loaded machine may not run within the client's 200 ms: the program
	 * would then run unprofiled. After the extras, which come first for
	 * getenv. */
	env[n++] = "HEAPPROFD_HELLO_TIMEOUT_MS=60000";
	env[n] = NULL;
	if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		execve(argv[0], argv, env);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	if (!interact)
		close(in[1]);
	while (!done_out || !done_err) {
		struct pollfd p[2] = { { out[0], POLLIN, 0 }, { err[0], POLLIN, 0 } };
		ssize_t k;

		if (poll(p, 2, 30000) <= 0)
			break;
		if (!done_out && p[0].revents) {
			k = read(out[0], r->out + r->outlen, sizeof(r->out) - 1 - r->outlen);
			if (k <= 0)
				done_out = 1;
			else
				r->outlen += (size_t)k;
		}
		if (!done_err && p[1].revents) {
			k = read(err[0], r->err + r->errlen, sizeof(r->err) - 1 - r->errlen);
			if (k <= 0)
				done_err = 1;
			else
				r->errlen += (size_t)k;
		}
		if (interact && !interacted && memchr(r->out, '\n', r->outlen)) {
			interacted = 1;
			interact(r, in[1], arg);
			close(in[1]);
		}
	}
	if (interact && !interacted)
		close(in[1]);
	close(out[0]);
	close(err[0]);
	waitpid(pid, &r->status, 0);
	return WIFEXITED(r->status) ? WEXITSTATUS(r->status) : 128 + WTERMSIG(r->status);
}

/* Check every ALLOC record's fields; returns the number of bad ones. */
/* Only a pidfd's fdinfo has a "Pid:" line. */
static int is_pidfd(int fd)
{
	char path[64], line[128];
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (!found && fgets(line, sizeof(line), f))
		found = !strncmp(line, "Pid:", 4);
	fclose(f);
	return found;
}

static size_t check_allocs(const struct md_session *s, const char **why)
{
	size_t i, bad = 0;

	for (i = 0; i < s->nrec; i++) {
		const struct heapprofd_rec_alloc *a = &s->recs[i].u.alloc;
		uint64_t sp = a->regs[HEAPPROFD_X86_64_SP];
		const char *w = NULL;

		if (s->recs[i].type != HEAPPROFD_REC_ALLOC)
			continue;
		if (a->usable_size < a->req_size && a->heap_id == HEAPPROFD_HEAP_MALLOC)
			w = "usable < req";
		else if (a->nregs != HEAPPROFD_X86_64_NREGS || a->arch != HEAPPROFD_ARCH_X86_64)
			w = "regs";
		else if (!a->regs[HEAPPROFD_X86_64_IP] || !sp || sp >= a->stack_top)
			w = "sp/ip";
		else if (!a->stack_len || a->stack_len > a->stack_top - sp ||
			 a->stack_len > HEAPPROFD_STACK_CAP_DEFAULT)
			w = "stack_len";
		else if (!(a->hdr.flags & HEAPPROFD_ALLOC_STACK_TRUNCATED) &&
			 a->stack_len != a->stack_top - sp)
			w = "untruncated stack not to the top";
		else if (!(a->hdr.flags & HEAPPROFD_ALLOC_STACK_DELTA) &&
			 sizeof(*a) + a->stack_len - s->recs[i].reused > s->recs[i].len)
			w = "record too short";	/* (a delta is rebuilt or stack_bad) */
		else if (!a->tid)
			w = "tid";
		else if (a->hdr.flags & HEAPPROFD_ALLOC_EXACT ?
			 a->est_size != a->req_size :
			 (a->est_size != (uint64_t)a->count * a->interval || !a->count))
			w = "est_size";
		if (w) {
			bad++;
			*why = w;
		}
	}
	return bad;
}

/* Every FREE follows an ALLOC of the same address (and heap) with a lower
 * seq; returns violations. */
static size_t check_frees(const struct md_session *s)
{
	size_t i, j, bad = 0;

	for (i = 0; i < s->nrec; i++) {
		const struct heapprofd_rec_free *f = &s->recs[i].u.free;
		int found = 0;

		if (s->recs[i].type != HEAPPROFD_REC_FREE)
			continue;
		for (j = i; j-- > 0;) {
			const struct heapprofd_rec_alloc *a = &s->recs[j].u.alloc;

			if (s->recs[j].type == HEAPPROFD_REC_ALLOC &&
			    a->addr == f->addr && a->heap_id == f->heap_id) {
				found = a->seq < f->seq;
				break;
			}
		}
		bad += !found;
	}
	return bad;
}

static size_t count_type(const struct md_session *s, uint16_t type)
{
	size_t i, n = 0;

	for (i = 0; i < s->nrec; i++)
		n += s->recs[i].type == type;
	return n;
}

static size_t count_free_of_size(const struct md_session *s, uint64_t size)
{
	size_t i, j, n = 0;

	for (i = 0; i < s->nrec; i++) {
		if (s->recs[i].type != HEAPPROFD_REC_FREE)
			continue;
		for (j = i; j-- > 0;)
			if (s->recs[j].type == HEAPPROFD_REC_ALLOC &&
			    s->recs[j].u.alloc.addr == s->recs[i].u.free.addr) {
				n += s->recs[j].u.alloc.req_size == size;
				break;
			}
	}
	return n;
}

static struct md D;

static void daemon_up(void)
{
	md_start(&D, sockpath);
}

/* HP_TEST_DUMP=1: list the records as TAP comments. */
static void dump(void)
{
	int i;
	size_t j;

	if (!getenv("HP_TEST_DUMP"))
		return;
	for (i = 0; i < D.nsess; i++) {
		const struct md_session *s = &D.s[i];

		tap_diag("session %d pid %u flags %#x nrec %zu corrupt %d written %llu dropped %llu",
			 i, s->hello.pid, s->hello.flags, s->nrec, s->corrupt,
			 (unsigned long long)s->ring.cnt->records_written,
			 (unsigned long long)s->ring.cnt->records_dropped);
		for (j = 0; j < s->nrec; j++) {
			const struct md_rec *r = &s->recs[j];

			if (r->type == HEAPPROFD_REC_ALLOC)
				tap_diag("  ALLOC addr %#llx seq %llu req %llu usable %llu est %llu heap %u tid %u flags %#x stack %u len %u top %#llx sp %#llx",
					 (unsigned long long)r->u.alloc.addr,
					 (unsigned long long)r->u.alloc.seq,
					 (unsigned long long)r->u.alloc.req_size,
					 (unsigned long long)r->u.alloc.usable_size,
					 (unsigned long long)r->u.alloc.est_size,
					 r->u.alloc.heap_id, r->u.alloc.tid, r->flags,
					 r->u.alloc.stack_len, r->len,
					 (unsigned long long)r->u.alloc.stack_top,
					 (unsigned long long)r->u.alloc.regs[1]);
			else if (r->type == HEAPPROFD_REC_FREE)
				tap_diag("  FREE seq %llu heap %u addr %#llx",
					 (unsigned long long)r->u.free.seq, r->u.free.heap_id,
					 (unsigned long long)r->u.free.addr);
			else
				tap_diag("  type %u", r->type);
		}
	}
}

static void daemon_down(void)
{
	md_stop(&D);
	dump();
}

#define ENV(...) ((const char *const[]){ __VA_ARGS__, NULL })

static void t_basic(void)
{
	char *argv[] = { target, "basic", "500", "4321", NULL };
	struct run r;
	const char *why = "";
	int rc;

	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=1"), 1, &r, NULL, NULL);
	daemon_down();
	tap_ok(rc == 0 && D.nsess == 1, "client: basic target runs under the client (rc %d, sessions %d)",
	       rc, D.nsess);
	if (D.nsess == 1) {
		struct md_session *s = &D.s[0];
		size_t bad = check_allocs(s, &why);

		tap_ok(s->hello.nfds == HP_HELLO_FDS_MAX && s->nfds == HP_HELLO_FDS_MAX &&
		       s->hello.version == HP_PROTO_VERSION &&
		       s->hello.data_size == HEAPPROFD_DATA_SIZE_DEFAULT &&
		       is_pidfd(s->fds[HP_HELLO_FD_PIDFD]),
		       "client: hello carries memfd, eventfd, maps, mem, a pidfd, exe");
		{
			int seals = fcntl(s->fds[0], F_GET_SEALS);
			int shrink = ftruncate(s->fds[0], 4096) ? errno : 0;
			int grow = ftruncate(s->fds[0], (off_t)(HEAPPROFD_CTL_SIZE +
					     2 * HEAPPROFD_DATA_SIZE_DEFAULT)) ? errno : 0;
			int unseal = fcntl(s->fds[0], F_ADD_SEALS, F_SEAL_WRITE) ? errno : 0;
			const int want = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

			tap_ok(seals >= 0 && (seals & want) == want && shrink == EPERM &&
			       grow == EPERM && unseal == EPERM,
			       "client: the ring memfd is sealed (seals %#x): ftruncate shrink/grow and new seals fail with EPERM (%d/%d/%d)",
			       seals, shrink, grow, unseal);
		}
		tap_ok(md_count_alloc(s, 0, 4321) == 500 && count_free_of_size(s, 4321) == 500,
		       "client: interval 1 records all 500 mallocs (%zu) and their frees (%zu)",
		       md_count_alloc(s, 0, 4321), count_free_of_size(s, 4321));
		tap_ok(md_count_alloc(s, 0, 1010) == 1 && md_count_alloc(s, 0, 1030) == 1 &&
		       md_count_alloc(s, 0, 1040) == 1 && md_count_alloc(s, 0, 1050) == 1 &&
		       md_count_alloc(s, 0, 1060) == 1 && md_count_alloc(s, 0, 1280) == 1 &&
		       md_count_alloc(s, 0, 1070) == 1 && md_count_alloc(s, 0, 4096) >= 1,
		       "client: calloc, realloc, reallocarray, memalign, posix_memalign, aligned_alloc, valloc, pvalloc recorded");
		tap_ok(!bad && !s->corrupt && s->stack_checked,
		       "client: %zu ALLOC records have sane fields (req/usable, regs, sp, stack_len, tid, est) %s",
		       (size_t)count_type(s, HEAPPROFD_REC_ALLOC), bad ? why : "");
		tap_ok(!check_frees(s), "client: every FREE follows its ALLOC by seq (%zu frees)",
		       count_type(s, HEAPPROFD_REC_FREE));
		{
			/* The 500 mallocs come from one loop: after the first,
			 * each record carries only the part of the stack that
			 * changed, and every one is made whole again (the
			 * checks below run on the whole stacks). */
			size_t i, total = 0, reused = 0;
			uint64_t sent = 0, whole = 0;

			for (i = 0; i < s->nrec; i++) {
				const struct md_rec *m = &s->recs[i];

				if (m->type != HEAPPROFD_REC_ALLOC || m->u.alloc.req_size != 4321)
					continue;
				total++;
				reused += !!(m->flags & HEAPPROFD_ALLOC_STACK_REUSED);
				whole += m->u.alloc.stack_len;
				sent += m->u.alloc.stack_len - m->reused;
			}
			tap_ok(total == 500 && reused >= 499 && !s->reuse_unknown && !s->stack_bad &&
			       sent * 2 < whole,
			       "client: stack reuse: %zu of %zu records sent only the changed part of the stack (%llu of %llu bytes), all made whole",
			       reused, total, (unsigned long long)sent, (unsigned long long)whole);
		}
		{
			unsigned long long fn = 0;
			const char *f;
			size_t i, with = 0, total = 0;
			uint32_t k;

			r.out[r.outlen] = 0;
			f = strstr(r.out, "fn=");
			if (f)
				fn = strtoull(f + 3, NULL, 16);
			for (i = 0; i < s->nrec; i++) {
				const struct md_rec *m = &s->recs[i];

				if (m->type != HEAPPROFD_REC_ALLOC || m->u.alloc.req_size != 4321)
					continue;
				total++;
				for (k = 0; k < m->nexe; k++)
					if (m->exe_words[k] > fn && m->exe_words[k] < fn + 4096) {
						with++;
						break;
					}
			}
			tap_ok(fn && total == 500 && with == total,
			       "client: the copied stacks hold a return address into the caller (%zu of %zu)",
			       with, total);
		}
		{
			/* The main thread's copy ends 64 bytes (rounded to 8)
			 * above __libc_stack_end, not at the top of [stack]
			 * with the arguments and environment, and still holds
			 * main's frame. */
			unsigned long long mn = 0, se = 0, want;
			const char *f;
			size_t i, good = 0, total = 0, inmain = 0;
			uint32_t k;

			if ((f = strstr(r.out, "main=")))
				mn = strtoull(f + 5, NULL, 16);
			if ((f = strstr(r.out, "stack_end=")))
				se = strtoull(f + 10, NULL, 16);
			want = (se + 64 + 7) & ~7ULL;
			for (i = 0; i < s->nrec; i++) {
				const struct heapprofd_rec_alloc *a = &s->recs[i].u.alloc;
				const struct md_rec *m = &s->recs[i];

				if (m->type != HEAPPROFD_REC_ALLOC || a->req_size != 4321)
					continue;
				total++;
				if (a->stack_top == want && !(m->flags & HEAPPROFD_ALLOC_STACK_TRUNCATED) &&
				    a->stack_len == want - a->regs[HEAPPROFD_X86_64_SP])
					good++;
				for (k = 0; k < m->nexe; k++)
					if (m->exe_words[k] > mn && m->exe_words[k] < mn + 4096) {
						inmain++;
						break;
					}
			}
			tap_ok(se && mn && total == 500 && good == total && inmain == total,
			       "client: the main thread's stack copy ends at __libc_stack_end + 64 (%zu of %zu) and holds a return address into main (%zu)",
			       good, total, inmain);
		}
		{
			/* records_written/bytes_written are counted per thread
			 * and published with the exact counters: at exit they
			 * equal what the daemon read. */
			const struct heapprofd_counters *c = s->ring.cnt;
			unsigned long long bytes = 0;
			size_t i;

			for (i = 0; i < s->nrec; i++)
				bytes += hp_ring_align(s->recs[i].len);
			tap_ok(c->records_written == s->nrec && c->bytes_written == bytes &&
			       !c->records_dropped,
			       "client: records_written %llu = records read %zu, bytes_written %llu = %llu",
			       (unsigned long long)c->records_written, s->nrec,
			       (unsigned long long)c->bytes_written, bytes);
		}
	}
	md_free(&D);
	/* HEAPPROFD_STACK_REUSE=0: every record carries its whole stack. */
	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=1", "HEAPPROFD_STACK_REUSE=0"), 1, &r, NULL,
		      NULL);
	daemon_down();
	if (D.nsess == 1) {
		struct md_session *s = &D.s[0];

		tap_ok(rc == 0 && md_count_alloc(s, 0, 4321) == 500 && !s->reused_recs &&
		       !check_allocs(s, &why),
		       "client: HEAPPROFD_STACK_REUSE=0: all 500 records carry their whole stack (%llu reused)",
		       (unsigned long long)s->reused_recs);
	} else {
		tap_ok(0, "client: HEAPPROFD_STACK_REUSE=0 run (rc %d, sessions %d)", rc, D.nsess);
	}
	md_free(&D);
}

/*
 * Stack reuse is exact: every record's stack, made whole from the thread's
 * previous one, holds the words the program had on its stack at that
 * malloc, the inner one that changes with every call and the outer one
 * near the top that changes every fiftieth (hp_target stackmarks).
 */
static void stackmarks(int no_caps)
{
	char *argv[] = { target, "stackmarks", "400", NULL };
	size_t i, n = 0, right = 0, reused = 0, delta = 0;
	struct run r;
	int rc;

	daemon_up();
	D.no_caps = no_caps;
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=1"), 1, &r, NULL, NULL);
	daemon_down();
	for (i = 0; D.nsess == 1 && i < D.s[0].nrec; i++) {
		const struct md_rec *m = &D.s[0].recs[i];
		uint64_t k;

		if (m->type != HEAPPROFD_REC_ALLOC || m->u.alloc.req_size < 5000 ||
		    m->u.alloc.req_size >= 5400)
			continue;
		k = m->u.alloc.req_size - 5000;
		n++;
		reused += !!(m->flags & HEAPPROFD_ALLOC_STACK_REUSED);
		delta += !!(m->flags & HEAPPROFD_ALLOC_STACK_DELTA);
		right += m->mark_inner == k + 1 && m->mark_outer == k - k % 50 + 1 &&
			 m->mark_churn == k - k % 2 + 1;
	}
	/* Below the outer mark, the 4 KiB of the outer frame went as a delta
	 * (a word or two changed) each time: those too are exact. A daemon
	 * that does not say it reads deltas gets none. */
	tap_ok(rc == 0 && n == 400 && right == n && reused >= 390 &&
	       (no_caps ? delta == 0 : delta >= 390),
	       "client: stack reuse is exact%s: %zu of %zu stacks hold the words the program had "
	       "(inner; outer near the top every 50th, deep every other), %zu reused, %zu as deltas",
	       no_caps ? " (a daemon without HEAPPROFD_CAP_STACK_DELTA)" : "", right, n, reused,
	       delta);
	md_free(&D);
}

static void t_stackmarks(void)
{
	stackmarks(0);
	stackmarks(1);
}

static void t_sampled(void)
{
	char *argv[] = { target, "basic", "20000", "1000", NULL };
	struct run r;
	const char *why = "";
	double est = 0;
	size_t i, n = 0;
	int rc;

	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_SEED=7", "HEAPPROFD_BLOCK=10000000"), 1, &r, NULL, NULL);
	daemon_down();
	if (D.nsess == 1) {
		struct md_session *s = &D.s[0];

		for (i = 0; i < s->nrec; i++)
			if (s->recs[i].type == HEAPPROFD_REC_ALLOC &&
			    s->recs[i].u.alloc.req_size == 1000) {
				est += (double)s->recs[i].u.alloc.est_size;
				n++;
				if (s->recs[i].u.alloc.interval != 4096)
					why = "interval";
			}
		tap_ok(rc == 0 && !check_allocs(s, &why) && !*why &&
		       est > 0.9 * 20e6 && est < 1.1 * 20e6,
		       "client: default interval: %zu samples estimate %.0f of 20000000 bytes (within 10%%) %s",
		       n, est, why);
	} else {
		tap_ok(0, "client: default interval: no session");
	}
	md_free(&D);
}

static void t_threads(void)
{
	char *argv[] = { target, "threads", "5000", NULL };
	struct run r;
	uint32_t tids[8];
	size_t i, ntid = 0;
	int rc;

	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=1", "HEAPPROFD_BLOCK=10000000"), 1, &r, NULL, NULL);
	daemon_down();
	if (D.nsess == 1) {
		struct md_session *s = &D.s[0];
		const char *why = "";

		for (i = 0; i < s->nrec; i++) {
			uint32_t t = s->recs[i].u.alloc.tid;
			size_t k;

			if (s->recs[i].type != HEAPPROFD_REC_ALLOC ||
			    s->recs[i].u.alloc.req_size != 3001)
				continue;
			for (k = 0; k < ntid && tids[k] != t; k++)
				;
			if (k == ntid && ntid < 8)
				tids[ntid++] = t;
		}
		tap_ok(rc == 0 && md_count_alloc(s, 0, 3001) == 20000 &&
		       count_free_of_size(s, 3001) == 20000 && ntid == 4 &&
		       s->ring.cnt->records_dropped == 0 && !check_allocs(s, &why),
		       "client: 4 threads x 5000 at interval 1 with HEAPPROFD_BLOCK: all %zu allocs and %zu frees arrive, %zu tids, dropped %llu",
		       md_count_alloc(s, 0, 3001), count_free_of_size(s, 3001), ntid,
		       (unsigned long long)s->ring.cnt->records_dropped);
	} else {
		tap_ok(0, "client: threads: no session");
	}
	md_free(&D);
}

static void t_cxx(void)
{
	char *argv[] = { cxx, NULL };
	struct run r0, r1;
	const char *why = "";
	int rc0, rc1, rc2;
	size_t bad;

	rc0 = run_prog(argv, NULL, 0, &r0, NULL, NULL);
	daemon_up();
	rc1 = run_prog(argv, ENV("HEAPPROFD_INTERVAL=1"), 1, &r1, NULL, NULL);
	daemon_down();
	bad = D.nsess == 1 ? check_allocs(&D.s[0], &why) : 1;
	tap_ok(rc0 == 0 && rc1 == 0 && r0.outlen && r0.outlen == r1.outlen &&
	       !memcmp(r0.out, r1.out, r0.outlen) && !bad,
	       "client: multi-threaded C++ (new/delete, realloc chains, aligned) same output at interval 1, records sane %s",
	       why);
	md_free(&D);
	daemon_up();
	rc2 = run_prog(argv, NULL, 1, &r1, NULL, NULL);
	daemon_down();
	tap_ok(rc2 == 0 && r0.outlen == r1.outlen && !memcmp(r0.out, r1.out, r0.outlen) &&
	       D.nsess == 1 && count_type(&D.s[0], HEAPPROFD_REC_ALLOC) > 0,
	       "client: multi-threaded C++ same output at the default interval (%zu samples)",
	       D.nsess ? count_type(&D.s[0], HEAPPROFD_REC_ALLOC) : 0);
	md_free(&D);
}

static int counters_of(int n, struct heapprofd_counters *c)
{
	char nb[16];
	char *argv[] = { target, "count", nb, "64", NULL };
	struct run r;
	int rc;

	snprintf(nb, sizeof(nb), "%d", n);
	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=1G"), 1, &r, NULL, NULL);
	daemon_down();
	if (D.nsess != 1 || rc) {
		printf("# count %d: exit %d, %d session(s); stderr: %.*s\n", n, rc, D.nsess,
		       (int)r.errlen, r.err);
		rc = -1;
	}
	else
		*c = *D.s[0].ring.cnt;
	md_free(&D);
	return rc;
}

static void t_counters(void)
{
	struct heapprofd_counters a, b;
	uint64_t fb, ab, us;
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (counters_of(1000, &a) || counters_of(3000, &b)) {
		tap_ok(0, "client: exact counters: runs failed");
		return;
	}
	/* Both byte counters count usable sizes (allocated - freed = in use):
	 * the same for each of the 2000 blocks, and (when this program uses
	 * glibc's malloc too) what malloc_usable_size reports here. */
	fb = b.free_bytes - a.free_bytes;
	ab = b.alloc_bytes - a.alloc_bytes;
	us = fb / 2000;
#ifndef __SANITIZE_ADDRESS__
	{
		void *p = malloc(64);

		if (us != malloc_usable_size(p))
			us = 0;	/* fails below */
		free(p);
	}
#endif
	tap_ok(b.alloc_calls - a.alloc_calls == 2000 && b.free_calls - a.free_calls == 2000 &&
	       ab == fb && fb == 2000 * us && us >= 64 && us <= 64 + 32 &&
	       b.alloc_bytes - b.free_bytes == a.alloc_bytes - a.free_bytes,
	       "client: exact counters: 2000 more mallocs of 64 -> calls +%llu bytes +%llu, frees +%llu bytes +%llu (usable %llu), in use unchanged",
	       (unsigned long long)(b.alloc_calls - a.alloc_calls), (unsigned long long)ab,
	       (unsigned long long)(b.free_calls - a.free_calls),
	       (unsigned long long)fb, (unsigned long long)us);
}

/* One run of hp_target countmix n: the published counters and the
 * program's own sums (calls and usable bytes). */
static int countmix_of(int n, const char *interval, struct heapprofd_counters *c,
		       unsigned long long own[4])
{
	char nb[16], iv[64];
	char *argv[] = { target, "countmix", nb, NULL };
	const char *env[] = { iv, NULL };
	const char *m;
	struct run r;
	int rc;

	snprintf(nb, sizeof(nb), "%d", n);
	snprintf(iv, sizeof(iv), "HEAPPROFD_INTERVAL=%s", interval);
	daemon_up();
	rc = run_prog(argv, env, 1, &r, NULL, NULL);
	daemon_down();
	m = memmem(r.out, r.outlen, "mix ", 4);
	if (D.nsess != 1 || rc || !m ||
	    sscanf(m, "mix %llu %llu %llu %llu", &own[0], &own[1], &own[2], &own[3]) != 4)
		rc = -1;
	else
		*c = *D.s[0].ring.cnt;
	md_free(&D);
	return rc;
}

/*
 * The exact counters over every entry point, mmap'ed blocks and two
 * threads, unsampled (the fast path only) and sampled (slow paths, sampled
 * frees, realloc of sampled blocks): what two runs differ by equals what
 * the program itself counted that they differ by.
 */
static void t_countmix(void)
{
	static const char *const iv[] = { "1G", "4096" };
	struct heapprofd_counters a, b;
	unsigned long long oa[4], ob[4], d[4], own[4], over[2][4] = { { 0 } };
	int k, ok, got = 0;

	for (k = 0; k < 2; k++) {
		memset(&a, 0, sizeof(a));
		memset(&b, 0, sizeof(b));
		if (countmix_of(100, iv[k], &a, oa) || countmix_of(400, iv[k], &b, ob)) {
			tap_ok(0, "client: exact counters, mixed calls at interval %s: runs failed",
			       iv[k]);
			continue;
		}
		/* What the counters hold beyond this mode's own calls
		 * (stdio's buffer, ...): the same whether samples are
		 * recorded or not, since the library's own allocations
		 * (pthread_getattr_np on the first sample of a thread) are
		 * not counted. */
		over[k][0] = b.alloc_calls - ob[0];
		over[k][1] = b.alloc_bytes - ob[1];
		over[k][2] = b.free_calls - ob[2];
		over[k][3] = b.free_bytes - ob[3];
		d[0] = b.alloc_calls - a.alloc_calls;
		d[1] = b.alloc_bytes - a.alloc_bytes;
		d[2] = b.free_calls - a.free_calls;
		d[3] = b.free_bytes - a.free_bytes;
		ok = 1;
		for (int i = 0; i < 4; i++) {
			own[i] = ob[i] - oa[i];
			ok &= d[i] == own[i];
		}
		tap_ok(ok && own[0] > 0,
		       "client: exact counters, mixed calls and 2 threads at interval %s: "
		       "+%llu calls +%llu bytes / +%llu frees +%llu bytes (program: %llu %llu / %llu %llu)",
		       iv[k], d[0], d[1], d[2], d[3], own[0], own[1], own[2], own[3]);
		got++;
	}
	tap_ok(got == 2 && !memcmp(over[0], over[1], sizeof(over[0])),
	       "client: the library's own allocations are not counted: the same %llu calls %llu bytes "
	       "besides the program's at interval 1G (no sample) and 4096 (%llu calls %llu bytes)",
	       over[0][0], over[0][1], over[1][0], over[1][1]);
}

static void t_fork(void)
{
	char *argv[] = { target, "fork", NULL };
	struct run r;
	int rc;

	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=1"), 1, &r, NULL, NULL);
	daemon_down();
	tap_ok(rc == 0 && D.nsess == 1 && md_count_alloc(&D.s[0], 0, 2001) == 1 &&
	       md_count_alloc(&D.s[0], 0, 2002) == 0 && md_count_alloc(&D.s[0], 0, 2003) == 100 &&
	       count_free_of_size(&D.s[0], 2001) == 1 && !D.s[0].corrupt,
	       "client: fork without follow-forks: the child writes nothing into the parent's ring");
	md_free(&D);
	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=1", "HEAPPROFD_FOLLOW_FORKS=1"), 1, &r, NULL, NULL);
	daemon_down();
	tap_ok(rc == 0 && D.nsess == 2 && md_count_alloc(&D.s[0], 0, 2002) == 0 &&
	       md_count_alloc(&D.s[1], 0, 2002) == 100 && md_count_alloc(&D.s[1], 0, 2003) == 0 &&
	       D.s[1].hello.pid != D.s[0].hello.pid && count_free_of_size(&D.s[1], 2001) == 0 &&
	       !check_frees(&D.s[1]) && count_free_of_size(&D.s[0], 2001) == 1,
	       "client: fork with follow-forks: the child registers its own session (%d sessions); "
	       "its free of the parent's sampled block is not recorded in it (%zu FREEs without "
	       "their ALLOC)", D.nsess, D.nsess == 2 ? check_frees(&D.s[1]) : 0);
	md_free(&D);
}

static void t_exec(void)
{
	char *argv[] = { target, "exec", NULL };
	struct run r;
	int rc;

	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=1"), 1, &r, NULL, NULL);
	daemon_down();
	r.out[r.outlen] = 0;
	tap_ok(rc == 0 && !strcmp(r.out, "LD_PRELOAD=\n") && D.nsess == 1 &&
	       md_count_alloc(&D.s[0], 0, 2004) == 0,
	       "client: exec without follow-forks: LD_PRELOAD stripped, the new image is not profiled");
	md_free(&D);
	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=1", "HEAPPROFD_FOLLOW_FORKS=1"), 1, &r, NULL, NULL);
	daemon_down();
	r.out[r.outlen] = 0;
	tap_ok(rc == 0 && strstr(r.out, lib) && D.nsess == 2 &&
	       md_count_alloc(&D.s[1], 0, 2004) == 100 && md_count_alloc(&D.s[0], 0, 2004) == 0,
	       "client: exec with follow-forks: LD_PRELOAD kept, the new image registers a session");
	md_free(&D);
}

/*
 * The exec family is wrapped (exec.c): every variant still runs its program
 * with the right arguments and environment, a failing exec still fails with
 * its errno, and the image that execs publishes its exact counters first
 * (at interval 1G nothing else would have published 500 allocations).
 */
static void t_exec_family(void)
{
	char *argv[] = { target, "execall", NULL };
	char *argv2[] = { target, "execcount", "500", NULL };
	struct run r;
	int rc;

	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=4096"), 1, &r, NULL, NULL);
	daemon_down();
	r.out[r.outlen] = 0;
	tap_ok(rc == 0 && strstr(r.out, "execall ok") && D.nsess == 1,
	       "client: execl/execle/execv/execve/execvpe/execvp/execlp/fexecve run their programs, a failing exec returns ENOENT %s",
	       rc ? r.out : "");
	md_free(&D);
	daemon_up();
	rc = run_prog(argv2, ENV("HEAPPROFD_INTERVAL=1G"), 1, &r, NULL, NULL);
	daemon_down();
	tap_ok(rc == 0 && D.nsess == 1 && D.s[0].ring.cnt->alloc_calls >= 500 &&
	       D.s[0].ring.cnt->free_calls >= 500,
	       "client: an image that execs publishes its exact counters first (alloc_calls %llu)",
	       D.nsess ? (unsigned long long)D.s[0].ring.cnt->alloc_calls : 0ULL);
	md_free(&D);
}

/* The session once it is there, configured for interval 1 (what a daemon
 * does: fill in, bump the generation; enabling is the caller's). */
static struct md_session *configured_session(void)
{
	struct md_session *s;
	int i;

	for (i = 0; i < 200 && !__atomic_load_n(&D.nsess, __ATOMIC_ACQUIRE); i++)
		usleep(10000);
	if (!D.nsess)
		return NULL;
	s = &D.s[0];
	s->ring.cfg->interval = 1;
	__atomic_add_fetch(&s->ring.cfg->generation, 1, __ATOMIC_RELEASE);
	return s;
}

static void enable_session(struct run *r, int in_w, void *arg)
{
	struct md_session *s = configured_session();

	(void)r;
	(void)arg;
	if (!s)
		return;
	__atomic_store_n(&s->ring.cfg->enabled, 1, __ATOMIC_RELEASE);
	if (write(in_w, "g", 1) != 1)
		return;
}

static void t_dormant(void)
{
	char *argv[] = { target, "dormant", NULL };
	struct run r;
	int rc;

	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_DORMANT=1"), 1, &r, enable_session, NULL);
	daemon_down();
	tap_ok(rc == 0 && D.nsess == 1 && (D.s[0].hello.flags & HP_HELLO_DORMANT) &&
	       md_count_alloc(&D.s[0], 0, 111) == 0 && md_count_alloc(&D.s[0], 0, 222) == 100,
	       "client: dormant: nothing before the config page enables it, then interval 1 from the config (%zu/%zu)",
	       D.nsess ? md_count_alloc(&D.s[0], 0, 111) : 0,
	       D.nsess ? md_count_alloc(&D.s[0], 0, 222) : 0);
	md_free(&D);
}

/* enable, disable, enable again, each followed by a go to the target */
static void reattach_session(struct run *r, int in_w, void *arg)
{
	struct md_session *s = configured_session();
	int i;

	(void)r;
	(void)arg;
	if (!s)
		return;
	for (i = 0; i < 3; i++) {
		__atomic_store_n(&s->ring.cfg->enabled, i != 1, __ATOMIC_RELEASE);
		if (write(in_w, "g", 1) != 1)
			return;
		usleep(600000);	/* the target's step takes microseconds */
	}
}

/*
 * The gate closes and opens again, and calloc is the first to find it open
 * (free had been switched to its variant that does not read the gate):
 * every sampled calloc's free still reaches the daemon.
 */
static void t_reattach_calloc(void)
{
	char *argv[] = { target, "reattach_calloc", NULL };
	size_t i, k, nalloc = 0, nfreed = 0;
	struct run r;
	int rc;

	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_DORMANT=1"), 1, &r, reattach_session, NULL);
	daemon_down();
	for (i = 0; D.nsess && i < D.s[0].nrec; i++) {
		const struct md_rec *a = &D.s[0].recs[i];

		if (a->type != HEAPPROFD_REC_ALLOC || a->u.alloc.req_size != 333)
			continue;
		nalloc++;
		for (k = i + 1; k < D.s[0].nrec; k++)
			if (D.s[0].recs[k].type == HEAPPROFD_REC_FREE &&
			    D.s[0].recs[k].u.free.addr == a->u.alloc.addr) {
				nfreed++;
				break;
			}
	}
	tap_ok(rc == 0 && D.nsess == 1 && md_count_alloc(&D.s[0], 0, 4441) == 10 &&
	       md_count_alloc(&D.s[0], 0, 4442) == 0 && nalloc == 100 && nfreed == 100,
	       "client: profiled (%zu/10), gate closed (%zu/0), opened again, calloc first: %zu/100 sampled, %zu/100 of their frees reach the daemon (rc %d)",
	       D.nsess ? md_count_alloc(&D.s[0], 0, 4441) : 0,
	       D.nsess ? md_count_alloc(&D.s[0], 0, 4442) : 0, nalloc, nfreed, rc);
	md_free(&D);
}

static const struct md_rec *find_alloc(const struct md_session *s, uint64_t size)
{
	size_t i;

	for (i = 0; i < s->nrec; i++)
		if (s->recs[i].type == HEAPPROFD_REC_ALLOC && s->recs[i].u.alloc.req_size == size)
			return &s->recs[i];
	return NULL;
}

/* FREE records of the allocation a (same address, larger seq, before the
 * next ALLOC at that address); the largest seq in *seq. */
static size_t frees_of(const struct md_session *s, const struct md_rec *a, uint64_t *seq)
{
	uint64_t addr = a->u.alloc.addr, lo = a->u.alloc.seq, hi = ~0ULL;
	size_t i, n = 0;

	*seq = 0;
	for (i = 0; i < s->nrec; i++)
		if (s->recs[i].type == HEAPPROFD_REC_ALLOC && s->recs[i].u.alloc.addr == addr &&
		    s->recs[i].u.alloc.seq > lo && s->recs[i].u.alloc.seq < hi)
			hi = s->recs[i].u.alloc.seq;
	for (i = 0; i < s->nrec; i++)
		if (s->recs[i].type == HEAPPROFD_REC_FREE && s->recs[i].u.free.addr == addr &&
		    s->recs[i].u.free.seq > lo && s->recs[i].u.free.seq < hi) {
			n++;
			if (s->recs[i].u.free.seq > *seq)
				*seq = s->recs[i].u.free.seq;
		}
	return n;
}

/*
 * Marked blocks (mark.h): sampled blocks carry a mark and an offset in
 * front of the program's address; resizing between plain and marked
 * blocks, the aligned family, frees after the gate closed, and plain
 * blocks with a forged mark all work (hp_target's mode_marks checks the
 * contents, alignments and usable sizes and exits with a code per
 * mismatch). Each sampled block freed while the gate was open has its
 * FREE; none is written while it is closed.
 */
static void t_marks(void)
{
	char *argv[] = { target, "marks", NULL };
	static const uint64_t sizes[] = { 3000, 5000, 7000, 1500, 2560, 1234, 4096, 999, 4443 };
	size_t i, nalloc = 0, nfreed = 0;
	struct run r;
	int rc;

	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_DORMANT=1"), 1, &r, reattach_session, NULL);
	daemon_down();
	for (i = 0; D.nsess == 1 && i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		const struct md_rec *a = find_alloc(&D.s[0], sizes[i]);
		uint64_t seq;

		nalloc += a != NULL;
		/* 3000, 5000 and 7000 are freed (or moved) with the gate
		 * closed: no FREE. */
		if (a && frees_of(&D.s[0], a, &seq) == (i >= 3))
			nfreed++;
	}
	tap_ok(rc == 0 && D.nsess == 1 && nalloc == 9 && nfreed == 9 && !check_frees(&D.s[0]),
	       "client: marked blocks: realloc plain<->marked, aligned family, forged marks, frees after the gate closed (rc %d, %zu/9 recorded, %zu/9 with the right FREEs)",
	       rc, nalloc, nfreed);
	md_free(&D);
}

static void t_realloc_fail(void)
{
	char *argv[] = { target, "reallocfail", NULL };
	const struct md_rec *a = NULL, *m = NULL, *z = NULL;
	uint64_t fseq = 0, zseq = 0;
	size_t nf = 0, nz = 0;
	struct run r;
	int rc;

	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=1"), 1, &r, NULL, NULL);
	daemon_down();
	if (D.nsess == 1) {
		a = find_alloc(&D.s[0], 5000);
		m = find_alloc(&D.s[0], 5001);
		z = find_alloc(&D.s[0], 5002);
		if (a)
			nf = frees_of(&D.s[0], a, &fseq);
		if (z)
			nz = frees_of(&D.s[0], z, &zseq);
	}
	tap_ok(rc == 0 && a && m && nf == 1 && fseq > m->u.alloc.seq,
	       "client: a failed realloc keeps the block tracked: one FREE, at the real free (after the marker: %llu > %llu)",
	       (unsigned long long)fseq, m ? (unsigned long long)m->u.alloc.seq : 0ULL);
	tap_ok(rc == 0 && z && nz == 1 && zseq > z->u.alloc.seq && !check_frees(&D.s[0]),
	       "client: realloc(p, 0) is a free (%zu FREE records)", nz);
	md_free(&D);
}

/*
 * Whole-system mode: a client loaded without LD_PRELOAD naming it (from
 * /etc/ld.so.preload; here as a DT_NEEDED library of hp_target_linked) is
 * dormant unless HEAPPROFD_DORMANT says otherwise.
 */
static void t_system_preload(void)
{
	char *argv[] = { linked, "dormant", NULL };
	size_t n111[3] = { 0 }, n222[3] = { 0 };
	int rc[3], dormant[3] = { -1, -1, -1 }, k;
	struct run r;

	for (k = 0; k < 3; k++) {
		daemon_up();
		rc[k] = run_prog(argv, k == 0 ? NULL : k == 1 ?
				 ENV("HEAPPROFD_DORMANT=0", "HEAPPROFD_INTERVAL=1") :
				 ENV("HEAPPROFD_INTERVAL=1"),
				 k == 2, &r, enable_session, NULL);
		daemon_down();
		if (D.nsess == 1) {
			dormant[k] = !!(D.s[0].hello.flags & HP_HELLO_DORMANT);
			n111[k] = md_count_alloc(&D.s[0], 0, 111);
			n222[k] = md_count_alloc(&D.s[0], 0, 222);
		}
		md_free(&D);
	}
	tap_ok(rc[0] == 0 && dormant[0] == 1 && n111[0] == 0 && n222[0] == 100,
	       "client: loaded without LD_PRELOAD naming it (as from ld.so.preload), no HEAPPROFD_ settings: dormant until enabled (%d, %zu/%zu)",
	       dormant[0], n111[0], n222[0]);
	tap_ok(rc[1] == 0 && dormant[1] == 0 && n111[1] == 100 && n222[1] == 100,
	       "client: the same with HEAPPROFD_DORMANT=0: profiles from the start (%d, %zu/%zu)",
	       dormant[1], n111[1], n222[1]);
	tap_ok(rc[2] == 0 && dormant[2] == 0 && n111[2] == 100 && n222[2] == 100,
	       "client: the same program with LD_PRELOAD naming the client: profiles from the start (%d, %zu/%zu)",
	       dormant[2], n111[2], n222[2]);
}

static void t_heap(void)
{
	char *argv[] = { target, "heap", NULL };
	struct run r;
	int rc, id = -1;
	size_t i, heaprec = 0;

	daemon_up();
	rc = run_prog(argv, NULL, 1, &r, NULL, NULL);
	daemon_down();
	r.out[r.outlen] = 0;
	sscanf(r.out, "heap %d", &id);
	if (D.nsess == 1) {
		struct md_session *s = &D.s[0];

		for (i = 0; i < s->nrec; i++)
			if (s->recs[i].type == HEAPPROFD_REC_HEAP &&
			    (int)s->recs[i].u.heap.heap_id == id &&
			    !strcmp(s->recs[i].u.heap.name, "testpool") &&
			    s->recs[i].u.heap.interval == 1)
				heaprec++;
		tap_ok(rc == 0 && id >= HEAPPROFD_HEAP_USER && heaprec == 1 &&
		       md_count_alloc(s, (uint32_t)id, 64) == 50 &&
		       count_type(s, HEAPPROFD_REC_FREE) >= 20 && !check_frees(s),
		       "client: custom heap: HEAP record, 50 allocs and 20 frees with heap id %d", id);
	} else {
		tap_ok(0, "client: custom heap: no session");
	}
	md_free(&D);
	rc = run_prog(argv, NULL, 0, &r, NULL, NULL);
	r.out[r.outlen] = 0;
	tap_ok(rc == 0 && !strcmp(r.out, "client absent\n"),
	       "client: weak declarations let the program run without the client");
}

static int count_lines(const char *s, size_t n, const char *prefix)
{
	int k = 0;
	size_t i = 0;

	while (i < n) {
		if (!strncmp(s + i, prefix, strlen(prefix)))
			k++;
		while (i < n && s[i] != '\n')
			i++;
		i++;
	}
	return k;
}

static void t_bad_env(void)
{
	char *argv[] = { target, "nothing", NULL };
	struct run r;
	int rc, lines;

	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=-5", "HEAPPROFD_STACK_CAP=lots",
				"HEAPPROFD_BLOCK=x", "HEAPPROFD_TRANSPORT=nope",
				"HEAPPROFD_RING_SIZE=1000", "HEAPPROFD_FOLLOW_FORKS=maybe"),
		      1, &r, NULL, NULL);
	daemon_down();
	lines = count_lines(r.err, r.errlen, "heapprofd_client: ignoring HEAPPROFD_");
	tap_ok(rc == 0 && lines == 6 && count_lines(r.err, r.errlen, "") == 6 &&
	       D.nsess == 1 && D.s[0].hello.data_size == HEAPPROFD_DATA_SIZE_DEFAULT,
	       "client: 6 bad values give 6 lines on stderr and the defaults (%d lines)", lines);
	md_free(&D);
	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=-5", "HEAPPROFD_QUIET=1"), 1, &r, NULL, NULL);
	daemon_down();
	tap_ok(rc == 0 && r.errlen == 0 && r.outlen == 0, "client: HEAPPROFD_QUIET silences them; nothing on stdout");
	md_free(&D);
}

/* A daemon of another release refuses the ring (EPROTONOSUPPORT): the
 * program runs on unprofiled and the user is told which client to use. */
static void t_other_abi(void)
{
	char *argv[] = { target, "nothing", NULL };
	struct run r;
	int rc, lines;

	daemon_up();
	/* (md_start cleared it; the listener reads it at the hello) */
	__atomic_store_n(&D.refuse, -EPROTONOSUPPORT, __ATOMIC_RELAXED);
	rc = run_prog(argv, NULL, 1, &r, NULL, NULL);
	daemon_down();
	lines = count_lines(r.err, r.errlen, "heapprofd_client[");
	tap_ok(rc == 0 && lines == 1 && strstr(r.err, "another ABI version") &&
	       strstr(r.err, "preload the libheapprofd_client.so"),
	       "client: a daemon of another ABI version refuses it: the program runs on and "
	       "one line on stderr says which client to preload (%d lines)", lines);
	md_free(&D);
}

static void t_bootstrap(void)
{
	char *argv[] = { target, "basic", "10", "100", NULL };
	struct run r;
	int rc;

	daemon_up();
	rc = run_prog(argv, ENV("HEAPPROFD_TEST_BOOTSTRAP=1", "HEAPPROFD_INTERVAL=1"), 1, &r, NULL, NULL);
	daemon_down();
	r.err[r.errlen] = 0;
	tap_ok(rc == 0 && !strcmp(r.err, "heapprofd_client: bootstrap self-test ok\n") &&
	       D.nsess == 1 && md_count_alloc(&D.s[0], 0, 100) == 10,
	       "client: bootstrap arena (allocations during dlsym): usable size, alignment, calloc, realloc out, free no-op");
	md_free(&D);
}

static void t_name(void)
{
	char *argv[] = { target, "nothing", NULL };
	struct run r;
	int n1, n2;

	daemon_up();
	run_prog(argv, ENV("HEAPPROFD_NAME=someoneelse"), 1, &r, NULL, NULL);
	daemon_down();
	n1 = D.nsess;
	md_free(&D);
	daemon_up();
	run_prog(argv, ENV("HEAPPROFD_NAME=hp_target"), 1, &r, NULL, NULL);
	daemon_down();
	n2 = D.nsess;
	md_free(&D);
	tap_ok(n1 == 0 && n2 == 1, "client: HEAPPROFD_NAME profiles only the named program");
}

static void t_ring_full(void)
{
	char *argv[] = { target, "count", "5000", "100", NULL };
	struct heapprofd_counters c;
	size_t na = 0, nf = 0;
	struct run r;
	int rc;

	daemon_up();
	D.pause_all = 1;
	/* The drop policy (HEAPPROFD_BLOCK=0; the default waits for room). */
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=1", "HEAPPROFD_RING_SIZE=64K",
				"HEAPPROFD_STACK_CAP=0", "HEAPPROFD_BLOCK=0"), 1, &r, NULL, NULL);
	daemon_down();
	memset(&c, 0, sizeof(c));
	if (D.nsess == 1) {
		c = *D.s[0].ring.cnt;
		na = md_count_alloc(&D.s[0], 0, 100);
		nf = count_free_of_size(&D.s[0], 100);
	}
	/* Every event is either written or counted: 5000 allocs, and a free
	 * for each alloc that was written. */
	tap_ok(rc == 0 && D.nsess == 1 && c.frees_dropped > 0 &&
	       na + (c.records_dropped - c.frees_dropped) == 5000 &&
	       nf + c.frees_dropped == na,
	       "client: ring full: %zu allocs + %llu dropped = 5000; %zu frees + %llu frees dropped = %zu",
	       na, (unsigned long long)(c.records_dropped - c.frees_dropped), nf,
	       (unsigned long long)c.frees_dropped, na);
	md_free(&D);
}

static void t_daemon_gone(void)
{
	char *argv[] = { target, "basic", "5000", "100", NULL };
	struct run r;
	int rc;

	daemon_up();
	D.pause_all = 1;
	D.hangup = 1;
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=1", "HEAPPROFD_RING_SIZE=64K",
				"HEAPPROFD_BLOCK=100000"), 1, &r, NULL, NULL);
	daemon_down();
	tap_ok(rc == 0 && D.nsess == 1 && D.s[0].ring.cnt->records_written > 0 &&
	       D.s[0].ring.cnt->records_dropped == 0 && D.s[0].ring.cnt->records_written < 1000,
	       "client: the daemon hangs up: profiling stops at the full ring, the program goes on");
	md_free(&D);
}

static void t_adaptive(void)
{
	char *argv[] = { target, "basic", "100000", "1000", NULL };
	struct run r;
	uint64_t maxi = 0;
	size_t i, bad = 0;
	int rc;

	daemon_up();
	D.pause_all = 1;
	rc = run_prog(argv, ENV("HEAPPROFD_INTERVAL=256", "HEAPPROFD_RING_SIZE=64K",
				"HEAPPROFD_ADAPTIVE=1", "HEAPPROFD_BLOCK=0"), 1, &r, NULL, NULL);
	daemon_down();
	if (D.nsess == 1) {
		struct md_session *s = &D.s[0];

		/* Paused: drain now to see what was written. */
		md_drain_session(s);
		for (i = 0; i < s->nrec; i++)
			if (s->recs[i].type == HEAPPROFD_REC_ALLOC &&
			    !(s->recs[i].flags & HEAPPROFD_ALLOC_EXACT)) {
				const struct heapprofd_rec_alloc *a = &s->recs[i].u.alloc;

				if (a->interval > maxi)
					maxi = a->interval;
				bad += a->est_size != (uint64_t)a->count * a->interval;
			}
	}
	tap_ok(rc == 0 && maxi > 256 && !bad,
	       "client: adaptive: the interval rose to %llu while the ring filled; est = count * interval",
	       (unsigned long long)maxi);
	md_free(&D);
}

struct ev3 {
	uint64_t addr, seq;
	int is_free;
};

static int ev3_cmp(const void *a, const void *b)
{
	const struct ev3 *x = a, *y = b;

	if (x->addr != y->addr)
		return x->addr < y->addr ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * A slow daemon under four threads allocating as fast as they can: with
 * the default policy nothing is dropped (the client samples less while its
 * ring fills, then waits), the records say which intervals they were drawn
 * at, the estimate of the bytes allocated is within 4 standard deviations
 * of the truth (each sampled byte adds its interval to the variance:
 * var = sum of est * (interval - 1)), and every sampled block's free is
 * there (a lost free would leave it in use in the profile for good).
 * Two daemons: one that reads nothing for 150 ms after every 500 records
 * (stopped again and again: the ring fills and the client must wait), and
 * one that takes 20 us per record (always behind: the interval settles
 * where the daemon keeps up, with many samples for the estimate).
 */
static void slow_daemon(const char *what, unsigned nap_every, unsigned nap_us)
{
	char *argv[] = { target, "threads", "100000", NULL };
	const double truth = 4.0 * 100000 * 3001;
	uint64_t ivals[8] = { 0 }, dropped = ~0ULL;
	size_t i, k, n = 0, nev = 0, nival = 0, unfreed = 0;
	double est = 0, var = 0, z = 99;
	struct ev3 *ev = NULL;
	struct run r;
	int rc;

	daemon_up();
	D.nap_every = nap_every;
	D.nap_us = nap_us;
	rc = run_prog(argv, ENV("HEAPPROFD_RING_SIZE=256K", "HEAPPROFD_SEED=11"), 1, &r, NULL, NULL);
	daemon_down();
	if (D.nsess == 1) {
		struct md_session *s = &D.s[0];

		dropped = s->ring.cnt->records_dropped;
		ev = calloc(s->nrec + 1, sizeof(*ev));
		for (i = 0; ev && i < s->nrec; i++) {
			const struct md_rec *m = &s->recs[i];

			if (m->type == HEAPPROFD_REC_FREE) {
				ev[nev++] = (struct ev3){ m->u.free.addr, m->u.free.seq, 1 };
				continue;
			}
			if (m->type != HEAPPROFD_REC_ALLOC || m->u.alloc.req_size != 3001)
				continue;
			ev[nev++] = (struct ev3){ m->u.alloc.addr, m->u.alloc.seq, 0 };
			n++;
			est += (double)m->u.alloc.est_size;
			if (!(m->flags & HEAPPROFD_ALLOC_EXACT))
				var += (double)m->u.alloc.est_size * (double)(m->u.alloc.interval - 1);
			for (k = 0; k < nival && ivals[k] != m->u.alloc.interval; k++)
				;
			if (k == nival && nival < 8)
				ivals[nival++] = m->u.alloc.interval;
		}
		/* Each sampled block's next event at its address is its free. */
		if (ev)
			qsort(ev, nev, sizeof(*ev), ev3_cmp);
		for (i = 0; i < nev; i++)
			if (!ev[i].is_free && (i + 1 == nev || ev[i + 1].addr != ev[i].addr ||
					       !ev[i + 1].is_free))
				unfreed++;
		if (var > 0)
			z = (est - truth) / sqrt(var);
	}
	tap_ok(rc == 0 && D.nsess == 1 && dropped == 0,
	       "client: %s, 4 threads: nothing dropped (%llu)", what, (unsigned long long)dropped);
	tap_ok(nival >= 2,
	       "client: %s: the samples were drawn at %zu intervals (%llu, %llu, ...)",
	       what, nival, (unsigned long long)ivals[0], (unsigned long long)ivals[1]);
	tap_ok(n > 0 && z > -4 && z < 4,
	       "client: %s: %zu samples estimate %.0f of %.0f bytes, %.2f sigma",
	       what, n, est, truth, z);
	tap_ok(n > 0 && !unfreed,
	       "client: %s: every sampled block's free was recorded (%zu of %zu missing)",
	       what, unfreed, n);
	free(ev);
	md_free(&D);
}

static void t_slow_daemon(void)
{
	slow_daemon("a daemon stopped for 150 ms every 2000 records", 2000, 150000);
	slow_daemon("a daemon taking 20 us per record", 1, 20);
}

/*
 * A daemon that reads nothing for longer than the stall bound (here 300
 * ms, HEAPPROFD_BLOCK) while its ring is full, once: stopped, the client
 * stops profiling (counters.stall_stop_ns); saying all along that it is
 * behind (uapi consumer.behind: its pipeline holds all it may of our
 * records and works through them), the client waits on, drops nothing and
 * profiles to the end. The interval is fixed so that the ring does fill.
 */
static void behind_daemon(int behind)
{
	char *argv[] = { target, "threads", "20000", NULL };
	const char *what = behind ? "a daemon behind (not reading, saying so) for 1.2 s" :
				    "a daemon stopped for 1.2 s";
	uint64_t stopped = 0, dropped = ~0ULL;
	size_t nrec = 0;
	unsigned naps = 0;
	struct run r;
	int rc;

	daemon_up();
	D.nap_every = 2000;
	D.nap_us = 1200000;
	D.naps_max = 1;
	D.nap_behind = behind;
	rc = run_prog(argv, ENV("HEAPPROFD_RING_SIZE=256K", "HEAPPROFD_ADAPTIVE=0",
				"HEAPPROFD_BLOCK=300000", "HEAPPROFD_SEED=5"), 1, &r, NULL, NULL);
	daemon_down();
	if (D.nsess == 1) {
		stopped = D.s[0].ring.cnt->stall_stop_ns;
		dropped = D.s[0].ring.cnt->records_dropped;
		nrec = D.s[0].nrec;
		naps = D.s[0].naps;
	}
	if (behind)
		tap_ok(rc == 0 && naps == 1 && !stopped && dropped == 0 && nrec > 2000,
		       "client: %s past the 300 ms stall bound: profiled on (stall stop %s), nothing dropped (%llu), %zu records",
		       what, stopped ? "yes" : "no", (unsigned long long)dropped, nrec);
	else
		tap_ok(rc == 0 && naps == 1 && stopped && dropped == 0,
		       "client: %s past the 300 ms stall bound: it stopped profiling (stall stop %s), nothing dropped (%llu), %zu records",
		       what, stopped ? "yes" : "no", (unsigned long long)dropped, nrec);
	md_free(&D);
}

static void t_behind(void)
{
	behind_daemon(0);
	behind_daemon(1);
}

static void t_real(const char *name, char *const argv[])
{
	struct run r0, r1;
	const char *why = "";
	int rc0, rc1;
	size_t bad = 0, nalloc = 0, delta = 0, unknown = 0;
	int i;

	if (access(argv[0], X_OK)) {
		tap_ok(1, "client: %s: same output with and without the client # SKIP %s not installed",
		       name, argv[0]);
		return;
	}
	rc0 = run_prog(argv, NULL, 0, &r0, NULL, NULL);
	daemon_up();
	rc1 = run_prog(argv, ENV("HEAPPROFD_INTERVAL=512"), 1, &r1, NULL, NULL);
	daemon_down();
	for (i = 0; i < D.nsess; i++) {
		bad += check_allocs(&D.s[i], &why) + (size_t)D.s[i].corrupt +
		       (size_t)D.s[i].stack_bad;
		nalloc += count_type(&D.s[i], HEAPPROFD_REC_ALLOC);
		delta += D.s[i].delta_recs;
		unknown += D.s[i].reuse_unknown;
	}
	tap_ok(rc0 == rc1 && r0.outlen > 0 && r0.outlen == r1.outlen &&
	       !memcmp(r0.out, r1.out, r0.outlen) && D.nsess >= 1 && nalloc > 0 && !bad && !unknown,
	       "client: %s: same output (%zu bytes, rc %d) with and without the client; %zu samples (%zu as stack deltas), all sane, all made whole %s",
	       name, r0.outlen, rc0, nalloc, delta, why);
	md_free(&D);
}

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs(text, f);
		fclose(f);
	}
}

int main(int argc, char **argv)
{
	const char *b = argc > 1 ? argv[1] : "build";
	const char *only = argc > 2 ? argv[2] : NULL;
	char fa[300], fb[300], sql[600];

	signal(SIGPIPE, SIG_IGN);
	/* HP_TEST_LIB: run against another build of the client (UBSan). */
	snprintf(lib, sizeof(lib), "%s", getenv("HP_TEST_LIB") ? getenv("HP_TEST_LIB") :
		 "");
	if (!lib[0])
		snprintf(lib, sizeof(lib), "%s/libheapprofd_client.so", b);
	snprintf(target, sizeof(target), "%s/tests/client/hp_target", b);
	snprintf(cxx, sizeof(cxx), "%s/tests/client/hp_cxx", b);
	snprintf(linked, sizeof(linked), "%s/tests/client/hp_target_linked", b);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/hp-client-test.XXXXXX");
	if (!mkdtemp(tmpdir))
		return 1;
	snprintf(sockpath, sizeof(sockpath), "%s/d.sock", tmpdir);

	{
		static const struct { const char *name; void (*fn)(void); } tests[] = {
			{ "basic", t_basic }, { "stackmarks", t_stackmarks },
			{ "sampled", t_sampled },
			{ "threads", t_threads }, { "cxx", t_cxx },
			{ "counters", t_counters }, { "countmix", t_countmix }, { "fork", t_fork },
			{ "exec", t_exec }, { "exec_family", t_exec_family }, { "dormant", t_dormant },
			{ "reattach_calloc", t_reattach_calloc },
			{ "heap", t_heap }, { "bad_env", t_bad_env }, { "other_abi", t_other_abi },
			{ "realloc_fail", t_realloc_fail }, { "marks", t_marks },
			{ "system_preload", t_system_preload },
			{ "name", t_name }, { "ring_full", t_ring_full },
			{ "bootstrap", t_bootstrap },
			{ "daemon_gone", t_daemon_gone }, { "adaptive", t_adaptive },
			{ "slow_daemon", t_slow_daemon },
			{ "behind", t_behind },
		};
		unsigned k;

		for (k = 0; k < sizeof(tests) / sizeof(tests[0]); k++)
			if (!only || !strcmp(only, tests[k].name))
				tests[k].fn();
	}
	if (!only || !strcmp(only, "real")) {
		char *py[] = { "/usr/bin/python3", "-c",
			"import json,collections\n"
			"d=collections.Counter(str(i*i%977) for i in range(200000))\n"
			"print(json.dumps(sorted(d.items())[:50]))\n"
			"print(sum(len(str(x)) for x in range(100000)))", NULL };
		char *sq[] = { "/usr/bin/sqlite3", ":memory:", sql, NULL };
		char *git[] = { "/usr/bin/git", "diff", "--no-index", "--stat", "--", fa, fb, NULL };
		char ta[20000], tb[20000];
		int i, n = 0, m = 0;

		snprintf(sql, sizeof(sql), "%s",
			 "create table t(a integer, b text);"
			 "with recursive c(x) as (select 1 union all select x+1 from c where x<20000) "
			 "insert into t select x, hex(randomblob(0)) || x*x from c;"
			 "create index ti on t(b);"
			 "select count(*), sum(a), max(b) from t where a % 7 = 3;");
		snprintf(fa, sizeof(fa), "%s/a.txt", tmpdir);
		snprintf(fb, sizeof(fb), "%s/b.txt", tmpdir);
		for (i = 0; i < 2000; i++) {
			n += snprintf(ta + n, sizeof(ta) - n, "%d\n", i * 3);
			m += snprintf(tb + m, sizeof(tb) - m, "%d\n", i % 5 ? i * 3 : i);
			if (n > 19000 || m > 19000)
				break;
		}
		write_file(fa, ta);
		write_file(fb, tb);
		t_real("python3", py);
		t_real("sqlite3", sq);
		t_real("git diff", git);
		unlink(fa);
		unlink(fb);
	}
	rmdir(tmpdir);
	return tap_failed ? 1 : 0;
}
