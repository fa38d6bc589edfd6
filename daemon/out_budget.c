// SPDX-License-Identifier: GPL-2.0
/*
 * What the daemon may write: a budget per user for the profiles in its
 * output directory, and a reserve of free space on every file system it
 * writes to (heapprofd(8); the admin guide's "Limits").
 *
 * The system daemon writes a profile for every process any user offers it;
 * without a bound, one user running a preloaded program in a loop (or one
 * program with a huge profile) fills the output directory and the file
 * system under it, as root. So:
 *
 *   - each uid (the profiled process's, as the transport's credentials
 *     said: SCM_CREDENTIALS or the module's session owner) keeps at most
 *     max_profiles profiles and max_bytes of them in the output directory;
 *     after each dump its oldest profiles are removed until it fits again.
 *     A profile is the files of one dump (NAME.pb.gz, .svg, .folded, .txt
 *     and their .peak. twins), counted and removed together;
 *   - no dump is written past the reserve (min_free) of its file system,
 *     nor past the user's max_bytes: the writes themselves are bounded
 *     (outfile.h, struct hp_out_limit), formats that do not fit are left
 *     out, a profile with nothing that fits is refused with the reason;
 *   - the files are handed to that uid (chown) before they get their
 *     names, so the output directory itself says whose each profile is: a
 *     restart scans it (owner and name pattern) and the budget goes on.
 *     Leftover temporary files of a daemon killed mid-dump are removed.
 *
 * One thread (the event loop) calls all of this; nothing here blocks but
 * the file system calls on the output directory.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "hpd.h"
#include "pipeline/outfile.h"

struct hpd_budget_cfg hpd_budget_cfg;
static struct hpd_budget_stats stats;
static int given_profiles, given_bytes, given_free;

/* One profile in the output directory. */
struct prof {
	char *key;		/* file name without its extension (and .peak) */
	uid_t uid;		/* the owner of its files */
	uint64_t bytes;		/* disk taken, in whole blocks */
	unsigned nfiles;
	struct timespec mtime;	/* its newest file's */
	uint64_t seq;		/* newer than any scanned; ties of mtime */
};

static struct prof *profs;
static size_t nprofs, capprofs;
static uint64_t next_seq = 1;
static char *outdir;
static int outdir_fd = -1;
static uint32_t outdir_block = 4096;
static int chown_warned;

static const char *const exts[] = { ".pb.gz", ".svg", ".folded", ".txt" };
#define NEXTS (sizeof(exts) / sizeof(exts[0]))

/* ---- numbers ---- */

int hpd_budget_parse_size(const char *s, uint64_t *bytes, unsigned *pct, char *why, size_t wl)
{
	static const char units[] = "KMGT";
	unsigned long long v;
	const char *u;
	char *end;
	int shift = 0;

	if (!s || *s < '0' || *s > '9') {
		snprintf(why, wl, "'%s' is not a size (digits, then K, M, G or T%s)", s ? s : "",
			 pct ? ", or a percentage N%" : "");
		return -1;
	}
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		goto range;
	if (*end == '%' && !end[1] && pct) {
		if (v > 100)
			goto range;
		*pct = (unsigned)v;
		*bytes = 0;
		return 0;
	}
	if (*end && (u = strchr(units, *end & ~0x20)) != NULL) {
		shift = 10 * (int)(u - units + 1);
		end++;
		if (!strcmp(end, "iB") || !strcmp(end, "B"))
			end += strlen(end);
	}
	if (*end) {
		snprintf(why, wl, "'%s' is not a size (digits, then K, M, G or T%s)", s,
			 pct ? ", or a percentage N%" : "");
		return -1;
	}
	if (shift && v > (UINT64_MAX >> shift))
		goto range;
	*bytes = (uint64_t)v << shift;
	if (pct)
		*pct = 0;
	return 0;
range:
	snprintf(why, wl, "'%s' is out of range", s);
	return -1;
}

/* "1.5 MiB" */
const char *hpd_budget_size_str(uint64_t n, char *buf, size_t len)
{
	static const char *const u[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
	double d = (double)n;
	int i = 0;

	while (d >= 1024 && i < 4) {
		d /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%llu bytes", (unsigned long long)n);
	else
		snprintf(buf, len, "%.1f %s", d, u[i]);
	return buf;
}

int hpd_budget_option(const char *name, const char *arg, char *why, size_t wl)
{
	char w[200];
	uint64_t b;
	unsigned p = 0;

	if (!strcmp(name, "user-max-profiles")) {
		unsigned long long v;

		if (hp_parse_num(arg, 0, 1ULL << 32, &v, w, sizeof(w)))
			goto bad;
		hpd_budget_cfg.max_profiles = v;
		given_profiles = 1;
		return 0;
	}
	if (!strcmp(name, "user-max-bytes")) {
		if (hpd_budget_parse_size(arg, &b, NULL, w, sizeof(w)))
			goto bad;
		hpd_budget_cfg.max_bytes = b;
		given_bytes = 1;
		return 0;
	}
	if (!strcmp(name, "min-free")) {
		if (hpd_budget_parse_size(arg, &b, &p, w, sizeof(w)))
			goto bad;
		hpd_budget_cfg.min_free = b;
		hpd_budget_cfg.min_free_pct = p;
		hpd_budget_cfg.min_free_cap = 0;	/* as given: no cap */
		given_free = 1;
		return 0;
	}
	snprintf(why, wl, "--%s: not an option of the output budget", name);
	return -1;
bad:
	snprintf(why, wl, "--%s: %s", name, w);
	return -1;
}

void hpd_budget_defaults(int private_mode)
{
	/*
	 * A private daemon writes as its user where that user asked, under
	 * that user's own limits (quota; the blocks a file system keeps for
	 * root): nothing to add by default. The system daemon writes as root
	 * for every user.
	 */
	if (!given_profiles)
		hpd_budget_cfg.max_profiles = private_mode ? 0 : HPD_BUDGET_PROFILES;
	if (!given_bytes)
		hpd_budget_cfg.max_bytes = private_mode ? 0 : HPD_BUDGET_BYTES;
	if (!given_free) {
		hpd_budget_cfg.min_free = 0;
		hpd_budget_cfg.min_free_pct = private_mode ? 0 : HPD_MIN_FREE_PCT;
		hpd_budget_cfg.min_free_cap = HPD_MIN_FREE_CAP;
	}
}

uint64_t hpd_budget_reserve(const struct statvfs *sv)
{
	const struct hpd_budget_cfg *c = &hpd_budget_cfg;
	uint64_t fs, r;

	if (!c->min_free_pct)
		return c->min_free;
	fs = (uint64_t)sv->f_blocks * (sv->f_frsize ? sv->f_frsize : sv->f_bsize);
	r = fs / 100 * c->min_free_pct + fs % 100 * c->min_free_pct / 100;
	if (c->min_free_cap && r > c->min_free_cap)
		r = c->min_free_cap;
	return r;
}

int hpd_budget_room(const struct statvfs *sv, const char *dir, uint64_t *room, char *why,
		    size_t wl)
{
	uint64_t frsize = sv->f_frsize ? sv->f_frsize : sv->f_bsize;
	uint64_t avail = (uint64_t)sv->f_bavail * frsize, keep = hpd_budget_reserve(sv);
	char a[32], k[32];

	if (!keep) {
		*room = avail;
		return 0;
	}
	/* Inodes too: a flood of small files empties a file system that way. */
	if (sv->f_files && sv->f_favail < sv->f_files / 100 + HPD_DUMP_FILES_MAX) {
		snprintf(why, wl, "the file system of %s has %llu of %llu inodes left: the daemon keeps 1%% of them free",
			 dir, (unsigned long long)sv->f_favail, (unsigned long long)sv->f_files);
		return -ENOSPC;
	}
	if (avail <= keep) {
		snprintf(why, wl, "the file system of %s has %s free and the daemon keeps %s free (--min-free)",
			 dir, hpd_budget_size_str(avail, a, sizeof(a)),
			 hpd_budget_size_str(keep, k, sizeof(k)));
		return -ENOSPC;
	}
	*room = avail - keep;
	return 0;
}

/* ---- names ---- */

/* Digits ending at name[k] (exclusive), after a dot: where the dot is, or 0. */
static size_t dot_number(const char *name, size_t k)
{
	size_t d = k;

	while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9')
		d--;
	return d < k && d > 1 && name[d - 1] == '.' ? d - 1 : 0;
}

/*
 * A name of the daemon's profiles: KEY[.peak]EXT where KEY is NAME.PID.ID
 * (a continuous dump's NAME.PID.ID.NNNN is a key of its own).
 */
int hpd_budget_key(const char *name, char *key, size_t keylen)
{
	size_t n = strlen(name), e, dot;

	if (!n || name[0] == '.')
		return 0;
	for (e = 0; e < NEXTS; e++) {
		size_t l = strlen(exts[e]);

		if (n > l && !strcmp(name + n - l, exts[e])) {
			n -= l;
			break;
		}
	}
	if (e == NEXTS)
		return 0;
	if (n > 5 && !strncmp(name + n - 5, ".peak", 5))
		n -= 5;
	/* ".PID.ID" at the end, a name before it. */
	dot = dot_number(name, n);
	if (!dot || !dot_number(name, dot) || n >= keylen)
		return 0;
	memcpy(key, name, n);
	key[n] = 0;
	return 1;
}

/* A temporary file of outfile.c for one of those: ".NAME.XXXXXX". */
int hpd_budget_is_temp(const char *name)
{
	char base[NAME_MAX + 1], key[NAME_MAX + 1];
	size_t n = strlen(name);

	if (name[0] != '.' || n < 9 || name[n - 7] != '.' || n - 8 > NAME_MAX)
		return 0;
	for (size_t i = n - 6; i < n; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || ((name[i] | 0x20) >= 'a' &&
		      (name[i] | 0x20) <= 'z')))
			return 0;
	memcpy(base, name + 1, n - 8);
	base[n - 8] = 0;
	return hpd_budget_key(base, key, sizeof(key));
}

/* ---- the table ---- */

static uint64_t disk_bytes(const struct stat *st)
{
	uint64_t b = (uint64_t)st->st_blocks * 512;
	uint64_t s = ((uint64_t)st->st_size + outdir_block - 1) / outdir_block * outdir_block;

	return b > s ? b : s;
}

static int newer(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec != b->tv_sec ? a->tv_sec > b->tv_sec : a->tv_nsec > b->tv_nsec;
}

static struct prof *find(const char *key, uid_t uid)
{
	for (size_t i = 0; i < nprofs; i++)
		if (profs[i].uid == uid && !strcmp(profs[i].key, key))
			return &profs[i];
	return NULL;
}

static struct prof *add(const char *key, uid_t uid)
{
	struct prof *p;

	if (nprofs == capprofs) {
		size_t nc = capprofs ? capprofs * 2 : 64;
		struct prof *np = realloc(profs, nc * sizeof(*np));

		if (!np)
			return NULL;
		profs = np;
		capprofs = nc;
	}
	p = &profs[nprofs];
	memset(p, 0, sizeof(*p));
	p->key = strdup(key);
	if (!p->key)
		return NULL;
	p->uid = uid;
	nprofs++;
	return p;
}

static void drop(struct prof *p)
{
	free(p->key);
	*p = profs[--nprofs];
}

/* Account one file of a profile. */
static void count_file(const char *key, const struct stat *st, uint64_t seq)
{
	struct prof *p = find(key, st->st_uid);

	if (!p && !(p = add(key, st->st_uid)))
		return;
	p->bytes += disk_bytes(st);
	p->nfiles++;
	if (newer(&st->st_mtim, &p->mtime))
		p->mtime = st->st_mtim;
	p->seq = seq;
}

/* Remove every file of p (unlink removes names: a link is never followed). */
static void remove_files(const struct prof *p)
{
	char name[NAME_MAX + 1];
	struct stat st;

	for (int peak = 0; peak < 2; peak++)
		for (size_t e = 0; e < NEXTS; e++) {
			if (snprintf(name, sizeof(name), "%s%s%s", p->key, peak ? ".peak" : "",
				     exts[e]) >= (int)sizeof(name))
				continue;
			/* Another owner's file of that name is not this profile's. */
			if (fstatat(outdir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			    !S_ISREG(st.st_mode) || st.st_uid != p->uid)
				continue;
			if (unlinkat(outdir_fd, name, 0) < 0 && errno != ENOENT)
				hpd_log(HPD_WARN, "output budget: cannot remove %s/%s: %s", outdir,
					name, strerror(errno));
		}
}

/* Stat the files of key now: its entry (of whatever owner) as on disk. */
static void restat(const char *key)
{
	char name[NAME_MAX + 1];
	uint64_t seq = next_seq++;
	struct stat st;

	for (size_t i = 0; i < nprofs;)
		if (!strcmp(profs[i].key, key))
			drop(&profs[i]);
		else
			i++;
	for (int peak = 0; peak < 2; peak++)
		for (size_t e = 0; e < NEXTS; e++) {
			if (snprintf(name, sizeof(name), "%s%s%s", key, peak ? ".peak" : "",
				     exts[e]) >= (int)sizeof(name))
				continue;
			if (fstatat(outdir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
			    S_ISREG(st.st_mode))
				count_file(key, &st, seq);
		}
}

void hpd_budget_usage(uid_t uid, uint64_t *count, uint64_t *bytes)
{
	*count = *bytes = 0;
	for (size_t i = 0; i < nprofs; i++)
		if (profs[i].uid == uid) {
			(*count)++;
			*bytes += profs[i].bytes;
		}
}

/* The oldest profile of uid but keep; NULL if none. */
static struct prof *oldest(uid_t uid, const char *keep)
{
	struct prof *o = NULL;

	for (size_t i = 0; i < nprofs; i++) {
		struct prof *p = &profs[i];

		if (p->uid != uid || (keep && !strcmp(p->key, keep)))
			continue;
		if (!o || newer(&o->mtime, &p->mtime) ||
		    (o->mtime.tv_sec == p->mtime.tv_sec && o->mtime.tv_nsec == p->mtime.tv_nsec &&
		     o->seq > p->seq))
			o = p;
	}
	return o;
}

/* "at most 100 profiles, 256.0 MiB" */
static const char *bounds_str(char *buf, size_t len)
{
	const struct hpd_budget_cfg *c = &hpd_budget_cfg;
	char b[32], n[32];

	snprintf(n, sizeof(n), "%llu", (unsigned long long)c->max_profiles);
	snprintf(buf, len, "at most %s profiles, %s", c->max_profiles ? n : "any number of",
		 c->max_bytes ? hpd_budget_size_str(c->max_bytes, b, sizeof(b)) : "any size");
	return buf;
}

/* Remove uid's oldest profiles (but keep) until it is within its budget. */
static void enforce(uid_t uid, const char *keep)
{
	const struct hpd_budget_cfg *c = &hpd_budget_cfg;
	uint64_t count, bytes;
	char b1[32], b2[80];

	for (;;) {
		struct prof *p;

		hpd_budget_usage(uid, &count, &bytes);
		if ((!c->max_profiles || count <= c->max_profiles) &&
		    (!c->max_bytes || bytes <= c->max_bytes))
			return;
		p = oldest(uid, keep);
		if (!p)
			return;
		hpd_log(HPD_INFO, "output budget: uid %u has %llu profiles, %s (%s): removed its oldest, %s/%s.*",
			(unsigned)uid, (unsigned long long)count, hpd_budget_size_str(bytes, b1, sizeof(b1)),
			bounds_str(b2, sizeof(b2)), outdir, p->key);
		remove_files(p);
		stats.removed++;
		drop(p);
	}
}

static void clear(void)
{
	while (nprofs)
		drop(&profs[nprofs - 1]);
	free(outdir);
	outdir = NULL;
	if (outdir_fd >= 0)
		close(outdir_fd);
	outdir_fd = -1;
}

int hpd_budget_init(const char *dir)
{
	unsigned temps = 0;
	struct dirent *de;
	struct statvfs sv;
	size_t nuids = 0;
	uid_t *uids;
	int fd, rc;
	DIR *d;

	clear();
	memset(&stats, 0, sizeof(stats));
	if (!hpd_budget_cfg.max_profiles && !hpd_budget_cfg.max_bytes)
		return 0;	/* nothing to count */
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		hpd_log(HPD_WARN, "output budget: cannot open %s: %s", dir, strerror(errno));
		return -errno;
	}
	outdir = strdup(dir);
	outdir_fd = fd;
	if (!fstatvfs(fd, &sv) && sv.f_frsize)
		outdir_block = (uint32_t)(sv.f_frsize < (1U << 20) ? sv.f_frsize : (1U << 20));
	rc = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	d = rc < 0 ? NULL : fdopendir(rc);
	if (!d) {
		hpd_log(HPD_WARN, "output budget: cannot read %s: %s", dir, strerror(errno));
		if (rc >= 0)
			close(rc);
		return -EIO;
	}
	while ((de = readdir(d)) != NULL) {
		char key[NAME_MAX + 1];
		struct stat st;

		if (hpd_budget_is_temp(de->d_name)) {
			/* A dump cut short (the daemon killed mid-write): only
			 * ever written by a daemon, and none writes now. */
			if (!fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) && S_ISREG(st.st_mode) &&
			    !unlinkat(fd, de->d_name, 0))
				temps++;
			continue;
		}
		if (!hpd_budget_key(de->d_name, key, sizeof(key)) ||
		    fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode))
			continue;
		count_file(key, &st, 0);
	}
	closedir(d);
	if (temps)
		hpd_log(HPD_INFO, "output budget: removed %u unfinished temporary files from %s",
			temps, dir);
	/* A budget lowered since the last run applies now. */
	uids = malloc((nprofs + 1) * sizeof(*uids));
	for (size_t i = 0; uids && i < nprofs; i++) {
		size_t k;

		for (k = 0; k < nuids && uids[k] != profs[i].uid; k++)
			;
		if (k == nuids)
			uids[nuids++] = profs[i].uid;
	}
	for (size_t k = 0; k < nuids; k++)
		enforce(uids[k], NULL);
	free(uids);
	hpd_log(HPD_INFO, "output budget: %zu profiles in %s; each user keeps %s", nprofs, dir,
		bounds_str((char[80]){ 0 }, 80));
	return 0;
}

void hpd_budget_fini(void)
{
	clear();
	free(profs);
	profs = NULL;
	capprofs = 0;
}

/* ---- one dump ---- */

/* Is prefix a name directly in the output directory? Its key, if so. */
static const char *key_of(const char *prefix)
{
	size_t l = outdir ? strlen(outdir) : 0;

	if (!l || strncmp(prefix, outdir, l) || prefix[l] != '/' || strchr(prefix + l + 1, '/'))
		return NULL;
	return prefix + l + 1;
}

int hpd_budget_begin(uid_t uid, const char *prefix, int charged, struct hp_out_limit *lim,
		     char *why, size_t wl)
{
	const struct hpd_budget_cfg *c = &hpd_budget_cfg;
	char dir[PATH_MAX], b[32];
	const char *slash;
	struct statvfs sv;
	uint64_t room;
	int rc;

	memset(lim, 0, sizeof(*lim));
	lim->max = UINT64_MAX;
	charged = charged && outdir && key_of(prefix) && (c->max_profiles || c->max_bytes);
	if (!charged && !c->min_free && !c->min_free_pct)
		return 0;
	slash = strrchr(prefix, '/');
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else
		snprintf(dir, sizeof(dir), "%.*s", slash == prefix ? 1 : (int)(slash - prefix), prefix);
	if ((c->min_free || c->min_free_pct) && statvfs(dir, &sv) == 0) {
		lim->block = (uint32_t)(sv.f_frsize && sv.f_frsize < (1U << 20) ? sv.f_frsize : 4096);
		rc = hpd_budget_room(&sv, dir, &room, why, wl);
		if (rc) {
			stats.refused_space++;
			return rc;
		}
		lim->max = room;
		lim->err = ENOSPC;
		snprintf(lim->why, sizeof(lim->why), "it would leave less than %s free on the file system of %.150s (--min-free)",
			 hpd_budget_size_str(hpd_budget_reserve(&sv), b, sizeof(b)), dir);
	}
	if (charged) {
		if (!lim->block)
			lim->block = outdir_block;
		if (c->max_bytes && c->max_bytes <= lim->max) {
			lim->max = c->max_bytes;
			lim->err = EDQUOT;
			snprintf(lim->why, sizeof(lim->why), "the profiles of uid %u may take at most %s (--user-max-bytes)",
				 (unsigned)uid, hpd_budget_size_str(c->max_bytes, b, sizeof(b)));
		}
		/* Files say whose they are (by owner) once the daemon may chown. */
		lim->set_owner = geteuid() == 0 && uid != (uid_t)-1 && uid != 0;
		lim->owner = uid;
	}
	return 1;
}

void hpd_budget_end(uid_t uid, const char *prefix, int charged, struct hp_out_limit *lim,
		    int rc)
{
	const struct hpd_budget_cfg *c = &hpd_budget_cfg;
	const char *key = key_of(prefix);
	struct prof *p;
	char b[32];

	if (lim->left_out)
		stats.left_out++;
	if (rc < 0 && lim->err && rc == -lim->err) {
		if (lim->err == EDQUOT)
			stats.refused_user++;
		else
			stats.refused_space++;
	}
	if (!charged || !key || !(c->max_profiles || c->max_bytes))
		return;
	if (uid != (uid_t)-1 && uid != 0 && geteuid() == 0 && !lim->set_owner && !chown_warned) {
		chown_warned = 1;
		hpd_log(HPD_WARN, "output budget: cannot hand profiles to their users (chown): after a restart they count as the daemon's");
	}
	restat(key);
	/* Whatever its blocks came to, one profile never passes the budget. */
	p = find(key, lim->set_owner ? uid : geteuid());
	if (p && c->max_bytes && p->bytes > c->max_bytes) {
		hpd_log(HPD_WARN, "output budget: %s/%s.* takes %s, more than uid %u may have: removed",
			outdir, key, hpd_budget_size_str(p->bytes, b, sizeof(b)), (unsigned)uid);
		remove_files(p);
		drop(p);
		stats.refused_user++;
	}
	enforce(p ? p->uid : uid, key);
}

void hpd_budget_get_stats(struct hpd_budget_stats *st)
{
	*st = stats;
}
