#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Accuracy of the profile against the exact truth of a known workload
# (accuracy.c): heapprofctl record at interval 1 (every allocation) and at
# sampled intervals; per site, estimated allocated and in-use bytes and the
# error against the truth. Uses build/heapprofctl (user-space transport on a
# host without the module). Figures, not assertions.
set -e
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build/bench/pipeline
CTL=$ROOT/build/heapprofctl
mkdir -p "$B"
cc -std=gnu11 -O0 -g -fno-omit-frame-pointer -o "$B/accuracy" "$ROOT/bench/unwind/accuracy.c"
if [ ! -x "$CTL" ] || [ ! -f "$ROOT/build/libheapprofd_client.so" ]; then
	echo "accuracy: build/heapprofctl or the client is missing (make first)"; exit 0
fi
"$B/accuracy" 2> "$B/truth.txt"
echo "| interval | site | alloc bytes (truth) | alloc est. | error | in-use bytes (truth) | in-use est. | error |"
echo "|---|---|---|---|---|---|---|---|"
for i in 1 4096 32768; do
	rm -f "$B/acc-$i".*
	"$CTL" record -i $i -o "$B/acc-$i" -- "$B/accuracy" >/dev/null 2>&1 || true
	[ -f "$B/acc-$i.txt" ] || { echo "| $i | (no profile) |||||||"; continue; }
	for s in acc_small acc_medium acc_large acc_odd; do
		ta=$(awk -v s=$s '$2==s {print $4}' "$B/truth.txt")
		tu=$(awk -v s=$s '$2==s {print $6}' "$B/truth.txt")
		# sum the rows of the call-site table (not the functions table
		# that follows it) whose call site is this function
		awk -v s=$s -v ta=$ta -v tu=$tu -v i=$i '
			/^call sites/ { t = 1; next }
			/^$/ { t = 0 }
			t && $6==s { a+=$3; u+=$1 }
			END { ea = ta ? 100*(a-ta)/ta : 0; eu = tu ? 100*(u-tu)/tu : 0;
			      printf "| %s | %s | %d | %d | %+.2f%% | %d | %d | %+.2f%% |\n", i, s, ta, a, ea, tu, u, eu }' \
			"$B/acc-$i.txt"
	done
done
