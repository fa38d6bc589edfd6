# SPDX-License-Identifier: GPL-2.0
"""Known Python functions allocating known amounts, in several threads.

Each function allocates blocks of its own size and keeps them to the end,
and prints what it allocated through malloc (sys.getsizeof of each block:
the object as malloc'd), one line each at the end:

    truth FUNCTION BYTES

Blocks are large (64 KiB and more), so each is one malloc: CPython's
small-object allocator keeps blocks of 512 bytes and less to itself.
dump_json's blocks are made by a C extension (json's encoder), called
from it. list_dirs allocates in C without the interpreter lock (os.listdir
lets go of it around opendir, whose buffer is malloc'd and freed again):
it has no truth line, its samples are under opendir.

    python3 py_allocs.py [scale]     scale multiplies every amount (default 1)

With PY_ALLOCS_GO=FILE it prints "ready PID" and waits for FILE before it
allocates (a profiler attaches in between); with PY_ALLOCS_STOP=FILE it
waits for that file before it exits.
"""
import json
import os
import sys
import threading
import time

SCALE = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
MB = 1 << 20
KEEP = []
TRUTH = {}
LOCK = threading.Lock()


def keep(name, obj):
    with LOCK:
        KEEP.append(obj)
        TRUTH[name] = TRUTH.get(name, 0) + sys.getsizeof(obj)


def make_bytes():
    for _ in range(int(48 * MB * SCALE) // (256 * 1024)):
        keep("make_bytes", bytes(256 * 1024))


def make_strings():
    for i in range(int(32 * MB * SCALE) // (128 * 1024)):
        keep("make_strings", "%d" % (i % 10) * (128 * 1024 - 49))


def make_lists():
    # A list of 8192 pointers: 64 KiB of items, one malloc (the list
    # object itself, 56 bytes, is the small-object allocator's).
    for _ in range(int(24 * MB * SCALE) // (8192 * 8)):
        keep("make_lists", [None] * 8192)


def dump_json(text):
    # json's C encoder (encode_basestring_ascii) makes each result string.
    for _ in range(int(16 * MB * SCALE) // len(text)):
        keep("dump_json", json.dumps(text))


def list_dirs():
    for _ in range(int(2000 * SCALE)):
        os.listdir("/")


def wait_file(var):
    path = os.environ.get(var)
    while path and not os.path.exists(path):
        time.sleep(0.05)


def main():
    if os.environ.get("PY_ALLOCS_GO"):
        print("ready %d" % os.getpid(), flush=True)
    wait_file("PY_ALLOCS_GO")
    threads = [threading.Thread(target=fn)
               for fn in (make_bytes, make_strings, make_lists, list_dirs)]
    for t in threads:
        t.start()
    dump_json("x" * (200 * 1024))
    for t in threads:
        t.join()
    for name in sorted(TRUTH):
        print("truth %s %d" % (name, TRUTH[name]), flush=True)
    wait_file("PY_ALLOCS_STOP")


if __name__ == "__main__":
    main()
