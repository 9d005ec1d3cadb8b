#!/usr/bin/env python3
"""h2hold.py - open N idle HTTP/2 connections to one server (h2c or TLS) and hold them.

Each connection sends the client preface, an empty SETTINGS frame and one GET (HEADERS with
END_STREAM on stream 1), acknowledges the server's SETTINGS, reads frames until the response ends
(END_STREAM on stream 1) and checks its :status and body size, then stays open and idle, as a
browser's connection does between page loads. When all are set up the client prints one line

    READY ok=N failed=F non200=K secs=T first_error=...

and waits (at most --max-time seconds in all) until it gets SIGTERM or SIGINT. It then prints

    DONE open=O closed_by_server=C

(C = connections the server closed while they were held: a GOAWAY or EOF), closes every connection
and exits. bench/h2.sh uses it to measure a server's RSS per idle HTTP/2 connection (the same role
bench/holdconns.py plays for HTTP/1.1). No HTTP/2 library: the frames are built here (RFC 9113 §4
and §6), the request's header block uses the HPACK static table and literals without Huffman coding
(RFC 7541 §6.1, §6.2.2), and the response's block is not decoded beyond its first byte (:status 200
is static entry 8, RFC 7541 Appendix A; every server here sends it as that indexed field first).
The caller must raise `ulimit -n` above N.
"""
import argparse
import asyncio
import signal
import ssl
import struct
import sys
import time

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, ACK, END_HEADERS = 0x1, 0x1, 0x4


def frame(ftype, flags, stream, payload=b""):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def hpack_str(s):
    b = s.encode()
    assert len(b) < 127  # one-byte length prefix, no Huffman (RFC 7541 §5.2)
    return bytes([len(b)]) + b


def request_block(scheme, authority, path):
    # :method GET (static 2), :scheme http/https (6/7) indexed (§6.1); :authority (1) and :path (4)
    # as literals without indexing with an indexed name (§6.2.2: 0000 + 4-bit index)
    return (bytes([0x82, 0x87 if scheme == "https" else 0x86])
            + bytes([0x01]) + hpack_str(authority) + bytes([0x04]) + hpack_str(path)
            + bytes([0x00]) + hpack_str("user-agent") + hpack_str("stoa-h2hold"))


async def read_frame(reader, timeout):
    head = await asyncio.wait_for(reader.readexactly(9), timeout)
    length = int.from_bytes(head[:3], "big")
    payload = await asyncio.wait_for(reader.readexactly(length), timeout) if length else b""
    return head[3], head[4], int.from_bytes(head[5:9], "big") & 0x7FFFFFFF, payload


async def open_one(args, ctx, block, sem, stats):
    async with sem:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(args.host, args.port, ssl=ctx,
                                        server_hostname=args.sni if ctx else None), args.timeout)
            if ctx is not None:
                alpn = writer.get_extra_info("ssl_object").selected_alpn_protocol()
                if alpn != "h2":
                    raise ValueError(f"ALPN chose {alpn!r}, not h2")
            writer.write(PREFACE + frame(SETTINGS, 0, 0) + frame(HEADERS, END_STREAM | END_HEADERS, 1, block))
            status, body, done = None, 0, False
            while not done:
                ftype, flags, sid, payload = await read_frame(reader, args.timeout)
                if ftype == SETTINGS and not flags & ACK:
                    writer.write(frame(SETTINGS, ACK, 0))
                elif ftype == PING and not flags & ACK:
                    writer.write(frame(PING, ACK, 0, payload))
                elif ftype == GOAWAY:
                    raise ValueError(f"GOAWAY {payload[4:8].hex()} before the response")
                elif ftype == RST_STREAM and sid == 1:
                    raise ValueError(f"RST_STREAM {payload.hex()}")
                elif ftype == HEADERS and sid == 1:
                    if status is None:
                        # :status 200 indexed is 0x88 (after padding/priority fields, which these
                        # servers do not send on responses)
                        status = 200 if payload[:1] == b"\x88" else -1
                    done = bool(flags & END_STREAM)
                elif ftype == DATA and sid == 1:
                    pad = payload[0] + 1 if flags & 0x8 else 0
                    body += len(payload) - pad
                    done = bool(flags & END_STREAM)
            await writer.drain()
            if args.size is not None and body != args.size:
                raise ValueError(f"body of {body} bytes, want {args.size}")
        except Exception as e:  # noqa: BLE001 - every failure is counted and reported
            stats["failed"] += 1
            if stats["first_error"] is None:
                stats["first_error"] = f"{type(e).__name__}: {e}".replace("\n", " ")[:200]
            return None
        stats["ok"] += 1
        if status != 200:
            stats["non200"] += 1
        return reader, writer


async def watch(reader, writer, stats):
    """Answer PINGs, count a held connection the server ends (GOAWAY or EOF) before we do."""
    try:
        while True:
            ftype, flags, _, payload = await read_frame(reader, None)
            if ftype == PING and not flags & ACK:
                writer.write(frame(PING, ACK, 0, payload))
            elif ftype == SETTINGS and not flags & ACK:
                writer.write(frame(SETTINGS, ACK, 0))
            elif ftype == GOAWAY:
                break
    except (ConnectionError, OSError, asyncio.IncompleteReadError, ssl.SSLError):
        pass
    stats["closed_by_server"] += 1


async def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--tls", action="store_true", help="TLS with ALPN h2 (else h2c, prior knowledge)")
    ap.add_argument("--sni", default="localhost")
    ap.add_argument("--conns", type=int, default=5000)
    ap.add_argument("--path", default="/index.html")
    ap.add_argument("--size", type=int, help="expected body size")
    ap.add_argument("--parallel", type=int, default=100,
                    help="connections being set up at once (stays under listen backlogs)")
    ap.add_argument("--timeout", type=float, default=10.0, help="per-step timeout, seconds")
    ap.add_argument("--max-time", type=float, default=120.0, help="hard bound on the whole run")
    args = ap.parse_args()

    ctx = None
    if args.tls:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the bench's self-signed certificate
        ctx.set_alpn_protocols(["h2"])
    deadline = time.monotonic() + args.max_time
    block = request_block("https" if args.tls else "http", f"{args.host}:{args.port}", args.path)
    stats = {"ok": 0, "failed": 0, "non200": 0, "first_error": None, "closed_by_server": 0}
    sem = asyncio.Semaphore(args.parallel)
    t0 = time.monotonic()
    try:
        conns = await asyncio.wait_for(
            asyncio.gather(*(open_one(args, ctx, block, sem, stats) for _ in range(args.conns))),
            max(1.0, deadline - time.monotonic()))
    except asyncio.TimeoutError:
        print(f"READY ok={stats['ok']} failed={args.conns - stats['ok']} non200={stats['non200']} "
              f"secs={time.monotonic() - t0:.1f} first_error=timeout-setting-up", flush=True)
        return 2
    conns = [c for c in conns if c]
    print(f"READY ok={stats['ok']} failed={stats['failed']} non200={stats['non200']} "
          f"secs={time.monotonic() - t0:.1f} first_error={stats['first_error'] or '-'}", flush=True)

    watchers = [asyncio.ensure_future(watch(r, w, stats)) for r, w in conns]
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
