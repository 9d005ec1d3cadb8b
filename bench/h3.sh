#!/bin/bash
# bench/h3.sh - HTTP/3 server CPU per request and per MB: Stoa (one worker) against Caddy 2.6 (Debian
# `caddy`), both over HTTP/3 on the same 1358-byte file with the same client, and Stoa's HTTP/3 against
# its own HTTP/2 over TLS (h2load). The client is aioquic's (crates/stoa/tests/h3_support/h3get.py in a
# venv, as the tests use it): Debian's h2load has no QUIC, and `stoa bench` speaks no HTTP/3 yet. A
# Python client is slow, so throughput is the client's; what is measured is the SERVER's CPU time
# (utime+stime from /proc) per request: requests go one after another on one connection, the same
# pattern for every server. Rounds alternate the servers; the median of ROUNDS is printed.
#
# Usage: bench/h3.sh STOA_BINARY
# Knobs (environment):
#   N=2000        requests per run (small file)
#   MB=20         size of the download run (server CPU per MB)
#   ROUNDS=3      alternating rounds
#   PORT=18845    Stoa's port (TCP and UDP); Caddy gets PORT+1
#   RUN=/tmp/stoa-bench-h3   work folder
#   VENV=RUN/venv            the aioquic venv (made when missing: pip install aioquic==1.7.2)
set -euo pipefail
case ${1:-} in -h|--help|'') sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
STOA=$(realpath "$1")
N=${N:-2000} MB=${MB:-20} ROUNDS=${ROUNDS:-3} PORT=${PORT:-18845}
CPORT=$((PORT + 1))
RUN=${RUN:-/tmp/stoa-bench-h3}
VENV=${VENV:-$RUN/venv}
HERE=$(cd "$(dirname "$0")" && pwd)
H3GET=$HERE/../crates/stoa/tests/h3_support/h3get.py
for t in caddy h2load openssl python3 curl; do
    command -v $t >/dev/null || { echo "bench/h3.sh: needs $t" >&2; exit 2; }
done
mkdir -p "$RUN/www"
[ -x "$VENV/bin/python" ] || { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q aioquic==1.7.2; }
PY=$VENV/bin/python
head -c 1358 /dev/urandom > "$RUN/www/f1358.bin"
head -c $((MB << 20)) /dev/urandom > "$RUN/www/big.bin"
[ -f "$RUN/cert.pem" ] || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
    -keyout "$RUN/key.pem" -out "$RUN/cert.pem" 2>/dev/null
printf '%s\n' 'workers = 1' 'user = "root"' '[log]' 'access = "off"' '[[tls]]' \
    "listen = [\"127.0.0.1:$PORT\"]" "cert = \"$RUN/cert.pem\"" "key = \"$RUN/key.pem\"" \
    'protocols = ["h3", "h2", "http/1.1"]' '[[site]]' "root = \"$RUN/www\"" > "$RUN/stoa.toml"
printf '%s\n' '{' '	admin off' '	auto_https disable_redirects' '	servers {' '		protocols h1 h2 h3' \
    '	}' '	log {' '		output discard' '	}' '}' "https://:$CPORT {" '	bind 127.0.0.1' \
    "	tls $RUN/cert.pem $RUN/key.pem" "	root * $RUN/www" '	file_server' '}' > "$RUN/Caddyfile"
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
SRV=
stop() {
    if [ -n "$SRV" ]; then kill "$SRV" 2>/dev/null || true; wait "$SRV" 2>/dev/null || true; fi
    SRV=
}
trap stop EXIT
start() { # start NAME: the server's pid in SRV and its port in P, once it answers
    case $1 in
        stoa) "$STOA" serve --config "$RUN/stoa.toml" 2>"$RUN/stoa.err" & SRV=$! P=$PORT ;;
        caddy) caddy run --config "$RUN/Caddyfile" --adapter caddyfile 2>"$RUN/caddy.err" & SRV=$! P=$CPORT ;;
    esac
    for _ in $(seq 100); do
        curl -sk -o /dev/null "https://127.0.0.1:$P/f1358.bin" && return 0
        sleep 0.1
    done
    echo "bench/h3.sh: $1 did not start" >&2
    exit 1
}
# measure NAME PROTO WHAT: the server's CPU microseconds per request (small) or per MB (big)
measure() {
    local name=$1 proto=$2 what=$3 before after n=$N want=$N ok
    [ "$what" = big ] && n=$MB want=1
    start "$name"
    # Warm-up: a handshake, the file cache.
    "$PY" "$H3GET" --port "$P" --count 20 /f1358.bin > /dev/null
    before=$(ticks "$SRV")
    case $proto/$what in
        # A 200 with the whole file: Caddy answers a name no site has with
        # an empty 200.
        h3/small) ok=$("$PY" "$H3GET" --port "$P" --count "$N" /f1358.bin |
            grep -c '"status": 200, .*"length": 1358,') ;;
        h3/big) ok=$("$PY" "$H3GET" --port "$P" --timeout 600 /big.bin |
            grep -c "\"status\": 200, .*\"length\": $((MB << 20)),") ;;
        h2/small) ok=$(h2load -n "$N" -c 1 -m 1 "https://127.0.0.1:$P/f1358.bin" |
            grep -o '[0-9]* succeeded' | cut -d' ' -f1) ;;
    esac
    after=$(ticks "$SRV")
    stop
    [ "$ok" = "$want" ] || { echo "bench/h3.sh: $name $proto $what: $ok answers of $want" >&2; exit 1; }
    echo $(((after - before) * 1000000 / HZ / n))
}
median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
: > "$RUN/results"
for r in $(seq "$ROUNDS"); do
    for run in "stoa h3 small" "caddy h3 small" "stoa h2 small" "stoa h3 big" "caddy h3 big"; do
        set -- $run
        echo "$1-$2-$3 $(measure "$1" "$2" "$3")" >> "$RUN/results"
    done
    echo "round $r: $(tail -5 "$RUN/results" | tr '\n' ' ')"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
for k in stoa-h3-small caddy-h3-small stoa-h2-small stoa-h3-big caddy-h3-big; do
    unit=us/request
    case $k in *big) unit=us/MB ;; esac
    vals=$(awk -v k="$k" '$1 == k {print $2}' "$RUN/results")
    echo "$k: median $(echo "$vals" | median) $unit (runs: $(echo $vals))"
done
