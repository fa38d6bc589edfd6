#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# heapprofd.ko unloaded and loaded again while DMA-BUFs it accounted for
# are alive: the unload is clean; the reloaded module finds the old
# buffers in their holder's file table (or, for buffers only mapped, in
# its mappings) with their size and exporter but no exporting pid, and
# counts their later release (the holder exits); new buffers are counted
# as before. Needs root, heapprofd.ko loaded, $KO (default /hp/kmod) and
# build/selftests/dmabuf_hold. TAP; exit 4 (skip) without a DMA-BUF source
# or exporter.
set -u
KO=${KO:-/hp/kmod}
HOLD=${HOLD:-build/selftests/dmabuf_hold}
D=/sys/kernel/heapprofd/dmabuf
. "$(dirname "$0")/hp_dmabuf_lib.sh"

[ "$(cat $D/source 2>/dev/null)" != none ] && [ -e $D/source ] ||
	{ echo "1..0 # SKIP no DMA-BUF source"; exit 4; }
base=$(cat $D/buffer_count)
hold_init /tmp/dmabuf_unload.$$
hold 4 65536
if [ ! -s $fifo.out ]; then
	wait $holder
	[ $? = 4 ] && { echo "1..0 # SKIP no DMA heap, udmabuf or vgem"; exit 4; }
	echo "not ok 1 - dmabuf_hold did not start"; exit 1
fi
echo "1..13"
expect "$(cat $D/buffer_count)" $((base + 4)) "four held buffers counted"
ino=$(cut -d' ' -f1 $fifo.out)
expect "$(cat $D/buffers/$ino/size 2>&1)" 65536 "a held buffer has its view"
exporter=$(cat $D/buffers/$ino/exporter_name)
if rmmod heapprofd; then ok "unloaded with buffers alive"; else not_ok "rmmod heapprofd"; fi
insmod "$KO/heapprofd.ko" || { not_ok "insmod heapprofd.ko"; exit 1; }
# Whatever else is alive is found too; the four are among what was found.
# (Reading buffer_count first brings buffers/ up to date.)
count=$(cat $D/buffer_count)
found=$(cat $D/found_at_load)
if [ "$found" -ge 4 ]; then ok "the reloaded module found the four ($found at load)"
else not_ok "the reloaded module found the four (found_at_load $found)"; fi
expect "$(cat $D/buffers/$ino/size 2>&1)" 65536 "a found buffer has its size"
expect "$(cat $D/buffers/$ino/exporter_name 2>&1)" "$exporter" "a found buffer has its exporter's name"
expect "$(cat $D/buffers/$ino/exporter_pid 2>&1)" 0 "a found buffer has no exporting pid"
release			# the holder exits: its buffers are released
expect "$(cat $D/buffer_count)" $((count - 4)) "their release is counted"
# New buffers are counted again: two held while we look, then gone.
count=$(cat $D/buffer_count)
hold 2 8192
expect "$(cat $D/buffer_count)" $((count + 2)) "new buffers are counted again"
release
expect "$(cat $D/buffer_count)" $count "and forgotten when released"
# Buffers held by a mapping only, their fds closed, are found too.
hold 3 16384 mapped
if [ -s $fifo.out ]; then
	ino=$(cut -d' ' -f1 $fifo.out)
	count=$(cat $D/buffer_count)
	rmmod heapprofd && insmod "$KO/heapprofd.ko" ||
		{ not_ok "reload with mapped buffers"; exit 1; }
	expect "$(cat $D/buffer_count)" $count "buffers only mapped are found at load"
	# (buffer_count, read just above, brought buffers/ up to date)
	expect "$(cat $D/buffers/$ino/size 2>&1)" 16384 "a mapped buffer has its size"
	release
	expect "$(cat $D/buffer_count)" $((count - 3)) "and their release is counted"
else
	release
	for t in "mapped buffers found" "mapped size" "mapped release"; do
		ok "$t # SKIP the exporter cannot mmap"
	done
fi
hold_done
exit $failed
