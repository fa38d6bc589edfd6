// SPDX-License-Identifier: GPL-2.0
/*
 * The frames of a sample as the human-facing outputs show them, with
 * allocator wrappers folded into their callers.
 *
 * The rule is pprof's drop_frames (github.com/google/pprof, profile/prune.go
 * Prune): walk the stack from the root towards the leaf; once a frame that
 * does NOT match the regular expression has been seen, the first frame that
 * does match is dropped together with everything it called. The caller of
 * the outermost allocator frame becomes the leaf: the call site. Frames that
 * match at the root end (before any other frame) are kept, and a stack made
 * only of matching frames is left whole. The expression matches a whole
 * function name (anchored at both ends, as pprof does).
 *
 * The expression is the profile's own (pprof's Profile.drop_frames, which
 * our pprof files carry so that `go tool pprof` folds the same frames), or
 * HP_DROP_FRAMES_DEFAULT, or what the user gave (`report --drop-frames`).
 */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/*
 * Allocator entry points and the wrappers programs put around them: libc,
 * C++, GLib, common x* helpers, sqlite3's, CPython's, and any name ending in
 * _malloc, _calloc or _realloc (je_malloc, g_malloc, my_realloc). And the
 * system call wrappers a DMA-BUF is exported through (the dmabuf heap's
 * registers are taken as the thread returns from the kernel): ioctl and
 * libdrm's drmIoctl. Written in the syntax both POSIX extended expressions
 * and Go's RE2 read.
 */
const char HP_DROP_FRAMES_DEFAULT[] =
	"malloc|calloc|realloc|reallocarray|free|cfree|posix_memalign|aligned_alloc|"
	"memalign|valloc|pvalloc|__libc_(malloc|calloc|realloc|memalign|free)|"
	"__GI___libc_.*|_int_(malloc|realloc|memalign)|"
	"operator new.*|operator delete.*|"
	"std::(__new_allocator|allocator|allocator_traits|__allocated_ptr)[<:].*|"
	"__gnu_cxx::new_allocator[<:].*|"
	"(__)?strn?dup|x(m|c|re)alloc|xstrn?dup|xmemdup|"
	"g_(try_)?(malloc|malloc0|realloc|new|new0)(_n)?|g_slice_alloc.*|g_strn?dup|"
	"sqlite3(Malloc|MallocZero|MemMalloc|MemRealloc|Realloc|DbMalloc.*|DbRealloc.*|"
	"DbStrN?Dup|DbSpanDup)|sqlite3_(malloc|malloc64|realloc|realloc64)|"
	"PyMem_.*|_PyMem_.*|_?PyObject_(Malloc|Calloc|Realloc).*|"
	".*_(m|c|re)alloc|"
	"(__GI___)?ioctl|__ioctl(_time64)?|drmIoctl";

int hp_drop_init(struct hp_drop *d, const struct hp_prof *p, const char *rx,
		 char *why, size_t wl)
{
	int from_file = !rx;
	char *full;
	size_t n;
	int rc;

	memset(d, 0, sizeof(*d));
	/*
	 * A file's own expression within reason (it is untrusted input): not
	 * too long, and no bounded repetition, whose nesting ("((a{99}){99}){99}")
	 * makes regcomp build an enormous automaton.
	 */
	if (!rx)
		rx = p && p->drop_frames && strlen(p->drop_frames) <= 1024 &&
		     !strchr(p->drop_frames, '{') ? p->drop_frames : HP_DROP_FRAMES_DEFAULT;
	if (!*rx)
		return 0;	/* "": keep every frame */
	n = strlen(rx) + 8;
	full = malloc(n);
	if (!full) {
		snprintf(why, wl, "out of memory");
		return -1;
	}
	snprintf(full, n, "^(%s)$", rx);
	rc = regcomp(&d->re, full, REG_EXTENDED | REG_NOSUB);
	free(full);
	if (rc && from_file && rx != HP_DROP_FRAMES_DEFAULT)	/* a file's bad expression */
		return hp_drop_init(d, NULL, HP_DROP_FRAMES_DEFAULT, why, wl);
	if (rc) {
		char msg[128];

		regerror(rc, &d->re, msg, sizeof(msg));
		snprintf(why, wl, "bad frame expression '%.100s': %s", rx, msg);
		return -1;
	}
	d->on = 1;
	return 0;
}

void hp_drop_free(struct hp_drop *d)
{
	if (d->on)
		regfree(&d->re);
	hp_hmap_free(&d->seen);
	free(d->made);
	d->made = NULL;
	d->made_p = NULL;
	d->nmade = 0;
	d->on = 0;
}

/*
 * A made-up name (nm, in a buffer, or "?") interned in p: looked up once
 * per location and renderer, since the same unnamed locations come back in
 * sample after sample (clang: hundreds of thousands of frames, each one
 * formatted, hashed and interned under the lock before). q: the frame of
 * the location (0 its own name, 1.. inline callers: those are only "?").
 */
static const char *made_name(struct hp_drop *d, const struct hp_prof *p, uint32_t li,
			     uint32_t q, const char *nm)
{
	if (d->made_p != p || d->nmade != p->nlocs) {
		free(d->made);
		d->made = p->nlocs ? calloc(p->nlocs, sizeof(*d->made)) : NULL;
		d->nmade = d->made ? p->nlocs : 0;
		d->made_p = p;
		d->unknown = NULL;
	}
	if (q || li >= d->nmade) {
		if (strcmp(nm, "?"))
			return hp_prof_intern(p, nm);
		if (!d->unknown)
			d->unknown = hp_prof_intern(p, nm);
		return d->unknown;
	}
	if (!d->made[li])
		d->made[li] = hp_prof_intern(p, nm);
	return d->made[li];
}

/* Names are interned in the profile: one regexec per distinct name. */
static int matches(struct hp_drop *d, const char *name)
{
	uintptr_t v;

	if (!d->on)
		return 0;
	v = (uintptr_t)hp_hmap_get(&d->seen, (uint64_t)(uintptr_t)name, 0);
	if (!v) {
		v = regexec(&d->re, name, 0, NULL, 0) ? 1 : 2;
		hp_hmap_put(&d->seen, (uint64_t)(uintptr_t)name, 0, (void *)v);
	}
	return v == 2;
}

/*
 * The formats of one dump are written in parallel (formats.c), each reading
 * the profile; the names they make up (lib+0xOFFSET, "site (called from
 * f)") are interned in it under this lock, the one thing they write.
 */
static pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER;

const char *hp_prof_intern(const struct hp_prof *p, const char *s)
{
	const char *r;

	pthread_mutex_lock(&intern_lock);
	r = hp_intern((struct hp_strtab *)&p->strs, s);
	pthread_mutex_unlock(&intern_lock);
	return r;
}

size_t hp_sample_frames(const struct hp_prof *p, const struct hp_prof_sample *s,
			struct hp_drop *d, struct hp_frame *out, size_t max)
{
	char buf[256];
	size_t n = 0, i, cut;
	int user = 0;

	/* Leaf first: each location's own function, then those it was inlined into. */
	for (uint32_t k = 0; k < s->nlocs && n < max; k++) {
		uint32_t li = s->locs[k], nf = hp_prof_loc_frames(p, li);
		const struct hp_prof_loc *l = li < p->nlocs ? &p->locs[li] : NULL;

		for (uint32_t q = 0; q < nf && n < max; q++) {
			const struct hp_prof_line *ln = l && q && l->inl + q - 1 < p->nlines ?
				&p->lines[l->inl + q - 1] : NULL;
			const char *nm = !q && l && !l->func && d->made_p == p && li < d->nmade ?
					 d->made[li] : NULL;

			if (!nm)
				nm = hp_prof_loc_frame(p, li, q, buf, sizeof(buf));

			/*
			 * Names of symbolized frames are the profile's interned
			 * strings already; only a name made up in buf (or the
			 * literal "?") is interned here, so that equal names are
			 * the same pointer without hashing every frame of every
			 * sample (C++ names run to hundreds of bytes).
			 */
			if (nm == buf || (nm[0] == '?' && !nm[1]))
				nm = made_name(d, p, li, q, nm);

			out[n].name = nm ? nm : "?";
			out[n].file = ln ? ln->file : l ? l->file : NULL;
			out[n].line = ln ? ln->line : l ? l->line : 0;
			n++;
		}
	}
	/* pprof's rule, from the root (the end of out) towards the leaf. */
	cut = 0;
	for (i = n; i-- > 0;) {
		if (!matches(d, out[i].name)) {
			user = 1;
			continue;
		}
		if (user) {
			cut = i + 1;
			break;
		}
	}
	if (cut) {
		memmove(out, out + cut, (n - cut) * sizeof(*out));
		n -= cut;
	}
	return n;
}

