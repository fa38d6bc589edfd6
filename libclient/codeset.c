// SPDX-License-Identifier: GPL-2.0
/*
 * The code set: which 2 MiB granules of the address space hold executable
 * mappings (codeset.h says what it is for). Built from /proc/self/maps
 * with plain reads into static buffers: it runs inside an allocation hook
 * (the config poll), where nothing may allocate.
 *
 * A superset of the code is fine (a data word that shares a granule with
 * code, or whose granule's bit in the filter is a code granule's, is
 * compared with the previous sample when it need not be: a missed chance,
 * never a wrong claim). Code mapped after the set was built (a
 * dlopen, a JIT's new pages) is not in it: the daemon finds the claims
 * that leaned on such a word and asks for a new set (uapi,
 * HEAPPROFD_ALLOC_STACK_SAME).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "codeset.h"

struct hp_codeset *hp_code_cur;

static struct hp_codeset tables[2];
static uint64_t granules[HEAPPROFD_CODE_MAX];
static uint32_t last_gen;
static char buf[16384];

/* Add a granule to the list; -1 when the set is full. */
static int add(struct hp_codeset *c, uint64_t g)
{
	/* maps is sorted: a granule shared by neighbours comes twice in a row */
	if (c->n && granules[c->n - 1] == g)
		return 0;
	if (c->n == HEAPPROFD_CODE_MAX)
		return -1;
	granules[c->n++] = g;
	return 0;
}

/* The filter from the list. */
static void fill(struct hp_codeset *c)
{
	for (uint32_t k = 0; k < c->n; k++) {
		uint32_t b = hp_code_bit(granules[k] << HEAPPROFD_CODE_SHIFT);

		__atomic_store_n(&c->bits[b / 64], c->bits[b / 64] | 1ULL << (b % 64),
				 __ATOMIC_RELAXED);
	}
}

/*
 * Does a line's code come from a file (or the vDSO)? p points after its
 * address range: " perms offset dev inode path". Code a program made
 * itself (anonymous or memfd pages: a JIT) is not in a set: its unwinds
 * read the process's memory, which nothing here can compare, so such a
 * process makes no same-path records at all.
 */
static int file_code(const char *p, const char *e)
{
	int field = 0;

	for (; p < e && field < 5; p++)
		if (*p == ' ' && p + 1 < e && p[1] != ' ')
			field++;
	/* p is at the path's first character, or at the end (no path) */
	if (p >= e)
		return 0;
	if (*p == '[')
		return e - p == 6 && !memcmp(p, "[vdso]", 6);
	return *p == '/' && !(e - p >= 7 && !memcmp(p, "/memfd:", 7));
}

/* One line of maps: "start-end perms ...". Its granules if executable. */
static int line(struct hp_codeset *c, const char *l, const char *e)
{
	unsigned long long a = 0, b = 0;
	const char *p = l;

	while (p < e && *p != '-')
		a = a * 16 + (uint64_t)(*p <= '9' ? *p - '0' : (*p | 0x20) - 'a' + 10), p++;
	for (p++; p < e && *p != ' '; p++)
		b = b * 16 + (uint64_t)(*p <= '9' ? *p - '0' : (*p | 0x20) - 'a' + 10);
	if (p + 4 > e || b <= a || p[3] != 'x')
		return 0;
	if (a >> 63)
		return 0;	/* the kernel's half ([vsyscall]): never on a stack */
	if (b > HEAPPROFD_CODE_VA_MASK + 1)
		return -1;	/* code the masked rule cannot name: no set */
	if (!file_code(p, e))
		return -1;	/* code made at run time (a JIT): no set */
	for (uint64_t g = a >> HEAPPROFD_CODE_SHIFT; g <= (b - 1) >> HEAPPROFD_CODE_SHIFT; g++)
		if (add(c, g))
			return -1;
	return 0;
}

static int build(struct hp_codeset *c)
{
	size_t have = 0;
	ssize_t n;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -1;
	while (!rc && (n = read(fd, buf + have, sizeof(buf) - have)) > 0) {
		char *l = buf, *e = buf + have + n, *nl;

		while ((nl = memchr(l, '\n', (size_t)(e - l))) != NULL) {
			if (line(c, l, nl)) {
				rc = -1;
				break;
			}
			l = nl + 1;
		}
		have = (size_t)(e - l);
		memmove(buf, l, have);
		if (have == sizeof(buf))
			rc = -1;	/* a line longer than the buffer */
	}
	if (!rc && have && line(c, buf, buf + have))
		rc = -1;
	close(fd);
	return rc;
}

int hp_codeset_refresh(void)
{
	struct hp_codeset *c = hp_code_cur == &tables[0] ? &tables[1] : &tables[0];
	uint32_t gen = last_gen + 1 ? last_gen + 1 : 1;

	/* A reader still in this table sees generation 0 and claims nothing. */
	__atomic_store_n(&c->gen, 0, __ATOMIC_RELEASE);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	memset(c->bits, 0, sizeof(c->bits));
	c->n = 0;
	if (build(c) || (fill(c), hp_write_code(gen, granules, c->n))) {
		__atomic_store_n(&hp_code_cur, NULL, __ATOMIC_RELEASE);
		return -1;
	}
	last_gen = gen;
	__atomic_store_n(&c->gen, gen, __ATOMIC_RELEASE);
	__atomic_store_n(&hp_code_cur, c, __ATOMIC_RELEASE);
	hp_debug("code set %u: %u granules", gen, c->n);
	return 0;
}

void hp_codeset_forget(void)
{
	__atomic_store_n(&hp_code_cur, NULL, __ATOMIC_RELEASE);
}
