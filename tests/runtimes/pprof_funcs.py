#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Per function, what a pprof file says, decoded from the protobuf wire
format here (independently of the code under test):

    pprof_funcs.py FILE [TYPE]        TYPE: a sample type, alloc_space by default

prints one line per function found on any sample's stack:

    CUM  NAME  FILE:LINE[,FILE:LINE...]

CUM is the sum of TYPE over the samples whose stack holds the function
(once per sample however often it recurs), FILE:LINE the places of its
frames. With --stacks instead, each sample's stack, innermost first; with
--innermost-python, per place the sum of TYPE over the samples whose
innermost Python frame (a file ending in .py) is there:

    SUM  NAME  FILE:LINE
"""
import gzip
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'e2e'))
from pprof_inuse import fields, ints  # noqa: E402


def load(path):
    b = gzip.open(path).read()
    strings, types, samples, locs, funcs = [], [], [], {}, {}
    for f, wt, v in fields(b):
        if f == 1:
            types.append(dict((ff, vv) for ff, _, vv in fields(v)).get(1, 0))
        elif f == 2:
            ids, vals = [], []
            for ff, w, vv in fields(v):
                if ff == 1:
                    ids += ints(w, vv)
                elif ff == 2:
                    vals += ints(w, vv)
            samples.append((ids, vals))
        elif f == 4:
            lid, lines, addr = 0, [], 0
            for ff, w, vv in fields(v):
                if ff == 1:
                    lid = vv
                elif ff == 3:
                    addr = vv
                elif ff == 4:
                    ln = dict((a, c) for a, _, c in fields(vv))
                    lines.append((ln.get(1, 0), ln.get(2, 0)))
            locs[lid] = lines or addr
        elif f == 5:
            d = dict((ff, vv) for ff, _, vv in fields(v))
            funcs[d.get(1, 0)] = (d.get(2, 0), d.get(4, 0))
        elif f == 6:
            strings.append(v.decode('utf-8', 'replace'))
    return strings, [strings[t] for t in types], samples, locs, funcs


def frames(loc_lines, funcs, strings):
    """A location's frames (inlined first), as (name, file, line); a
    location without a name is its address."""
    if isinstance(loc_lines, int):
        return [('0x%x' % loc_lines, '', 0)]
    out = []
    for fid, line in loc_lines:
        name, fn = funcs.get(fid, (0, 0))
        out.append((strings[name], strings[fn], line))
    return out


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    strings, types, samples, locs, funcs = load(args[0])
    k = types.index(args[1] if len(args) > 1 else 'alloc_space')
    if '--stacks' in sys.argv:
        for ids, vals in samples:
            st = [f for i in ids for f in frames(locs.get(i, []), funcs, strings)]
            print(vals[k], ' <- '.join('%s %s:%d' % f for f in st))
        return
    if '--innermost-python' in sys.argv:
        at = {}
        for ids, vals in samples:
            st = [f for i in ids for f in frames(locs.get(i, []), funcs, strings)]
            py = [f for f in st if f[1].endswith('.py')]
            if py:
                at[py[0]] = at.get(py[0], 0) + vals[k]
        for f in sorted(at, key=lambda f: -at[f]):
            print('%d %s %s:%d' % ((at[f],) + f))
        return
    cum, where = {}, {}
    for ids, vals in samples:
        seen = set()
        for i in ids:
            for name, fn, line in frames(locs.get(i, []), funcs, strings):
                if not name:
                    continue
                where.setdefault(name, set()).add('%s:%d' % (fn, line))
                if name not in seen:
                    seen.add(name)
                    cum[name] = cum.get(name, 0) + vals[k]
    for name in sorted(cum, key=lambda n: -cum[n]):
        print('%d %s %s' % (cum[name], name, ','.join(sorted(where[name]))))


if __name__ == '__main__':
    main()
