// SPDX-License-Identifier: GPL-2.0
/*
 * Symbolization with elfutils' libdwfl: one Dwfl per ELF file, reported at
 * bias 0 so module addresses are the file's own virtual addresses (the same
 * for every process that maps it). Separate debug info is found by build id
 * (/usr/lib/debug/.build-id) or debuglink through dwfl_standard_find_debuginfo;
 * no debuginfod. Results are cached per file and address; C++ names are
 * demangled with the C++ runtime's __cxa_demangle.
 */
#include <fcntl.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

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

static int open_dwfl(struct hp_elf *e)
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
	e->dwfl = d;
	e->dwmod = mod;
	return 0;
}

void hp_symbolize_release(struct hp_elf *e)
{
	if (e->dwfl)
		dwfl_end(e->dwfl);
	e->dwfl = NULL;
	e->dwmod = NULL;
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

static const struct hp_sym *lookup(struct hp_elf *e, uint64_t vaddr)
{
	struct hp_sym *s;
	Dwfl_Module *mod;
	const char *name;
	Dwfl_Line *line;

	/* What an earlier daemon learned from this file's debug info. */
	if (!e->symcache_state)
		hp_symcache_load(e);
	s = hp_hmap_get(&e->syms, vaddr, 0);
	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (!e->dwfl_state)
		e->dwfl_state = open_dwfl(e) ? -1 : 1;
	if (e->dwfl_state > 0) {
		GElf_Addr a = vaddr;
		Dwfl_Module *m2;

		mod = e->dwmod;
		/* For ET_EXEC the module sits at its link address; ET_DYN at 0. */
		m2 = dwfl_addrmodule(e->dwfl, a);
		if (m2)
			mod = m2;
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
	if (e->dwfl_state > 0)
		hp_symcache_note(e, vaddr, s);
	return s;
}

const struct hp_sym *hp_symbolize(struct hp_elf *e, uint64_t vaddr)
{
	const struct hp_sym *s;

	pthread_mutex_lock(&e->sym_lock);
	s = lookup(e, vaddr);
	pthread_mutex_unlock(&e->sym_lock);
	return s;
}
