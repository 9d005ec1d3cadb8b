#!/usr/bin/env python3
"""slowclients.py - hostile clients for bench/reliability.sh: N connections that hold a server's resources.

Modes (--mode):
  head   slowloris: send a request line and Host, then one more header line every --interval
         seconds, never the blank line that ends the head
  body   slow POST: a complete head with Content-Length: --body-bytes, then --chunk bytes of the
         body every --interval seconds
  idle   connect and send nothing (a connection flood)

With --reconnect a connection the server closes is opened again (a slowloris keeps its count up).
When the first N connections have been attempted the client prints one line

    READY open=O failed=F secs=T first_error=...

and runs until SIGTERM/SIGINT or --max-time, then prints

    DONE attempts=A open=O closed_by_server=C refused=R statuses=CODE:COUNT,... first_error=...

(statuses: what the server answered on the connections it closed: 408, 503 ..., or "none" for a
close without a response) and closes everything. The caller must raise `ulimit -n` above N.
"""
import argparse
import asyncio
import collections
import signal
import sys
import time


class Stats:
    def __init__(self):
        self.attempts = 0
        self.open = 0
        self.failed = 0
        self.closed = 0
        self.refused = 0
        self.statuses = collections.Counter()
        self.first_error = None

    def error(self, e):
        if self.first_error is None:
            self.first_error = f"{type(e).__name__}: {e}".replace("\n", " ")[:160]


async def drain_status(reader):
    """Read what the server sends until it closes; return its status code or 'none'."""
    data = b""
    try:
        while len(data) < 65536:
            chunk = await reader.read(4096)
            if not chunk:
                break
            data += chunk
    except (ConnectionError, OSError):
        pass
    if data.startswith(b"HTTP/"):
        parts = data.split(b" ", 2)
        if len(parts) > 1:
            return parts[1].decode(errors="replace")
    return "none"


async def one(args, st, stop, first_done):
    first = True
    while not stop.is_set():
        st.attempts += 1
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(args.host, args.port), 10)
        except Exception as e:  # noqa: BLE001 - counted and reported
            st.failed += 1
            st.refused += 1
            st.error(e)
            if first:
                first = False
                first_done()
            if not args.reconnect:
                return
            await asyncio.sleep(args.interval)
            continue
        st.open += 1
        if first:
            first = False
            first_done()
        closed = asyncio.ensure_future(drain_status(reader))
        try:
            if args.mode == "head":
                writer.write(f"GET {args.path} HTTP/1.1\r\nHost: {args.host}\r\n".encode())
            elif args.mode == "body":
                writer.write((f"POST {args.path} HTTP/1.1\r\nHost: {args.host}\r\n"
                              f"Content-Type: application/octet-stream\r\n"
                              f"Content-Length: {args.body_bytes}\r\n\r\n").encode())
            sent, i = 0, 0
            stopped = asyncio.ensure_future(stop.wait())
            while not stop.is_set() and not closed.done():
                await asyncio.wait([closed, stopped],
                                   timeout=args.interval, return_when=asyncio.FIRST_COMPLETED)
                if stop.is_set() or closed.done():
                    break
                if args.mode == "head":
                    writer.write(f"X-a{i}: b\r\n".encode())
                    i += 1
                elif args.mode == "body" and sent < args.body_bytes:
                    n = min(args.chunk, args.body_bytes - sent)
                    writer.write(b"x" * n)
                    sent += n
                await writer.drain()
        except (ConnectionError, OSError) as e:
            st.error(e)
        finally:
            if 'stopped' in locals():
                stopped.cancel()
        if closed.done():
            st.closed += 1
            st.statuses[closed.result()] += 1
        else:
            closed.cancel()
        st.open -= 1
        writer.close()
        if not args.reconnect or stop.is_set():
            return
        await asyncio.sleep(0.1)


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--conns", type=int, default=1000)
    ap.add_argument("--mode", choices=("head", "body", "idle"), default="head")
    ap.add_argument("--path", default="/index.html")
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between the pieces sent")
    ap.add_argument("--body-bytes", type=int, default=100000)
    ap.add_argument("--chunk", type=int, default=10, help="body bytes sent every --interval")
    ap.add_argument("--reconnect", action="store_true")
    ap.add_argument("--parallel", type=int, default=200, help="connections being opened at once")
    ap.add_argument("--max-time", type=float, default=120.0)
    args = ap.parse_args()

    st = Stats()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    at_stop = {}

    def on_signal():
        at_stop.setdefault("open", st.open)
        stop.set()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, on_signal)
    t0 = time.monotonic()
    started = 0
    ready = asyncio.Event()
    gate = asyncio.Semaphore(args.parallel)

    def first_done():
        nonlocal started
        started += 1
        gate.release()
        if started >= args.conns:
            ready.set()

    tasks = []
    for _ in range(args.conns):
        await gate.acquire()
        if stop.is_set():
            break
        tasks.append(asyncio.ensure_future(one(args, st, stop, first_done)))
    try:
        await asyncio.wait_for(ready.wait(), max(1.0, args.max_time - (time.monotonic() - t0)))
    except asyncio.TimeoutError:
        pass
    print(f"READY open={st.open} failed={st.failed} secs={time.monotonic() - t0:.1f} "
          f"first_error={st.first_error or '-'}", flush=True)
    try:
        await asyncio.wait_for(stop.wait(), max(1.0, args.max_time - (time.monotonic() - t0)))
    except asyncio.TimeoutError:
        pass
    at_stop.setdefault("open", st.open)
    stop.set()
    still_open = at_stop["open"]
    await asyncio.wait(tasks, timeout=5)
    sts = ",".join(f"{k}:{v}" for k, v in sorted(st.statuses.items())) or "-"
    print(f"DONE attempts={st.attempts} open={still_open} closed_by_server={st.closed} refused={st.refused} "
          f"statuses={sts} first_error={st.first_error or '-'}", flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
