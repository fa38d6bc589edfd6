// SPDX-License-Identifier: GPL-2.0
/*
 * The symbol cache: what symbolize.c learned from a distribution's separate
 * debug file, kept on disk so that the next daemon (every `heapprofctl
 * record` starts a private one) need not open that DWARF again.
 *
 * Why: debug packages (libc6-dbg and the like) ship their sections
 * compressed, and libdw inflates every debug section of a file when it first
 * opens its DWARF. For libc that is ~0.09 s of CPU, paid by every recording
 * for the two libc frames (__libc_start_call_main, __libc_start_main) under
 * main that every profile has; it was a fifth of the daemon's CPU in the
 * 10 M allocation benchmark and nearly all of a short program's.
 *
 * A file the cache stands for keeps its DWARF closed until an address the
 * cache lacks is looked up; the books ask for that lookup as the address's
 * first frame comes in (hp_symd_prefetch_addr), so the inflating happens on
 * the symbolizer thread during the run, not in the dump at the program's
 * exit.
 *
 * What is cached: only files whose debug info is a separate file found by
 * build id under a debug root (/usr/lib/debug/.build-id/xx/yyyy.debug). The
 * build id names the code; the debug file's inode, size and mtime, written
 * in the cache file's first line, name the debug info (installing or
 * upgrading the debug package makes the cache file stale: it is started
 * anew). Files with their own DWARF are not cached: it is not compressed
 * by default, it is cheap to open, and they change with every build.
 *
 * The cache file <dir>/<build id>.sym is text: the header line, then one
 * line per address, appended (O_APPEND, one write each, so daemons sharing
 * the directory never tear each other's lines):
 *
 *   <vaddr hex> TAB <n> (TAB <func> TAB <file> TAB <line>) x n
 *
 * the innermost frame first (then the functions it was inlined into), an
 * empty field for an unknown name or file. A line that does not parse ends
 * the reading (what follows is not trusted); names with a tab or a newline
 * are not cached. The directory must be ours and not writable by others.
 *
 * Where: $HEAPPROFD_SYMCACHE ("off" turns it off), else
 * /var/cache/heapprofd/symbols for root, else
 * ${XDG_CACHE_HOME:-~/.cache}/heapprofd/symbols.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define SYMCACHE_MAX_BYTES	(16U << 20)	/* per file: read and grow up to this */
#define SYMCACHE_MAX_FRAMES	64
#define SYMCACHE_MAGIC		"heapprofd-symcache 1"

static char *cache_dir;		/* NULL: off */
static pthread_once_t dir_once = PTHREAD_ONCE_INIT;

/* mkdir -p, each new component 0700. */
static int make_dirs(char *path)
{
	char *p;

	for (p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(path, 0700) && errno != EEXIST) {
			*p = '/';
			return -1;
		}
		*p = '/';
	}
	return mkdir(path, 0700) && errno != EEXIST ? -1 : 0;
}

static void dir_init(void)
{
	const char *env = getenv("HEAPPROFD_SYMCACHE"), *base;
	char buf[4096];
	struct stat st;

	if (env && (!*env || !strcmp(env, "off") || !strcmp(env, "0")))
		return;
	if (env) {
		snprintf(buf, sizeof(buf), "%s", env);
	} else if (geteuid() == 0) {
		snprintf(buf, sizeof(buf), "/var/cache/heapprofd/symbols");
	} else if ((base = getenv("XDG_CACHE_HOME")) && base[0] == '/') {
		snprintf(buf, sizeof(buf), "%s/heapprofd/symbols", base);
	} else if ((base = getenv("HOME")) && base[0] == '/') {
		snprintf(buf, sizeof(buf), "%s/.cache/heapprofd/symbols", base);
	} else {
		return;
	}
	if (buf[0] != '/' || make_dirs(buf))
		return;
	/* Ours and closed to others: its contents end up in profiles. */
	if (lstat(buf, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022))
		return;
	cache_dir = strdup(buf);
}

const char *hp_symcache_dir(void)
{
	pthread_once(&dir_once, dir_init);
	return cache_dir;
}

/*
 * The separate debug file of e, found by build id under the debug roots
 * (the absolute entries of the debuginfo path), as libdwfl finds it.
 */
static int find_debug_file(const struct hp_elf *e, struct stat *st)
{
	return hp_debug_file_by_id(e, st);
}

int hp_debug_file_by_id(const struct hp_elf *e, struct stat *st)
{
	const char *roots = hp_debuginfo_roots();
	char hex[2 * 64 + 1], path[4096];
	const char *r = roots;

	hp_elf_build_id_hex(e, hex, sizeof(hex));
	if (strlen(hex) < 4)
		return -1;
	while (*r) {
		size_t n = strcspn(r, ":");

		if (r[0] == '/' && n < 2048) {
			snprintf(path, sizeof(path), "%.*s/.build-id/%.2s/%s.debug", (int)n, r,
				 hex, hex + 2);
			if (!stat(path, st) && S_ISREG(st->st_mode))
				return 0;
		}
		r += n;
		if (*r == ':')
			r++;
	}
	return -1;
}

/* One entry: parse line (NUL-terminated, no newline) into e->syms. */
static int parse_entry(struct hp_elf *e, char *line)
{
	struct hp_sym *first = NULL, **link = &first;
	char *f[3 * SYMCACHE_MAX_FRAMES + 2], *end;
	unsigned long long vaddr;
	int nf = 0, n, i;

	for (f[nf++] = line; nf < (int)(sizeof(f) / sizeof(f[0])) && (line = strchr(line, '\t'));)
		*line++ = 0, f[nf++] = line;
	if (line && strchr(line, '\t'))
		return -1;
	errno = 0;
	vaddr = strtoull(f[0], &end, 16);
	if (errno || end == f[0] || *end || nf < 2)
		return -1;
	n = (int)strtol(f[1], &end, 10);
	if (*end || n < 1 || n > SYMCACHE_MAX_FRAMES || nf != 2 + 3 * n)
		return -1;
	for (i = 0; i < n; i++) {
		const char *fn = f[2 + 3 * i], *file = f[3 + 3 * i];
		long ln = strtol(f[4 + 3 * i], &end, 10);
		struct hp_sym *s;

		if (*end || ln < 0 || ln > INT32_MAX)
			goto bad;
		s = calloc(1, sizeof(*s));
		if (!s)
			goto bad;
		s->func = *fn ? hp_intern(&e->strs, fn) : NULL;
		s->file = *file ? hp_intern(&e->strs, file) : NULL;
		s->line = (int)ln;
		*link = s;
		link = &s->caller;
	}
	if (hp_hmap_get(&e->syms, vaddr, 0) || hp_hmap_put(&e->syms, vaddr, 0, first))
		goto bad;	/* a duplicate (two daemons): the first stays */
	e->symcache_entries++;
	return 0;
bad:
	while (first) {
		struct hp_sym *nx = first->caller;

		free(first);
		first = nx;
	}
	/* A duplicate is not corruption: read on. */
	return hp_hmap_get(&e->syms, vaddr, 0) ? 0 : -1;
}

/* Read the entries after the header; a bad line ends the reading. */
static void read_entries(struct hp_elf *e, char *buf, size_t len)
{
	char *p = buf, *end = buf + len;

	while (p < end) {
		char *nl = memchr(p, '\n', end - p);

		if (!nl)
			break;	/* torn last line */
		*nl = 0;
		if (parse_entry(e, p))
			break;
		p = nl + 1;
	}
}

/* Start the cache file anew with its header: written aside, renamed in. */
static int start_file(const char *path, const char *header)
{
	struct hp_out o;

	if (hp_out_open(&o, path, 0600))
		return -1;
	if (hp_out_write(&o, header, strlen(header))) {
		hp_out_abort(&o);
		return -1;
	}
	return hp_out_commit(&o) ? -1 : 0;
}

void hp_symcache_load(struct hp_elf *e)
{
	const char *dir = hp_symcache_dir();
	char hex[2 * 64 + 1], path[4200], header[256];
	struct stat dst, st;
	char *buf = NULL;
	ssize_t got = 0;
	size_t hlen;
	int fd;

	e->symcache_state = -1;
	e->symcache_fd = -1;
	if (!dir || e->is_client || find_debug_file(e, &dst))
		return;
	hp_elf_build_id_hex(e, hex, sizeof(hex));
	snprintf(path, sizeof(path), "%s/%s.sym", dir, hex);
	snprintf(header, sizeof(header), "%s %s %llu %llu %lld.%09ld\n", SYMCACHE_MAGIC, hex,
		 (unsigned long long)dst.st_ino, (unsigned long long)dst.st_size,
		 (long long)dst.st_mtim.tv_sec, dst.st_mtim.tv_nsec);
	hlen = strlen(header);
	fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
			st.st_size > SYMCACHE_MAX_BYTES)) {
		close(fd);
		fd = -1;
	} else if (fd >= 0) {
		buf = malloc(st.st_size + 1);
		got = buf ? pread(fd, buf, st.st_size, 0) : -1;
		if (got < (ssize_t)hlen || memcmp(buf, header, hlen)) {
			/* Another debug file now, or not a cache file. */
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0) {
		free(buf);
		buf = NULL;
		got = 0;
		if (start_file(path, header))
			return;
		fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			return;
	}
	if (buf) {
		read_entries(e, buf + hlen, got - hlen);
		free(buf);
	}
	e->symcache_fd = fd;
	e->symcache_state = 1;
}

/* A name fit for a field: no tab, no newline. */
static int fits(const char *s)
{
	return !s || !strpbrk(s, "\t\n");
}

void hp_symcache_note(struct hp_elf *e, uint64_t vaddr, const struct hp_sym *s)
{
	char line[8192];
	const struct hp_sym *c;
	struct stat st;
	int n = 0, len, k;

	if (e->symcache_state <= 0 || !s)
		return;
	for (c = s; c; c = c->caller)
		if (++n > SYMCACHE_MAX_FRAMES || !fits(c->func) || !fits(c->file))
			return;
	len = snprintf(line, sizeof(line), "%" PRIx64 "\t%d", vaddr, n);
	for (c = s; c && len < (int)sizeof(line); c = c->caller) {
		k = snprintf(line + len, sizeof(line) - len, "\t%s\t%s\t%d",
			     c->func ? c->func : "", c->file ? c->file : "", c->line);
		len += k;
	}
	if (len + 1 >= (int)sizeof(line))
		return;
	line[len++] = '\n';
	if (fstat(e->symcache_fd, &st) || st.st_size + len > SYMCACHE_MAX_BYTES)
		return;
	/* One write with O_APPEND: whole or not at all, never interleaved. */
	if (write(e->symcache_fd, line, len) != len)
		e->symcache_state = -1;
}

void hp_symcache_close(struct hp_elf *e)
{
	if (e->symcache_state > 0 && e->symcache_fd >= 0)
		close(e->symcache_fd);
	e->symcache_fd = -1;
	e->symcache_state = 0;
}
