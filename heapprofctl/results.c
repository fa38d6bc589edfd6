// SPDX-License-Identifier: GPL-2.0
/*
 * heapprofctl: the events a daemon sends back (a session started, moved,
 * done), and the summary record prints from them.
 */
#include "heapprofctl.h"
/* ------------------------------------------------------------------ */
/* Results                                                            */
/* ------------------------------------------------------------------ */

struct result results[MAXRES];
int nresults, nlive;

struct result *result_for(int pid, unsigned long long sid)
{
	int i;

	for (i = 0; i < nresults; i++)
		if (results[i].pid == pid && results[i].sid == sid)
			return &results[i];
	if (nresults == MAXRES)
		return NULL;
	memset(&results[nresults], 0, sizeof(results[0]));
	results[nresults].pid = pid;
	results[nresults].sid = sid;
	return &results[nresults++];
}

/* A value of the daemon's message that is only shown: comm, reason and
 * error quote what processes chose. */
static void get_shown(const char *m, const char *key, char *out, size_t len)
{
	hpc_get(m, key, out, len);
	hp_printable(out, len, out, len, NULL);
}

void record_event(const char *m)
{
	char kind[32], v[PATH_MAX];
	struct result *r;
	int pid = (int)hpc_getu(m, "pid", 0);

	hpc_get(m, "kind", kind, sizeof(kind));
	r = result_for(pid, hpc_getu(m, "session", 0));
	if (!r)
		return;
	if (!strcmp(kind, "moved")) {
		/* The pid exec'd: this earlier image's profile went elsewhere. */
		hpc_get(m, "prefix", r->prefix, sizeof(r->prefix));
		r->moved = 1;
		return;
	}
	if (!strcmp(kind, "session")) {
		get_shown(m, "comm", r->comm, sizeof(r->comm));
		hpc_get(m, "prefix", r->prefix, sizeof(r->prefix));
		nlive++;
		if (progress)
			note("profiling pid %d (%s)", pid, r->comm);
	} else if (!strcmp(kind, "done")) {
		if (!r->comm[0])
			get_shown(m, "comm", r->comm, sizeof(r->comm));
		hpc_get(m, "prefix", v, sizeof(v));
		if (v[0])
			snprintf(r->prefix, sizeof(r->prefix), "%s", v);
		r->ok = (int)hpc_getu(m, "ok", 0);
		r->records = hpc_getu(m, "records", 0);
		r->dropped = hpc_getu(m, "dropped", 0);
		r->dropped_frees = hpc_getu(m, "dropped_frees", 0);
		r->dropped_bytes = hpc_getu(m, "dropped_bytes", 0);
		get_shown(m, "reason", r->reason, sizeof(r->reason));
		get_shown(m, "error", r->error, sizeof(r->error));
		r->has_files = !hpc_get(m, "files", r->files, sizeof(r->files));
		hpc_get(m, "left_out", r->left_out, sizeof(r->left_out));
		get_shown(m, "left_why", r->left_why, sizeof(r->left_why));
		if (!r->done)
			nlive--;
		r->done = 1;
	}
}

void print_top(const char *prefix, int lines)
{
	char path[PATH_MAX + 8], line[1024];
	FILE *f;
	int n = 0;

	if (snprintf(path, sizeof(path), "%s.txt", prefix) >= (int)sizeof(path))
		return;
	f = fopen(path, "re");
	if (!f)
		return;
	/* The function and file names of a program that may be another user's. */
	while (n < lines && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		puts(hp_printable(line, sizeof(line), line, sizeof(line), NULL));
		n++;
	}
	fclose(f);
}

/* The files a profile is written as: PREFIX + each of these. */
const char *const out_ext[N_OUT_EXT] = { ".pb.gz", ".svg", ".folded", ".txt" };

/* Is ext in the daemon's list ".pb.gz,.svg" (ours: only those names)? */
static int listed(const char *list, const char *ext)
{
	size_t n = strlen(ext);

	for (const char *p = list; *p; p += strcspn(p, ",")) {
		p += *p == ',';
		if (!strncmp(p, ext, n) && (p[n] == ',' || !p[n]))
			return 1;
	}
	return 0;
}

/*
 * " PREFIX.pb.gz PREFIX.txt": the files the daemon says it wrote (files=
 * in its answer), or, from a daemon that does not say, the four names;
 * then what the output budget left out, and why.
 */
void print_written(const char *prefix, int has_files, const char *files, const char *left_out,
		   const char *left_why)
{
	char pfx[PATH_MAX], why[300];
	int any = 0;

	/* The prefix names files (kept as it is); shown, it is printable. */
	hp_printable(pfx, sizeof(pfx), prefix, sizeof(pfx), NULL);
	for (size_t k = 0; k < N_OUT_EXT; k++)
		if (!has_files || listed(files, out_ext[k])) {
			printf(" %s%s", pfx, out_ext[k]);
			any = 1;
		}
	if (!any)
		printf(" nothing");
	if (left_out && left_out[0]) {
		hp_printable(why, sizeof(why), left_why ? left_why : "", sizeof(why), NULL);
		printf(" (left out:");
		for (size_t k = 0; k < N_OUT_EXT; k++)
			if (listed(left_out, out_ext[k]))
				printf(" %s", out_ext[k]);
		printf(", %s)", why);
	}
	printf("\n");
}

/*
 * -o names a prefix; "-o prof.pb.gz" (or .svg, .folded, .txt) means the
 * files prof.pb.gz, prof.svg, ... and not prof.pb.gz.pb.gz.
 */
const char *out_prefix(const char *arg)
{
	size_t n = strlen(arg);

	for (size_t i = 0; i < N_OUT_EXT; i++) {
		size_t e = strlen(out_ext[i]);
		char *p;

		if (n > e && !strcmp(arg + n - e, out_ext[i]) && arg[n - e - 1] != '/') {
			p = strndup(arg, n - e);
			if (!p)
				die("out of memory");
			return p;
		}
	}
	return arg;
}

/*
 * Why the daemon could not write PREFIX.*, as far as we can tell from here
 * (a daemon that says so in its done event is believed first).
 */
const char *diagnose(const char *prefix, char *buf, size_t len)
{
	char dir[PATH_MAX];
	struct statvfs sv;
	char *slash;

	snprintf(dir, sizeof(dir), "%s", prefix);
	slash = strrchr(dir, '/');
	if (slash)
		slash == dir ? (void)(dir[1] = 0) : (void)(*slash = 0);
	else
		snprintf(dir, sizeof(dir), ".");
	if (access(dir, W_OK) < 0)
		snprintf(buf, len, "directory %.500s: %s", dir, strerror(errno));
	else if (!statvfs(dir, &sv) && sv.f_bavail == 0)
		snprintf(buf, len, "the file system holding %.500s is full (%s)", dir, strerror(ENOSPC));
	else if (!statvfs(dir, &sv) && (unsigned long long)sv.f_bavail * sv.f_frsize < (1ULL << 20))
		snprintf(buf, len, "the file system holding %.500s has only %llu KiB free: probably %s",
			 dir, (unsigned long long)sv.f_bavail * sv.f_frsize >> 10, strerror(ENOSPC));
	else if (!statvfs(dir, &sv) && sv.f_files && sv.f_favail == 0)
		snprintf(buf, len, "the file system holding %.500s has no free inodes", dir);
	else
		snprintf(buf, len, "see the daemon's messages");
	return buf;
}

int show_results(int top)
{
	int i, bad = 0;
	size_t k;

	for (i = 0; i < nresults; i++) {
		struct result *r = &results[i];
		char path[PATH_MAX + 16], pfx[PATH_MAX];

		if (!r->done)
			continue;
		/* The prefix names files (kept as it is); shown, it is printable. */
		hp_printable(pfx, sizeof(pfx), r->prefix, sizeof(r->prefix), NULL);
		if (!r->ok) {
			char why[700];

			note("pid %d (%s): the profile %s.* was not written: %s", r->pid, r->comm,
			     pfx, r->error[0] ? r->error :
			     hp_printable(why, sizeof(why), diagnose(r->prefix, why, sizeof(why)),
					  sizeof(why), NULL));
			bad = 1;
			continue;
		}
		if (strcmp(r->reason, "exit") && r->reason[0])
			note("pid %d (%s): the session ended early: %s", r->pid, r->comm, r->reason);
		printf("heapprofctl: pid %d (%s%s): %llu records; wrote", r->pid, r->comm,
		       r->moved ? ", an image it later exec'd away from" : "", r->records);
		if (r->has_files) {
			print_written(r->prefix, 1, r->files, r->left_out, r->left_why);
		} else {
			/* A daemon that does not say: the files there are. */
			for (k = 0; k < N_OUT_EXT; k++) {
				snprintf(path, sizeof(path), "%s%s", r->prefix, out_ext[k]);
				if (!access(path, R_OK))
					printf(" %s%s", pfx, out_ext[k]);
			}
			printf("\n");
		}
		if (r->dropped)
			note("pid %d (%s): WARNING: %llu records were dropped because the ring was full "
			     "(%llu allocation samples, about %llu bytes allocated, and %llu frees): the "
			     "per-site estimates are biased low by up to that much (see the header of %s.txt)",
			     r->pid, r->comm, r->dropped, r->dropped - r->dropped_frees,
			     r->dropped_bytes, r->dropped_frees, pfx);
	}
	/* The top call sites of the main profile: the recorded pid's last image. */
	for (i = 0; top && i < nresults; i++) {
		if (results[i].done && results[i].ok && !results[i].moved) {
			print_top(results[i].prefix, top);
			break;
		}
	}
	fflush(stdout);
	return bad;
}
