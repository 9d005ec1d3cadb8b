#!/bin/bash
# bench/access.sh - what the access phase costs on the static path: callgrind instructions per request.
#
# Usage: bench/access.sh [STOA_BINARY]   (default target/release/stoa; as root: installs valgrind)
#
# One binary, three configurations of the same site (bench/static.sh's doc root, lib.sh gen_docroot;
# GET /index.html = 1358 B, the per-worker small-file cache), `workers = 1`, access log off:
#   plain    no access key
#   rules    address_rules = ["allow 127.0.0.0/8", "allow ::1", "deny all"]
#   limited  the same rules and limit_requests = { rate = "1000000/s", burst = 1000000 } (a client-ip
#            table lookup and a GCRA step on every request; never refuses here)
# Each is measured as bench/seam-guard.sh measures (section b): bench/lockstep.py (one keep-alive
# connection, each request sent once the server thread sleeps in epoll_wait), two fresh callgrind
# servers of $IR_N1 and $IR_N2 requests, (Ir(N2) - Ir(N1)) / (N2 - N1), so start-up, the connection
# and shutdown cancel. Issue 22 allows "limited" +10 % over "plain".
# Knobs: PORT=18291 IR_N1=2000 IR_N2=12000 IR_REPS=1 RUN=/tmp/stoa-access-bench OUT=$RUN/results.txt
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
BIN=${1:-$REPO_DIR/target/release/stoa}
[[ $BIN = /* ]] || BIN=$PWD/$BIN
[ -x "$BIN" ] || die "not an executable: $BIN (cargo build --release)"
RUN=${RUN:-/tmp/stoa-access-bench}
OUT=${OUT:-$RUN/results.txt}
PORT=${PORT:-18291} IR_N1=${IR_N1:-2000} IR_N2=${IR_N2:-12000} IR_REPS=${IR_REPS:-1}
ensure_tools valgrind:valgrind curl:curl python3:python3 setpriv:util-linux
AS_NOBODY=()
[ "$(id -u)" = 0 ] && AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups --)

bench_init
rm -rf "$RUN/www" "$RUN/cg" "$RUN/conf"
mkdir -p "$RUN/cg" "$RUN/conf"
chmod 755 "$RUN" "$RUN/conf"; chmod 1777 "$RUN/cg"
W=$RUN/www
gen_docroot "$W"
SIZE=$(stat -c %s "$W/index.html")
port_free "$PORT" || die "port $PORT is in use (PORT=...)"

CONFIGS=(plain rules limited)
for c in "${CONFIGS[@]}"; do
    keys=
    case $c in
        rules)   keys='address_rules = ["allow 127.0.0.0/8", "allow ::1", "deny all"]' ;;
        limited) keys='address_rules = ["allow 127.0.0.0/8", "allow ::1", "deny all"]
limit_requests = { rate = "1000000/s", burst = 1000000 }' ;;
    esac
    cat > "$RUN/conf/$c.toml" <<EOF
# written by bench/access.sh ($c)
listen = ["127.0.0.1:$PORT"]
workers = 1
[log]
access = "off"
[[site]]
root = "$W"
index = ["index.html"]
$keys
EOF
    chmod 644 "$RUN/conf/$c.toml"
done

# ir_run CONFIG N TAG: a callgrind server, N lockstep requests; sets IRV to its Ir total (0: failed)
ir_run() {
    local conf=$1 n=$2 tag=$3 cg=$RUN/cg/$3.out pid i got
    IRV=0
    "${AS_NOBODY[@]}" valgrind --tool=callgrind --vgdb=no "--callgrind-out-file=$cg" "--log-file=$cg.valgrind.log" \
        "$BIN" serve --config "$RUN/conf/$conf.toml" > "$RUN/logs/$tag.out" 2>&1 &
    pid=$!
    SRV_PID[srv]=$pid
    for i in $(seq 300); do
        alive "$pid" || break
        curl -s -o /dev/null --max-time 5 -w '%{http_code}' "http://127.0.0.1:$PORT/index.html" 2>/dev/null | grep -qx 200 && break
        sleep 0.2
    done
    got=$(timeout 600 "$PYTHON" "$BENCH_DIR/lockstep.py" --port "$PORT" --pid "$pid" --path /index.html -n "$n" --size "$SIZE" 2>&1 |
          sed -n 's/.* ok=\([0-9]*\) bad=0 .*/\1/p')
    srv_stop srv
    [ "${got:-0}" = "$n" ] || { warn "$tag: ${got:-0} of $n requests answered 200"; return 0; }
    IRV=$(awk '/^summary:/ {print $2}' "$cg" 2>/dev/null)
    [ -n "$IRV" ] || IRV=0
}

declare -A IR=()
{
    echo "# bench/access.sh $(date '+%F %H:%M %Z')"
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "binary: $BIN (sha256 $(sha256sum "$BIN" | cut -c1-12)); $(valgrind --version); IR_N1=$IR_N1 IR_N2=$IR_N2"
} | tee "$RUN/raw/report.txt"
FAILED=0
for r in $(seq "$IR_REPS"); do
    for c in "${CONFIGS[@]}"; do
        log "$c: callgrind, $IR_N1 and $IR_N2 lockstep requests (round $r)"
        ir_run "$c" "$IR_N1" "$c-$r-n1"; a=$IRV
        ir_run "$c" "$IR_N2" "$c-$r-n2"; b=$IRV
        if [ "$a" -gt 0 ] && [ "$b" -gt 0 ]; then
            v=$(awk -v a="$a" -v b="$b" -v n1="$IR_N1" -v n2="$IR_N2" 'BEGIN {printf "%.0f", (b - a) / (n2 - n1)}')
            IR[$c]+="$v "
            echo "  $c round $r: Ir($IR_N1)=$a Ir($IR_N2)=$b -> $v Ir/request" | tee -a "$RUN/raw/report.txt"
        else
            echo "  $c round $r: FAILED" | tee -a "$RUN/raw/report.txt"; FAILED=1
        fi
    done
done
{
    echo "summary: instructions per request (mean of rounds), against plain"
    for c in "${CONFIGS[@]}"; do
        [ -n "${IR[$c]:-}" ] || continue
        awk -v v="${IR[$c]}" -v p="${IR[plain]:-}" -v c="$c" 'BEGIN {
            n = split(v, x, " "); s = 0; for (k = 1; k <= n; k++) s += x[k]; m = s / n
            np = split(p, y, " "); sp = 0; for (k = 1; k <= np; k++) sp += y[k]
            if (np > 0) printf "  %-8s %8.0f Ir/request (%+.2f %%)\n", c, m, 100 * (m / (sp / np) - 1)
            else printf "  %-8s %8.0f Ir/request\n", c, m }'
    done
} | tee -a "$RUN/raw/report.txt"
srv_stop_all
mkdir -p "$(dirname "$OUT")"
cp "$RUN/raw/report.txt" "$OUT"
log "report: $OUT; callgrind files: $RUN/cg"
[ $FAILED = 0 ]
