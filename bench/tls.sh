#!/bin/bash
# bench/tls.sh - TLS and HTTP/2: Stoa against nginx (`ssl` + `http2`), one worker each, on loopback,
# the same certificate (ECDSA P-256 from `stoa cert`) and doc root (bench/lib.sh gen_docroot).
#
# Usage: bench/tls.sh        (as root for package installs; ~8 min with the defaults on a quiet box)
#        QUICK=1 bench/tls.sh   (a short run that proves the script works: small counts, 1 round)
# Cases (CASES, in this order):
#   h2        h2load -n $H2N -c $H2C -m $H2M on index.html (1358 B): HTTP/2 over TLS, multiplexed
#   h1        wrk -t1 -c$CONC -d$DUR on index.html: HTTPS/1.1 keep-alive (no ALPN: HTTP/1.1)
#   full      openssl s_time -new: a full handshake (ECDHE + ECDSA) and one GET per connection,
#             $HS_PROCS clients in parallel for $HS_TIME s: new TLS connections per second
#   resumed   openssl s_time -reuse: the same with session resumption (TLS 1.3 tickets)
#   big       wrk -t1 -c$BIG_CONC -d$DUR on 1048576.html (1 MiB) over HTTPS/1.1
#   big-h2    h2load -n $BIG_N -c $BIG_CONC -m 1 on 1048576.html over HTTP/2
# Knobs (environment): SERVERS="nginx stoa-w1", REPS=3 (rounds; cells show the median), H2N=200000
#   H2C=60 H2M=10, DUR=10s CONC=60, HS_TIME=10 HS_PROCS=2, BIG_CONC=10 BIG_N=5000,
#   QUIET_MAX=20 QUIET_PCT=15 (wait up to QUIET_MAX s before each run for the box to be < QUIET_PCT %
#   busy), WAIT_OTHERS=300 (wait up to this many s at start for other load generators to finish; 0:
#   do not wait, the figures are then provisional), RUN=/tmp/stoa-bench-tls, OUT=$RUN/results.md,
#   STOA=target/release/stoa (built when missing).
# Ports: nginx 19443, stoa-w* 19444, 19445, ... (PORT_nginx=..., PORT_stoa_w1=... override).
#
# Rounds alternate: in each round every case runs on every server, the starting server rotating from
# case to case, one server process each for the whole script. For every run: requests (or
# connections) per second, and the server's CPU per request (per connection for full/resumed) =
# utime+stime of all its processes (/proc/PID/stat) after minus before, divided by what completed;
# "other" is the CPU everything else on the box used meanwhile (% of a core): a busy box makes the
# figures provisional. The report gives the medians and Stoa / nginx ratios.
# Exit status: 0 if every server started, every check passed and every run completed without errors.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
RUN=${RUN:-/tmp/stoa-bench-tls}
OUT=${OUT:-$RUN/results.md}
SERVERS=${SERVERS:-nginx stoa-w1}
if [ "${QUICK:-0}" = 1 ]; then
    : "${REPS:=1}" "${H2N:=20000}" "${DUR:=3s}" "${HS_TIME:=3}" "${BIG_N:=500}" "${QUIET_MAX:=2}"
fi
REPS=${REPS:-3} H2N=${H2N:-200000} H2C=${H2C:-60} H2M=${H2M:-10} DUR=${DUR:-10s} CONC=${CONC:-60}
HS_TIME=${HS_TIME:-10} HS_PROCS=${HS_PROCS:-2} BIG_CONC=${BIG_CONC:-10} BIG_N=${BIG_N:-5000}
QUIET_MAX=${QUIET_MAX:-20} QUIET_PCT=${QUIET_PCT:-15} WAIT_OTHERS=${WAIT_OTHERS:-300}
CASES=${CASES:-h2 h1 full resumed big big-h2}
STOA=${STOA:-$DEFAULT_STOA}
[[ $STOA = /* ]] || STOA=$PWD/$STOA
COMMAND="$(for v in SERVERS CASES REPS H2N H2C H2M DUR CONC HS_TIME HS_PROCS BIG_CONC BIG_N QUIET_MAX WAIT_OTHERS; do
    d=$(eval "echo \${$v}"); printf '%s=%q ' "$v" "$d"; done)bench/tls.sh"
read -r -a SRVS <<< "$SERVERS"
read -r -a CASE_LIST <<< "$CASES"
export QUIET_MAX QUIET_PCT

ensure_tools nginx:nginx-light wrk:wrk h2load:nghttp2-client openssl:openssl curl:curl python3:python3
[[ " $SERVERS " = *" stoa"* ]] && ensure_fresh_stoa
NOFILE=$(raise_nofile 65536)

bench_init
rm -rf "$RUN/raw" "$RUN/www" "$RUN/logs"/*; mkdir -p "$RUN/raw" "$RUN/nginx-tmp"
W=$RUN/www
gen_docroot "$W"
"$STOA" cert "$RUN/certs" localhost 127.0.0.1 > /dev/null || die "stoa cert failed"
chmod 644 "$RUN/certs/key.pem"   # nginx's master reads it as root, Stoa before it drops root
CERT=$RUN/certs/cert.pem KEY=$RUN/certs/key.pem
if [ "${WAIT_OTHERS:-300}" = 0 ]; then
    others=$(for p in wrk ab h2load oha; do pgrep -ax "$p"; done; pgrep -af '^[^ ]*stoa bench' || true)
    [ -z "$others" ] || warn "other load generators are running (WAIT_OTHERS=0): the figures are provisional"
else
    wait_no_other_load "${WAIT_OTHERS:-300}"
fi

seq_port=0
for s in "${SRVS[@]}"; do
    case $s in
        nginx) SRV_PORT[$s]=19443 ;;
        stoa-w[0-9]*) SRV_PORT[$s]=$(( 19444 + seq_port )); seq_port=$(( seq_port + 1 )) ;;
        *) die "unknown server name: $s (nginx, stoa-wN)" ;;
    esac
    v=PORT_${s//-/_}
    [ -z "${!v:-}" ] || SRV_PORT[$s]=${!v}
done

tls_start() {  # tls_start NAME: start over TLS, wait until it answers https
    local name=$1 port=${SRV_PORT[$1]} pid i
    port_free "$port" || { warn "$name: port $port is already in use"; return 1; }
    case $name in
        nginx)
            render_conf "$BENCH_DIR/conf/nginx-tls.conf" "$RUN/nginx-tls.conf" RUN="$RUN" PORT="$port" ROOT="$W" \
                NOFILE="$NOFILE" WORKER_CONNS=$(( NOFILE < 16384 ? NOFILE - 64 : 16384 )) CERT="$CERT" KEY="$KEY"
            nginx -p "$RUN" -e "$RUN/logs/nginx-error.log" -c "$RUN/nginx-tls.conf" > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
        stoa-w*)
            render_conf "$BENCH_DIR/conf/stoa-tls.toml" "$RUN/$name.toml" PORT="$port" ROOT="$W" \
                WORKERS="${name#stoa-w}" CERT="$CERT" KEY="$KEY"
            "$STOA" serve --config "$RUN/$name.toml" > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
    esac
    SRV_PID[$name]=$pid
    echo "$pid" > "$RUN/pids/$name.pid"
    srv_ready "$name" "https://127.0.0.1:$port/" -k
}

tls_check() {  # tls_check NAME: every file, over HTTP/2 and HTTP/1.1, 200 and byte-identical
    local port=${SRV_PORT[$1]} f proto want got ok=0
    for f in index.html 1048576.html; do
        for proto in "--http2 2" "--http1.1 1.1"; do
            want=${proto#* }
            got=$(curl -sk --max-time 10 ${proto% *} -o "$RUN/raw/check-body" -w '%{http_code} %{http_version}' \
                "https://127.0.0.1:$port/$f") || got="curl failed"
            if [ "$got" != "200 $want" ] || ! cmp -s "$RUN/raw/check-body" "$W/$f"; then
                warn "$1: /$f ${proto% *}: $got, body $(cmp -s "$RUN/raw/check-body" "$W/$f" && echo same || echo differs)"
                ok=1
            fi
        done
    done
    return $ok
}

# measure SERVER RAWFILE CMD...: runs CMD (output to RAWFILE), sets M_TICKS (server CPU ticks),
# M_SECS (wall), M_LGCPU (load generator CPU, % of a core), M_OTHER (CPU of everything else, % of a
# core), M_RC
measure() {
    local srv=$1 f=$2 t0 t1 st0 st1 tm i boxt=0
    shift 2
    st0=($(head -1 /proc/stat)); t0=$(srv_cpu_ticks "$srv")
    local TIMEFORMAT='TIME %3U %3S %3R'
    M_RC=0
    { time "$@" > "$f" 2>&1; } 2>> "$f" || M_RC=$?
    t1=$(srv_cpu_ticks "$srv"); st1=($(head -1 /proc/stat))
    tm=($(awk '/^TIME / {print $2, $3, $4}' "$f"))
    M_SECS=${tm[2]:-0} M_TICKS=$(( t1 - t0 ))
    M_LGCPU=$(awk -v u="${tm[0]:-0}" -v s="${tm[1]:-0}" -v r="${tm[2]:-0}" 'BEGIN {printf "%.0f", (r > 0 ? 100 * (u + s) / r : 0)}')
    for i in 1 2 3 6 7 8; do boxt=$(( boxt + st1[i] - st0[i] )); done
    M_OTHER=$(awk -v b="$boxt" -v srv="$M_TICKS" -v u="${tm[0]:-0}" -v s="${tm[1]:-0}" -v r="${tm[2]:-0}" -v hz="$CLK_TCK" \
        'BEGIN {o = (b - srv - (u + s) * hz) / (r > 0 ? r * hz : 1) * 100; printf "%.0f", (o < 0 ? 0 : o)}')
}

s_time_par() {  # s_time_par PORT MODE OUTPREFIX: $HS_PROCS `openssl s_time` in parallel, their outputs
    local port=$1 mode=$2 out=$3 i pids=()
    for i in $(seq "$HS_PROCS"); do
        openssl s_time -connect "127.0.0.1:$port" "$mode" -time "$HS_TIME" -www /index.html > "$out.$i" 2>&1 &
        pids+=($!)
    done
    for i in "${pids[@]}"; do wait "$i"; done
    cat "$out".*
}

# one_case SERVER CASE RAWFILE: sets R_STATUS R_RATE (per second: over h2load's own time for h2load,
# else over the wall time of the run) R_DONE (requests or connections) R_USREQ (server CPU us per
# request/connection: all of the server's CPU during the run) R_EXTRA (MB/s, 1 MiB cases) and M_*
one_case() {
    local srv=$1 c=$2 f=$3 port=${SRV_PORT[$1]} x
    R_STATUS=ok R_RATE=- R_DONE=0 R_USREQ=- R_EXTRA=- R_SECS=
    local url=https://127.0.0.1:$port/index.html big=https://127.0.0.1:$port/1048576.html
    case $c in
        h2|big-h2)
            local n=$H2N cc=$H2C m=$H2M u=$url
            [ "$c" = big-h2 ] && { n=$BIG_N cc=$BIG_CONC m=1 u=$big; }
            measure "$srv" "$f" timeout 600 h2load -n "$n" -c "$cc" -m "$m" "$u"
            grep -q '^Application protocol: h2' "$f" || R_STATUS="not h2: $(grep -m1 -i 'protocol' "$f" || echo '?')"
            # "requests: N total, N started, N done, N succeeded, F failed, E errored, T timeout"
            x=($(awk '/^requests:/ {print $8 + 0, $10 + 0, $12 + 0}' "$f"))
            R_DONE=${x[0]:-0}
            [ "${x[0]:-}" = "$n" ] && [ "${x[1]}" = 0 ] && [ "${x[2]}" = 0 ] ||
                R_STATUS="h2load: ${x[0]:-0} of $n succeeded, ${x[1]:--} failed, ${x[2]:--} errored"
            # The rate over h2load's own time (from the first connection to the last response).
            R_SECS=$(awk '/^finished in/ {t = $3; sub(/,$/, "", t); if (t ~ /ms$/) {sub(/ms$/, "", t); t /= 1000} else sub(/s$/, "", t); print t}' "$f")
            ;;
        h1|big)
            local u=$url cc=$CONC
            [ "$c" = big ] && { u=$big; cc=$BIG_CONC; }
            measure "$srv" "$f" timeout $(( $(dur_secs "$DUR") + 30 )) wrk -t1 -c"$cc" -d"$DUR" -s "$BENCH_DIR/wrk-report.lua" "$u"
            x=($(awk '/^RESULT / {print $2, $3, $4, $5, $6 + $7 + $8 + $9}' "$f"))
            if [ ${#x[@]} = 5 ]; then
                R_DONE=${x[0]}
                [ "${x[3]}" = 0 ] && [ "${x[4]}" = 0 ] || R_STATUS="wrk: non-2xx ${x[3]}, socket errors ${x[4]}"
            else
                R_STATUS="wrk failed (rc $M_RC)"
            fi
            ;;
        full|resumed)
            local mode=-new
            [ "$c" = resumed ] && mode=-reuse
            measure "$srv" "$f" s_time_par "$port" "$mode" "$f"
            # "N connections in T real seconds, B bytes read per connection"
            R_DONE=$(awk '/connections in .* real seconds/ {n += $1} END {print n + 0}' "$f")
            [ "$R_DONE" -gt 0 ] || R_STATUS="s_time made no connection: $(grep -m1 -iE 'error|refused' "$f" || tail -n1 "$f")"
            if [ "$c" = resumed ] && ! grep -q 'reuse' "$f"; then R_STATUS="s_time did not time reuse"; fi
            ;;
        *) die "unknown case: $c" ;;
    esac
    [ "$M_RC" = 0 ] || [ "$R_STATUS" != ok ] || R_STATUS="exit code $M_RC"
    if [ "$R_DONE" -gt 0 ]; then
        R_RATE=$(awk -v n="$R_DONE" -v s="${R_SECS:-$M_SECS}" 'BEGIN {printf "%.0f", (s > 0 ? n / s : 0)}')
        R_USREQ=$(awk -v t="$M_TICKS" -v n="$R_DONE" -v hz="$CLK_TCK" 'BEGIN {printf "%.2f", t * 1e6 / hz / n}')
        case $c in big|big-h2) R_EXTRA=$(awk -v r="$R_RATE" 'BEGIN {printf "%.0f", r * 1048576 / 1e6}') ;; esac
    fi
    srv_alive "$srv" || R_STATUS="SERVER DIED"
}

STOA_VERSION="stoa: not run"
if [[ " $SERVERS " = *" stoa"* ]]; then
    STOA_VERSION="stoa at commit $(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo '(none)')"
    git -C "$REPO_DIR" status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null | grep -q . && STOA_VERSION+=" + uncommitted changes"
    STOA_VERSION+=", binary $STOA built $(stat -c '%y' "$STOA" | cut -c1-19)"
fi
FAILED=0 UP=()
for s in "${SRVS[@]}"; do
    log "starting $s on https://127.0.0.1:${SRV_PORT[$s]}/"
    tls_start "$s" || { FAILED=1; continue; }
    tls_check "$s" || FAILED=1
    UP+=("$s")
done
[ ${#UP[@]} -gt 0 ] || die "no server came up"
for s in "${UP[@]}"; do  # warm-up, not recorded
    timeout 60 h2load -n 2000 -c 10 -m 10 "https://127.0.0.1:${SRV_PORT[$s]}/index.html" > "$RUN/raw/warmup-$s.txt" 2>&1 ||
        warn "$s: warm-up failed: $(tail -n1 "$RUN/raw/warmup-$s.txt")"
done

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
RUNS_TSV=$RUN/raw/runs.tsv
printf 'rep\tcase\tserver\tstatus\trate\tdone\tus_per_req\tmb_s\tloadgen_cpu\tbusy\tother\tsecs\n' > "$RUNS_TSV"
k=0 n=${#UP[@]} total=$(( REPS * ${#CASE_LIST[@]} ))
for rep in $(seq "$REPS"); do
    for c in "${CASE_LIST[@]}"; do
        k=$(( k + 1 ))
        for i in $(seq 0 $(( n - 1 ))); do
            s=${UP[$(( (i + k - 1) % n ))]}
            BUSY=$(wait_quiet)
            if srv_alive "$s"; then one_case "$s" "$c" "$RUN/raw/$s-$c-$rep.txt"
            else R_STATUS="SERVER DIED" R_RATE=- R_DONE=0 R_USREQ=- R_EXTRA=- M_LGCPU=- M_OTHER=- M_SECS=-; fi
            [ "$R_STATUS" = ok ] || FAILED=1
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$c" "$s" "$R_STATUS" "$R_RATE" "$R_DONE" \
                "$R_USREQ" "$R_EXTRA" "$M_LGCPU" "$BUSY" "$M_OTHER" "$M_SECS" >> "$RUNS_TSV"
            printf '%s [%2d/%d] %-8s %-9s %9s /s %9s us each  n=%s %s busy=%s%% other=%s%% %s\n' "$(date +%T)" "$k" "$total" \
                "$c" "$s" "$R_RATE" "$R_USREQ" "$R_DONE" "$([ "$R_EXTRA" = - ] || echo "${R_EXTRA} MB/s")" "$BUSY" "$M_OTHER" \
                "$([ "$R_STATUS" = ok ] || echo "<< $R_STATUS")" >&2
        done
    done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
for s in "${UP[@]}"; do
    msgs=$(cat "$RUN/logs/$s.out" "$RUN/logs/$s-error.log" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' |
           grep -Ev '  ?INFO |^stoa: listening on|could not build optimal types_hash' || true)
    [ -z "$msgs" ] || { warn "$s logged (see $RUN/logs):"; tail -n 10 <<< "$msgs" | sed 's/^/    /' >&2; }
done
srv_stop_all

mkdir -p "$(dirname "$OUT")"
"$PYTHON" - "$RUNS_TSV" > "$OUT" <<PY
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
print("date: $(date '+%F %H:%M %Z'); load average before $LOAD_BEFORE, after $LOAD_AFTER")
print("command: $COMMAND")
print("machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)")
print("versions: $(dpkg-query -W -f '${Package} ${Version}; ' nginx-light nghttp2-client wrk openssl 2>/dev/null)$STOA_VERSION")
print()
what = {"h2": "HTTP/2 1358 B, h2load -c $H2C -m $H2M", "h1": "HTTPS/1.1 1358 B, wrk -c $CONC keep-alive",
        "full": "new TLS connections, full handshake (s_time x$HS_PROCS)", "resumed": "new TLS connections, resumed (s_time -reuse x$HS_PROCS)",
        "big": "1 MiB over HTTPS/1.1, wrk -c $BIG_CONC", "big-h2": "1 MiB over HTTP/2, h2load -c $BIG_CONC"}
unit = {"full": "conn", "resumed": "conn"}
servers = list(dict.fromkeys(r["server"] for r in rows))
def med(vals):
    v = [float(x) for x in vals if x not in ("-", "")]
    return statistics.median(v) if v else None
print("| case | server | per second | server CPU µs per request | MB/s | other % | runs ok |")
print("|---|---|---:|---:|---:|---:|---:|")
cells = {}
for c in dict.fromkeys(r["case"] for r in rows):
    for s in servers:
        rs = [r for r in rows if r["case"] == c and r["server"] == s]
        ok = [r for r in rs if r["status"] == "ok"]
        rate, cpu, mb = med(r["rate"] for r in ok), med(r["us_per_req"] for r in ok), med(r["mb_s"] for r in ok)
        other = med(r["other"] for r in rs)
        cells[c, s] = (rate, cpu)
        f = lambda x, d=0: "-" if x is None else f"{x:.{d}f}"
        u = " (per connection)" if c in unit else ""
        print(f"| {what.get(c, c)} | {s} | {f(rate)} | {f(cpu, 1)}{u} | {f(mb)} | {f(other)} | {len(ok)}/{len(rs)} |")
print()
base = "nginx" if "nginx" in servers else None
if base:
    for s in servers:
        if s == base:
            continue
        print(f"{s} / {base} (medians): " + "; ".join(
            f"{c}: CPU per request {cells[c, s][1] / cells[c, base][1]:.2f}x, per second {cells[c, s][0] / cells[c, base][0]:.2f}x"
            for c in dict.fromkeys(r["case"] for r in rows)
            if all(cells[c, x][0] and cells[c, x][1] for x in (s, base))))
PY
cat "$OUT"
log "report: $OUT; raw output: $RUN/raw; server logs: $RUN/logs"
[ $FAILED = 0 ] || { log "some server failed a check or a run (see above)"; exit 1; }
