// SPDX-License-Identifier: GPL-2.0
/*
 * /etc/ld.so.preload editing. A mistake here affects every program on the
 * machine, so: read the whole file, change only our entries, write a new
 * file next to it and rename it over the old one (readers see the old or
 * the new file, never half of one), keep its mode, be idempotent.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "preload.h"

#define OUR_NAME "libheapprofd_client.so"

static char *slurp(const char *file, mode_t *mode, int *err)
{
	struct stat st;
	char *buf;
	FILE *f;
	size_t n;

	*err = 0;
	*mode = 0644;
	f = fopen(file, "re");
	if (!f) {
		*err = errno == ENOENT ? 0 : -errno;
		return *err ? NULL : strdup("");
	}
	if (fstat(fileno(f), &st) == 0)
		*mode = st.st_mode & 07777;
	buf = malloc(st.st_size + 2);
	if (!buf) {
		fclose(f);
		*err = -ENOMEM;
		return NULL;
	}
	n = fread(buf, 1, st.st_size, f);
	buf[n] = 0;
	fclose(f);
	return buf;
}

static int ours(const char *tok, size_t len, const char *lib)
{
	size_t nl = strlen(OUR_NAME);

	if (len == strlen(lib) && !strncmp(tok, lib, len))
		return 1;
	return len >= nl && !strncmp(tok + len - nl, OUR_NAME, nl) &&
	       (len == nl || tok[len - nl - 1] == '/');
}

static int write_atomic(const char *file, const char *text, mode_t mode, char *err, size_t errlen)
{
	char tmp[4096], dir[4096];
	size_t len = strlen(text);
	int fd;

	snprintf(dir, sizeof(dir), "%s", file);
	snprintf(tmp, sizeof(tmp), "%s/.ld.so.preload.XXXXXX", dirname(dir));
	fd = mkstemp(tmp);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create a file next to %s: %s%s", file, strerror(errno),
			 errno == EACCES ? " (run as root)" : "");
		return -errno;
	}
	if (write(fd, text, len) != (ssize_t)len || fchmod(fd, mode) < 0 || fsync(fd) < 0) {
		int e = errno;

		close(fd);
		unlink(tmp);
		snprintf(err, errlen, "writing %s: %s", tmp, strerror(e));
		return -e;
	}
	close(fd);
	if (rename(tmp, file) < 0) {
		int e = errno;

		unlink(tmp);
		snprintf(err, errlen, "replacing %s: %s", file, strerror(e));
		return -e;
	}
	return 0;
}

int hp_preload_present(const char *file, const char *lib)
{
	mode_t mode;
	int e, found = 0;
	char *buf = slurp(file, &mode, &e), *p;

	if (!buf)
		return 0;
	for (p = buf; *p;) {
		size_t n;

		p += strspn(p, " \t\n:");
		n = strcspn(p, " \t\n:");
		if (n && ours(p, n, lib))
			found = 1;
		p += n;
	}
	free(buf);
	return found;
}

int hp_preload_add(const char *file, const char *lib, char *err, size_t errlen)
{
	mode_t mode;
	int e;
	char *buf, *out;
	size_t n;

	if (hp_preload_present(file, lib))
		return 1;
	buf = slurp(file, &mode, &e);
	if (!buf) {
		snprintf(err, errlen, "cannot read %s: %s", file, strerror(-e));
		return e;
	}
	n = strlen(buf);
	out = malloc(n + strlen(lib) + 3);
	if (!out) {
		free(buf);
		return -ENOMEM;
	}
	strcpy(out, buf);
	if (n && out[n - 1] != '\n')
		strcat(out, "\n");
	strcat(out, lib);
	strcat(out, "\n");
	e = write_atomic(file, out, mode, err, errlen);
	free(buf);
	free(out);
	return e;
}

int hp_preload_remove(const char *file, const char *lib, char *err, size_t errlen)
{
	mode_t mode;
	int e, removed = 0;
	char *buf, *out, *line, *save = NULL;

	buf = slurp(file, &mode, &e);
	if (!buf) {
		snprintf(err, errlen, "cannot read %s: %s", file, strerror(-e));
		return e;
	}
	out = calloc(1, strlen(buf) + 2);
	if (!out) {
		free(buf);
		return -ENOMEM;
	}
	/* Line by line; within a line keep every entry that is not ours. */
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char kept[4096] = "";
		char *p = line;
		int any = 0, dropped = 0;

		while (*p) {
			size_t sp = strspn(p, " \t:"), n;

			p += sp;
			n = strcspn(p, " \t:");
			if (!n)
				break;
			if (ours(p, n, lib)) {
				dropped = 1;
			} else if (strlen(kept) + n + 2 < sizeof(kept)) {
				if (any)
					strcat(kept, " ");
				strncat(kept, p, n);
				any = 1;
			}
			p += n;
		}
		if (!dropped) {
			strcat(out, line);	/* untouched, byte for byte */
			strcat(out, "\n");
			continue;
		}
		removed = 1;
		if (any) {
			strcat(out, kept);
			strcat(out, "\n");
		}
	}
	if (!removed) {
		e = 1;
	} else if (!out[strspn(out, " \t\n")]) {
		e = unlink(file) < 0 ? -errno : 0;
		if (e)
			snprintf(err, errlen, "removing %s: %s", file, strerror(-e));
	} else {
		e = write_atomic(file, out, mode, err, errlen);
	}
	free(buf);
	free(out);
	return e;
}
