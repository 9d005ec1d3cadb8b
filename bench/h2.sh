#!/bin/bash
# bench/h2.sh - HTTP/2: Stoa against h2o and nginx, one server process each, on loopback, the same
# doc root (bench/lib.sh gen_docroot; index.html = 1358 B) and certificate (ECDSA P-256 from
# `stoa cert`), h2load as the client of every row.
#
# Usage: bench/h2.sh          (as root for package installs; ~6 min with the defaults)
#        QUICK=1 bench/h2.sh  (a short run that proves the script works: small counts, 1 round)
#        SERVERS="stoa stoa-before h2o nginx" STOA_before=/path/to/old/stoa bench/h2.sh
#                             (two Stoa builds in the same alternating runs)
# Cases (CASES, in this order), each `h2load -n $N -c $CONC -t 1` on index.html:
#   tls-m10   HTTP/2 over TLS (ALPN h2), -m 10: ten streams at once on each connection
#   h2c-m10   HTTP/2 cleartext with prior knowledge (h2c), -m 10
#   h1-m1     HTTP/1.1 keep-alive, cleartext (h2load --h1), -m 1 (no pipelining)
#   tls-m1    HTTP/2 over TLS, -m 1: one stream at a time per connection (a request's full cost)
#   h2c-m1    h2c, -m 1
#   h1tls-m1  HTTP/1.1 keep-alive over TLS (--h1: ALPN http/1.1), -m 1
# Then, for each of HOLD_MODES (h2c tls) and each server, restarted (fresh) and warmed up with
# $WARM_N requests of that protocol, idle memory per HTTP/2 connection:
# bench/h2hold.py opens $HOLD connections, each makes one GET of index.html and stays open and
# idle; per connection = (RSS while held - RSS before) / $HOLD.
# Servers (SERVERS="stoa h2o nginx"): stoa = `workers = 1` (bench/conf/stoa-h2.toml; one listener
# for HTTP/1.1 and h2c, one for TLS), stoa-TAG = the same with the binary $STOA_TAG, h2o =
# `num-threads: 1` (bench/conf/h2o-h2.conf; /usr/bin/h2o, Debian 2.2.5), nginx = `worker_processes 1`
# (bench/conf/nginx-h2.conf; its h2c is a listener of its own). Access logs off everywhere.
# Knobs (environment): N=100000 CONC=50 REPS=3 (rounds; cells show the median), HOLD=5000 (0: skip
#   the memory test), HOLD_MODES="h2c tls", HOLD_SERVERS=$SERVERS (the servers it tests),
#   WARM_N=5000 (unrecorded h2load warm-up per server and protocol), QUIET_MAX=3 QUIET_PCT=15
#   (wait up to QUIET_MAX s before each run for the box to be < QUIET_PCT % busy), WAIT_OTHERS=300 (wait up to this many s at start for other load generators
#   to finish; 0: do not wait, the figures are then provisional), RUN=/tmp/stoa-bench-h2,
#   OUT=$RUN/results.md, STOA=target/release/stoa (built when missing).
# Many cores (servers and generator on separate CPUs): WORKERS=1 (Stoa `workers`, h2o `num-threads`,
#   nginx `worker_processes`), THREADS=1 (h2load -t), SERVER_CPUS / CLIENT_CPUS (taskset CPU lists,
#   e.g. 0-7 and 8-15; empty: no pinning), MIME_TYPES=/etc/nginx/mime.types. With WORKERS > 1 nginx
#   listens with `reuseport` (a socket per worker, as Stoa); h2o 2.2.5 has no such option, and its
#   threads share one socket. For example, on 16
#   cores: WORKERS=8 THREADS=8 CONC=256 SERVER_CPUS=0-7 CLIENT_CPUS=8-15 N=2000000 HOLD=0 bench/h2.sh
# Ports PORT_BASE (default 18600) to PORT_BASE+19: stoa +0 (HTTP/1.1 + h2c) and +1 (TLS), h2o +2 and
# +3 (TLS), nginx +4 (HTTP/1.1), +5 (h2c), +6 (TLS), stoa-TAG +10/+11, +12/+13, ...
#
# Rounds alternate: in each round every case runs on every server, the starting server rotating from
# case to case, one server process each for the whole script (started once). For every run:
# requests per second (over h2load's own time) and the server's CPU per request = utime+stime of
# all its processes and threads (/proc/PID/stat) after minus before, divided by the requests that
# succeeded; "other" is the CPU everything else on the box used meanwhile (% of a core): the box is
# shared, so CPU per request is the figure, not req/s. The report gives the medians, each Stoa's
# ratios to h2o and nginx, and Stoa's HTTP/2 cost as a ratio of its own HTTP/1.1.
# Exit status: 0 if every server started, every check passed and every run completed without errors.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
RUN=${RUN:-/tmp/stoa-bench-h2}
OUT=${OUT:-$RUN/results.md}
SERVERS=${SERVERS:-stoa h2o nginx}
if [ "${QUICK:-0}" = 1 ]; then
    : "${REPS:=1}" "${N:=10000}" "${HOLD:=500}" "${WARM_N:=1000}" "${QUIET_MAX:=1}"
fi
REPS=${REPS:-3} N=${N:-100000} CONC=${CONC:-50} HOLD=${HOLD:-5000} HOLD_MODES=${HOLD_MODES:-h2c tls}
HOLD_SERVERS=${HOLD_SERVERS:-$SERVERS}
WORKERS=${WORKERS:-1} THREADS=${THREADS:-1} SERVER_CPUS=${SERVER_CPUS:-} CLIENT_CPUS=${CLIENT_CPUS:-}
MIME_TYPES=${MIME_TYPES:-/etc/nginx/mime.types}
SRV_PIN=() GEN_PIN=()
[ -z "$SERVER_CPUS" ] || SRV_PIN=(taskset -c "$SERVER_CPUS")
[ -z "$CLIENT_CPUS" ] || GEN_PIN=(taskset -c "$CLIENT_CPUS")
WARM_N=${WARM_N:-5000} QUIET_MAX=${QUIET_MAX:-3} QUIET_PCT=${QUIET_PCT:-15} WAIT_OTHERS=${WAIT_OTHERS:-300}
CASES=${CASES:-tls-m10 h2c-m10 h1-m1 tls-m1 h2c-m1 h1tls-m1}
PORT_BASE=${PORT_BASE:-18600}
STOA=${STOA:-$DEFAULT_STOA}
[[ $STOA = /* ]] || STOA=$PWD/$STOA
COMMAND="$(for v in SERVERS CASES REPS N CONC WORKERS THREADS SERVER_CPUS CLIENT_CPUS HOLD HOLD_MODES HOLD_SERVERS WARM_N QUIET_MAX WAIT_OTHERS; do
    d=$(eval "echo \${$v}"); printf '%s=%q ' "$v" "$d"; done)bench/h2.sh"
read -r -a SRVS <<< "$SERVERS"
read -r -a CASE_LIST <<< "$CASES"
read -r -a HOLD_LIST <<< "$HOLD_MODES"
export QUIET_MAX QUIET_PCT
for c in "${CASE_LIST[@]}"; do
    case $c in tls-m10|h2c-m10|h1-m1|tls-m1|h2c-m1|h1tls-m1) ;; *) die "unknown case in CASES: $c" ;; esac
done

ensure_tools nginx:nginx-light h2o:h2o h2load:nghttp2-client curl:curl python3:python3
[[ " $SERVERS " = *" stoa"* ]] && ensure_fresh_stoa
NOFILE=$(raise_nofile 65536)
[ "$NOFILE" -ge $(( HOLD + 1000 )) ] || warn "open-files limit is $NOFILE: too low for $HOLD connections"
export NOFILE

bench_init
rm -rf "$RUN/raw" "$RUN/www" "$RUN/logs"/*; mkdir -p "$RUN/raw" "$RUN/nginx-tmp"
W=$RUN/www
gen_docroot "$W"
SIZE=$(stat -c %s "$W/index.html")
"$STOA" cert "$RUN/certs" localhost 127.0.0.1 > /dev/null || die "stoa cert failed"
chmod 644 "$RUN/certs/key.pem"   # read by nginx's master as root, by h2o and Stoa before they drop root
CERT=$RUN/certs/cert.pem KEY=$RUN/certs/key.pem
if [ "$WAIT_OTHERS" = 0 ]; then
    others=$(for p in wrk ab h2load oha; do pgrep -ax "$p"; done; pgrep -af '^[^ ]*stoa bench' || true)
    [ -z "$others" ] || warn "other load generators are running (WAIT_OTHERS=0): the figures are provisional"
else
    wait_no_other_load "$WAIT_OTHERS"
fi

# Ports: P_H1 (HTTP/1.1), P_H2C (h2c), P_TLS (h2 and http/1.1 by ALPN)
declare -A P_H1=() P_H2C=() P_TLS=()
seq_port=0
for s in "${SRVS[@]}"; do
    case $s in
        stoa) P_H1[$s]=$PORT_BASE P_H2C[$s]=$PORT_BASE P_TLS[$s]=$(( PORT_BASE + 1 )) ;;
        h2o) P_H1[$s]=$(( PORT_BASE + 2 )) P_H2C[$s]=$(( PORT_BASE + 2 )) P_TLS[$s]=$(( PORT_BASE + 3 )) ;;
        nginx) P_H1[$s]=$(( PORT_BASE + 4 )) P_H2C[$s]=$(( PORT_BASE + 5 )) P_TLS[$s]=$(( PORT_BASE + 6 )) ;;
        stoa-*) P_H1[$s]=$(( PORT_BASE + 10 + 2 * seq_port )); P_H2C[$s]=${P_H1[$s]}; P_TLS[$s]=$(( P_H1[$s] + 1 ))
                seq_port=$(( seq_port + 1 ))
                [ "${P_TLS[$s]}" -le $(( PORT_BASE + 19 )) ] || die "too many Stoa builds for the port range $PORT_BASE-$(( PORT_BASE + 19 ))" ;;
        *) die "unknown server name: $s (stoa, stoa-TAG, h2o, nginx)" ;;
    esac
    SRV_PORT[$s]=${P_H1[$s]}
done

stoa_bin() {  # stoa_bin NAME: the binary of stoa / stoa-TAG
    local tag
    if [ "$1" = stoa ]; then echo "$STOA"; return; fi
    tag=STOA_${1#stoa-}
    [ -x "${!tag:-}" ] || die "$1: set $tag to a Stoa binary"
    echo "${!tag}"
}

h2_start() {  # h2_start NAME: start, wait until it answers over HTTP/1.1, h2c and TLS
    local name=$1 p pid
    for p in "${P_H1[$name]}" "${P_H2C[$name]}" "${P_TLS[$name]}"; do
        port_free "$p" || { warn "$name: port $p is already in use"; return 1; }
    done
    case $name in
        stoa|stoa-*)
            render_conf "$BENCH_DIR/conf/stoa-h2.toml" "$RUN/$name.toml" PORT="${P_H1[$name]}" TLS_PORT="${P_TLS[$name]}" \
                ROOT="$W" CERT="$CERT" KEY="$KEY" WORKERS="$WORKERS"
            "${SRV_PIN[@]}" "$(stoa_bin "$name")" serve --config "$RUN/$name.toml" > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
        h2o)
            render_conf "$BENCH_DIR/conf/h2o-h2.conf" "$RUN/h2o.conf" RUN="$RUN" PORT="${P_H1[$name]}" \
                TLS_PORT="${P_TLS[$name]}" ROOT="$W" CERT="$CERT" KEY="$KEY" WORKERS="$WORKERS"
            # h2o's own ulimit: it takes the soft limit it is started with
            "${SRV_PIN[@]}" h2o -c "$RUN/h2o.conf" > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
        nginx)
            render_conf "$BENCH_DIR/conf/nginx-h2.conf" "$RUN/nginx-h2.conf" RUN="$RUN" PORT="${P_H1[$name]}" \
                H2C_PORT="${P_H2C[$name]}" TLS_PORT="${P_TLS[$name]}" ROOT="$W" NOFILE="$NOFILE" \
                WORKER_CONNS=$(( NOFILE < 16384 ? NOFILE - 64 : 16384 )) CERT="$CERT" KEY="$KEY" WORKERS="$WORKERS" MIME_TYPES="$MIME_TYPES" \
                REUSEPORT="$( [ "$WORKERS" -gt 1 ] && echo reuseport || true)"
            "${SRV_PIN[@]}" nginx -p "$RUN" -e "$RUN/logs/nginx-error.log" -c "$RUN/nginx-h2.conf" > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
    esac
    SRV_PID[$name]=$pid
    echo "$pid" > "$RUN/pids/$name.pid"
    srv_ready "$name" "http://127.0.0.1:${P_H1[$name]}/" &&
        srv_ready "$name" "https://127.0.0.1:${P_TLS[$name]}/" -k
}

h2_check() {  # h2_check NAME: index.html over h2 (TLS), h2c, HTTPS/1.1 and HTTP/1.1: 200, same bytes
    local s=$1 spec args url want got ok=0
    for spec in "h2|--http2|https://127.0.0.1:${P_TLS[$s]}|2" "h2c|--http2-prior-knowledge|http://127.0.0.1:${P_H2C[$s]}|2" \
                "https/1.1|--http1.1|https://127.0.0.1:${P_TLS[$s]}|1.1" "http/1.1|--http1.1|http://127.0.0.1:${P_H1[$s]}|1.1"; do
        IFS='|' read -r _ args url want <<< "$spec"
        got=$(curl -sk --max-time 10 "$args" -o "$RUN/raw/check-body" -w '%{http_code} %{http_version}' "$url/index.html") ||
            got="curl failed"
        if [ "$got" != "200 $want" ] || ! cmp -s "$RUN/raw/check-body" "$W/index.html"; then
            warn "$s: ${spec%%|*}: $got, body $(cmp -s "$RUN/raw/check-body" "$W/index.html" && echo same || echo differs)"
            ok=1
        fi
    done
    return $ok
}

# measure SERVER RAWFILE CMD...: runs CMD (output to RAWFILE), sets M_TICKS (server CPU ticks),
# M_SECS (wall), M_LGCPU (load generator CPU, % of a core), M_OTHER (CPU of everything else, % of a
# core), M_RC (as bench/tls.sh)
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

case_args() {  # case_args SERVER CASE: "PROTO URL H2LOAD_ARGS..." (PROTO: the ALPN h2load must report)
    local s=$1 m=${2##*-m}
    case $2 in
        tls-*) echo "h2 https://127.0.0.1:${P_TLS[$s]}/index.html -m $m" ;;
        h2c-*) echo "h2c http://127.0.0.1:${P_H2C[$s]}/index.html -m $m" ;;
        h1-*) echo "http/1.1 http://127.0.0.1:${P_H1[$s]}/index.html --h1 -m $m" ;;
        h1tls-*) echo "http/1.1 https://127.0.0.1:${P_TLS[$s]}/index.html --h1 -m $m" ;;
    esac
}

# one_case SERVER CASE RAWFILE: sets R_STATUS R_RATE (requests per second over h2load's own time)
# R_DONE (requests that succeeded) R_USREQ (server CPU µs per request) R_TLS (protocol and cipher)
one_case() {
    local srv=$1 c=$2 f=$3 proto url x args
    read -r proto url args <<< "$(case_args "$srv" "$c")"
    R_STATUS=ok R_RATE=- R_DONE=0 R_USREQ=- R_TLS=-
    # shellcheck disable=SC2086 # args: h2load options, split on purpose
    measure "$srv" "$f" timeout 300 "${GEN_PIN[@]}" h2load -n "$N" -c "$CONC" -t "$THREADS" $args "$url"
    grep -q "^Application protocol: $proto\$" "$f" ||
        R_STATUS="not $proto: $(grep -m1 '^Application protocol' "$f" || echo 'no protocol line')"
    # "requests: N total, N started, N done, N succeeded, F failed, E errored, T timeout"
    x=($(awk '/^requests:/ {print $8 + 0, $10 + 0, $12 + 0}' "$f"))
    R_DONE=${x[0]:-0}
    [ "${x[0]:-}" = "$N" ] && [ "${x[1]}" = 0 ] && [ "${x[2]}" = 0 ] ||
        R_STATUS="h2load: ${x[0]:-0} of $N succeeded, ${x[1]:--} failed, ${x[2]:--} errored"
    # "status codes: 100000 2xx, 0 3xx, 0 4xx, 0 5xx"
    x=($(awk '/^status codes:/ {print $3 + 0}' "$f"))
    [ "${x[0]:-0}" = "$N" ] || [ "$R_STATUS" != ok ] || R_STATUS="h2load: ${x[0]:-0} of $N answered 2xx"
    R_TLS=$(awk -F': ' '/^TLS Protocol:/ {p = $2} /^Cipher:/ {c = $2} /^Server Temp Key:/ {k = $2}
                        END {if (p != "") printf "%s %s %s", p, c, k; else printf "-"}' "$f")
    local secs
    secs=$(awk '/^finished in/ {t = $3; sub(/,$/, "", t); if (t ~ /ms$/) {sub(/ms$/, "", t); t /= 1000} else sub(/s$/, "", t); print t}' "$f")
    [ "$M_RC" = 0 ] || [ "$R_STATUS" != ok ] || R_STATUS="exit code $M_RC"
    if [ "$R_DONE" -gt 0 ]; then
        R_RATE=$(awk -v n="$R_DONE" -v s="${secs:-$M_SECS}" 'BEGIN {printf "%.0f", (s > 0 ? n / s : 0)}')
        R_USREQ=$(awk -v t="$M_TICKS" -v n="$R_DONE" -v hz="$CLK_TCK" 'BEGIN {printf "%.2f", t * 1e6 / hz / n}')
    fi
    srv_alive "$srv" || R_STATUS="SERVER DIED"
}

STOA_VERSION="stoa: not run"
if [[ " $SERVERS " = *" stoa"* ]]; then
    STOA_VERSION="stoa at commit $(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo '(none)')"
    git -C "$REPO_DIR" status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null | grep -q . && STOA_VERSION+=" + uncommitted changes"
    for s in "${SRVS[@]}"; do
        case $s in stoa|stoa-*) b=$(stoa_bin "$s")
            STOA_VERSION+="; $s = $b built $(stat -c '%y' "$b" | cut -c1-19) (sha256 $(sha256sum "$b" | cut -c1-12))" ;;
        esac
    done
fi
FAILED=0 UP=()
for s in "${SRVS[@]}"; do
    log "starting $s on ports ${P_H1[$s]} ${P_H2C[$s]} ${P_TLS[$s]}"
    h2_start "$s" || { FAILED=1; continue; }
    h2_check "$s" || FAILED=1
    log "$s: PIDs $(srv_pids "$s" | paste -sd,), RSS $(srv_rss_kb "$s") kB"
    UP+=("$s")
done
[ ${#UP[@]} -gt 0 ] || die "no server came up"
RAW_WARM=$RUN/raw/warmup.txt
for s in "${UP[@]}"; do  # warm-up, not recorded: every protocol once
    for c in tls-m10 h2c-m10 h1-m1; do
        read -r _ url args <<< "$(case_args "$s" "$c")"
        # shellcheck disable=SC2086 # args: h2load options, split on purpose
        timeout 60 "${GEN_PIN[@]}" h2load -n "$WARM_N" -c "$CONC" -t "$THREADS" $args "$url" > "$RAW_WARM" 2>&1 ||
            warn "$s: warm-up $c failed: $(tail -n1 "$RAW_WARM")"
    done
done

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
RUNS_TSV=$RUN/raw/runs.tsv
printf 'rep\tcase\tserver\tstatus\trate\tdone\tus_per_req\ttls\tloadgen_cpu\tbusy\tother\tsecs\n' > "$RUNS_TSV"
k=0 n=${#UP[@]} total=$(( REPS * ${#CASE_LIST[@]} ))
for rep in $(seq "$REPS"); do
    for c in "${CASE_LIST[@]}"; do
        k=$(( k + 1 ))
        for i in $(seq 0 $(( n - 1 ))); do
            s=${UP[$(( (i + k - 1) % n ))]}
            BUSY=$(wait_quiet)
            if srv_alive "$s"; then one_case "$s" "$c" "$RUN/raw/$s-$c-$rep.txt"
            else R_STATUS="SERVER DIED" R_RATE=- R_DONE=0 R_USREQ=- R_TLS=- M_LGCPU=- M_OTHER=- M_SECS=-; fi
            [ "$R_STATUS" = ok ] || FAILED=1
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$c" "$s" "$R_STATUS" "$R_RATE" "$R_DONE" \
                "$R_USREQ" "$R_TLS" "$M_LGCPU" "$BUSY" "$M_OTHER" "$M_SECS" >> "$RUNS_TSV"
            printf '%s [%2d/%d] %-8s %-12s %9s req/s %7s us/req  n=%s busy=%s%% other=%s%% %s\n' "$(date +%T)" "$k" "$total" \
                "$c" "$s" "$R_RATE" "$R_USREQ" "$R_DONE" "$BUSY" "$M_OTHER" "$([ "$R_STATUS" = ok ] || echo "<< $R_STATUS")" >&2
        done
    done
done
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- idle memory per HTTP/2 connection ----
MEM_TSV=$RUN/raw/mem.tsv
printf 'server\tmode\tbefore_kb\theld_kb\tafter_kb\tconns\tbytes_per_conn\tready\tdone\n' > "$MEM_TSV"
if [ "$HOLD" -gt 0 ]; then
    for mode in "${HOLD_LIST[@]}"; do
        for s in "${UP[@]}"; do
            [[ " $HOLD_SERVERS " = *" $s "* ]] || continue
            srv_alive "$s" || { printf '%s\t%s\t-\t-\t-\t-\t-\tserver died\t-\n' "$s" "$mode" >> "$MEM_TSV"; continue; }
            # A fresh process for each test (memory an earlier one freed would be reused and hide
            # what this one takes), warmed up with $WARM_N requests of this protocol first
            srv_stop "$s"
            h2_start "$s" || { FAILED=1; printf '%s\t%s\t-\t-\t-\t-\t-\tno restart\t-\n' "$s" "$mode" >> "$MEM_TSV"; continue; }
            port=${P_H2C[$s]} tls=()
            [ "$mode" = tls ] && { port=${P_TLS[$s]}; tls=(--tls); }
            read -r _ url _ <<< "$(case_args "$s" "$mode-m10")"
            timeout 60 "${GEN_PIN[@]}" h2load -n "$WARM_N" -c "$CONC" -t "$THREADS" -m 10 "$url" > "$RAW_WARM" 2>&1 ||
                warn "$s: warm-up before the memory test failed: $(tail -n1 "$RAW_WARM")"
            sleep 0.5
            before=$(srv_rss_kb "$s")
            f=$RUN/raw/hold-$s-$mode.txt held=- ready="no READY line" done=-
            log "$s: holding $HOLD idle HTTP/2 connections ($mode)"
            "$PYTHON" "$BENCH_DIR/h2hold.py" --port "$port" "${tls[@]}" --conns "$HOLD" --size "$SIZE" --max-time 150 > "$f" 2>&1 &
            hp=$!; BG_PIDS+=("$hp")
            for i in $(seq 1400); do grep -q '^READY' "$f" && break; alive "$hp" || break; sleep 0.1; done
            if grep -q '^READY' "$f"; then
                sleep 1   # let the server settle
                held=$(srv_rss_kb "$s")
                ready=$(grep -m1 '^READY' "$f" | cut -d' ' -f2-)
            fi
            stop_pid "$hp"
            BG_PIDS=("${BG_PIDS[@]/$hp}")
            done=$(grep -m1 '^DONE' "$f" | cut -d' ' -f2- || true)
            [ -n "$done" ] || done="client output: $(tail -n1 "$f")"
            sleep 1
            after=$(srv_rss_kb "$s")
            ok=$(sed -n 's/^ok=\([0-9]*\).*/\1/p' <<< "$ready")
            per=-
            [ "$held" = - ] || [ -z "$ok" ] || [ "$ok" = 0 ] || per=$(( (held - before) * 1024 / ok ))
            [[ $ready = "ok=$HOLD failed=0 non200=0 "* ]] && [[ $done = *"closed_by_server=0" ]] || FAILED=1
            log "$s ($mode): RSS $before kB before, $held kB holding, $after kB after; $per B per connection; $ready; $done"
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "$mode" "$before" "$held" "$after" "${ok:-0}" "$per" "$ready" "$done" >> "$MEM_TSV"
        done
    done
fi

for s in "${UP[@]}"; do
    msgs=$(cat "$RUN/logs/$s.out" "$RUN/logs/$s-error.log" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' |
           grep -Ev '  ?INFO |^stoa: listening on|could not build optimal types_hash|^\[INFO\] raised RLIMIT|is ready to serve requests' || true)
    [ -z "$msgs" ] || { warn "$s logged (see $RUN/logs):"; tail -n 10 <<< "$msgs" | sed 's/^/    /' >&2; }
done
srv_stop_all

mkdir -p "$(dirname "$OUT")"
"$PYTHON" - "$RUNS_TSV" "$MEM_TSV" > "$OUT" <<PY
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
mem = list(csv.DictReader(open(sys.argv[2]), delimiter="\t"))
print("date: $(date '+%F %H:%M %Z'); load average before $LOAD_BEFORE, after $LOAD_AFTER")
print("command: $COMMAND")
print("machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)")
print("versions: $(dpkg-query -W -f '${Package} ${Version}; ' nginx-light h2o nghttp2-client 2>/dev/null)$STOA_VERSION")
tls = sorted({r["tls"] for r in rows if r["tls"] not in ("-", "")})
print("TLS as negotiated: " + (" / ".join(tls) or "-"))
print()
what = {"tls-m10": "h2 (TLS) -m 10", "h2c-m10": "h2c -m 10", "h1-m1": "HTTP/1.1 -m 1",
        "tls-m1": "h2 (TLS) -m 1", "h2c-m1": "h2c -m 1", "h1tls-m1": "HTTPS/1.1 -m 1"}
servers = list(dict.fromkeys(r["server"] for r in rows))
cases = list(dict.fromkeys(r["case"] for r in rows))
def med(vals):
    v = [float(x) for x in vals if x not in ("-", "")]
    return statistics.median(v) if v else None
f = lambda x, d=0: "-" if x is None else f"{x:.{d}f}"
cells = {}
print("index.html (1358 B), h2load -n $N -c $CONC -t $THREADS; servers: $WORKERS worker(s)${SERVER_CPUS:+ on CPUs $SERVER_CPUS}${CLIENT_CPUS:+, h2load on CPUs $CLIENT_CPUS}; medians of the runs that completed")
print()
print("| case | " + " | ".join(f"{s} µs/req | {s} req/s" for s in servers) + " | other % (median) | runs ok |")
print("|---|" + "---:|---:|" * len(servers) + "---:|---:|")
for c in cases:
    line, others, oks, alls = [], [], 0, 0
    for s in servers:
        rs = [r for r in rows if r["case"] == c and r["server"] == s]
        ok = [r for r in rs if r["status"] == "ok"]
        cells[c, s] = (med(r["us_per_req"] for r in ok), med(r["rate"] for r in ok))
        line.append(f"{f(cells[c, s][0], 2)} | {f(cells[c, s][1])}")
        others += [r["other"] for r in rs]; oks += len(ok); alls += len(rs)
    print(f"| {what.get(c, c)} | " + " | ".join(line) + f" | {f(med(others))} | {oks}/{alls} |")
print()
stoas = [s for s in servers if s.startswith("stoa")]
peers = [s for s in servers if not s.startswith("stoa")]
ratio = lambda a, b: "-" if not (a and b) else f"{a / b:.2f}x"
if stoas and peers:
    print("CPU per request, Stoa / peer (medians):")
    print()
    print("| case | " + " | ".join(f"{s} / {p}" for s in stoas for p in peers) + " |")
    print("|---|" + "---:|" * (len(stoas) * len(peers)))
    for c in cases:
        print(f"| {what.get(c, c)} | " + " | ".join(ratio(cells[c, s][0], cells[c, p][0]) for s in stoas for p in peers) + " |")
    print()
pairs = [("h2c-m10", "h1-m1"), ("h2c-m1", "h1-m1"), ("tls-m10", "h1tls-m1"), ("tls-m1", "h1tls-m1")]
pairs = [(a, b) for a, b in pairs if a in cases and b in cases]
if pairs:
    print("HTTP/2 CPU per request as a ratio of the same server's HTTP/1.1 (same transport):")
    print()
    print("| ratio | " + " | ".join(servers) + " |")
    print("|---|" + "---:|" * len(servers))
    for a, b in pairs:
        print(f"| {what[a]} / {what[b]} | " + " | ".join(ratio(cells[a, s][0], cells[b, s][0]) for s in servers) + " |")
    print()
if mem:
    print("Idle memory per HTTP/2 connection: $HOLD connections, each after one GET of index.html (bench/h2hold.py)")
    print()
    print("| server | mode | RSS before (kB) | RSS holding (kB) | RSS after closing (kB) | bytes per connection | client |")
    print("|---|---|---:|---:|---:|---:|---|")
    for m in mem:
        print(f"| {m['server']} | {m['mode']} | {m['before_kb']} | {m['held_kb']} | {m['after_kb']} | {m['bytes_per_conn']} | {m['ready']}; {m['done']} |")
PY
cat "$OUT"
log "report: $OUT; raw output: $RUN/raw; server logs: $RUN/logs"
[ $FAILED = 0 ] || { log "some server failed a check, a run or the memory test (see above)"; exit 1; }
