#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The unsampled hooks' cost per malloc(32)+free pair, one thread against
# two, measured paired inside each process (bench_client paired): every
# thread alternates short blocks through the client's malloc/free and
# through glibc's own, and the difference of neighbouring blocks is the
# hooks' cost. The machine's speed drifts by more than that cost between
# runs (ab_libs.sh), but hardly within a block pair of ~100 us. A real
# heapprofd (socket transport) serves the sessions at interval 1 GiB, so
# the sampling-enabled path runs and nothing is sampled.
#
#   bench/client/paired.sh [-r RUNS] [-b BLOCKS] [-n PAIRS] [LIB.so]
#
# "no client" runs the same method without the preload (both sides are
# glibc): its figure is the method's own zero.
# Needs `make` (build/heapprofd) and `make -C libclient bench` (bench_client).
set -eu
RUNS=21 BLOCKS=2000 PAIRS=2000
while getopts r:b:n: o; do
	case $o in r) RUNS=$OPTARG ;; b) BLOCKS=$OPTARG ;; n) PAIRS=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
. "$(dirname "$0")/common.sh"
LIB=${1:-$ROOT/build/libheapprofd_client.so}
one() {
	local th=$1
	shift
	env "$@" "$B" paired "$BLOCKS" "$PAIRS" "$th" 2>/dev/null |
		awk '/RESULT paired_median_ns/{m = $3} /RESULT paired_p10_ns/{p = $3} END {print m, p}'
}
for _ in $(seq "$RUNS"); do
	echo "none1 $(one 1 X=1)"
	echo "none2 $(one 2 X=1)"
	echo "dorm1 $(one 1 LD_PRELOAD="$LIB" HEAPPROFD_SOCKET="$dir/s.sock" HEAPPROFD_DORMANT=1)"
	echo "samp1 $(one 1 LD_PRELOAD="$LIB" HEAPPROFD_SOCKET="$dir/s.sock" HEAPPROFD_INTERVAL=1G)"
	echo "samp2 $(one 2 LD_PRELOAD="$LIB" HEAPPROFD_SOCKET="$dir/s.sock" HEAPPROFD_INTERVAL=1G)"
done > "$dir/runs"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $RUNS runs; each thread $BLOCKS block pairs of $PAIRS pairs"
echo
summarize paired
