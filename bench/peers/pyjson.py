# SPDX-License-Identifier: GPL-2.0
"""A real program's allocations for bench/peers/load: python3 building,
dumping and parsing batches of small JSON records and indexing their words, in 4
threads (the GIL interleaves them, so the samples of four threads arrive
in one ring at once).  python3 pyjson.py [BATCHES_PER_THREAD] [THREADS]"""
import json, sys, threading

N = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
T = int(sys.argv[2]) if len(sys.argv) > 2 else 4
WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"]


def work(seed, out):
    total, words, index = 0, 0, {}
    for i in range(N):
        # A batch of 10 records: its JSON text is 1-2 KiB, so malloc's
        # (not pymalloc's), and most such blocks are sampled at 4 KiB.
        recs = [{"id": seed * N + i * 10 + j, "name": "item-%d-%d-%d" % (seed, i, j),
                 "tags": [WORDS[(i + k) % 8] for k in range(j % 7 + 1)],
                 "text": " ".join(WORDS[(i * k + j) % 8] for k in range(12)),
                 "value": i * 1.5} for j in range(10)]
        s = json.dumps(recs)
        total += len(s)
        for r in json.loads(s):
            for w in r["text"].split():
                index[w] = index.get(w, 0) + 1
                words += 1
    out[seed] = (total, words)


out = {}
ts = [threading.Thread(target=work, args=(k, out)) for k in range(T)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(sum(a for a, _ in out.values()), sum(b for _, b in out.values()))
