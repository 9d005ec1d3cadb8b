#!/usr/bin/env python3
"""A grpcio client for Stoa's tests: `client.py HOST:PORT CALL [ARG]` makes
one call of test.Echo (tests/grpc-peers/server.py) with raw bytes and
prints what came back, one line per message, then "status NAME details".

  unary TEXT          Unary
  stream N,MS         ServerStream; each line "msg<i> +<ms since the call>"
  client A,B,C        ClientStream with those messages
  bidi A,B,C          Bidi: each message sent only after the previous answer
  slow SECS TIMEOUT   Slow with a deadline of TIMEOUT seconds
  trailers            Trailers; prints the trailing metadata
  meta                Meta
  fail                Fail
"""
import sys
import threading
import time
import queue

import grpc


def main():
    target, call = sys.argv[1], sys.argv[2]
    arg = sys.argv[3] if len(sys.argv) > 3 else ""
    ch = grpc.insecure_channel(target)
    m = lambda kind, name: getattr(ch, kind)("/test.Echo/" + name)
    try:
        if call == "unary":
            print(m("unary_unary", "Unary")(arg.encode(), timeout=10).decode())
        elif call == "stream":
            t0 = time.monotonic()
            for r in m("unary_stream", "ServerStream")(arg.encode(), timeout=30):
                print(f"{r.decode()} +{int((time.monotonic() - t0) * 1000)}", flush=True)
        elif call == "client":
            msgs = [x.encode() for x in arg.split(",")]
            print(m("stream_unary", "ClientStream")(iter(msgs), timeout=10).decode())
        elif call == "bidi":
            q = queue.Queue()
            answered = threading.Semaphore(0)

            def requests():
                for x in arg.split(","):
                    yield x.encode()
                    # The next one only once this one was answered: the
                    # proxy must pass each message on as it comes.
                    if not answered.acquire(timeout=10):
                        return

            for r in m("stream_stream", "Bidi")(requests(), timeout=20):
                print(r.decode(), flush=True)
                answered.release()
        elif call == "slow":
            secs, limit = sys.argv[3], float(sys.argv[4])
            print(m("unary_unary", "Slow")(secs.encode(), timeout=limit).decode())
        elif call == "trailers":
            resp, c = m("unary_unary", "Trailers").with_call(b"", timeout=10)
            print(resp.decode())
            for k, v in c.trailing_metadata():
                print(f"trailer {k}={v}")
        elif call == "meta":
            print(m("unary_unary", "Meta")(b"", timeout=10, metadata=(("x-who", "me"),)).decode())
        elif call == "fail":
            m("unary_unary", "Fail")(b"", timeout=10)
        print("status OK")
    except grpc.RpcError as e:
        print(f"status {e.code().name} {e.details()}")


if __name__ == "__main__":
    main()
