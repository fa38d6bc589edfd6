// SPDX-License-Identifier: GPL-2.0
/*
 * `heapprofctl monitor [-d SECS] [-n COUNT]`: joins the "events" multicast
 * group of the generic netlink family "heapprofd" and prints every event,
 * one line each, as it comes: sessions (new, attached, closed), DMA-BUF
 * exports and releases, GPU total updates. An event that says events were
 * lost before it (the module sends at most HEAPPROFD_EVENTS_PER_SEC) prints
 * lost=N; a socket that overflowed prints a line saying so.
 *
 * Plain netlink sockets, no library: the family and group are resolved
 * through the generic netlink controller. Every message is untrusted:
 * attribute lengths are checked against the message and the types.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "../uapi/linux/heapprofd.h"
#include "monitor.h"
#include "printable.h"

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

#define MON_BUF 16384

struct attrs {
	const struct nlattr *a[HEAPPROFD_A_MAX + 1];
};

/* Walk attributes in [p, p+len): 0, or -1 when one overruns. */
static int parse_attrs(const void *p, size_t len, const struct nlattr **tb, int max)
{
	const char *c = p;

	while (len >= NLA_HDRLEN) {
		const struct nlattr *a = (const void *)c;
		size_t al = a->nla_len, step;
		int type = a->nla_type & NLA_TYPE_MASK;

		if (al < NLA_HDRLEN || al > len)
			return -1;
		if (type <= max)
			tb[type] = a;
		step = NLA_ALIGN(al);
		if (step > len)
			step = len;
		c += step;
		len -= step;
	}
	return 0;
}

static const void *adata(const struct nlattr *a)
{
	return (const char *)a + NLA_HDRLEN;
}

static size_t alen(const struct nlattr *a)
{
	return a->nla_len - NLA_HDRLEN;
}

static int get_u32(const struct nlattr *a, uint32_t *v)
{
	if (!a || alen(a) < 4)
		return -1;
	memcpy(v, adata(a), 4);
	return 0;
}

static int get_u64(const struct nlattr *a, uint64_t *v)
{
	if (!a || alen(a) < 8)
		return -1;
	memcpy(v, adata(a), 8);
	return 0;
}

/* A string attribute, printable characters only (printable.h), no space:
 * the line is key=value words. */
static void get_str(const struct nlattr *a, char *out, size_t len)
{
	hp_printable(out, len, adata(a), alen(a), " ");
}

struct field { int attr; const char *name; char kind; /* u: u32, U: u64, s: string */ };

static size_t put(char *out, size_t len, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static size_t put(char *out, size_t len, size_t n, const char *fmt, ...)
{
	va_list ap;
	int k;

	if (n >= len)
		return n;
	va_start(ap, fmt);
	k = vsnprintf(out + n, len - n, fmt, ap);
	va_end(ap);
	return k < 0 ? n : n + (size_t)k;
}

int hp_monitor_format(const void *msg, size_t len, char *out, size_t outlen)
{
	static const struct field session[] = {
		{ HEAPPROFD_A_SESSION_ID, "session", 'U' }, { HEAPPROFD_A_PID, "pid", 'u' },
		{ HEAPPROFD_A_UID, "uid", 'u' }, { HEAPPROFD_A_COMM, "comm", 's' },
		{ HEAPPROFD_A_DATA_SIZE, "ring", 'U' },
		{ HEAPPROFD_A_PRODUCED_BYTES, "produced", 'U' },
		{ HEAPPROFD_A_CONSUMED_BYTES, "consumed", 'U' },
		{ HEAPPROFD_A_DROPPED_RECORDS, "dropped", 'U' }, { 0, NULL, 0 } };
	static const struct field dmabuf[] = {
		{ HEAPPROFD_A_DMABUF_INODE, "inode", 'U' }, { HEAPPROFD_A_DMABUF_SIZE, "size", 'U' },
		{ HEAPPROFD_A_DMABUF_EXPORTER, "exporter", 's' }, { HEAPPROFD_A_PID, "pid", 'u' },
		{ HEAPPROFD_A_COMM, "comm", 's' }, { 0, NULL, 0 } };
	static const struct field gpu[] = {
		{ HEAPPROFD_A_GPU_ID, "gpu", 'u' }, { HEAPPROFD_A_PID, "pid", 'u' },
		{ HEAPPROFD_A_GPU_SIZE, "size", 'U' }, { 0, NULL, 0 } };
	const struct nlmsghdr *nh = msg;
	const struct genlmsghdr *gh;
	const struct nlattr *tb[HEAPPROFD_A_MAX + 1] = { 0 };
	const struct field *fl;
	const char *what;
	size_t n = 0;
	uint64_t lost;

	if (len < NLMSG_HDRLEN + GENL_HDRLEN || nh->nlmsg_len < NLMSG_HDRLEN + GENL_HDRLEN ||
	    nh->nlmsg_len > len) {
		snprintf(out, outlen, "short message (%zu bytes)", len);
		return -1;
	}
	gh = (const void *)((const char *)msg + NLMSG_HDRLEN);
	if (parse_attrs((const char *)gh + GENL_HDRLEN, nh->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN,
			tb, HEAPPROFD_A_MAX)) {
		snprintf(out, outlen, "malformed attributes (command %u)", gh->cmd);
		return -1;
	}
	switch (gh->cmd) {
	case HEAPPROFD_CMD_SESSION_NEW: what = "session-new"; fl = session; break;
	case HEAPPROFD_CMD_SESSION_ATTACHED: what = "session-attached"; fl = session; break;
	case HEAPPROFD_CMD_SESSION_CLOSED: what = "session-closed"; fl = session; break;
	case HEAPPROFD_CMD_DMABUF_EXPORT: what = "dmabuf-export"; fl = dmabuf; break;
	case HEAPPROFD_CMD_DMABUF_RELEASE: what = "dmabuf-release"; fl = dmabuf; break;
	case HEAPPROFD_CMD_GPU_TOTAL: what = "gpu-total"; fl = gpu; break;
	default:
		return 0;
	}
	n = put(out, outlen, n, "%s", what);
	for (; fl->name; fl++) {
		const struct nlattr *a = tb[fl->attr];
		uint32_t v32;
		uint64_t v64;
		char s[64];

		if (!a)
			continue;
		if (fl->kind == 'u' && !get_u32(a, &v32))
			n = put(out, outlen, n, " %s=%" PRIu32, fl->name, v32);
		else if (fl->kind == 'U' && !get_u64(a, &v64))
			n = put(out, outlen, n, " %s=%" PRIu64, fl->name, v64);
		else if (fl->kind == 's') {
			get_str(a, s, sizeof(s));
			n = put(out, outlen, n, " %s=%s", fl->name, s);
		} else {
			n = put(out, outlen, n, " %s=?", fl->name);
		}
	}
	if (!get_u64(tb[HEAPPROFD_A_EVENTS_LOST], &lost) && lost)
		n = put(out, outlen, n, " lost=%" PRIu64, lost);
	return 1;
}

/* ------------------------------------------------------------------ */
/* the socket                                                          */
/* ------------------------------------------------------------------ */

/* The family's id and its "events" group, from the controller. */
static int resolve(int fd, uint16_t *family, uint32_t *group, char *why, size_t wl)
{
	struct {
		struct nlmsghdr nh;
		struct genlmsghdr gh;
		char attrs[64];
	} req;
	struct nlattr *na;
	char *buf;
	ssize_t k;
	int rc = -1;

	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_type = GENL_ID_CTRL;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.nh.nlmsg_seq = 1;
	req.gh.cmd = CTRL_CMD_GETFAMILY;
	req.gh.version = 1;
	na = (struct nlattr *)req.attrs;
	na->nla_type = CTRL_ATTR_FAMILY_NAME;
	na->nla_len = NLA_HDRLEN + sizeof(HEAPPROFD_GENL_NAME);
	memcpy(req.attrs + NLA_HDRLEN, HEAPPROFD_GENL_NAME, sizeof(HEAPPROFD_GENL_NAME));
	req.nh.nlmsg_len = NLMSG_HDRLEN + GENL_HDRLEN + NLA_ALIGN(na->nla_len);
	if (send(fd, &req, req.nh.nlmsg_len, 0) < 0) {
		snprintf(why, wl, "netlink send: %s", strerror(errno));
		return -1;
	}
	buf = malloc(MON_BUF);
	if (!buf)
		return -1;
	k = recv(fd, buf, MON_BUF, 0);
	if (k < (ssize_t)NLMSG_HDRLEN) {
		snprintf(why, wl, "netlink: no answer from the controller");
	} else {
		struct nlmsghdr *nh = (void *)buf;

		if (nh->nlmsg_type == NLMSG_ERROR) {
			struct nlmsgerr *e = NLMSG_DATA(nh);

			if ((size_t)k >= NLMSG_HDRLEN + sizeof(*e) && e->error == -ENOENT)
				snprintf(why, wl, "no generic netlink family \"%s\": the heapprofd module is not loaded",
					 HEAPPROFD_GENL_NAME);
			else
				snprintf(why, wl, "netlink: controller error %d", (size_t)k >= NLMSG_HDRLEN + sizeof(*e) ? e->error : 0);
		} else if (nh->nlmsg_len <= (size_t)k &&
			   nh->nlmsg_len >= NLMSG_HDRLEN + GENL_HDRLEN) {
			const struct nlattr *tb[CTRL_ATTR_MAX + 1] = { 0 };
			const char *p = buf + NLMSG_HDRLEN + GENL_HDRLEN;
			size_t l = nh->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;

			if (!parse_attrs(p, l, tb, CTRL_ATTR_MAX) && tb[CTRL_ATTR_FAMILY_ID] &&
			    alen(tb[CTRL_ATTR_FAMILY_ID]) >= 2 && tb[CTRL_ATTR_MCAST_GROUPS]) {
				const struct nlattr *g = tb[CTRL_ATTR_MCAST_GROUPS];
				const char *gp = adata(g);
				size_t gl = alen(g);

				memcpy(family, adata(tb[CTRL_ATTR_FAMILY_ID]), 2);
				snprintf(why, wl, "the heapprofd family has no \"%s\" group",
					 HEAPPROFD_GENL_MCGRP_EVENTS);
				while (gl >= NLA_HDRLEN) {
					const struct nlattr *one = (const void *)gp;
					const struct nlattr *gt[CTRL_ATTR_MCAST_GRP_MAX + 1] = { 0 };
					size_t step;
					char name[32];

					if (one->nla_len < NLA_HDRLEN || one->nla_len > gl)
						break;
					if (!parse_attrs(adata(one), alen(one), gt, CTRL_ATTR_MCAST_GRP_MAX) &&
					    gt[CTRL_ATTR_MCAST_GRP_NAME] &&
					    !get_u32(gt[CTRL_ATTR_MCAST_GRP_ID], group)) {
						get_str(gt[CTRL_ATTR_MCAST_GRP_NAME], name, sizeof(name));
						if (!strcmp(name, HEAPPROFD_GENL_MCGRP_EVENTS)) {
							rc = 0;
							break;
						}
					}
					step = NLA_ALIGN(one->nla_len);
					if (step > gl)
						break;
					gp += step;
					gl -= step;
				}
			} else {
				snprintf(why, wl, "netlink: the controller's answer does not parse");
			}
		}
	}
	free(buf);
	return rc;
}

static void stamp(char *out, size_t len)
{
	struct timeval tv;
	struct tm tm;

	gettimeofday(&tv, NULL);
	localtime_r(&tv.tv_sec, &tm);
	snprintf(out, len, "%02d:%02d:%02d.%03ld", tm.tm_hour, tm.tm_min, tm.tm_sec,
		 (long)(tv.tv_usec / 1000));
}

int hp_monitor_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "duration", required_argument, NULL, 'd' },
		{ "count", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 }
	};
	const char *usage = "usage: heapprofctl monitor [-d SECS] [-n COUNT]\n";
	unsigned long secs = 0, count = 0, seen = 0;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct timespec t0, now;
	char why[256], line[1024], ts[32];
	uint16_t family = 0;
	uint32_t group = 0;
	char *buf, *end;
	int fd, opt;

	optind = 1;
	while ((opt = getopt_long(argc, argv, "+d:n:h", lo, NULL)) != -1) {
		switch (opt) {
		case 'd':
		case 'n': {
			unsigned long v;

			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || optarg[0] == '-' || v > 100000000UL) {
				fprintf(stderr, "heapprofctl: monitor: -%c wants a number, not '%s'\n", opt,
					optarg);
				return 2;
			}
			*(opt == 'd' ? &secs : &count) = v;
			break;
		}
		case 'h': fputs(usage, stdout); return 0;
		default: fputs(usage, stderr); return 2;
		}
	}
	if (optind < argc) {
		fputs(usage, stderr);
		return 2;
	}
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "heapprofctl: monitor: netlink socket: %s\n", strerror(errno));
		return 1;
	}
	if (resolve(fd, &family, &group, why, sizeof(why))) {
		fprintf(stderr, "heapprofctl: monitor: %s\n", why);
		close(fd);
		return 1;
	}
	if (setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &group, sizeof(group))) {
		fprintf(stderr, "heapprofctl: monitor: joining \"%s\": %s%s\n",
			HEAPPROFD_GENL_MCGRP_EVENTS, strerror(errno),
			errno == EPERM ? " (the group is for administrators: CAP_SYS_ADMIN)" : "");
		close(fd);
		return 1;
	}
	buf = malloc(MON_BUF);
	if (!buf) {
		close(fd);
		return 1;
	}
	fprintf(stderr, "heapprofctl: monitor: family %u, group %s (%u)%s\n", family,
		HEAPPROFD_GENL_MCGRP_EVENTS, group, secs ? "" : "; ^C stops");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		long left = -1;
		ssize_t k;
		char *p;

		if (count && seen >= count)
			break;
		if (secs) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			left = (long)secs * 1000 - ((now.tv_sec - t0.tv_sec) * 1000 +
						    (now.tv_nsec - t0.tv_nsec) / 1000000);
			if (left <= 0)
				break;
		}
		if (poll(&pfd, 1, (int)left) <= 0)
			continue;
		k = recv(fd, buf, MON_BUF, 0);
		stamp(ts, sizeof(ts));
		if (k < 0) {
			if (errno == ENOBUFS)	/* the socket overflowed */
				printf("%s socket-overrun: events lost here, count unknown\n", ts);
			else if (errno != EINTR && errno != EAGAIN)
				break;
			fflush(stdout);
			continue;
		}
		for (p = buf; k >= (ssize_t)NLMSG_HDRLEN;) {
			struct nlmsghdr *nh = (void *)p;
			size_t step;

			if (nh->nlmsg_len < NLMSG_HDRLEN || nh->nlmsg_len > (size_t)k)
				break;
			if (nh->nlmsg_type == family) {
				int r = hp_monitor_format(p, nh->nlmsg_len, line, sizeof(line));

				if (r) {
					printf("%s %s%s\n", ts, r < 0 ? "malformed: " : "", line);
					seen += r > 0;
				}
			}
			step = NLMSG_ALIGN(nh->nlmsg_len);
			if (step >= (size_t)k)
				break;
			p += step;
			k -= (ssize_t)step;
		}
		fflush(stdout);
	}
	free(buf);
	close(fd);
	return 0;
}
