// SPDX-License-Identifier: GPL-2.0
/*
 * Names of JIT-compiled code from the runtime's perf map: a text file
 * /tmp/perf-<pid>.map that the runtime appends a line to for each piece of
 * code it makes ("START SIZE NAME", START and SIZE in hex; Node with
 * --perf-basic-prof, Java with jcmd PID Compiler.perfmap or an agent,
 * LuaJIT, ...). It is read as the process sees it: through
 * /proc/<pid>/root, with the pid the process has in its own pid namespace
 * (the last NSpid of /proc/<pid>/status).
 *
 * The file lies in a directory everybody may write: it is taken only if it
 * is a regular file (not followed through a symbolic link) owned by the
 * process's user or root and writable by nobody else, and read as hostile
 * text: at most HP_PERFMAP_MAX_BYTES, names cut at 255 bytes with control
 * characters replaced, at most HP_PERFMAP_MAX_ENTRIES entries.
 *
 * JIT code moves and its addresses are reused: when two entries cover an
 * address the later line wins, and the file is read again (what was
 * appended, or all of it if it was replaced) when an address is not found
 * and the file changed, at most every HP_PERFMAP_REREAD_MS. The unwinders
 * ask at unwind time (what the code was then) and the dump again for
 * what was still unnamed (a map written late, as jcmd's), after reading
 * the file whatever the time of the last look. One lock:
 * workers and the dump share a process's map.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <linux/openat2.h>
#include <sys/syscall.h>

#include "internal.h"

#define HP_PERFMAP_MAX_BYTES	(64ULL << 20)
#define HP_PERFMAP_MAX_ENTRIES	(1U << 20)
#define HP_PERFMAP_NAME_MAX	255
#define HP_PERFMAP_REREAD_MS	100
/* Names given to frames are kept as long as the process: bounded. */
#define HP_PERFMAP_NAMED_BYTES	(16ULL << 20)

struct pm_entry {
	uint64_t start, end;
	uint32_t seq;		/* line order: a later one wins */
	uint32_t name;		/* offset in names */
};

struct hp_perfmap {
	pthread_mutex_t lock;
	pid_t pid;
	int proc_fd;		/* /proc/<pid>, or -1 */
	int root_fd;		/* its root directory (kept past its exit), or -1 */
	int nspid;		/* 0: not known yet */
	uid_t uid;
	int have_uid;
	struct pm_entry *e;
	size_t n, cap;
	int sorted;
	char *names;
	size_t names_len, names_cap;
	dev_t dev;
	ino_t ino;
	off_t read_to;		/* bytes parsed so far (whole lines) */
	uint64_t last_look_ms;
	uint64_t lines_bad;
	/* What frames are named with: a file of names (hp_elf_names). */
	struct hp_elf *file;
	struct hp_hmap keys;	/* (entry start, name hash) -> key */
	uint64_t nkeys;
	uint64_t named_bytes, mem;	/* mem: read under no lock (stats) */
};

static void note_mem(struct hp_perfmap *pm)
{
	__atomic_store_n(&pm->mem, sizeof(*pm) + pm->cap * sizeof(*pm->e) + pm->names_cap +
			 pm->named_bytes, __ATOMIC_RELAXED);
}

size_t hp_perfmap_mem(const struct hp_perfmap *pm)
{
	return pm ? __atomic_load_n(&pm->mem, __ATOMIC_RELAXED) : 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int read_status(struct hp_perfmap *pm);
static int open_proc(struct hp_perfmap *pm, const char *name, int flags);

struct hp_perfmap *hp_perfmap_new(pid_t pid, int proc_fd)
{
	struct hp_perfmap *pm = calloc(1, sizeof(*pm));

	if (!pm) {
		if (proc_fd >= 0)
			close(proc_fd);
		return NULL;
	}
	pthread_mutex_init(&pm->lock, NULL);
	pm->pid = pid;
	pm->proc_fd = proc_fd;
	/* Now, while the process lives: its namespace pid, its user and its
	 * root, where the map is still found once it has exited (the dump at
	 * its end names what its runtime wrote last). */
	read_status(pm);
	pm->root_fd = open_proc(pm, "root", O_PATH | O_DIRECTORY);
	return pm;
}

static void forget(struct hp_perfmap *pm)
{
	free(pm->e);
	free(pm->names);
	pm->e = NULL;
	pm->names = NULL;
	pm->n = pm->cap = pm->names_len = pm->names_cap = 0;
	pm->read_to = 0;
	pm->sorted = 1;
}

void hp_perfmap_free(struct hp_perfmap *pm)
{
	if (!pm)
		return;
	forget(pm);
	hp_hmap_free(&pm->keys);
	hp_elf_put(pm->file);
	if (pm->proc_fd >= 0)
		close(pm->proc_fd);
	if (pm->root_fd >= 0)
		close(pm->root_fd);
	pthread_mutex_destroy(&pm->lock);
	free(pm);
}

/* /proc/<pid>/<name>, through the directory fd when there is one. */
static int open_proc(struct hp_perfmap *pm, const char *name, int flags)
{
	char path[64];

	if (pm->proc_fd >= 0)
		return openat(pm->proc_fd, name, flags | O_CLOEXEC);
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pm->pid, name);
	return open(path, flags | O_CLOEXEC);
}

/* The pid in the process's own namespace, and its user. */
static int read_status(struct hp_perfmap *pm)
{
	char buf[4096], *l;
	ssize_t r;
	int fd = open_proc(pm, "status", O_RDONLY);

	if (fd < 0)
		return -1;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return -1;
	buf[r] = 0;
	l = strstr(buf, "\nNSpid:");
	if (l) {
		char *end = strchr(l + 1, '\n'), *last = NULL, *p = l + 7;

		if (end)
			*end = 0;
		for (char *tok = strtok_r(p, " \t", &p); tok; tok = strtok_r(NULL, " \t", &p))
			last = tok;
		if (last)
			pm->nspid = atoi(last);
		if (end)
			*end = '\n';
	}
	l = strstr(buf, "\nUid:");
	if (l) {
		unsigned long u[2];

		if (sscanf(l + 5, "%lu %lu", &u[0], &u[1]) == 2) {
			pm->uid = (uid_t)u[1];	/* effective */
			pm->have_uid = 1;
		}
	}
	if (pm->nspid <= 0)
		pm->nspid = pm->pid;
	return 0;
}

/* The map file, opened without following a link in its last component and
 * checked (see the top); -1 if there is none to trust. */
static int open_map(struct hp_perfmap *pm, struct stat *st)
{
	struct open_how how = {
		.flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
		/* Links in its tree resolve in its root, never in ours. */
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	char path[64];
	int fd;

	if (pm->root_fd < 0 || pm->nspid <= 0)
		return -1;
	snprintf(path, sizeof(path), "tmp/perf-%d.map", pm->nspid);
	fd = (int)syscall(SYS_openat2, pm->root_fd, path, &how, sizeof(how));
	if (fd < 0)
		return -1;
	if (fstat(fd, st) || !S_ISREG(st->st_mode) || (st->st_mode & 022) ||
	    (st->st_uid != 0 && (!pm->have_uid || st->st_uid != pm->uid))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int add_name(struct hp_perfmap *pm, const char *s, size_t len, uint32_t *off)
{
	if (pm->names_len + len + 1 > pm->names_cap) {
		size_t nc = pm->names_cap ? pm->names_cap * 2 : 4096;
		char *nn;

		while (nc < pm->names_len + len + 1)
			nc *= 2;
		nn = realloc(pm->names, nc);
		if (!nn)
			return -1;
		pm->names = nn;
		pm->names_cap = nc;
	}
	*off = (uint32_t)pm->names_len;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		pm->names[pm->names_len++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	pm->names[pm->names_len++] = 0;
	return 0;
}

/* One line "START SIZE NAME" (hex, no 0x needed). */
static void parse_line(struct hp_perfmap *pm, char *l, size_t len)
{
	unsigned long long start, size;
	struct pm_entry *e;
	char *p = l, *end;
	size_t nl;

	l[len] = 0;
	errno = 0;
	start = strtoull(p, &end, 16);
	if (end == p || *end != ' ' || errno)
		goto bad;
	p = end + 1;
	size = strtoull(p, &end, 16);
	if (end == p || *end != ' ' || errno || !size || start + size < start)
		goto bad;
	p = end + 1;
	nl = strlen(p);
	if (!nl)
		goto bad;
	if (nl > HP_PERFMAP_NAME_MAX)
		nl = HP_PERFMAP_NAME_MAX;
	if (pm->n >= HP_PERFMAP_MAX_ENTRIES)
		return;
	if (pm->n == pm->cap) {
		size_t nc = pm->cap ? pm->cap * 2 : 1024;
		struct pm_entry *ne = realloc(pm->e, nc * sizeof(*ne));

		if (!ne)
			return;
		pm->e = ne;
		pm->cap = nc;
	}
	e = &pm->e[pm->n];
	if (add_name(pm, p, nl, &e->name))
		return;
	e->start = start;
	e->end = start + size;
	e->seq = (uint32_t)pm->n;
	if (pm->n && start < pm->e[pm->n - 1].start)
		pm->sorted = 0;
	pm->n++;
	return;
bad:
	pm->lines_bad++;
}

/* Parse whole lines from read_to on. */
static void read_more(struct hp_perfmap *pm, int fd, const struct stat *st)
{
	size_t want, have = 0;
	char *buf, *l, *nl;
	ssize_t r;

	if (st->st_size <= pm->read_to || (uint64_t)st->st_size > HP_PERFMAP_MAX_BYTES)
		return;
	want = (size_t)(st->st_size - pm->read_to);
	buf = malloc(want + 1);
	if (!buf)
		return;
	while (have < want) {
		r = pread(fd, buf + have, want - have, pm->read_to + (off_t)have);
		if (r <= 0)
			break;
		have += (size_t)r;
	}
	for (l = buf; (nl = memchr(l, '\n', have - (size_t)(l - buf))); l = nl + 1)
		parse_line(pm, l, (size_t)(nl - l));
	pm->read_to += (off_t)(l - buf);	/* a partial last line: next time */
	free(buf);
}

static int by_start(const void *a, const void *b)
{
	const struct pm_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Under the lock: read what is new in the file, if anything. */
static void refresh(struct hp_perfmap *pm)
{
	struct stat st;
	int fd = open_map(pm, &st);

	if (fd < 0)
		return;
	if (pm->read_to && (st.st_dev != pm->dev || st.st_ino != pm->ino ||
			    st.st_size < pm->read_to))
		forget(pm);	/* another file, or rewritten */
	pm->dev = st.st_dev;
	pm->ino = st.st_ino;
	read_more(pm, fd, &st);
	close(fd);
	note_mem(pm);
	if (!pm->sorted) {
		qsort(pm->e, pm->n, sizeof(*pm->e), by_start);
		pm->sorted = 1;
	}
}

/*
 * Entries are sorted by start, then line. The code at addr: of the entries
 * that start at or below it (a bounded look back), the latest line whose
 * range covers it.
 */
static const struct pm_entry *find(const struct hp_perfmap *pm, uint64_t addr)
{
	size_t lo = 0, hi = pm->n;
	const struct pm_entry *best = NULL;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (pm->e[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo, k = 0; i > 0 && k < 64; i--, k++) {
		const struct pm_entry *e = &pm->e[i - 1];

		if (addr < e->end && (!best || e->seq > best->seq))
			best = e;
	}
	return best;
}

/*
 * A dump asks for every address still unnamed at once, and may come within
 * HP_PERFMAP_REREAD_MS of a worker's look that found the file before the
 * runtime's last lines: it reads the file first, whatever the time.
 */
void hp_perfmap_refresh(struct hp_perfmap *pm)
{
	if (!pm)
		return;
	pthread_mutex_lock(&pm->lock);
	pm->last_look_ms = now_ms();
	refresh(pm);
	pthread_mutex_unlock(&pm->lock);
}

int hp_perfmap_name(struct hp_perfmap *pm, uint64_t addr, char *buf, size_t len)
{
	const struct pm_entry *e;
	int found = 0;

	if (!pm || !len)
		return 0;
	pthread_mutex_lock(&pm->lock);
	e = find(pm, addr);
	if (!e && now_ms() - pm->last_look_ms >= HP_PERFMAP_REREAD_MS) {
		pm->last_look_ms = now_ms();
		refresh(pm);
		e = find(pm, addr);
	}
	if (e) {
		snprintf(buf, len, "%s", pm->names + e->name);
		found = 1;
	}
	pthread_mutex_unlock(&pm->lock);
	return found;
}

int hp_uframes_unfiled(const struct hp_uframe *f, int n)
{
	for (int i = 1; i < n; i++)
		if (!f[i].elf && f[i].pc)
			return 1;
	return 0;
}

/* Under the lock: the key naming entry e, made and named on first sight. */
static uint64_t key_of(struct hp_perfmap *pm, const struct pm_entry *e)
{
	const char *name = pm->names + e->name;
	uint64_t h = hp_hash_str(name), key;
	struct hp_sym *s;

	key = (uint64_t)(uintptr_t)hp_hmap_get(&pm->keys, e->start, h);
	if (key || pm->nkeys >= HP_PERFMAP_MAX_ENTRIES ||
	    pm->named_bytes + strlen(name) + 64 > HP_PERFMAP_NAMED_BYTES)
		return key;
	if (!pm->file && !(pm->file = hp_elf_names("[jit]")))
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s)
		return 0;
	key = (pm->nkeys + 1) * 16;
	pthread_mutex_lock(&pm->file->sym_lock);
	s->func = hp_intern(&pm->file->strs, name);
	if (!s->func || hp_hmap_put(&pm->file->syms, key, 0, s)) {
		pthread_mutex_unlock(&pm->file->sym_lock);
		free(s);
		return 0;
	}
	pthread_mutex_unlock(&pm->file->sym_lock);
	if (hp_hmap_put(&pm->keys, e->start, h, (void *)(uintptr_t)key))
		return 0;
	pm->nkeys++;
	pm->named_bytes += strlen(name) + 64 + sizeof(*s) + 4 * sizeof(struct hp_hent);
	note_mem(pm);
	return key;
}

/* Under the lock: the entry naming a return address (the call is the
 * byte before), the map read again if it may have grown. */
static const struct pm_entry *find_ret(struct hp_perfmap *pm, uint64_t pc)
{
	const struct pm_entry *e = find(pm, pc - 1);

	if (!e && now_ms() - pm->last_look_ms >= HP_PERFMAP_REREAD_MS) {
		pm->last_look_ms = now_ms();
		refresh(pm);
		e = find(pm, pc - 1);
	}
	return e;
}

int hp_perfmap_names_any(struct hp_perfmap *pm, const struct hp_uframe *f, int n)
{
	int any = 0;

	if (!pm || !hp_uframes_unfiled(f, n))
		return 0;
	pthread_mutex_lock(&pm->lock);
	for (int i = 1; i < n && !any; i++)
		any = !f[i].elf && f[i].pc && find_ret(pm, f[i].pc);
	pthread_mutex_unlock(&pm->lock);
	return any;
}

int hp_perfmap_name_frames(struct hp_perfmap *pm, struct hp_uframe *f, int n)
{
	int named = 0;

	if (!pm || !hp_uframes_unfiled(f, n))
		return 0;
	pthread_mutex_lock(&pm->lock);
	for (int i = 1; i < n; i++) {
		const struct pm_entry *e;
		uint64_t key;

		if (f[i].elf || !f[i].pc)
			continue;
		e = find_ret(pm, f[i].pc);
		key = e ? key_of(pm, e) : 0;
		if (!key)
			continue;
		/* The names file keeps the key's name; pc - 1 finds it. */
		f[i] = (struct hp_uframe){ key + 1, pm->file, 0 };
		named++;
	}
	/* One reference per run of named frames (hp_uframes_put). */
	for (int i = 1; i < n; i++)
		if (f[i].elf == pm->file && pm->file && f[i - 1].elf != pm->file)
			hp_elf_ref(pm->file);
	pthread_mutex_unlock(&pm->lock);
	return named;
}
