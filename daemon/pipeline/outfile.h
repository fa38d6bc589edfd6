/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Output files created safely. The daemon may run as root and write into a
 * directory another user can write (/tmp): nothing it writes may go through
 * a name that user planted.
 *
 *   - The data goes to a new temporary file beside the final name, created
 *     with O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC under an unpredictable name
 *     (getrandom): never an existing file, never through a link.
 *   - Every write, flush, fsync and close is checked; the first error (a
 *     full disk: ENOSPC) is kept and reported, and the temporary file is
 *     removed.
 *   - The final name is only replaced when it is absent or a regular file
 *     (lstat): a symlink, directory, FIFO, socket or device node there is
 *     left alone and the write fails with a reason. rename() itself never
 *     follows a link at the final name, so a swap after the check replaces
 *     the planted entry, never what it points to.
 *   - The directory is opened one component at a time (hp_out_dir_open),
 *     following a symbolic link only when the link and the directory
 *     holding it belong to root or to us (the effective uid) and that
 *     directory is writable by nobody else (or sticky): a link that
 *     another user planted or could swap in (fs.protected_symlinks covers
 *     sticky world-writable directories only) fails the open with a
 *     reason. Everything after is relative to that directory's fd: no
 *     later swap of a component redirects the file.
 *
 * Use:
 *	struct hp_out o;
 *	if (hp_out_open(&o, path, 0644))         -> o.why says why
 *	write with hp_out_write(&o, ...) or fprintf(hp_out_stdio(&o), ...)
 *	or gzdopen(dup(o.fd), ...) (then check gzclose and hp_out_fail()),
 *	rc = hp_out_commit(&o);                  -> 0, or -errno and o.why
 * or hp_out_abort(&o) to drop it. Several files that belong together (the
 * four files of a profile): hp_out_commit_all(), all of them or none.
 *
 * A bound on what is written (struct hp_out_limit, hp_out_set_limit): the
 * files sharing one limit together take at most max bytes of disk, counted
 * in whole blocks as they are written; the write that would pass it fails
 * with the limit's errno and reason, before anything beyond it reaches the
 * disk. So a full disk or a user's budget is never overrun, even for a
 * moment, by a file whose size nobody knew in advance.
 */
#ifndef HEAPPROFD_OUTFILE_H
#define HEAPPROFD_OUTFILE_H

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define HP_OUT_PATH_MAX 4096

struct hp_out_limit {
	uint64_t max;		/* bytes of disk all files under it may take */
	uint64_t used;		/* charged so far: whole blocks of what was written */
	uint32_t block;		/* the file system's allocation unit (0: 4096) */
	int err;		/* errno of a write past max (ENOSPC, EDQUOT) */
	int set_owner;		/* hand each file to owner before it is renamed */
	uid_t owner;
	unsigned left_out;	/* for the caller: what was left out (pipeline's HP_OUT_*) */
	char why[256];		/* what the bound is, for the message */
};

struct hp_out {
	int fd;			/* the temporary file; -1 once closed */
	int dfd;		/* its directory (O_PATH), while dir_open */
	int dir_open;
	FILE *f;		/* from hp_out_stdio(), closed by close/commit */
	int err;		/* the first error (an errno value), 0 = none */
	int closed;		/* hp_out_close() done */
	mode_t mode;
	struct hp_out_limit *limit;	/* NULL: no bound */
	uint64_t written;	/* bytes written to the file */
	uint64_t charged;	/* of limit->used, this file's share */
	int over;		/* a write failed for the limit */
	int placed;		/* renamed to its final name (its charge stays) */
	char tmp[HP_OUT_PATH_MAX];	/* the temporary file's name in dfd */
	char final[HP_OUT_PATH_MAX];
	char why[HP_OUT_PATH_MAX + 200];	/* what failed and why */
};

/*
 * The directory dir, opened O_PATH one component at a time: a symbolic
 * link is followed only when it and the directory holding it belong to
 * root or to the effective uid, and that directory is not writable by
 * group or others unless sticky (else EACCES). With mkdir_mode, missing
 * components are created with it. The fd, or -errno with why saying what.
 */
int hp_out_dir_open(const char *dir, mode_t mkdir_mode, char *why, size_t wl);

/* Create the temporary file for final (mode: 0644, 0600, 0755 as wanted).
 * 0 or -errno (o->why names what failed; nothing is left behind). */
int hp_out_open(struct hp_out *o, const char *final, mode_t mode);

/* Put the file under lim (after hp_out_open, before any write). */
void hp_out_set_limit(struct hp_out *o, struct hp_out_limit *lim);

/* Write all of buf (retrying short writes). 0 or -errno; the error sticks.
 * Past the limit: -limit->err, o->over set, o->why naming the bound. */
int hp_out_write(struct hp_out *o, const void *buf, size_t len);

/* A stdio stream onto the file whose write errors stick in o (the errno of
 * the failed write(2) itself, not just "an error"). NULL on failure. */
FILE *hp_out_stdio(struct hp_out *o);

/* Note an error from a layer of the caller's (e.g. zlib): err is an errno
 * value (EIO when unknown); what names the step. The first one sticks. */
void hp_out_fail(struct hp_out *o, int err, const char *what);

/* Flush, fsync and close the temporary file, checking each (and give it
 * to the limit's owner, if it names one). The file stays under its
 * temporary name. 0 or -errno. */
int hp_out_close(struct hp_out *o);

/* Is the final name absent or a regular file? 0 or -errno (EEXIST for a
 * non-regular file, with o->why saying what is there). */
int hp_out_check(struct hp_out *o);

/* Close (if not yet), check the final name, rename. Any failure removes
 * the temporary file. 0 or -errno with o->why. */
int hp_out_commit(struct hp_out *o);

/* Drop it: close and remove the temporary file (what it was charged to a
 * limit is given back). Safe to call twice. */
void hp_out_abort(struct hp_out *o);

/*
 * n files, all or none: each is closed and checked before any is renamed;
 * when a rename fails the ones renamed already are removed again. On
 * failure every temporary file is gone; the return is the first -errno and
 * *failed (if not NULL) the index whose why says what happened.
 */
int hp_out_commit_all(struct hp_out *v, size_t n, size_t *failed);

/*
 * An output held in memory (a memfd), for bytes that are sent rather than
 * stored: written like a file (hp_out_write, hp_out_stdio, a limit), then
 * hp_out_take hands over what was written (malloc'ed) and closes it.
 * name is for messages only. 0 or -errno (o->why).
 */
int hp_out_open_mem(struct hp_out *o, const char *name);
int hp_out_take(struct hp_out *o, uint8_t **buf, size_t *len);

/*
 * rename(from, to) only when from is a regular file and to is absent or a
 * regular file (lstat, no link followed), their directories opened as by
 * hp_out_dir_open: for moving profile files that are already written (the
 * daemon's image rotation). ENOENT when from is absent (nothing to move).
 * 0 or -errno with why.
 */
int hp_out_rename(const char *from, const char *to, char *why, size_t whylen);

#endif /* HEAPPROFD_OUTFILE_H */
