#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""What an OpenTelemetry Collector received (its file exporter's JSON, one
request a line) against the pprof files the daemon wrote, decoded here from
the wire format independently of the code under test.

    otlp_check.py count JSON                 requests received
    otlp_check.py match JSON PPROF           the request of the same dump
        (same time and duration) has, for every sample type, the same
        stacks with the same values as the pprof file, and nothing else
    otlp_check.py dict JSON                  every dictionary table starts
        with its zero entry
    otlp_check.py resource JSON KEY[=VALUE]...   the resource attributes
        of every request (VALUE: the value, ~VALUE: contains it)
    otlp_check.py buildid JSON FILE HEX      a mapping of FILE carries build id HEX
    otlp_check.py kinds JSON                 the dump kinds, one a line

Exit 0 when it holds; otherwise 1 with what differed.
"""
import collections
import gzip
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'e2e'))
from pprof_inuse import fields, ints, varint  # noqa: E402


def uints(wt, v):
    if wt == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = varint(v, i)
        out.append(x)
    return out


def read_pprof(path):
    """{type: Counter((heap, stack) -> value)}, time, duration."""
    b = gzip.open(path).read()
    strs, types, samples, locs, funcs = [], [], [], {}, {}
    t = d = 0
    for f, wt, v in fields(b):
        if f == 6:
            strs.append(v.decode('utf-8', 'replace'))
        elif f == 1:
            vt = dict((ff, vv) for ff, _, vv in fields(v))
            types.append((vt.get(1, 0), vt.get(2, 0)))
        elif f == 2:
            ids, vals, labels = [], [], []
            for ff, w2, vv in fields(v):
                if ff == 1:
                    ids += uints(w2, vv)
                elif ff == 2:
                    vals += ints(w2, vv)
                elif ff == 3:
                    lab = dict((a, c) for a, _, c in fields(vv))
                    labels.append((lab.get(1, 0), lab.get(2, 0)))
            samples.append((ids, vals, labels))
        elif f == 4:
            lid, addr, lines = 0, 0, []
            for ff, w2, vv in fields(v):
                if ff == 1:
                    lid = vv
                elif ff == 3:
                    addr = vv
                elif ff == 4:
                    ln = dict((a, c) for a, _, c in fields(vv))
                    lines.append(ln.get(1, 0))
            locs[lid] = (addr, lines)
        elif f == 5:
            fn = dict((ff, vv) for ff, _, vv in fields(v))
            funcs[fn.get(1, 0)] = fn.get(2, 0)
        elif f == 9:
            t = v
        elif f == 10:
            d = v
    out = collections.defaultdict(collections.Counter)
    for ids, vals, labels in samples:
        stack = tuple((locs[i][0], tuple(strs[funcs[fid]] for fid in locs[i][1]))
                      for i in ids)
        heap = dict((strs[k], strs[s]) for k, s in labels).get('heap', '')
        for k, val in enumerate(vals):
            if val:
                out[strs[types[k][0]]][(heap, stack)] += val
    return out, t, d


def requests(path):
    """The requests written out whole (the exporter flushes in chunks)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.endswith('\n') and line.strip()]


def anyval(v, strs):
    if 'stringValue' in v:
        return v['stringValue']
    if 'stringValueStrindex' in v:
        return strs[v['stringValueStrindex']]
    if 'intValue' in v:
        return str(int(v['intValue']))
    return json.dumps(v)


def attr(a, strs):
    key = a['key'] if 'key' in a else strs[a.get('keyStrindex', 0)]
    return key, anyval(a.get('value', {}), strs)


def profiles(req):
    """(dictionary, resource attrs, [profiles]) of a request."""
    dic = req.get('dictionary', {})
    strs = dic.get('stringTable', [''])
    for rp in req.get('resourceProfiles', []):
        res = dict(attr(a, strs) for a in rp.get('resource', {}).get('attributes', []))
        profs = [p for sp in rp.get('scopeProfiles', []) for p in sp.get('profiles', [])]
        yield dic, strs, res, profs


def otlp_values(dic, strs, prof):
    """Counter((heap, stack) -> value) of one OTLP profile, stacks as in read_pprof."""
    locs = dic.get('locationTable', [])
    funcs = dic.get('functionTable', [])
    stacks = dic.get('stackTable', [])
    attrs = dic.get('attributeTable', [])
    out = collections.Counter()
    for s in prof.get('samples', []):
        st = stacks[s.get('stackIndex', 0)].get('locationIndices', [])
        stack = tuple((int(locs[i].get('address', 0)),
                       tuple(strs[funcs[ln.get('functionIndex', 0)].get('nameStrindex', 0)]
                             for ln in locs[i].get('lines', [])))
                      for i in st)
        la = dict(attr(attrs[i], strs) for i in s.get('attributeIndices', []))
        for v in s.get('values', []):
            if int(v):
                out[(la.get('heap', ''), stack)] += int(v)
    return out


def kind_of(dic, strs, prof):
    attrs = dic.get('attributeTable', [])
    for i in prof.get('attributeIndices', []):
        k, v = attr(attrs[i], strs)
        if k == 'heapprofd.dump':
            return v
    return '?'


def is_zero(v):
    """A message with every field at its default (pdata writes an empty value as {})."""
    if isinstance(v, dict):
        return all(is_zero(x) for x in v.values())
    if isinstance(v, list):
        return not v
    return v in (0, '0', '', False, None)


def main(argv):
    mode, js = argv[1], argv[2]
    reqs = requests(js) if os.path.exists(js) else []
    if mode == 'count':
        print(len(reqs))
        return 0
    if mode == 'kinds':
        for r in reqs:
            for dic, strs, _, profs in profiles(r):
                print(kind_of(dic, strs, profs[0]) if profs else '-')
        return 0
    if mode == 'match':
        want, t, d = read_pprof(argv[3])
        for r in reqs:
            for dic, strs, _, profs in profiles(r):
                if not profs or int(profs[0].get('timeUnixNano', 0)) != t or \
                        int(profs[0].get('durationNano', 0)) != d:
                    continue
                got = {}
                for p in profs:
                    st = p.get('sampleType', {})
                    got[strs[st.get('typeStrindex', 0)]] = otlp_values(dic, strs, p)
                bad = []
                for typ in sorted(set(want) | set(got)):
                    if typ.endswith('usable_space'):
                        continue	# pprof only: not one of the exported types
                    w, g = want.get(typ, collections.Counter()), got.get(typ, collections.Counter())
                    if w != g:
                        only_w = sum(1 for k in w if w[k] != g.get(k))
                        only_g = sum(1 for k in g if g[k] != w.get(k))
                        bad.append('%s: %d stacks differ in pprof, %d in OTLP' % (typ, only_w, only_g))
                if bad:
                    print('mismatch: ' + '; '.join(bad))
                    return 1
                n = sum(len(c) for k, c in want.items() if not k.endswith('usable_space'))
                print('%d profiles, %d stacks with values, all equal' % (len(profs), n))
                return 0
        print('no request for the dump at time %d + %d ns (%d requests)' % (t, d, len(reqs)))
        return 1
    if mode == 'dict':
        if not reqs:
            print('no request')
            return 1
        for r in reqs:
            dic = r.get('dictionary', {})
            for tab in ('mappingTable', 'locationTable', 'functionTable', 'linkTable',
                        'attributeTable', 'stackTable'):
                if not dic.get(tab) or not is_zero(dic[tab][0]):
                    print('%s[0] is %r, not the zero entry' % (tab, (dic.get(tab) or [None])[0]))
                    return 1
            if not dic.get('stringTable') or dic['stringTable'][0] != '':
                print('stringTable[0] is not ""')
                return 1
        print('%d requests: every table starts with its zero entry' % len(reqs))
        return 0
    if mode == 'resource':
        if not reqs:
            print('no request')
            return 1
        for r in reqs:
            for _, _, res, _ in profiles(r):
                for kv in argv[3:]:
                    k, _, v = kv.partition('=')
                    if k not in res:
                        print('no %s in %s' % (k, sorted(res)))
                        return 1
                    if v and ((v[0] == '~' and v[1:] not in res[k]) or
                              (v[0] != '~' and res[k] != v)):
                        print('%s is %r, not %r' % (k, res[k], v))
                        return 1
        print('%d requests: %s' % (len(reqs), ' '.join(argv[3:])))
        return 0
    if mode == 'buildid':
        for r in reqs:
            dic = r.get('dictionary', {})
            strs = dic.get('stringTable', [''])
            attrs = dic.get('attributeTable', [])
            for m in dic.get('mappingTable', [])[1:]:
                if strs[m.get('filenameStrindex', 0)] != argv[3]:
                    continue
                ids = [attr(attrs[i], strs) for i in m.get('attributeIndices', [])]
                if ('process.executable.build_id.gnu', argv[4]) in ids:
                    print('mapping of %s: build id %s' % (argv[3], argv[4]))
                    return 0
                print('mapping of %s has %r' % (argv[3], ids))
                return 1
        print('no mapping of %s' % argv[3])
        return 1
    print('unknown mode ' + mode)
    return 2


if __name__ == '__main__':
    sys.exit(main(sys.argv))
