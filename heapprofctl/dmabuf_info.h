/* SPDX-License-Identifier: GPL-2.0 */
/*
 * DMA-BUF, DRM and system memory as /proc and /sys show them: the reading
 * and parsing behind `heapprofctl dmabuf`, `gpu` and `meminfo` (the printing
 * is dmabuf.c). Nothing here prints or exits (but on running out of
 * memory): errors come back as text.
 *
 * Sources, all under a root that tests replace with a recorded tree:
 *   PROC/<pid>/fdinfo/<fd>     dma-buf fds (size:, count:, exp_name:, name:,
 *                              and the generic ino:) and DRM fds (drm-*)
 *   PROC/<pid>/maps            /dmabuf: mappings (inode column)
 *   PROC/<pid>/smaps_rollup    Pss, SwapPss
 *   PROC/meminfo
 *   SYS/kernel/heapprofd/dmabuf/...  the module's view (every buffer, with
 *                              its exporter and exporting pid)
 *   SYS/kernel/heapprofd/gpu/...     the module's gpu_mem_total totals
 *   SYS/kernel/dmabuf/buffers/<ino>  CONFIG_DMABUF_SYSFS_STATS
 *   SYS/kernel/dma_heap/total_pools_kb, SYS/block/zram* /mm_stat
 * Every file is read with a bounded length and every number strictly; a
 * file that does not parse is skipped (counted in `skipped`), never trusted.
 */
#ifndef HP_DMABUF_INFO_H
#define HP_DMABUF_INFO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define HP_PROC_ROOT_ENV "HEAPPROFD_PROC_ROOT"	/* default /proc */
#define HP_SYS_ROOT_ENV  "HEAPPROFD_SYS_ROOT"	/* default /sys */

/* Where a buffer was seen (bits of hp_dmabuf.seen). */
#define HP_SEEN_FD	0x1	/* a process's fdinfo */
#define HP_SEEN_MAP	0x2	/* a process's maps */
#define HP_SEEN_MODULE	0x4	/* /sys/kernel/heapprofd/dmabuf/buffers */
#define HP_SEEN_SYSFS	0x8	/* /sys/kernel/dmabuf/buffers */

struct hp_dmabuf_ref {
	int proc;		/* index into hp_dmabuf_info.procs */
	unsigned fds;		/* fds of the process on the buffer */
	unsigned maps;		/* its mappings of the buffer */
};

struct hp_dmabuf {
	uint64_t inode;
	uint64_t size;		/* bytes; 0: not known */
	int size_from_map;	/* only a mapping's length said the size */
	char exporter[64];	/* "" when no source names it */
	char name[64];		/* dma_buf_set_name's, "" if none */
	int exporter_pid;	/* the module's; -1 when not known */
	unsigned seen;		/* HP_SEEN_* */
	struct hp_dmabuf_ref *refs;
	size_t nrefs, caprefs;
};

/* One DRM client (an open drm_file), from the fdinfo of one of its fds. */
#define HP_DRM_REGIONS 8
struct hp_drm_region {
	char name[32];
	/* bytes; UINT64_MAX: the key was absent */
	uint64_t total, shared, resident, purgeable, active;
};

struct hp_drm_client {
	char driver[32];
	char pdev[32];
	uint64_t client_id;
	int has_id;
	struct hp_drm_region region[HP_DRM_REGIONS];
	int nregions;
	unsigned fds;		/* fds of this process on the client */
	int first_owner;	/* 1: the first process seen with it (system totals) */
};

struct hp_dmaproc {
	int pid;
	char comm[32];
	struct hp_drm_client *drm;
	size_t ndrm, capdrm;
	int unreadable;		/* fdinfo or maps could not be read */
	uint64_t pss_kb, swap_pss_kb;	/* smaps_rollup, when collected */
	int has_rollup;
};

struct hp_dmabuf_info {
	struct hp_dmabuf *bufs;
	size_t nbufs, capbufs;
	struct hp_dmaproc *procs;
	size_t nprocs, capprocs;
	/* the module's dmabuf/ directory */
	int module;			/* 1: present */
	char module_source[32];		/* "kprobe", "tracepoint", "none" */
	uint64_t module_total, module_count;
	int android_sysfs;		/* /sys/kernel/dmabuf/buffers present */
	unsigned unreadable;		/* processes we could not read */
	unsigned skipped;		/* files that did not parse */
};

/* The roots: the environment's, else /proc and /sys. */
const char *hp_proc_root(void);
const char *hp_sys_root(void);

/* Strictly parse a decimal u64 ending at end or at whitespace. 0 or -1. */
int hp_strict_u64(const char *s, const char **end, uint64_t *out);

/*
 * Read every process under proc (and the sysfs sources under sys) into
 * info. want_rollup: also read smaps_rollup. 0, or -1 with why (proc
 * unreadable). info must be zeroed before.
 */
int hp_dmabuf_collect(struct hp_dmabuf_info *info, const char *proc, const char *sys,
		      int want_rollup, char *why, size_t whylen);
void hp_dmabuf_free(struct hp_dmabuf_info *info);

/* Parsers, exposed for the unit tests. */
/* A dma-buf fdinfo text: 1 (it is one; fills inode, size, count, exporter,
 * name), 0 (not a dma-buf), -1 (claims to be one but does not parse). */
int hp_parse_dmabuf_fdinfo(const char *text, uint64_t *inode, uint64_t *size, long *count,
			   char *exporter, size_t elen, char *name, size_t nlen);
/* A DRM fdinfo text: 1 (fills c), 0 (not DRM), -1 (malformed). */
int hp_parse_drm_fdinfo(const char *text, struct hp_drm_client *c);
/* A maps line of a /dmabuf: mapping: 1 (inode, length, name), 0 other. */
int hp_parse_dmabuf_maps_line(const char *line, uint64_t *inode, uint64_t *len, char *name,
			      size_t nlen);
/* "4 KiB", "12 MiB", "12345": bytes. 0 or -1. */
int hp_parse_drm_size(const char *v, uint64_t *bytes);

/* ---- derived figures ---- */
/* Number of processes holding buffer b (by fd or mapping). */
static inline size_t hp_dmabuf_nprocs(const struct hp_dmabuf *b)
{
	return b->nrefs;
}
/* Proportional share: size / number of processes holding it. */
static inline uint64_t hp_dmabuf_pss(const struct hp_dmabuf *b)
{
	return b->nrefs ? b->size / b->nrefs : 0;
}
struct hp_dmabuf_totals {
	uint64_t total;		/* every buffer known, once */
	uint64_t kernel_rss;	/* buffers no process holds */
	uint64_t userspace_rss;	/* buffers some process holds, once */
	uint64_t userspace_pss;	/* sum of every process's Pss */
	uint64_t mapped;	/* buffers some process maps, once */
	uint64_t count, user_count;
};
void hp_dmabuf_totals(const struct hp_dmabuf_info *info, struct hp_dmabuf_totals *t);

/* ---- meminfo ---- */
/*
 * The lost-RAM terms, in kB. src says where each came from (printed). A
 * value of -1 in a *_present flag means the source was absent (the term is
 * then 0).
 */
enum hp_mem_term {
	HP_MT_TOTAL, HP_MT_PSS, HP_MT_SWAP_PSS, HP_MT_DMABUF_MAPPED, HP_MT_FREE,
	HP_MT_CACHED_BUFFERS, HP_MT_CACHED_CACHED, HP_MT_CACHED_MAPPED, HP_MT_CACHED_KRECLAIMABLE,
	HP_MT_CACHED_POOLS,
	HP_MT_K_SUNRECLAIM, HP_MT_K_VMALLOC, HP_MT_K_PAGETABLES, HP_MT_K_KERNELSTACK,
	HP_MT_K_DMABUF_UNMAPPED, HP_MT_K_GPU_PRIVATE,
	HP_MT_ZRAM,
	HP_MT_LOST,
	HP_MT_N
};
struct hp_meminfo {
	int64_t kb[HP_MT_N];
	char src[HP_MT_N][160];
	/* the groups of the formula */
	int64_t pss_net, cached, kernel_used;
	unsigned procs, procs_unreadable;
	int vmap_stack;		/* 1: KernelStack is inside VmallocUsed */
	char notes[1024];
};
extern const char *const hp_mem_term_name[HP_MT_N];
/* Parse a /proc/meminfo text: the value in kB of key, or -1. */
int64_t hp_meminfo_field(const char *text, const char *key);
int hp_meminfo_collect(struct hp_meminfo *m, const char *proc, const char *sys, char *why,
		       size_t whylen);

/* ---- GPU totals from the module ---- */
struct hp_gpu_pid { uint32_t gpu; int pid; uint64_t bytes; };
struct hp_gpu_info {
	int module;			/* SYS/kernel/heapprofd/gpu present */
	struct hp_gpu_pid *e;		/* pid 0: the GPU's total */
	size_t n, cap;
};
int hp_gpu_collect(struct hp_gpu_info *g, const char *sys);
void hp_gpu_free(struct hp_gpu_info *g);
/* DRM region memory that lives in system RAM outside the page cache. */
int hp_drm_region_is_private_ram(const char *driver, const char *region);

/* ---- printing and the subcommands (dmabuf.c) ---- */
enum hp_dmabuf_view { HP_VIEW_PROCS, HP_VIEW_ALL, HP_VIEW_BUFFERS };
enum hp_out_fmt { HP_FMT_TEXT, HP_FMT_CSV, HP_FMT_JSON };
/* pid 0: every process. 0, or 1 when pid holds nothing or does not exist. */
int hp_dmabuf_print(FILE *f, const struct hp_dmabuf_info *info, enum hp_dmabuf_view view,
		    enum hp_out_fmt fmt, int pid);
int hp_gpu_print(FILE *f, const struct hp_dmabuf_info *info, const struct hp_gpu_info *g,
		 enum hp_out_fmt fmt, int pid);
void hp_meminfo_print(FILE *f, const struct hp_meminfo *m, enum hp_out_fmt fmt);
/* The subcommands: argv[0] is the command's name. Exit status. */
int hp_dmabuf_main(int argc, char **argv);
int hp_gpu_main(int argc, char **argv);
int hp_meminfo_main(int argc, char **argv);

#endif
