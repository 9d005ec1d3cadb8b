#!/usr/bin/env python3
"""bench/lockstep.py - a keep-alive client in lockstep with one server process (for bench/seam-guard.sh).

Sends N GET requests one at a time on one keep-alive connection, and before each one waits until every
thread of the server process (--pid) sits blocked in epoll_wait / epoll_pwait / epoll_pwait2 (read from
/proc/PID/task/TID/syscall, which needs root or the same user). So every request reaches an idle
server: each one costs the same wake-up, read, respond, read-again-to-EAGAIN and epoll_wait, whatever
the timing on the machine, and instruction counts (callgrind) and syscall counts become deterministic.
Without the wait, whether the server finds the next request already there or has to sleep for it
depends on timing, and that alone moves the instructions per request by several percent.

Prints one line: "requests=N ok=N bad=N waits_over_1s=N".
Exit status: 0 if every response was HTTP 200 with --size body bytes (when given), else 1.
"""
import argparse
import http.client
import os
import sys
import time

EPOLL_WAITS = {"232", "281", "441"}  # x86_64: epoll_wait, epoll_pwait, epoll_pwait2


def idle(pid):
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        sys.exit(f"lockstep: server PID {pid} is gone")
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/syscall") as f:
                nr = f.read().split(" ", 1)[0].strip()
        except (FileNotFoundError, ProcessLookupError):
            continue  # a thread that just ended
        if nr not in EPOLL_WAITS:
            return False
    return True


def wait_idle(pid, timeout=10.0):
    """Until the condition holds on two looks 0.2 ms apart; returns the seconds waited."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if idle(pid):
            time.sleep(0.0002)
            if idle(pid):
                return time.monotonic() - t0
        time.sleep(0.0001)
    sys.exit(f"lockstep: server PID {pid} not idle in epoll_wait after {timeout} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--path", default="/index.html")
    ap.add_argument("--pid", type=int, required=True, help="the server process to wait for")
    ap.add_argument("-n", type=int, required=True, help="requests")
    ap.add_argument("--size", type=int, help="expected body size")
    a = ap.parse_args()
    ok = bad = slow = 0
    wait_idle(a.pid)
    conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=30)
    conn.connect()
    for _ in range(a.n):
        if wait_idle(a.pid) > 1.0:
            slow += 1
        conn.request("GET", a.path, headers={"Host": "127.0.0.1", "User-Agent": "lockstep"})
        r = conn.getresponse()
        body = r.read()
        if r.status == 200 and (a.size is None or len(body) == a.size) and not r.will_close:
            ok += 1
        else:
            bad += 1
            if bad == 1:
                print(f"first bad response: HTTP {r.status}, {len(body)} bytes, will_close={r.will_close}",
                      file=sys.stderr)
            if r.will_close:
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", a.port, timeout=30)
                conn.connect()
    wait_idle(a.pid)
    conn.close()
    print(f"requests={a.n} ok={ok} bad={bad} waits_over_1s={slow}")
    return 0 if bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
