// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofctl: messages, strict numbers, and finding our own files (the
 * client library, the daemon) beside the command or installed.
 */
#include "heapprofctl.h"

int verbose;
int progress;		/* show progress on stderr */
const char *prog = "heapprofctl";

static void vsay(const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", prog);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
	exit(1);
}

void note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsay(fmt, ap);
	va_end(ap);
}

/* A numeric option, strictly (hp_parse_num): anything else exits 2. */
unsigned long long num_opt(const char *opt, const char *arg, unsigned long long min,
				  unsigned long long max)
{
	unsigned long long v;
	char why[300];

	if (hp_parse_num(arg, min, max, &v, why, sizeof(why))) {
		fprintf(stderr, "%s: %s: %s\n", prog, opt, why);
		exit(2);
	}
	return v;
}

uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------ */
/* Finding our files                                                  */
/* ------------------------------------------------------------------ */

static const char *self_dir(void)
{
	static char dir[PATH_MAX];
	ssize_t n;

	if (dir[0])
		return dir;
	n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	if (n < 0)
		return strcpy(dir, ".");
	dir[n] = 0;
	return dirname(dir);
}

static int find_file(char *out, size_t len, const char *env, const char *const *cands)
{
	const char *e = getenv(env);

	if (e && *e) {
		snprintf(out, len, "%s", e);
		return access(out, R_OK) ? -1 : 0;
	}
	for (; *cands; cands++) {
		if ((*cands)[0] == '/')
			snprintf(out, len, "%s", *cands);
		else
			snprintf(out, len, "%s/%s", self_dir(), *cands);
		if (!access(out, R_OK))
			return 0;
	}
	return -1;
}

void client_lib(char *out, size_t len)
{
	static const char *const c[] = { "libheapprofd_client.so",
		"../lib/heapprofd/libheapprofd_client.so", HP_PRELOAD_LIB,
		"/usr/local/lib/heapprofd/libheapprofd_client.so", NULL };

	if (find_file(out, len, "HEAPPROFD_CLIENT_LIB", c))
		die("cannot find libheapprofd_client.so next to %s or in /usr/lib/heapprofd: build it (make) or set HEAPPROFD_CLIENT_LIB",
		    self_dir());
}

void daemon_bin(char *out, size_t len)
{
	static const char *const c[] = { "heapprofd", "../sbin/heapprofd", "/usr/sbin/heapprofd",
		"/usr/local/sbin/heapprofd", NULL };

	if (find_file(out, len, "HEAPPROFD_DAEMON", c))
		die("cannot find the heapprofd daemon next to %s: build it (make) or set HEAPPROFD_DAEMON",
		    self_dir());
}
