#!/usr/bin/env python3
"""holdconns.py - open N idle keep-alive HTTP/1.1 connections to one server and hold them.

Each connection sends one keep-alive GET and reads the whole response (Content-Length body), then
stays open and idle. When all are set up the client prints one line

    READY ok=N failed=F non200=K secs=T first_error=...

and waits (at most --max-time seconds in all) until it gets SIGTERM or SIGINT. It then prints

    DONE open=O closed_by_server=C

(C = connections the server closed while they were held), closes every connection and exits.
Used by bench/lib.sh to measure a server's RSS while it holds 10,000 idle connections.
The caller must raise `ulimit -n` above N.
"""
import argparse
import asyncio
import signal
import sys
import time


async def open_one(args, req, sem, stats):
    async with sem:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(args.host, args.port), args.timeout)
            writer.write(req)
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), args.timeout)
            lines = head.split(b"\r\n")
            status = int(lines[0].split(b" ", 2)[1])
            length = None
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            if length is None:
                raise ValueError("response without Content-Length")
            await asyncio.wait_for(reader.readexactly(length), args.timeout)
        except Exception as e:  # noqa: BLE001 - every failure is counted and reported
            stats["failed"] += 1
            if stats["first_error"] is None:
                stats["first_error"] = f"{type(e).__name__}: {e}".replace("\n", " ")[:200]
            return None
        stats["ok"] += 1
        if status != 200:
            stats["non200"] += 1
        return reader, writer


async def watch(reader, stats):
    """Count a held connection the server closes (EOF or error) before we do."""
    try:
        data = await reader.read(1)
    except (ConnectionError, OSError):
        data = b""
    if not data:
        stats["closed_by_server"] += 1


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--conns", type=int, default=10000)
    ap.add_argument("--path", default="/index.html")
    ap.add_argument("--parallel", type=int, default=100,
                    help="connections being set up at once (stays under listen backlogs)")
    ap.add_argument("--timeout", type=float, default=10.0, help="per-step timeout, seconds")
    ap.add_argument("--max-time", type=float, default=120.0, help="hard bound on the whole run")
    args = ap.parse_args()

    deadline = time.monotonic() + args.max_time
    req = (f"GET {args.path} HTTP/1.1\r\nHost: {args.host}:{args.port}\r\n"
           "User-Agent: stoa-holdconns\r\nAccept: */*\r\nConnection: keep-alive\r\n\r\n").encode()
    stats = {"ok": 0, "failed": 0, "non200": 0, "first_error": None, "closed_by_server": 0}
    sem = asyncio.Semaphore(args.parallel)
    t0 = time.monotonic()
    try:
        conns = await asyncio.wait_for(
            asyncio.gather(*(open_one(args, req, sem, stats) for _ in range(args.conns))),
            max(1.0, deadline - time.monotonic()))
    except asyncio.TimeoutError:
        print(f"READY ok={stats['ok']} failed={args.conns - stats['ok']} non200={stats['non200']} "
              f"secs={time.monotonic() - t0:.1f} first_error=timeout-setting-up", flush=True)
        return 2
    conns = [c for c in conns if c]
    print(f"READY ok={stats['ok']} failed={stats['failed']} non200={stats['non200']} "
          f"secs={time.monotonic() - t0:.1f} first_error={stats['first_error'] or '-'}", flush=True)

    watchers = [asyncio.ensure_future(watch(r, stats)) for r, _ in conns]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await asyncio.wait_for(stop.wait(), max(0.1, deadline - time.monotonic()))
    except asyncio.TimeoutError:
        pass
    await asyncio.sleep(0)  # let watchers that already saw EOF count it
    print(f"DONE open={len(conns) - stats['closed_by_server']} "
          f"closed_by_server={stats['closed_by_server']}", flush=True)
    for w in watchers:
        w.cancel()
    for _, writer in conns:
        writer.close()
    await asyncio.sleep(0.2)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
