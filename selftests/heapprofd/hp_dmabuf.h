/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Making DMA-BUFs for heapprofd's tests and benchmarks: from the system
 * DMA heap (/dev/dma_heap/system), from udmabuf (/dev/udmabuf with a
 * sealed memfd) or as a PRIME export of a vgem dumb buffer
 * (/dev/dri/card*), whichever the kernel has first.
 */
#ifndef HP_DMABUF_H
#define HP_DMABUF_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/dma-heap.h>
#include <linux/udmabuf.h>

/* The DRM uapi structures we use (no libdrm headers needed). */
struct hp_drm_version {
	int major, minor, patch;
	size_t name_len;
	char *name;
	size_t date_len;
	char *date;
	size_t desc_len;
	char *desc;
};

struct hp_drm_create_dumb {
	uint32_t height, width, bpp, flags, handle, pitch;
	uint64_t size;
};

struct hp_drm_prime_handle {
	uint32_t handle, flags;
	int32_t fd;
};

struct hp_drm_gem_close {
	uint32_t handle, pad;
};

#define HP_DRM_IOCTL_VERSION	_IOWR('d', 0x00, struct hp_drm_version)
#define HP_DRM_IOCTL_GEM_CLOSE	_IOW('d', 0x09, struct hp_drm_gem_close)
#define HP_DRM_IOCTL_PRIME_HANDLE_TO_FD \
	_IOWR('d', 0x2d, struct hp_drm_prime_handle)
#define HP_DRM_IOCTL_MODE_CREATE_DUMB \
	_IOWR('d', 0xb2, struct hp_drm_create_dumb)

/* An open vgem card, or -1. */
static inline int vgem_fd(void)
{
	static int fd = -2;
	char path[32], name[16];
	int i, c;

	if (fd != -2)
		return fd;
	fd = -1;
	for (i = 0; i < 8 && fd < 0; i++) {
		struct hp_drm_version v = { .name_len = sizeof(name) - 1,
					    .name = name };

		snprintf(path, sizeof(path), "/dev/dri/card%d", i);
		c = open(path, O_RDWR | O_CLOEXEC);
		if (c < 0)
			continue;
		memset(name, 0, sizeof(name));
		if (ioctl(c, HP_DRM_IOCTL_VERSION, &v) == 0 &&
		    !strcmp(name, "vgem"))
			fd = c;
		else
			close(c);
	}
	return fd;
}

/*
 * The exporters we know how to drive, by the name their buffers carry in
 * sysfs (a PRIME export carries the DRM core's name, "drm").
 */
static const char *const hp_buf_kinds[] = { "system", "udmabuf", "drm" };
#define HP_BUF_KINDS	3

static inline int buf_kind_available(const char *kind)
{
	if (!strcmp(kind, "system"))
		return access("/dev/dma_heap/system", R_OK) == 0;
	if (!strcmp(kind, "udmabuf"))
		return access("/dev/udmabuf", R_OK) == 0;
	return vgem_fd() >= 0;
}

/* The first exporter the kernel has, or NULL. */
static inline const char *buf_kind(void)
{
	int i;

	for (i = 0; i < HP_BUF_KINDS; i++)
		if (buf_kind_available(hp_buf_kinds[i]))
			return hp_buf_kinds[i];
	return NULL;
}

static inline int make_vgem_buf(size_t size)
{
	struct hp_drm_create_dumb c = {
		.width = 1024, .bpp = 32, .height = size / 4096,
	};
	struct hp_drm_prime_handle h = { .flags = O_RDWR | O_CLOEXEC };
	struct hp_drm_gem_close gc = { };
	int dri = vgem_fd(), ret;

	if (ioctl(dri, HP_DRM_IOCTL_MODE_CREATE_DUMB, &c))
		return -errno;
	h.handle = c.handle;
	ret = ioctl(dri, HP_DRM_IOCTL_PRIME_HANDLE_TO_FD, &h);
	ret = ret ? -errno : h.fd;
	/* The dma-buf holds the object now: its fd is the last reference. */
	gc.handle = c.handle;
	ioctl(dri, HP_DRM_IOCTL_GEM_CLOSE, &gc);
	return ret;
}

/* A new DMA-BUF of @size bytes (a page multiple) from @kind; fd or -errno. */
static __attribute__((unused, noinline)) int make_buf_of(const char *kind,
							 size_t size)
{
	int fd, mfd, ret;

	if (!kind)
		return -ENODEV;
	if (!strcmp(kind, "drm"))
		return make_vgem_buf(size);
	if (!strcmp(kind, "system")) {
		struct dma_heap_allocation_data a = {
			.len = size, .fd_flags = O_RDWR | O_CLOEXEC,
		};

		fd = open("/dev/dma_heap/system", O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		ret = ioctl(fd, DMA_HEAP_IOCTL_ALLOC, &a);
		ret = ret < 0 ? -errno : (int)a.fd;
		close(fd);
		return ret;
	}
	mfd = memfd_create("hp-dmabuf-test", MFD_ALLOW_SEALING);
	if (mfd < 0)
		return -errno;
	if (ftruncate(mfd, size) || fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK)) {
		close(mfd);
		return -errno;
	}
	fd = open("/dev/udmabuf", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		close(mfd);
		return ret;
	}
	{
		struct udmabuf_create c = {
			.memfd = mfd, .flags = UDMABUF_FLAGS_CLOEXEC,
			.offset = 0, .size = size,
		};

		ret = ioctl(fd, UDMABUF_CREATE, &c);
		ret = ret < 0 ? -errno : ret;
	}
	close(fd);
	close(mfd);
	return ret;
}

/* A new DMA-BUF from the first exporter the kernel has. */
static __attribute__((unused, noinline)) int make_buf(size_t size)
{
	return make_buf_of(buf_kind(), size);
}

#endif /* HP_DMABUF_H */
