// SPDX-License-Identifier: GPL-2.0
/*
 * The runtimes' parts of the pipeline against what a hostile process can
 * hand them: Python frames at the end of an ALLOC record (parse.c), CPython
 * 3.11 location tables (python.c) and perf maps (perfmap.c). Run plain and
 * under ASan/UBSan (a read past a table or a line is a failure there).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../internal.h"
#include "../../../tests/tap.h"

/* ---- Python frames in a record ------------------------------------------- */

static uint64_t rec[4096];

/* An ALLOC record of 64 stack bytes, then npy frames and the trailer. */
static size_t make_alloc(uint32_t npy, uint32_t claim, uint32_t resv)
{
	struct heapprofd_rec_alloc *a = (void *)rec;
	size_t len = sizeof(*a) + 64;
	struct heapprofd_pyframes *t;

	memset(rec, 0, sizeof(rec));
	a->hdr.type = HEAPPROFD_REC_ALLOC;
	a->hdr.flags = HEAPPROFD_ALLOC_PYFRAMES;
	a->seq = 1;
	a->addr = 0x1000;
	a->req_size = a->usable_size = a->est_size = a->interval = 4096;
	a->count = 1;
	a->tid = 1;
	a->arch = HEAPPROFD_ARCH_X86_64;
	a->nregs = HEAPPROFD_X86_64_NREGS;
	a->regs[HEAPPROFD_X86_64_SP] = 0x7fff0000;
	a->regs[HEAPPROFD_X86_64_IP] = 0x400000;
	a->stack_top = 0x7fff0000 + 64;
	a->stack_len = 64;
	for (uint32_t i = 0; i < npy; i++) {
		struct heapprofd_pyframe *f = (void *)((uint8_t *)rec + len);

		f->code = 0x10000 + i * 0x100;
		f->instr = f->code + 184 + 2 * i + (i == npy - 1);
		len += sizeof(*f);
	}
	t = (void *)((uint8_t *)rec + len);
	t->nframes = claim;
	t->resv = resv;
	len += sizeof(*t);
	a->hdr.len = (uint32_t)len;
	return len;
}

static void test_parse(void)
{
	struct hp_parsed ps;
	char why[200];
	size_t len;
	int r;

	len = make_alloc(3, 3, 0);
	r = hp_parse_record(rec, len, &ps, why, sizeof(why));
	tap_ok(r == 0 && ps.npy == 3 && ps.py && ps.py[2].instr & HEAPPROFD_PYFRAME_ENTRY &&
	       ps.stack_len == 64,
	       "parse: three Python frames after the stack: %d, %u frames (%s)", r, ps.npy,
	       r ? why : "ok");
	static const struct { uint32_t npy, claim, resv; const char *what; } bad[] = {
		{ 3, 0, 0, "a trailer of 0 frames" },
		{ 3, 4000, 0, "more frames than HEAPPROFD_PYFRAMES_MAX" },
		{ 3, 200, 0, "frames that would start before the record's stack" },
		{ 3, 3, 1, "a trailer with its reserved word set" },
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		len = make_alloc(bad[k].npy, bad[k].claim, bad[k].resv);
		r = hp_parse_record(rec, len, &ps, why, sizeof(why));
		tap_ok(r < 0, "parse: %s is refused (%s)", bad[k].what, why);
	}
	/* The trailer's frames eat into the stack the record claims. */
	len = make_alloc(3, 3, 0);
	((struct heapprofd_rec_alloc *)rec)->stack_len = 64 + 8;
	((struct heapprofd_rec_alloc *)rec)->stack_top += 8;
	r = hp_parse_record(rec, len, &ps, why, sizeof(why));
	tap_ok(r < 0, "parse: a stack_len reaching into the Python frames is refused (%s)", why);
	len = make_alloc(3, 3, 0);
	r = hp_parse_krecord(rec, len, &ps, why, sizeof(why));
	tap_ok(r < 0, "parse: a kernel record with Python frames is refused (%s)", why);
	/* Room for the trailer only, which claims a frame. */
	len = make_alloc(0, 1, 0);
	{
		struct heapprofd_rec_alloc *a = (void *)rec;
		struct heapprofd_pyframes t = { 1, 0 };

		a->stack_len = 0;
		a->stack_top = a->regs[HEAPPROFD_X86_64_SP];
		len = sizeof(*a) + sizeof(t);
		memcpy((uint8_t *)rec + sizeof(*a), &t, sizeof(t));
		a->hdr.len = (uint32_t)len;
	}
	r = hp_parse_record(rec, len, &ps, why, sizeof(why));
	tap_ok(r < 0 && strstr(why, "Python"), "parse: a record too short for its trailer's frames is refused (%s)",
	       why);
}

/* ---- CPython 3.11 location tables ---------------------------------------- */

/*
 * def f(a):             # line 2
 *     x = 1
 *     for i in range(3):
 *         x += i
 *
 *     return [a,
 *             x]
 * co_linetable and co_lines() (in code units) from CPython 3.11.
 */
static const char f_table[] =
	"8000d808098041dd0d12903189588c58f00001050ff00001050f8801d808098851890688018801e00c0dd80c0df003010c0ff00001050f";
static const struct { uint32_t lo, hi; int line; } f_lines[] = {
	{ 0, 1, 2 }, { 1, 3, 3 }, { 3, 20, 4 }, { 20, 26, 5 }, { 26, 27, 7 }, { 27, 28, 8 },
	{ 28, 30, 7 },
};

static size_t unhex(const char *h, uint8_t *out)
{
	size_t n = 0;

	for (; h[0] && h[1]; h += 2)
		sscanf(h, "%2hhx", &out[n++]);
	return n;
}

static void test_lines(void)
{
	uint8_t lt[256], *heap;
	size_t n = unhex(f_table, lt);
	int bad = 0, line;

	for (size_t k = 0; k < sizeof(f_lines) / sizeof(f_lines[0]); k++)
		for (uint32_t u = f_lines[k].lo; u < f_lines[k].hi; u++) {
			line = hp_py_line(lt, (uint32_t)n, 2, u);
			if (line != f_lines[k].line) {
				tap_diag("code unit %u: line %d, CPython says %d", u, line, f_lines[k].line);
				bad++;
			}
		}
	tap_ok(!bad, "location table: every code unit of a 3.11 function has CPython's line");
	tap_ok(hp_py_line(lt, (uint32_t)n, 2, 30) == -1,
	       "location table: a code unit past the table has no line");
	/* Each prefix of the table, on the heap so that ASan sees a read past it. */
	bad = 0;
	for (size_t k = 0; k < n; k++) {
		heap = malloc(k ? k : 1);
		memcpy(heap, lt, k);
		for (uint32_t u = 0; u < 32; u++)
			line = hp_py_line(heap, (uint32_t)k, 2, u), bad += line < -1;
		free(heap);
	}
	tap_ok(!bad, "location table: every truncation of it is read within its bounds");
	/* The lines decoded once (a code object's cache) say what the walk
	 * says, for the table, each truncation and a garbage table. */
	bad = 0;
	for (size_t k = 0; k <= n + 1; k++) {
		int32_t lines[40];

		heap = malloc(k ? k : 1);
		if (k <= n)
			memcpy(heap, lt, k);
		else
			memset(heap, 0xff, k), heap[0] = 0x80 | (14 << 3);
		hp_py_lines(heap, (uint32_t)k, 2, lines, 40);
		for (uint32_t u = 0; u < 40; u++)
			if (lines[u] != hp_py_line(heap, (uint32_t)k, 2, u)) {
				tap_diag("%zu bytes of table, code unit %u: decoded %d, walked %d",
					 k, u, lines[u], hp_py_line(heap, (uint32_t)k, 2, u));
				bad++;
			}
		free(heap);
	}
	tap_ok(!bad, "location table: the lines decoded once are the lines looked up one by one");
	/* A varint that never ends, an entry without its first-byte bit. */
	memset(lt, 0xff, sizeof(lt));
	lt[0] = 0x80 | (14 << 3);
	tap_ok(hp_py_line(lt, sizeof(lt), 1, 5) == -1,
	       "location table: an endless varint is refused");
	lt[0] = 0x10;
	tap_ok(hp_py_line(lt, sizeof(lt), 1, 0) == -1,
	       "location table: an entry without its start bit is refused");
}

/* ---- perf maps ------------------------------------------------------------ */

static void test_perfmap(void)
{
	char path[64], name[300], link[64];
	struct hp_perfmap *pm;
	FILE *f;
	int ok;

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	unlink(path);
	f = fopen(path, "w");
	if (!f) {
		tap_ok(0, "perfmap: cannot write %s", path);
		return;
	}
	fprintf(f, "1000 100 first\n");
	fprintf(f, "garbage line\n");
	fprintf(f, "2000 0 empty\n");
	fprintf(f, "0x3000 0x80 void Java.method(int)\n");		/* jcmd's form */
	fprintf(f, "1000 40 moved over first\n");			/* later wins */
	fprintf(f, "ffffffffffffff00 1000 wraps\n");
	fprintf(f, "4000 10 ctl\001\033name\n");
	fprintf(f, "5000 10 ");
	for (int i = 0; i < 400; i++)
		fputc('x', f);
	fprintf(f, "\n6000 10 no newline at the end");
	fclose(f);
	chmod(path, 0644);
	pm = hp_perfmap_new(getpid(), -1);
	ok = hp_perfmap_name(pm, 0x1080, name, sizeof(name)) && !strcmp(name, "first");
	tap_ok(ok, "perfmap: an address named by its entry (%s)", ok ? name : "none");
	ok = hp_perfmap_name(pm, 0x1010, name, sizeof(name)) && !strcmp(name, "moved over first");
	tap_ok(ok, "perfmap: where two entries cover an address the later line wins (%s)",
	       ok ? name : "none");
	ok = hp_perfmap_name(pm, 0x3010, name, sizeof(name)) && !strcmp(name, "void Java.method(int)");
	tap_ok(ok, "perfmap: jcmd's 0x-prefixed lines are read (%s)", ok ? name : "none");
	tap_ok(!hp_perfmap_name(pm, 0x2000, name, sizeof(name)) &&
	       !hp_perfmap_name(pm, 0xffffffffffffff80ULL, name, sizeof(name)),
	       "perfmap: entries of size 0 and entries that wrap are left out");
	ok = hp_perfmap_name(pm, 0x4000, name, sizeof(name)) && !strcmp(name, "ctl??name");
	tap_ok(ok, "perfmap: control characters in names are replaced (%s)", ok ? name : "none");
	ok = hp_perfmap_name(pm, 0x5000, name, sizeof(name)) && strlen(name) == 255;
	tap_ok(ok, "perfmap: a long name is cut at 255 bytes (%zu)", ok ? strlen(name) : 0);
	tap_ok(!hp_perfmap_name(pm, 0x6000, name, sizeof(name)),
	       "perfmap: a last line without its newline waits for it");
	/* Lines the runtime writes just before the process ends: a dump's
	 * read takes them, however soon after the last look it comes. */
	f = fopen(path, "a");
	if (f) {
		fprintf(f, "\n7000 10 late\n");
		fclose(f);
	}
	hp_perfmap_name(pm, 0x7100, name, sizeof(name));	/* a miss: a look */
	hp_perfmap_refresh(pm);
	ok = hp_perfmap_name(pm, 0x7000, name, sizeof(name)) && !strcmp(name, "late") &&
	     hp_perfmap_name(pm, 0x6000, name, sizeof(name));
	tap_ok(ok, "perfmap: a dump's refresh reads lines appended right after a look");
	hp_perfmap_free(pm);

	/* Another user could have written it: ignored. */
	chmod(path, 0666);
	pm = hp_perfmap_new(getpid(), -1);
	tap_ok(!hp_perfmap_name(pm, 0x1080, name, sizeof(name)),
	       "perfmap: a map others may write is not read");
	hp_perfmap_free(pm);
	/* Another user's file (/tmp is everybody's): not this process's map. */
	if (getuid() == 0 && chown(path, 65534, 65534) == 0) {
		pm = hp_perfmap_new(getpid(), -1);
		tap_ok(!hp_perfmap_name(pm, 0x1080, name, sizeof(name)),
		       "perfmap: a map owned by another user (65534) is not read");
		hp_perfmap_free(pm);
		if (chown(path, 0, 0))
			tap_diag("chown back: %m");
	}
	/* A link to another file: not followed. */
	snprintf(link, sizeof(link), "/tmp/perf-%d.map.real", (int)getpid());
	chmod(path, 0644);
	rename(path, link);
	if (symlink(link, path) == 0) {
		pm = hp_perfmap_new(getpid(), -1);
		tap_ok(!hp_perfmap_name(pm, 0x1080, name, sizeof(name)),
		       "perfmap: a map that is a symbolic link is not followed");
		hp_perfmap_free(pm);
		unlink(path);
	}
	unlink(link);
}

/* ---- Spliced paths remembered (splice.c) --------------------------------- */

/*
 * A process whose interpreter was not found splices its Python frames
 * after the native ones (hp_py_splice's frames the unwind did not reach):
 * enough to see what the cache keeps, lends and gives back.
 */
static void test_splices(void)
{
	struct hp_target t = { .pid = 1, .proc_fd = -1, .paths_ok = 0 };
	struct hp_py *py = hp_py_new(&t, -1, -1, -1, NULL);
	struct hp_elf *lib = hp_elf_names("[native]");
	struct hp_splices *s = hp_splices_new();
	struct hp_uframe nat[3] = { { 0x1000, lib, 0 }, { 0x2000, lib, 0 }, { 0x3000, NULL, 0 } };
	struct hp_pyframe pf[2] = { { 16, 1 }, { 32, 0 } }, pf2[2] = { { 16, 1 }, { 48, 0 } };
	const struct hp_uframe *a, *b, *c, *kept;
	uint64_t ida, idb, idc, hits, misses, id;
	size_t bytes, bytes_full;
	int n, m, bad = 0;

	if (!py || !lib || !s) {
		tap_ok(0, "splices: set up");
		return;
	}
	hp_splices_tick(s, 1, 0);
	n = hp_splices_get(s, py, 7, 5, nat, 3, pf, 2, 128, &a, &ida);
	tap_ok(n == 5 && a[0].pc == 0x1000 && a[2].pc == 0x3000 && a[3].pc == 17 && a[4].pc == 33 &&
	       ida >= (1ULL << 62),
	       "splices: the native frames, then the Python ones (%d frames, id %#llx)", n,
	       (unsigned long long)ida);
	tap_ok(lib->refs == 2, "splices: the kept path holds one reference on the file (%d)",
	       lib->refs);
	m = hp_splices_get(s, py, 7, 5, nat, 3, pf, 2, 128, &b, &idb);
	hp_splices_stats(s, &hits, &misses, &bytes);
	tap_ok(m == n && b == a && idb == ida && hits == 1 && misses == 1 && lib->refs == 2,
	       "splices: the same key again is lent the same frames and id (hits %llu)",
	       (unsigned long long)hits);
	m = hp_splices_get(s, py, 7, 5, nat, 3, pf2, 2, 128, &c, &idc);
	tap_ok(m == 5 && c != a && idc != ida && c[4].pc == 49,
	       "splices: another Python frame is another path");
	pf2[1] = (struct hp_pyframe){ 32, 1 };
	m = hp_splices_get(s, py, 7, 5, nat, 3, pf2, 2, 128, &c, &id);
	tap_ok(m == 5 && id != ida && id != idc, "splices: so is another entry mark");
	m = hp_splices_get(s, py, 7, 6, nat, 3, pf, 2, 128, &c, &id);
	tap_ok(m == 5 && id != ida, "splices: and another memo entry");
	tap_ok(hp_splices_get(s, py, 7, 0, nat, 3, pf, 2, 128, &c, &id) == -1,
	       "splices: nothing kept without a memo entry");

	/* The memo's generation changes: its ids never come again; what was
	 * lent stays readable until the books are past it. */
	hp_splices_tick(s, 10, 9);
	m = hp_splices_get(s, py, 8, 5, nat, 3, pf, 2, 128, &b, &idb);
	tap_ok(m == 5 && idb != ida, "splices: a new memo generation starts the table anew");
	hp_splices_stats(s, &hits, &misses, &bytes);
	for (int i = 0; i < 5; i++)
		bad += a[i].pc != (i < 3 ? nat[i].pc : (uint64_t)(16 * i - 31));
	tap_ok(!bad && lib->refs == 6,
	       "splices: retired paths stay lent until the books applied what was fed (refs %d)",
	       lib->refs);
	hp_splices_tick(s, 10, 10);
	hp_splices_stats(s, &hits, &misses, &bytes_full);
	tap_ok(lib->refs == 2 && bytes_full < bytes,
	       "splices: then they are freed, their references given back (refs %d, %zu -> %zu bytes)",
	       lib->refs, bytes, bytes_full);

	/* Many paths: the table keeps a bounded number; those it lets go are
	 * freed once applied. */
	kept = NULL;
	for (uint64_t k = 1; k <= 5000; k++) {
		struct hp_pyframe one[1] = { { 16 * k, 1 } };

		m = hp_splices_get(s, py, 8, 5, nat, 3, one, 1, 128, &c, &id);
		if (m != 4 || c[3].pc != 16 * k + 1)
			bad++;
		if (k == 1)
			kept = c;
	}
	hp_splices_stats(s, &hits, &misses, &bytes_full);
	tap_ok(!bad && kept && kept[3].pc == 17 && lib->refs > 1000,
	       "splices: 5000 paths, each right; the evicted still lent (refs %d)", lib->refs);
	hp_splices_tick(s, 11, 11);
	hp_splices_stats(s, &hits, &misses, &bytes);
	tap_ok(lib->refs <= 1 + 256 * 4 && bytes < bytes_full && bytes < (4U << 20) + 65536,
	       "splices: once applied, at most the table's entries hold references (refs %d, %zu bytes)",
	       lib->refs, bytes);
	hp_splices_free(s);
	tap_ok(lib->refs == 1, "splices: freed, every reference given back (refs %d)", lib->refs);
	hp_elf_put(lib);
	hp_py_free(py);
}

int main(void)
{
	test_parse();
	test_lines();
	test_perfmap();
	test_splices();
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
