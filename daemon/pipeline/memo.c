// SPDX-License-Identifier: GPL-2.0
/*
 * The unwind memo: most samples of a process come from a few call paths,
 * and a loop that allocates calls malloc from the same stack depth every
 * time, so the same registers and the same return addresses come back again
 * and again. Unwinding them each time is the daemon's largest cost.
 *
 * The unwinder is a deterministic function of what it reads: the record's
 * registers, words of the copied stack, and the process's read-only file
 * mappings (code and unwind tables; constant while the maps snapshot is).
 * hp_unwind() can write down the first two as a trace: every register it
 * read and every stack word it read, by offset from sp. If a later sample
 * has the same ip and sp, the same values in those registers and the same
 * words at those offsets, the unwinder would read exactly what it read
 * before and so return exactly the frames it returned before. Checking that
 * costs a few dozen compares instead of an unwind (and no stack copy: the
 * caller checks the record where it lies).
 *
 * An unwind is not remembered if it read anything else (the process's
 * writable memory through /proc/<pid>/mem, a read that failed, a maps
 * reread), since such inputs could change without the trace showing it.
 * The memo belongs to a maps generation: a maps record, or an unwinder
 * that reread the maps because it met an unknown address (a dlopen), starts
 * a new one and clears the memo; an unwind of a sample fed in an older
 * generation is not remembered.
 *
 * The table: sets of HP_MEMO_WAYS entries chosen by a hash of (ip, sp),
 * most recently used first. Several call paths can share ip and sp (sibling
 * functions with equal frame sizes), hence the ways.
 *
 * Threads: the table belongs to the thread that feeds records (it looks up
 * on every allocation record, so a lookup takes no lock). Unwinder workers
 * hand new entries over through a short locked list that the owner takes
 * in at its next lookup, and ask for a new generation with an atomic
 * increment that the owner acts on (clearing the table) the same way.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define HP_MEMO_SETS	1024U		/* power of two */
#define HP_MEMO_WAYS	8

struct memo_ent {
	struct hp_lent_node lent;	/* out of the table: on m->lent */
	struct memo_ent *next;		/* on the incoming list */
	uint64_t ip, sp;
	uint32_t gen;
	uint32_t regmask;		/* bit i: regs[i] was read */
	uint32_t nreads;
	int nframes;
	uint64_t id;			/* given when it enters the table; never reused */
	uint64_t regval[HEAPPROFD_MAX_REGS];
	uint32_t *off;			/* [nreads], then val */
	uint64_t *val;
	struct hp_uframe *frames;	/* [nframes], references held */
};

struct hp_memo {
	uint32_t gen;			/* atomic: the current generation */
	uint32_t table_gen;		/* owner: the generation the table holds */
	pthread_mutex_t in_lock;	/* incoming */
	struct memo_ent *incoming;	/* from workers, not in the table yet */
	/* owner: out of the table, freed once the books are past them */
	struct hp_lent lent;
	uint64_t last_id;		/* owner: the last entry id given */
	/* owner-written, read by anyone (stats) */
	uint64_t hits, misses, inserts;
	uint64_t bytes;
	struct memo_ent *set[HP_MEMO_SETS][HP_MEMO_WAYS];	/* owner only */
};

struct hp_memo *hp_memo_new(void)
{
	struct hp_memo *m = calloc(1, sizeof(*m));

	if (m)
		pthread_mutex_init(&m->in_lock, NULL);
	return m;
}

static size_t ent_bytes(const struct memo_ent *e)
{
	return sizeof(*e) + e->nreads * (sizeof(uint32_t) + sizeof(uint64_t)) +
	       e->nframes * sizeof(struct hp_uframe);
}

static void ent_free(struct hp_memo *m, struct memo_ent *e)
{
	hp_bump(&m->bytes, -(uint64_t)ent_bytes(e));
	hp_uframes_put(e->frames, e->nframes);
	free(e);
}

/*
 * Out of the table. Jobs fed until now may hold its frames (borrowed, not
 * referenced): it is freed when the books have applied all of them.
 */
static void ent_retire(struct hp_memo *m, struct memo_ent *e)
{
	if (e)
		hp_lent_retire(&m->lent, &e->lent);
}

void hp_memo_tick(struct hp_memo *m, uint64_t fed, uint64_t applied)
{
	struct hp_lent_node *n;

	while ((n = hp_lent_due(&m->lent, fed, applied)) != NULL)
		ent_free(m, hp_lent_entry(n, struct memo_ent, lent));
}

static void free_list(struct memo_ent *e)
{
	while (e) {
		struct memo_ent *next = e->next;

		hp_uframes_put(e->frames, e->nframes);
		free(e);
		e = next;
	}
}

static void clear(struct hp_memo *m)
{
	for (unsigned s = 0; s < HP_MEMO_SETS; s++)
		for (int w = 0; w < HP_MEMO_WAYS; w++) {
			ent_retire(m, m->set[s][w]);
			m->set[s][w] = NULL;
		}
}

void hp_memo_free(struct hp_memo *m)
{
	if (!m)
		return;
	/* The process is gone: no job is left to use any frames. */
	clear(m);
	hp_memo_tick(m, 0, UINT64_MAX);
	free_list(m->incoming);
	pthread_mutex_destroy(&m->in_lock);
	free(m);
}

uint32_t hp_memo_new_gen(struct hp_memo *m)
{
	/* The owner clears the table at its next lookup. */
	return __atomic_add_fetch(&m->gen, 1, __ATOMIC_ACQ_REL);
}

static unsigned set_of(uint64_t ip, uint64_t sp)
{
	uint64_t h = (ip ^ (sp * 0x9e3779b97f4a7c15ULL)) * 0xff51afd7ed558ccdULL;

	return (unsigned)(h >> 54) & (HP_MEMO_SETS - 1);
}

/* The stack word at off, from whichever part of the view holds it. */
static int view_word(const struct hp_stack_view *v, uint32_t off, uint64_t *out)
{
	uint64_t total = (uint64_t)v->own_len + v->top_len;

	if (off > total || total - off < sizeof(*out))
		return -1;
	if ((uint64_t)off + sizeof(*out) <= v->own_len) {
		memcpy(out, v->own + off, sizeof(*out));
	} else if (off >= v->own_len) {
		memcpy(out, v->top + (off - v->own_len), sizeof(*out));
	} else {
		uint32_t a = v->own_len - off;

		memcpy(out, v->own + off, a);
		memcpy((uint8_t *)out + a, v->top, sizeof(*out) - a);
	}
	return 0;
}

/*
 * Does the sample read exactly what e's unwind read?
 *
 * Reads in a reused top need no check from the floor of e's match up
 * (sv->matched): an earlier record of the thread matched e, each record
 * since reused its predecessor's bytes from there up at the same
 * addresses, and this one has e's sp, so a word at a given offset from sp
 * there is the very word that record matched. A loop that allocates from
 * a few places meets this on most samples, and most reads are in the top.
 */
static int matches(const struct memo_ent *e, const struct heapprofd_rec_alloc *a,
		   const struct hp_stack_view *sv)
{
	uint32_t mask = e->regmask;

	while (mask) {
		int i = __builtin_ctz(mask);

		if (i >= (int)a->nregs || a->regs[i] != e->regval[i])
			return 0;
		mask &= mask - 1;
	}
	/*
	 * The reads are sorted by offset (hp_memo_insert): the last is the
	 * highest, so one check bounds them all; then those in the record's
	 * own bytes, one that may straddle the two parts, and those in the
	 * reused top, each with no question of which part holds it.
	 */
	uint32_t i = 0, n = e->nreads, own = sv->own_len;
	uint64_t v, skip = UINT64_MAX;

	for (int m = 0; sv->matched && m < HP_REUSE_MATCHES && sv->matched[m].id; m++)
		if (sv->matched[m].id == e->id) {
			/* at or above own (the floor is at least where the
			 * reused top begins) */
			skip = sv->matched[m].floor - e->sp;
			break;
		}

	if (n && (uint64_t)e->off[n - 1] + sizeof(v) > (uint64_t)own + sv->top_len)
		return 0;
	for (; i < n && (uint64_t)e->off[i] + sizeof(v) <= own; i++) {
		memcpy(&v, sv->own + e->off[i], sizeof(v));
		if (v != e->val[i])
			return 0;
	}
	for (; i < n && e->off[i] < own; i++)
		if (view_word(sv, e->off[i], &v) || v != e->val[i])
			return 0;
	for (; i < n && e->off[i] < skip; i++) {
		memcpy(&v, sv->top + (e->off[i] - own), sizeof(v));
		if (v != e->val[i])
			return 0;
	}
	return 1;
}

static int same(const struct memo_ent *x, const struct memo_ent *y)
{
	return x->ip == y->ip && x->sp == y->sp && x->regmask == y->regmask &&
	       x->nreads == y->nreads && x->nframes == y->nframes &&
	       !memcmp(x->regval, y->regval, sizeof(x->regval)) &&
	       !memcmp(x->off, y->off, x->nreads * sizeof(*x->off)) &&
	       !memcmp(x->val, y->val, x->nreads * sizeof(*x->val));
}

uint32_t hp_memo_gen(struct hp_memo *m)
{
	return __atomic_load_n(&m->gen, __ATOMIC_ACQUIRE);
}

/* Owner: a new generation clears the table; then take in the entries the
 * workers made since, those of the current generation only. */
static void catch_up(struct hp_memo *m)
{
	uint32_t gen = __atomic_load_n(&m->gen, __ATOMIC_ACQUIRE);
	struct memo_ent *e, *next;

	if (gen != m->table_gen) {
		clear(m);	/* nothing from the old snapshot is usable again */
		m->table_gen = gen;
	}
	if (!__atomic_load_n(&m->incoming, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&m->in_lock);
	e = m->incoming;
	m->incoming = NULL;
	pthread_mutex_unlock(&m->in_lock);
	for (; e; e = next) {
		struct memo_ent **set = m->set[set_of(e->ip, e->sp)];
		int keep = e->gen == gen;

		next = e->next;
		/* Two misses of one path were in flight: keep one entry. */
		for (int w = 0; keep && w < HP_MEMO_WAYS && set[w]; w++)
			keep = !same(set[w], e);
		if (!keep) {
			hp_uframes_put(e->frames, e->nframes);
			free(e);
			continue;
		}
		e->id = ++m->last_id;
		/* The least recently used way goes; the new entry comes first. */
		ent_retire(m, set[HP_MEMO_WAYS - 1]);
		memmove(&set[1], &set[0], (HP_MEMO_WAYS - 1) * sizeof(set[0]));
		set[0] = e;
		hp_bump(&m->bytes, ent_bytes(e));
		hp_bump(&m->inserts, 1);
	}
}

int hp_memo_lookup(struct hp_memo *m, const struct heapprofd_rec_alloc *a,
		   const struct hp_stack_view *v, const struct hp_uframe **out, int max,
		   uint64_t *id)
{
	uint64_t ip = heapprofd_rec_pc(a), sp = heapprofd_rec_sp(a);
	struct memo_ent **set = m->set[set_of(ip, sp)];
	int n = -1;

	catch_up(m);
	for (int w = 0; w < HP_MEMO_WAYS && set[w]; w++) {
		struct memo_ent *e = set[w];

		if (e->ip != ip || e->sp != sp || e->nframes > max ||
		    !matches(e, a, v))
			continue;
		/* Most recently used first: the next lookup finds it at once. */
		memmove(&set[1], &set[0], w * sizeof(set[0]));
		set[0] = e;
		n = e->nframes;
		*out = e->frames;	/* lent: see hp_memo_tick */
		*id = e->id;
		break;
	}
	hp_bump(n < 0 ? &m->misses : &m->hits, 1);
	return n;
}

int hp_memo_returns_all(struct hp_memo *m, const struct heapprofd_rec_alloc *a, uint64_t id,
			int (*ok)(void *arg, uint64_t v), void *arg)
{
	struct memo_ent *e = m->set[set_of(heapprofd_rec_pc(a), heapprofd_rec_sp(a))][0];

	if (!e || e->id != id)
		return -1;
	for (int i = 1; i < e->nframes; i++)
		if (!ok(arg, e->frames[i].pc))
			return 0;
	return 1;
}

void hp_memo_insert(struct hp_memo *m, uint32_t gen, const struct heapprofd_rec_alloc *a,
		    const struct hp_utrace *t, const struct hp_uframe *f, int n)
{
	struct memo_ent *e;
	size_t sz;

	if (!t->ok || n <= 0)
		return;
	sz = sizeof(*e) + t->nreads * (sizeof(uint32_t) + sizeof(uint64_t)) +
	     n * sizeof(struct hp_uframe);
	e = malloc(sz);
	if (!e)
		return;
	memset(e, 0, sizeof(*e));
	e->ip = heapprofd_rec_pc(a);
	e->sp = heapprofd_rec_sp(a);
	e->gen = gen;
	e->regmask = t->regmask;
	for (int i = 0; i < HEAPPROFD_MAX_REGS; i++)
		if (t->regmask & (1U << i))
			e->regval[i] = a->regs[i];
	e->nreads = t->nreads;
	e->nframes = n;
	/* frames first: they need 8-byte alignment, the offsets do not */
	e->frames = (struct hp_uframe *)(e + 1);
	e->val = (uint64_t *)(e->frames + n);
	e->off = (uint32_t *)(e->val + t->nreads);
	/* Sorted by offset, for matches(), and each offset once (the unwinder
	 * reads some words more than once): insertion sort, once per miss. */
	e->nreads = 0;
	for (uint32_t i = 0; i < t->nreads; i++) {
		uint32_t k = e->nreads, j;

		while (k && e->off[k - 1] > t->off[i])
			k--;
		if (k && e->off[k - 1] == t->off[i])
			continue;	/* the same word: the same value */
		for (j = e->nreads; j > k; j--) {
			e->off[j] = e->off[j - 1];
			e->val[j] = e->val[j - 1];
		}
		e->off[k] = t->off[i];
		e->val[k] = t->val[i];
		e->nreads++;
	}
	for (int i = 0; i < n; i++) {
		e->frames[i] = f[i];
		if (f[i].elf && (i == 0 || f[i].elf != f[i - 1].elf))
			hp_elf_ref(f[i].elf);
	}
	pthread_mutex_lock(&m->in_lock);
	e->next = m->incoming;
	__atomic_store_n(&m->incoming, e, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&m->in_lock);
}

void hp_memo_stats(struct hp_memo *m, uint64_t *hits, uint64_t *misses, size_t *bytes)
{
	*hits = __atomic_load_n(&m->hits, __ATOMIC_RELAXED);
	*misses = __atomic_load_n(&m->misses, __ATOMIC_RELAXED);
	*bytes = sizeof(*m) + __atomic_load_n(&m->bytes, __ATOMIC_RELAXED);
}
