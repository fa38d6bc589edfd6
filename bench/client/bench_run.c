// SPDX-License-Identifier: GPL-2.0
/*
 * Runs bench_client with and without the client (the test daemon from
 * libclient/tests drains the rings) and prints medians as a Markdown table.
 * Runs of the configurations being compared are interleaved, so that a
 * drift of the machine hits them alike.
 *
 * usage: bench_run BUILD_DIR [REPEATS]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../libclient/tests/minidaemon.h"

extern char **environ;
static char lib[512], prog[512], sockpath[108];
static const char *exec_path;	/* run this instead of prog (valgrind) */
static struct md D;
static int spin_daemon;	/* the test daemon never sleeps */
static char last_key[16][128];
static double last_val[16];
static int nlast;
static unsigned long long last_dropped;

static double last(const char *key)
{
	int i;

	for (i = 0; i < nlast; i++)
		if (!strcmp(last_key[i], key))
			return last_val[i];
	return -1;
}

enum cfg { NOCLIENT, PASSTHRU, DORMANT, UNSAMPLED, DEFAULT, NCFG };
static const char *cfg_name[NCFG] = {
	"no client", "client, no daemon (pass-through)",
	"client dormant (session, disabled)",
	"client sampling, interval 1 GiB (unsampled path only)",
	"client sampling, default interval 4096",
};

/* Run prog args under cfg; return the value of RESULT key (or -1). */
static double run(enum cfg c, char *const args[], const char *key,
		  const char *const *extra)
{
	char *env[256], pre[600], sock[160], line[256];
	int n = 0, i, p[2], st;
	double v = -1;
	FILE *f;
	pid_t pid;

	/* The client's settings are the benchmark's, except stack reuse
	 * (HEAPPROFD_STACK_REUSE=0 measures the whole copy). */
	for (i = 0; environ[i] && n < 200; i++)
		if (strncmp(environ[i], "LD_PRELOAD=", 11) &&
		    (strncmp(environ[i], "HEAPPROFD_", 10) ||
		     !strncmp(environ[i], "HEAPPROFD_STACK_REUSE=", 22)))
			env[n++] = environ[i];
	snprintf(pre, sizeof(pre), "LD_PRELOAD=%s", lib);
	snprintf(sock, sizeof(sock), "HEAPPROFD_SOCKET=%s", sockpath);
	if (c != NOCLIENT)
		env[n++] = pre;
	env[n++] = sock;
	if (c == DORMANT)
		env[n++] = "HEAPPROFD_DORMANT=1";
	if (c == UNSAMPLED)
		env[n++] = "HEAPPROFD_INTERVAL=1G";
	for (i = 0; extra && extra[i]; i++)
		env[n++] = (char *)extra[i];
	env[n] = NULL;
	nlast = 0;
	last_dropped = 0;
	if (c != NOCLIENT && c != PASSTHRU) {
		md_start(&D, sockpath);
		D.no_store = 1;
		D.spin = spin_daemon;
	}
	if (pipe(p))
		return -1;
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		execve(exec_path ? exec_path : prog, args, env);
		_exit(127);
	}
	close(p[1]);
	f = fdopen(p[0], "r");
	while (fgets(line, sizeof(line), f)) {
		char k[128];
		double x;

		if (sscanf(line, "RESULT %127s %lf", k, &x) == 2) {
			if (!strcmp(k, key))
				v = x;
			if (nlast < 16) {
				snprintf(last_key[nlast], sizeof(last_key[0]), "%s", k);
				last_val[nlast++] = x;
			}
		}
	}
	fclose(f);
	waitpid(pid, &st, 0);
	if (c != NOCLIENT && c != PASSTHRU) {
		md_stop(&D);
		if (D.nsess)
			last_dropped = D.s[0].ring.cnt->records_dropped;
		md_free(&D);
	}
	return v;
}

static int cmpd(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmpd);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double minimum(const double *v, int n)
{
	double m = v[0];
	int i;

	for (i = 1; i < n; i++)
		if (v[i] < m)
			m = v[i];
	return m;
}

/* Instructions valgrind's callgrind counted in the whole run of
 * `bench_client ops n 1` under cfg c (the "totals:" line), or 0. */
static unsigned long long callgrind_ir(enum cfg c, long n)
{
	char out[160], nbuf[32], outarg[200], line[512];
	char *args[] = { "valgrind", "--tool=callgrind", "--quiet", outarg, prog, "ops",
			 nbuf, "1", NULL };
	unsigned long long ir = 0;
	FILE *f;

	snprintf(out, sizeof(out), "/tmp/hp-callgrind-%d.out", (int)getpid());
	snprintf(outarg, sizeof(outarg), "--callgrind-out-file=%s", out);
	snprintf(nbuf, sizeof(nbuf), "%ld", n);
	/* The valgrind launcher is a program too: without follow-forks the
	 * client would take itself out of LD_PRELOAD before the tool starts
	 * the benchmark. */
	const char *const ex[] = { "HEAPPROFD_FOLLOW_FORKS=1", NULL };

	exec_path = "/usr/bin/valgrind";
	run(c, args, "ns_per_pair", ex);
	exec_path = NULL;
	f = fopen(out, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "totals: %llu", &ir) == 1 || sscanf(line, "summary: %llu", &ir) == 1)
			break;
	if (f)
		fclose(f);
	unlink(out);
	return ir;
}

/*
 * BENCH_ONLY=callgrind: instructions per unsampled malloc(32)+free pair,
 * deterministic where timings on a shared machine are not. Two run lengths;
 * the difference divided by the difference in pairs cancels start-up and
 * exit.
 */
static int callgrind(void)
{
	const long n1 = 200000, n2 = 400000;
	enum cfg cs[4] = { NOCLIENT, PASSTHRU, DORMANT, UNSAMPLED };
	double per[4];
	int k;

	if (access("/usr/bin/valgrind", X_OK)) {
		printf("callgrind: /usr/bin/valgrind not installed\n");
		return 0;
	}
	for (k = 0; k < 4; k++) {
		unsigned long long a = callgrind_ir(cs[k], n1), b = callgrind_ir(cs[k], n2);

		per[k] = a && b > a ? (double)(b - a) / (double)(n2 - n1) : -1;
	}
	printf("| malloc(32)+free, instructions per pair (callgrind, 1 thread) | Ir per pair | over no client |\n");
	printf("|---|---|---|\n");
	for (k = 0; k < 4; k++)
		printf("| %s | %.1f | %+.1f |\n", cfg_name[cs[k]], per[k], per[k] - per[0]);
	return 0;
}

int main(int argc, char **argv)
{
	const char *b = argc > 1 ? argv[1] : "build";
	int reps = argc > 2 ? atoi(argv[2]) : 7, r, c, t;
	double res[NCFG][2][32], med[NCFG][2], mn[NCFG][2];
	struct utsname u;
	char cpu[256] = "?", line[512];
	FILE *f;

	snprintf(lib, sizeof(lib), "%s/libheapprofd_client.so", b);
	snprintf(prog, sizeof(prog), "%s/bench/client/bench_client", b);
	snprintf(sockpath, sizeof(sockpath), "/tmp/hp-bench-%d.sock", (int)getpid());
	if (reps > 32)
		reps = 32;
	uname(&u);
	f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "model name", 10)) {
			snprintf(cpu, sizeof(cpu), "%s", strchr(line, ':') + 2);
			cpu[strcspn(cpu, "\n")] = 0;
			break;
		}
	if (f)
		fclose(f);
	printf("Machine: %s, %ld CPUs, Linux %s\n\n", cpu, sysconf(_SC_NPROCESSORS_ONLN), u.release);
	printf("Command: `make -C libclient bench` (bench_run %s %d): medians of %d interleaved runs\n\n",
	       b, reps, reps);

	if (getenv("BENCH_ONLY") && !strcmp(getenv("BENCH_ONLY"), "callgrind"))
		return callgrind();
	if (getenv("BENCH_ONLY") && strcmp(getenv("BENCH_ONLY"), "ops"))
		goto sampled;
	for (r = 0; r < reps; r++)
		for (t = 0; t < 2; t++)
			for (c = 0; c < NCFG; c++) {
				char *args[] = { prog, "ops", "20000000", t ? "2" : "1", NULL };

				res[c][t][r] = run((enum cfg)c, args, "ns_per_pair", NULL);
			}
	{
		double la[3] = { 0, 0, 0 };

		getloadavg(la, 3);
		printf("Load average when the table was printed: %.2f %.2f %.2f\n\n", la[0], la[1], la[2]);
	}
	printf("| malloc(32)+free, ns per pair per thread | 1 thread median (min) | 2 threads median (min) | median over no client (1 / 2 threads) | min over no client (1 / 2 threads) |\n");
	printf("|---|---|---|---|---|\n");
	for (c = 0; c < NCFG; c++)
		for (t = 0; t < 2; t++) {
			mn[c][t] = minimum(res[c][t], reps);
			med[c][t] = median(res[c][t], reps);
		}
	for (c = 0; c < NCFG; c++)
		printf("| %s | %.2f (%.2f) | %.2f (%.2f) | %+.2f / %+.2f | %+.2f / %+.2f |\n", cfg_name[c],
		       med[c][0], mn[c][0], med[c][1], mn[c][1],
		       med[c][0] - med[NOCLIENT][0], med[c][1] - med[NOCLIENT][1],
		       mn[c][0] - mn[NOCLIENT][0], mn[c][1] - mn[NOCLIENT][1]);
	printf("\n");
sampled:
	if (getenv("BENCH_ONLY") && strcmp(getenv("BENCH_ONLY"), "sampled"))
		goto mem;
	{
		char *args[] = { prog, "sampled", "20000", NULL };
		const char *const ex[] = { "HEAPPROFD_INTERVAL=1", NULL };
		double m[32], p90[32];
		unsigned long long drops;
		int sp;

		for (sp = 1; sp >= 0; sp--) {
			spin_daemon = sp;
			drops = 0;
			for (r = 0; r < reps; r++) {
				m[r] = run(DEFAULT, args, "sampled_malloc_median_ns", ex);
				p90[r] = last("sampled_malloc_p90_ns");
				drops += last_dropped;
			}
			printf("Sampled malloc(64) with about 16 KiB of stack copied (interval 1, every call sampled), "
			       "%s: median %.0f ns, p90 %.0f ns (medians over %d runs of 20000 calls; clock cost subtracted; %llu records dropped in all runs)\n\n",
			       sp ? "consumer awake (no wake-up needed)" :
				    "consumer sleeping between bursts (an eventfd write per wake-up)",
			       median(m, reps), median(p90, reps), reps, drops);
		}
		spin_daemon = 0;
	}
mem:
	if (getenv("BENCH_ONLY") && !strcmp(getenv("BENCH_ONLY"), "callgrind"))
		return callgrind();
	if (getenv("BENCH_ONLY") && strcmp(getenv("BENCH_ONLY"), "mem"))
		return 0;
	{
		char *args[] = { prog, "mem", NULL };
		double a[NCFG][3];
		const char *keys[3] = { "rss_anon_kb", "rss_shmem_kb", "rss_file_kb" };
		int k;
		enum cfg cs[3] = { NOCLIENT, DORMANT, DEFAULT };

		for (c = 0; c < 3; c++)
			for (k = 0; k < 3; k++) {
				double v[32];

				for (r = 0; r < 3; r++) {
					if (k)
						v[r] = run(cs[c], args, keys[k], NULL);
					else
						v[r] = run(cs[c], args, keys[k], NULL);
				}
				a[c][k] = median(v, 3);
			}
		printf("| memory after the mem workload (20000 live blocks, 4 threads x 100000 malloc/free) | RssAnon KiB | RssShmem KiB (ring) | RssFile KiB |\n");
		printf("|---|---|---|---|\n");
		for (c = 0; c < 3; c++)
			printf("| %s | %.0f (%+.0f) | %.0f | %.0f |\n", cfg_name[cs[c]], a[c][0],
			       a[c][0] - a[0][0], a[c][1], a[c][2]);
	}
	return 0;
}
