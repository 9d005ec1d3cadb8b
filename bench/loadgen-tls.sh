#!/bin/bash
# bench/loadgen-tls.sh - `stoa bench` against wrk, h2load and ab on one Stoa (`--workers 1`), the
# same file, over plain HTTP/1.1, HTTPS, HTTP/2 over TLS and h2c, and the handshakes/s scenario.
#
# Usage: bench/loadgen-tls.sh
# Knobs (environment):
#   STOA=target/release/stoa   the server, and `$STOA bench` the generator under test
#   BENCH="$STOA bench"        another generator command, e.g. target/release/examples/bench (the
#                              same generator without the server: `cargo build --release -p
#                              stoa-bench --example bench`); SERVER=$STOA another server binary
#   DUR=5      seconds per timed run          CONC=50   connections (one thread per generator)
#   HS_N=3000  requests of the handshake runs (no keep-alive: one full TLS handshake each)
#   REPS=3     rounds; the generators alternate inside each round, medians reported
#   CASES="h1 h1tls h2tls h2c hs h2m h2cm"    PORT=18810 (and PORT+1 for TLS)
#   STREAMS=10 streams per connection of the h2m (TLS) and h2cm (h2c) cases: h2load -m against
#              --max-concurrent-streams, CONC/STREAMS connections (at least 1)
#   RUN=/tmp/stoa-bench-tls    work folder; OUT=$RUN/results.md
#
# For every run: the requests/s the generator reports (its own run time) and the generator's own
# CPU time per request: utime+stime of its process (bash `time`, getrusage of the child) divided
# by its successful responses. The peers: wrk -t1 (HTTP/1.1 keep-alive, plain and TLS), h2load
# -t1 -m1 (HTTP/2 with one stream per connection, as stoa bench; TLS by ALPN, h2c by prior
# knowledge), ab (no keep-alive over TLS: a full handshake per request). Needs wrk, h2load
# (nghttp2-client), ab (apache2-utils), curl, python3.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

REPO_DIR=$(cd "$(dirname "$0")/.." && pwd)
STOA=${STOA:-$REPO_DIR/target/release/stoa}
SERVER=${SERVER:-$STOA}
read -r -a BENCH_CMD <<< "${BENCH:-$STOA bench}"
DUR=${DUR:-5} CONC=${CONC:-50} HS_N=${HS_N:-3000} REPS=${REPS:-3}
CASES=${CASES:-h1 h1tls h2tls h2c hs h2m h2cm}
STREAMS=${STREAMS:-10}
MCONC=$(( CONC / STREAMS > 0 ? CONC / STREAMS : 1 ))
PORT=${PORT:-18810}
RUN=${RUN:-/tmp/stoa-bench-tls}
OUT=${OUT:-$RUN/results.md}
for t in wrk h2load ab curl python3; do
    command -v "$t" > /dev/null || { echo "loadgen-tls: $t is missing" >&2; exit 1; }
done

rm -rf "$RUN"; mkdir -p "$RUN/www" "$RUN/raw"
# The 1358-byte page of bench/lib.sh's gen_docroot, as every load-generator table uses.
python3 -c 'import sys; sys.stdout.write(("<p>stoa bench</p>\n" * 80)[:1358])' > "$RUN/www/index.html"
"$SERVER" cert "$RUN/tls" localhost > /dev/null

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done; }
trap cleanup EXIT
"$SERVER" serve "$RUN/www" --listen "127.0.0.1:$PORT" --workers 1 --access-log off 2> "$RUN/plain.log" &
PIDS+=($!)
"$SERVER" serve "$RUN/www" --listen "127.0.0.1:$((PORT + 1))" --workers 1 --access-log off \
    --tls-cert "$RUN/tls/cert.pem" --tls-key "$RUN/tls/key.pem" 2> "$RUN/tls.log" &
PIDS+=($!)
for i in $(seq 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/index.html" &&
        curl -sfk -o /dev/null "https://127.0.0.1:$((PORT + 1))/index.html" && break
    [ "$i" = 100 ] && { echo "loadgen-tls: the servers did not start" >&2; exit 1; }
    sleep 0.1
done
PLAIN=http://127.0.0.1:$PORT/index.html
TLS=https://127.0.0.1:$((PORT + 1))/index.html

# run CASE TOOL FILE: prints "RPS CPU_US_PER_REQUEST RESPONSES"
run() {
    local case=$1 tool=$2 f=$3 rps n
    local TIMEFORMAT='TIME %3U %3S %3R'
    local sb=("${BENCH_CMD[@]}" -q --threads 1 -c "$CONC" --json "$f.json")
    {
        time case $case,$tool in
            h1,peer) wrk -t1 -c"$CONC" -d"${DUR}s" "$PLAIN" ;;
            h1,stoa) "${sb[@]}" -k -d "$DUR" "$PLAIN" ;;
            h1tls,peer) wrk -t1 -c"$CONC" -d"${DUR}s" "$TLS" ;;
            h1tls,stoa) "${sb[@]}" -k -d "$DUR" --insecure "$TLS" ;;
            h2tls,peer) h2load -t1 -c"$CONC" -m1 -D "$DUR" "$TLS" ;;
            h2tls,stoa) "${sb[@]}" --http2 -d "$DUR" --insecure "$TLS" ;;
            h2c,peer) h2load -t1 -c"$CONC" -m1 -D "$DUR" "$PLAIN" ;;
            h2c,stoa) "${sb[@]}" --http2 -d "$DUR" "$PLAIN" ;;
            h2m,peer) h2load -t1 -c"$MCONC" -m"$STREAMS" -D "$DUR" "$TLS" ;;
            h2m,stoa) "${BENCH_CMD[@]}" -q --threads 1 -c "$MCONC" --json "$f.json" --http2 \
                          --max-concurrent-streams "$STREAMS" -d "$DUR" --insecure "$TLS" ;;
            h2cm,peer) h2load -t1 -c"$MCONC" -m"$STREAMS" -D "$DUR" "$PLAIN" ;;
            h2cm,stoa) "${BENCH_CMD[@]}" -q --threads 1 -c "$MCONC" --json "$f.json" --http2 \
                           --max-concurrent-streams "$STREAMS" -d "$DUR" "$PLAIN" ;;
            hs,peer) ab -n "$HS_N" -c "$CONC" "$TLS" ;;
            hs,stoa) "${sb[@]}" -n "$HS_N" --insecure "$TLS" ;;
        esac > "$f" 2>&1
    } 2>> "$f"
    case $tool in
        stoa) read -r rps n < <(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["requests_per_second"], j["successful"])' "$f.json") ;;
        *) case $case in
               h1|h1tls) rps=$(awk '/^Requests\/sec:/ {print $2}' "$f"); n=$(awk '/requests in/ {print $1; exit}' "$f") ;;
               h2tls|h2c|h2m|h2cm) rps=$(awk '/^finished in/ {print $4}' "$f"); n=$(awk '/^requests:/ {print $8; exit}' "$f") ;;
               hs) rps=$(awk '/^Requests per second:/ {print $4}' "$f")
                   n=$(awk '/^Complete requests:/ {c = $3} /^Failed requests:/ {x = $3} END {print c - x}' "$f") ;;
           esac ;;
    esac
    awk -v r="$rps" -v n="$n" '/^TIME / {printf "%.0f %.3f %d\n", r, ($2 + $3) * 1e6 / (n > 0 ? n : 1), n}' "$f"
}

declare -A RPS=() CPU=()
for rep in $(seq "$REPS"); do
    for c in $CASES; do
        # Alternate which generator goes first, so that drift on the box hits both.
        order="peer stoa"; [ $((rep % 2)) = 0 ] && order="stoa peer"
        for tool in $order; do
            read -r rps cpu n < <(run "$c" "$tool" "$RUN/raw/$c-$tool-$rep.txt")
            echo "round $rep $c $tool: $rps req/s, $cpu us CPU/request ($n responses; load $(cut -d' ' -f1 /proc/loadavg))" >&2
            RPS[$c,$tool]+="$rps "; CPU[$c,$tool]+="$cpu "
        done
    done
done

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR] = $1} END {if (NR == 0) print "-"; else print a[int((NR + 1) / 2)]}'; }
{
    echo "| case | peer | peer req/s | stoa bench req/s | ratio | peer CPU us/req | stoa bench CPU us/req | ratio |"
    echo "|---|---|---:|---:|---:|---:|---:|---:|"
    for c in $CASES; do
        case $c in
            h1|h1tls) p="wrk -t1" ;; h2tls|h2c) p="h2load -t1 -m1" ;; hs) p="ab (no -k)" ;;
            h2m|h2cm) p="h2load -t1 -c$MCONC -m$STREAMS" ;;
        esac
        pr=$(echo "${RPS[$c,peer]}" | median); sr=$(echo "${RPS[$c,stoa]}" | median)
        pc=$(echo "${CPU[$c,peer]}" | median); sc=$(echo "${CPU[$c,stoa]}" | median)
        echo "| $c | $p | $pr | $sr | $(awk -v a="$sr" -v b="$pr" 'BEGIN {printf "%.2f", a / b}') | $pc | $sc | $(awk -v a="$sc" -v b="$pc" 'BEGIN {printf "%.2f", a / b}') |"
    done
} > "$OUT"
cat "$OUT"
