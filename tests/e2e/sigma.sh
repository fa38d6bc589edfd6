# SPDX-License-Identifier: GPL-2.0
# Sourced by tests/e2e/busy and tests/e2e/slow-daemon: how far a sampled
# estimate lies from the truth, in standard deviations. POSIX sh + awk
# (busybox awk may have no sqrt or exp).
#
# A byte sampled at interval I adds I to the variance of its site's
# estimate (seed 000: a site of B bytes at one interval has sigma =
# sqrt(B * I)). A client that fell behind sampled at several intervals (the
# adaptive interval); the profile lists them with their samples, and a site
# whose bytes saw the run's mix has sigma = sqrt(B * Ieff), Ieff the
# bytes-weighted mean interval.

# ieff PROFILE.txt: Ieff of its malloc samples, from the line
# "# sampling interval(s) (libc.malloc): 4 KiB for N samples, ...".
ieff() {
	awk '/^# sampling intervals? \(libc\.malloc\): / {
		s = $0; sub(/^[^:]*: /, "", s); sub(/;.*/, "", s)
		n = split(s, parts, ", ")
		for (k = 1; k <= n; k++) {
			split(parts[k], w, " "); m = w[1]
			if (w[2] == "KiB") m *= 1024
			else if (w[2] == "MiB") m *= 1048576
			else if (w[2] == "GiB") m *= 1073741824
			num += w[4] * m * m; den += w[4] * m
		}
	} END { if (den > 0) printf "%.0f\n", num / den }' "$1"
}

# nintervals PROFILE.txt: how many intervals that line lists.
nintervals() {
	awk '/^# sampling intervals? \(libc\.malloc\): / {
		s = $0; sub(/^[^:]*: /, "", s); sub(/;.*/, "", s); print split(s, p, ", "); exit }' "$1"
}

# zscore TRUTH EST IEFF: (est - truth) / sqrt(truth * Ieff), to 2 decimals
# (sqrt by Newton's method).
zscore() {
	awk -v t="$1" -v e="$2" -v i="$3" 'BEGIN {
		v = t * i; if (v < i) v = i; d = e - t
		s = v; for (k = 0; k < 200; k++) s = (s + v / s) / 2
		printf "%.2f\n", d / s }'
}

# site_est PROFILE.txt SITE alloc|inuse: a call site's estimate, from the
# text report's call-site table (its first table).
site_est() {
	awk -v s="$2" -v c="$([ "$3" = inuse ] && echo 1 || echo 3)" '
		/^call sites/ { on = 1; next } on && /^$/ { on = 0 }
		on && $6 == s { a += $c } END { printf "%d\n", a }' "$1"
}
