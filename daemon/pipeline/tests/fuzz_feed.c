// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer target: arbitrary bytes as records into hp_proc_feed, and (for
 * inputs the parser accepts) through the unwinder against this process's
 * own maps and memory, then the books. The first byte picks a mode: raw
 * bytes, or bytes with a fixed-up header so the fuzzer reaches the unwinder
 * with hostile registers and stacks; with its top bit, the record goes the
 * kernel records' way (hp_proc_feed_kernel: read(2) framing, the dmabuf
 * heap, DMABUF and KLOST records).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../internal.h"

static struct hp_pipeline *P;
static struct hp_proc *pr;
static uint64_t buf[8192];
static unsigned long n;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct hp_pipeline_opts o = { .unwind_workers = 1 };
	struct hp_proc_info pi = { .pid = getpid(), .comm = "fuzz",
				   .maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC),
				   .mem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC),
				   .exe_fd = -1 };

	(void)argc; (void)argv;
	P = hp_pipeline_new(&o);
	pr = hp_proc_new(P, &pi);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[256];
	size_t len;
	uint8_t mode;

	if (size < 1 || size - 1 > sizeof(buf))
		return 0;
	mode = data[0];
	len = size - 1;
	memset(buf, 0, sizeof(buf));
	memcpy(buf, data + 1, len);
	if (mode & 1) {
		static const uint16_t ktypes[4] = {
			HEAPPROFD_REC_ALLOC, HEAPPROFD_REC_FREE, HEAPPROFD_REC_DMABUF,
			HEAPPROFD_REC_KLOST,
		};
		struct heapprofd_rec_alloc *a = (void *)buf;

		len = (len + 7) & ~(size_t)7;
		if (len < sizeof(struct heapprofd_rec_hdr))
			len = sizeof(struct heapprofd_rec_hdr);
		a->hdr.len = (uint32_t)len;
		a->hdr.type = (mode & 0x80) ? ktypes[(mode >> 1) % 4] : 1 + (mode >> 1) % 5;
		if (mode & 0x80) {
			a->hdr.stamp = 0;
			if (a->hdr.type == HEAPPROFD_REC_ALLOC && len >= sizeof(*a))
				a->heap_id = HEAPPROFD_HEAP_DMABUF;
			if (a->hdr.type == HEAPPROFD_REC_FREE &&
			    len >= sizeof(struct heapprofd_rec_free))
				((struct heapprofd_rec_free *)buf)->heap_id = HEAPPROFD_HEAP_DMABUF;
			if (a->hdr.type == HEAPPROFD_REC_DMABUF &&
			    len >= sizeof(struct heapprofd_rec_dmabuf))
				((struct heapprofd_rec_dmabuf *)buf)->exporter[31] = 0;
		}
		if (a->hdr.type == HEAPPROFD_REC_ALLOC && len >= sizeof(*a) && (mode & 0x10)) {
			a->arch = HEAPPROFD_ARCH_X86_64;
			a->nregs = HEAPPROFD_X86_64_NREGS;
			a->stack_len = (uint32_t)(len - sizeof(*a));
			a->stack_top = 0;
			a->heap_id = (mode & 0x80) ? HEAPPROFD_HEAP_DMABUF : a->heap_id & 0xff;
			a->addr |= 1;
			a->est_size = (a->est_size & 0xffff) + 1;
			a->req_size &= 0xffff;
			a->usable_size &= 0xffff;
			a->interval = 1;
			a->count = 1;
			a->hdr.flags &= 3;
			a->stack_reused = 0;
			a->code_gen = 0;
			if (mode & 0x20)	/* an ip inside real code */
				a->regs[0] = (uint64_t)(uintptr_t)LLVMFuzzerTestOneInput +
					     (a->regs[0] & 0xfff);
			if (mode & 0x40)	/* sp at a real stack */
				a->regs[1] = (uint64_t)(uintptr_t)__builtin_frame_address(0);
			if ((mode & 0x08) && !(mode & 0x80)) {
				/* a same-path claim: no stack, all of it reused */
				a->hdr.flags |= HEAPPROFD_ALLOC_STACK_REUSED | HEAPPROFD_ALLOC_STACK_SAME;
				a->hdr.flags &= ~HEAPPROFD_ALLOC_STACK_TRUNCATED;
				a->stack_reused = (uint32_t)(a->regs[2] & 0xfff8) + 8;
				a->stack_len = 0;
				a->stack_top = a->regs[1] + a->stack_reused;
				a->code_gen = 1 + (uint32_t)(a->regs[3] & 3);
			}
		}
	}
	if (mode & 0x80)
		hp_proc_feed_kernel(pr, buf, len, why, sizeof(why));
	else
		hp_proc_feed(pr, buf, len, why, sizeof(why));
	hp_proc_sync(pr);
	if (++n % 5000 == 0)
		hp_proc_dump(pr, "/tmp/hp-fuzz-dump", HP_OUT_PPROF | HP_OUT_TEXT | HP_OUT_SVG |
			     HP_OUT_FOLDED, HP_DUMP_NOW | HP_DUMP_PEAK);
	return 0;
}
