#!/usr/bin/env python3
"""bench/cache-vs-varnish.py - the RFC 9111 cases of crates/stoa/tests/cache.rs run against Stoa's
cache and Varnish (Debian's varnish 7.1, the builtin VCL plus PURGE and an X-Cache header), each in
front of its own crates/stoa/tests/cache_support/origin.py, and the outcomes side by side.

Usage: bench/cache-vs-varnish.py [--stoa target/debug/stoa] [--out FILE.md] [--only NAME]
Needs: varnish (apt-get install varnish), python3; Stoa built (cargo build -p stoa).
Loopback only (ports 18681 Stoa, 18682 Varnish, any free port for the origins); only the processes
it starts are stopped, by PID.

For every step of every case it records, per cache (a WAIT step lets 1.5 s pass so that a max-age=1 response is stale;
Varnish never stores a response that is stale on arrival, so Age cannot stand in for time there): the status, where the body came from (`n=K`:
the origin's K-th answer for the path; a step that reached the origin raises the origin's count),
hit or miss (Stoa: Cache-Status, RFC 9211; Varnish: obj.hits in vcl_deliver), and Age. A case
differs when the bodies served (n) or the origin's counts differ. The table is Markdown, for
docs/CACHE-VS-VARNISH.md.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
ORIGIN = os.path.join(REPO, "crates/stoa/tests/cache_support/origin.py")
STOA_PORT, VARNISH_PORT = 18681, 18682


def q(s):
    return urllib.parse.quote(s, safe="")


# (name, RFC point, [(method, target, [header lines])...])
CASES = [
    ("fresh max-age", "RFC 9111 §4.2.1", [("GET", "/c1?cc=max-age%3D60", [])] * 2),
    ("no-store", "§5.2.2.5", [("GET", "/c2?cc=no-store%2C%20max-age%3D60", [])] * 2),
    ("private", "§5.2.2.7", [("GET", "/c3?cc=private%2C%20max-age%3D60", [])] * 2),
    ("Set-Cookie", "nginx/Varnish", [("GET", "/c4?cc=max-age%3D60&cookie=sid%3D1", [])] * 2),
    ("Authorization, max-age", "§3.5", [("GET", "/c5?cc=max-age%3D60", ["Authorization: Basic eDp5"])] * 2),
    ("Authorization, public", "§3.5", [("GET", "/c6?cc=public%2C%20max-age%3D60", ["Authorization: Basic eDp5"])] * 2),
    ("s-maxage=60, max-age=0", "§5.2.2.10", [("GET", "/c7?cc=max-age%3D0%2C%20s-maxage%3D60", [])] * 2),
    ("Expires +60 s", "§5.3", [("GET", "/c8?expires=60", [])] * 2),
    ("no freshness, no validator", "§4.2.2", [("GET", "/c9", [])] * 2),
    ("Last-Modified only (heuristic)", "§4.2.2", [("GET", "/c10?lm=100000", [])] * 2),
    ("404 max-age=60", "§3", [("GET", "/c11?status=404&cc=max-age%3D60", [])] * 2),
    ("500 with Last-Modified", "§4.2.2", [("GET", "/c12?status=500&lm=100000", [])] * 2),
    ("Age 100 > max-age 60", "§4.2.3", [("GET", "/c13?cc=max-age%3D60&age=100", [])] * 2),
    ("request no-cache", "§5.2.1.4", [("GET", "/c14?cc=max-age%3D60", []), ("GET", "/c14?cc=max-age%3D60", ["Cache-Control: no-cache"])]),
    ("request max-age=0", "§5.2.1.1", [("GET", "/c15?cc=max-age%3D60", []), ("GET", "/c15?cc=max-age%3D60", ["Cache-Control: max-age=0"])]),
    ("request min-fresh=120", "§5.2.1.3", [("GET", "/c16?cc=max-age%3D60", []), ("GET", "/c16?cc=max-age%3D60", ["Cache-Control: min-fresh=120"])]),
    ("request max-stale on stale", "§5.2.1.2", [("GET", "/c17?cc=max-age%3D1", []), ("WAIT", "1.5", []), ("GET", "/c17?cc=max-age%3D1", ["Cache-Control: max-stale=1000"])]),
    ("only-if-cached, cold", "§5.2.1.7", [("GET", "/c18?cc=max-age%3D60", ["Cache-Control: only-if-cached"])]),
    ("stale with ETag: 304", "§4.3.4", [("GET", "/c19?cc=max-age%3D1&etag=v1&h304=" + q("Cache-Control: max-age=60"), []), ("WAIT", "1.5", []), ("GET", "/c19?cc=max-age%3D1&etag=v1&h304=" + q("Cache-Control: max-age=60"), []), ("GET", "/c19?cc=max-age%3D1&etag=v1&h304=" + q("Cache-Control: max-age=60"), [])]),
    ("must-revalidate, origin fails", "§5.2.2.2", [("GET", "/c20?cc=max-age%3D1%2C%20must-revalidate&etag=v1&fail_after=1", []), ("WAIT", "1.5", []), ("GET", "/c20?cc=max-age%3D1%2C%20must-revalidate&etag=v1&fail_after=1", [])]),
    ("no-cache response", "§5.2.2.4", [("GET", "/c21?cc=no-cache%2C%20max-age%3D60&etag=v1", [])] * 3),
    ("Vary: Accept-Encoding", "§4.1", [("GET", "/c22?cc=max-age%3D60&vary=Accept-Encoding", ["Accept-Encoding: gzip"]), ("GET", "/c22?cc=max-age%3D60&vary=Accept-Encoding", ["Accept-Encoding: br"]), ("GET", "/c22?cc=max-age%3D60&vary=Accept-Encoding", ["Accept-Encoding: gzip"])]),
    ("Vary normalised", "§4.1", [("GET", "/c23?cc=max-age%3D60&vary=Accept-Language", ["Accept-Language: fr, en"]), ("GET", "/c23?cc=max-age%3D60&vary=Accept-Language", ["Accept-Language: fr,en"])]),
    ("Vary: *", "§4.1", [("GET", "/c24?cc=max-age%3D60&vary=*", [])] * 2),
    ("POST invalidates", "§4.4", [("GET", "/c25?cc=max-age%3D60", []), ("POST", "/c25?cc=max-age%3D60", ["Content-Length: 0"]), ("GET", "/c25?cc=max-age%3D60", [])]),
    ("HEAD from stored GET", "§4", [("GET", "/c26?cc=max-age%3D60", []), ("HEAD", "/c26?cc=max-age%3D60", [])]),
    ("Range from stored", "RFC 9110 §14", [("GET", "/c27?cc=max-age%3D60&size=5000", []), ("GET", "/c27?cc=max-age%3D60&size=5000", ["Range: bytes=0-99"])]),
    ("If-None-Match from stored", "§4.3.2", [("GET", "/c28?cc=max-age%3D60&etag=v1", []), ("GET", "/c28?cc=max-age%3D60&etag=v1", ['If-None-Match: "v1"'])]),
    ("stale-while-revalidate", "RFC 5861 §3", [("GET", "/c29?cc=max-age%3D1%2C%20stale-while-revalidate%3D600", []), ("WAIT", "1.5", []), ("GET", "/c29?cc=max-age%3D1%2C%20stale-while-revalidate%3D600", [])]),
    ("stale-if-error", "RFC 5861 §4", [("GET", "/c30?cc=max-age%3D1%2C%20stale-if-error%3D600&fail_after=1", []), ("WAIT", "1.5", []), ("GET", "/c30?cc=max-age%3D1%2C%20stale-if-error%3D600&fail_after=1", [])]),
    ("Surrogate-Control max-age=60", "W3C Edge Arch.", [("GET", "/c31?cc=max-age%3D0&sc=max-age%3D60", [])] * 2),
    ("X-Accel-Expires: 60", "nginx", [("GET", "/c32?cc=max-age%3D0&xae=60", [])] * 2),
    ("request with a Cookie", "-", [("GET", "/c33?cc=max-age%3D60", ["Cookie: a=1"])] * 2),
    ("PURGE by URL", "-", [("GET", "/c34?cc=max-age%3D60", []), ("PURGE", "/c34?cc=max-age%3D60", []), ("GET", "/c34?cc=max-age%3D60", [])]),
]

VCL = """vcl 4.1;
backend default { .host = "127.0.0.1"; .port = "%d"; }
acl purgers { "127.0.0.1"; }
sub vcl_recv {
    if (req.method == "PURGE") {
        if (client.ip !~ purgers) { return (synth(403)); }
        return (purge);
    }
}
sub vcl_backend_response {
    # Keep stale objects an hour for conditional fetches (RFC 9111 §4.3);
    # Varnish's default keep is 0: no revalidation.
    set beresp.keep = 1h;
}
sub vcl_deliver {
    if (obj.hits > 0) { set resp.http.X-Cache = "HIT"; } else { set resp.http.X-Cache = "MISS"; }
}
"""

STOA_CFG = """listen = ["127.0.0.1:%d"]
workers = 1
user = "root"
[log]
access = "off"
[[cache_zone]]
name = "z"
memory = "64M"
[[pool]]
name = "app"
protocol = "http"
address = ["127.0.0.1:%d"]
[[site]]
root = "%s"
[[site.route]]
prefix = "/"
proxy = { pool = "app" }
cache = { zone = "z", purge = ["127.0.0.1"] }
"""


def start_origin():
    p = subprocess.Popen([sys.executable, ORIGIN, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = p.stdout.readline()
    port = int(line.strip().rsplit(":", 1)[1])
    return p, port


def wait_port(port, within=15.0):
    until = time.time() + within
    while time.time() < until:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def http(port, method, target, headers, timeout=10):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    req = f"{method} {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" + "".join(h + "\r\n" for h in headers) + "\r\n"
    s.sendall(req.encode())
    data = b""
    while True:
        try:
            b = s.recv(65536)
        except socket.timeout:
            break
        if not b:
            break
        data += b
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1]) if lines and len(lines[0].split(" ")) > 1 else 0
    fields = {}
    for l in lines[1:]:
        n, _, v = l.partition(":")
        fields.setdefault(n.strip().lower(), v.strip())
    if fields.get("transfer-encoding", "").lower() == "chunked":
        out, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            n = int(size_line.split(b";")[0] or b"0", 16)
            if n == 0:
                break
            out, rest = out + rest[:n], rest[n + 2 :]
        body = out
    return status, fields, body


def origin_count(port, path):
    _, _, body = http(port, "GET", "/__count?path=" + path, [])
    return json.loads(body)["requests"]


def fetch_no(body):
    first = body.split(b"\n", 1)[0].decode("latin-1")
    if " n=" in first:
        return first.rsplit(" n=", 1)[1]
    return "-"


def run_cases(port, oport, kind, only):
    out = {}
    for name, rfc, steps in CASES:
        if only and only not in name:
            continue
        rows = []
        for method, target, headers in steps:
            if method == "WAIT":
                # Time passing is the subject here: the response grows stale.
                time.sleep(float(target))
                continue
            path = target.split("?")[0]
            status, f, body = http(port, method, target, headers)
            if kind == "stoa":
                cs = f.get("cache-status", "")
                hit = "HIT" if cs.startswith("Stoa; hit") else ("MISS" if cs else "-")
            else:
                hit = f.get("x-cache", "-")
            n = fetch_no(body) if method not in ("HEAD", "PURGE") and status not in (304,) else "-"
            rows.append((status, hit, n, f.get("age", "-"), origin_count(oport, path)))
        out[name] = (rfc, rows)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stoa", default=os.path.join(REPO, "target/debug/stoa"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--only", default=None)
    o = ap.parse_args()
    if not shutil.which("varnishd") and not os.path.exists("/usr/sbin/varnishd"):
        sys.exit("varnishd is missing: apt-get install varnish")
    work = tempfile.mkdtemp(prefix="stoa-cache-vs-varnish-")
    # varnishd reads the VCL as its own user.
    os.chmod(work, 0o755)
    procs = []
    try:
        o1, p1 = start_origin()
        o2, p2 = start_origin()
        procs += [o1, o2]
        os.makedirs(os.path.join(work, "www"))
        cfg = os.path.join(work, "stoa.toml")
        with open(cfg, "w") as f:
            f.write(STOA_CFG % (STOA_PORT, p1, os.path.join(work, "www")))
        stoa = subprocess.Popen([o.stoa, "serve", "--config", cfg], stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "stoa.err"), "w"))
        procs.append(stoa)
        vcl = os.path.join(work, "default.vcl")
        with open(vcl, "w") as f:
            f.write(VCL % p2)
        varnish = subprocess.Popen(
            ["varnishd", "-F", "-n", os.path.join(work, "varnish"), "-a", f"127.0.0.1:{VARNISH_PORT}", "-f", vcl,
             "-s", "malloc,64M", "-p", "thread_pools=1", "-p", "thread_pool_min=5", "-p", "thread_pool_max=50"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "varnish.err"), "w"))
        procs.append(varnish)
        if not wait_port(STOA_PORT) or not wait_port(VARNISH_PORT):
            for e in ("stoa.err", "varnish.err"):
                with open(os.path.join(work, e)) as f:
                    sys.stderr.write(f"{e}:\n{f.read()[-2000:]}\n")
            raise SystemExit("a cache did not start")
        s = run_cases(STOA_PORT, p1, "stoa", o.only)
        v = run_cases(VARNISH_PORT, p2, "varnish", o.only)
        lines = [
            "| case | RFC | step | Stoa: status hit n Age (origin) | Varnish 7.1: status hit n Age (origin) | same |",
            "|---|---|---|---|---|---|",
        ]
        differ = 0
        for name, (rfc, srows) in s.items():
            vrows = v[name][1]
            for i, (a, b) in enumerate(zip(srows, vrows)):
                same = (a[0], a[2], a[4]) == (b[0], b[2], b[4])
                differ += not same
                fmt = lambda r: f"{r[0]} {r[1]} n={r[2]} age={r[3]} ({r[4]})"
                lines.append(f"| {name if i == 0 else ''} | {rfc if i == 0 else ''} | {i + 1} | {fmt(a)} | {fmt(b)} | {'yes' if same else '**no**'} |")
        text = "\n".join(lines) + f"\n\n{differ} steps differ (status, body's origin answer, or origin requests).\n"
        print(text)
        if o.out:
            with open(o.out, "w") as f:
                f.write(text)
    finally:
        for p in reversed(procs):
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
