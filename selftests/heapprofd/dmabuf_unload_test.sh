#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# heapprofd.ko unloaded and loaded again while DMA-BUFs it accounted for
# are alive: the unload is clean, the reloaded module does not know the
# old buffers, their later release (the holder dies) is ignored, and new
# buffers are counted again. Needs root, heapprofd.ko loaded, $KO (default
# /hp/kmod) and build/selftests/dmabuf_hold. TAP; exit 4 (skip) without a
# DMA-BUF source or exporter.
set -u
KO=${KO:-/hp/kmod}
HOLD=${HOLD:-build/selftests/dmabuf_hold}
D=/sys/kernel/heapprofd/dmabuf
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; failed=1; }
expect() { # got want what
	if [ "$1" = "$2" ]; then ok "$3"; else not_ok "$3 (got '$1', want '$2')"; fi
}

[ "$(cat $D/source 2>/dev/null)" != none ] && [ -e $D/source ] ||
	{ echo "1..0 # SKIP no DMA-BUF source"; exit 4; }
base=$(cat $D/buffer_count)
fifo=/tmp/dmabuf_unload.$$
rm -f $fifo.in && mkfifo $fifo.in
"$HOLD" 4 65536 <$fifo.in >$fifo.out &
holder=$!
exec 9>$fifo.in		# keeps the holder's stdin open
i=0
while [ ! -s $fifo.out ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if [ ! -s $fifo.out ]; then
	wait $holder
	[ $? = 4 ] && { echo "1..0 # SKIP no DMA heap, udmabuf or vgem"; exit 4; }
	echo "not ok 1 - dmabuf_hold did not start"; exit 1
fi
echo "1..7"
expect "$(cat $D/buffer_count)" $((base + 4)) "four held buffers counted"
ino=$(cut -d' ' -f1 $fifo.out)
expect "$(cat $D/buffers/$ino/size 2>&1)" 65536 "a held buffer has its view"
if rmmod heapprofd; then ok "unloaded with buffers alive"; else not_ok "rmmod heapprofd"; fi
insmod "$KO/heapprofd.ko" || { not_ok "insmod heapprofd.ko"; exit 1; }
expect "$(cat $D/buffer_count)" 0 "the reloaded module knows none of them"
exec 9>&-		# the holder exits: its buffers are released
wait $holder
expect "$(cat $D/buffer_count)" 0 "their release is ignored"
# New buffers are counted again: two held while we look, then gone.
got=$( (sleep 3; echo) | { "$HOLD" 2 8192 >/dev/null & sleep 2; cat $D/buffer_count; wait; } )
expect "$got" 2 "new buffers are counted again"
expect "$(cat $D/buffer_count)" 0 "and forgotten when released"
rm -f $fifo.in $fifo.out
exit $failed
