#!/usr/bin/env python3
"""The keep-alive race client (issue 12): requests spaced around the
backend's idle timeout, through a proxy, counting the failures.

Sends one request every INTERVAL +- JITTER seconds (uniform, seeded) for
DURATION seconds over one kept-alive client connection (a new one after
any failure), so each request reaches the proxy's stashed upstream
connection just before, at, or just after the moment the backend
(backend.py --idle-close INTERVAL) closes it. A proxy that sends on a
connection the backend is closing and does not retry answers 502 (or
resets the client). Prints one JSON line:
  {"requests": N, "errors": E, "statuses": {"200": n, ...}, "failures": [...]}
and exits 1 when E > 0 (so a test can assert 0 errors).

Usage:
  race_client.py URL [--duration 30] [--interval 1.0] [--jitter 0.05]
                 [--method GET|POST|alternate] [--seed 1] [--timeout 10]
Example (nginx on 18591 in front of backend.py --idle-close 1 on 18590):
  tests/proxy-peers/race_client.py http://127.0.0.1:18591/race --method POST
"""

import argparse
import http.client
import json
import random
import sys
import time
import urllib.parse


def main():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--duration", type=float, default=30)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--jitter", type=float, default=0.05)
    p.add_argument("--method", choices=["GET", "POST", "alternate"], default="alternate")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--timeout", type=float, default=10)
    a = p.parse_args()
    u = urllib.parse.urlsplit(a.url)
    path = u.path or "/"
    if u.query:
        path += "?" + u.query
    rng = random.Random(a.seed)
    conn = None
    statuses = {}
    failures = []
    n = 0
    end = time.monotonic() + a.duration
    while time.monotonic() < end:
        method = a.method
        if method == "alternate":
            method = "POST" if n % 2 else "GET"
        body = b"name=race&n=%d" % n if method == "POST" else None
        headers = {"Content-Type": "application/x-www-form-urlencoded"} if body else {}
        n += 1
        try:
            if conn is None:
                conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=a.timeout)
            conn.request(method, path, body=body, headers=headers)
            r = conn.getresponse()
            r.read()
            key = str(r.status)
            if r.status >= 400:
                failures.append({"n": n, "method": method, "status": r.status})
            if r.will_close:
                conn.close()
                conn = None
        except (OSError, http.client.HTTPException) as e:
            key = type(e).__name__
            failures.append({"n": n, "method": method, "error": repr(e)})
            if conn is not None:
                conn.close()
            conn = None
        statuses[key] = statuses.get(key, 0) + 1
        time.sleep(max(0.0, a.interval + rng.uniform(-a.jitter, a.jitter)))
    errors = len(failures)
    print(json.dumps({"requests": n, "errors": errors, "statuses": statuses, "failures": failures}))
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
