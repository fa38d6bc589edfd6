#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A pprof file's in-use total, decoded here from the protobuf wire format
(profile.proto), independently of the code under test. For each file:

    FILE  TIME_NS  INUSE_BYTES  PEAK

TIME_NS is time_nanos + duration_nanos (when the dump was taken),
INUSE_BYTES the sum of the inuse_space values, PEAK the number in its
"peak in-use bytes (estimated): N" comment (0 if none).
"""
import gzip
import re
import sys


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << s
        s += 7
        if c < 0x80:
            return v, i


def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError('wire type %d' % wt)
        yield f, wt, v


def signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


def ints(wt, v):
    """A repeated int64 field, packed or not."""
    if wt == 0:
        return [signed(v)]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(signed(x))
    return out


def inuse(path):
    b = gzip.open(path).read()
    strings, types, samples, comments = [], [], [], []
    t = d = 0
    for f, wt, v in fields(b):
        if f == 1:
            types.append(dict((ff, vv) for ff, _, vv in fields(v)).get(1, 0))
        elif f == 2:
            vals = []
            for ff, w, vv in fields(v):
                if ff == 2:
                    vals += ints(w, vv)
            samples.append(vals)
        elif f == 6:
            strings.append(v.decode('utf-8', 'replace'))
        elif f == 9:
            t = signed(v)
        elif f == 10:
            d = signed(v)
        elif f == 13:
            comments += ints(wt, v)
    k = [strings[x] for x in types].index('inuse_space')
    total = sum(s[k] for s in samples if len(s) > k)
    peak = 0
    for c in comments:
        m = re.search(r'peak in-use bytes \(estimated\): (-?\d+)', strings[c])
        if m:
            peak = int(m.group(1))
    return t + d, total, peak


if __name__ == '__main__':
    for p in sys.argv[1:]:
        print('%s %d %d %d' % ((p,) + inuse(p)))
