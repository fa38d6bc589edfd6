# SPDX-License-Identifier: GPL-2.0
#
# Sourced by the DMA-BUF selftest scripts: TAP output and a holder of
# buffers. Expects $HOLD (build/selftests/dmabuf_hold) and $D
# (/sys/kernel/heapprofd/dmabuf) to be set.
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; failed=1; }
expect() { # got want what
	if [ "$1" = "$2" ]; then ok "$3"; else not_ok "$3 (got '$1', want '$2')"; fi
}

# hold_init PREFIX: the fifo the holders read from.
hold_init() {
	fifo=$1
	rm -f $fifo.in && mkfifo $fifo.in
}
hold_done() { rm -f $fifo.in $fifo.out; }
# hold N SIZE [mapped]: dmabuf_hold in the background until fd 9 is
# closed, back once it has printed its buffers' inodes to $fifo.out (or
# has exited). Its stdin must be the fifo: a shell without job control
# gives a command started with & stdin /dev/null, which would end the
# holder at once. $holder is its pid.
hold() {
	rm -f $fifo.out
	"$HOLD" "$@" <$fifo.in >$fifo.out &
	holder=$!
	exec 9>$fifo.in		# keeps the holder's stdin open
	i=0
	while [ ! -s $fifo.out ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
}
# release: the holder exits, and its buffers are released.
release() {
	exec 9>&-
	wait $holder
}
