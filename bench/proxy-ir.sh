#!/bin/bash
# bench/proxy-ir.sh - instructions per proxied request (callgrind), exact on a busy machine: `stoa serve`
# (one worker, access log off, one `protocol = "http"` pool) in front of tests/proxy-peers/canned.c,
# under `valgrind --tool=callgrind`, loaded by `stoa bench -k -c 10` with N1 then N2 requests against
# fresh servers; Ir per request = (Ir(N2) - Ir(N1)) / (N2 - N1), so start-up and stop cancel out.
#
# Usage: bench/proxy-ir.sh BINARY...   (each binary in turn; ~20 s each)
# Knobs (environment):
#   N1=2000 N2=6000    requests of the two runs
#   PORT=18692 BPORT=18697   Stoa's and the backend's ports
#   RUN=/tmp/stoa-bench-proxy-ir   work folder: callgrind files (callgrind_annotate RUN/NAME-N.out)
#   LOADGEN=first BINARY   the `stoa bench` used as load generator
#   STRACE=1           also count syscalls per request (strace -f -c over an N2 run, not under callgrind)
# Exit status: 0 when every run answered all its requests, else 1.
set -euo pipefail
case ${1:-} in -h|--help|'') sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
N1=${N1:-2000} N2=${N2:-6000} PORT=${PORT:-18692} BPORT=${BPORT:-18697} STRACE=${STRACE:-0}
RUN=${RUN:-/tmp/stoa-bench-proxy-ir}
LOADGEN=${LOADGEN:-$1}
ensure_tools valgrind:valgrind curl:curl cc:gcc
[ "$STRACE" = 1 ] && ensure_tools strace:strace
bench_init
mkdir -p "$RUN/site"
cc -O2 -Wall -o "$RUN/canned" "$REPO_DIR/tests/proxy-peers/canned.c" || die "cannot build canned.c"
cat > "$RUN/stoa.toml" <<EOF
listen = ["127.0.0.1:$PORT"]
workers = 1
user = "root"
[log]
access = "off"
[[pool]]
name = "app"
protocol = "http"
address = ["127.0.0.1:$BPORT"]
[[site]]
root = "$RUN/site"
[[site.route]]
prefix = "/"
proxy = { pool = "app" }
EOF

# one BINARY N TAG [strace]: a fresh backend and server, N requests; prints the Ir total (0 on failure)
one() {
    local bin=$1 n=$2 tag=$3 mode=${4:-callgrind} pre i done=0
    port_free "$PORT" || die "port $PORT is in use (PORT=...)"
    port_free "$BPORT" || die "port $BPORT is in use (BPORT=...)"
    "$RUN/canned" "$BPORT" 13 1 > "$RUN/$tag.canned.log" 2>&1 &
    SRV_PID[canned]=$!
    if [ "$mode" = strace ]; then pre=(strace -f -c -o "$RUN/$tag.strace")
    else pre=(valgrind --tool=callgrind --vgdb=no "--callgrind-out-file=$RUN/$tag.out" "--log-file=$RUN/$tag.vg.log"); fi
    "${pre[@]}" "$bin" serve --config "$RUN/stoa.toml" > "$RUN/$tag.serve.log" 2>&1 &
    SRV_PID[stoa]=$!
    for i in $(seq 300); do
        curl -s -o /dev/null --max-time 5 "http://127.0.0.1:$PORT/" && break
        sleep 0.2
    done
    "$LOADGEN" bench -k -c 10 -n "$n" -q "http://127.0.0.1:$PORT/" > "$RUN/$tag.load" 2>&1 || true
    done=$(awk '/^Complete requests:/ {c = $3} /^Failed requests:/ {f = $3} END {print (f == 0 ? c : 0)}' "$RUN/$tag.load")
    # SIGTERM to the server itself (strace would detach and leave it running); callgrind writes its file.
    if [ "$mode" = strace ]; then kill -TERM "$(pgrep -P "${SRV_PID[stoa]}" | head -1)" 2>/dev/null || true; fi
    srv_stop stoa; srv_stop canned
    [ "$done" = "$n" ] || { warn "$tag: $done of $n requests answered (see $RUN/$tag.load)"; echo 0; return; }
    if [ "$mode" = strace ]; then echo "$n"; else awk '/^summary:/ {print $2}' "$RUN/$tag.out"; fi
}

FAILED=0
for bin in "$@"; do
    [[ $bin = /* ]] || bin=$PWD/$bin
    name=$(basename "$bin")
    a=$(one "$bin" "$N1" "$name-$N1") b=$(one "$bin" "$N2" "$name-$N2")
    if [ "$a" -gt 0 ] && [ "$b" -gt 0 ]; then
        echo "$bin: Ir($N1)=$a Ir($N2)=$b -> $(( (b - a) / (N2 - N1) )) Ir per proxied request"
    else
        echo "$bin: FAILED"; FAILED=1
    fi
    if [ "$STRACE" = 1 ] && [ "$(one "$bin" "$N2" "$name-strace" strace)" = "$N2" ]; then
        awk -v n="$N2" '$1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" && $4 / n >= 0.01 {
            printf "  %s %.3f", $NF, $4 / n } END {print "  (syscalls per request, strace -f -c)"}' "$RUN/$name-strace.strace"
    fi
done
[ "$FAILED" = 0 ]
