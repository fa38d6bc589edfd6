// SPDX-License-Identifier: GPL-2.0
/*
 * Output files created safely: a fresh temporary file beside the final
 * name, in a directory reached through no link another user controls,
 * every error kept, the final name replaced only when it is absent or a
 * regular file. See outfile.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "outfile.h"

/* What kind of file st is, for messages. */
static const char *kind(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFLNK: return "symbolic link";
	case S_IFDIR: return "directory";
	case S_IFIFO: return "FIFO";
	case S_IFSOCK: return "socket";
	case S_IFCHR: return "character device";
	case S_IFBLK: return "block device";
	default: return "special file";
	}
}

void hp_out_fail(struct hp_out *o, int err, const char *what)
{
	if (o->err)
		return;
	o->err = err > 0 ? err : EIO;
	snprintf(o->why, sizeof(o->why), "%s %s: %s", what, o->final, strerror(o->err));
}

static int say(char *why, size_t wl, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int say(char *why, size_t wl, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, wl, fmt, ap);
	va_end(ap);
	return -err;
}

/* Whose links are followed: root's and our own (in a directory of
 * theirs that nobody else may change). */
static int trusted(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

/* shown: the path as walked, for messages; name appended or the last
 * component taken off (name NULL). */
static void shown_step(char *shown, size_t len, const char *name)
{
	size_t n = strlen(shown);
	char *slash;

	if (name) {
		snprintf(shown + n, len - n, "%s%s", n && shown[n - 1] != '/' ? "/" : "", name);
		return;
	}
	slash = strrchr(shown, '/');
	if (slash)
		slash[slash == shown ? 1 : 0] = 0;
	else
		shown[0] = 0;
}

int hp_out_dir_open(const char *dir, mode_t mkdir_mode, char *why, size_t wl)
{
	char rest[2 * HP_OUT_PATH_MAX], tmp[2 * HP_OUT_PATH_MAX], target[HP_OUT_PATH_MAX];
	char shown[HP_OUT_PATH_MAX + 256], name[NAME_MAX + 1];
	const char *p;
	int fd, nfd, links = 0, e;

	if (!dir || !*dir)
		return say(why, wl, EINVAL, "an empty directory name");
	if (strlen(dir) >= HP_OUT_PATH_MAX)
		return say(why, wl, ENAMETOOLONG, "%.200s...: %s", dir, strerror(ENAMETOOLONG));
	snprintf(rest, sizeof(rest), "%s", dir);
	snprintf(shown, sizeof(shown), "%s", dir[0] == '/' ? "/" : "");
	fd = open(dir[0] == '/' ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return say(why, wl, errno, "%s: %s", dir[0] == '/' ? "/" : ".", strerror(errno));
	for (p = rest;;) {
		struct stat st, ds;
		const char *end;
		ssize_t n;

		while (*p == '/')
			p++;
		if (!*p)
			return fd;
		end = strchrnul(p, '/');
		if ((size_t)(end - p) > NAME_MAX) {
			close(fd);
			return say(why, wl, ENAMETOOLONG, "%.*s...: %s", 200, p, strerror(ENAMETOOLONG));
		}
		memcpy(name, p, (size_t)(end - p));
		name[end - p] = 0;
		p = end;
		shown_step(shown, sizeof(shown), name);
		if (!strcmp(name, "."))
			continue;
		/* ".." is never a link: it goes up from where we are. */
		nfd = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT && mkdir_mode) {
			if (mkdirat(fd, name, mkdir_mode) < 0 && errno != EEXIST) {
				e = errno;
				close(fd);
				return say(why, wl, e, "cannot create the directory %s: %s", shown,
					   strerror(e));
			}
			nfd = openat(fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		}
		if (nfd < 0 || fstat(nfd, &st) < 0) {
			e = errno;
			if (nfd >= 0)
				close(nfd);
			close(fd);
			return say(why, wl, e, "directory %s: %s", shown,
				   e == ENOENT ? "does not exist" : strerror(e));
		}
		if (S_ISDIR(st.st_mode)) {
			close(fd);
			fd = nfd;
			continue;
		}
		if (!S_ISLNK(st.st_mode)) {
			close(nfd);
			close(fd);
			return say(why, wl, ENOTDIR, "%s is not a directory", shown);
		}
		/*
		 * Another user's link, or any link in another user's
		 * directory or in one others may write and is not sticky
		 * (who may put or swap links there at any moment), could send
		 * our files anywhere: not followed.
		 */
		if (fstat(fd, &ds) < 0) {
			e = errno;
			close(nfd);
			close(fd);
			return say(why, wl, e, "directory of %s: %s", shown, strerror(e));
		}
		if (trusted(st.st_uid) && trusted(ds.st_uid) && (ds.st_mode & (S_IWGRP | S_IWOTH)) &&
		    !(ds.st_mode & S_ISVTX)) {
			close(nfd);
			close(fd);
			return say(why, wl, EACCES,
				   "%s is a symbolic link in a directory others may write (mode %04o, "
				   "not sticky): not following it", shown, (unsigned)(ds.st_mode & 07777));
		}
		if (!trusted(st.st_uid) || !trusted(ds.st_uid)) {
			char whose[64] = "root's";

			if (geteuid())
				snprintf(whose, sizeof(whose), "root's or uid %u's", (unsigned)geteuid());
			close(nfd);
			close(fd);
			return say(why, wl, EACCES,
				   "%s is a symbolic link %s uid %u: not following it (only %s links "
				   "in %s directories are followed)", shown,
				   trusted(st.st_uid) ? "in a directory of" : "of",
				   (unsigned)(trusted(st.st_uid) ? ds.st_uid : st.st_uid), whose, whose);
		}
		n = ++links > 40 ? -1 : readlinkat(nfd, "", target, sizeof(target) - 1);
		e = links > 40 ? ELOOP : errno;
		close(nfd);
		if (n <= 0) {
			close(fd);
			return say(why, wl, n ? e : ENOENT, "%s: %s", shown, strerror(n ? e : ENOENT));
		}
		target[n] = 0;
		if (snprintf(tmp, sizeof(tmp), "%s/%s", target, p) >= (int)sizeof(tmp)) {
			close(fd);
			return say(why, wl, ENAMETOOLONG, "%s: %s", shown, strerror(ENAMETOOLONG));
		}
		memcpy(rest, tmp, strlen(tmp) + 1);
		p = rest;
		shown_step(shown, sizeof(shown), NULL);
		if (target[0] == '/') {
			close(fd);
			fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0)
				return say(why, wl, errno, "/: %s", strerror(errno));
			snprintf(shown, sizeof(shown), "/");
		}
	}
}

/* The last component of a path: the name inside its directory. */
static const char *base_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* The directory part of path into dir ("." or "/" when it has none). */
static void dir_of(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');

	if (!slash)
		snprintf(dir, len, ".");
	else if (slash == path)
		snprintf(dir, len, "/");
	else
		snprintf(dir, len, "%.*s", (int)(slash - path), path);
}

/* Refuse a final name that is there and not a regular file (path: the
 * name for messages; dfd, name: where it is). */
static int check_final(int dfd, const char *name, const char *path, char *why, size_t whylen)
{
	struct stat st;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)
			return 0;
		snprintf(why, whylen, "cannot check %s: %s", path, strerror(errno));
		return -errno;
	}
	if (S_ISREG(st.st_mode))
		return 0;
	snprintf(why, whylen, "%s is a %s, not a regular file: not replacing it", path,
		 kind(st.st_mode));
	return -EEXIST;
}

/* A fresh hidden name beside base that no profile glob matches. */
static int tmp_name(char *out, size_t len, const char *base)
{
	static const char cs[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	static unsigned counter;
	unsigned char r[8];
	char sfx[sizeof(r) + 1];
	size_t i;

	if (getrandom(r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
		struct timespec ts;
		uint64_t x;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		x = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid() << 32 ^
		    __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
		memcpy(r, &x, sizeof(r));
	}
	for (i = 0; i < sizeof(r); i++)
		sfx[i] = cs[r[i] % (sizeof(cs) - 1)];
	sfx[i] = 0;
	return snprintf(out, len, ".%.200s.%s", base, sfx) >= (int)len ? -ENAMETOOLONG : 0;
}

static void release_dir(struct hp_out *o)
{
	if (o->dir_open) {
		close(o->dfd);
		o->dir_open = 0;
	}
}

int hp_out_open(struct hp_out *o, const char *final, mode_t mode)
{
	char dir[HP_OUT_PATH_MAX], dwhy[HP_OUT_PATH_MAX + 100];
	const char *base;
	size_t len;
	int rc, tries;

	memset(o, 0, sizeof(*o));
	o->fd = -1;
	o->mode = mode;
	len = final ? strlen(final) : 0;
	if (!len) {
		o->err = EINVAL;
		snprintf(o->why, sizeof(o->why), "an empty file name");
		return -EINVAL;
	}
	if (len >= sizeof(o->final)) {
		o->err = ENAMETOOLONG;
		snprintf(o->why, sizeof(o->why), "%.200s...: %s", final, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	memcpy(o->final, final, len + 1);
	base = base_of(final);
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
		o->err = EISDIR;
		snprintf(o->why, sizeof(o->why), "%s names a directory, not a file", final);
		return -EISDIR;
	}
	/* Every step below is relative to this directory: no later swap of
	 * a component sends the file elsewhere. */
	dir_of(final, dir, sizeof(dir));
	rc = hp_out_dir_open(dir, 0, dwhy, sizeof(dwhy));
	if (rc < 0) {
		o->err = -rc;
		snprintf(o->why, sizeof(o->why), "%s: %s", final, dwhy);
		return rc;
	}
	o->dfd = rc;
	o->dir_open = 1;
	/* Fail before writing anything when the final name cannot be used. */
	rc = check_final(o->dfd, base, final, o->why, sizeof(o->why));
	/* Never an existing file, never through a link: O_EXCL|O_NOFOLLOW. */
	for (tries = 0; !rc && o->fd < 0; tries++) {
		if (tries == 100) {
			rc = -EEXIST;
		} else if (!(rc = tmp_name(o->tmp, sizeof(o->tmp), base))) {
			o->fd = openat(o->dfd, o->tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW |
				       O_CLOEXEC, 0600);
			if (o->fd < 0 && errno != EEXIST)
				rc = -errno;
		}
		if (rc)
			snprintf(o->why, sizeof(o->why), "cannot create a file in %s for %s: %s", dir,
				 final, strerror(-rc));
	}
	if (rc) {
		o->err = -rc;
		o->tmp[0] = 0;
		release_dir(o);
		return rc;
	}
	if ((mode & 07777) != 0600 && fchmod(o->fd, mode & 07777) < 0) {
		hp_out_fail(o, errno, "setting the mode of");
		rc = -o->err;
		hp_out_abort(o);
		return rc;
	}
	return 0;
}

int hp_out_open_mem(struct hp_out *o, const char *name)
{
	memset(o, 0, sizeof(*o));
	o->dfd = -1;
	snprintf(o->final, sizeof(o->final), "%s", name);
	o->fd = memfd_create("heapprofd-out", MFD_CLOEXEC);
	if (o->fd < 0) {
		o->err = errno;
		snprintf(o->why, sizeof(o->why), "%s: cannot hold it in memory: %s", name,
			 strerror(o->err));
		return -o->err;
	}
	return 0;
}

int hp_out_take(struct hp_out *o, uint8_t **buf, size_t *len)
{
	struct stat st;
	size_t got = 0;
	uint8_t *b = NULL;

	*buf = NULL;
	*len = 0;
	if (o->f && (fflush(o->f) != 0 || ferror(o->f)))
		hp_out_fail(o, errno ? errno : EIO, "writing");
	if (!o->err && o->fd >= 0 && fstat(o->fd, &st) < 0)
		hp_out_fail(o, errno, "reading back");
	if (!o->err) {
		b = malloc((size_t)st.st_size + 1);
		if (!b)
			hp_out_fail(o, ENOMEM, "reading back");
	}
	while (!o->err && got < (size_t)st.st_size) {
		ssize_t n = pread(o->fd, b + got, (size_t)st.st_size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			hp_out_fail(o, n < 0 ? errno : EIO, "reading back");
		else
			got += (size_t)n;
	}
	hp_out_abort(o);
	if (o->err) {
		free(b);
		return -o->err;
	}
	*buf = b;
	*len = got;
	return 0;
}

void hp_out_set_limit(struct hp_out *o, struct hp_out_limit *lim)
{
	o->limit = lim;
}

/* The whole blocks a file of n bytes takes. */
static uint64_t in_blocks(uint64_t n, uint32_t blk)
{
	return (n + blk - 1) / blk * blk;
}

/* Charge len more bytes to the limit, or fail without writing them. */
static int charge(struct hp_out *o, size_t len)
{
	struct hp_out_limit *l = o->limit;
	uint32_t blk = l->block ? l->block : 4096;
	uint64_t more = in_blocks(o->written + len, blk) - in_blocks(o->written, blk);

	if (l->used > l->max || more > l->max - l->used) {
		o->over = 1;
		o->err = l->err ? l->err : EFBIG;
		snprintf(o->why, sizeof(o->why), "%.*s: not written: %.*s", HP_OUT_PATH_MAX - 512,
			 o->final, (int)sizeof(l->why), l->why[0] ? l->why : strerror(o->err));
		return -o->err;
	}
	l->used += more;
	o->charged += more;
	o->written += len;
	return 0;
}

int hp_out_write(struct hp_out *o, const void *buf, size_t len)
{
	const char *p = buf;

	if (o->err)
		return -o->err;
	if (o->fd < 0) {
		hp_out_fail(o, EBADF, "writing");
		return -o->err;
	}
	if (o->limit && charge(o, len))
		return -o->err;
	while (len) {
		ssize_t n = write(o->fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			hp_out_fail(o, n < 0 ? errno : ENOSPC, "writing");
			return -o->err;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static ssize_t cookie_write(void *c, const char *buf, size_t len)
{
	struct hp_out *o = c;

	if (hp_out_write(o, buf, len)) {
		errno = o->err;
		return 0;	/* fopencookie: 0 is the error */
	}
	return (ssize_t)len;
}

FILE *hp_out_stdio(struct hp_out *o)
{
	cookie_io_functions_t io = { .write = cookie_write };

	if (o->f)
		return o->f;
	if (o->fd < 0 || o->err)
		return NULL;
	o->f = fopencookie(o, "w", io);
	if (!o->f)
		hp_out_fail(o, errno, "opening a stream for");
	return o->f;
}

int hp_out_close(struct hp_out *o)
{
	if (o->closed)
		return o->err ? -o->err : 0;
	o->closed = 1;
	if (o->f) {
		if (fflush(o->f) != 0)
			hp_out_fail(o, errno, "writing");
		if (ferror(o->f))
			hp_out_fail(o, EIO, "writing");
		if (fclose(o->f) != 0)
			hp_out_fail(o, errno, "writing");
		o->f = NULL;
	}
	if (o->fd >= 0) {
		/* The owner's before it has its name: nobody sees it root's. A
		 * daemon that may not chown keeps it (the limit says so). */
		if (!o->err && o->limit && o->limit->set_owner &&
		    fchown(o->fd, o->limit->owner, (gid_t)-1) < 0)
			o->limit->set_owner = 0;
		if (!o->err && fsync(o->fd) < 0)
			hp_out_fail(o, errno, "syncing");
		if (close(o->fd) < 0)
			hp_out_fail(o, errno, "closing");
		o->fd = -1;
	}
	return o->err ? -o->err : 0;
}

/* Where o's names are: its directory (hp_out_open), else the cwd with the
 * whole path (a struct filled by hand). */
static int dir_fd(const struct hp_out *o)
{
	return o->dir_open ? o->dfd : AT_FDCWD;
}

static const char *name_in_dir(const struct hp_out *o)
{
	return o->dir_open ? base_of(o->final) : o->final;
}

int hp_out_check(struct hp_out *o)
{
	int rc;

	if (o->err)
		return -o->err;
	rc = check_final(dir_fd(o), name_in_dir(o), o->final, o->why, sizeof(o->why));
	if (rc)
		o->err = -rc;
	return rc;
}

void hp_out_abort(struct hp_out *o)
{
	if (o->f) {
		fclose(o->f);
		o->f = NULL;
	}
	if (o->fd >= 0) {
		close(o->fd);
		o->fd = -1;
	}
	o->closed = 1;
	if (o->tmp[0] && o->dir_open)
		unlinkat(o->dfd, o->tmp, 0);
	o->tmp[0] = 0;
	/* What a file that is not in place was charged is free again. */
	if (o->limit && !o->placed) {
		o->limit->used -= o->charged < o->limit->used ? o->charged : o->limit->used;
		o->charged = 0;
	}
	release_dir(o);
}

/* rename() never follows a link at the final name: a swap after the check
 * replaces the planted entry, never what it points to. */
static int put_in_place(struct hp_out *o)
{
	if (!o->dir_open || renameat(o->dfd, o->tmp, o->dfd, name_in_dir(o)) < 0) {
		hp_out_fail(o, o->dir_open ? errno : EBADF, "renaming a temporary file to");
		return -o->err;
	}
	o->tmp[0] = 0;
	o->placed = 1;
	return 0;
}

int hp_out_commit(struct hp_out *o)
{
	int rc = hp_out_close(o);

	if (!rc)
		rc = hp_out_check(o);
	if (!rc)
		rc = put_in_place(o);
	if (rc)
		hp_out_abort(o);
	else
		release_dir(o);
	return rc;
}

int hp_out_commit_all(struct hp_out *v, size_t n, size_t *failed)
{
	size_t i, bad = 0;
	int rc = 0;

	for (i = 0; i < n && !rc; i++)
		if ((rc = hp_out_close(&v[i])) != 0)
			bad = i;
	for (i = 0; i < n && !rc; i++)
		if ((rc = hp_out_check(&v[i])) != 0)
			bad = i;
	for (i = 0; i < n && !rc; i++) {
		if ((rc = put_in_place(&v[i])) != 0) {
			bad = i;
			/* None or all: take back the ones renamed already. */
			for (size_t k = 0; k < i; k++) {
				unlinkat(dir_fd(&v[k]), name_in_dir(&v[k]), 0);
				v[k].placed = 0;
			}
		}
	}
	for (i = 0; i < n; i++)
		if (rc)
			hp_out_abort(&v[i]);
		else
			release_dir(&v[i]);
	if (rc && failed)
		*failed = bad;
	return rc;
}

int hp_out_rename(const char *from, const char *to, char *why, size_t whylen)
{
	char dir[HP_OUT_PATH_MAX], dwhy[HP_OUT_PATH_MAX + 100];
	int fd_from, fd_to, rc;
	struct stat st;

	/* Both directories as hp_out_open finds them: no link of another user. */
	dir_of(from, dir, sizeof(dir));
	fd_from = hp_out_dir_open(dir, 0, dwhy, sizeof(dwhy));
	if (fd_from < 0) {
		snprintf(why, whylen, "%s: %s", from, dwhy);
		return fd_from;
	}
	dir_of(to, dir, sizeof(dir));
	fd_to = hp_out_dir_open(dir, 0, dwhy, sizeof(dwhy));
	if (fd_to < 0) {
		close(fd_from);
		snprintf(why, whylen, "%s: %s", to, dwhy);
		return fd_to;
	}
	if (fstatat(fd_from, base_of(from), &st, AT_SYMLINK_NOFOLLOW) < 0) {
		rc = -errno;
		snprintf(why, whylen, "%s: %s", from, strerror(-rc));
	} else if (!S_ISREG(st.st_mode)) {
		rc = -EEXIST;
		snprintf(why, whylen, "%s is a %s, not a regular file: not moving it", from,
			 kind(st.st_mode));
	} else if (!(rc = check_final(fd_to, base_of(to), to, why, whylen)) &&
		   renameat(fd_from, base_of(from), fd_to, base_of(to)) < 0) {
		rc = -errno;
		snprintf(why, whylen, "renaming %s to %s: %s", from, to, strerror(-rc));
	}
	close(fd_from);
	close(fd_to);
	return rc;
}
