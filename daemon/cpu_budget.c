// SPDX-License-Identifier: GPL-2.0
/*
 * What the daemon may spend of the CPU: --max-cpu PCT, in percent of one
 * CPU, all its threads counted (heapprofd(8); the admin guide's "Limits").
 *
 * Nearly all of the daemon's CPU time follows from what it drains: each
 * record copied out of a ring is parsed, unwound by a worker (the bulk),
 * booked. So the cap is kept where the records come in: once the daemon
 * has spent more than PCT% of a CPU over the last second (its process CPU
 * clock against the wall clock), the drains wait until the average is back
 * under the cap, at most HPD_CPU_STEP_MS at a time, then look again. The
 * workers finish what is queued meanwhile (a cap keeps that little:
 * HPD_CPU_QUEUE_MAX a process). The
 * rings fill in the meantime: their clients wait for room, or sample less,
 * or drop and count, as the ring-full policy says (client.rst): the cap
 * slows or thins the profiles, never the daemon's other duties (the
 * control socket, hellos, exits, dumps).
 *
 * The kernel can cap a service exactly too (systemd's CPUQuota=, a cgroup's
 * cpu.max); this cap is the daemon's own, the same wherever it runs, and
 * waits in the drain rather than in the middle of a dump or a reply.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hpd.h"

static unsigned cap_pct;		/* 0: no cap */
static struct hpd_cpu_stats stats;
/* The process CPU clock sampled every HPD_TICK_MS over the window. */
#define NPTS	(HPD_CPU_WINDOW_MS / HPD_TICK_MS + 2)
static struct { uint64_t ms, cpu_ns; } pts[NPTS];
static unsigned npts, first;
static uint64_t hold_until;
static unsigned fed;			/* records since the drain last looked */

int hpd_cpu_option(const char *name, const char *arg, char *why, size_t wl)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned long long v;
	char w[200];

	if (strcmp(name, "max-cpu")) {
		snprintf(why, wl, "--%s: not an option of the CPU budget", name);
		return -1;
	}
	/* Up to every CPU of the machine (a daemon with many workers). */
	if (hp_parse_num(arg, 0, 100ULL * (unsigned long long)(ncpu > 0 ? ncpu : 1), &v, w, sizeof(w))) {
		snprintf(why, wl, "--%s: %s (percent of one CPU)", name, w);
		return -1;
	}
	cap_pct = (unsigned)v;
	stats.cap_pct = cap_pct;
	return 0;
}

/*
 * How long the drains wait, given spent_ms of CPU over elapsed_ms of wall
 * time: until spent_ms is pct% of the time since the window's start, at
 * most HPD_CPU_STEP_MS; 0 when within the cap.
 */
uint64_t hpd_cpu_pause(uint64_t spent_ms, uint64_t elapsed_ms, unsigned pct)
{
	uint64_t need;

	if (!pct || elapsed_ms < HPD_CPU_MIN_WINDOW_MS || spent_ms * 100 <= elapsed_ms * pct)
		return 0;
	need = spent_ms * 100 / pct - elapsed_ms;
	return need < HPD_CPU_STEP_MS ? (need ? need : 1) : HPD_CPU_STEP_MS;
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void hpd_cpu_tick(uint64_t now)
{
	uint64_t c, spent, elapsed, pause;
	unsigned last;

	if (!cap_pct || (hold_until && now < hold_until))
		return;
	c = cpu_ns();
	last = (first + npts + NPTS - 1) % NPTS;
	if (!npts || now - pts[last].ms >= HPD_TICK_MS) {
		if (npts == NPTS) {
			first = (first + 1) % NPTS;
			npts--;
		}
		last = (first + npts) % NPTS;
		pts[last].ms = now;
		pts[last].cpu_ns = c;
		npts++;
	}
	/* The window: from the oldest sample less than a window old. */
	while (npts > 1 && now - pts[first].ms > HPD_CPU_WINDOW_MS) {
		first = (first + 1) % NPTS;
		npts--;
	}
	elapsed = now - pts[first].ms;
	spent = (c - pts[first].cpu_ns) / 1000000;
	stats.used_pct = elapsed ? (unsigned)(spent * 100 / elapsed) : 0;
	pause = hpd_cpu_pause(spent, elapsed, cap_pct);
	hold_until = pause ? now + pause : 0;
	stats.held_ms += pause;
	stats.holds += !!pause;
}

uint64_t hpd_cpu_queue_max(void)
{
	/*
	 * The workers finish what is queued while the drains wait: under a
	 * cap, little (a slow machine took seconds to unwind the 8 MiB a
	 * process may queue by default, at full speed).
	 */
	return cap_pct ? HPD_CPU_QUEUE_MAX : 0;
}

int hpd_cpu_fed(unsigned n)
{
	/* A drain can run long (it waits for room in the queue as it feeds):
	 * the clock is read every HPD_CPU_FED_STEP records of it too. */
	if (!cap_pct || (fed += n) < HPD_CPU_FED_STEP)
		return 0;
	fed = 0;
	hpd_cpu_tick(hpd_now_ms());
	return hpd_cpu_hold();
}

int hpd_cpu_hold(void)
{
	return hold_until && hpd_now_ms() < hold_until;
}

int hpd_cpu_wake_ms(uint64_t now)
{
	if (!hold_until)
		return -1;
	return now >= hold_until ? 0 : (int)(hold_until - now);
}

void hpd_cpu_init(void)
{
	if (cap_pct)
		hpd_log(HPD_INFO, "CPU budget: %u%% of a CPU (--max-cpu): the drains wait when the daemon spent more over the last second",
			cap_pct);
}

void hpd_cpu_get_stats(struct hpd_cpu_stats *st)
{
	*st = stats;
}
