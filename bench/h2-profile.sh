#!/bin/bash
# bench/h2-profile.sh - where Stoa's HTTP/2 request goes, by part: instructions per request
# (callgrind, exact on a busy machine) and syscalls per request (strace -c), for `stoa serve` (one
# worker, access log off, bench/conf/stoa-h2.toml) serving index.html (1358 B) to h2load.
#
# Usage: bench/h2-profile.sh BINARY...   (each binary in turn; ~1 min per mode and binary)
# For each MODE of MODES (default "h2c-m10 tls-m10 h2c-m1 h1-m1"; as bench/h2.sh's cases), a fresh
# server under `valgrind --tool=callgrind` is loaded with `h2load -c $CONC -m M -t 1 -n N1`, another
# with -n N2; Ir per request = (Ir(N2) - Ir(N1)) / (N2 - N1), so start-up and stop cancel out. Each
# part of the request (bench/h2-parts.py: inclusive Ir of the functions that make up frame parsing,
# HPACK, the h2 crate's stream store, task spawn and wake-ups, the exchange, the static handler,
# rustls, malloc/free, the syscalls' user-side wrappers, ...) is reported the same way, by
# difference. Then an strace -f -c run of N2 requests: syscalls per request.
# Knobs: N1=2000 N2=6000 CONC=10 MODES=... STRACE=1 (0: skip it), PORT=18616 TLS_PORT=18617,
#   RUN=/tmp/stoa-bench-h2-profile (callgrind files: callgrind_annotate RUN/NAME-MODE-N.out).
# Exit status: 0 when every run answered all its requests, else 1.
set -euo pipefail
case ${1:-} in -h|--help|'') sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
N1=${N1:-2000} N2=${N2:-6000} CONC=${CONC:-10} STRACE=${STRACE:-1}
MODES=${MODES:-h2c-m10 tls-m10 h2c-m1 h1-m1}
PORT=${PORT:-18616} TLS_PORT=${TLS_PORT:-18617}
RUN=${RUN:-/tmp/stoa-bench-h2-profile}
read -r -a MODE_LIST <<< "$MODES"
ensure_tools valgrind:valgrind h2load:nghttp2-client curl:curl python3:python3
[ "$STRACE" = 1 ] && ensure_tools strace:strace
bench_init
rm -rf "$RUN/www"
gen_docroot "$RUN/www"
"$1" cert "$RUN/certs" localhost 127.0.0.1 > /dev/null || die "stoa cert failed"
chmod 644 "$RUN/certs/key.pem"
render_conf "$BENCH_DIR/conf/stoa-h2.toml" "$RUN/stoa.toml" PORT="$PORT" TLS_PORT="$TLS_PORT" ROOT="$RUN/www" WORKERS=1 \
    CERT="$RUN/certs/cert.pem" KEY="$RUN/certs/key.pem"
# as root: stay root (no switch to nobody under valgrind/strace)
echo 'user = "root"' | cat - "$RUN/stoa.toml" > "$RUN/stoa-root.toml"

mode_args() {  # mode_args MODE: "URL H2LOAD_ARGS..."
    local m=${1##*-m}
    case $1 in
        tls-*) echo "https://127.0.0.1:$TLS_PORT/index.html -m $m" ;;
        h2c-*) echo "http://127.0.0.1:$PORT/index.html -m $m" ;;
        h1-*) echo "http://127.0.0.1:$PORT/index.html --h1 -m $m" ;;
        h1tls-*) echo "https://127.0.0.1:$TLS_PORT/index.html --h1 -m $m" ;;
        *) die "unknown mode: $1" ;;
    esac
}

# one BINARY MODE N TAG [strace]: a fresh server, N requests; prints N when all succeeded, else 0
one() {
    local bin=$1 mode=$2 n=$3 tag=$4 how=${5:-callgrind} pre i url args ok
    port_free "$PORT" && port_free "$TLS_PORT" || die "port $PORT or $TLS_PORT is in use (PORT=..., TLS_PORT=...)"
    if [ "$how" = strace ]; then pre=(strace -f -c -o "$RUN/$tag.strace")
    else pre=(valgrind --tool=callgrind --vgdb=no "--callgrind-out-file=$RUN/$tag.out" "--log-file=$RUN/$tag.vg.log"); fi
    "${pre[@]}" "$bin" serve --config "$RUN/stoa-root.toml" > "$RUN/$tag.serve.log" 2>&1 &
    SRV_PID[stoa]=$!
    for i in $(seq 300); do
        curl -sk -o /dev/null --max-time 5 "https://127.0.0.1:$TLS_PORT/" && break
        sleep 0.2
    done
    read -r url args <<< "$(mode_args "$mode")"
    # shellcheck disable=SC2086 # args: h2load options, split on purpose
    timeout 300 h2load -n "$n" -c "$CONC" -t 1 $args "$url" > "$RUN/$tag.load" 2>&1 || true
    ok=$(awk '/^requests:/ {print $8 + 0}' "$RUN/$tag.load")
    # SIGTERM to the server itself (strace would detach and leave it running); callgrind writes its file
    if [ "$how" = strace ]; then kill -TERM "$(pgrep -P "${SRV_PID[stoa]}" | head -1)" 2>/dev/null || true; fi
    srv_stop stoa
    [ "${ok:-0}" = "$n" ] || { warn "$tag: ${ok:-0} of $n requests succeeded (see $RUN/$tag.load)"; echo 0; return; }
    echo "$n"
}

FAILED=0
for bin in "$@"; do
    [[ $bin = /* ]] || bin=$PWD/$bin
    [ -x "$bin" ] || die "not a binary: $bin"
    name=$(basename "$bin")
    for mode in "${MODE_LIST[@]}"; do
        log "$name $mode: callgrind, $N1 and $N2 requests"
        a=$(one "$bin" "$mode" "$N1" "$name-$mode-$N1") b=$(one "$bin" "$mode" "$N2" "$name-$mode-$N2")
        if [ "$a" -gt 0 ] && [ "$b" -gt 0 ]; then
            echo "## $name, $mode: h2load -c $CONC ${mode/*-m/-m }, Ir per request = (Ir($N2) - Ir($N1)) / $(( N2 - N1 ))"
            echo
            "$PYTHON" "$BENCH_DIR/h2-parts.py" "$RUN/$name-$mode-$N1.out" "$RUN/$name-$mode-$N2.out" $(( N2 - N1 ))
        else
            echo "$name $mode: FAILED"; FAILED=1
        fi
        if [ "$STRACE" = 1 ] && [ "$(one "$bin" "$mode" "$N2" "$name-$mode-strace" strace)" = "$N2" ]; then
            echo
            awk -v n="$N2" '$1 ~ /^[0-9.]+$/ && NF >= 5 && $NF != "total" { t += $4; if ($4 / n >= 0.005) printf "%s %.3f, ", $NF, $4 / n } END {printf "(syscalls per request, strace -f -c over %d requests; all: %.2f)\n", n, t / n}' \
                "$RUN/$name-$mode-strace.strace"
        fi
        echo
    done
done
[ "$FAILED" = 0 ]
