// SPDX-License-Identifier: GPL-2.0
/*
 * The running process's mappings (/proc/PID/maps) and the symbols of the
 * objects mapped there (their ELF files' symbol tables, through libelf),
 * turned into addresses in that process.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
		unsigned long long s, e, o;
		int pos = 0;

		if (sscanf(line, "%llx-%llx %4s %llx %*s %*s %n", &s, &e, m.perms, &o, &pos) < 4)
			continue;
		m.start = s;
		m.end = e;
		m.off = o;
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

const struct tmap *tmaps_find(const struct target_maps *tm, const char *suffix)
{
	size_t sl = strlen(suffix);

	for (int i = 0; i < tm->n; i++) {
		size_t pl = strlen(tm->m[i].path);

		if (pl >= sl && !strcmp(tm->m[i].path + pl - sl, suffix) &&
		    (pl == sl || suffix[0] == '/' || tm->m[i].path[pl - sl - 1] == '/'))
			return &tm->m[i];
	}
	return NULL;
}

/* The file of a mapping as the process sees it (another mount namespace
 * included), or the path itself when /proc/PID/root is not ours to read. */
static int open_in_target(pid_t pid, const char *path)
{
	char p[1100];
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/root%s", (int)pid, path);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd;
}

/* Apply fn to the ELF of path; -errno or fn's result. */
static int with_elf(pid_t pid, const char *path, int (*fn)(Elf *, void *), void *arg)
{
	Elf *e;
	int fd, rc;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	fd = open_in_target(pid, path);
	if (fd < 0)
		return -errno;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e) {
		close(fd);
		return -ENOEXEC;
	}
	rc = fn(e, arg);
	elf_end(e);
	close(fd);
	return rc;
}

/* The lowest PT_LOAD's page and file offset. */
struct first_load {
	uint64_t vaddr, off;
};

static int first_load(Elf *e, void *arg)
{
	struct first_load *fl = arg;
	size_t n;

	if (elf_getphdrnum(e, &n))
		return -ENOEXEC;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) {
			fl->vaddr = ph.p_vaddr & ~4095ULL;
			fl->off = ph.p_offset & ~4095ULL;
			return 0;
		}
	}
	return -ENOEXEC;
}

int elf_load0(pid_t pid, const char *path, uint64_t *vaddr, uint64_t *off)
{
	struct first_load fl = { 0, 0 };
	int rc = with_elf(pid, path, first_load, &fl);

	*vaddr = fl.vaddr;
	*off = fl.off;
	return rc;
}

int tmaps_bias_at(const struct target_maps *tm, const char *path, uint64_t vaddr, uint64_t off,
		  uint64_t *bias)
{
	for (int i = 0; i < tm->n; i++)
		if (!strcmp(tm->m[i].path, path) && tm->m[i].off == off) {
			*bias = tm->m[i].start - vaddr;
			return 0;
		}
	return -ENOENT;
}

int tmaps_bias(pid_t pid, const struct target_maps *tm, const struct tmap *mp, uint64_t *bias)
{
	uint64_t vaddr, off;
	int rc = elf_load0(pid, mp->path, &vaddr, &off);

	return rc ? rc : tmaps_bias_at(tm, mp->path, vaddr, off, bias);
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

int target_syms(pid_t pid, const char *path, uint64_t bias, const char *const *names, size_t n,
		uint64_t *addr, uint64_t *size)
{
	struct sym_query q = { .names = names, .n = n, .value = addr, .size = size };
	int rc;

	memset(addr, 0, n * sizeof(*addr));
	memset(size, 0, n * sizeof(*size));
	rc = with_elf(pid, path, find_sym, &q);
	if (rc)
		return rc;
	for (size_t k = 0; k < n; k++)
		if (addr[k])
			addr[k] += bias;
	return 0;
}

int target_sym(pid_t pid, const char *path, uint64_t bias, const char *name,
	       uint64_t *addr, uint64_t *size)
{
	uint64_t a, sz;
	int rc = target_syms(pid, path, bias, &name, 1, &a, &sz);

	if (rc || !a)
		return rc ? rc : -ENOENT;
	*addr = a;
	if (size)
		*size = sz;
	return 0;
}
