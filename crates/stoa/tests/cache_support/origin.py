#!/usr/bin/env python3
"""A test origin for the response cache: every response is chosen by the
request's query, so that one test can ask for exactly the freshness,
validators, Vary, errors and slowness it checks (RFC 9111, RFC 5861).

Python 3 standard library only. One thread per connection, HTTP/1.1
keep-alive, Content-Length request bodies read and dropped.

Query parameters (any method, any path; repeatable ones say so):
  status=N        the status (default 200)
  cc=V            Cache-Control: V
  expires=S       Expires: now + S seconds (S may be negative);
                  expires=raw:TEXT sends TEXT as is (an invalid date)
  date=S          Date: now + S seconds (default 0: the real time)
  age=N           Age: N (as if an upstream cache held it)
  lm=S            Last-Modified: now - S seconds
  etag=V          ETag: "V" (W/V gives the weak W/"V")
  vary=V          Vary: V
  sc=V            Surrogate-Control: V
  skey=V          Surrogate-Key: V
  xae=V           X-Accel-Expires: V
  cookie=V        Set-Cookie: V
  loc=URL         Location: URL          cloc=URL  Content-Location: URL
  hdr=Name:Value  one more field (repeatable)
  h304=Name:Value on 304 answers only, this field replaces the fields of
                  that name (repeatable): what a revalidation changes
  size=N          the body is exactly N bytes (default: the text below)
  chunked=1       send the body chunked (no Content-Length)
  delay=S         wait S seconds before the response head
  slow_after=N    with delay: only from the (N+1)th request for this path on
  pieces=K        send the body in K pieces ...
  pause=S         ... with S seconds between them
  no304=1         ignore If-None-Match / If-Modified-Since (always 200)
  fail_after=N    from the (N+1)th request for this path on, answer
                  fail_status (default 500) instead, with Cache-Control:
                  no-store; fail_mode=close closes the connection instead,
                  with no answer
  ctype=T         Content-Type (default text/plain)

The body starts with a line naming the request and its key-relevant
fields, so a response served for the wrong request, or from the wrong
fetch, shows:
  "GET /path?query n=3\n"            (n: this path's request count)
  "host: t\n" "accept-encoding: ...\n" ... (those that were sent)
  "--\n"
then, with size=N, filler up to N bytes where byte i (counted from the
start of the body) is i % 251: a misplaced range or a spliced chunk
shows as a mismatch.

Every response has X-Origin-Count: n (the path's request count) and
X-Origin-Target: the request target.

304: when the response would have an ETag or Last-Modified and the request
has a matching If-None-Match (weak comparison) or an If-Modified-Since at
or after Last-Modified (If-None-Match wins when both are sent), the answer
is 304 with the same header fields (plus h304's).

Control endpoints (not counted):
  /__count?path=P    JSON {"path": P, "requests": N, "completed": C}:
                     requests seen for path P (the query ignored) and how
                     many of those responses were completely written
  /__count           JSON of every path's counts
  /__reset           forget every count

Options: --port P (default 0: any free port; the first stdout line is
"listening on 127.0.0.1:PORT"), --bind ADDR, -v (log requests to stderr).

Example:
  python3 crates/stoa/tests/cache_support/origin.py --port 18091 &
  curl -i 'http://127.0.0.1:18091/a?cc=max-age%3D60&etag=v1&size=100'
"""

import argparse
import email.utils
import json
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KEY_FIELDS = (
    "host",
    "accept",
    "accept-encoding",
    "accept-language",
    "x-device",
    "cookie",
    "authorization",
    "if-none-match",
    "if-modified-since",
    "range",
    "cache-control",
)

FILLER = bytes(range(251))


def http_date(t):
    return email.utils.formatdate(t, usegmt=True)


def filler(start, end):
    """Bytes start..end of the filler (byte i is i % 251)."""
    if end <= start:
        return b""
    first = start - start % 251
    reps = (end - first) // 251 + 1
    return (FILLER * reps)[start - first : end - first]


class State:
    def __init__(self, verbose):
        self.lock = threading.Lock()
        self.requests = {}
        self.completed = {}
        self.verbose = verbose


def etag_matches(inm, etag):
    """Weak comparison (RFC 9110 §13.1.2) of an If-None-Match list."""
    if etag is None:
        return False
    if inm.strip() == "*":
        return True
    bare = etag[2:] if etag.startswith("W/") else etag
    for tag in inm.split(","):
        tag = tag.strip()
        tag = tag[2:] if tag.startswith("W/") else tag
        if tag == bare:
            return True
    return False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "stoa-cache-origin"
    sys_version = ""

    def log_message(self, fmt, *args):
        if self.server.state.verbose:
            sys.stderr.write("origin: " + (fmt % args) + "\n")

    def do_GET(self):
        self.answer(body_allowed=True)

    def do_HEAD(self):
        self.answer(body_allowed=False)

    def do_POST(self):
        self.answer(body_allowed=True)

    do_PUT = do_POST
    do_DELETE = do_POST
    do_PATCH = do_POST
    do_OPTIONS = do_GET

    def do_PURGE(self):
        # A PURGE that reaches the origin is a cache bug: say so loudly.
        self.answer(body_allowed=True)

    def read_request_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        while n > 0:
            chunk = self.rfile.read(min(n, 65536))
            if not chunk:
                break
            n -= len(chunk)

    def control(self, path, q):
        st = self.server.state
        with st.lock:
            if path == "/__reset":
                st.requests.clear()
                st.completed.clear()
                out = {"reset": True}
            elif "path" in q:
                p = q["path"][0]
                out = {
                    "path": p,
                    "requests": st.requests.get(p, 0),
                    "completed": st.completed.get(p, 0),
                }
            else:
                out = {
                    p: {"requests": n, "completed": st.completed.get(p, 0)}
                    for p, n in st.requests.items()
                }
        body = json.dumps(out).encode()
        self.send_response_only(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def answer(self, body_allowed):
        self.read_request_body()
        parts = urllib.parse.urlsplit(self.path)
        path = parts.path
        q = urllib.parse.parse_qs(parts.query, keep_blank_values=True)
        if path.startswith("/__"):
            self.control(path, q)
            return

        def one(name, default=None):
            v = q.get(name)
            return v[0] if v else default

        st = self.server.state
        with st.lock:
            n = st.requests.get(path, 0) + 1
            st.requests[path] = n

        now = time.time()
        fail_after = one("fail_after")
        if fail_after is not None and n > int(fail_after):
            if one("fail_mode") == "close":
                self.close_connection = True
                # Nothing sent: a reset, as an application that crashed.
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                return
            status = int(one("fail_status", "500"))
            body = f"failure {n} for {self.path}\n".encode()
            self.send_response_only(status)
            self.send_header("Date", http_date(now))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Origin-Count", str(n))
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body_allowed:
                self.wfile.write(body)
            self.done(path)
            return

        delay = float(one("delay", "0"))
        if delay > 0 and n > int(one("slow_after", "0")):
            time.sleep(delay)

        fields = []
        date_off = float(one("date", "0"))
        fields.append(("Date", http_date(now + date_off)))
        if one("age") is not None:
            fields.append(("Age", one("age")))
        if one("cc") is not None:
            fields.append(("Cache-Control", one("cc")))
        exp = one("expires")
        if exp is not None:
            if exp.startswith("raw:"):
                fields.append(("Expires", exp[4:]))
            else:
                fields.append(("Expires", http_date(now + float(exp))))
        lm = one("lm")
        last_modified = None
        if lm is not None:
            last_modified = int(now - float(lm))
            fields.append(("Last-Modified", http_date(last_modified)))
        etag = None
        if one("etag") is not None:
            v = one("etag")
            etag = f'W/"{v[2:]}"' if v.startswith("W/") else f'"{v}"'
            fields.append(("ETag", etag))
        for name, param in (
            ("Vary", "vary"),
            ("Surrogate-Control", "sc"),
            ("Surrogate-Key", "skey"),
            ("X-Accel-Expires", "xae"),
            ("Set-Cookie", "cookie"),
            ("Location", "loc"),
            ("Content-Location", "cloc"),
        ):
            if one(param) is not None:
                fields.append((name, one(param)))
        for h in q.get("hdr", []):
            name, _, value = h.partition(":")
            fields.append((name.strip(), value.strip()))
        fields.append(("X-Origin-Count", str(n)))
        fields.append(("X-Origin-Target", self.path))

        # Conditional GET/HEAD (RFC 9110 §13.1.1, §13.1.3).
        not_modified = False
        if one("no304") is None and self.command in ("GET", "HEAD"):
            inm = self.headers.get("If-None-Match")
            ims = self.headers.get("If-Modified-Since")
            if inm is not None:
                not_modified = etag_matches(inm, etag)
            elif ims is not None and last_modified is not None:
                try:
                    since = email.utils.parsedate_to_datetime(ims).timestamp()
                    not_modified = last_modified <= since
                except (TypeError, ValueError):
                    not_modified = False
        if not_modified:
            for h in q.get("h304", []):
                name, _, value = h.partition(":")
                name = name.strip()
                fields = [f for f in fields if f[0].lower() != name.lower()]
                fields.append((name, value.strip()))
            self.send_response_only(304)
            for name, value in fields:
                self.send_header(name, value)
            self.end_headers()
            self.done(path)
            return

        text = f"{self.command} {self.path} n={n}\n"
        for f in KEY_FIELDS:
            v = self.headers.get(f)
            if v is not None:
                text += f"{f}: {v}\n"
        text += "--\n"
        head = text.encode()
        size = one("size")
        if size is not None:
            size = int(size)
            body = head[:size] + filler(min(len(head), size), size)
        else:
            body = head

        status = int(one("status", "200"))
        chunked = one("chunked") == "1"
        self.send_response_only(status)
        for name, value in fields:
            self.send_header(name, value)
        self.send_header("Content-Type", one("ctype", "text/plain"))
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not body_allowed or status in (204, 304):
            self.wfile.flush()
            self.done(path)
            return
        pieces = max(1, int(one("pieces", "1")))
        pause = float(one("pause", "0"))
        step = (len(body) + pieces - 1) // pieces if body else 0
        at = 0
        k = 0
        while at < len(body) or (k == 0 and chunked):
            if k > 0 and pause > 0:
                self.wfile.flush()
                time.sleep(pause)
            piece = body[at : at + max(step, 1)]
            at += len(piece)
            k += 1
            if chunked:
                if piece:
                    self.wfile.write(b"%x\r\n" % len(piece) + piece + b"\r\n")
            else:
                self.wfile.write(piece)
            if not body:
                break
        if chunked:
            self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.done(path)

    def done(self, path):
        st = self.server.state
        with st.lock:
            st.completed[path] = st.completed.get(path, 0) + 1


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--bind", default="127.0.0.1")
    ap.add_argument("-v", action="store_true")
    opts = ap.parse_args()
    srv = Server((opts.bind, opts.port), Handler)
    srv.state = State(opts.v)
    host, port = srv.server_address[:2]
    print(f"listening on {host}:{port}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
