// SPDX-License-Identifier: GPL-2.0
/*
 * pprof files: profile.proto (protoc-c generated code) gzip-compressed
 * with zlib. Written so that `go tool pprof` reads them; read back for
 * `heapprofctl report` and `symbolize`, treating the file as untrusted.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zlib.h>

#include "formats.h"
#include "internal.h"
#include "profile.pb-c.h"

typedef Perftools__Profiles__Profile PB_Profile;
typedef Perftools__Profiles__ValueType PB_ValueType;
typedef Perftools__Profiles__Sample PB_Sample;
typedef Perftools__Profiles__Label PB_Label;
typedef Perftools__Profiles__Mapping PB_Mapping;
typedef Perftools__Profiles__Location PB_Location;
typedef Perftools__Profiles__Line PB_Line;
typedef Perftools__Profiles__Function PB_Function;

struct strs {
	struct hp_hmap idx;	/* (hash, len) -> index + 1 */
	char **v;
	size_t n, cap;
};

/*
 * The dmabuf heap's sample types (profile.h): what its samples carry in
 * place of the first four of hp_v_names, which stay 0 for them (and these
 * for every other sample). Written only when the profile has such samples.
 */
#define HP_NDV	4
static const char *const dv_names[HP_NDV] = {
	"dmabuf_alloc_objects", "dmabuf_alloc_space",
	"dmabuf_inuse_objects", "dmabuf_inuse_space",
};
static const int dv_slot[HP_NDV] = {
	HP_V_ALLOC_OBJ, HP_V_ALLOC_SPACE, HP_V_INUSE_OBJ, HP_V_INUSE_SPACE,
};

static int64_t str_idx(struct strs *s, const char *str)
{
	uint64_t h, l;

	if (!str || !*str)
		return 0;
	h = hp_hash_str(str);
	for (l = strlen(str);; l += 1ULL << 40) {
		uintptr_t i = (uintptr_t)hp_hmap_get(&s->idx, h, l);

		if (!i)
			break;
		if (!strcmp(s->v[i - 1], str))
			return (int64_t)i - 1;
	}
	if (s->n == s->cap) {
		size_t nc = s->cap ? s->cap * 2 : 64;
		char **nv = realloc(s->v, nc * sizeof(*nv));

		if (!nv)
			return 0;
		s->v = nv;
		s->cap = nc;
	}
	s->v[s->n] = (char *)str;
	if (hp_hmap_put(&s->idx, h, l, (void *)(uintptr_t)(s->n + 1)))
		return 0;
	return (int64_t)s->n++;
}

/*
 * Compress buf into o's file as gzip, through hp_out_write: every byte that
 * reaches the disk passes o's checks (a limit on what may be written stops
 * the file before it is passed, not after zlib wrote it).
 */
static int gz_write(struct hp_out *o, const uint8_t *buf, size_t len)
{
	uint8_t out[64 << 10];
	z_stream z;
	int zrc;

	if (o->err)
		return -o->err;
	memset(&z, 0, sizeof(z));
	/* 15 + 16: a gzip wrapper. Level 1, as Go's runtime/pprof writes its
	 * own: the user waits for it (clang's profile: 9 ms rather than 21 ms
	 * at level 6, for a file a fifth larger). */
	if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		hp_out_fail(o, ENOMEM, "compressing");
		return -o->err;
	}
	do {
		size_t chunk = len > (1U << 30) ? (1U << 30) : len;

		z.next_in = (uint8_t *)buf;
		z.avail_in = (uInt)chunk;
		buf += chunk;
		len -= chunk;
		do {
			z.next_out = out;
			z.avail_out = sizeof(out);
			zrc = deflate(&z, len ? Z_NO_FLUSH : Z_FINISH);
			if (zrc == Z_STREAM_ERROR) {
				hp_out_fail(o, EIO, "compressing");
				break;
			}
			if (hp_out_write(o, out, sizeof(out) - z.avail_out))
				break;
		} while (z.avail_out == 0);
	} while (len && !o->err);
	deflateEnd(&z);
	return o->err ? -o->err : 0;
}

int hp_pprof_write(const struct hp_prof *p, const char *path, char *why, size_t wl)
{
	struct hp_out o;
	int rc = hp_out_open(&o, path, 0644);

	if (!rc && (rc = hp_pprof_write_out(p, &o)) != 0)
		hp_out_abort(&o);
	else if (!rc)
		rc = hp_out_commit(&o);
	if (rc && why)
		snprintf(why, wl, "%s", o.why);
	return rc;
}

int hp_pprof_write_out(const struct hp_prof *p, struct hp_out *o)
{
	PB_Profile pr = PERFTOOLS__PROFILES__PROFILE__INIT;
	PB_ValueType vt[HP_NV + HP_NDV], *vtp[HP_NV + HP_NDV], period_type = PERFTOOLS__PROFILES__VALUE_TYPE__INIT;
	PB_Sample *smp = NULL, **smpp = NULL;
	PB_Label *lab = NULL, **labp = NULL;
	PB_Mapping *map = NULL, **mapp = NULL;
	PB_Location *loc = NULL, **locp = NULL;
	PB_Line *lin = NULL, **linp = NULL;
	PB_Function *fn = NULL, **fnp = NULL;
	struct hp_hmap fnidx = { 0 };
	struct strs st = { 0 };
	uint64_t *locids = NULL;
	int64_t *vals = NULL, *comments = NULL;
	size_t i, nfn = 0, nlocids = 0, nlin = 0, len, nt = HP_NV;
	uint8_t *buf = NULL;
	int rc = -ENOMEM;

	for (i = 0; i < p->nsamples && nt == HP_NV; i++)
		if (hp_heap_own_types(p->samples[i].heap))
			nt = HP_NV + HP_NDV;

	st.cap = 64;
	st.v = malloc(st.cap * sizeof(*st.v));
	if (!st.v)
		return -ENOMEM;
	st.v[0] = "";	/* index 0 is the empty string */
	st.n = 1;
	for (i = 0; i < nt; i++) {
		perftools__profiles__value_type__init(&vt[i]);
		vt[i].type = str_idx(&st, i < HP_NV ? hp_v_names[i] : dv_names[i - HP_NV]);
		vt[i].unit = str_idx(&st, i < HP_NV ? hp_v_units[i] : hp_v_units[dv_slot[i - HP_NV]]);
		vtp[i] = &vt[i];
	}
	pr.n_sample_type = nt;
	pr.sample_type = vtp;
	pr.default_sample_type = str_idx(&st, hp_v_names[HP_V_INUSE_SPACE]);
	/*
	 * Allocator entry points, dropped by pprof with their callees so that
	 * views name the code that allocated (frames.c: the rule, the expression).
	 */
	pr.drop_frames = str_idx(&st, p->drop_frames ? p->drop_frames : HP_DROP_FRAMES_DEFAULT);
	period_type.type = str_idx(&st, "space");
	period_type.unit = str_idx(&st, "bytes");
	pr.period_type = &period_type;
	pr.period = p->period;
	pr.time_nanos = p->time_ns;
	pr.duration_nanos = p->duration_ns;

	map = calloc(p->nmaps + 1, sizeof(*map));
	mapp = calloc(p->nmaps + 1, sizeof(*mapp));
	loc = calloc(p->nlocs + 1, sizeof(*loc));
	locp = calloc(p->nlocs + 1, sizeof(*locp));
	lin = calloc(p->nlocs + p->nlines + 1, sizeof(*lin));
	linp = calloc(p->nlocs + p->nlines + 1, sizeof(*linp));
	fn = calloc(p->nlocs + p->nlines + 1, sizeof(*fn));
	fnp = calloc(p->nlocs + p->nlines + 1, sizeof(*fnp));
	smp = calloc(p->nsamples + 1, sizeof(*smp));
	smpp = calloc(p->nsamples + 1, sizeof(*smpp));
	lab = calloc(2 * p->nsamples + 1, sizeof(*lab));
	labp = calloc(2 * p->nsamples + 1, sizeof(*labp));
	vals = calloc(p->nsamples * nt + 1, sizeof(*vals));
	comments = calloc(p->ncomments + 1, sizeof(*comments));
	for (i = 0; i < p->nsamples; i++)
		nlocids += p->samples[i].nlocs;
	locids = calloc(nlocids + 1, sizeof(*locids));
	if (!map || !mapp || !loc || !locp || !lin || !linp || !fn || !fnp || !smp ||
	    !smpp || !lab || !labp || !vals || !comments || !locids)
		goto out;

	for (i = 0; i < p->nmaps; i++) {
		const struct hp_prof_map *m = &p->maps[i];

		perftools__profiles__mapping__init(&map[i]);
		map[i].id = i + 1;
		map[i].memory_start = m->start;
		map[i].memory_limit = m->limit;
		map[i].file_offset = m->off;
		map[i].filename = str_idx(&st, m->file);
		map[i].build_id = str_idx(&st, m->build_id);
		mapp[i] = &map[i];
	}
	for (i = 0; i < p->nlocs; i++) {
		const struct hp_prof_loc *l = &p->locs[i];

		perftools__profiles__location__init(&loc[i]);
		loc[i].id = i + 1;
		loc[i].mapping_id = l->map <= p->nmaps ? l->map : 0;
		loc[i].address = l->addr;
		if (l->map && l->map <= p->nmaps && l->func) {
			map[l->map - 1].has_functions = 1;
			if (l->file) {
				map[l->map - 1].has_filenames = 1;
				map[l->map - 1].has_line_numbers = 1;
			}
		}
		if (l->func) {
			uint32_t k;

			loc[i].line = &linp[nlin];
			for (k = 0; k <= l->ninl; k++) {
				const char *fu = k ? p->lines[l->inl + k - 1].func : l->func;
				const char *fi = k ? p->lines[l->inl + k - 1].file : l->file;
				int64_t ln = k ? p->lines[l->inl + k - 1].line : l->line;
				uintptr_t f;

				if (k && l->inl + k - 1 >= p->nlines)
					break;
				if (!fu)
					fu = "?";
				f = (uintptr_t)hp_hmap_get(&fnidx, (uintptr_t)fu, (uintptr_t)fi);
				if (!f) {
					perftools__profiles__function__init(&fn[nfn]);
					fn[nfn].id = nfn + 1;
					fn[nfn].name = str_idx(&st, fu);
					fn[nfn].system_name = fn[nfn].name;
					fn[nfn].filename = str_idx(&st, fi);
					fnp[nfn] = &fn[nfn];
					f = ++nfn;
					hp_hmap_put(&fnidx, (uintptr_t)fu, (uintptr_t)fi, (void *)f);
				}
				perftools__profiles__line__init(&lin[nlin]);
				lin[nlin].function_id = f;
				lin[nlin].line = ln;
				linp[nlin] = &lin[nlin];
				nlin++;
				loc[i].n_line++;
			}
			if (l->ninl && l->map && l->map <= p->nmaps)
				map[l->map - 1].has_inline_frames = 1;
		}
		locp[i] = &loc[i];
	}
	nlocids = 0;
	for (i = 0; i < p->nsamples; i++) {
		const struct hp_prof_sample *s = &p->samples[i];
		uint32_t k;

		perftools__profiles__sample__init(&smp[i]);
		smp[i].location_id = &locids[nlocids];
		for (k = 0; k < s->nlocs; k++)
			if (s->locs[k] < p->nlocs)
				locids[nlocids + smp[i].n_location_id++] = s->locs[k] + 1;
		nlocids += s->nlocs;
		smp[i].n_value = nt;
		smp[i].value = &vals[i * nt];
		if (hp_heap_own_types(s->heap)) {
			for (k = 0; k < HP_NDV; k++)
				smp[i].value[HP_NV + k] = s->v[dv_slot[k]];
		} else {
			memcpy(smp[i].value, s->v, sizeof(s->v));
		}
		smp[i].label = &labp[2 * i];
		if (s->heap) {
			PB_Label *l = &lab[2 * i + smp[i].n_label];

			perftools__profiles__label__init(l);
			l->key = str_idx(&st, "heap");
			l->str = str_idx(&st, s->heap);
			labp[2 * i + smp[i].n_label++] = l;
		}
		if (s->exporter) {
			PB_Label *l = &lab[2 * i + smp[i].n_label];

			perftools__profiles__label__init(l);
			l->key = str_idx(&st, "exporter");
			l->str = str_idx(&st, s->exporter);
			labp[2 * i + smp[i].n_label++] = l;
		}
		smpp[i] = &smp[i];
	}
	for (i = 0; i < p->ncomments; i++)
		comments[i] = str_idx(&st, p->comments[i]);
	pr.n_comment = p->ncomments;
	pr.comment = comments;
	pr.n_mapping = p->nmaps;
	pr.mapping = mapp;
	pr.n_location = p->nlocs;
	pr.location = locp;
	pr.n_function = nfn;
	pr.function = fnp;
	pr.n_sample = p->nsamples;
	pr.sample = smpp;
	pr.n_string_table = st.n;
	pr.string_table = st.v;

	len = perftools__profiles__profile__get_packed_size(&pr);
	buf = malloc(len + 1);
	if (!buf)
		goto out;
	perftools__profiles__profile__pack(&pr, buf);
	rc = gz_write(o, buf, len);
out:
	if (rc == -ENOMEM)
		hp_out_fail(o, ENOMEM, "building");
	free(buf);
	free(map); free(mapp); free(loc); free(locp); free(lin); free(linp);
	free(fn); free(fnp); free(smp); free(smpp); free(lab); free(labp);
	free(vals); free(comments); free(locids);
	hp_hmap_free(&fnidx);
	hp_hmap_free(&st.idx);
	free(st.v);
	return rc;
}

/* ---- reading ------------------------------------------------------------ */

#define HP_PPROF_MAX (1ULL << 31)

static uint8_t *read_all(const char *path, size_t *len)
{
	gzFile g = gzopen(path, "rb");	/* reads plain files too */
	size_t cap = 1 << 16, n = 0;
	uint8_t *buf;

	if (!g)
		return NULL;
	buf = malloc(cap);
	while (buf) {
		int r;

		if (n == cap) {
			uint8_t *nb;

			if (cap >= HP_PPROF_MAX)
				break;
			cap *= 2;
			nb = realloc(buf, cap);
			if (!nb) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = nb;
		}
		r = gzread(g, buf + n, (unsigned)(cap - n));
		if (r < 0) {
			free(buf);
			buf = NULL;
			break;
		}
		if (!r)
			break;
		n += r;
	}
	gzclose(g);
	*len = n;
	return buf;
}

static const char *S(const PB_Profile *pr, int64_t i)
{
	if (i <= 0 || (uint64_t)i >= pr->n_string_table)
		return NULL;
	return pr->string_table[i];
}

int hp_pprof_read(struct hp_prof *p, const char *path, char *why, size_t wl)
{
	size_t len;
	uint8_t *buf;
	int rc;

	errno = 0;
	buf = read_all(path, &len);
	if (!buf) {
		hp_prof_init(p);
		snprintf(why, wl, "cannot read %s: %s", path,
			 errno ? strerror(errno) : "not a gzip or profile file");
		return -1;
	}
	rc = hp_pprof_parse(p, buf, len, why, wl);
	free(buf);
	if (rc && !strstr(why, path)) {
		char w2[256];

		snprintf(w2, sizeof(w2), "%s: %s", path, why);
		snprintf(why, wl, "%s", w2);
	}
	return rc;
}

int hp_pprof_parse(struct hp_prof *p, const uint8_t *buf, size_t len, char *why, size_t wl)
{
	size_t i, k;
	PB_Profile *pr;
	int slot[64], dslot[64];
	struct hp_hmap mapid = { 0 }, locid = { 0 }, fnid = { 0 };
	uint32_t *stk = NULL;
	int rc = -1;

	hp_prof_init(p);
	pr = perftools__profiles__profile__unpack(NULL, len, buf);
	if (!pr) {
		snprintf(why, wl, "not a pprof profile");
		return -1;
	}
	if (pr->n_sample_type > 64) {
		snprintf(why, wl, "too many sample types");
		goto out;
	}
	for (i = 0; i < pr->n_sample_type; i++) {
		const char *t = S(pr, pr->sample_type[i]->type);

		slot[i] = dslot[i] = -1;
		for (k = 0; t && k < HP_NDV; k++)
			if (!strcmp(t, dv_names[k]))
				dslot[i] = dv_slot[k];
		for (k = 0; t && k < HP_NV; k++)
			if (!strcmp(t, hp_v_names[k])) {
				slot[i] = (int)k;
				p->has_v[k] = 1;
			}
		/* Other profilers' names for the same things. */
		if (t && slot[i] < 0 && !strcmp(t, "space") && !p->has_v[HP_V_INUSE_SPACE]) {
			slot[i] = HP_V_INUSE_SPACE;
			p->has_v[HP_V_INUSE_SPACE] = 1;
		}
	}
	p->time_ns = pr->time_nanos;
	p->duration_ns = pr->duration_nanos;
	p->period = pr->period;
	p->drop_frames = hp_prof_str(p, S(pr, pr->drop_frames));
	for (i = 0; i < pr->n_comment; i++)
		if (S(pr, pr->comment[i]))
			hp_prof_add_comment(p, "%s", S(pr, pr->comment[i]));
	for (i = 0; i < pr->n_function; i++)
		if (pr->function[i]->id)
			hp_hmap_put(&fnid, pr->function[i]->id, 0, pr->function[i]);
	for (i = 0; i < pr->n_mapping; i++) {
		const PB_Mapping *m = pr->mapping[i];
		struct hp_prof_map hm = {
			.start = m->memory_start, .limit = m->memory_limit,
			.off = m->file_offset, .file = S(pr, m->filename),
			.build_id = S(pr, m->build_id),
		};
		uint32_t idx = hp_prof_add_map(p, &hm);

		if (m->id && idx)
			hp_hmap_put(&mapid, m->id, 0, (void *)(uintptr_t)idx);
	}
	for (i = 0; i < pr->n_location; i++) {
		const PB_Location *l = pr->location[i];
		struct hp_prof_loc hl = { .addr = l->address };
		uint32_t idx;

		if (l->mapping_id)
			hl.map = (uint32_t)(uintptr_t)hp_hmap_get(&mapid, l->mapping_id, 0);
		struct hp_prof_line inl[32];

		if (l->n_line) {
			const PB_Function *f = hp_hmap_get(&fnid, l->line[0]->function_id, 0);

			if (f) {
				hl.func = S(pr, f->name);
				hl.file = S(pr, f->filename);
			}
			hl.line = l->line[0]->line;
			for (k = 1; k < l->n_line && hl.ninl < 32; k++) {
				f = hp_hmap_get(&fnid, l->line[k]->function_id, 0);
				inl[hl.ninl].func = f ? S(pr, f->name) : NULL;
				inl[hl.ninl].file = f ? S(pr, f->filename) : NULL;
				inl[hl.ninl].line = l->line[k]->line;
				hl.ninl++;
			}
			hl.inl_src = inl;
		}
		idx = hp_prof_add_loc(p, &hl);
		if (l->id)
			hp_hmap_put(&locid, l->id, 0, (void *)(uintptr_t)(idx + 1));
	}
	for (i = 0; i < pr->n_sample; i++) {
		const PB_Sample *s = pr->sample[i];
		int64_t v[HP_NV] = { 0 }, dv[HP_NV] = { 0 };
		const char *heap = NULL, *exporter = NULL;
		int has_v = 0, has_dv = 0;
		uint32_t n = 0;

		free(stk);
		stk = calloc(s->n_location_id + 1, sizeof(*stk));
		if (!stk)
			goto out;
		for (k = 0; k < s->n_location_id; k++) {
			uintptr_t li = (uintptr_t)hp_hmap_get(&locid, s->location_id[k], 0);

			if (li)
				stk[n++] = (uint32_t)li - 1;
		}
		for (k = 0; k < s->n_value && k < pr->n_sample_type; k++) {
			if (slot[k] >= 0) {
				v[slot[k]] = s->value[k];
				has_v |= s->value[k] != 0;
			}
			if (dslot[k] >= 0) {
				dv[dslot[k]] = s->value[k];
				has_dv |= s->value[k] != 0;
			}
		}
		for (k = 0; k < s->n_label; k++) {
			const char *key = S(pr, s->label[k]->key);

			if (key && !strcmp(key, "heap"))
				heap = S(pr, s->label[k]->str);
			else if (key && !strcmp(key, "exporter"))
				exporter = S(pr, s->label[k]->str);
		}
		/* The dmabuf columns are that heap's, whatever the label says;
		 * a (foreign) sample with values in both becomes two. */
		if (has_dv)
			hp_prof_add_sample_l(p, stk, n, dv, HP_HEAP_DMABUF_NAME, exporter);
		if (has_v || !has_dv)
			hp_prof_add_sample_l(p, stk, n, v, heap, exporter);
	}
	rc = 0;
out:
	free(stk);
	hp_hmap_free(&mapid);
	hp_hmap_free(&locid);
	hp_hmap_free(&fnid);
	perftools__profiles__profile__free_unpacked(pr, NULL);
	return rc;
}

static int pprof_fmt(const struct hp_prof *p, const struct hp_format_args *a, struct hp_out *o)
{
	(void)a;
	return hp_pprof_write_out(p, o);
}

const struct hp_format hp_format_pprof = {
	.name = "pprof", .ext = ".pb.gz", .what = "pprof (go tool pprof, heapprofctl report)",
	.flags = HP_FMT_DEFAULT, .write = pprof_fmt,
};
