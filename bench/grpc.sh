#!/bin/bash
# bench/grpc.sh - gRPC through the proxy: Stoa (an `h2c://` pool) and nginx (`grpc_pass`) in front of
# the same grpcio service (tests/grpc-peers/server.py), one process (worker) each, loaded in alternation.
#
# Usage: bench/grpc.sh   (as root for package installs; ~3 min with the defaults)
# Knobs (environment):
#   PROXIES="stoa nginx"
#   CALLS=20000        unary calls per run (h2load -n)
#   CONC=4 STREAMS=16  h2load -c CONC -m STREAMS: connections, calls in flight on each
#   REPS=5             rounds; each round loads every proxy once, the first one rotating
#   WARM=2000          unrecorded calls per proxy after start
#   PIN=1              proxies on CPU 0, h2load and the service on CPU 1 (taskset); 0: no pinning
#   RUN=/tmp/stoa-bench-grpc  work folder;  OUT=$RUN/results.md  Markdown report (also printed)
#   STOA=target/release/stoa  built with `cargo build --release` when missing or older than the sources
# Ports: service 18690, Stoa 18691, nginx 18692.
#
# Each call is test.Echo/Unary with a 13-byte message (a 5-byte gRPC prefix and "hello, world!"), sent by
# h2load with `content-type: application/grpc` and `te: trailers`. Stoa: workers = 1, access log off,
# the pool's address `h2c://127.0.0.1:18690` (its per-worker HTTP/2 connections); nginx: worker_processes 1,
# access log off, `listen ... http2`, `grpc_pass grpc://` an upstream with `keepalive 32`, and
# `keepalive_requests 1000000` both ways (its default 1000 ends a connection, with GOAWAY, mid-run). Before the runs one
# call of every kind is made through each proxy with a grpcio client and must succeed.
# For every run: calls/s (h2load) and the proxy's CPU time per call = utime+stime (/proc/PID/stat, its
# processes and threads) after minus before the run, per call h2load saw succeed; and, where `perf` works,
# the proxy's instructions per call (perf stat on its processes during the run: steadier than CPU time on
# a busy machine, where cache and scheduling noise inflate both proxies' time).
# Then the streaming check: a server-streaming call of 10 messages sent 100 ms apart, through each
# proxy: the gaps between their arrivals (client.py), which must stay 100 ms (no per-message delay).
# Exit status: 0 if every proxy started and every run was clean (all calls 2xx), else 1.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
RUN=${RUN:-/tmp/stoa-bench-grpc}
OUT=${OUT:-$RUN/results.md}
PROXIES=${PROXIES:-stoa nginx}
CALLS=${CALLS:-20000} CONC=${CONC:-4} STREAMS=${STREAMS:-16} REPS=${REPS:-5} WARM=${WARM:-2000} PIN=${PIN:-1}
STOA=${STOA:-$DEFAULT_STOA}
[[ $STOA = /* ]] || STOA=$PWD/$STOA
PEERS=$REPO_DIR/tests/grpc-peers
PY=/usr/bin/python3
COMMAND="$(for v in PROXIES CALLS CONC STREAMS REPS PIN; do printf '%s=%q ' "$v" "${!v}"; done)bench/grpc.sh"
read -r -a PROXY_LIST <<< "$PROXIES"
declare -A PROXY_PORT=([stoa]=18691 [nginx]=18692)
for p in "${PROXY_LIST[@]}"; do [ -n "${PROXY_PORT[$p]:-}" ] || die "unknown proxy: $p (stoa, nginx)"; done
GPORT=18690

ensure_tools nginx:nginx-light h2load:nghttp2-client curl:curl
"$PY" -c 'import grpc' 2> /dev/null || {
    [ "$(id -u)" = 0 ] || die "python3-grpcio is missing (apt-get install python3-grpcio)"
    wait_for_apt; apt-get install -y python3-grpcio >&2 || die "cannot install python3-grpcio"
}
[[ " $PROXIES " = *" stoa "* ]] && ensure_fresh_stoa
bench_init
rm -rf "$RUN/raw"; mkdir -p "$RUN/raw"

PROXY_CPU=() LOAD_CPU=()
if [ "$PIN" = 1 ]; then
    [ "$(nproc)" -ge 2 ] || die "PIN=1 needs 2 CPUs"
    PROXY_CPU=(taskset -c 0) LOAD_CPU=(taskset -c 1)
fi

# The service.
port_free "$GPORT" || die "service port $GPORT is in use"
"${LOAD_CPU[@]}" "$PY" "$PEERS/server.py" --port "$GPORT" > "$RUN/logs/service.out" 2>&1 &
SRV_PID[service]=$!
for _ in $(seq 100); do grep -q '^listening' "$RUN/logs/service.out" 2> /dev/null && break; sleep 0.1; done
grep -q '^listening' "$RUN/logs/service.out" || die "the gRPC service did not start: $(cat "$RUN/logs/service.out")"

# One call's body: the gRPC message prefix (not compressed, length 13) and the message.
printf '\x00\x00\x00\x00\x0dhello, world!' > "$RUN/call.bin"

proxy_start() {  # proxy_start NAME: NAME in front of the service on its port, answering
    local name=$1 port=${PROXY_PORT[$1]} d=$RUN/$1 i
    port_free "$port" || { warn "$name: port $port is in use"; return 1; }
    rm -rf "$d"; mkdir -p "$d/logs" "$d/tmp"; chmod 755 "$RUN" "$d" "$d/tmp"
    case $name in
        stoa)
            cat > "$d/stoa.toml" <<EOF
listen = ["127.0.0.1:$port"]
workers = 1
[log]
access = "off"
[[pool]]
name = "grpc"
protocol = "http"
address = ["h2c://127.0.0.1:$GPORT"]
[[site]]
root = "$d/tmp"
[[site.route]]
prefix = "/"
proxy = { pool = "grpc" }
EOF
            "${PROXY_CPU[@]}" "$STOA" serve -c "$d/stoa.toml" > "$d/logs/out" 2>&1 &
            ;;
        nginx)
            cat > "$d/nginx.conf" <<EOF
worker_processes 1; daemon off; pid $d/nginx.pid;
error_log $d/logs/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    upstream grpc { server 127.0.0.1:$GPORT; keepalive 32; keepalive_requests 1000000; }
    server {
        listen 127.0.0.1:$port http2;
        keepalive_requests 1000000;
        location / { grpc_pass grpc://grpc; }
    }
}
EOF
            "${PROXY_CPU[@]}" nginx -p "$d" -e "$d/logs/error.log" -c "$d/nginx.conf" > "$d/logs/out" 2>&1 &
            ;;
    esac
    SRV_PID[$name]=$!
    echo "${SRV_PID[$name]}" > "$RUN/pids/$name.pid"
    for i in $(seq 100); do
        [ "$("$PY" "$PEERS/client.py" "127.0.0.1:$port" unary ping 2> /dev/null | head -1)" = echo:ping ] && return 0
        alive "${SRV_PID[$name]}" || break
        sleep 0.1
    done
    warn "$name did not answer a gRPC call: $(tail -n3 "$d/logs/out" "$d/logs/error.log" 2> /dev/null)"
    return 1
}

load() {  # load NAME N OUTFILE: N unary calls through NAME with h2load
    "${LOAD_CPU[@]}" h2load -n "$2" -c "$CONC" -m "$STREAMS" -d "$RUN/call.bin" \
        -H 'content-type: application/grpc' -H 'te: trailers' \
        "http://127.0.0.1:${PROXY_PORT[$1]}/test.Echo/Unary" > "$3" 2>&1 || true
}

STARTED=()
for p in "${PROXY_LIST[@]}"; do
    if proxy_start "$p"; then
        STARTED+=("$p")
        # Every call kind works through it before anything is measured.
        for c in "unary hi" "stream 3,10" "client a,b" "bidi x,y" "trailers"; do
            # shellcheck disable=SC2086
            r=$("$PY" "$PEERS/client.py" "127.0.0.1:${PROXY_PORT[$p]}" $c 2>&1 | tail -1)
            [ "$r" = "status OK" ] || warn "$p: $c: $r"
        done
        load "$p" "$WARM" "$RUN/raw/$p-warm.txt"
    fi
done
[ ${#STARTED[@]} -gt 0 ] || die "no proxy started"

declare -A CPU_SUM=() RATE_SUM=() RUNS=() KI_SUM=() KI_RUNS=()
PERF=0
if command -v perf > /dev/null && perf stat -x, -e instructions -o /dev/null true 2> /dev/null; then PERF=1; fi
CLEAN=1
{
    echo "# bench/grpc.sh - $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Command: \`$COMMAND\`; machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')."
    echo "Service: tests/grpc-peers/server.py (grpcio $("$PY" -c 'import grpc; print(grpc.__version__)')); h2load $(h2load --version | head -1 | awk '{print $2}'); nginx $(nginx -v 2>&1 | cut -d/ -f2)."
    echo
    echo "| round | proxy | calls/s | CPU µs per call | k instructions per call | failed |"
    echo "|---|---|---|---|---|---|"
} > "$OUT.tmp"
n=${#STARTED[@]}
for r in $(seq "$REPS"); do
    for k in $(seq 0 $((n - 1))); do
        p=${STARTED[$(( (k + r) % n ))]}
        f=$RUN/raw/$p-$r.txt
        pp=
        if [ "$PERF" = 1 ]; then
            perf stat -x, -e instructions -p "$(srv_pids "$p" | paste -sd,)" -o "$f.perf" &
            pp=$!
            sleep 0.2
        fi
        t0=$(srv_cpu_ticks "$p")
        load "$p" "$CALLS" "$f"
        t1=$(srv_cpu_ticks "$p")
        ki=-
        if [ -n "$pp" ]; then
            kill -INT "$pp" 2> /dev/null || true
            wait "$pp" 2> /dev/null || true
            ki=$(awk -F, -v n="$CALLS" '$3 ~ /instructions/ && $1 ~ /^[0-9]+$/ { printf "%.1f", $1 / n / 1000 }' "$f.perf")
            ki=${ki:--}
        fi
        ok=$(awk '/^requests:/ {print $8}' "$f"); ok=${ok:-0}
        failed=$(( CALLS - ok ))
        rate=$(awk '/^finished in/ {print $4}' "$f")
        us=-
        if [ "$ok" -gt 0 ]; then
            us=$(awk -v t=$((t1 - t0)) -v hz="$CLK_TCK" -v n="$ok" 'BEGIN { printf "%.1f", t * 1e6 / hz / n }')
            CPU_SUM[$p]=$(awk -v a="${CPU_SUM[$p]:-0}" -v b="$us" 'BEGIN { print a + b }')
            RATE_SUM[$p]=$(awk -v a="${RATE_SUM[$p]:-0}" -v b="${rate:-0}" 'BEGIN { print a + b }')
            RUNS[$p]=$(( ${RUNS[$p]:-0} + 1 ))
            if [ "$ki" != - ]; then
                KI_SUM[$p]=$(awk -v a="${KI_SUM[$p]:-0}" -v b="$ki" 'BEGIN { print a + b }')
                KI_RUNS[$p]=$(( ${KI_RUNS[$p]:-0} + 1 ))
            fi
        fi
        [ "$failed" = 0 ] || CLEAN=0
        log "round $r $p: ${rate:-?} calls/s, $us µs CPU per call, $ki k instructions per call, $failed failed"
        echo "| $r | $p | ${rate:-?} | $us | $ki | $failed |" >> "$OUT.tmp"
    done
done
{
    echo
    echo "| proxy | mean calls/s | mean CPU µs per call | mean k instructions per call |"
    echo "|---|---|---|---|"
    for p in "${STARTED[@]}"; do
        [ -n "${RUNS[$p]:-}" ] || continue
        awk -v p="$p" -v c="${CPU_SUM[$p]}" -v r="${RATE_SUM[$p]}" -v n="${RUNS[$p]}" \
            -v k="${KI_SUM[$p]:-0}" -v kn="${KI_RUNS[$p]:-0}" \
            'BEGIN { printf "| %s | %.0f | %.1f | %s |\n", p, r / n, c / n, kn ? sprintf("%.1f", k / kn) : "-" }'
    done
    if [ -n "${RUNS[stoa]:-}" ] && [ -n "${RUNS[nginx]:-}" ]; then
        awk -v s="${CPU_SUM[stoa]}" -v sn="${RUNS[stoa]}" -v g="${CPU_SUM[nginx]}" -v gn="${RUNS[nginx]}" \
            'BEGIN { printf "\nStoa / nginx CPU per call: %.2fx\n", (s / sn) / (g / gn) }'
        if [ -n "${KI_RUNS[stoa]:-}" ] && [ -n "${KI_RUNS[nginx]:-}" ]; then
            awk -v s="${KI_SUM[stoa]}" -v sn="${KI_RUNS[stoa]}" -v g="${KI_SUM[nginx]}" -v gn="${KI_RUNS[nginx]}" \
                'BEGIN { printf "Stoa / nginx instructions per call: %.2fx\n", (s / sn) / (g / gn) }'
        fi
    fi
    echo
    echo "Server streaming, 10 messages sent 100 ms apart (gaps between arrivals, ms):"
    echo
    for p in "${STARTED[@]}"; do
        gaps=$("$PY" "$PEERS/client.py" "127.0.0.1:${PROXY_PORT[$p]}" stream 10,100 2>&1 |
            awk '/^msg/ { t = substr($2, 2) + 0; if (NR > 1) printf "%s%d", sep, t - last; sep = " "; last = t }')
        echo "- $p: $gaps"
    done
} >> "$OUT.tmp"
mv "$OUT.tmp" "$OUT"
cat "$OUT"
[ "$CLEAN" = 1 ] && [ ${#STARTED[@]} = ${#PROXY_LIST[@]} ]
