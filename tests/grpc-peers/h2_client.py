#!/usr/bin/env python3
"""A minimal HTTP/2 client (prior knowledge, the `h2` library) for Stoa's
tests of what other clients cannot send: `h2_client.py HOST:PORT PATH BODY
NAME=VALUE...` POSTs BODY to PATH and ends the request with the given
trailers, then prints the response's body and its trailers ("trailer
name: value").
`h2_client.py HOST:PORT --many N PATH`: N GETs of PATH at once on one
connection; prints how many were answered 200.
"""
import socket
import sys

import h2.config
import h2.connection
import h2.events


def many(addr, n, path):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    for i in range(n):
        sid = c.get_next_available_stream_id()
        c.send_headers(sid, [(":method", "GET"), (":path", f"{path}{i}"), (":scheme", "http"),
                             (":authority", addr)], end_stream=True)
    s.sendall(c.data_to_send())
    ok, ended = 0, 0
    while ended < n:
        data = s.recv(65536)
        if not data:
            break
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.ResponseReceived) and dict(ev.headers).get(b":status") == b"200":
                ok += 1
            elif isinstance(ev, h2.events.DataReceived):
                c.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                ended += 1
        s.sendall(c.data_to_send())
    print(ok)


def main():
    if len(sys.argv) > 3 and sys.argv[2] == "--many":
        return many(sys.argv[1], int(sys.argv[3]), sys.argv[4])
    host, port = sys.argv[1].rsplit(":", 1)
    path, body = sys.argv[2], sys.argv[3].encode()
    trailers = [tuple(t.split("=", 1)) for t in sys.argv[4:]]
    s = socket.create_connection((host, int(port)), timeout=10)
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    sid = c.get_next_available_stream_id()
    c.send_headers(sid, [(":method", "POST"), (":path", path), (":scheme", "http"),
                         (":authority", sys.argv[1]), ("te", "trailers")])
    c.send_data(sid, body)
    c.send_headers(sid, trailers, end_stream=True)
    s.sendall(c.data_to_send())
    out, resp_trailers, done = b"", [], False
    while not done:
        data = s.recv(65536)
        if not data:
            break
        for ev in c.receive_data(data):
            if isinstance(ev, h2.events.DataReceived):
                out += ev.data
                c.acknowledge_received_data(ev.flow_controlled_length, sid)
            elif isinstance(ev, h2.events.TrailersReceived):
                resp_trailers = ev.headers
            elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                done = True
        s.sendall(c.data_to_send())
    sys.stdout.write(out.decode())
    for k, v in resp_trailers:
        print(f"trailer {k.decode()}: {v.decode()}")


if __name__ == "__main__":
    main()
