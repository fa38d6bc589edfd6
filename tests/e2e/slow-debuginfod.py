#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
# A debuginfod server that answers slowly, for tests/e2e/symbolize-debuginfod.
#   slow-debuginfod.py DIR DELAY_S PORTFILE
# Serves DIR/<build id>.debug as /buildid/<build id>/debuginfo after DELAY_S
# seconds (404 after the same delay for anything else), on a loopback port
# it picks and writes to PORTFILE. Each request is logged to DIR/requests.
import http.server
import os
import re
import sys
import time

root, delay, portfile = sys.argv[1], float(sys.argv[2]), sys.argv[3]


class Slow(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(os.path.join(root, "requests"), "a") as f:
            f.write(self.path + "\n")
        time.sleep(delay)
        m = re.fullmatch(r"/buildid/([0-9a-f]+)/debuginfo", self.path)
        path = os.path.join(root, m.group(1) + ".debug") if m else None
        if not path or not os.path.isfile(path):
            self.send_error(404)
            return
        with open(path, "rb") as f:
            data = f.read()
        try:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass  # the client gave up (its bound)

    def log_message(self, *a):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Slow)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
