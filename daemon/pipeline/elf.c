// SPDX-License-Identifier: GPL-2.0
/*
 * The ELF file cache. Files are opened when a maps snapshot is taken (the
 * process may be gone by the time its samples are unwound), checked against
 * the inode /proc/<pid>/maps names, mapped read-only once and shared by all
 * processes that map them. The unwinder reads unwind tables and code from
 * here instead of the process when it can (no system call, and it still
 * works after the process exited); the books symbolize through it.
 *
 * Everything in the file is untrusted: headers are bounds-checked. The
 * file itself may be hostile too (the daemon runs as root, the process
 * does not): nothing is opened that is not a regular file (a FIFO would
 * block us, a device node's open has effects), and a file that somebody
 * other than root or us could shrink is read into a sealed private copy
 * rather than mapped, since truncating a mapped file raises SIGBUS in the
 * reader (our parser, libdw).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* The largest file copied rather than mapped (see stable_copy). */
#define HP_ELF_COPY_MAX		(1ULL << 30)

int hp_open_regular(int dirfd, const char *path)
{
	char self[64];
	struct stat st;
	int pfd, fd;

	/* O_PATH opens nothing: no FIFO wait, no driver's open. */
	pfd = openat(dirfd, path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	if (fstat(pfd, &st) || !S_ISREG(st.st_mode)) {
		close(pfd);
		errno = EINVAL;
		return -1;
	}
	/* Reopen that very inode for reading; permissions are checked again. */
	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	close(pfd);
	return fd;
}

/*
 * Could anybody but root and this daemon make the file shorter while we
 * have it mapped? Its owner can, and so can anyone its mode lets write.
 */
static int shrinkable_by_others(const struct stat *st)
{
	return (st->st_uid != 0 && st->st_uid != geteuid()) ||
	       (st->st_mode & (S_IWGRP | S_IWOTH));
}

/*
 * A private, sealed copy of fd's size bytes in a memfd: nobody can shrink
 * it. Returns the memfd, or -1 (too big, or the file changed under us).
 */
static int stable_copy(int fd, off_t size)
{
	off_t off = 0;
	int mfd;

	if ((unsigned long long)size > HP_ELF_COPY_MAX)
		return -1;
	mfd = memfd_create("heapprofd-elf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return -1;
	while (off < size) {
		ssize_t n = sendfile(mfd, fd, &off, (size_t)(size - off));

		if (n <= 0 && !(n < 0 && errno == EINTR)) {
			close(mfd);
			return -1;
		}
	}
	if (fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL)) {
		close(mfd);
		return -1;
	}
	return mfd;
}

void hp_elfcache_init(struct hp_elfcache *c)
{
	pthread_mutex_init(&c->lock, NULL);
	c->head = NULL;
	c->symd = NULL;
}

void hp_elfcache_fini(struct hp_elfcache *c)
{
	/* Entries leave the list when their last reference goes. */
	pthread_mutex_destroy(&c->lock);
}

static int in_file(const struct hp_elf *e, uint64_t off, uint64_t n)
{
	return off <= e->size && n <= e->size - off;
}

int hp_parse_build_id_note(const uint8_t *p, size_t len, uint8_t *out, size_t *outlen,
			   size_t *desc_off)
{
	size_t o = 0;

	while (o + sizeof(Elf64_Nhdr) <= len) {
		Elf64_Nhdr nh;
		size_t name_o, desc_o;

		memcpy(&nh, p + o, sizeof(nh));
		name_o = o + sizeof(nh);
		desc_o = name_o + (((size_t)nh.n_namesz + 3) & ~(size_t)3);
		if (nh.n_namesz > len || nh.n_descsz > len || desc_o > len ||
		    nh.n_descsz > len - desc_o)
			return -1;
		if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
		    !memcmp(p + name_o, "GNU", 4) && nh.n_descsz &&
		    nh.n_descsz <= 64) {
			memcpy(out, p + desc_o, nh.n_descsz);
			*outlen = nh.n_descsz;
			if (desc_off)
				*desc_off = desc_o;
			return 0;
		}
		o = desc_o + (((size_t)nh.n_descsz + 3) & ~(size_t)3);
	}
	return -1;
}

/* .eh_frame_hdr: version 1, a udata4 count, a datarel|sdata4 table. */
static void parse_ehf(struct hp_elf *e, const Elf64_Phdr *ph)
{
	uint64_t off = ph->p_offset;
	const uint8_t *h;
	uint32_t ptrsz, count;

	if (!in_file(e, off, 12) || ph->p_filesz < 12)
		return;
	h = e->img + off;
	if (h[0] != 1 || h[2] != 0x03 /* udata4 */ || h[3] != 0x3b /* datarel|sdata4 */)
		return;
	switch (h[1] & 0x0f) {
	case 0x03: case 0x0b: ptrsz = 4; break;	/* udata4, sdata4 */
	case 0x04: case 0x0c: ptrsz = 8; break;	/* udata8, sdata8 */
	default: return;
	}
	if (!in_file(e, off, 4 + ptrsz + 4))
		return;
	memcpy(&count, h + 4 + ptrsz, 4);
	if (!count || (uint64_t)count * 8 > ph->p_filesz ||
	    !in_file(e, off + 8 + ptrsz, (uint64_t)count * 8))
		return;
	e->ehf_vaddr = ph->p_vaddr;
	e->ehf_table_vaddr = ph->p_vaddr + 8 + ptrsz;
	e->ehf_count = count;
	e->has_ehf = 1;
}

static int parse(struct hp_elf *e)
{
	Elf64_Ehdr eh;
	int i, have_text = 0;

	if (e->size < sizeof(eh))
		return -1;
	memcpy(&eh, e->img, sizeof(eh));
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    !in_file(e, eh.e_phoff, (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr)))
		return -1;
	e->is_dyn = eh.e_type == ET_DYN;
	for (i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		memcpy(&ph, e->img + eh.e_phoff + (size_t)i * sizeof(ph), sizeof(ph));
		if (ph.p_type == PT_LOAD && e->nseg < HP_ELF_MAX_SEGS) {
			e->seg[e->nseg].vaddr = ph.p_vaddr;
			e->seg[e->nseg].memsz = ph.p_memsz;
			e->seg[e->nseg].off = ph.p_offset;
			e->seg[e->nseg].filesz = ph.p_filesz;
			e->seg[e->nseg].flags = ph.p_flags;
			e->nseg++;
			if (ph.p_flags & PF_X) {
				if (!have_text || ph.p_vaddr < e->text_lo) {
					e->text_lo = ph.p_vaddr;
					e->text_off = ph.p_offset;
				}
				if (!have_text || ph.p_vaddr + ph.p_memsz > e->text_hi)
					e->text_hi = ph.p_vaddr + ph.p_memsz;
				have_text = 1;
			}
		} else if (ph.p_type == PT_NOTE && !e->build_id_len &&
			   in_file(e, ph.p_offset, ph.p_filesz)) {
			size_t d = 0;

			if (!hp_parse_build_id_note(e->img + ph.p_offset, ph.p_filesz,
						    e->build_id, &e->build_id_len, &d))
				e->build_id_vaddr = ph.p_vaddr + d;
		} else if (ph.p_type == PT_GNU_EH_FRAME) {
			parse_ehf(e, &ph);
		}
	}
	return e->nseg ? 0 : -1;
}

static void destroy(struct hp_elf *e)
{
	struct hp_hent *ent;

	if (e->copied_in)
		__atomic_sub_fetch(&e->copied_in->copied, e->size, __ATOMIC_RELAXED);
	if (e->img)
		munmap((void *)e->img, e->size);
	if (e->fd >= 0)
		close(e->fd);
	if (e->dwfl)
		hp_symbolize_release(e);
	hp_symcache_close(e);
	hp_hmap_for_each(&e->syms, ent) {
		struct hp_sym *sy = ent->v;

		while (sy) {
			struct hp_sym *nx = sy->caller;

			free(sy);
			sy = nx;
		}
	}
	hp_hmap_free(&e->syms);
	hp_strtab_free(&e->strs);
	pthread_mutex_destroy(&e->sym_lock);
	free(e->path);
	free(e);
}

struct hp_elf *hp_elf_names(const char *path)
{
	struct hp_elf *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->path = strdup(path);
	if (!e->path) {
		free(e);
		return NULL;
	}
	e->refs = 1;
	e->fd = -1;
	e->dwfl_state = -1;	/* nothing to look up: names come from syms */
	e->symcache_state = -1;
	e->symcache_fd = -1;
	pthread_mutex_init(&e->sym_lock, NULL);
	return e;
}

struct hp_elf *hp_elf_open(struct hp_elfcache *c, const char *path, int fd,
			   dev_t dev, ino_t ino)
{
	struct hp_elf *e;
	struct stat st;
	void *img;
	struct stat st2;
	int keep_fd, copy;

	if (fd < 0)
		fd = hp_open_regular(AT_FDCWD, path);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr) ||
	    (ino && (st.st_ino != ino ||
		     (dev != (dev_t)-1 && st.st_dev != dev)))) {
		close(fd);
		return NULL;
	}
	copy = shrinkable_by_others(&st);
	if (c) {
		pthread_mutex_lock(&c->lock);
		for (e = c->head; e; e = e->next)
			if (e->dev == st.st_dev && e->ino == st.st_ino &&
			    e->size == (size_t)st.st_size) {
				__atomic_add_fetch(&e->refs, 1, __ATOMIC_RELAXED);
				pthread_mutex_unlock(&c->lock);
				close(fd);
				return e;
			}
		pthread_mutex_unlock(&c->lock);
	}
	if (copy) {
		int mfd;

		/* The copies are memory the daemon holds: within their bound. */
		if (c && c->copy_max &&
		    __atomic_add_fetch(&c->copied, (uint64_t)st.st_size, __ATOMIC_RELAXED) > c->copy_max) {
			__atomic_sub_fetch(&c->copied, (uint64_t)st.st_size, __ATOMIC_RELAXED);
			close(fd);
			return NULL;
		}
		mfd = stable_copy(fd, st.st_size);
		close(fd);
		if (mfd < 0) {
			if (c && c->copy_max)
				__atomic_sub_fetch(&c->copied, (uint64_t)st.st_size, __ATOMIC_RELAXED);
			return NULL;
		}
		fd = mfd;
	}
	img = mmap(NULL, st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	e = img == MAP_FAILED ? NULL : calloc(1, sizeof(*e));
	if (!e) {
		if (img != MAP_FAILED)
			munmap(img, st.st_size);
		close(fd);
		if (copy && c && c->copy_max)
			__atomic_sub_fetch(&c->copied, (uint64_t)st.st_size, __ATOMIC_RELAXED);
		return NULL;
	}
	pthread_mutex_init(&e->sym_lock, NULL);
	e->refs = 1;
	e->fd = fd;
	if (copy && c && c->copy_max)
		e->copied_in = c;	/* destroy() gives its bytes back */
	/*
	 * Keep the fd only when the path will not find this file again (a
	 * deleted file, another mount namespace, a path under /proc that dies
	 * with the process); otherwise the mapping is enough, and the daemon
	 * does not run out of descriptors when it profiles the whole system.
	 */
	keep_fd = copy || !path || !strncmp(path, "/proc/", 6) || stat(path, &st2) ||
		  st2.st_ino != st.st_ino || st2.st_dev != st.st_dev;
	if (!keep_fd) {
		close(fd);
		e->fd = -1;
	}
	e->img = img;
	e->size = st.st_size;
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	e->owner = st.st_uid;
	e->path = strdup(path ? path : "?");
	/* Our own client: its frames (the malloc wrapper) are not call sites. */
	e->is_client = e->path && strstr(e->path, "libheapprofd_client") != NULL;
	if (!e->path || parse(e)) {
		destroy(e);
		return NULL;
	}
	if (c) {
		struct hp_elf *o;

		pthread_mutex_lock(&c->lock);
		/* Someone may have opened the same file meanwhile: keep one. */
		for (o = c->head; o; o = o->next)
			if (o->dev == e->dev && o->ino == e->ino && o->size == e->size) {
				__atomic_add_fetch(&o->refs, 1, __ATOMIC_RELAXED);
				pthread_mutex_unlock(&c->lock);
				destroy(e);
				return o;
			}
		e->cache = c;
		e->next = c->head;
		c->head = e;
		pthread_mutex_unlock(&c->lock);
	}
	return e;
}

struct hp_elf *hp_elf_ref(struct hp_elf *e)
{
	if (e)
		__atomic_add_fetch(&e->refs, 1, __ATOMIC_RELAXED);
	return e;
}

/* Frames from hp_unwind hold one reference per run of consecutive frames
 * in the same file: most of a stack is in one or two files, and each
 * reference is an atomic operation on a line shared by workers and books. */
void hp_uframes_put(struct hp_uframe *f, int n)
{
	for (int i = 0; i < n; i++)
		if (f[i].elf && (i == 0 || f[i].elf != f[i - 1].elf))
			hp_elf_put(f[i].elf);
}

void hp_uframes_get(struct hp_uframe *f, int n)
{
	for (int i = 0; i < n; i++)
		if (f[i].elf && (i == 0 || f[i].elf != f[i - 1].elf))
			hp_elf_ref(f[i].elf);
}

void hp_elf_put(struct hp_elf *e)
{
	struct hp_elfcache *c;

	if (!e)
		return;
	c = e->cache;
	if (c) {
		int r = __atomic_load_n(&e->refs, __ATOMIC_RELAXED);

		/* Not the last reference: no lock (this runs for every frame). */
		while (r > 1)
			if (__atomic_compare_exchange_n(&e->refs, &r, r - 1, 1,
							__ATOMIC_RELEASE, __ATOMIC_RELAXED))
				return;
		/* Maybe the last: under the lock, so a lookup cannot revive it. */
		pthread_mutex_lock(&c->lock);
		if (__atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL)) {
			pthread_mutex_unlock(&c->lock);
			return;
		}
		for (struct hp_elf **pp = &c->head; *pp; pp = &(*pp)->next)
			if (*pp == e) {
				*pp = e->next;
				break;
			}
		pthread_mutex_unlock(&c->lock);
	} else if (__atomic_sub_fetch(&e->refs, 1, __ATOMIC_ACQ_REL)) {
		return;
	}
	destroy(e);
}

int hp_elf_off_to_vaddr(const struct hp_elf *e, uint64_t off, uint64_t *vaddr)
{
	int i;

	for (i = 0; i < e->nseg; i++) {
		uint64_t lo = e->seg[i].off & ~4095ULL;

		if (off >= lo && off < e->seg[i].off + e->seg[i].filesz) {
			*vaddr = off - e->seg[i].off + e->seg[i].vaddr;
			return 0;
		}
	}
	return -1;
}

int hp_elf_vaddr_to_off(const struct hp_elf *e, uint64_t vaddr, uint64_t *off)
{
	int i;

	for (i = 0; i < e->nseg; i++)
		if (vaddr >= e->seg[i].vaddr && vaddr < e->seg[i].vaddr + e->seg[i].filesz) {
			*off = vaddr - e->seg[i].vaddr + e->seg[i].off;
			return 0;
		}
	return -1;
}

int hp_elf_read_vaddr(const struct hp_elf *e, uint64_t vaddr, void *dst, size_t n)
{
	uint64_t off;

	if (hp_elf_vaddr_to_off(e, vaddr, &off) || !in_file(e, off, n))
		return -1;
	memcpy(dst, e->img + off, n);
	return 0;
}

void hp_elf_build_id_hex(const struct hp_elf *e, char *buf, size_t len)
{
	static const char hx[] = "0123456789abcdef";
	size_t i;

	if (!len)
		return;
	for (i = 0; i < e->build_id_len && 2 * i + 2 < len; i++) {
		buf[2 * i] = hx[e->build_id[i] >> 4];
		buf[2 * i + 1] = hx[e->build_id[i] & 15];
	}
	buf[2 * i] = 0;
}
