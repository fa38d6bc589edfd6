// SPDX-License-Identifier: GPL-2.0
/*
 * DMA-BUF, DRM and system memory from /proc and /sys (dmabuf_info.h): the
 * reading and parsing behind `heapprofctl dmabuf`, `gpu` and `meminfo`.
 * Everything read is untrusted: bounded reads, whole lines only, strict
 * numbers; what does not parse is skipped and counted.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "dmabuf_info.h"
#include "printable.h"

#define FDINFO_MAX	16384	/* a DRM fdinfo with many engines stays far below */
#define LINE_MAX_	512

const char *hp_proc_root(void)
{
	const char *e = getenv(HP_PROC_ROOT_ENV);

	return e && *e ? e : "/proc";
}

const char *hp_sys_root(void)
{
	const char *e = getenv(HP_SYS_ROOT_ENV);

	return e && *e ? e : "/sys";
}

int hp_strict_u64(const char *s, const char **end, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;

	if (!isdigit((unsigned char)*p))
		return -1;
	for (; isdigit((unsigned char)*p); p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	if (*p && !isspace((unsigned char)*p))
		return -1;
	if (end)
		*end = p;
	*out = v;
	return 0;
}

/* A decimal number and nothing else (a trailing newline allowed). */
static int whole_u64(const char *s, uint64_t *out)
{
	const char *end;

	if (hp_strict_u64(s, &end, out))
		return -1;
	while (*end == '\n' || *end == ' ' || *end == '\t')
		end++;
	return *end ? -1 : 0;
}

/*
 * Read at most len-1 bytes of path; keep whole lines only when the file was
 * longer (a cut line would read as a different number). Bytes kept, or -1.
 */
static ssize_t read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	size_t n = 0;
	ssize_t k;
	char extra;

	if (fd < 0)
		return -1;
	while (n < len - 1 && (k = read(fd, buf + n, len - 1 - n)) > 0)
		n += (size_t)k;
	if (n == len - 1 && read(fd, &extra, 1) == 1) {
		while (n && buf[n - 1] != '\n')
			n--;
	}
	close(fd);
	buf[n] = 0;
	/* A NUL inside is not text. */
	if (strlen(buf) != n)
		return -1;
	return (ssize_t)n;
}

/* One line of a sysfs file, without its newline. */
static int read_line(const char *path, char *out, size_t len)
{
	char buf[256];
	size_t n;

	if (read_text(path, buf, sizeof(buf)) < 0)
		return -1;
	n = strcspn(buf, "\n");
	if (n >= len)
		n = len - 1;
	memcpy(out, buf, n);
	out[n] = 0;
	return 0;
}

/* -1: could not be read (gone: a released buffer reads ENODEV); -2: not a number. */
static int read_u64_file(const char *path, uint64_t *v)
{
	char buf[64];

	if (read_text(path, buf, sizeof(buf)) < 0)
		return -1;
	return whole_u64(buf, v) ? -2 : 0;
}

/* Printable names only (printable.h), and none that breaks a CSV field. */
static void clean_copy(char *dst, size_t len, const char *src, size_t srclen)
{
	hp_printable(dst, len, src, srclen, ",\"");
}

/*
 * Walk "key:<spaces>value" lines. For each line calls fn(key, klen, value,
 * arg) with value trimmed; fn returns nonzero to stop.
 */
typedef int (*kv_fn)(const char *key, size_t klen, const char *val, void *arg);
static int each_kv(const char *text, kv_fn fn, void *arg)
{
	char line[LINE_MAX_];
	const char *p = text;

	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		char *colon, *v, *e;

		if (n < sizeof(line)) {
			memcpy(line, p, n);
			line[n] = 0;
			colon = strchr(line, ':');
			if (colon) {
				v = colon + 1;
				while (*v == ' ' || *v == '\t')
					v++;
				e = v + strlen(v);
				while (e > v && isspace((unsigned char)e[-1]))
					*--e = 0;
				if (fn(line, (size_t)(colon - line), v, arg))
					return 1;
			}
		}
		p += n;
		if (*p)
			p++;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* dma-buf fdinfo                                                      */
/* ------------------------------------------------------------------ */

struct dbfd {
	uint64_t inode, size;
	long count;
	int has_ino, has_size, has_count, has_exp, bad;
	char exporter[64], name[64];
};

static int key_is(const char *key, size_t klen, const char *want)
{
	return strlen(want) == klen && !memcmp(key, want, klen);
}

static int dbfd_kv(const char *key, size_t klen, const char *v, void *arg)
{
	struct dbfd *d = arg;
	uint64_t n;

	if (key_is(key, klen, "ino")) {
		d->has_ino = !whole_u64(v, &d->inode);
		d->bad |= !d->has_ino;
	} else if (key_is(key, klen, "size")) {
		d->has_size = !whole_u64(v, &d->size);
		d->bad |= !d->has_size;
	} else if (key_is(key, klen, "count")) {
		d->has_count = !whole_u64(v, &n) && n <= LONG_MAX;
		d->count = (long)n;
		d->bad |= !d->has_count;
	} else if (key_is(key, klen, "exp_name")) {
		d->has_exp = 1;
		clean_copy(d->exporter, sizeof(d->exporter), v, strlen(v));
	} else if (key_is(key, klen, "name")) {
		clean_copy(d->name, sizeof(d->name), v, strlen(v));
	}
	return 0;
}

int hp_parse_dmabuf_fdinfo(const char *text, uint64_t *inode, uint64_t *size, long *count,
			   char *exporter, size_t elen, char *name, size_t nlen)
{
	struct dbfd d = { .count = -1 };

	each_kv(text, dbfd_kv, &d);
	/* exp_name: is dma_buf_show_fdinfo's own; size: and count: come with it. */
	if (!d.has_exp)
		return 0;
	if (d.bad || !d.has_size)
		return -1;
	*inode = d.has_ino ? d.inode : 0;
	*size = d.size;
	*count = d.has_count ? d.count : -1;
	snprintf(exporter, elen, "%s", d.exporter);
	snprintf(name, nlen, "%s", d.name);
	return 1;
}

/* ------------------------------------------------------------------ */
/* DRM fdinfo (Documentation/gpu/drm-usage-stats.rst)                  */
/* ------------------------------------------------------------------ */

int hp_parse_drm_size(const char *v, uint64_t *bytes)
{
	const char *end;
	uint64_t n, mul = 1;

	if (hp_strict_u64(v, &end, &n))
		return -1;
	while (*end == ' ' || *end == '\t')
		end++;
	if (!*end)
		mul = 1;
	else if (!strcmp(end, "KiB"))
		mul = 1ULL << 10;
	else if (!strcmp(end, "MiB"))
		mul = 1ULL << 20;
	else if (!strcmp(end, "GiB"))
		mul = 1ULL << 30;
	else
		return -1;
	if (n > UINT64_MAX / mul)
		return -1;
	*bytes = n * mul;
	return 0;
}

struct drmp {
	struct hp_drm_client *c;
	int has_driver, bad;
	/* drm-memory-<r>: the older name of drm-total-<r> */
	uint64_t legacy[HP_DRM_REGIONS];
};

static struct hp_drm_region *drm_region(struct hp_drm_client *c, const char *name, size_t len)
{
	int i;

	if (!len || len >= sizeof(c->region[0].name))
		return NULL;
	for (i = 0; i < c->nregions; i++)
		if (strlen(c->region[i].name) == len && !memcmp(c->region[i].name, name, len))
			return &c->region[i];
	if (c->nregions == HP_DRM_REGIONS)
		return NULL;
	c->region[c->nregions] = (struct hp_drm_region){
		.total = UINT64_MAX, .shared = UINT64_MAX, .resident = UINT64_MAX,
		.purgeable = UINT64_MAX, .active = UINT64_MAX };
	clean_copy(c->region[c->nregions].name, sizeof(c->region[0].name), name, len);
	return &c->region[c->nregions++];
}

static int drm_kv(const char *key, size_t klen, const char *v, void *arg)
{
	static const struct { const char *pfx; size_t off; } mem[] = {
		{ "drm-total-", offsetof(struct hp_drm_region, total) },
		{ "drm-shared-", offsetof(struct hp_drm_region, shared) },
		{ "drm-resident-", offsetof(struct hp_drm_region, resident) },
		{ "drm-purgeable-", offsetof(struct hp_drm_region, purgeable) },
		{ "drm-active-", offsetof(struct hp_drm_region, active) },
		{ "drm-memory-", 0 },	/* legacy: an alias of drm-total- */
	};
	struct drmp *p = arg;
	size_t i;

	if (klen < 4 || memcmp(key, "drm-", 4))
		return 0;
	if (key_is(key, klen, "drm-driver")) {
		clean_copy(p->c->driver, sizeof(p->c->driver), v, strlen(v));
		p->has_driver = p->c->driver[0] != 0;
		return 0;
	}
	if (key_is(key, klen, "drm-pdev")) {
		clean_copy(p->c->pdev, sizeof(p->c->pdev), v, strlen(v));
		return 0;
	}
	if (key_is(key, klen, "drm-client-id")) {
		p->c->has_id = !whole_u64(v, &p->c->client_id);
		p->bad |= !p->c->has_id;
		return 0;
	}
	for (i = 0; i < sizeof(mem) / sizeof(mem[0]); i++) {
		size_t pl = strlen(mem[i].pfx);
		struct hp_drm_region *r;
		uint64_t bytes;

		if (klen <= pl || memcmp(key, mem[i].pfx, pl))
			continue;
		/* drm-total-cycles-<engine> is utilisation, not memory */
		if (klen - pl >= 7 && !memcmp(key + pl, "cycles-", 7))
			return 0;
		r = drm_region(p->c, key + pl, klen - pl);
		if (!r)
			return 0;	/* more regions than we keep: ignored */
		if (hp_parse_drm_size(v, &bytes)) {
			p->bad = 1;
			return 0;
		}
		if (!strcmp(mem[i].pfx, "drm-memory-"))
			p->legacy[r - p->c->region] = bytes;
		else
			*(uint64_t *)((char *)r + mem[i].off) = bytes;
		return 0;
	}
	return 0;
}

int hp_parse_drm_fdinfo(const char *text, struct hp_drm_client *c)
{
	struct drmp p = { .c = c };
	int i;

	memset(c, 0, sizeof(*c));
	for (i = 0; i < HP_DRM_REGIONS; i++)
		p.legacy[i] = UINT64_MAX;
	each_kv(text, drm_kv, &p);
	if (!p.has_driver)
		return 0;
	if (p.bad)
		return -1;
	for (i = 0; i < c->nregions; i++)
		if (c->region[i].total == UINT64_MAX)
			c->region[i].total = p.legacy[i];
	return 1;
}

/*
 * Memory of a region that is system RAM outside the page cache: TTM
 * drivers' system and GTT placements (their pages are the driver's own).
 * VRAM, stolen and device-local memory are not system RAM; the GEM shmem
 * drivers' (i915 system, msm, panfrost, v3d, vgem) pages are shmem pages,
 * already counted in Shmem and Cached.
 */
int hp_drm_region_is_private_ram(const char *driver, const char *region)
{
	static const char *const ttm[] = { "amdgpu", "radeon", "xe", "nouveau", "vmwgfx",
					   "qxl", NULL };
	int i;

	if (!strncmp(region, "vram", 4) || !strncmp(region, "local", 5) ||
	    !strncmp(region, "stolen", 6))
		return 0;
	for (i = 0; ttm[i]; i++)
		if (!strcmp(driver, ttm[i]))
			return 1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* maps                                                                */
/* ------------------------------------------------------------------ */

/* "start-end perms offset dev inode   /dmabuf:NAME" */
int hp_parse_dmabuf_maps_line(const char *line, uint64_t *inode, uint64_t *len, char *name,
			      size_t nlen)
{
	unsigned long long start, end, ino;
	char perms[8], dev[16];
	unsigned long long off;
	int pos = 0;
	const char *path;
	size_t plen;

	if (sscanf(line, "%llx-%llx %7s %llx %15s %llu %n", &start, &end, perms, &off, dev, &ino,
		   &pos) != 6 || !pos || end < start)
		return 0;
	path = line + pos;
	if (strncmp(path, "/dmabuf:", 8))
		return 0;
	path += 8;
	plen = strcspn(path, "\n");
	/* A name of a deleted file or an anon inode would not end like this. */
	*inode = ino;
	*len = end - start;
	clean_copy(name, nlen, path, plen);
	return 1;
}

/* ------------------------------------------------------------------ */
/* collecting                                                          */
/* ------------------------------------------------------------------ */

static void *grow(void *p, size_t *cap, size_t need, size_t elem)
{
	size_t n;
	void *q;

	if (need <= *cap)
		return p;
	n = *cap ? *cap * 2 : 16;
	while (n < need)
		n *= 2;
	q = realloc(p, n * elem);
	if (!q) {
		perror("heapprofctl: out of memory");
		exit(1);
	}
	memset((char *)q + *cap * elem, 0, (n - *cap) * elem);
	*cap = n;
	return q;
}

static struct hp_dmabuf *buf_get(struct hp_dmabuf_info *info, uint64_t inode)
{
	static size_t hint;
	size_t i;

	if (hint < info->nbufs && info->bufs[hint].inode == inode)
		return &info->bufs[hint];
	for (i = 0; i < info->nbufs; i++)
		if (info->bufs[i].inode == inode) {
			hint = i;
			return &info->bufs[i];
		}
	info->bufs = grow(info->bufs, &info->capbufs, info->nbufs + 1, sizeof(*info->bufs));
	info->bufs[info->nbufs].inode = inode;
	info->bufs[info->nbufs].exporter_pid = -1;
	hint = info->nbufs;
	return &info->bufs[info->nbufs++];
}

static struct hp_dmabuf_ref *ref_get(struct hp_dmabuf *b, int proc)
{
	size_t i;

	for (i = 0; i < b->nrefs; i++)
		if (b->refs[i].proc == proc)
			return &b->refs[i];
	b->refs = grow(b->refs, &b->caprefs, b->nrefs + 1, sizeof(*b->refs));
	b->refs[b->nrefs].proc = proc;
	return &b->refs[b->nrefs++];
}

static int is_number(const char *s)
{
	uint64_t v;

	return !whole_u64(s, &v) && v <= INT_MAX && s[0] != '0';
}

static void add_drm(struct hp_dmaproc *p, const struct hp_drm_client *c)
{
	size_t i;

	/* Two fds on one drm_file: one client (drm-client-id, per driver and device). */
	for (i = 0; c->has_id && i < p->ndrm; i++)
		if (p->drm[i].has_id && p->drm[i].client_id == c->client_id &&
		    !strcmp(p->drm[i].driver, c->driver) && !strcmp(p->drm[i].pdev, c->pdev)) {
			p->drm[i].fds++;
			return;
		}
	p->drm = grow(p->drm, &p->capdrm, p->ndrm + 1, sizeof(*p->drm));
	p->drm[p->ndrm] = *c;
	p->drm[p->ndrm].fds = 1;
	p->ndrm++;
}

static void read_fds(struct hp_dmabuf_info *info, const char *proc, int pi)
{
	char path[PATH_MAX], *text;
	struct hp_dmaproc *p = &info->procs[pi];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "%s/%d/fdinfo", proc, p->pid);
	d = opendir(path);
	if (!d) {
		/* Gone, or a zombie: nothing held. Not allowed: say so. */
		p->unreadable |= errno == EACCES || errno == EPERM;
		return;
	}
	text = malloc(FDINFO_MAX);
	if (!text) {
		closedir(d);
		return;
	}
	while ((de = readdir(d))) {
		uint64_t inode, size;
		long count;
		char exp[64], name[64];
		struct hp_drm_client c;
		int r;

		if (!is_number(de->d_name) && strcmp(de->d_name, "0"))
			continue;
		snprintf(path, sizeof(path), "%s/%d/fdinfo/%s", proc, p->pid, de->d_name);
		if (read_text(path, text, FDINFO_MAX) < 0)
			continue;	/* closed meanwhile */
		r = hp_parse_dmabuf_fdinfo(text, &inode, &size, &count, exp, sizeof(exp), name,
					   sizeof(name));
		if (r < 0) {
			info->skipped++;
			continue;
		}
		if (r > 0) {
			struct hp_dmabuf *b;

			if (!inode) {	/* kernels without the generic ino: line */
				struct stat st;

				snprintf(path, sizeof(path), "%s/%d/fd/%s", proc, p->pid, de->d_name);
				if (stat(path, &st)) {
					info->skipped++;
					continue;
				}
				inode = st.st_ino;
			}
			b = buf_get(info, inode);
			b->size = size;
			b->size_from_map = 0;
			if (exp[0])
				snprintf(b->exporter, sizeof(b->exporter), "%s", exp);
			if (name[0])
				snprintf(b->name, sizeof(b->name), "%s", name);
			b->seen |= HP_SEEN_FD;
			ref_get(b, pi)->fds++;
			continue;
		}
		r = hp_parse_drm_fdinfo(text, &c);
		if (r < 0)
			info->skipped++;
		else if (r > 0)
			add_drm(&info->procs[pi], &c);
	}
	free(text);
	closedir(d);
}

static void read_maps(struct hp_dmabuf_info *info, const char *proc, int pi)
{
	char path[PATH_MAX], line[LINE_MAX_ + 64];
	struct hp_dmaproc *p = &info->procs[pi];
	int skipping = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d/maps", proc, p->pid);
	f = fopen(path, "re");
	if (!f) {
		p->unreadable |= errno == EACCES || errno == EPERM;
		return;
	}
	while (fgets(line, sizeof(line), f)) {
		size_t n = strlen(line);
		uint64_t inode, len;
		char name[64];
		int whole = n && line[n - 1] == '\n';

		if (skipping) {		/* the rest of an overlong line */
			skipping = !whole;
			continue;
		}
		skipping = !whole && !feof(f);
		if (hp_parse_dmabuf_maps_line(line, &inode, &len, name, sizeof(name)) == 1) {
			struct hp_dmabuf *b = buf_get(info, inode);

			if (!b->size || (b->size_from_map && len > b->size)) {
				b->size = len;
				b->size_from_map = 1;
			}
			if (name[0] && !b->name[0])
				snprintf(b->name, sizeof(b->name), "%s", name);
			b->seen |= HP_SEEN_MAP;
			ref_get(b, pi)->maps++;
		}
	}
	fclose(f);
}

static void read_rollup(const char *proc, struct hp_dmaproc *p)
{
	char path[PATH_MAX], text[4096];
	int64_t pss, swap;

	snprintf(path, sizeof(path), "%s/%d/smaps_rollup", proc, p->pid);
	if (read_text(path, text, sizeof(text)) < 0) {
		p->unreadable |= errno == EACCES || errno == EPERM;
		return;
	}
	pss = hp_meminfo_field(text, "Pss");
	swap = hp_meminfo_field(text, "SwapPss");
	/* Kernel threads have an empty rollup: nothing to add. */
	p->pss_kb = pss > 0 ? (uint64_t)pss : 0;
	p->swap_pss_kb = swap > 0 ? (uint64_t)swap : 0;
	p->has_rollup = 1;
}

/* SYS/kernel/heapprofd/dmabuf/buffers or SYS/kernel/dmabuf/buffers */
static int read_sysfs_buffers(struct hp_dmabuf_info *info, const char *dir, unsigned seen)
{
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char path[PATH_MAX], exp[64];
		uint64_t inode, size, pid;
		struct hp_dmabuf *b;
		int r;

		if (whole_u64(de->d_name, &inode))
			continue;
		snprintf(path, sizeof(path), "%s/%s/size", dir, de->d_name);
		r = read_u64_file(path, &size);
		if (r) {
			info->skipped += r == -2;
			continue;	/* released meanwhile, or malformed */
		}
		b = buf_get(info, inode);
		if (!(b->seen & HP_SEEN_FD))	/* an fd's size is as fresh as it gets */
			b->size = size, b->size_from_map = 0;
		snprintf(path, sizeof(path), "%s/%s/exporter_name", dir, de->d_name);
		if (!read_line(path, exp, sizeof(exp)) && exp[0] && !b->exporter[0])
			clean_copy(b->exporter, sizeof(b->exporter), exp, strlen(exp));
		snprintf(path, sizeof(path), "%s/%s/exporter_pid", dir, de->d_name);
		/* 0: a kernel thread, or a buffer the module found at load */
		if (!read_u64_file(path, &pid) && pid && pid <= INT_MAX)
			b->exporter_pid = (int)pid;
		b->seen |= seen;
	}
	closedir(d);
	return 0;
}

static int cmp_pid(const void *a, const void *b)
{
	const struct hp_dmaproc *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

static int cmp_buf(const void *a, const void *b)
{
	const struct hp_dmabuf *x = a, *y = b;

	return (x->inode > y->inode) - (x->inode < y->inode);
}

static int cmp_ref(const void *a, const void *b)
{
	const struct hp_dmabuf_ref *x = a, *y = b;

	return (x->proc > y->proc) - (x->proc < y->proc);
}

/* A process's DRM clients by driver, device and id: the same order every time. */
static int cmp_drm(const void *a, const void *b)
{
	const struct hp_drm_client *x = a, *y = b;
	int c = strcmp(x->driver, y->driver);

	if (!c)
		c = strcmp(x->pdev, y->pdev);
	if (!c)
		c = (x->client_id > y->client_id) - (x->client_id < y->client_id);
	return c;
}

int hp_dmabuf_collect(struct hp_dmabuf_info *info, const char *proc, const char *sys,
		      int want_rollup, char *why, size_t whylen)
{
	char path[PATH_MAX];
	struct dirent *de;
	size_t i, j;
	DIR *d;

	d = opendir(proc);
	if (!d) {
		snprintf(why, whylen, "cannot read %s: %s", proc, strerror(errno));
		return -1;
	}
	while ((de = readdir(d))) {
		struct hp_dmaproc *p;

		if (!is_number(de->d_name))
			continue;
		info->procs = grow(info->procs, &info->capprocs, info->nprocs + 1,
				   sizeof(*info->procs));
		p = &info->procs[info->nprocs++];
		p->pid = atoi(de->d_name);
	}
	closedir(d);
	/* Process order is pid order: the tables and refs follow it. */
	if (info->nprocs)
		qsort(info->procs, info->nprocs, sizeof(*info->procs), cmp_pid);
	for (i = 0; i < info->nprocs; i++) {
		struct hp_dmaproc *p = &info->procs[i];

		snprintf(path, sizeof(path), "%s/%d/comm", proc, p->pid);
		if (read_line(path, path, sizeof(path)) == 0)
			clean_copy(p->comm, sizeof(p->comm), path, strlen(path));
		else
			snprintf(p->comm, sizeof(p->comm), "?");
		read_fds(info, proc, (int)i);
		read_maps(info, proc, (int)i);
		if (want_rollup)
			read_rollup(proc, p);
		if (p->unreadable)
			info->unreadable++;
	}

	snprintf(path, sizeof(path), "%s/kernel/heapprofd/dmabuf/source", sys);
	if (!read_line(path, info->module_source, sizeof(info->module_source))) {
		info->module = 1;
		clean_copy(info->module_source, sizeof(info->module_source), info->module_source,
			   sizeof(info->module_source));
		snprintf(path, sizeof(path), "%s/kernel/heapprofd/dmabuf/total_exported_bytes", sys);
		read_u64_file(path, &info->module_total);
		snprintf(path, sizeof(path), "%s/kernel/heapprofd/dmabuf/buffer_count", sys);
		read_u64_file(path, &info->module_count);
		snprintf(path, sizeof(path), "%s/kernel/heapprofd/dmabuf/buffers", sys);
		read_sysfs_buffers(info, path, HP_SEEN_MODULE);
	}
	snprintf(path, sizeof(path), "%s/kernel/dmabuf/buffers", sys);
	info->android_sysfs = !read_sysfs_buffers(info, path, HP_SEEN_SYSFS);

	if (info->nbufs)
		qsort(info->bufs, info->nbufs, sizeof(*info->bufs), cmp_buf);
	for (i = 0; i < info->nbufs; i++)
		if (info->bufs[i].nrefs)
			qsort(info->bufs[i].refs, info->bufs[i].nrefs, sizeof(*info->bufs[i].refs),
			      cmp_ref);
	for (i = 0; i < info->nprocs; i++)
		if (info->procs[i].ndrm)
			qsort(info->procs[i].drm, info->procs[i].ndrm, sizeof(*info->procs[i].drm),
			      cmp_drm);

	/* A DRM client two processes share counts once in system totals. */
	for (i = 0; i < info->nprocs; i++)
		for (j = 0; j < info->procs[i].ndrm; j++) {
			struct hp_drm_client *c = &info->procs[i].drm[j];
			size_t k, l;
			int dup = 0;

			for (k = 0; c->has_id && k < i && !dup; k++)
				for (l = 0; l < info->procs[k].ndrm && !dup; l++) {
					struct hp_drm_client *o = &info->procs[k].drm[l];

					dup = o->has_id && o->client_id == c->client_id &&
					      !strcmp(o->driver, c->driver) &&
					      !strcmp(o->pdev, c->pdev);
				}
			c->first_owner = !dup;
		}
	return 0;
}

void hp_dmabuf_free(struct hp_dmabuf_info *info)
{
	size_t i;

	for (i = 0; i < info->nbufs; i++)
		free(info->bufs[i].refs);
	for (i = 0; i < info->nprocs; i++)
		free(info->procs[i].drm);
	free(info->bufs);
	free(info->procs);
	memset(info, 0, sizeof(*info));
}

void hp_dmabuf_totals(const struct hp_dmabuf_info *info, struct hp_dmabuf_totals *t)
{
	size_t i, j;

	memset(t, 0, sizeof(*t));
	for (i = 0; i < info->nbufs; i++) {
		const struct hp_dmabuf *b = &info->bufs[i];
		int mapped = 0;

		t->total += b->size;
		t->count++;
		if (!b->nrefs) {
			t->kernel_rss += b->size;
			continue;
		}
		t->user_count++;
		t->userspace_rss += b->size;
		for (j = 0; j < b->nrefs; j++) {
			t->userspace_pss += hp_dmabuf_pss(b);
			mapped |= b->refs[j].maps > 0;
		}
		if (mapped)
			t->mapped += b->size;
	}
}

/* ------------------------------------------------------------------ */
/* GPU totals from the module                                          */
/* ------------------------------------------------------------------ */

static void gpu_add(struct hp_gpu_info *g, uint32_t gpu, int pid, uint64_t bytes)
{
	g->e = grow(g->e, &g->cap, g->n + 1, sizeof(*g->e));
	g->e[g->n++] = (struct hp_gpu_pid){ gpu, pid, bytes };
}

int hp_gpu_collect(struct hp_gpu_info *g, const char *sys)
{
	char dir[PATH_MAX], path[PATH_MAX + 300];
	struct dirent *de, *pe;
	DIR *d, *pd;

	snprintf(dir, sizeof(dir), "%s/kernel/heapprofd/gpu", sys);
	d = opendir(dir);
	if (!d)
		return -1;
	g->module = 1;
	while ((de = readdir(d))) {
		uint64_t id, v;

		if (whole_u64(de->d_name, &id) || id > UINT32_MAX)
			continue;
		snprintf(path, sizeof(path), "%s/%s/total_bytes", dir, de->d_name);
		if (!read_u64_file(path, &v))
			gpu_add(g, (uint32_t)id, 0, v);
		snprintf(path, sizeof(path), "%s/%s/pids", dir, de->d_name);
		pd = opendir(path);
		while (pd && (pe = readdir(pd))) {
			uint64_t pid;
			char p2[PATH_MAX + 600];

			if (whole_u64(pe->d_name, &pid) || !pid || pid > INT_MAX)
				continue;
			snprintf(p2, sizeof(p2), "%s/%s", path, pe->d_name);
			if (!read_u64_file(p2, &v))
				gpu_add(g, (uint32_t)id, (int)pid, v);
		}
		if (pd)
			closedir(pd);
	}
	closedir(d);
	return 0;
}

void hp_gpu_free(struct hp_gpu_info *g)
{
	free(g->e);
	memset(g, 0, sizeof(*g));
}

/* ------------------------------------------------------------------ */
/* meminfo and the lost-RAM terms                                      */
/* ------------------------------------------------------------------ */

const char *const hp_mem_term_name[HP_MT_N] = {
	[HP_MT_TOTAL] = "total",
	[HP_MT_PSS] = "pss",
	[HP_MT_SWAP_PSS] = "swap_pss",
	[HP_MT_DMABUF_MAPPED] = "dmabuf_mapped",
	[HP_MT_FREE] = "free",
	[HP_MT_CACHED_BUFFERS] = "buffers",
	[HP_MT_CACHED_CACHED] = "cached",
	[HP_MT_CACHED_MAPPED] = "mapped",
	[HP_MT_CACHED_KRECLAIMABLE] = "kreclaimable",
	[HP_MT_CACHED_POOLS] = "dma_heap_pools",
	[HP_MT_K_SUNRECLAIM] = "sunreclaim",
	[HP_MT_K_VMALLOC] = "vmalloc_used",
	[HP_MT_K_PAGETABLES] = "page_tables",
	[HP_MT_K_KERNELSTACK] = "kernel_stack",
	[HP_MT_K_DMABUF_UNMAPPED] = "dmabuf_unmapped",
	[HP_MT_K_GPU_PRIVATE] = "gpu_private",
	[HP_MT_ZRAM] = "zram",
	[HP_MT_LOST] = "lost",
};

static void setsrc(struct hp_meminfo *m, int term, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void setsrc(struct hp_meminfo *m, int term, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(m->src[term], sizeof(m->src[term]), fmt, ap);
	va_end(ap);
}

int64_t hp_meminfo_field(const char *text, const char *key)
{
	size_t kl = strlen(key);
	const char *p = text;

	while (p && *p) {
		if (!strncmp(p, key, kl) && p[kl] == ':') {
			const char *v = p + kl + 1, *end;
			uint64_t n;

			while (*v == ' ' || *v == '\t')
				v++;
			if (hp_strict_u64(v, &end, &n) || n > INT64_MAX / 1024)
				return -1;
			/* "kB" or nothing (HugePages_Total: 0) */
			while (*end == ' ')
				end++;
			if (*end != '\n' && *end && strncmp(end, "kB", 2))
				return -1;
			return (int64_t)n;
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return -1;
}

static int vmap_stacks(const char *proc, char *how, size_t len)
{
	char path[PATH_MAX], line[512];
	struct utsname u;
	FILE *f;
	int r = -1;

	snprintf(path, sizeof(path), "%s/vmallocinfo", proc);
	f = fopen(path, "re");
	if (f) {
		r = 0;
		while (fgets(line, sizeof(line), f))
			if (strstr(line, "alloc_thread_stack_node")) {
				r = 1;
				break;
			}
		fclose(f);
		snprintf(how, len, "%s", path);
		/* Unprivileged, it is readable but empty of callers: no answer. */
		if (r == 1)
			return 1;
	}
	if (!strcmp(proc, "/proc") && !uname(&u)) {
		snprintf(path, sizeof(path), "/boot/config-%s", u.release);
		f = fopen(path, "re");
		if (f) {
			r = 0;
			while (fgets(line, sizeof(line), f))
				if (!strcmp(line, "CONFIG_VMAP_STACK=y\n"))
					r = 1;
			fclose(f);
			snprintf(how, len, "%s", path);
			return r;
		}
	}
	if (r < 0)
		snprintf(how, len, "no /proc/vmallocinfo or kernel config: assumed not");
	return r > 0;
}

int hp_meminfo_collect(struct hp_meminfo *m, const char *proc, const char *sys, char *why,
		       size_t whylen)
{
	static const struct { int term; const char *key; } mi[] = {
		{ HP_MT_TOTAL, "MemTotal" }, { HP_MT_FREE, "MemFree" },
		{ HP_MT_CACHED_BUFFERS, "Buffers" }, { HP_MT_CACHED_CACHED, "Cached" },
		{ HP_MT_CACHED_MAPPED, "Mapped" }, { HP_MT_K_SUNRECLAIM, "SUnreclaim" },
		{ HP_MT_K_VMALLOC, "VmallocUsed" }, { HP_MT_K_PAGETABLES, "PageTables" },
		{ HP_MT_K_KERNELSTACK, "KernelStack" },
	};
	struct hp_dmabuf_info info = { 0 };
	struct hp_dmabuf_totals t;
	struct hp_gpu_info g = { 0 };
	char path[PATH_MAX], text[16384], how[PATH_MAX + 64];
	uint64_t udmabuf = 0, udmabuf_mapped = 0, v;
	size_t i, j, n;
	struct dirent *de;
	DIR *d;

	memset(m, 0, sizeof(*m));
	snprintf(path, sizeof(path), "%s/meminfo", proc);
	if (read_text(path, text, sizeof(text)) < 0) {
		snprintf(why, whylen, "cannot read %s: %s", path, strerror(errno));
		return -1;
	}
	for (i = 0; i < sizeof(mi) / sizeof(mi[0]); i++) {
		int64_t kb = hp_meminfo_field(text, mi[i].key);

		if (kb < 0) {
			snprintf(why, whylen, "%s: no %s line", path, mi[i].key);
			return -1;
		}
		m->kb[mi[i].term] = kb;
		setsrc(m, mi[i].term, "%s %s", path, mi[i].key);
	}
	m->kb[HP_MT_CACHED_KRECLAIMABLE] = hp_meminfo_field(text, "KReclaimable");
	setsrc(m, HP_MT_CACHED_KRECLAIMABLE, "%s KReclaimable", path);
	if (m->kb[HP_MT_CACHED_KRECLAIMABLE] < 0) {	/* before 4.20 */
		m->kb[HP_MT_CACHED_KRECLAIMABLE] = hp_meminfo_field(text, "SReclaimable");
		setsrc(m, HP_MT_CACHED_KRECLAIMABLE, "%s SReclaimable (no KReclaimable)", path);
		if (m->kb[HP_MT_CACHED_KRECLAIMABLE] < 0)
			m->kb[HP_MT_CACHED_KRECLAIMABLE] = 0;
	}
	m->vmap_stack = vmap_stacks(proc, how, sizeof(how));
	if (m->vmap_stack) {
		m->kb[HP_MT_K_KERNELSTACK] = 0;
		setsrc(m, HP_MT_K_KERNELSTACK, "0: vmap stacks (%s), KernelStack is inside VmallocUsed", how);
	} else {
		setsrc(m, HP_MT_K_KERNELSTACK, "%s KernelStack (no vmap stacks: %s)", path, how);
	}

	snprintf(path, sizeof(path), "%s/kernel/dma_heap/total_pools_kb", sys);
	if (!read_u64_file(path, &v) && v <= INT64_MAX) {
		m->kb[HP_MT_CACHED_POOLS] = (int64_t)v;
		setsrc(m, HP_MT_CACHED_POOLS, "%s", path);
	} else {
		setsrc(m, HP_MT_CACHED_POOLS, "0: no %s", path);
	}

	/* PSS and the DMA-BUFs, from every process */
	if (hp_dmabuf_collect(&info, proc, sys, 1, why, whylen))
		return -1;
	for (i = 0; i < info.nprocs; i++) {
		m->kb[HP_MT_PSS] += (int64_t)(info.procs[i].pss_kb + info.procs[i].swap_pss_kb);
		m->kb[HP_MT_SWAP_PSS] += (int64_t)info.procs[i].swap_pss_kb;
		m->procs += info.procs[i].has_rollup;
		m->procs_unreadable += info.procs[i].unreadable;
	}
	setsrc(m, HP_MT_PSS, "sum of Pss + SwapPss of %s/*/smaps_rollup (%u processes)", proc, m->procs);
	setsrc(m, HP_MT_SWAP_PSS, "sum of SwapPss of %s/*/smaps_rollup",
		 proc);
	/* udmabuf pages are a memfd's: in Shmem/Cached, and in PSS when mapped. */
	for (i = 0; i < info.nbufs; i++) {
		if (strcmp(info.bufs[i].exporter, "udmabuf"))
			continue;
		udmabuf += info.bufs[i].size;
		for (j = 0; j < info.bufs[i].nrefs; j++)
			if (info.bufs[i].refs[j].maps) {
				udmabuf_mapped += info.bufs[i].size;
				break;
			}
	}
	hp_dmabuf_totals(&info, &t);
	m->kb[HP_MT_DMABUF_MAPPED] = (int64_t)((t.mapped - udmabuf_mapped) / 1024);
	m->kb[HP_MT_K_DMABUF_UNMAPPED] =
		(int64_t)((t.total - udmabuf) / 1024) - m->kb[HP_MT_DMABUF_MAPPED];
	setsrc(m, HP_MT_DMABUF_MAPPED, "DMA-BUFs some process maps (%s/*/maps), each once", proc);
	setsrc(m, HP_MT_K_DMABUF_UNMAPPED, "exported DMA-BUFs (%s%s%s%s/*/fdinfo) no process maps",
		 info.module ? "heapprofd module sysfs, " : "", info.android_sysfs ? sys : "",
		 info.android_sysfs ? "/kernel/dmabuf/buffers, " : "", proc);
	n = 0;
	if (!info.module && !info.android_sysfs)
		n += (size_t)snprintf(m->notes + n, sizeof(m->notes) - n,
			"DMA-BUFs no process holds are not seen: no %s/kernel/heapprofd/dmabuf (module) and no %s/kernel/dmabuf/buffers (CONFIG_DMABUF_SYSFS_STATS).\n",
			sys, sys);
	if (udmabuf && n < sizeof(m->notes))
		n += (size_t)snprintf(m->notes + n, sizeof(m->notes) - n,
			"udmabuf buffers (%llu kB) are memfd pages, counted in cached and pss, not as DMA-BUF.\n",
			(unsigned long long)(udmabuf / 1024));

	/* GPU memory of the driver's own, outside every other term */
	if (!hp_gpu_collect(&g, sys) && g.n) {
		uint64_t sum = 0;

		for (i = 0; i < g.n; i++)
			if (!g.e[i].pid)
				sum += g.e[i].bytes;
		m->kb[HP_MT_K_GPU_PRIVATE] = (int64_t)(sum / 1024);
		setsrc(m, HP_MT_K_GPU_PRIVATE, "%s/kernel/heapprofd/gpu/*/total_bytes (gpu_mem_total, pid 0)", sys);
	} else {
		uint64_t sum = 0;
		unsigned clients = 0;

		for (i = 0; i < info.nprocs; i++)
			for (j = 0; j < info.procs[i].ndrm; j++) {
				const struct hp_drm_client *c = &info.procs[i].drm[j];
				int r;

				if (!c->first_owner)
					continue;
				clients++;
				for (r = 0; r < c->nregions; r++) {
					const struct hp_drm_region *rg = &c->region[r];
					uint64_t priv;

					if (!hp_drm_region_is_private_ram(c->driver, rg->name) ||
					    rg->total == UINT64_MAX)
						continue;
					priv = rg->total;
					if (rg->shared != UINT64_MAX && rg->shared <= priv)
						priv -= rg->shared;
					sum += priv;
				}
			}
		m->kb[HP_MT_K_GPU_PRIVATE] = (int64_t)(sum / 1024);
		setsrc(m, HP_MT_K_GPU_PRIVATE, "DRM fdinfo drm-total minus drm-shared, system-RAM regions of TTM drivers (%u clients)",
			 clients);
	}
	hp_gpu_free(&g);

	/* zram: mem_used_total, the third field of mm_stat */
	snprintf(path, sizeof(path), "%s/block", sys);
	d = opendir(path);
	setsrc(m, HP_MT_ZRAM, "0: no %s/block/zram*", sys);
	while (d && (de = readdir(d))) {
		char p2[PATH_MAX + 300], st[512];
		const char *s;
		uint64_t f[3];
		int k;

		if (strncmp(de->d_name, "zram", 4))
			continue;
		snprintf(p2, sizeof(p2), "%s/%s/mm_stat", path, de->d_name);
		if (read_text(p2, st, sizeof(st)) < 0)
			continue;
		s = st;
		for (k = 0; k < 3; k++) {
			while (*s == ' ')
				s++;
			if (hp_strict_u64(s, &s, &f[k]))
				break;
		}
		if (k < 3) {
			info.skipped++;
			continue;
		}
		m->kb[HP_MT_ZRAM] += (int64_t)(f[2] / 1024);
		setsrc(m, HP_MT_ZRAM, "%s/block/zram*/mm_stat mem_used_total", sys);
	}
	if (d)
		closedir(d);

	m->pss_net = m->kb[HP_MT_PSS] - m->kb[HP_MT_SWAP_PSS] + m->kb[HP_MT_DMABUF_MAPPED];
	m->cached = m->kb[HP_MT_CACHED_BUFFERS] + m->kb[HP_MT_CACHED_CACHED] -
		    m->kb[HP_MT_CACHED_MAPPED] + m->kb[HP_MT_CACHED_KRECLAIMABLE] +
		    m->kb[HP_MT_CACHED_POOLS];
	m->kernel_used = m->kb[HP_MT_K_SUNRECLAIM] + m->kb[HP_MT_K_VMALLOC] +
			 m->kb[HP_MT_K_PAGETABLES] + m->kb[HP_MT_K_KERNELSTACK] +
			 m->kb[HP_MT_K_DMABUF_UNMAPPED] + m->kb[HP_MT_K_GPU_PRIVATE];
	m->kb[HP_MT_LOST] = m->kb[HP_MT_TOTAL] - m->pss_net - m->kb[HP_MT_FREE] - m->cached -
			    m->kernel_used - m->kb[HP_MT_ZRAM];
	setsrc(m, HP_MT_LOST, "total - (pss - swap_pss + dmabuf_mapped) - free - cached - kernel_used - zram");
	if (m->procs_unreadable && n < sizeof(m->notes))
		n += (size_t)snprintf(m->notes + n, sizeof(m->notes) - n,
			"%u processes could not be read (run as root): their PSS is in lost.\n",
			m->procs_unreadable);
	if (info.skipped && n < sizeof(m->notes))
		snprintf(m->notes + n, sizeof(m->notes) - n,
			 "%u files did not parse and were skipped.\n", info.skipped);
	hp_dmabuf_free(&info);
	return 0;
}
