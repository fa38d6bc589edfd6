// SPDX-License-Identifier: GPL-2.0
/*
 * The module transport: /dev/heapprofd and the "heapprofd" generic netlink
 * family. The family's "events" group tells us of every new session; we
 * attach to the ones a rule (or the system policy) wants, receive the fds
 * the process deposited, map the ring and watch the consumer fd: EPOLLIN
 * means data, EPOLLHUP means the process closed its session.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

#include "hpd.h"

static int devfd = -1;
static struct nl_sock *evsk;
static int family;
static struct hpd_watch nl_w;

struct kconn {
	struct hpd_watch w;
	struct hpd_session *s;
	/* Attached, but the process has not deposited its maps and mem fds
	 * yet (finish_attach): since when, and how long watched. */
	int fds_wait;
	int had_rule;		/* attached for a rule (a heapprofctl's) */
	uint64_t looked_ms, watched_ms;
};

/*
 * The client deposits its fds right after registering, and the module's
 * event can reach us first. Without them its stacks cannot be unwound, so
 * the session waits for them, up to FDS_WAIT_MS of watched time (each look
 * adding at most FDS_STEP_MAX_MS: a machine that stood still stopped the
 * client too), looked at every FDS_LOOK_MS by the loop (hpd_kernel_expire)
 * rather than slept on: a loaded machine may keep the client from its
 * deposits for seconds, and the loop serves everyone else meanwhile. Its
 * records wait in its ring.
 */
#define FDS_WAIT_MS		10000
#define FDS_STEP_MAX_MS		100
#define FDS_LOOK_MS		10
static int nfds_wait;	/* sessions waiting so (a hint: recounted by each look) */

static int finish_attach(struct kconn *k);

int hpd_kernel_available(void)
{
	return devfd >= 0;
}

static void consumer_event(struct hpd_watch *w, uint32_t ev)
{
	struct kconn *k = (struct kconn *)w;
	struct hpd_session *s = k->s;

	if (s->ending)
		return;
	if (k->fds_wait) {
		if (!(ev & (EPOLLHUP | EPOLLERR)))
			return;		/* its records wait for the fds */
		finish_attach(k);	/* closed first: with what it deposited */
		if (s->ending)
			return;
	}
	hp_ring_awake(&s->ring);
	if (ev & (EPOLLHUP | EPOLLERR)) {
		hpd_loop_del(w->fd);
		hpd_session_gone(s);
		return;
	}
	hpd_session_drain(s, 0);
}

static int receive_slot(int cfd, unsigned slot)
{
	struct heapprofd_fd_arg a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.slot = slot;
	if (ioctl(cfd, HEAPPROFD_IOC_RECEIVE_FD, &a) < 0)
		return -errno;
	return a.fd;
}

enum fds { FDS_MISSING, FDS_READY, FDS_CLOSED };

/* Has the process deposited its maps and mem fds (or closed its session)? */
static enum fds fds_state(int cfd)
{
	struct heapprofd_session_info si;

	memset(&si, 0, sizeof(si));
	si.size = sizeof(si);
	if (ioctl(cfd, HEAPPROFD_IOC_INFO, &si) < 0 || si.state == HEAPPROFD_STATE_CLOSED)
		return FDS_CLOSED;
	return (si.fd_slots & 3) == 3 ? FDS_READY : FDS_MISSING;
}

int hpd_kernel_attach(uint64_t session_id, pid_t pid, struct hpd_rule *r)
{
	struct heapprofd_session_info info;
	struct heapprofd_attach at;
	struct hpd_session *s;
	struct kconn *k;
	int cfd, rc;

	if (devfd < 0)
		return -ENODEV;
	memset(&at, 0, sizeof(at));
	at.size = sizeof(at);
	if (session_id) {
		at.flags = HEAPPROFD_ATTACH_BY_ID;
		at.session_id = session_id;
	} else {
		at.flags = HEAPPROFD_ATTACH_BY_PID;
		at.pid = pid;
	}
	cfd = ioctl(devfd, HEAPPROFD_IOC_ATTACH, &at);
	if (cfd < 0) {
		rc = -errno;
		if (rc == -EPERM)
			hpd_log(HPD_WARN, "not allowed to attach to pid %d: another user's or a non-dumpable process needs heapprofd running as root",
				(int)(pid ? pid : at.pid));
		else if (rc != -ESRCH)
			hpd_log(HPD_WARN, "attach to session %llu / pid %d failed: %s",
				(unsigned long long)session_id, (int)pid, strerror(-rc));
		return rc;
	}
	fcntl(cfd, F_SETFD, FD_CLOEXEC);
	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	if (ioctl(cfd, HEAPPROFD_IOC_INFO, &info) < 0) {
		memset(info.comm, 0, sizeof(info.comm));
		info.uid = (uint32_t)-1;
	}
	info.comm[sizeof(info.comm) - 1] = 0;
	/* Refused, the session goes back to the module unattended. */
	rc = hpd_fd_admit(info.uid, at.pid);
	if (rc) {
		close(cfd);
		return rc;
	}
	s = hpd_session_new(HPD_T_KERNEL, at.pid, info.comm[0] ? info.comm : "?");
	if (!s) {
		close(cfd);
		return -ENOMEM;
	}
	s->uid = info.uid;	/* the owner, as the module has it: its profiles' user */
	s->id = at.session_id;
	s->conn_fd = cfd;
	rc = hpd_session_map(s, cfd, 0, at.ctl_size, at.data_size);
	if (rc) {
		hpd_log(HPD_WARN, "pid %d: cannot map the session ring: %s", (int)s->pid, strerror(-rc));
		hpd_session_end(s, "ring could not be mapped");
		return rc;
	}
	k = calloc(1, sizeof(*k));
	if (!k) {
		hpd_session_end(s, "out of memory");
		return -ENOMEM;
	}
	k->s = s;
	k->w.fn = consumer_event;
	s->tpriv = k;
	/* (kept here while it waits: a rule that goes away is taken from it) */
	s->rule = r;
	k->had_rule = r != NULL;
	hpd_loop_add(cfd, EPOLLIN | EPOLLHUP | EPOLLET, &k->w);
	if (fds_state(cfd) == FDS_MISSING) {
		hpd_log(HPD_DEBUG, "pid %d: waiting for its maps and mem fds", (int)s->pid);
		k->fds_wait = 1;
		k->looked_ms = hpd_now_ms();
		nfds_wait++;
		return 0;
	}
	return finish_attach(k);
}

/*
 * The attach's rest, once the process deposited its fds (or closed its
 * session, or FDS_WAIT_MS passed): take them, and start profiling.
 */
static int finish_attach(struct kconn *k)
{
	struct hpd_session *s = k->s;
	struct hpd_rule *r = s->rule;
	int cfd = s->conn_fd, rc;

	if (k->fds_wait) {
		k->fds_wait = 0;
		nfds_wait--;
	}
	if (k->had_rule && !r) {
		/* Its heapprofctl went away meanwhile: not profiled. */
		hpd_session_end(s, NULL);
		return -ESRCH;
	}
	s->maps_fd = receive_slot(cfd, HEAPPROFD_FD_MAPS);
	s->mem_fd = receive_slot(cfd, HEAPPROFD_FD_MEM);
	s->exe_fd = receive_slot(cfd, HEAPPROFD_FD_EXE);
	if (s->exe_fd < 0)
		s->exe_fd = -1;
	/*
	 * No fallback to /proc/<pid>/maps or mem: by the time we opened them
	 * the number could name another process. The module checked the
	 * process that deposited these; without them there is no unwinding.
	 */
	if (s->maps_fd < 0 || s->mem_fd < 0)
		hpd_log(HPD_WARN, "pid %d: the process deposited no maps/mem fds; its stacks cannot be unwound",
			(int)s->pid);
	/*
	 * The process deposited these itself, so they may be anything: only
	 * procfs files are read as its maps and memory. Another user's process
	 * (its /proc files are its owner's): its ELF files are opened only as
	 * the kernel has them mapped, never by the paths its maps name
	 * (security.rst).
	 */
	{
		struct statfs sf;
		struct stat st;

		if (s->maps_fd >= 0 && (fstatfs(s->maps_fd, &sf) || sf.f_type != PROC_SUPER_MAGIC)) {
			hpd_log(HPD_WARN, "pid %d: its maps descriptor is not a /proc file: not used",
				(int)s->pid);
			close(s->maps_fd);
			s->maps_fd = -1;
		}
		if (s->mem_fd >= 0 && (fstatfs(s->mem_fd, &sf) || sf.f_type != PROC_SUPER_MAGIC)) {
			close(s->mem_fd);
			s->mem_fd = -1;
		}
		s->foreign = s->maps_fd < 0 || fstat(s->maps_fd, &st) || st.st_uid != geteuid();
	}
	rc = hpd_session_enable(s, r);
	if (rc) {
		s->rule = NULL;	/* the caller may free it (ctl.c) */
		return rc;
	}
	hpd_session_drain(s, 0);
	return 0;
}

int hpd_kernel_expire(uint64_t now)
{
	struct hpd_session *s;
	int left = 0, started = 0;

	if (nfds_wait <= 0)
		return -1;
	for (s = hpd_sessions; s; s = s->next) {
		struct kconn *k = s->tpriv;
		enum fds st;

		if (s->transport != HPD_T_KERNEL || s->ending || !k || !k->fds_wait)
			continue;
		k->watched_ms += now - k->looked_ms < FDS_STEP_MAX_MS ? now - k->looked_ms :
									  FDS_STEP_MAX_MS;
		k->looked_ms = now;
		st = fds_state(s->conn_fd);
		if (st == FDS_MISSING && k->watched_ms < FDS_WAIT_MS) {
			left++;
			continue;
		}
		if (st == FDS_MISSING)
			hpd_log(HPD_DEBUG, "pid %d: no maps and mem fds after %u ms", (int)s->pid,
				FDS_WAIT_MS);
		finish_attach(k);
		started++;
	}
	nfds_wait = left;
	/*
	 * A session started here is live from now on, but the loop chose its
	 * timeout before (none, if nothing was live): look again at once, so
	 * that the tick drains it and makes its continuous dumps.
	 */
	if (started) {
		hpd_backlog = 1;
		return 0;
	}
	return left ? FDS_LOOK_MS : -1;
}

/* A session the module told us about: attach it if a rule or the policy wants it. */
static void session_new(uint64_t id, pid_t pid, const char *comm, uint32_t flags)
{
	int dormant = !!(flags & HEAPPROFD_REGISTER_DORMANT);
	struct hpd_rule *r = hpd_rule_match(pid, comm, dormant);
	struct hpd_session *s;

	hpd_log(HPD_DEBUG, "module: session %llu pid %d comm %s%s", (unsigned long long)id,
		(int)pid, comm, dormant ? " (dormant)" : "");
	for (s = hpd_sessions; s; s = s->next)
		if (s->transport == HPD_T_KERNEL && s->id == id && !s->ending)
			return;	/* already ours */
	if (!r)
		return;
	hpd_kernel_attach(id, pid, r);
}

/* For `sessions`: the module's sessions we are not attached to. */
struct list_ctx {
	hpd_kernel_list_fn fn;
	void *arg;
};

static int list_msg(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[HEAPPROFD_A_MAX + 1];
	struct list_ctx *lc = arg;
	char comm[17] = "?";

	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, HEAPPROFD_A_MAX, NULL) < 0 ||
	    !tb[HEAPPROFD_A_SESSION_ID] || !tb[HEAPPROFD_A_PID])
		return NL_SKIP;
	if (tb[HEAPPROFD_A_COMM])
		nla_strlcpy(comm, tb[HEAPPROFD_A_COMM], sizeof(comm));
	lc->fn(lc->arg, nla_get_u64(tb[HEAPPROFD_A_SESSION_ID]),
	       (pid_t)nla_get_u32(tb[HEAPPROFD_A_PID]), comm,
	       tb[HEAPPROFD_A_FLAGS] ? nla_get_u32(tb[HEAPPROFD_A_FLAGS]) : 0,
	       tb[HEAPPROFD_A_STATE] ? nla_get_u32(tb[HEAPPROFD_A_STATE]) : 0);
	return NL_OK;
}

/* Ask the module for every live session (SESSION_GET dump); each reply
 * message goes to cb. */
static void dump_sessions(nl_recvmsg_msg_cb_t cb, void *arg)
{
	struct nl_sock *sk = nl_socket_alloc();
	struct nl_msg *m;

	if (!sk)
		return;
	if (genl_connect(sk) < 0)
		goto out;
	nl_socket_modify_cb(sk, NL_CB_VALID, NL_CB_CUSTOM, cb, arg);
	m = nlmsg_alloc();
	if (!m)
		goto out;
	genlmsg_put(m, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0, NLM_F_DUMP,
		    HEAPPROFD_CMD_SESSION_GET, HEAPPROFD_GENL_VERSION);
	if (nl_send_auto(sk, m) >= 0)
		nl_recvmsgs_default(sk);
	nlmsg_free(m);
out:
	nl_socket_free(sk);
}

void hpd_kernel_list(hpd_kernel_list_fn fn, void *arg)
{
	struct list_ctx lc = { fn, arg };

	if (devfd < 0 || family <= 0)
		return;
	dump_sessions(list_msg, &lc);
}

static int parse_msg(struct nl_msg *msg, void *arg)
{
	struct genlmsghdr *gh = nlmsg_data(nlmsg_hdr(msg));
	struct nlattr *tb[HEAPPROFD_A_MAX + 1];
	char comm[17] = "?";
	uint64_t id;
	pid_t pid;
	uint32_t flags = 0;

	(void)arg;
	if (genlmsg_parse(nlmsg_hdr(msg), 0, tb, HEAPPROFD_A_MAX, NULL) < 0)
		return NL_SKIP;
	if (gh->cmd != HEAPPROFD_CMD_SESSION_NEW)
		return NL_OK;
	if (!tb[HEAPPROFD_A_SESSION_ID] || !tb[HEAPPROFD_A_PID])
		return NL_SKIP;
	id = nla_get_u64(tb[HEAPPROFD_A_SESSION_ID]);
	pid = (pid_t)nla_get_u32(tb[HEAPPROFD_A_PID]);
	if (tb[HEAPPROFD_A_COMM])
		nla_strlcpy(comm, tb[HEAPPROFD_A_COMM], sizeof(comm));
	if (tb[HEAPPROFD_A_FLAGS])
		flags = nla_get_u32(tb[HEAPPROFD_A_FLAGS]);
	if (tb[HEAPPROFD_A_STATE] &&
	    nla_get_u32(tb[HEAPPROFD_A_STATE]) == HEAPPROFD_STATE_CLOSED)
		return NL_OK;
	session_new(id, pid, comm, flags);
	return NL_OK;
}

static void nl_event(struct hpd_watch *w, uint32_t ev)
{
	int rc;

	(void)w;
	(void)ev;
	rc = nl_recvmsgs_default(evsk);
	if (rc < 0 && rc != -NLE_AGAIN)
		hpd_log(HPD_DEBUG, "netlink: %s", nl_geterror(rc));
}

/* Sessions that registered before we started (SESSION_GET dump). */
static void dump_existing(void)
{
	dump_sessions(parse_msg, NULL);
}

int hpd_kernel_init(void)
{
	int grp, rc;

	devfd = open("/dev/" HEAPPROFD_DEVICE_NAME, O_RDWR | O_CLOEXEC);
	if (devfd < 0)
		return -errno;
	evsk = nl_socket_alloc();
	if (!evsk)
		goto fail;
	if ((rc = genl_connect(evsk)) < 0) {
		hpd_log(HPD_WARN, "generic netlink: %s", nl_geterror(rc));
		goto fail;
	}
	family = genl_ctrl_resolve(evsk, HEAPPROFD_GENL_NAME);
	grp = genl_ctrl_resolve_grp(evsk, HEAPPROFD_GENL_NAME, HEAPPROFD_GENL_MCGRP_EVENTS);
	if (family < 0 || grp < 0) {
		hpd_log(HPD_WARN, "the module's netlink family \"%s\" is missing: new sessions will not be noticed",
			HEAPPROFD_GENL_NAME);
		goto fail;
	}
	nl_socket_disable_seq_check(evsk);
	nl_socket_modify_cb(evsk, NL_CB_VALID, NL_CB_CUSTOM, parse_msg, NULL);
	if ((rc = nl_socket_add_membership(evsk, grp)) < 0) {
		/* The events name processes: CAP_SYS_ADMIN only (kernel.rst). */
		if (rc == -NLE_PERM)
			hpd_log(HPD_WARN, "joining the module's events group needs CAP_SYS_ADMIN: not using the module");
		else
			hpd_log(HPD_WARN, "joining the events group: %s", nl_geterror(rc));
		goto fail;
	}
	nl_socket_set_nonblocking(evsk);
	nl_w.fn = nl_event;
	hpd_loop_add(nl_socket_get_fd(evsk), EPOLLIN, &nl_w);
	dump_existing();
	return 0;
fail:
	if (evsk)
		nl_socket_free(evsk);
	evsk = NULL;
	close(devfd);
	devfd = -1;
	return -ENOTCONN;
}
