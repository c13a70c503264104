"""A fault-injecting HTTP proxy for the remote tests (tests/remote.rs).

    python3 fault_proxy.py UPSTREAM_PORT SEED RATE

Listens on 127.0.0.1 (a free port, printed as the first line of stdout)
and forwards every request to 127.0.0.1:UPSTREAM_PORT (the moto server).
With probability RATE a request meets one fault, chosen with a
random.Random(SEED): the connection is reset before any reply, a 503
SlowDown is returned, the reply is delayed (up to 0.4 s), or the reply is
cut off after its headers and half its body (then reset). Counts of each
fault go to stderr on every fault. Standard library only.
"""

import http.client
import http.server
import random
import socket
import socketserver
import struct
import sys
import threading
import time

UPSTREAM = int(sys.argv[1])
RNG = random.Random(int(sys.argv[2]))
RATE = float(sys.argv[3])
LOCK = threading.Lock()
COUNTS = {"reset": 0, "503": 0, "delay": 0, "truncate": 0, "ok": 0}
HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "upgrade"}


def pick():
    with LOCK:
        if RNG.random() >= RATE:
            COUNTS["ok"] += 1
            return "ok", 0.0
        fault = RNG.choice(["reset", "503", "delay", "truncate"])
        COUNTS[fault] += 1
        print("fault", fault, COUNTS, file=sys.stderr, flush=True)
        return fault, RNG.random() * 0.4


def reset(sock):
    # SO_LINGER with a zero timeout: close() sends a RST.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        fault, delay = pick()
        if fault == "reset":
            self.close_connection = True
            reset(self.connection)
            return
        if fault == "503":
            msg = b"<Error><Code>SlowDown</Code><Message>injected</Message></Error>"
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        up = http.client.HTTPConnection("127.0.0.1", UPSTREAM, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        up.request(self.command, self.path, body=body, headers=headers)
        r = up.getresponse()
        data = r.read()
        up.close()
        if fault == "delay":
            time.sleep(delay)
        self.send_response(r.status, r.reason)
        for k, v in r.getheaders():
            if k.lower() not in HOP and k.lower() != "content-length":
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if fault == "truncate" and self.command != "HEAD" and len(data) > 1:
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.close_connection = True
            reset(self.connection)
            return
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass


srv = Server(("127.0.0.1", 0), Handler)
print(srv.server_address[1], flush=True)
srv.serve_forever()
