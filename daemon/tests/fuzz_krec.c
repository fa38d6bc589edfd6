// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer over the module transport's kernel records (uapi "Kernel
 * records"), through the daemon's own reader (consumer.c): each input is a
 * series of messages, each read(2) as a whole by the session, as the
 * consumer fd returns whole records; then the session's books are synced.
 * A SOCK_SEQPACKET socket stands for the consumer fd (one read, one message;
 * EAGAIN when empty).
 *
 * Input: chunks of [2-byte length][that many bytes], each one message.
 * Before fuzzing, a known series checks the framing: three records in one
 * read are three records, and a record cut short is refused and counted.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../hpd.h"

static struct hpd_session *start(int *peer)
{
	struct hp_proc_info pi = { .pid = getpid(), .comm = "fuzzk",
				   .maps_fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC),
				   .mem_fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC),
				   .exe_fd = -1 };
	struct hpd_session *s = hpd_session_new(HPD_T_KERNEL, getpid(), "fuzzk");
	int sv[2];

	if (!s || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv))
		abort();
	s->conn_fd = sv[0];
	*peer = sv[1];
	s->proc = hp_proc_new(hpd_pipe, &pi);
	if (!s->proc)
		abort();
	s->enabled = 1;
	return s;
}

static void stop(struct hpd_session *s, int peer)
{
	hp_proc_end(s->proc);
	s->proc = NULL;
	close(s->conn_fd);
	s->conn_fd = -1;
	close(peer);
	s->ending = 1;
	hpd_sessions_reap();
}

static void self_check(void)
{
	uint64_t msg[64] = { 0 };
	struct heapprofd_rec_free *f = (void *)msg;
	struct heapprofd_rec_klost *k = (void *)(f + 1);
	struct heapprofd_rec_dmabuf *d = (void *)(k + 1);
	struct hpd_session *s;
	size_t n = sizeof(*f) + sizeof(*k) + sizeof(*d);
	int peer;

	f->hdr.type = HEAPPROFD_REC_FREE;
	f->hdr.len = sizeof(*f);
	f->heap_id = HEAPPROFD_HEAP_DMABUF;
	f->addr = 7;
	k->hdr.type = HEAPPROFD_REC_KLOST;
	k->hdr.len = sizeof(*k);
	k->records = 1;
	d->hdr.type = HEAPPROFD_REC_DMABUF;
	d->hdr.len = sizeof(*d);
	d->inode = 7;
	strcpy(d->exporter, "udmabuf");
	s = start(&peer);
	if (write(peer, msg, n) != (ssize_t)n || write(peer, msg, n - 8) != (ssize_t)n - 8)
		abort();
	hpd_session_read_kernel(s, 0);
	hp_proc_sync(s->proc);
	/* 3 + 2 good records; the DMABUF cut short is refused, alone. */
	if (s->krecords != 5 || s->kbad != 1 || s->krec_off) {
		fprintf(stderr, "fuzz_krec: framing check failed: %llu fed, %llu refused\n",
			(unsigned long long)s->krecords, (unsigned long long)s->kbad);
		abort();
	}
	stop(s, peer);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct hp_pipeline_opts po = { .unwind_workers = 1 };

	(void)argc;
	(void)argv;
	hpd_verbosity = -1;	/* quiet */
	hpd_pipe = hp_pipeline_new(&po);
	if (!hpd_pipe)
		abort();
	self_check();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint64_t msg[(64 << 10) / 8];
	struct hpd_session *s;
	size_t off = 0;
	int peer;

	s = start(&peer);
	while (off + 2 <= size) {
		size_t n = data[off] | (size_t)data[off + 1] << 8;

		off += 2;
		if (n > size - off)
			n = size - off;
		memcpy(msg, data + off, n);
		off += n;
		/* Kernel records keep the ring's alignment; fix the stamp to
		 * reach past the header more often. */
		if (n >= sizeof(struct heapprofd_rec_hdr) && (n & 1))
			((struct heapprofd_rec_hdr *)msg)->stamp = 0;
		if (write(peer, msg, n) < 0)
			break;
	}
	hpd_session_read_kernel(s, 0);
	hpd_session_read_kernel(s, 1);
	hp_proc_sync(s->proc);
	stop(s, peer);
	return 0;
}
