#!/usr/bin/env python3
"""A WebSocket echo server and client for the proxy's tunnel tests
(issue 12), Python 3 standard library only: the opening handshake of RFC
6455 §4.2 written by hand (Sec-WebSocket-Accept = base64(sha1(key +
258EAFA5-E914-47DA-95CA-C5AB0DC85B11))), then frames (§5.2) echoed back.

Server:
  ws_echo.py serve [--port P] [--bind 127.0.0.1] [--hello TEXT] [-v]
    First stdout line: "listening on HOST:PORT" (P=0: any free port).
    GET /health -> 200 "ok". Any other GET with Upgrade: websocket ->
    101, then every text/binary frame (and continuation) comes back with
    the same opcode and FIN, unmasked; ping -> pong; close -> close with
    the same code, then the server closes. --hello sends one text message
    first, so a test sees server-to-client data cross the tunnel before the
    client speaks. Each connection's upgrade request is echoed back in a
    response field, X-Echo-Head (its fields "name: value" joined by " | "),
    for header checks through the proxy.
    Refusals: 400 (not an upgrade, bad key), 426 with
    Sec-WebSocket-Version: 13 (another version); unmasked client frames,
    RSV bits or a payload over 16 MiB end with close 1002/1009 (§5.1, §7.4).

Client:
  ws_echo.py client HOST:PORT [--path /ws] [--count 3] [--size 100]
                 [--hello] [--idle S]
    Handshake (checks the accept key), sends COUNT masked text messages of
    SIZE bytes, checks each echo, optionally waits S seconds idle first
    (a proxy's tunnel idle timeout), closes; prints one line and exits 0
    on success, 1 otherwise. --hello expects the server's --hello first.

Example:
  tests/proxy-peers/ws_echo.py serve --port 18596 &
  tests/proxy-peers/ws_echo.py client 127.0.0.1:18596 --count 5 --size 70000
"""

import argparse
import base64
import hashlib
import os
import socket
import socketserver
import struct
import sys
import threading

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_PAYLOAD = 16 << 20
MAX_HEAD = 16 * 1024


def accept_key(key):
    """RFC 6455 §4.2.2 item 5.4."""
    return base64.b64encode(hashlib.sha1(key + GUID).digest())


def mask(data, key):
    n = len(data)
    if n == 0:
        return data
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")


def read_exact(f, n):
    data = f.read(n)
    if len(data) != n:
        raise EOFError("connection closed mid-frame")
    return data


def read_frame(f, expect_mask):
    """One frame: (fin, opcode, payload), or a close code for a protocol
    error (int)."""
    b0, b1 = read_exact(f, 2)
    fin, rsv, opcode = b0 >> 7, (b0 >> 4) & 7, b0 & 15
    masked, n = b1 >> 7, b1 & 127
    if rsv:
        return 1002
    if n == 126:
        (n,) = struct.unpack("!H", read_exact(f, 2))
    elif n == 127:
        (n,) = struct.unpack("!Q", read_exact(f, 8))
    if masked != expect_mask:
        return 1002
    if n > MAX_PAYLOAD:
        return 1009
    key = read_exact(f, 4) if masked else None
    payload = read_exact(f, n)
    if key:
        payload = mask(payload, key)
    return fin, opcode, payload


def frame(opcode, payload, fin=True, masked=False):
    head = bytearray([(0x80 if fin else 0) | opcode])
    n = len(payload)
    mbit = 0x80 if masked else 0
    if n < 126:
        head.append(mbit | n)
    elif n < 1 << 16:
        head.append(mbit | 126)
        head += struct.pack("!H", n)
    else:
        head.append(mbit | 127)
        head += struct.pack("!Q", n)
    if masked:
        key = os.urandom(4)
        return bytes(head) + key + mask(payload, key)
    return bytes(head) + payload


def read_head(f):
    """The request or response head up to the blank line, as
    (first line, [(name, value)])."""
    lines = []
    total = 0
    while True:
        line = f.readline(MAX_HEAD)
        total += len(line)
        if not line or total > MAX_HEAD:
            raise EOFError("no complete head")
        if line in (b"\r\n", b"\n"):
            break
        lines.append(line.rstrip(b"\r\n"))
    if not lines:
        raise EOFError("empty head")
    fields = []
    for l in lines[1:]:
        name, _, value = l.partition(b":")
        fields.append((name.strip().decode("latin-1"), value.strip().decode("latin-1")))
    return lines[0].decode("latin-1"), fields


def tokens(fields, name):
    out = []
    for n, v in fields:
        if n.lower() == name:
            out += [t.strip().lower() for t in v.split(",") if t.strip()]
    return out


def field(fields, name):
    for n, v in fields:
        if n.lower() == name:
            return v
    return None


class Handler(socketserver.StreamRequestHandler):
    def respond(self, status, extra=b"", body=b""):
        self.wfile.write(
            b"HTTP/1.1 " + status + b"\r\n" + extra + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body
        )

    def handle(self):
        opts = self.server.opts
        try:
            line, fields = read_head(self.rfile)
        except EOFError:
            return
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != "GET":
            return self.respond(b"400 Bad Request")
        if parts[1] == "/health":
            return self.respond(b"200 OK", body=b"ok\n")
        if "websocket" not in tokens(fields, "upgrade") or "upgrade" not in tokens(fields, "connection"):
            return self.respond(b"400 Bad Request", body=b"not a websocket upgrade\n")
        if field(fields, "sec-websocket-version") != "13":
            return self.respond(b"426 Upgrade Required", b"Sec-WebSocket-Version: 13\r\n")
        key = (field(fields, "sec-websocket-key") or "").encode()
        try:
            if len(base64.b64decode(key, validate=True)) != 16:
                raise ValueError
        except ValueError:
            return self.respond(b"400 Bad Request", body=b"bad Sec-WebSocket-Key\n")
        echo = " | ".join("%s: %s" % nv for nv in fields).encode("latin-1", "replace")
        echo = bytes(b if 0x20 <= b < 0x7F else 0x3F for b in echo)
        self.wfile.write(
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: " + accept_key(key) + b"\r\nX-Echo-Head: " + echo + b"\r\n\r\n"
        )
        if opts.hello:
            self.wfile.write(frame(1, opts.hello.encode()))
        self.wfile.flush()
        self.echo()

    def echo(self):
        while True:
            try:
                r = read_frame(self.rfile, expect_mask=1)
            except (EOFError, OSError):
                return
            if isinstance(r, int):
                self.wfile.write(frame(8, struct.pack("!H", r)))
                return
            fin, opcode, payload = r
            if opcode == 8:
                self.wfile.write(frame(8, payload[:2]))
                return
            if opcode == 9:
                self.wfile.write(frame(10, payload))
            elif opcode in (0, 1, 2):
                self.wfile.write(frame(opcode, payload, fin=bool(fin)))
            self.wfile.flush()
            if self.server.opts.verbose:
                print("frame op=%d len=%d" % (opcode, len(payload)), file=sys.stderr)


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(a):
    srv = Server((a.bind, a.port), Handler)
    srv.opts = a
    host, port = srv.socket.getsockname()[:2]
    print("listening on %s:%d" % (host, port), flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


def client(a):
    host, _, port = a.address.rpartition(":")
    s = socket.create_connection((host.strip("[]"), int(port)), timeout=10 + a.idle)
    f = s.makefile("rwb")
    key = base64.b64encode(os.urandom(16))
    f.write(
        b"GET " + a.path.encode() + b" HTTP/1.1\r\nHost: " + a.address.encode() + b"\r\nUpgrade: websocket\r\n"
        b"Connection: Upgrade\r\nSec-WebSocket-Key: " + key + b"\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    f.flush()
    line, fields = read_head(f)
    if not line.startswith("HTTP/1.1 101"):
        print("FAIL: %s" % line)
        return 1
    if field(fields, "sec-websocket-accept") != accept_key(key).decode():
        print("FAIL: wrong Sec-WebSocket-Accept %r" % field(fields, "sec-websocket-accept"))
        return 1
    if a.hello:
        r = read_frame(f, expect_mask=0)
        if isinstance(r, int) or r[1] != 1:
            print("FAIL: no hello: %r" % (r,))
            return 1
    if a.idle:
        threading.Event().wait(a.idle)
    for i in range(a.count):
        msg = (b"%d:" % i + b"x" * a.size)[: max(a.size, 1)]
        f.write(frame(1, msg, masked=True))
        f.flush()
        r = read_frame(f, expect_mask=0)
        if isinstance(r, int) or r[2] != msg:
            print("FAIL: message %d not echoed" % i)
            return 1
    f.write(frame(8, struct.pack("!H", 1000), masked=True))
    f.flush()
    r = read_frame(f, expect_mask=0)
    if isinstance(r, int) or r[1] != 8:
        print("FAIL: no close frame back")
        return 1
    print("ok: %d messages of %d bytes echoed" % (a.count, a.size))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, default=int(os.environ.get("PORT", "0")))
    s.add_argument("--bind", default="127.0.0.1")
    s.add_argument("--hello")
    s.add_argument("-v", "--verbose", action="store_true")
    c = sub.add_parser("client")
    c.add_argument("address")
    c.add_argument("--path", default="/ws")
    c.add_argument("--count", type=int, default=3)
    c.add_argument("--size", type=int, default=100)
    c.add_argument("--hello", action="store_true")
    c.add_argument("--idle", type=float, default=0)
    a = p.parse_args()
    if a.cmd == "serve":
        serve(a)
        return 0
    try:
        return client(a)
    except (OSError, EOFError) as e:
        print("FAIL: %r" % e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
