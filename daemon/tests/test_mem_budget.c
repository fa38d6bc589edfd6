// SPDX-License-Identifier: GPL-2.0
/*
 * The memory budget (daemon/mem_budget.c) with the daemon's own code: the
 * option and its defaults, /proc/self/status read, a dump's cost, what it
 * decides at each level, which session it ends (the user holding the most
 * loses its largest), and the whole look on the tick against this test's
 * own memory: sessions whose pipeline figures are made up here, a real
 * RssAnon raised by touching memory. And the CPU budget's arithmetic
 * (daemon/cpu_budget.c). TAP lines.
 */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../hpd.h"
#include "../../tests/tap.h"

#define MiB (1ULL << 20)

/* ---- what mem_budget.c calls, made up here ---- */

struct hpd_session *hpd_sessions;
struct hp_pipeline *hpd_pipe;

struct hp_proc {
	struct hp_proc_stats st;
	int shed;
};

void hp_proc_get_stats(struct hp_proc *pr, struct hp_proc_stats *st)
{
	*st = pr->st;
}

uint64_t hp_pipeline_copied_bytes(struct hp_pipeline *p)
{
	(void)p;
	return 0;
}

void hp_pipeline_procs_gone(struct hp_pipeline *p, uint64_t *ended, uint64_t *freed)
{
	(void)p;
	*ended = *freed = 0;
}

void hp_proc_shed(struct hp_proc *pr)
{
	pr->shed++;
}

static struct hpd_session *ended_s;
static char ended_why[256];

void hpd_session_end(struct hpd_session *s, const char *why)
{
	ended_s = s;
	snprintf(ended_why, sizeof(ended_why), "%s", why ? why : "");
	s->ending = 1;
}

static int drained[3];

void hpd_session_drain(struct hpd_session *s, int producer_gone)
{
	(void)producer_gone;
	drained[s->pid - 100]++;
}

uint64_t hpd_now_ms(void)
{
	return 1000000;
}

int hpd_sooner(int a, int b)
{
	return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/* ---- the tests ---- */

static void test_options(void)
{
	char why[300] = "";
	uint64_t b;
	int rc;

	hpd_mem_defaults(0);
	tap_ok(hpd_mem_resolve(8ULL << 30) == 1ULL << 30,
	       "system daemon, 8 GiB machine: a quarter, at most 1 GiB (%llu)",
	       (unsigned long long)hpd_mem_resolve(8ULL << 30));
	tap_ok(hpd_mem_resolve(2ULL << 30) == 512 * MiB, "... 2 GiB machine: 512 MiB (%llu)",
	       (unsigned long long)hpd_mem_resolve(2ULL << 30));
	tap_ok(hpd_mem_resolve(32 * MiB) == HPD_MEM_MIN, "... 32 MiB machine: the least, 16 MiB (%llu)",
	       (unsigned long long)hpd_mem_resolve(32 * MiB));
	hpd_mem_defaults(1);
	tap_ok(hpd_mem_resolve(8ULL << 30) == 0, "private daemon: no bound by default");
	tap_ok(hpd_mem_option("max-memory", "64M", why, sizeof(why)) == 0 &&
	       hpd_mem_resolve(8ULL << 30) == 64 * MiB, "--max-memory 64M: 64 MiB (%s)", why);
	hpd_mem_defaults(0);
	tap_ok(hpd_mem_resolve(8ULL << 30) == 64 * MiB, "... and the defaults do not replace it");
	rc = hpd_mem_option("max-memory", "50%", why, sizeof(why));
	b = hpd_mem_resolve(8ULL << 30);
	tap_ok(rc == 0 && b == 4ULL << 30, "--max-memory 50%%: half of 8 GiB, no cap when given (%llu)",
	       (unsigned long long)b);
	tap_ok(hpd_mem_option("max-memory", "0", why, sizeof(why)) == 0 &&
	       hpd_mem_resolve(8ULL << 30) == 0, "--max-memory 0: no bound");
	why[0] = 0;
	tap_ok(hpd_mem_option("max-memory", "1M", why, sizeof(why)) < 0 &&
	       strstr(why, "below the least the daemon needs (16.0 MiB)"),
	       "--max-memory 1M refused: %s", why);
	why[0] = 0;
	tap_ok(hpd_mem_option("max-memory", "lots", why, sizeof(why)) < 0 && strstr(why, "not a size"),
	       "--max-memory lots refused: %s", why);
	why[0] = 0;
	tap_ok(hpd_mem_option("max-memory", "101%", why, sizeof(why)) < 0 && strstr(why, "out of range"),
	       "--max-memory 101%% refused: %s", why);
	tap_ok(hpd_mem_option("max-cpu", "5", why, sizeof(why)) < 0, "another option's name refused: %s",
	       why);
}

static void test_status(void)
{
	uint64_t a = 0;
	FILE *f = fopen("/proc/self/status", "re");
	char buf[8192] = "\n";
	size_t n = f ? fread(buf + 1, 1, sizeof(buf) - 2, f) : 0;
	int rc;

	if (f)
		fclose(f);
	buf[n + 1] = 0;
	rc = hpd_mem_parse_status(buf, &a);
	tap_ok(rc == 0 && a > 0 && a < (1ULL << 40),
	       "this process's own /proc/self/status: RssAnon + VmSwap = %llu bytes",
	       (unsigned long long)a);
	rc = hpd_mem_parse_status("\nVmRSS:\t 9 kB\nRssAnon:\t    1234 kB\nVmSwap:\t      10 kB\n", &a);
	tap_ok(rc == 0 && a == 1244ULL << 10, "RssAnon 1234 kB and VmSwap 10 kB: %llu bytes",
	       (unsigned long long)a);
	tap_ok(hpd_mem_parse_status("\nRssAnon:\t 100 kB\n", &a) == 0 && a == 100ULL << 10,
	       "no VmSwap line (no swap support): RssAnon alone");
	tap_ok(hpd_mem_parse_status("\nVmRSS:\t 100 kB\n", &a) < 0, "no RssAnon line: refused");
	tap_ok(hpd_mem_parse_status("\nRssAnon:\t 100 MB\n", &a) < 0 &&
	       hpd_mem_parse_status("\nRssAnon:\t kB\n", &a) < 0 &&
	       hpd_mem_parse_status("\nRssAnon:\t 99999999999999999999 kB\n", &a) < 0,
	       "a unit other than kB, no number or a number too large: refused");
	tap_ok(hpd_mem_parse_status("\nXRssAnon:\t 5 kB\n", &a) < 0, "only a line's own key counts");
}

static void test_cost(void)
{
	uint64_t c0 = hpd_mem_dump_cost(0, 0, 0), c1 = hpd_mem_dump_cost(10000, 460000, 50);
	uint64_t c2 = hpd_mem_dump_cost(8200, 41000, 8200);

	/* Measured (admin guide): 9.3 MiB for 8961 samples of 46 frames and
	 * 41 locations once named; 14.3 MiB for 8193 samples of 5 frames and
	 * 8202 locations named for the first time. */
	tap_ok(c0 == HPD_MEM_DUMP_BASE && c1 > 9 * MiB + MiB / 2 && c1 < 16 * MiB,
	       "a dump of 10000 samples of 46 frames: %llu bytes reserved (measured 9.3 MiB for 8961)",
	       (unsigned long long)c1);
	tap_ok(c2 > 14 * MiB + MiB / 4 && c2 < 20 * MiB,
	       "... of 8200 samples of 5 frames and 8200 locations: %llu (measured 14.3 MiB)",
	       (unsigned long long)c2);
}

static void test_decide(void)
{
	static const char *const names[] = { "nothing", "nothing but said", "the drains wait",
					     "caches dropped", "a session ends" };
	/* 64 MiB: the margin is 8 MiB; with a 16 MiB dump, act from 40 MiB. */
	static const struct {
		unsigned used, held, reserve, shed_ago, end_ago, nsessions;	/* MiB, ms */
		enum hpd_mem_act want;
		const char *what;
	} c[] = {
		{ 39, 36, 16, 0, 0, 2, HPD_MEM_OK, "39 of 64 MiB, a dump of 16" },
		{ 41, 38, 16, 0, 0, 2, HPD_MEM_SHED, "41 MiB: what can be rebuilt first" },
		{ 41, 38, 0, 0, 0, 2, HPD_MEM_OK, "41 MiB but dumps are small" },
		{ 41, 38, 16, 10, 0, 2, HPD_MEM_HOLD, "41 MiB just after dropping caches: their memory comes back" },
		{ 45, 42, 16, 10, 0, 2, HPD_MEM_END, "45 MiB (with the dump, past the budget less half the margin)" },
		{ 41, 38, 16, 300, 0, 2, HPD_MEM_END, "still 41 MiB 300 ms after dropping caches" },
		{ 41, 38, 16, 300, 20, 2, HPD_MEM_HOLD, "... but a session ended 20 ms ago" },
		{ 41, 38, 16, 1500, 0, 2, HPD_MEM_SHED, "1.5 s after caches were dropped" },
		{ 41, 38, 16, 300, 0, 0, HPD_MEM_HOLD, "no session to end" },
		{ 2, 1, 70, 300, 0, 1, HPD_MEM_END, "a session whose dump alone would pass the budget" },
		{ 41, 6, 16, 300, 0, 2, HPD_MEM_OWN, "41 MiB of which the sessions hold 6" },
		{ 45, 6, 16, 300, 0, 2, HPD_MEM_END, "... 45 MiB (with the dump, nearly the budget)" },
	};
	struct hpd_mem_view none = { .budget = 0, .used = 1ULL << 40 };

	tap_ok(hpd_mem_decide(&none) == HPD_MEM_OK, "no budget: nothing ever done");
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct hpd_mem_view v = {
			.budget = 64 * MiB, .used = c[i].used * MiB, .held = c[i].held * MiB,
			.reserve = c[i].reserve * MiB,
			.now_ms = 100000, .nsessions = c[i].nsessions,
			.shed_ms = c[i].shed_ago ? 100000 - c[i].shed_ago : 0,
			.end_ms = c[i].end_ago ? 100000 - c[i].end_ago : 0,
		};
		enum hpd_mem_act got = hpd_mem_decide(&v);

		tap_ok(got == c[i].want, "%s: %s (%s)", c[i].what, names[c[i].want], names[got]);
	}
}

static void test_pick(void)
{
	struct hpd_mem_use u[] = {
		{ 1000, 10 * MiB, MiB }, { 1000, 12 * MiB, MiB }, { 2000, 20 * MiB, MiB },
		{ 1000, 2 * MiB, 0 },
	};

	tap_ok(hpd_mem_pick(u, 4) == 1,
	       "uid 1000 holds 27 MiB in three sessions, uid 2000 21 in one: uid 1000's largest ends (%d)",
	       hpd_mem_pick(u, 4));
	u[2].held = 40 * MiB;
	tap_ok(hpd_mem_pick(u, 4) == 2, "uid 2000 grown to 41 MiB: its session ends (%d)",
	       hpd_mem_pick(u, 4));
	tap_ok(hpd_mem_pick(u, 0) == -1, "no session: none");
}

/* This process's RssAnon + VmSwap. */
static uint64_t anon(void)
{
	char buf[8192] = "\n";
	FILE *f = fopen("/proc/self/status", "re");
	size_t n = f ? fread(buf + 1, 1, sizeof(buf) - 2, f) : 0;
	uint64_t a = 0;

	if (f)
		fclose(f);
	buf[n + 1] = 0;
	hpd_mem_parse_status(buf, &a);
	return a;
}

/* Sessions whose pipeline says what it holds; n of them. */
static struct hpd_session sess[3];
static struct hp_proc procs[3];

static void sessions(void)
{
	memset(sess, 0, sizeof(sess));
	memset(procs, 0, sizeof(procs));
	hpd_sessions = NULL;
	for (int i = 2; i >= 0; i--) {
		sess[i].pid = 100 + i;
		sess[i].uid = 1000 + i;
		snprintf(sess[i].comm, sizeof(sess[i].comm), "prog%d", i);
		sess[i].enabled = 1;
		sess[i].formats = HP_OUT_PPROF | HP_OUT_FOLDED | HP_OUT_SVG | HP_OUT_TEXT;
		sess[i].proc = &procs[i];
		sess[i].next = hpd_sessions;
		hpd_sessions = &sess[i];
	}
	procs[0].st.mem_bytes = 2 * MiB;
	procs[1].st.mem_bytes = 30 * MiB;
	procs[1].st.queued_bytes = MiB;
	procs[1].st.dump_samples = 10000;
	procs[1].st.dump_locs = 400000;
	procs[2].st.mem_bytes = 3 * MiB;
}

static void test_look(void)
{
	char why[300];
	struct hpd_mem_stats st;
	uint64_t held, reserve, now = 5000000, level;
	char **mem;
	size_t k;

	/* This process's RssAnon is the daemon's, here: 64 MiB of budget. */
	if (hpd_mem_option("max-memory", "64M", why, sizeof(why)) || hpd_mem_init()) {
		tap_ok(0, "the budget set: %s", why);
		return;
	}
	sessions();
	hpd_mem_session(&sess[1], &held, &reserve);
	/* Malloc's free memory would count as this process's: none kept. */
	mallopt(M_TRIM_THRESHOLD, 0);
	mallopt(M_MMAP_THRESHOLD, 64 << 10);
	tap_ok(held == 31 * MiB && reserve == hpd_mem_dump_cost(10000, 400000, 0),
	       "a session's share: its pipeline's memory and queue (%llu), its dump's need (%llu)",
	       (unsigned long long)held, (unsigned long long)reserve);
	tap_ok(hpd_mem_queue_max() == MiB, "records queued per process: a 64th of the budget (%llu)",
	       (unsigned long long)hpd_mem_queue_max());
	hpd_mem_check(now);
	hpd_mem_get_stats(&st);
	tap_ok(!ended_s && !st.sheds && st.budget == 64 * MiB && st.used > 0 && st.used < 32 * MiB,
	       "the test's own %llu bytes: nothing done", (unsigned long long)st.used);
	tap_ok(st.held == 36 * MiB, "the sessions' share summed: %llu", (unsigned long long)st.held);

	/*
	 * Past the level (64 MiB less the margin, 8, less the largest dump),
	 * by less than half the margin: touched a MiB at a time until this
	 * process's own RssAnon says so.
	 */
	level = 56 * MiB - reserve;
	mem = calloc(64, sizeof(*mem));
	for (k = 0; mem && k < 64 && anon() < level + MiB; k++)
		if ((mem[k] = malloc(MiB)))
			memset(mem[k], 1, MiB);
	tap_diag("%zu MiB touched: RssAnon %llu, acting from %llu", k,
		 (unsigned long long)anon(), (unsigned long long)level);
	/* A tick a millisecond after the last look (a session waiting for
	 * the pipeline ticks so): /proc is not read again yet. */
	hpd_mem_check(now + 1);
	hpd_mem_get_stats(&st);
	tap_ok(st.sheds == 0 && !ended_s, "a tick 1 ms after the last look: not looked again yet (%llu sheds)",
	       (unsigned long long)st.sheds);
	now += HPD_TICK_MS;
	hpd_mem_check(now);
	hpd_mem_get_stats(&st);
	tap_ok(st.sheds == 1 && procs[0].shed == 1 && procs[1].shed == 1 && procs[2].shed == 1 &&
	       !ended_s, "%llu bytes held: every session's memo dropped, no session ended yet",
	       (unsigned long long)st.used);
	tap_ok(hpd_mem_hold(), "... and the drains wait while that memory comes back");
	tap_ok(hpd_mem_wake_ms(now) > 0 && hpd_mem_wake_ms(now) <= HPD_MEM_SETTLE_MS,
	       "... the loop is woken when the wait is over (%d ms)", hpd_mem_wake_ms(now));
	now += HPD_MEM_SETTLE_MS + 1;
	hpd_mem_check(now);
	hpd_mem_get_stats(&st);
	tap_ok(ended_s == &sess[1] && st.ended == 1,
	       "still too much: the largest session ends (pid %d)", ended_s ? (int)ended_s->pid : 0);
	tap_ok(drained[0] == 1 && drained[2] == 1 && drained[1] == 0,
	       "... after the others' rings were emptied (%d %d), not its own (%d)", drained[0],
	       drained[2], drained[1]);
	tap_ok(!(sess[1].formats & (HP_OUT_SVG | HP_OUT_FOLDED)) &&
	       (sess[1].formats & (HP_OUT_PPROF | HP_OUT_TEXT)) == (HP_OUT_PPROF | HP_OUT_TEXT),
	       "... its profile written as pprof and text (formats %#x)", sess[1].formats);
	tap_ok(strstr(ended_why, "the daemon's memory budget (--max-memory 64.0 MiB): it held ") &&
	       strstr(ended_why, "this session 31.0 MiB, the most"), "... why: %s", ended_why);
	ended_s = NULL;
	hpd_mem_check(now + HPD_TICK_MS);
	tap_ok(!ended_s, "the next look, a tick later: no second session ended while the first's memory comes back");
	for (k = 0; mem && k < 64; k++)
		free(mem[k]);
	free(mem);
	now += 2000;
	hpd_mem_check(now);
	hpd_mem_get_stats(&st);
#ifdef __SANITIZE_ADDRESS__
	/* ASan's allocator keeps what is freed (its quarantine). */
	tap_ok(!ended_s && st.ended == 1 && st.peak >= level,
	       "no second session ended, %llu bytes at most # SKIP ASan keeps freed memory",
	       (unsigned long long)st.peak);
#else
	tap_ok(!ended_s && st.ended == 1 && st.used < 40 * MiB && st.peak >= level,
	       "the memory given back: %llu bytes now, %llu at most", (unsigned long long)st.used,
	       (unsigned long long)st.peak);
#endif
	tap_ok(!hpd_mem_hold() && hpd_mem_wake_ms(now) < 0, "the drains go on; no wake-up wanted");

	/* The drain's own look: every HPD_MEM_FED_STEP records. */
	tap_ok(hpd_mem_fed(HPD_MEM_FED_STEP - 1) == 0, "the drain: nothing to say before %u records",
	       HPD_MEM_FED_STEP);
	procs[2].st.mem_bytes = 60 * MiB;
	tap_ok(hpd_mem_fed(1) == 1, "a session grown by 57 MiB since the last reading: the drain stops");
	hpd_mem_fini();
}

static void test_cpu(void)
{
	char why[300] = "";

	tap_ok(hpd_cpu_pause(240, 1000, 25) == 0, "CPU: 240 ms in a second under 25%%: no wait");
	tap_ok(hpd_cpu_pause(260, 1000, 25) == 40, "... 260 ms: the drains wait 40 ms (%llu)",
	       (unsigned long long)hpd_cpu_pause(260, 1000, 25));
	tap_ok(hpd_cpu_pause(900, 1000, 25) == HPD_CPU_STEP_MS,
	       "... 900 ms: %u ms at a time, then a look again", HPD_CPU_STEP_MS);
	tap_ok(hpd_cpu_pause(90, 50, 25) == 0, "... not before %u ms of the window", HPD_CPU_MIN_WINDOW_MS);
	tap_ok(hpd_cpu_pause(900, 1000, 0) == 0, "... no cap: never");
	tap_ok(hpd_cpu_option("max-cpu", "25", why, sizeof(why)) == 0, "--max-cpu 25 taken");
	why[0] = 0;
	tap_ok(hpd_cpu_option("max-cpu", "-5", why, sizeof(why)) < 0 && strstr(why, "percent of one CPU"),
	       "--max-cpu -5 refused: %s", why);
	why[0] = 0;
	tap_ok(hpd_cpu_option("max-cpu", "100000", why, sizeof(why)) < 0 && strstr(why, "out of range"),
	       "--max-cpu past every CPU of the machine refused: %s", why);
}

int main(void)
{
	hpd_verbosity = HPD_ERR;
	test_options();
	test_status();
	test_cost();
	test_decide();
	test_pick();
	test_look();
	test_cpu();
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
