// SPDX-License-Identifier: GPL-2.0
/*
 * Threads, queues and the public API (pipeline.h).
 *
 *   caller (SERVICE)  hp_proc_feed: validate, copy, number the record (its
 *                     "feed number"), queue it: allocation records to one
 *                     of the workers (round robin), maps records to every
 *                     worker (each rereads its snapshot) and, like frees
 *                     and heap records, straight to the books. Frees and
 *                     allocations the unwind memo knows, most records,
 *                     travel as events of a batch (J_EVENTS): a flat array
 *                     with consecutive feed numbers, not a job each.
 *   workers           unwind. Each process has one unwinder per worker (its
 *                     own libunwind address space, caches and maps
 *                     snapshot), touched only by that worker, so a single
 *                     busy process uses every worker.
 *   books thread      the only thread that touches the books. Records come
 *                     back from the workers out of order; the books apply
 *                     them strictly in feed order (a reorder buffer keyed
 *                     by feed number), so the seq rules of books.c see the
 *                     ring's order. Dumps, syncs and ends are numbered too:
 *                     a dump sees every record fed before it, an end frees
 *                     only after them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "formats.h"
#include "internal.h"

enum job_kind {
	J_REC,		/* a record (books: account it) */
	J_EVENTS,	/* books: nev events, feed numbers feed .. feed + nev - 1 */
	J_MAPS_W,	/* worker: reread the maps; then books: nothing (numbered) */
	J_DUMP, J_SYNC,	/* books, numbered */
	J_END,		/* books, numbered: the books go */
	J_END_W,	/* worker: its unwinder for the process goes */
	J_STOP,
};

/*
 * Backpressure: a process may have this many bytes of records in flight
 * (unless hp_pipeline_opts says less); hp_proc_feed then waits, so the
 * ring fills and the client drops (and counts) instead of the daemon's
 * memory growing without bound.
 */
#define HP_MAX_QUEUED_BYTES	(8ULL << 20)

/*
 * How long the final dump of a session (HP_DUMP_FINAL) waits for debug info
 * still being looked up (a debuginfod download) before it writes those
 * locations as addresses: $HEAPPROFD_SYMBOLIZE_WAIT_MS, else this. Other
 * dumps do not wait: the process is running, its ring must be drained.
 */
#define HP_SYM_WAIT_MS_DEFAULT	5000

/* Jobs handed to the books thread at once (hp_proc_flush). */
#define HP_BOOKS_BATCH		1024

/*
 * Events per J_EVENTS job. A free, or an allocation whose frames the memo
 * lends, is a few words for the books: as a job of its own it cost a job
 * cleared and filled, a queue link and several cache lines pulled over to
 * the books thread; in a batch it is one 80-byte entry, read in order. The
 * jobs that remain (memo misses, heap and maps records) are rare.
 */
#define HP_EVENTS_PER_JOB	256

struct event {
	uint64_t seq, addr, est_size, req_size, usable_size, interval;
	struct hp_uframe *frames;	/* alloc: lent by the memo */
	uint64_t memo_id;		/* alloc: the memo entry (books: path_id) */
	uint32_t heap_id;
	uint16_t type;			/* HEAPPROFD_REC_ALLOC or _FREE */
	uint16_t flags;			/* alloc: the record's, reuse resolved */
	int32_t nframes;
	int32_t owned;			/* alloc: frames are the event's (Python) */
};

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
	unsigned which;
	int symbols;
	struct hp_prof now, peak;
	struct hp_symreqs want[2];	/* now, peak: locations to name */
};

struct job {
	struct job *next;
	enum job_kind kind;
	struct hp_proc *pr;
	struct waiter *w;
	struct hp_uframe *frames;
	int nframes;
	int worker;		/* J_REC alloc, J_MAPS_W, J_END_W: which */
	uint64_t feed;		/* numbered jobs */
	uint32_t memo_gen;	/* J_REC alloc: the maps generation it was fed in */
	unsigned nev;		/* J_EVENTS: events in rec */
	int kernel;		/* J_REC: a kernel record (hp_parse_krecord) */
	int same;		/* J_REC alloc: a same-path record (samepath.c) */
	struct hp_pyframe *py;	/* J_REC alloc: its Python frames (after rec) */
	int npy;
	size_t len;
	uint64_t rec[];		/* the record copy, 8-byte aligned */
};

struct queue {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job *head, *tail;
	pthread_t thr;
	struct hp_pipeline *p;
	int idx;
	int started;
};

struct hp_pipeline {
	int nworkers, max_frames;
	uint64_t max_queued;		/* bytes of records in flight per process */
	struct hp_symd *symd;		/* names: debug info looked for off the books */
	uint64_t sym_wait_ms;		/* a final dump's wait for it */
	/* Tests only (HEAPPROFD_TEST_UNWIND_DELAY_US): every allocation is
	 * unwound, none remembered, and each unwind takes this much longer,
	 * as on a slow machine or with records made slow on purpose. */
	unsigned test_unwind_delay_us;
	/* Tests only (HEAPPROFD_TEST_END_DELAY_MS): the books let go of an
	 * ended process this much later, as on a loaded machine. */
	unsigned test_end_delay_ms;
	struct queue *workers;
	struct queue books;
	int room_fd;			/* eventfd: room made (hp_proc_has_room) */
	struct hp_elfcache elfs;
	pthread_mutex_t lock;	/* procs list */
	struct hp_proc *procs;
	/* Processes ended (hp_proc_end) and, of them, those whose memory is
	 * all freed, which the books and workers do a while after the end. */
	uint64_t procs_ended, procs_freed;
};

struct hp_proc {
	struct hp_pipeline *p;
	struct hp_proc *next, *prev;
	struct hp_unwinder **unw;	/* [nworkers]; unw[i] touched by worker i only */
	struct hp_memo *memo;		/* unwinds remembered (memo.c) */
	struct hp_reuse *reuse;		/* feeding thread: stack tops (reuse.c) */
	struct hp_samepath *same;	/* feeding thread: code sets, claims (samepath.c) */
	uint64_t same_unsure;		/* workers (atomic): such claims unwound from writable memory */
	struct hp_py *py;		/* Python frames (python.c) */
	struct hp_splices *splices;	/* feeding thread: their paths (splice.c) */
	struct hp_perfmap *jit;		/* JIT code's names (perfmap.c) */
	struct hp_pyframe pyres[HEAPPROFD_PYFRAMES_MAX];	/* feeding thread */
	/* feeding thread: jobs for the books, not handed over yet */
	struct job *pend_head, *pend_tail;
	unsigned npend;
	struct job *events;		/* feeding thread: the open J_EVENTS job */
	pthread_mutex_t ev_lock;	/* ev_pool, nev_pool */
	struct job *ev_pool;		/* event jobs handed back by the books */
	unsigned nev_pool;
	uint64_t *reloads_w, *unw_mem_w;	/* [nworkers], written by worker i */
	struct hp_books *books;		/* books thread only */
	struct hp_hmap reorder;		/* books thread only: feed -> job */
	uint64_t books_next;		/* books thread only: next feed to apply */
	pid_t pid;
	uint64_t session_id;
	char comm[64];
	char *exe, *cmdline;		/* for the formats that name the process; may be NULL */
	hp_dump_sink_fn sink;		/* the dumping thread's: where dumps go besides files */
	char kind[16];			/* the dumping thread's: what the next dumps are */
	void *sink_arg;
	unsigned flags;
	pthread_mutex_t lock;		/* totals, note */
	struct heapprofd_counters totals;
	int have_totals;
	char note[256];			/* a line for the header of every dump */
	int refs;			/* atomic: books + one per worker */
	/* atomic: the feeding thread stopped for room (set by it, cleared by
	 * the books once they took the queue down to half: room_freed) */
	int want_room;
	int ended;
	struct timespec start;
	/*
	 * Counters, each with a single writer (the feeding thread or the
	 * books thread: hp_bump()), read by anyone; the two writers' counters
	 * on lines of their own, so that neither thread's stores pull the
	 * other's line away on every record.
	 */
	struct {
		uint64_t feed_no;	/* numbers handed out */
		unsigned rr;		/* round robin over workers */
		uint64_t fed, queued_in;
		uint64_t kfed, kbad;	/* kernel records fed, and rejected */
		uint64_t room_wait_ms;	/* the longest wait for room, until taken */
		uint64_t code_stale;	/* same-path claims the code set did not cover */
		char kbad_why[120];	/* why the first was rejected */
	} f __attribute__((aligned(64)));
	struct {
		uint64_t accounted, queued_out, unwind_errors, frames;
		uint64_t allocs;	/* allocation records among accounted */
		uint64_t applied;	/* every feed number below it is applied */
		uint64_t live, unmatched, books_mem;
		uint64_t samples, sample_locs, locations;	/* a dump's size */
	} b __attribute__((aligned(64)));
};

static uint64_t queued_bytes(struct hp_proc *pr)
{
	return __atomic_load_n(&pr->f.queued_in, __ATOMIC_RELAXED) -
	       __atomic_load_n(&pr->b.queued_out, __ATOMIC_RELAXED);
}

/* Append the chain head..tail (linked by next) with one lock and one wake-up. */
static void q_push_chain(struct queue *q, struct job *head, struct job *tail)
{
	tail->next = NULL;
	pthread_mutex_lock(&q->lock);
	if (q->tail)
		q->tail->next = head;
	else
		q->head = head;
	q->tail = tail;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

static void q_push(struct queue *q, struct job *j)
{
	q_push_chain(q, j, j);
}

/*
 * The next job; *batch holds jobs already taken. The queue has one consumer,
 * so taking everything queued under one lock keeps the order and halves the
 * lock traffic with the feeding thread (measured: the queue locks were ~10%
 * of the pipeline's time when jobs were taken one by one).
 */
static struct job *q_pop(struct queue *q, struct job **batch)
{
	struct job *j = *batch;

	if (!j) {
		pthread_mutex_lock(&q->lock);
		while (!q->head)
			pthread_cond_wait(&q->cond, &q->lock);
		j = q->head;
		q->head = q->tail = NULL;
		pthread_mutex_unlock(&q->lock);
	}
	*batch = j->next;
	return j;
}

/* A job that must not be lost: retry the allocation rather than fail. */
static struct job *job_new(enum job_kind kind, struct hp_proc *pr)
{
	struct job *j;

	while (!(j = calloc(1, sizeof(*j))))
		usleep(1000);
	j->kind = kind;
	j->pr = pr;
	return j;
}

static void wake(struct waiter *w)
{
	pthread_mutex_lock(&w->lock);
	w->done = 1;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

static void wait_for(struct waiter *w)
{
	pthread_mutex_lock(&w->lock);
	while (!w->done)
		pthread_cond_wait(&w->cond, &w->lock);
	pthread_mutex_unlock(&w->lock);
}

static void free_chain(struct job *j)
{
	while (j) {
		struct job *next = j->next;

		free(j);
		j = next;
	}
}

/*
 * Event jobs (16 KiB) go back to the feeding thread, a few kept: freed here
 * and allocated there, they made malloc give memory back to the system and
 * take it again, a page fault per page.
 */
#define HP_EV_POOL_MAX	2	/* 32 KiB per busy process at most */

/* Books thread: done with a record's job. */
static void job_done(struct hp_proc *pr, struct job *j)
{
	if (j->kind == J_EVENTS) {
		pthread_mutex_lock(&pr->ev_lock);
		if (pr->nev_pool < HP_EV_POOL_MAX) {
			j->next = pr->ev_pool;
			pr->ev_pool = j;
			pr->nev_pool++;
			j = NULL;
		}
		pthread_mutex_unlock(&pr->ev_lock);
	}
	free(j);
}

static void proc_put(struct hp_proc *pr)
{
	if (__atomic_sub_fetch(&pr->refs, 1, __ATOMIC_ACQ_REL))
		return;
	free_chain(pr->ev_pool);
	pthread_mutex_destroy(&pr->ev_lock);
	pthread_mutex_destroy(&pr->lock);
	hp_memo_free(pr->memo);
	hp_reuse_free(pr->reuse);
	hp_samepath_free(pr->same);
	hp_splices_free(pr->splices);
	hp_py_free(pr->py);
	hp_perfmap_free(pr->jit);
	free(pr->unw);
	free(pr->reloads_w);
	free(pr->unw_mem_w);
	free(pr->exe);
	free(pr->cmdline);
	if (pr->ended)
		__atomic_add_fetch(&pr->p->procs_freed, 1, __ATOMIC_RELEASE);
	free(pr);
}

/* ---- workers ------------------------------------------------------------ */

static void worker_alloc(struct hp_pipeline *p, struct job *j)
{
	struct hp_proc *pr = j->pr;
	struct hp_unwinder *u = pr->unw[j->worker];
	struct hp_parsed ps;
	static __thread struct hp_utrace trace;

	/* Validated by hp_proc_feed already; parse again for the pointers. */
	if (!u || (j->kernel ? hp_parse_krecord : hp_parse_record)(j->rec, j->len, &ps, NULL, 0) ||
	    ps.type != HEAPPROFD_REC_ALLOC)
		return;
	j->frames = malloc(p->max_frames * sizeof(*j->frames));
	if (j->frames) {
		uint64_t reloads = hp_unwinder_reloads(u);

		j->nframes = hp_unwind(u, ps.alloc, ps.stack, ps.stack_len, j->frames,
				       p->max_frames, &trace);
		/* A same-path claim whose unwind read more than the stack and
		 * the files (JIT code): nothing can check such claims. */
		if (j->same && !trace.ok)
			__atomic_fetch_add(&pr->same_unsure, 1, __ATOMIC_RELAXED);
		if (p->test_unwind_delay_us)
			usleep(p->test_unwind_delay_us);
		else if (pr->memo && hp_unwinder_reloads(u) != reloads)
			hp_memo_new_gen(pr->memo);	/* a new snapshot: forget the old */
		else if (pr->memo && !j->kernel)	/* kernel records skip the memo */
			hp_memo_insert(pr->memo, j->memo_gen, ps.alloc, &trace,
				       j->frames, j->nframes);
		/* The memo keeps the native frames; the books get the Python ones. */
		if (j->npy && hp_py_ready(pr->py)) {
			struct hp_uframe *f = malloc(p->max_frames * sizeof(*f));

			if (f) {
				int n = hp_py_splice(pr->py, j->frames, j->nframes, j->py, j->npy,
						     f, p->max_frames);

				if (n > 0) {
					hp_uframes_put(j->frames, j->nframes);
					free(j->frames);
					j->frames = f;
					j->nframes = n;
				} else {
					free(f);
				}
			}
		}
		/* JIT code, named from the perf map as it is now. */
		hp_perfmap_name_frames(pr->jit, j->frames, j->nframes);
	}
}

static void worker_note(struct hp_proc *pr, int w)
{
	struct hp_unwinder *u = pr->unw[w];

	if (!u)
		return;
	__atomic_store_n(&pr->reloads_w[w], hp_unwinder_reloads(u), __ATOMIC_RELAXED);
	__atomic_store_n(&pr->unw_mem_w[w], hp_unwinder_mem(u), __ATOMIC_RELAXED);
}

static void *worker_main(void *arg)
{
	struct queue *q = arg;
	struct job *batch = NULL;

	/* No signal is ever handled here (the daemon's other threads get them),
	 * and libunwind's own masking then costs no system calls. */
	hp_sigmask_worker_init();
	for (;;) {
		struct job *j = q_pop(q, &batch);

		switch (j->kind) {
		case J_STOP:
			free(j);
			return NULL;
		case J_REC:
			worker_alloc(q->p, j);
			worker_note(j->pr, j->worker);
			q_push(&q->p->books, j);
			break;
		case J_MAPS_W:
			if (j->pr->unw[j->worker])
				hp_unwinder_maps_changed(j->pr->unw[j->worker]);
			worker_note(j->pr, j->worker);
			q_push(&q->p->books, j);	/* numbered: dumps wait for it */
			break;
		case J_END_W:
			hp_unwinder_free(j->pr->unw[j->worker]);
			j->pr->unw[j->worker] = NULL;
			proc_put(j->pr);
			free(j);
			break;
		default:
			free(j);	/* not a worker's job */
			break;
		}
	}
}

/* ---- books ----------------------------------------------------------------- */

static void publish_stats(struct hp_proc *pr)
{
	uint64_t live, unmatched, samples, locs, frames;

	hp_books_stats(pr->books, &live, &unmatched);
	hp_books_export_size(pr->books, &samples, &locs, &frames);
	__atomic_store_n(&pr->b.samples, samples, __ATOMIC_RELAXED);
	__atomic_store_n(&pr->b.sample_locs, locs, __ATOMIC_RELAXED);
	__atomic_store_n(&pr->b.locations, frames, __ATOMIC_RELAXED);
	__atomic_store_n(&pr->b.books_mem, hp_books_mem(pr->books) + pr->reorder.cap *
			 sizeof(struct hp_hent), __ATOMIC_RELAXED);
	__atomic_store_n(&pr->b.live, live, __ATOMIC_RELAXED);
	__atomic_store_n(&pr->b.unmatched, unmatched, __ATOMIC_RELAXED);
}

static uint64_t reloads(struct hp_proc *pr)
{
	uint64_t r = 0;

	for (int i = 0; i < pr->p->nworkers; i++)
		r += __atomic_load_n(&pr->reloads_w[i], __ATOMIC_RELAXED);
	return r;
}

static void books_rec(struct job *j)
{
	struct hp_proc *pr = j->pr;
	struct hp_parsed ps;

	if (!(j->kernel ? hp_parse_krecord : hp_parse_record)(j->rec, j->len, &ps, NULL, 0)) {
		switch (ps.type) {
		case HEAPPROFD_REC_ALLOC:
			hp_bump(&pr->b.allocs, 1);
			hp_bump(&pr->b.frames, j->nframes);
			if (j->nframes <= 1)
				hp_bump(&pr->b.unwind_errors, 1);
			hp_books_alloc(pr->books, ps.alloc, j->frames, j->nframes, 0, 0);
			j->nframes = 0;
			break;
		case HEAPPROFD_REC_FREE:
			hp_books_free_rec(pr->books, ps.free);
			break;
		case HEAPPROFD_REC_HEAP:
			hp_books_heap(pr->books, ps.heap);
			break;
		case HEAPPROFD_REC_DMABUF:
			hp_books_dmabuf(pr->books, ps.dmabuf);
			break;
		case HEAPPROFD_REC_KLOST:
			hp_books_klost(pr->books, ps.klost);
			break;
		default:
			break;
		}
	}
	hp_uframes_put(j->frames, j->nframes);
	free(j->frames);
	/* Figures for `sessions`: now and then, and at every sync and dump. */
	if (!(pr->b.accounted & 63))
		publish_stats(pr);
	hp_bump(&pr->b.queued_out, j->len);
	hp_bump(&pr->b.accounted, 1);
}

/* The client stopped profiling because this daemon read nothing (uapi
 * counters.stall_stop_ns). */
static void stall_comment(struct hp_prof *o, uint64_t ns)
{
	time_t sec = (time_t)(ns / 1000000000ULL);
	char when[40];
	struct tm tmv;

	gmtime_r(&sec, &tmv);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tmv);
	hp_prof_add_comment(o, "WARNING: the client stopped profiling at %s: a record waited for room in its ring while the daemon read nothing from it for the stall bound (the daemon was stopped or stuck). Nothing was dropped: the books end there, so what was allocated after is missing, and blocks freed after still count as in use.",
			    when);
}

static void books_dump(struct job *j)
{
	struct hp_proc *pr = j->pr;
	struct waiter *w = j->w;
	struct hp_prof *outs[2] = { &w->now, &w->peak };
	unsigned whiches[2] = { HP_DUMP_NOW, HP_DUMP_PEAK };
	struct heapprofd_counters t;
	struct timespec now;
	uint64_t hits = 0, misses = 0, rebuilt, missing;
	size_t memo_bytes;
	char note[sizeof(pr->note)];
	int have, i;

	pthread_mutex_lock(&pr->lock);
	t = pr->totals;
	have = pr->have_totals;
	memcpy(note, pr->note, sizeof(note));
	pthread_mutex_unlock(&pr->lock);
	if (pr->memo)
		hp_memo_stats(pr->memo, &hits, &misses, &memo_bytes);
	hp_reuse_stats(pr->reuse, &rebuilt, &missing);
	clock_gettime(CLOCK_REALTIME, &now);
	for (i = 0; i < 2; i++) {
		struct hp_prof *o = outs[i];

		if (!(w->which & whiches[i]))
			continue;
		hp_prof_init(o);
		o->time_ns = (int64_t)pr->start.tv_sec * 1000000000LL + pr->start.tv_nsec;
		/* when this dump was taken: the timeline's x (timeline.c) */
		o->duration_ns = ((int64_t)now.tv_sec * 1000000000LL + now.tv_nsec) - o->time_ns;
		hp_prof_add_comment(o, "heapprofd profile of pid %d (%s), session %llu, %s",
				    (int)pr->pid, pr->comm, (unsigned long long)pr->session_id,
				    whiches[i] == HP_DUMP_PEAK ? "at the in-use peak" : "now");
		if (note[0])
			hp_prof_add_comment(o, "%s", note);
		{
			/* The books start with the session (an attach's time, for a
			 * running process): nothing allocated before is in them. */
			char when[40];
			struct tm tmv;

			gmtime_r(&pr->start.tv_sec, &tmv);
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tmv);
			hp_prof_add_comment(o, "books kept since %s (the session's start)", when);
		}
		if (have) {
			hp_prof_add_comment(o, "exact totals (client): %llu allocations, %llu bytes; %llu frees, %llu bytes; in use %lld bytes",
					    (unsigned long long)t.alloc_calls,
					    (unsigned long long)t.alloc_bytes,
					    (unsigned long long)t.free_calls,
					    (unsigned long long)t.free_bytes,
					    (long long)(t.alloc_bytes - t.free_bytes));
			hp_prof_add_comment(o, "records: %llu written, %llu dropped (%llu bytes of ring, %llu frees)",
					    (unsigned long long)t.records_written,
					    (unsigned long long)t.records_dropped,
					    (unsigned long long)t.bytes_dropped,
					    (unsigned long long)t.frees_dropped);
			if (t.records_dropped)
				hp_prof_add_comment(o, "WARNING: %llu records were dropped because the ring was full: %llu allocation samples standing for about %llu bytes allocated are missing, and %llu frees (their blocks still count as in use). The per-site estimates are biased by it: sites that lost samples are low, in bytes allocated and in use, by up to that much. Record with the default policy (no --no-block) or a larger ring (HEAPPROFD_RING_SIZE) for unbiased estimates.",
						    (unsigned long long)t.records_dropped,
						    (unsigned long long)(t.records_dropped - t.frees_dropped),
						    (unsigned long long)t.est_bytes_dropped,
						    (unsigned long long)t.frees_dropped);
			if (t.stall_stop_ns)
				stall_comment(o, t.stall_stop_ns);
		}
		hp_prof_add_comment(o, "unwinding: %llu allocation samples (%llu unwound, %llu from the memo), %llu with <= 1 frame, %llu maps rereads; %llu records in all",
				    (unsigned long long)pr->b.allocs,
				    (unsigned long long)misses, (unsigned long long)hits,
				    (unsigned long long)pr->b.unwind_errors,
				    (unsigned long long)reloads(pr),
				    (unsigned long long)pr->b.accounted);
		hp_py_comment(pr->py, o);
		hp_prof_add_comment(o, "stack reuse: %llu stacks completed from their thread's previous sample, %llu could not be (truncated)",
				    (unsigned long long)rebuilt, (unsigned long long)missing);
		{
			uint64_t ok, unchecked, uncovered;

			hp_samepath_stats(pr->same, &ok, &unchecked, &uncovered);
			if (ok + unchecked + uncovered)
				hp_prof_add_comment(o, "same call path: %llu samples sent no stack, their call path being their thread's previous one in every word that could change it; %llu of them checked against what that unwind read, %llu unwound again (not checkable), %llu leaned on code the client's code set lacked (code mapped since it was built; they keep the previous sample's path, which they may not share, and the client was asked for a new set)",
						    (unsigned long long)(ok + unchecked + uncovered),
						    (unsigned long long)ok, (unsigned long long)unchecked,
						    (unsigned long long)uncovered);
		}
		{
			uint64_t kbad = __atomic_load_n(&pr->f.kbad, __ATOMIC_ACQUIRE);

			/* kbad_why is written once, before kbad first becomes 1 */
			if (kbad)
				hp_prof_add_comment(o, "WARNING: %llu kernel records were malformed and left out (the first: %s)",
						    (unsigned long long)kbad, pr->f.kbad_why);
		}
		hp_books_export(pr->books, o, whiches[i], w->symbols ? &w->want[i] : NULL);
	}
	publish_stats(pr);
}

/* Account a batch of events, in order. */
static void books_events(struct job *j)
{
	struct hp_proc *pr = j->pr;
	const struct event *ev = (const struct event *)j->rec;
	/* Zeroed once, not per event (a 240-byte record; the books read
	 * only the fields set below). */
	struct heapprofd_rec_alloc a = { 0 };
	struct heapprofd_rec_free f = { 0 };

	for (unsigned i = 0; i < j->nev; i++, ev++) {
		/* The feeding thread wrote the events on the other core: ask
		 * for the lines a few events ahead while this one is applied. */
		if (i + 4 < j->nev)
			__builtin_prefetch(ev + 4);
		if (ev->type == HEAPPROFD_REC_FREE) {
			f.seq = ev->seq;
			f.addr = ev->addr;
			f.heap_id = ev->heap_id;
			hp_books_free_rec(pr->books, &f);
		} else {
			a.hdr.flags = ev->flags;
			a.seq = ev->seq;
			a.addr = ev->addr;
			a.req_size = ev->req_size;
			a.usable_size = ev->usable_size;
			a.est_size = ev->est_size;
			a.interval = ev->interval;
			a.heap_id = ev->heap_id;
			hp_bump(&pr->b.allocs, 1);
			hp_bump(&pr->b.frames, ev->nframes);
			if (ev->nframes <= 1)
				hp_bump(&pr->b.unwind_errors, 1);
			hp_books_alloc(pr->books, &a, ev->frames, ev->nframes, !ev->owned,
				       ev->owned ? 0 : ev->memo_id);
			if (ev->owned)
				free(ev->frames);
		}
		if (!(pr->b.accounted & 63))
			publish_stats(pr);
		hp_bump(&pr->b.accounted, 1);
	}
	hp_bump(&pr->b.queued_out, j->len);
}

/* Apply one numbered job, in feed order. Returns 1 if the process is gone. */
static int books_apply(struct job *j)
{
	struct hp_proc *pr = j->pr;

	switch (j->kind) {
	case J_REC:
		books_rec(j);
		break;
	case J_EVENTS:
		books_events(j);
		break;
	case J_DUMP:
		books_dump(j);
		wake(j->w);
		break;
	case J_SYNC:
		publish_stats(pr);
		wake(j->w);
		break;
	case J_END: {
		struct hp_hent *e;

		if (pr->p->test_end_delay_ms)
			usleep(1000U * pr->p->test_end_delay_ms);
		/* Nothing can be left: END is the last number handed out. */
		hp_hmap_for_each(&pr->reorder, e)
			free(e->v);
		hp_hmap_free(&pr->reorder);
		hp_books_free(pr->books);
		pr->books = NULL;
		free(j);
		proc_put(pr);
		return 1;
	}
	default:
		free(j);
		return 0;
	}
	job_done(pr, j);
	return 0;
}

/*
 * The feeding thread stopped for room (hp_proc_has_room): once the queue is
 * down to half, wake its loop (room_fd), so that it feeds again at once
 * rather than on its next look, and then a good many records in one go.
 * (A wake-up lost to the two threads' crossing costs the loop's next look,
 * which comes anyway.)
 */
static void room_freed(struct hp_proc *pr)
{
	uint64_t one = 1;

	if (__atomic_load_n(&pr->want_room, __ATOMIC_RELAXED) &&
	    queued_bytes(pr) <= pr->p->max_queued / 2 &&
	    __atomic_exchange_n(&pr->want_room, 0, __ATOMIC_ACQ_REL) && pr->p->room_fd >= 0 &&
	    write(pr->p->room_fd, &one, sizeof(one)) < 0) {
		/* full (never, for a counter read at every wake-up) */
	}
}

static void *books_main(void *arg)
{
	struct queue *q = arg;
	struct job *batch = NULL;

	for (;;) {
		struct job *j = q_pop(q, &batch);
		struct hp_proc *pr = j->pr;

		if (j->kind == J_STOP) {
			free(j);
			return NULL;
		}
		if (j->feed != pr->books_next) {
			/* Early (a record before it is still being unwound). */
			while (hp_hmap_put(&pr->reorder, j->feed, 0, j))
				usleep(1000);	/* out of memory: wait, keep order */
			continue;
		}
		for (;;) {
			uint64_t next = j->feed + (j->kind == J_EVENTS ? j->nev : 1);

			pr->books_next = next;
			if (books_apply(j))
				break;	/* the process is gone */
			/* Every job fed before next is applied (memo.c frees
			 * the frames they borrowed after this). */
			__atomic_store_n(&pr->b.applied, next, __ATOMIC_RELEASE);
			room_freed(pr);
			j = hp_hmap_del(&pr->reorder, pr->books_next, 0);
			if (!j)
				break;
		}
	}
}

/* ---- threads --------------------------------------------------------------- */

static int q_start(struct queue *q, struct hp_pipeline *p, int idx, void *(*fn)(void *))
{
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	q->p = p;
	q->idx = idx;
	if (pthread_create(&q->thr, NULL, fn, q))
		return -1;
	q->started = 1;
	return 0;
}

static void q_stop(struct queue *q)
{
	if (!q->started)
		return;
	q_push(q, job_new(J_STOP, NULL));
	pthread_join(q->thr, NULL);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
	q->started = 0;
}

struct hp_pipeline *hp_pipeline_new(const struct hp_pipeline_opts *o)
{
	struct hp_pipeline *p = calloc(1, sizeof(*p));
	unsigned long long ms;
	const char *env;
	int i;

	if (!p)
		return NULL;
	p->room_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	p->nworkers = o && o->unwind_workers > 0 ? o->unwind_workers : 2;
	if (p->nworkers > 64)
		p->nworkers = 64;
	p->max_frames = o && o->max_frames > 0 ? o->max_frames : HP_DEFAULT_MAX_FRAMES;
	p->max_queued = o && o->max_queued_bytes && o->max_queued_bytes < HP_MAX_QUEUED_BYTES ?
			o->max_queued_bytes : HP_MAX_QUEUED_BYTES;
	if (p->max_frames > HP_MAX_FRAMES_LIMIT)
		p->max_frames = HP_MAX_FRAMES_LIMIT;
	hp_elfcache_init(&p->elfs);
	p->elfs.copy_max = o ? o->max_copied_bytes : 0;
	pthread_mutex_init(&p->lock, NULL);
	p->sym_wait_ms = HP_SYM_WAIT_MS_DEFAULT;
	env = getenv("HEAPPROFD_SYMBOLIZE_WAIT_MS");
	if (env && *env && strspn(env, "0123456789") == strlen(env) && strlen(env) < 10) {
		ms = strtoull(env, NULL, 10);
		p->sym_wait_ms = ms;
	}
	env = getenv("HEAPPROFD_TEST_UNWIND_DELAY_US");
	if (env && *env && strspn(env, "0123456789") == strlen(env) && strlen(env) < 8)
		p->test_unwind_delay_us = (unsigned)strtoul(env, NULL, 10);
	env = getenv("HEAPPROFD_TEST_END_DELAY_MS");
	if (env && *env && strspn(env, "0123456789") == strlen(env) && strlen(env) < 6)
		p->test_end_delay_ms = (unsigned)strtoul(env, NULL, 10);
	hp_symbolize_setup();	/* before the threads: it sets the environment */
	p->symd = hp_symd_new();	/* without it names are looked up at dump time */
	p->elfs.symd = p->symd;
	p->workers = calloc(p->nworkers, sizeof(*p->workers));
	if (!p->workers || q_start(&p->books, p, -1, books_main))
		goto fail;
	for (i = 0; i < p->nworkers; i++)
		if (q_start(&p->workers[i], p, i, worker_main))
			goto fail;
	return p;
fail:
	hp_pipeline_free(p);
	return NULL;
}

void hp_pipeline_free(struct hp_pipeline *p)
{
	int i;

	if (!p)
		return;
	/* End what the caller left behind, after its pending work. */
	for (;;) {
		struct hp_proc *pr;

		pthread_mutex_lock(&p->lock);
		pr = p->procs;
		pthread_mutex_unlock(&p->lock);
		if (!pr)
			break;
		hp_proc_end(pr);
	}
	/* Workers first: what they pass on reaches the books before STOP. */
	for (i = 0; p->workers && i < p->nworkers; i++)
		q_stop(&p->workers[i]);
	q_stop(&p->books);
	/* After the books (they ask it for files) and before the ELF cache. */
	p->elfs.symd = NULL;
	hp_symd_free(p->symd);
	free(p->workers);
	pthread_mutex_destroy(&p->lock);
	hp_elfcache_fini(&p->elfs);
	if (p->room_fd >= 0)
		close(p->room_fd);
	free(p);
}

/* ---- API ------------------------------------------------------------------- */

static void close_fds(const struct hp_proc_info *info)
{
	if (info->maps_fd >= 0)
		close(info->maps_fd);
	if (info->mem_fd >= 0)
		close(info->mem_fd);
	if (info->exe_fd >= 0)
		close(info->exe_fd);
	if (info->has_proc_fd && info->proc_fd >= 0)
		close(info->proc_fd);
}

static int dup_fd(int fd)
{
	return fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 0) : -1;
}

struct hp_proc *hp_proc_new(struct hp_pipeline *p, const struct hp_proc_info *info)
{
	struct hp_proc *pr = calloc(1, sizeof(*pr));
	int i, n = p->nworkers;

	if (!pr) {
		close_fds(info);
		return NULL;
	}
	pr->p = p;
	pr->pid = info->pid;
	pr->session_id = info->session_id;
	pr->flags = info->flags;
	snprintf(pr->comm, sizeof(pr->comm), "%s", info->comm ? info->comm : "?");
	for (char *c = pr->comm; *c; c++)
		if ((unsigned char)*c < 0x20)
			*c = '?';
	pr->exe = info->exe ? strdup(info->exe) : NULL;
	pr->cmdline = info->cmdline ? strdup(info->cmdline) : NULL;
	clock_gettime(CLOCK_REALTIME, &pr->start);
	pthread_mutex_init(&pr->lock, NULL);
	pthread_mutex_init(&pr->ev_lock, NULL);
	pr->refs = 1 + n;
	pr->unw = calloc(n, sizeof(*pr->unw));
	pr->reloads_w = calloc(n, sizeof(*pr->reloads_w));
	pr->unw_mem_w = calloc(n, sizeof(*pr->unw_mem_w));
	pr->books = hp_books_new(!!(info->flags & HP_PROC_DUMP_AT_MAX));
	pr->memo = hp_memo_new();	/* optional: without it every sample is unwound */
	pr->splices = hp_splices_new();	/* optional too: a splice per sample */
	pr->reuse = hp_reuse_new();
	pr->same = hp_samepath_new();
	/* The first maps snapshot and the ELF files, right now (the process may
	 * be gone by the time its samples are unwound); copies for the others. */
	if (pr->unw) {
		struct hp_target t = {
			.pid = info->pid,
			.proc_fd = info->has_proc_fd ? info->proc_fd : -1,
			.paths_ok = !info->foreign,
		};

		struct hp_target pt = t;

		/* Python frames read the process on the feeding thread: fds of
		 * their own. */
		pt.proc_fd = dup_fd(t.proc_fd);
		pr->py = hp_py_new(&pt, dup_fd(info->maps_fd), dup_fd(info->mem_fd),
				   dup_fd(info->exe_fd), &p->elfs);
		pr->jit = hp_perfmap_new(info->pid, dup_fd(t.proc_fd));
		pr->unw[0] = hp_unwinder_new_at(&t, info->maps_fd, info->mem_fd,
						info->exe_fd, &p->elfs);
	} else
		close_fds(info);
	for (i = 1; pr->unw && pr->unw[0] && i < n; i++)
		pr->unw[i] = hp_unwinder_clone(pr->unw[0]);
	for (i = 0; pr->unw && i < n && pr->unw[i]; i++)
		;
	if (!pr->books || !pr->unw || !pr->reloads_w || !pr->unw_mem_w || i < n) {
		if (pr->unw && !pr->unw[0])
			close_fds(info);
		for (i = 0; pr->unw && i < n; i++)
			hp_unwinder_free(pr->unw[i]);
		hp_books_free(pr->books);
		hp_py_free(pr->py);
		hp_perfmap_free(pr->jit);
		pthread_mutex_destroy(&pr->lock);
		pthread_mutex_destroy(&pr->ev_lock);
		free(pr->unw);
		free(pr->reloads_w);
		free(pr->unw_mem_w);
		free(pr->exe);
		free(pr->cmdline);
		free(pr);
		return NULL;
	}
	pthread_mutex_lock(&p->lock);
	pr->next = p->procs;
	if (p->procs)
		p->procs->prev = pr;
	p->procs = pr;
	pthread_mutex_unlock(&p->lock);
	return pr;
}

static uint64_t take_feed(struct hp_proc *pr)
{
	uint64_t n = pr->f.feed_no;

	/* One thread numbers a process's jobs (pipeline.h): no locked add,
	 * which would also wait for the job's stores to drain. */
	__atomic_store_n(&pr->f.feed_no, n + 1, __ATOMIC_RELAXED);
	return n;
}

static void books_push(struct hp_proc *pr, struct job *j, int flush);

/* The open batch of events goes to the books' pending list: before any
 * other job is numbered, so that the list stays in feed order. */
static void events_close(struct hp_proc *pr)
{
	struct job *j = pr->events;

	if (!j)
		return;
	pr->events = NULL;
	books_push(pr, j, 0);
}

/* The feed number of a job that is not an event. */
static uint64_t next_feed(struct hp_proc *pr)
{
	events_close(pr);
	return take_feed(pr);
}

/* A new event in the open batch (NULL: out of memory). */
static struct event *event_new(struct hp_proc *pr)
{
	struct job *j = pr->events;
	struct event *ev;
	uint64_t f;

	/* A full batch goes now, not when its last event was handed out: the
	 * caller was still to fill that one in. */
	if (j && j->nev == HP_EVENTS_PER_JOB) {
		events_close(pr);
		j = NULL;
	}
	if (!j) {
		pthread_mutex_lock(&pr->ev_lock);
		j = pr->ev_pool;
		if (j) {
			pr->ev_pool = j->next;
			pr->nev_pool--;
		}
		pthread_mutex_unlock(&pr->ev_lock);
		if (!j)
			j = malloc(sizeof(*j) + HP_EVENTS_PER_JOB * sizeof(struct event));
		if (!j)
			return NULL;
		memset(j, 0, sizeof(*j));
		j->kind = J_EVENTS;
		j->pr = pr;
		pr->events = j;
	}
	f = take_feed(pr);
	if (!j->nev)
		j->feed = f;
	ev = (struct event *)j->rec + j->nev++;
	j->len += sizeof(*ev);
	hp_bump(&pr->f.queued_in, sizeof(*ev));
	hp_bump(&pr->f.fed, 1);
	return ev;
}

/* A job for the books, batched (j NULL: just flush). */
static void books_push(struct hp_proc *pr, struct job *j, int flush)
{
	struct job *head = NULL, *tail = NULL;

	if (j) {
		j->next = NULL;
		if (pr->pend_tail)
			pr->pend_tail->next = j;
		else
			pr->pend_head = j;
		pr->pend_tail = j;
		pr->npend++;
	}
	if ((flush || pr->npend >= HP_BOOKS_BATCH) && pr->pend_head) {
		head = pr->pend_head;
		tail = pr->pend_tail;
		pr->pend_head = pr->pend_tail = NULL;
		pr->npend = 0;
	}
	if (head)
		q_push_chain(&pr->p->books, head, tail);
}

void hp_proc_flush(struct hp_proc *pr)
{
	if (!pr)
		return;
	events_close(pr);
	books_push(pr, NULL, 1);
}

/*
 * An allocation whose unwind the memo already knows: an event with the
 * few header fields the books read and the frames, straight to the books.
 * The stack is neither copied nor unwound. Returns 0 on a miss, 1 when
 * the event is in, -1 out of memory.
 */
static int memo_event(struct hp_proc *pr, const struct hp_parsed *ps,
		      const struct hp_stack_view *v, int unknown, int npy)
{
	const struct heapprofd_rec_alloc *a = ps->alloc;
	const struct hp_uframe *fr;
	struct event *ev;
	uint64_t id = 0, applied;
	int n;

	applied = __atomic_load_n(&pr->b.applied, __ATOMIC_ACQUIRE);
	hp_memo_tick(pr->memo, pr->f.feed_no, applied);
	hp_splices_tick(pr->splices, pr->f.feed_no, applied);
	n = hp_memo_lookup(pr->memo, ps->alloc, v, &fr, pr->p->max_frames, &id);
	if (n < 0)
		return 0;
	if ((a->hdr.flags & HEAPPROFD_ALLOC_STACK_SAME) && pr->same &&
	    !hp_samepath_check(pr->same, pr->memo, a, id))
		hp_bump(&pr->f.code_stale, 1);	/* the consumer asks for a new set */
	hp_reuse_matched(v, id);
	ev = event_new(pr);
	if (!ev)
		return -1;	/* the frames were lent: nothing to give back */
	ev->type = HEAPPROFD_REC_ALLOC;
	ev->flags = hp_reuse_flags(a->hdr.flags, unknown);
	ev->seq = a->seq;
	ev->addr = a->addr;
	ev->est_size = a->est_size;
	ev->interval = a->interval;
	ev->req_size = a->req_size;
	ev->usable_size = a->usable_size;
	ev->heap_id = a->heap_id;
	/* The books only read lent frames (hp_books_alloc's borrowed). */
	ev->frames = (struct hp_uframe *)fr;
	ev->nframes = n;
	ev->memo_id = id;
	ev->owned = 0;
	/*
	 * With Python frames: the native ones spliced, lent from the splice
	 * cache with an id of their own; a copy of the event's own when the
	 * cache keeps none.
	 */
	if (npy) {
		const struct hp_uframe *sf;
		uint64_t sid;
		int m = hp_splices_get(pr->splices, pr->py, hp_memo_gen(pr->memo), id, fr, n,
				       pr->pyres, npy, pr->p->max_frames, &sf, &sid);

		if (m > 0) {
			ev->frames = (struct hp_uframe *)sf;
			ev->nframes = m;
			ev->memo_id = sid;
		}
	}
	if (npy && ev->frames == fr) {
		struct hp_uframe *f = malloc(pr->p->max_frames * sizeof(*f));
		int m = f ? hp_py_splice(pr->py, fr, n, pr->pyres, npy, f,
					 pr->p->max_frames) : 0;

		if (m > 0) {
			ev->frames = f;
			ev->nframes = m;
			ev->memo_id = 0;
			ev->owned = 1;
		} else {
			free(f);
		}
	}
	/* JIT code: named as it is now, in a copy (the memo's are lent). */
	if (hp_perfmap_names_any(pr->jit, ev->frames, ev->nframes)) {
		struct hp_uframe *f = ev->owned ? ev->frames :
				      malloc(ev->nframes * sizeof(*f));

		if (f) {
			if (!ev->owned) {	/* the memo's, or the splice cache's */
				memcpy(f, ev->frames, ev->nframes * sizeof(*f));
				hp_uframes_get(f, ev->nframes);
			}
			hp_perfmap_name_frames(pr->jit, f, ev->nframes);
			ev->frames = f;
			ev->memo_id = 0;
			ev->owned = 1;
		}
	}
	return 1;
}

/* A free: an event. 0, or -1 out of memory. */
static int free_event(struct hp_proc *pr, const struct heapprofd_rec_free *f)
{
	struct event *ev = event_new(pr);

	if (!ev)
		return -1;
	ev->type = HEAPPROFD_REC_FREE;
	ev->flags = 0;
	ev->seq = f->seq;
	ev->addr = f->addr;
	ev->heap_id = f->heap_id;
	ev->frames = NULL;
	ev->nframes = 0;
	ev->memo_id = 0;
	ev->owned = 0;
	return 0;
}

/* A job holding a copy of len bytes of record (filled by the caller). */
static struct job *rec_job(size_t len)
{
	struct job *j = malloc(sizeof(*j) + ((len + 7) & ~(size_t)7));

	if (j)
		memset(j, 0, sizeof(*j));
	return j;
}

/* Backpressure (HP_MAX_QUEUED_BYTES): wait while too much is in flight.
 * The clock is read only when there is a wait. */
static void wait_for_room(struct hp_proc *pr)
{
	struct timespec t0, t1;
	uint64_t ms;

	if (queued_bytes(pr) <= pr->p->max_queued)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (queued_bytes(pr) > pr->p->max_queued) {
		/* The books may be waiting for a record still in our batch. */
		hp_proc_flush(pr);
		usleep(200);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000 + (uint64_t)(t1.tv_nsec / 1000000) -
	     (uint64_t)(t0.tv_nsec / 1000000);
	if (ms > pr->f.room_wait_ms)
		pr->f.room_wait_ms = ms;
}

uint64_t hp_proc_take_room_wait_ms(struct hp_proc *pr)
{
	uint64_t ms = pr ? pr->f.room_wait_ms : 0;

	if (pr)
		pr->f.room_wait_ms = 0;
	return ms;
}

int hp_proc_has_room(struct hp_proc *pr)
{
	if (!pr || queued_bytes(pr) <= pr->p->max_queued)
		return 1;
	/* Asked, then looked again (both in the one total order, so that
	 * the look does not pass the ask), and room made in between is not
	 * missed. */
	__atomic_store_n(&pr->want_room, 1, __ATOMIC_SEQ_CST);
	return __atomic_load_n(&pr->f.queued_in, __ATOMIC_RELAXED) -
	       __atomic_load_n(&pr->b.queued_out, __ATOMIC_SEQ_CST) <= pr->p->max_queued;
}

int hp_pipeline_room_fd(struct hp_pipeline *p)
{
	return p ? p->room_fd : -1;
}

int hp_proc_caught_up(struct hp_proc *pr)
{
	return !pr || __atomic_load_n(&pr->b.applied, __ATOMIC_ACQUIRE) >= pr->f.feed_no;
}

int hp_proc_feed(struct hp_proc *pr, const void *rec, size_t len, char *why,
		 size_t whylen)
{
	struct hp_pipeline *p;
	struct hp_parsed ps;
	struct hp_stack_view view;
	struct job *j = NULL;
	int r, i, reused = 0, npy = 0;
	size_t py_room = 0;

	if (!pr || pr->ended) {
		snprintf(why, whylen, "session already ended");
		return -1;
	}
	p = pr->p;
	if (len > HEAPPROFD_REC_LEN_MASK) {
		snprintf(why, whylen, "record of %zu bytes is too long", len);
		return -1;
	}
	/*
	 * rec is the caller's private copy (never the shared ring), so it is
	 * validated in place; what goes on is copied from it.
	 */
	r = hp_parse_record(rec, len, &ps, why, whylen);
	if (r)
		return r < 0 ? -1 : 0;
	if (ps.type == HEAPPROFD_REC_ALLOC) {
		if (!pr->reuse) {
			snprintf(why, whylen, "out of memory");
			return -1;
		}
		reused = hp_reuse_view(pr->reuse, ps.alloc, ps.stack, &view);
		if (ps.npy)
			npy = hp_py_resolve(pr->py, ps.py, ps.npy, pr->pyres);
	}
	if (ps.type == HEAPPROFD_REC_MAPS && pr->memo)
		hp_memo_new_gen(pr->memo);
	if (ps.type == HEAPPROFD_REC_CODE) {
		/* Kept here, for the claims that follow; nothing else reads it. */
		if (pr->same && hp_samepath_code(pr->same, ps.code)) {
			snprintf(why, whylen, "out of memory");
			return -1;
		}
		return 0;
	}
	/* Before the record's bytes count as queued, whichever way it goes
	 * on: a caller that saw room (hp_proc_has_room) never waits here. */
	wait_for_room(pr);
	r = 0;
	if (ps.type == HEAPPROFD_REC_ALLOC && pr->memo)
		r = memo_event(pr, &ps, &view, reused == 2, npy);
	else if (ps.type == HEAPPROFD_REC_FREE)
		r = free_event(pr, ps.free) ? -1 : 1;
	if (r) {
		if (r < 0) {
			snprintf(why, whylen, "out of memory");
			return -1;
		}
		return 0;
	}
	if (ps.type == HEAPPROFD_REC_ALLOC && (ps.alloc->hdr.flags & HEAPPROFD_ALLOC_STACK_SAME) &&
	    pr->same)
		hp_samepath_unchecked(pr->same);	/* unwound again: the memo lost it */
	if (reused)
		len = hp_reuse_whole_len(&view);
	else if (ps.npy)	/* the Python frames travel resolved, beside the record */
		len -= ps.npy * sizeof(struct heapprofd_pyframe) + sizeof(struct heapprofd_pyframes);
	py_room = (size_t)npy * sizeof(struct hp_pyframe);
	j = rec_job(len + py_room);
	if (!j) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	if (reused) {	/* for the unwinder: the stack made whole */
		hp_reuse_build(ps.alloc, &view, reused == 2, j->rec);
	} else {
		memcpy(j->rec, rec, len);
		if (ps.npy) {
			struct heapprofd_rec_alloc *w = (struct heapprofd_rec_alloc *)j->rec;

			w->hdr.flags &= ~HEAPPROFD_ALLOC_PYFRAMES;
			w->hdr.len = (uint32_t)len;
		}
	}
	if (npy) {
		j->py = (struct hp_pyframe *)((uint8_t *)j->rec + ((len + 7) & ~(size_t)7));
		memcpy(j->py, pr->pyres, py_room);
		j->npy = npy;
	}
	j->len = len;
	j->same = ps.type == HEAPPROFD_REC_ALLOC && (ps.alloc->hdr.flags & HEAPPROFD_ALLOC_STACK_SAME);
	j->memo_gen = pr->memo ? hp_memo_gen(pr->memo) : 0;
	j->kind = J_REC;
	j->pr = pr;
	hp_bump(&pr->f.queued_in, j->len);
	hp_bump(&pr->f.fed, 1);
	if (ps.type == HEAPPROFD_REC_MAPS) {
		/* Every worker rereads before it unwinds anything fed later. */
		for (i = 0; i < p->nworkers; i++) {
			struct job *m = job_new(J_MAPS_W, pr);

			m->worker = i;
			m->feed = next_feed(pr);
			q_push(&p->workers[i], m);
		}
	}
	j->feed = next_feed(pr);
	if (ps.type == HEAPPROFD_REC_ALLOC) {
		j->worker = (int)(__atomic_fetch_add(&pr->f.rr, 1, __ATOMIC_RELAXED) %
				  (unsigned)p->nworkers);
		q_push(&p->workers[j->worker], j);
	} else {
		books_push(pr, j, 0);
	}
	return 0;
}

/*
 * A record the kernel queued for the session (read(2) on the consumer fd).
 * Kernel allocations are unwound like the client's, but never take part in
 * stack reuse or the memo: their stack belongs to no ring thread's series.
 */
int hp_proc_feed_kernel(struct hp_proc *pr, const void *rec, size_t len, char *why,
			size_t whylen)
{
	struct hp_parsed ps;
	struct job *j;

	if (!pr || pr->ended) {
		snprintf(why, whylen, "session already ended");
		return -1;
	}
	if (len > HEAPPROFD_REC_LEN_MASK || hp_parse_krecord(rec, len, &ps, why, whylen)) {
		if (len > HEAPPROFD_REC_LEN_MASK)
			snprintf(why, whylen, "kernel record of %zu bytes is too long", len);
		if (!pr->f.kbad)
			snprintf(pr->f.kbad_why, sizeof(pr->f.kbad_why), "%s", why);
		__atomic_store_n(&pr->f.kbad, pr->f.kbad + 1, __ATOMIC_RELEASE);
		return -1;
	}
	hp_bump(&pr->f.kfed, 1);
	if (ps.type == HEAPPROFD_REC_FREE) {
		if (free_event(pr, ps.free)) {
			snprintf(why, whylen, "out of memory");
			return -1;
		}
		return 0;
	}
	j = rec_job(len);
	if (!j) {
		snprintf(why, whylen, "out of memory");
		return -1;
	}
	memcpy(j->rec, rec, len);
	j->len = len;
	j->kind = J_REC;
	j->kernel = 1;
	j->pr = pr;
	hp_bump(&pr->f.queued_in, j->len);
	hp_bump(&pr->f.fed, 1);
	j->feed = next_feed(pr);
	if (ps.type == HEAPPROFD_REC_ALLOC) {
		j->worker = (int)(__atomic_fetch_add(&pr->f.rr, 1, __ATOMIC_RELAXED) %
				  (unsigned)pr->p->nworkers);
		q_push(&pr->p->workers[j->worker], j);
	} else {
		books_push(pr, j, 0);
	}
	return 0;
}

void hp_proc_note(struct hp_proc *pr, const char *line)
{
	if (!pr)
		return;
	pthread_mutex_lock(&pr->lock);
	snprintf(pr->note, sizeof(pr->note), "%s", line ? line : "");
	pthread_mutex_unlock(&pr->lock);
}

void hp_proc_shed(struct hp_proc *pr)
{
	/* The entries are retired, and freed once the books are past the jobs
	 * that borrowed their frames (memo.c). */
	if (pr && pr->memo)
		hp_memo_new_gen(pr->memo);
}

void hp_proc_set_totals(struct hp_proc *pr, const struct heapprofd_counters *copy)
{
	pthread_mutex_lock(&pr->lock);
	pr->totals = *copy;
	pr->have_totals = 1;
	pthread_mutex_unlock(&pr->lock);
}

/* A numbered job to the books; wait until it has been applied. */
static int round_trip(struct hp_proc *pr, enum job_kind kind, struct waiter *w)
{
	struct job *j = calloc(1, sizeof(*j));

	if (!j)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	j->kind = kind;
	j->pr = pr;
	j->w = w;
	j->feed = next_feed(pr);
	books_push(pr, j, 1);
	wait_for(w);
	pthread_mutex_destroy(&w->lock);
	pthread_cond_destroy(&w->cond);
	return 0;
}

void hp_proc_set_sink(struct hp_proc *pr, hp_dump_sink_fn fn, void *arg)
{
	pr->sink = fn;
	pr->sink_arg = arg;
}

void hp_proc_set_dump_kind(struct hp_proc *pr, const char *kind)
{
	snprintf(pr->kind, sizeof(pr->kind), "%s", kind ? kind : "");
}

void hp_proc_sync(struct hp_proc *pr)
{
	struct waiter w = { 0 };

	round_trip(pr, J_SYNC, &w);
}

/* One profile's files (formats.h), then to the process's sink if it has one. */
static int write_prof(struct hp_proc *pr, const struct hp_prof *prof, const char *prefix,
		      const char *mid, unsigned formats, const char *title,
		      struct hp_out_limit *lim, char *why, size_t whylen)
{
	struct hp_prof_who who = {
		.pid = pr->pid, .comm = pr->comm, .exe = pr->exe, .cmdline = pr->cmdline,
		.kind = mid[0] == '.' ? mid + 1 : pr->kind,
	};
	struct hp_format_args a = { .metric = hp_prof_metric(prof), .title = title, .who = &who };
	int rc = 0;

	if (formats & ~HP_OUT_NOSYMS)
		rc = hp_formats_write(prof, prefix, mid, formats & ~HP_OUT_NOSYMS, &a, lim, why,
				      whylen);
	/* Sent whether or not the files could be written: each is a copy. */
	if (pr->sink)
		pr->sink(pr->sink_arg, prof, &a, rc);
	return rc;
}

/*
 * The dump's locations named, here (the caller's thread) rather than on the
 * books thread. Files whose debug info is on this machine are waited for,
 * as before; files whose debug info may come from debuginfod are waited
 * for by a final dump up to its bound, by other dumps not at all.
 */
/* Addresses in no file that the perf map names now (a map written late). */
static void name_jit(struct hp_proc *pr, struct hp_prof *p)
{
	char name[256];
	int looked = 0;

	for (uint32_t i = 0; pr->jit && i < p->nlocs; i++) {
		struct hp_prof_loc *l = &p->locs[i];

		if (l->map || l->func || !l->addr)
			continue;
		if (!looked++)
			hp_perfmap_refresh(pr->jit);
		if (hp_perfmap_name(pr->jit, l->addr, name, sizeof(name)))
			l->func = hp_prof_str(p, name);
	}
}

static void name_locations(struct hp_proc *pr, struct waiter *w, int final)
{
	uint64_t wait = final ? pr->p->sym_wait_ms : 0;
	uint64_t deadline = hp_symd_deadline(wait);
	struct hp_prof *outs[2] = { &w->now, &w->peak };
	unsigned whiches[2] = { HP_DUMP_NOW, HP_DUMP_PEAK };

	for (int i = 0; i < 2; i++) {
		size_t left;

		if (!(w->which & whiches[i]))
			continue;
		left = hp_symbolize_prof(outs[i], &w->want[i], deadline);
		name_jit(pr, outs[i]);
		if (left)
			hp_prof_add_comment(outs[i], "symbolization: %zu of %zu locations left unnamed: their debug info was still being looked up (debuginfod) after %llu ms; `heapprofctl symbolize` can name them later",
					    left, w->want[i].n, (unsigned long long)wait);
		hp_symreqs_free(&w->want[i]);
	}
}

int hp_proc_dump(struct hp_proc *pr, const char *path_prefix, unsigned formats,
		 unsigned which)
{
	return hp_proc_dump_why(pr, path_prefix, formats, which, NULL, 0);
}

int hp_proc_dump_why(struct hp_proc *pr, const char *path_prefix, unsigned formats,
		     unsigned which, char *why, size_t whylen)
{
	return hp_proc_dump_limited(pr, path_prefix, formats, which, NULL, why, whylen);
}

int hp_proc_dump_limited(struct hp_proc *pr, const char *path_prefix, unsigned formats,
			 unsigned which, struct hp_out_limit *lim, char *why, size_t whylen)
{
	char whybuf[HP_OUT_PATH_MAX + 200] = "";
	struct waiter w = { 0 };
	char title[128];
	int rc = 0, final = !!(which & HP_DUMP_FINAL);

	if (!pr || !path_prefix)
		return -EINVAL;
	which &= HP_DUMP_NOW | HP_DUMP_PEAK;
	if (!which)
		which = HP_DUMP_NOW;
	w.which = which;
	w.symbols = !(formats & HP_OUT_NOSYMS);
	rc = round_trip(pr, J_DUMP, &w);
	if (rc)
		return rc;
	name_locations(pr, &w, final);
	snprintf(title, sizeof(title), "%s (pid %d)", pr->comm, (int)pr->pid);
	if (which & HP_DUMP_NOW)
		rc = write_prof(pr, &w.now, path_prefix, "", formats, title, lim, whybuf,
				sizeof(whybuf));
	if (!rc && (which & HP_DUMP_PEAK)) {
		snprintf(title, sizeof(title), "%s (pid %d): at its in-use peak", pr->comm,
			 (int)pr->pid);
		rc = write_prof(pr, &w.peak, path_prefix, which & HP_DUMP_NOW ? ".peak" : "",
				formats, title, lim, whybuf, sizeof(whybuf));
	}
	if (rc && why)
		snprintf(why, whylen, "%s", whybuf);
	if (which & HP_DUMP_NOW)
		hp_prof_free(&w.now);
	if (which & HP_DUMP_PEAK)
		hp_prof_free(&w.peak);
	return rc;
}

void hp_proc_end(struct hp_proc *pr)
{
	struct hp_pipeline *p;
	struct job *j;
	int i;

	if (!pr || pr->ended)
		return;
	p = pr->p;
	pr->ended = 1;
	__atomic_add_fetch(&p->procs_ended, 1, __ATOMIC_RELEASE);
	pthread_mutex_lock(&p->lock);
	if (pr->prev)
		pr->prev->next = pr->next;
	else
		p->procs = pr->next;
	if (pr->next)
		pr->next->prev = pr->prev;
	pthread_mutex_unlock(&p->lock);
	/* Each worker lets go of its unwinder after the records it holds... */
	for (i = 0; i < p->nworkers; i++) {
		j = job_new(J_END_W, pr);
		j->worker = i;
		q_push(&p->workers[i], j);
	}
	/* ...and the books go after every record fed before. */
	j = job_new(J_END, pr);
	j->feed = next_feed(pr);
	books_push(pr, j, 1);
}

void hp_pipeline_procs_gone(struct hp_pipeline *p, uint64_t *ended, uint64_t *freed)
{
	*freed = __atomic_load_n(&p->procs_freed, __ATOMIC_ACQUIRE);
	*ended = __atomic_load_n(&p->procs_ended, __ATOMIC_ACQUIRE);
}

uint64_t hp_pipeline_copied_bytes(struct hp_pipeline *p)
{
	return __atomic_load_n(&p->elfs.copied, __ATOMIC_RELAXED);
}

uint64_t hp_proc_code_stale(struct hp_proc *pr)
{
	return pr ? __atomic_load_n(&pr->f.code_stale, __ATOMIC_RELAXED) : 0;
}

void hp_proc_same_stats(struct hp_proc *pr, uint64_t *checked, uint64_t *unchecked,
			uint64_t *uncovered, uint64_t *unsure)
{
	hp_samepath_stats(pr ? pr->same : NULL, checked, unchecked, uncovered);
	*unsure = pr ? __atomic_load_n(&pr->same_unsure, __ATOMIC_RELAXED) : 0;
}

void hp_proc_get_stats(struct hp_proc *pr, struct hp_proc_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->fed = __atomic_load_n(&pr->f.fed, __ATOMIC_RELAXED);
	st->accounted = __atomic_load_n(&pr->b.accounted, __ATOMIC_ACQUIRE);
	st->unwind_errors = __atomic_load_n(&pr->b.unwind_errors, __ATOMIC_RELAXED);
	st->frames = __atomic_load_n(&pr->b.frames, __ATOMIC_RELAXED);
	st->maps_reloads = reloads(pr);
	st->live_allocs = __atomic_load_n(&pr->b.live, __ATOMIC_RELAXED);
	st->unmatched_frees = __atomic_load_n(&pr->b.unmatched, __ATOMIC_RELAXED);
	st->mem_bytes = __atomic_load_n(&pr->b.books_mem, __ATOMIC_RELAXED) + sizeof(*pr);
	for (int i = 0; i < pr->p->nworkers; i++)
		st->mem_bytes += __atomic_load_n(&pr->unw_mem_w[i], __ATOMIC_RELAXED);
	st->mem_bytes += hp_reuse_mem(pr->reuse) + hp_samepath_mem(pr->same);
	st->mem_bytes += hp_py_mem(pr->py) + hp_perfmap_mem(pr->jit);
	{
		uint64_t sh, sm;
		size_t sb;

		hp_splices_stats(pr->splices, &sh, &sm, &sb);
		st->mem_bytes += sb;
	}
	hp_reuse_stats(pr->reuse, &st->reuse_rebuilt, &st->reuse_missing);
	hp_samepath_stats(pr->same, &st->same_checked, &st->same_unchecked, &st->same_uncovered);
	if (pr->memo) {
		uint64_t hits, misses;
		size_t bytes;

		hp_memo_stats(pr->memo, &hits, &misses, &bytes);
		st->mem_bytes += bytes;
		st->memo_hits = hits;
		st->memo_misses = misses;
	}
	st->queued_bytes = queued_bytes(pr);
	st->dump_samples = __atomic_load_n(&pr->b.samples, __ATOMIC_RELAXED);
	st->dump_locs = __atomic_load_n(&pr->b.sample_locs, __ATOMIC_RELAXED);
	st->dump_locations = __atomic_load_n(&pr->b.locations, __ATOMIC_RELAXED);
	st->kernel_records = __atomic_load_n(&pr->f.kfed, __ATOMIC_RELAXED);
	st->kernel_rejected = __atomic_load_n(&pr->f.kbad, __ATOMIC_RELAXED);
}
