// SPDX-License-Identifier: GPL-2.0
/*
 * The heap of a process the OOM killer took, and dumps under memory
 * pressure, from the process's cgroup (v2) files:
 *
 *   - memory.events: its oom_kill count. The kernel notifies a change
 *     (poll: EPOLLPRI), and the count is read again when the session ends.
 *     A profiled process that ends within HPD_OOM_WINDOW_MS of a rise of
 *     its cgroup's count is taken as the OOM killer's victim: its last
 *     dump, which is its heap as it stood when it was killed (nothing runs
 *     in a process after SIGKILL), is written as PREFIX.oom.* with the
 *     cgroup's limit and usage in its header, and exported as kind "oom".
 *   - memory.current against memory.max (heapprofctl record
 *     --dump-on-pressure PCT): a dump PREFIX.pressureN.* each time the
 *     usage climbs past PCT% of the limit (again once it fell 5 points
 *     below).
 *
 * With the module, its HEAPPROFD_REC_OOM record (the kernel's
 * oom:mark_victim event, kmod/oom.c) says it for sure, for a process in
 * any cgroup or none.
 *
 * The cgroup is the process's own (/proc/PID/cgroup, read through the
 * session's /proc fd where it has one); what is read there is numbers
 * only, parsed strictly. No cgroup v2 or no memory controller: nothing is
 * watched, the session goes on as before.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "hpd.h"

#define CGROUP_ROOT	"/sys/fs/cgroup"

/* "oom_kill 3" out of memory.events (fd), or -1. */
static long long events_count(int fd, const char *key)
{
	char buf[512], *p;
	ssize_t n;
	size_t kl = strlen(key);

	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	for (p = buf; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, key, kl) && p[kl] == ' ')
			return strtoll(p + kl + 1, NULL, 10);
	return -1;
}

/* Up to len - 1 bytes of the file open on fd (then closed), NUL-ended; the count or -1. */
static ssize_t read_closing(int fd, char *buf, size_t len)
{
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	return n;
}

/* A number file of the cgroup ("max": -2), or -1. */
static long long cg_number(const struct hpd_session *s, const char *file)
{
	char path[sizeof(s->oom.cg) + 64], buf[64], *end;
	unsigned long long v;

	snprintf(path, sizeof(path), "%s/%s", s->oom.cg, file);
	if (read_closing(open(path, O_RDONLY | O_CLOEXEC), buf, sizeof(buf)) < 0)
		return -1;
	if (!strncmp(buf, "max", 3))
		return -2;
	errno = 0;
	v = strtoull(buf, &end, 10);
	if (errno || end == buf || (*end && *end != '\n') || v > (1ULL << 62))
		return -1;
	return (long long)v;
}

/* The cgroup v2 directory of the process, from its /proc/PID/cgroup. */
static int find_cgroup(const struct hpd_session *s, char *out, size_t len)
{
	char path[64], buf[1024], *line;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)s->pid);
	fd = s->proc_fd >= 0 ? openat(s->proc_fd, "cgroup", O_RDONLY | O_CLOEXEC) :
	     open(path, O_RDONLY | O_CLOEXEC);
	if (read_closing(fd, buf, sizeof(buf)) < 0)
		return -1;
	for (line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		if (strncmp(line, "0::/", 4))
			continue;
		/* No way up out of the cgroup tree. */
		if (strstr(line, "/..") || strlen(line + 3) + sizeof(CGROUP_ROOT) >= len)
			return -1;
		snprintf(out, len, "%s%s", CGROUP_ROOT, strcmp(line + 3, "/") ? line + 3 : "");
		return 0;
	}
	return -1;
}

/* Limit and usage now, for the OOM dump's header. */
static void snapshot(struct hpd_session *s, long long kills)
{
	s->oom.at_ms = hpd_now_ms();
	s->oom.kills = kills;
	s->oom.max = cg_number(s, "memory.max");
	s->oom.current = cg_number(s, "memory.current");
	s->oom.peak = cg_number(s, "memory.peak");
}

static void on_event(struct hpd_watch *w, uint32_t ev)
{
	struct hpd_session *s = (struct hpd_session *)((char *)w - offsetof(struct hpd_session,
									  oom.w));
	long long k;

	(void)ev;
	k = events_count(w->fd, "oom_kill");
	if (k > s->oom.kills) {
		hpd_log(HPD_INFO, "pid %d: the OOM killer struck in its cgroup %s (oom_kill %lld)",
			(int)s->pid, s->oom.cg, k);
		snapshot(s, k);
		s->oom.rose = 1;
		/* Whatever the process wrote before the kill, in the books now. */
		if (s->enabled && !s->ending)
			hpd_session_drain(s, 0);
	}
}

void hpd_oom_watch(struct hpd_session *s, unsigned pressure_pct)
{
	char path[sizeof(s->oom.cg) + 32];

	hpd_oom_unwatch(s);	/* an image before an exec had its own */
	s->oom.pressure_pct = pressure_pct;
	s->oom.armed = 1;
	if (find_cgroup(s, s->oom.cg, sizeof(s->oom.cg)))
		return;
	snprintf(path, sizeof(path), "%s/memory.events", s->oom.cg);
	s->oom.w.fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->oom.w.fd < 0) {
		hpd_log(HPD_DEBUG, "pid %d: no %s: OOM kills there are not seen", (int)s->pid, path);
		return;
	}
	s->oom.kills = events_count(s->oom.w.fd, "oom_kill");
	s->oom.w.fn = on_event;
	if (hpd_loop_add(s->oom.w.fd, EPOLLPRI, &s->oom.w) < 0) {
		close(s->oom.w.fd);
		s->oom.w.fd = -1;
	}
}

void hpd_oom_unwatch(struct hpd_session *s)
{
	if (s->oom.w.fd >= 0) {
		hpd_loop_del(s->oom.w.fd);
		close(s->oom.w.fd);
		s->oom.w.fd = -1;
	}
}

static void size_words(char *buf, size_t len, long long v)
{
	if (v == -2)
		snprintf(buf, len, "max");
	else if (v < 0)
		snprintf(buf, len, "unknown");
	else
		snprintf(buf, len, "%lld", v);
}

void hpd_oom_chosen(struct hpd_session *s)
{
	hpd_log(HPD_INFO, "pid %d: chosen by the OOM killer (the module's oom:mark_victim)",
		(int)s->pid);
	s->oom.by_module = 1;
	if (s->oom.cg[0])
		snapshot(s, s->oom.w.fd >= 0 ? events_count(s->oom.w.fd, "oom_kill") : -1);
	s->oom.at_ms = hpd_now_ms();
}

int hpd_oom_victim(struct hpd_session *s, char *note, size_t len)
{
	char mx[24], cur[24], pk[24], cg[600] = "";
	uint64_t end;
	long long k;

	/* The notification may come after the hang-up: look again now. */
	k = s->oom.w.fd >= 0 ? events_count(s->oom.w.fd, "oom_kill") : -1;
	if (k > s->oom.kills && !s->oom.by_module) {
		snapshot(s, k);
		s->oom.rose = 1;
	}
	/* The module said so; else a rise of the count just before the end
	 * (the hang-up: what it left may take a while to drain). */
	end = s->gone_ms ? s->gone_ms : hpd_now_ms();
	if (!s->oom.by_module &&
	    (!s->oom.rose || (end > s->oom.at_ms && end - s->oom.at_ms > HPD_OOM_WINDOW_MS)))
		return 0;
	if (s->oom.cg[0]) {
		size_words(mx, sizeof(mx), s->oom.max);
		size_words(cur, sizeof(cur), s->oom.current);
		size_words(pk, sizeof(pk), s->oom.peak);
		snprintf(cg, sizeof(cg), "; cgroup %s: memory.max %s bytes, memory.current %s, memory.peak %s, oom_kill %lld",
			 s->oom.cg + sizeof(CGROUP_ROOT) - 1, mx, cur, pk, s->oom.kills);
	}
	snprintf(note, len, "OOM: killed by the OOM killer (seen by %s%s); the heap as it stood then",
		 s->oom.by_module ? "the module's oom:mark_victim" : "the cgroup's oom_kill count",
		 cg);
	return 1;
}

void hpd_pressure_tick(struct hpd_session *s, uint64_t now)
{
	long long cur, max;
	char note[256], sfx[32];

	if (!s->oom.pressure_pct || !s->oom.cg[0] || now - s->oom.checked_ms < 100)
		return;
	s->oom.checked_ms = now;
	max = cg_number(s, "memory.max");
	cur = cg_number(s, "memory.current");
	if (max <= 0 || cur < 0)
		return;
	if (!s->oom.armed) {
		if ((unsigned long long)cur * 100 < (unsigned long long)max *
		    (s->oom.pressure_pct > 5 ? s->oom.pressure_pct - 5 : 0))
			s->oom.armed = 1;
		return;
	}
	if ((unsigned long long)cur * 100 < (unsigned long long)max * s->oom.pressure_pct)
		return;
	s->oom.armed = 0;
	snprintf(note, sizeof(note), "memory pressure: cgroup %s at %lld of memory.max %lld bytes (%llu%%, --dump-on-pressure %u)",
		 s->oom.cg + sizeof(CGROUP_ROOT) - 1, cur, max,
		 (unsigned long long)cur * 100 / (unsigned long long)max, s->oom.pressure_pct);
	snprintf(sfx, sizeof(sfx), ".pressure%u", ++s->oom.pressure_dumps);
	hpd_log(HPD_INFO, "pid %d: %s", (int)s->pid, note);
	hpd_session_dump_as(s, HP_DUMP_NOW, sfx, "pressure", note);
}
