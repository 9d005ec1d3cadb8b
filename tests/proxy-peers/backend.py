#!/usr/bin/env python3
"""An HTTP/1.1 application server for the reverse proxy's tests (issue 12).

Python 3 standard library only. One thread per connection, keep-alive,
Content-Length and chunked request bodies, 100-continue.

Routes (any method):
  /health             200 "ok NAME", or 503 while switched down
  /health/down        switch /health to 503      /health/up   back to 200
  /stats              JSON: connections, requests, idle_closes,
                      race_resets, late_closes, late_drops, healthy
  /big?size=N         N bytes (default 1 MiB); &chunked=1 sends it chunked,
                      &chunk=K writes K bytes at a time (default 64 KiB),
                      &rate=B at most B bytes/s (a slow response)
  /status/NNN         that status; &location=URL adds a Location
  /redirect?to=URL    302 to URL (&status=301, 303, 307, 308)
  /early-hints        103 Early Hints with a Link field, then 200 "final"
  /admin/...          Django's login_required behind a prefix-aware proxy:
                      302 to PREFIX/accounts/login/?next=PREFIX/admin/...
                      (PREFIX: X-Forwarded-Prefix), unless X-Remote-User
                      is set (then the echo)
  anything else       echo: the request head as JSON: method, target,
                      version, headers [[name, value], ...], body_length,
                      body (the first 64 KiB, UTF-8 with replacement),
                      peer, backend NAME, conn (the connection's number)
                      and conn_requests (requests on it so far: reuse)
  ?delay=S on any route waits S seconds before answering.

Options:
  --port P            listen on 127.0.0.1:P (default $PORT, else 0: any
                      free port); the first stdout line is
                      "listening on HOST:PORT" (or the Unix path)
  --bind ADDR         the address (default 127.0.0.1)
  --unix PATH         listen on a Unix socket instead
  --fd N              use inherited listening socket N (a pool passing
                      fd 0); LISTEN_FDS=1 in the environment means fd 3
                      (socket activation), as issue 12's pools do
  --name NAME         X-Backend: NAME on every response (default backend)
  --idle-close S      close a kept-alive connection after S seconds without
                      a request (the keep-alive race: the server closes just
                      as the proxy reuses the connection; what Jetty, Node,
                      Gunicorn do with their keep-alive timeouts)
  --advertise         with --idle-close, send Keep-Alive: timeout=S
  --race-window MS    with --idle-close, model a network: a request that
                      arrives within MS ms after the idle timeout is
                      answered with a reset and no response, as if it had
                      crossed the server's FIN in flight
  --late-close MS     with --idle-close, a request on a kept-alive
                      connection that arrives in the last MS ms before the
                      idle timeout is read and the connection closed with
                      no response (a clean close: the server's close
                      crossed the request on a network, and the request
                      may have been acted on)
  --late-drop PCT     with --idle-close S, a request that arrives on a
                      kept-alive connection in the last PCT % of S (idle
                      for at least S - S*PCT/100) is answered with a reset
                      and no response: on a real network the server's
                      close is already on its way (the keep-alive race of
                      a proxy that trusts an announced Keep-Alive timeout
                      to the last moment)
  --delay S           wait S seconds before every response
  --die-after N       exit at once (os._exit, no response, sockets reset)
                      when the Nth request arrives: a crash under load
  --http10            answer as HTTP/1.0 (no chunked, close after each)
  --expect MODE       Expect: 100-continue handling: continue (default),
                      ignore (read the body without sending 100), or
                      reject (417)
  --tls-cert PEM      serve HTTPS with this certificate chain
  --tls-key PEM       and this key (Python's ssl: OpenSSL, TLS 1.2/1.3,
                      session tickets); the echo adds tls_version,
                      tls_resumed (this connection resumed a session) and
                      client_cert (the client certificate's CN, or null)
  --tls-client-ca PEM require a client certificate signed by this CA
  -v                  log each request to stderr

Examples:
  tests/proxy-peers/backend.py --port 18090 --idle-close 1
  curl -s http://127.0.0.1:18090/anything?x=1 | python3 -m json.tool
  curl -s http://127.0.0.1:18090/health/down; curl -i http://127.0.0.1:18090/health
"""

import argparse
import json
import os
import select
import socket
import socketserver
import struct
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

ECHO_BODY_LIMIT = 64 * 1024
# Bodies larger than this are read and counted, not kept.
MAX_BODY_KEEP = 1 << 20


class State:
    def __init__(self, opts):
        self.opts = opts
        self.lock = threading.Lock()
        self.connections = 0
        self.requests = 0
        self.idle_closes = 0
        self.race_resets = 0
        self.late_closes = 0
        self.late_drops = 0
        self.healthy = not opts.health_down
        self.tls = None
        if opts.tls_cert:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(opts.tls_cert, opts.tls_key)
            if opts.tls_client_ca:
                ctx.verify_mode = ssl.CERT_REQUIRED
                ctx.load_verify_locations(opts.tls_client_ca)
            self.tls = ctx


class Handler(BaseHTTPRequestHandler):
    server_version = "stoa-test-backend"
    sys_version = ""

    # -- connection ---------------------------------------------------------

    def setup(self):
        ctx = self.server.state.tls
        if ctx is not None:
            # The handshake in this connection's thread, not the accept
            # loop; a failed one ends the connection (handle_error).
            self.request = ctx.wrap_socket(self.request, server_side=True)
        super().setup()
        st = self.server.state
        with st.lock:
            st.connections += 1
            self.conn_no = st.connections
        self.conn_requests = 0

    def finish(self):
        super().finish()
        if self.server.state.tls is not None:
            # The server's shutdown_request() holds the socket from before
            # the wrap (detached by it): close the TLS one here.
            self.connection.close()

    def handle(self):
        self.close_connection = True
        self.handle_one_request()
        while not self.close_connection:
            self.handle_one_request()

    def handle_one_request(self):
        # The standard library's loop body, with the idle wait made ours:
        # --idle-close applies between requests only (a request that has
        # started reads with a generous timeout), and its expiry can have a
        # race window.
        opts = self.server.state.opts
        idle = opts.idle_close if opts.idle_close and self.conn_requests > 0 else 60
        self.connection.settimeout(idle)
        waited_from = time.monotonic()
        idle_since = time.monotonic()
        try:
            self.raw_requestline = self.rfile.readline(65537)
            self.idle_for = time.monotonic() - waited_from
        except (TimeoutError, socket.timeout):
            self.idle_expired()
            return
        except (ConnectionError, OSError):
            self.close_connection = True
            return
        late = opts.idle_close * (1 - opts.late_drop / 100.0)
        if (opts.late_drop and self.conn_requests > 0 and self.raw_requestline
                and time.monotonic() - idle_since >= late):
            with self.server.state.lock:
                self.server.state.late_drops += 1
            self.close_connection = True
            # Close with unread bytes and no answer: the kernel sends a reset.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return
        try:
            if len(self.raw_requestline) > 65536:
                self.send_error(414)
                self.close_connection = True
                return
            if not self.raw_requestline:
                self.close_connection = True
                return
            if not self.parse_request():
                return
            method = getattr(self, "do_" + self.command, None)
            if method is None:
                self.send_error(501)
                return
            method()
            self.wfile.flush()
        except (TimeoutError, socket.timeout, ConnectionError, BrokenPipeError):
            self.close_connection = True

    def idle_expired(self):
        """The keep-alive timeout passed: close. With --race-window W ms, a
        request arriving within W ms of the expiry is answered by a reset
        and no response, as a real server's kernel answers a request that
        crossed its FIN on a network with a W ms one-way delay (on
        loopback the FIN arrives within microseconds, so the proxy nearly
        always sees it before reusing the connection)."""
        st = self.server.state
        self.close_connection = True
        window = st.opts.race_window / 1000.0
        raced = False
        if window > 0:
            r, _, _ = select.select([self.connection], [], [], window)
            raced = bool(r)
        with st.lock:
            st.idle_closes += 1
            st.race_resets += int(raced)
        if raced:
            # Close with unread bytes: the kernel sends a reset.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def parse_request(self):
        self.connection.settimeout(60)
        return super().parse_request()

    def log_request(self, code="-", size="-"):
        if self.server.state.opts.verbose:
            super().log_request(code, size)

    def log_error(self, fmt, *args):
        if self.server.state.opts.verbose:
            super().log_error(fmt, *args)

    def version_string(self):
        return self.server_version

    def address_string(self):
        if isinstance(self.client_address, tuple) and self.client_address:
            return str(self.client_address[0])
        return "unix"

    def handle_expect_100(self):
        mode = self.server.state.opts.expect
        if mode == "ignore":
            return True
        if mode == "reject":
            self.send_response(417)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return False
        return super().handle_expect_100()

    # -- requests -----------------------------------------------------------

    def do_request(self):
        st = self.server.state
        opts = st.opts
        with st.lock:
            st.requests += 1
            n = st.requests
        self.conn_requests += 1
        if opts.die_after and n >= opts.die_after:
            # A crash, not a shutdown: no response, no FIN on the others.
            os._exit(3)
        body_len, body = self.read_body()
        if body_len is None:
            return self.reply(400, b"bad request body\n")
        late = opts.idle_close - opts.late_close / 1000.0
        if opts.late_close and self.conn_requests > 1 and self.idle_for >= late:
            with st.lock:
                st.late_closes += 1
            self.close_connection = True
            return
        url = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(url.query)
        delay = float(q.get("delay", [opts.delay])[0] or 0)
        if delay > 0:
            time.sleep(delay)
        path = url.path
        if path == "/health":
            if st.healthy:
                return self.reply(200, b"ok " + opts.name.encode() + b"\n")
            return self.reply(503, b"down\n")
        if path in ("/health/down", "/health/up"):
            st.healthy = path.endswith("/up")
            return self.reply(200, b"health " + path[8:].encode() + b"\n")
        if path == "/stats":
            with st.lock:
                s = {
                    "connections": st.connections,
                    "requests": st.requests,
                    "idle_closes": st.idle_closes,
                    "race_resets": st.race_resets,
                    "late_closes": st.late_closes,
                    "late_drops": st.late_drops,
                    "healthy": st.healthy,
                }
            return self.reply(200, json.dumps(s).encode() + b"\n", "application/json")
        if path == "/big":
            return self.big(q)
        if path == "/early-hints":
            # 103 Early Hints (RFC 8297) ahead of the final response.
            self.send_response_only(103, "Early Hints")
            self.send_header("Link", "</style.css>; rel=preload; as=style")
            self.end_headers()
            self.wfile.flush()
            return self.reply(200, b"final\n")
        if path.startswith("/status/"):
            try:
                code = int(path[8:])
            except ValueError:
                code = 400
            extra = [("Location", q["location"][0])] if "location" in q else []
            return self.reply(code, b"status %d\n" % code, extra=extra)
        if path == "/redirect":
            code = int(q.get("status", ["302"])[0])
            to = q.get("to", ["/"])[0]
            return self.reply(code, b"see " + to.encode() + b"\n", extra=[("Location", to)])
        if path.startswith("/admin/") and not self.headers.get("X-Remote-User"):
            prefix = self.headers.get("X-Forwarded-Prefix", "").rstrip("/")
            nxt = urllib.parse.quote(prefix + path, safe="/")
            to = prefix + "/accounts/login/?next=" + nxt
            return self.reply(302, b"login first\n", extra=[("Location", to)])
        echo = {
            "method": self.command,
            "target": self.path,
            "version": self.request_version,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body_length": body_len,
            "body": body[:ECHO_BODY_LIMIT].decode("utf-8", "replace"),
            "peer": self.address_string(),
            "backend": opts.name,
            "conn": self.conn_no,
            "conn_requests": self.conn_requests,
        }
        if self.server.state.tls is not None:
            cert = self.connection.getpeercert()
            cn = None
            for rdn in (cert or {}).get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        cn = v
            echo["tls_version"] = self.connection.version()
            echo["tls_resumed"] = self.connection.session_reused
            echo["client_cert"] = cn
        self.reply(200, json.dumps(echo).encode() + b"\n", "application/json")

    def read_body(self):
        te = self.headers.get("Transfer-Encoding")
        if te is not None:
            if te.strip().lower() != "chunked":
                return None, b""
            return self.read_chunked()
        cl = self.headers.get("Content-Length")
        if cl is None:
            return 0, b""
        if not cl.strip().isdigit():
            return None, b""
        n = int(cl)
        kept = bytearray()
        left = n
        while left > 0:
            data = self.rfile.read(min(left, 65536))
            if not data:
                return None, b""
            if len(kept) < MAX_BODY_KEEP:
                kept += data
            left -= len(data)
        return n, bytes(kept)

    def read_chunked(self):
        kept = bytearray()
        total = 0
        while True:
            line = self.rfile.readline(4096)
            if not line.endswith(b"\r\n"):
                return None, b""
            size_text = line.split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                return None, b""
            if size == 0:
                break
            data = self.rfile.read(size)
            if len(data) != size or self.rfile.read(2) != b"\r\n":
                return None, b""
            total += size
            if len(kept) < MAX_BODY_KEEP:
                kept += data
        while True:  # trailer section
            line = self.rfile.readline(4096)
            if line in (b"\r\n", b""):
                break
        return total, bytes(kept)

    def common_headers(self):
        opts = self.server.state.opts
        self.send_header("X-Backend", opts.name)
        if opts.idle_close and opts.advertise and self.protocol_version == "HTTP/1.1":
            self.send_header("Keep-Alive", "timeout=%d" % max(1, int(opts.idle_close)))

    def reply(self, code, body, ctype="text/plain", extra=()):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.common_headers()
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def big(self, q):
        size = int(q.get("size", [str(1 << 20)])[0])
        chunk = max(1, int(q.get("chunk", ["65536"])[0]))
        rate = float(q.get("rate", ["0"])[0])
        chunked = q.get("chunked", ["0"])[0] == "1" and self.protocol_version == "HTTP/1.1"
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(size))
        self.common_headers()
        self.end_headers()
        if self.command == "HEAD":
            return
        pattern = (b"0123456789abcdef" * ((chunk // 16) + 1))[:chunk]
        sent = 0
        start = time.monotonic()
        while sent < size:
            n = min(chunk, size - sent)
            data = pattern[:n]
            if chunked:
                self.wfile.write(b"%x\r\n" % n + data + b"\r\n")
            else:
                self.wfile.write(data)
            sent += n
            if rate > 0:
                ahead = sent / rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
        if chunked:
            self.wfile.write(b"0\r\n\r\n")

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = do_request


class Server(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=int(os.environ.get("PORT", "0")))
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--unix")
    p.add_argument("--fd", type=int)
    p.add_argument("--name", default="backend")
    p.add_argument("--idle-close", type=float, default=0)
    p.add_argument("--advertise", action="store_true")
    p.add_argument("--race-window", type=float, default=0)
    p.add_argument("--late-close", type=float, default=0)
    p.add_argument("--late-drop", type=float, default=0)
    p.add_argument("--delay", type=float, default=0)
    p.add_argument("--die-after", type=int, default=0)
    p.add_argument("--http10", action="store_true")
    p.add_argument("--expect", choices=["continue", "ignore", "reject"], default="continue")
    p.add_argument("--health-down", action="store_true", help="start with /health at 503")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--tls-client-ca")
    p.add_argument("-v", "--verbose", action="store_true")
    opts = p.parse_args()

    Handler.protocol_version = "HTTP/1.0" if opts.http10 else "HTTP/1.1"
    fd = opts.fd
    # Socket activation as sd_listen_fds(3) reads it: LISTEN_PID must be
    # this process, or the variables were meant for someone else.
    if (
        fd is None
        and os.environ.get("LISTEN_FDS") == "1"
        and os.environ.get("LISTEN_PID") == str(os.getpid())
    ):
        fd = 3
    if fd is not None:
        sock = socket.socket(fileno=fd)
        family = sock.family
        cls = UnixServer if family == socket.AF_UNIX else Server
        if family == socket.AF_INET6:
            cls.address_family = socket.AF_INET6
        srv = cls(sock.getsockname(), Handler, bind_and_activate=False)
        srv.socket.close()
        srv.socket = sock
        where = sock.getsockname()
    elif opts.unix:
        if os.path.exists(opts.unix):
            os.unlink(opts.unix)
        srv = UnixServer(opts.unix, Handler)
        where = opts.unix
    else:
        if ":" in opts.bind:
            Server.address_family = socket.AF_INET6
        srv = Server((opts.bind, opts.port), Handler)
        where = srv.socket.getsockname()
    srv.state = State(opts)
    if isinstance(where, tuple):
        where = "%s:%d" % (where[0], where[1])
    print("listening on %s" % where, flush=True)
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
