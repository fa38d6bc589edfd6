// SPDX-License-Identifier: GPL-2.0
/*
 * Symbolization with elfutils' libdwfl: one Dwfl per ELF file, reported at
 * bias 0 so module addresses are the file's own virtual addresses (the same
 * for every process that maps it). Names come from wherever the system has
 * them, as libdwfl finds them: the file's .symtab, else its .dynsym and its
 * MiniDebugInfo (.gnu_debugdata, xz: libdw is built with lzma); separate
 * debug files by build id under the debug roots or by debuglink; and, with
 * DEBUGINFOD_URLS set, debuginfod servers (libdwfl's client, by build id).
 * Results are cached per file and address (and on disk per build id:
 * symcache.c); C++ names are demangled with the C++ runtime's
 * __cxa_demangle.
 *
 * Finding the debug info is the slow part (a debuginfod download can take
 * seconds), and it must never hold up the books or the drain: in the
 * daemon the symbolizer thread (hp_symd) does it, one file at a time,
 * bounded by DEBUGINFOD_MAXTIME. The books only ask for it (hp_symd_prefetch,
 * as a file's first frame is seen); a dump resolves the addresses it
 * exports against what has been found (hp_symbolize_prof), waits for files
 * still being looked up at most until its deadline, and leaves the rest as
 * addresses (build id + offset, for `heapprofctl symbolize`). Without a
 * symbolizer thread (heapprofctl symbolize, tests) hp_symbolize looks up in
 * the caller's thread.
 *
 * Locking: e->sym_lock guards the file's state, its results and its Dwfl
 * once published; the slow search runs on a Dwfl of its own, unlocked, and
 * is published when done.
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>

#include "internal.h"

extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

char *hp_demangle(const char *name)
{
	int st = 0;
	char *d;

	if (!name || name[0] != '_' || name[1] != 'Z')
		return NULL;
	d = __cxa_demangle(name, NULL, NULL, &st);
	if (st) {
		free(d);
		return NULL;
	}
	return d;
}

/*
 * Where separate debug info is looked for: libdwfl's default search path
 * (NULL: ":.debug:/usr/lib/debug"), or $HEAPPROFD_DEBUGINFO_PATH in the
 * same form (debug files kept elsewhere; the tests' own debug root).
 */
static char *debuginfo_path;
static pthread_once_t debuginfo_once = PTHREAD_ONCE_INIT;

static void debuginfo_init(void)
{
	const char *env = getenv("HEAPPROFD_DEBUGINFO_PATH");

	if (env && *env)
		debuginfo_path = strdup(env);
}

const char *hp_debuginfo_roots(void)
{
	pthread_once(&debuginfo_once, debuginfo_init);
	return debuginfo_path ? debuginfo_path : "/usr/lib/debug";
}

static const Dwfl_Callbacks offline_cb = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

/*
 * A file root does not own sits where its owner may plant files: its
 * debuglink names a file beside it, which might be a FIFO that blocks
 * libdw's open for good. Such files get separate debug files by build id
 * only (under the debug roots, which root owns).
 */
static const Dwfl_Callbacks offline_buildid_cb = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_build_id_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

static int open_dwfl(struct hp_elf *e, Dwfl **dp, Dwfl_Module **modp)
{
	Dwfl *d;
	Dwfl_Module *mod;
	int fd;

	hp_debuginfo_roots();	/* debuginfo_path set */
	d = dwfl_begin(e->owner == 0 || e->owner == geteuid() ? &offline_cb : &offline_buildid_cb);
	if (!d)
		return -1;
	if (e->fd >= 0) {
		fd = dup(e->fd);
	} else {
		struct stat st;

		/* Reopen by path; it must still be the same file. */
		fd = hp_open_regular(AT_FDCWD, e->path);
		if (fd >= 0 && (fstat(fd, &st) || st.st_ino != e->ino ||
				(size_t)st.st_size != e->size)) {
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0) {
		dwfl_end(d);
		return -1;
	}
	dwfl_report_begin(d);
	/* dwfl_report_elf takes fd. */
	mod = dwfl_report_elf(d, e->path, e->path, fd, 0, false);
	dwfl_report_end(d, NULL, NULL);
	if (!mod) {
		dwfl_end(d);
		return -1;
	}
	*dp = d;
	*modp = mod;
	return 0;
}

/* e->dwfl_state: read without the lock by hp_symd_prefetch. */
enum { SYM_UNTRIED = 0, SYM_OK = 1, SYM_FAILED = -1, SYM_LOOKING = 2 };

static int sym_state(const struct hp_elf *e)
{
	return __atomic_load_n(&e->dwfl_state, __ATOMIC_RELAXED);
}

static void set_sym_state(struct hp_elf *e, int st)
{
	__atomic_store_n(&e->dwfl_state, st, __ATOMIC_RELAXED);
}

/*
 * Open e's Dwfl and find its symbols and debug info now: this is where
 * libdwfl searches the debug roots and asks debuginfod. Called with e's
 * state SYM_LOOKING and without e->sym_lock; publishes the result.
 */
static void open_elf(struct hp_elf *e)
{
	Dwfl *d = NULL;
	Dwfl_Module *mod = NULL;
	int cached;

	pthread_mutex_lock(&e->sym_lock);
	if (!e->symcache_state)
		hp_symcache_load(e);
	cached = e->symcache_state > 0;
	pthread_mutex_unlock(&e->sym_lock);
	struct hp_symtab *st = NULL;

	if (!open_dwfl(e, &d, &mod)) {
		Dwarf_Addr bias;

		/* The symbol table (.symtab, or .dynsym with MiniDebugInfo,
		 * or the debug file's) and the DWARF. A file whose debug file
		 * the symbol cache stands for is known to be local: its DWARF
		 * is opened (and inflated) only if a lookup needs it. */
		dwfl_module_getsymtab(mod);
		st = hp_symtab_build(mod);
		if (!cached)
			dwfl_module_getdwarf(mod, &bias);
	}
	pthread_mutex_lock(&e->sym_lock);
	__atomic_store_n(&e->sym_deferred, d && cached, __ATOMIC_RELAXED);
	e->dwfl = d;
	e->dwmod = mod;
	e->symtab = st;
	set_sym_state(e, d ? SYM_OK : SYM_FAILED);
	pthread_mutex_unlock(&e->sym_lock);
}

void hp_symbolize_release(struct hp_elf *e)
{
	hp_symtab_free(e->symtab);
	e->symtab = NULL;
	if (e->dwfl)
		dwfl_end(e->dwfl);
	e->dwfl = NULL;
	e->dwmod = NULL;
	set_sym_state(e, SYM_UNTRIED);
}

/* A DIE's function name (through abstract origins), demangled, interned. */
static const char *die_func(struct hp_elf *e, Dwarf_Die *die)
{
	Dwarf_Attribute at;
	const char *n = NULL;
	char *dm;

	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &at) ||
	    dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &at))
		n = dwarf_formstring(&at);
	if (!n && dwarf_attr_integrate(die, DW_AT_name, &at))
		n = dwarf_formstring(&at);
	if (!n)
		return NULL;
	dm = hp_demangle(n);
	n = hp_intern(&e->strs, dm ? dm : n);
	free(dm);
	return n;
}

/*
 * Inlined functions at a: the innermost scope's function replaces the
 * symbol-table name (which names the outer function) and a chain of callers
 * follows, each at the call site (DW_AT_call_file/line) of the one inside.
 */
static void add_inline_chain(struct hp_elf *e, Dwfl_Module *mod, GElf_Addr a,
			     struct hp_sym *s, const char *outer)
{
	Dwarf_Addr bias = 0;
	Dwarf_Die *cu = dwfl_module_addrdie(mod, a, &bias), *scopes = NULL, *chain = NULL;
	Dwarf_Die *prev;
	struct hp_sym *cur = s;
	Dwarf_Files *files = NULL;
	size_t nfiles = 0;
	int n, i, i0 = -1, nc;

	if (!cu)
		return;
	n = dwarf_getscopes(cu, a - bias, &scopes);
	for (i = 0; i < n; i++)
		if (dwarf_tag(&scopes[i]) == DW_TAG_inlined_subroutine) {
			i0 = i;
			break;
		}
	if (i0 < 0) {
		free(scopes);
		return;
	}
	s->func = die_func(e, &scopes[i0]) ?: s->func;
	/* The concrete scopes around the innermost inlined instance. */
	nc = dwarf_getscopes_die(&scopes[i0], &chain);
	dwarf_getsrcfiles(cu, &files, &nfiles);
	prev = nc > 0 ? &chain[0] : NULL;
	for (i = 1; prev && i < nc && i < 64; i++) {
		int tag = dwarf_tag(&chain[i]);
		Dwarf_Attribute at;
		Dwarf_Word fidx = 0, line = 0;
		struct hp_sym *c;

		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram &&
		    tag != DW_TAG_entry_point)
			continue;
		c = calloc(1, sizeof(*c));
		if (!c)
			break;
		if (dwarf_attr(prev, DW_AT_call_file, &at) && !dwarf_formudata(&at, &fidx) &&
		    files && fidx < nfiles)
			c->file = hp_intern(&e->strs, dwarf_filesrc(files, fidx, NULL, NULL));
		if (dwarf_attr(prev, DW_AT_call_line, &at) && !dwarf_formudata(&at, &line))
			c->line = (int)line;
		c->func = tag == DW_TAG_inlined_subroutine ? die_func(e, &chain[i]) : NULL;
		if (!c->func)
			c->func = tag == DW_TAG_inlined_subroutine ? "?" : outer;
		cur->caller = c;
		cur = c;
		if (tag != DW_TAG_inlined_subroutine)
			break;
		prev = &chain[i];
	}
	free(chain);
	free(scopes);
}

/* Under e->sym_lock, e's state SYM_OK or SYM_FAILED, vaddr not in e->syms. */
static const struct hp_sym *lookup(struct hp_elf *e, uint64_t vaddr)
{
	struct hp_sym *s;
	Dwfl_Module *mod;
	const char *name;
	Dwfl_Line *line;

	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (e->dwfl_state == SYM_OK) {
		GElf_Addr a = vaddr;
		Dwfl_Module *m2;

		mod = e->dwmod;
		/* For ET_EXEC the module sits at its link address; ET_DYN at 0. */
		m2 = dwfl_addrmodule(e->dwfl, a);
		if (m2)
			mod = m2;
		int ask = 1;

		/* Sorted once: libdwfl's own search is linear (symtab.c). */
		name = mod == e->dwmod ? hp_symtab_find(e->symtab, a, &ask) : NULL;
		if (!name && ask)
			name = dwfl_module_addrname(mod, a);
		if (name) {
			char base[1024], *dm, *at;

			/* "__libc_start_main@@GLIBC_2.34": drop the symbol version */
			snprintf(base, sizeof(base), "%s", name);
			at = strchr(base, '@');
			if (at && at != base)
				*at = 0;
			dm = hp_demangle(base);
			s->func = hp_intern(&e->strs, dm ? dm : base);
			free(dm);
		}
		if (s->func)
			add_inline_chain(e, mod, a, s, s->func);
		line = dwfl_module_getsrc(mod, a);
		if (line) {
			int ln = 0;
			const char *file = dwfl_lineinfo(line, NULL, &ln, NULL, NULL, NULL);

			if (file) {
				s->file = hp_intern(&e->strs, file);
				s->line = ln;
			}
		}
	}
	if (hp_hmap_put(&e->syms, vaddr, 0, s)) {
		free(s);
		return NULL;
	}
	if (e->dwfl_state == SYM_OK)
		hp_symcache_note(e, vaddr, s);
	return s;
}

/* ---- the symbolizer thread -------------------------------------------- */

struct symd_req {
	struct symd_req *next;
	struct hp_elf *elf;	/* a reference */
	int addr;		/* name vaddr (hp_symd_prefetch_addr), not open elf */
	uint64_t vaddr;
};

/* Addresses waiting to be named early, at most: past it the dump names them. */
#define HP_SYMD_ADDR_MAX	16384

/*
 * Two queues, a thread each: files whose debug info is on this machine
 * (their own DWARF, or a debug file by build id under a debug root), and
 * files that may need debuginfod. A slow download then holds up only the
 * files that wait for the network themselves.
 */
enum { SYMQ_LOCAL, SYMQ_REMOTE, SYMQ_N };

struct symq {
	struct symd_req *head, *tail;
	int busy;		/* a search is running */
	int started;
	pthread_t thr;
	struct hp_symd *sd;
};

struct hp_symd {
	pthread_mutex_t lock;
	pthread_cond_t work, done;
	struct symq q[SYMQ_N];
	uint64_t gen;		/* files finished so far */
	unsigned naddr;		/* address requests queued */
	int stop;		/* hp_symd_free: no more searches */
	int abandoned;		/* ... and nobody waits: the last thread frees sd */
	int running;		/* threads not yet gone */
};

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t hp_symd_deadline(uint64_t ms)
{
	return now_ms() + ms;
}

static void symd_destroy(struct hp_symd *sd)
{
	pthread_mutex_destroy(&sd->lock);
	pthread_cond_destroy(&sd->work);
	pthread_cond_destroy(&sd->done);
	free(sd);
}

/*
 * An address request: vaddr named now if e's DWARF is kept closed for the
 * symbol cache and the cache lacks it (lookup opens the DWARF, once, and
 * adds the address to the cache file). e's own open came first on this
 * queue; a file still being looked up elsewhere (debuginfod) is not one the
 * cache keeps.
 */
static void name_early(struct hp_elf *e, uint64_t vaddr)
{
	pthread_mutex_lock(&e->sym_lock);
	if (e->dwfl_state == SYM_OK && e->sym_deferred && !hp_hmap_get(&e->syms, vaddr, 0))
		lookup(e, vaddr);
	pthread_mutex_unlock(&e->sym_lock);
}

static void *symd_main(void *arg)
{
	struct symq *q = arg;
	struct hp_symd *sd = q->sd;
	sigset_t all;

	/* The daemon's signals are read elsewhere (signalfd). */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	pthread_mutex_lock(&sd->lock);
	for (;;) {
		struct symd_req *r;

		while (!q->head && !sd->stop)
			pthread_cond_wait(&sd->work, &sd->lock);
		r = q->head;
		if (!r)
			break;
		q->head = r->next;
		if (!q->head)
			q->tail = NULL;
		if (sd->stop) {
			/* Not searched: whoever asks next searches itself. */
			pthread_mutex_unlock(&sd->lock);
			if (!r->addr)
				set_sym_state(r->elf, SYM_UNTRIED);
		} else {
			q->busy = 1;
			pthread_mutex_unlock(&sd->lock);
			if (r->addr)
				name_early(r->elf, r->vaddr);
			else
				open_elf(r->elf);
		}
		pthread_mutex_lock(&sd->lock);
		q->busy = 0;
		if (r->addr)
			sd->naddr--;
		if (sd->abandoned) {
			/* The pipeline is gone (and its ELF cache): keep r. */
			break;
		}
		/* Waiters wait for files; a named address changes no state. */
		if (!r->addr) {
			sd->gen++;
			pthread_cond_broadcast(&sd->done);
		}
		pthread_mutex_unlock(&sd->lock);
		hp_elf_put(r->elf);
		free(r);
		pthread_mutex_lock(&sd->lock);
	}
	if (sd->abandoned && --sd->running == 0) {
		pthread_mutex_unlock(&sd->lock);
		symd_destroy(sd);
		return NULL;
	}
	pthread_mutex_unlock(&sd->lock);
	return NULL;
}

struct hp_symd *hp_symd_new(void)
{
	struct hp_symd *sd = calloc(1, sizeof(*sd));

	if (!sd)
		return NULL;
	pthread_mutex_init(&sd->lock, NULL);
	pthread_cond_init(&sd->work, NULL);
	pthread_cond_init(&sd->done, NULL);
	for (int i = 0; i < SYMQ_N; i++) {
		sd->q[i].sd = sd;
		if (pthread_create(&sd->q[i].thr, NULL, symd_main, &sd->q[i])) {
			hp_symd_free(sd);
			return NULL;
		}
		sd->q[i].started = 1;
		sd->running++;
	}
	return sd;
}

static int symd_busy(const struct hp_symd *sd)
{
	for (int i = 0; i < SYMQ_N; i++)
		if (sd->q[i].busy)
			return 1;
	return 0;
}

/*
 * Stop the threads. A search still running after HP_SYMD_STOP_MS (a
 * debuginfod download) is not waited for: its thread is left to finish it
 * and the last one frees sd, keeping its file.
 */
#define HP_SYMD_STOP_MS	200

void hp_symd_free(struct hp_symd *sd)
{
	uint64_t end = now_ms() + HP_SYMD_STOP_MS;
	int i;

	if (!sd)
		return;
	pthread_mutex_lock(&sd->lock);
	sd->stop = 1;
	pthread_cond_broadcast(&sd->work);
	while (symd_busy(sd) && now_ms() < end) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&sd->done, &sd->lock, &ts);
	}
	if (symd_busy(sd)) {
		sd->abandoned = 1;
		for (i = 0; i < SYMQ_N; i++)
			if (sd->q[i].started)
				pthread_detach(sd->q[i].thr);
		pthread_mutex_unlock(&sd->lock);
		return;
	}
	pthread_mutex_unlock(&sd->lock);
	for (i = 0; i < SYMQ_N; i++)
		if (sd->q[i].started)
			pthread_join(sd->q[i].thr, NULL);
	symd_destroy(sd);
}

/* Does e carry its own DWARF (a .debug_info section)? */
static int has_own_dwarf(const struct hp_elf *e)
{
	Elf *elf = elf_memory((char *)e->img, e->size);
	Elf_Scn *scn = NULL;
	size_t shstr;
	int found = 0;

	if (!elf)
		return 0;
	if (!elf_getshdrstrndx(elf, &shstr))
		while (!found && (scn = elf_nextscn(elf, scn))) {
			GElf_Shdr sh;
			const char *n;

			if (gelf_getshdr(scn, &sh) && sh.sh_type != SHT_NOBITS &&
			    (n = elf_strptr(elf, shstr, sh.sh_name)) &&
			    (!strcmp(n, ".debug_info") || !strcmp(n, ".zdebug_info")))
				found = 1;
		}
	elf_end(elf);
	return found;
}

/* Which queue: may e's search go to the network? */
static int symq_of(const struct hp_elf *e)
{
	const char *urls = getenv("DEBUGINFOD_URLS");
	struct stat st;

	if (!urls || !*urls || has_own_dwarf(e) || !hp_debug_file_by_id(e, &st))
		return SYMQ_LOCAL;
	return SYMQ_REMOTE;
}

static struct hp_symd *symd_of(const struct hp_elf *e)
{
	return e->cache ? e->cache->symd : NULL;
}

/*
 * Under sd->lock, which it lets go: r, on e, to q's thread. Only a thread
 * whose queue is empty waits for work: a queue that had some needs no
 * wake-up (the books ask for each new frame, often while the thread is
 * busy opening a large file).
 */
static void symq_append(struct hp_symd *sd, struct symq *q, struct symd_req *r,
			struct hp_elf *e)
{
	int was_empty = !q->head;

	r->elf = hp_elf_ref(e);
	if (q->tail)
		q->tail->next = r;
	else
		q->head = r;
	q->tail = r;
	if (was_empty)
		pthread_cond_broadcast(&sd->work);
	pthread_mutex_unlock(&sd->lock);
}

/* Under e->sym_lock, e untried: hand it to the thread. 0, or -1 (none). */
static int symd_queue(struct hp_elf *e)
{
	struct hp_symd *sd = symd_of(e);
	struct symd_req *r;
	struct symq *q;

	if (!sd || !(r = calloc(1, sizeof(*r))))
		return -1;
	q = &sd->q[symq_of(e)];
	pthread_mutex_lock(&sd->lock);
	if (sd->stop) {
		pthread_mutex_unlock(&sd->lock);
		free(r);
		return -1;
	}
	set_sym_state(e, SYM_LOOKING);
	__atomic_store_n(&e->sym_remote, q == &sd->q[SYMQ_REMOTE], __ATOMIC_RELAXED);
	symq_append(sd, q, r, e);
	return 0;
}

void hp_symd_prefetch(struct hp_elf *e)
{
	if (!e || sym_state(e) != SYM_UNTRIED || !symd_of(e))
		return;
	pthread_mutex_lock(&e->sym_lock);
	if (sym_state(e) == SYM_UNTRIED)
		symd_queue(e);
	pthread_mutex_unlock(&e->sym_lock);
}

void hp_symd_prefetch_addr(struct hp_elf *e, uint64_t vaddr)
{
	struct hp_symd *sd = e ? symd_of(e) : NULL;
	struct symd_req *r;
	struct symq *q;
	int st;

	if (!sd)
		return;
	/* Not yet known (its open is queued before this), or kept closed. */
	st = sym_state(e);
	if (st == SYM_FAILED ||
	    (st == SYM_OK && !__atomic_load_n(&e->sym_deferred, __ATOMIC_RELAXED)))
		return;
	r = calloc(1, sizeof(*r));
	if (!r)
		return;
	r->addr = 1;
	r->vaddr = vaddr;
	q = &sd->q[SYMQ_LOCAL];
	pthread_mutex_lock(&sd->lock);
	if (sd->stop || sd->naddr >= HP_SYMD_ADDR_MAX) {
		pthread_mutex_unlock(&sd->lock);
		free(r);
		return;
	}
	sd->naddr++;
	symq_append(sd, q, r, e);
}

static uint64_t symd_gen(struct hp_symd *sd)
{
	uint64_t g;

	pthread_mutex_lock(&sd->lock);
	g = sd->gen;
	pthread_mutex_unlock(&sd->lock);
	return g;
}

/* Wait until a search finishes after generation gen, or the deadline. */
static void symd_wait(struct hp_symd *sd, uint64_t gen, uint64_t deadline)
{
	pthread_mutex_lock(&sd->lock);
	while (sd->gen == gen && !sd->stop) {
		uint64_t now = now_ms(), left;
		struct timespec ts;

		if (now >= deadline)
			break;
		left = deadline - now;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)(left / 1000);
		ts.tv_nsec += (long)(left % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&sd->done, &sd->lock, &ts);
	}
	pthread_mutex_unlock(&sd->lock);
}

/*
 * vaddr in e: 1 with *out (NULL: out of memory), or 0 while e's debug info
 * is still being looked for (wait: 1 waits for it, 0 asks the thread and
 * returns).
 */
static int resolve(struct hp_elf *e, uint64_t vaddr, const struct hp_sym **out, int wait)
{
	struct hp_symd *sd = symd_of(e);

	pthread_mutex_lock(&e->sym_lock);
	for (;;) {
		uint64_t gen;

		/* What an earlier daemon learned from this file's debug info. */
		if (!e->symcache_state)
			hp_symcache_load(e);
		*out = hp_hmap_get(&e->syms, vaddr, 0);
		if (*out)
			break;
		if (e->dwfl_state == SYM_OK || e->dwfl_state == SYM_FAILED) {
			*out = lookup(e, vaddr);
			break;
		}
		if (e->dwfl_state == SYM_UNTRIED && (wait || symd_queue(e))) {
			/* No thread to do it (or told to wait): here. */
			set_sym_state(e, SYM_LOOKING);
			pthread_mutex_unlock(&e->sym_lock);
			open_elf(e);
			pthread_mutex_lock(&e->sym_lock);
			continue;
		}
		if (!wait || !sd) {
			pthread_mutex_unlock(&e->sym_lock);
			return 0;
		}
		/* The thread has it: wait for it. */
		pthread_mutex_unlock(&e->sym_lock);
		gen = symd_gen(sd);
		if (sym_state(e) == SYM_LOOKING)
			symd_wait(sd, gen, UINT64_MAX);
		pthread_mutex_lock(&e->sym_lock);
	}
	pthread_mutex_unlock(&e->sym_lock);
	return 1;
}

const struct hp_sym *hp_symbolize(struct hp_elf *e, uint64_t vaddr)
{
	const struct hp_sym *s = NULL;

	resolve(e, vaddr, &s, 1);
	return s;
}

int hp_symbolize_try(struct hp_elf *e, uint64_t vaddr, const struct hp_sym **out)
{
	return resolve(e, vaddr, out, 0);
}

/* ---- a profile's addresses --------------------------------------------- */

int hp_symreqs_add(struct hp_symreqs *w, uint32_t loc, struct hp_elf *e, uint64_t vaddr)
{
	if (w->n == w->cap) {
		size_t nc = w->cap ? 2 * w->cap : 64;
		struct hp_symreq *nr = realloc(w->r, nc * sizeof(*nr));

		if (!nr)
			return -1;
		w->r = nr;
		w->cap = nc;
	}
	w->r[w->n].loc = loc;
	w->r[w->n].elf = hp_elf_ref(e);
	w->r[w->n].vaddr = vaddr;
	w->r[w->n].done = 0;
	w->n++;
	hp_symd_prefetch(e);
	return 0;
}

void hp_symreqs_free(struct hp_symreqs *w)
{
	for (size_t i = 0; i < w->n; i++)
		hp_elf_put(w->r[i].elf);
	free(w->r);
	memset(w, 0, sizeof(*w));
}

void hp_prof_set_sym(struct hp_prof *p, uint32_t loc, const struct hp_sym *s)
{
	struct hp_prof_line inl[32];
	struct hp_prof_loc *l;
	uint32_t n = 0;

	if (loc >= p->nlocs || !s)
		return;
	l = &p->locs[loc];
	l->func = hp_prof_str(p, s->func);
	l->file = hp_prof_str(p, s->file);
	l->line = s->line;
	for (s = s->caller; s && n < 32; s = s->caller, n++) {
		inl[n].func = s->func;
		inl[n].file = s->file;
		inl[n].line = s->line;
	}
	hp_prof_set_inline(p, loc, inl, n);
}

size_t hp_symbolize_prof(struct hp_prof *p, struct hp_symreqs *w, uint64_t deadline)
{
	uint64_t local_end = now_ms() + HP_SYM_LOCAL_WAIT_MS;
	size_t left;

	for (;;) {
		struct hp_symd *sd = NULL;
		uint64_t gen = 0, now;
		size_t local = 0;

		left = 0;
		for (size_t i = 0; i < w->n; i++) {
			struct hp_symreq *r = &w->r[i];
			const struct hp_sym *s;

			if (r->done)
				continue;
			if (!sd && (sd = symd_of(r->elf)) != NULL)
				gen = symd_gen(sd);	/* before looking: no wake-up missed */
			if (!hp_symbolize_try(r->elf, r->vaddr, &s)) {
				left++;
				if (!__atomic_load_n(&r->elf->sym_remote, __ATOMIC_RELAXED))
					local++;
				continue;
			}
			r->done = 1;
			hp_prof_set_sym(p, r->loc, s);
		}
		now = now_ms();
		/* Local files are waited for (CPU and disk); the network until
		 * the deadline only. */
		if (!left || !sd || (now >= deadline && (!local || now >= local_end)))
			break;
		symd_wait(sd, gen, local ? (local_end < deadline ? deadline : local_end) : deadline);
	}
	return left;
}

void hp_symbolize_setup(void)
{
	/* Each debuginfod lookup bounded (libdebuginfod reads it per lookup). */
	setenv("DEBUGINFOD_MAXTIME", HP_DEBUGINFOD_MAXTIME_DEFAULT, 0);
}
