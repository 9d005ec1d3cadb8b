#!/usr/bin/env python3
"""A gRPC service for Stoa's tests and bench/grpc.sh, on grpcio with generic
method handlers and raw bytes (no protoc): service test.Echo.

  Unary          echoes the request, "echo:" before it
  ServerStream   the request is "N,MS": N messages "msg<i>", MS ms apart
  ClientStream   the messages joined with "+"
  Bidi           each message answered at once with "bidi:" before it
  Slow           sleeps the request's seconds, then "late"
  Trailers       answers "ok" with trailing metadata x-trail: yes
  Meta           the request's metadata, "name=value" lines
  Fail           aborts with status 5 NOT_FOUND "no such thing"

`--tls CERT KEY`: TLS (grpcio offers ALPN h2). Prints "listening on
127.0.0.1:PORT" once it serves.
"""
import sys
import time
from concurrent import futures

import grpc


def unary(req, ctx):
    return b"echo:" + req


def server_stream(req, ctx):
    n, ms = (int(x) for x in req.split(b","))
    for i in range(n):
        if i:
            time.sleep(ms / 1000)
        yield b"msg%d" % i


def client_stream(it, ctx):
    return b"+".join(it)


def bidi(it, ctx):
    for m in it:
        yield b"bidi:" + m


def slow(req, ctx):
    time.sleep(float(req))
    return b"late"


def trailers(req, ctx):
    ctx.set_trailing_metadata((("x-trail", "yes"),))
    return b"ok"


def meta(req, ctx):
    return "\n".join(f"{k}={v}" for k, v in ctx.invocation_metadata()).encode()


def fail(req, ctx):
    ctx.abort(grpc.StatusCode.NOT_FOUND, "no such thing")


def main():
    port, tls = 0, None
    args = sys.argv[1:]
    while args:
        if args[0] == "--port":
            port, args = int(args[1]), args[2:]
        elif args[0] == "--tls":
            with open(args[1], "rb") as c, open(args[2], "rb") as k:
                tls = grpc.ssl_server_credentials([(k.read(), c.read())])
            args = args[3:]
        else:
            sys.exit(f"unknown option {args[0]}")
    handler = grpc.method_handlers_generic_handler(
        "test.Echo",
        {
            "Unary": grpc.unary_unary_rpc_method_handler(unary),
            "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream),
            "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
            "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
            "Slow": grpc.unary_unary_rpc_method_handler(slow),
            "Trailers": grpc.unary_unary_rpc_method_handler(trailers),
            "Meta": grpc.unary_unary_rpc_method_handler(meta),
            "Fail": grpc.unary_unary_rpc_method_handler(fail),
        },
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=32))
    server.add_generic_rpc_handlers((handler,))
    if tls:
        port = server.add_secure_port(f"127.0.0.1:{port}", tls)
    else:
        port = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print(f"listening on 127.0.0.1:{port}", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
