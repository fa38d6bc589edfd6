// SPDX-License-Identifier: GPL-2.0
/*
 * The control server: heapprofctl's requests over the control socket
 * (ctlproto.h), the rules they make (rules.c), and the events sent back to
 * the connection that owns a rule. The socket is the daemon's user's only
 * (0600): for the system daemon, root's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "hpd.h"
#include "../proto/ctlproto.h"

static int quit;
static int had_owner;		/* private mode: a heapprofctl has connected */
static int nctl;		/* control connections open */
static const char *transport_name = "socket";

void hpd_ctl_set_transport(const char *name)
{
	transport_name = name;
}

int hpd_ctl_quit_asked(void)
{
	return quit;
}

void hpd_ctl_ask_quit(void)
{
	quit = 1;
}

/* Private mode: the heapprofctl that started us came and left. */
int hpd_ctl_owner_gone(void)
{
	return had_owner && !nctl;
}
struct ctlconn {
	struct hpd_watch w;
	struct ctlconn *next;
	int dead;
	/* A detach asked on this connection, answered when the session has
	 * ended (hpd_ctl_session_ended): the answer says the profile is out. */
	const struct hpd_session *wait_end;
};
static struct ctlconn *ctlconns;
static struct hpd_watch ctl_listen_w;

static void ctl_send(int fd, const char *msg)
{
	if (send(fd, msg, strlen(msg), MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		hpd_log(HPD_DEBUG, "control reply: %s", strerror(errno));
}

/* Send an event line (already encoded with hpc_put) to the rule's owner. */
void hpd_event(struct hpd_rule *r, const char *msg)
{
	struct ctlconn *c;

	if (!r || !r->owner)
		return;
	c = (struct ctlconn *)r->owner;
	if (!c->dead)
		ctl_send(c->w.fd, msg);
}

static struct hpd_rule *rule_from(const char *m, struct ctlconn *c)
{
	struct hpd_rule *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->owner = (struct hpd_ctlconn *)c;
	r->pid = (pid_t)hpc_getu(m, "pid", 0);
	hpc_get(m, "name", r->name, sizeof(r->name));
	r->all = (int)hpc_getu(m, "all", 0);
	r->follow_forks = (int)hpc_getu(m, "follow", 0);
	r->dormant_too = (int)hpc_getu(m, "dormant", 0);
	r->interval = hpc_getu(m, "interval", 0);
	r->stack_cap = (uint32_t)hpc_getu(m, "stack_cap", 0);
	r->cfg_flags = (uint32_t)hpc_getu(m, "cfg_flags", 0) & HEAPPROFD_CFG_ALL;
	/* The ring-full policy: wait (bounded) for room unless the user asked
	 * to drop (heapprofctl record --no-block); see client.rst. */
	if (!hpc_getu(m, "drop", 0))
		r->cfg_flags |= HEAPPROFD_CFG_BLOCK;
	hpc_get(m, "heaps", r->heaps, sizeof(r->heaps));
	if (r->follow_forks)
		r->cfg_flags |= HEAPPROFD_CFG_FOLLOW_FORKS;
	r->formats = (unsigned)hpc_getu(m, "formats", 0);
	hpc_get(m, "export", r->exports, sizeof(r->exports));
	r->pressure_pct = (unsigned)hpc_getu(m, "pressure", 0);
	if (r->pressure_pct > 100)
		r->pressure_pct = 100;
	r->dump_at_max = (int)hpc_getu(m, "dump_at_max", 0);
	r->continuous_ms = (unsigned)hpc_getu(m, "continuous", 0);
	hpc_get(m, "prefix", r->prefix, sizeof(r->prefix));
	return r;
}

static const char *tname(const struct hpd_session *s)
{
	return s->transport == HPD_T_KERNEL ? "module" :
	       s->transport == HPD_T_SOCKET ? "socket" : "scan";
}

struct list_out {
	char *out;
	size_t n, cap;
};

/* A module session nobody is attached to (a dormant one, usually). */
static void list_kernel(void *arg, uint64_t id, pid_t pid, const char *comm, uint32_t flags,
			uint32_t state)
{
	struct list_out *lo = arg;
	struct hpd_session *s;
	char name[32];

	for (s = hpd_sessions; s; s = s->next)
		if (s->transport == HPD_T_KERNEL && s->id == id && !s->ending)
			return;
	if (state == HEAPPROFD_STATE_CLOSED || lo->n >= lo->cap - 512)
		return;
	/* a word of a line: the process's own name could end the line */
	hpd_clean_comm(name, sizeof(name), comm[0] ? comm : "?");
	lo->n += snprintf(lo->out + lo->n, lo->cap - lo->n, "%d %s %llu module %s 0 0 0 -\n",
			  (int)pid, name, (unsigned long long)id,
			  flags & HEAPPROFD_REGISTER_DORMANT ? "dormant" :
			  state == HEAPPROFD_STATE_ATTACHED ? "attached-elsewhere" : "open");
}

/*
 * Sessions that ended early (a malformed record, the memory budget...):
 * the last few stay in `sessions` as "ended", with why, since their
 * process may well go on running without a profile.
 */
#define ENDED_KEPT	16

struct ended {
	pid_t pid;
	uint64_t id, records, bytes, dropped;
	char comm[17];
	const char *transport;
	char prefix[600];
	char reason[160];
};
static struct ended ended[ENDED_KEPT];
static unsigned nended;		/* ever: the next goes to ended[nended % ENDED_KEPT] */

static void note_ended(const struct hpd_session *s, const char *prefix)
{
	struct ended *e = &ended[nended++ % ENDED_KEPT];

	e->pid = s->pid;
	e->id = s->id;
	e->records = s->records;
	e->bytes = s->bytes;
	e->dropped = s->drop_records;
	snprintf(e->comm, sizeof(e->comm), "%s", s->comm);
	e->transport = tname(s);
	snprintf(e->prefix, sizeof(e->prefix), "%s", prefix && *prefix ? prefix : "-");
	snprintf(e->reason, sizeof(e->reason), "%s", s->end_reason);
}

/* One line of `sessions`: the fields by position; key=value ones may follow. */
static size_t session_line(char *out, size_t cap, pid_t pid, const char *comm, uint64_t id,
			   const char *transport, const char *state, uint64_t records,
			   uint64_t bytes, uint64_t dropped, const char *prefix)
{
	size_t n = strlen(out);

	if (n < cap)
		snprintf(out + n, cap - n, "%d %s %llu %s %s %llu %llu %llu %s", (int)pid, comm,
			 (unsigned long long)id, transport, state, (unsigned long long)records,
			 (unsigned long long)bytes, (unsigned long long)dropped, prefix);
	return strlen(out);
}

static void ctl_sessions(int fd)
{
	static char out[HPD_MSG_MAX];
	struct hpd_session *s;
	struct list_out lo;
	size_t n;

	n = snprintf(out, sizeof(out), "ok");
	{
		/* What the output budget did (out_budget.c), on the "ok" line. */
		struct hpd_budget_stats bs;
		struct hpd_mem_stats ms;

		hpd_budget_get_stats(&bs);
		hpc_putu(out, sizeof(out), "budget_removed", bs.removed);
		hpc_putu(out, sizeof(out), "refused_space", bs.refused_space);
		hpc_putu(out, sizeof(out), "refused_user", bs.refused_user);
		hpc_putu(out, sizeof(out), "left_out", bs.left_out);
		/* ...and the memory budget (mem_budget.c). */
		hpd_mem_get_stats(&ms);
		hpc_putu(out, sizeof(out), "mem_budget", ms.budget);
		hpc_putu(out, sizeof(out), "mem_used", ms.used);
		hpc_putu(out, sizeof(out), "mem_peak", ms.peak);
		hpc_putu(out, sizeof(out), "mem_held", ms.held);
		hpc_putu(out, sizeof(out), "mem_sheds", ms.sheds);
		hpc_putu(out, sizeof(out), "mem_ended", ms.ended);
		/* ...and the CPU budget (cpu_budget.c). */
		{
			struct hpd_cpu_stats cs;

			hpd_cpu_get_stats(&cs);
			hpc_putu(out, sizeof(out), "cpu_max", cs.cap_pct);
			hpc_putu(out, sizeof(out), "cpu_used", cs.used_pct);
			hpc_putu(out, sizeof(out), "cpu_held_ms", cs.held_ms);
		}
		/* ...and the exports (export.c). */
		{
			struct hpd_export_counts ec;

			hpd_export_totals(&ec);
			hpc_putu(out, sizeof(out), "exp_queued", ec.queued);
			hpc_putu(out, sizeof(out), "exp_sent", ec.sent);
			hpc_putu(out, sizeof(out), "exp_failed", ec.failed);
			hpc_putu(out, sizeof(out), "exp_dropped", ec.dropped);
			hpc_putu(out, sizeof(out), "exp_retries", ec.retries);
			hpc_putu(out, sizeof(out), "exp_rejected", ec.rejected);
		}
		n = strlen(out);
		n += snprintf(out + n, sizeof(out) - n, "\n");
	}
	for (s = hpd_sessions; s && n < sizeof(out) - 1024; s = s->next) {
		uint64_t held, reserve;

		if (s->ending)
			continue;
		n = session_line(out, sizeof(out), s->pid, s->comm, s->id, tname(s),
				 s->gone_ms ? "exited" : s->detach_since_ms ? "detaching" :
				 s->enabled ? "profiling" : "dormant",
				 s->records, s->bytes,
				 s->enabled && s->map ? __atomic_load_n(&s->ring.cnt->records_dropped,
									__ATOMIC_RELAXED) : 0,
				 s->enabled ? s->prefix : "-");
		hpd_mem_session(s, &held, &reserve);
		hpc_putu(out, sizeof(out), "mem", held);
		if (s->exp.targets.n) {
			struct hpd_export_counts ec;

			hpd_export_acct_get(s->exp.acct, &ec);
			hpc_putu(out, sizeof(out), "exp_sent", ec.sent);
			hpc_putu(out, sizeof(out), "exp_unsent", ec.failed + ec.dropped);
		}
		n = strlen(out);
		n += snprintf(out + n, sizeof(out) - n, "\n");
	}
	for (unsigned k = nended > ENDED_KEPT ? nended - ENDED_KEPT : 0;
	     k < nended && n < sizeof(out) - 1024; k++) {
		const struct ended *e = &ended[k % ENDED_KEPT];

		n = session_line(out, sizeof(out), e->pid, e->comm, e->id, e->transport, "ended",
				 e->records, e->bytes, e->dropped, e->prefix);
		hpc_put(out, sizeof(out), "reason", e->reason);
		n = strlen(out);
		n += snprintf(out + n, sizeof(out) - n, "\n");
	}
	lo.out = out;
	lo.n = n;
	lo.cap = sizeof(out);
	hpd_kernel_list(list_kernel, &lo);
	ctl_send(fd, out);
}

static void ctl_attach(struct ctlconn *c, const char *m)
{
	char err[400] = "", rep[1200] = "ok";
	struct hpd_session *s;
	struct hpd_rule *r;
	pid_t pid = (pid_t)hpc_getu(m, "pid", 0);
	int rc;

	if (pid <= 0) {
		ctl_send(c->w.fd, "err msg=attach:%20no%20pid");
		return;
	}
	s = hpd_session_by_pid(pid);
	if (s && s->enabled && (!s->rule || !s->rule->owner)) {
		/* Profiled by the system policy: this heapprofctl takes it over. */
		r = rule_from(m, c);
		if (!r)
			return;
		hpd_rule_add(r);
		if (s->rule)
			s->rule->live--;
		s->rule = r;
		r->nsessions++;
		r->live++;
		if (r->prefix[0])
			snprintf(s->prefix, sizeof(s->prefix), "%s", r->prefix);
		hpc_put(rep, sizeof(rep), "prefix", s->prefix);
		hpc_put(rep, sizeof(rep), "transport", tname(s));
		ctl_send(c->w.fd, rep);
		return;
	}
	if (s && s->enabled) {
		snprintf(rep, sizeof(rep), "err");
		hpc_put(rep, sizeof(rep), "msg", "that process is already being profiled; detach it first");
		ctl_send(c->w.fd, rep);
		return;
	}
	r = rule_from(m, c);
	if (!r)
		return;
	r->dormant_too = 1;
	hpd_rule_add(r);
	if (s && s->transport == HPD_T_SOCKET)
		rc = hpd_socket_enable_dormant(s, r);
	else if (hpd_kernel_available() && (rc = hpd_kernel_attach(0, pid, r)) != -ESRCH && rc != -ENODEV)
		snprintf(err, sizeof(err), "the module refused: %s%s", strerror(-rc),
			 rc == -EPERM ? " (another user's or a non-dumpable process: run heapprofd as root)" :
			 rc == -EBUSY ? " (another consumer is attached)" : "");
	else
		rc = hpd_scan_attach(pid, r, err, sizeof(err));
	if (rc) {
		hpd_rule_del(r);
		free(r);
		snprintf(rep, sizeof(rep), "err");
		hpc_put(rep, sizeof(rep), "msg", err[0] ? err : strerror(-rc));
		ctl_send(c->w.fd, rep);
		return;
	}
	s = hpd_session_by_pid(pid);
	hpc_put(rep, sizeof(rep), "prefix", s ? s->prefix : "");
	hpc_put(rep, sizeof(rep), "transport", s ? tname(s) : "?");
	ctl_send(c->w.fd, rep);
}

static void ctl_request(struct ctlconn *c, char *m)
{
	char rep[1200] = "ok";
	struct hpd_session *s;
	pid_t pid;

	hpd_log(HPD_DEBUG, "control: %s", m);
	if (hpc_verb_is(m, "hello")) {
		hpc_put(rep, sizeof(rep), "version", "1");
		hpc_put(rep, sizeof(rep), "transport", transport_name);
		hpc_put(rep, sizeof(rep), "socket", hpd_opts.socket_path);
		hpc_putu(rep, sizeof(rep), "private", hpd_opts.private_mode);
		hpc_putu(rep, sizeof(rep), "pid", getpid());
	} else if (hpc_verb_is(m, "watch")) {
		struct hpd_rule *r = rule_from(m, c);

		if (!r)
			snprintf(rep, sizeof(rep), "err msg=out%%20of%%20memory");
		else
			hpd_rule_add(r);
	} else if (hpc_verb_is(m, "attach")) {
		ctl_attach(c, m);
		return;
	} else if (hpc_verb_is(m, "detach") || hpc_verb_is(m, "dump")) {
		char path[700] = "";

		pid = (pid_t)hpc_getu(m, "pid", 0);
		s = hpd_session_by_pid(pid);
		if (!s || !s->enabled) {
			snprintf(rep, sizeof(rep), "err");
			hpc_put(rep, sizeof(rep), "msg", "no profiled process with that pid (see `heapprofctl sessions`)");
		} else if (hpc_verb_is(m, "dump")) {
			hpd_session_drain(s, 0);
			if (hpd_session_dump(s, HP_DUMP_NOW, path, sizeof(path)) < 0) {
				snprintf(rep, sizeof(rep), "err");
				hpc_put(rep, sizeof(rep), "msg", s->dump_error[0] ? s->dump_error :
					"writing the profile failed (see the daemon's log)");
			} else {
				hpc_put(rep, sizeof(rep), "prefix", path);
				hpd_put_dump(s, rep, sizeof(rep));
			}
		} else {
			hpd_session_detach(s);
			if (!s->ending) {
				c->wait_end = s;
				return;
			}
			hpc_put(rep, sizeof(rep), "prefix", s->prefix);
			hpd_put_dump(s, rep, sizeof(rep));
		}
	} else if (hpc_verb_is(m, "sessions")) {
		ctl_sessions(c->w.fd);
		return;
	} else if (hpc_verb_is(m, "quit")) {
		quit = 1;
	} else {
		snprintf(rep, sizeof(rep), "err msg=unknown%%20request");
	}
	ctl_send(c->w.fd, rep);
}

/* The heapprofctl went away: its rules go, and their sessions are finished. */
static void ctl_close(struct ctlconn *c)
{
	struct hpd_session *s;

	c->dead = 1;
	hpd_loop_del(c->w.fd);
	for (s = hpd_sessions; s; s = s->next)
		if (s->rule && s->rule->owner == (struct hpd_ctlconn *)c && !s->ending)
			hpd_session_detach(s);
	for (;;) {
		struct hpd_rule *r = hpd_rule_owned_by((struct hpd_ctlconn *)c);

		if (!r)
			break;
		hpd_rule_del(r);
		for (s = hpd_sessions; s; s = s->next)
			if (s->rule == r)
				s->rule = NULL;
		free(r);
	}
	close(c->w.fd);
	nctl--;
}

static void ctl_event(struct hpd_watch *w, uint32_t ev)
{
	struct ctlconn *c = (struct ctlconn *)w;
	static char m[HPD_MSG_MAX];
	ssize_t n;

	if (c->dead)
		return;
	n = recv(w->fd, m, sizeof(m) - 1, MSG_DONTWAIT);
	if (n > 0) {
		m[n] = 0;
		ctl_request(c, m);
		return;
	}
	if (n == 0 || (n < 0 && errno != EAGAIN) || (ev & (EPOLLHUP | EPOLLERR)))
		ctl_close(c);
}

/* A control connection, from accept or from a test. */
int hpd_ctl_adopt(int fd)
{
	struct ctlconn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->w.fn = ctl_event;
	if (hpd_loop_add(fd, EPOLLIN | EPOLLRDHUP, &c->w) < 0) {
		free(c);
		return -EINVAL;
	}
	c->next = ctlconns;
	ctlconns = c;
	nctl++;
	had_owner = 1;
	return 0;
}

static void ctl_accept(struct hpd_watch *w, uint32_t ev)
{
	(void)ev;
	hpd_loop_accept(w, 0, hpd_ctl_adopt);
}

void hpd_ctl_session_ended(const struct hpd_session *s, const char *prefix)
{
	struct ctlconn *c;

	if (s->end_reason[0] && s->enabled)
		note_ended(s, prefix);
	for (c = ctlconns; c; c = c->next) {
		char rep[1200] = "ok";

		if (c->wait_end != s)
			continue;
		c->wait_end = NULL;
		if (c->dead)
			continue;
		if (prefix) {
			hpc_put(rep, sizeof(rep), "prefix", prefix);
			hpd_put_dump(s, rep, sizeof(rep));
		} else {
			snprintf(rep, sizeof(rep), "err");
			hpc_put(rep, sizeof(rep), "msg", s->dump_error[0] ? s->dump_error :
				"writing the profile failed (see the daemon's log)");
		}
		ctl_send(c->w.fd, rep);
	}
}

void hpd_ctl_reap(void)
{
	struct ctlconn **pp = &ctlconns, *c;

	while ((c = *pp) != NULL) {
		if (c->dead) {
			*pp = c->next;
			free(c);
		} else {
			pp = &c->next;
		}
	}
}
int hpd_ctl_listen(const char *path)
{
	ctl_listen_w.fn = ctl_accept;
	/* Only the daemon's user (root for the system daemon) may control it. */
	return hpd_loop_listen(path, 0600, 16, 0, &ctl_listen_w);
}
