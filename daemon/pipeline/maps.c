// SPDX-License-Identifier: GPL-2.0
/*
 * Per-process maps snapshots, read from the /proc/<pid>/maps fd the process
 * deposited (pread from offset 0 each time: the fd stays valid across
 * re-reads and needs no path lookup in our namespace). Every file-backed
 * mapping gets its ELF file opened now, checked against the inode maps
 * lists, so samples unwound after the process exited still find their code
 * and unwind tables.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "internal.h"

/*
 * A bigger maps file is hostile: the kernel's default vm.max_map_count
 * (65530 mappings) at about 150 bytes a line is under 10 MiB.
 */
#define HP_MAPS_MAX_BYTES	(16U << 20)

static char *slurp(int fd, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);

	if (!buf)
		return NULL;
	for (;;) {
		ssize_t r;

		if (n == cap) {
			char *nb;

			if (cap >= HP_MAPS_MAX_BYTES)
				break;
			cap *= 2;
			nb = realloc(buf, cap + 1);
			if (!nb) {
				free(buf);
				return NULL;
			}
			buf = nb;
		}
		r = pread(fd, buf + n, cap - n, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += r;
	}
	buf[n] = 0;
	*len = n;
	return buf;
}

int hp_maps_parse_line(const char *line, struct hp_mapping *m, char *path,
		       size_t pathlen, unsigned *maj, unsigned *min,
		       unsigned long *ino)
{
	char perms[8];
	uint64_t start, end, off;
	int n = 0;

	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s %" SCNx64 " %x:%x %lu %n",
		   &start, &end, perms, &off, maj, min, ino, &n) < 7 || start >= end)
		return -1;
	memset(m, 0, sizeof(*m));
	m->start = start;
	m->end = end;
	m->off = off;
	m->prot = (perms[0] == 'r') | (perms[1] == 'w') << 1 | (perms[2] == 'x') << 2;
	path[0] = 0;
	if (n > 0) {
		const char *p = line + n;
		size_t l = strcspn(p, "\n");

		if (l >= pathlen)
			l = pathlen - 1;
		memcpy(path, p, l);
		path[l] = 0;
	}
	return 0;
}

static struct hp_elf *find_old(const struct hp_maps *old, const char *path,
			       unsigned long ino)
{
	size_t i;

	if (!old)
		return NULL;
	for (i = 0; i < old->n; i++)
		if (old->m[i].elf && old->m[i].elf->ino == ino && old->m[i].path &&
		    !strcmp(old->m[i].path, path))
			return hp_elf_ref(old->m[i].elf);
	return NULL;
}

static struct hp_elf *open_elf(const struct hp_mapping *m, const char *path,
			       unsigned maj, unsigned min, unsigned long ino,
			       const struct hp_target *t, int exe_fd, struct hp_elfcache *c)
{
	dev_t dev = makedev(maj, min);
	struct hp_elf *e;
	char alt[4200];
	struct stat st;
	int fd;

	/*
	 * First the file the kernel says is mapped there (needs the
	 * privileges a system daemon has): a maps file forged by a hostile
	 * client, or a path renamed since, then cannot make us read files
	 * that process could not.
	 */
	snprintf(alt, sizeof(alt), "map_files/%llx-%llx",
		 (unsigned long long)m->start, (unsigned long long)m->end);
	if (t->proc_fd >= 0) {
		fd = hp_open_regular(t->proc_fd, alt);
	} else if (t->pid > 0) {
		snprintf(alt, sizeof(alt), "/proc/%d/map_files/%llx-%llx", (int)t->pid,
			 (unsigned long long)m->start, (unsigned long long)m->end);
		fd = hp_open_regular(AT_FDCWD, alt);
	} else {
		fd = -1;
	}
	if (fd >= 0) {
		e = hp_elf_open(c, path, fd, (dev_t)-1, ino);
		if (e)
			return e;
	}
	/* The executable, even if deleted or unreachable by path. */
	if (exe_fd >= 0 && !fstat(exe_fd, &st) && S_ISREG(st.st_mode) && st.st_ino == ino) {
		fd = fcntl(exe_fd, F_DUPFD_CLOEXEC, 0);
		if (fd >= 0) {
			e = hp_elf_open(c, path, fd, (dev_t)-1, ino);
			if (e)
				return e;
		}
	}
	/*
	 * Paths are the process's word, and files may be swapped under them:
	 * open by path only for a process of our own user, who could open
	 * the same files anyway (a private daemon without map_files access).
	 */
	if (!t->paths_ok)
		return NULL;
	e = hp_elf_open(c, path, -1, dev, ino);
	if (e)
		return e;
	/* Another mount namespace: look through the process's root. */
	if (t->pid > 0) {
		snprintf(alt, sizeof(alt), "/proc/%d/root%s", (int)t->pid, path);
		e = hp_elf_open(c, alt, -1, dev, ino);
		if (e)
			return e;
	}
	/* Overlay file systems report another device: match the inode only. */
	return hp_elf_open(c, path, -1, (dev_t)-1, ino);
}

static void set_bias(struct hp_mapping *m)
{
	const struct hp_elf *e = m->elf;
	int i;

	for (i = 0; i < e->nseg; i++) {
		uint64_t lo = e->seg[i].off & ~4095ULL;

		if (m->off >= lo && m->off < e->seg[i].off + e->seg[i].filesz) {
			/* file offset P is at start + (P - off); vaddr PV at bias + PV */
			m->bias = m->start + e->seg[i].off - m->off - e->seg[i].vaddr;
			m->bias_ok = 1;
			return;
		}
	}
}

/*
 * The file we opened must be what the process mapped: the inode matched;
 * also compare the build id with the bytes in the process's memory when it
 * can be read (a file replaced in place keeps its inode). Returns 0 if it
 * matches or cannot be checked, -1 on a mismatch.
 */
static int check_build_id(const struct hp_mapping *m, int mem_fd)
{
	const struct hp_elf *e = m->elf;
	uint8_t mem[64];
	uint64_t at;

	if (mem_fd < 0 || !e->build_id_len || !e->build_id_vaddr || !m->bias_ok)
		return 0;
	at = e->build_id_vaddr + m->bias;
	if (pread(mem_fd, mem, e->build_id_len, (off_t)at) != (ssize_t)e->build_id_len)
		return 0;
	return memcmp(mem, e->build_id, e->build_id_len) ? -1 : 0;
}

int hp_maps_read(struct hp_maps *out, const struct hp_maps *old, int maps_fd,
		 pid_t pid, int exe_fd, int mem_fd, struct hp_elfcache *c)
{
	struct hp_target t = { .pid = pid, .proc_fd = -1, .paths_ok = 1 };

	return hp_maps_read_at(out, old, maps_fd, &t, exe_fd, mem_fd, c);
}

int hp_maps_read_at(struct hp_maps *out, const struct hp_maps *old, int maps_fd,
		    const struct hp_target *t, int exe_fd, int mem_fd, struct hp_elfcache *c)
{
	size_t len, cap = 0;
	char *buf, *line, *save = NULL;
	char path[4096];

	memset(out, 0, sizeof(*out));
	if (maps_fd < 0)
		return -EBADF;
	buf = slurp(maps_fd, &len);
	if (!buf)
		return -ENOMEM;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		struct hp_mapping m;
		unsigned maj, min;
		unsigned long ino;

		if (hp_maps_parse_line(line, &m, path, sizeof(path), &maj, &min, &ino))
			continue;
		if (out->n && m.start < out->m[out->n - 1].end)
			continue;	/* not sorted: not a real maps file */
		if (path[0]) {
			m.path = strdup(path);
			if (!m.path)
				break;
		}
		if (path[0] == '/' && ino && !strstr(path, " (deleted)")) {
			const struct hp_mapping *prev = out->n ? &out->m[out->n - 1] : NULL;

			/*
			 * A library is mapped as four or five neighbours (text,
			 * data, relro, ...): the ELF that the first of them
			 * opened and checked serves the others, which saves four
			 * system calls per mapping while the process waits for
			 * the answer to its hello. Another bias would be another
			 * load of the file, whose build id is checked again.
			 */
			if (prev && prev->elf && prev->elf->ino == ino && prev->path &&
			    !strcmp(prev->path, path)) {
				m.elf = hp_elf_ref(prev->elf);
				set_bias(&m);
				if (m.bias_ok && (!prev->bias_ok || m.bias != prev->bias) &&
				    check_build_id(&m, mem_fd)) {
					hp_elf_put(m.elf);
					m.elf = NULL;
					m.bias_ok = 0;
				}
			} else if ((m.elf = find_old(old, path, ino))) {
				set_bias(&m);
			} else {
				m.elf = open_elf(&m, path, maj, min, ino, t, exe_fd, c);
				if (m.elf) {
					set_bias(&m);
					if (check_build_id(&m, mem_fd)) {
						hp_elf_put(m.elf);
						m.elf = NULL;
						m.bias_ok = 0;
					}
				}
			}
		}
		if (out->n == cap) {
			struct hp_mapping *nm;

			cap = cap ? cap * 2 : 64;
			nm = realloc(out->m, cap * sizeof(*nm));
			if (!nm) {
				free(m.path);
				hp_elf_put(m.elf);
				break;
			}
			out->m = nm;
		}
		out->m[out->n++] = m;
	}
	free(buf);
	return out->n ? 0 : -ENOENT;
}

int hp_maps_copy(struct hp_maps *out, const struct hp_maps *in)
{
	size_t i;

	memset(out, 0, sizeof(*out));
	if (!in->n)
		return 0;
	out->m = calloc(in->n, sizeof(*out->m));
	if (!out->m)
		return -ENOMEM;
	for (i = 0; i < in->n; i++) {
		out->m[i] = in->m[i];
		out->m[i].path = in->m[i].path ? strdup(in->m[i].path) : NULL;
		out->m[i].elf = hp_elf_ref(in->m[i].elf);
		out->n++;
		if (in->m[i].path && !out->m[i].path) {
			hp_maps_free(out);
			return -ENOMEM;
		}
	}
	return 0;
}

const struct hp_mapping *hp_maps_find(const struct hp_maps *mp, uint64_t addr)
{
	size_t lo = 0, hi = mp->n;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		const struct hp_mapping *m = &mp->m[mid];

		if (addr < m->start)
			hi = mid;
		else if (addr >= m->end)
			lo = mid + 1;
		else
			return m;
	}
	return NULL;
}

void hp_maps_free(struct hp_maps *mp)
{
	size_t i;

	for (i = 0; i < mp->n; i++) {
		free(mp->m[i].path);
		hp_elf_put(mp->m[i].elf);
	}
	free(mp->m);
	memset(mp, 0, sizeof(*mp));
}
