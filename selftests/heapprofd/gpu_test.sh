#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# heapprofd.ko follows gpu_mem_total by name in a GPU driver module loaded
# after it and before it, and leaves it safely when either goes away. The
# driver is heapprofd_gpu_test.ko, which defines the tracepoint and fires
# it on a write to its "emit" parameter. Needs root and the modules in
# $KO (default /hp/kmod); heapprofd.ko loaded. TAP output; exit 4 (skip)
# when the test module was not built (the kernel defines gpu_mem_total
# itself).
set -u
KO=${KO:-/hp/kmod}
G=/sys/kernel/heapprofd/gpu
E=/sys/module/heapprofd_gpu_test/parameters/emit
n=0
failed=0

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); echo "not ok $n - $1"; failed=1; }

# The files are made by a work item: give it up to 10 s.
wait_value() { # path want what
	i=0
	while [ $i -lt 100 ]; do
		[ "$(cat "$1" 2>/dev/null)" = "$2" ] && { ok "$3"; return; }
		sleep 0.1
		i=$((i + 1))
	done
	not_ok "$3 (want '$2', got '$(cat "$1" 2>&1)')"
}

wait_gone() { # path what
	i=0
	while [ $i -lt 100 ]; do
		[ -e "$1" ] || { ok "$2"; return; }
		sleep 0.1
		i=$((i + 1))
	done
	not_ok "$2 ($1 still there)"
}

if [ ! -f "$KO/heapprofd_gpu_test.ko" ]; then
	echo "1..0 # SKIP heapprofd_gpu_test.ko not built (kernel has CONFIG_TRACE_GPU_MEM)"
	exit 4
fi
grep -q '^heapprofd ' /proc/modules || { echo "heapprofd.ko is not loaded"; exit 1; }

echo "1..12"
# 1. The driver comes after heapprofd.ko.
insmod "$KO/heapprofd_gpu_test.ko" && ok "driver loaded after heapprofd.ko" ||
	not_ok "insmod heapprofd_gpu_test.ko"
echo "7 0 1048576" >"$E"
echo "7 123 4096" >"$E"
echo "7 456 8192" >"$E"
wait_value "$G/7/total_bytes" 1048576 "gpu 7 total from pid 0"
wait_value "$G/7/pids/123" 4096 "gpu 7 pid 123"
wait_value "$G/7/pids/456" 8192 "gpu 7 pid 456"
echo "7 123 0" >"$E"
wait_gone "$G/7/pids/123" "a pid whose total went to 0 is removed"
echo "7 456 12288" >"$E"
wait_value "$G/7/pids/456" 12288 "a new total replaces the old"
rmmod heapprofd_gpu_test && ok "driver unloaded while followed" ||
	not_ok "rmmod heapprofd_gpu_test"
wait_value "$G/7/total_bytes" 1048576 "values stay after the driver left"

# 2. The driver comes first: heapprofd.ko finds it when it loads.
rmmod heapprofd || { not_ok "rmmod heapprofd"; exit 1; }
insmod "$KO/heapprofd_gpu_test.ko" || { not_ok "insmod heapprofd_gpu_test.ko"; exit 1; }
if insmod "$KO/heapprofd.ko"; then ok "heapprofd.ko loaded after the driver"
else not_ok "insmod heapprofd.ko"; exit 1; fi
echo "9 0 2048" >"$E"
echo "9 77 1024" >"$E"
wait_value "$G/9/total_bytes" 2048 "gpu 9 total, driver loaded first"
wait_value "$G/9/pids/77" 1024 "gpu 9 pid 77, driver loaded first"
# 3. heapprofd.ko leaves the driver's tracepoint when it goes.
rmmod heapprofd && ok "heapprofd.ko unloaded with the driver loaded" ||
	not_ok "rmmod heapprofd"
echo "9 0 4096" >"$E" || not_ok "emit without heapprofd.ko"
rmmod heapprofd_gpu_test
insmod "$KO/heapprofd.ko" || { echo "could not reload heapprofd.ko"; exit 1; }
exit $failed
