#!/usr/bin/env python3
"""An HTTP/3 client on aioquic for the tests: one or more requests on one
QUIC connection, each answer printed as a JSON line (status, header fields,
the informational heads before them, body length and SHA-256); with --out, the first body is written there.

h3get.py --host 127.0.0.1 --port P [--sni NAME] [--authority A] [--cafile F]
         [--cert F --key F] [--ticket-out F] [--ticket-in F] [--method M] [--data-file F] [--header 'n: v']
         [--count N] [--out F] PATH...

--cert/--key: a client certificate (PEM) offered when the server asks.
--ticket-out F: the session ticket the server sent, saved (pickle);
--ticket-in F: a session to resume from such a file. Each JSON line
says whether the session was resumed ("resumed").
--authority: the :authority field (default SNI:PORT).
"""
import argparse
import asyncio
import hashlib
import json
import os
import pickle
import socket
import ssl
import sys

from aioquic.asyncio.client import connect
from aioquic.asyncio.protocol import QuicConnectionProtocol
from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.h3.events import DataReceived, HeadersReceived
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.events import ConnectionTerminated, QuicEvent, StreamReset


class Closed(Exception):
    def __init__(self, code, reason):
        super().__init__(f"connection closed: error 0x{code:x} {reason}")


class Client(QuicConnectionProtocol):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.h3 = H3Connection(self._quic)
        self.waiting = {}

    def quic_event_received(self, event: QuicEvent):
        if isinstance(event, ConnectionTerminated):
            # The server closed the connection (a refused client
            # certificate: a TLS alert as a crypto error, RFC 9001 §4.8).
            for st in self.waiting.values():
                st["done"].set_exception(Closed(event.error_code, event.reason_phrase))
            self.waiting.clear()
            return
        if isinstance(event, StreamReset) and event.stream_id in self.waiting:
            st = self.waiting.pop(event.stream_id)
            st["reset"] = event.error_code
            st["done"].set_result(st)
            return
        for e in self.h3.handle_event(event):
            st = self.waiting.get(e.stream_id)
            if st is None:
                continue
            if isinstance(e, HeadersReceived):
                status = dict(e.headers).get(b":status", b"")
                if st["headers"] is None and status.startswith(b"1"):
                    # An informational response (103 Early Hints) ahead
                    # of the final one (RFC 9114 §4.1).
                    st["interim"].append(e.headers)
                elif st["headers"] is None:
                    st["headers"] = e.headers
                else:
                    st["trailers"] = e.headers
            elif isinstance(e, DataReceived):
                st["body"] += e.data
            if e.stream_ended:
                self.waiting.pop(e.stream_id, None)
                st["done"].set_result(st)

    async def request(self, method, authority, path, headers, body):
        sid = self._quic.get_next_available_stream_id()
        fields = [
            (b":method", method.encode()),
            (b":scheme", b"https"),
            (b":authority", authority.encode()),
            (b":path", path.encode()),
        ] + headers
        if body is not None:
            fields.append((b"content-length", str(len(body)).encode()))
        self.h3.send_headers(sid, fields, end_stream=body is None)
        if body is not None:
            # In pieces, as a client streaming an upload would.
            for i in range(0, len(body), 16384):
                last = i + 16384 >= len(body)
                self.h3.send_data(sid, body[i : i + 16384], end_stream=last)
            if not body:
                self.h3.send_data(sid, b"", end_stream=True)
        st = {"headers": None, "interim": [], "trailers": None, "body": b"", "reset": None,
              "done": asyncio.get_running_loop().create_future()}
        self.waiting[sid] = st
        self.transmit()
        return await st["done"]


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--sni", default="localhost")
    ap.add_argument("--authority")
    ap.add_argument("--cafile")
    ap.add_argument("--cert")
    ap.add_argument("--key")
    ap.add_argument("--ticket-out")
    ap.add_argument("--ticket-in")
    ap.add_argument("--method", default="GET")
    ap.add_argument("--data-file")
    ap.add_argument("--header", action="append", default=[])
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--out")
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("paths", nargs="+")
    a = ap.parse_args()
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=a.sni)
    if a.cafile:
        cfg.load_verify_locations(a.cafile)
    else:
        cfg.verify_mode = ssl.CERT_NONE
    if a.cert:
        cfg.load_cert_chain(a.cert, a.key)
    if a.ticket_in:
        with open(a.ticket_in, "rb") as f:
            cfg.session_ticket = pickle.load(f)
    tickets = []
    body = open(a.data_file, "rb").read() if a.data_file else None
    headers = []
    for h in a.header:
        n, v = h.split(":", 1)
        headers.append((n.strip().lower().encode(), v.strip().encode()))
    authority = a.authority or f"{a.sni}:{a.port}"
    async with connect(a.host, a.port, configuration=cfg, create_protocol=Client,
                       session_ticket_handler=tickets.append) as c:
        # asyncio's default receive buffer (~200 KiB) overflows under a
        # burst of a few hundred datagrams while Python is busy: each loss
        # halves the server's congestion window. 4 MiB, as browsers ask.
        sock = c._transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        first = True
        for _ in range(a.count):
            for p in a.paths:
                st = await asyncio.wait_for(
                    c.request(a.method, authority, p, headers, body), a.timeout)
                if first and a.out:
                    open(a.out, "wb").write(st["body"])
                first = False
                hs = [[k.decode(), v.decode()] for k, v in (st["headers"] or [])]
                ts = [[k.decode(), v.decode()] for k, v in (st["trailers"] or [])]
                status = next((int(v) for k, v in hs if k == ":status"), None)
                interim = [[[k.decode(), v.decode()] for k, v in h] for h in st["interim"]]
                print(json.dumps({
                    "path": p, "status": status, "headers": hs, "interim": interim, "trailers": ts,
                    "reset": st["reset"], "length": len(st["body"]),
                    "resumed": c._quic.tls.session_resumed,
                    "sha256": hashlib.sha256(st["body"]).hexdigest(),
                    "text": st["body"][:1 << 20].decode("utf-8", "replace"),
                    # QPACK encoder-stream bytes sent so far: nonzero once
                    # aioquic inserted into the server's dynamic table.
                    "encoder_bytes": c.h3._encoder_bytes_sent,
                }), flush=True)
        if a.ticket_out and tickets:
            with open(a.ticket_out, "wb") as f:
                pickle.dump(tickets[-1], f)
        # CONNECTION_CLOSE goes now; the draining period after it (three
        # PTOs, RFC 9000 §10.2) is not waited for: the test is done.
        c.close()
        c.transmit()
        os._exit(0)


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as e:  # the test reads the reason
        print(f"h3get: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(2)
