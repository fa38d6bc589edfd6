// SPDX-License-Identifier: GPL-2.0
/*
 * A module's function symbols, sorted by address, for naming the
 * locations of a profile. elfutils' dwfl_module_addrname looks through the
 * whole symbol table for every address (0.188: a linear scan), so naming
 * the few thousand locations of a program linked to libclang-cpp and
 * libLLVM (200,000 symbols) took seconds and was most of what a profile
 * of clang cost. Sorted once per file, each name is a binary search.
 *
 * The names are those libdwfl would give: among the symbols containing an
 * address, the one that starts closest below it, a global one before a
 * weak one before a local one; a function's name only (data symbols and
 * equally good aliases are left to libdwfl). An address no symbol
 * contains has no name, unless a sizeless symbol starts between it and
 * the last symbol below it: libdwfl may then name it by that one, and the
 * caller asks libdwfl
 * (rare: code is covered by sized symbols, or by none at all in a
 * stripped file's local functions, the common case of a miss).
 */
#include <elfutils/libdwfl.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct fsym {
	uint64_t lo, hi;	/* [lo, hi) */
	const char *name;	/* libdwfl's string, valid while the module is */
	int rank;		/* 0 global, 1 weak, 2 local */
	int code;		/* a function: the only kind named here */
	int idx;		/* its index in the table: the order libdwfl finds it */
};

struct hp_symtab {
	struct fsym *s;
	size_t n;
	uint64_t maxsize;	/* the largest symbol: how far back to look */
	uint64_t *z;		/* sizeless symbols' addresses, sorted */
	size_t nz;
};

static int rank_of(int bind)
{
	return bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
}

static int by_addr(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int by_lo(const void *a, const void *b)
{
	const struct fsym *x = a, *y = b;

	if (x->lo != y->lo)
		return x->lo < y->lo ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank - y->rank;
	return x->idx - y->idx;
}

struct hp_symtab *hp_symtab_build(void *dwmod)
{
	Dwfl_Module *mod = dwmod;
	struct hp_symtab *t;
	int n = mod ? dwfl_module_getsymtab(mod) : -1;

	if (n <= 1)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t || !(t->s = malloc((size_t)n * sizeof(*t->s))) ||
	    !(t->z = malloc((size_t)n * sizeof(*t->z)))) {
		hp_symtab_free(t);
		return NULL;
	}
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		Elf *elf;
		Dwarf_Addr bias;
		const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, &elf, &bias);
		int type = GELF_ST_TYPE(sym.st_info);

		/* The symbols libdwfl considers. */
		if (!name || !*name || shndx == SHN_UNDEF || type == STT_SECTION ||
		    type == STT_FILE || type == STT_TLS)
			continue;
		if (!sym.st_size) {
			t->z[t->nz++] = addr;
			continue;
		}
		t->s[t->n].lo = addr;
		t->s[t->n].hi = addr + sym.st_size;
		t->s[t->n].name = name;
		t->s[t->n].rank = rank_of(GELF_ST_BIND(sym.st_info));
		t->s[t->n].code = type == STT_FUNC || type == STT_GNU_IFUNC;
		t->s[t->n].idx = i;
		if (sym.st_size > t->maxsize)
			t->maxsize = sym.st_size;
		t->n++;
	}
	qsort(t->s, t->n, sizeof(*t->s), by_lo);
	qsort(t->z, t->nz, sizeof(*t->z), by_addr);
	return t;
}

/* Does a sizeless symbol start in [from, addr]? */
static int sizeless_in(const struct hp_symtab *t, uint64_t from, uint64_t addr)
{
	size_t lo = 0, hi = t->nz;

	while (lo < hi) {	/* the first at or above from */
		size_t mid = lo + (hi - lo) / 2;

		if (t->z[mid] < from)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < t->nz && t->z[lo] <= addr;
}

const char *hp_symtab_find(const struct hp_symtab *t, uint64_t addr, int *ask)
{
	size_t lo = 0, hi, i;
	const struct fsym *best = NULL;

	*ask = 1;
	if (!t)
		return NULL;
	/* The last symbol starting at or below addr. */
	hi = t->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->s[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* Back from there, as far as the largest symbol reaches: the first
	 * that contains addr starts closest below it; among those starting
	 * there, the sort put the best binding first. */
	for (i = lo; i-- > 0;) {
		const struct fsym *s = &t->s[i];

		if (addr - s->lo >= t->maxsize)
			break;
		if (addr < s->hi) {
			best = s;
			while (i > 0 && t->s[i - 1].lo == s->lo) {
				i--;
				if (addr < t->s[i].hi)
					best = &t->s[i];
			}
			break;
		}
	}
	/*
	 * Aliases (C++ complete and base object constructors, say): symbols
	 * alike in start, end and binding. libdwfl keeps the first it finds
	 * ("if all are equal prefer the first symbol found"), the lowest
	 * index, which the sort put first. A data symbol, or two that differ
	 * in their end: libdwfl's finer rules decide.
	 */
	if (best && !best->code)
		return NULL;
	for (const struct fsym *o = best ? best + 1 : NULL;
	     o && o < t->s + t->n && o->lo == best->lo && o->rank == best->rank; o++)
		if (addr < o->hi && o->hi != best->hi)
			return NULL;
	/* None contains it: libdwfl could only name it by a sizeless one
	 * past the last symbol below it. */
	*ask = !best && sizeless_in(t, lo ? t->s[lo - 1].lo : 0, addr);
	return best ? best->name : NULL;
}

void hp_symtab_free(struct hp_symtab *t)
{
	if (t) {
		free(t->s);
		free(t->z);
	}
	free(t);
}
