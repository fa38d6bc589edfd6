// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel transport: register a session on /dev/heapprofd, map its ring
 * (one mmap; the module maps the data area twice itself), deposit the files
 * the unwinder needs, and wake the consumer with an ioctl.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "client.h"

static void deposit(int sfd, int slot, const char *path)
{
	struct heapprofd_fd_arg a;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		hp_debug("cannot open %s: %s", path, strerror(errno));
		return;
	}
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.slot = (uint32_t)slot;
	a.fd = fd;
	if (ioctl(sfd, HEAPPROFD_IOC_DEPOSIT_FD, &a))
		hp_debug("deposit of %s failed: %s", path, strerror(errno));
	close(fd);	/* the session holds its own reference */
}

int hp_kernel_open(struct hp_session *s, int dormant, uint64_t data_size)
{
	struct heapprofd_register reg;
	size_t len;
	void *map;
	int dev, sfd;

	dev = open("/dev/" HEAPPROFD_DEVICE_NAME, O_RDWR | O_CLOEXEC);
	if (dev < 0)
		return -errno;
	memset(&reg, 0, sizeof(reg));
	reg.size = sizeof(reg);
	reg.flags = dormant ? HEAPPROFD_REGISTER_DORMANT : 0;
	reg.data_size = data_size;
	sfd = ioctl(dev, HEAPPROFD_IOC_REGISTER, &reg);
	if (sfd < 0) {
		int e = -errno;

		close(dev);
		hp_debug("REGISTER failed: %s", strerror(-e));
		return e;
	}
	close(dev);
	if (reg.version != HEAPPROFD_ABI_VERSION) {
		close(sfd);
		hp_warn("the loaded heapprofd module speaks ABI %u, this client %d: not using "
			"it; load the heapprofd.ko installed with this client",
			reg.version, HEAPPROFD_ABI_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (!reg.ctl_size) {
		close(sfd);
		return -EPROTO;
	}
	/* The geometry the module really gave the session. */
	{
		struct heapprofd_session_info info;

		memset(&info, 0, sizeof(info));
		info.size = sizeof(info);
		if (!ioctl(sfd, HEAPPROFD_IOC_INFO, &info) && info.data_size &&
		    info.ctl_size) {
			reg.data_size = info.data_size;
			reg.ctl_size = info.ctl_size;
		}
	}
	if (!reg.data_size)
		reg.data_size = data_size;
	map = hp_ring_map_fd(sfd, 0, reg.ctl_size, reg.data_size, &len);
	if (map == MAP_FAILED) {
		int e = -errno;

		close(sfd);
		return e;
	}
	if (hp_ring_open(&s->ring, map, len)) {
		munmap(map, len);
		close(sfd);
		return -EPROTO;
	}
	s->kernel = 1;
	s->session_fd = sfd;
	/* Tests only: a client that a loaded machine keeps from its deposits
	 * for a while, which the daemon must wait for (tests/e2e/run). */
	{
		const char *d = getenv("HEAPPROFD_TEST_DEPOSIT_DELAY_MS");
		unsigned long ms = d ? strtoul(d, NULL, 10) : 0;

		if (ms)
			usleep((useconds_t)(ms < 10000 ? ms : 10000) * 1000);
	}
	deposit(sfd, HEAPPROFD_FD_MAPS, "/proc/self/maps");
	deposit(sfd, HEAPPROFD_FD_MEM, "/proc/self/mem");
	deposit(sfd, HEAPPROFD_FD_EXE, "/proc/self/exe");
	hp_debug("kernel session %llu registered",
		 (unsigned long long)reg.session_id);
	return 0;
}

void hp_kernel_wake(struct hp_session *s)
{
	if (ioctl(s->session_fd, HEAPPROFD_IOC_WAKE) && errno == EPIPE)
		hp_session_stop("session closed");
}
