// SPDX-License-Identifier: GPL-2.0
/*
 * Which sessions the daemon attaches, and under whose request. A rule comes
 * from a heapprofctl (record: the pid of the child it started, --name, --all;
 * attach: one pid) and lives as long as that control connection.
 */
#include <fnmatch.h>
#include <stdio.h>
#include <string.h>

#include "hpd.h"

static struct hpd_rule *rules;

void hpd_rule_add(struct hpd_rule *r)
{
	r->next = rules;
	rules = r;
}

void hpd_rule_del(struct hpd_rule *r)
{
	struct hpd_rule **pp;

	for (pp = &rules; *pp; pp = &(*pp)->next)
		if (*pp == r) {
			*pp = r->next;
			return;
		}
}

/* PPid of pid from /proc, or -1. */
static pid_t parent_of(pid_t pid)
{
	char path[64], line[256];
	pid_t pp = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "PPid: %d", &pp) == 1)
			break;
	fclose(f);
	return pp;
}

int hpd_pid_descends_from(pid_t pid, pid_t ancestor)
{
	int depth;

	for (depth = 0; depth < 64 && pid > 1; depth++) {
		pid = parent_of(pid);
		if (pid == ancestor)
			return 1;
	}
	return 0;
}

int hpd_rule_wants_heap(const struct hpd_rule *r, const char *name)
{
	size_t n = strlen(name);
	const char *p;

	if (!r || !r->heaps[0])
		return 1;
	for (p = r->heaps; *p; p += strcspn(p, ",")) {
		p += *p == ',';
		if (!strncmp(p, name, n) && (p[n] == ',' || !p[n]))
			return 1;
	}
	return 0;
}

/*
 * The newest matching rule. Dormant sessions match only rules that profile
 * by name or everything (record --name/--all), or an explicit attach.
 */
struct hpd_rule *hpd_rule_match(pid_t pid, const char *comm, int dormant)
{
	struct hpd_rule *r;

	for (r = rules; r; r = r->next) {
		if (r->pid && r->pid == pid)
			return r;
		if (dormant && !r->dormant_too)
			continue;
		if (r->pid && r->follow_forks && hpd_pid_descends_from(pid, r->pid))
			return r;
		if (r->name[0] && comm && !fnmatch(r->name, comm, 0))
			return r;
		if (r->all)
			return r;
	}
	return NULL;
}

struct hpd_rule *hpd_rule_owned_by(struct hpd_ctlconn *o)
{
	struct hpd_rule *r;

	for (r = rules; r; r = r->next)
		if (r->owner == o)
			return r;
	return NULL;
}
