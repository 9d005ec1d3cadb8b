#!/usr/bin/env python3
"""A plain HTTP/2 server (prior knowledge, no TLS) on the `h2` library, for
Stoa's tests of HTTP/2 upstreams that are not gRPC. Every request is
answered 200 with a text body listing what the server received:

  method, path, authority, each header "name: value", the body's length,
  and each trailer "trailer name: value"

and, when the request has `x-want-trailers`, trailers `x-sum: <body length>`
after the body. A path ending `/big/N` answers N bytes of "x" (flow control
checks); `/conns` the number of connections accepted so far.

Prints "listening on 127.0.0.1:PORT" once it serves.
"""
import socket
import sys
import threading

import h2.config
import h2.connection
import h2.events


ACCEPTED = [0]


def serve(sock):
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    streams = {}
    pending = {}  # stream id -> bytes of body still to send

    def flush_pending():
        for sid in list(pending):
            data = pending[sid]
            while data:
                win = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size)
                if win <= 0:
                    break
                conn.send_data(sid, data[:win])
                data = data[win:]
            if data:
                pending[sid] = data
            else:
                del pending[sid]
                conn.end_stream(sid)

    def respond(sid):
        s = streams.pop(sid)
        h = dict(s["headers"])
        path = h.get(":path", "")
        if path.endswith("/conns"):
            body = str(ACCEPTED[0]).encode()
            conn.send_headers(sid, [(":status", "200"), ("content-length", str(len(body)))])
            conn.send_data(sid, body, end_stream=True)
            return
        if "/big/" in path:
            body = b"x" * int(path.rsplit("/big/", 1)[1])
            conn.send_headers(sid, [(":status", "200"), ("content-length", str(len(body)))])
            pending[sid] = body
            flush_pending()
            return
        lines = [f"method {h.get(':method')}", f"path {path}", f"authority {h.get(':authority')}"]
        for k, v in s["headers"]:
            if not k.startswith(":"):
                lines.append(f"{k}: {v}")
        lines.append(f"body {len(s['body'])}")
        for k, v in s["trailers"]:
            lines.append(f"trailer {k}: {v}")
        body = ("\n".join(lines) + "\n").encode()
        conn.send_headers(sid, [(":status", "200"), ("content-type", "text/plain")])
        conn.send_data(sid, body)
        if "x-want-trailers" in h:
            conn.send_headers(sid, [("x-sum", str(len(s["body"])))], end_stream=True)
        else:
            conn.end_stream(sid)

    while True:
        try:
            data = sock.recv(65536)
        except OSError:
            return
        if not data:
            return
        for ev in conn.receive_data(data):
            if isinstance(ev, h2.events.RequestReceived):
                hs = [(k.decode() if isinstance(k, bytes) else k, v.decode() if isinstance(v, bytes) else v) for k, v in ev.headers]
                streams[ev.stream_id] = {"headers": hs, "body": b"", "trailers": []}
                if ev.stream_ended:
                    respond(ev.stream_id)
            elif isinstance(ev, h2.events.DataReceived):
                streams[ev.stream_id]["body"] += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, h2.events.TrailersReceived):
                streams[ev.stream_id]["trailers"] = [(k.decode() if isinstance(k, bytes) else k, v.decode() if isinstance(v, bytes) else v) for k, v in ev.headers]
            elif isinstance(ev, h2.events.StreamEnded):
                if ev.stream_id in streams:
                    respond(ev.stream_id)
            elif isinstance(ev, h2.events.WindowUpdated):
                flush_pending()
            elif isinstance(ev, h2.events.ConnectionTerminated):
                sock.sendall(conn.data_to_send())
                return
        out = conn.data_to_send()
        if out:
            sock.sendall(out)


def main():
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(64)
    print(f"listening on 127.0.0.1:{ls.getsockname()[1]}", flush=True)
    while True:
        c, _ = ls.accept()
        ACCEPTED[0] += 1
        threading.Thread(target=serve, args=(c,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
