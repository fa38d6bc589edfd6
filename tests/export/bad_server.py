#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A server that is no good collector, for the export tests:

    bad_server.py MODE DIR

listens on 127.0.0.1 (port written to DIR/port), appends one line per
request to DIR/requests ("METHOD PATH BYTES"), and answers by MODE:

    slow      never answers in time (sleeps 30 s)
    503       Service Unavailable (worth a retry)
    400       Bad Request (not worth one)
    huge      200 with a 16 MiB body
    garbage   200 with bytes that are no protobuf, and control characters
    rejected  200 with an OTLP partial success rejecting 3 profiles, its
              message carrying a terminal escape sequence
    ingest    200, as Pyroscope's /ingest: the form's "profile" part is
              saved as DIR/profile.N and the query as DIR/query.N
"""
import email.parser
import email.policy
import http.server
import os
import socketserver
import sys
import time

MODE, DIR = sys.argv[1], sys.argv[2]


def varint(n):
    out = b''
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def rejected():
    msg = b'\x1b[2J\x1b]0;owned\x07 rejected by policy'
    # ExportProfilesPartialSuccess { rejected_profiles = 3; error_message }
    ps = b'\x08' + varint(3) + b'\x12' + varint(len(msg)) + msg
    return b'\x0a' + varint(len(ps)) + ps


def save_form(ctype, body, path):
    """The multipart form's "profile" part and the query, numbered by request."""
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b'Content-Type: ' + ctype.encode() + b'\r\n\r\n' + body)
    n = sum(1 for f in os.listdir(DIR) if f.startswith('query.'))
    for part in msg.iter_parts() if msg.is_multipart() else []:
        if part.get_param('name', header='content-disposition') == 'profile':
            with open(os.path.join(DIR, 'profile.%d' % n), 'wb') as f:
                f.write(part.get_payload(decode=True))
            with open(os.path.join(DIR, 'query.%d' % n), 'w') as f:
                f.write(path + '\n')
            return True
    return False


class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get('Content-Length', 0) or 0)
        body = self.rfile.read(n) if n else b''
        with open(os.path.join(DIR, 'requests'), 'a') as f:
            f.write('%s %s %d\n' % (self.command, self.path, len(body)))
        code, out = 200, b''
        if MODE == 'slow':
            time.sleep(30)
        elif MODE == '503':
            code, out = 503, b'busy \x1b[31mred\x1b[0m'
        elif MODE == '400':
            code, out = 400, b'no'
        elif MODE == 'huge':
            out = b'x' * (16 << 20)
        elif MODE == 'garbage':
            out = bytes(range(256)) * 4
        elif MODE == 'rejected':
            out = rejected()
        elif MODE == 'ingest':
            code = 200 if save_form(self.headers.get('Content-Type', ''), body, self.path) else 400
        try:
            self.send_response(code)
            self.send_header('Content-Type', 'application/x-protobuf')
            self.send_header('Content-Length', str(len(out)))
            self.end_headers()
            self.wfile.write(out)
        except OSError:
            pass	# the client gave up first (slow)


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


srv = S(('127.0.0.1', 0), H)
with open(os.path.join(DIR, 'port.tmp'), 'w') as f:
    f.write('%d\n' % srv.server_address[1])
os.rename(os.path.join(DIR, 'port.tmp'), os.path.join(DIR, 'port'))
srv.serve_forever()
