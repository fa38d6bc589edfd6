#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# heapprofd.ko's dmabuf_source= parameter, on whatever kernel this is: with
# "auto" the module follows exports through the kernel's dma_buf_export
# tracepoint where the kernel has one (tracefs lists it) and through
# probes otherwise; "kprobe" forces the probes; "off" hooks nothing; any
# other value fails the load. With each working source a held buffer is
# counted with its size and its exporter's pid, and its release is seen;
# with "off" nothing is counted. Needs root, heapprofd.ko loaded, $KO
# (default /hp/kmod) and build/selftests/dmabuf_hold; leaves the module
# loaded with its defaults. TAP; exit 4 (skip) without kprobes or an
# exporter.
set -u
KO=${KO:-/hp/kmod}
HOLD=${HOLD:-build/selftests/dmabuf_hold}
D=/sys/kernel/heapprofd/dmabuf
. "$(dirname "$0")/hp_dmabuf_lib.sh"

reload() {	# reload [PARAM]: heapprofd.ko with PARAM; its exit status
	rmmod heapprofd 2>/dev/null
	insmod "$KO/heapprofd.ko" "$@" 2>/dev/null
}

[ "$(cat $D/source 2>/dev/null)" != none ] && [ -e $D/source ] ||
	{ echo "1..0 # SKIP no DMA-BUF source"; exit 4; }
hold_init /tmp/dmabuf_source.$$
hold 1 4096
release
[ -s $fifo.out ] || { hold_done; echo "1..0 # SKIP no DMA heap, udmabuf or vgem"; exit 4; }

# The kernel's own event, as tracefs shows it (mounted or not).
auto=kprobe
for t in /sys/kernel/tracing /sys/kernel/debug/tracing; do
	[ -d $t/events/dma_buf/dma_buf_export ] && auto=tracepoint
done
if [ $auto = kprobe ] && [ ! -d /sys/kernel/tracing/events ] &&
   [ ! -d /sys/kernel/debug/tracing/events ]; then
	mkdir -p /tmp/tracefs.$$ &&
	mount -t tracefs nodev /tmp/tracefs.$$ 2>/dev/null &&
	{ [ -d /tmp/tracefs.$$/events/dma_buf/dma_buf_export ] && auto=tracepoint
	  umount /tmp/tracefs.$$; }
	rmdir /tmp/tracefs.$$ 2>/dev/null
fi
echo "# this kernel: auto means $auto"
echo "1..12"

# follows SOURCE WHAT: a held buffer counted with size and pid, then gone
follows() {
	local count ino
	count=$(cat $D/buffer_count)
	hold 2 8192
	ino=$(cut -d' ' -f1 $fifo.out)
	expect "$(cat $D/buffer_count)" $((count + 2)) "$2: two held buffers counted"
	expect "$(cat $D/buffers/$ino/size 2>&1) $(cat $D/buffers/$ino/exporter_pid 2>&1)" \
		"8192 $holder" "$2: a held buffer has its size and its exporter's pid"
	release
	expect "$(cat $D/buffer_count)" "$count" "$2: their release is seen"
}

reload dmabuf_source=auto || not_ok "insmod dmabuf_source=auto"
expect "$(cat $D/source)" $auto "auto: the source is $auto"
follows $auto auto
reload dmabuf_source=kprobe || not_ok "insmod dmabuf_source=kprobe"
expect "$(cat $D/source)" kprobe "kprobe: the source is kprobe"
follows kprobe kprobe
reload dmabuf_source=off || not_ok "insmod dmabuf_source=off"
expect "$(cat $D/source)" none "off: the source is none"
hold 2 8192
expect "$(cat $D/buffer_count)" 0 "off: held buffers are not counted"
release
if reload dmabuf_source=bogus; then
	not_ok "dmabuf_source=bogus: the load fails"
else
	ok "dmabuf_source=bogus: the load fails"
fi
reload || not_ok "insmod heapprofd.ko with its defaults"
expect "$(cat $D/source)" $auto "defaults: the source is $auto"
hold_done
exit $failed
