# SPDX-License-Identifier: GPL-2.0
# Shared by the client benchmark scripts (sourced): a private heapprofd on
# the socket transport in $dir, accepting sessions at interval 1 GiB (the
# sampling-enabled path runs, nothing is sampled), stopped on exit; and
# the summary of a runs file (runs.py).
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build/bench/client/bench_client
dir=$(mktemp -d)
trap 'kill $dpid 2>/dev/null; rm -rf "$dir"' EXIT
"$ROOT/build/heapprofd" --socket "$dir/s.sock" --ctl "$dir/ctl.sock" --output-dir "$dir" \
	--transport socket -q -i 1073741824 2>/dev/null &
dpid=$!
for _ in $(seq 50); do [ -S "$dir/s.sock" ] && break; sleep 0.1; done
# summarize KIND: the table for $dir/runs (runs.py KIND)
summarize() { python3 "$ROOT/bench/client/runs.py" "$1" "$dir/runs"; }
