# SPDX-License-Identifier: GPL-2.0
# tests/dmabuf: mkbufs, the DMA-BUF maker tests/dmabuf/run checks
# `heapprofctl dmabuf` against, into build/tests/dmabuf/. Included by the
# top-level Makefile (target `dmabuf-tests`, part of `userspace`, so the VM
# gets it too).
DMABUF_TEST_OUT := $(CURDIR)/build/tests/dmabuf

$(DMABUF_TEST_OUT)/mkbufs: $(CURDIR)/tests/dmabuf/mkbufs.c
	@mkdir -p $(DMABUF_TEST_OUT)
	$(CC) -O1 -g -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -o $@ $<

dmabuf-tests: $(DMABUF_TEST_OUT)/mkbufs
