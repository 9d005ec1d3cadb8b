#!/usr/bin/env bash
# bench/reliability.sh - a reliability script, not a timed test (issue 10): hostile clients and faults
# against Stoa and nginx, alternating on the same probes, while normal clients (wrk) load the same routes.
#
# Servers (all on loopback, started and stopped by this script, tracked by PID):
#   stoa   bench/conf/stoa-reliability.toml: workers = $STOA_WORKERS, CGI route /cgi-bin/ (64 slots),
#          the same scripts on /cgi-nobuf/ with request_buffering = false, FastCGI pool of 2 processes
#          it spawns (tests/fastcgi-apps/hello_fcgi.c) on /fcgi/
#   nginx  bench/conf/nginx-reliability.conf: 2 workers, CGI through fcgiwrap -c 64, FastCGI to the same
#          app, 2 processes; fcgiwrap and the app are started by bench/fcgisup.py, which binds the
#          socket and restarts a process that dies (as Stoa's pool and php-fpm do)
# Probes (each run on both servers, the first one alternating; normal clients are wrk -t1 -c$CONC):
#   slowloris1k slowloris5k  1,000 / 5,000 connections sending a head slowly (one header line every
#                            $SLOW_INTERVAL s, reconnecting when closed: bench/slowclients.py) while
#                            normal clients GET /index.html (1358 B)
#   slowpost-cgi             $CGI_SLOW clients sending a POST body at $SLOW_RATE B/s to the CGI route,
#                            normal clients GET the CGI hello (-c$CGI_CONC)
#   slowpost-fcgi            $FCGI_SLOW such POSTs to the FastCGI pool of 2, normal clients GET /fcgi/hello
#   reload                   $RELOADS SIGHUPs, one a second, while normal clients GET /index.html
#   kill9                    kill -9 of one FastCGI app process every $KILL_EVERY s ($KILLS in all) while
#                            normal clients GET /fcgi/hello
#   upload                   the upload-loss loop: seq $UPLOADS | xargs -P$UPLOAD_PAR curl --data-binary
#                            @4M.bin -H 'Expect:' to /cgi-bin/ignore.sh (ignores its input): responses
#                            lost = non-200 or curl exit != 0; Stoa also on /cgi-nobuf/ (request_buffering = false);
#                            also lighttpd (mod_cgi, bench/conf/lighttpd-cgi.conf) as the issue's reference: nginx
#                            has no CGI of its own, and fcgiwrap answers 502 when a script leaves its input unread
#   flood                    both servers restarted with max_connections = $FLOOD_MAX (nginx: worker_connections
#                            = $FLOOD_MAX / 2 per worker); normal clients connected first, then $FLOOD_CONNS
#                            idle connections opened
# For each probe: baseline req/s (wrk $BASE_DUR on the same route just before), req/s during the probe
# (wrk $DUR; reload: $RELOADS + 2 s), kept = during / baseline, errors seen by the normal clients
# (non-2xx + socket errors + wrk timeouts), what the hostile clients saw, the server's RSS and open fds
# before the probe and 2 s after it ended (server processes only: stoa, or nginx master + workers; not
# the application processes).
#
# Usage: bench/reliability.sh          (as root: installs missing Debian packages; ~8-10 min)
# Knobs (environment):
#   PROBES="slowloris1k slowloris5k slowpost-cgi slowpost-fcgi reload kill9 upload flood"
#   SERVERS="stoa nginx"
#   DUR=8s BASE_DUR=5s CONC=20 CGI_CONC=16   normal clients: wrk duration during a probe / baseline, connections
#   SLOW_INTERVAL=2 SLOW_RATE=10 SLOW_BODY=100000   slowloris header line interval (s); slow POST rate (B/s), body size
#   CGI_SLOW=200 FCGI_SLOW=10                 slow POST clients
#   RELOADS=10 KILLS=5 KILL_EVERY=1.5         reload and kill -9 probes
#   UPLOADS=1000 UPLOAD_PAR=8 UPLOAD_MB=4     upload loop
#   UPLOAD_LIGHTTPD=1                         also run the upload loop on lighttpd (port 18302; 0 = skip)
#   FLOOD_MAX=500 FLOOD_CONNS=1500            flood probe
#   STOA_WORKERS=2                            Stoa `workers`
#   STOA_USER=                                Stoa `user`: empty = no key, so as root Stoa runs as nobody (as nginx
#                                             workers run as www-data; everything it needs is world-readable)
#   QUIET_MAX=20 QUIET_PCT=25                 before each probe wait up to QUIET_MAX s for < QUIET_PCT % busy
#   RUN=/tmp/stoa-bench-reliability           work folder      OUT=$RUN/results.md  report (also on stdout)
#   STOA=target/release/stoa                  built with `cargo build --release` when missing
# Ports: nginx 18300, lighttpd 18302, stoa 18303.
# Exit status: 0 when every server started and every probe ran (whatever the figures), else 1.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
RUN=${RUN:-/tmp/stoa-bench-reliability}
OUT=${OUT:-$RUN/results.md}
PROBES=${PROBES:-slowloris1k slowloris5k slowpost-cgi slowpost-fcgi reload kill9 upload flood}
SERVERS=${SERVERS:-stoa nginx}
DUR=${DUR:-8s} BASE_DUR=${BASE_DUR:-5s} CONC=${CONC:-20} CGI_CONC=${CGI_CONC:-16}
SLOW_INTERVAL=${SLOW_INTERVAL:-2} SLOW_RATE=${SLOW_RATE:-10} SLOW_BODY=${SLOW_BODY:-100000}
CGI_SLOW=${CGI_SLOW:-200} FCGI_SLOW=${FCGI_SLOW:-10}
RELOADS=${RELOADS:-10} KILLS=${KILLS:-5} KILL_EVERY=${KILL_EVERY:-1.5}
UPLOADS=${UPLOADS:-1000} UPLOAD_PAR=${UPLOAD_PAR:-8} UPLOAD_MB=${UPLOAD_MB:-4}
FLOOD_MAX=${FLOOD_MAX:-500} FLOOD_CONNS=${FLOOD_CONNS:-1500}
UPLOAD_LIGHTTPD=${UPLOAD_LIGHTTPD:-1}
STOA_WORKERS=${STOA_WORKERS:-2} STOA_USER=${STOA_USER-}
export QUIET_MAX=${QUIET_MAX:-20} QUIET_PCT=${QUIET_PCT:-25}
STOA=${STOA:-$REPO_DIR/target/release/stoa}
[[ $STOA = /* ]] || STOA=$PWD/$STOA
COMMAND="$(for v in PROBES SERVERS DUR BASE_DUR CONC CGI_SLOW FCGI_SLOW RELOADS KILLS UPLOADS FLOOD_MAX FLOOD_CONNS STOA_WORKERS STOA_USER; do
    d=$(eval "echo \${$v}"); printf '%s=%q ' "$v" "$d"; done)bench/reliability.sh"
read -r -a PROBE_LIST <<< "$PROBES"
read -r -a SRVS <<< "$SERVERS"
for p in "${PROBE_LIST[@]}"; do
    case $p in slowloris1k|slowloris5k|slowpost-cgi|slowpost-fcgi|reload|kill9|upload|flood) ;; *) die "unknown probe: $p" ;; esac
done
for s in "${SRVS[@]}"; do case $s in stoa|nginx) ;; *) die "unknown server: $s (stoa, nginx)" ;; esac; done

ensure_tools nginx:nginx-light lighttpd:lighttpd wrk:wrk curl:curl cc:gcc python3:python3 fcgiwrap:fcgiwrap
if [ ! -f /usr/include/fcgiapp.h ]; then
    [ "$(id -u)" = 0 ] || die "fcgiapp.h missing; install it as root: apt-get install -y libfcgi-dev"
    wait_for_apt
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libfcgi-dev >&2 || die "apt-get install libfcgi-dev failed"
fi
[[ " $SERVERS " = *" stoa "* ]] && ensure_stoa
NOFILE=$(raise_nofile 65536)
[ "$NOFILE" -ge 12000 ] || warn "open-files limit is $NOFILE: too low for 5,000 slow connections"
export NOFILE

bench_init
rm -rf "$RUN/raw" "$RUN/www" "$RUN/sock" "$RUN/bin"; rm -f "$RUN"/logs/*
W=$RUN/www
mkdir -p "$RUN/raw" "$RUN/sock" "$RUN/bin" "$RUN/nginx-tmp"
gen_docroot "$W"
mkdir -p "$W/cgi-bin"
chmod 755 "$RUN" "$RUN/bin" "$RUN/sock"
APP=$RUN/bin/hello_fcgi
cc -O2 -Wall -o "$APP" "$REPO_DIR/tests/fastcgi-apps/hello_fcgi.c" -lfcgi || die "cc hello_fcgi.c -lfcgi failed"
cc -O2 -Wall -o "$W/cgi-bin/hello" "$BENCH_DIR/src/hello.c" || die "cc hello.c failed"
printf '#!/bin/sh\n# ignores its input\nprintf "Content-Type: text/plain\\r\\n\\r\\nok\\n"\n' > "$W/cgi-bin/ignore.sh"
chmod 755 "$W/cgi-bin" "$W/cgi-bin/hello" "$W/cgi-bin/ignore.sh" "$APP"
head -c $(( UPLOAD_MB * 1048576 )) /dev/urandom > "$RUN/raw/upload.bin"
STOA_REV="stoa $(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo '(none)')"
git -C "$REPO_DIR" status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null | grep -q . && STOA_REV+=" + uncommitted changes"
if [[ " $SERVERS " = *" stoa "* ]]; then   # run a copy: a rebuild of target/ during the run changes nothing
    cp "$STOA" "$RUN/bin/stoa.new" && mv "$RUN/bin/stoa.new" "$RUN/bin/stoa"
    STOA_RUN=$RUN/bin/stoa
    STOA_REV+=", binary $(stat -c '%y' "$STOA" | cut -c1-19), sha256 $(sha256sum "$STOA_RUN" | cut -c1-12)"
fi

declare -A PORT=([nginx]=18300 [lighttpd]=18302 [stoa]=18303) SUP_PID=()
FAILED=0

# ---------------------------------------------------------------- servers
sup_start() {  # sup_start NAME SOCKET PROCS CMD...: bench/fcgisup.py, PID in SUP_PID[NAME]
    local name=$1 sock=$2 procs=$3 pid i
    shift 3
    "$PYTHON" "$BENCH_DIR/fcgisup.py" --socket "$sock" --procs "$procs" --user www-data \
        --pidfile "$RUN/raw/sup-$name.pids" -- "$@" > "$RUN/logs/sup-$name.out" 2>&1 &
    pid=$!; SUP_PID[$name]=$pid; BG_PIDS+=("$pid"); echo "$pid" > "$RUN/pids/sup-$name.pid"
    for i in $(seq 100); do [ -S "$sock" ] && [ -s "$RUN/raw/sup-$name.pids" ] && return 0; sleep 0.1; done
    warn "fcgisup $name did not come up:"; sed 's/^/    /' "$RUN/logs/sup-$name.out" >&2; return 1
}

rel_start() {  # rel_start SERVER MAXCONN: start it (and nginx's FastCGI processes), wait until / answers
    local name=$1 max=$2 port=${PORT[$1]} pid i
    port_free "$port" || { warn "$name: port $port is already in use by someone else"; return 1; }
    case $name in
        nginx)
            if [ -z "${SUP_PID[cgi]:-}" ]; then
                sup_start cgi "$RUN/sock/cgi.sock" 1 fcgiwrap -c 64 || return 1
                sup_start app "$RUN/sock/app.sock" 2 "$APP" || return 1
            fi
            render_conf "$BENCH_DIR/conf/nginx-reliability.conf" "$RUN/nginx.conf" RUN="$RUN" PORT="$port" ROOT="$W" \
                NOFILE="$NOFILE" WORKER_CONNS=$(( max / 2 )) SOCK_CGI="$RUN/sock/cgi.sock" SOCK_APP="$RUN/sock/app.sock"
            nginx -p "$RUN" -e "$RUN/logs/nginx-error.log" -c "$RUN/nginx.conf" >> "$RUN/logs/nginx.out" 2>&1 &
            pid=$! ;;
        lighttpd)   # the upload loop's reference (bench/conf/lighttpd-cgi.conf, mod_cgi)
            render_conf "$BENCH_DIR/conf/lighttpd-cgi.conf" "$RUN/lighttpd.conf" RUN="$RUN" PORT="$port" ROOT="$W"
            install -m 644 /dev/null "$RUN/logs/lighttpd-error.log"   # opened after lighttpd drops to www-data
            [ "$(id -u)" = 0 ] && chown www-data "$RUN/logs/lighttpd-error.log"
            lighttpd -D -f "$RUN/lighttpd.conf" >> "$RUN/logs/lighttpd.out" 2>&1 &
            pid=$! ;;
        stoa)
            render_conf "$BENCH_DIR/conf/stoa-reliability.toml" "$RUN/stoa.toml" PORT="$port" ROOT="$W" APP="$APP" \
                WORKERS="$STOA_WORKERS" MAXCONN="$max" \
                USER_LINE="$([ -n "$STOA_USER" ] && echo "user = \"$STOA_USER\"   # the bench's files and sockets are root's" || echo '# no user key: as root, Stoa runs as nobody')"
            "$STOA_RUN" check "$RUN/stoa.toml" > "$RUN/logs/stoa-check.out" 2>&1 ||
                { warn "stoa check rejects $RUN/stoa.toml:"; sed 's/^/    /' "$RUN/logs/stoa-check.out" >&2; return 1; }
            "$STOA_RUN" serve --config "$RUN/stoa.toml" >> "$RUN/logs/stoa.out" 2>&1 &
            pid=$! ;;
    esac
    SRV_PID[$name]=$pid; echo "$pid" > "$RUN/pids/$name.pid"
    for i in $(seq 100); do
        alive "$pid" || break
        curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/" && return 0
        sleep 0.1
    done
    warn "$name did not answer on port $port"; tail -n 20 "$RUN/logs/$name.out" "$RUN/logs/$name-error.log" 2>/dev/null | sed 's/^/    /' >&2 || true
    srv_stop "$name"; return 1
}

check_routes() {  # check_routes SERVER: the three routes answer 200
    local base="http://127.0.0.1:${PORT[$1]}" u code ok=0
    for u in /index.html "/cgi-bin/hello?q=hello" "/fcgi/hello?q=hello" /cgi-bin/ignore.sh; do
        code=$(curl -s -o "$RUN/raw/check.out" -w '%{http_code}' --max-time 10 "$base$u" || true)
        [ "$code" = 200 ] || { warn "$1: $u: HTTP $code"; sed 's/^/    /' "$RUN/raw/check.out" | head -5 >&2; ok=1; }
    done
    return $ok
}

srv_main_procs() {  # the server's own processes (stoa; nginx master + workers), not the apps it runs
    local p c
    for p in $(srv_pids "$1"); do
        c=$(cat "/proc/$p/comm" 2>/dev/null || true)
        case $c in stoa|nginx|lighttpd) echo "$p" ;; esac
    done
}
mem_fds() {  # mem_fds SERVER -> "RSS_KB FDS" over its own processes
    local p r=0 f=0 v
    for p in $(srv_main_procs "$1"); do
        v=$(awk '/^VmRSS:/ {print $2}' "/proc/$p/status" 2>/dev/null || true); r=$(( r + ${v:-0} ))
        v=$(ls "/proc/$p/fd" 2>/dev/null | wc -l || true); f=$(( f + ${v:-0} ))
    done
    echo "$r $f"
}

app_pids() {  # app_pids SERVER: the FastCGI app processes serving /fcgi/ for that server
    case $1 in
        stoa) pgrep -P "${SRV_PID[stoa]}" -x hello_fcgi || true ;;
        nginx) pgrep -P "${SUP_PID[app]}" -x hello_fcgi || true ;;
    esac
}

# ---------------------------------------------------------------- load
# wrk_run URL SECONDS RAW: sets W_RPS W_REQS W_ERRS (non-2xx + socket errors + timeouts) W_DETAIL
wrk_run() {
    local url=$1 secs=$2 f=$3 c=${4:-$CONC} x rc=0
    W_RPS=0 W_REQS=0 W_ERRS=- W_DETAIL="wrk failed"
    timeout $(( secs + 30 )) wrk -t1 -c"$c" -d"${secs}s" -s "$BENCH_DIR/wrk-report.lua" "$url" > "$f" 2>&1 || rc=$?
    x=($(awk '/^RESULT / {print $2, $3, $5, $6, $7, $8, $9}' "$f"))
    if [ ${#x[@]} = 7 ]; then
        W_REQS=${x[0]}
        W_RPS=$(awk -v n="${x[0]}" -v us="${x[1]}" 'BEGIN {printf "%.0f", (us > 0 ? n * 1e6 / us : 0)}')
        W_ERRS=$(( x[2] + x[3] + x[4] + x[5] + x[6] ))
        W_DETAIL="non-2xx ${x[2]}, connect ${x[3]}, read ${x[4]}, write ${x[5]}, timeout ${x[6]}"
    else
        W_DETAIL="wrk failed (rc $rc): $(tail -n1 "$f")"
    fi
}

# hostile_start RAW ARGS...: bench/slowclients.py in the background; waits (up to 90 s) for READY
hostile_start() {
    local f=$1 i
    shift
    "$PYTHON" "$BENCH_DIR/slowclients.py" --max-time 200 "$@" > "$f" 2>&1 &
    HOSTILE=$!; BG_PIDS+=("$HOSTILE")
    for i in $(seq 900); do grep -q '^READY' "$f" && break; alive "$HOSTILE" || break; sleep 0.1; done
    HOSTILE_READY=$(grep -m1 '^READY' "$f" | cut -d' ' -f2- || echo "no READY: $(tail -n1 "$f")")
}
hostile_stop() {  # sets HOSTILE_DONE
    local f=$1 keep=() b
    stop_pid "$HOSTILE"
    for b in "${BG_PIDS[@]}"; do [ "$b" = "$HOSTILE" ] || keep+=("$b"); done
    BG_PIDS=("${keep[@]}")
    HOSTILE_DONE=$(grep -m1 '^DONE' "$f" | cut -d' ' -f2- || echo "no DONE: $(tail -n1 "$f")")
}

ROWS=$RUN/raw/rows.tsv
printf 'probe\tserver\troute\tbaseline_rps\tprobe_rps\tkept_pct\terrors\terror_detail\thostile\trss_before_kb\trss_after_kb\tfds_before\tfds_after\tlog_lines\n' > "$ROWS"
row() {  # row PROBE SERVER ROUTE BASE PROBE ERRS DETAIL HOSTILE MB0 MB1
    local kept=-
    [ "$4" != - ] && [ "${4:-0}" -gt 0 ] 2>/dev/null && kept=$(awk -v a="$5" -v b="$4" 'BEGIN {printf "%.0f", 100 * a / b}')
    local m0=($9) m1=(${10}) logs
    logs=$(( $(log_lines "$2") - LOG0 ))
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$kept" "$6" "$7" "$8" \
        "${m0[0]}" "${m1[0]}" "${m0[1]}" "${m1[1]}" "$logs" >> "$ROWS"
    log "$1 $2: baseline $4 req/s, during $5 req/s (kept $kept %), normal-client errors $6 ($7); hostile: $8; RSS ${m0[0]} -> ${m1[0]} kB, fds ${m0[1]} -> ${m1[1]}; $logs new log lines"
    srv_alive "$2" || { warn "$2 DIED"; FAILED=1; }
}
log_lines() { { cat "$RUN/logs/$1.out" "$RUN/logs/$1-error.log" 2>/dev/null || true; } | wc -l; }

prepare() {  # prepare SERVER URL: quiet box, baseline on URL; sets BASE, MF0, LOG0
    local q
    q=$(wait_quiet)
    srv_alive "$1" || { warn "$1 is not running"; FAILED=1; return 1; }
    wrk_run "$2" "$(dur_secs "$BASE_DUR")" "$RUN/raw/$P-$1-base.txt" "${3:-$CONC}"
    BASE=$W_RPS
    MF0=$(mem_fds "$1"); LOG0=$(log_lines "$1")
    log "$P $1: box ${q}% busy before; baseline $BASE req/s ($W_DETAIL)"
}
settle() { sleep 2; MF1=$(mem_fds "$1"); }

# ---------------------------------------------------------------- probes
probe_slow() {  # probe_slow SERVER MODE N PATH NORMAL_PATH NORMAL_CONC
    local s=$1 url="http://127.0.0.1:${PORT[$1]}$5" extra=()
    prepare "$s" "$url" "$6" || return 0
    [ "$2" = head ] && extra=(--reconnect --interval "$SLOW_INTERVAL")
    [ "$2" = body ] && extra=(--interval 1 --chunk "$SLOW_RATE" --body-bytes "$SLOW_BODY")
    hostile_start "$RUN/raw/$P-$s-hostile.txt" --port "${PORT[$s]}" --mode "$2" --conns "$3" --path "$4" "${extra[@]}"
    wrk_run "$url" "$(dur_secs "$DUR")" "$RUN/raw/$P-$s.txt" "$6"
    hostile_stop "$RUN/raw/$P-$s-hostile.txt"
    settle "$s"
    row "$P" "$s" "$5" "$BASE" "$W_RPS" "$W_ERRS" "$W_DETAIL" "set-up: $HOSTILE_READY; at end: $HOSTILE_DONE" "$MF0" "$MF1"
}

probe_reload() {
    local s=$1 url="http://127.0.0.1:${PORT[$1]}/index.html" i lp
    prepare "$s" "$url" || return 0
    ( for i in $(seq "$RELOADS"); do sleep 1; kill -HUP "${SRV_PID[$s]}" 2>/dev/null || echo "HUP $i failed"; done ) > "$RUN/raw/$P-$s-hup.txt" 2>&1 &
    lp=$!
    wrk_run "$url" $(( RELOADS + 2 )) "$RUN/raw/$P-$s.txt"
    wait "$lp" || true
    settle "$s"
    row "$P" "$s" /index.html "$BASE" "$W_RPS" "$W_ERRS" "$W_DETAIL" "$RELOADS SIGHUP sent$(grep -q failed "$RUN/raw/$P-$s-hup.txt" && echo ", some failed" || true)" "$MF0" "$MF1"
}

probe_kill9() {
    local s=$1 url="http://127.0.0.1:${PORT[$1]}/fcgi/hello?q=hello" lp before after
    prepare "$s" "$url" || return 0
    before=$(app_pids "$s" | paste -sd,)
    ( for i in $(seq "$KILLS"); do
          sleep "$KILL_EVERY"
          p=$(app_pids "$s" | sed -n "$(( (i % 2) + 1 ))p"); [ -n "$p" ] || p=$(app_pids "$s" | head -1)
          if [ -n "$p" ]; then kill -KILL "$p" && echo "killed $p"; else echo "no app process to kill"; fi
      done ) > "$RUN/raw/$P-$s-kills.txt" 2>&1 &
    lp=$!
    wrk_run "$url" "$(dur_secs "$DUR")" "$RUN/raw/$P-$s.txt"
    wait "$lp" || true
    sleep 1; after=$(app_pids "$s" | paste -sd,)
    settle "$s"
    row "$P" "$s" "/fcgi/hello" "$BASE" "$W_RPS" "$W_ERRS" "$W_DETAIL" \
        "$(grep -c '^killed' "$RUN/raw/$P-$s-kills.txt" || true) app processes killed; apps before [$before], after [$after]" "$MF0" "$MF1"
}

probe_upload() {  # probe_upload SERVER PATH LABEL
    local s=$1 url="http://127.0.0.1:${PORT[$1]}$2" f=$RUN/raw/$P-$s-${2//\//_}.txt t0 secs lost summary
    wait_quiet > /dev/null
    MF0=$(mem_fds "$s"); LOG0=$(log_lines "$s")
    t0=$(date +%s.%N)
    seq "$UPLOADS" | timeout 600 xargs -P"$UPLOAD_PAR" -I{} curl -s -o /dev/null --max-time 60 -w "%{http_code}/exit%{exitcode}\n" \
        -H 'Expect:' --data-binary @"$RUN/raw/upload.bin" "$url" > "$f" 2>&1 || true
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
    lost=$(( UPLOADS - $(grep -cx '200/exit0' "$f" || true) ))
    summary=$(sort "$f" | uniq -c | awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}')
    settle "$s"
    row "$P" "$s" "$2$3" - - "$lost" "$UPLOADS uploads of $UPLOAD_MB MiB in $secs s: $summary" "-" "$MF0" "$MF1"
}

probe_flood() {
    local s=$1 url="http://127.0.0.1:${PORT[$1]}/index.html" wp
    prepare "$s" "$url" || return 0
    wrk_run "$url" "$(dur_secs "$DUR")" "$RUN/raw/$P-$s.txt" &
    wp=$!
    sleep 1
    hostile_start "$RUN/raw/$P-$s-hostile.txt" --port "${PORT[$s]}" --mode idle --conns "$FLOOD_CONNS" --parallel 500
    wait "$wp" || true
    # wrk_run ran in a subshell: read its result again here
    wrk_run_parse "$RUN/raw/$P-$s.txt"
    hostile_stop "$RUN/raw/$P-$s-hostile.txt"
    settle "$s"
    row "$P" "$s" /index.html "$BASE" "$W_RPS" "$W_ERRS" "$W_DETAIL" "set-up: $HOSTILE_READY; at end: $HOSTILE_DONE" "$MF0" "$MF1"
}
wrk_run_parse() {
    local x
    W_RPS=0 W_ERRS=- W_DETAIL="wrk failed: $(tail -n1 "$1")"
    x=($(awk '/^RESULT / {print $2, $3, $5, $6, $7, $8, $9}' "$1"))
    if [ ${#x[@]} = 7 ]; then
        W_RPS=$(awk -v n="${x[0]}" -v us="${x[1]}" 'BEGIN {printf "%.0f", (us > 0 ? n * 1e6 / us : 0)}')
        W_ERRS=$(( x[2] + x[3] + x[4] + x[5] + x[6] ))
        W_DETAIL="non-2xx ${x[2]}, connect ${x[3]}, read ${x[4]}, write ${x[5]}, timeout ${x[6]}"
    fi
}

# ---------------------------------------------------------------- run
wait_no_other_load 300
T0=$(date +%s)
for s in "${SRVS[@]}"; do
    log "starting $s on 127.0.0.1:${PORT[$s]}"
    rel_start "$s" 20000 || die "$s did not start"
    check_routes "$s" || die "$s: a route does not answer 200"
    log "$s: PIDs $(srv_pids "$s" | paste -sd,); RSS/fds $(mem_fds "$s")"
done
k=0
for P in "${PROBE_LIST[@]}"; do
    k=$(( k + 1 ))
    order=("${SRVS[@]}")
    [ $(( k % 2 )) = 0 ] && [ ${#SRVS[@]} = 2 ] && order=("${SRVS[1]}" "${SRVS[0]}")
    if [ "$P" = flood ]; then   # restart with the low limit
        for s in "${SRVS[@]}"; do srv_stop "$s"; rel_start "$s" "$FLOOD_MAX" || { FAILED=1; continue; }; done
    fi
    for s in "${order[@]}"; do
        log "---- $P on $s"
        case $P in
            slowloris1k) probe_slow "$s" head 1000 /index.html /index.html "$CONC" ;;
            slowloris5k) probe_slow "$s" head 5000 /index.html /index.html "$CONC" ;;
            slowpost-cgi) probe_slow "$s" body "$CGI_SLOW" "/cgi-bin/hello?q=slow" "/cgi-bin/hello?q=hello" "$CGI_CONC" ;;
            slowpost-fcgi) probe_slow "$s" body "$FCGI_SLOW" "/fcgi/hello?q=slow" "/fcgi/hello?q=hello" "$CONC" ;;
            reload) probe_reload "$s" ;;
            kill9) probe_kill9 "$s" ;;
            upload)
                probe_upload "$s" /cgi-bin/ignore.sh ""
                [ "$s" = stoa ] && probe_upload "$s" /cgi-nobuf/ignore.sh " (request_buffering = false)"
                if [ "$s" = "${order[-1]}" ] && [ "$UPLOAD_LIGHTTPD" = 1 ]; then
                    if rel_start lighttpd 0; then probe_upload lighttpd /cgi-bin/ignore.sh ""; srv_stop lighttpd; else FAILED=1; fi
                fi ;;
            flood) probe_flood "$s" ;;
        esac
    done
done
log "probes took $(( $(date +%s) - T0 )) s"
for s in "${SRVS[@]}"; do
    msgs=$(cat "$RUN/logs/$s.out" "$RUN/logs/$s-error.log" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' | grep -Ev '  ?INFO |^stoa: listening on' || true)
    [ -z "$msgs" ] || { log "$s logged $(wc -l <<< "$msgs") lines (see $RUN/logs); by kind:"
        sed -E 's/[0-9]+/N/g; s/^.{0,40}(WARN|ERROR|\[[a-z]+\])/\1/' <<< "$msgs" | cut -c1-140 | sort | uniq -c | sort -rn | head -8 | sed 's/^/    /' >&2; }
done
srv_stop_all

# ---------------------------------------------------------------- report
{
    echo "date=$(date '+%F %H:%M %Z')"
    echo "command=$COMMAND"
    echo "machine=$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), $(awk '/MemTotal/ {printf "%.0f GiB RAM", $2 / 1048576}' /proc/meminfo)"
    echo "versions=$(dpkg-query -W -f '${Package} ${Version}; ' nginx-light fcgiwrap libfcgi0ldbl wrk curl 2>/dev/null)$STOA_REV"
    echo "failed=$FAILED"
} > "$RUN/raw/meta.txt"
"$PYTHON" - "$RUN/raw/meta.txt" "$ROWS" > "$OUT" <<'PY'
import csv, sys
meta = dict(l.rstrip("\n").split("=", 1) for l in open(sys.argv[1]) if "=" in l)
rows = list(csv.DictReader(open(sys.argv[2]), delimiter="\t"))
NAME = {"slowloris1k": "slowloris, 1,000 conns", "slowloris5k": "slowloris, 5,000 conns",
        "slowpost-cgi": "slow POSTs to CGI", "slowpost-fcgi": "slow POSTs to FastCGI (pool of 2)",
        "reload": "reloads (SIGHUP) under load", "kill9": "kill -9 of FastCGI processes",
        "upload": "upload-loss loop", "flood": "connection flood past max_connections"}
import re
def short(h):
    m = re.match(r"set-up: open=(\d+) failed=(\d+) .*; at end: attempts=(\d+) open=(\d+) closed_by_server=(\d+) refused=(\d+) statuses=(\S+)", h)
    if not m: return h
    o, f, a, still, c, r, sts = m.groups()
    out = f"{o} open at start" + (f" ({f} failed)" if f != "0" else "") + f"; {still} still open at the end; {c} closed by the server"
    if sts != "-": out += " (answers: " + sts.replace(",", ", ").replace("none:", "none x").replace(":", " x") + ")"
    if int(a) > int(o) + int(f): out += f"; {a} connection attempts"
    return out
def mib(k):
    try: return f"{int(k) / 1024:.1f}"
    except ValueError: return "-"
print(f"Run {meta['date']}: `{meta['command']}`  ")
print(f"Machine: {meta['machine']}  ")
print(f"Versions: {meta['versions']}")
print()
print("| probe | server | normal clients' route | baseline req/s | req/s during | kept | normal-client errors | hostile clients / outcome | RSS MiB before → after | fds before → after | new log lines |")
print("|---|---|---|--:|--:|--:|--:|---|---|---|--:|")
for r in rows:
    kept = r["kept_pct"] + " %" if r["kept_pct"] != "-" else "-"
    base = f"{int(r['baseline_rps']):,}" if r["baseline_rps"].isdigit() else r["baseline_rps"]
    dur = f"{int(r['probe_rps']):,}" if r["probe_rps"].isdigit() else r["probe_rps"]
    errs = r["errors"] if r["probe"] == "upload" else f"{r['errors']} ({r['error_detail']})" if r["errors"] not in ("0", "-") else r["errors"]
    host = r["error_detail"] if r["probe"] == "upload" else short(r["hostile"])
    print(f"| {NAME.get(r['probe'], r['probe'])} | {r['server']} | `{r['route']}` | {base} | {dur} | {kept} | "
          f"{('lost ' + errs) if r['probe'] == 'upload' else errs} | {host} | {mib(r['rss_before_kb'])} → {mib(r['rss_after_kb'])} | "
          f"{r['fds_before']} → {r['fds_after']} | {r['log_lines']} |")
print()
if meta.get("failed") != "0": print("**A server did not start or died during a probe (see the script's log).**\n")
PY
cat "$OUT"
log "report: $OUT; raw output: $RUN/raw; server logs: $RUN/logs"
[ $FAILED = 0 ] || exit 1
