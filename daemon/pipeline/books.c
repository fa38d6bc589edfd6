// SPDX-License-Identifier: GPL-2.0
/*
 * The books of one process. Touched only by the bookkeeping thread (seed
 * 004: queue-based, no locks on the books).
 *
 * Per heap, a call-site tree whose nodes point to their parents; frames are
 * interned per process, so a repeated stack costs one hash lookup per frame
 * and no memory. Each node holds the estimates of the allocations whose
 * stack ends there (self values).
 *
 * Frees are matched to mallocs in sequence order:
 *   - a malloc at an address that is still live replaces an older live entry
 *     (the address was reused, so the older one was freed; its free record
 *     was dropped or is late); a malloc older than the live entry was freed
 *     already and is accounted as allocated and freed;
 *   - a free older than the live malloc at its address is ignored (it freed
 *     an earlier allocation);
 *   - a free with no live malloc waits (pending) for a malloc with a lower
 *     seq that is still being unwound; pending frees that stay unmatched
 *     for HP_PENDING_WINDOW events are dropped (they freed memory allocated
 *     before profiling began).
 *
 * The dmabuf heap (DMA-BUF exports the kernel reports, ABI 5) is booked
 * the same way under its own seq (the kernel's counter: the live entries
 * are keyed by heap, so its seqs are only ever compared with each other).
 * Its paths start at a node for the buffer's exporter, which becomes the
 * sample's "exporter" label; its bytes are device memory, not the heap's,
 * so they stay out of the in-use total and its peak.
 *
 * The peak: every new maximum of the in-use bytes starts a new "peak
 * generation". Before a node changes for the first time after a peak it
 * saves its values, so the state at the peak costs O(1) per event and the
 * state at the peak is (saved values if the node changed since, else the
 * current ones).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define HP_PENDING_WINDOW	65536
/* Bounds against a hostile or runaway process (memory of the daemon). */
#define HP_MAX_NODES		(4U << 20)
#define HP_MAX_LIVE		(16U << 20)

struct counts {
	double alloc_n, free_n, inuse_n;
	int64_t alloc_b, free_b, inuse_b, alloc_u, inuse_u;
};

struct frame {
	struct hp_elf *elf;
	uint64_t pc, bias;
	int is_ip;		/* the sampled ip itself, not a return address */
	uint32_t exp_loc;	/* its location in export exp_gen's profile */
	const char *label;	/* not a frame: a dmabuf exporter (interned) */
	uint32_t exp_gen;	/* the export that set exp_loc (0: none) */
};

/* Distinct exporter names kept apart; more are booked as one. */
#define HP_MAX_LABELS		256

struct node {
	struct node *parent;
	struct frame *frame;
	struct counts cur, peak;
	uint64_t snap_gen;
	struct node *next_all;
	int listed;		/* on its heap's list of nodes with self values */
	uint32_t depth;		/* frames from the root: a sample's length in a dump */
};

struct live {
	struct node *node;	/* on the free list: the next free entry */
	int64_t est, usable;
	double objs;
	uint64_t seq;
};

/*
 * Live entries come from chunks and go back to a free list: one is taken
 * and given back per sampled allocation, and malloc's calloc and free were
 * a tenth of the books thread's time.
 */
#define HP_LIVE_CHUNK		256

struct live_chunk {
	struct live_chunk *next;
	struct live l[HP_LIVE_CHUNK];
};

struct pending {
	uint64_t seq;
	uint64_t born;
};

/*
 * Stacks seen lately and the node they end in: a repeated stack costs one
 * hash over its frames and one compare instead of two lookups per frame.
 * Direct-mapped. Frames are compared by pc and ELF pointer; those ELFs
 * stay alive while the books do (the interned frames hold them).
 */
#define HP_STACK_CACHE		1024U	/* power of two */

struct stack_ent {
	uint64_t hash;
	struct node *leaf;
	uint32_t heap_id, key_flags;
	int n;
	struct stack_frame { uint64_t pc; const struct hp_elf *elf; } *fr;
};

/*
 * Paths the memo names: an allocation whose frames the unwind memo lent
 * comes with the memo entry's id, and one id always comes with the same
 * frames (ids are never reused), so the node its path ends in is found by
 * the id alone, without hashing and comparing the frames. Direct-mapped.
 */
#define HP_PATH_CACHE		1024U	/* power of two */

struct path_ent {
	uint64_t id;
	struct node *leaf;
	uint32_t heap_id, truncated;
};

struct heap {
	uint32_t id;
	char name[32];
	struct node root;
	struct node *all;	/* every node with self values */
	size_t nnodes;
	struct hp_ivals ivals;	/* the intervals of its samples */
};

struct hp_books {
	uint32_t exp_gen;		/* exports so far (struct frame's exp_gen) */
	struct hp_hmap frames;		/* (elf, vaddr|pc) -> frame */
	struct hp_hmap children;	/* (parent, frame) -> node */
	struct hp_hmap live;		/* (addr, heap) -> live */
	struct hp_hmap pending;		/* (addr, heap) -> pending */
	struct heap *heaps[HEAPPROFD_HEAP_MAX + 1];
	int nheaps;		/* non-NULL entries of heaps[] (hp_books_mem runs per record) */
	int64_t inuse_total, peak_total;
	uint64_t peak_gen;
	uint64_t events;
	uint64_t unmatched_frees;
	size_t nframes, nnodes;
	/* What a dump of the books holds (hp_books_export_size). */
	uint64_t listed, listed_depth;
	int dump_at_max;
	struct stack_ent stacks[HP_STACK_CACHE];
	struct path_ent paths[HP_PATH_CACHE];
	size_t stack_bytes;
	struct live *free_live;
	struct live_chunk *live_chunks;
	/* Kernel records: the DMABUF record waiting for its ALLOC. */
	struct {
		uint64_t seq, inode;
		char exporter[32];
		int valid;
	} dmabuf_next;
	struct hp_strtab labels;	/* exporter names */
	uint64_t kexports, kreleases, klost_records, klost_bytes, kunlabelled;
};

static struct live *live_get(struct hp_books *b)
{
	struct live *l = b->free_live;

	if (!l) {
		struct live_chunk *c = malloc(sizeof(*c));

		if (!c)
			return NULL;
		c->next = b->live_chunks;
		b->live_chunks = c;
		for (int i = HP_LIVE_CHUNK - 1; i >= 0; i--) {
			c->l[i].node = (struct node *)b->free_live;
			b->free_live = &c->l[i];
		}
		l = b->free_live;
	}
	b->free_live = (struct live *)l->node;
	memset(l, 0, sizeof(*l));
	return l;
}

static void live_put(struct hp_books *b, struct live *l)
{
	l->node = (struct node *)b->free_live;
	b->free_live = l;
}

struct hp_books *hp_books_new(int dump_at_max)
{
	struct hp_books *b = calloc(1, sizeof(*b));

	if (b)
		b->dump_at_max = dump_at_max;
	return b;
}

static void free_all(struct hp_hmap *m)
{
	struct hp_hent *e;

	hp_hmap_for_each(m, e)
		free(e->v);
	hp_hmap_free(m);
}

void hp_books_free(struct hp_books *b)
{
	struct hp_hent *e;
	int i;

	if (!b)
		return;
	hp_hmap_for_each(&b->frames, e)
		hp_elf_put(((struct frame *)e->v)->elf);
	free_all(&b->frames);
	free_all(&b->children);
	hp_hmap_free(&b->live);		/* the entries are in the chunks */
	while (b->live_chunks) {
		struct live_chunk *c = b->live_chunks;

		b->live_chunks = c->next;
		free(c);
	}
	free_all(&b->pending);
	for (i = 0; i <= HEAPPROFD_HEAP_MAX; i++)
		free(b->heaps[i]);
	for (i = 0; i < (int)HP_STACK_CACHE; i++)
		free(b->stacks[i].fr);
	hp_strtab_free(&b->labels);
	free(b);
}

static struct heap *get_heap(struct hp_books *b, uint32_t id)
{
	struct heap *h;

	if (id > HEAPPROFD_HEAP_MAX)
		return NULL;
	h = b->heaps[id];
	if (h)
		return h;
	h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->id = id;
	if (id == HEAPPROFD_HEAP_MALLOC)
		strcpy(h->name, "libc.malloc");
	else if (id == HEAPPROFD_HEAP_DMABUF)
		strcpy(h->name, "dmabuf");
	else
		snprintf(h->name, sizeof(h->name), "heap%u", id);
	h->root.snap_gen = (uint64_t)-1;
	b->heaps[id] = h;
	b->nheaps++;
	return h;
}

void hp_books_heap(struct hp_books *b, const struct heapprofd_rec_heap *r)
{
	struct heap *h = get_heap(b, r->heap_id);

	/* The kernel's dmabuf heap has its own sample types in the profile:
	 * a custom heap may not pass for it. */
	if (h && hp_heap_own_types(r->name))
		snprintf(h->name, sizeof(h->name), "user:%.26s", r->name);
	else if (h)
		snprintf(h->name, sizeof(h->name), "%s", r->name);
}

static struct frame *intern_frame(struct hp_books *b, const struct hp_uframe *f,
				  int is_ip)
{
	uint64_t k2 = f->elf ? f->pc - f->bias : f->pc;
	struct frame *fr;

	k2 = k2 << 1 | (uint64_t)is_ip;
	fr = hp_hmap_get(&b->frames, (uintptr_t)f->elf, k2);
	if (fr)
		return fr;
	fr = calloc(1, sizeof(*fr));
	if (!fr)
		return NULL;
	fr->elf = hp_elf_ref(f->elf);
	/* A new file's names are looked for now, off the books' path, and a
	 * new address of a file the symbol cache keeps closed is named now. */
	hp_symd_prefetch(fr->elf);
	if (f->elf)
		hp_symd_prefetch_addr(fr->elf, f->pc - (is_ip ? 0 : 1) - f->bias);
	fr->pc = f->pc;
	fr->bias = f->bias;
	fr->is_ip = is_ip;
	if (hp_hmap_put(&b->frames, (uintptr_t)f->elf, k2, fr)) {
		hp_elf_put(fr->elf);
		free(fr);
		return NULL;
	}
	b->nframes++;
	return fr;
}

static int label_known(const struct hp_books *b, const char *name)
{
	uint64_t h = hp_hash_str(name), l = strlen(name);
	const char *v;

	for (; (v = hp_hmap_get(&b->labels.m, h, l)) != NULL; l += 1ULL << 40)
		if (!strcmp(v, name))
			return 1;
	return 0;
}

/*
 * The exporter's node at the root of a dmabuf path. The name came from a
 * driver (exp_name): only printable ASCII is kept, so that it cannot break
 * a text report or a folded line.
 */
static struct frame *label_frame(struct hp_books *b, const char *exporter)
{
	char name[40];
	const char *in;
	struct frame *fr;
	size_t k;

	for (k = 0; exporter[k] && k < sizeof(name) - 1; k++) {
		unsigned char c = (unsigned char)exporter[k];

		name[k] = c > ' ' && c < 0x7f && c != ';' ? (char)c : '_';
	}
	name[k] = 0;
	if (!k)
		snprintf(name, sizeof(name), "(unnamed)");
	if (b->labels.m.n >= HP_MAX_LABELS && !label_known(b, name))
		snprintf(name, sizeof(name), "(other)");
	in = hp_intern(&b->labels, name);
	if (!in)
		return NULL;
	fr = hp_hmap_get(&b->frames, (uintptr_t)in, UINT64_MAX);
	if (fr)
		return fr;
	fr = calloc(1, sizeof(*fr));
	if (!fr)
		return NULL;
	fr->label = in;
	if (hp_hmap_put(&b->frames, (uintptr_t)in, UINT64_MAX, fr)) {
		free(fr);
		return NULL;
	}
	b->nframes++;
	return fr;
}

static struct node *child(struct hp_books *b, struct node *parent, struct frame *fr)
{
	struct node *n = hp_hmap_get(&b->children, (uintptr_t)parent, (uintptr_t)fr);

	if (n)
		return n;
	if (b->nnodes >= HP_MAX_NODES)
		return NULL;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->parent = parent;
	n->frame = fr;
	n->depth = parent->depth + 1;
	n->snap_gen = (uint64_t)-1;
	if (hp_hmap_put(&b->children, (uintptr_t)parent, (uintptr_t)fr, n)) {
		free(n);
		return NULL;
	}
	b->nnodes++;
	return n;
}

/* The client's own frames (its malloc wrapper) say nothing about the caller. */
static int is_client_frame(const struct hp_uframe *f)
{
	return f->elf && f->elf->is_client;
}

static uint64_t stack_hash(uint32_t heap_id, uint32_t key_flags,
			   const struct hp_uframe *f, int n)
{
	uint64_t h = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)heap_id << 32 | key_flags);

	for (int i = 0; i < n; i++) {
		h ^= f[i].pc + (uintptr_t)f[i].elf * 0xff51afd7ed558ccdULL;
		h *= 0xc4ceb9fe1a85ec53ULL;
		h ^= h >> 29;
	}
	return h;
}

static struct node *stack_lookup(struct hp_books *b, uint64_t hash, uint32_t heap_id,
				 uint32_t key_flags, const struct hp_uframe *f, int n)
{
	struct stack_ent *e = &b->stacks[hash & (HP_STACK_CACHE - 1)];

	if (!e->leaf || e->hash != hash || e->heap_id != heap_id ||
	    e->key_flags != key_flags || e->n != n)
		return NULL;
	for (int i = 0; i < n; i++)
		if (e->fr[i].pc != f[i].pc || e->fr[i].elf != f[i].elf)
			return NULL;
	return e->leaf;
}

static void stack_store(struct hp_books *b, uint64_t hash, uint32_t heap_id,
			uint32_t key_flags, const struct hp_uframe *f, int n, struct node *leaf)
{
	struct stack_ent *e = &b->stacks[hash & (HP_STACK_CACHE - 1)];
	struct stack_frame *fr = e->n == n ? e->fr : NULL;

	if (!fr) {
		fr = malloc(n * sizeof(*fr));
		if (!fr)
			return;
		b->stack_bytes -= e->n * sizeof(*fr);
		free(e->fr);
		b->stack_bytes += n * sizeof(*fr);
	}
	for (int i = 0; i < n; i++) {
		fr[i].pc = f[i].pc;
		fr[i].elf = f[i].elf;
	}
	e->fr = fr;
	e->n = n;
	e->hash = hash;
	e->heap_id = heap_id;
	e->key_flags = key_flags;
	e->leaf = leaf;
}

static void touch(struct hp_books *b, struct node *n)
{
	if (n->snap_gen != b->peak_gen) {
		n->peak = n->cur;
		n->snap_gen = b->peak_gen;
	}
}

static void account_free(struct hp_books *b, struct live *l, uint32_t heap_id)
{
	struct node *n = l->node;

	touch(b, n);
	n->cur.free_n += l->objs;
	n->cur.free_b += l->est;
	n->cur.inuse_n -= l->objs;
	n->cur.inuse_b -= l->est;
	n->cur.inuse_u -= l->usable;
	if (heap_id != HEAPPROFD_HEAP_DMABUF)
		b->inuse_total -= l->est;
}

static void expire_pending(struct hp_books *b);

static void tick(struct hp_books *b)
{
	b->events++;
	if ((b->events & (HP_PENDING_WINDOW - 1)) == 0 && b->pending.n)
		expire_pending(b);
}

static void expire_pending(struct hp_books *b)
{
	struct hp_hmap keep = { 0 };
	struct hp_hent *e;

	hp_hmap_for_each(&b->pending, e) {
		struct pending *p = e->v;

		if (b->events - p->born > HP_PENDING_WINDOW || hp_hmap_put(&keep, e->k1, e->k2, p)) {
			free(p);
			b->unmatched_frees++;
		}
	}
	hp_hmap_free(&b->pending);
	b->pending = keep;
}

void hp_books_alloc(struct hp_books *b, const struct heapprofd_rec_alloc *a,
		    struct hp_uframe *frames, int nframes, int borrowed, uint64_t path_id)
{
	struct heap *h = get_heap(b, a->heap_id);
	uint32_t truncated = !!(a->hdr.flags & HEAPPROFD_ALLOC_STACK_TRUNCATED);
	struct path_ent *pe = path_id ? &b->paths[path_id & (HP_PATH_CACHE - 1)] : NULL;
	int dmabuf = a->heap_id == HEAPPROFD_HEAP_DMABUF;
	struct node *n;
	struct live *l, *old;
	struct hp_hent *pen, *le;
	int i, first = 0, freed_already = 0;
	uint32_t key_flags;
	uint64_t hash = 0, mx;
	unsigned __int128 u;
	const char *exporter = NULL;

	tick(b);
	if (dmabuf) {
		/* Its DMABUF record came just before (uapi), unless it was lost. */
		if (b->dmabuf_next.valid && b->dmabuf_next.seq == a->seq &&
		    b->dmabuf_next.inode == a->addr)
			exporter = b->dmabuf_next.exporter;
		else
			b->kunlabelled++;
		b->kexports++;
		pe = NULL;	/* the memo never lends kernel records' frames */
	}
	if (!h)
		goto out;
	hp_ivals_add(&h->ivals, a->interval, !!(a->hdr.flags & HEAPPROFD_ALLOC_EXACT));
	if (pe && pe->id == path_id && pe->heap_id == a->heap_id && pe->truncated == truncated) {
		n = pe->leaf;
		goto found;
	}
	while (first < nframes - 1 && is_client_frame(&frames[first]))
		first++;
	/* What the path below depends on besides the frames themselves. */
	key_flags = (uint32_t)!!(a->hdr.flags & HEAPPROFD_ALLOC_STACK_TRUNCATED) |
		    (uint32_t)(first == 0) << 1;
	/* A dmabuf path also depends on its exporter: not in the stack cache
	 * (exports are few; the frames' lookups are cheap enough). */
	if (!dmabuf) {
		hash = stack_hash(a->heap_id, key_flags, frames + first, nframes - first);
		n = stack_lookup(b, hash, a->heap_id, key_flags, frames + first,
				 nframes - first);
		if (n)
			goto whole;
	}
	n = &h->root;
	if (dmabuf) {
		struct frame *lf = label_frame(b, exporter ? exporter : "(unknown)");
		struct node *c = lf ? child(b, n, lf) : NULL;

		if (c)
			n = c;
	}
	if (a->hdr.flags & HEAPPROFD_ALLOC_STACK_TRUNCATED) {
		/* The outermost frames are missing: say so at the root. */
		struct hp_uframe mark = { .pc = 0 };
		struct frame *fr = intern_frame(b, &mark, 0);
		struct node *c = fr ? child(b, n, fr) : NULL;

		if (c)
			n = c;
	}
	for (i = nframes - 1; i >= first; i--) {
		struct frame *fr = intern_frame(b, &frames[i], i == 0);
		struct node *c = fr ? child(b, n, fr) : NULL;

		if (!c)
			break;	/* out of memory or over the bound: charge the caller */
		n = c;
	}
	if (i >= first)
		goto found;	/* a partial path is not remembered */
	if (!dmabuf)
		stack_store(b, hash, a->heap_id, key_flags, frames + first, nframes - first, n);
whole:
	if (pe) {
		pe->id = path_id;
		pe->leaf = n;
		pe->heap_id = a->heap_id;
		pe->truncated = truncated;
	}
found:
	if (!n->listed) {
		n->listed = 1;
		n->next_all = h->all;
		h->all = n;
		h->nnodes++;
		b->listed++;
		b->listed_depth += n->depth;
	}
	l = live_get(b);
	if (!l)
		goto out;
	l->node = n;
	l->est = (int64_t)a->est_size;
	mx = a->usable_size > a->req_size ? a->usable_size : a->req_size;
	if (!a->req_size)
		u = a->est_size;
	else if (a->est_size <= UINT32_MAX && mx <= UINT32_MAX)
		u = a->est_size * mx / a->req_size;	/* fits: no 128-bit division */
	else
		u = (unsigned __int128)a->est_size * mx / a->req_size;
	l->usable = u > (unsigned __int128)INT64_MAX ? INT64_MAX : (int64_t)u;
	l->objs = (a->hdr.flags & HEAPPROFD_ALLOC_EXACT) || !a->req_size ||
		  a->est_size <= a->req_size ? 1.0 : (double)a->est_size / (double)a->req_size;
	l->seq = a->seq;

	touch(b, n);
	n->cur.alloc_n += l->objs;
	n->cur.alloc_b += l->est;
	n->cur.alloc_u += l->usable;

	/* Frees that came before their malloc are rare: most often none wait. */
	pen = b->pending.n ? hp_hmap_find(&b->pending, a->addr, a->heap_id) : NULL;
	if (pen && ((struct pending *)pen->v)->seq > a->seq) {
		/* Its free came first (this malloc was being unwound). */
		free(hp_hmap_del_at(&b->pending, pen));
		freed_already = 1;
	}
	/* One probe finds the address or the slot it will take (at the bound
	 * only a reused address has one). */
	if (freed_already)
		le = NULL;
	else if (b->live.n >= HP_MAX_LIVE)
		le = hp_hmap_find(&b->live, a->addr, a->heap_id);
	else
		le = hp_hmap_probe(&b->live, a->addr, a->heap_id);
	old = le ? le->v : NULL;
	if (old && old->seq > a->seq)
		freed_already = 1;	/* a newer malloc holds the address */
	if (freed_already || !le) {
		/* (!le: over the bound or out of memory: not kept as live) */
		n->cur.free_n += l->objs;
		n->cur.free_b += l->est;
		live_put(b, l);
		goto out;
	}
	if (old) {
		/* Address reused: the old allocation was freed, its free lost. */
		account_free(b, old, a->heap_id);
		live_put(b, old);
	}
	hp_hmap_set_at(&b->live, le, a->addr, a->heap_id, l);
	n->cur.inuse_n += l->objs;
	n->cur.inuse_b += l->est;
	n->cur.inuse_u += l->usable;
	if (!dmabuf)
		b->inuse_total += l->est;
	if (b->inuse_total > b->peak_total) {
		b->peak_total = b->inuse_total;
		b->peak_gen++;
	}
out:
	if (dmabuf)
		b->dmabuf_next.valid = 0;
	if (!borrowed)
		hp_uframes_put(frames, nframes);
}

void hp_books_dmabuf(struct hp_books *b, const struct heapprofd_rec_dmabuf *d)
{
	b->dmabuf_next.valid = 1;
	b->dmabuf_next.seq = d->seq;
	b->dmabuf_next.inode = d->inode;
	/* NUL-terminated within its 32 bytes (parse.c) */
	snprintf(b->dmabuf_next.exporter, sizeof(b->dmabuf_next.exporter), "%s", d->exporter);
}

void hp_books_klost(struct hp_books *b, const struct heapprofd_rec_klost *k)
{
	b->klost_records = hp_sat_add((int64_t)b->klost_records,
				      (int64_t)(k->records > INT64_MAX ? INT64_MAX : k->records));
	b->klost_bytes = hp_sat_add((int64_t)b->klost_bytes,
				    (int64_t)(k->bytes > INT64_MAX ? INT64_MAX : k->bytes));
}

void hp_books_free_rec(struct hp_books *b, const struct heapprofd_rec_free *f)
{
	struct hp_hent *e = hp_hmap_find(&b->live, f->addr, f->heap_id);
	struct live *l = e ? e->v : NULL;
	struct pending *p;

	tick(b);
	if (f->heap_id == HEAPPROFD_HEAP_DMABUF)
		b->kreleases++;
	if (l) {
		if (l->seq > f->seq)
			return;		/* frees an earlier allocation */
		hp_hmap_del_at(&b->live, e);
		account_free(b, l, f->heap_id);
		live_put(b, l);
		return;
	}
	p = hp_hmap_get(&b->pending, f->addr, f->heap_id);
	if (p) {
		if (f->seq > p->seq)
			p->seq = f->seq;
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return;
	p->seq = f->seq;
	p->born = b->events;
	if (hp_hmap_put(&b->pending, f->addr, f->heap_id, p))
		free(p);
}

void hp_books_stats(const struct hp_books *b, uint64_t *live, uint64_t *unmatched)
{
	*live = b->live.n;
	*unmatched = b->unmatched_frees + b->pending.n;
}

size_t hp_books_mem(const struct hp_books *b)
{
	const size_t ovh = 16;	/* malloc's own bookkeeping per chunk */
	size_t heaps = (size_t)b->nheaps * (sizeof(struct heap) + ovh);

	return sizeof(*b) + heaps +
	       (b->frames.cap + b->children.cap + b->live.cap + b->pending.cap) *
		       sizeof(struct hp_hent) +
	       b->nframes * (sizeof(struct frame) + ovh) +
	       b->nnodes * (sizeof(struct node) + ovh) +
	       b->live.n * (sizeof(struct live) + ovh) +
	       b->pending.n * (sizeof(struct pending) + ovh) + b->stack_bytes;
}

void hp_books_export_size(const struct hp_books *b, uint64_t *samples, uint64_t *locs,
			  uint64_t *frames)
{
	*samples = b->listed;
	*locs = b->listed_depth;
	*frames = b->nframes;
}

/* ---- export ------------------------------------------------------------ */

struct exp {
	struct hp_prof *p;
	uint32_t gen;		/* frames with this exp_gen have their exp_loc */
	struct hp_hmap maps;	/* (elf, bias) -> map index + 1 */
	struct hp_symreqs *want;	/* NULL: no names */
};

static uint32_t map_of(struct exp *x, const struct frame *f)
{
	uintptr_t v = (uintptr_t)hp_hmap_get(&x->maps, (uintptr_t)f->elf, f->bias);
	struct hp_prof_map m = { 0 };
	char bid[160];

	if (v)
		return (uint32_t)v;
	hp_elf_build_id_hex(f->elf, bid, sizeof(bid));
	m.start = f->elf->text_lo + f->bias;
	m.limit = f->elf->text_hi + f->bias;
	m.off = f->elf->text_off;
	m.file = f->elf->path;
	m.build_id = bid[0] ? bid : NULL;
	v = hp_prof_add_map(x->p, &m);
	if (v)
		hp_hmap_put(&x->maps, (uintptr_t)f->elf, f->bias, (void *)v);
	return (uint32_t)v;
}

/* A frame's location in the export's profile, added at its first use (the
 * frame remembers it: every sample's path is walked, and a lookup per
 * frame of each was a tenth of clang's export). */
static uint32_t loc_of(struct exp *x, struct frame *f)
{
	struct hp_prof_loc l = { 0 };
	uint64_t lookup = f->pc - (f->is_ip ? 0 : 1);
	uint32_t v;

	if (f->exp_gen == x->gen)
		return f->exp_loc;
	l.addr = lookup;
	if (!f->elf && !f->pc) {
		l.func = "[stack truncated]";
		l.addr = 0;
	} else if (f->elf) {
		l.map = map_of(x, f);
	}
	v = hp_prof_add_loc(x->p, &l);
	f->exp_gen = x->gen;
	f->exp_loc = v;
	/* Named later, by the dump's thread: the books never wait for it. */
	if (f->elf && x->want)
		hp_symreqs_add(x->want, (uint32_t)v, f->elf, lookup - f->bias);
	return (uint32_t)v;
}

void hp_books_export(struct hp_books *b, struct hp_prof *out, unsigned which,
		     struct hp_symreqs *want)
{
	struct exp x = { .p = out, .want = want };
	uint32_t *stk = NULL;
	size_t cap = 0;
	int i;

	if (!++b->exp_gen)	/* (0 is no export's) */
		b->exp_gen = 1;
	x.gen = b->exp_gen;

	if (b->pending.n)
		expire_pending(b);
	for (i = 0; i <= HEAPPROFD_HEAP_MAX; i++) {
		struct heap *h = b->heaps[i];
		struct node *n;

		if (!h)
			continue;
		for (n = h->all; n; n = n->next_all) {
			const struct counts *c = &n->cur;
			int64_t v[HP_NV];
			uint32_t depth = 0;
			const char *exporter = NULL;
			struct node *q;

			if (which == HP_DUMP_PEAK && n->snap_gen == b->peak_gen)
				c = &n->peak;
			v[HP_V_ALLOC_OBJ] = (int64_t)(c->alloc_n + 0.5);
			v[HP_V_ALLOC_SPACE] = c->alloc_b;
			v[HP_V_INUSE_OBJ] = (int64_t)(c->inuse_n + 0.5);
			v[HP_V_INUSE_SPACE] = c->inuse_b;
			v[HP_V_ALLOC_USABLE] = c->alloc_u;
			v[HP_V_INUSE_USABLE] = c->inuse_u;
			if (!v[HP_V_ALLOC_SPACE] && !v[HP_V_INUSE_SPACE])
				continue;
			for (q = n; q && q->frame; q = q->parent) {
				if (q->frame->label) {
					exporter = q->frame->label;
					continue;
				}
				if (depth == cap) {
					uint32_t *ns;

					cap = cap ? cap * 2 : 64;
					ns = realloc(stk, cap * sizeof(*ns));
					if (!ns)
						goto done;
					stk = ns;
				}
				stk[depth++] = loc_of(&x, q->frame);
			}
			hp_prof_add_sample_l(out, stk, depth, v, h->name, exporter);
		}
	}
done:
	hp_prof_add_comment(out, "peak in-use bytes (estimated): %lld",
			    (long long)b->peak_total);
	for (i = 0; i <= HEAPPROFD_HEAP_MAX; i++)
		if (b->heaps[i])
			hp_ivals_comment(&b->heaps[i]->ivals, b->heaps[i]->name, out);
	if (b->kexports || b->kreleases || b->klost_records)
		hp_prof_add_comment(out, "dmabuf heap (kernel records, sample types dmabuf_*, label exporter): %llu DMA-BUF exports sampled (%llu without their exporter record), %llu releases",
				    (unsigned long long)b->kexports,
				    (unsigned long long)b->kunlabelled,
				    (unsigned long long)b->kreleases);
	if (b->klost_records)
		hp_prof_add_comment(out, "WARNING: %llu kernel records were lost because the module's queue for this process was full: DMA-BUF exports standing for about %llu bytes are missing from the dmabuf heap, and lost releases leave their buffers counted as in use",
				    (unsigned long long)b->klost_records,
				    (unsigned long long)b->klost_bytes);
	free(stk);
	hp_hmap_free(&x.maps);
}
