// SPDX-License-Identifier: GPL-2.0
/*
 * What the daemon may hold in memory: a budget (--max-memory) for all it
 * allocates, and what it does when a session would take it past it
 * (heapprofd(8); the admin guide's "Limits").
 *
 * The books of a process grow with its distinct call stacks and its live
 * sampled blocks, not with its allocation rate, and the process decides
 * both: a program with millions of call paths (or a hostile one writing
 * made-up stacks) makes the daemon hold gigabytes. So:
 *
 *   - what counts is the daemon's anonymous memory as the kernel has it
 *     (RssAnon and VmSwap of /proc/self/status): every book, cache and
 *     queue it allocates, whatever keeps it; and the private copies of
 *     files other users could shrink (shared memory; together at most a
 *     quarter of the budget, a file past it is not opened). Rings and
 *     mapped files are not counted: the rings are the profiled processes'
 *     memory (charged to them) and mapped files are page cache the kernel
 *     may take back;
 *   - each session's share is what the pipeline says it holds (call-site
 *     tree, live allocations, unwind memo, maps snapshots, queued records,
 *     hp_proc_get_stats) plus its copy buffer; and a dump of it needs room
 *     of its own while it is written (the profile in memory, each format):
 *     the reserve, from the size of the profile it would write;
 *   - the daemon acts before the budget is reached, at the budget less a
 *     margin for what the books may grow until the next look (an eighth)
 *     and less the reserve of the largest dump: first it lets go of what
 *     can be rebuilt (the unwind memos, and the memory malloc keeps free),
 *     then, if that was not enough, it ends one session: the largest of
 *     the user whose sessions hold the most (a user cannot get another
 *     user's session ended by running many of its own). The session's
 *     profile is written as for any early end, saying why in its header;
 *     the log and `heapprofctl sessions` say so too. One at a time: the
 *     next is ended only once the first one's memory is given back, the
 *     drains waiting meanwhile (HPD_MEM_SETTLE_MS at most).
 *
 * The event loop looks at every tick, and the drain every HPD_MEM_FED_STEP
 * records (cheap: the pipeline's counters; /proc is read on the tick).
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hpd.h"

struct hpd_mem_cfg hpd_mem_cfg;
static int given;
static struct hpd_mem_stats stats;
static int status_fd = -1;
static uint64_t anon_read;		/* the last reading of /proc/self/status */
static uint64_t held_read;		/* the sessions' share then */
static uint64_t shed_ms, end_ms;	/* when caches were dropped, a session ended */
static unsigned fed;			/* records since the drain last looked */
static int look_due;			/* a drain stopped for hpd_mem_check */
static uint64_t checked_ms;		/* when hpd_mem_check last looked */
static uint64_t debug_ms;
static uint64_t trims[4];		/* malloc_trim then (0: not due) */
static uint64_t freed_seen;		/* processes the pipeline had freed then */
static uint64_t hold_until;		/* the drains wait until then */
static uint64_t own_ms;			/* when the daemon's own memory was last said */
static int draining_others;		/* end_one empties the others' rings */

/* ---- options ---- */

int hpd_mem_option(const char *name, const char *arg, char *why, size_t wl)
{
	char w[200], b[32];
	uint64_t v;
	unsigned pct = 0;

	if (strcmp(name, "max-memory")) {
		snprintf(why, wl, "--%s: not an option of the memory budget", name);
		return -1;
	}
	if (hpd_budget_parse_size(arg, &v, &pct, w, sizeof(w))) {
		snprintf(why, wl, "--%s: %s", name, w);
		return -1;
	}
	if (v && v < HPD_MEM_MIN) {
		snprintf(why, wl, "--%s: %s is below the least the daemon needs (%s), or 0 for no bound",
			 name, arg, hpd_budget_size_str(HPD_MEM_MIN, b, sizeof(b)));
		return -1;
	}
	hpd_mem_cfg.max = v;
	hpd_mem_cfg.pct = pct;
	hpd_mem_cfg.cap = 0;	/* as given */
	given = 1;
	return 0;
}

void hpd_mem_defaults(int private_mode)
{
	if (given)
		return;
	/*
	 * The system daemon serves every user: a quarter of the machine's
	 * memory, at most HPD_MEM_CAP. A private daemon profiles its user's
	 * own program for that user, within that user's limits.
	 */
	hpd_mem_cfg.max = 0;
	hpd_mem_cfg.pct = private_mode ? 0 : HPD_MEM_PCT;
	hpd_mem_cfg.cap = HPD_MEM_CAP;
}

uint64_t hpd_mem_resolve(uint64_t phys)
{
	const struct hpd_mem_cfg *c = &hpd_mem_cfg;
	uint64_t b;

	if (!c->pct)
		return c->max;
	b = phys / 100 * c->pct + phys % 100 * c->pct / 100;
	if (c->cap && b > c->cap)
		b = c->cap;
	return b < HPD_MEM_MIN ? HPD_MEM_MIN : b;
}

/* ---- measuring ---- */

/* "RssAnon:   1234 kB" and "VmSwap: ..." of /proc/self/status, in bytes. */
int hpd_mem_parse_status(const char *buf, uint64_t *anon)
{
	static const char *const keys[] = { "\nRssAnon:", "\nVmSwap:" };
	int found = 0;

	*anon = 0;
	for (size_t k = 0; k < 2; k++) {
		const char *p = strstr(buf, keys[k]);
		unsigned long long v;
		char *end;

		if (!p)
			continue;
		p += strlen(keys[k]);
		errno = 0;
		v = strtoull(p, &end, 10);
		if (end == p || errno || strncmp(end, " kB", 3) || v > (UINT64_MAX >> 10))
			return -1;
		*anon += (uint64_t)v << 10;
		found |= 1 << k;
	}
	return found & 1 ? 0 : -1;	/* VmSwap is missing without swap support */
}

/* Private copies of files others could shrink (the pipeline's ELF cache):
 * shared memory, not in RssAnon, but the daemon's all the same. */
static uint64_t copies(void)
{
	return hpd_pipe ? hp_pipeline_copied_bytes(hpd_pipe) : 0;
}

static int read_anon(uint64_t *anon)
{
	char buf[4096];
	ssize_t n;

	if (status_fd < 0)
		return -1;
	n = pread(status_fd, buf + 1, sizeof(buf) - 2, 0);
	if (n <= 0)
		return -1;
	buf[0] = '\n';
	buf[n + 1] = 0;
	return hpd_mem_parse_status(buf, anon);
}

/*
 * What one dump of a profile of this size holds while it is written: the
 * profile (a sample per call site, the frames of its stack, the locations
 * with their names) and the largest format being made from it (pprof's
 * message and its encoding; the flame graph's merged tree). Measured with
 * tests/e2e/mem-budget's programs and rounded up; see the admin guide.
 */
uint64_t hpd_mem_dump_cost(uint64_t samples, uint64_t locs, uint64_t locations)
{
	return HPD_MEM_DUMP_BASE + samples * HPD_MEM_DUMP_PER_SAMPLE +
	       locs * HPD_MEM_DUMP_PER_FRAME + locations * HPD_MEM_DUMP_PER_LOC;
}

void hpd_mem_session(struct hpd_session *s, uint64_t *held, uint64_t *reserve)
{
	struct hp_proc_stats st;

	*held = s->buflen + (s->kbuf ? HPD_KREC_BUF : 0);
	*reserve = 0;
	if (!s->proc || s->ending)
		return;
	hp_proc_get_stats(s->proc, &st);
	*held += st.mem_bytes + st.queued_bytes;
	*reserve = hpd_mem_dump_cost(st.dump_samples, st.dump_locs, st.dump_locations);
	if (s->rule && s->rule->dump_at_max)
		*reserve *= 2;	/* the peak's profile too, at the end */
}

/* ---- deciding ---- */

enum hpd_mem_act hpd_mem_decide(const struct hpd_mem_view *v)
{
	uint64_t margin = v->budget / 8, level;
	int settling, urgent;

	if (!v->budget)
		return HPD_MEM_OK;
	/* The dump of the largest session must fit too, with the margin. */
	level = v->budget > margin + v->reserve ? v->budget - margin - v->reserve : 0;
	if (v->used < level)
		return HPD_MEM_OK;
	/* What can be rebuilt goes first; once a second at most. */
	if (!v->shed_ms || v->now_ms - v->shed_ms >= HPD_MEM_SHED_EVERY_MS)
		return HPD_MEM_SHED;
	/*
	 * Caches dropped or a session ended a moment ago: their memory is
	 * being given back (the books let go of it after the jobs queued
	 * before it). Meanwhile nothing more is fed, unless the budget is
	 * about to be passed all the same.
	 */
	settling = (v->now_ms - v->shed_ms < HPD_MEM_SETTLE_MS) ||
		   (v->end_ms && v->now_ms - v->end_ms < HPD_MEM_SETTLE_MS);
	urgent = v->used + v->reserve >= v->budget - margin / 2;
	if (settling && !urgent)
		return HPD_MEM_HOLD;
	/*
	 * Ending a session gives back what the sessions hold. When that is
	 * little, the rest is the daemon's own (libraries' caches, memory
	 * malloc keeps but cannot return): no session is ended for it until
	 * the budget is about to be passed all the same.
	 */
	if (!urgent && v->held < level / 2)
		return HPD_MEM_OWN;
	return v->nsessions ? HPD_MEM_END : HPD_MEM_HOLD;
}

/*
 * The session to end: the largest of the uid whose sessions hold the most
 * (held and reserve counted), so that the many sessions of one user do not
 * cost another user its one. -1 if none.
 */
int hpd_mem_pick(const struct hpd_mem_use *u, size_t n)
{
	uid_t worst = 0;
	uint64_t most = 0;
	int best = -1;
	size_t i, k;

	for (i = 0; i < n; i++) {
		uint64_t sum = 0;

		for (k = 0; k < n; k++)
			if (u[k].uid == u[i].uid)
				sum += u[k].held + u[k].reserve;
		if (best < 0 || sum > most) {
			most = sum;
			worst = u[i].uid;
			best = (int)i;
		}
	}
	for (i = 0; best >= 0 && i < n; i++)
		if (u[i].uid == worst && u[i].held + u[i].reserve > u[best].held + u[best].reserve)
			best = (int)i;
	return best;
}

/* ---- acting ---- */

static size_t nuse, capuse;
static struct hpd_mem_use *use;
static struct hpd_session **use_s;

/* Every live session's share; the total and the largest reserve. */
static void survey(uint64_t *held, uint64_t *reserve)
{
	struct hpd_session *s;
	size_t n = 0;

	*held = *reserve = 0;
	for (s = hpd_sessions; s; s = s->next)
		n += !s->ending;
	if (n > capuse) {
		struct hpd_mem_use *nu = realloc(use, n * sizeof(*nu));
		struct hpd_session **ns = nu ? realloc(use_s, n * sizeof(*ns)) : NULL;

		if (nu)
			use = nu;
		if (ns)
			use_s = ns;
		if (!nu || !ns)
			return;	/* out of memory: counted at the next look */
		capuse = n;
	}
	nuse = 0;
	for (s = hpd_sessions; s; s = s->next) {
		struct hpd_mem_use *u;

		if (s->ending)
			continue;
		u = &use[nuse];
		use_s[nuse++] = s;
		u->uid = s->uid;
		hpd_mem_session(s, &u->held, &u->reserve);
		*held += u->held;
		if (u->reserve > *reserve)
			*reserve = u->reserve;
	}
	stats.held = *held;
	stats.reserve = *reserve;
}

static void shed(uint64_t now)
{
	struct hpd_session *s;

	for (s = hpd_sessions; s; s = s->next)
		if (!s->ending && s->proc)
			hp_proc_shed(s->proc);
	malloc_trim(0);
	shed_ms = now;
	stats.sheds++;
}

/* End the session of use[i]: why in its profile, the log and `sessions`. */
static void end_one(int i, uint64_t used, uint64_t now)
{
	struct hpd_session *s = use_s[i];
	char why[160], b[4][32];
	unsigned others = 0;

	for (size_t k = 0; k < nuse; k++)
		others += use[k].uid == use[i].uid && (int)k != i;
	snprintf(why, sizeof(why), "the daemon's memory budget (--max-memory %s): it held %s, this session %s%s",
		 hpd_budget_size_str(stats.budget, b[0], sizeof(b[0])),
		 hpd_budget_size_str(used, b[1], sizeof(b[1])),
		 hpd_budget_size_str(use[i].held, b[2], sizeof(b[2])),
		 others ? ", the most of its user's" : ", the most");
	hpd_log(HPD_WARN, "memory budget: %s of %s held, %s of it by %u session(s) (a dump would need %s more): ending pid %d (%s, uid %d), %s",
		hpd_budget_size_str(used, b[0], sizeof(b[0])),
		hpd_budget_size_str(stats.budget, b[1], sizeof(b[1])),
		hpd_budget_size_str(stats.held, b[2], sizeof(b[2])), (unsigned)nuse,
		hpd_budget_size_str(stats.reserve, b[3], sizeof(b[3])), (int)s->pid, s->comm,
		(int)s->uid, hpd_budget_size_str(use[i].held, b[0], sizeof(b[0])));
	stats.ended++;
	end_ms = now;
	/*
	 * Its dump holds up the event loop (a large profile: a second or
	 * so; far more on a slow machine): the other sessions' rings are
	 * emptied first, so that each has all its room to wait in.
	 */
	hold_until = 0;
	draining_others = 1;
	for (size_t k = 0; k < nuse; k++)
		if ((int)k != i && !use_s[k]->ending && use_s[k]->enabled)
			hpd_session_drain(use_s[k], 0);
	draining_others = 0;
	/*
	 * What is still in its own ring is not read: it would only grow its
	 * books. Its profile is written as pprof and text: the flame graph
	 * and folded stacks of a profile this large took most of the dump's
	 * time (measured in the emulated guest: 6.8 s of all four formats,
	 * 1.3 s of these two), and `heapprofctl report --svg` makes them
	 * from the pprof later.
	 */
	s->formats &= ~(unsigned)(HP_OUT_SVG | HP_OUT_FOLDED);
	hpd_session_end(s, why);
	malloc_trim(0);
	hpd_log(HPD_INFO, "memory budget: pid %d's session ended and written in %llu ms", (int)s->pid,
		(unsigned long long)(hpd_now_ms() - now));
}

/* Memory the books let go of is given back to the system a moment later. */
static void trim_later(uint64_t now)
{
	static const unsigned after_ms[] = { 50, 200, 1000, 4000 };

	for (size_t k = 0; k < sizeof(after_ms) / sizeof(after_ms[0]); k++)
		trims[k] = now + after_ms[k];
}

/*
 * An ended session's books and caches are freed by the pipeline's threads
 * after its end, when they come to it: seconds later on a loaded machine
 * (a guest the host did not run for ten seconds), after the trims that
 * followed the end. So a process freed since the last look is trimmed
 * for at once and again a moment later; while one is on its way out the
 * loop looks every HPD_MEM_GONE_POLL_MS (hpd_mem_wake_ms). Returns 1 when
 * one was freed since the last call.
 */
#define HPD_MEM_GONE_POLL_MS	100

static int procs_gone(void)
{
	uint64_t ended, freed;

	if (!hpd_pipe)
		return 0;
	hp_pipeline_procs_gone(hpd_pipe, &ended, &freed);
	if (freed == freed_seen)
		return 0;
	freed_seen = freed;
	return 1;
}

static void debug_survey(uint64_t now, uint64_t anon, uint64_t held)
{
	if (hpd_verbosity < HPD_DEBUG || now - debug_ms < 1000)
		return;
	debug_ms = now;
	for (size_t k = 0; k < nuse; k++) {
		struct hp_proc_stats st;

		if (!use_s[k]->proc)
			continue;
		hp_proc_get_stats(use_s[k]->proc, &st);
		hpd_log(HPD_DEBUG, "memory: pid %d: held %llu (pipeline %llu, queued %llu), dump %llu (samples %llu, frames %llu, locations %llu; live %llu)",
			(int)use_s[k]->pid, (unsigned long long)use[k].held,
			(unsigned long long)st.mem_bytes, (unsigned long long)st.queued_bytes,
			(unsigned long long)use[k].reserve, (unsigned long long)st.dump_samples,
			(unsigned long long)st.dump_locs, (unsigned long long)st.dump_locations,
			(unsigned long long)st.live_allocs);
	}
	hpd_log(HPD_DEBUG, "memory: anonymous %llu, sessions %llu", (unsigned long long)anon,
		(unsigned long long)held);
}

/* Read what the daemon holds now (held: the sessions' share now). */
static void measure(uint64_t held)
{
	uint64_t anon;

	/* Without /proc (it cannot be read), the sessions' books alone. */
	anon_read = (read_anon(&anon) == 0 ? anon : held) + copies();
	held_read = held;
}

void hpd_mem_check(uint64_t now)
{
	uint64_t held, reserve;
	int trimmed = 0;

	if (!stats.budget) {
		fed = 0;
		return;
	}
	if (procs_gone()) {
		trim_later(now);
		malloc_trim(0);
	}
	/* The loop ticks every millisecond while a session waits for the
	 * pipeline (hpd_pipe_wait): /proc is read at the ticks' usual pace,
	 * or at once when a drain stopped for a look (hpd_mem_fed) or a
	 * wake-up asked for is due (hpd_mem_wake_ms says 0 until it ran). */
	if (!look_due && hpd_mem_wake_ms(now) != 0 && checked_ms && now >= checked_ms &&
	    now - checked_ms < HPD_TICK_MS)
		return;
	look_due = 0;
	checked_ms = now;
	fed = 0;
	for (size_t k = 0; k < sizeof(trims) / sizeof(trims[0]); k++)
		if (trims[k] && now >= trims[k]) {
			trims[k] = 0;
			trimmed = 1;
		}
	if (trimmed)
		malloc_trim(0);
	survey(&held, &reserve);
	measure(held);
	debug_survey(now, anon_read, held);
	hold_until = 0;
	for (int round = 0; round < 4; round++) {
		struct hpd_mem_view v = {
			.budget = stats.budget, .used = anon_read, .held = held, .reserve = reserve,
			.now_ms = now, .shed_ms = shed_ms, .end_ms = end_ms, .nsessions = nuse,
		};
		enum hpd_mem_act act;
		char b[4][32];
		int i;

		stats.used = v.used;
		if (v.used > stats.peak)
			stats.peak = v.used;
		act = hpd_mem_decide(&v);
		if (act == HPD_MEM_OK)
			return;
		if (act == HPD_MEM_OWN) {
			if (!own_ms || now - own_ms >= 60000) {
				own_ms = now;
				hpd_log(HPD_WARN, "memory budget: %s of %s held, only %s of it by the sessions: the rest is the daemon's own (caches, memory malloc cannot give back); no session is ended for it before the budget is nearly reached",
					hpd_budget_size_str(v.used, b[0], sizeof(b[0])),
					hpd_budget_size_str(stats.budget, b[1], sizeof(b[1])),
					hpd_budget_size_str(held, b[2], sizeof(b[2])));
			}
			return;
		}
		if (act == HPD_MEM_HOLD) {
			/* Until the settling ends, when the tick looks again. */
			hold_until = (shed_ms > end_ms ? shed_ms : end_ms) + HPD_MEM_SETTLE_MS;
			stats.holds++;
			return;
		}
		if (act == HPD_MEM_SHED) {
			shed(now);
			hpd_log(HPD_INFO, "memory budget: %s of %s held (sessions %s, a dump would need %s more): dropped the unwind memos and malloc's free memory",
				hpd_budget_size_str(v.used, b[0], sizeof(b[0])),
				hpd_budget_size_str(stats.budget, b[1], sizeof(b[1])),
				hpd_budget_size_str(held, b[2], sizeof(b[2])),
				hpd_budget_size_str(reserve, b[3], sizeof(b[3])));
			trim_later(now);
		} else {
			i = hpd_mem_pick(use, nuse);
			if (i < 0)
				return;
			end_one(i, v.used, now);
			/* From the end of its dump, which took a while; the next
			 * look sees what came back (one session at a time). */
			trim_later(hpd_now_ms());
			survey(&held, &reserve);
			measure(held);
			return;
		}
		measure(held);
	}
}

int hpd_mem_fed(unsigned n)
{
	uint64_t held, reserve;
	struct hpd_mem_view v;
	enum hpd_mem_act act;

	if (!stats.budget || draining_others || (fed += n) < HPD_MEM_FED_STEP)
		return 0;
	fed = 0;
	/* Between readings, the sessions' growth since the last one. */
	survey(&held, &reserve);
	memset(&v, 0, sizeof(v));
	v.budget = stats.budget;
	v.used = anon_read + (held > held_read ? held - held_read : 0);
	v.held = held;
	v.reserve = reserve;
	v.now_ms = hpd_now_ms();
	v.shed_ms = shed_ms;
	v.end_ms = end_ms;
	v.nsessions = nuse;
	act = hpd_mem_decide(&v);
	if (act == HPD_MEM_OK || act == HPD_MEM_OWN)
		return 0;
	look_due = 1;
	return 1;
}

int hpd_mem_hold(void)
{
	return hold_until && hpd_now_ms() < hold_until;
}

uint64_t hpd_mem_copy_max(void)
{
	/* The copies of other users' files (shared memory): a quarter. */
	return stats.budget / 4;
}

uint64_t hpd_mem_queue_max(void)
{
	/* Records in flight may each grow the books several times their size
	 * once unwound: at most a sixty-fourth of the budget per process. */
	return stats.budget ? stats.budget / 64 : 0;
}

int hpd_mem_wake_ms(uint64_t now)
{
	int ms = -1;

	for (size_t k = 0; k < sizeof(trims) / sizeof(trims[0]); k++)
		if (trims[k])
			ms = hpd_sooner(ms, now >= trims[k] ? 0 : (int)(trims[k] - now));
	if (hold_until)
		ms = hpd_sooner(ms, now >= hold_until ? 0 : (int)(hold_until - now));
	if (stats.budget && hpd_pipe) {
		uint64_t ended, freed;

		hp_pipeline_procs_gone(hpd_pipe, &ended, &freed);
		if (ended > freed || freed != freed_seen)
			ms = hpd_sooner(ms, HPD_MEM_GONE_POLL_MS);
	}
	return ms;
}

int hpd_mem_init(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t phys = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
	char b[2][32];

	memset(&stats, 0, sizeof(stats));
	stats.budget = hpd_mem_resolve(phys);
	if (!stats.budget)
		return 0;
	status_fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (status_fd < 0 || read_anon(&anon_read)) {
		hpd_log(HPD_WARN, "memory budget: cannot read /proc/self/status (%s): only the sessions' books are counted",
			strerror(errno));
		if (status_fd >= 0)
			close(status_fd);
		status_fd = -1;
		anon_read = 0;
	}
	/* Memory malloc keeps free counts too: keep less of it. */
	if (stats.budget / 16 < (16U << 20))
		mallopt(M_TRIM_THRESHOLD, (int)(stats.budget / 16));
	stats.peak = stats.used = anon_read;
	hpd_log(HPD_INFO, "memory budget: %s (--max-memory%s); %s held now",
		hpd_budget_size_str(stats.budget, b[0], sizeof(b[0])),
		hpd_mem_cfg.pct ? ", of the machine's memory" : "",
		hpd_budget_size_str(anon_read, b[1], sizeof(b[1])));
	return 0;
}

void hpd_mem_fini(void)
{
	if (status_fd >= 0)
		close(status_fd);
	status_fd = -1;
	free(use);
	free(use_s);
	use = NULL;
	use_s = NULL;
	nuse = capuse = 0;
}

void hpd_mem_get_stats(struct hpd_mem_stats *st)
{
	*st = stats;
}
