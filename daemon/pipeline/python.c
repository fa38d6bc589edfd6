// SPDX-License-Identifier: GPL-2.0
/*
 * Python frames (uapi HEAPPROFD_ALLOC_PYFRAMES): the code-object and
 * instruction addresses the client took from its thread's interpreter
 * frames become Python functions with their file and line, which replace
 * the native interpreter frames (_PyEval_EvalFrameDefault) of the unwound
 * stack, one call of the interpreter's C function by one run of Python
 * frames; native frames above and below stay.
 *
 * Everything is read from the process: the interpreter's file (its
 * exported symbols: the evaluation function's extent, the type objects,
 * Py_Version, from the ELF image the maps snapshot opened) and, through its
 * /proc/<pid>/mem, each code object once (name, file, first line, line
 * table), cached by address. All of it is hostile input: every object is
 * checked to be of the type it should be (its ob_type is the interpreter's
 * own type object), every length is bounded, a frame that does not check
 * out is left out (never named wrong), and a process whose frames mostly
 * do not check out loses its Python frames altogether, with a line in the
 * profile. Only CPython 3.11's layout is known (x86-64 and arm64, which lay
 * it out alike); another version is profiled natively, and the profile
 * says so.
 *
 * A code object freed and another made at its address while a profile runs
 * is taken for a new one when its instruction addresses fall outside the
 * old one's bytecode; one of the very same size at the very same address
 * keeps the old one's names (rare: code objects live as long as their
 * functions, which is mostly the program's life).
 *
 * The feeding thread resolves (hp_py_resolve) and may splice; workers
 * splice (hp_py_splice reads only what does not change once ready); the
 * books thread reads the comment (hp_py_comment). Names are kept in a file
 * of names (hp_elf_names), where the books and dumps find them as they do
 * any file's.
 */
#include <gelf.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* CPython 3.11, x86-64 and arm64 (Include/cpython/code.h, unicodeobject.h,
 * bytesobject.h). */
#define CO_TYPE		8	/* ob_type */
#define CO_SIZE		16	/* ob_size: code units */
#define CO_FIRSTLINENO	72
#define CO_FILENAME	112
#define CO_QUALNAME	128
#define CO_LINETABLE	136
#define CO_FIRSTTRACEABLE 168
#define CO_CODE		184	/* co_code_adaptive */
#define CO_HEAD		192
#define STR_LENGTH	16
#define STR_STATE	32
#define STR_ASCII_DATA	48
#define STR_COMPACT_DATA 72
#define BYTES_SIZE	16
#define BYTES_DATA	32

/* Bounds on what a code object may claim. */
#define PY_MAX_CODE_UNITS	(1U << 22)
#define PY_MAX_LINETABLE	(1U << 20)
#define PY_MAX_NAME		1024	/* characters kept */
/* Memory bounds: code objects cached (and their bytes: the cache is
 * emptied beyond), (code, line) pairs named (and their names' bytes, kept
 * as long as the process: no new name beyond). */
#define PY_MAX_CODES		65536
#define PY_MAX_CODE_BYTES	(32ULL << 20)
#define PY_MAX_KEYS		(1U << 20)
#define PY_MAX_NAME_BYTES	(32ULL << 20)
/* A code object up to this many code units keeps the line of each unit,
 * decoded once (4 bytes a unit); a larger one's line table is walked at
 * every look-up. */
#define PY_LINES_MAX_UNITS	(1U << 16)
/*
 * The keys of the frames seen last, by (code, instruction) address: a
 * program's samples come back to the same few dozen frames, and their two
 * hash look-ups (the code object, then its line's key) were most of the
 * resolving. An entry holds as long as the code object cached at its
 * address does: letting go of one forgets them all (a new generation).
 */
#define PY_KEY_CACHE		1024	/* power of two */

struct pycode {
	uint64_t addr;
	uint32_t ncode, first_traceable;
	int firstline;
	const char *func, *file;	/* interned in the names file */
	uint8_t *lt;
	uint32_t lt_len;
	int32_t *lines;		/* line of each code unit, or NULL */
};

struct hp_py {
	int state;		/* 0 not looked at yet, 1 ready, -1 off */
	int maps_fd, mem_fd, exe_fd;
	struct hp_target t;
	struct hp_elfcache *c;
	uint64_t eval_lo, eval_hi;	/* the evaluation function, in the process */
	uint64_t code_type, str_type, bytes_type;
	unsigned long version;
	struct hp_elf *names;
	struct hp_hmap codes;		/* addr -> struct pycode */
	struct hp_hmap keys;		/* (code addr, line) -> key */
	uint64_t nkeys;
	uint64_t code_bytes, name_bytes;	/* what the two hold */
	pthread_mutex_t lock;		/* note and figures, for the books thread */
	char note[200];
	uint64_t frames_ok, frames_bad, samples;
	/* feeding thread: frames' keys by (code, instr), valid while their
	 * gen is seen_gen (a code object let go of moves it on: O(1), however
	 * often a process makes the daemon read a code object again) */
	uint32_t seen_gen;
	struct { uint64_t code, instr, key; uint32_t gen; } seen[PY_KEY_CACHE];
};

static void close_fds(const int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

struct hp_py *hp_py_new(const struct hp_target *t, int maps_fd, int mem_fd, int exe_fd,
			struct hp_elfcache *c)
{
	struct hp_py *py = calloc(1, sizeof(*py));

	if (!py) {
		close_fds((int[]){ maps_fd, mem_fd, exe_fd, t->proc_fd }, 4);
		return NULL;
	}
	py->t = *t;
	py->maps_fd = maps_fd;
	py->mem_fd = mem_fd;
	py->exe_fd = exe_fd;
	py->c = c;
	py->seen_gen = 1;	/* the calloc'd entries (gen 0) hold nothing */
	pthread_mutex_init(&py->lock, NULL);
	return py;
}

/* The frames' keys remembered lean on code objects read before: forget
 * them all. */
static void forget_keys(struct hp_py *py)
{
	if (++py->seen_gen)
		return;
	memset(py->seen, 0, sizeof(py->seen));	/* once in 2^32: gen 0 anew */
	py->seen_gen = 1;
}

static void drop_codes(struct hp_py *py)
{
	struct hp_hent *e;

	forget_keys(py);

	hp_hmap_for_each(&py->codes, e) {
		struct pycode *pc = e->v;

		free(pc->lines);
		free(pc->lt);
		free(pc);
	}
	hp_hmap_free(&py->codes);
	__atomic_store_n(&py->code_bytes, 0, __ATOMIC_RELAXED);
}

static size_t code_size(const struct pycode *pc)
{
	return sizeof(*pc) + pc->lt_len + 2 * sizeof(struct hp_hent) +
	       (pc->lines ? pc->ncode * sizeof(*pc->lines) : 0);
}

static void free_code(struct hp_py *py, struct pycode *pc)
{
	forget_keys(py);
	__atomic_store_n(&py->code_bytes, py->code_bytes - code_size(pc), __ATOMIC_RELAXED);
	free(pc->lines);
	free(pc->lt);
	free(pc);
}

size_t hp_py_mem(const struct hp_py *py)
{
	return py ? sizeof(*py) + __atomic_load_n(&py->code_bytes, __ATOMIC_RELAXED) +
		    __atomic_load_n(&py->name_bytes, __ATOMIC_RELAXED) : 0;
}

void hp_py_free(struct hp_py *py)
{
	if (!py)
		return;
	drop_codes(py);
	hp_hmap_free(&py->keys);
	hp_elf_put(py->names);
	close_fds((int[]){ py->maps_fd, py->mem_fd, py->exe_fd, py->t.proc_fd }, 4);
	pthread_mutex_destroy(&py->lock);
	free(py);
}

static void set_off(struct hp_py *py, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void set_off(struct hp_py *py, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&py->lock);
	va_start(ap, fmt);
	vsnprintf(py->note, sizeof(py->note), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&py->lock);
	__atomic_store_n(&py->state, -1, __ATOMIC_RELEASE);
}

/* A defined symbol of e's dynamic symbol table: its value and size. */
static int dynsym(const struct hp_elf *e, const char *name, uint64_t *val, uint64_t *size)
{
	Elf *el;
	Elf_Scn *scn = NULL;
	int found = 0;

	if (!e->img)
		return 0;
	el = elf_memory((char *)e->img, e->size);
	if (!el)
		return 0;
	while (!found && (scn = elf_nextscn(el, scn))) {
		GElf_Shdr sh;
		Elf_Data *d;
		size_t n;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		d = elf_getdata(scn, NULL);
		if (!d)
			continue;
		n = d->d_size / sh.sh_entsize;
		for (size_t i = 0; i < n; i++) {
			GElf_Sym s;
			const char *nm;

			if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || !s.st_value)
				continue;
			nm = elf_strptr(el, sh.sh_link, s.st_name);
			if (nm && !strcmp(nm, name)) {
				*val = s.st_value;
				*size = s.st_size;
				found = 1;
				break;
			}
		}
	}
	elf_end(el);
	return found;
}

/*
 * The interpreter: the file mapped executable that exports the evaluation
 * function, and what we need from it. 1 ready, -1 off (said in the note).
 */
static int find_interpreter(struct hp_py *py)
{
	struct hp_maps m;
	const struct hp_mapping *hit = NULL;
	uint64_t v, sz, ver_at = 0, code_t = 0, str_t = 0, bytes_t = 0, x;
	unsigned long ver = 0;

	if (hp_maps_read_at(&m, NULL, py->maps_fd, &py->t, py->exe_fd, py->mem_fd, py->c)) {
		set_off(py, "Python frames: the process's maps could not be read");
		return -1;
	}
	for (size_t i = 0; i < m.n && !hit; i++) {
		const struct hp_mapping *mp = &m.m[i];

		if (!mp->elf || !mp->bias_ok || !(mp->prot & 4) ||
		    !dynsym(mp->elf, "_PyEval_EvalFrameDefault", &v, &sz) || !sz)
			continue;
		if (!dynsym(mp->elf, "Py_Version", &ver_at, &x) ||
		    hp_elf_read_vaddr(mp->elf, ver_at, &ver, sizeof(ver)))
			ver = 0;
		if (!dynsym(mp->elf, "PyCode_Type", &code_t, &x) ||
		    !dynsym(mp->elf, "PyUnicode_Type", &str_t, &x) ||
		    !dynsym(mp->elf, "PyBytes_Type", &bytes_t, &x))
			continue;
		hit = mp;
		py->eval_lo = v + mp->bias;
		py->eval_hi = v + sz + mp->bias;
		py->code_type = code_t + mp->bias;
		py->str_type = str_t + mp->bias;
		py->bytes_type = bytes_t + mp->bias;
	}
	hp_maps_free(&m);
	if (!hit) {
		set_off(py, "Python frames: no CPython interpreter found in the process");
		return -1;
	}
	py->version = ver;
	if ((ver >> 16) != 0x030b) {
		if (ver)
			set_off(py, "Python %lu.%lu: its frames are not read (CPython 3.11 only): profiled natively",
				ver >> 24, (ver >> 16) & 0xff);
		else
			set_off(py, "Python older than 3.11: its frames are not read (CPython 3.11 only): profiled natively");
		return -1;
	}
	py->names = hp_elf_names("[python]");
	if (!py->names) {
		set_off(py, "Python frames: out of memory");
		return -1;
	}
	__atomic_store_n(&py->state, 1, __ATOMIC_RELEASE);
	return 1;
}

static int rd(struct hp_py *py, uint64_t addr, void *dst, size_t n)
{
	if (!addr || addr + n < addr || addr > (uint64_t)INT64_MAX - n)
		return -1;
	return pread(py->mem_fd, dst, n, (off_t)addr) == (ssize_t)n ? 0 : -1;
}

static uint64_t u64at(const uint8_t *b, size_t off)
{
	uint64_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

static uint32_t u32at(const uint8_t *b, size_t off)
{
	uint32_t v;

	memcpy(&v, b + off, sizeof(v));
	return v;
}

/* Append code point c as UTF-8 (controls as '?': names go into text files). */
static size_t put_utf8(char *o, uint32_t c)
{
	if (c < 0x20 || c == 0x7f || (c >= 0xd800 && c < 0xe000) || c > 0x10ffff) {
		*o = '?';
		return 1;
	}
	if (c < 0x80) {
		*o = (char)c;
		return 1;
	}
	if (c < 0x800) {
		o[0] = (char)(0xc0 | (c >> 6));
		o[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		o[0] = (char)(0xe0 | (c >> 12));
		o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		o[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | (c >> 18));
	o[1] = (char)(0x80 | ((c >> 12) & 0x3f));
	o[2] = (char)(0x80 | ((c >> 6) & 0x3f));
	o[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

/* A str object, as UTF-8 (at most PY_MAX_NAME characters), into out[4 * PY_MAX_NAME + 1]. */
static int read_str(struct hp_py *py, uint64_t addr, char *out)
{
	uint8_t h[STR_COMPACT_DATA];
	uint8_t raw[4 * PY_MAX_NAME];
	uint64_t len;
	uint32_t state, kind;
	size_t o = 0, data;

	if (rd(py, addr, h, sizeof(h)) || u64at(h, CO_TYPE) != py->str_type)
		return -1;
	len = u64at(h, STR_LENGTH);
	state = u32at(h, STR_STATE);
	kind = (state >> 2) & 7;
	if (!(state & (1U << 5)) || !(state & (1U << 7)) || (kind != 1 && kind != 2 && kind != 4))
		return -1;	/* not compact, or not ready: not a name the compiler made */
	if (len > PY_MAX_NAME)
		len = PY_MAX_NAME;
	data = (state & (1U << 6)) ? STR_ASCII_DATA : STR_COMPACT_DATA;
	if (len && rd(py, addr + data, raw, len * kind))
		return -1;
	for (uint64_t i = 0; i < len; i++) {
		uint32_t c = kind == 1 ? raw[i] : kind == 2 ? (uint32_t)(raw[2 * i] | raw[2 * i + 1] << 8) :
			     u32at(raw, 4 * i);

		o += put_utf8(out + o, c);
	}
	out[o] = 0;
	return o ? 0 : -1;
}

/* A code object, read and checked; NULL if it is not one. */
static struct pycode *read_code(struct hp_py *py, uint64_t addr)
{
	uint8_t h[CO_HEAD], bh[BYTES_DATA];
	static __thread char func[4 * PY_MAX_NAME + 1], file[4 * PY_MAX_NAME + 1];
	struct pycode *pc;
	uint64_t ncode, ltlen, first;

	if ((addr & 7) || rd(py, addr, h, sizeof(h)) || u64at(h, CO_TYPE) != py->code_type)
		return NULL;
	ncode = u64at(h, CO_SIZE);
	first = u32at(h, CO_FIRSTTRACEABLE);
	if (!ncode || ncode > PY_MAX_CODE_UNITS || first > ncode)
		return NULL;
	if (read_str(py, u64at(h, CO_QUALNAME), func) || read_str(py, u64at(h, CO_FILENAME), file))
		return NULL;
	if (rd(py, u64at(h, CO_LINETABLE), bh, sizeof(bh)) || u64at(bh, CO_TYPE) != py->bytes_type)
		return NULL;
	ltlen = u64at(bh, BYTES_SIZE);
	if (ltlen > PY_MAX_LINETABLE)
		return NULL;
	pc = calloc(1, sizeof(*pc));
	if (!pc)
		return NULL;
	pc->lt = malloc(ltlen ? ltlen : 1);
	if (!pc->lt || (ltlen && rd(py, u64at(h, CO_LINETABLE) + BYTES_DATA, pc->lt, ltlen))) {
		free(pc->lt);
		free(pc);
		return NULL;
	}
	pc->addr = addr;
	pc->lt_len = (uint32_t)ltlen;
	pc->ncode = (uint32_t)ncode;
	pc->first_traceable = (uint32_t)first;
	pc->firstline = (int)u32at(h, CO_FIRSTLINENO);
	/* Interned for good: bounded (a new string only; most repeat). */
	if (py->name_bytes + strlen(func) + strlen(file) + 64 > PY_MAX_NAME_BYTES) {
		free(pc->lt);
		free(pc);
		return NULL;
	}
	pthread_mutex_lock(&py->names->sym_lock);
	pc->func = hp_intern(&py->names->strs, func);
	pc->file = hp_intern(&py->names->strs, file);
	pthread_mutex_unlock(&py->names->sym_lock);
	__atomic_store_n(&py->name_bytes, py->name_bytes + strlen(func) + strlen(file) + 64,
			 __ATOMIC_RELAXED);
	if (!pc->func || !pc->file) {
		free(pc->lt);
		free(pc);
		return NULL;
	}
	/* Every sample names each of its frames' lines: decoded once here
	 * rather than walked from the table's start each time (the walk
	 * was a tenth of the daemon's time on a threaded JSON program). */
	if (pc->ncode <= PY_LINES_MAX_UNITS) {
		pc->lines = malloc(pc->ncode * sizeof(*pc->lines));
		if (pc->lines)
			hp_py_lines(pc->lt, pc->lt_len, pc->firstline, pc->lines, pc->ncode);
	}
	return pc;
}

static int varint(const uint8_t *lt, uint32_t n, uint32_t *i, uint32_t *out)
{
	uint32_t v = 0, shift = 0, b;

	do {
		if (*i >= n || shift > 28)
			return -1;
		b = lt[(*i)++];
		v |= (b & 63) << shift;
		shift += 6;
	} while (b & 64);
	*out = v;
	return 0;
}

static int svarint(const uint8_t *lt, uint32_t n, uint32_t *i, int *out)
{
	uint32_t v;

	if (varint(lt, n, i, &v))
		return -1;
	*out = (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
	return 0;
}

/*
 * The line of code unit lasti by CPython 3.11's location table
 * (Objects/locations.md): entries of a first byte (bit 7 set, a kind in
 * bits 3-6, code units - 1 in bits 0-2) and the kind's operands. -1 where
 * the table says no line, or is not a table.
 */
static int py_line_walk(const uint8_t *lt, uint32_t n, int firstline, uint32_t lasti,
			int32_t *lines, uint32_t nunits)
{
	uint32_t i = 0, addr = 0, skip;
	int line = firstline;

	while (i < n) {
		uint8_t b = lt[i++];
		unsigned kind = (b >> 3) & 15, units = (b & 7) + 1;
		int delta = 0;

		if (!(b & 0x80))
			return -1;
		switch (kind) {
		case 15:	/* no location */
			break;
		case 14:	/* long: line delta, end line, column, end column */
			if (svarint(lt, n, &i, &delta) || varint(lt, n, &i, &skip) ||
			    varint(lt, n, &i, &skip) || varint(lt, n, &i, &skip))
				return -1;
			break;
		case 13:	/* no column */
			if (svarint(lt, n, &i, &delta))
				return -1;
			break;
		case 10: case 11: case 12:	/* one line, delta 0..2, two columns */
			delta = (int)kind - 10;
			i += 2;
			break;
		default:	/* short: same line, one column byte */
			i += 1;
			break;
		}
		if (i > n)
			return -1;
		line += delta;
		if (lines) {
			for (uint32_t u = addr; u < addr + units && u < nunits; u++)
				lines[u] = kind == 15 ? -1 : line;
		} else if (lasti < addr + units) {
			return kind == 15 ? -1 : line;
		}
		addr += units;
	}
	return -1;
}

int hp_py_line(const uint8_t *lt, uint32_t n, int firstline, uint32_t lasti)
{
	return py_line_walk(lt, n, firstline, lasti, NULL, 0);
}

/* The line of each of nunits code units, as hp_py_line would give it. */
void hp_py_lines(const uint8_t *lt, uint32_t n, int firstline, int32_t *lines, uint32_t nunits)
{
	for (uint32_t u = 0; u < nunits; u++)
		lines[u] = -1;
	py_line_walk(lt, n, firstline, 0, lines, nunits);
}

/* The key naming (code, line), made and named on first sight; 0 on failure. */
static uint64_t key_of(struct hp_py *py, const struct pycode *pc, int line)
{
	uint64_t key = (uint64_t)(uintptr_t)hp_hmap_get(&py->keys, pc->addr, (uint64_t)(int64_t)line);
	struct hp_sym *s;

	if (key || py->nkeys >= PY_MAX_KEYS || py->name_bytes > PY_MAX_NAME_BYTES)
		return key;
	s = calloc(1, sizeof(*s));
	if (!s)
		return 0;
	s->func = pc->func;
	s->file = pc->file;
	s->line = line > 0 ? line : 0;
	/* Keys step by 16 from 16: a frame's pc is key + 1 (a return address,
	 * looked up one byte back, as native callers' are). */
	key = (py->nkeys + 1) * 16;
	pthread_mutex_lock(&py->names->sym_lock);
	if (hp_hmap_put(&py->names->syms, key, 0, s)) {
		pthread_mutex_unlock(&py->names->sym_lock);
		free(s);
		return 0;
	}
	pthread_mutex_unlock(&py->names->sym_lock);
	if (hp_hmap_put(&py->keys, pc->addr, (uint64_t)(int64_t)line, (void *)(uintptr_t)key))
		return 0;	/* named but not found again: a new key next time */
	py->nkeys++;
	__atomic_store_n(&py->name_bytes, py->name_bytes + sizeof(*s) + 4 * sizeof(struct hp_hent),
			 __ATOMIC_RELAXED);
	return key;
}

/* One frame's key, 0 if it is to be left out. */
static uint64_t frame_key_read(struct hp_py *py, const struct heapprofd_pyframe *f)
{
	uint64_t instr = f->instr & ~HEAPPROFD_PYFRAME_ENTRY, lasti;
	struct pycode *pc;

	if (!f->code)
		return 0;
	pc = hp_hmap_get(&py->codes, f->code, 0);
	/* Another code object at the same address: read it again. */
	if (pc && (instr < pc->addr + CO_CODE || instr >= pc->addr + CO_CODE + 2ULL * pc->ncode))
		pc = NULL;
	if (!pc) {
		struct pycode *old = hp_hmap_del(&py->codes, f->code, 0);

		if (old)
			free_code(py, old);
		pc = read_code(py, f->code);
		if (!pc) {
			py->frames_bad++;
			return 0;
		}
		if (py->codes.n >= PY_MAX_CODES ||
		    py->code_bytes + code_size(pc) > PY_MAX_CODE_BYTES)
			drop_codes(py);
		if (hp_hmap_put(&py->codes, f->code, 0, pc)) {
			free(pc->lt);
			free(pc);
			return 0;
		}
		__atomic_store_n(&py->code_bytes, py->code_bytes + code_size(pc), __ATOMIC_RELAXED);
	}
	if (instr < pc->addr + CO_CODE || instr >= pc->addr + CO_CODE + 2ULL * pc->ncode ||
	    (instr & 1)) {
		py->frames_bad++;
		return 0;
	}
	lasti = (instr - pc->addr - CO_CODE) / 2;
	py->frames_ok++;
	if (lasti < pc->first_traceable)
		return 0;	/* a frame not started yet (CPython's "incomplete" frame) */
	return key_of(py, pc, pc->lines ? pc->lines[lasti] :
			  hp_py_line(pc->lt, pc->lt_len, pc->firstline, (uint32_t)lasti));
}

static uint64_t frame_key(struct hp_py *py, const struct heapprofd_pyframe *f)
{
	uint64_t instr = f->instr & ~HEAPPROFD_PYFRAME_ENTRY, key;
	uint64_t h = (f->code ^ instr * 0x9e3779b97f4a7c15ULL) * 0xff51afd7ed558ccdULL;
	unsigned i = (unsigned)(h >> 40) & (PY_KEY_CACHE - 1);

	if (f->code && py->seen[i].gen == py->seen_gen && py->seen[i].code == f->code &&
	    py->seen[i].instr == instr) {
		py->frames_ok++;	/* as frame_key_read counts it */
		return py->seen[i].key;
	}
	key = frame_key_read(py, f);
	/* Only a frame that checked out and was named (frames_ok counted). */
	if (key) {
		py->seen[i].code = f->code;
		py->seen[i].instr = instr;
		py->seen[i].key = key;
		py->seen[i].gen = py->seen_gen;
	}
	return key;
}

int hp_py_resolve(struct hp_py *py, const struct heapprofd_pyframe *in, uint32_t n,
		  struct hp_pyframe *out)
{
	if (!py || py->state < 0)
		return 0;
	if (!py->state && find_interpreter(py) < 0)
		return 0;
	py->samples++;
	for (uint32_t i = 0; i < n; i++) {
		out[i].key = frame_key(py, &in[i]);
		out[i].entry = !!(in[i].instr & HEAPPROFD_PYFRAME_ENTRY);
	}
	/* Frames that mostly do not check out: the layout is not what we
	 * think (a build of 3.11 with other options). Nothing more is named. */
	if (py->frames_bad > 256 && py->frames_bad > py->frames_ok) {
		set_off(py, "Python frames: %lu of %lu frames read did not check out (an interpreter built differently): profiled natively",
			(unsigned long)py->frames_bad,
			(unsigned long)(py->frames_bad + py->frames_ok));
		return 0;
	}
	return (int)n;
}

static int is_eval(const struct hp_py *py, const struct hp_uframe *f)
{
	return f->pc - 1 >= py->eval_lo && f->pc - 1 < py->eval_hi;
}

int hp_py_splice(const struct hp_py *py, const struct hp_uframe *nat, int nn,
		 const struct hp_pyframe *pf, int np, struct hp_uframe *out, int max)
{
	int o = 0, k = 0;

	if (nn <= 0)
		return 0;
	for (int i = 0; i < nn && o < max; i++) {
		int before = o;

		/* Frame 0 is the sampled ip itself (the client): never the
		 * interpreter's. */
		if (i > 0 && k < np && is_eval(py, &nat[i])) {
			while (k < np && o < max) {
				int entry = pf[k].entry;

				if (pf[k].key)
					out[o++] = (struct hp_uframe){ pf[k].key + 1, py->names, 0 };
				k++;
				if (entry)
					break;
			}
			if (o > before)
				continue;
		}
		out[o++] = nat[i];
	}
	/* Python frames whose interpreter frames the unwind did not reach. */
	for (; k < np && o < max; k++)
		if (pf[k].key)
			out[o++] = (struct hp_uframe){ pf[k].key + 1, py->names, 0 };
	hp_uframes_get(out, o);
	return o;
}

void hp_py_comment(struct hp_py *py, struct hp_prof *o)
{
	char note[sizeof(py->note)];

	if (!py)
		return;
	pthread_mutex_lock(&py->lock);
	snprintf(note, sizeof(note), "%s", py->note);
	pthread_mutex_unlock(&py->lock);
	if (note[0])
		hp_prof_add_comment(o, "%s", note);
	else if (__atomic_load_n(&py->state, __ATOMIC_ACQUIRE) > 0)
		hp_prof_add_comment(o, "Python frames: CPython %lu.%lu.%lu", py->version >> 24,
				    (py->version >> 16) & 0xff, (py->version >> 8) & 0xff);
}

int hp_py_ready(const struct hp_py *py)
{
	return py && __atomic_load_n(&py->state, __ATOMIC_ACQUIRE) > 0;
}
