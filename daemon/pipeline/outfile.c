// SPDX-License-Identifier: GPL-2.0
/*
 * Output files created safely: a fresh temporary file beside the final
 * name, every error kept, the final name replaced only when it is absent or
 * a regular file. See outfile.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* Refuse a final name that is there and not a regular file. */
static int check_final(const char *path, char *why, size_t whylen)
{
	struct stat st;

	if (lstat(path, &st) < 0) {
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

int hp_out_open(struct hp_out *o, const char *final, mode_t mode)
{
	char dir[HP_OUT_PATH_MAX];
	const char *base, *slash;
	struct stat st;
	size_t len;
	int rc;

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
	slash = strrchr(final, '/');
	base = slash ? slash + 1 : final;
	if (!*base || !strcmp(base, ".") || !strcmp(base, "..")) {
		o->err = EISDIR;
		snprintf(o->why, sizeof(o->why), "%s names a directory, not a file", final);
		return -EISDIR;
	}
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == final)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - final), final);
	if (stat(dir, &st) < 0) {
		o->err = errno;
		snprintf(o->why, sizeof(o->why), "%s: directory %s: %s", final, dir,
			 errno == ENOENT ? "does not exist" : strerror(errno));
		return -o->err;
	}
	if (!S_ISDIR(st.st_mode)) {
		o->err = ENOTDIR;
		snprintf(o->why, sizeof(o->why), "%s: %s is not a directory", final, dir);
		return -ENOTDIR;
	}
	/* Fail before writing anything when the final name cannot be used. */
	rc = check_final(final, o->why, sizeof(o->why));
	if (rc) {
		o->err = -rc;
		return rc;
	}
	/* A hidden name that no profile glob matches; long names shortened. */
	if (snprintf(o->tmp, sizeof(o->tmp), "%s/.%.200s.XXXXXX", dir, base) >= (int)sizeof(o->tmp)) {
		o->tmp[0] = 0;
		o->err = ENAMETOOLONG;
		snprintf(o->why, sizeof(o->why), "%s: %s", final, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	o->fd = mkostemp(o->tmp, O_CLOEXEC | O_NOFOLLOW);
	if (o->fd < 0) {
		o->err = errno;
		o->tmp[0] = 0;
		snprintf(o->why, sizeof(o->why), "cannot create a file in %s for %s: %s", dir, final,
			 strerror(o->err));
		return -o->err;
	}
	if ((mode & 07777) != 0600 && fchmod(o->fd, mode & 07777) < 0) {
		hp_out_fail(o, errno, "setting the mode of");
		rc = -o->err;
		hp_out_abort(o);
		return rc;
	}
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

int hp_out_check(struct hp_out *o)
{
	int rc;

	if (o->err)
		return -o->err;
	rc = check_final(o->final, o->why, sizeof(o->why));
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
	if (o->tmp[0]) {
		unlink(o->tmp);
		o->tmp[0] = 0;
	}
	/* What a file that is not in place was charged is free again. */
	if (o->limit && !o->placed) {
		o->limit->used -= o->charged < o->limit->used ? o->charged : o->limit->used;
		o->charged = 0;
	}
}

static int put_in_place(struct hp_out *o)
{
	if (rename(o->tmp, o->final) < 0) {
		hp_out_fail(o, errno, "renaming a temporary file to");
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
				unlink(v[k].final);
				v[k].placed = 0;
			}
		}
	}
	if (rc) {
		for (i = 0; i < n; i++)
			hp_out_abort(&v[i]);
		if (failed)
			*failed = bad;
	}
	return rc;
}

int hp_out_rename(const char *from, const char *to, char *why, size_t whylen)
{
	struct stat st;
	int rc;

	if (lstat(from, &st) < 0) {
		snprintf(why, whylen, "%s: %s", from, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, whylen, "%s is a %s, not a regular file: not moving it", from,
			 kind(st.st_mode));
		return -EEXIST;
	}
	rc = check_final(to, why, whylen);
	if (rc)
		return rc;
	if (rename(from, to) < 0) {
		snprintf(why, whylen, "renaming %s to %s: %s", from, to, strerror(errno));
		return -errno;
	}
	return 0;
}
