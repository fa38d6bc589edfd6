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
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build/bench/client/bench_client
RUNS=101 PAIRS=2000000 THREADS=1 PROCS=1
while getopts r:n:t:p: o; do
	case $o in r) RUNS=$OPTARG ;; n) PAIRS=$OPTARG ;; t) THREADS=$OPTARG ;; p) PROCS=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-r RUNS] [-n PAIRS] NAME=LIB.so ..." >&2; exit 2; }
dir=$(mktemp -d)
trap 'kill $dpid 2>/dev/null; rm -rf "$dir"' EXIT
"$ROOT/build/heapprofd" --socket "$dir/s.sock" --ctl "$dir/ctl.sock" --output-dir "$dir" \
	--transport socket -q -i 1073741824 2>/dev/null &
dpid=$!
for _ in $(seq 50); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
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
echo "| library | configuration | median | p10 | min | over no client: median / p10 / min |"
echo "|---|---|---|---|---|---|"
python3 - "$dir/runs" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 3:
        d[(f[0], f[1])].append(float(f[2]))
q = lambda v, p: sorted(v)[int(p * (len(v) - 1))]
base = d[('none', '-')]
names = {'-': 'no client', 'pass': 'no daemon (pass-through)', 'dorm': 'dormant',
         'samp': 'sampling, interval 1 GiB'}
for k in sorted(d, key=lambda k: (k[0] != 'none', k[1], k[0])):
    v = d[k]
    print("| %s | %s | %.2f | %.2f | %.2f | %+.2f / %+.2f / %+.2f |" % (
        k[0], names[k[1]], statistics.median(v), q(v, .1), min(v),
        statistics.median(v) - statistics.median(base), q(v, .1) - q(base, .1),
        min(v) - min(base)))
PY
