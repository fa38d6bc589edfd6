// SPDX-License-Identifier: GPL-2.0
/*
 * Pipeline tests (TAP lines). Genuine records come from forked children
 * that capture their own registers and stack (capture.c) and hand over
 * /proc/self/maps and /proc/self/mem with SCM_RIGHTS, as the client does.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <elfutils/libdwfl.h>
#include <zlib.h>

#include "../../../tests/tap.h"
#include "../internal.h"
#include "capture.h"
#include "profile.pb-c.h"
#include "../formats.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

static char tmpdir[256];
static struct hp_pipeline *P;

#define ok tap_ok
#define diag tap_diag

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *b;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = calloc(1, n + 1);
	if (b && fread(b, 1, n, f) != (size_t)n) {
		free(b);
		b = NULL;
	}
	fclose(f);
	return b;
}

/* Go's build cache for `go tool pprof`, which Go 1.24 and later build on
 * first use (26 s here): HP_GOCACHE (tests.mk: one under build/, kept
 * between runs and shared by the plain, ASan and TSan builds), else one in
 * this run's directory. */
static const char *go_cache(void)
{
	static char dflt[300];
	const char *c = getenv("HP_GOCACHE");

	if (c && *c == '/' && !strpbrk(c, " '\"$`;&|"))
		return c;
	snprintf(dflt, sizeof(dflt), "%s/gocache", tmpdir);
	return dflt;
}

static char *run(const char *cmd)
{
	FILE *f = popen(cmd, "r");
	size_t cap = 1 << 16, n = 0;
	char *b = calloc(1, cap + 1);

	if (!f || !b) {
		free(b);
		if (f)
			pclose(f);
		return NULL;
	}
	while (n < cap) {
		size_t r = fread(b + n, 1, cap - n, f);

		if (!r)
			break;
		n += r;
	}
	pclose(f);
	return b;
}

/* ---- children that make records -------------------------------------------- */

enum chain { CH_O0, CH_O2, CH_DEEP, CH_DLOPEN };
static uint8_t recbuf[256 << 10];

static size_t make_record(enum chain c)
{
	switch (c) {
	case CH_O0: return o0_level1(recbuf, 64 << 10);
	case CH_O2: return o2_level1(recbuf, 64 << 10);
	case CH_DLOPEN: {
		/* Mapped after the parent's snapshot: forces a maps reread. */
		void *h = dlopen(HP_DLTEST_SO, RTLD_NOW);
		size_t (*entry)(size_t (*)(void *, size_t), void *, size_t);

		if (!h)
			return 0;
		*(void **)&entry = dlsym(h, "dl_entry");
		return entry ? entry(o2_level1, recbuf, 64 << 10) : 0;
	}
	default: return o2_recurse(30, recbuf, 64 << 10);
	}
}

static int send_fds(int s, int *fds, int n)
{
	char c = 'f', cbuf[CMSG_SPACE(sizeof(int) * 4)];
	struct iovec iov = { &c, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = CMSG_SPACE(sizeof(int) * n) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int) * n);
	memcpy(CMSG_DATA(cm), fds, sizeof(int) * n);
	return sendmsg(s, &mh, 0) == 1 ? 0 : -1;
}

static int recv_fds(int s, int *fds, int n)
{
	char c, cbuf[CMSG_SPACE(sizeof(int) * 4)];
	struct iovec iov = { &c, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			     .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm;

	if (recvmsg(s, &mh, 0) != 1)
		return -1;
	cm = CMSG_FIRSTHDR(&mh);
	if (!cm || cm->cmsg_type != SCM_RIGHTS || cm->cmsg_len != CMSG_LEN(sizeof(int) * n))
		return -1;
	memcpy(fds, CMSG_DATA(cm), sizeof(int) * n);
	return 0;
}

static int rd(int s, void *b, size_t n)
{
	while (n) {
		ssize_t r = read(s, b, n);

		if (r <= 0)
			return -1;
		b = (char *)b + r;
		n -= r;
	}
	return 0;
}

static int wr(int s, const void *b, size_t n)
{
	while (n) {
		ssize_t r = write(s, b, n);

		if (r <= 0)
			return -1;
		b = (const char *)b + r;
		n -= r;
	}
	return 0;
}

struct child {
	pid_t pid;
	int sock;
	int fds[2];
};

static int child_start(struct child *ch, enum chain c)
{
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return -1;
	fflush(stdout);
	ch->pid = fork();
	if (ch->pid < 0)
		return -1;
	if (!ch->pid) {
		int fds[2];
		uint32_t len;
		char go;

		close(sv[0]);
		hp_test_stack_init();
		fds[0] = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
		fds[1] = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
		if (send_fds(sv[1], fds, 2) || rd(sv[1], &go, 1))
			_exit(1);
		len = (uint32_t)make_record(c);
		if (wr(sv[1], &len, 4) || wr(sv[1], recbuf, len))
			_exit(1);
		if (go == 'x')
			_exit(0);	/* exit before the parent unwinds */
		rd(sv[1], &go, 1);
		_exit(0);
	}
	close(sv[1]);
	ch->sock = sv[0];
	return recv_fds(ch->sock, ch->fds, 2);
}

/* Feed the child's record; exit_first: the child is gone and reaped first. */
static struct hp_proc *child_record(struct child *ch, enum chain c, int exit_first,
				    uint8_t **rec, uint32_t *len)
{
	struct hp_proc_info pi = { .pid = ch->pid, .comm = "child", .maps_fd = ch->fds[0],
				   .mem_fd = ch->fds[1], .exe_fd = -1 };
	struct hp_proc *pr;
	char go = exit_first ? 'x' : 'g', why[200];

	(void)c;
	pr = hp_proc_new(P, &pi);
	if (!pr || wr(ch->sock, &go, 1) || rd(ch->sock, len, 4))
		return NULL;
	*rec = malloc(*len);
	if (!*rec || rd(ch->sock, *rec, *len))
		return NULL;
	if (exit_first) {
		waitpid(ch->pid, NULL, 0);
		ch->pid = 0;
	}
	if (hp_proc_feed(pr, *rec, *len, why, sizeof(why))) {
		diag("feed: %s", why);
		return NULL;
	}
	return pr;
}

static void child_finish(struct child *ch)
{
	char x = 'x';

	if (ch->pid) {
		wr(ch->sock, &x, 1);
		waitpid(ch->pid, NULL, 0);
	}
	close(ch->sock);
}

/* Does the folded file hold a stack containing the names in this order? */
static int folded_has(const char *path, const char *const *names)
{
	char *b = slurp(path), *line, *save = NULL;
	int found = 0;

	if (!b)
		return 0;
	for (line = strtok_r(b, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save)) {
		const char *p = line;
		int i;

		for (i = 0; names[i]; i++) {
			p = strstr(p, names[i]);
			if (!p)
				break;
			p += strlen(names[i]);
		}
		found = !names[i];
	}
	if (!found)
		diag("stacks in %s:\n%s", path, b);
	free(b);
	return found;
}

static const struct hp_prof_loc *find_loc(const struct hp_prof *p, const char *func)
{
	for (size_t i = 0; i < p->nlocs; i++)
		if (p->locs[i].func && strstr(p->locs[i].func, func))
			return &p->locs[i];
	return NULL;
}

/*
 * The unwind memo: the same sample again is served from it; a sample whose
 * stack differs in a word the unwinder read is unwound on its own.
 */
static void test_memo(struct hp_proc *pr, const uint8_t *rec, uint32_t len,
		      const char *prefix, const char *what)
{
	struct heapprofd_rec_alloc *t = malloc(len);
	struct hp_proc_stats a, b, c;
	char mprefix[320], mpath[400], why[200], *fb, *line, *save = NULL;
	int fed = 1, i, own = 0;

	hp_proc_sync(pr);	/* the first unwind is remembered by now */
	hp_proc_get_stats(pr, &a);
	for (i = 0; i < 5; i++) {
		memcpy(t, rec, len);
		t->addr += 64 * (i + 1);
		t->seq += 10 * (i + 1);
		fed &= !hp_proc_feed(pr, t, len, why, sizeof(why));
	}
	hp_proc_sync(pr);
	hp_proc_get_stats(pr, &b);
	ok(fed && b.memo_hits - a.memo_hits == 5 && b.memo_misses == a.memo_misses,
	   "%s: the same sample again comes from the unwind memo (%llu hits, %llu misses)", what,
	   (unsigned long long)(b.memo_hits - a.memo_hits),
	   (unsigned long long)(b.memo_misses - a.memo_misses));
	/* Same registers, the stack wiped past its first 160 bytes. */
	memcpy(t, rec, len);
	memset((uint8_t *)(t + 1) + 160, 0, t->stack_len - 160);
	t->addr += 4096;
	t->seq += 1000;
	fed = !hp_proc_feed(pr, t, len, why, sizeof(why));
	hp_proc_sync(pr);
	hp_proc_get_stats(pr, &c);
	snprintf(mprefix, sizeof(mprefix), "%s-memo", prefix);
	fed &= !hp_proc_dump(pr, mprefix, HP_OUT_FOLDED, HP_DUMP_NOW);
	snprintf(mpath, sizeof(mpath), "%s.folded", mprefix);
	fb = slurp(mpath);
	for (line = fb ? strtok_r(fb, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save))
		if (strstr(line, "hp_test_capture") && !strstr(line, "main") &&
		    !strstr(line, "[stack truncated]"))
			own = 1;
	ok(fed && c.memo_misses == b.memo_misses + 1 && c.memo_hits == b.memo_hits && own,
	   "%s: a sample whose stack differs is unwound, not taken from the memo", what);
	free(fb);
	/* Many memo hits and frees: they travel to the books in batches of
	 * events (several, and recycled), every one accounted in order. */
	{
		struct hp_proc_stats d, e;
		struct heapprofd_rec_free f = { .hdr = { .len = sizeof(f),
							 .type = HEAPPROFD_REC_FREE } };
		int n = 3000, k;

		hp_proc_get_stats(pr, &d);
		fed = 1;
		for (k = 0; k < n; k++) {
			memcpy(t, rec, len);
			t->addr = 0x7f0000000000ULL + 64 * (uint64_t)k;
			t->seq = 1000000 + 2 * (uint64_t)k;
			fed &= !hp_proc_feed(pr, t, len, why, sizeof(why));
			if (k >= 100) {	/* frees trail the mallocs by 100 */
				f.addr = 0x7f0000000000ULL + 64 * (uint64_t)(k - 100);
				f.seq = t->seq + 1;
				f.heap_id = t->heap_id;
				fed &= !hp_proc_feed(pr, &f, sizeof(f), why, sizeof(why));
			}
		}
		hp_proc_sync(pr);
		hp_proc_get_stats(pr, &e);
		ok(fed && e.accounted - d.accounted == (uint64_t)(2 * n - 100) &&
		   e.memo_hits - d.memo_hits == (uint64_t)n &&
		   e.live_allocs - d.live_allocs == 100 && e.unwind_errors == d.unwind_errors,
		   "%s: %d memo hits and %d frees in batches: all accounted in order (%llu), 100 left live (%llu)",
		   what, n, n - 100, (unsigned long long)(e.accounted - d.accounted),
		   (unsigned long long)(e.live_allocs - d.live_allocs));
	}
	free(t);
}

/*
 * Stack reuse: a record that leaves out the top of its stack (the same as
 * in its thread's previous record) is made whole before anything reads it:
 * the memo then knows it; for a thread with no previous record it is
 * passed on truncated; a reuse that does not end at stack_top is malformed.
 */
static void test_reuse(struct hp_proc *pr, const uint8_t *rec, uint32_t len, const char *what)
{
	const struct heapprofd_rec_alloc *a = (const void *)rec;
	struct heapprofd_rec_alloc *t = malloc(len);
	struct hp_proc_stats s0, s1, s2;
	uint32_t k, tlen;
	char why[200];
	int fed, unknown, bad;

	/* Whole, as the thread's previous record... */
	memcpy(t, rec, len);
	t->addr += 1 << 20;
	t->seq += 100000;
	fed = !hp_proc_feed(pr, t, len, why, sizeof(why));
	hp_proc_sync(pr);
	hp_proc_get_stats(pr, &s0);
	/* ... then the same stack with its top 4 KiB (at most) left out. */
	k = (a->stack_len < 4096 ? a->stack_len : 4096) & ~7U;
	tlen = (uint32_t)(sizeof(*t) + a->stack_len - k + 7) & ~7U;
	memset(t, 0, len);
	memcpy(t, rec, sizeof(*t) + a->stack_len - k);
	t->hdr.len = tlen;
	t->hdr.flags |= HEAPPROFD_ALLOC_STACK_REUSED;
	t->stack_len -= k;
	t->stack_reused = k;
	t->addr += 2 << 20;
	t->seq += 200000;
	fed &= !hp_proc_feed(pr, t, tlen, why, sizeof(why));
	hp_proc_sync(pr);
	hp_proc_get_stats(pr, &s1);
	ok(fed && k && s1.reuse_rebuilt == s0.reuse_rebuilt + 1 &&
	   s1.memo_hits == s0.memo_hits + 1 && s1.memo_misses == s0.memo_misses,
	   "%s: a record reusing its thread's top %u stack bytes is made whole (the memo knows it)",
	   what, k);
	/* The same stack as a delta (uapi HEAPPROFD_ALLOC_STACK_DELTA): its
	 * first 64 bytes carried, the rest of its own part the previous
	 * record's, the top reused: made whole, the memo knows it. */
	if (!((a->stack_len - k) % 8) && a->stack_len - k > 64) {
		uint32_t own = a->stack_len - k, dlen = (uint32_t)sizeof(*t) + 16 + 64;
		struct heapprofd_rec_alloc *d = calloc(1, dlen);
		struct heapprofd_stack_delta *dh = (void *)(d + 1);
		struct heapprofd_delta_run *run = (void *)(dh + 1);
		struct hp_proc_stats sd, se;

		memcpy(d, t, sizeof(*d));
		d->hdr.len = dlen;
		d->hdr.flags |= HEAPPROFD_ALLOC_STACK_DELTA;
		d->stack_len = own;
		d->addr += 8192;
		d->seq += 1;
		dh->nruns = 1;
		run->off = 0;
		run->len = 64;
		memcpy(run + 1, rec + sizeof(*a), 64);
		hp_proc_get_stats(pr, &sd);
		fed = !hp_proc_feed(pr, d, dlen, why, sizeof(why));
		hp_proc_sync(pr);
		hp_proc_get_stats(pr, &se);
		ok(fed && se.reuse_rebuilt == sd.reuse_rebuilt + 1 &&
		   se.memo_hits == sd.memo_hits + 1 && se.memo_misses == sd.memo_misses,
		   "%s: a stack delta (64 of %u own bytes carried, %u reused) is made whole (the memo knows it)",
		   what, own, k);
		/* Runs out of order: malformed. */
		run->off = own;
		bad = hp_proc_feed(pr, d, dlen, why, sizeof(why));
		ok(bad < 0 && strstr(why, "stack delta"),
		   "%s: a stack delta run past its stack is malformed (%s)", what, why);
		free(d);
		/* What follows measures from here: one record's frames. */
		{
			uint64_t one = s1.frames - s0.frames;

			s1 = se;
			s0.frames = s1.frames - one;
		}
	}
	/* A maps record empties the memo: the same record is then built whole
	 * for the unwinder, which must find the same frames. */
	{
		struct heapprofd_rec_maps m = { .hdr = { .len = sizeof(m),
							 .type = HEAPPROFD_REC_MAPS } };
		struct hp_proc_stats s3;

		fed = !hp_proc_feed(pr, &m, sizeof(m), why, sizeof(why));
		t->addr += 4096;
		t->seq += 1;
		fed &= !hp_proc_feed(pr, t, tlen, why, sizeof(why));
		hp_proc_sync(pr);
		hp_proc_get_stats(pr, &s3);
		ok(fed && s3.reuse_rebuilt == s1.reuse_rebuilt + 1 &&
		   s3.memo_misses == s1.memo_misses + 1 &&
		   s3.frames - s1.frames == s1.frames - s0.frames &&
		   s3.unwind_errors == s1.unwind_errors,
		   "%s: a reusing record the memo does not know is unwound whole (%llu frames, as from the memo)",
		   what, (unsigned long long)(s3.frames - s1.frames));
		s1 = s3;
	}
	/* Another thread, never seen: passed on, truncated. */
	t->tid += 4242;
	t->addr += 4096;
	t->seq += 1;
	unknown = !hp_proc_feed(pr, t, tlen, why, sizeof(why));
	hp_proc_sync(pr);
	hp_proc_get_stats(pr, &s2);
	ok(unknown && s2.reuse_missing == s1.reuse_missing + 1,
	   "%s: a reuse with no previous record of its thread is passed on as truncated", what);
	/* Reused bytes that do not end at stack_top: malformed. */
	t->stack_reused = k - 8;
	bad = hp_proc_feed(pr, t, tlen, why, sizeof(why));
	ok(bad < 0 && strstr(why, "reuses"), "%s: a reuse that does not end at stack_top is malformed (%s)",
	   what, why);
	free(t);
}

/*
 * A reusing record skips the memo's reads in its top from where the bytes
 * stayed the same since its thread last matched the entry (memo.c): that
 * must hold only as long as every record since reused those bytes.
 * Thread T's records go:
 *   whole (a match), reusing (served, skipping its top), whole with its
 *   outer stack wiped (forgets the match: not reused), then another thread
 *   matches the whole entry (so that it is looked at first), then T reuses
 *   again: its top is the wiped one, so it comes out as the wiped record;
 *   whole again (a match), then a record reusing only the outer half, its
 *   own bytes wiped past the first 160, another thread's match, then T
 *   reusing all but 160 bytes: the entry's reads between 160 bytes and the
 *   half were not reused every time since the match, so they are checked,
 *   and it comes out as the half-wiped record did.
 */
struct reuse_step {
	uint64_t frames, hits;
};

static int reuse_feed(struct hp_proc *pr, struct heapprofd_rec_alloc *r, uint32_t len,
		      uint64_t *seq, struct reuse_step *out)
{
	struct hp_proc_stats a, b;
	char why[200];
	int bad;

	hp_proc_get_stats(pr, &a);
	r->seq = ++*seq;
	r->addr = 0x7e0000000000ULL + 64 * *seq;
	bad = hp_proc_feed(pr, r, len, why, sizeof(why));
	hp_proc_sync(pr);	/* the memo knows each unwind before the next */
	hp_proc_get_stats(pr, &b);
	out->frames = b.frames - a.frames;
	out->hits = b.memo_hits - a.memo_hits;
	return !bad;
}

/* A HEAPPROFD_REC_CODE record of this process's executable mappings
 * (all == 0: of none), generation gen, into buf. Returns its length. */
static uint32_t code_record(uint64_t *buf, size_t cap, uint32_t gen, int all)
{
	struct heapprofd_rec_code *c = (void *)buf;
	FILE *f = fopen("/proc/self/maps", "r");
	unsigned long long lo, hi;
	char perm[8], line[512];

	memset(c, 0, sizeof(*c));
	c->hdr.type = HEAPPROFD_REC_CODE;
	c->gen = gen;
	while (all && f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx-%llx %7s", &lo, &hi, perm) == 3 && perm[2] == 'x')
			for (uint64_t g = lo >> HEAPPROFD_CODE_SHIFT;
			     g <= (hi - 1) >> HEAPPROFD_CODE_SHIFT &&
			     sizeof(*c) + (c->n + 1) * 8 <= cap * 8 && c->n < HEAPPROFD_CODE_MAX; g++)
				c->granule[c->n++] = g;
	if (f)
		fclose(f);
	c->hdr.len = (uint32_t)(sizeof(*c) + c->n * 8);
	return c->hdr.len;
}

/*
 * Same-path records (uapi HEAPPROFD_ALLOC_STACK_SAME): after a record, one
 * that carries no stack and names a code set is the previous unwind again
 * (the memo's), checked against that set: covered under a set of this
 * process's code, uncovered under an empty one or one never sent (and the
 * client is then due a new set). Malformed claims end the session.
 */
static void test_samepath(struct hp_proc *pr, const uint8_t *rec, uint32_t len, const char *what)
{
	const struct heapprofd_rec_alloc *a = (const void *)rec;
	struct heapprofd_rec_alloc *t = malloc(len), *s = calloc(1, sizeof(*s));
	static uint64_t cbuf[1 + HEAPPROFD_CODE_MAX + 8];
	struct hp_proc_stats sb, s0, s1, s2, s3;
	uint64_t stale0 = hp_proc_code_stale(pr);
	uint32_t clen;
	char why[200];
	int fed, bad;

	/* The thread's previous record, whole; the code set, generation 1. */
	memcpy(t, rec, len);
	t->seq += 300000;
	t->addr += 3 << 20;
	clen = code_record(cbuf, sizeof(cbuf) / 8, 1, 1);
	hp_proc_sync(pr);
	hp_proc_get_stats(pr, &sb);
	fed = !hp_proc_feed(pr, t, len, why, sizeof(why)) &&
	      !hp_proc_feed(pr, cbuf, clen, why, sizeof(why));
	hp_proc_sync(pr);
	hp_proc_get_stats(pr, &s0);
	/* The claim: no stack, the whole of it reused, its registers. */
	memcpy(s, rec, sizeof(*s));
	s->hdr.len = sizeof(*s);
	s->hdr.flags = (a->hdr.flags & HEAPPROFD_ALLOC_EXACT) | HEAPPROFD_ALLOC_STACK_REUSED |
		       HEAPPROFD_ALLOC_STACK_SAME;
	s->stack_reused = a->stack_len;
	s->stack_len = 0;
	s->code_gen = 1;
	s->seq = t->seq + 1;
	s->addr = t->addr + 4096;
	fed &= !hp_proc_feed(pr, s, sizeof(*s), why, sizeof(why));
	hp_proc_sync(pr);
	hp_proc_get_stats(pr, &s1);
	ok(fed && a->stack_top == heapprofd_rec_sp(a) + a->stack_len &&
	   s1.memo_hits == s0.memo_hits + 1 && s1.same_checked == s0.same_checked + 1 &&
	   s1.frames - s0.frames == s0.frames - sb.frames && s0.frames > sb.frames &&
	   s1.same_uncovered == s0.same_uncovered,
	   "%s: a same-path record is its thread's previous unwind (%llu frames, from the memo), checked against the code set (%s)",
	   what, (unsigned long long)(s1.frames - s0.frames), fed ? "fed" : why);
	/* Under a set without this code, and under one never sent. */
	clen = code_record(cbuf, sizeof(cbuf) / 8, 2, 0);
	fed = !hp_proc_feed(pr, cbuf, clen, why, sizeof(why));
	s->code_gen = 2;
	s->seq++;
	s->addr += 4096;
	fed &= !hp_proc_feed(pr, s, sizeof(*s), why, sizeof(why));
	s->code_gen = 7;
	s->seq++;
	s->addr += 4096;
	fed &= !hp_proc_feed(pr, s, sizeof(*s), why, sizeof(why));
	hp_proc_sync(pr);
	hp_proc_get_stats(pr, &s2);
	ok(fed && s2.same_uncovered == s1.same_uncovered + 2 && s2.memo_hits == s1.memo_hits + 2 &&
	   hp_proc_code_stale(pr) == stale0 + 2,
	   "%s: a claim under a code set that lacks the path's code, or under none sent, is uncovered and asks for a new set",
	   what);
	/* Malformed: each ends the session's feeding with a reason. */
	s->code_gen = 1;
	s->stack_len = 8;
	bad = hp_proc_feed(pr, s, sizeof(*s), why, sizeof(why)) < 0 && strstr(why, "same-path");
	s->stack_len = 0;
	s->hdr.flags &= ~HEAPPROFD_ALLOC_STACK_REUSED;
	s->stack_reused = 0;
	bad &= hp_proc_feed(pr, s, sizeof(*s), why, sizeof(why)) < 0 && strstr(why, "same-path");
	s->hdr.flags = HEAPPROFD_ALLOC_STACK_REUSED;
	s->stack_reused = a->stack_len;
	bad &= hp_proc_feed(pr, s, sizeof(*s), why, sizeof(why)) < 0 && strstr(why, "code set");
	clen = code_record(cbuf, sizeof(cbuf) / 8, 0, 1);
	bad &= hp_proc_feed(pr, cbuf, clen, why, sizeof(why)) < 0 && strstr(why, "code record");
	((struct heapprofd_rec_code *)cbuf)->gen = 3;
	((struct heapprofd_rec_code *)cbuf)->n = HEAPPROFD_CODE_MAX + 1;
	bad &= hp_proc_feed(pr, cbuf, clen, why, sizeof(why)) < 0 && strstr(why, "code record");
	hp_proc_get_stats(pr, &s3);
	ok(bad && s3.same_checked == s2.same_checked,
	   "%s: same-path claims with a stack, without reuse or without their flag, and bad code records, are malformed (%s)",
	   what, why);
	free(t);
	free(s);
}

static void test_reuse_memo(struct hp_proc *pr, const uint8_t *rec, uint32_t len,
			    const char *what)
{
	const struct heapprofd_rec_alloc *a = (const void *)rec;
	struct heapprofd_rec_alloc *whole = malloc(len), *wiped = malloc(len);
	struct heapprofd_rec_alloc *other = malloc(len), *t = malloc(len);
	struct heapprofd_rec_alloc *half = malloc(len);
	struct reuse_step st[9];
	uint64_t seq = 5000000;
	uint32_t k, tlen, own, kh, hlen;
	int fed = 1;

	/* All but the innermost 160 bytes reused. */
	k = a->stack_len > 168 ? (a->stack_len - 160) & ~7U : 0;
	own = a->stack_len - k;
	memcpy(whole, rec, len);
	whole->tid += 777;
	memcpy(wiped, whole, len);
	memset((uint8_t *)(wiped + 1) + own, 0, a->stack_len - own);
	memcpy(other, rec, len);
	other->tid += 778;
	tlen = (uint32_t)(sizeof(*t) + own + 7) & ~7U;
	memset(t, 0, len);
	memcpy(t, whole, sizeof(*t) + own);
	t->hdr.len = tlen;
	t->hdr.flags |= HEAPPROFD_ALLOC_STACK_REUSED;
	t->stack_len = own;
	t->stack_reused = k;
	/* The outer half reused, the own bytes wiped past the first 160. */
	kh = (k / 2) & ~7U;
	hlen = (uint32_t)(sizeof(*half) + a->stack_len - kh + 7) & ~7U;
	memset(half, 0, len);
	memcpy(half, whole, sizeof(*half) + own);
	half->hdr.len = hlen;
	half->hdr.flags |= HEAPPROFD_ALLOC_STACK_REUSED;
	half->stack_len = a->stack_len - kh;
	half->stack_reused = kh;
	fed &= reuse_feed(pr, whole, len, &seq, &st[0]);
	fed &= reuse_feed(pr, t, tlen, &seq, &st[1]);
	fed &= reuse_feed(pr, wiped, len, &seq, &st[2]);
	fed &= reuse_feed(pr, other, len, &seq, &st[3]);
	fed &= reuse_feed(pr, t, tlen, &seq, &st[4]);
	fed &= reuse_feed(pr, whole, len, &seq, &st[5]);
	fed &= reuse_feed(pr, half, hlen, &seq, &st[6]);
	fed &= reuse_feed(pr, other, len, &seq, &st[7]);
	fed &= reuse_feed(pr, t, tlen, &seq, &st[8]);
	ok(fed && k && st[0].hits == 1 && st[1].hits == 1 && st[3].hits == 1 &&
	   st[1].frames == st[0].frames && st[2].frames < st[0].frames &&
	   st[4].frames == st[2].frames,
	   "%s: a reusing record skips the memo's reads in its top only while its thread's match "
	   "holds (frames: whole %llu, reusing %llu, wiped %llu, reusing after it %llu)", what,
	   (unsigned long long)st[0].frames, (unsigned long long)st[1].frames,
	   (unsigned long long)st[2].frames, (unsigned long long)st[4].frames);
	ok(fed && st[5].hits == 1 && st[7].hits == 1 && st[6].frames < st[5].frames &&
	   st[8].frames == st[6].frames,
	   "%s: ... and only from where every record since the match reused the bytes "
	   "(frames: whole %llu, half reused and wiped %llu, reusing after it %llu)", what,
	   (unsigned long long)st[5].frames, (unsigned long long)st[6].frames,
	   (unsigned long long)st[8].frames);
	free(half);
	free(whole);
	free(wiped);
	free(other);
	free(t);
}

static void test_unwind(enum chain c, int exit_first, const char *what)
{
	static const char *const o0[] = { "main", "o0_level1", "o0_level2", "o0_level3",
					   "hp_test_capture", NULL };
	static const char *const o2[] = { "main", "o2_level1", "o2_level2", "o2_inlined",
					   "o2_level3", "hp_test_capture", NULL };
	static const char *const dl[] = { "main", "dl_entry", "o2_level1", "o2_level2",
					   "o2_inlined", "o2_level3", "hp_test_capture", NULL };
	const char *const *want = c == CH_O0 ? o0 : c == CH_DLOPEN ? dl : o2;
	struct hp_proc_stats st;
	struct child ch = { 0 };
	struct hp_proc *pr;
	uint8_t *rec = NULL;
	uint32_t len = 0;
	char prefix[300], path[400], why[200];
	struct hp_prof prof;
	const struct hp_prof_loc *l;
	int rc;

	snprintf(prefix, sizeof(prefix), "%s/unwind-%d-%d", tmpdir, c, exit_first);
	if (child_start(&ch, c) || !(pr = child_record(&ch, c, exit_first, &rec, &len))) {
		ok(0, "%s: child record", what);
		return;
	}
	rc = hp_proc_dump(pr, prefix, HP_OUT_PPROF | HP_OUT_FOLDED | HP_OUT_TEXT | HP_OUT_SVG,
			  HP_DUMP_NOW);
	if (c == CH_O2 && !exit_first) {
		/* The same sample with only 160 bytes of stack (stack_cap hit). */
		struct heapprofd_rec_alloc *t = malloc(len);
		uint32_t keep = 160, tlen = (uint32_t)sizeof(*t) + keep;
		static const char *const tw[] = { "[stack truncated]", "hp_test_capture", NULL };
		char tprefix[320], tpath[400], *fb;

		memcpy(t, rec, sizeof(*t) + keep);
		t->hdr.len = tlen;
		t->hdr.flags |= HEAPPROFD_ALLOC_STACK_TRUNCATED;
		t->stack_len = keep;
		t->addr += 8;
		snprintf(tprefix, sizeof(tprefix), "%s-trunc", prefix);
		ok(!hp_proc_feed(pr, t, tlen, why, sizeof(why)) &&
		   !hp_proc_dump(pr, tprefix, HP_OUT_FOLDED, HP_DUMP_NOW), "%s: truncated copy fed", what);
		snprintf(tpath, sizeof(tpath), "%s.folded", tprefix);
		fb = slurp(tpath);
		ok(folded_has(tpath, tw) && fb && !strstr(fb, "[stack truncated];_start") &&
		   !strstr(fb, "[stack truncated];main"),
		   "%s: a truncated stack is marked and never read from the live stack", what);
		free(fb);
		free(t);
		test_memo(pr, rec, len, prefix, what);
		test_reuse(pr, rec, len, what);
		test_samepath(pr, rec, len, what);
		test_reuse_memo(pr, rec, len, what);
	}
	child_finish(&ch);
	if (c == CH_DLOPEN) {
		hp_proc_get_stats(pr, &st);
		snprintf(path, sizeof(path), "%s.folded", prefix);
		ok(!rc && st.maps_reloads >= 1 && folded_has(path, want),
		   "%s: unknown address rereads maps (%llu), stack through the new library",
		   what, (unsigned long long)st.maps_reloads);
		hp_proc_end(pr);
		free(rec);
		return;
	}
	snprintf(path, sizeof(path), "%s.folded", prefix);
	ok(!rc && folded_has(path, want), "%s: stack main -> level1 -> level2%s -> level3 -> capture",
	   what, c == CH_O0 ? "" : " -> (inlined) o2_inlined");
	snprintf(path, sizeof(path), "%s.pb.gz", prefix);
	if (hp_pprof_read(&prof, path, why, sizeof(why))) {
		ok(0, "%s: pprof read back: %s", what, why);
	} else {
		l = find_loc(&prof, c == CH_O0 ? "o0_level2" : "o2_inlined");
		ok(l && l->file && strstr(l->file, c == CH_O0 ? "target_o0.c" : "target_o2.c") &&
		   l->line > 0, "%s: file:line for %s (%s:%lld)", what,
		   c == CH_O0 ? "level2" : "the inlined function", l && l->file ? l->file : "?",
		   l ? (long long)l->line : 0LL);
		if (c != CH_O0) {
			const struct hp_prof_line *in = l && l->ninl ? &prof.lines[l->inl] : NULL;

			ok(in && in->func && !strcmp(in->func, "o2_level2") && in->file &&
			   strstr(in->file, "target_o2.c") && in->line > 0,
			   "%s: inlined into o2_level2 at its call site (%s:%lld)", what,
			   in && in->file ? in->file : "?", in ? (long long)in->line : 0LL);
		}
		hp_prof_free(&prof);
	}
	hp_proc_end(pr);
	free(rec);
}

/* ---- parse ----------------------------------------------------------------- */

static struct heapprofd_rec_alloc *good_alloc(void *buf, uint64_t ip, uint64_t addr,
					      uint64_t size, uint64_t seq)
{
	struct heapprofd_rec_alloc *a = buf;

	memset(a, 0, sizeof(*a));
	a->hdr.type = HEAPPROFD_REC_ALLOC;
	a->hdr.len = sizeof(*a);
	a->seq = seq;
	a->addr = addr;
	a->req_size = size;
	a->usable_size = size + size / 4;
	a->est_size = size;
	a->interval = 1;
	a->count = 1;
	a->hdr.flags = HEAPPROFD_ALLOC_EXACT;
	a->arch = HEAPPROFD_ARCH_X86_64;
	a->nregs = HEAPPROFD_X86_64_NREGS;
	a->regs[HEAPPROFD_X86_64_IP] = ip;
	return a;
}

static struct heapprofd_rec_free *good_free(void *buf, uint64_t addr, uint64_t seq)
{
	struct heapprofd_rec_free *f = buf;

	memset(f, 0, sizeof(*f));
	f->hdr.type = HEAPPROFD_REC_FREE;
	f->hdr.len = sizeof(*f);
	f->seq = seq;
	f->addr = addr;
	return f;
}

static const char *const mut_names[] = {
	"busy bit", "unknown type", "stack_len past the record", "nregs too big",
	"nregs too small", "wrong arch", "heap id too big", "est_size 0",
	"impossible size", "interval 0", "sampled with count 0", "address 0",
	"unknown flags", "stack past stack_top", "stack wraps",
};

static void mutate(struct heapprofd_rec_alloc *a, int i)
{
	switch (i) {
	case 0: a->hdr.len |= HEAPPROFD_REC_BUSY; break;
	case 1: a->hdr.type = 77; break;
	case 2: a->stack_len = 8; break;
	case 3: a->nregs = 100; break;
	case 4: a->nregs = 2; break;
	case 5: a->arch = 7; break;
	case 6: a->heap_id = 300; break;
	case 7: a->est_size = 0; break;
	case 8: a->req_size = 1ULL << 60; break;
	case 9: a->interval = 0; break;
	case 10: a->hdr.flags = 0; a->count = 0; break;
	case 11: a->addr = 0; break;
	case 12: a->hdr.flags |= 0x100; break;
	case 13: a->regs[1] = 1000; a->stack_top = 1004; a->hdr.len += 8; a->stack_len = 8; break;
	case 14: a->regs[1] = ~0ULL - 2; a->hdr.len += 8; a->stack_len = 8; break;
	}
}

static void test_parse(void)
{
	uint64_t buf[1024];
	struct heapprofd_rec_alloc *a;
	struct heapprofd_rec_heap *h;
	struct hp_parsed ps;
	char why[200];
	int i, bad = 0;

	a = good_alloc(buf, 0x1234, 0x5000, 10, 1);
	ok(hp_parse_record(a, a->hdr.len, &ps, why, sizeof(why)) == 0 && ps.alloc,
	   "parse: a valid alloc record is accepted");
	ok(hp_parse_record(good_free(buf, 1, 2), sizeof(struct heapprofd_rec_free), &ps, why,
			   sizeof(why)) == 0 && ps.free, "parse: a valid free record is accepted");
	h = (void *)buf;
	memset(h, 0, sizeof(*h));
	h->hdr.type = HEAPPROFD_REC_HEAP;
	h->hdr.len = sizeof(*h);
	h->heap_id = 20;
	h->interval = 4096;
	strcpy(h->name, "arena");
	ok(hp_parse_record(h, sizeof(*h), &ps, why, sizeof(why)) == 0 && ps.heap,
	   "parse: a valid heap record is accepted");
	memset(h->name, 'x', sizeof(h->name));
	ok(hp_parse_record(h, sizeof(*h), &ps, why, sizeof(why)) < 0 && why[0],
	   "parse: heap name without NUL rejected (%s)", why);
	for (i = 0; i < (int)(sizeof(mut_names) / sizeof(mut_names[0])); i++) {
		a = good_alloc(buf, 0x1234, 0x5000, 10, 1);
		mutate(a, i);
		why[0] = 0;
		if (hp_parse_record(a, sizeof(*a) + (a->hdr.len & HEAPPROFD_REC_LEN_MASK) - sizeof(*a),
				    &ps, why, sizeof(why)) >= 0 || !why[0]) {
			diag("mutation '%s' was accepted", mut_names[i]);
			bad++;
		}
	}
	ok(!bad, "parse: %d kinds of malformed alloc record rejected with a reason", i);
	a = good_alloc(buf, 0x1234, 0x5000, 10, 1);
	ok(hp_parse_record(a, sizeof(*a) - 8, &ps, why, sizeof(why)) < 0 && why[0],
	   "parse: length mismatch rejected (%s)", why);
	ok(hp_parse_record(a, 4, &ps, why, sizeof(why)) < 0,
	   "parse: shorter than a header rejected");
}

static void test_garbage(void)
{
	struct hp_proc_info pi = { .pid = getpid(), .comm = "garbage",
				   .maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC),
				   .mem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC),
				   .exe_fd = -1 };
	struct hp_proc *pr = hp_proc_new(P, &pi);
	uint64_t buf[512];
	unsigned seed = 12345;
	int i, accepted = 0, rejected = 0;
	char why[200], prefix[300];

	for (i = 0; i < 20000; i++) {
		size_t len = 8 * (1 + rand_r(&seed) % 60), k;
		struct heapprofd_rec_alloc *a = (void *)buf;

		for (k = 0; k < len / 4; k++)
			((uint32_t *)buf)[k] = rand_r(&seed) * (rand_r(&seed) & 1);
		if (i & 1) {	/* half of them nearly valid, to get past the header */
			a->hdr.len = (uint32_t)len;
			a->hdr.type = 1 + rand_r(&seed) % 4;
			if (len >= sizeof(*a) && (i & 2)) {
				good_alloc(a, (uint64_t)(uintptr_t)test_garbage + rand_r(&seed) % 4096,
					   rand_r(&seed) + 1, rand_r(&seed) % 1000 + 1, i);
				a->hdr.len = (uint32_t)len;
				a->stack_len = (uint32_t)(len - sizeof(*a));
				a->regs[1] = (uint64_t)(uintptr_t)buf;
				a->regs[2] = rand_r(&seed);
			}
		}
		if (hp_proc_feed(pr, buf, len, why, sizeof(why)))
			rejected++;
		else
			accepted++;
	}
	snprintf(prefix, sizeof(prefix), "%s/garbage", tmpdir);
	ok(pr && hp_proc_dump(pr, prefix, HP_OUT_PPROF | HP_OUT_TEXT, HP_DUMP_NOW | HP_DUMP_PEAK) == 0,
	   "hostile records: 20000 random records (%d accepted, %d rejected), no crash, dump works",
	   accepted, rejected);
	hp_proc_end(pr);
}

/* ---- books ----------------------------------------------------------------- */

static volatile int site_sink;
__attribute__((noinline)) void site_a(void) { site_sink += 1; site_sink *= 3; }
__attribute__((noinline)) void site_b(void) { site_sink += 2; site_sink *= 5; }
__attribute__((noinline)) void site_c(void) { site_sink += 3; site_sink *= 7; }

static struct hp_proc *self_proc(unsigned flags)
{
	struct hp_proc_info pi = { .pid = getpid(), .comm = "books", .flags = flags,
				   .maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC),
				   .mem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC),
				   .exe_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC) };

	return hp_proc_new(P, &pi);
}

static void feed_alloc(struct hp_proc *pr, void (*site)(void), uint64_t addr, uint64_t size,
		       uint64_t seq)
{
	uint64_t buf[64];
	char why[200];

	good_alloc(buf, (uint64_t)(uintptr_t)site, addr, size, seq);
	if (hp_proc_feed(pr, buf, sizeof(struct heapprofd_rec_alloc), why, sizeof(why)))
		diag("feed alloc: %s", why);
}

static void feed_free(struct hp_proc *pr, uint64_t addr, uint64_t seq)
{
	uint64_t buf[8];
	char why[200];

	good_free(buf, addr, seq);
	if (hp_proc_feed(pr, buf, sizeof(struct heapprofd_rec_free), why, sizeof(why)))
		diag("feed free: %s", why);
}

/* Sum of value v over samples whose leaf is func. */
static int64_t leaf_sum(const struct hp_prof *p, const char *func, int v)
{
	int64_t s = 0;

	for (size_t i = 0; i < p->nsamples; i++) {
		const struct hp_prof_sample *sm = &p->samples[i];

		if (sm->nlocs && p->locs[sm->locs[0]].func &&
		    !strcmp(p->locs[sm->locs[0]].func, func))
			s += sm->v[v];
	}
	return s;
}

static int dump_read(struct hp_proc *pr, const char *name, unsigned which, struct hp_prof *out)
{
	char prefix[300], path[400], why[200];

	snprintf(prefix, sizeof(prefix), "%s/%s", tmpdir, name);
	if (hp_proc_dump(pr, prefix, HP_OUT_PPROF | HP_OUT_TEXT | HP_OUT_FOLDED, which))
		return -1;
	snprintf(path, sizeof(path), "%s.pb.gz", prefix);
	if (hp_pprof_read(out, path, why, sizeof(why))) {
		diag("%s", why);
		return -1;
	}
	return 0;
}

static void test_books(void)
{
	struct hp_proc *pr = self_proc(HP_PROC_DUMP_AT_MAX);
	struct hp_prof p;
	struct hp_proc_stats st;

	/* a: 3 x 100 bytes, one freed; b: 1000 bytes freed; c: 50 live */
	feed_alloc(pr, site_a, 0x10, 100, 1);
	feed_alloc(pr, site_a, 0x20, 100, 2);
	feed_alloc(pr, site_a, 0x30, 100, 3);
	feed_alloc(pr, site_b, 0x40, 1000, 4);
	feed_free(pr, 0x20, 5);
	feed_free(pr, 0x40, 6);
	feed_alloc(pr, site_c, 0x50, 50, 7);
	if (dump_read(pr, "books1", HP_DUMP_NOW, &p)) {
		ok(0, "books: dump");
		return;
	}
	ok(leaf_sum(&p, "site_a", HP_V_ALLOC_SPACE) == 300 &&
	   leaf_sum(&p, "site_a", HP_V_ALLOC_OBJ) == 3 &&
	   leaf_sum(&p, "site_a", HP_V_INUSE_SPACE) == 200 &&
	   leaf_sum(&p, "site_a", HP_V_INUSE_OBJ) == 2,
	   "books: site_a allocated 300 B / 3, in use 200 B / 2 (got %lld/%lld, %lld/%lld)",
	   (long long)leaf_sum(&p, "site_a", HP_V_ALLOC_SPACE),
	   (long long)leaf_sum(&p, "site_a", HP_V_ALLOC_OBJ),
	   (long long)leaf_sum(&p, "site_a", HP_V_INUSE_SPACE),
	   (long long)leaf_sum(&p, "site_a", HP_V_INUSE_OBJ));
	ok(leaf_sum(&p, "site_b", HP_V_ALLOC_SPACE) == 1000 &&
	   leaf_sum(&p, "site_b", HP_V_INUSE_SPACE) == 0 &&
	   leaf_sum(&p, "site_c", HP_V_INUSE_SPACE) == 50,
	   "books: freed site_b shows 0 in use, site_c 50");
	ok(leaf_sum(&p, "site_a", HP_V_INUSE_USABLE) == 250,
	   "books: requested 200 vs usable 250 in use at site_a (got %lld)",
	   (long long)leaf_sum(&p, "site_a", HP_V_INUSE_USABLE));
	hp_prof_free(&p);

	/* Peak: in use was 1300 after seq 4. */
	if (!dump_read(pr, "books1peak", HP_DUMP_PEAK, &p)) {
		ok(leaf_sum(&p, "site_b", HP_V_INUSE_SPACE) == 1000 &&
		   leaf_sum(&p, "site_a", HP_V_INUSE_SPACE) == 300 &&
		   leaf_sum(&p, "site_c", HP_V_INUSE_SPACE) == 0,
		   "books: dump at peak holds the state at 1300 B in use");
		hp_prof_free(&p);
	} else {
		ok(0, "books: peak dump");
	}

	/* A free that arrives before its malloc (seq 9 before 8): matched. */
	feed_free(pr, 0x60, 9);
	feed_alloc(pr, site_c, 0x60, 70, 8);
	/* A stale free (seq lower than the live malloc at 0x30): ignored. */
	feed_free(pr, 0x30, 2);
	/* Address reuse without a free record: the old one counts as freed. */
	feed_alloc(pr, site_b, 0x10, 10, 10);
	if (dump_read(pr, "books2", HP_DUMP_NOW, &p)) {
		ok(0, "books: second dump");
		return;
	}
	ok(leaf_sum(&p, "site_c", HP_V_ALLOC_SPACE) == 120 &&
	   leaf_sum(&p, "site_c", HP_V_INUSE_SPACE) == 50,
	   "books: a free arriving before its malloc is matched by seq (site_c in use %lld)",
	   (long long)leaf_sum(&p, "site_c", HP_V_INUSE_SPACE));
	ok(leaf_sum(&p, "site_a", HP_V_INUSE_SPACE) == 100,
	   "books: stale free ignored, reused address frees the old allocation (site_a %lld)",
	   (long long)leaf_sum(&p, "site_a", HP_V_INUSE_SPACE));
	hp_prof_free(&p);
	hp_proc_get_stats(pr, &st);
	ok(st.fed == 11 && st.accounted == 11 && st.live_allocs == 3,
	   "books: stats fed %llu accounted %llu live %llu",
	   (unsigned long long)st.fed, (unsigned long long)st.accounted,
	   (unsigned long long)st.live_allocs);
	hp_proc_end(pr);
}

/* ---- kernel records: the dmabuf heap ---------------------------------------- */

/*
 * What the module queues for a session that exports a DMA-BUF (uapi,
 * "Kernel records"): a DMABUF record, then an ALLOC of the dmabuf heap with
 * addr = the inode and the exporting thread's registers and stack. The
 * stack here is this process's own, captured in export_dmabuf_buffer.
 */
static volatile int export_sink;

__attribute__((noinline)) static size_t export_dmabuf_buffer(void *buf, size_t cap)
{
	size_t n = hp_test_capture(buf, cap, 1, 1, 1);

	export_sink++;
	return n;
}

static size_t kalloc_rec(void *buf, size_t cap, uint64_t inode, uint64_t size, uint64_t seq)
{
	size_t n = export_dmabuf_buffer(buf, cap);
	struct heapprofd_rec_alloc *a = buf;

	if (!n)
		return 0;
	a->heap_id = HEAPPROFD_HEAP_DMABUF;
	a->addr = inode;
	a->seq = seq;
	a->req_size = a->usable_size = a->est_size = size;
	a->interval = 4096;
	return n;
}

static size_t kdmabuf_rec(void *buf, uint64_t inode, uint64_t size, uint64_t seq,
			  const char *exporter)
{
	struct heapprofd_rec_dmabuf *d = buf;

	memset(d, 0, sizeof(*d));
	d->hdr.type = HEAPPROFD_REC_DMABUF;
	d->hdr.len = sizeof(*d);
	d->seq = seq;
	d->inode = inode;
	d->size = size;
	d->exporter_pid = getpid();
	snprintf(d->exporter, sizeof(d->exporter), "%s", exporter);
	return sizeof(*d);
}

static size_t kfree_rec(void *buf, uint64_t inode, uint64_t seq)
{
	struct heapprofd_rec_free *f = good_free(buf, inode, seq);

	f->heap_id = HEAPPROFD_HEAP_DMABUF;
	return sizeof(*f);
}

static int kfeed(struct hp_proc *pr, const void *rec, size_t len)
{
	char why[200];
	int rc = hp_proc_feed_kernel(pr, rec, len, why, sizeof(why));

	if (rc)
		diag("kernel record refused: %s", why);
	return rc;
}

/* The sample types a pprof file declares, as one string "a b c". */
static void pprof_types(const char *path, char *out, size_t len)
{
	gzFile g = gzopen(path, "rb");
	static uint8_t raw[1 << 20];
	Perftools__Profiles__Profile *pp;
	int n = g ? gzread(g, raw, sizeof(raw)) : -1;

	out[0] = 0;
	if (g)
		gzclose(g);
	pp = n > 0 ? perftools__profiles__profile__unpack(NULL, (size_t)n, raw) : NULL;
	for (size_t i = 0; pp && i < pp->n_sample_type; i++) {
		int64_t t = pp->sample_type[i]->type;

		if (t > 0 && (size_t)t < pp->n_string_table)
			snprintf(out + strlen(out), len - strlen(out), "%s%s", i ? " " : "",
				 pp->string_table[t]);
	}
	if (pp)
		perftools__profiles__profile__free_unpacked(pp, NULL);
}

static int64_t heap_sum(const struct hp_prof *p, const char *heap, const char *exporter, int v)
{
	int64_t s = 0;

	for (size_t i = 0; i < p->nsamples; i++) {
		const struct hp_prof_sample *sm = &p->samples[i];

		if (hp_sample_in_heap(sm, heap) &&
		    (!exporter || (sm->exporter && !strcmp(sm->exporter, exporter))))
			s += sm->v[v];
	}
	return s;
}

static char *render_to(const struct hp_prof *p, const struct hp_render_opts *o, int folded,
		       const char *name)
{
	char path[400];
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	if (!f)
		return NULL;
	rc = folded ? hp_folded_write_opts(p, o, f) : hp_text_write_opts(p, o, f);
	fclose(f);
	return rc ? NULL : slurp(path);
}

static void test_kernel_records(void)
{
	struct hp_proc *pr = self_proc(HP_PROC_DUMP_AT_MAX);
	static uint64_t kb[(96 << 10) / 8];
	uint64_t small[64];
	struct heapprofd_rec_alloc *a = (void *)kb;
	struct heapprofd_rec_klost kl = { .hdr = { .len = sizeof(kl), .type = HEAPPROFD_REC_KLOST },
					  .records = 3, .bytes = 5 << 20 };
	struct hp_proc_stats st;
	struct hp_prof p;
	char prefix[300], path[400], types[512], why[200], *out;
	size_t n;
	int bad = 0, nbad = 0, rc;

	hp_test_stack_init();
	/* The process's own heap: the same number as an inode, a seq 1 of its own. */
	feed_alloc(pr, site_a, 4242, 100, 1);
	/* Export 1: 1 MiB by udmabuf, inode 4242, kernel seq 1. */
	kfeed(pr, small, kdmabuf_rec(small, 4242, 1 << 20, 1, "udmabuf"));
	n = kalloc_rec(kb, sizeof(kb), 4242, 1 << 20, 1);
	ok(n > sizeof(*a) && !kfeed(pr, kb, n),
	   "kernel records: a dmabuf ALLOC with a captured stack (%zu bytes) is accepted", n);
	/* Export 2: 2 MiB by system, released (kernel seq 3). */
	kfeed(pr, small, kdmabuf_rec(small, 4243, 2 << 20, 2, "system"));
	n = kalloc_rec(kb, sizeof(kb), 4243, 2 << 20, 2);
	kfeed(pr, kb, n);
	kfeed(pr, small, kfree_rec(small, 4243, 3));
	/* Export 3: its DMABUF record was lost; 4 MiB, still in use. */
	n = kalloc_rec(kb, sizeof(kb), 4244, 4 << 20, 4);
	kfeed(pr, kb, n);
	kfeed(pr, &kl, sizeof(kl));
	/* The ring's free of 4242 is malloc's: the buffer stays in use. */
	feed_free(pr, 4242, 2);

	/* Malformed kernel records: each left out, the session goes on. */
	n = kalloc_rec(kb, sizeof(kb), 4300, 4096, 9);
	for (int i = 0; i < 9; i++) {
		static const char *const what[] = {
			"bad len", "wrong heap", "nregs too big", "stack_len beyond the record",
			"a stamp", "stack reuse", "a ring-only type", "exporter without NUL",
			"a free of the malloc heap",
		};
		size_t len = n;
		void *r = kb;

		kalloc_rec(kb, sizeof(kb), 4300, 4096, 9);
		switch (i) {
		case 0: a->hdr.len += 8; break;
		case 1: a->heap_id = HEAPPROFD_HEAP_MALLOC; break;
		case 2: a->nregs = HEAPPROFD_MAX_REGS + 1; break;
		case 3: a->stack_len = (uint32_t)(n - sizeof(*a) + 8); break;
		case 4: a->hdr.stamp = HEAPPROFD_REC_STAMP(0); break;
		case 5: a->hdr.flags |= HEAPPROFD_ALLOC_STACK_REUSED; a->stack_reused = 8; break;
		case 6: {
			struct heapprofd_rec_maps *m = (void *)small;

			memset(m, 0, sizeof(*m));
			m->hdr.type = HEAPPROFD_REC_MAPS;
			m->hdr.len = sizeof(*m);
			r = m;
			len = sizeof(*m);
			break;
		}
		case 7: {
			struct heapprofd_rec_dmabuf *d = (void *)small;

			kdmabuf_rec(small, 4300, 4096, 9, "x");
			memset(d->exporter, 'x', sizeof(d->exporter));
			r = d;
			len = sizeof(*d);
			break;
		}
		default:
			len = kfree_rec(small, 4242, 10);
			((struct heapprofd_rec_free *)small)->heap_id = HEAPPROFD_HEAP_MALLOC;
			r = small;
			break;
		}
		why[0] = 0;
		if (hp_proc_feed_kernel(pr, r, len, why, sizeof(why)) >= 0 || !why[0]) {
			diag("kernel record with %s was accepted", what[i]);
			bad++;
		}
		nbad++;
	}
	ok(!bad, "kernel records: %d kinds of malformed kernel record refused with a reason", nbad);
	/* The ring may not write into the kernel's heap, nor its record types. */
	kalloc_rec(kb, sizeof(kb), 4242, 4096, 100);
	a->stack_len = 0;
	a->hdr.len = sizeof(*a);
	rc = hp_proc_feed(pr, kb, sizeof(*a), why, sizeof(why));
	ok(rc < 0 && strstr(why, "dmabuf"),
	   "kernel records: a ring ALLOC in the dmabuf heap is malformed (%s)", why);
	ok(hp_proc_feed(pr, &kl, sizeof(kl), why, sizeof(why)) == 0,
	   "kernel records: a KLOST written into the ring is ignored, not counted");
	{
		struct heapprofd_rec_heap h = { .hdr = { .len = sizeof(h), .type = HEAPPROFD_REC_HEAP },
						.heap_id = 30, .interval = 1 };

		strcpy(h.name, "dmabuf");
		hp_proc_feed(pr, &h, sizeof(h), why, sizeof(why));
		good_alloc(small, (uint64_t)(uintptr_t)site_b, 0x777, 333, 3);
		((struct heapprofd_rec_alloc *)small)->heap_id = 30;
		hp_proc_feed(pr, small, sizeof(struct heapprofd_rec_alloc), why, sizeof(why));
	}

	snprintf(prefix, sizeof(prefix), "%s/dmabuf", tmpdir);
	rc = hp_proc_dump(pr, prefix, HP_OUT_PPROF | HP_OUT_TEXT | HP_OUT_FOLDED, HP_DUMP_NOW);
	hp_proc_get_stats(pr, &st);
	ok(!rc && st.kernel_records == 7 && st.kernel_rejected == (uint64_t)nbad,
	   "kernel records: 7 fed, %d left out, the session goes on (stats %llu, %llu)", nbad,
	   (unsigned long long)st.kernel_records, (unsigned long long)st.kernel_rejected);
	snprintf(path, sizeof(path), "%s.pb.gz", prefix);
	pprof_types(path, types, sizeof(types));
	ok(strstr(types, "alloc_space") && strstr(types, "dmabuf_alloc_objects") &&
	   strstr(types, "dmabuf_alloc_space") && strstr(types, "dmabuf_inuse_objects") &&
	   strstr(types, "dmabuf_inuse_space"),
	   "pprof: the dmabuf heap has sample types of its own (%s)", types);
	if (hp_pprof_read(&p, path, why, sizeof(why))) {
		ok(0, "pprof: read back: %s", why);
		hp_proc_end(pr);
		return;
	}
	{
		char cmd[2400];

		snprintf(cmd, sizeof(cmd), "cd %s && HOME=%s GOCACHE=%s GOFLAGS=-mod=mod "
			 "go tool pprof -top -sample_index=dmabuf_inuse_space "
			 "-tagfocus=exporter=udmabuf %s 2>&1", tmpdir, tmpdir, go_cache(), path);
		out = run(cmd);
		if (out && strstr(out, "not found") && strstr(out, "go"))
			ok(1, "pprof: go tool pprof reads the dmabuf sample types # SKIP go not installed");
		else
			ok(out && strstr(out, "Type: dmabuf_inuse_space") &&
			   strstr(out, "tagfocus=exporter=udmabuf") &&
			   strstr(out, "Showing nodes accounting for 1MB") &&
			   strstr(out, "hp_test_capture"),
			   "pprof: go tool pprof -sample_index=dmabuf_inuse_space -tagfocus=exporter=udmabuf: 1MB at the exporting stack");
		if (out && !strstr(out, "dmabuf_inuse_space"))
			diag("pprof said: %s", out);
		free(out);
	}
	ok(heap_sum(&p, "dmabuf", NULL, HP_V_ALLOC_SPACE) == 7 << 20 &&
	   heap_sum(&p, "dmabuf", NULL, HP_V_INUSE_SPACE) == 5 << 20 &&
	   heap_sum(&p, "dmabuf", NULL, HP_V_ALLOC_OBJ) == 3 &&
	   heap_sum(&p, "dmabuf", NULL, HP_V_INUSE_OBJ) == 2,
	   "books: dmabuf allocated 7 MiB in 3 buffers, 5 MiB in 2 in use (the release freed one; the ring's free did not)");
	ok(heap_sum(&p, "dmabuf", "udmabuf", HP_V_INUSE_SPACE) == 1 << 20 &&
	   heap_sum(&p, "dmabuf", "system", HP_V_ALLOC_SPACE) == 2 << 20 &&
	   heap_sum(&p, "dmabuf", "system", HP_V_INUSE_SPACE) == 0 &&
	   heap_sum(&p, "dmabuf", "(unknown)", HP_V_INUSE_SPACE) == 4 << 20,
	   "pprof: label exporter per sample (udmabuf 1 MiB in use, system released, (unknown) without its DMABUF record)");
	ok(heap_sum(&p, "libc.malloc", NULL, HP_V_INUSE_SPACE) == 0 &&
	   heap_sum(&p, "malloc", NULL, HP_V_ALLOC_SPACE) == 100,
	   "books: malloc is apart: 100 B allocated, freed by its own seq, no dmabuf bytes in its sample types");
	ok(heap_sum(&p, "user:dmabuf", NULL, HP_V_INUSE_SPACE) == 333 &&
	   heap_sum(&p, NULL, NULL, HP_V_INUSE_SPACE) == 333,
	   "books: a custom heap registered as \"dmabuf\" is booked as user:dmabuf, with malloc's sample types");
	out = render_to(&p, &(struct hp_render_opts){ .metric = -1, .heap = "dmabuf" }, 1,
			"kr-heap.folded");
	ok(out && strstr(out, ";main;test_kernel_records;kalloc_rec;export_dmabuf_buffer;hp_test_capture 1048576\n") &&
	   strstr(out, "export_dmabuf_buffer;hp_test_capture 4194304\n") && !strstr(out, "site_a"),
	   "folded --heap dmabuf: the exporting stack unwound from the kernel record's registers");
	if (out && !strstr(out, "export_dmabuf_buffer"))
		diag("%s", out);
	free(out);
	out = render_to(&p, &(struct hp_render_opts){ .metric = -1, .top = 5, .heap = "dmabuf" }, 0,
			"kr-heap.txt");
	ok(out && strstr(out, "heap dmabuf (DMA-BUF exports") &&
	   strstr(out, "total (estimated): in use 5.0MiB in 2 buffers; allocated 7.0MiB in 3 buffers") &&
	   strstr(out, "exporter         call site") &&
	   strstr(out, "     1048576          1      1048576          1  udmabuf          hp_test_capture") &&
	   strstr(out, "export_dmabuf_buffer") && !strstr(out, "site_a"),
	   "report --heap dmabuf: buffers by call site with their exporter");
	ok(out && strstr(out, "# WARNING: 3 kernel records were lost") &&
	   strstr(out, "about 5242880 bytes") &&
	   strstr(out, "# dmabuf heap (kernel records, sample types dmabuf_*, label exporter): 3 DMA-BUF exports sampled (1 without their exporter record), 1 releases") &&
	   strstr(out, "# WARNING: 9 kernel records were malformed and left out"),
	   "report: lost and malformed kernel records are never silent");
	if (out && !strstr(out, "udmabuf"))
		diag("%s", out);
	free(out);
	out = render_to(&p, &(struct hp_render_opts){ .metric = -1, .top = 5 }, 0, "kr-default.txt");
	ok(out && strstr(out, "site_a") && !strstr(out, "hp_test_capture") &&
	   strstr(out, "also in this profile, apart: the dmabuf heap (--heap dmabuf)") &&
	   strstr(out, "peak in-use bytes (estimated): 333\n"),
	   "report: the default shows malloc, says the dmabuf heap is there, the peak leaves DMA-BUFs out");
	free(out);
	hp_prof_free(&p);
	snprintf(path, sizeof(path), "%s.txt", prefix);
	out = slurp(path);
	ok(out && strstr(out, "site_a") && strstr(out, "\nheap dmabuf (DMA-BUF exports") &&
	   strstr(out, "udmabuf          hp_test_capture"),
	   "dump: the daemon's text file has the dmabuf heap's tables after malloc's");
	free(out);
	hp_proc_end(pr);
}

static void test_totals_and_tools(void)
{
	struct hp_proc *pr = self_proc(0);
	struct heapprofd_counters c = { .alloc_calls = 7, .alloc_bytes = 7777, .free_calls = 3,
					.free_bytes = 333, .records_dropped = 2,
					.frees_dropped = 1, .est_bytes_dropped = 4096 };
	char prefix[300], path[400], cmd[1200], *out;
	int i;

	for (i = 0; i < 10; i++)
		feed_alloc(pr, i < 7 ? site_a : site_b, 0x1000 + i * 16, 1000, i + 1);
	hp_proc_set_totals(pr, &c);
	snprintf(prefix, sizeof(prefix), "%s/tools", tmpdir);
	ok(!hp_proc_dump(pr, prefix, HP_OUT_PPROF | HP_OUT_TEXT | HP_OUT_SVG | HP_OUT_FOLDED,
			 HP_DUMP_NOW), "outputs: dump writes pprof, text, svg, folded");
	snprintf(path, sizeof(path), "%s.txt", prefix);
	out = slurp(path);
	ok(out && strstr(out, "exact totals (client): 7 allocations, 7777 bytes") &&
	   strstr(out, "site_a") && strstr(out, "7000"),
	   "outputs: text table has site_a 7000 B and the client's exact totals");
	ok(out && strstr(out, "# WARNING: 2 records were dropped because the ring was full: "
			 "1 allocation samples standing for about 4096 bytes allocated are missing, "
			 "and 1 frees") && strstr(out, "biased"),
	   "outputs: drops are never silent: the text header says how many records and bytes were lost and that estimates are biased");
	free(out);
	snprintf(path, sizeof(path), "%s.svg", prefix);
	out = slurp(path);
	ok(out && strstr(out, "<svg") && strstr(out, "</svg>") && strstr(out, "<title>site_a"),
	   "outputs: SVG flame graph with hover titles");
	free(out);
	snprintf(cmd, sizeof(cmd), "cd %s && HOME=%s GOCACHE=%s GOFLAGS=-mod=mod "
		 "go tool pprof -top -sample_index=inuse_space %s.pb.gz 2>&1", tmpdir, tmpdir,
		 go_cache(), prefix);
	out = run(cmd);
	if (out && strstr(out, "not found") && strstr(out, "go"))
		ok(1, "outputs: go tool pprof -top # SKIP go not installed");
	else
		ok(out && strstr(out, "site_a") && strstr(out, "site_b") &&
		   (strstr(out, "9.77kB total") || strstr(out, "10000B total") ||
		    strstr(out, "9.77KB total")),
		   "outputs: go tool pprof -top reads the profile (site_a, site_b, 10000 B total)");
	if (out && !strstr(out, "site_a"))
		diag("pprof said: %s", out);
	free(out);

	/* read back and print (what `heapprofctl report` does) */
	snprintf(cmd, sizeof(cmd), "%s.pb.gz", prefix);
	{
		struct hp_prof rp;
		char outp[400], why[200];
		FILE *f;

		snprintf(outp, sizeof(outp), "%s/report.txt", tmpdir);
		i = hp_pprof_read(&rp, cmd, why, sizeof(why));
		f = fopen(outp, "w");
		if (!i && f)
			i = hp_text_write(&rp, 5, f);
		if (f)
			fclose(f);
		if (!i)
			hp_prof_free(&rp);
		out = slurp(outp);
		ok(!i && out && strstr(out, "site_a") && strstr(out, "7000"),
		   "report: reads the pprof back and prints the top call sites");
		ok(out && strstr(out, "# WARNING: 2 records were dropped"),
		   "report: the pprof's comments carry the drop warning");
		free(out);
	}
	hp_proc_end(pr);
}

static void test_diff_and_symbolize(void)
{
	struct hp_proc *pr = self_proc(0);
	char a[300], b[300], pa[400], pb[400], outp[400], svg[400];
	struct hp_prof p;
	char why[200], *out;
	int rc;

	feed_alloc(pr, site_a, 0x100, 100, 1);
	snprintf(a, sizeof(a), "%s/base", tmpdir);
	hp_proc_dump(pr, a, HP_OUT_PPROF, HP_DUMP_NOW);
	feed_alloc(pr, site_b, 0x200, 4000, 2);
	feed_alloc(pr, site_a, 0x300, 100, 3);
	snprintf(b, sizeof(b), "%s/later", tmpdir);
	hp_proc_dump(pr, b, HP_OUT_PPROF | HP_OUT_NOSYMS, HP_DUMP_NOW);
	snprintf(pa, sizeof(pa), "%s.pb.gz", a);
	snprintf(pb, sizeof(pb), "%s.pb.gz", b);
	/* Without symbols: no names in the file. */
	rc = hp_pprof_read(&p, pb, why, sizeof(why));
	ok(!rc && !find_loc(&p, "site_b") && p.nmaps > 0 && p.maps[0].build_id,
	   "symbolize: a NOSYMS dump carries build ids and addresses only");
	if (!rc)
		hp_prof_free(&p);
	{
		struct hp_prof_symbolized n;

		rc = hp_pprof_read(&p, pb, why, sizeof(why));
		rc = rc ? rc : hp_prof_symbolize(&p, &n, NULL);
		rc = rc ? rc : hp_pprof_write(&p, pb, why, sizeof(why));
		if (!rc)
			hp_prof_free(&p);
	}
	rc = rc ? rc : hp_pprof_read(&p, pb, why, sizeof(why));
	ok(!rc && find_loc(&p, "site_b") && find_loc(&p, "site_b")->file,
	   "symbolize: names and file:line filled in by build id");
	if (!rc)
		hp_prof_free(&p);
	{
		struct hp_prof pl, pbase, d;
		FILE *f;

		snprintf(svg, sizeof(svg), "%s/diff.svg", tmpdir);
		snprintf(outp, sizeof(outp), "%s/diff.txt", tmpdir);
		hp_prof_init(&d);
		rc = hp_pprof_read(&pl, pb, why, sizeof(why));
		if (!rc) {
			rc = hp_pprof_read(&pbase, pa, why, sizeof(why));
			rc = rc ? rc : hp_prof_diff(&d, &pl, &pbase);
			if (!rc)
				hp_prof_free(&pbase);
			hp_prof_free(&pl);
		}
		f = fopen(outp, "w");
		rc = rc || !f ? -1 : hp_text_write(&d, 20, f);
		if (f)
			fclose(f);
		f = fopen(svg, "w");
		rc = rc || !f ? -1 : hp_svg_write(&d, hp_prof_metric(&d), pb, f);
		if (f)
			fclose(f);
		hp_prof_free(&d);
	}
	out = slurp(outp);
	ok(!rc && out && strstr(out, "4000") && strstr(out, "site_b") &&
	   strstr(out, "in use 4.0KiB"),
	   "report --base: the difference is site_b 4000 B + site_a 100 B");
	if (out && !strstr(out, "4000"))
		diag("%s", out);
	free(out);
	hp_proc_end(pr);
}

static void test_custom_heap(void)
{
	struct hp_proc *pr = self_proc(0);
	struct heapprofd_rec_heap h = { .hdr = { .len = sizeof(h), .type = HEAPPROFD_REC_HEAP },
					.heap_id = 20, .interval = 1 };
	uint64_t buf[64];
	char why[200], prefix[300], path[400], *out;
	struct hp_prof p;
	int64_t arena = 0;

	strcpy(h.name, "arena");
	hp_proc_feed(pr, &h, sizeof(h), why, sizeof(why));
	good_alloc(buf, (uint64_t)(uintptr_t)site_b, 0x100, 777, 1);
	((struct heapprofd_rec_alloc *)buf)->heap_id = 20;
	hp_proc_feed(pr, buf, sizeof(struct heapprofd_rec_alloc), why, sizeof(why));
	feed_alloc(pr, site_b, 0x100, 5, 2);	/* same address, malloc heap */
	snprintf(prefix, sizeof(prefix), "%s/heap", tmpdir);
	hp_proc_dump(pr, prefix, HP_OUT_PPROF | HP_OUT_TEXT, HP_DUMP_NOW);
	snprintf(path, sizeof(path), "%s.txt", prefix);
	out = slurp(path);
	snprintf(path, sizeof(path), "%s.pb.gz", prefix);
	if (!hp_pprof_read(&p, path, why, sizeof(why))) {
		for (size_t i = 0; i < p.nsamples; i++)
			if (p.samples[i].heap && !strcmp(p.samples[i].heap, "arena"))
				arena += p.samples[i].v[HP_V_INUSE_SPACE];
		hp_prof_free(&p);
	}
	ok(out && strstr(out, "[arena] site_b") && strstr(out, "[libc.malloc] site_b") &&
	   arena == 777, "books: a registered heap is kept apart and labelled (%lld B)",
	   (long long)arena);
	free(out);
	hp_proc_end(pr);
}

static void test_maps_record(void)
{
	struct hp_proc *pr = self_proc(0);
	struct heapprofd_rec_maps m = { .hdr = { .len = sizeof(m), .type = HEAPPROFD_REC_MAPS } };
	struct hp_proc_stats st;
	char why[100];

	hp_proc_feed(pr, &m, sizeof(m), why, sizeof(why));
	hp_proc_sync(pr);
	hp_proc_get_stats(pr, &st);
	ok(st.maps_reloads >= 1, "maps: a MAPS record rereads the maps (%llu rereads, one per worker)",
	   (unsigned long long)st.maps_reloads);
	hp_proc_end(pr);
}

/*
 * A snapshot of our own maps: a library's neighbouring mappings share the
 * ELF the first of them opened; a mapping that claims the same file at
 * another bias is checked against the build id in memory again (here an
 * anonymous page of zeroes that a forged maps file calls libc).
 */
static void test_maps_snapshot(void)
{
	int maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	int mem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
	const struct hp_mapping *first = NULL;
	struct hp_elfcache c;
	struct hp_maps mp;
	char line[5000] = "", forged[] = "/tmp/hp_maps_XXXXXX";
	size_t i, nlibc = 0, shared = 0;
	int fd, rc;
	void *page;

	hp_elfcache_init(&c);
	rc = hp_maps_read(&mp, NULL, maps_fd, getpid(), -1, mem_fd, &c);
	/* The loaded libc (our ELF cache maps the file once more, alone):
	 * the run of neighbours with its path around the text of a function
	 * that no sanitizer intercepts. */
	for (i = 0; !rc && i < mp.n; i++)
		if (mp.m[i].start <= (uintptr_t)&gnu_get_libc_version &&
		    (uintptr_t)&gnu_get_libc_version < mp.m[i].end)
			break;
	if (!rc && i < mp.n && mp.m[i].path) {
		size_t j = i;

		while (j > 0 && mp.m[j - 1].end == mp.m[j].start && mp.m[j - 1].path &&
		       !strcmp(mp.m[j - 1].path, mp.m[i].path))
			j--;
		first = &mp.m[j];
		for (nlibc = 1; j + nlibc < mp.n; nlibc++) {
			const struct hp_mapping *m = &mp.m[j + nlibc];

			if (m->start != m[-1].end || !m->path || strcmp(m->path, first->path))
				break;
			if (m->elf && m->elf == first->elf && m->bias_ok && m->bias == first->bias)
				shared++;
		}
	}
	ok(!rc && first && first->elf && first->bias_ok && nlibc >= 2 && shared == nlibc - 1,
	   "maps: libc's %zu mappings share the ELF its first opened (%zu)", nlibc, shared);

	/* Above libc's first mapping: maps files are sorted by address. */
	page = MAP_FAILED;
	for (i = 1; first && page == MAP_FAILED && i < 65536; i++) {
		page = mmap((void *)(uintptr_t)(first->end + i * 4096), 4096, PROT_READ,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (page != MAP_FAILED && (uintptr_t)page != first->end + i * 4096) {
			munmap(page, 4096);	/* an old kernel took it as a hint */
			page = MAP_FAILED;
		}
	}
	fd = mkstemp(forged);
	if (first && page != MAP_FAILED && fd >= 0) {
		char rest[4200];
		struct hp_maps fm;
		unsigned maj, min;
		unsigned long ino;
		struct hp_mapping pm;
		FILE *f = fopen("/proc/self/maps", "r");

		/* libc's first line as it is, then the same file "at" the page. */
		while (f && fgets(line, sizeof(line), f))
			if (strstr(line, "/libc.so.6") &&
			    !hp_maps_parse_line(line, &pm, rest, sizeof(rest), &maj, &min, &ino) &&
			    pm.start == first->start)
				break;
		if (f)
			fclose(f);
		if (dprintf(fd, "%s%llx-%llx r--p %08llx %02x:%02x %lu %s\n", line,
			    (unsigned long long)(uintptr_t)page,
			    (unsigned long long)(uintptr_t)page + 4096,
			    (unsigned long long)first->off, maj, min, ino, first->path) > 0 &&
		    !hp_maps_read(&fm, NULL, fd, getpid(), -1, mem_fd, &c)) {
			ok(fm.n == 2 && fm.m[0].elf == first->elf && !fm.m[1].elf,
			   "maps: the same file at another bias is checked, and refused when its build id is not in memory");
			hp_maps_free(&fm);
		} else {
			ok(0, "maps: a forged maps file could be read");
		}
	} else {
		ok(0, "maps: set-up for the forged maps file");
	}
	if (fd >= 0) {
		close(fd);
		unlink(forged);
	}
	if (page != MAP_FAILED)
		munmap(page, 4096);
	if (!rc)
		hp_maps_free(&mp);
	hp_elfcache_fini(&c);
	close(maps_fd);
	close(mem_fd);
}

/* ---- sigmask.c: libunwind's sigprocmask calls without system calls --------- */

static volatile sig_atomic_t got_usr1;

static void on_usr1(int sig)
{
	(void)sig;
	got_usr1 = 1;
}

/* Handlers may run late under TSan (it defers them): wait up to 1 s. */
static int wait_usr1(void)
{
	for (int i = 0; i < 1000 && !got_usr1; i++)
		usleep(1000);
	return got_usr1;
}

/* The kernel's view, through pthread_sigmask (never interposed). */
static int really_blocked(int sig)
{
	sigset_t cur;

	return !pthread_sigmask(SIG_SETMASK, NULL, &cur) && sigismember(&cur, sig) == 1;
}

static void *sigmask_worker(void *arg)
{
	int *res = arg;
	sigset_t full, old, one;

	res[0] = hp_sigmask_worker_init() == 0 && hp_sigmask_worker_fast() &&
		 really_blocked(SIGUSR1) && really_blocked(SIGTERM);
	/* libunwind's pattern: block everything, then restore. */
	sigfillset(&full);
	memset(&old, 0, sizeof(old));
	res[1] = !sigprocmask(SIG_SETMASK, &full, &old) && sigismember(&old, SIGUSR1) == 1 &&
		 sigismember(&old, SIGTERM) == 1 && !sigprocmask(SIG_SETMASK, &old, NULL) &&
		 !sigprocmask(SIG_BLOCK, &full, NULL) && hp_sigmask_worker_fast() &&
		 really_blocked(SIGUSR1);
	res[1] = res[1] && sigprocmask(12345, &full, NULL) == -1 && errno == EINVAL &&
		 hp_sigmask_worker_fast();
	/* A real change goes to the kernel and ends the fast path. */
	sigemptyset(&one);
	sigaddset(&one, SIGUSR1);
	got_usr1 = 0;
	res[2] = !sigprocmask(SIG_UNBLOCK, &one, NULL) && !hp_sigmask_worker_fast() &&
		 !really_blocked(SIGUSR1) && really_blocked(SIGTERM) &&
		 !pthread_kill(pthread_self(), SIGUSR1) && wait_usr1();
	return NULL;
}

static void test_sigmask(void)
{
	int res[3] = { 0, 0, 0 };
	pthread_t t;
	sigset_t one, old;
	struct sigaction sa = { .sa_handler = on_usr1 }, osa;

	sigaction(SIGUSR1, &sa, &osa);
	if (pthread_create(&t, NULL, sigmask_worker, res) || pthread_join(t, NULL))
		ok(0, "sigmask: worker thread");
	ok(res[0], "sigmask: worker init blocks every signal (kernel mask checked)");
	ok(res[1], "sigmask: block-all/restore on a worker reports the true mask and changes nothing; bad how -> EINVAL");
	ok(res[2], "sigmask: a real change on a worker reaches the kernel (SIGUSR1 unblocked and delivered)");
	/* Other threads: plain sigprocmask semantics. */
	sigemptyset(&one);
	sigaddset(&one, SIGUSR2);
	ok(!hp_sigmask_worker_fast() && !sigprocmask(SIG_BLOCK, &one, &old) &&
	   really_blocked(SIGUSR2) && sigismember(&old, SIGUSR2) == 0 &&
	   !sigprocmask(SIG_SETMASK, &old, NULL) && !really_blocked(SIGUSR2) &&
	   sigprocmask(12345, &one, NULL) == -1 && errno == EINVAL,
	   "sigmask: other threads' sigprocmask reaches the kernel, errors as -1/errno");
	got_usr1 = 0;
	kill(getpid(), SIGUSR1);	/* workers block it: this thread takes it */
	ok(wait_usr1(), "sigmask: a process signal is delivered while the workers block everything");
	sigaction(SIGUSR1, &osa, NULL);
}

/*
 * The hash map (hmap.c) against a plain array, with keys crowded into few
 * home slots so that clusters form and deletions shift members back; the
 * one-probe calls the books use (find/del_at, probe/set_at) mixed with the
 * plain ones.
 */
/*
 * A thread's saved stack top grows with its stack (reuse.c keeps only what
 * the deepest stack so far needs): shallow, then deeper and deeper stacks,
 * each reusing the top of the one before; every record must be rebuilt
 * byte for byte, the held bytes surviving each growth of the buffer.
 */
static void test_reuse_growth(void)
{
	static const uint32_t depth[] = { 512, 20000, 20000, 40960, 65536, 3000, 65536 };
	static const uint32_t reuse[] = { 0, 512, 16384, 20000, 40960, 2048, 3000 };
	const uint64_t top = 0x7ff000000000ULL;
	struct hp_reuse *r = hp_reuse_new();
	uint8_t *live = malloc(HEAPPROFD_STACK_REUSE_MAX), *whole = NULL;
	struct heapprofd_rec_alloc a;
	struct hp_stack_view v;
	size_t i, good = 0;
	uint32_t j;

	for (j = 0; j < HEAPPROFD_STACK_REUSE_MAX; j++)	/* the stack, top down */
		live[HEAPPROFD_STACK_REUSE_MAX - 1 - j] = (uint8_t)(j * 7 + j / 251);
	for (i = 0; i < sizeof(depth) / sizeof(depth[0]); i++) {
		uint32_t d = depth[i], k = reuse[i];
		const uint8_t *sp_bytes = live + HEAPPROFD_STACK_REUSE_MAX - d;
		int got;

		memset(&a, 0, sizeof(a));
		a.hdr.flags = k ? HEAPPROFD_ALLOC_STACK_REUSED : 0;
		a.tid = 77;
		a.stack_top = top;
		a.regs[HEAPPROFD_X86_64_SP] = top - d;
		a.stack_len = d - k;
		a.stack_reused = k;
		got = hp_reuse_view(r, &a, sp_bytes, &v);
		if (got != (k ? 1 : 0))
			break;
		whole = realloc(whole, hp_reuse_whole_len(&v));
		hp_reuse_build(&a, &v, 0, whole);
		if (((struct heapprofd_rec_alloc *)whole)->stack_len != d ||
		    memcmp(whole + sizeof(a), sp_bytes, d))
			break;
		good++;
	}
	ok(good == sizeof(depth) / sizeof(depth[0]) && hp_reuse_mem(r) >= HEAPPROFD_STACK_REUSE_MAX,
	   "reuse: a thread's stack growing from 512 bytes to 64 KiB is rebuilt exactly at every step "
	   "(%zu of %zu), its saved top growing with it", good, sizeof(depth) / sizeof(depth[0]));
	free(whole);
	free(live);
	hp_reuse_free(r);
}

/*
 * Stack deltas applied where the thread's saved top lies (reuse.c,
 * delta_in_place): a stack whose words change between records, each record
 * a delta of the changed words against the one before (its unchanged top
 * reused), must be rebuilt byte for byte; a deeper stack comes whole, and a
 * delta after a stack that did not reach the top has no base (cut, never
 * made up).
 */
static void test_reuse_delta(void)
{
	static const uint32_t depth[] = { 4096, 4096, 3072, 4096, 1024, 1024, 8192, 8192, 2048 };
	const uint64_t top = 0x7ff000000000ULL;
	struct hp_reuse *r = hp_reuse_new();
	uint8_t *live = calloc(1, 8192), *prev = calloc(1, 8192), *whole = NULL;
	uint8_t *rec = malloc(sizeof(struct heapprofd_rec_alloc) + 16 + 8192 * 2);
	uint32_t prev_depth = 0, seed = 12345;
	size_t i, good = 0, deltas = 0;
	struct hp_stack_view v;
	int cut_ok;

	for (i = 0; i < sizeof(depth) / sizeof(depth[0]); i++) {
		struct heapprofd_rec_alloc *a = (void *)rec;
		struct heapprofd_stack_delta *dh = (void *)(a + 1);
		struct heapprofd_delta_run *run;
		uint32_t d = depth[i], k = 0, nruns = 0, w, want;
		uint8_t *lit;
		int got;

		/* Some words of the live stack (top down in live[8192 - d ..]) change. */
		for (w = 0; w < 24; w++) {
			seed = seed * 1103515245 + 12345;
			live[8192 - 8 - 8 * ((seed >> 8) % (d / 8))] ^= (uint8_t)(1 + (seed >> 20) % 255);
		}
		memset(a, 0, sizeof(*a));
		a->tid = 78;
		a->stack_top = top;
		a->regs[HEAPPROFD_X86_64_SP] = top - d;
		if (d > prev_depth) {		/* deeper: the whole stack */
			memcpy(a + 1, live + 8192 - d, d);
			a->stack_len = d;
		} else {
			/* the unchanged top, reused; the changed words below as runs */
			while (k + 8 <= d && !memcmp(live + 8192 - k - 8, prev + 8192 - k - 8, 8))
				k += 8;
			want = d - k;
			run = (void *)(dh + 1);
			for (w = 0; w < want; w += 8)
				if (memcmp(live + 8192 - d + w, prev + 8192 - d + w, 8))
					nruns++;
			lit = (uint8_t *)(run + nruns);
			nruns = 0;
			for (w = 0; w < want; w += 8)
				if (memcmp(live + 8192 - d + w, prev + 8192 - d + w, 8)) {
					run[nruns].off = w;
					run[nruns].len = 8;
					memcpy(lit, live + 8192 - d + w, 8);
					lit += 8;
					nruns++;
				}
			dh->nruns = nruns;
			a->hdr.flags = HEAPPROFD_ALLOC_STACK_DELTA | (k ? HEAPPROFD_ALLOC_STACK_REUSED : 0);
			a->stack_len = want;
			a->stack_reused = k;
			deltas++;
		}
		got = hp_reuse_view(r, a, (const uint8_t *)(a + 1), &v);
		if (got != (d > prev_depth ? 0 : 1))
			break;
		whole = realloc(whole, hp_reuse_whole_len(&v));
		hp_reuse_build(a, &v, 0, whole);
		if (((struct heapprofd_rec_alloc *)whole)->stack_len != d ||
		    memcmp(whole + sizeof(*a), live + 8192 - d, d))
			break;
		memcpy(prev, live, 8192);
		prev_depth = d;
		good++;
	}
	ok(good == sizeof(depth) / sizeof(depth[0]) && deltas >= 5,
	   "reuse: a stack changing between records, sent as deltas against the one before, is rebuilt exactly at every step (%zu of %zu, %zu deltas)",
	   good, sizeof(depth) / sizeof(depth[0]), deltas);
	/* A copy that stops short of the top leaves nothing to apply a delta to. */
	{
		struct heapprofd_rec_alloc *a = (void *)rec;
		struct heapprofd_stack_delta *dh = (void *)(a + 1);

		memset(a, 0, sizeof(*a));
		a->tid = 78;
		a->stack_top = top;
		a->regs[HEAPPROFD_X86_64_SP] = top - 2048;
		a->stack_len = 1024;	/* ends 1 KiB below the top */
		memcpy(a + 1, live + 8192 - 2048, 1024);
		hp_reuse_view(r, a, (const uint8_t *)(a + 1), &v);
		a->hdr.flags = HEAPPROFD_ALLOC_STACK_DELTA;
		a->stack_len = 2048;
		dh->nruns = 0;
		cut_ok = hp_reuse_view(r, a, (const uint8_t *)(a + 1), &v) == 2 && v.own_len < 2048;
	}
	ok(cut_ok, "reuse: a delta after a stack copy that stopped short of the top is cut where its base is missing");
	free(rec);
	free(whole);
	free(live);
	free(prev);
	hp_reuse_free(r);
}

static void test_hmap(void)
{
	enum { KEYS = 512, OPS = 200000 };
	static void *ref[KEYS];
	struct hp_hmap m = { 0 };
	uint64_t x = 12345;
	size_t n = 0, bad = 0;

	memset(ref, 0, sizeof(ref));
	for (int op = 0; op < OPS; op++) {
		uint64_t r = (x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33;
		unsigned k = (unsigned)(r % KEYS);
		/* k2 picks the cluster: many keys share a home region */
		uint64_t k1 = k, k2 = k % 7;
		void *v = (void *)(uintptr_t)(op + 1);
		struct hp_hent *e;

		switch ((r >> 12) % 6) {
		case 0:
			if (hp_hmap_put(&m, k1, k2, v))
				bad++;
			n += !ref[k];
			ref[k] = v;
			break;
		case 1:
			e = hp_hmap_probe(&m, k1, k2);
			if (!e || (e->v != NULL) != (ref[k] != NULL) || (e->v && e->v != ref[k]))
				bad++;
			else if (hp_hmap_set_at(&m, e, k1, k2, v))
				bad++;
			n += !ref[k];
			ref[k] = v;
			break;
		case 2:
			if (hp_hmap_del(&m, k1, k2) != ref[k])
				bad++;
			n -= !!ref[k];
			ref[k] = NULL;
			break;
		case 3:
			e = hp_hmap_find(&m, k1, k2);
			if ((e != NULL) != (ref[k] != NULL))
				bad++;
			else if (e && hp_hmap_del_at(&m, e) != ref[k])
				bad++;
			n -= !!ref[k];
			ref[k] = NULL;
			break;
		default:
			if (hp_hmap_get(&m, k1, k2) != ref[k])
				bad++;
			break;
		}
		if (m.n != n)
			bad++;
	}
	for (unsigned k = 0; k < KEYS; k++)
		if (hp_hmap_get(&m, k, k % 7) != ref[k])
			bad++;
	ok(!bad && m.n == n, "hmap: %d mixed operations (put, probe+set_at, del, find+del_at, get) agree with a plain array (%zu differences, %zu members)",
	   OPS, bad, n);
	hp_hmap_free(&m);
}

/* The symbol cache (symcache.c): a library whose debug info sits, compressed,
 * in a debug root by build id, as distributions ship it. */
static int sym_is(const struct hp_sym *s, const struct hp_sym *want)
{
	return s && want && s->func && want->func && !strcmp(s->func, want->func) &&
	       s->line == want->line && (s->file == want->file ||
		(s->file && want->file && !strcmp(s->file, want->file)));
}

static int count_lines(const char *path)
{
	char *txt = slurp(path), *c;
	int n = 0;

	for (c = txt; c && *c; c++)
		n += *c == '\n';
	free(txt);
	return txt ? n : -1;
}

/*
 * Warm, with a symbolizer thread as the daemon has: the file's DWARF stays
 * closed for the addresses the cache holds, and one it lacks is named by the
 * thread as soon as the books see its frame (hp_symd_prefetch_addr), not by
 * the dump after the program's exit, which would wait for the inflating.
 */
static void test_symcache_early(const char *path, uint64_t va, uint64_t va2)
{
	struct hp_elfcache c;
	const struct hp_sym *s = NULL;
	struct hp_elf *e = NULL;
	int i = 0, lines0, lines1 = -1, deferred = -1;
	char hex[32], *txt;

	hp_elfcache_init(&c);
	c.symd = hp_symd_new();
	if (c.symd)
		e = hp_elf_open(&c, HP_SYMTEST_SO, -1, 0, 0);
	lines0 = count_lines(path);
	if (e) {
		hp_symd_prefetch(e);
		hp_symd_prefetch_addr(e, va);	/* in the cache: nothing to do */
		hp_symd_prefetch_addr(e, va2);
		for (i = 0; i < 1000 && !s; i++) {
			pthread_mutex_lock(&e->sym_lock);
			s = hp_hmap_get(&e->syms, va2, 0);
			deferred = e->sym_deferred;
			pthread_mutex_unlock(&e->sym_lock);
			if (!s)
				usleep(10000);
		}
	}
	ok(e && deferred == 1 && s && s->func && !strcmp(s->func, "dl_entry") && s->file &&
	   strstr(s->file, "dltest.c") && s->line > 0,
	   "symcache: warm, with a symbolizer thread: the DWARF is left closed at the file's open, and an address the cache lacks (%#llx) is named by that thread once its frame is seen, before any dump asks (%s:%d after %d ms)",
	   (unsigned long long)va2, s && s->file ? s->file : "?", s ? s->line : 0, i * 10);
	/* Its line went into the cache file; the cached address was not
	 * looked up again (a lookup adds a line). */
	for (i = 0; i < 100 && (lines1 = count_lines(path)) == lines0; i++)
		usleep(10000);
	snprintf(hex, sizeof(hex), "\n%llx\t", (unsigned long long)va2);
	txt = slurp(path);
	ok(lines0 > 0 && lines1 == lines0 + 1 && txt && strstr(txt, hex),
	   "symcache: the early name is in the cache file for the next daemon (%d lines, were %d)",
	   lines1, lines0);
	free(txt);
	if (e)
		hp_elf_put(e);
	hp_symd_free(c.symd);
	c.symd = NULL;
	hp_elfcache_fini(&c);
}

static void test_symcache(void)
{
	char cmd[600], path[600], hex[2 * 64 + 1], *out, *txt;
	struct hp_sym want = { 0 };
	const struct hp_sym *s;
	struct hp_elf *e;
	uint64_t va = 0, va2 = 0, size = 0;
	int fd, opened, entries;

	snprintf(cmd, sizeof(cmd), "nm -S -D --defined-only %s | sed -n 's/ T dl_entry$//p'",
		 HP_SYMTEST_SO);
	out = run(cmd);
	if (out) {
		char *end;

		va = strtoull(out, &end, 16);
		size = strtoull(end, NULL, 16);
		va2 = size > 8 ? va + size - 2 : 0;	/* in its last instruction */
		va += 4;
	}
	free(out);
	e = hp_elf_open(NULL, HP_SYMTEST_SO, -1, 0, 0);
	ok(e && va && hp_symcache_dir(), "symcache: test library (%#llx) and cache directory %s",
	   (unsigned long long)va, hp_symcache_dir() ? hp_symcache_dir() : "(off)");
	if (!e || !va || !hp_symcache_dir()) {
		if (e)
			hp_elf_put(e);
		return;
	}
	hp_elf_build_id_hex(e, hex, sizeof(hex));
	snprintf(path, sizeof(path), "%s/%s.sym", hp_symcache_dir(), hex);
	s = hp_symbolize(e, va);
	ok(s && s->func && !strcmp(s->func, "dl_entry") && s->file && strstr(s->file, "dltest.c") &&
	   s->line > 0 && e->dwfl_state == 1,
	   "symcache: cold: dl_entry at %s:%d from the separate, compressed debug file",
	   s && s->file ? s->file : "?", s ? s->line : 0);
	if (s && s->func && s->file) {
		want.func = strdup(s->func);
		want.file = strdup(s->file);
		want.line = s->line;
	}
	hp_elf_put(e);
	txt = slurp(path);
	ok(txt && !strncmp(txt, "heapprofd-symcache 1 ", 21) && strstr(txt, "\tdl_entry\t"),
	   "symcache: the cache file holds the header and the address's line");
	free(txt);

	/* Warm: the answer comes from the file, the DWARF is never opened. */
	e = hp_elf_open(NULL, HP_SYMTEST_SO, -1, 0, 0);
	s = e ? hp_symbolize(e, va) : NULL;
	opened = e ? e->dwfl_state : -2;
	entries = e ? (int)e->symcache_entries : 0;
	ok(sym_is(s, &want) && opened == 0 && entries >= 1,
	   "symcache: warm: the same function, file and line, read from the cache (%d entries, DWARF %s)",
	   entries, opened ? "opened" : "not opened");
	if (e)
		hp_elf_put(e);

	/* A line that does not parse: not trusted, the DWARF answers. */
	fd = open(path, O_WRONLY | O_APPEND);
	if (fd >= 0) {
		if (write(fd, "zz\t9999\tx\n", 10) != 10)
			diag("append failed");
		close(fd);
	}
	txt = slurp(path);
	if (txt) {
		/* The garbage right after the header: every entry after it is ignored. */
		char *nl = strchr(txt, '\n');

		fd = nl ? open(path, O_WRONLY | O_TRUNC) : -1;
		if (fd >= 0) {
			size_t h = nl + 1 - txt;

			if (write(fd, txt, h) != (ssize_t)h || write(fd, "zz\t9999\tx\n", 10) != 10 ||
			    write(fd, nl + 1, strlen(nl + 1)) < 0)
				diag("rewrite failed");
			close(fd);
		}
	}
	free(txt);
	e = hp_elf_open(NULL, HP_SYMTEST_SO, -1, 0, 0);
	s = e ? hp_symbolize(e, va) : NULL;
	ok(e && sym_is(s, &want) && e->dwfl_state == 1 && e->symcache_entries == 0,
	   "symcache: a corrupt cache file is not trusted; the DWARF answers the same");
	if (e)
		hp_elf_put(e);

	/* The debug file changed (a new debug package): the file starts anew. */
	{
		char dbg[600], stamp[64];
		struct stat st;
		struct timespec ts[2];

		snprintf(dbg, sizeof(dbg), "%s/.build-id/%.2s/%s.debug", HP_SYMROOT, hex, hex + 2);
		if (!stat(dbg, &st)) {
			ts[0] = st.st_atim;
			ts[1] = st.st_mtim;
			ts[1].tv_sec += 1;	/* a new mtime, whatever earlier runs left */
			if (utimensat(AT_FDCWD, dbg, ts, 0))
				diag("utimensat failed");
		}
		snprintf(stamp, sizeof(stamp), " %lld.%09ld\n", (long long)ts[1].tv_sec,
			 ts[1].tv_nsec);
		e = hp_elf_open(NULL, HP_SYMTEST_SO, -1, 0, 0);
		s = e ? hp_symbolize(e, va) : NULL;
		txt = slurp(path);
		ok(e && sym_is(s, &want) && e->dwfl_state == 1 && txt && strstr(txt, stamp) &&
		   !strstr(txt, "zz\t") && strstr(txt, "\tdl_entry\t"),
		   "symcache: a changed debug file makes the cache file start anew");
	}
	free(txt);
	if (e)
		hp_elf_put(e);
	free((char *)want.func);
	free((char *)want.file);
	test_symcache_early(path, va, va2);
}


/* ---- output files created safely (outfile.c) ---------------- */

/* Does dir hold a name starting with "." other than . and .. (a temp left)? */
static int hidden_left(const char *dir)
{
	char cmd[600], *out;
	int left;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | grep '^\\.' ", dir);
	out = run(cmd);
	left = out && out[0];
	if (left)
		diag("left in %s: %s", dir, out);
	free(out);
	return left;
}

/* A file that must keep its "keep" (the target of a planted link). */
static void victim(const char *path)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fputs("keep\n", f);
		fclose(f);
	}
}

static int still_keep(const char *path)
{
	char *b = slurp(path);
	int k = b && !strcmp(b, "keep\n");

	free(b);
	return k;
}

/* A profile of known in-use bytes: work_a and work_b (under malloc), and
 * nine small sites; written as a dump of session `session` taken at dt_ns. */
static int tl_dump(const char *path, int64_t session, int64_t dt_ns, int64_t a, int64_t b,
		   int64_t tiny, int64_t exact)
{
	struct hp_prof p;
	struct hp_prof_loc l = { 0 };
	uint32_t lm, la, lb, st[2];
	int64_t v[HP_NV] = { 0 };
	char why[200], name[32];
	int rc;

	hp_prof_init(&p);
	p.time_ns = session;
	p.duration_ns = dt_ns;
	if (exact >= 0)
		hp_prof_add_comment(&p, "exact totals (client): 9 allocations, 1 bytes; 1 frees, 1 bytes; in use %lld bytes",
				    (long long)exact);
	hp_prof_add_comment(&p, "peak in-use bytes (estimated): 8000");
	l.func = hp_prof_str(&p, "malloc");
	l.addr = 1;
	lm = hp_prof_add_loc(&p, &l);
	l.func = hp_prof_str(&p, "work_a");
	l.addr = 2;
	la = hp_prof_add_loc(&p, &l);
	l.func = hp_prof_str(&p, "work_b");
	l.addr = 3;
	lb = hp_prof_add_loc(&p, &l);
	st[0] = lm;
	st[1] = la;
	v[HP_V_INUSE_SPACE] = a;
	v[HP_V_ALLOC_SPACE] = a + 1;
	hp_prof_add_sample(&p, st, 2, v, NULL);
	st[1] = lb;
	v[HP_V_INUSE_SPACE] = b;
	hp_prof_add_sample(&p, st, 2, v, NULL);
	for (int i = 0; i < 9; i++) {
		snprintf(name, sizeof(name), "tiny_%d", i);
		l.func = hp_prof_str(&p, name);
		l.addr = 10 + (uint64_t)i;
		st[0] = hp_prof_add_loc(&p, &l);
		v[HP_V_INUSE_SPACE] = tiny;
		hp_prof_add_sample(&p, st, 1, v, NULL);
	}
	rc = hp_pprof_write(&p, path, why, sizeof(why));
	if (rc)
		diag("timeline: writing %s: %s", path, why);
	hp_prof_free(&p);
	return rc;
}

static void test_timeline(void)
{
	const int64_t s0 = 1700000000LL * 1000000000LL, ms = 1000000;
	/* in use per dump: work_a, work_b, each of nine tiny sites */
	static const int64_t want[4][3] = { { 1000, 4000, 10 }, { 3000, 3000, 10 },
					    { 6000, 1000, 10 }, { 0, 500, 10 } };
	struct hp_timeline t;
	char prefix[300], path[400], why[200], line[256], *out;
	int rc = 0, i, rows = 0, good = 0;
	FILE *f;

	snprintf(prefix, sizeof(prefix), "%s/tl", tmpdir);
	for (i = 0; i < 4 && !rc; i++) {
		snprintf(path, sizeof(path), "%s.%04d.pb.gz", prefix, i + 1);
		rc = tl_dump(path, s0, (i + 1) * 100 * ms, want[i][0], want[i][1], want[i][2],
			     i ? -1 : 5100);
	}
	/* an earlier, longer recording's dump under the same prefix */
	snprintf(path, sizeof(path), "%s.0005.pb.gz", prefix);
	rc = rc ? rc : tl_dump(path, s0 - 60000 * ms, 500 * ms, 99999, 0, 0, -1);
	hp_timeline_init(&t);
	rc = rc ? rc : hp_timeline_read_prefix(&t, prefix, why, sizeof(why));
	ok(!rc && t.npts == 4 && t.skipped == 1,
	   "timeline: reads PREFIX.0001..0004.pb.gz, leaves out an earlier recording's dump (%zu, %zu)",
	   t.npts, t.skipped);
	ok(t.npts == 4 && hp_timeline_peak(&t) == 2 && t.pts[2].total == 7090 && t.peak_any == 8000,
	   "timeline: the peak is the third dump, 7090 bytes; 8000 between dumps");

	snprintf(path, sizeof(path), "%s/tl.csv", tmpdir);
	f = fopen(path, "w");
	rc = rc || !f ? -1 : hp_timeline_csv(&t, 2, f);
	if (f)
		fclose(f);
	f = rc ? NULL : fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		double ts;
		long long tot, a, b, other;
		char exact[32] = "";
		int n;

		if (line[0] == '#')
			continue;
		if (!rows++) {
			good += !strncmp(line, "time_s,total_bytes,exact_bytes,work_a,work_b,other,file", 55);
			continue;
		}
		n = sscanf(line, "%lf,%lld,%31[0-9]", &ts, &tot, exact);
		if (n < 2 || rows - 2 >= 4)
			continue;
		/* after the exact column (may be empty): a, b, other */
		{
			const char *c = strchr(strchr(line, ',') + 1, ',') + 1;

			if (sscanf(c, "%*[0-9],%lld,%lld,%lld", &a, &b, &other) != 3 &&
			    sscanf(c, ",%lld,%lld,%lld", &a, &b, &other) != 3)
				continue;
		}
		i = rows - 2;
		good += fabs(ts - 0.1 * (i + 1)) < 1e-6 &&
			tot == want[i][0] + want[i][1] + 9 * want[i][2] &&
			a == want[i][0] && b == want[i][1] && other == 9 * want[i][2] &&
			(i ? !exact[0] : !strcmp(exact, "5100"));
	}
	if (f)
		fclose(f);
	ok(!rc && rows == 5 && good == 5,
	   "timeline: CSV per dump: time, total, exact, work_a and work_b (not malloc), other = the nine small sites (%d rows, %d right)",
	   rows, good);
	if (good != 5 && (out = slurp(path))) {
		diag("%s", out);
		free(out);
	}

	snprintf(path, sizeof(path), "%s/tl.svg", tmpdir);
	f = fopen(path, "w");
	rc = rc || !f ? -1 : hp_timeline_svg(&t, 2, "test <run>", f);
	if (f)
		fclose(f);
	out = rc ? NULL : slurp(path);
	ok(out && strstr(out, "data-points=\"4\"") && strstr(out, "data-peak-bytes=\"7090\"") &&
	   strstr(out, "data-peak-t-ns=\"300000000\"") && strstr(out, "data-total=\"5090\"") &&
	   strstr(out, "data-total=\"6090\"") && strstr(out, "data-total=\"590\"") &&
	   strstr(out, "data-exact=\"5100\""),
	   "timeline: the SVG's points carry the dumps' totals and the peak (7090 B at 300 ms)");
	ok(out && strstr(out, "peak 6.92 KiB at 0.30 s") && strstr(out, ">work_a<") &&
	   strstr(out, ">work_b<") && strstr(out, ">other call sites<") &&
	   strstr(out, "test &lt;run&gt;") && strstr(out, "highest between dumps: 7.81 KiB") &&
	   !strstr(out, ">malloc<") && strstr(out, "</svg>"),
	   "timeline: the SVG marks the peak, names the sites and other in its legend, escapes the title");
	free(out);
	hp_timeline_free(&t);

	/* The daemon's own dumps say when they were taken. */
	{
		struct hp_proc *pr = self_proc(0);
		struct timespec d = { 0, 30 * ms };

		snprintf(prefix, sizeof(prefix), "%s/tlproc", tmpdir);
		snprintf(path, sizeof(path), "%s.0001", prefix);
		feed_alloc(pr, site_a, 0x100, 1000, 1);
		rc = hp_proc_dump(pr, path, HP_OUT_PPROF, HP_DUMP_NOW);
		nanosleep(&d, NULL);
		feed_alloc(pr, site_b, 0x200, 2000, 2);
		snprintf(path, sizeof(path), "%s.0002", prefix);
		rc = rc ? rc : hp_proc_dump(pr, path, HP_OUT_PPROF, HP_DUMP_NOW);
		hp_timeline_init(&t);
		rc = rc ? rc : hp_timeline_read_prefix(&t, prefix, why, sizeof(why));
		ok(!rc && t.npts == 2 && t.pts[0].total == 1000 && t.pts[1].total == 3000 &&
		   t.pts[1].t_ns - t.pts[0].t_ns >= 30 * ms && t.pts[0].t_ns > t.pts[0].session_ns &&
		   t.pts[0].session_ns == t.pts[1].session_ns,
		   "timeline: dumps carry their session's start and when they were taken (duration_nanos)");
		hp_timeline_free(&t);
		hp_proc_end(pr);
	}
}

static void test_outfile(void)
{
	char d[300], v[400], fin[400], alt[400], why[HP_OUT_PATH_MAX + 200];
	struct hp_prof p;
	struct hp_out o;
	struct hp_proc *pr;
	struct stat st;
	unsigned long long n;
	int rc;

	snprintf(d, sizeof(d), "%s/outfile", tmpdir);
	mkdir(d, 0755);
	snprintf(v, sizeof(v), "%s/victim", tmpdir);
	hp_prof_init(&p);
	hp_prof_add_comment(&p, "outfile test");

	/* The old writer used PATH.tmp: a link planted there is not followed. */
	victim(v);
	snprintf(fin, sizeof(fin), "%s/a.pb.gz", d);
	snprintf(alt, sizeof(alt), "%s/a.pb.gz.tmp", d);
	if (symlink(v, alt))
		diag("symlink: %s", strerror(errno));
	rc = hp_pprof_write(&p, fin, why, sizeof(why));
	ok(!rc && still_keep(v) && !lstat(fin, &st) && S_ISREG(st.st_mode) &&
	   !lstat(alt, &st) && S_ISLNK(st.st_mode),
	   "outfile: a symlink at the old temp name PATH.tmp is not followed; the file is written");
	unlink(alt);

	/* A symlink at the final name: refused, its target unchanged. */
	snprintf(fin, sizeof(fin), "%s/b.pb.gz", d);
	if (symlink(v, fin))
		diag("symlink: %s", strerror(errno));
	rc = hp_pprof_write(&p, fin, why, sizeof(why));
	ok(rc == -EEXIST && still_keep(v) && !lstat(fin, &st) && S_ISLNK(st.st_mode) &&
	   strstr(why, "symbolic link") && !hidden_left(d),
	   "outfile: a symlink at the final name is refused, its target unchanged (%s)", why);
	unlink(fin);

	/* Planted after the open, before the commit: still refused. */
	rc = hp_out_open(&o, fin, 0644);
	if (!rc) {
		hp_out_write(&o, "new\n", 4);
		if (symlink(v, fin))
			diag("symlink: %s", strerror(errno));
		rc = hp_out_commit(&o);
	}
	ok(rc == -EEXIST && still_keep(v) && !hidden_left(d),
	   "outfile: a symlink planted between open and commit is not replaced, no temp left");
	unlink(fin);

	/* A FIFO, a directory, a device at the final name. */
	snprintf(fin, sizeof(fin), "%s/c.txt", d);
	mkfifo(fin, 0644);
	rc = hp_pprof_write(&p, fin, why, sizeof(why));
	ok(rc && !lstat(fin, &st) && S_ISFIFO(st.st_mode) && strstr(why, "FIFO") && !hidden_left(d),
	   "outfile: a FIFO at the final name is refused and kept (%s)", why);
	unlink(fin);
	mkdir(fin, 0755);
	rc = hp_pprof_write(&p, fin, why, sizeof(why));
	ok(rc && !lstat(fin, &st) && S_ISDIR(st.st_mode) && strstr(why, "directory"),
	   "outfile: a directory at the final name is refused (%s)", why);
	rmdir(fin);
	if (mknod(fin, S_IFCHR | 0644, makedev(1, 3)) == 0) {
		rc = hp_pprof_write(&p, fin, why, sizeof(why));
		ok(rc && !lstat(fin, &st) && S_ISCHR(st.st_mode) && strstr(why, "device"),
		   "outfile: a device node at the final name is refused and kept (%s)", why);
		unlink(fin);
	} else {
		ok(1, "outfile: a device node at the final name # SKIP mknod: %s", strerror(errno));
	}

	/* Names that cannot be files. */
	rc = hp_pprof_write(&p, "", why, sizeof(why));
	ok(rc == -EINVAL && strstr(why, "empty"), "outfile: an empty name is an error (%s)", why);
	snprintf(fin, sizeof(fin), "%s/nodir/x.pb.gz", d);
	rc = hp_pprof_write(&p, fin, why, sizeof(why));
	ok(rc == -ENOENT && strstr(why, "does not exist"),
	   "outfile: a directory that does not exist is named (%s)", why);
	snprintf(fin, sizeof(fin), "%s/", d);
	rc = hp_out_open(&o, fin, 0644);
	ok(rc == -EISDIR && strstr(o.why, "directory"), "outfile: a name ending in / is refused (%s)",
	   o.why);

	/* Mode as asked; a regular file at the final name is replaced. */
	snprintf(fin, sizeof(fin), "%s/m", d);
	victim(fin);
	rc = hp_out_open(&o, fin, 0600);
	if (!rc) {
		hp_out_write(&o, "x", 1);
		rc = hp_out_commit(&o);
	}
	ok(!rc && !stat(fin, &st) && (st.st_mode & 0777) == 0600 && st.st_size == 1 && !hidden_left(d),
	   "outfile: an old regular file is replaced, mode 0600 as asked");

	/* A dump's files are all or none: a link at PREFIX.svg leaves no .pb.gz. */
	pr = self_proc(0);
	feed_alloc(pr, site_a, 0x1000, 100, 1);
	snprintf(fin, sizeof(fin), "%s/dump.svg", d);
	if (symlink(v, fin))
		diag("symlink: %s", strerror(errno));
	snprintf(alt, sizeof(alt), "%s/dump", d);
	rc = hp_proc_dump_why(pr, alt, HP_OUT_PPROF | HP_OUT_TEXT | HP_OUT_SVG | HP_OUT_FOLDED,
			      HP_DUMP_NOW, why, sizeof(why));
	snprintf(fin, sizeof(fin), "%s/dump.pb.gz", d);
	ok(rc && still_keep(v) && access(fin, F_OK) && strstr(why, "dump.svg") && !hidden_left(d),
	   "outfile: a dump with a link at PREFIX.svg writes none of its files (%s)", why);

	/* Under a limit: two blocks hold the pprof and the folded; the text
	 * and the SVG are left out, and nothing past the limit is written. */
	{
		struct hp_out_limit lim = { .max = 8192, .block = 4096, .err = EDQUOT };
		char f2[400];

		snprintf(lim.why, sizeof(lim.why), "the test's two blocks");
		snprintf(alt, sizeof(alt), "%s/lim", d);
		rc = hp_proc_dump_limited(pr, alt, HP_OUT_PPROF | HP_OUT_TEXT | HP_OUT_SVG |
					  HP_OUT_FOLDED, HP_DUMP_NOW, &lim, why, sizeof(why));
		snprintf(fin, sizeof(fin), "%s/lim.pb.gz", d);
		snprintf(f2, sizeof(f2), "%s/lim.folded", d);
		ok(!rc && !access(fin, F_OK) && !access(f2, F_OK) &&
		   lim.left_out == (HP_OUT_TEXT | HP_OUT_SVG) && lim.used <= lim.max && !hidden_left(d),
		   "outfile: under a 2-block limit the pprof and folded are written, text and SVG left out (%d, %llu bytes charged)",
		   rc, (unsigned long long)lim.used);
		snprintf(f2, sizeof(f2), "%s/lim.txt", d);
		ok(access(f2, F_OK) && errno == ENOENT, "outfile: ... no text file is there");
		memset(&lim, 0, sizeof(lim));
		lim.max = 100;
		lim.err = ENOSPC;
		snprintf(lim.why, sizeof(lim.why), "the test's 100 bytes");
		snprintf(alt, sizeof(alt), "%s/none", d);
		rc = hp_proc_dump_limited(pr, alt, HP_OUT_PPROF | HP_OUT_TEXT, HP_DUMP_NOW, &lim,
					  why, sizeof(why));
		snprintf(fin, sizeof(fin), "%s/none.pb.gz", d);
		ok(rc == -ENOSPC && strstr(why, "the test's 100 bytes") && access(fin, F_OK) &&
		   !hidden_left(d) && lim.used == 0,
		   "outfile: a limit the pprof does not fit fails the dump, nothing left (%s)", why);
	}
	hp_proc_end(pr);

	/* Links in the directory's path: another user's, or any in another
	 * user's directory, are not followed (as root: chown makes them so). */
	if (!geteuid()) {
		char vd[300], ud[300], lk[330], f2[500];
		int fd;

		snprintf(vd, sizeof(vd), "%s/vdir", tmpdir);
		snprintf(ud, sizeof(ud), "%s/udir", tmpdir);
		mkdir(vd, 0700);
		mkdir(ud, 0755);
		if (chown(ud, 65534, 65534))
			diag("chown: %s", strerror(errno));
		snprintf(lk, sizeof(lk), "%s/ulink", ud);
		if (symlink(vd, lk) || lchown(lk, 65534, 65534))
			diag("symlink/lchown: %s", strerror(errno));
		snprintf(fin, sizeof(fin), "%s/p.pb.gz", lk);
		rc = hp_pprof_write(&p, fin, why, sizeof(why));
		snprintf(f2, sizeof(f2), "%s/p.pb.gz", vd);
		ok(rc == -EACCES && access(f2, F_OK) && strstr(why, "symbolic link of uid 65534"),
		   "outfile: a directory link another user owns is not followed (%s)", why);
		/* root's link, but in the user's directory (swappable): refused */
		unlink(lk);
		if (symlink(vd, lk))
			diag("symlink: %s", strerror(errno));
		rc = hp_pprof_write(&p, fin, why, sizeof(why));
		ok(rc == -EACCES && access(f2, F_OK) && strstr(why, "in a directory of uid 65534"),
		   "outfile: root's link in another user's directory is not followed (%s)", why);
		/* the move of a written profile through that link: refused too */
		snprintf(alt, sizeof(alt), "%s/moved.pb.gz", lk);
		snprintf(f2, sizeof(f2), "%s/a.pb.gz", d);
		rc = hp_out_rename(f2, alt, why, sizeof(why));
		ok(rc == -EACCES && !access(f2, F_OK),
		   "outfile: a rename into a directory behind such a link is refused (%s)", why);
		/* root's link in root's directory: followed */
		snprintf(lk, sizeof(lk), "%s/rlink", d);
		if (symlink(vd, lk))
			diag("symlink: %s", strerror(errno));
		snprintf(fin, sizeof(fin), "%s/p.pb.gz", lk);
		rc = hp_pprof_write(&p, fin, why, sizeof(why));
		snprintf(f2, sizeof(f2), "%s/p.pb.gz", vd);
		ok(!rc && !access(f2, F_OK), "outfile: root's own link in root's directory is followed (%s)",
		   rc ? why : "written");
		/* root's link in root's directory that anybody may write: the
		 * link can be swapped (refused), unless the directory is sticky */
		for (int sticky = 0; sticky < 2; sticky++) {
			snprintf(alt, sizeof(alt), "%s/wdir%d", tmpdir, sticky);
			mkdir(alt, 0755);
			chmod(alt, sticky ? 01777 : 0777);
			snprintf(lk, sizeof(lk), "%s/wdir%d/l", tmpdir, sticky);
			if (symlink(vd, lk))
				diag("symlink: %s", strerror(errno));
			snprintf(fin, sizeof(fin), "%s/w%d.pb.gz", lk, sticky);
			rc = hp_pprof_write(&p, fin, why, sizeof(why));
			snprintf(f2, sizeof(f2), "%s/w%d.pb.gz", vd, sticky);
			ok(sticky ? !rc && !access(f2, F_OK) :
			   rc == -EACCES && access(f2, F_OK) && strstr(why, "others may write"),
			   "outfile: root's link in a world-writable %s directory is %s (%s)",
			   sticky ? "sticky" : "non-sticky", sticky ? "followed" : "not followed",
			   rc ? why : "written");
		}
		/* missing directories made by the same walk, none through the link */
		snprintf(f2, sizeof(f2), "%s/udir/ulink/new/sub", tmpdir);
		unlink(lk);
		snprintf(lk, sizeof(lk), "%s/ulink", ud);
		unlink(lk);
		if (symlink(vd, lk) || lchown(lk, 65534, 65534))
			diag("symlink/lchown: %s", strerror(errno));
		fd = hp_out_dir_open(f2, 0755, why, sizeof(why));
		snprintf(alt, sizeof(alt), "%s/new", vd);
		ok(fd == -EACCES && access(alt, F_OK), "outfile: mkdir -p stops at another user's link (%s)",
		   why);
		snprintf(f2, sizeof(f2), "%s/made/sub", ud);
		fd = hp_out_dir_open(f2, 0755, why, sizeof(why));
		ok(fd >= 0 && !stat(f2, &st) && S_ISDIR(st.st_mode), "outfile: missing directories are made (%s)",
		   fd >= 0 ? "made" : why);
		if (fd >= 0)
			close(fd);
	} else {
		ok(1, "outfile: links of other users in the directory's path # SKIP not root");
	}

	/* /dev/full under the stream: the write error is the reason. */
	{
		struct hp_out f = { .fd = open("/dev/full", O_WRONLY | O_CLOEXEC) };
		FILE *s;

		snprintf(f.final, sizeof(f.final), "/dev/full");
		f.tmp[0] = 0;
		s = hp_out_stdio(&f);
		if (s)
			for (int i = 0; i < 10000; i++)
				fputs("a line of a profile\n", s);
		rc = hp_out_close(&f);
		ok(rc == -ENOSPC && strstr(f.why, "No space"),
		   "outfile: a full device's error is kept and reported (%s)", f.why);
	}

	/* The one parser of numeric options. */
	ok(hp_parse_num("-5", 1, 100, &n, why, sizeof(why)) && hp_parse_num("12x", 1, 100, &n, why, sizeof(why)) &&
	   hp_parse_num("", 0, 100, &n, why, sizeof(why)) && hp_parse_num(" 5", 0, 100, &n, why, sizeof(why)) &&
	   hp_parse_num("0", 1, 100, &n, why, sizeof(why)) &&
	   hp_parse_num("99999999999999999999999", 0, ~0ULL, &n, why, sizeof(why)) &&
	   !hp_parse_num("42", 1, 100, &n, why, sizeof(why)) && n == 42,
	   "numbers: -5, 12x, empty, space, below min and overflow refused; 42 taken");
	hp_prof_free(&p);
}

/* A profile built by hand: locations by name, samples leaf first. */
static uint32_t mk_loc(struct hp_prof *p, const char *func)
{
	struct hp_prof_loc l = { .func = func, .file = "f.c", .line = 1 };

	return hp_prof_add_loc(p, &l);
}

static void mk_sample(struct hp_prof *p, int64_t alloc, int64_t inuse, int n, ...)
{
	int64_t v[HP_NV] = { 0 };
	uint32_t locs[16];
	va_list ap;
	int i;

	va_start(ap, n);
	for (i = 0; i < n && i < 16; i++)
		locs[i] = mk_loc(p, va_arg(ap, const char *));
	va_end(ap);
	v[HP_V_ALLOC_SPACE] = alloc;
	v[HP_V_ALLOC_OBJ] = 1;
	v[HP_V_INUSE_SPACE] = inuse;
	v[HP_V_INUSE_OBJ] = inuse ? 1 : 0;
	hp_prof_add_sample(p, locs, (uint32_t)n, v, NULL);
}

static char *frames_str(struct hp_prof *p, size_t si, const char *rx)
{
	static char out[512];
	struct hp_frame fr[32];
	struct hp_drop d;
	char why[200];
	size_t n, k, o = 0;

	out[0] = 0;
	if (hp_drop_init(&d, p, rx, why, sizeof(why))) {
		snprintf(out, sizeof(out), "%s", why);
		return out;
	}
	n = hp_sample_frames(p, &p->samples[si], &d, fr, 32);
	for (k = 0; k < n; k++)
		o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%s", k ? ";" : "", fr[k].name);
	hp_drop_free(&d);
	return out;
}

/*
 * Allocator frames folded into their callers (pprof's drop_frames rule,
 * frames.c), and the table's cumulative bytes per function.
 */
static void test_drop_frames_and_cum(void)
{
	struct hp_render_opts o = { .metric = HP_V_ALLOC_SPACE, .top = 0 };
	struct hp_prof p;
	char *buf = NULL, *s;
	size_t len = 0;
	FILE *f;

	hp_prof_init(&p);
	/* 0: sqlite3's wrappers under malloc: the caller of the outermost is the site */
	mk_sample(&p, 1000, 100, 6, "malloc", "sqlite3MemMalloc", "sqlite3Malloc",
		  "sqlite3DbMallocRaw", "btreeInsert", "main");
	/* 1: C++: operator new and std::allocator folded */
	mk_sample(&p, 300, 0, 5, "malloc", "operator new(unsigned long)",
		  "std::__new_allocator<int>::allocate(unsigned long, void const*)",
		  "vec_grow", "main");
	/* 2: an unnamed frame under a wrapper goes with it; a name merely
	 * containing "alloc" (not a whole match) stays */
	mk_sample(&p, 200, 0, 5, "libx.so+0x10", "xmalloc", "allocate_table",
		  "btreeInsert", "main");
	/* 3: recursion: one function twice on a stack counts once */
	mk_sample(&p, 50, 0, 5, "calloc", "walk", "walk", "btreeInsert", "main");
	/* 4: only allocator frames: left whole */
	mk_sample(&p, 7, 0, 2, "malloc", "g_malloc");
	/* 5: a wrapper at the root end (before any other frame) stays, like pprof */
	mk_sample(&p, 5, 0, 3, "malloc", "leaf_user", "je_malloc");

	ok(!strcmp(frames_str(&p, 0, NULL), "btreeInsert;main"),
	   "drop_frames: malloc, sqlite3MemMalloc, sqlite3Malloc, sqlite3DbMallocRaw folded into btreeInsert (%s)",
	   frames_str(&p, 0, NULL));
	ok(!strcmp(frames_str(&p, 1, NULL), "vec_grow;main"),
	   "drop_frames: operator new and std::__new_allocator folded into vec_grow (%s)",
	   frames_str(&p, 1, NULL));
	ok(!strcmp(frames_str(&p, 2, NULL), "allocate_table;btreeInsert;main"),
	   "drop_frames: the frame under xmalloc goes with it; allocate_table (no whole match) stays (%s)",
	   frames_str(&p, 2, NULL));
	ok(!strcmp(frames_str(&p, 4, NULL), "malloc;g_malloc"),
	   "drop_frames: a stack of allocator frames only is left whole (%s)",
	   frames_str(&p, 4, NULL));
	ok(!strcmp(frames_str(&p, 5, NULL), "leaf_user;je_malloc"),
	   "drop_frames: matches at the root end are kept, as pprof keeps them (%s)",
	   frames_str(&p, 5, NULL));
	ok(!strcmp(frames_str(&p, 0, ""), "malloc;sqlite3MemMalloc;sqlite3Malloc;sqlite3DbMallocRaw;btreeInsert;main"),
	   "drop_frames: an empty expression keeps every frame");
	ok(!strcmp(frames_str(&p, 0, "sqlite3Malloc"), "sqlite3DbMallocRaw;btreeInsert;main"),
	   "drop_frames: a user's expression replaces the default (%s)", frames_str(&p, 0, "sqlite3Malloc"));
	p.drop_frames = hp_prof_str(&p, "btreeInsert");
	ok(!strcmp(frames_str(&p, 0, NULL), "main"),
	   "drop_frames: the profile's own expression (pprof drop_frames) is used when present");
	p.drop_frames = hp_prof_str(&p, "(unclosed");
	ok(!strcmp(frames_str(&p, 0, NULL), "btreeInsert;main"),
	   "drop_frames: a file's expression that does not compile: the default instead");
	p.drop_frames = hp_prof_str(&p, "((a{99}){99}){99}");
	ok(!strcmp(frames_str(&p, 0, NULL), "btreeInsert;main"),
	   "drop_frames: a file's expression with bounded repetition: the default instead");
	p.drop_frames = NULL;

	f = open_memstream(&buf, &len);
	ok(f && !hp_text_write_opts(&p, &o, f) && !fclose(f) && buf, "cum: text tables written");
	s = buf ? strstr(buf, "call sites") : NULL;
	/* sites: btreeInsert 1000, vec_grow 300, allocate_table 200, walk 50 */
	ok(s && strstr(s, "1000          1") && strstr(s, "btreeInsert f.c:1") &&
	   !strstr(s, "sqlite3Malloc") && strstr(s, "vec_grow") && strstr(s, "allocate_table") &&
	   strstr(s, " walk f.c:1"),
	   "cum: the call sites are the callers of the allocator wrappers");
	s = buf ? strstr(buf, "functions by cumulative bytes allocated") : NULL;
	/* main: 1000+300+200+50 = 1550 cum of 1562 in all; btreeInsert 1000
	 * self + 200 + 50 = 1250; walk 50 (once, though twice on its stack) */
	ok(s && strstr(s, "100  99.2%            0         1550  main\n") &&
	   strstr(s, " 1000         1250  btreeInsert\n") &&
	   strstr(s, "    50           50  walk\n"),
	   "cum: cumulative bytes per function (main 1550, btreeInsert 1000 self of 1250, walk once)");
	if (s && !strstr(s, "1550  main"))
		diag("%s", s);
	ok(s && strstr(s, "main") < strstr(s, "btreeInsert") &&
	   strstr(s, "btreeInsert") < strstr(s, "vec_grow"),
	   "cum: functions in order of cumulative bytes");
	free(buf);
	buf = NULL;

	/* the flame graph: titled, folded, the metric asked for */
	o.title = "demo: bytes allocated over the run";
	f = open_memstream(&buf, &len);
	ok(f && !hp_svg_write_opts(&p, &o, f) && !fclose(f) && buf &&
	   strstr(buf, ">demo: bytes allocated over the run<") &&
	   strstr(buf, "bytes allocated (alloc_space): 1.5KiB in 6 stacks") &&
	   strstr(buf, "<title>btreeInsert (1.2KiB") && !strstr(buf, "<title>sqlite3Malloc"),
	   "svg: titled with what it shows, allocator frames folded");
	free(buf);
	hp_prof_free(&p);
}

/*
 * The sorted symbols (symtab.c) name an address as libdwfl's own search
 * does: every 97th byte of the .text of the library that holds fn, each name the table
 * gives (or its "none") compared with dwfl_module_addrname's. libstdc++
 * has C++ aliases (complete and base object constructors and destructors
 * at one address), which the table names as libdwfl does, and asks it
 * about fewer than one address in ask_max.
 */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

static void symtab_like_libdwfl(const char *what, void *fn, long ask_max)
{
	static char *dip;
	static const Dwfl_Callbacks cb = {
		.find_elf = dwfl_build_id_find_elf,
		.find_debuginfo = dwfl_standard_find_debuginfo,
		.section_address = dwfl_offline_section_address,
		.debuginfo_path = &dip,
	};
	Dl_info di;
	Dwfl *d = dwfl_begin(&cb);
	Dwfl_Module *m = NULL;
	struct hp_symtab *t = NULL;
	GElf_Addr lo = 0, hi = 0, a;
	long n = 0, named = 0, differ = 0, asked = 0;
	int fd = -1;

	if (d && dladdr(fn, &di) && di.dli_fname)
		fd = open(di.dli_fname, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		dwfl_report_begin(d);
		m = dwfl_report_elf(d, di.dli_fname, di.dli_fname, fd, 0, false);
		dwfl_report_end(d, NULL, NULL);
	}
	if (m) {
		GElf_Addr bias;
		Elf *elf = dwfl_module_getelf(m, &bias);
		size_t shstrndx;
		Elf_Scn *scn = NULL;

		t = hp_symtab_build(m);
		/* Its .text: where a profile's addresses are. */
		if (elf && !elf_getshdrstrndx(elf, &shstrndx))
			while ((scn = elf_nextscn(elf, scn))) {
				GElf_Shdr sh;
				const char *nm;

				if (gelf_getshdr(scn, &sh) &&
				    (nm = elf_strptr(elf, shstrndx, sh.sh_name)) &&
				    !strcmp(nm, ".text")) {
					lo = sh.sh_addr + bias;
					hi = lo + sh.sh_size;
				}
			}
	}
	for (a = lo; t && a < hi; a += 97, n++) {
		int ask;
		const char *x = hp_symtab_find(t, a, &ask), *y;

		if (!x && ask) {
			asked++;
			continue;
		}
		named += x != NULL;
		y = dwfl_module_addrname(m, a);
		if (x ? !y || strcmp(x, y) : y != NULL) {
			if (differ++ < 3)
				diag("at %#llx: %s, libdwfl %s", (unsigned long long)a, x, y ? y : "none");
		}
	}
	ok(t && named > 1000 && !differ && asked * ask_max < n,
	   "symtab: %ld of %ld addresses of %s named by the sorted table (%ld left to libdwfl, fewer than 1 in %ld), %ld unlike libdwfl's",
	   named, n, what, asked, ask_max, differ);
	hp_symtab_free(t);
	if (d)
		dwfl_end(d);
}

static void test_symtab(void)
{
	symtab_like_libdwfl("libc", (void *)&malloc, 50);
	symtab_like_libdwfl("libstdc++", (void *)&__cxa_demangle, 50);
}

/*
 * What the daemon's memory budget asks of the pipeline: how large a dump
 * would be, the memo let go of, a line in every later dump's header, and
 * private copies of files others could shrink held within a bound.
 */
static void test_budget_hooks(void)
{
	struct hp_proc *pr = self_proc(0);
	struct hp_proc_stats st, st0;
	struct hp_elfcache c;
	struct hp_elf *e, *e2;
	char prefix[300], path[400], cmd[1200], *out;
	struct stat sb;
	int fd;

	feed_alloc(pr, site_a, 0x1000, 64, 1);
	feed_alloc(pr, site_b, 0x2000, 64, 2);
	feed_alloc(pr, site_b, 0x3000, 64, 3);
	hp_proc_sync(pr);
	hp_proc_get_stats(pr, &st);
	/* These made-up records unwind to their one frame. */
	ok(st.dump_samples == 2 && st.dump_locs == 2 && st.dump_locations == 2,
	   "budget: a dump's size: %llu samples (site_a, site_b), %llu frames in all, %llu locations",
	   (unsigned long long)st.dump_samples, (unsigned long long)st.dump_locs,
	   (unsigned long long)st.dump_locations);
	/* The same stack again: from the memo; after hp_proc_shed, unwound. */
	feed_alloc(pr, site_a, 0x4000, 64, 4);
	hp_proc_sync(pr);
	hp_proc_get_stats(pr, &st0);
	hp_proc_shed(pr);
	feed_alloc(pr, site_a, 0x5000, 64, 5);
	hp_proc_sync(pr);
	hp_proc_get_stats(pr, &st);
	ok(st0.memo_hits >= 1 && st.memo_hits == st0.memo_hits &&
	   st.memo_misses == st0.memo_misses + 1 && st.dump_samples == 2,
	   "budget: the memo let go of: a stack it knew is unwound again (hits %llu -> %llu, misses %llu -> %llu)",
	   (unsigned long long)st0.memo_hits, (unsigned long long)st.memo_hits,
	   (unsigned long long)st0.memo_misses, (unsigned long long)st.memo_misses);
	hp_proc_note(pr, "WARNING: the session ended early: a test");
	snprintf(prefix, sizeof(prefix), "%s/noted", tmpdir);
	hp_proc_dump(pr, prefix, HP_OUT_TEXT, HP_DUMP_NOW);
	snprintf(path, sizeof(path), "%s.txt", prefix);
	out = slurp(path);
	ok(out && strstr(out, "(books), session 0, now\n# WARNING: the session ended early: a test\n"),
	   "budget: a note is in the dump's header, after its first line");
	free(out);
	hp_proc_end(pr);

	/* A file its group may write: copied, not mapped (elf.c). */
	snprintf(path, sizeof(path), "%s/shared.so", tmpdir);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s' && chmod 666 '%s'", HP_DLTEST_SO, path, path);
	if (system(cmd) || stat(path, &sb)) {
		ok(0, "budget: a group-writable copy of the test library");
		return;
	}
	hp_elfcache_init(&c);
	c.copy_max = (uint64_t)sb.st_size - 1;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	e = hp_elf_open(&c, path, fd, 0, 0);
	ok(!e && c.copied == 0, "budget: a file whose copy would pass the copies' bound is not opened");
	if (e)
		hp_elf_put(e);
	c.copy_max = 2 * (uint64_t)sb.st_size;
	e = hp_elf_open(&c, path, -1, 0, 0);
	e2 = hp_elf_open(&c, path, -1, 0, 0);
	ok(e && e2 == e && c.copied == (uint64_t)sb.st_size,
	   "budget: within it, copied once and counted (%llu of %lld bytes)",
	   (unsigned long long)c.copied, (long long)sb.st_size);
	hp_elf_put(e2);
	hp_elf_put(e);
	ok(c.copied == 0, "budget: its bytes given back with the last reference (%llu)",
	   (unsigned long long)c.copied);
	hp_elfcache_fini(&c);
}

/* Is s valid UTF-8 (what a protobuf string must be)? */
static int utf8_ok(const char *s)
{
	const unsigned char *c = (const unsigned char *)s;

	while (*c) {
		int n = *c < 0x80 ? 0 : (*c & 0xE0) == 0xC0 ? 1 : (*c & 0xF0) == 0xE0 ? 2 :
			(*c & 0xF8) == 0xF0 ? 3 : -1;

		if (n < 0 || (n == 1 && *c < 0xC2))
			return 0;
		for (c++; n > 0; n--, c++)
			if ((*c & 0xC0) != 0x80)
				return 0;
	}
	return 1;
}

/*
 * The table of formats, and the OTLP encoding of a profile whose names are
 * not UTF-8 (a hostile program's): one profile per sample type with the
 * same values as the samples, the dictionary's zero entries, every string
 * valid UTF-8.
 */
static void test_formats_otlp(void)
{
	Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest *r;
	struct hp_prof_who who = { .pid = 42, .comm = "bad\xff\xfe", .exe = "/bin/x\xc3",
				   .cmdline = "x \xed\xa0\x80 y", .host = "h", .kind = "oom" };
	struct hp_format_args a = { .who = &who };
	struct hp_prof_loc l = { 0 };
	struct hp_prof_map m = { .start = 0x1000, .limit = 0x2000, .file = "/lib/\xc0\xafx.so",
				 .build_id = "abcd" };
	int64_t v[HP_NV] = { 0 }, sum = 0;
	unsigned set = 0;
	uint32_t st[1];
	struct hp_prof p;
	size_t len, bad = 0;
	uint8_t *buf;
	char why[300];
	int rc;

	rc = hp_formats_parse("pprof,otlp", &set, why, sizeof(why));
	ok(!rc && set == (HP_OUT_PPROF | hp_format_bit(&hp_format_otlp)),
	   "formats: \"pprof,otlp\" is the set of those two (0x%x)", set);
	rc = hp_formats_parse("pprof,gif", &set, why, sizeof(why));
	ok(rc < 0 && strstr(why, "'gif'") && strstr(why, "otlp"),
	   "formats: an unknown name is refused, naming the formats there are: %s", why);
	ok(hp_format_by_name("svg") == &hp_format_svg && !strcmp(hp_format_svg.ext, ".svg") &&
	   (hp_formats_with(HP_FMT_DEFAULT) & (HP_OUT_PPROF | HP_OUT_FOLDED | HP_OUT_TEXT | HP_OUT_SVG)) ==
	   (HP_OUT_PPROF | HP_OUT_FOLDED | HP_OUT_TEXT | HP_OUT_SVG) &&
	   !(hp_formats_with(HP_FMT_DEFAULT) & hp_format_bit(&hp_format_otlp)),
	   "formats: the four of old are the default set, otlp is not");

	hp_prof_init(&p);
	p.time_ns = 1000;
	p.duration_ns = 5;
	l.map = hp_prof_add_map(&p, &m) + 1;
	l.addr = 0x1100;
	l.func = hp_prof_str(&p, "f\x80\x80oo");
	st[0] = hp_prof_add_loc(&p, &l);
	v[HP_V_INUSE_SPACE] = 4096;
	v[HP_V_ALLOC_SPACE] = 8192;
	v[HP_V_ALLOC_OBJ] = 2;
	hp_prof_add_sample(&p, st, 1, v, "libc.malloc");
	rc = hp_format_encode(&hp_format_otlp, &p, &a, &buf, &len, why, sizeof(why));
	ok(rc == 0 && len > 0, "otlp: encoded, %zu bytes%s%s", len, rc ? ": " : "", rc ? why : "");
	if (rc) {
		hp_prof_free(&p);
		return;
	}
	r = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
		NULL, len, buf);
	ok(r && r->dictionary && r->n_resource_profiles == 1 &&
	   r->resource_profiles[0]->n_scope_profiles == 1 &&
	   r->resource_profiles[0]->scope_profiles[0]->n_profiles == 4,
	   "otlp: one resource, one scope, 4 profiles (no dmabuf samples)");
	if (r && r->dictionary && r->n_resource_profiles == 1 &&
	    r->resource_profiles[0]->scope_profiles[0]->n_profiles == 4) {
		Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary *d = r->dictionary;
		Opentelemetry__Proto__Resource__V1__Resource *res = r->resource_profiles[0]->resource;
		Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
			r->resource_profiles[0]->scope_profiles[0];

		for (size_t i = 0; i < d->n_string_table; i++)
			bad += !utf8_ok(d->string_table[i]);
		for (size_t i = 0; res && i < res->n_attributes; i++)
			bad += res->attributes[i]->value->value_case ==
			       OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE &&
			       !utf8_ok(res->attributes[i]->value->string_value);
		ok(bad == 0 && d->n_string_table > 1, "otlp: all %zu strings and the resource's are valid UTF-8 (%zu not)",
		   d->n_string_table, bad);
		ok(d->n_string_table && !d->string_table[0][0] && d->n_mapping_table == 2 &&
		   !d->mapping_table[0]->memory_start && d->n_location_table == 2 &&
		   !d->location_table[0]->address && d->n_function_table == 2 &&
		   !d->function_table[0]->name_strindex && d->n_stack_table == 2 &&
		   !d->stack_table[0]->n_location_indices && d->n_link_table == 1 &&
		   d->n_attribute_table > 1 && !d->attribute_table[0]->key_strindex,
		   "otlp: every dictionary table starts with its zero entry");
		for (size_t i = 0; i < sp->n_profiles; i++) {
			const char *t = d->string_table[sp->profiles[i]->sample_type->type_strindex];
			int64_t want = !strcmp(t, "alloc_objects") ? 2 : !strcmp(t, "alloc_space") ? 8192 :
				       !strcmp(t, "inuse_space") ? 4096 : 0;

			for (size_t k = 0; k < sp->profiles[i]->n_samples; k++)
				sum += sp->profiles[i]->samples[k]->values[0];
			if (sp->profiles[i]->n_samples != (want ? 1u : 0u) ||
			    (want && sp->profiles[i]->samples[0]->values[0] != want))
				bad++;
		}
		ok(bad == 0 && sum == 2 + 8192 + 4096 && sp->profiles[0]->time_unix_nano == 1000 &&
		   sp->profiles[0]->duration_nano == 5,
		   "otlp: each sample type's profile has the sample's value (%lld in all), zeros left out",
		   (long long)sum);
		ok(d->mapping_table[1]->n_attribute_indices == 1 &&
		   !strcmp(d->string_table[d->attribute_table[d->mapping_table[1]->attribute_indices[0]]->key_strindex],
			   "process.executable.build_id.gnu"),
		   "otlp: the mapping carries its build id");
	}
	opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
		r, NULL);
	free(buf);
	hp_prof_free(&p);
}

int main(void)
{
	struct hp_pipeline_opts o = { .unwind_workers = 2 };
	char cmd[300];

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/hp-pipeline-test.XXXXXX");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 1;
	}
	/* A symbol cache of the test's own, and the test library's debug root
	 * after the usual ones. */
	snprintf(cmd, sizeof(cmd), "%s/symcache", tmpdir);
	setenv("HEAPPROFD_SYMCACHE", cmd, 1);
	setenv("HEAPPROFD_DEBUGINFO_PATH", ":.debug:/usr/lib/debug:" HP_SYMROOT, 1);
	P = hp_pipeline_new(&o);
	ok(P != NULL, "pipeline: starts with 2 workers and a books thread");
	if (!P)
		return 1;
	test_parse();
	test_symtab();
	test_unwind(CH_O0, 0, "unwind -O0 frame pointers, live child");
	test_unwind(CH_O2, 0, "unwind -O2 -fomit-frame-pointer (DWARF), live child");
	test_unwind(CH_O2, 1, "unwind after the child exited and was reaped");
	test_unwind(CH_DLOPEN, 0, "dlopen after the snapshot");
	{
		char *d = hp_demangle("_ZN2ns5Klass6methodEi");

		ok(d && !strcmp(d, "ns::Klass::method(int)"), "symbolize: C++ names demangled (%s)",
		   d ? d : "null");
		free(d);
	}
	test_books();
	test_totals_and_tools();
	test_diff_and_symbolize();
	test_maps_record();
	test_maps_snapshot();
	test_custom_heap();
	test_kernel_records();
	test_garbage();
	test_sigmask();
	test_hmap();
	test_reuse_growth();
	test_reuse_delta();
	test_symcache();
	test_outfile();
	test_drop_frames_and_cum();
	test_timeline();
	test_budget_hooks();
	test_formats_otlp();
	hp_pipeline_free(P);
	ok(1, "pipeline: shuts down cleanly");
	if (!tap_failed && !getenv("HP_KEEP")) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
		if (system(cmd))
			diag("could not remove %s", tmpdir);
	} else {
		diag("outputs kept in %s", tmpdir);
	}
	return tap_failed ? 1 : 0;
}
