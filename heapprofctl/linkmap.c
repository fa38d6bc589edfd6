// SPDX-License-Identifier: GPL-2.0
/*
 * The objects a process's dynamic loader has loaded, from the loader's own
 * list (the link map that debuggers read: the executable's DT_DEBUG entry
 * points at r_debug, whose r_map is the list), found through the auxiliary
 * vector the kernel gave the process at exec (where its program headers
 * are, where its loader is).
 *
 * attach calls functions of libc and the loader in the process: they are
 * taken from here, never from a file name in /proc/PID/maps, which any
 * program can give to a file of its own mapped wherever it likes. The list
 * is in the process's memory, so a program could forge it too; what it can
 * reach that way is its own code, run as itself (remote_call.c guards the
 * rest: an exec or a change of credentials during a call ends the attach).
 * Every read is bounded.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inject.h"

#define MAX_OBJS	4096	/* a link map longer than this is not believed */
#define MAX_DYN		1024
#define MAX_PHDRS	128

static int read_auxv(pid_t pid, uint64_t *phdr, uint64_t *phnum, uint64_t *base)
{
	uint64_t av[2 * 64];
	char p[64];
	ssize_t n;
	int fd;

	snprintf(p, sizeof(p), "/proc/%d/auxv", (int)pid);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, av, sizeof(av));
	close(fd);
	if (n < 16)
		return -EIO;
	*phdr = *phnum = *base = 0;
	for (ssize_t i = 0; i + 1 < n / 8; i += 2) {
		if (av[i] == AT_PHDR)
			*phdr = av[i + 1];
		else if (av[i] == AT_PHNUM)
			*phnum = av[i + 1];
		else if (av[i] == AT_BASE)
			*base = av[i + 1];
		else if (av[i] == AT_NULL)
			break;
	}
	return *phdr && *phnum ? 0 : -EIO;
}

/* r_debug's address: the executable's DT_DEBUG, which the loader fills. */
static int find_r_debug(pid_t pid, uint64_t phdr, uint64_t phnum, uint64_t *rd)
{
	Elf64_Phdr ph[MAX_PHDRS];
	uint64_t bias = 0, dyn = 0;
	int have_bias = 0;

	if (phnum > MAX_PHDRS || remote_read(pid, phdr, ph, phnum * sizeof(ph[0])))
		return -EIO;
	for (uint64_t i = 0; i < phnum; i++)
		if (ph[i].p_type == PT_PHDR) {
			bias = phdr - ph[i].p_vaddr;
			have_bias = 1;
		}
	for (uint64_t i = 0; i < phnum && have_bias; i++)
		if (ph[i].p_type == PT_DYNAMIC)
			dyn = bias + ph[i].p_vaddr;
	if (!dyn)
		return -ENOEXEC;
	for (int i = 0; i < MAX_DYN; i++) {
		Elf64_Dyn d;

		if (remote_read(pid, dyn + (uint64_t)i * sizeof(d), &d, sizeof(d)) ||
		    d.d_tag == DT_NULL)
			break;
		if (d.d_tag == DT_DEBUG) {
			*rd = d.d_un.d_ptr;
			return *rd ? 0 : -EAGAIN;
		}
	}
	return -ENOEXEC;
}

int linkmap_read(pid_t pid, struct linkmap *lm)
{
	uint64_t phdr, phnum, rd, at;
	struct r_debug r;
	int rc;

	memset(lm, 0, sizeof(*lm));
	if ((rc = read_auxv(pid, &phdr, &phnum, &lm->ldbase)) != 0)
		return rc;
	if (!lm->ldbase)
		return -ENOEXEC;	/* no interpreter: a static program */
	if ((rc = find_r_debug(pid, phdr, phnum, &rd)) != 0)
		return rc;
	if (remote_read(pid, rd, &r, sizeof(r)))
		return -EIO;
	at = (uint64_t)(uintptr_t)r.r_map;
	while (at && lm->n < MAX_OBJS) {
		struct link_map l;
		struct lobj *o;

		if (remote_read(pid, at, &l, sizeof(l)))
			return -EIO;
		if (!(lm->n & 63)) {
			struct lobj *no = realloc(lm->o, (size_t)(lm->n + 64) * sizeof(*no));

			if (!no) {
				linkmap_free(lm);
				return -ENOMEM;
			}
			lm->o = no;
		}
		o = &lm->o[lm->n++];
		memset(o, 0, sizeof(*o));
		o->lm = at;
		o->bias = (uint64_t)l.l_addr;
		if (l.l_name)
			remote_str(pid, (uint64_t)(uintptr_t)l.l_name, o->name, sizeof(o->name));
		at = (uint64_t)(uintptr_t)l.l_next;
	}
	return lm->n ? 0 : -ENOENT;
}

void linkmap_free(struct linkmap *lm)
{
	free(lm->o);
	lm->o = NULL;
	lm->n = 0;
}

const struct lobj *linkmap_find(const struct linkmap *lm, const char *base)
{
	for (int i = 0; i < lm->n; i++) {
		const char *slash = strrchr(lm->o[i].name, '/');

		if (!strcmp(slash ? slash + 1 : lm->o[i].name, base))
			return &lm->o[i];
	}
	return NULL;
}
