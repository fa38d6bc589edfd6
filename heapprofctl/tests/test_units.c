// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of heapprofctl's small parts: the control protocol's encoding
 * and the /etc/ld.so.preload editor (on a scratch file), and (test_dmabuf.c)
 * dmabuf, gpu, meminfo and monitor. TAP lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../tests/tap.h"
#include "../../proto/ctlproto.h"
#include "../preload.h"

/* dmabuf, gpu, meminfo and monitor on recorded trees (test_dmabuf()) */
#include "test_dmabuf.c"

/* TAP lines named "heapprofctl units: ..." */
#undef ok
#define ok(cond, what) tap_ok(cond, "heapprofctl units: %s", what)

static char *slurp(const char *p)
{
	static char buf[8192];
	FILE *f = fopen(p, "r");
	size_t k;

	buf[0] = 0;
	if (!f)
		return NULL;
	k = fread(buf, 1, sizeof(buf) - 1, f);
	buf[k] = 0;
	fclose(f);
	return buf;
}

static void spit(const char *p, const char *s)
{
	FILE *f = fopen(p, "w");

	fputs(s, f);
	fclose(f);
}

int main(void)
{
	char msg[512] = "watch", v[256], err[256], dir[] = "/tmp/hpunit.XXXXXX", file[300];
	const char *lib = "/usr/lib/heapprofd/libheapprofd_client.so";
	struct stat st;
	char *s;

	hpc_put(msg, sizeof(msg), "prefix", "/tmp/a b%c=d\n");
	hpc_putu(msg, sizeof(msg), "pid", 42);
	ok(!strchr(msg + 6, '\n') && hpc_verb_is(msg, "watch"), "ctl: encoded line has no raw newline");
	ok(!hpc_get(msg, "prefix", v, sizeof(v)) && !strcmp(v, "/tmp/a b%c=d\n"),
	   "ctl: value with space, percent, equals and newline round-trips");
	ok(hpc_getu(msg, "pid", 0) == 42 && hpc_getu(msg, "nope", 7) == 7, "ctl: numbers and defaults");
	ok(hpc_get(msg, "pre", v, sizeof(v)) == -1, "ctl: a key prefix does not match another key");
	{
		char small[16] = "x";

		ok(hpc_put(small, sizeof(small), "key", "a long value here") == -1,
		   "ctl: overflow is refused, not truncated silently");
	}

	if (!mkdtemp(dir))
		return 1;
	snprintf(file, sizeof(file), "%s/ld.so.preload", dir);
	ok(!hp_preload_present(file, lib), "preload: missing file has no entry");
	ok(hp_preload_add(file, lib, err, sizeof(err)) == 0, "preload: add to a missing file");
	s = slurp(file);
	ok(s && !strcmp(s, "/usr/lib/heapprofd/libheapprofd_client.so\n"), "preload: file holds exactly our line");
	ok(hp_preload_add(file, lib, err, sizeof(err)) == 1, "preload: second add is a no-op");
	ok(hp_preload_remove(file, lib, err, sizeof(err)) == 0 && access(file, F_OK) != 0,
	   "preload: removing our only line removes the file");
	spit(file, "/opt/other.so\n/lib/x.so /usr/local/lib/libheapprofd_client.so /lib/y.so\nlast-no-newline.so");
	chmod(file, 0640);
	ok(hp_preload_add(file, lib, err, sizeof(err)) == 1,
	   "preload: another copy of our library counts as present");
	ok(hp_preload_remove(file, lib, err, sizeof(err)) == 0, "preload: remove with other entries");
	s = slurp(file);
	ok(s && !strcmp(s, "/opt/other.so\n/lib/x.so /lib/y.so\nlast-no-newline.so\n"),
	   "preload: other entries kept, only ours dropped");
	ok(stat(file, &st) == 0 && (st.st_mode & 0777) == 0640, "preload: file mode kept");
	ok(hp_preload_add(file, lib, err, sizeof(err)) == 0, "preload: add after foreign entries");
	s = slurp(file);
	ok(s && !strcmp(s, "/opt/other.so\n/lib/x.so /lib/y.so\nlast-no-newline.so\n"
			   "/usr/lib/heapprofd/libheapprofd_client.so\n"),
	   "preload: appended as its own line");
	ok(hp_preload_remove(file, lib, err, sizeof(err)) == 0 &&
	   hp_preload_remove(file, lib, err, sizeof(err)) == 1, "preload: remove is idempotent");
	unlink(file);
	rmdir(dir);
	if (test_dmabuf())
		tap_ok(0, "heapprofctl units: dmabuf tests set up their tree");
	return tap_failed ? 1 : 0;
}
