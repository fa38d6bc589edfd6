# SPDX-License-Identifier: GPL-2.0
#
# heapprofd: the top-level build. The kernel module is built by Kbuild (the
# file named Kbuild next to this one); everything else is user space into
# build/.
#
#   make            user space and the module for Debian's stock 6.1 headers
#                   (make KDIR=$(scripts/stock-kdir 6.12) for its 6.12)
#   make demo       profile a real program end to end (in a VM with the module);
#                   it builds only what it runs (make demo-build)
#   make check      every test; the last line is "N passed, N failed"
#   make bench      the benchmarks (results in bench/RESULTS.md)
#   make bench-dmabuf  DMA-BUF export cost with and without the module (VMs)
#   make deps       install every Debian package of scripts/apt-packages.txt
#   make arm64      user space for the arm64 guest (scripts/vmtest --arch arm64),
#                   cross-built into build/arm64/ beside its selftests
#
# `make demo` and `make check` install the Debian packages they need
# themselves (scripts/install-deps --for demo|check: only the missing ones,
# as root or through sudo, saying which and why); `make deps` installs all
# of them at once, `make deps DRY_RUN=1` says what it would install.

# Empty (also as inherited from a make that ran before the headers were
# installed): look again.
ifeq ($(strip $(KDIR)),)
KDIR := $(shell scripts/stock-kdir 2>/dev/null)
endif
export KDIR

.PHONY: arm64 all userspace demo-build client daemon ctl selftests hostile attach-tests dmabuf-tests module check demo bench bench-dmabuf deps clean

all: userspace module

userspace: client daemon ctl selftests hostile attach-tests dmabuf-tests

# What `make demo` runs, and nothing more: the client library, the daemon
# and heapprofctl. Not the tests' programs: the kselftests among them need
# linux-source-6.1, which only `make check` installs.
demo-build:
	$(MAKE) -C libclient $(CURDIR)/build/libheapprofd_client.so
	$(MAKE) -C daemon
	$(MAKE) -C heapprofctl

client:
	$(MAKE) -C libclient

daemon: client
	$(MAKE) -C daemon

# After the daemon: both link the pipeline library, which one of them builds.
ctl: daemon
	$(MAKE) -C heapprofctl

selftests:
	$(MAKE) -C selftests/heapprofd

# The hostile-client suite's programs (tests/hostile, security.rst).
include tests/hostile/hostile.mk
# The programs of the attach tests (tests/attach).
include tests/attach/attach.mk
# The DMA-BUF maker of tests/dmabuf/run.
include tests/dmabuf/dmabuf.mk

# The arm64 guest's user space: the client library, the daemon, heapprofctl,
# the programs its tests run and the unwind benchmark, cross-built with
# aarch64-linux-gnu-gcc against the :arm64 libraries of
# scripts/apt-packages.txt into build/arm64/, which scripts/vmtest --arch
# arm64 makes the guest's /hp/build.
ARM64_OUT := $(CURDIR)/build/arm64
ARM64_MAKE = $(MAKE) CC=aarch64-linux-gnu-gcc CXX=aarch64-linux-gnu-g++ PL_CC=aarch64-linux-gnu-gcc AR=aarch64-linux-gnu-ar \
	OBJCOPY=aarch64-linux-gnu-objcopy \
	BUILD=$(ARM64_OUT) PL_BUILD=$(ARM64_OUT) PL_CXXRT=-l:libstdc++.so.6
# What tests/attach/run and tests/attach/hostile run (the latter also
# tests/hostile's hostile, for its drop-privileges exec; tests/hostile's
# programs are all cross-built).
ARM64_ATTACH := storm libdlsite.so static_loop cxx_storm vregs victim libdecoy.so libaudit.so suid_probe
arm64: export PKG_CONFIG_LIBDIR := /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
arm64:
	$(MAKE) -C selftests/heapprofd ARCH=arm64
	+$(ARM64_MAKE) -C libclient $(ARM64_OUT)/libheapprofd_client.so guest-tests \
		$(ARM64_OUT)/bench/client/bench_client
	+$(ARM64_MAKE) -C daemon all e2e-progs $(ARM64_OUT)/bench/pipeline/bench_unwind
	+$(ARM64_MAKE) -C heapprofctl
	+$(ARM64_MAKE) DMABUF_TEST_OUT=$(ARM64_OUT)/tests/dmabuf $(ARM64_OUT)/tests/dmabuf/mkbufs
	+$(ARM64_MAKE) ATTACH_OUT=$(ARM64_OUT)/tests/attach $(addprefix $(ARM64_OUT)/tests/attach/,$(ARM64_ATTACH))
	+$(ARM64_MAKE) HOSTILE_OUT=$(ARM64_OUT)/tests/hostile hostile

module:
	@test -n "$(KDIR)" || { echo "no kernel headers: apt-get install linux-headers-$(shell dpkg --print-architecture) (or make KDIR=...)"; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

check:
	@scripts/check

demo:
	@scripts/demo

build/bench/export_bench: bench/dmabuf/export_bench.c proto/ring.h \
		uapi/linux/heapprofd.h selftests/heapprofd/hp_dmabuf.h
	mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Werror -I. -o $@ $<

# The export loop in the guest: without the module, loaded, and recording.
bench-dmabuf: build/bench/export_bench
	scripts/vmtest --icount --kernel stock-6.12 --add bench/dmabuf/run-vm -- bench/dmabuf/run-vm
	scripts/vmtest --icount --kernel stock --kmod vgem --add bench/dmabuf/run-vm -- sh -c 'modprobe vgem && bench/dmabuf/run-vm'
	scripts/vmtest --icount --kernel debug --add bench/dmabuf/run-vm -- sh -c 'N=1000 ROUNDS=1 bench/dmabuf/run-vm'

bench: userspace
	$(MAKE) -C libclient bench
	$(MAKE) -C daemon bench

deps:
	scripts/install-deps $(if $(DRY_RUN),--dry-run)

clean:
	rm -rf build out
	-$(MAKE) -C libclient clean
	-$(MAKE) -C daemon clean
	-$(MAKE) -C heapprofctl clean
	-$(MAKE) -C selftests/heapprofd clean
	-test -n "$(KDIR)" && $(MAKE) -C $(KDIR) M=$(CURDIR) clean
