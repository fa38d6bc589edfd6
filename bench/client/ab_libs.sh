#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Unsampled malloc(32)+free cost of client libraries side by side, for
# comparing two builds of libheapprofd_client.so on a noisy machine: runs
# of every configuration are interleaved, many short runs, and the 10th
# percentile and the minimum are reported (the median mostly measures the
# machine's other load). A real heapprofd (socket transport, interval 1 GiB
# for the sessions it accepts) serves the dormant and sampling runs.
#
#   bench/client/ab_libs.sh [-r RUNS] [-n PAIRS] [-t THREADS] [-p PROCS] NAME=LIB.so [NAME=LIB.so ...]
#
# With -t 2, each of 2 threads does PAIRS pairs (ns per pair per thread).
# With -p 2, two processes run at once (the mean of their ns per pair): the
# control for -t 2, since two processes share nothing of the client, so
# what -t 2 costs beyond -p 2 is the threads' sharing, not the machine's.
#
# Needs `make` (build/heapprofd) and `make -C libclient bench` (bench_client).
set -eu
RUNS=101 PAIRS=2000000 THREADS=1 PROCS=1
while getopts r:n:t:p: o; do
	case $o in r) RUNS=$OPTARG ;; n) PAIRS=$OPTARG ;; t) THREADS=$OPTARG ;; p) PROCS=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-r RUNS] [-n PAIRS] NAME=LIB.so ..." >&2; exit 2; }
. "$(dirname "$0")/common.sh"
one() {
	local i
	for i in $(seq "$PROCS"); do
		env "$@" "$B" ops "$PAIRS" "$THREADS" 2>/dev/null > "$dir/one.$i" &
	done
	wait
	cat "$dir"/one.* | awk '/RESULT ns_per_pair/{s += $3; n++} END {if (n) printf "%.3f\n", s / n}'
	rm -f "$dir"/one.*
}
for _ in $(seq "$RUNS"); do
	echo "none - $(one X=1)"
	for nl in "$@"; do
		name=${nl%%=*} lib=${nl#*=}
		echo "$name pass $(one LD_PRELOAD="$lib" HEAPPROFD_SOCKET="$dir/none")"
		echo "$name dorm $(one LD_PRELOAD="$lib" HEAPPROFD_SOCKET="$dir/s.sock" HEAPPROFD_DORMANT=1)"
		echo "$name samp $(one LD_PRELOAD="$lib" HEAPPROFD_SOCKET="$dir/s.sock" HEAPPROFD_INTERVAL=1G)"
	done
done > "$dir/runs"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $RUNS runs of $PAIRS pairs each, $THREADS thread(s), $PROCS process(es) at once"
echo
summarize ab
