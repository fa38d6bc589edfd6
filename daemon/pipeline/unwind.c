// SPDX-License-Identifier: GPL-2.0
/*
 * Remote unwinding of copied stacks with libunwind.
 *
 * One unwinder (libunwind address space, maps snapshot) per profiled process
 * and worker, used by that worker only (so its state needs no locks of
 * ours). The accessors:
 *
 *   access_mem   the copied stack for [sp, sp + stack_len); the cached ELF
 *                file for read-only file mappings (unwind tables, code: no
 *                system call, and it works after the process exited);
 *                otherwise pread() on the deposited /proc/<pid>/mem, and the
 *                ELF file again if the process is gone.
 *   access_reg   the registers in the record.
 *   find_proc_info  our own: libunwind-ptrace's _UPT_find_proc_info looks
 *                the ip up in /proc/<pid>/maps by pid (tdep_get_elf_image),
 *                which fails once the process is gone or lives in another
 *                pid namespace. We find the mapping in our snapshot, build a
 *                remote-table description of the ELF file's .eh_frame_hdr
 *                binary-search table and let libunwind's DWARF code search
 *                it (dwarf_search_unwind_table, the same routine
 *                _UPT_find_proc_info ends in), reading through access_mem.
 *   put_unwind_info, get_dyn_info_list_addr  libunwind-ptrace's own.
 *
 * Without an .eh_frame_hdr libunwind falls back to the frame-pointer chain.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libunwind.h>
#include <libunwind-ptrace.h>

#include "arch.h"
#include "internal.h"

/* Exported by libunwind (it is tdep_search_unwind_table) but not declared;
 * its name carries the architecture (_Ux86_64_..., _Uaarch64_...). */
#define hp_dwarf_search_unwind_table UNW_ARCH_OBJ(dwarf_search_unwind_table)
extern int hp_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
					unw_dyn_info_t *di, unw_proc_info_t *pi,
					int need_unwind_info, void *arg);

/*
 * Windows on read-only file contents. libunwind reads the .eh_frame_hdr
 * table, the FDEs and CIEs a machine word at a time (a byte of CFI is a word
 * read), so an unwind of a deep C++ stack makes thousands of such reads;
 * finding each one's mapping (a binary search over hundreds of mappings)
 * and segment cost more than the unwind's own work (clang: a quarter of the
 * daemon's time). A read falls in one of the few files of the stack, so
 * the last few mappings' file bytes are kept as windows. They point into
 * ELF images the maps snapshot holds, so they are cleared with it.
 */
#define HP_UNWIND_WINDOWS	4

/* Bytes of a stack copy prefetched before its unwind (hp_unwind). */
#define HP_UNWIND_PREFETCH	(32 * 1024)

struct hp_unwinder {
	unw_addr_space_t as;
	struct hp_maps maps;
	struct hp_elfcache *cache;
	struct hp_target t;	/* pid, /proc/<pid> fd, paths_ok */
	int maps_fd, mem_fd, exe_fd;
	int mem_dead;		/* pread on mem returned nothing: process gone */
	uint64_t reloads;
	uint64_t last_miss_reload_ns;
	size_t mem;		/* bytes of the snapshot, computed when read */
	/* read-only file bytes recently read (see file_window) */
	struct window {
		uint64_t lo, hi;	/* process addresses [lo, hi) */
		const uint8_t *img;	/* the file's bytes of lo */
	} win[HP_UNWIND_WINDOWS];
	unsigned win_next;	/* the entry to replace next */
};

static size_t maps_mem(const struct hp_maps *m)
{
	size_t s = m->n * sizeof(struct hp_mapping);

	for (size_t i = 0; i < m->n; i++)
		if (m->m[i].path)
			s += strlen(m->m[i].path) + 1 + 16;
	return s;
}

/*
 * libunwind's register-state cache: UNW_CACHE_GLOBAL, one per address space
 * (so per process and worker; one thread uses it). Measured on Debian's
 * libunwind 1.6: without a cache a warm 35-frame unwind costs ~85 us instead
 * of ~15 us; most of the 15 us was libunwind masking signals around the
 * cache's lock (sigprocmask system calls), now free on workers: see
 * sigmask.c (~2.7 us). Its per-thread cache would avoid the lock, but
 * Debian's build treats UNW_CACHE_PER_THREAD as GLOBAL, and that cache would
 * be shared by all the processes a worker serves anyway.
 */

/* Rereads caused by unknown addresses: at most one per this interval, so
 * garbage addresses cannot make us parse maps for every sample. */
#define HP_MISS_RELOAD_NS	(20ULL * 1000 * 1000)

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

struct uctx {
	struct hp_unwinder *u;
	const struct heapprofd_rec_alloc *a;
	const uint8_t *stack;
	uint64_t sp, stack_len, stack_top;
	int reloaded;
	struct hp_utrace *t;	/* what was read, for the memo; or NULL */
};

/* An input the trace cannot vouch for: this unwind is not remembered. */
static void untraceable(struct uctx *c)
{
	if (c->t)
		c->t->ok = 0;
}

static void trace_stack(struct uctx *c, uint64_t off, const void *src, size_t n)
{
	struct hp_utrace *t = c->t;

	if (!t || !t->ok)
		return;
	if (n != sizeof(uint64_t) || t->nreads >= HP_TRACE_MAX) {
		t->ok = 0;
		return;
	}
	t->off[t->nreads] = (uint32_t)off;
	memcpy(&t->val[t->nreads], src, sizeof(uint64_t));
	t->nreads++;
}

static int reload_maps(struct hp_unwinder *u)
{
	struct hp_maps nm;

	if (hp_maps_read_at(&nm, &u->maps, u->maps_fd, &u->t, u->exe_fd, u->mem_fd, u->cache))
		return -1;	/* keep the old snapshot: better than nothing */
	memset(u->win, 0, sizeof(u->win));
	hp_maps_free(&u->maps);
	u->maps = nm;
	u->mem = maps_mem(&u->maps);
	u->reloads++;
	unw_flush_cache(u->as, 0, 0);
	return 0;
}

/*
 * Remember the bytes of m's file that addr falls in: the part of its
 * segment that is both mapped by m and inside the file, the segment found
 * as hp_elf_vaddr_to_off finds it. m is read-only and file-backed.
 */
static void file_window(struct hp_unwinder *u, const struct hp_mapping *m, uint64_t addr)
{
	const struct hp_elf *e = m->elf;
	uint64_t v = addr - m->bias, lo, hi, off;
	struct window *w;
	int i;

	for (i = 0; i < e->nseg; i++)
		if (v >= e->seg[i].vaddr && v < e->seg[i].vaddr + e->seg[i].filesz)
			break;
	if (i == e->nseg || e->seg[i].off > e->size)
		return;
	/* in vaddrs: the segment's file bytes, cut to the file and to m */
	lo = e->seg[i].vaddr;
	hi = lo + (e->seg[i].filesz < e->size - e->seg[i].off ?
		   e->seg[i].filesz : e->size - e->seg[i].off);
	if (m->start - m->bias > lo && m->start - m->bias <= v)
		lo = m->start - m->bias;
	if (m->end - m->bias < hi && m->end - m->bias > v)
		hi = m->end - m->bias;
	if (v < lo || v >= hi)
		return;
	off = lo - e->seg[i].vaddr + e->seg[i].off;
	w = &u->win[u->win_next++ % HP_UNWIND_WINDOWS];
	w->lo = lo + m->bias;
	w->hi = hi + m->bias;
	w->img = e->img + off;
}

static int read_mem(struct uctx *c, uint64_t addr, void *dst, size_t n)
{
	struct hp_unwinder *u = c->u;
	const struct hp_mapping *m;
	int i;

	if (addr >= c->sp && addr - c->sp <= c->stack_len &&
	    n <= c->stack_len - (addr - c->sp)) {
		memcpy(dst, c->stack + (addr - c->sp), n);
		trace_stack(c, addr - c->sp, dst, n);
		return 0;
	}
	/*
	 * The rest of the sampled thread's stack was not copied (stack_cap):
	 * the live stack has moved on since, so reading it would give garbage
	 * frames. Stop there instead.
	 */
	if (c->stack_top && addr + n > c->sp && addr < c->stack_top) {
		untraceable(c);
		return -1;
	}
	/* Read-only file contents: constant for this maps snapshot, so a
	 * trace need not list them. */
	for (i = 0; i < HP_UNWIND_WINDOWS; i++) {
		const struct window *w = &u->win[i];

		if (addr >= w->lo && addr < w->hi && n <= w->hi - addr) {
			memcpy(dst, w->img + (addr - w->lo), n);
			return 0;
		}
	}
	m = hp_maps_find(&u->maps, addr);
	if (m && m->elf && m->bias_ok && !(m->prot & 2) && addr + n <= m->end &&
	    !hp_elf_read_vaddr(m->elf, addr - m->bias, dst, n)) {
		file_window(u, m, addr);
		return 0;
	}
	/* Anything else may change behind the trace's back. */
	untraceable(c);
	if (u->mem_fd >= 0 && !u->mem_dead) {
		ssize_t r = pread(u->mem_fd, dst, n, (off_t)addr);

		if (r == (ssize_t)n)
			return 0;
		if (r == 0 && m)
			u->mem_dead = 1;	/* the mm is gone */
	}
	if (m && m->elf && m->bias_ok &&
	    !hp_elf_read_vaddr(m->elf, addr - m->bias, dst, n))
		return 0;
	return -1;
}

static int acc_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val,
		   int write, void *arg)
{
	(void)as;
	if (write)
		return -UNW_EREADONLYREG;
	return read_mem(arg, addr, val, sizeof(*val)) ? -UNW_EINVAL : 0;
}

static int acc_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val,
		   int write, void *arg)
{
	struct uctx *c = arg;
	const __u64 *r = c->a->regs;
	int i;

	(void)as;
	if (write)
		return -UNW_EREADONLYREG;
	i = hp_arch_unw_reg(reg);
	if (i == -1) {
		/* Caller-saved registers: not copied, never needed for CFA rules. */
		*val = 0;
		return 0;
	}
	if (i < 0)
		return -UNW_EBADREG;
	*val = r[i];
	if (c->t)
		c->t->regmask |= 1U << i;
	return 0;
}

static int acc_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val,
		     int write, void *arg)
{
	(void)as; (void)reg; (void)val; (void)write; (void)arg;
	return -UNW_EBADREG;
}

static int acc_resume(unw_addr_space_t as, unw_cursor_t *cur, void *arg)
{
	(void)as; (void)cur; (void)arg;
	return -UNW_EINVAL;
}

static int acc_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf,
			 size_t len, unw_word_t *off, void *arg)
{
	(void)as; (void)addr; (void)buf; (void)len; (void)off; (void)arg;
	return -UNW_ENOINFO;	/* names come from libdwfl later */
}

/*
 * The mapping of code address addr; an unknown address rereads the maps
 * (rate-limited). So does one in a mapping that is not executable: code
 * runs only from executable pages, so the snapshot is older than the code
 * (a library dlopen'ed where another mapping was when it was taken, a
 * thread's freed stack, say), and its name is to be found in a newer one.
 */
static const struct hp_mapping *lookup_map(struct uctx *c, uint64_t addr)
{
	const struct hp_mapping *m = hp_maps_find(&c->u->maps, addr);

	if (m && !(m->prot & 4))
		m = NULL;
	if (!m && !c->reloaded && !c->u->mem_dead &&
	    mono_ns() - c->u->last_miss_reload_ns >= HP_MISS_RELOAD_NS) {
		/* Outside every known mapping: maybe a dlopen we missed. */
		c->reloaded = 1;
		untraceable(c);
		c->u->last_miss_reload_ns = mono_ns();
		if (!reload_maps(c->u))
			m = hp_maps_find(&c->u->maps, addr);
		if (m && !(m->prot & 4))
			m = NULL;
	}
	/*
	 * Still outside every mapping (no reread allowed yet, or the reread
	 * did not know it either): the snapshot may be older than the sample
	 * (a library dlopen'ed since), so this unwind must not be remembered:
	 * the memo would give its nameless frame to every later sample of
	 * that call path, after a reread too.
	 */
	if (!m)
		untraceable(c);
	return m;
}

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
			  int need_unwind_info, void *arg)
{
	struct uctx *c = arg;
	const struct hp_mapping *m = lookup_map(c, ip);
	unw_dyn_info_t di;
	const struct hp_elf *e;

	if (!m || !m->elf || !m->bias_ok || !m->elf->has_ehf)
		return -UNW_ENOINFO;
	e = m->elf;
	memset(&di, 0, sizeof(di));
	di.format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di.start_ip = e->text_lo + m->bias;
	di.end_ip = e->text_hi + m->bias;
	di.u.rti.name_ptr = 0;
	di.u.rti.segbase = e->ehf_vaddr + m->bias;
	di.u.rti.table_len = e->ehf_count * 8 / sizeof(unw_word_t);
	di.u.rti.table_data = e->ehf_table_vaddr + m->bias;
	if (ip < di.start_ip || ip >= di.end_ip)
		return -UNW_ENOINFO;
	return hp_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, arg);
}

static unw_accessors_t accessors = {
	.find_proc_info = find_proc_info,
	.put_unwind_info = _UPT_put_unwind_info,
	.get_dyn_info_list_addr = _UPT_get_dyn_info_list_addr,
	.access_mem = acc_mem,
	.access_reg = acc_reg,
	.access_fpreg = acc_fpreg,
	.resume = acc_resume,
	.get_proc_name = acc_proc_name,
};

struct hp_unwinder *hp_unwinder_new(pid_t pid, int maps_fd, int mem_fd,
				    int exe_fd, struct hp_elfcache *c)
{
	struct hp_target t = { .pid = pid, .proc_fd = -1, .paths_ok = 1 };

	return hp_unwinder_new_at(&t, maps_fd, mem_fd, exe_fd, c);
}

struct hp_unwinder *hp_unwinder_new_at(const struct hp_target *t, int maps_fd, int mem_fd,
				       int exe_fd, struct hp_elfcache *c)
{
	struct hp_unwinder *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;	/* the caller still owns the fds */
	u->t = *t;
	u->maps_fd = maps_fd;
	u->mem_fd = mem_fd;
	u->exe_fd = exe_fd;
	u->cache = c;
	u->as = unw_create_addr_space(&accessors, 0);
	if (!u->as) {
		free(u);
		return NULL;
	}
	unw_set_caching_policy(u->as, UNW_CACHE_GLOBAL);
	/* The first snapshot, now, while the process surely exists. */
	hp_maps_read_at(&u->maps, NULL, maps_fd, &u->t, exe_fd, mem_fd, c);
	u->mem = maps_mem(&u->maps);
	return u;
}

struct hp_unwinder *hp_unwinder_clone(const struct hp_unwinder *src)
{
	struct hp_unwinder *u = calloc(1, sizeof(*u));

	if (!u)
		return NULL;
	u->t = src->t;
	u->t.proc_fd = src->t.proc_fd >= 0 ? fcntl(src->t.proc_fd, F_DUPFD_CLOEXEC, 0) : -1;
	u->maps_fd = src->maps_fd >= 0 ? fcntl(src->maps_fd, F_DUPFD_CLOEXEC, 0) : -1;
	u->mem_fd = src->mem_fd >= 0 ? fcntl(src->mem_fd, F_DUPFD_CLOEXEC, 0) : -1;
	u->exe_fd = src->exe_fd >= 0 ? fcntl(src->exe_fd, F_DUPFD_CLOEXEC, 0) : -1;
	u->mem_dead = src->mem_dead;
	u->cache = src->cache;
	u->as = unw_create_addr_space(&accessors, 0);
	if (!u->as || hp_maps_copy(&u->maps, &src->maps)) {
		hp_unwinder_free(u);
		return NULL;
	}
	unw_set_caching_policy(u->as, UNW_CACHE_GLOBAL);
	u->mem = src->mem;
	return u;
}

void hp_unwinder_free(struct hp_unwinder *u)
{
	if (!u)
		return;
	if (u->as)
		unw_destroy_addr_space(u->as);
	hp_maps_free(&u->maps);
	if (u->maps_fd >= 0)
		close(u->maps_fd);
	if (u->mem_fd >= 0)
		close(u->mem_fd);
	if (u->exe_fd >= 0)
		close(u->exe_fd);
	if (u->t.proc_fd >= 0)
		close(u->t.proc_fd);
	free(u);
}

void hp_unwinder_maps_changed(struct hp_unwinder *u)
{
	reload_maps(u);
}

uint64_t hp_unwinder_reloads(const struct hp_unwinder *u)
{
	return u->reloads;
}

size_t hp_unwinder_mem(const struct hp_unwinder *u)
{
	return sizeof(*u) + u->mem;
}

/* prev: the frame before f, or NULL. One reference per run of frames in
 * the same file (hp_uframes_put releases them the same way). */
static void add_frame(struct uctx *c, struct hp_uframe *f, const struct hp_uframe *prev,
		      uint64_t pc)
{
	const struct hp_mapping *m = lookup_map(c, pc);

	f->pc = pc;
	f->elf = NULL;
	f->bias = 0;
	if (m && m->elf && m->bias_ok) {
		f->elf = prev && prev->elf == m->elf ? m->elf : hp_elf_ref(m->elf);
		f->bias = m->bias;
	}
}

/* Does the unwind information of a file cover ip? (JIT code, and code
 * some runtimes put in their binaries without any, have none.) */
static int has_cfi(struct uctx *c, uint64_t ip)
{
	unw_proc_info_t pi;

	memset(&pi, 0, sizeof(pi));
	if (find_proc_info(c->u->as, ip, &pi, 0, c) < 0)
		return 0;
	_UPT_put_unwind_info(c->u->as, &pi, c);
	return 1;
}

/*
 * One step by the frame-pointer chain from the frame record at fp (the
 * caller's frame pointer, then the return address, above it: x86-64's and
 * aarch64's layout alike), within the copied stack only, to a return
 * address in executable memory and a caller's record above this one.
 */
static int fp_step(struct uctx *c, uint64_t fp, uint64_t *ip, uint64_t *next_fp)
{
	const struct hp_mapping *m;

	if (!fp || (fp & 7) || fp < c->sp || fp - c->sp + 16 > c->stack_len ||
	    read_mem(c, fp, next_fp, 8) || read_mem(c, fp + 8, ip, 8))
		return -1;
	if (!*ip || (*next_fp && *next_fp <= fp))
		return -1;
	m = lookup_map(c, *ip);
	return m && (m->prot & 4) ? 0 : -1;
}

int hp_unwind(struct hp_unwinder *u, const struct heapprofd_rec_alloc *a,
	      const uint8_t *stack, uint32_t stack_len, struct hp_uframe *out,
	      int max, struct hp_utrace *t)
{
	struct uctx c = {
		.u = u, .a = a, .stack = stack, .stack_len = stack_len,
		.sp = heapprofd_rec_sp(a), .stack_top = a->stack_top,
		.t = t,
	};
	/* Where libunwind is started again below code without CFI: the
	 * record's registers but for pc, sp and fp, which come from traced
	 * stack words (so a memo entry stays a function of what it read). */
	struct heapprofd_rec_alloc again;
	unw_cursor_t cur;
	int n = 0, restarts = 0;

	if (t) {
		t->ok = 1;
		t->nreads = 0;
		/* ip and sp are the memo's key: always part of the inputs */
		t->regmask = 1U << HEAPPROFD_REG_PC | 1U << HEAPPROFD_REG_SP;
	}
	if (max <= 0)
		return 0;
	/*
	 * The copy was written on another core (the feeding thread), and
	 * each frame's reads depend on the previous frame's, so an unwind
	 * would wait for its cache misses one after another (clang: half of
	 * the accessors' time). Ask for the lines all at once first.
	 */
	for (uint32_t o = 0; o < stack_len && o < HP_UNWIND_PREFETCH; o += 64)
		__builtin_prefetch(stack + o);
	if (heapprofd_rec_pc(a))
		add_frame(&c, &out[n++], NULL, heapprofd_rec_pc(a));
	if (!n || unw_init_remote(&cur, u->as, &c) < 0) {
		untraceable(&c);
		return n;
	}
	for (;;) {
		unw_word_t ip, fp;
		uint64_t rip, next_fp;

		while (n < max) {
			int r = unw_step(&cur);

			if (r < 0)
				untraceable(&c);	/* an error, not the outermost frame */
			if (r <= 0)
				break;
			if (unw_get_reg(&cur, UNW_REG_IP, &ip) < 0 || !ip)
				break;
			add_frame(&c, &out[n], &out[n - 1], ip);
			n++;
		}
		/*
		 * Stopped in code without CFI (JIT-compiled code, a runtime's
		 * generated stubs): walk one frame up its frame-pointer chain,
		 * then let libunwind go on from the caller.
		 */
		if (n >= max || n < 2 || restarts >= 64 || has_cfi(&c, out[n - 1].pc - 1) ||
		    unw_get_reg(&cur, HP_UNW_FP, &fp) < 0 || fp_step(&c, fp, &rip, &next_fp))
			break;
		add_frame(&c, &out[n], &out[n - 1], rip);
		n++;
		again = *a;
		again.regs[HEAPPROFD_REG_PC] = rip;
		again.regs[HEAPPROFD_REG_SP] = hp_arch_fp_caller_sp(fp);
		again.regs[HEAPPROFD_REG_FP] = next_fp;
		c.a = &again;
		restarts++;
		if (unw_init_remote(&cur, u->as, &c) < 0)
			break;
	}
	return n;
}
