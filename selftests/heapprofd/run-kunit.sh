#!/bin/sh
# Run a KUnit test module inside the test VM: insmod it (KUnit runs its
# suites at load time and prints KTAP to the kernel log, which scripts/vmtest
# shows with `ok`/`not ok` at column 0), then read the results of the suites
# it added from debugfs and fail if any test failed. Exit 4 (skip) when the
# module or KUnit is missing.
#
#   run-kunit.sh MODULE.ko
ko=$1
kunit=/sys/kernel/debug/kunit
[ -n "$ko" ] || { echo "usage: $0 MODULE.ko" >&2; exit 2; }
[ -f "$ko" ] || { echo "# SKIP $ko not built (kernel without CONFIG_KUNIT?)"; exit 4; }
[ -d "$kunit" ] || { echo "# SKIP no $kunit (kernel without KUnit or debugfs)"; exit 4; }

before=$(ls "$kunit")
insmod "$ko" || { echo "# insmod $ko failed"; exit 1; }
status=0
n=0
for s in $(ls "$kunit"); do
	case " $(echo $before) " in *" $s "*) continue ;; esac
	n=$((n + 1))
	# debugfs files report size 0: read them, do not test -s.
	res=$(cat "$kunit/$s/results" 2>/dev/null)
	if [ -z "$res" ]; then
		echo "# $s: no results"
		status=1
	elif echo "$res" | grep -q '^[[:space:]]*not ok'; then
		echo "# $s: failures:"
		echo "$res" | grep '^[[:space:]]*not ok' | sed 's/^/#   /'
		status=1
	else
		echo "# $s: $(echo "$res" | grep -c '^[[:space:]]*ok') ok lines, no failures"
	fi
done
[ $n -gt 0 ] || { echo "# $ko added no KUnit suite"; status=1; }
rmmod "$(basename "$ko" .ko)" || status=1
exit $status
