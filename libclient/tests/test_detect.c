// SPDX-License-Identifier: GPL-2.0
/*
 * detect.c: does LD_PRELOAD name this library (else it came from
 * /etc/ld.so.preload: whole-system mode, dormant by default), and does a
 * daemon seem to be running (its sockets exist)?
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../detect.h"
#include "../../tests/tap.h"

static char dir[64], lib[128], other[128], link_[128], sock[96], plain[128];

static void touch_file(const char *p)
{
	int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);

	if (fd >= 0)
		close(fd);
}

int main(void)
{
	char v[1024];
	struct sockaddr_un a;
	int fd;

	snprintf(dir, sizeof(dir), "/tmp/hp-detect.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(lib, sizeof(lib), "%s/libheapprofd_client.so", dir);
	snprintf(other, sizeof(other), "%s/sub", dir);
	mkdir(other, 0755);
	snprintf(other, sizeof(other), "%s/sub/libheapprofd_client.so", dir);
	snprintf(link_, sizeof(link_), "%s/libalias.so", dir);
	snprintf(sock, sizeof(sock), "%s/d.sock", dir);
	snprintf(plain, sizeof(plain), "%s/not-a-socket", dir);
	touch_file(lib);
	touch_file(other);
	touch_file(plain);
	if (symlink(lib, link_))
		return 1;

	tap_ok(!hp_preload_names(NULL, lib) && !hp_preload_names("", lib),
	       "detect: no LD_PRELOAD: not named (ld.so.preload or linked in)");
	tap_ok(hp_preload_names(lib, lib), "detect: LD_PRELOAD=<the library's path> names it");
	snprintf(v, sizeof(v), "/lib/x86_64-linux-gnu/libm.so.6:%s libfoo.so", link_);
	tap_ok(hp_preload_names(v, lib), "detect: a symlink to it among other entries (':' and ' ') names it");
	snprintf(v, sizeof(v), "%s/./libheapprofd_client.so", dir);
	tap_ok(hp_preload_names(v, lib), "detect: another spelling of the same path names it");
	tap_ok(hp_preload_names("libheapprofd_client.so", lib),
	       "detect: a bare name (library path search) names it by base name");
	tap_ok(!hp_preload_names(other, lib),
	       "detect: another copy with the same base name elsewhere does not name it");
	snprintf(v, sizeof(v), "%s/libheapprofd_client.so.old::libfoo.so: %s", dir, plain);
	tap_ok(!hp_preload_names(v, lib) && !hp_preload_names("/nonexistent/x.so", lib),
	       "detect: other libraries, missing files and empty entries do not name it");

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	memset(&a, 0, sizeof(a));
	a.sun_family = AF_UNIX;
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)))
		return 1;
	tap_ok(hp_daemon_expected(sock, NULL) && hp_daemon_expected("/nonexistent", sock),
	       "detect: a daemon is expected when its client or its control socket exists");
	tap_ok(!hp_daemon_expected(plain, "/nonexistent/ctl.sock") && !hp_daemon_expected(NULL, NULL),
	       "detect: no daemon when neither socket exists (a plain file is not a socket)");
	tap_ok(hp_daemon_expected("@heapprofd", NULL),
	       "detect: an abstract socket name cannot be checked: assumed present");
	close(fd);
	unlink(sock);
	unlink(link_);
	unlink(lib);
	unlink(other);
	unlink(plain);
	snprintf(v, sizeof(v), "%s/sub", dir);
	rmdir(v);
	rmdir(dir);
	return tap_failed ? 1 : 0;
}
