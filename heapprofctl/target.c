// SPDX-License-Identifier: GPL-2.0
/*
 * The running process's mappings (/proc/PID/maps) and the symbols of the
 * objects mapped there (their ELF files' symbol tables, through libelf),
 * turned into addresses in that process.
 *
 * Names in the maps are the process's to choose (a file of any name can be
 * mapped anywhere), and a path read there may name a FIFO by the time it is
 * opened. So a mapping's file is opened as the mapping itself,
 * /proc/PID/map_files/START-END, which is the file the kernel maps there
 * whatever its name is now; where that is not ours to open (it needs
 * CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE), the path inside the process's
 * root, resolved without leaving it, opened without blocking, and taken
 * only when it is a regular file with the mapping's inode.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "inject.h"

int tmaps_read(pid_t pid, struct target_maps *tm)
{
	char path[64], line[1024];
	FILE *f;

	memset(tm, 0, sizeof(*tm));
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		struct tmap m = { 0 };
		unsigned long long s, e, o, ino;
		unsigned int maj, min;
		int pos = 0;

		if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &s, &e, m.perms, &o, &maj, &min,
			   &ino, &pos) < 7)
			continue;
		m.start = s;
		m.end = e;
		m.off = o;
		m.ino = ino;
		if (pos > 0) {
			snprintf(m.path, sizeof(m.path), "%s", line + pos);
			m.path[strcspn(m.path, "\n")] = 0;
		}
		if (!(tm->n & 63)) {
			struct tmap *nm = realloc(tm->m, (tm->n + 64) * sizeof(*nm));

			if (!nm) {
				fclose(f);
				tmaps_free(tm);
				return -ENOMEM;
			}
			tm->m = nm;
		}
		tm->m[tm->n++] = m;
	}
	fclose(f);
	return tm->n ? 0 : -ESRCH;
}

void tmaps_free(struct target_maps *tm)
{
	free(tm->m);
	tm->m = NULL;
	tm->n = 0;
}

/* The path in the process's root, never leaving it, never blocking. */
static int open_in_root(pid_t pid, const struct tmap *m)
{
	struct open_how how = {
		.flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	char p[64];
	int root, fd;

	if (m->path[0] != '/')
		return -ENOENT;
	snprintf(p, sizeof(p), "/proc/%d/root", (int)pid);
	root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	fd = (int)syscall(SYS_openat2, root, m->path + 1, &how, sizeof(how));
	if (fd < 0)
		fd = -errno;
	close(root);
	return fd;
}

int tmap_open(pid_t pid, const struct tmap *m)
{
	struct stat st;
	char p[96];
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/map_files/%llx-%llx", (int)pid,
		 (unsigned long long)m->start, (unsigned long long)m->end);
	fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	if (fd < 0 && (errno == EPERM || errno == EACCES))
		fd = open_in_root(pid, m);
	else if (fd < 0)
		return -errno;
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (m->ino && st.st_ino != m->ino)) {
		close(fd);
		return -ESTALE;	/* not the file mapped there (any more) */
	}
	return fd;
}

/* Apply fn to the ELF open at fd; -errno or fn's result. */
static int with_elf_fd(int fd, int (*fn)(Elf *, void *), void *arg)
{
	Elf *e;
	int rc;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return -ENOEXEC;
	rc = fn(e, arg);
	elf_end(e);
	return rc;
}

/* The same for the file of mapping m, or for a file of ours (m NULL). */
static int with_elf(pid_t pid, const struct tmap *m, const char *path,
		    int (*fn)(Elf *, void *), void *arg)
{
	int fd = m ? tmap_open(pid, m) : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	int rc;

	if (fd < 0)
		return m ? fd : -errno;
	rc = with_elf_fd(fd, fn, arg);
	close(fd);
	return rc;
}

/* The lowest PT_LOAD's page. */
static int first_load(Elf *e, void *arg)
{
	uint64_t *vaddr = arg;
	size_t n;

	if (elf_getphdrnum(e, &n))
		return -ENOEXEC;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) {
			*vaddr = ph.p_vaddr & ~4095ULL;
			return 0;
		}
	}
	return -ENOEXEC;
}

/*
 * The object whose loader bias is bias: the mapping of offset 0 whose file's
 * first PT_LOAD, moved by bias, is where that mapping starts, and the
 * mappings of the same file that follow it.
 */
int tobj_at(pid_t pid, const struct target_maps *tm, uint64_t bias, struct tobj *o)
{
	for (int i = 0; i < tm->n; i++) {
		const struct tmap *m = &tm->m[i];
		uint64_t v0 = 0;
		int k;

		if (m->off || !m->ino || m->start < bias || m->start - bias > (1ULL << 32) ||
		    with_elf(pid, m, NULL, first_load, &v0) || bias + v0 != m->start)
			continue;
		for (k = i + 1; k < tm->n && tm->m[k].ino == m->ino && tm->m[k].off; k++)
			;
		o->first = m;
		o->nmaps = k - i;
		o->bias = bias;
		return 0;
	}
	return -ENOENT;
}

struct sym_query {
	const char *const *names;
	size_t n;
	uint64_t *value, *size;
	size_t found;
};

static int find_sym(Elf *e, void *arg)
{
	struct sym_query *q = arg;
	Elf_Scn *scn = NULL;

	while ((scn = elf_nextscn(e, scn)) != NULL) {
		GElf_Shdr sh;
		Elf_Data *d;

		if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB) ||
		    !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym s;
			const char *nm;

			/* An IFUNC's value is its resolver, not the function:
			 * not what a caller wants. */
			if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || !s.st_value ||
			    GELF_ST_TYPE(s.st_info) == STT_GNU_IFUNC)
				continue;
			nm = elf_strptr(e, sh.sh_link, s.st_name);
			if (!nm)
				continue;
			for (size_t k = 0; k < q->n; k++)
				if (!q->value[k] && !strcmp(nm, q->names[k])) {
					q->value[k] = s.st_value;
					q->size[k] = s.st_size;
					if (++q->found == q->n)
						return 0;
				}
		}
	}
	return q->found ? 0 : -ENOENT;
}

int tobj_syms(pid_t pid, const struct tobj *o, const char *const *names, size_t n,
	      uint64_t *addr, uint64_t *size)
{
	struct sym_query q = { .names = names, .n = n, .value = addr, .size = size };
	int rc;

	memset(addr, 0, n * sizeof(*addr));
	memset(size, 0, n * sizeof(*size));
	rc = with_elf(pid, o->first, NULL, find_sym, &q);
	if (rc)
		return rc;
	for (size_t k = 0; k < n; k++)
		if (addr[k])
			addr[k] += o->bias;
	return 0;
}

int tobj_sym(pid_t pid, const struct tobj *o, const char *name, uint64_t *addr)
{
	uint64_t a, sz;
	int rc = tobj_syms(pid, o, &name, 1, &a, &sz);

	if (rc || !a)
		return rc ? rc : -ENOENT;
	*addr = a;
	return 0;
}

int file_sym(const char *path, const char *name, uint64_t *value)
{
	struct sym_query q = { .names = &name, .n = 1, .value = value };
	uint64_t sz = 0;
	int rc;

	q.size = &sz;
	*value = 0;
	rc = with_elf(0, NULL, path, find_sym, &q);
	return rc ? rc : *value ? 0 : -ENOENT;
}

struct tail_query {
	const struct tobj *o;
	uint64_t need, at;
};

/* The end of an executable PT_LOAD and the end of the page it ends in:
 * bytes mapped executable that are no code of the object. */
static int code_tail(Elf *e, void *arg)
{
	struct tail_query *q = arg;
	size_t n;

	if (elf_getphdrnum(e, &n))
		return -ENOEXEC;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		uint64_t end;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		end = (q->o->bias + ph.p_vaddr + ph.p_memsz + 15) & ~15ULL;
		for (int k = 0; k < q->o->nmaps; k++) {
			const struct tmap *m = &q->o->first[k];

			if (m->perms[2] == 'x' && end > m->start && end <= m->end &&
			    m->end - end >= q->need) {
				q->at = end;
				return 0;
			}
		}
	}
	return -ENOSPC;
}

int tobj_code_tail(pid_t pid, const struct tobj *o, size_t need, uint64_t *at)
{
	struct tail_query q = { .o = o, .need = need };
	int rc = with_elf(pid, o->first, NULL, code_tail, &q);

	if (!rc)
		*at = q.at;
	return rc;
}
