/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Raw generic netlink for the heapprofd kselftests: resolve the "heapprofd"
 * family and its "events" multicast group through the controller, join the
 * group, send a dump request and walk the messages that come back. Raw
 * sockets keep the test free of library behaviour we would be testing too.
 */
#ifndef HP_NL_H
#define HP_NL_H

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>

#include "../../uapi/linux/heapprofd.h"

#ifndef SOL_NETLINK
#define SOL_NETLINK 270
#endif

#define HP_NL_BUF	16384

struct hp_nl {
	int fd;
	uint16_t family;
	uint32_t events_grp;
	uint32_t seq;
};

/* One decoded heapprofd message. */
struct hp_nl_msg {
	uint8_t cmd;
	uint64_t session_id;
	uint32_t pid;
	uint32_t uid;
	uint32_t state;
	uint64_t data_size;
	char comm[32];
	int has_id, has_pid, has_comm;
	/* DMA-BUF and GPU events */
	uint64_t inode;
	uint64_t size;
	char exporter[32];
	uint32_t gpu_id;
	uint64_t events_lost;
};

static inline int hp_nl_send(struct hp_nl *nl, uint16_t type, uint16_t flags,
			     uint8_t cmd, const void *attrs, size_t alen)
{
	char buf[256];
	struct nlmsghdr *n = (struct nlmsghdr *)buf;
	struct genlmsghdr *g = NLMSG_DATA(n);
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };

	if (NLMSG_LENGTH(GENL_HDRLEN) + alen > sizeof(buf))
		return -EINVAL;
	memset(buf, 0, sizeof(buf));
	n->nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN + alen);
	n->nlmsg_type = type;
	n->nlmsg_flags = NLM_F_REQUEST | flags;
	n->nlmsg_seq = ++nl->seq;
	g->cmd = cmd;
	g->version = 1;
	if (alen)
		memcpy((char *)g + GENL_HDRLEN, attrs, alen);
	if (sendto(nl->fd, buf, n->nlmsg_len, 0, (struct sockaddr *)&to,
		   sizeof(to)) < 0)
		return -errno;
	return 0;
}

/*
 * Receive into buf with a timeout in ms; returns bytes, 0 on timeout,
 * -errno on error.
 */
static inline int hp_nl_recv(struct hp_nl *nl, char *buf, size_t len, int ms)
{
	struct pollfd p = { .fd = nl->fd, .events = POLLIN };
	ssize_t n;
	int r = poll(&p, 1, ms);

	if (r <= 0)
		return r < 0 ? -errno : 0;
	n = recv(nl->fd, buf, len, 0);
	return n < 0 ? -errno : (int)n;
}

#define HP_NLA_OK(a, rem)	((rem) >= (int)sizeof(struct nlattr) && \
				 (a)->nla_len >= sizeof(struct nlattr) && \
				 (a)->nla_len <= (rem))
#define HP_NLA_NEXT(a, rem)	((rem) -= NLA_ALIGN((a)->nla_len), \
				 (struct nlattr *)((char *)(a) + NLA_ALIGN((a)->nla_len)))
#define HP_NLA_DATA(a)		((void *)((char *)(a) + NLA_HDRLEN))

/* Find family id and the "events" group in a CTRL_CMD_NEWFAMILY reply. */
static inline void hp_nl_parse_family(struct hp_nl *nl, struct nlmsghdr *n)
{
	struct nlattr *a = (struct nlattr *)((char *)NLMSG_DATA(n) + GENL_HDRLEN);
	int rem = n->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);

	for (; HP_NLA_OK(a, rem); a = HP_NLA_NEXT(a, rem)) {
		int type = a->nla_type & NLA_TYPE_MASK;

		if (type == CTRL_ATTR_FAMILY_ID)
			nl->family = *(uint16_t *)HP_NLA_DATA(a);
		if (type == CTRL_ATTR_MCAST_GROUPS) {
			struct nlattr *grp = HP_NLA_DATA(a);
			int grem = a->nla_len - NLA_HDRLEN;

			for (; HP_NLA_OK(grp, grem); grp = HP_NLA_NEXT(grp, grem)) {
				struct nlattr *g = HP_NLA_DATA(grp);
				int r2 = grp->nla_len - NLA_HDRLEN;
				uint32_t id = 0;
				const char *name = NULL;

				for (; HP_NLA_OK(g, r2); g = HP_NLA_NEXT(g, r2)) {
					if (g->nla_type == CTRL_ATTR_MCAST_GRP_ID)
						id = *(uint32_t *)HP_NLA_DATA(g);
					if (g->nla_type == CTRL_ATTR_MCAST_GRP_NAME)
						name = HP_NLA_DATA(g);
				}
				if (name && !strcmp(name, HEAPPROFD_GENL_MCGRP_EVENTS))
					nl->events_grp = id;
			}
		}
	}
}

/* Open a socket and resolve the family; returns 0 or -errno. */
static inline int hp_nl_open(struct hp_nl *nl)
{
	struct {
		struct nlattr a;
		char name[16];
	} attr;
	char *buf;
	int n, ret = -ENOENT;

	memset(nl, 0, sizeof(*nl));
	nl->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (nl->fd < 0)
		return -errno;
	memset(&attr, 0, sizeof(attr));
	attr.a.nla_type = CTRL_ATTR_FAMILY_NAME;
	attr.a.nla_len = NLA_HDRLEN + sizeof(HEAPPROFD_GENL_NAME);
	memcpy(attr.name, HEAPPROFD_GENL_NAME, sizeof(HEAPPROFD_GENL_NAME));
	ret = hp_nl_send(nl, GENL_ID_CTRL, 0, CTRL_CMD_GETFAMILY, &attr,
			 NLA_ALIGN(attr.a.nla_len));
	if (ret)
		return ret;
	buf = malloc(HP_NL_BUF);
	if (!buf)
		return -ENOMEM;
	n = hp_nl_recv(nl, buf, HP_NL_BUF, 5000);
	if (n > 0) {
		struct nlmsghdr *h = (struct nlmsghdr *)buf;

		if (h->nlmsg_type == NLMSG_ERROR)
			ret = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
		else {
			hp_nl_parse_family(nl, h);
			ret = nl->family ? 0 : -ENOENT;
		}
	} else {
		ret = n ? n : -ETIMEDOUT;
	}
	free(buf);
	return ret;
}

static inline int hp_nl_join_events(struct hp_nl *nl)
{
	if (!nl->events_grp)
		return -ENOENT;
	if (setsockopt(nl->fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP,
		       &nl->events_grp, sizeof(nl->events_grp)))
		return -errno;
	return 0;
}

static inline void hp_nl_decode(struct nlmsghdr *n, struct hp_nl_msg *m)
{
	struct genlmsghdr *g = NLMSG_DATA(n);
	struct nlattr *a = (struct nlattr *)((char *)g + GENL_HDRLEN);
	int rem = n->nlmsg_len - NLMSG_LENGTH(GENL_HDRLEN);

	memset(m, 0, sizeof(*m));
	m->cmd = g->cmd;
	for (; HP_NLA_OK(a, rem); a = HP_NLA_NEXT(a, rem)) {
		void *d = HP_NLA_DATA(a);
		size_t dl = a->nla_len - NLA_HDRLEN;

		switch (a->nla_type & NLA_TYPE_MASK) {
		case HEAPPROFD_A_SESSION_ID:
			if (dl >= 8) {
				memcpy(&m->session_id, d, 8);
				m->has_id = 1;
			}
			break;
		case HEAPPROFD_A_PID:
			if (dl >= 4) {
				memcpy(&m->pid, d, 4);
				m->has_pid = 1;
			}
			break;
		case HEAPPROFD_A_UID:
			if (dl >= 4)
				memcpy(&m->uid, d, 4);
			break;
		case HEAPPROFD_A_STATE:
			if (dl >= 4)
				memcpy(&m->state, d, 4);
			break;
		case HEAPPROFD_A_DATA_SIZE:
			if (dl >= 8)
				memcpy(&m->data_size, d, 8);
			break;
		case HEAPPROFD_A_DMABUF_INODE:
			if (dl >= 8)
				memcpy(&m->inode, d, 8);
			break;
		case HEAPPROFD_A_DMABUF_SIZE:
		case HEAPPROFD_A_GPU_SIZE:
			if (dl >= 8)
				memcpy(&m->size, d, 8);
			break;
		case HEAPPROFD_A_GPU_ID:
			if (dl >= 4)
				memcpy(&m->gpu_id, d, 4);
			break;
		case HEAPPROFD_A_EVENTS_LOST:
			if (dl >= 8)
				memcpy(&m->events_lost, d, 8);
			break;
		case HEAPPROFD_A_DMABUF_EXPORTER:
			if (dl > 0) {
				size_t c = dl < sizeof(m->exporter) ? dl : sizeof(m->exporter) - 1;

				memcpy(m->exporter, d, c);
				m->exporter[sizeof(m->exporter) - 1] = 0;
			}
			break;
		case HEAPPROFD_A_COMM:
			if (dl > 0) {
				size_t c = dl < sizeof(m->comm) ? dl : sizeof(m->comm) - 1;

				memcpy(m->comm, d, c);
				m->comm[sizeof(m->comm) - 1] = 0;
				m->has_comm = 1;
			}
			break;
		}
	}
}

/*
 * Wait up to ms for a heapprofd message with command cmd and, if id is not
 * 0, that session id. Returns 1 (found, *m filled), 0 (timeout), -errno.
 */
static inline int hp_nl_wait(struct hp_nl *nl, uint8_t cmd, uint64_t id,
			     struct hp_nl_msg *m, int ms)
{
	char *buf = malloc(HP_NL_BUF);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	while (!ret) {
		int n = hp_nl_recv(nl, buf, HP_NL_BUF, ms);
		struct nlmsghdr *h;

		if (n <= 0) {
			ret = n;
			break;
		}
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (unsigned int)n);
		     h = NLMSG_NEXT(h, n)) {
			if (h->nlmsg_type != nl->family)
				continue;
			hp_nl_decode(h, m);
			if (m->cmd == cmd && (!id || m->session_id == id)) {
				ret = 1;
				break;
			}
		}
	}
	free(buf);
	return ret;
}

/*
 * Dump the session list and look for id. Returns 1 (found, *m filled), 0
 * (not listed), -errno.
 */
static inline int hp_nl_dump_find(struct hp_nl *nl, uint64_t id,
				  struct hp_nl_msg *m)
{
	char *buf;
	int ret, found = 0, done = 0;

	ret = hp_nl_send(nl, nl->family, NLM_F_DUMP, HEAPPROFD_CMD_SESSION_GET,
			 NULL, 0);
	if (ret)
		return ret;
	buf = malloc(HP_NL_BUF);
	if (!buf)
		return -ENOMEM;
	while (!done) {
		int n = hp_nl_recv(nl, buf, HP_NL_BUF, 5000);
		struct nlmsghdr *h;

		if (n <= 0) {
			ret = n ? n : -ETIMEDOUT;
			break;
		}
		for (h = (struct nlmsghdr *)buf; NLMSG_OK(h, (unsigned int)n);
		     h = NLMSG_NEXT(h, n)) {
			struct hp_nl_msg tmp;

			if (h->nlmsg_type == NLMSG_DONE) {
				done = 1;
				break;
			}
			if (h->nlmsg_type == NLMSG_ERROR) {
				ret = ((struct nlmsgerr *)NLMSG_DATA(h))->error;
				done = 1;
				break;
			}
			if (h->nlmsg_type != nl->family ||
			    h->nlmsg_seq != nl->seq)
				continue;
			hp_nl_decode(h, &tmp);
			if (tmp.has_id && tmp.session_id == id) {
				*m = tmp;
				found = 1;
			}
		}
	}
	free(buf);
	if (ret < 0)
		return ret;
	return found;
}

#endif /* HP_NL_H */
