/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The daemon's pipeline: from "one record, copied out of the ring into
 * private memory" to "profile files on disk", plus reading profiles back.
 *
 * Threads (seed 004): unwinder workers and ONE bookkeeping thread. A
 * process's allocation records are spread over the workers (each has its own
 * unwinder for the process: libunwind address space, caches, maps snapshot,
 * touched by that worker only); the books thread puts every record back in
 * feed order and is the only thread that touches the books (call-site trees,
 * live allocations, peaks). The threads talk through queues.
 *
 * Every function here may be called from any one thread of the caller (the
 * SERVICE's drain loop); calls for one hp_proc must not race each other.
 */
#ifndef HEAPPROFD_PIPELINE_H
#define HEAPPROFD_PIPELINE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../uapi/linux/heapprofd.h"

struct hp_pipeline;
struct hp_proc;

struct hp_pipeline_opts {
	int unwind_workers;	/* 0 = default 2 */
	int max_frames;		/* 0 = default 128 */
	uint64_t max_queued_bytes;	/* records in flight per process: 0 = default
					 * 8 MiB, and never more (a memory budget) */
	/* Private copies of ELF files others could shrink, all together
	 * (0: no bound but 1 GiB a file); a file past it is not opened, and
	 * that process's frames in it stay addresses. */
	uint64_t max_copied_bytes;
};

struct hp_pipeline *hp_pipeline_new(const struct hp_pipeline_opts *o);
void hp_pipeline_free(struct hp_pipeline *p);
/* Bytes of those copies now (shared memory the daemon holds). */
uint64_t hp_pipeline_copied_bytes(struct hp_pipeline *p);
/* Processes ended, and of them those whose memory the pipeline's threads
 * have all freed (some time after hp_proc_end). */
void hp_pipeline_procs_gone(struct hp_pipeline *p, uint64_t *ended, uint64_t *freed);

#define HP_PROC_DUMP_AT_MAX	(1U << 0)	/* keep the state at the peak */

struct hp_proc_info {
	pid_t pid;
	uint64_t session_id;
	const char *comm;	/* copied */
	int maps_fd;		/* -1 if absent; ownership passes to the pipeline */
	int mem_fd;
	int exe_fd;
	unsigned flags;		/* HP_PROC_* */
	/*
	 * The process belongs to another user than the daemon's (a system
	 * daemon serving everybody): its files are opened only as the kernel
	 * has them mapped (proc_fd's map_files), never by the paths its maps
	 * name, which it controls.
	 */
	int foreign;
	int has_proc_fd;	/* proc_fd is set (a 0 from memset is not an fd) */
	int proc_fd;		/* /proc/<pid> of that very process; ownership passes */
	const char *exe;	/* its executable and command line, for the formats */
	const char *cmdline;	/* that name the process (OTLP); copied; may be NULL */
};

/* Takes the first maps snapshot now (the process may be gone later). */
struct hp_proc *hp_proc_new(struct hp_pipeline *p, const struct hp_proc_info *info);

/*
 * One thread at a time feeds a process and asks for its dumps, syncs and
 * end (the daemon's event loop): the memo and the batch for the books
 * belong to that thread and take no locks.
 *
 * Validate one record (every field is treated as hostile), copy it and
 * queue it. Returns 0, or -1 with a reason in why: the caller ends the
 * session. Backpressure: while more than 8 MiB of this process's records
 * (hp_pipeline_opts.max_queued_bytes) wait to be unwound, the call sleeps
 * (so the ring fills and the client samples less, then waits, instead of
 * the daemon's memory growing); a caller that must not sleep asks
 * hp_proc_has_room first, and then never does. Kernel record
 * types (>= HEAPPROFD_REC_KERNEL_FIRST) are accepted and ignored: in the
 * ring the producer wrote them, and only the kernel's count. The dmabuf
 * heap is the kernel's too: a ring record there is malformed.
 */
int hp_proc_feed(struct hp_proc *pr, const void *rec, size_t len, char *why,
		 size_t whylen);
/* The longest of those sleeps since the last call, in ms (the feeding
 * thread; pr may be NULL: 0). */
uint64_t hp_proc_take_room_wait_ms(struct hp_proc *pr);
/* Every record fed so far is in the books (the feeding thread, after
 * hp_proc_flush): a dump now waits for nothing but names. */
int hp_proc_caught_up(struct hp_proc *pr);
/*
 * 1 if a record fed now would not wait for room (hp_proc_feed's
 * backpressure). 0: the caller stops feeding pr, and once the books have
 * taken its queue down to half, hp_pipeline_room_fd becomes readable.
 */
int hp_proc_has_room(struct hp_proc *pr);
/* An eventfd, readable once room was made for a process whose feeding
 * stopped on hp_proc_has_room; the reader reads it to clear it. -1 if none. */
int hp_pipeline_room_fd(struct hp_pipeline *p);
/*
 * One record the kernel queued for the session (uapi "Kernel records":
 * read(2) on the consumer fd), checked as hostile as any other: stamp 0,
 * ALLOC and FREE of the dmabuf heap, DMABUF, KLOST. Returns 0, or -1 with
 * the reason in why: that record is left out (and counted; the dumps say
 * so), the session goes on. Same threading as hp_proc_feed, and the same
 * feed order: a dump sees both. It never sleeps: the caller reads the
 * kernel's queue only while hp_proc_has_room (what one read(2) returned
 * is fed whole), or once the process is gone (the queue is bounded).
 */
int hp_proc_feed_kernel(struct hp_proc *pr, const void *rec, size_t len, char *why,
			size_t whylen);
/*
 * Records bound straight for the books (frees, and allocations whose frames
 * the unwind memo knew) are handed over in batches, so that the books thread
 * is woken once per batch rather than once per record. Call this when a run
 * of feeds ends (the ring is drained for now); dumps, syncs and ends flush
 * by themselves.
 */
void hp_proc_flush(struct hp_proc *pr);

/* Exact totals and drop counts from the control page, shown beside estimates. */
void hp_proc_set_totals(struct hp_proc *pr, const struct heapprofd_counters *copy);

/*
 * A set of output formats: a bit per entry of formats.h's table (by its
 * place there). The first four have names here for the daemon's own use.
 */
#define HP_OUT_PPROF	(1U << 0)	/* PREFIX.pb.gz */
#define HP_OUT_FOLDED	(1U << 1)	/* PREFIX.folded */
#define HP_OUT_TEXT	(1U << 2)	/* PREFIX.txt */
#define HP_OUT_SVG	(1U << 3)	/* PREFIX.svg */
#define HP_OUT_NOSYMS	(1U << 16)	/* build ids + addresses only (for `symbolize`) */

#define HP_DUMP_NOW	(1U << 0)	/* current state: PREFIX.* */
#define HP_DUMP_PEAK	(1U << 1)	/* state at the in-use peak: PREFIX.peak.* when
					 * both are asked for, PREFIX.* otherwise */
#define HP_DUMP_FINAL	(1U << 2)	/* the session's last dump: names still being
					 * looked up are waited for, within a bound */

/*
 * Write the profile(s). Waits until every record fed so far is accounted;
 * never for the network: locations in files whose debug info is still being
 * looked up (debuginfod) stay addresses, except that a final dump waits for
 * them up to $HEAPPROFD_SYMBOLIZE_WAIT_MS (default 5000). Returns 0 or -errno.
 */
int hp_proc_dump(struct hp_proc *pr, const char *path_prefix, unsigned formats,
		 unsigned which);
/*
 * The same, with what failed and why in why (e.g. "writing /tmp/p.svg: No
 * space left on device", "/tmp/p.svg is a symbolic link, not a regular
 * file: not replacing it"). The files of one profile are written all or
 * none, each created safely (outfile.h): no link followed, no special file
 * replaced, no partial file left.
 */
int hp_proc_dump_why(struct hp_proc *pr, const char *path_prefix, unsigned formats,
		     unsigned which, char *why, size_t whylen);
/*
 * The same under a bound on what its files may take on disk (outfile.h,
 * struct hp_out_limit; NULL: none). Formats are written pprof, folded,
 * text, SVG: one after the first that would pass the bound is left out
 * (added to lim->left_out) and the profile keeps those that fit; when the
 * first does not fit, nothing is written and the dump fails with the
 * limit's errno and reason.
 */
struct hp_out_limit;
int hp_proc_dump_limited(struct hp_proc *pr, const char *path_prefix, unsigned formats,
			 unsigned which, struct hp_out_limit *lim, char *why, size_t whylen);

/*
 * Where a process's dumps go besides its files (the daemon's exports):
 * called on the dumping thread for every profile of a dump (now, peak),
 * with the arguments its formats got (a->who->kind: "", "peak", ...) and
 * what writing its files returned. It must not keep prof. NULL: none.
 */
struct hp_prof;
struct hp_format_args;
typedef void (*hp_dump_sink_fn)(void *arg, const struct hp_prof *prof,
				const struct hp_format_args *a, int files_rc);
void hp_proc_set_sink(struct hp_proc *pr, hp_dump_sink_fn fn, void *arg);
/* What the next dumps' "now" profiles are, for the formats that say so
 * (OTLP's heapprofd.dump attribute): "oom", "pressure"; NULL or "": a
 * plain dump. The dumping thread's, like hp_proc_dump. */
void hp_proc_set_dump_kind(struct hp_proc *pr, const char *kind);

/* Wait until every record fed so far is accounted (tests, fuzzing). */
void hp_proc_sync(struct hp_proc *pr);

/* The process is gone or detached: free after pending work. */
void hp_proc_end(struct hp_proc *pr);

/* Counters for `sessions`/logs. */
struct hp_proc_stats {
	uint64_t fed, accounted, unwind_errors, frames, maps_reloads;
	uint64_t live_allocs, unmatched_frees;
	uint64_t mem_bytes;	/* the daemon's memory for this process (books, maps) */
	uint64_t queued_bytes;	/* records waiting to be unwound */
	uint64_t memo_hits;	/* samples whose frames came from the unwind memo */
	uint64_t memo_misses;	/* samples unwound (or not rememberable) */
	uint64_t reuse_rebuilt;	/* stacks completed from the thread's last one */
	uint64_t reuse_missing;	/* ... that could not be (cut at the top) */
	/* same-path records (pipeline/samepath.c): checked against the unwind
	 * they reused, not checkable (unwound again), leaning on code the
	 * client's code set lacked */
	uint64_t same_checked, same_unchecked, same_uncovered;
	uint64_t kernel_records;	/* kernel records fed (hp_proc_feed_kernel) */
	uint64_t kernel_rejected;	/* ... left out as malformed */
	/* What a dump holds in memory grows with these: its samples (call
	 * sites with values), the frames of their stacks in all, and its
	 * locations (distinct frames). */
	uint64_t dump_samples, dump_locs, dump_locations;
};
void hp_proc_get_stats(struct hp_proc *pr, struct hp_proc_stats *st);
/* Same-path claims so far that leaned on code the client's code set
 * lacked (pipeline/samepath.c): the client is due a new set. */
uint64_t hp_proc_code_stale(struct hp_proc *pr);
/* Its same-path records so far: checked, not checkable, uncovered, and of
 * the not checkable those whose unwind read the process's writable memory. */
void hp_proc_same_stats(struct hp_proc *pr, uint64_t *checked, uint64_t *unchecked,
			uint64_t *uncovered, uint64_t *unsure);

/*
 * Let go of what can be rebuilt (the unwind memo: later samples are
 * unwound again until it fills). The feeding thread, like hp_proc_feed.
 */
void hp_proc_shed(struct hp_proc *pr);
/* A line for the header of every later dump (a session ended early says
 * why); NULL or "" for none. Any thread; pr may be NULL (nothing). */
void hp_proc_note(struct hp_proc *pr, const char *line);

/*
 * A number from the command line, strictly: decimal digits only (no sign,
 * no space, nothing after), within [min, max]. 0, or -1 with why ("'12x'
 * is not a number", "-5 ...", "... is out of range (1 to 1099511627776)").
 */
int hp_parse_num(const char *s, unsigned long long min, unsigned long long max,
		 unsigned long long *out, char *why, size_t wl);


#endif /* HEAPPROFD_PIPELINE_H */
