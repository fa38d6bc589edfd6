// SPDX-License-Identifier: GPL-2.0
/*
 * `heapprofctl dmabuf [-a|-b] [-o csv] [PID]`, `heapprofctl gpu [-o csv]
 * [PID]` and `heapprofctl meminfo [-o csv|json]`: the printing. What they
 * print is read by dmabuf_info.c. The dmabuf tables follow the layout of
 * Android's dmabuf_dump: per process Name/Rss/Pss/nr_procs/Inode (and the
 * exporter) with a PROCESS TOTAL row, -a the buffer by process table with
 * fd(map) reference counts, -b the buffers and the exporters.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dmabuf_info.h"

#define KB(b) ((unsigned long long)((b) / 1024))

static const char *or_unknown(const char *s)
{
	return s[0] ? s : "<unknown>";
}

static int holds(const struct hp_dmabuf *b, int proc)
{
	size_t i;

	for (i = 0; i < b->nrefs; i++)
		if (b->refs[i].proc == proc)
			return (int)i;
	return -1;
}

static int proc_index(const struct hp_dmabuf_info *info, int pid)
{
	size_t i;

	for (i = 0; i < info->nprocs; i++)
		if (info->procs[i].pid == pid)
			return (int)i;
	return -1;
}

static int proc_holds_any(const struct hp_dmabuf_info *info, int pi)
{
	size_t i;

	for (i = 0; i < info->nbufs; i++)
		if (holds(&info->bufs[i], pi) >= 0)
			return 1;
	return 0;
}

static void totals_line(FILE *f, const struct hp_dmabuf_info *info)
{
	struct hp_dmabuf_totals t;

	hp_dmabuf_totals(info, &t);
	fprintf(f, "dmabuf total: %llu kB kernel_rss: %llu kB userspace_rss: %llu kB userspace_pss: %llu kB\n",
		KB(t.total), KB(t.kernel_rss), KB(t.userspace_rss), KB(t.userspace_pss));
}

/* Per process: what it holds, Rss and Pss per buffer. */
static void print_procs(FILE *f, const struct hp_dmabuf_info *info, enum hp_out_fmt fmt, int only)
{
	size_t i, k;

	if (fmt == HP_FMT_CSV)
		fprintf(f, "pid,comm,inode,name,exporter,size_bytes,rss_bytes,pss_bytes,nr_procs,fd_refs,map_refs\n");
	for (i = 0; i < info->nprocs; i++) {
		const struct hp_dmaproc *p = &info->procs[i];
		uint64_t rss = 0, pss = 0;

		if ((only >= 0 && (int)i != only) || !proc_holds_any(info, (int)i))
			continue;
		if (fmt == HP_FMT_TEXT) {
			fprintf(f, "%16s:%-5d\n", p->comm, p->pid);
			fprintf(f, "%22s %16s %16s %16s %16s  %s\n", "Name", "Rss", "Pss", "nr_procs",
				"Inode", "Exporter");
		}
		for (k = 0; k < info->nbufs; k++) {
			const struct hp_dmabuf *b = &info->bufs[k];
			int r = holds(b, (int)i);

			if (r < 0)
				continue;
			rss += b->size;
			pss += hp_dmabuf_pss(b);
			if (fmt == HP_FMT_CSV)
				fprintf(f, "%d,%s,%" PRIu64 ",%s,%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64
					",%zu,%u,%u\n", p->pid, p->comm, b->inode, b->name,
					b->exporter, b->size, b->size, hp_dmabuf_pss(b),
					hp_dmabuf_nprocs(b), b->refs[r].fds, b->refs[r].maps);
			else
				fprintf(f, "%22s %13llu kB %13llu kB %16zu %16" PRIu64 "  %s\n",
					or_unknown(b->name), KB(b->size), KB(hp_dmabuf_pss(b)),
					hp_dmabuf_nprocs(b), b->inode, or_unknown(b->exporter));
		}
		if (fmt == HP_FMT_TEXT) {
			fprintf(f, "%22s %13llu kB %13llu kB %16s\n", "PROCESS TOTAL", KB(rss), KB(pss),
				"");
			fprintf(f, "----------------------\n");
		}
	}
	if (fmt == HP_FMT_TEXT)
		totals_line(f, info);
}

/* Buffer by process: fd(map) references. */
static void print_all(FILE *f, const struct hp_dmabuf_info *info, enum hp_out_fmt fmt, int only)
{
	size_t i, k, j;

	if (fmt == HP_FMT_CSV) {
		fprintf(f, "inode,size_bytes,exporter,pid,comm,fd_refs,map_refs,pss_bytes\n");
		for (k = 0; k < info->nbufs; k++) {
			const struct hp_dmabuf *b = &info->bufs[k];
			int shown = 0;

			for (j = 0; j < b->nrefs; j++) {
				const struct hp_dmaproc *p = &info->procs[b->refs[j].proc];

				if (only >= 0 && b->refs[j].proc != only)
					continue;
				fprintf(f, "%" PRIu64 ",%" PRIu64 ",%s,%d,%s,%u,%u,%" PRIu64 "\n",
					b->inode, b->size, b->exporter, p->pid, p->comm,
					b->refs[j].fds, b->refs[j].maps, hp_dmabuf_pss(b));
				shown = 1;
			}
			if (!shown && !b->nrefs && only < 0)	/* the kernel's alone */
				fprintf(f, "%" PRIu64 ",%" PRIu64 ",%s,0,,0,0,0\n", b->inode, b->size,
					b->exporter);
		}
		return;
	}
	fprintf(f, "----------------------- DMA-BUF per-buffer stats -----------------------\n");
	fprintf(f, "    Dmabuf Inode |            Size |         Exporter |      Fd Ref Counts |     Map Ref Counts |");
	for (i = 0; i < info->nprocs; i++)
		if ((only < 0 || (int)i == only) && proc_holds_any(info, (int)i))
			fprintf(f, "%16s:%-5d |", info->procs[i].comm, info->procs[i].pid);
	fprintf(f, "\n");
	for (k = 0; k < info->nbufs; k++) {
		const struct hp_dmabuf *b = &info->bufs[k];
		unsigned fds = 0, maps = 0;

		if (only >= 0 && holds(b, only) < 0)
			continue;
		for (j = 0; j < b->nrefs; j++)
			fds += b->refs[j].fds, maps += b->refs[j].maps;
		fprintf(f, "%16" PRIu64 " |%13llu kB |%17.17s |%19u |%19u |", b->inode, KB(b->size),
			or_unknown(b->exporter), fds, maps);
		for (i = 0; i < info->nprocs; i++) {
			int r;

			if ((only >= 0 && (int)i != only) || !proc_holds_any(info, (int)i))
				continue;
			r = holds(b, (int)i);
			if (r < 0)
				fprintf(f, "%22s |", "--");
			else
				fprintf(f, "%9u(%6u) refs |", b->refs[r].fds, b->refs[r].maps);
		}
		fprintf(f, "\n");
	}
	for (j = 0; j < 2; j++) {
		fprintf(f, "%16s |%16s |%17s |%19s |%19s |", j ? "PROCESS PSS" : "PROCESS RSS", "", "",
			"", "");
		for (i = 0; i < info->nprocs; i++) {
			uint64_t sum = 0;

			if ((only >= 0 && (int)i != only) || !proc_holds_any(info, (int)i))
				continue;
			for (k = 0; k < info->nbufs; k++)
				if (holds(&info->bufs[k], (int)i) >= 0)
					sum += j ? hp_dmabuf_pss(&info->bufs[k]) : info->bufs[k].size;
			fprintf(f, "%19llu kB |", KB(sum));
		}
		fprintf(f, "\n");
	}
	fprintf(f, "-------------------------------------------------------------------------\n");
	totals_line(f, info);
}

static void sources(const struct hp_dmabuf_info *info, char *out, size_t len)
{
	snprintf(out, len, "%s%s%s%s/proc fdinfo and maps",
		 info->module ? "heapprofd module (" : "", info->module ? info->module_source : "",
		 info->module ? "), " : "",
		 info->android_sysfs ? "/sys/kernel/dmabuf/buffers, " : "");
}

/* Buffers and exporters. */
static void print_buffers(FILE *f, const struct hp_dmabuf_info *info, enum hp_out_fmt fmt)
{
	struct { const char *name; uint64_t count, size; } *ex;
	size_t nex = 0, k, e;
	uint64_t count = 0, size = 0;
	char src[256];

	ex = calloc(info->nbufs + 1, sizeof(*ex));
	if (!ex)
		return;
	for (k = 0; k < info->nbufs; k++) {
		const struct hp_dmabuf *b = &info->bufs[k];

		for (e = 0; e < nex && strcmp(ex[e].name, b->exporter); e++)
			;
		if (e == nex)
			ex[nex++].name = b->exporter;
		ex[e].count++;
		ex[e].size += b->size;
		count++;
		size += b->size;
	}
	if (fmt == HP_FMT_CSV) {
		fprintf(f, "record,inode,exporter,exporter_pid,count,size_bytes\n");
		for (k = 0; k < info->nbufs; k++)
			fprintf(f, "buffer,%" PRIu64 ",%s,%d,1,%" PRIu64 "\n", info->bufs[k].inode,
				info->bufs[k].exporter, info->bufs[k].exporter_pid, info->bufs[k].size);
		for (e = 0; e < nex; e++)
			fprintf(f, "exporter,,%s,,%" PRIu64 ",%" PRIu64 "\n", ex[e].name, ex[e].count,
				ex[e].size);
		fprintf(f, "total,,,,%" PRIu64 ",%" PRIu64 "\n", count, size);
		free(ex);
		return;
	}
	sources(info, src, sizeof(src));
	fprintf(f, "DMA-BUF buffers, from %s\n", src);
	fprintf(f, "    Dmabuf Inode |     Size(bytes) |          Exporter Name | Exporter PID |\n");
	for (k = 0; k < info->nbufs; k++) {
		const struct hp_dmabuf *b = &info->bufs[k];
		char pid[16] = "-";

		if (b->exporter_pid >= 0)
			snprintf(pid, sizeof(pid), "%d", b->exporter_pid);
		fprintf(f, "%16" PRIu64 " |%16" PRIu64 " |%23.23s |%13s |\n", b->inode, b->size,
			or_unknown(b->exporter), pid);
	}
	fprintf(f, "\n----------------------- DMA-BUF exporter stats -----------------------\n");
	fprintf(f, "          Exporter Name |  Total Count |  Total Size(bytes) |\n");
	for (e = 0; e < nex; e++)
		fprintf(f, "%23.23s |%13" PRIu64 " |%19" PRIu64 " |\n", or_unknown(ex[e].name),
			ex[e].count, ex[e].size);
	fprintf(f, "\nTotal DMA-BUF count: %" PRIu64 ", Total DMA-BUF size(bytes): %" PRIu64 "\n",
		count, size);
	free(ex);
}

int hp_dmabuf_print(FILE *f, const struct hp_dmabuf_info *info, enum hp_dmabuf_view view,
		    enum hp_out_fmt fmt, int pid)
{
	int only = -1;

	if (pid > 0) {
		only = proc_index(info, pid);
		if (only < 0) {
			fprintf(stderr, "heapprofctl: dmabuf: no process %d\n", pid);
			return 1;
		}
	}
	if (only >= 0 && !proc_holds_any(info, only) && fmt == HP_FMT_TEXT)
		fprintf(f, "process %d holds no DMA-BUF\n", pid);
	switch (view) {
	case HP_VIEW_PROCS:
		print_procs(f, info, fmt, only);
		break;
	case HP_VIEW_ALL:
		print_all(f, info, fmt, only);
		break;
	case HP_VIEW_BUFFERS:
		print_buffers(f, info, fmt);
		break;
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* gpu                                                                 */
/* ------------------------------------------------------------------ */

static void cell(FILE *f, uint64_t v, int csv)
{
	if (csv)
		v == UINT64_MAX ? fprintf(f, ",") : fprintf(f, ",%" PRIu64, v);
	else
		v == UINT64_MAX ? fprintf(f, " %12s", "-") : fprintf(f, " %9llu kB", KB(v));
}

int hp_gpu_print(FILE *f, const struct hp_dmabuf_info *info, const struct hp_gpu_info *g,
		 enum hp_out_fmt fmt, int pid)
{
	int csv = fmt == HP_FMT_CSV, any = 0;
	size_t i, j;
	int r;

	if (pid > 0 && proc_index(info, pid) < 0) {
		fprintf(stderr, "heapprofctl: gpu: no process %d\n", pid);
		return 1;
	}
	if (csv)
		fprintf(f, "source,pid,comm,driver,pdev,client_id,region,total_bytes,shared_bytes,resident_bytes,purgeable_bytes,active_bytes,fds,counted\n");
	else
		fprintf(f, "GPU memory from DRM fdinfo (each drm-client-id once per driver and device; -: not reported)\n");
	for (i = 0; i < info->nprocs; i++) {
		const struct hp_dmaproc *p = &info->procs[i];

		if ((pid > 0 && p->pid != pid) || !p->ndrm)
			continue;
		any = 1;
		if (!csv) {
			fprintf(f, "%16s:%-5d\n", p->comm, p->pid);
			fprintf(f, "  %-10s %8s %-16s %12s %12s %12s %12s %12s\n", "driver", "client",
				"region", "total", "shared", "resident", "purgeable", "active");
		}
		for (j = 0; j < p->ndrm; j++) {
			const struct hp_drm_client *c = &p->drm[j];
			char id[24] = "-";

			if (c->has_id)
				snprintf(id, sizeof(id), "%" PRIu64, c->client_id);
			if (!c->nregions) {
				if (csv)
					fprintf(f, "drm,%d,%s,%s,%s,%s,,,,,,,%u,%d\n", p->pid, p->comm,
						c->driver, c->pdev, c->has_id ? id : "", c->fds,
						c->first_owner);
				else
					fprintf(f, "  %-10s %8s %-16s (no memory keys)\n", c->driver, id,
						"");
			}
			for (r = 0; r < c->nregions; r++) {
				const struct hp_drm_region *rg = &c->region[r];

				if (csv)
					fprintf(f, "drm,%d,%s,%s,%s,%s,%s", p->pid, p->comm, c->driver,
						c->pdev, c->has_id ? id : "", rg->name);
				else
					fprintf(f, "  %-10s %8s %-16s", c->driver, id, rg->name);
				cell(f, rg->total, csv);
				cell(f, rg->shared, csv);
				cell(f, rg->resident, csv);
				cell(f, rg->purgeable, csv);
				cell(f, rg->active, csv);
				if (csv)
					fprintf(f, ",%u,%d\n", c->fds, c->first_owner);
				else
					fprintf(f, "%s\n", c->first_owner ? "" :
						"  (also in an earlier process)");
			}
		}
	}
	if (!any && !csv)
		fprintf(f, "  (no DRM client%s%s)\n", pid > 0 ? " in this process" : "",
			info->unreadable ? "; some processes could not be read" : "");
	if (!g->module) {
		if (!csv)
			fprintf(f, "\nGPU totals (gpu_mem_total): no /sys/kernel/heapprofd/gpu (the heapprofd module is not loaded, or it has no GPU source)\n");
		return 0;
	}
	if (!csv)
		fprintf(f, "\nGPU totals from the heapprofd module (gpu_mem_total)\n  %6s %8s %13s\n",
			"gpu", "pid", "bytes");
	for (i = 0; i < g->n; i++) {
		if (pid > 0 && g->e[i].pid && g->e[i].pid != pid)
			continue;
		if (csv)
			fprintf(f, "gpu_mem_total,%d,,gpu%u,,,,%" PRIu64 ",,,,,,%d\n", g->e[i].pid,
				g->e[i].gpu, g->e[i].bytes, g->e[i].pid == 0);
		else {
			char who[16] = "total";

			if (g->e[i].pid)
				snprintf(who, sizeof(who), "%d", g->e[i].pid);
			fprintf(f, "  %6u %8s %10llu kB\n", g->e[i].gpu, who, KB(g->e[i].bytes));
		}
	}
	return 0;
}

/* ------------------------------------------------------------------ */
/* meminfo                                                             */
/* ------------------------------------------------------------------ */

/* Which group of the formula each term belongs to, and its sign in it. */
static const struct { const char *group; int sign; } mem_group[HP_MT_N] = {
	[HP_MT_TOTAL] = { "total", 1 },
	[HP_MT_PSS] = { "pss", 1 },
	[HP_MT_SWAP_PSS] = { "pss", -1 },
	[HP_MT_DMABUF_MAPPED] = { "pss", 1 },
	[HP_MT_FREE] = { "free", 1 },
	[HP_MT_CACHED_BUFFERS] = { "cached", 1 },
	[HP_MT_CACHED_CACHED] = { "cached", 1 },
	[HP_MT_CACHED_MAPPED] = { "cached", -1 },
	[HP_MT_CACHED_KRECLAIMABLE] = { "cached", 1 },
	[HP_MT_CACHED_POOLS] = { "cached", 1 },
	[HP_MT_K_SUNRECLAIM] = { "kernel_used", 1 },
	[HP_MT_K_VMALLOC] = { "kernel_used", 1 },
	[HP_MT_K_PAGETABLES] = { "kernel_used", 1 },
	[HP_MT_K_KERNELSTACK] = { "kernel_used", 1 },
	[HP_MT_K_DMABUF_UNMAPPED] = { "kernel_used", 1 },
	[HP_MT_K_GPU_PRIVATE] = { "kernel_used", 1 },
	[HP_MT_ZRAM] = { "zram", 1 },
	[HP_MT_LOST] = { "lost", 1 },
};

static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void mem_row(FILE *f, const struct hp_meminfo *m, int t)
{
	fprintf(f, "  %c %-17s %12lld kB  %s\n", mem_group[t].sign < 0 ? '-' : '+',
		hp_mem_term_name[t], (long long)m->kb[t], m->src[t]);
}

void hp_meminfo_print(FILE *f, const struct hp_meminfo *m, enum hp_out_fmt fmt)
{
	int t;

	if (fmt == HP_FMT_CSV) {
		fprintf(f, "term,group,sign,kb,source\n");
		for (t = 0; t < HP_MT_N; t++)
			fprintf(f, "%s,%s,%d,%lld,\"%s\"\n", hp_mem_term_name[t], mem_group[t].group,
				mem_group[t].sign, (long long)m->kb[t], m->src[t]);
		fprintf(f, "pss_net,sum,1,%lld,\"pss - swap_pss + dmabuf_mapped\"\n",
			(long long)m->pss_net);
		fprintf(f, "cached_total,sum,1,%lld,\"buffers + cached - mapped + kreclaimable + dma_heap_pools\"\n",
			(long long)m->cached);
		fprintf(f, "kernel_used,sum,1,%lld,\"sunreclaim + vmalloc_used + page_tables + kernel_stack + dmabuf_unmapped + gpu_private\"\n",
			(long long)m->kernel_used);
		return;
	}
	if (fmt == HP_FMT_JSON) {
		const char *n = m->notes;

		fprintf(f, "{\n  \"unit\": \"kB\",\n  \"terms\": [\n");
		for (t = 0; t < HP_MT_N; t++) {
			fprintf(f, "    {\"name\": \"%s\", \"group\": \"%s\", \"sign\": %d, \"kb\": %lld, \"source\": ",
				hp_mem_term_name[t], mem_group[t].group, mem_group[t].sign,
				(long long)m->kb[t]);
			json_str(f, m->src[t]);
			fprintf(f, "}%s\n", t + 1 < HP_MT_N ? "," : "");
		}
		fprintf(f, "  ],\n  \"total\": %lld,\n  \"pss_net\": %lld,\n  \"free\": %lld,\n"
			"  \"cached\": %lld,\n  \"kernel_used\": %lld,\n  \"zram\": %lld,\n"
			"  \"lost\": %lld,\n  \"processes\": %u,\n  \"processes_unreadable\": %u,\n"
			"  \"notes\": [",
			(long long)m->kb[HP_MT_TOTAL], (long long)m->pss_net,
			(long long)m->kb[HP_MT_FREE], (long long)m->cached, (long long)m->kernel_used,
			(long long)m->kb[HP_MT_ZRAM], (long long)m->kb[HP_MT_LOST], m->procs,
			m->procs_unreadable);
		for (t = 0; *n; t++) {
			char line[512];
			size_t l = strcspn(n, "\n");

			snprintf(line, sizeof(line), "%.*s", (int)(l < sizeof(line) ? l : sizeof(line) - 1), n);
			fprintf(f, "%s", t ? ", " : "");
			json_str(f, line);
			n += l + (n[l] ? 1 : 0);
		}
		fprintf(f, "]\n}\n");
		return;
	}
	fprintf(f, "lost RAM = total - (pss - swap_pss + dmabuf_mapped) - free - cached - kernel_used - zram\n\n");
	fprintf(f, "  %-19s %12lld kB  %s\n", "total", (long long)m->kb[HP_MT_TOTAL],
		m->src[HP_MT_TOTAL]);
	fprintf(f, "- %-19s %12lld kB  = pss - swap_pss + dmabuf_mapped\n", "pss (net)",
		(long long)m->pss_net);
	for (t = HP_MT_PSS; t <= HP_MT_DMABUF_MAPPED; t++)
		mem_row(f, m, t);
	fprintf(f, "- %-19s %12lld kB  %s\n", "free", (long long)m->kb[HP_MT_FREE],
		m->src[HP_MT_FREE]);
	fprintf(f, "- %-19s %12lld kB  = buffers + cached - mapped + kreclaimable + dma_heap_pools\n",
		"cached", (long long)m->cached);
	for (t = HP_MT_CACHED_BUFFERS; t <= HP_MT_CACHED_POOLS; t++)
		mem_row(f, m, t);
	fprintf(f, "- %-19s %12lld kB  = sunreclaim + vmalloc_used + page_tables + kernel_stack + dmabuf_unmapped + gpu_private\n",
		"kernel_used", (long long)m->kernel_used);
	for (t = HP_MT_K_SUNRECLAIM; t <= HP_MT_K_GPU_PRIVATE; t++)
		mem_row(f, m, t);
	fprintf(f, "- %-19s %12lld kB  %s\n", "zram", (long long)m->kb[HP_MT_ZRAM],
		m->src[HP_MT_ZRAM]);
	fprintf(f, "= %-19s %12lld kB\n", "lost", (long long)m->kb[HP_MT_LOST]);
	if (m->notes[0])
		fprintf(f, "\nnotes:\n%s", m->notes);
}

/* ------------------------------------------------------------------ */
/* the subcommands                                                     */
/* ------------------------------------------------------------------ */

struct common {
	const char *proc, *sys;
	enum hp_out_fmt fmt;
	int pid;
	enum hp_dmabuf_view view;
};

static int parse(int argc, char **argv, struct common *o, const char *shortopts,
		 const char *usage, int formats)
{
	static const struct option lo[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "all", no_argument, NULL, 'a' },
		{ "buffers", no_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		/* Hidden: read a recorded tree instead of /proc and /sys. */
		{ "proc-root", required_argument, NULL, 'P' },
		{ "sys-root", required_argument, NULL, 'S' },
		{ 0 }
	};
	int opt;

	o->proc = hp_proc_root();
	o->sys = hp_sys_root();
	optind = 1;
	while ((opt = getopt_long(argc, argv, shortopts, lo, NULL)) != -1) {
		switch (opt) {
		case 'o':
			if (!strcmp(optarg, "text"))
				o->fmt = HP_FMT_TEXT;
			else if (!strcmp(optarg, "csv"))
				o->fmt = HP_FMT_CSV;
			else if (!strcmp(optarg, "json") && formats > 2)
				o->fmt = HP_FMT_JSON;
			else {
				fprintf(stderr, "heapprofctl: %s: -o must be text, csv%s\n", argv[0],
					formats > 2 ? " or json" : "");
				return 2;
			}
			break;
		case 'a': o->view = HP_VIEW_ALL; break;
		case 'b': o->view = HP_VIEW_BUFFERS; break;
		case 'P': o->proc = optarg; break;
		case 'S': o->sys = optarg; break;
		case 'h': printf("usage: heapprofctl %s\n", usage); return -1;
		default: fprintf(stderr, "usage: heapprofctl %s\n", usage); return 2;
		}
	}
	if (optind < argc) {
		uint64_t v;

		if (hp_strict_u64(argv[optind], NULL, &v) || !v || v > INT32_MAX ||
		    argv[optind][strspn(argv[optind], "0123456789")]) {
			fprintf(stderr, "heapprofctl: %s: PID must be a process id, not '%s'\n",
				argv[0], argv[optind]);
			return 2;
		}
		o->pid = (int)v;
		if (optind + 1 < argc) {
			fprintf(stderr, "usage: heapprofctl %s\n", usage);
			return 2;
		}
	}
	return 0;
}

static void collect_notes(const struct hp_dmabuf_info *info, const char *sys)
{
	if (info->unreadable)
		fprintf(stderr, "heapprofctl: %u processes could not be read (not ours: run as root to see them)\n",
			info->unreadable);
	if (!info->module && !info->android_sysfs)
		fprintf(stderr, "heapprofctl: no %s/kernel/heapprofd/dmabuf (heapprofd module not loaded) and no %s/kernel/dmabuf/buffers (CONFIG_DMABUF_SYSFS_STATS): buffers no process holds are not seen, kernel_rss is 0, exporters of buffers only mapped are unknown\n",
			sys, sys);
	else if (!info->module)
		fprintf(stderr, "heapprofctl: no %s/kernel/heapprofd/dmabuf (heapprofd module not loaded): exporting pids are unknown\n",
			sys);
	if (info->skipped)
		fprintf(stderr, "heapprofctl: %u files did not parse and were skipped\n", info->skipped);
}

int hp_dmabuf_main(int argc, char **argv)
{
	struct common o = { 0 };
	struct hp_dmabuf_info info = { 0 };
	char why[512];
	int rc = parse(argc, argv, &o, "+o:abh",
		       "dmabuf [-a | -b] [-o text|csv] [PID]", 2);

	if (rc)
		return rc < 0 ? 0 : rc;
	if (hp_dmabuf_collect(&info, o.proc, o.sys, 0, why, sizeof(why))) {
		fprintf(stderr, "heapprofctl: dmabuf: %s\n", why);
		return 1;
	}
	collect_notes(&info, o.sys);
	rc = hp_dmabuf_print(stdout, &info, o.view, o.fmt, o.pid);
	hp_dmabuf_free(&info);
	return rc;
}

int hp_gpu_main(int argc, char **argv)
{
	struct common o = { 0 };
	struct hp_dmabuf_info info = { 0 };
	struct hp_gpu_info g = { 0 };
	char why[512];
	int rc = parse(argc, argv, &o, "+o:h", "gpu [-o text|csv] [PID]", 2);

	if (rc)
		return rc < 0 ? 0 : rc;
	if (hp_dmabuf_collect(&info, o.proc, o.sys, 0, why, sizeof(why))) {
		fprintf(stderr, "heapprofctl: gpu: %s\n", why);
		return 1;
	}
	if (info.unreadable)
		fprintf(stderr, "heapprofctl: %u processes could not be read (not ours: run as root to see them)\n",
			info.unreadable);
	hp_gpu_collect(&g, o.sys);
	rc = hp_gpu_print(stdout, &info, &g, o.fmt, o.pid);
	hp_gpu_free(&g);
	hp_dmabuf_free(&info);
	return rc;
}

int hp_meminfo_main(int argc, char **argv)
{
	struct common o = { 0 };
	struct hp_meminfo m;
	char why[512];
	int rc = parse(argc, argv, &o, "+o:h", "meminfo [-o text|csv|json]", 3);

	if (rc)
		return rc < 0 ? 0 : rc;
	if (o.pid) {
		fprintf(stderr, "usage: heapprofctl meminfo [-o text|csv|json]\n");
		return 2;
	}
	if (hp_meminfo_collect(&m, o.proc, o.sys, why, sizeof(why))) {
		fprintf(stderr, "heapprofctl: meminfo: %s\n", why);
		return 1;
	}
	if (m.procs_unreadable && o.fmt != HP_FMT_TEXT)
		fprintf(stderr, "heapprofctl: %u processes could not be read (run as root): their PSS counts as lost\n",
			m.procs_unreadable);
	hp_meminfo_print(stdout, &m, o.fmt);
	return 0;
}
