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
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build/bench/client/bench_client
RUNS=21 BLOCKS=2000 PAIRS=2000
while getopts r:b:n: o; do
	case $o in r) RUNS=$OPTARG ;; b) BLOCKS=$OPTARG ;; n) PAIRS=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
LIB=${1:-$ROOT/build/libheapprofd_client.so}
dir=$(mktemp -d)
trap 'kill $dpid 2>/dev/null; rm -rf "$dir"' EXIT
"$ROOT/build/heapprofd" --socket "$dir/s.sock" --ctl "$dir/ctl.sock" --output-dir "$dir" \
	--transport socket -q -i 1073741824 2>/dev/null &
dpid=$!
for _ in $(seq 50); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
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
echo "| configuration | threads | hooks' cost per pair: median of runs (of each run's median block difference) | p10 of runs | same, of each run's p10 |"
echo "|---|---|---|---|---|"
python3 - "$dir/runs" <<'PY'
import collections, statistics, sys
d = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 3:
        d[f[0]].append((float(f[1]), float(f[2])))
q = lambda v, p: sorted(v)[int(p * (len(v) - 1))]
names = {'none': 'no client (method zero)', 'dorm': 'client, dormant',
         'samp': 'client, sampling at 1 GiB'}
med = {}
for k in ('none1', 'none2', 'dorm1', 'samp1', 'samp2'):
    v = d.get(k)
    if not v:
        continue
    m = [x[0] for x in v]
    p = [x[1] for x in v]
    med[k] = statistics.median(m)
    print("| %s | %s | %+.2f ns | %+.2f ns | %+.2f ns |" % (names[k[:-1]], k[-1], med[k], q(m, .1),
                                                      statistics.median(p)))
if all(k in med for k in ('none1', 'none2', 'samp1', 'samp2')):
    c1, c2 = med['samp1'] - med['none1'], med['samp2'] - med['none2']
    print("\nless the method's zero (the no-client row of the same thread count), per pair per thread:")
    print("sampling 1 thread %+.2f ns (%+.2f ns per malloc or free), 2 threads %+.2f ns; 2 threads / 1 thread: %.2f (target <= 1.2)"
          % (c1, c1 / 2, c2, c2 / c1 if c1 > 0 else float('nan')))
    if 'dorm1' in med:
        print("dormant 1 thread %+.2f ns per pair" % (med['dorm1'] - med['none1']))
PY
