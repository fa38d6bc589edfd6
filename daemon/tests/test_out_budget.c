// SPDX-License-Identifier: GPL-2.0
/*
 * The output budget (daemon/out_budget.c) with the daemon's own code and
 * real files: sizes and options, the free space kept (from made-up statvfs
 * figures), which names are profiles, the scan at start (counted by owner,
 * unfinished temporary files removed, links and strangers left alone), and
 * dumps under a limit: refused, bounded, handed to their user, the oldest
 * removed as a unit. TAP lines. As root, files of a second uid are made
 * with chown; otherwise those checks are skipped.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../hpd.h"
#include "../pipeline/outfile.h"
#include "../../tests/tap.h"

#define U1 65534	/* the attacker of tests/hostile */
#define U2 65533	/* another user */

static char dir[] = "/tmp/hp_budget_test.XXXXXX";
static int root;

/* A file of n bytes at dir/name, owned by uid, modified at t (seconds). */
static void mkfile(const char *name, size_t n, uid_t uid, time_t t)
{
	char path[512], buf[4096];
	struct timespec ts[2] = { { t, 0 }, { t, 0 } };
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	memset(buf, 'x', sizeof(buf));
	while (fd >= 0 && n) {
		size_t k = n < sizeof(buf) ? n : sizeof(buf);

		if (write(fd, buf, k) != (ssize_t)k)
			break;
		n -= k;
	}
	if (fd >= 0) {
		if (root && fchown(fd, uid, (gid_t)-1))
			perror("fchown");
		futimens(fd, ts);
		close(fd);
	}
}

/* A profile: the four files of one dump. */
static void mkprof(const char *key, size_t n, uid_t uid, time_t t)
{
	static const char *const ext[] = { ".pb.gz", ".svg", ".folded", ".txt" };
	char name[256];

	for (size_t i = 0; i < 4; i++) {
		snprintf(name, sizeof(name), "%s%s", key, ext[i]);
		mkfile(name, n, uid, t);
	}
}

static int exists(const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) == 0;
}

static uid_t owner(const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return lstat(path, &st) ? (uid_t)-2 : st.st_uid;
}

/* Files in dir whose name starts with a dot (temporary files). */
static int hidden_files(void)
{
	struct dirent *de;
	int n = 0;
	DIR *d = opendir(dir);

	while (d && (de = readdir(d)) != NULL)
		n += de->d_name[0] == '.' && strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

static void test_sizes(void)
{
	static const struct { const char *s; int ok; uint64_t bytes; unsigned pct; } c[] = {
		{ "0", 1, 0, 0 }, { "4096", 1, 4096, 0 }, { "512K", 1, 512 << 10, 0 },
		{ "256M", 1, 256ULL << 20, 0 }, { "1G", 1, 1ULL << 30, 0 },
		{ "1GiB", 1, 1ULL << 30, 0 }, { "2t", 1, 2ULL << 40, 0 }, { "5%", 1, 0, 5 },
		{ "100%", 1, 0, 100 }, { "101%", 0, 0, 0 }, { "-1", 0, 0, 0 }, { "", 0, 0, 0 },
		{ "1X", 0, 0, 0 }, { "1M5", 0, 0, 0 }, { " 5", 0, 0, 0 },
		{ "99999999999999999999", 0, 0, 0 }, { "20000000T", 0, 0, 0 },
	};
	char why[200], b[32];

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		uint64_t v = 7;
		unsigned p = 7;
		int rc = hpd_budget_parse_size(c[i].s, &v, &p, why, sizeof(why));

		tap_ok(c[i].ok ? rc == 0 && v == c[i].bytes && p == c[i].pct : rc != 0,
		       "size '%s': %s (got rc %d, %llu bytes, %u%%%s%s)", c[i].s,
		       c[i].ok ? "taken" : "refused", rc, (unsigned long long)v, p,
		       rc ? ": " : "", rc ? why : "");
	}
	tap_ok(hpd_budget_parse_size("5%", &(uint64_t){ 0 }, NULL, why, sizeof(why)) != 0,
	       "a percentage is refused where only a size belongs (%s)", why);
	tap_ok(!strcmp(hpd_budget_size_str(256ULL << 20, b, sizeof(b)), "256.0 MiB") &&
	       !strcmp(hpd_budget_size_str(100, b, sizeof(b)), "100 bytes"),
	       "sizes are shown as 256.0 MiB, 100 bytes");
}

static void test_options(void)
{
	char why[300];

	memset(&hpd_budget_cfg, 0, sizeof(hpd_budget_cfg));
	hpd_budget_defaults(0);
	tap_ok(hpd_budget_cfg.max_profiles == 100 && hpd_budget_cfg.max_bytes == 256ULL << 20 &&
	       hpd_budget_cfg.min_free_pct == 5 && hpd_budget_cfg.min_free_cap == 1ULL << 30,
	       "system daemon's defaults: 100 profiles, 256 MiB per user, 5%% free (at most 1 GiB)");
	hpd_budget_defaults(1);
	tap_ok(!hpd_budget_cfg.max_profiles && !hpd_budget_cfg.max_bytes &&
	       !hpd_budget_cfg.min_free && !hpd_budget_cfg.min_free_pct,
	       "a private daemon's defaults: no budget, no reserve");
	tap_ok(!hpd_budget_option("user-max-profiles", "0", why, sizeof(why)) &&
	       !hpd_budget_option("user-max-bytes", "1M", why, sizeof(why)) &&
	       !hpd_budget_option("min-free", "10%", why, sizeof(why)), "options taken");
	hpd_budget_defaults(0);
	tap_ok(hpd_budget_cfg.max_profiles == 0 && hpd_budget_cfg.max_bytes == 1 << 20 &&
	       hpd_budget_cfg.min_free_pct == 10 && hpd_budget_cfg.min_free_cap == 0,
	       "options given win over the defaults (0 stays 0: no bound)");
	tap_ok(hpd_budget_option("user-max-profiles", "-3", why, sizeof(why)) != 0 &&
	       strstr(why, "--user-max-profiles"), "a bad count is refused, naming the option (%s)", why);
	tap_ok(hpd_budget_option("min-free", "lots", why, sizeof(why)) != 0 &&
	       strstr(why, "--min-free"), "a bad reserve is refused, naming the option (%s)", why);
}

static struct statvfs fs(uint64_t size, uint64_t avail, uint64_t files, uint64_t favail)
{
	struct statvfs sv;

	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = sv.f_frsize = 4096;
	sv.f_blocks = size / 4096;
	sv.f_bfree = sv.f_bavail = avail / 4096;
	sv.f_files = files;
	sv.f_ffree = sv.f_favail = favail;
	return sv;
}

static void test_room(void)
{
	struct statvfs sv;
	char why[400] = "";
	uint64_t room = 0;
	int rc;

	/* The defaults (test_options checked them). */
	memset(&hpd_budget_cfg, 0, sizeof(hpd_budget_cfg));
	hpd_budget_cfg.min_free_pct = HPD_MIN_FREE_PCT;
	hpd_budget_cfg.min_free_cap = HPD_MIN_FREE_CAP;
	sv = fs(8 << 20, 4 << 20, 2048, 2000);
	tap_ok(hpd_budget_reserve(&sv) == (8 << 20) / 100 * 5,
	       "reserve of an 8 MiB file system: 5%% (%llu)", (unsigned long long)hpd_budget_reserve(&sv));
	sv = fs(100ULL << 30, 50ULL << 30, 0, 0);
	tap_ok(hpd_budget_reserve(&sv) == 1ULL << 30, "reserve of 100 GiB: capped at 1 GiB");
	sv = fs(8 << 20, 4 << 20, 2048, 2000);
	rc = hpd_budget_room(&sv, "/x", &room, why, sizeof(why));
	tap_ok(rc == 0 && room == (4 << 20) - (8 << 20) / 100 * 5,
	       "room: what is available less the reserve (%llu)", (unsigned long long)room);
	sv = fs(8 << 20, 300 << 10, 2048, 2000);
	rc = hpd_budget_room(&sv, "/x", &room, why, sizeof(why));
	tap_ok(rc == -ENOSPC && strstr(why, "/x") && strstr(why, "--min-free"),
	       "less free than the reserve: refused with the reason (%s)", why);
	sv = fs(8 << 20, 4 << 20, 2048, 20);
	rc = hpd_budget_room(&sv, "/x", &room, why, sizeof(why));
	tap_ok(rc == -ENOSPC && strstr(why, "inodes"), "out of inodes: refused (%s)", why);
	hpd_budget_cfg.min_free_pct = 0;
	hpd_budget_cfg.min_free = 0;
	sv = fs(8 << 20, 4096, 2048, 0);
	rc = hpd_budget_room(&sv, "/x", &room, why, sizeof(why));
	tap_ok(rc == 0 && room == 4096, "--min-free 0: everything available is room");
	hpd_budget_cfg.min_free = 1 << 20;
	sv = fs(8 << 20, 3 << 20, 2048, 2000);
	rc = hpd_budget_room(&sv, "/x", &room, why, sizeof(why));
	tap_ok(rc == 0 && room == 2 << 20, "--min-free 1M: 3 MiB available leave 2 MiB of room");
}

static void test_names(void)
{
	static const struct { const char *name, *key; } c[] = {
		{ "ls.123.4.pb.gz", "ls.123.4" }, { "ls.123.4.svg", "ls.123.4" },
		{ "ls.123.4.folded", "ls.123.4" }, { "ls.123.4.txt", "ls.123.4" },
		{ "ls.123.4.peak.txt", "ls.123.4" }, { "ls.123.4.0007.svg", "ls.123.4.0007" },
		{ "ls.123.4.0007.peak.pb.gz", "ls.123.4.0007" }, { "a.b.1.2.txt", "a.b.1.2" },
		{ "x1.2.3.txt", "x1.2.3" },
		{ "notes.txt", NULL }, { "1.2.txt", NULL }, { "x.1.txt", NULL }, { ".x.1.2.txt", NULL },
		{ "x.1.2.pb", NULL }, { "x.1.2", NULL }, { "x..2.txt", NULL }, { "x.1.2.gz", NULL },
		{ ".1.2.txt", NULL }, { "", NULL },
	};
	char key[256];

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		int is = hpd_budget_key(c[i].name, key, sizeof(key));

		tap_ok(c[i].key ? is && !strcmp(key, c[i].key) : !is, "name '%s': %s%s", c[i].name,
		       c[i].key ? "a profile " : "not a profile", c[i].key ? c[i].key : "");
	}
	tap_ok(hpd_budget_is_temp(".ls.1.2.txt.aB3xYz") && hpd_budget_is_temp(".ls.1.2.peak.svg.000000"),
	       "outfile.c's temporary names of profile files are recognised");
	tap_ok(!hpd_budget_is_temp(".ls.1.2.txt") && !hpd_budget_is_temp(".notes.txt.aB3xYz") &&
	       !hpd_budget_is_temp(".ls.1.2.txt.aB3x!z") && !hpd_budget_is_temp("ls.1.2.txt.aB3xYz"),
	       "other hidden files are not");
}

/* Scan at start: counted by owner, oldest first over the budget. */
static void test_scan(void)
{
	uint64_t n, b;

	memset(&hpd_budget_cfg, 0, sizeof(hpd_budget_cfg));
	hpd_budget_cfg.max_profiles = 3;
	/* uid 0: five profiles, t = 1000..1004; U1: four; U2: two. */
	for (int i = 0; i < 5; i++) {
		char k[64];

		snprintf(k, sizeof(k), "r.%d.%d", 100 + i, i + 1);
		mkprof(k, 100, 0, 1000 + i);
	}
	for (int i = 0; i < 4; i++) {
		char k[64];

		snprintf(k, sizeof(k), "u.%d.%d", 200 + i, 10 + i);
		mkprof(k, 5000, U1, 2000 - i);	/* the first made is the newest */
	}
	mkprof("o.300.20", 10, U2, 10);
	mkprof("o.301.21", 10, U2, 11);
	mkfile(".u.200.10.txt.Ab12Cd", 50, 0, 3000);	/* a dump cut short */
	mkfile("notes.txt", 10, 0, 1);			/* the admin's */
	mkfile("victim", 10, 0, 1);
	{
		char p[512], q[512];

		snprintf(p, sizeof(p), "%s/a.1.1.txt", dir);
		snprintf(q, sizeof(q), "%s/victim", dir);
		if (symlink(q, p))
			perror("symlink");
		snprintf(p, sizeof(p), "%s/d.1.1.txt", dir);
		mkdir(p, 0755);
	}
	tap_ok(hpd_budget_init(dir) == 0, "the scan of %s", dir);
	hpd_budget_usage(0, &n, &b);
	tap_ok(n == 3 && !exists("r.100.1.txt") && !exists("r.101.2.pb.gz") && exists("r.102.3.svg") &&
	       exists("r.104.5.folded"),
	       "uid 0: 5 profiles over a bound of 3: the 2 oldest removed, every file of each (%llu left)",
	       (unsigned long long)n);
	if (root) {
		hpd_budget_usage(U1, &n, &b);
		tap_ok(n == 3 && !exists("u.203.13.txt") && exists("u.200.10.txt"),
		       "uid %d: its oldest (by time, not by name) removed (%llu left)", U1,
		       (unsigned long long)n);
		tap_ok(b == 3 * 4 * 8192ULL || b >= 3 * 4 * 5000ULL,
		       "uid %d: its disk counted in whole blocks (%llu bytes)", U1, (unsigned long long)b);
		hpd_budget_usage(U2, &n, &b);
		tap_ok(n == 2 && exists("o.300.20.txt") && exists("o.301.21.txt"),
		       "uid %d: within its budget, untouched (%llu)", U2, (unsigned long long)n);
	} else {
		tap_ok(1, "other uids # SKIP not root");
	}
	tap_ok(!exists(".u.200.10.txt.Ab12Cd"), "an unfinished temporary file is removed");
	tap_ok(exists("notes.txt") && exists("victim") && exists("a.1.1.txt") && exists("d.1.1.txt"),
	       "a file not named like a profile, a link and a directory named like one: left alone");
	hpd_budget_usage(0, &n, &b);
	tap_ok(n == 3, "neither the link nor the directory is counted (uid 0: %llu)", (unsigned long long)n);
}

/* One dump as consumer.c does it, with outfile's writes. */
static int dump(uid_t uid, const char *key, size_t bytes, int nfiles, struct hp_out_limit *lim,
		char *why, size_t wl)
{
	static const char *const ext[] = { ".pb.gz", ".folded", ".txt", ".svg" };
	struct hp_out o[4];
	char prefix[512], path[600], buf[8192];
	int rc, n = 0;

	snprintf(prefix, sizeof(prefix), "%s/%s", dir, key);
	rc = hpd_budget_begin(uid, prefix, 1, lim, why, wl);
	if (rc < 0)
		return rc;
	memset(buf, 'p', sizeof(buf));
	for (int i = 0; i < nfiles && !(rc < 0); i++) {
		size_t left = bytes;

		snprintf(path, sizeof(path), "%s%s", prefix, ext[i]);
		if (hp_out_open(&o[n], path, 0644))
			break;
		if (rc > 0)
			hp_out_set_limit(&o[n], lim);
		while (left) {
			size_t k = left < sizeof(buf) ? left : sizeof(buf);

			if (hp_out_write(&o[n], buf, k) < 0)
				break;
			left -= k;
		}
		n++;
		if (o[n - 1].err) {
			snprintf(why, wl, "%s", o[n - 1].why);
			for (int k = 0; k < n; k++)
				hp_out_abort(&o[k]);
			hpd_budget_end(uid, prefix, 1, lim, -o[n - 1].err);
			return -o[n - 1].err;
		}
	}
	rc = hp_out_commit_all(o, (size_t)n, NULL);
	hpd_budget_end(uid, prefix, 1, lim, rc);
	return rc;
}

static void test_dumps(void)
{
	struct hpd_budget_stats st;
	struct hp_out_limit lim;
	char why[600] = "";
	uint64_t n, b;
	uid_t u = root ? U1 : 0;
	int rc;

	memset(&hpd_budget_cfg, 0, sizeof(hpd_budget_cfg));
	hpd_budget_cfg.max_profiles = 3;
	hpd_budget_cfg.max_bytes = 256 << 10;
	hpd_budget_init(dir);
	rc = dump(u, "u.900.30", 1000, 4, &lim, why, sizeof(why));
	hpd_budget_usage(u, &n, &b);
	tap_ok(rc == 0 && n == 3 && exists("u.900.30.svg") &&
	       (!root || (!exists("u.202.12.txt") && exists("u.201.11.txt"))),
	       "a new dump: written, the user's oldest (only) removed to keep 3 (rc %d, %llu, %s)", rc,
	       (unsigned long long)n, why);
	tap_ok(owner("u.900.30.pb.gz") == u && owner("u.900.30.svg") == u,
	       "its files belong to the process's user (uid %d)", (int)owner("u.900.30.svg"));
	rc = dump(u, "u.901.31", 100 << 10, 4, &lim, why, sizeof(why));
	tap_ok(rc == -EDQUOT && strstr(why, "--user-max-bytes") && !exists("u.901.31.svg") &&
	       !exists("u.901.31.pb.gz") && hidden_files() == 0,
	       "a dump past the user's bytes: refused with the reason, no file and no temporary left (%s)",
	       why);
	tap_ok(lim.used < (256 << 10), "what the refused files were charged is given back (%llu)",
	       (unsigned long long)lim.used);
	rc = dump(u, "u.902.32", 60 << 10, 4, &lim, why, sizeof(why));
	hpd_budget_usage(u, &n, &b);
	tap_ok(rc == 0 && b <= 256 << 10 && exists("u.902.32.svg"),
	       "a dump that fits only without older profiles: written, the oldest go (%llu bytes, %llu profiles)",
	       (unsigned long long)b, (unsigned long long)n);
	hpd_budget_get_stats(&st);
	tap_ok(st.refused_user == 1 && st.removed >= 2, "counted: %llu refused over the budget, %llu removed",
	       (unsigned long long)st.refused_user, (unsigned long long)st.removed);
	/* The reserve: more than the file system has. */
	hpd_budget_cfg.min_free = 1ULL << 60;
	rc = dump(u, "u.903.33", 10, 1, &lim, why, sizeof(why));
	hpd_budget_get_stats(&st);
	tap_ok(rc == -ENOSPC && strstr(why, "--min-free") && !exists("u.903.33.pb.gz") &&
	       st.refused_space == 1, "no room kept on the file system: refused before writing (%s)", why);
	hpd_budget_cfg.min_free = 0;
	/* Another user's and the budget's own state survive a restart. */
	hpd_budget_usage(u, &n, &b);
	{
		uint64_t n2, b2;

		hpd_budget_init(dir);
		hpd_budget_usage(u, &n2, &b2);
		tap_ok(n2 == n && b2 == b, "a restart counts the same (%llu/%llu profiles, %llu/%llu bytes)",
		       (unsigned long long)n2, (unsigned long long)n, (unsigned long long)b2,
		       (unsigned long long)b);
	}
	if (root)
		tap_ok(exists("o.300.20.txt") && exists("o.301.21.txt"),
		       "another user's profiles are untouched by this user's dumps");
	/* A file somebody swapped for a link: removal unlinks the name only. */
	{
		char p[512], q[512];

		snprintf(p, sizeof(p), "%s/u.902.32.txt", dir);
		snprintf(q, sizeof(q), "%s/victim", dir);
		unlink(p);
		if (symlink(q, p))
			perror("symlink");
		hpd_budget_cfg.max_profiles = 1;
		rc = dump(u, "u.904.34", 10, 4, &lim, why, sizeof(why));
		tap_ok(rc == 0 && exists("victim") && exists("u.904.34.txt"),
		       "removing a profile whose file became a link leaves the link's target alone");
	}
	/* Not charged: a prefix outside the output directory. */
	{
		char p[512];

		hpd_budget_cfg.min_free = 0;
		snprintf(p, sizeof(p), "%s/sub/x.1.2", dir);
		rc = hpd_budget_begin(u, p, 1, &lim, why, sizeof(why));
		tap_ok(rc == 0, "a dump outside the output directory, no reserve: no bound (%d)", rc);
	}
}

int main(void)
{
	root = geteuid() == 0;
	hpd_verbosity = HPD_ERR;
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	test_sizes();
	test_options();
	test_room();
	test_names();
	test_scan();
	test_dumps();
	hpd_budget_fini();
	if (!tap_failed) {
		char cmd[600];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd))
			tap_diag("could not remove %s", dir);
	} else {
		tap_diag("kept %s", dir);
	}
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
