#!/bin/bash
# bench/h3-cost.sh - where an HTTP/3 request's server CPU goes: Stoa (one worker) serves a 1358-byte
# file to the aioquic client (crates/stoa/tests/h3_support/h3get.py), requests one after another on
# one QUIC connection, as bench/h3.sh does. Two runs, N1 and N2 requests, each under callgrind and
# under `strace -c -f`; the difference of the two divided by N2-N1 is the cost of one request, without
# start-up, handshake and stop. Instruction counts are exact on a busy box (timings are not).
# Prints instructions per request by part (quinn-proto, quinn-udp, crypto, HTTP/3 + QPACK, tokio, Stoa, allocator,
# ...) and syscalls per request.
#
# Usage: bench/h3-cost.sh STOA_BINARY
# Knobs (environment):
#   N1=50 N2=250   requests in the two runs
#   SIZE=1358      the file's size in bytes (its name stays f1358.bin)
#   HTTP3=         lines for Stoa's [http3] table, e.g. HTTP3='max_datagram_size = 9000'
#   PORT=18850     Stoa's port (TCP and UDP)
#   RUN=/tmp/stoa-h3-cost   work folder
#   VENV=RUN/venv  the aioquic venv (made when missing: pip install aioquic==1.7.2)
#   TOOLS=callgrind   which measurements to take: "callgrind strace" adds syscalls per request
#                     (a first try of the strace runs hung the client past 8 minutes: unverified)
set -euo pipefail
case ${1:-} in -h|--help|'') sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
STOA=$(realpath "$1")
N1=${N1:-50} N2=${N2:-250} PORT=${PORT:-18850} SIZE=${SIZE:-1358}
RUN=${RUN:-/tmp/stoa-h3-cost}
VENV=${VENV:-$RUN/venv}
TOOLS=${TOOLS:-callgrind}
HERE=$(cd "$(dirname "$0")" && pwd)
H3GET=$HERE/../crates/stoa/tests/h3_support/h3get.py
for t in valgrind callgrind_annotate strace openssl python3 curl; do
    command -v $t >/dev/null || { echo "bench/h3-cost.sh: needs $t" >&2; exit 2; }
done
mkdir -p "$RUN/www"
[ -x "$VENV/bin/python" ] || { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q aioquic==1.7.2; }
PY=$VENV/bin/python
head -c "$SIZE" /dev/urandom > "$RUN/www/f1358.bin"
[ -f "$RUN/cert.pem" ] || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$RUN/key.pem" -out "$RUN/cert.pem" 2>/dev/null
printf '%s\n' 'workers = 1' 'user = "root"' '[log]' 'access = "off"' '[[tls]]' \
    "listen = [\"127.0.0.1:$PORT\"]" "cert = \"$RUN/cert.pem\"" "key = \"$RUN/key.pem\"" \
    'protocols = ["h3", "h2", "http/1.1"]' '[[site]]' "root = \"$RUN/www\"" > "$RUN/stoa.toml"
[ -z "${HTTP3:-}" ] || printf '%s\n' '[http3]' "$HTTP3" >> "$RUN/stoa.toml"
SRV=
stop() {
    if [ -n "$SRV" ]; then kill "$SRV" 2>/dev/null || true; wait "$SRV" 2>/dev/null || true; fi
    SRV=
}
trap stop EXIT
# run TOOL N: the server under TOOL serves N requests on one connection, then stops.
run() {
    local tool=$1 n=$2 ok
    case $tool in
        callgrind) valgrind -q --tool=callgrind --callgrind-out-file="$RUN/cg.$n" \
            "$STOA" serve --config "$RUN/stoa.toml" 2>"$RUN/srv.err" & SRV=$! ;;
        strace) strace -c -f -o "$RUN/st.$n" "$STOA" serve --config "$RUN/stoa.toml" \
            2>"$RUN/srv.err" & SRV=$! ;;
    esac
    for _ in $(seq 600); do
        curl -sk -o /dev/null "https://127.0.0.1:$PORT/f1358.bin" && break
        kill -0 "$SRV" 2>/dev/null || { echo "bench/h3-cost.sh: server died" >&2; exit 1; }
        sleep 0.1
    done
    ok=$("$PY" "$H3GET" --port "$PORT" --timeout 300 --count "$n" /f1358.bin |
        grep -c "\"status\": 200, .*\"length\": $SIZE,") || true
    stop
    [ "$ok" = "$n" ] || { echo "bench/h3-cost.sh: $tool: $ok answers of $n" >&2; exit 1; }
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
for tool in $TOOLS; do
    run "$tool" "$N1"
    run "$tool" "$N2"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ $TOOLS == *callgrind* ]]; then
    for n in "$N1" "$N2"; do
        callgrind_annotate --auto=no --inclusive=no --threshold=100 "$RUN/cg.$n" 2>/dev/null > "$RUN/cg.$n.txt"
    done
    python3 - "$RUN/cg.$N1.txt" "$RUN/cg.$N2.txt" $((N2 - N1)) <<'EOF'
import re, sys
from collections import defaultdict
# Parts, first match wins: the symbol (with its file) names the crate.
PARTS = [
    # `(?<![a-z_])ring::`: not `prefix_string::` (the h3 crate's QPACK).
    ("crypto (aws-lc/ring/rustls)", r"aws_lc|(?<![a-z_])ring::|ring_core|rustls|aes|gcm|chacha|sha256|p256|GFp|_x86_64|bn_"),
    ("quinn-udp (socket, GSO/GRO)", r"quinn_udp"),
    ("quinn-proto: ack/loss/congestion", r"quinn_proto::.*(ack|loss|congestion|cubic|pacing|range_set|RangeSet|sent_packets|SentPacket)"),
    ("quinn-proto: packet/frame codec", r"quinn_proto::.*(packet|frame|coding|Header|PartialDecode|Datagram)"),
    ("quinn-proto: streams", r"quinn_proto::.*(stream|Stream|Send|Recv|Assembler)"),
    ("quinn-proto: other", r"quinn_proto"),
    ("quinn (driver, channels)", r"quinn::"),
    # The `h3` crates (main before stoa-h3), or stoa-h3 with the Huffman
    # coder it shares with stoa-h2; not Stoa's own proto::h3 / conn::h3.
    ("HTTP/3 framing + QPACK (h3 crates, or stoa-h3)", r"/h3-0\.|/h3-quinn-|h3_quinn|stoa_h3|hpack::huffman|(?<!proto::)(?<!conn::)\bh3::|qpack"),
    ("http / bytes", r"\bhttp::|bytes::"),
    ("tokio (tasks, timers, I/O)", r"tokio"),
    ("futures / std sync", r"futures|std::sync|parking_lot|lock_api"),
    ("Stoa", r"stoa"),
    ("allocator (malloc/free)", r"malloc|free|realloc|calloc|_int_|tcache|memalign|mi_|je_"),
    ("memcpy/memset/libc", r"mem(cpy|move|set|cmp)|libc|__"),
]
def load(path):
    out, total = {}, 0
    for line in open(path):
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        if m.group(2).lstrip().startswith("=>") or "events annotated" in m.group(2):
            continue  # a call edge (inclusive), not the function's own cost
        if "PROGRAM TOTALS" in m.group(2):
            total = n
            continue
        out[m.group(2)] = out.get(m.group(2), 0) + n
    if not total:
        m = re.search(r"([\d,]+).*PROGRAM TOTALS", open(path).read())
        total = int(m.group(1).replace(",", "")) if m else 0
    return out, total
a, ta = load(sys.argv[1])
b, tb = load(sys.argv[2])
n = int(sys.argv[3])
per = defaultdict(float)
fn = {}
for k in set(a) | set(b):
    d = (b.get(k, 0) - a.get(k, 0)) / n
    fn[k] = d
    part = next((p for p, rx in PARTS if re.search(rx, k)), "other")
    per[part] += d
total = (tb - ta) / n
print(f"instructions per request: {total:,.0f}")
for p, v in sorted(per.items(), key=lambda x: -x[1]):
    print(f"  {v:10,.0f}  {100 * v / total:5.1f} %  {p}")
print("top functions (self, per request):")
for k, v in sorted(fn.items(), key=lambda x: -x[1])[:40]:
    print(f"  {v:10,.0f}  {k[:150]}")
EOF
fi
if [[ $TOOLS == *strace* ]]; then
    python3 - "$RUN/st.$N1" "$RUN/st.$N2" $((N2 - N1)) <<'EOF'
import sys
def load(p):
    out = {}
    for line in open(p):
        f = line.split()
        if len(f) >= 5 and f[0][0].isdigit() and f[-1] != "total":
            out[f[-1]] = int(f[3])
    return out
a, b, n = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3])
d = {k: (b.get(k, 0) - a.get(k, 0)) / n for k in set(a) | set(b)}
print(f"syscalls per request: {sum(d.values()):.2f}")
for k, v in sorted(d.items(), key=lambda x: -x[1]):
    if abs(v) >= 0.05:
        print(f"  {v:6.2f}  {k}")
EOF
fi
