// SPDX-License-Identifier: GPL-2.0
/*
 * tests/dmabuf/mkbufs: makes real DMA-BUFs for tests/dmabuf/run to find
 * with `heapprofctl dmabuf`. From every exporter this kernel offers
 * (/dev/dma_heap/system: DMA_HEAP_IOCTL_ALLOC; /dev/udmabuf: a sealed
 * memfd; vgem's /dev/dri/card*: a dumb buffer exported by PRIME) it makes
 * three buffers:
 *
 *   shared  the parent holds one fd and maps it once; the child, forked
 *           before any buffer existed, gets an fd by SCM_RIGHTS
 *   dup     the parent alone, two fds (dup), not mapped
 *   maponly the parent maps it twice and closes its fd
 *
 * and prints what it made, then "ready", and holds everything until its
 * standard input ends:
 *
 *   parent PID
 *   child PID
 *   buf INODE SIZE EXPORTER PARENT_FDS PARENT_MAPS CHILD_FDS CHILD_MAPS
 *
 * Exit 4 (skip) with a message when the kernel has none of the exporters.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <linux/dma-heap.h>
#include <linux/udmabuf.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The DRM uapi structures and ioctls (no libdrm headers needed). */
#include "../../selftests/heapprofd/hp_dmabuf.h"

#define PAGE 4096UL

static int sock[2];		/* parent <-> child */

static void send_fd(int s, int fd)
{
	char c = 'f', ctl[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { &c, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			     .msg_controllen = sizeof(ctl) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	if (sendmsg(s, &mh, 0) != 1) {
		perror("mkbufs: sendmsg");
		exit(1);
	}
	if (read(s, &c, 1) != 1) {	/* the child has it */
		perror("mkbufs: child ack");
		exit(1);
	}
}

/* The child: keep every fd it is sent, ack each, until the parent goes. */
static void child(void)
{
	for (;;) {
		char c, ctl[CMSG_SPACE(sizeof(int))];
		struct iovec iov = { &c, 1 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
				     .msg_controllen = sizeof(ctl) };

		if (recvmsg(sock[1], &mh, MSG_CMSG_CLOEXEC) <= 0)
			_exit(0);
		if (write(sock[1], "k", 1) != 1)
			_exit(1);
	}
}

static int heap_alloc(size_t len)
{
	struct dma_heap_allocation_data d = { .len = len, .fd_flags = O_RDWR | O_CLOEXEC };
	int h = open("/dev/dma_heap/system", O_RDONLY | O_CLOEXEC);

	if (h < 0)
		return -1;
	if (ioctl(h, DMA_HEAP_IOCTL_ALLOC, &d)) {
		fprintf(stderr, "mkbufs: DMA_HEAP_IOCTL_ALLOC: %s\n", strerror(errno));
		exit(1);
	}
	close(h);
	return (int)d.fd;
}

static int udmabuf_alloc(size_t len)
{
	struct udmabuf_create c = { .flags = UDMABUF_FLAGS_CLOEXEC, .size = len };
	int dev = open("/dev/udmabuf", O_RDWR | O_CLOEXEC), fd;

	if (dev < 0)
		return -1;
	c.memfd = (uint32_t)memfd_create("mkbufs", MFD_ALLOW_SEALING | MFD_CLOEXEC);
	if ((int)c.memfd < 0 || ftruncate((int)c.memfd, (off_t)len) ||
	    fcntl((int)c.memfd, F_ADD_SEALS, F_SEAL_SHRINK)) {
		perror("mkbufs: memfd");
		exit(1);
	}
	fd = ioctl(dev, UDMABUF_CREATE, &c);
	if (fd < 0) {
		fprintf(stderr, "mkbufs: UDMABUF_CREATE: %s\n", strerror(errno));
		exit(1);
	}
	close((int)c.memfd);	/* the buffer holds its pages */
	close(dev);
	return fd;
}

static int vgem_card = -2;

static int vgem_alloc(size_t len)
{
	struct hp_drm_create_dumb d = { .height = (uint32_t)(len / PAGE), .width = 1024, .bpp = 32 };
	struct hp_drm_prime_handle p = { 0 };

	if (vgem_card == -2) {
		glob_t g;
		size_t i;

		vgem_card = -1;
		if (!glob("/dev/dri/card*", 0, NULL, &g)) {
			for (i = 0; i < g.gl_pathc && vgem_card < 0; i++) {
				char name[32] = "";
				struct hp_drm_version v = { .name_len = sizeof(name) - 1, .name = name };
				int fd = open(g.gl_pathv[i], O_RDWR | O_CLOEXEC);

				if (fd >= 0 && !ioctl(fd, HP_DRM_IOCTL_VERSION, &v) &&
				    !strcmp(name, "vgem"))
					vgem_card = fd;
				else if (fd >= 0)
					close(fd);
			}
			globfree(&g);
		}
	}
	if (vgem_card < 0)
		return -1;
	if (ioctl(vgem_card, HP_DRM_IOCTL_MODE_CREATE_DUMB, &d)) {
		fprintf(stderr, "mkbufs: DRM_IOCTL_MODE_CREATE_DUMB: %s\n", strerror(errno));
		exit(1);
	}
	p.handle = d.handle;
	p.flags = O_CLOEXEC | O_RDWR;
	if (ioctl(vgem_card, HP_DRM_IOCTL_PRIME_HANDLE_TO_FD, &p)) {
		fprintf(stderr, "mkbufs: DRM_IOCTL_PRIME_HANDLE_TO_FD: %s\n", strerror(errno));
		exit(1);
	}
	return p.fd;
}

struct made { unsigned long ino, size; const char *exp; int pfds, pmaps, cfds; };
static struct made made[16];
static int nmade;

static void *map(int fd, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

	if (p == MAP_FAILED) {
		fprintf(stderr, "mkbufs: mmap of a DMA-BUF: %s\n", strerror(errno));
		exit(1);
	}
	memset(p, 0x5a, len);	/* touch it: pages really there */
	return p;
}

static void record(int fd, const char *exp, int pfds, int pmaps, int cfds, size_t want)
{
	struct stat st;

	if (fstat(fd, &st) || (unsigned long)st.st_size != want) {
		fprintf(stderr, "mkbufs: %s buffer: size %lld, asked for %zu\n", exp,
			(long long)st.st_size, want);
		exit(1);
	}
	made[nmade++] = (struct made){ st.st_ino, want, exp, pfds, pmaps, cfds };
}

/* The three buffers of one exporter; sizes differ by exporter (base pages). */
static int make(int (*alloc)(size_t), const char *exp, unsigned base)
{
	size_t s1 = (base + 1) * PAGE, s2 = (base + 2) * PAGE, s3 = (base + 3) * PAGE;
	int a = alloc(s1), b, c;

	if (a < 0)
		return 0;
	b = alloc(s2);
	c = alloc(s3);
	if (b < 0 || c < 0) {
		fprintf(stderr, "mkbufs: %s: a second buffer failed\n", exp);
		exit(1);
	}
	/* shared: one fd and one mapping here, one fd in the child */
	map(a, s1);
	send_fd(sock[0], a);
	record(a, exp, 1, 1, 1, s1);
	/* dup: two fds here */
	if (dup(b) < 0)
		exit(1);
	record(b, exp, 2, 0, 0, s2);
	/* maponly: two mappings, no fd */
	map(c, s3);
	map(c, s3);
	record(c, exp, 0, 2, 0, s3);
	close(c);
	return 1;
}

int main(void)
{
	pid_t kid;
	int n = 0, i;
	char c;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sock)) {
		perror("mkbufs: socketpair");
		return 1;
	}
	kid = fork();
	if (kid < 0)
		return 1;
	if (!kid) {
		close(sock[0]);
		child();
	}
	close(sock[1]);
	n += make(heap_alloc, "system", 8);
	n += make(udmabuf_alloc, "udmabuf", 16);
	n += make(vgem_alloc, "drm", 24);
	if (!n) {
		printf("skip: no DMA-BUF exporter here (no /dev/dma_heap/system, no /dev/udmabuf, no vgem in /dev/dri)\n");
		kill(kid, SIGKILL);
		waitpid(kid, NULL, 0);
		return 4;
	}
	printf("parent %d\nchild %d\n", (int)getpid(), (int)kid);
	for (i = 0; i < nmade; i++)
		printf("buf %lu %lu %s %d %d %d %d\n", made[i].ino, made[i].size, made[i].exp,
		       made[i].pfds, made[i].pmaps, made[i].cfds, 0);
	printf("ready\n");
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	close(sock[0]);
	waitpid(kid, NULL, 0);
	return 0;
}
