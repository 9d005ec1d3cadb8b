#!/bin/bash
# bench/h3.sh - HTTP/3 under load: Stoa (one worker) against Caddy 2.6 (Debian `caddy`, GOMAXPROCS=1:
# one server process on one core each), measured with `stoa bench --http3`, and Stoa's own HTTP/2 over
# TLS (`stoa bench --http2`) at the same settings. For each run: requests/s (or MB/s for the download)
# from the generator, the SERVER's CPU time (utime+stime from /proc) per request (or per MB), and the
# generator's own (user+system of the child, bash's `time`): whether the client or the server limits.
# Servers alternate inside each round; medians over ROUNDS are printed.
#
# Cases (CASES):
#   small   the 1358-byte file, -c CONC connections x --streams STREAMS, DUR seconds
#   small1  the same file, -c CONC connections, one stream each (--streams 1)
#   big     a MB-megabyte download, BIGN times, one connection (throughput and CPU per MB)
# Each case runs Stoa h3, Caddy h3 and Stoa h2 (TLS, ALPN h2).
#
# Usage: bench/h3.sh STOA_SERVER [GENERATOR]
#   STOA_SERVER  the server binary (e.g. /work/stoa-bin/stoa)
#   GENERATOR    the load generator: a `stoa` binary (its `bench` command is used) or stoa-bench's
#                example binary (target/release/examples/bench); default: STOA_SERVER
# Knobs (environment):
#   DUR=5 ROUNDS=3 CONC=10 STREAMS=10 MB=100 BIGN=3 CASES="small small1 big"
#   PORT=18920   Stoa's port (TCP and UDP); Caddy gets PORT+1
#   RUN=/tmp/stoa-bench-h3   work folder
#   TASKSET="taskset -c 0"   prefix for the servers (default none), GEN_TASKSET for the generator
set -euo pipefail
case ${1:-} in -h|--help|'') sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
STOA=$(realpath "$1")
GEN=$(realpath "${2:-$1}")
# stoa-bench's example is named `bench`; any other name is a `stoa` binary (copies are often renamed).
case $(basename "$GEN") in bench*) GENCMD=("$GEN") ;; *) GENCMD=("$GEN" bench) ;; esac
DUR=${DUR:-5} ROUNDS=${ROUNDS:-3} CONC=${CONC:-10} STREAMS=${STREAMS:-10} MB=${MB:-100} BIGN=${BIGN:-3}
CASES=${CASES:-small small1 big}
PORT=${PORT:-18920}
CPORT=$((PORT + 1))
RUN=${RUN:-/tmp/stoa-bench-h3}
TASKSET=${TASKSET:-} GEN_TASKSET=${GEN_TASKSET:-}
for t in caddy openssl python3 curl; do
    command -v $t >/dev/null || { echo "bench/h3.sh: needs $t" >&2; exit 2; }
done
mkdir -p "$RUN/www"
head -c 1358 /dev/urandom > "$RUN/www/f1358.bin"
[ "$(stat -c %s "$RUN/www/big.bin" 2>/dev/null || echo 0)" = $((MB << 20)) ] ||
    head -c $((MB << 20)) /dev/urandom > "$RUN/www/big.bin"
[ -f "$RUN/cert.pem" ] || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$RUN/key.pem" -out "$RUN/cert.pem" 2>/dev/null
printf '%s\n' 'workers = 1' 'user = "root"' '[log]' 'access = "off"' '[[tls]]' \
    "listen = [\"127.0.0.1:$PORT\"]" "cert = \"$RUN/cert.pem\"" "key = \"$RUN/key.pem\"" \
    'protocols = ["h3", "h2", "http/1.1"]' '[[site]]' "root = \"$RUN/www\"" > "$RUN/stoa.toml"
printf '%s\n' '{' '	admin off' '	auto_https disable_redirects' '	servers {' '		protocols h1 h2 h3' \
    '	}' '	log {' '		output discard' '	}' '}' "https://localhost:$CPORT {" '	bind 127.0.0.1' \
    "	tls $RUN/cert.pem $RUN/key.pem" "	root * $RUN/www" '	file_server' '}' > "$RUN/Caddyfile"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
SRV=
stop() {
    if [ -n "$SRV" ]; then kill "$SRV" 2>/dev/null || true; wait "$SRV" 2>/dev/null || true; fi
    SRV=
}
trap stop EXIT
start() { # start NAME: the server's pid in SRV and its port in P, once it answers over h3
    # Another server left on the port would share it (SO_REUSEPORT) and take part of the load
    # unmeasured: refuse to run instead.
    local p=$PORT
    [ "$1" = caddy ] && p=$CPORT
    if [ -n "$(ss -HlnTu "sport = :$p" 2>/dev/null)" ]; then
        echo "bench/h3.sh: port $p is in use (a server left from an earlier run?): PORT=..." >&2
        exit 1
    fi
    case $1 in
        stoa) $TASKSET "$STOA" serve --config "$RUN/stoa.toml" 2>"$RUN/stoa.err" & SRV=$! P=$PORT ;;
        caddy) GOMAXPROCS=1 XDG_CONFIG_HOME=$RUN/caddy-config XDG_DATA_HOME=$RUN/caddy-data \
            $TASKSET caddy run --config "$RUN/Caddyfile" --adapter caddyfile 2>"$RUN/caddy.err" &
            SRV=$! P=$CPORT ;;
    esac
    for _ in $(seq 100); do
        if curl -sk -o /dev/null "https://127.0.0.1:$P/f1358.bin" &&
            "${GENCMD[@]}" -q --http3 --insecure -n 1 "https://localhost:$P/f1358.bin" >/dev/null 2>&1; then
            return 0
        fi
        sleep 0.1
    done
    echo "bench/h3.sh: $1 did not start" >&2
    exit 1
}
# measure CASE NAME PROTO: one line "CASE NAME PROTO req/s MB/s server-us/req server-ms/MB"
measure() {
    local case=$1 name=$2 proto=$3 before after flag args
    flag=--http3
    [ "$proto" = h2 ] && flag=--http2
    case $case in
        small) args=(-c "$CONC" --streams "$STREAMS" -d "$DUR" "https://localhost:PORT/f1358.bin") ;;
        small1) args=(-c "$CONC" -d "$DUR" "https://localhost:PORT/f1358.bin") ;;
        big) args=(-n "$BIGN" -c 1 "https://localhost:PORT/big.bin") ;;
    esac
    start "$name"
    args=("${args[@]/PORT/$P}")
    # Warm-up: the file cache, the code paths.
    "${GENCMD[@]}" -q $flag --insecure -c 2 -n 200 "https://localhost:$P/f1358.bin" >/dev/null
    before=$(ticks "$SRV")
    # The generator's own CPU (user + system, bash's `time` of the child).
    local TIMEFORMAT='%U %S'
    { time $GEN_TASKSET "${GENCMD[@]}" -q $flag --insecure -s 60 --json "$RUN/run.json" "${args[@]}" \
        >/dev/null 2>"$RUN/gen.err"; } 2>"$RUN/gen.time"
    after=$(ticks "$SRV")
    stop
    python3 - "$RUN/run.json" "$case" "$name" "$proto" $((after - before)) "$HZ" "$RUN/gen.time" <<'EOF'
import json, sys
v = json.load(open(sys.argv[1]))
gen_us = sum(float(x) for x in open(sys.argv[7]).read().split()) * 1e6
case, name, proto, ticks, hz = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
ok = v["successful"]
if v["failed"] or ok == 0:
    sys.exit(f"bench/h3.sh: {case} {name} {proto}: {v['failed']} failed, {ok} successful: {v['errors']}")
cpu_us = ticks * 1e6 / hz
mb = v["bytes"]["body"] / 2**20
print(f"{case} {name} {proto} {v['requests_per_second']:.0f} {mb / v['duration_s']:.1f} "
      f"{cpu_us / ok:.1f} {cpu_us / 1000 / mb:.2f} {gen_us / ok:.1f} {gen_us / 1000 / mb:.2f}")
EOF
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "generator: ${GENCMD[*]}; server: $STOA; caddy $(caddy version | cut -d' ' -f1)"
: > "$RUN/results"
for r in $(seq "$ROUNDS"); do
    for c in $CASES; do
        for run in "stoa h3" "caddy h3" "stoa h2"; do
            set -- $run
            measure "$c" "$1" "$2" >> "$RUN/results"
            echo "round $r: $(tail -1 "$RUN/results")"
        done
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "medians over $ROUNDS rounds (case server protocol: req/s, MB/s, server CPU per request and per MB, generator CPU per request and per MB):"
python3 - "$RUN/results" <<'EOF'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    c, n, p, *x = line.split()
    rows.setdefault((c, n, p), []).append([float(a) for a in x])
for (c, n, p), xs in rows.items():
    med = [statistics.median(col) for col in zip(*xs)]
    runs = " / ".join(f"{x[2]:g}" for x in xs)
    print(f"{c:7} {n:6} {p}: {med[0]:9.0f} req/s {med[1]:7.1f} MB/s | server {med[2]:8.1f} us/req "
          f"{med[3]:7.2f} ms/MB | generator {med[4]:8.1f} us/req {med[5]:7.2f} ms/MB   "
          f"(server us/req runs: {runs})")
EOF
