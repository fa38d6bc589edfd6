// SPDX-License-Identifier: GPL-2.0
/*
 * The sampling intervals a heap's samples were drawn at. A client that
 * falls behind raises its interval while its ring fills (the adaptive
 * interval, uapi HEAPPROFD_CFG_ADAPTIVE), so one profile holds samples of
 * several intervals, each standing for its own. The profile says which
 * were used, and how often, so that a reader knows how fine its grain was.
 * Books thread only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void hp_ivals_add(struct hp_ivals *v, uint64_t interval, int exact)
{
	unsigned i;

	if (exact) {
		v->exact++;
		return;
	}
	/* Most samples come at the interval of the one before. */
	if (v->n && v->e[v->last].interval == interval) {
		v->e[v->last].samples++;
		return;
	}
	for (i = 0; i < v->n; i++)
		if (v->e[i].interval == interval)
			break;
	if (i == v->n) {
		if (v->n == HP_IVALS_MAX) {
			v->other++;	/* a hostile client's thousand intervals */
			return;
		}
		v->e[v->n].interval = interval;
		v->e[v->n].samples = 0;
		v->n++;
	}
	v->e[i].samples++;
	v->last = i;
}

static int by_interval(const void *a, const void *b)
{
	const struct hp_ival *x = a, *y = b;

	return x->interval < y->interval ? -1 : x->interval > y->interval;
}

/* Bytes as the shortest exact unit: 4096 -> "4 KiB", 1000 -> "1000 B". */
static void size_str(char *buf, size_t len, uint64_t n)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	unsigned u = 0;

	while (u < 4 && n >= 1024 && !(n % 1024)) {
		n /= 1024;
		u++;
	}
	snprintf(buf, len, "%llu %s", (unsigned long long)n, unit[u]);
}

void hp_ivals_comment(const struct hp_ivals *v, const char *heap, struct hp_prof *out)
{
	struct hp_ival e[HP_IVALS_MAX];
	char buf[1200], sz[32];
	size_t off = 0;
	unsigned i;

	if (!v->n && !v->exact && !v->other)
		return;
	memcpy(e, v->e, v->n * sizeof(e[0]));
	qsort(e, v->n, sizeof(e[0]), by_interval);
	off += (size_t)snprintf(buf, sizeof(buf), "sampling interval%s (%s):",
				v->n > 1 ? "s" : "", heap);
	for (i = 0; i < v->n && off < sizeof(buf); i++) {
		size_str(sz, sizeof(sz), e[i].interval);
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s %s for %llu sample%s",
					i ? "," : "", sz, (unsigned long long)e[i].samples,
					e[i].samples == 1 ? "" : "s");
	}
	if (v->other && off < sizeof(buf))
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s %llu more at other intervals",
					v->n ? "," : "", (unsigned long long)v->other);
	if (off < sizeof(buf))
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s %llu recorded exactly (large)",
					v->n || v->other ? ";" : "", (unsigned long long)v->exact);
	if (v->n + (v->other != 0) > 1 && off < sizeof(buf))
		snprintf(buf + off, sizeof(buf) - off,
			 ". The client raised its interval while its ring filled (the daemon was behind) "
			 "rather than drop samples; each sample stands for the interval it was drawn at, "
			 "so the estimates are unbiased, and coarser where the interval was larger");
	hp_prof_add_comment(out, "%s", buf);
}
