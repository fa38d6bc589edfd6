// SPDX-License-Identifier: GPL-2.0
/*
 * Questions about the environment the client was loaded into, asked once at
 * start-up or once at exit. Pure functions of their arguments and of the
 * file system, so the tests can call them directly (tests/test_detect.c).
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/stat.h>

#include "detect.h"

static const char *base_of(const char *p, size_t n, size_t *blen)
{
	const char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] == '/')
			b = p + i + 1;
	*blen = n - (size_t)(b - p);
	return b;
}

/*
 * An entry with a '/' is a path: it names us if it is the same file (same
 * device and inode, so symlinks and "./" spellings count, and another copy
 * of the library elsewhere does not). A bare name is looked up by the
 * dynamic loader in the library path: it names us if the base names agree.
 */
int hp_preload_names(const char *ld_preload, const char *self)
{
	const char *p = ld_preload, *sb;
	struct stat st_self, st;
	int have_self;
	size_t sblen;

	if (!p || !self || !*self)
		return 0;
	have_self = !stat(self, &st_self);
	sb = base_of(self, strlen(self), &sblen);
	while (*p) {
		size_t n = strcspn(p, ": \t");

		if (n) {
			size_t blen;
			const char *b = base_of(p, n, &blen);

			if (memchr(p, '/', n)) {
				char path[4096];

				if (n < sizeof(path) && have_self) {
					memcpy(path, p, n);
					path[n] = 0;
					if (!stat(path, &st) && st.st_dev == st_self.st_dev &&
					    st.st_ino == st_self.st_ino)
						return 1;
				}
			} else if (blen == sblen && !memcmp(b, sb, sblen)) {
				return 1;
			}
		}
		p += n;
		if (*p)
			p++;
	}
	return 0;
}

static int is_socket(const char *path)
{
	struct stat st;

	return path && *path && !stat(path, &st) && S_ISSOCK(st.st_mode);
}

/*
 * A daemon is taken to be running when its client socket or its control
 * socket exists. An abstract socket name ('@...') cannot be checked without
 * connecting, which the daemon would see as a client: assume it is there.
 */
int hp_daemon_expected(const char *sock_path, const char *ctl_path)
{
	if (sock_path && sock_path[0] == '@')
		return 1;
	return is_socket(sock_path) || is_socket(ctl_path);
}
