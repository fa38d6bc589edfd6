/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Internal interfaces of the pipeline (daemon/pipeline/). Not for SERVICE.
 *
 *   parse.c      record validation
 *   hmap.c       a small hash map with 128-bit keys (everything is keyed so)
 *   elf.c        the ELF file cache (opened at maps-snapshot time, kept open)
 *   maps.c       per-process /proc/<pid>/maps snapshots
 *   unwind.c     libunwind remote unwinding over copied stacks
 *   symbolize.c  libdwfl function/file:line lookup, demangling
 *   reuse.c      records made whole from their thread's previous stack
 *   splice.c     Python call paths spliced once, lent like the memo's
 *   books.c      call-site trees, live allocations, peaks (books thread only)
 *   intervals.c  the sampling intervals of each heap's samples (books thread)
 *   pipeline.c   threads, queues and the public API
 *   prof.c       the in-memory profile all writers and readers share
 *   pprof.c      pprof (profile.proto) write and read
 *   frames.c     a sample's frames with allocator wrappers folded (drop_frames)
 *   render.c     folded stacks, SVG flame graph, text tables
 *   prof_diff.c, prof_symbolize.c   what heapprofctl does with a profile file
 *
 * profile.h is the public part: what heapprofctl may use.
 */
#ifndef HEAPPROFD_PIPELINE_INTERNAL_H
#define HEAPPROFD_PIPELINE_INTERNAL_H

#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "outfile.h"
#include "pipeline.h"
#include "profile.h"

#define HP_DEFAULT_MAX_FRAMES	128
#define HP_MAX_FRAMES_LIMIT	512

/*
 * A counter with one writer, read by other threads: a store, not a locked
 * read-modify-write (release, so a reader that sees it sees what came before).
 */
static inline void hp_bump(uint64_t *c, uint64_t d)
{
	__atomic_store_n(c, __atomic_load_n(c, __ATOMIC_RELAXED) + d, __ATOMIC_RELEASE);
}

/*
 * Frames lent to the books (memo.c, splice.c): an entry that leaves its
 * table may still be read by jobs fed while it was in it, so it waits on
 * a list, in the order it left, until the books have applied every job
 * fed by then. Owner thread only.
 */
struct hp_lent_node {
	struct hp_lent_node *next;
	uint64_t retire_at;		/* the feed number when it left */
};

/* The entry whose member m is the node n. */
#define hp_lent_entry(n, type, m) ((type *)(void *)((char *)(n) - offsetof(type, m)))

struct hp_lent {
	struct hp_lent_node *head, *tail;
	uint64_t fed;			/* the feed number now (hp_lent_due's) */
};

static inline void hp_lent_retire(struct hp_lent *l, struct hp_lent_node *n)
{
	n->retire_at = l->fed;
	n->next = NULL;
	if (l->tail)
		l->tail->next = n;
	else
		l->head = n;
	l->tail = n;
}

/* With fed jobs fed and applied of them applied: the next entry no job
 * can read any more, off the list; NULL when there is none. */
static inline struct hp_lent_node *hp_lent_due(struct hp_lent *l, uint64_t fed,
					       uint64_t applied)
{
	struct hp_lent_node *n = l->head;

	l->fed = fed;
	if (!n || n->retire_at > applied)
		return NULL;
	l->head = n->next;
	if (!l->head)
		l->tail = NULL;
	return n;
}

/* ---- parse.c ---------------------------------------------------------- */

struct hp_parsed {
	uint16_t type;
	const struct heapprofd_rec_alloc *alloc;	/* point into the record */
	const struct heapprofd_rec_free *free;
	const struct heapprofd_rec_heap *heap;
	const struct heapprofd_rec_maps *maps;
	const struct heapprofd_rec_code *code;
	const struct heapprofd_rec_dmabuf *dmabuf;	/* kernel records only */
	const struct heapprofd_rec_klost *klost;
	const uint8_t *stack;				/* alloc: copied stack */
	uint32_t stack_len;
	const struct heapprofd_pyframe *py;		/* alloc: Python frames */
	uint32_t npy;
	int kernel;					/* read(2), not the ring */
};

/* Same-path records (samepath.c): the client's code sets, its claims checked. */
struct hp_samepath;
struct hp_samepath *hp_samepath_new(void);
void hp_samepath_free(struct hp_samepath *s);
/* A HEAPPROFD_REC_CODE record (parsed): 0, or -1 out of memory. */
int hp_samepath_code(struct hp_samepath *s, const struct heapprofd_rec_code *c);
size_t hp_samepath_mem(const struct hp_samepath *s);
/*
 * A HEAPPROFD_ALLOC_STACK_SAME record whose frames came from memo entry
 * memo_id: did the client's rule cover every return address of that
 * unwind? 1 covered, 0 not (the client should build a new code set), 2 not
 * under a set older than its newest (it has), -1 not checked. Counted
 * either way.
 */
struct hp_memo;
int hp_samepath_check(struct hp_samepath *s, struct hp_memo *m,
		      const struct heapprofd_rec_alloc *a, uint64_t memo_id);
/* One that was unwound, not found in the memo: counted as not checked. */
void hp_samepath_unchecked(struct hp_samepath *s);
void hp_samepath_stats(const struct hp_samepath *s, uint64_t *checked, uint64_t *unchecked,
		       uint64_t *uncovered);

/* 0: usable; 1: valid but to be ignored (kernel types); -1: malformed. */
int hp_parse_record(const void *rec, size_t len, struct hp_parsed *out,
		    char *why, size_t whylen);
/*
 * The same for a record read(2) from the consumer fd (the kernel's): stamp
 * 0, ALLOC and FREE in the dmabuf heap only, DMABUF and KLOST, nothing
 * else. 0: usable; -1: malformed.
 */
int hp_parse_krecord(const void *rec, size_t len, struct hp_parsed *out,
		     char *why, size_t whylen);

/* ---- elf.c ------------------------------------------------------------- */

#define HP_ELF_MAX_SEGS 16

struct hp_sym {
	const char *func;	/* demangled; NULL if unknown */
	const char *file;	/* NULL if no line info */
	int line;
	/* func was inlined: the function it was inlined into, at the call */
	struct hp_sym *caller;
};

struct hp_elf {
	int refs;		/* atomic */
	dev_t dev;
	ino_t ino;
	char *path;
	int is_client;		/* libheapprofd_client.so */
	uid_t owner;		/* the file's owner: who could plant files beside it */
	int fd;			/* -1 once mapped, unless the path cannot reopen it
				 * (or it is a private copy: see elf.c) */
	const uint8_t *img;	/* whole file, read-only */
	size_t size;
	uint8_t build_id[64];
	size_t build_id_len;
	uint64_t build_id_vaddr;	/* where the id's bytes are loaded; 0 unknown */
	int is_dyn;
	struct {
		uint64_t vaddr, memsz, off, filesz;
		uint32_t flags;
	} seg[HP_ELF_MAX_SEGS];
	int nseg;
	uint64_t text_lo, text_hi;	/* vaddr range of executable PT_LOADs */
	uint64_t text_off;		/* file offset of text_lo */
	int has_ehf;			/* .eh_frame_hdr usable for lookups */
	uint64_t ehf_vaddr, ehf_table_vaddr, ehf_count;
	struct hp_elfcache *cache;
	struct hp_elfcache *copied_in;	/* a private copy counted there (copy_max) */
	struct hp_elf *next;
	/* symbolization state: one thread at a time (books thread / cmd) */
	pthread_mutex_t sym_lock;
	void *dwfl;
	void *dwmod;
	struct hp_symtab *symtab;	/* dwmod's functions by address (symtab.c) */
	int dwfl_state;			/* 0 untried, 1 ok, -1 failed, 2 being looked
					 * up (symbolize.c: atomic stores) */
	int sym_remote;			/* looked up where it may take the network */
	struct hp_hmap syms;		/* vaddr -> struct hp_sym */
	struct hp_strtab strs;
	int symcache_state;		/* 0 untried, 1 in use, -1 not for this file */
	int sym_deferred;		/* its DWARF is opened only by a lookup the
					 * cache cannot answer (atomic) */
	int symcache_fd;
	uint64_t symcache_entries;	/* addresses read from the cache file */
};

struct hp_elfcache {
	pthread_mutex_t lock;
	struct hp_elf *head;
	struct hp_symd *symd;	/* its files' symbolizer thread, or NULL */
	/* Private copies of files others could shrink (elf.c): their bytes
	 * now (atomic) and the most they may take together (0: no bound
	 * but each file's HP_ELF_COPY_MAX); a file past it is not opened. */
	uint64_t copied, copy_max;
};

void hp_elfcache_init(struct hp_elfcache *c);
void hp_elfcache_fini(struct hp_elfcache *c);
/*
 * Open and map an ELF file. If dev/ino are nonzero the file must be that
 * inode (what /proc/<pid>/maps listed). c may be NULL (no sharing).
 */
/*
 * Open path (relative to dirfd) for reading only if it is a regular file,
 * without ever opening anything else (FIFOs, devices). An fd, or -1.
 */
int hp_open_regular(int dirfd, const char *path);
struct hp_elf *hp_elf_open(struct hp_elfcache *c, const char *path, int fd,
			   dev_t dev, ino_t ino);
/*
 * A file of names only, no image (Python code: python.c): its frames are
 * named from its syms, which its maker fills (under sym_lock) before any
 * frame that names them leaves its hands. path is what profiles show as
 * its mapping.
 */
struct hp_elf *hp_elf_names(const char *path);
struct hp_elf *hp_elf_ref(struct hp_elf *e);
void hp_elf_put(struct hp_elf *e);
/* File offset <-> ELF virtual address through the PT_LOAD segments. */
int hp_elf_off_to_vaddr(const struct hp_elf *e, uint64_t off, uint64_t *vaddr);
int hp_elf_vaddr_to_off(const struct hp_elf *e, uint64_t vaddr, uint64_t *off);
/* Read from the file image at a virtual address (for the unwinder). */
int hp_elf_read_vaddr(const struct hp_elf *e, uint64_t vaddr, void *dst, size_t n);
/* "abcd..." hex build id into buf (>= 2*64+1) */
void hp_elf_build_id_hex(const struct hp_elf *e, char *buf, size_t len);
int hp_parse_build_id_note(const uint8_t *p, size_t len, uint8_t *out, size_t *outlen,
			   size_t *desc_off);

/* ---- symbolize.c ------------------------------------------------------- */

/*
 * Symbolize vaddr (an ELF virtual address) in e; results cached in e. Looks
 * for e's debug info in the caller's thread if need be (or waits for the
 * symbolizer thread that is looking): for tools and tests, not the daemon.
 */
const struct hp_sym *hp_symbolize(struct hp_elf *e, uint64_t vaddr);
/*
 * The same without waiting: 1 with *out (NULL: out of memory), or 0 while
 * e's debug info is being looked for by the symbolizer thread (asked now
 * if it was not yet).
 */
int hp_symbolize_try(struct hp_elf *e, uint64_t vaddr, const struct hp_sym **out);
char *hp_demangle(const char *name);	/* malloc'd or NULL */
void hp_symbolize_release(struct hp_elf *e);
/* The debug roots searched for separate debug info (a ':' list). */
const char *hp_debuginfo_roots(void);

/*
 * The symbolizer thread: looks for files' symbols and debug info (debug
 * roots, debuginfod) one file at a time, so that nothing else waits on it.
 * Set as an ELF cache's symd, it serves that cache's files.
 */
struct hp_symd;
struct hp_symd *hp_symd_new(void);
void hp_symd_free(struct hp_symd *sd);	/* does not wait for a download */
/* Ask for e's debug info now (books: a file's first frame). Cheap once asked. */
void hp_symd_prefetch(struct hp_elf *e);
/*
 * Name vaddr in e now, off the dump's path (books: a frame's first sample),
 * if e is a file whose DWARF the symbol cache keeps closed: an address the
 * cache lacks then costs its inflating on the symbolizer thread while the
 * program runs, not after its exit. Other files are left to the dump.
 */
void hp_symd_prefetch_addr(struct hp_elf *e, uint64_t vaddr);
/* A deadline ms milliseconds from now, for hp_symbolize_prof. */
uint64_t hp_symd_deadline(uint64_t ms);
/* Each debuginfod lookup's bound (seconds) unless DEBUGINFOD_MAXTIME says. */
#define HP_DEBUGINFOD_MAXTIME_DEFAULT	"30"
/* Set DEBUGINFOD_MAXTIME's default: call before starting threads. */
void hp_symbolize_setup(void);

/* The addresses of a profile's locations, to be named (dumps). */
struct hp_symreq {
	uint32_t loc;
	int done;
	struct hp_elf *elf;	/* a reference */
	uint64_t vaddr;
};
struct hp_symreqs {
	struct hp_symreq *r;
	size_t n, cap;
};
/* Takes a reference on e and asks for its debug info. 0 or -1. */
int hp_symreqs_add(struct hp_symreqs *w, uint32_t loc, struct hp_elf *e, uint64_t vaddr);
void hp_symreqs_free(struct hp_symreqs *w);
struct hp_prof;
/* Location loc of p named from s (and its inline chain). */
void hp_prof_set_sym(struct hp_prof *p, uint32_t loc, const struct hp_sym *s);
/*
 * Name p's locations from w: those whose files are ready now, then, as
 * files become ready, the others: files whose debug info is on this
 * machine are waited for (at most HP_SYM_LOCAL_WAIT_MS), files that may
 * need the network (debuginfod) until deadline (hp_symd_deadline) only.
 * Returns how many are left unnamed (their files still being looked up).
 */
#define HP_SYM_LOCAL_WAIT_MS	60000
size_t hp_symbolize_prof(struct hp_prof *p, struct hp_symreqs *w, uint64_t deadline);

/* ---- symcache.c --------------------------------------------------------- */

/* The on-disk symbol cache (symcache.c), under e->sym_lock. */
const char *hp_symcache_dir(void);	/* NULL: off */
void hp_symcache_load(struct hp_elf *e);
void hp_symcache_note(struct hp_elf *e, uint64_t vaddr, const struct hp_sym *s);
void hp_symcache_close(struct hp_elf *e);
/* e's separate debug file by build id under the debug roots: 0 and its stat. */
struct stat;
int hp_debug_file_by_id(const struct hp_elf *e, struct stat *st);

/* ---- maps.c ------------------------------------------------------------ */

struct hp_mapping {
	uint64_t start, end, off;
	unsigned prot;		/* 1 r, 2 w, 4 x */
	char *path;		/* NULL: anonymous */
	struct hp_elf *elf;	/* NULL if not an ELF we could open */
	uint64_t bias;		/* process address - ELF vaddr */
	int bias_ok;
};

struct hp_maps {
	struct hp_mapping *m;
	size_t n;
};

/* Whose files a maps snapshot opens, and how (maps.c, open_elf). */
struct hp_target {
	pid_t pid;
	int proc_fd;		/* /proc/<pid> of that very process, or -1 */
	int paths_ok;		/* may open files by the paths its maps name */
};

int hp_maps_read_at(struct hp_maps *out, const struct hp_maps *old, int maps_fd,
		    const struct hp_target *t, int exe_fd, int mem_fd, struct hp_elfcache *c);
/* The same for a process of our own user, by pid (tests, tools). */
int hp_maps_read(struct hp_maps *out, const struct hp_maps *old, int maps_fd,
		 pid_t pid, int exe_fd, int mem_fd, struct hp_elfcache *c);
const struct hp_mapping *hp_maps_find(const struct hp_maps *mp, uint64_t addr);
int hp_maps_copy(struct hp_maps *out, const struct hp_maps *in);	/* refs the ELFs */
void hp_maps_free(struct hp_maps *mp);
int hp_maps_parse_line(const char *line, struct hp_mapping *m, char *path,
		       size_t pathlen, unsigned *maj, unsigned *min,
		       unsigned long *ino);

/* ---- unwind.c ---------------------------------------------------------- */

struct hp_uframe {
	uint64_t pc;		/* as found; return addresses for frames > 0 */
	struct hp_elf *elf;	/* a reference, or NULL */
	uint64_t bias;
};

struct hp_unwinder;
struct hp_unwinder *hp_unwinder_new(pid_t pid, int maps_fd, int mem_fd,
				    int exe_fd, struct hp_elfcache *c);
/* The same with how to open its files; takes t->proc_fd. */
struct hp_unwinder *hp_unwinder_new_at(const struct hp_target *t, int maps_fd, int mem_fd,
				       int exe_fd, struct hp_elfcache *c);
void hp_unwinder_free(struct hp_unwinder *u);	/* closes the fds */
/* Another unwinder for the same process (another worker): its own address
 * space and caches, duplicated fds, a copy of the current maps snapshot. */
struct hp_unwinder *hp_unwinder_clone(const struct hp_unwinder *u);
void hp_unwinder_maps_changed(struct hp_unwinder *u);
/* Returns the number of frames (>= 1 when pc is known), references taken:
 * one per run of consecutive frames with the same elf; release them with
 * hp_uframes_put (not hp_elf_put per frame). */
/*
 * What an unwind read (memo.c): the record's registers (regmask, by
 * the uapi's HEAPPROFD_<ARCH>_* index) and the stack words at off[i] from sp. ok is 0
 * when it also read something a trace cannot vouch for.
 */
#define HP_TRACE_MAX	256
struct hp_utrace {
	int ok;
	uint32_t regmask;
	uint32_t nreads;
	uint32_t off[HP_TRACE_MAX];
	uint64_t val[HP_TRACE_MAX];
};

/* t may be NULL (no trace wanted). */
int hp_unwind(struct hp_unwinder *u, const struct heapprofd_rec_alloc *a,
	      const uint8_t *stack, uint32_t stack_len, struct hp_uframe *out,
	      int max, struct hp_utrace *t);
void hp_uframes_put(struct hp_uframe *f, int n);
/* Take the references hp_uframes_put releases (frames copied). */
void hp_uframes_get(struct hp_uframe *f, int n);

/* ---- memo.c: unwinds remembered by what they read --------------------- */

struct hp_memo;
struct hp_memo *hp_memo_new(void);
void hp_memo_free(struct hp_memo *m);
/* The maps changed: forget everything; returns the new generation. */
uint32_t hp_memo_new_gen(struct hp_memo *m);
uint32_t hp_memo_gen(struct hp_memo *m);
/*
 * Owner: before a lookup, fed is the next feed number to be handed out and
 * applied the number below which the books have applied every job; entries
 * the memo let go of are freed once no job fed while they were in the
 * table can still be using their frames.
 */
void hp_memo_tick(struct hp_memo *m, uint64_t fed, uint64_t applied);
/* The number of frames if a remembered unwind reads the same inputs in
 * this sample, with *out pointing at them; -1 otherwise. The frames are
 * lent, array and all: no copy and no references (they stay valid until
 * the books have applied the job: hp_memo_tick). *id names the entry: ids
 * are never reused, so one id always comes with the same frames. */
struct hp_stack_view;
int hp_memo_lookup(struct hp_memo *m, const struct heapprofd_rec_alloc *a,
		   const struct hp_stack_view *v, const struct hp_uframe **out, int max,
		   uint64_t *id);
/*
 * The entry hp_memo_lookup just found for a (its id): does ok() hold for
 * the return address of every frame but the first (the words its unwind
 * stepped through)? 1 or 0; -1 if that entry is not the one.
 */
int hp_memo_returns_all(struct hp_memo *m, const struct heapprofd_rec_alloc *a, uint64_t id,
			int (*ok)(void *arg, uint64_t v), void *arg);
/* Remember an unwind of a sample fed in generation gen (dropped if the
 * generation has changed since). */
void hp_memo_insert(struct hp_memo *m, uint32_t gen, const struct heapprofd_rec_alloc *a,
		    const struct hp_utrace *t, const struct hp_uframe *f, int n);
void hp_memo_stats(struct hp_memo *m, uint64_t *hits, uint64_t *misses, size_t *bytes);
uint64_t hp_unwinder_reloads(const struct hp_unwinder *u);
/* sigmask.c: call at the start of a thread that unwinds and never changes
 * its signal mask again: blocks every signal and lets libunwind's
 * sigprocmask calls on this thread skip the system call (see sigmask.c).
 * Returns 0 or -errno. hp_sigmask_worker_fast: 1 while the fast path is on. */
int hp_sigmask_worker_init(void);
int hp_sigmask_worker_fast(void);
size_t hp_unwinder_mem(const struct hp_unwinder *u);

/* ---- reuse.c: records that reuse their thread's previous stack -------- */

struct hp_reuse;	/* per process; the feeding thread only */
struct hp_reuse *hp_reuse_new(void);
void hp_reuse_free(struct hp_reuse *r);
/*
 * A memo entry one of the thread's earlier records matched, and the lowest
 * stack address whose bytes have stayed the same since: every record after
 * it reused at least the bytes from there up (hp_memo_lookup need not
 * compare the entry's reads there again).
 */
struct hp_reuse_match {
	uint64_t id;		/* 0: none */
	uint64_t floor;
};

#define HP_REUSE_MATCHES 4	/* the thread's latest matches, newest first */

/* A record's stack: its own bytes, then top_len bytes of its thread's
 * previous stack (none if it reused nothing or that stack is unknown). */
struct hp_stack_view {
	const uint8_t *own, *top;
	uint32_t own_len, top_len;
	/* [HP_REUSE_MATCHES], for this record (NULL: none; its top is not
	 * known). The caller tells them what this record matched with
	 * hp_reuse_matched(). */
	const struct hp_reuse_match *matched;
	void *saved;		/* reuse.c's: the thread's saved top */
	uint64_t sp;		/* the record's sp */
};
/*
 * a: a validated ALLOC record (private memory) and stack its stack bytes.
 * Fills v; returns 0 when the record reused nothing, 1 when it did and the
 * reused bytes are known (v->top, valid until the next call), 2 when they
 * are not (the record goes on truncated at the top). Either way the
 * thread's stack top is remembered for its next record.
 */
int hp_reuse_view(struct hp_reuse *r, const struct heapprofd_rec_alloc *a,
		  const uint8_t *stack, struct hp_stack_view *v);
/* The record whose view v is matched memo entry id (its thread's later
 * records may skip the entry's reads in their tops; see hp_memo_lookup). */
void hp_reuse_matched(const struct hp_stack_view *v, uint64_t id);
/* The record made whole: hp_reuse_whole_len(v) bytes at out. */
size_t hp_reuse_whole_len(const struct hp_stack_view *v);
void hp_reuse_build(const struct heapprofd_rec_alloc *a, const struct hp_stack_view *v,
		    int unknown, void *out);
/* The record's flags once its stack is whole (or, unknown, truncated). */
uint16_t hp_reuse_flags(uint16_t flags, int unknown);
size_t hp_reuse_mem(const struct hp_reuse *r);
void hp_reuse_stats(const struct hp_reuse *r, uint64_t *rebuilt, uint64_t *missing);

/* ---- symtab.c: a module's function symbols by address ----------------- */

struct hp_symtab;
/* dwmod: a Dwfl_Module. NULL if it has no symbols (or no memory). */
struct hp_symtab *hp_symtab_build(void *dwmod);
/* The name libdwfl would give addr (module addresses), or NULL: none if
 * *ask is 0, else ask libdwfl (dwfl_module_addrname). */
const char *hp_symtab_find(const struct hp_symtab *t, uint64_t addr, int *ask);
void hp_symtab_free(struct hp_symtab *t);

/* ---- intervals.c: the intervals a heap's samples were drawn at ---------- */

#define HP_IVALS_MAX	24	/* the adaptive levels of one interval, and some */

struct hp_ival {
	uint64_t interval, samples;
};

struct hp_ivals {
	struct hp_ival e[HP_IVALS_MAX];
	unsigned n, last;
	uint64_t exact;		/* recorded at their size (HEAPPROFD_ALLOC_EXACT) */
	uint64_t other;		/* at intervals beyond the table's room */
};

void hp_ivals_add(struct hp_ivals *v, uint64_t interval, int exact);
/* One comment line: the intervals, with how many samples each. */
void hp_ivals_comment(const struct hp_ivals *v, const char *heap, struct hp_prof *out);

/* ---- python.c: CPython frames (uapi HEAPPROFD_ALLOC_PYFRAMES) ---------- */

struct hp_py;
/* Takes the fds (and t->proc_fd); the interpreter is looked for at the
 * first Python frames. */
struct hp_py *hp_py_new(const struct hp_target *t, int maps_fd, int mem_fd, int exe_fd,
			struct hp_elfcache *c);
void hp_py_free(struct hp_py *py);
/* A record's Python frames resolved: key 0 for one to leave out. */
struct hp_pyframe {
	uint64_t key;		/* in the names file; the frame's pc is key + 1 */
	int entry;		/* the first of its call of the interpreter */
};
/* Feeding thread. Returns n, or 0 when the process's Python frames are not
 * read (not 3.11, not checking out: hp_py_comment says why). */
int hp_py_resolve(struct hp_py *py, const struct heapprofd_pyframe *in, uint32_t n,
		  struct hp_pyframe *out);
/* Once resolve returned frames: nat's interpreter frames replaced by
 * pf's runs into out (new references, one per run; nat's are the
 * caller's). Returns the frames in out. */
int hp_py_splice(const struct hp_py *py, const struct hp_uframe *nat, int nn,
		 const struct hp_pyframe *pf, int np, struct hp_uframe *out, int max);
int hp_py_ready(const struct hp_py *py);
/* A line for the dump's header: the version read, or why not. */
void hp_py_comment(struct hp_py *py, struct hp_prof *o);
size_t hp_py_mem(const struct hp_py *py);	/* bytes it holds now */
/* CPython 3.11 location table: the line of code unit lasti, or -1. */
int hp_py_line(const uint8_t *lt, uint32_t n, int firstline, uint32_t lasti);
void hp_py_lines(const uint8_t *lt, uint32_t n, int firstline, int32_t *lines, uint32_t nunits);

/* ---- splice.c: spliced call paths remembered (feeding thread) ---------- */

struct hp_splices;
struct hp_splices *hp_splices_new(void);
void hp_splices_free(struct hp_splices *s);	/* once the books are done */
/* As hp_memo_tick: entries let go of are freed once the books are past
 * every job fed while they were in the table. */
void hp_splices_tick(struct hp_splices *s, uint64_t fed, uint64_t applied);
/*
 * hp_py_splice of memo entry memo_id's frames (nat, nn; memo generation
 * memo_gen) and the resolved Python frames pf, from the cache or made and
 * kept: the frames in *out are lent, as the memo's are, and *id always
 * comes with them (the books' path_id). Returns their number, or -1 when
 * nothing is kept (the caller splices a copy of its own).
 */
int hp_splices_get(struct hp_splices *s, const struct hp_py *py, uint32_t memo_gen,
		   uint64_t memo_id, const struct hp_uframe *nat, int nn,
		   const struct hp_pyframe *pf, int np, int max,
		   const struct hp_uframe **out, uint64_t *id);
void hp_splices_stats(struct hp_splices *s, uint64_t *hits, uint64_t *misses, size_t *bytes);

/* ---- perfmap.c: JIT code named from /tmp/perf-<pid>.map ----------------- */

struct hp_perfmap;
/* Takes proc_fd (/proc/<pid>, or -1: by pid). */
struct hp_perfmap *hp_perfmap_new(pid_t pid, int proc_fd);
void hp_perfmap_free(struct hp_perfmap *pm);
/* The name of the code at addr now, into buf: 1, or 0 if none. */
int hp_perfmap_name(struct hp_perfmap *pm, uint64_t addr, char *buf, size_t len);
/* Read what the file gained since, now (a dump: not rate-limited). */
void hp_perfmap_refresh(struct hp_perfmap *pm);
/*
 * Frames in no file (f[i].elf NULL, i > 0) that the map names become
 * frames of the map's names file (references taken, one per run). Returns
 * how many; 0 leaves f as it was.
 */
int hp_perfmap_name_frames(struct hp_perfmap *pm, struct hp_uframe *f, int n);
/* Would hp_perfmap_name_frames name any of them? */
int hp_perfmap_names_any(struct hp_perfmap *pm, const struct hp_uframe *f, int n);
size_t hp_perfmap_mem(const struct hp_perfmap *pm);	/* bytes it holds now */
/* Is any frame (i > 0) in no file? */
int hp_uframes_unfiled(const struct hp_uframe *f, int n);

/* ---- books.c ------------------------------------------------------------ */

struct hp_books;
struct hp_books *hp_books_new(int dump_at_max);
void hp_books_free(struct hp_books *b);
/*
 * Takes the frames' references, unless borrowed (from the memo: memo.c).
 * path_id: 0, or an id that always comes with these same frames (the memo
 * entry's, hp_memo_lookup), so that the books find the path by the id.
 */
void hp_books_alloc(struct hp_books *b, const struct heapprofd_rec_alloc *a,
		    struct hp_uframe *frames, int nframes, int borrowed, uint64_t path_id);
void hp_books_free_rec(struct hp_books *b, const struct heapprofd_rec_free *f);
void hp_books_heap(struct hp_books *b, const struct heapprofd_rec_heap *h);
/* Kernel records: the exporter of the dmabuf ALLOC that follows; lost ones. */
void hp_books_dmabuf(struct hp_books *b, const struct heapprofd_rec_dmabuf *d);
void hp_books_klost(struct hp_books *b, const struct heapprofd_rec_klost *k);
/* which: HP_DUMP_NOW or HP_DUMP_PEAK */
/*
 * want: NULL for addresses only, else the locations to be named are added
 * to it (hp_symbolize_prof names them later, off the books thread).
 */
void hp_books_export(struct hp_books *b, struct hp_prof *out, unsigned which,
		     struct hp_symreqs *want);
void hp_books_stats(const struct hp_books *b, uint64_t *live, uint64_t *unmatched);
size_t hp_books_mem(const struct hp_books *b);
/* What a dump would take from them: samples (call sites with values), the
 * frames of their stacks in all, distinct frames (the profile's locations). */
void hp_books_export_size(const struct hp_books *b, uint64_t *samples, uint64_t *locs,
			  uint64_t *frames);

#endif
