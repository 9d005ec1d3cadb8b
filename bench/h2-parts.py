#!/usr/bin/env python3
"""h2-parts.py - Ir per request by part, from two callgrind runs of the same server with N1 and N2
requests (bench/h2-profile.sh): every figure is (cost in run 2 - cost in run 1) / (N2 - N1), so
start-up and stop cancel out.

Usage: h2-parts.py RUN1.out RUN2.out N2_MINUS_N1

Parts are groups of functions, by the regular expressions in PARTS below, on the demangled names
callgrind_annotate prints. "incl" parts take each matching function's inclusive cost, counting only
the outermost match on a call path is not possible from callgrind_annotate's flat listing, so a part
lists functions that do not call each other (a nested one would be counted twice); "self" parts sum
the functions' own instructions (malloc and free, locks, memcpy: spread over every caller). Then the
functions with the most own instructions per request, so that what no part names is seen too.
"""
import re
import subprocess
import sys

# (label, kind, regex). Inclusive parts, from the outside in; the indented ones are inside the one
# above them (their Ir is part of it).
PARTS = [
    ("tasks run by the worker (everything per request but the epoll wait)", "incl", r"^tokio::runtime::task::raw::poll$"),
    ("  connection task: conn::h2::serve", "incl", r"^stoa_server::conn::h2::serve::\{\{closure\}\}$"),
    ("    h2 Connection::poll: frames in and out, stream store", "incl", r"^h2::proto::connection::Connection<.*>::poll$"),
    ("      frame decoding: h2 framed_read::decode_frame", "incl", r"^h2::codec::framed_read::decode_frame$"),
    ("        HPACK decode into a HeaderMap: h2 HeaderBlock::load", "incl", r"^h2::frame::headers::HeaderBlock::load$"),
    ("      stream store on a received frame: h2 DynConnection::recv_frame", "incl", r"^h2::proto::connection::DynConnection<.*>::recv_frame$"),
    ("      frames out of the send queues: h2 Prioritize::pop_frame", "incl", r"^h2::proto::streams::prioritize::Prioritize::pop_frame$"),
    ("      frame encoding: h2 framed_write::Encoder::buffer", "incl", r"^h2::codec::framed_write::Encoder<.*>::buffer$"),
    ("        HPACK encode: h2 HeaderBlock::into_encoding", "incl", r"^h2::frame::headers::HeaderBlock::into_encoding$"),
    ("      writing: h2 FramedWrite::flush (socket or TLS write)", "incl", r"^h2::codec::framed_write::FramedWrite<.*>::flush$"),
    ("    the request as an http::Request: h2 Peer::convert_poll_message", "incl", r"^h2::proto::peer::Dyn::convert_poll_message$"),
    ("    spawning the stream's task: tokio LocalSet Context::spawn", "incl", r"^tokio::task::local::Context::spawn$"),
    ("    flood guard: proto::flood::Guard poll_read (frame scanner)", "incl", r"^<stoa_server::proto::flood::Guard<.*> as tokio::io::async_read::AsyncRead>::poll_read$"),
    ("    Stoa's codec path: conn::h2 Driver::input (frames in, codec, handlers polled inline)", "incl",
     r"^stoa_server::conn::h2::Driver<.*>::input$"),
    ("      codec: a header block (stoa_h2 Conn::on_block: checks, request head)", "incl", r"^stoa_h2::conn::Conn::on_block$"),
    ("        HPACK decode: stoa_h2::hpack::Decoder::decode", "incl", r"^stoa_h2::hpack::Decoder::decode$"),
    ("      request head for the handlers: conn::h2::request_head (RequestHead from the codec's request)", "incl",
     r"^stoa_server::conn::h2::request_head$"),
    ("      the stream's handler, polled inline: conn::h2::stream", "incl", r"^stoa_server::conn::h2::stream::\{\{closure\}\}$"),
    ("        exchange, routing and static handler: route::run", "incl", r"^stoa_server::route::run::\{\{closure\}\}$"),
    ("          static handler: handler::static_files::serve", "incl", r"^stoa_server::handler::static_files::serve$"),
    ("        sending the response: H2Stream::flush", "incl", r"^stoa_server::proto::h2::H2Stream::flush::\{\{closure\}\}$"),
    ("          response head: Shared::send_head (HPACK encode, HEADERS frame)", "incl", r"^stoa_server::proto::h2::Shared::send_head$"),
    ("          DATA frames: stoa_h2 Conn::send_data / send_data_shared", "incl", r"^stoa_h2::conn::Conn::send_data(_shared)?$"),
    ("    Stoa's codec path: writing, conn::h2 Driver::poll_write (one write per turn; TLS: encryption)", "incl",
     r"^stoa_server::conn::h2::Driver<.*>::poll_write$"),
    ("  stream tasks: the rest of raw::poll (request head, route, handler, response)", "diff",
     (r"^tokio::runtime::task::raw::poll$", r"^stoa_server::worker::serve::\{\{closure\}\}$")),
    ("    request head from the http::Request: RequestHead::from_parts", "incl", r"^stoa_h1::request::RequestHead::from_parts$"),
    ("    exchange, routing and static handler: route::run", "incl", r"^stoa_server::route::run::\{\{closure\}\}$"),
    ("      static handler: handler::static_files::serve", "incl", r"^stoa_server::handler::static_files::serve$"),
    ("    sending the response: H2Stream::flush", "incl", r"^stoa_server::proto::h2::H2Stream::flush::\{\{closure\}\}$"),
    ("      response head to an http::Response: proto::h2::head_of", "incl", r"^stoa_server::proto::h2::head_of$"),
    ("      h2 Send::send_headers (stream store, queue HEADERS)", "incl", r"^h2::proto::streams::send::Send::send_headers$"),
    ("      h2 SendStream::send_data (queue DATA)", "incl", r"^h2::share::SendStream<.*>::send_data$"),
    ("    stream end: drop H2Stream (h2 stream refs, store lock)", "incl", r"^core::ptr::drop_in_place<stoa_server::proto::h2::H2Stream>$"),
    ("TLS plumbing (inside reading and writing above): rustls write_tls/read_tls/process_new_packets, tokio-rustls", "incl",
     r"^(rustls::conn::ConnectionCommon<.*>::(write_tls|read_tls)|rustls::conn::ConnectionCore<.*>::process_new_packets|<tokio_rustls::server::TlsStream<.*> as tokio::io::async_(read|write)::Async(Read|Write)>::poll_(read|write|write_vectored|flush))$"),
    ("TLS record encryption (inside writing above): Tls13MessageEncrypter::encrypt", "incl", r"^<rustls::crypto::ring::tls13::Tls13MessageEncrypter as rustls::crypto::cipher::MessageEncrypter>::encrypt$"),
    ("TLS record decryption (inside reading above): Tls13MessageDecrypter::decrypt", "incl", r"^<rustls::crypto::ring::tls13::Tls13MessageDecrypter as rustls::crypto::cipher::MessageDecrypter>::decrypt$"),
    ("malloc/free/realloc (own instructions, all callers)", "self",
     r"^(malloc|free|realloc|calloc|_int_malloc|_int_free|_int_realloc|_int_memalign|_mid_memalign.*|posix_memalign|malloc_consolidate|cfree|unlink_chunk.*|tcache_.*)$"),
    ("memcpy/memmove/memset (own instructions, all callers)", "self", r"^__(memcpy|memmove|memset)_.*$"),
    ("locks: futex Mutex (own instructions, all callers)", "self", r"futex::Mutex::(lock|unlock|lock_contended)"),
]

CALLS = re.compile(r"\s+\([\d,]+x\)$")
LINE = re.compile(r"^\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(\S.*?)(?:\s+\[[^\]]*\])?\s*$")


def annotate(path, inclusive):
    out = subprocess.run(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}", "--threshold=100",
                          "--auto=no", path], check=True, capture_output=True, text=True).stdout
    costs, total, listing = {}, None, False
    for line in out.splitlines():
        if "file:function" in line:  # the function listing starts after this header (and a rule)
            listing = True
            continue
        m = LINE.match(line)
        if not m:
            if listing and not line.strip() and costs:
                break  # the blank line after the listing
            continue
        n, name = int(m.group(1).replace(",", "")), m.group(2)
        if "PROGRAM TOTALS" in name:
            total = n
            continue
        if not listing:
            continue
        # "file:function [object]", the function possibly followed by its call count "(6,001x)".
        # A function appears once per source file its (inlined) code came from. Own costs: summed.
        # Inclusive: the entry of the function's own file holds the whole (the others are the
        # inlined lines' share of it, calls included), so the largest entry is the function's.
        fn = name.split(":", 1)[1] if ":" in name else name
        fn = CALLS.sub("", fn)
        costs[fn] = max(costs.get(fn, 0), n) if inclusive else costs.get(fn, 0) + n
    return costs, total


def main():
    a_path, b_path, dn = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ai, at = annotate(a_path, True)
    bi, bt = annotate(b_path, True)
    aself, _ = annotate(a_path, False)
    bself, _ = annotate(b_path, False)
    per = lambda a, b: (b - a) / dn
    total = per(at, bt)
    print(f"Ir per request: {total:,.0f}")
    print()
    print("| part | Ir per request | share |")
    print("|---|---:|---:|")
    shown = []
    for label, kind, rx in PARTS:
        r = re.compile(rx) if kind != "diff" else None
        if kind == "diff":
            ra, rb = (re.compile(x) for x in rx)
            na = {f for f in set(ai) | set(bi) if ra.search(f)}
            nb = {f for f in set(ai) | set(bi) if rb.search(f)}
            if not na:
                continue
            va = per(sum(ai.get(f, 0) for f in na), sum(bi.get(f, 0) for f in na))
            v = va - per(sum(ai.get(f, 0) for f in nb), sum(bi.get(f, 0) for f in nb))
        else:
            src_a, src_b = (ai, bi) if kind == "incl" else (aself, bself)
            names = {f for f in set(src_a) | set(src_b) if r.search(f)}
            if not names:
                continue
            v = per(sum(src_a.get(f, 0) for f in names), sum(src_b.get(f, 0) for f in names))
        lead = len(label) - len(label.lstrip(" "))
        # a row whose parent (the nearest row above with less indent) was left out is left out too
        while shown and shown[-1][0] >= lead:
            shown.pop()
        if shown and not shown[-1][1]:
            shown.append((lead, False))
            continue
        # not on this path (the TLS parts over h2c; the h2 crate's parts with Stoa's codec and the
        # other way round): nothing, or under 2 % where a whole task is a difference
        hide = abs(v) < 0.5 or (kind == "diff" and abs(v) < 0.02 * total)
        shown.append((lead, not hide))
        if hide:
            continue
        print(f"| {'&nbsp;' * lead}{label.strip()} | {v:,.0f} | {100 * v / total:.0f} % |")
    print()
    top = sorted(((per(aself.get(f, 0), bself.get(f, 0)), f) for f in set(aself) | set(bself)), reverse=True)[:25]
    print("Own instructions per request, the top 25 functions:")
    print()
    for v, f in top:
        print(f"    {v:8,.0f}  {f[:160]}")


if __name__ == "__main__":
    main()
