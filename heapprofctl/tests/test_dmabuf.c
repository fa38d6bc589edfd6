// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests of `heapprofctl dmabuf`, `gpu`, `meminfo` and `monitor`'s
 * parts on recorded trees: a /proc and a /sys written here (three processes,
 * a DMA-BUF shared by two, one only mapped, two no process holds, DRM
 * clients of several drivers), DRM fdinfo texts of amdgpu, i915, xe, msm,
 * panfrost and v3d as their drivers print them, the lost-RAM terms against
 * the recorded and the live /proc/meminfo, and netlink events as the module
 * sends them. TAP lines; test_units.c includes this file (one TAP count).
 */
#include <errno.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../tests/tap.h"
#include "../../uapi/linux/heapprofd.h"
#include "../dmabuf_info.h"
#include "../monitor.h"

#undef ok
#define ok(cond, ...) tap_ok(cond, "heapprofctl units: " __VA_ARGS__)

int test_dmabuf(void);

static char root[64];

static void put(const char *rel, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(const char *rel, const char *fmt, ...)
{
	char path[512], *p;
	va_list ap;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	for (p = path + strlen(root) + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		mkdir(path, 0755);
		*p = '/';
	}
	f = fopen(path, "w");
	if (!f) {
		perror(path);
		exit(1);
	}
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fclose(f);
}

static void dmabuf_fd(const char *rel, unsigned long ino, unsigned long size, const char *exp)
{
	put(rel, "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t%lu\nsize:\t%lu\ncount:\t2\nexp_name:\t%s\n",
	    ino, size, exp);
}

/* ---- DRM fdinfo as the drivers print it ---- */

static const char amdgpu_61[] =
	"pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1233\n"
	"drm-driver:\tamdgpu\n"
	"drm-pdev:\t0000:03:00.0\n"
	"drm-client-id:\t42\n"
	"drm-memory-vram:\t524288 KiB\n"
	"drm-memory-gtt: \t8192 KiB\n"	/* 6.1 prints a space before the tab */
	"drm-memory-cpu: \t0 KiB\n"
	"drm-engine-gfx:\t123456789 ns\n"
	"drm-engine-compute:\t0 ns\n"
	"drm-engine-dma:\t4567 ns\n";

static const char amdgpu_612[] =
	"pos:\t0\nflags:\t02100002\nmnt_id:\t24\nino:\t1233\n"
	"drm-driver:\tamdgpu\n"
	"drm-client-id:\t43\n"
	"drm-pdev:\t0000:03:00.0\n"
	"pasid:\t32770\n"
	"drm-total-cpu:\t0\n"
	"drm-shared-cpu:\t0\n"
	"drm-active-cpu:\t0\n"
	"drm-resident-cpu:\t0\n"
	"drm-purgeable-cpu:\t0\n"
	"drm-total-gtt:\t2 MiB\n"
	"drm-shared-gtt:\t512 KiB\n"
	"drm-active-gtt:\t0\n"
	"drm-resident-gtt:\t2 MiB\n"
	"drm-purgeable-gtt:\t0\n"
	"drm-total-vram:\t24 MiB\n"
	"drm-shared-vram:\t4 MiB\n"
	"drm-active-vram:\t0\n"
	"drm-resident-vram:\t24 MiB\n"
	"drm-purgeable-vram:\t0\n"
	"drm-memory-vram:\t24576 KiB\n"
	"drm-memory-gtt: \t2048 KiB\n"
	"drm-memory-cpu: \t0 KiB\n"
	"amd-memory-visible-vram:\t24576 KiB\n"
	"amd-evicted-vram:\t0 KiB\n"
	"drm-engine-gfx:\t1239823 ns\n";

static const char i915[] =
	"pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t1040\n"
	"drm-driver:\ti915\n"
	"drm-client-id:\t7\n"
	"drm-pdev:\t0000:00:02.0\n"
	"drm-total-system0:\t3 MiB\n"
	"drm-shared-system0:\t0\n"
	"drm-active-system0:\t0\n"
	"drm-resident-system0:\t3 MiB\n"
	"drm-purgeable-system0:\t0\n"
	"drm-total-stolen-system0:\t0\n"
	"drm-shared-stolen-system0:\t0\n"
	"drm-active-stolen-system0:\t0\n"
	"drm-resident-stolen-system0:\t0\n"
	"drm-purgeable-stolen-system0:\t0\n"
	"drm-engine-render:\t25662044495 ns\n"
	"drm-engine-copy:\t0 ns\n"
	"drm-engine-video:\t0 ns\n"
	"drm-engine-capacity-video:\t2\n"
	"drm-engine-video-enhance:\t0 ns\n";

static const char xe[] =
	"pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t1041\n"
	"drm-driver:\txe\n"
	"drm-client-id:\t10\n"
	"drm-pdev:\t0000:03:00.0\n"
	"drm-total-system:\t0\n"
	"drm-shared-system:\t0\n"
	"drm-active-system:\t0\n"
	"drm-resident-system:\t0\n"
	"drm-purgeable-system:\t0\n"
	"drm-total-gtt:\t192 KiB\n"
	"drm-shared-gtt:\t0\n"
	"drm-active-gtt:\t0\n"
	"drm-resident-gtt:\t192 KiB\n"
	"drm-total-vram0:\t23992 KiB\n"
	"drm-shared-vram0:\t16 MiB\n"
	"drm-active-vram0:\t0\n"
	"drm-resident-vram0:\t23992 KiB\n"
	"drm-total-stolen:\t0\n"
	"drm-shared-stolen:\t0\n"
	"drm-active-stolen:\t0\n"
	"drm-resident-stolen:\t0\n"
	"drm-cycles-rcs:\t28257900\n"
	"drm-total-cycles-rcs:\t7655183225\n"
	"drm-engine-capacity-vcs:\t2\n";

static const char msm[] =
	"pos:\t0\nflags:\t02\nmnt_id:\t20\nino:\t300\n"
	"drm-driver:\tmsm\n"
	"drm-client-id:\t3\n"
	"drm-engine-gpu:\t1234567 ns\n"
	"drm-cycles-gpu:\t987654\n"
	"drm-maxfreq-gpu:\t710000000 Hz\n"
	"drm-total-memory:\t14400 KiB\n"
	"drm-shared-memory:\t0\n"
	"drm-active-memory:\t0\n"
	"drm-resident-memory:\t14400 KiB\n"
	"drm-purgeable-memory:\t0\n";

static const char panfrost[] =
	"pos:\t0\nflags:\t02\nmnt_id:\t20\nino:\t301\n"
	"drm-driver:\tpanfrost\n"
	"drm-client-id:\t5\n"
	"drm-engine-fragment:\t46584133 ns\n"
	"drm-cycles-fragment:\t33848612\n"
	"drm-maxfreq-fragment:\t799999987 Hz\n"
	"drm-curfreq-fragment:\t 799999987 Hz\n"
	"drm-engine-vertex-tiler:\t10476471 ns\n"
	"drm-total-memory:\t290 MiB\n"
	"drm-shared-memory:\t0\n"
	"drm-active-memory:\t226 MiB\n"
	"drm-resident-memory:\t36496 KiB\n"
	"drm-purgeable-memory:\t128 KiB\n";

static const char v3d[] =
	"pos:\t0\nflags:\t02\nmnt_id:\t20\nino:\t302\n"
	"drm-driver:\tv3d\n"
	"drm-client-id:\t11\n"
	"drm-engine-bin:\t12345 ns\n"
	"v3d-jobs-bin:\t3 jobs\n"
	"drm-engine-render:\t98765 ns\n"
	"v3d-jobs-render:\t3 jobs\n"
	"drm-total-memory:\t2 MiB\n"
	"drm-shared-memory:\t0\n"
	"drm-active-memory:\t0\n"
	"drm-resident-memory:\t2 MiB\n"
	"drm-purgeable-memory:\t0\n";

static const struct hp_drm_region *region(const struct hp_drm_client *c, const char *name)
{
	int i;

	for (i = 0; i < c->nregions; i++)
		if (!strcmp(c->region[i].name, name))
			return &c->region[i];
	return NULL;
}

static void test_drm(void)
{
	struct hp_drm_client c;
	const struct hp_drm_region *r;
	uint64_t b;

	ok(!hp_parse_drm_size("12", &b) && b == 12 && !hp_parse_drm_size("4 KiB", &b) &&
	   b == 4096 && !hp_parse_drm_size("3 MiB", &b) && b == 3 << 20,
	   "drm: sizes in bytes, KiB and MiB");
	ok(hp_parse_drm_size("4 kB", &b) && hp_parse_drm_size("-4", &b) &&
	   hp_parse_drm_size("99999999999999999999", &b) && hp_parse_drm_size("4 KiBx", &b) &&
	   hp_parse_drm_size("18014398509481984 GiB", &b),
	   "drm: unknown units, signs, overflows refused");

	ok(hp_parse_drm_fdinfo(amdgpu_61, &c) == 1 && !strcmp(c.driver, "amdgpu") &&
	   c.has_id && c.client_id == 42 && !strcmp(c.pdev, "0000:03:00.0") && c.nregions == 3,
	   "drm amdgpu 6.1: driver, client id, pdev, 3 regions");
	r = region(&c, "vram");
	ok(r && r->total == 512ULL << 20 && r->shared == UINT64_MAX && r->resident == UINT64_MAX,
	   "drm amdgpu 6.1: drm-memory-vram is the total; shared/resident not reported");
	r = region(&c, "gtt");
	ok(r && r->total == 8ULL << 20, "drm amdgpu 6.1: 'drm-memory-gtt: \\t8192 KiB' (space before the tab)");

	ok(hp_parse_drm_fdinfo(amdgpu_612, &c) == 1 && c.client_id == 43 && c.nregions == 3,
	   "drm amdgpu 6.12: drm-total/shared/... and drm-memory both, 3 regions");
	r = region(&c, "gtt");
	ok(r && r->total == 2ULL << 20 && r->shared == 512ULL << 10 && r->resident == 2ULL << 20 &&
	   r->purgeable == 0 && r->active == 0,
	   "drm amdgpu 6.12: gtt total 2 MiB, shared 512 KiB, resident, purgeable, active");
	r = region(&c, "vram");
	ok(r && r->total == 24ULL << 20 && r->shared == 4ULL << 20,
	   "drm amdgpu 6.12: drm-total wins over the legacy drm-memory");

	ok(hp_parse_drm_fdinfo(i915, &c) == 1 && !strcmp(c.driver, "i915") && c.client_id == 7 &&
	   c.nregions == 2, "drm i915: system0 and stolen-system0");
	r = region(&c, "system0");
	ok(r && r->total == 3ULL << 20 && r->resident == 3ULL << 20 && r->shared == 0,
	   "drm i915: system0 3 MiB resident");
	r = region(&c, "stolen-system0");
	ok(r && r->total == 0, "drm i915: stolen-system0 0 (not mistaken for an engine)");

	ok(hp_parse_drm_fdinfo(xe, &c) == 1 && !strcmp(c.driver, "xe") && c.nregions == 4,
	   "drm xe: system, gtt, vram0, stolen; cycles keys ignored");
	r = region(&c, "vram0");
	ok(r && r->total == 23992ULL << 10 && r->shared == 16ULL << 20, "drm xe: vram0");

	ok(hp_parse_drm_fdinfo(msm, &c) == 1 && c.client_id == 3 && c.nregions == 1 &&
	   region(&c, "memory") && region(&c, "memory")->total == 14400ULL << 10,
	   "drm msm: memory 14400 KiB; maxfreq Hz ignored");
	ok(hp_parse_drm_fdinfo(panfrost, &c) == 1 && c.nregions == 1 &&
	   region(&c, "memory")->total == 290ULL << 20 &&
	   region(&c, "memory")->active == 226ULL << 20 &&
	   region(&c, "memory")->purgeable == 128ULL << 10,
	   "drm panfrost: memory total, active, purgeable; curfreq ignored");
	ok(hp_parse_drm_fdinfo(v3d, &c) == 1 && !strcmp(c.driver, "v3d") && c.client_id == 11 &&
	   region(&c, "memory")->resident == 2ULL << 20, "drm v3d: memory; v3d-jobs ignored");

	ok(hp_parse_drm_fdinfo("pos:\t0\nflags:\t02\nsize:\t4096\n", &c) == 0,
	   "drm: a non-DRM fdinfo is not a client");
	ok(hp_parse_drm_fdinfo("drm-driver:\tmsm\ndrm-total-memory:\t12 XiB\n", &c) == -1 &&
	   hp_parse_drm_fdinfo("drm-driver:\tmsm\ndrm-client-id:\t-1\n", &c) == -1,
	   "drm: malformed values refuse the fdinfo");
	ok(hp_drm_region_is_private_ram("amdgpu", "gtt") && !hp_drm_region_is_private_ram("amdgpu", "vram") &&
	   !hp_drm_region_is_private_ram("xe", "vram0") && !hp_drm_region_is_private_ram("xe", "stolen") &&
	   !hp_drm_region_is_private_ram("i915", "system0") &&
	   !hp_drm_region_is_private_ram("msm", "memory"),
	   "drm: private RAM is TTM system/GTT; VRAM, stolen and shmem-backed drivers are not");
}

/* ---- dma-buf fdinfo and maps ---- */

static void test_parsers(void)
{
	uint64_t ino, size, len;
	long count;
	char exp[64], name[64], longline[2000];

	ok(hp_parse_dmabuf_fdinfo("pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t77\nsize:\t8192\ncount:\t1\nexp_name:\tsystem\nname:\tcamera\n",
				  &ino, &size, &count, exp, sizeof(exp), name, sizeof(name)) == 1 &&
	   ino == 77 && size == 8192 && count == 1 && !strcmp(exp, "system") && !strcmp(name, "camera"),
	   "dma-buf fdinfo (6.1 dma_buf_show_fdinfo + generic ino:): all fields");
	ok(hp_parse_dmabuf_fdinfo("pos:\t0\nflags:\t02\nmnt_id:\t15\nino:\t12\n", &ino, &size, &count,
				  exp, sizeof(exp), name, sizeof(name)) == 0,
	   "dma-buf fdinfo: a plain file is not a dma-buf");
	ok(hp_parse_dmabuf_fdinfo("ino:\t77\nsize:\t-8192\ncount:\t1\nexp_name:\tsystem\n", &ino, &size,
				  &count, exp, sizeof(exp), name, sizeof(name)) == -1 &&
	   hp_parse_dmabuf_fdinfo("ino:\t77\nsize:\t8192x\ncount:\t1\nexp_name:\tsystem\n", &ino,
				  &size, &count, exp, sizeof(exp), name, sizeof(name)) == -1 &&
	   hp_parse_dmabuf_fdinfo("ino:\t77\nsize:\t99999999999999999999999\nexp_name:\ts\n", &ino,
				  &size, &count, exp, sizeof(exp), name, sizeof(name)) == -1,
	   "dma-buf fdinfo: negative, trailing junk and overflowing sizes refused");
	ok(hp_parse_dmabuf_fdinfo("size:\t4096\ncount:\t1\nexp_name:\tsys\x01tem\n", &ino, &size,
				  &count, exp, sizeof(exp), name, sizeof(name)) == 1 &&
	   !strcmp(exp, "sys?tem") && ino == 0,
	   "dma-buf fdinfo: control characters masked; no ino: line is inode 0 (stat instead)");
	memset(longline, 'x', sizeof(longline) - 1);
	longline[sizeof(longline) - 1] = 0;
	memcpy(longline, "exp_name:\t", 10);
	ok(hp_parse_dmabuf_fdinfo(longline, &ino, &size, &count, exp, sizeof(exp), name,
				  sizeof(name)) == 0, "dma-buf fdinfo: an overlong line is ignored");

	ok(hp_parse_dmabuf_maps_line("7f12a4000000-7f12a4002000 rw-s 00000000 00:0d 1001                       /dmabuf:\n",
				     &ino, &len, name, sizeof(name)) == 1 && ino == 1001 && len == 8192 &&
	   name[0] == 0, "maps: a /dmabuf: mapping, its inode and length");
	ok(hp_parse_dmabuf_maps_line("7f12a4000000-7f12a4001000 r--s 00000000 00:0d 1002 /dmabuf:gralloc\n",
				     &ino, &len, name, sizeof(name)) == 1 && !strcmp(name, "gralloc"),
	   "maps: a named buffer");
	ok(hp_parse_dmabuf_maps_line("7f12a4000000-7f12a4001000 r--p 00000000 08:01 1002 /usr/lib/dmabuf:x\n",
				     &ino, &len, name, sizeof(name)) == 0 &&
	   hp_parse_dmabuf_maps_line("7f12a4000000-7f12a4001000 rw-p 00000000 00:00 0 \n", &ino, &len,
				     name, sizeof(name)) == 0 &&
	   hp_parse_dmabuf_maps_line("garbage /dmabuf:\n", &ino, &len, name, sizeof(name)) == 0,
	   "maps: files, anonymous memory and garbage are not DMA-BUFs");
}

/* ---- a recorded system ---- */

static void make_tree(void)
{
	char big[3000];

	/* producer (100): buffer 1001 by two fds and two mappings, 1002 by an fd;
	 * two fds on one amdgpu client; a plain file; a malformed dma-buf fdinfo */
	put("proc/100/comm", "producer\n");
	dmabuf_fd("proc/100/fdinfo/3", 1001, 8192, "system");
	dmabuf_fd("proc/100/fdinfo/4", 1001, 8192, "system");
	dmabuf_fd("proc/100/fdinfo/5", 1002, 4096, "system");
	put("proc/100/fdinfo/6", "%s", amdgpu_612);
	put("proc/100/fdinfo/7", "%s", amdgpu_612);
	put("proc/100/fdinfo/8", "pos:\t0\nflags:\t0100000\nmnt_id:\t20\nino:\t55\n");
	put("proc/100/fdinfo/9", "pos:\t0\nino:\t66\nsize:\tlots\ncount:\t1\nexp_name:\tevil\n");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	put("proc/100/maps",
	    "55d0c0000000-55d0c0001000 r--p 00000000 08:01 4242 /usr/bin/producer\n"
	    "7f0000000000-7f0000002000 rw-s 00000000 00:0d 1001                       /dmabuf:\n"
	    "7f0000010000-7f0000012000 r--s 00000000 00:0d 1001                       /dmabuf:\n"
	    "7f0000020000-7f0000021000 rw-p 00000000 00:00 0 %s\n"
	    "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]\n", big);
	put("proc/100/smaps_rollup", "55d0c0000000-7ffc00021000 ---p 00000000 00:00 0 [rollup]\n"
	    "Rss:                2000 kB\nPss:                1000 kB\nPss_Anon:            800 kB\n"
	    "Swap:                 20 kB\nSwapPss:              10 kB\nLocked:                0 kB\n");
	/* consumer (200): 1001 by an fd (shared with 100), 1003 mapped only;
	 * an i915 client with the same id as 100's amdgpu one (another driver),
	 * and 100's amdgpu client passed over (counted once in totals) */
	put("proc/200/comm", "consumer\n");
	dmabuf_fd("proc/200/fdinfo/3", 1001, 8192, "system");
	put("proc/200/fdinfo/4", "%s", i915);
	put("proc/200/fdinfo/5", "%s", amdgpu_612);
	put("proc/200/maps",
	    "7f0000000000-7f0000004000 rw-s 00000000 00:0d 1003 /dmabuf:\n");
	put("proc/200/smaps_rollup", "Rss: 600 kB\nPss: 500 kB\nSwapPss: 0 kB\n");
	/* idle (300): nothing of ours */
	put("proc/300/comm", "idle\n");
	put("proc/300/fdinfo/0", "pos:\t0\nflags:\t02\nmnt_id:\t13\nino:\t9\n");
	put("proc/300/maps", "%s", "");
	put("proc/300/smaps_rollup", "%s", "");
	put("proc/self/comm", "not a pid\n");
	put("proc/meminfo",
	    "MemTotal:        1000000 kB\nMemFree:          400000 kB\nMemAvailable:     600000 kB\n"
	    "Buffers:           10000 kB\nCached:           200000 kB\nSwapCached:            0 kB\n"
	    "Shmem:             20000 kB\nKReclaimable:      30000 kB\nSlab:              50000 kB\n"
	    "SReclaimable:      25000 kB\nSUnreclaim:        20000 kB\nKernelStack:        3000 kB\n"
	    "PageTables:         5000 kB\nMapped:            50000 kB\nVmallocTotal:   34359738367 kB\n"
	    "VmallocUsed:       15000 kB\nHugePages_Total:       0\n");
	put("proc/vmallocinfo", "0x0000000000000000-0x0000000000000000   20480 alloc_thread_stack_node+0x41/0x140 pages=4 vmalloc N0=4\n");
	/* the module's view: every buffer, exporters, exporting pids */
	put("sys/kernel/heapprofd/dmabuf/source", "kprobe\n");
	put("sys/kernel/heapprofd/dmabuf/total_exported_bytes", "94208\n");
	put("sys/kernel/heapprofd/dmabuf/buffer_count", "4\n");
	put("sys/kernel/heapprofd/dmabuf/buffers/1001/exporter_name", "system\n");
	put("sys/kernel/heapprofd/dmabuf/buffers/1001/size", "8192\n");
	put("sys/kernel/heapprofd/dmabuf/buffers/1001/exporter_pid", "100\n");
	put("sys/kernel/heapprofd/dmabuf/buffers/1002/exporter_name", "system\n");
	put("sys/kernel/heapprofd/dmabuf/buffers/1002/size", "4096\n");
	put("sys/kernel/heapprofd/dmabuf/buffers/1002/exporter_pid", "100\n");
	put("sys/kernel/heapprofd/dmabuf/buffers/1003/exporter_name", "drm\n");
	put("sys/kernel/heapprofd/dmabuf/buffers/1003/size", "16384\n");
	put("sys/kernel/heapprofd/dmabuf/buffers/1003/exporter_pid", "200\n");
	put("sys/kernel/heapprofd/dmabuf/buffers/1004/exporter_name", "system\n");
	put("sys/kernel/heapprofd/dmabuf/buffers/1004/size", "65536\n");
	put("sys/kernel/heapprofd/dmabuf/buffers/1004/exporter_pid", "0\n");	/* found at load */
	put("sys/kernel/heapprofd/dmabuf/buffers/1006/size", "12abc\n");	/* malformed */
	/* Android's sysfs knows one more (exported before the module loaded) */
	put("sys/kernel/dmabuf/buffers/1001/exporter_name", "system\n");
	put("sys/kernel/dmabuf/buffers/1001/size", "8192\n");
	put("sys/kernel/dmabuf/buffers/1005/exporter_name", "cma\n");
	put("sys/kernel/dmabuf/buffers/1005/size", "32768\n");
	put("sys/kernel/heapprofd/gpu/0/total_bytes", "1048576\n");
	put("sys/kernel/heapprofd/gpu/0/pids/100", "524288\n");
	put("sys/kernel/dma_heap/total_pools_kb", "256\n");
	put("sys/block/zram0/mm_stat", "  1000000   500000   409600        0   409600        0        0        0        0\n");
	put("sys/block/sda/size", "1\n");
}

static char *render(const struct hp_dmabuf_info *info, enum hp_dmabuf_view v, enum hp_out_fmt fmt,
		    int pid)
{
	char *s = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&s, &n);

	hp_dmabuf_print(f, info, v, fmt, pid);
	fclose(f);
	return s;
}

/* Sum of column col (0-based) of CSV rows whose first field is not the header's. */
static uint64_t csv_sum(const char *csv, int col, const char *first)
{
	uint64_t sum = 0;
	const char *l = strchr(csv, '\n');

	while (l && l[1]) {
		const char *p = l + 1;
		int c;

		if (!first || !strncmp(p, first, strlen(first))) {
			for (c = 0; c < col && p; c++) {
				p = strchr(p, ',');
				if (p)
					p++;
			}
			if (p)
				sum += strtoull(p, NULL, 10);
		}
		l = strchr(p = l + 1, '\n');
	}
	return sum;
}

static void test_tree(void)
{
	struct hp_dmabuf_info info = { 0 };
	struct hp_dmabuf_totals t;
	struct hp_gpu_info g = { 0 };
	struct hp_meminfo m;
	char proc[128], sys[128], why[256];
	char *s;
	size_t i;
	int64_t sum;
	int rc;

	snprintf(proc, sizeof(proc), "%s/proc", root);
	snprintf(sys, sizeof(sys), "%s/sys", root);
	rc = hp_dmabuf_collect(&info, proc, sys, 0, why, sizeof(why));
	ok(rc == 0 && info.nprocs == 3 && info.module && !strcmp(info.module_source, "kprobe") &&
	   info.android_sysfs, "tree: 3 processes, the module's dmabuf/ and /sys/kernel/dmabuf");
	ok(info.nbufs == 5 && info.bufs[0].inode == 1001 && info.bufs[4].inode == 1005,
	   "tree: 5 buffers (fd, map, module, android sysfs), each once, by inode");
	ok(info.skipped == 2, "tree: the malformed fdinfo and sysfs size are skipped (%u)", info.skipped);
	ok(info.bufs[0].nrefs == 2 && info.bufs[0].refs[0].fds == 2 && info.bufs[0].refs[0].maps == 2 &&
	   info.bufs[0].refs[1].fds == 1 && info.bufs[0].refs[1].maps == 0,
	   "tree: 1001 held by producer (2 fds, 2 maps) and consumer (1 fd)");
	ok(info.bufs[2].size == 16384 && !info.bufs[2].size_from_map &&
	   !strcmp(info.bufs[2].exporter, "drm") && info.bufs[2].exporter_pid == 200,
	   "tree: 1003 (mapped only): size, exporter and pid from the module");
	ok(info.bufs[3].exporter_pid == -1 && !strcmp(info.bufs[3].exporter, "system"),
	   "tree: 1004, exporting pid 0 (found at load): the pid is unknown");
	ok(info.bufs[4].size == 32768 && !strcmp(info.bufs[4].exporter, "cma") &&
	   info.bufs[4].exporter_pid == -1 && info.bufs[4].nrefs == 0,
	   "tree: 1005 from /sys/kernel/dmabuf/buffers alone");
	hp_dmabuf_totals(&info, &t);
	ok(t.total == 126976 && t.kernel_rss == 98304 && t.userspace_rss == 28672 &&
	   t.userspace_pss == 28672 && t.mapped == 24576,
	   "totals: the shared buffer counts once: total 124 kB, kernel 96, rss 28, pss 28, mapped 24");

	s = render(&info, HP_VIEW_PROCS, HP_FMT_TEXT, 0);
	ok(strstr(s, "        producer:100  \n") && strstr(s, "        consumer:200  \n") &&
	   !strstr(s, "idle"), "dmabuf: a table per process holding buffers, none for the others");
	ok(strstr(s, "             <unknown>             8 kB             4 kB                2             1001  system\n") != NULL,
	   "dmabuf: 1001 Rss 8 kB, Pss 4 kB (shared by 2), nr_procs 2");
	ok(strstr(s, "         PROCESS TOTAL            12 kB             8 kB                 \n") &&
	   strstr(s, "         PROCESS TOTAL            24 kB            20 kB                 \n"),
	   "dmabuf: PROCESS TOTAL rows: producer 12/8 kB, consumer 24/20 kB");
	ok(strstr(s, "dmabuf total: 124 kB kernel_rss: 96 kB userspace_rss: 28 kB userspace_pss: 28 kB\n") != NULL,
	   "dmabuf: the closing totals line");
	free(s);
	s = render(&info, HP_VIEW_PROCS, HP_FMT_TEXT, 200);
	ok(!strstr(s, "producer:") && strstr(s, "consumer:200") && strstr(s, "dmabuf total: 124 kB"),
	   "dmabuf PID: that process only, system totals");
	free(s);
	ok(hp_dmabuf_print(stderr, &info, HP_VIEW_PROCS, HP_FMT_TEXT, 4242) == 1,
	   "dmabuf PID: a missing process is an error");

	s = render(&info, HP_VIEW_PROCS, HP_FMT_CSV, 0);
	ok(!strncmp(s, "pid,comm,inode,name,exporter,size_bytes,rss_bytes,pss_bytes,nr_procs,fd_refs,map_refs\n", 86) &&
	   strstr(s, "100,producer,1001,,system,8192,8192,4096,2,2,2\n") &&
	   strstr(s, "200,consumer,1003,,drm,16384,16384,16384,1,0,1\n"),
	   "dmabuf csv: header and rows with refs");
	ok(csv_sum(s, 7, NULL) == t.userspace_pss && csv_sum(s, 7, "100,") == 8192 &&
	   csv_sum(s, 6, "200,") == 24576, "dmabuf csv: pss sums to userspace_pss, per process as the text");
	free(s);

	s = render(&info, HP_VIEW_ALL, HP_FMT_TEXT, 0);
	ok(strstr(s, "            1001 |            8 kB |           system |                  3 |                  2 |        2(     2) refs |        1(     0) refs |\n") != NULL,
	   "dmabuf -a: 1001: fds 3, maps 2, producer 2(2), consumer 1(0)");
	ok(strstr(s, "            1004 |           64 kB |           system |                  0 |                  0 |                    -- |                    -- |\n") != NULL,
	   "dmabuf -a: a kernel-only buffer: -- for every process");
	ok(strstr(s, "     PROCESS PSS |") && strstr(s, "                  8 kB |                 20 kB |\n") &&
	   strstr(s, "dmabuf total: 124 kB"), "dmabuf -a: per-process Pss totals and the totals line");
	free(s);
	s = render(&info, HP_VIEW_ALL, HP_FMT_CSV, 0);
	ok(strstr(s, "1001,8192,system,100,producer,2,2,4096\n") &&
	   strstr(s, "1001,8192,system,200,consumer,1,0,4096\n") &&
	   strstr(s, "1005,32768,cma,0,,0,0,0\n") && csv_sum(s, 7, NULL) == t.userspace_pss &&
	   csv_sum(s, 5, NULL) == 4 && csv_sum(s, 6, NULL) == 3,
	   "dmabuf -a csv: agrees with the text and the totals (pss, fds 4, maps 3)");
	free(s);

	s = render(&info, HP_VIEW_BUFFERS, HP_FMT_TEXT, 0);
	ok(strstr(s, "            1003 |           16384 |                    drm |          200 |\n") &&
	   strstr(s, "            1005 |           32768 |                    cma |            - |\n"),
	   "dmabuf -b: buffers with size, exporter, exporting pid");
	ok(strstr(s, "                 system |            3 |              77824 |\n") != NULL,
	   "dmabuf -b: exporter system: 3 buffers, 77824 bytes");
	ok(strstr(s, "Total DMA-BUF count: 5, Total DMA-BUF size(bytes): 126976\n") != NULL,
	   "dmabuf -b: the total line, equal to dmabuf total");
	free(s);
	s = render(&info, HP_VIEW_BUFFERS, HP_FMT_CSV, 0);
	ok(strstr(s, "buffer,1001,system,100,1,8192\n") && strstr(s, "exporter,,system,,3,77824\n") &&
	   strstr(s, "total,,,,5,126976\n") && csv_sum(s, 5, "buffer,") == 126976 &&
	   csv_sum(s, 5, "exporter,") == 126976, "dmabuf -b csv: buffers, exporters and total agree");
	free(s);

	/* GPU: DRM clients deduplicated */
	ok(info.procs[0].ndrm == 1 && info.procs[0].drm[0].fds == 2 && info.procs[0].drm[0].first_owner,
	   "gpu: two fds on one amdgpu client are one client");
	ok(info.procs[1].ndrm == 2 && !info.procs[1].drm[0].first_owner &&
	   !strcmp(info.procs[1].drm[1].driver, "i915") && info.procs[1].drm[1].first_owner,
	   "gpu: same id, other driver is another client; a client passed to another process counts once");
	hp_gpu_collect(&g, sys);
	ok(g.module && g.n == 2, "gpu: the module's total and one pid");
	{
		char *out = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&out, &n);

		hp_gpu_print(f, &info, &g, HP_FMT_CSV, 0);
		fclose(f);
		ok(strstr(out, "drm,100,producer,amdgpu,0000:03:00.0,43,gtt,2097152,524288,2097152,0,0,2,1\n") &&
		   strstr(out, "drm,200,consumer,amdgpu,0000:03:00.0,43,gtt,2097152,524288,2097152,0,0,1,0\n") &&
		   strstr(out, "gpu_mem_total,0,,gpu0,,,,1048576,,,,,,1\n"),
		   "gpu csv: per client and region, the duplicate marked, the module's total");
		free(out);
	}
	hp_gpu_free(&g);
	hp_dmabuf_free(&info);

	/* meminfo */
	rc = hp_meminfo_collect(&m, proc, sys, why, sizeof(why));
	ok(rc == 0, "meminfo: recorded tree reads (%s)", rc ? why : "ok");
	ok(m.kb[HP_MT_TOTAL] == 1000000 && m.kb[HP_MT_FREE] == 400000 &&
	   m.kb[HP_MT_CACHED_BUFFERS] == 10000 && m.kb[HP_MT_CACHED_CACHED] == 200000 &&
	   m.kb[HP_MT_CACHED_MAPPED] == 50000 && m.kb[HP_MT_CACHED_KRECLAIMABLE] == 30000 &&
	   m.kb[HP_MT_K_SUNRECLAIM] == 20000 && m.kb[HP_MT_K_VMALLOC] == 15000 &&
	   m.kb[HP_MT_K_PAGETABLES] == 5000, "meminfo: every /proc/meminfo term as recorded");
	ok(m.vmap_stack && m.kb[HP_MT_K_KERNELSTACK] == 0,
	   "meminfo: vmap stacks (vmallocinfo): KernelStack not counted again");
	ok(m.kb[HP_MT_PSS] == 1510 && m.kb[HP_MT_SWAP_PSS] == 10 && m.procs == 3,
	   "meminfo: total PSS 1510 kB (Pss + SwapPss), swap PSS 10 kB, 3 rollups");
	ok(m.kb[HP_MT_DMABUF_MAPPED] == 24 && m.kb[HP_MT_K_DMABUF_UNMAPPED] == 100,
	   "meminfo: DMA-BUF 124 kB once: 24 mapped (in pss), 100 unmapped (kernel used)");
	ok(m.kb[HP_MT_CACHED_POOLS] == 256 && m.kb[HP_MT_K_GPU_PRIVATE] == 1024 &&
	   m.kb[HP_MT_ZRAM] == 400, "meminfo: heap pools 256, GPU 1024 (module), zram 400 kB");
	sum = 0;
	for (i = HP_MT_PSS; i < HP_MT_LOST; i++)
		sum += (i == HP_MT_SWAP_PSS || i == HP_MT_CACHED_MAPPED) ? -m.kb[i] : m.kb[i];
	ok(m.kb[HP_MT_LOST] == 366696 && m.kb[HP_MT_TOTAL] - sum == m.kb[HP_MT_LOST] &&
	   m.pss_net == 1524 && m.cached == 190256 && m.kernel_used == 41124,
	   "meminfo: lost = 366696 kB and the terms add up to MemTotal");
	{
		char *out = NULL;
		size_t n = 0;
		FILE *f = open_memstream(&out, &n);
		int64_t csum = 0;
		const char *l;

		hp_meminfo_print(f, &m, HP_FMT_CSV);
		fclose(f);
		/* term,group,sign,kb,source: total - sum(sign*kb of the others) == lost */
		for (l = strchr(out, '\n'); l && l[1]; l = strchr(l + 1, '\n')) {
			char term[32], group[32];
			int sign;
			long long kb;

			if (sscanf(l + 1, "%31[^,],%31[^,],%d,%lld,", term, group, &sign, &kb) == 4 &&
			    strcmp(group, "sum") && strcmp(group, "total") && strcmp(group, "lost"))
				csum += sign * kb;
		}
		ok(1000000 - csum == 366696 && strstr(out, "lost,lost,1,366696,"),
		   "meminfo csv: the rows add up to lost");
		free(out);
		out = NULL;
		f = open_memstream(&out, &n);
		hp_meminfo_print(f, &m, HP_FMT_JSON);
		fclose(f);
		ok(strstr(out, "\"lost\": 366696,") && strstr(out, "{\"name\": \"zram\", \"group\": \"zram\", \"sign\": 1, \"kb\": 400, \"source\": ") &&
		   out[strlen(out) - 2] == '}', "meminfo json: terms and groups");
		free(out);
	}
}

/* The live host: each /proc/meminfo term as the file says, and the sum exact. */
static void test_live(void)
{
	struct hp_meminfo m;
	char why[256], text[16384];
	FILE *f;
	size_t n;
	int64_t sum = 0, total, mapped;
	int i;

	if (hp_meminfo_collect(&m, "/proc", "/sys", why, sizeof(why))) {
		ok(0, "meminfo live: %s", why);
		return;
	}
	f = fopen("/proc/meminfo", "r");
	n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
	text[n] = 0;
	if (f)
		fclose(f);
	total = hp_meminfo_field(text, "MemTotal");
	mapped = hp_meminfo_field(text, "Mapped");
	for (i = HP_MT_PSS; i < HP_MT_LOST; i++)
		sum += (i == HP_MT_SWAP_PSS || i == HP_MT_CACHED_MAPPED) ? -m.kb[i] : m.kb[i];
	ok(total > 0 && m.kb[HP_MT_TOTAL] == total && total - sum == m.kb[HP_MT_LOST],
	   "meminfo live: MemTotal %lld kB = the terms + lost %lld kB", (long long)total,
	   (long long)m.kb[HP_MT_LOST]);
	/* Mapped moves a little between two reads; a 64 MiB bound catches a wrong field. */
	ok(mapped >= 0 && llabs(m.kb[HP_MT_CACHED_MAPPED] - mapped) < 65536 &&
	   m.kb[HP_MT_PSS] > 0 && m.kb[HP_MT_FREE] > 0 && m.kb[HP_MT_FREE] < total,
	   "meminfo live: Mapped, PSS and free plausible against /proc/meminfo");
}

/* ---- netlink events ---- */

static size_t attr(char *buf, size_t off, int type, const void *data, size_t len)
{
	struct nlattr *a = (void *)(buf + off);

	a->nla_type = (unsigned short)type;
	a->nla_len = (unsigned short)(NLA_HDRLEN + len);
	memcpy(buf + off + NLA_HDRLEN, data, len);
	return off + NLA_ALIGN(a->nla_len);
}

static size_t event(char *buf, int cmd)
{
	struct nlmsghdr *nh = (void *)buf;
	struct genlmsghdr *gh = (void *)(buf + NLMSG_HDRLEN);

	memset(buf, 0, 512);
	nh->nlmsg_type = 0x20;
	gh->cmd = (unsigned char)cmd;
	gh->version = HEAPPROFD_GENL_VERSION;
	return NLMSG_HDRLEN + GENL_HDRLEN;
}

static void test_monitor(void)
{
	char buf[512], out[256];
	uint64_t ino = 1001, size = 8192, lost = 3, total = 1 << 20;
	uint32_t pid = 100, gpu = 0;
	size_t n;

	n = event(buf, HEAPPROFD_CMD_DMABUF_EXPORT);
	n = attr(buf, n, HEAPPROFD_A_DMABUF_INODE, &ino, 8);
	n = attr(buf, n, HEAPPROFD_A_DMABUF_SIZE, &size, 8);
	n = attr(buf, n, HEAPPROFD_A_DMABUF_EXPORTER, "system", 7);
	n = attr(buf, n, HEAPPROFD_A_PID, &pid, 4);
	n = attr(buf, n, HEAPPROFD_A_COMM, "mk bufs", 8);
	n = attr(buf, n, HEAPPROFD_A_EVENTS_LOST, &lost, 8);
	((struct nlmsghdr *)buf)->nlmsg_len = (unsigned)n;
	ok(hp_monitor_format(buf, n, out, sizeof(out)) == 1 &&
	   !strcmp(out, "dmabuf-export inode=1001 size=8192 exporter=system pid=100 comm=mk?bufs lost=3"),
	   "monitor: a DMA-BUF export with its lost count (%s)", out);
	n = event(buf, HEAPPROFD_CMD_DMABUF_RELEASE);
	n = attr(buf, n, HEAPPROFD_A_DMABUF_INODE, &ino, 8);
	n = attr(buf, n, HEAPPROFD_A_DMABUF_SIZE, &size, 8);
	n = attr(buf, n, HEAPPROFD_A_DMABUF_EXPORTER, "system", 7);
	n = attr(buf, n, HEAPPROFD_A_PID, &pid, 4);
	((struct nlmsghdr *)buf)->nlmsg_len = (unsigned)n;
	ok(hp_monitor_format(buf, n, out, sizeof(out)) == 1 &&
	   !strcmp(out, "dmabuf-release inode=1001 size=8192 exporter=system pid=100"),
	   "monitor: a release (%s)", out);
	n = event(buf, HEAPPROFD_CMD_GPU_TOTAL);
	n = attr(buf, n, HEAPPROFD_A_GPU_ID, &gpu, 4);
	pid = 0;
	n = attr(buf, n, HEAPPROFD_A_PID, &pid, 4);
	n = attr(buf, n, HEAPPROFD_A_GPU_SIZE, &total, 8);
	((struct nlmsghdr *)buf)->nlmsg_len = (unsigned)n;
	ok(hp_monitor_format(buf, n, out, sizeof(out)) == 1 &&
	   !strcmp(out, "gpu-total gpu=0 pid=0 size=1048576"), "monitor: a GPU total (%s)", out);
	n = event(buf, HEAPPROFD_CMD_SESSION_NEW);
	n = attr(buf, n, HEAPPROFD_A_SESSION_ID, &ino, 8);
	((struct nlmsghdr *)buf)->nlmsg_len = (unsigned)n;
	ok(hp_monitor_format(buf, n, out, sizeof(out)) == 1 && !strcmp(out, "session-new session=1001"),
	   "monitor: session events beside them");
	n = event(buf, HEAPPROFD_CMD_DMABUF_EXPORT);
	n = attr(buf, n, HEAPPROFD_A_DMABUF_INODE, &ino, 8);
	((struct nlattr *)(buf + NLMSG_HDRLEN + GENL_HDRLEN))->nla_len = 200;
	((struct nlmsghdr *)buf)->nlmsg_len = (unsigned)n;
	ok(hp_monitor_format(buf, n, out, sizeof(out)) == -1, "monitor: an attribute past the message is refused");
	n = event(buf, HEAPPROFD_CMD_DMABUF_EXPORT);
	n = attr(buf, n, HEAPPROFD_A_DMABUF_SIZE, &pid, 2);
	((struct nlmsghdr *)buf)->nlmsg_len = (unsigned)n;
	ok(hp_monitor_format(buf, n, out, sizeof(out)) == 1 && !strcmp(out, "dmabuf-export size=?"),
	   "monitor: a short number is shown as ?, not read past");
	ok(hp_monitor_format(buf, 10, out, sizeof(out)) == -1, "monitor: a short message is refused");
	n = event(buf, 99);
	((struct nlmsghdr *)buf)->nlmsg_len = (unsigned)n;
	ok(hp_monitor_format(buf, n, out, sizeof(out)) == 0, "monitor: an unknown command is skipped");
}

/* Random texts of the keys' pieces through every parser: no crash, no read past (ASan). */
static void test_garbage(void)
{
	static const char *const piece[] = { "drm-", "total-", "memory", "driver:", "client-id:",
		"\t", " ", "\n", ":", "KiB", "MiB", "99999999999999999999", "12", "-", "exp_name:",
		"size:", "ino:", "count:", "/dmabuf:", "7f00-7f10 ", "rw-s ", "00:0d ", "x", "\x01" };
	char text[600], out[256];
	struct hp_drm_client c;
	uint64_t a, b;
	long cnt;
	char e[64], nm[64];
	unsigned seed = 12345;
	int i, k, crashed = 0;

	for (i = 0; i < 20000; i++) {
		size_t n = 0;

		for (k = 0; k < 40; k++) {
			const char *p;

			seed = seed * 1103515245 + 12345;
			p = piece[(seed >> 16) % (sizeof(piece) / sizeof(piece[0]))];
			if (n + strlen(p) + 1 >= sizeof(text))
				break;
			memcpy(text + n, p, strlen(p));
			n += strlen(p);
		}
		text[n] = 0;
		hp_parse_dmabuf_fdinfo(text, &a, &b, &cnt, e, sizeof(e), nm, sizeof(nm));
		hp_parse_drm_fdinfo(text, &c);
		hp_parse_dmabuf_maps_line(text, &a, &b, nm, sizeof(nm));
		hp_meminfo_field(text, "drm-total");
		for (k = 0; k < (int)n; k++)
			text[k] = (char)(seed >> (k % 24));
		hp_monitor_format(text, n, out, sizeof(out));
	}
	ok(!crashed, "parsers: 20000 random texts and messages, no crash (ASan/UBSan)");
}

int test_dmabuf(void)
{
	char cmd[128];

	snprintf(root, sizeof(root), "/tmp/hpdmabuf.XXXXXX");
	if (!mkdtemp(root))
		return 1;
	test_parsers();
	test_drm();
	make_tree();
	test_tree();
	test_live();
	test_monitor();
	test_garbage();
	/* HEAPPROFCTL_KEEP_TREE=1: leave the tree to look at with --proc-root */
	if (getenv("HEAPPROFCTL_KEEP_TREE")) {
		tap_diag("recorded tree kept in %s", root);
		return 0;
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	if (system(cmd))
		return 1;
	return 0;
}
