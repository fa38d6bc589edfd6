// SPDX-License-Identifier: GPL-2.0
/*
 * OpenTelemetry profiles: a profile as the body of an OTLP export request
 * (opentelemetry.proto.collector.profiles.v1development.
 * ExportProfilesServiceRequest, the protos vendored under proto/otel/,
 * encoded by protoc-c's generated code), one OTLP profile per sample type:
 * alloc_objects, alloc_space, inuse_objects, inuse_space, and the dmabuf
 * heap's four when the profile has such samples. The dictionary is shared
 * by all of them, every table starting with its zero entry, as the signal
 * requires. The resource names the host and the process; each mapping
 * carries its build id as an attribute.
 *
 * Names in a profile come from files and processes others control and
 * need not be UTF-8, which protobuf strings must be: bytes that are not are
 * written as '?', so no receiver rejects the request for them.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "formats.h"
#include "internal.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
	OT_Request;
typedef Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary OT_Dict;
typedef Opentelemetry__Proto__Profiles__V1development__ResourceProfiles OT_ResProfiles;
typedef Opentelemetry__Proto__Profiles__V1development__ScopeProfiles OT_ScopeProfiles;
typedef Opentelemetry__Proto__Profiles__V1development__Profile OT_Profile;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType OT_ValueType;
typedef Opentelemetry__Proto__Profiles__V1development__Sample OT_Sample;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping OT_Mapping;
typedef Opentelemetry__Proto__Profiles__V1development__Location OT_Location;
typedef Opentelemetry__Proto__Profiles__V1development__Line OT_Line;
typedef Opentelemetry__Proto__Profiles__V1development__Function OT_Function;
typedef Opentelemetry__Proto__Profiles__V1development__Stack OT_Stack;
typedef Opentelemetry__Proto__Profiles__V1development__Link OT_Link;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit OT_Attr;
typedef Opentelemetry__Proto__Common__V1__AnyValue OT_Any;
typedef Opentelemetry__Proto__Common__V1__KeyValue OT_KV;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope OT_Scope;
typedef Opentelemetry__Proto__Resource__V1__Resource OT_Resource;

#define ANY_STRING OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE
#define ANY_INT OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE

/* The sample types, in the order of the profiles of a request. */
static const struct {
	const char *type, *unit;
	int slot;		/* hp_prof_sample.v[] */
	int dmabuf;		/* of the dmabuf heap's samples, else of the others */
} types[] = {
	{ "alloc_objects", "count", HP_V_ALLOC_OBJ, 0 },
	{ "alloc_space", "bytes", HP_V_ALLOC_SPACE, 0 },
	{ "inuse_objects", "count", HP_V_INUSE_OBJ, 0 },
	{ "inuse_space", "bytes", HP_V_INUSE_SPACE, 0 },
	{ "dmabuf_alloc_objects", "count", HP_V_ALLOC_OBJ, 1 },
	{ "dmabuf_alloc_space", "bytes", HP_V_ALLOC_SPACE, 1 },
	{ "dmabuf_inuse_objects", "count", HP_V_INUSE_OBJ, 1 },
	{ "dmabuf_inuse_space", "bytes", HP_V_INUSE_SPACE, 1 },
};
#define NTYPES (sizeof(types) / sizeof(types[0]))

/* Everything one encoding allocates, freed together. */
struct enc {
	void **blocks;
	size_t nblocks, cblocks;
	int oom;
	/* string_table: copies made valid UTF-8, deduplicated */
	struct hp_hmap sidx;	/* (hash, len + k<<40) -> index + 1 */
	char **strs;		/* as written */
	const char **orig;	/* as given (they outlive the encoding) */
	size_t nstrs, cstrs, corig;
	OT_Attr **attrs;	/* attribute_table */
	size_t nattrs, cattrs;
};

static void *take(struct enc *e, void *p)
{
	if (!p) {
		e->oom = 1;
		return NULL;
	}
	if (e->nblocks == e->cblocks) {
		size_t nc = e->cblocks ? e->cblocks * 2 : 64;
		void **nb = realloc(e->blocks, nc * sizeof(*nb));

		if (!nb) {
			free(p);
			e->oom = 1;
			return NULL;
		}
		e->blocks = nb;
		e->cblocks = nc;
	}
	e->blocks[e->nblocks++] = p;
	return p;
}

static void *zalloc(struct enc *e, size_t n, size_t size)
{
	return take(e, calloc(n ? n : 1, size));
}

/* Grow *v (of *cap elements of size) to hold one more. */
static int grow(struct enc *e, void **v, size_t n, size_t *cap, size_t size)
{
	void *nv;
	size_t nc;

	if (n < *cap)
		return 0;
	nc = *cap ? *cap * 2 : 64;
	nv = realloc(*v, nc * size);
	if (!nv) {
		e->oom = 1;
		return -1;
	}
	*v = nv;
	*cap = nc;
	return 0;
}

/* A copy of s in which every byte that is not part of valid UTF-8 is '?'. */
static char *utf8_copy(const char *s)
{
	size_t n = strlen(s), i = 0;
	unsigned char *c = malloc(n + 1);

	if (!c)
		return NULL;
	memcpy(c, s, n + 1);
	while (i < n) {
		unsigned char b = c[i];
		size_t len = b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 :
			     (b & 0xF8) == 0xF0 ? 4 : 0;
		uint32_t cp = len == 2 ? b & 0x1F : len == 3 ? b & 0x0F : b & 0x07;
		size_t k;

		for (k = 1; len > 1 && k < len && i + k < n && (c[i + k] & 0xC0) == 0x80; k++)
			cp = cp << 6 | (c[i + k] & 0x3F);
		/* Cut short, overlong, a surrogate or past U+10FFFF: not UTF-8. */
		if (!len || k < len || (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
		    (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
		    (cp >= 0xD800 && cp <= 0xDFFF && len == 3)) {
			c[i++] = '?';
			continue;
		}
		i += len;
	}
	return (char *)c;
}

static int32_t str_idx(struct enc *e, const char *s)
{
	uint64_t h, l;
	char *c;

	if (!s || !*s)
		return 0;
	h = hp_hash_str(s);
	for (l = strlen(s);; l += 1ULL << 40) {
		uintptr_t i = (uintptr_t)hp_hmap_get(&e->sidx, h, l);

		if (!i)
			break;
		if (!strcmp(e->orig[i - 1], s))
			return (int32_t)i - 1;
	}
	c = take(e, utf8_copy(s));
	if (!c || grow(e, (void **)&e->strs, e->nstrs, &e->cstrs, sizeof(*e->strs)) ||
	    grow(e, (void **)&e->orig, e->nstrs, &e->corig, sizeof(*e->orig)))
		return 0;
	e->strs[e->nstrs] = c;
	e->orig[e->nstrs] = s;
	if (hp_hmap_put(&e->sidx, h, l, (void *)(uintptr_t)(e->nstrs + 1))) {
		e->oom = 1;
		return 0;
	}
	return (int32_t)e->nstrs++;
}

static OT_Any *any_str(struct enc *e, const char *s)
{
	OT_Any *v = zalloc(e, 1, sizeof(*v));
	char *c = take(e, utf8_copy(s ? s : ""));

	if (!v || !c)
		return NULL;
	opentelemetry__proto__common__v1__any_value__init(v);
	v->value_case = ANY_STRING;
	v->string_value = c;
	return v;
}

/* An entry of attribute_table: its index (0: none could be made). */
static int32_t attr_str(struct enc *e, const char *key, const char *val)
{
	OT_Attr *a;

	if (!val || grow(e, (void **)&e->attrs, e->nattrs, &e->cattrs, sizeof(*e->attrs)))
		return 0;
	a = zalloc(e, 1, sizeof(*a));
	if (!a)
		return 0;
	opentelemetry__proto__profiles__v1development__key_value_and_unit__init(a);
	a->key_strindex = str_idx(e, key);
	a->value = any_str(e, val);
	if (!a->value)
		return 0;
	e->attrs[e->nattrs] = a;
	return (int32_t)e->nattrs++;
}

/* A resource attribute: a string (sval) or an integer. */
static OT_KV *kv(struct enc *e, const char *key, const char *sval, int64_t ival)
{
	OT_KV *k = zalloc(e, 1, sizeof(*k));

	if (!k)
		return NULL;
	opentelemetry__proto__common__v1__key_value__init(k);
	k->key = (char *)key;
	if (sval) {
		k->value = any_str(e, sval);
	} else if ((k->value = zalloc(e, 1, sizeof(*k->value)))) {
		opentelemetry__proto__common__v1__any_value__init(k->value);
		k->value->value_case = ANY_INT;
		k->value->int_value = ival;
	}
	return k->value ? k : NULL;
}

/* The stack of each sample, deduplicated: stack_table's index per sample. */
static int32_t *stacks(struct enc *e, const struct hp_prof *p, OT_Dict *d)
{
	int32_t *idx = zalloc(e, p->nsamples, sizeof(*idx));
	OT_Stack **st = zalloc(e, p->nsamples + 1, sizeof(*st));
	struct hp_hmap seen = { 0 };
	size_t n = 1;

	if (!idx || !st)
		return NULL;
	st[0] = zalloc(e, 1, sizeof(**st));	/* the zero entry: an empty stack */
	if (!st[0])
		return NULL;
	opentelemetry__proto__profiles__v1development__stack__init(st[0]);
	for (size_t i = 0; i < p->nsamples && !e->oom; i++) {
		const struct hp_prof_sample *s = &p->samples[i];
		uint64_t h = 1469598103934665603ULL, k2;
		int32_t *li;
		uint32_t k, m = 0;

		for (k = 0; k < s->nlocs; k++)
			h = (h ^ s->locs[k]) * 1099511628211ULL;
		for (k2 = s->nlocs;; k2 += 1ULL << 40) {
			uintptr_t j = (uintptr_t)hp_hmap_get(&seen, h, k2);

			if (!j)
				break;
			if (p->samples[j - 1].nlocs == s->nlocs &&
			    !memcmp(p->samples[j - 1].locs, s->locs, s->nlocs * sizeof(*s->locs))) {
				idx[i] = idx[j - 1];
				break;
			}
		}
		if (idx[i])
			continue;
		st[n] = zalloc(e, 1, sizeof(**st));
		li = zalloc(e, s->nlocs, sizeof(*li));
		if (!st[n] || !li)
			break;
		opentelemetry__proto__profiles__v1development__stack__init(st[n]);
		/* Leaf first, as in pprof; the zero location is "none". */
		for (k = 0; k < s->nlocs; k++)
			if (s->locs[k] < p->nlocs)
				li[m++] = (int32_t)s->locs[k] + 1;
		st[n]->n_location_indices = m;
		st[n]->location_indices = li;
		idx[i] = (int32_t)n++;
		if (hp_hmap_put(&seen, h, k2, (void *)(uintptr_t)(i + 1)))
			e->oom = 1;
	}
	hp_hmap_free(&seen);
	d->n_stack_table = n;
	d->stack_table = st;
	return e->oom ? NULL : idx;
}

/* mapping_table, with each mapping's build id as an attribute. */
static void mappings(struct enc *e, const struct hp_prof *p, OT_Dict *d)
{
	OT_Mapping **mt = zalloc(e, p->nmaps + 1, sizeof(*mt));

	if (!mt)
		return;
	for (size_t i = 0; i <= p->nmaps && !e->oom; i++) {
		const struct hp_prof_map *m = i ? &p->maps[i - 1] : NULL;

		mt[i] = zalloc(e, 1, sizeof(**mt));
		if (!mt[i])
			return;
		opentelemetry__proto__profiles__v1development__mapping__init(mt[i]);
		if (!m)
			continue;	/* the zero entry */
		mt[i]->memory_start = m->start;
		mt[i]->memory_limit = m->limit;
		mt[i]->file_offset = m->off;
		mt[i]->filename_strindex = str_idx(e, m->file);
		if (m->build_id && *m->build_id) {
			int32_t *a = zalloc(e, 1, sizeof(*a));

			if (a && (*a = attr_str(e, "process.executable.build_id.gnu", m->build_id))) {
				mt[i]->n_attribute_indices = 1;
				mt[i]->attribute_indices = a;
			}
		}
	}
	d->n_mapping_table = p->nmaps + 1;
	d->mapping_table = mt;
}

/* location_table and function_table (inline frames as more lines, innermost first). */
static void locations(struct enc *e, const struct hp_prof *p, OT_Dict *d)
{
	OT_Location **lt = zalloc(e, p->nlocs + 1, sizeof(*lt));
	OT_Function **ft = zalloc(e, p->nlocs + p->nlines + 1, sizeof(*ft));
	struct hp_hmap fidx = { 0 };
	size_t nf = 1;

	if (!lt || !ft || !(ft[0] = zalloc(e, 1, sizeof(**ft))))
		return;
	opentelemetry__proto__profiles__v1development__function__init(ft[0]);
	for (size_t i = 0; i <= p->nlocs && !e->oom; i++) {
		const struct hp_prof_loc *l = i ? &p->locs[i - 1] : NULL;
		uint32_t k, nl;

		lt[i] = zalloc(e, 1, sizeof(**lt));
		if (!lt[i])
			break;
		opentelemetry__proto__profiles__v1development__location__init(lt[i]);
		if (!l)
			continue;	/* the zero entry */
		lt[i]->mapping_index = l->map <= p->nmaps ? (int32_t)l->map : 0;
		lt[i]->address = l->addr;
		if (!l->func)
			continue;
		nl = 1 + l->ninl;
		lt[i]->lines = zalloc(e, nl, sizeof(*lt[i]->lines));
		for (k = 0; k < nl && lt[i]->lines; k++) {
			const char *fu = k ? p->lines[l->inl + k - 1].func : l->func;
			const char *fi = k ? p->lines[l->inl + k - 1].file : l->file;
			int64_t ln = k ? p->lines[l->inl + k - 1].line : l->line;
			OT_Line *line;
			uintptr_t f;

			if (k && l->inl + k - 1 >= p->nlines)
				break;
			if (!fu)
				fu = "?";
			f = (uintptr_t)hp_hmap_get(&fidx, (uintptr_t)fu, (uintptr_t)fi);
			if (!f) {
				ft[nf] = zalloc(e, 1, sizeof(**ft));
				if (!ft[nf])
					break;
				opentelemetry__proto__profiles__v1development__function__init(ft[nf]);
				ft[nf]->name_strindex = str_idx(e, fu);
				ft[nf]->system_name_strindex = ft[nf]->name_strindex;
				ft[nf]->filename_strindex = str_idx(e, fi);
				f = nf++;
				if (hp_hmap_put(&fidx, (uintptr_t)fu, (uintptr_t)fi, (void *)f))
					e->oom = 1;
			}
			line = zalloc(e, 1, sizeof(*line));
			if (!line)
				break;
			opentelemetry__proto__profiles__v1development__line__init(line);
			line->function_index = (int32_t)f;
			line->line = ln;
			lt[i]->lines[lt[i]->n_lines++] = line;
		}
	}
	hp_hmap_free(&fidx);
	d->n_location_table = p->nlocs + 1;
	d->location_table = lt;
	d->n_function_table = nf;
	d->function_table = ft;
}

/* The resource: this host and the process, its executable's build id. */
static OT_Resource *resource(struct enc *e, const struct hp_prof *p,
			     const struct hp_prof_who *who)
{
	OT_Resource *r = zalloc(e, 1, sizeof(*r));
	OT_KV **a = zalloc(e, 8, sizeof(*a));
	char host[256] = "";
	size_t n = 0;

	if (!r || !a)
		return NULL;
	opentelemetry__proto__resource__v1__resource__init(r);
	if (who && who->host)
		snprintf(host, sizeof(host), "%s", who->host);
	else if (gethostname(host, sizeof(host) - 1) < 0)
		host[0] = 0;
	if (host[0])
		a[n++] = kv(e, "host.name", host, 0);
	if (who) {
		a[n++] = kv(e, "process.pid", NULL, who->pid);
		if (who->comm) {
			a[n++] = kv(e, "service.name", who->comm, 0);
			a[n++] = kv(e, "process.executable.name", who->comm, 0);
		}
		if (who->exe) {
			a[n++] = kv(e, "process.executable.path", who->exe, 0);
			for (size_t i = 0; i < p->nmaps; i++)
				if (p->maps[i].file && p->maps[i].build_id && *p->maps[i].build_id &&
				    !strcmp(p->maps[i].file, who->exe)) {
					a[n++] = kv(e, "process.executable.build_id.gnu",
						    p->maps[i].build_id, 0);
					break;
				}
		}
		if (who->cmdline)
			a[n++] = kv(e, "process.command_line", who->cmdline, 0);
	}
	for (size_t i = 0; i < n; i++)
		if (!a[i])
			return NULL;
	r->n_attributes = n;
	r->attributes = a;
	return r;
}

static OT_ValueType *value_type(struct enc *e, const char *type, const char *unit)
{
	OT_ValueType *v = zalloc(e, 1, sizeof(*v));

	if (v) {
		opentelemetry__proto__profiles__v1development__value_type__init(v);
		v->type_strindex = str_idx(e, type);
		v->unit_strindex = str_idx(e, unit);
	}
	return v;
}

/* The samples of one sample type: those of its heaps with a value. */
static OT_Profile *one_profile(struct enc *e, const struct hp_prof *p, size_t t,
			       const int32_t *stack, int32_t *const *sattr, const size_t *nsattr,
			       const int32_t *pattr, size_t npattr)
{
	OT_Profile *pr = zalloc(e, 1, sizeof(*pr));
	OT_Sample **sv = zalloc(e, p->nsamples, sizeof(*sv));
	OT_Sample *sm = zalloc(e, p->nsamples, sizeof(*sm));
	int64_t *vals = zalloc(e, p->nsamples, sizeof(*vals));
	uint8_t *id = zalloc(e, 16, 1);
	size_t n = 0;

	if (!pr || !sv || !sm || !vals || !id)
		return NULL;
	opentelemetry__proto__profiles__v1development__profile__init(pr);
	pr->sample_type = value_type(e, types[t].type, types[t].unit);
	pr->period_type = value_type(e, "space", "bytes");
	pr->period = p->period;
	pr->time_unix_nano = (uint64_t)p->time_ns;
	pr->duration_nano = p->duration_ns > 0 ? (uint64_t)p->duration_ns : 0;
	/* 16 random bytes: never all zero (invalid), so retry the odd miss. */
	if (getrandom(id, 16, 0) != 16 || !memcmp(id, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16))
		for (size_t i = 0; i < 16; i++)
			id[i] = (uint8_t)(rand() | 1);
	pr->profile_id.data = id;
	pr->profile_id.len = 16;
	pr->n_attribute_indices = npattr;
	pr->attribute_indices = (int32_t *)pattr;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct hp_prof_sample *s = &p->samples[i];

		if (!!hp_heap_own_types(s->heap) != types[t].dmabuf || !s->v[types[t].slot])
			continue;
		opentelemetry__proto__profiles__v1development__sample__init(&sm[n]);
		sm[n].stack_index = stack[i];
		vals[n] = s->v[types[t].slot];
		sm[n].n_values = 1;
		sm[n].values = &vals[n];
		sm[n].n_attribute_indices = nsattr[i];
		sm[n].attribute_indices = sattr[i];
		sv[n] = &sm[n];
		n++;
	}
	pr->n_samples = n;
	pr->samples = sv;
	return pr->sample_type && pr->period_type ? pr : NULL;
}

/* The request, packed: *out (malloc'ed) and *len. 0 or -ENOMEM. */
static int encode(const struct hp_prof *p, const struct hp_prof_who *who, uint8_t **out,
		  size_t *len)
{
	OT_Request req = OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
	OT_Dict dict = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
	OT_ResProfiles rp = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__RESOURCE_PROFILES__INIT;
	OT_ScopeProfiles sp = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SCOPE_PROFILES__INIT;
	OT_Scope scope = OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
	OT_Link link0 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINK__INIT, *links[1] = { &link0 };
	OT_Attr attr0 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__KEY_VALUE_AND_UNIT__INIT;
	OT_ResProfiles *rpp[1] = { &rp };
	OT_ScopeProfiles *spp[1] = { &sp };
	OT_Profile *profs[NTYPES];
	struct enc e = { 0 };
	int32_t **sattr, *stack, *pattr;
	size_t *nsattr, nprof = 0, npattr = 0, t;
	int has_dmabuf = 0, rc = -ENOMEM;

	/* The zero entries: "" and an empty attribute. */
	str_idx(&e, "");
	if (grow(&e, (void **)&e.strs, 0, &e.cstrs, sizeof(*e.strs)) ||
	    grow(&e, (void **)&e.orig, 0, &e.corig, sizeof(*e.orig)) ||
	    grow(&e, (void **)&e.attrs, 0, &e.cattrs, sizeof(*e.attrs)))
		goto out;
	e.strs[0] = "";
	e.orig[0] = "";
	e.nstrs = 1;
	e.attrs[0] = &attr0;
	e.nattrs = 1;

	mappings(&e, p, &dict);
	locations(&e, p, &dict);
	stack = stacks(&e, p, &dict);
	sattr = zalloc(&e, p->nsamples, sizeof(*sattr));
	nsattr = zalloc(&e, p->nsamples, sizeof(*nsattr));
	pattr = zalloc(&e, p->ncomments + 1, sizeof(*pattr));
	if (!stack || !sattr || !nsattr || !pattr || e.oom)
		goto out;
	/* The heap and the dmabuf exporter of each sample, as pprof's labels. */
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct hp_prof_sample *s = &p->samples[i];

		has_dmabuf |= hp_heap_own_types(s->heap);
		sattr[i] = zalloc(&e, 2, sizeof(**sattr));
		if (!sattr[i])
			goto out;
		if (s->heap && (sattr[i][nsattr[i]] = attr_str(&e, "heap", s->heap)))
			nsattr[i]++;
		if (s->exporter && (sattr[i][nsattr[i]] = attr_str(&e, "exporter", s->exporter)))
			nsattr[i]++;
	}
	/* What kind of dump, and the header lines of the pprof file. */
	if (who && who->kind && (pattr[npattr] = attr_str(&e, "heapprofd.dump",
							  *who->kind ? who->kind : "now")))
		npattr++;
	for (size_t i = 0; i < p->ncomments && npattr < p->ncomments + 1; i++)
		if ((pattr[npattr] = attr_str(&e, "pprof.profile.comment", p->comments[i])))
			npattr++;
	for (t = 0; t < NTYPES; t++) {
		if (types[t].dmabuf && !has_dmabuf)
			continue;
		profs[nprof] = one_profile(&e, p, t, stack, sattr, nsattr, pattr, npattr);
		if (!profs[nprof++])
			goto out;
	}
	scope.name = "heapprofd";
	sp.scope = &scope;
	sp.n_profiles = nprof;
	sp.profiles = profs;
	rp.resource = resource(&e, p, who);
	if (!rp.resource || e.oom)
		goto out;
	rp.n_scope_profiles = 1;
	rp.scope_profiles = spp;
	dict.n_link_table = 1;
	dict.link_table = links;
	dict.n_string_table = e.nstrs;
	dict.string_table = e.strs;
	dict.n_attribute_table = e.nattrs;
	dict.attribute_table = e.attrs;
	req.n_resource_profiles = 1;
	req.resource_profiles = rpp;
	req.dictionary = &dict;
	*len = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__get_packed_size(&req);
	*out = malloc(*len + 1);
	if (*out) {
		opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack(&req, *out);
		rc = 0;
	}
out:
	for (size_t i = 0; i < e.nblocks; i++)
		free(e.blocks[i]);
	free(e.blocks);
	free(e.strs);
	free(e.orig);
	free(e.attrs);
	hp_hmap_free(&e.sidx);
	return rc;
}

static int otlp_fmt(const struct hp_prof *p, const struct hp_format_args *a, struct hp_out *o)
{
	uint8_t *buf;
	size_t len;
	int rc = encode(p, a ? a->who : NULL, &buf, &len);

	if (rc) {
		hp_out_fail(o, -rc, "encoding");
		return rc;
	}
	rc = hp_out_write(o, buf, len);
	free(buf);
	return rc;
}

/*
 * Not in a dump's files unless asked for (record --format otlp): the
 * exports send it (heapprofd --export otlp=URL).
 */
const struct hp_format hp_format_otlp = {
	.name = "otlp", .ext = ".otlp.pb",
	.what = "an OTLP ExportProfilesServiceRequest (OpenTelemetry profiles, protobuf)",
	.flags = 0, .write = otlp_fmt,
};
