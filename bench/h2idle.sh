#!/bin/bash
# bench/h2idle.sh - memory per idle HTTP/2 connection: RSS growth and heap in use (glibc's
# malloc_stats, read through gdb) of `stoa serve` (one worker, access log off) holding N idle
# connections of bench/h2hold.py (one GET of index.html each, then idle), read 2 s after they are
# all set up. Heap in use is what the connections hold; RSS adds the high-water mark their set-up
# burst leaves in the allocator (see docs/BENCHMARKS.md, "Idle HTTP/2 connections park").
#
# Usage: bench/h2idle.sh BINARY...   (each binary in turn, each mode; one line per run)
# Knobs: N=3000 MODES="h2c tls" ROUNDS=1 PORT=18618 RUN=/tmp/stoa-bench-h2idle
set -euo pipefail
case ${1:-} in -h|--help|'') sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
N=${N:-3000} MODES=${MODES:-h2c tls} ROUNDS=${ROUNDS:-1} PORT=${PORT:-18618}
RUN=${RUN:-/tmp/stoa-bench-h2idle}
ensure_tools gdb:gdb curl:curl python3:python3
mkdir -p "$RUN"
rm -rf "$RUN/www"
gen_docroot "$RUN/www"
"$1" cert "$RUN/certs" localhost 127.0.0.1 > /dev/null || die "stoa cert failed"
common="workers = 1\nuser = \"root\"\n[log]\naccess = \"off\"\n"
printf "listen = [\"127.0.0.1:$PORT\"]\n$common[[site]]\nroot = \"$RUN/www\"\n" > "$RUN/h2c.toml"
printf "listen = []\n$common[[tls]]\nlisten = [\"127.0.0.1:$PORT\"]\ncert = \"$RUN/certs/cert.pem\"\nkey = \"$RUN/certs/key.pem\"\n[[site]]\nroot = \"$RUN/www\"\n" > "$RUN/tls.toml"
ulimit -n $(( N + 1000 ))

one() {  # one BINARY MODE
    local bin=$1 mode=$2 log=$RUN/serve.log scheme=http flag= sp hp r0 r1 h0 h1 i
    [ "$mode" = tls ] && scheme=https flag=--tls
    port_free "$PORT" || die "port $PORT is in use (PORT=...)"
    "$bin" serve -c "$RUN/$mode.toml" -w 1 > "$log" 2>&1 & sp=$!
    for i in $(seq 100); do curl -sk -o /dev/null --max-time 2 "$scheme://127.0.0.1:$PORT/" && break; sleep 0.1; done
    curl -sk -o /dev/null --http2-prior-knowledge "$scheme://127.0.0.1:$PORT/index.html" || true
    curl -sk -o /dev/null --http2 "$scheme://127.0.0.1:$PORT/index.html" || true
    rss() { awk '/VmRSS/{print $2}' "/proc/$sp/status"; }
    inuse() {  # "in use bytes" of malloc_stats' total, which the server prints on its stderr
        local from
        from=$(wc -l < "$log")
        gdb -p "$sp" -batch -ex 'call (void)malloc_stats()' > /dev/null 2>&1
        sleep 0.3
        tail -n +$(( from + 1 )) "$log" | awk '/in use bytes/{v=$NF} END{print v+0}'
    }
    r0=$(rss); h0=$(inuse)
    python3 "$BENCH_DIR/h2hold.py" --port "$PORT" --conns "$N" --path /index.html --size 1358 $flag \
        --max-time 120 > "$RUN/hold.out" 2>&1 & hp=$!
    for i in $(seq 600); do grep -q READY "$RUN/hold.out" && break; sleep 0.2; done
    sleep 2
    r1=$(rss); h1=$(inuse)
    echo "$(basename "$bin") $mode: $(grep READY "$RUN/hold.out" | cut -c1-40); heap in use $(( (h1 - h0) / N )) B/conn; RSS $(( (r1 - r0) * 1024 / N )) B/conn"
    kill "$hp"; wait "$hp" 2>/dev/null || true
    kill "$sp"; wait "$sp" 2>/dev/null || true
}

for round in $(seq "$ROUNDS"); do
    for mode in $MODES; do
        for bin in "$@"; do one "$bin" "$mode"; done
    done
done
