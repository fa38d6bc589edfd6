#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Tables for the client benchmark scripts, from their runs files.

  runs.py ab FILE       lines "LIB CONF NS": ab_libs.sh
  runs.py paired FILE   lines "CONF MEDIAN P10": paired.sh
"""
import collections, statistics, sys


def load(path, nkey):
    d = collections.defaultdict(list)
    for line in open(path):
        f = line.split()
        if len(f) > nkey:
            key = tuple(f[:nkey]) if nkey > 1 else f[0]
            d[key].append(tuple(float(x) for x in f[nkey:]))
    return d


def q(v, p):
    return sorted(v)[int(p * (len(v) - 1))]


def ab(path):
    d = {k: [x[0] for x in v] for k, v in load(path, 2).items()}
    base = d[('none', '-')]
    names = {'-': 'no client', 'pass': 'no daemon (pass-through)', 'dorm': 'dormant',
             'samp': 'sampling, interval 1 GiB'}
    print("| library | configuration | median | p10 | min | over no client: median / p10 / min |")
    print("|---|---|---|---|---|---|")
    for k in sorted(d, key=lambda k: (k[0] != 'none', k[1], k[0])):
        v = d[k]
        print("| %s | %s | %.2f | %.2f | %.2f | %+.2f / %+.2f / %+.2f |" % (
            k[0], names[k[1]], statistics.median(v), q(v, .1), min(v),
            statistics.median(v) - statistics.median(base), q(v, .1) - q(base, .1),
            min(v) - min(base)))


def paired(path):
    d = load(path, 1)
    names = {'none': 'no client (method zero)', 'dorm': 'client, dormant',
             'samp': 'client, sampling at 1 GiB'}
    print("| configuration | threads | hooks' cost per pair: median of runs (of each run's median block difference) | p10 of runs | same, of each run's p10 |")
    print("|---|---|---|---|---|")
    med = {}
    for k in ('none1', 'none2', 'dorm1', 'samp1', 'samp2'):
        if not d.get(k):
            continue
        m = [x[0] for x in d[k]]
        med[k] = statistics.median(m)
        print("| %s | %s | %+.2f ns | %+.2f ns | %+.2f ns |" % (
            names[k[:-1]], k[-1], med[k], q(m, .1), statistics.median(x[1] for x in d[k])))
    if all(k in med for k in ('none1', 'none2', 'samp1', 'samp2')):
        c1, c2 = med['samp1'] - med['none1'], med['samp2'] - med['none2']
        print("\nless the method's zero (the no-client row of the same thread count), per pair per thread:")
        print("sampling 1 thread %+.2f ns (%+.2f ns per malloc or free), 2 threads %+.2f ns; "
              "2 threads / 1 thread: %.2f (target <= 1.2)"
              % (c1, c1 / 2, c2, c2 / c1 if c1 > 0 else float('nan')))
        if 'dorm1' in med:
            print("dormant 1 thread %+.2f ns per pair" % (med['dorm1'] - med['none1']))


if __name__ == "__main__":
    {'ab': ab, 'paired': paired}[sys.argv[1]](sys.argv[2])
