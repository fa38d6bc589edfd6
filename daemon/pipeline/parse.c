// SPDX-License-Identifier: GPL-2.0
/*
 * Record validation. The caller copied the record out of shared memory, but
 * the producer is untrusted: every field is checked here before anything
 * else looks at it. Sizes that cannot be real end the session.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Nothing real is this big; a bigger size is garbage (2^48 bytes). */
#define HP_SIZE_LIMIT	(1ULL << 48)

static int bad(char *why, size_t wl, const char *fmt, ...)
{
	va_list ap;

	if (why && wl) {
		va_start(ap, fmt);
		vsnprintf(why, wl, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/*
 * A stack delta (uapi HEAPPROFD_ALLOC_STACK_DELTA): runs in order, inside
 * stack_len, their bytes within the record. The previous record's part is
 * the reader's own (reuse.c).
 */
static int check_delta(const struct heapprofd_rec_alloc *a, const uint8_t *q, size_t n,
		       char *why, size_t wl)
{
	const struct heapprofd_stack_delta *d = (const void *)q;
	const struct heapprofd_delta_run *r = (const void *)(d + 1);
	uint64_t end = 0, bytes;

	if (n < sizeof(*d) || d->resv)
		return bad(why, wl, "alloc record stack delta header short or not zero");
	if (a->stack_len % 8 || !a->stack_top)
		return bad(why, wl, "alloc record stack delta over %u bytes or without a stack top",
			   a->stack_len);
	if (d->nruns > (n - sizeof(*d)) / sizeof(*r) || d->nruns > a->stack_len / 8)
		return bad(why, wl, "alloc record stack delta of %u runs does not fit", d->nruns);
	bytes = sizeof(*d) + (uint64_t)d->nruns * sizeof(*r);
	for (uint32_t i = 0; i < d->nruns; i++) {
		if (r[i].off % 8 || r[i].len % 8 || !r[i].len || r[i].off < end ||
		    (uint64_t)r[i].off + r[i].len > a->stack_len)
			return bad(why, wl, "alloc record stack delta run %u (%u+%u) out of order or range",
				   i, r[i].off, r[i].len);
		end = (uint64_t)r[i].off + r[i].len;
		bytes += r[i].len;
	}
	if (bytes > n)
		return bad(why, wl, "alloc record stack delta runs exceed the record");
	return 0;
}

/*
 * Python frames (uapi HEAPPROFD_ALLOC_PYFRAMES): the trailer at the end of
 * the record, its frames just before it, all within the record beyond the
 * fixed part. *len becomes the record's length without them.
 */
static int check_pyframes(const uint8_t *p, size_t *len, struct hp_parsed *o,
			  char *why, size_t wl)
{
	const struct heapprofd_pyframes *t;
	size_t room = *len - sizeof(struct heapprofd_rec_alloc);

	if (room < sizeof(*t))
		return bad(why, wl, "alloc record too short for its Python frames");
	t = (const void *)(p + *len - sizeof(*t));
	if (t->resv || !t->nframes || t->nframes > HEAPPROFD_PYFRAMES_MAX)
		return bad(why, wl, "alloc record with %u Python frames", t->nframes);
	if ((size_t)t->nframes * sizeof(struct heapprofd_pyframe) > room - sizeof(*t))
		return bad(why, wl, "alloc record's %u Python frames do not fit", t->nframes);
	o->npy = t->nframes;
	o->py = (const struct heapprofd_pyframe *)t - t->nframes;
	*len -= sizeof(*t) + (size_t)t->nframes * sizeof(struct heapprofd_pyframe);
	return 0;
}

static int check_alloc(const uint8_t *p, size_t len, struct hp_parsed *o,
		       int kernel, char *why, size_t wl)
{
	const struct heapprofd_rec_alloc *a = (const void *)p;
	uint64_t sp;

	if (len < sizeof(*a))
		return bad(why, wl, "alloc record too short (%zu < %zu)", len, sizeof(*a));
	if (a->hdr.flags & ~(HEAPPROFD_ALLOC_STACK_TRUNCATED | HEAPPROFD_ALLOC_EXACT |
			     HEAPPROFD_ALLOC_STACK_REUSED | HEAPPROFD_ALLOC_STACK_DELTA |
			     HEAPPROFD_ALLOC_PYFRAMES | HEAPPROFD_ALLOC_STACK_SAME))
		return bad(why, wl, "alloc record has unknown flags 0x%x", a->hdr.flags);
	if (a->hdr.flags & HEAPPROFD_ALLOC_PYFRAMES) {
		/* The Python frames end the record: the rest is checked without them. */
		if (kernel || check_pyframes(p, &len, o, why, wl))
			return kernel ? bad(why, wl, "kernel alloc record with Python frames") : -1;
	}
	/* A same-path record (uapi): a whole reuse, no stack, no delta. */
	if (a->hdr.flags & HEAPPROFD_ALLOC_STACK_SAME) {
		if (kernel || !a->code_gen || a->stack_len ||
		    (a->hdr.flags & (HEAPPROFD_ALLOC_STACK_DELTA | HEAPPROFD_ALLOC_STACK_TRUNCATED)) ||
		    !(a->hdr.flags & HEAPPROFD_ALLOC_STACK_REUSED))
			return bad(why, wl, "same-path alloc record with a stack, a delta or no code set");
	} else if (a->code_gen) {
		return bad(why, wl, "alloc record names a code set without claiming a same path");
	}
	/* The daemon unwinds its own architecture's stacks. */
	if (a->arch != HEAPPROFD_ARCH_NATIVE)
		return bad(why, wl, "alloc record arch %u: this daemon unwinds arch %u only",
			   a->arch, HEAPPROFD_ARCH_NATIVE);
	if (a->nregs < HEAPPROFD_NREGS_NATIVE || a->nregs > HEAPPROFD_MAX_REGS)
		return bad(why, wl, "alloc record nregs %u out of range", a->nregs);
	sp = heapprofd_rec_sp(a);
	if (a->hdr.flags & HEAPPROFD_ALLOC_STACK_DELTA) {
		if (kernel)
			return bad(why, wl, "kernel alloc record with a stack delta");
		if (check_delta(a, p + sizeof(*a), len - sizeof(*a), why, wl))
			return -1;
	} else if (a->stack_len > len - sizeof(*a)) {
		return bad(why, wl, "alloc record stack_len %u exceeds record (%zu bytes)",
			   a->stack_len, len);
	}
	if (sp + a->stack_len < sp)
		return bad(why, wl, "alloc record stack wraps the address space");
	if (a->stack_top && sp + a->stack_len > a->stack_top)
		return bad(why, wl, "alloc record stack extends past stack_top");
	if (a->hdr.flags & HEAPPROFD_ALLOC_STACK_REUSED) {
		if (!a->stack_reused || a->stack_reused > HEAPPROFD_STACK_REUSE_MAX ||
		    a->stack_reused % 8 ||
		    (a->hdr.flags & HEAPPROFD_ALLOC_STACK_TRUNCATED) ||
		    sp + a->stack_len + a->stack_reused != a->stack_top)
			return bad(why, wl, "alloc record reuses %u stack bytes that do not end at stack_top",
				   a->stack_reused);
	} else if (a->stack_reused) {
		return bad(why, wl, "alloc record has stack_reused without its flag");
	}
	if (a->heap_id > HEAPPROFD_HEAP_MAX)
		return bad(why, wl, "alloc record heap id %u > %u", a->heap_id, HEAPPROFD_HEAP_MAX);
	/*
	 * The dmabuf heap is the kernel's alone: its addresses are inode
	 * numbers and its seq its own counter, so a ring record there could
	 * free or shadow a buffer the kernel reported.
	 */
	if (kernel && a->heap_id != HEAPPROFD_HEAP_DMABUF)
		return bad(why, wl, "kernel alloc record for heap %u, not dmabuf", a->heap_id);
	if (!kernel && a->heap_id == HEAPPROFD_HEAP_DMABUF)
		return bad(why, wl, "alloc record in the kernel's dmabuf heap");
	/* The kernel never reuses a stack (uapi): a record that says so lies. */
	if (kernel && (a->hdr.flags & HEAPPROFD_ALLOC_STACK_REUSED))
		return bad(why, wl, "kernel alloc record reuses a stack");
	if (!a->addr)
		return bad(why, wl, "alloc record for address 0");
	if (a->req_size >= HP_SIZE_LIMIT || a->usable_size >= HP_SIZE_LIMIT ||
	    a->est_size >= HP_SIZE_LIMIT)
		return bad(why, wl, "alloc record with an impossible size");
	if (!a->est_size)
		return bad(why, wl, "alloc record stands for 0 bytes");
	if (!a->interval || a->interval >= HP_SIZE_LIMIT)
		return bad(why, wl, "alloc record interval %llu out of range",
			   (unsigned long long)a->interval);
	if (!(a->hdr.flags & HEAPPROFD_ALLOC_EXACT) && !a->count)
		return bad(why, wl, "sampled alloc record with count 0");
	o->alloc = a;
	o->stack = p + sizeof(*a);
	/* A delta's stack is rebuilt by reuse.c before anything reads it. */
	o->stack_len = (a->hdr.flags & HEAPPROFD_ALLOC_STACK_DELTA) ? 0 : a->stack_len;
	return 0;
}

/* A free, a heap or a maps record (the kernel writes only frees). */
static int check_free(const void *rec, size_t len, struct hp_parsed *o, int kernel,
		      char *why, size_t wl)
{
	const struct heapprofd_rec_free *f = rec;

	if (len < sizeof(*f))
		return bad(why, wl, "free record too short (%zu bytes)", len);
	if (f->heap_id > HEAPPROFD_HEAP_MAX)
		return bad(why, wl, "free record heap id %u > %u", f->heap_id, HEAPPROFD_HEAP_MAX);
	if (kernel && f->heap_id != HEAPPROFD_HEAP_DMABUF)
		return bad(why, wl, "kernel free record for heap %u, not dmabuf", f->heap_id);
	if (!kernel && f->heap_id == HEAPPROFD_HEAP_DMABUF)
		return bad(why, wl, "free record in the kernel's dmabuf heap");
	o->free = f;
	return 0;
}

/* The records only the kernel writes (uapi, "Kernel records"). */
static int check_kernel_only(const void *rec, size_t len, uint16_t type, struct hp_parsed *o,
			     char *why, size_t wl)
{
	if (type == HEAPPROFD_REC_KLOST) {
		if (len < sizeof(struct heapprofd_rec_klost))
			return bad(why, wl, "klost record too short (%zu bytes)", len);
		o->klost = rec;
		return 0;
	}
	if (type == HEAPPROFD_REC_DMABUF) {
		const struct heapprofd_rec_dmabuf *d = rec;

		if (len < sizeof(*d))
			return bad(why, wl, "dmabuf record too short (%zu bytes)", len);
		if (!memchr(d->exporter, 0, sizeof(d->exporter)))
			return bad(why, wl, "dmabuf record exporter not NUL-terminated");
		if (!d->inode)
			return bad(why, wl, "dmabuf record for inode 0");
		if (d->size >= HP_SIZE_LIMIT)
			return bad(why, wl, "dmabuf record with an impossible size");
		o->dmabuf = d;
		return 0;
	}
	return bad(why, wl, "unknown kernel record type 0x%x", type);
}

static int parse(const void *rec, size_t len, struct hp_parsed *o, int kernel,
		 char *why, size_t wl)
{
	const uint8_t *p = rec;
	struct heapprofd_rec_hdr h;
	uint32_t rlen;

	memset(o, 0, sizeof(*o));
	if (!rec || len < sizeof(h))
		return bad(why, wl, "record shorter than its header (%zu bytes)", len);
	if (len > HEAPPROFD_REC_LEN_MASK)
		return bad(why, wl, "record longer than any ring (%zu bytes)", len);
	memcpy(&h, p, sizeof(h));
	if (h.len & (HEAPPROFD_REC_BUSY | HEAPPROFD_REC_DISCARD))
		return bad(why, wl, "record still busy or discarded (len word 0x%x)", h.len);
	/* read(2) framing: no position, so no stamp (uapi, "Kernel records"). */
	if (kernel && h.stamp)
		return bad(why, wl, "kernel record with stamp 0x%x", h.stamp);
	rlen = h.len & HEAPPROFD_REC_LEN_MASK;
	if (rlen != len)
		return bad(why, wl, "record length %u does not match the %zu bytes read", rlen, len);
	if (rlen % HEAPPROFD_REC_ALIGN)
		return bad(why, wl, "record length %u not a multiple of %u", rlen,
			   HEAPPROFD_REC_ALIGN);
	o->type = h.type;
	o->kernel = kernel;
	switch (h.type) {
	case HEAPPROFD_REC_ALLOC:
		return check_alloc(p, len, o, kernel, why, wl);
	case HEAPPROFD_REC_FREE:
		return check_free(rec, len, o, kernel, why, wl);
	case HEAPPROFD_REC_HEAP: {
		const struct heapprofd_rec_heap *hp = rec;

		if (kernel)
			break;
		if (len < sizeof(*hp))
			return bad(why, wl, "heap record too short (%zu bytes)", len);
		if (hp->heap_id < HEAPPROFD_HEAP_USER || hp->heap_id > HEAPPROFD_HEAP_MAX)
			return bad(why, wl, "heap record id %u outside [%u, %u]", hp->heap_id,
				   HEAPPROFD_HEAP_USER, HEAPPROFD_HEAP_MAX);
		if (!memchr(hp->name, 0, sizeof(hp->name)) || !hp->name[0])
			return bad(why, wl, "heap record name not NUL-terminated or empty");
		if (!hp->interval || hp->interval >= HP_SIZE_LIMIT)
			return bad(why, wl, "heap record interval out of range");
		o->heap = hp;
		return 0;
	}
	case HEAPPROFD_REC_CODE: {
		const struct heapprofd_rec_code *c = rec;

		if (kernel)
			break;
		if (len < sizeof(*c) || !c->gen || c->n > HEAPPROFD_CODE_MAX ||
		    sizeof(*c) + (size_t)c->n * sizeof(c->granule[0]) > len)
			return bad(why, wl, "code record of %zu bytes with a bad count or generation", len);
		o->code = c;
		return 0;
	}
	case HEAPPROFD_REC_MAPS:
		if (kernel)
			break;
		if (len < sizeof(struct heapprofd_rec_maps))
			return bad(why, wl, "maps record too short (%zu bytes)", len);
		o->maps = rec;
		return 0;
	default:
		if (kernel)
			return check_kernel_only(rec, len, h.type, o, why, wl);
		if (h.type >= HEAPPROFD_REC_KERNEL_FIRST)
			return 1;	/* reserved for the kernel: not ours to read */
		return bad(why, wl, "unknown record type %u", h.type);
	}
	return bad(why, wl, "record type %u does not come from the kernel", h.type);
}

int hp_parse_record(const void *rec, size_t len, struct hp_parsed *o,
		    char *why, size_t wl)
{
	return parse(rec, len, o, 0, why, wl);
}

int hp_parse_krecord(const void *rec, size_t len, struct hp_parsed *o,
		     char *why, size_t wl)
{
	return parse(rec, len, o, 1, why, wl);
}
