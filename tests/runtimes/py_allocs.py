# SPDX-License-Identifier: GPL-2.0
"""Known Python functions allocating known amounts, in several threads.

Each function allocates in blocks of its own size and keeps what it made
alive until the end (in-use bytes equal allocated bytes), so that each
function's share of a heap profile is known: TOTAL_MB[name] MiB each.
Blocks are large (64 KiB and up) so that every byte goes through malloc
(CPython's small-object allocator keeps blocks of 512 bytes and less to
itself).

    python3 py_allocs.py [scale]     scale multiplies every amount (default 1)
"""
import json
import sys
import threading

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
MB = 1 << 20
KEEP = []
LOCK = threading.Lock()

# MiB per function (at scale 1); the test reads this table.
TOTAL_MB = {
    "make_bytes": 48,
    "make_strings": 32,
    "make_lists": 24,
    "dump_json": 16,
}


def keep(obj):
    with LOCK:
        KEEP.append(obj)


def make_bytes():
    n = int(TOTAL_MB["make_bytes"] * MB * SCALE) // (256 * 1024)
    for _ in range(n):
        keep(bytes(256 * 1024))


def make_strings():
    n = int(TOTAL_MB["make_strings"] * MB * SCALE) // (128 * 1024)
    for i in range(n):
        keep("%d" % (i % 10) * (128 * 1024 - 49))  # 128 KiB with the str header


def make_lists():
    # A list of 8192 pointers: 64 KiB of item storage, one malloc.
    n = int(TOTAL_MB["make_lists"] * MB * SCALE) // (8192 * 8)
    for _ in range(n):
        keep([None] * 8192)


def dump_json():
    # json's C encoder builds the text; its buffer is the C extension's
    # allocation, called from this function.
    row = {"k%d" % i: "v" * 100 for i in range(600)}
    text_len = len(json.dumps(row))
    n = int(TOTAL_MB["dump_json"] * MB * SCALE) // text_len
    for _ in range(n):
        keep(json.dumps(row))


def worker(fn):
    fn()


def main():
    threads = [threading.Thread(target=worker, args=(fn,), name=fn.__name__)
               for fn in (make_bytes, make_strings, make_lists)]
    for t in threads:
        t.start()
    dump_json()  # the main thread
    for t in threads:
        t.join()
    print("done", len(KEEP), flush=True)


if __name__ == "__main__":
    main()
