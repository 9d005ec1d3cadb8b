#!/usr/bin/env bash
# bench/fastcgi.sh - FastCGI throughput: Stoa against nginx and lighttpd (C libfcgi app) and nginx (php-fpm).
#
# Every process is started by this script on loopback and tracked by PID (stopped at exit):
#   C app   - the same libfcgi responder (bench/src/hello.c, cc -O2 -DFCGI ... -lfcgi), 2 processes each:
#     nginx-nk  nginx, one connection per request (nginx's default), apps started by `spawn-fcgi -F 2`
#     nginx-kc  nginx, `fastcgi_keep_conn on` + an upstream keepalive pool (NGINX_KEEPALIVE per worker),
#               its own `spawn-fcgi -F 2` set (so its pooled connections cannot hold nginx-nk's apps)
#     lighttpd  lighttpd spawns the app itself (mod_fastcgi bin-path, max-procs 2)
#     stoa-wN   Stoa spawns it ([[pool]] command, processes = 2), `workers = N`
#   PHP     - hello.php (the same page; written into the doc root by this script, a copy of
#             shared/peers/src/hello.php) on php-fpm, `pm = static`, `pm.max_children = 4`, one
#             instance per server (a client that keeps FastCGI connections alive would hold a shared
#             instance's children): nginx (`location ~ \.php$`) and stoa-wN ([[pool]] address + a
#             `suffix = ".php"` route).
# Before any load, and again before each run, every route must answer HTTP 200 with the byte-identical
# page (it holds "Hello, world!"). Then `wrk -t1 -c$CONC -d$DUR --latency` per configuration, round-robin
# over the configurations of each application, the starting one rotating from round to round. Prints a
# Markdown report: req/s, p50/p99, non-2xx, socket errors, timeouts, CPU per request, Stoa's ratios.
#
# Usage: bench/fastcgi.sh        (as root: installs missing Debian packages with apt-get; ~5 min)
# Knobs (environment):
#   CASES="c:nginx-nk c:nginx-kc c:lighttpd c:stoa-w2 c:stoa-w1 php:nginx php:stoa-w2 php:stoa-w1"
#   DUR=10s CONC=60 REPS=2 WARM=2s             wrk duration / connections, rounds, warm-up per configuration
#   NGINX_KEEPALIVE=2                          nginx `keepalive` (idle upstream connections per worker)
#   LOAD_MAX=1.5 LOAD_WAIT=180                 before starting, wait up to LOAD_WAIT s for the 1-min load average < LOAD_MAX
#   OTHERS_WAIT=120                            before each run, wait up to this for other load generators (wrk, ab, ...) to finish
#   QUIET_PCT=15 QUIET_MAX=10                  before each run, wait up to QUIET_MAX s for the box to be < QUIET_PCT % busy
#   OTHER_MAX=50 RETRIES=1                     run again when other processes used > OTHER_MAX % of a core during a run
#   RUN=/tmp/stoa-bench-fastcgi                work folder (doc root, configs, sockets, logs, raw wrk output)
#   OUT=$RUN/results.md                        Markdown report (also printed to stdout)
#   STOA=target/release/stoa                   built with `cargo build --release` when missing (BUILD=1: always)
#   HELLO_C=bench/src/hello.c                  (falls back to /work/shared/peers/src/hello.c)
# Ports: nginx 18200, lighttpd 18202, stoa-w2 18203, stoa-w1 18204 (PORT_stoa_w1=... overrides).
#
# CPU per request = utime+stime (/proc/PID/stat fields 14-15; all threads) of the server's processes
# AND of the application processes serving the configuration, after the run minus before, divided by
# the requests wrk completed; plus cutime+cstime (fields 16-17) of all of them, i.e. children reaped
# during the run (normally 0: the app processes are long-lived; a run where one exits is flagged).
#   nginx:    master + 2 workers, plus the 2 spawn-fcgi'd app processes of the route (or the php-fpm
#             master + its 4 children): they are not nginx's children, the script adds them.
#   lighttpd: lighttpd + its 2 app children.   Stoa: the stoa process + its 2 app children (for PHP:
#             + the php-fpm master and 4 children; its idle C app children are counted too, ~0).
# The report splits it into "server" and "app" (processes named hello_fcgi / php-fpm*).
# Exit status: 0 if every server started, every check passed and every run completed, with no non-2xx,
# socket error or timeout for Stoa (the peers' are only reported: nginx's keep_conn set-up stalls), else 1.
# wrk's "timeout" is a response later than 2 s (left out of its percentiles); a request never answered
# counts nowhere, so a run with no response at all is reported as STALLED.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fastcgi.sh"
RUN=${RUN:-/tmp/stoa-bench-fastcgi}
OUT=${OUT:-$RUN/results.md}
CASES=${CASES:-c:nginx-nk c:nginx-kc c:lighttpd c:stoa-w2 c:stoa-w1 php:nginx php:stoa-w2 php:stoa-w1}
DUR=${DUR:-10s} CONC=${CONC:-60} REPS=${REPS:-2} WARM=${WARM:-2s}
NGINX_KEEPALIVE=${NGINX_KEEPALIVE:-2}
LOAD_MAX=${LOAD_MAX:-1.5} LOAD_WAIT=${LOAD_WAIT:-180} OTHERS_WAIT=${OTHERS_WAIT:-120}
export QUIET_PCT=${QUIET_PCT:-15} QUIET_MAX=${QUIET_MAX:-10}
OTHER_MAX=${OTHER_MAX:-50} RETRIES=${RETRIES:-1}
STOA=${STOA:-$REPO_DIR/target/release/stoa}
[[ $STOA = /* ]] || STOA=$PWD/$STOA
HELLO_C=${HELLO_C:-$BENCH_DIR/src/hello.c}
[ -f "$HELLO_C" ] || HELLO_C=/work/shared/peers/src/hello.c
COMMAND="$(for v in CASES DUR CONC REPS; do d=$(eval "echo \${$v}"); printf '%s=%q ' "$v" "$d"; done)bench/fastcgi.sh"
read -r -a CASE_LIST <<< "$CASES"
QUERY=q=hello

# ---------------------------------------------------------------- the configurations
case_server() {  # KIND:CONFIG -> server process name
    case ${1#*:} in nginx|nginx-nk|nginx-kc) echo nginx ;; *) echo "${1#*:}" ;; esac
}
case_appset() {  # KIND:CONFIG -> application processes outside the server's tree ("" = its children)
    case $1 in
        c:nginx-nk) echo nk ;; c:nginx-kc) echo kc ;; c:lighttpd|c:stoa-w[0-9]*) echo "" ;;
        php:nginx|php:stoa-w[0-9]*) echo "php-fpm-${1#php:}" ;;
        *) die "unknown case $1 (c:nginx-nk c:nginx-kc c:lighttpd c:stoa-wN php:nginx php:stoa-wN)" ;;
    esac
}
case_path() {
    case $1 in c:nginx-kc) echo "/fcgi-keep/hello?$QUERY" ;; c:*) echo "/fcgi/hello?$QUERY" ;; php:*) echo "/hello.php?$QUERY" ;; esac
}
case_url() { echo "http://127.0.0.1:${SRV_PORT[$(case_server "$1")]}$(case_path "$1")"; }
for c in "${CASE_LIST[@]}"; do case_appset "$c" > /dev/null; done

SERVER_LIST=() FPM_LIST=() SPAWN_LIST=()
for c in "${CASE_LIST[@]}"; do
    s=$(case_server "$c") a=$(case_appset "$c")
    [[ " ${SERVER_LIST[*]} " = *" $s "* ]] || SERVER_LIST+=("$s")
    case $a in "") ;; php-fpm-*) FPM_LIST+=("$a") ;; *) SPAWN_LIST+=("$a") ;; esac
done
for s in "${SERVER_LIST[@]}"; do
    case $s in
        nginx) SRV_PORT[$s]=18200 ;;
        lighttpd) SRV_PORT[$s]=18202 ;;
        stoa-w2) SRV_PORT[$s]=18203 ;;
        stoa-w1) SRV_PORT[$s]=18204 ;;
        stoa-w[0-9]*) SRV_PORT[$s]=$(( 18200 + 10 + ${s#stoa-w} )) ;;
    esac
    v=PORT_${s//-/_}
    [ -z "${!v:-}" ] || SRV_PORT[$s]=${!v}
done

# ---------------------------------------------------------------- set-up
tools=(wrk:wrk curl:curl cc:gcc python3:python3)
[[ " ${SERVER_LIST[*]} " = *" nginx "* ]] && tools+=(nginx:nginx-light)
[[ " ${SERVER_LIST[*]} " = *" lighttpd "* ]] && tools+=(lighttpd:lighttpd)
[ ${#SPAWN_LIST[@]} -gt 0 ] && tools+=(spawn-fcgi:spawn-fcgi)
[ ${#FPM_LIST[@]} -gt 0 ] && tools+=(php-fpm8.2:php-fpm)
ensure_tools "${tools[@]}"
if [ ! -f /usr/include/fcgi_stdio.h ]; then
    [ $IS_ROOT = 1 ] || die "fcgi_stdio.h missing; install it as root: apt-get install -y libfcgi-dev"
    wait_for_apt
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libfcgi-dev >&2 || die "apt-get install libfcgi-dev failed"
fi
PHP_FPM=$(command -v php-fpm8.2 || ls /usr/sbin/php-fpm* 2>/dev/null | head -1 || echo php-fpm)
if [[ " ${SERVER_LIST[*]} " = *" stoa"* ]]; then
    ensure_fresh_stoa
fi
NOFILE=$(raise_nofile 65536)

bench_init
rm -rf "$RUN/raw" "$RUN/www" "$RUN/sock" "$RUN/bin"; rm -f "$RUN"/logs/*
W=$RUN/www
mkdir -p "$RUN/raw" "$W" "$RUN/sock" "$RUN/bin"
chmod 755 "$RUN" "$W" "$RUN/bin"
[ $IS_ROOT = 1 ] && chown www-data "$RUN/sock"   # lighttpd creates its app sockets after dropping to www-data
STOA_REV="$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo '(no commit)')$(git -C "$REPO_DIR" status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null | grep -q . && echo ' + uncommitted changes in crates/' || true)"
if [[ " ${SERVER_LIST[*]} " = *" stoa"* ]]; then   # run a copy: a rebuild of target/ during the run changes nothing
    STOA_RUN=$RUN/stoa
    cp "$STOA" "$STOA_RUN.new" && mv "$STOA_RUN.new" "$STOA_RUN"
    STOA_REV+=", binary $(stat -c '%y' "$STOA" | cut -c1-19), sha256 $(sha256sum "$STOA_RUN" | cut -c1-12)"
fi
APP=$RUN/bin/hello_fcgi
cc -O2 -Wall -DFCGI -o "$APP" "$HELLO_C" -lfcgi || die "cc -O2 -DFCGI $HELLO_C -lfcgi failed"
cc -O2 -Wall -o "$RUN/bin/hello_cgi" "$HELLO_C" || die "cc -O2 $HELLO_C failed"
QUERY_STRING=$QUERY "$RUN/bin/hello_cgi" | sed 1,2d > "$RUN/expected.html"   # the page after the CGI head
EXPECTED=$RUN/expected.html
grep -q 'Hello, world!' "$EXPECTED" || die "$HELLO_C does not print 'Hello, world!'"
cat > "$W/hello.php" <<'PHP'
<?php
// hello.php - same page as hello.c (copy of shared/peers/src/hello.php)
$q = $_SERVER['QUERY_STRING'] ?? '';
echo "<!DOCTYPE html>\n<html><head><title>hello</title></head><body>\n",
     "<h1>Hello, world!</h1>\n<p>QUERY_STRING: [$q]</p>\n<pre>\n",
     str_repeat("The quick brown fox jumps over the lazy dog. 0123456789\n", 21),
     "</pre>\n</body></html>\n";
PHP
echo '<!DOCTYPE html><title>stoa fastcgi bench</title>' > "$W/index.html"
chmod 644 "$W/hello.php" "$W/index.html"

FAILED=0
RUNS_TSV=$RUN/raw/runs.tsv
printf 'rep\tcase\tstatus\trps\trequests\tnon2xx\tconnect\tread\twrite\ttimeout\tsrv_ticks\tapp_ticks\treaped_ticks\tus_per_req\tus_srv\tus_app\tp50_ms\tp99_ms\tloadgen_cpu\tbusy\tother\tsecs\tprocs\n' > "$RUNS_TSV"

# ---- start the backends and the servers, check every route ----
for a in "${SPAWN_LIST[@]}"; do
    log "spawn-fcgi -F 2 -s $RUN/sock/app-$a.sock -- $APP"
    spawn_fcgi "$a" "$RUN/sock/app-$a.sock" || die "could not start the C app for nginx ($a)"
done
for f in "${FPM_LIST[@]}"; do
    log "starting $f (static pool of 4) on $RUN/sock/$f.sock"
    fpm_start "$f" || die "could not start $f"
done
UP=()
for s in "${SERVER_LIST[@]}"; do
    log "starting $s on 127.0.0.1:${SRV_PORT[$s]}"
    if fcgi_srv_start "$s"; then UP+=("$s"); else FAILED=1; fi
done
GOOD=()
for c in "${CASE_LIST[@]}"; do
    s=$(case_server "$c")
    [[ " ${UP[*]} " = *" $s "* ]] || { warn "$c: $s is not running: skipped"; continue; }
    if check_url "$(case_url "$c")" "$EXPECTED" "$RUN/raw/head-${c/:/-}.txt"; then
        log "$c: $(case_path "$c"): 200, expected page ($(stat -c %s "$EXPECTED") bytes, 'Hello, world!')"
        GOOD+=("$c")
    else
        warn "$c: $(case_url "$c"): $CHECK_MSG: not loaded"; FAILED=1
    fi
done
[ ${#GOOD[@]} -gt 0 ] || die "no configuration passed its check"
for c in "${GOOD[@]}"; do
    proc_snapshot $(case_roots "$(case_server "$c")" "$(case_appset "$c")") > "$RUN/raw/procs-${c/:/-}.txt"
    log "$c: CPU counted over $(awk '{printf "%s(%s) ", $1, $2}' "$RUN/raw/procs-${c/:/-}.txt")"
done

log "load average $(wait_load_avg) (uptime: $(uptime | sed 's/.*load/load/')); other load generators: $(pgrep -ax wrk | paste -sd';' || true)"
wait_others() {  # up to OTHERS_WAIT s for other load generators to finish; measures anyway afterwards
    local i o
    for i in $(seq "$OTHERS_WAIT"); do
        o=$(for p in wrk ab h2load oha; do pgrep -ax "$p"; done; pgrep -af '^[^ ]*stoa bench' || true)
        [ -z "$o" ] && return 0
        [ "$i" = 1 ] && log "another load generator is running, waiting up to ${OTHERS_WAIT}s: $(paste -sd';' <<< "$o")"
        sleep 1
    done
    warn "another load generator still runs after ${OTHERS_WAIT}s: measuring anyway: $(paste -sd';' <<< "$o")"
}
wait_others
for c in "${GOOD[@]}"; do
    timeout 60 wrk -t1 -c"$CONC" -d"$WARM" "$(case_url "$c")" > "$RUN/raw/warmup-${c/:/-}.txt" 2>&1 ||
        warn "$c: warm-up wrk failed: $(tail -n1 "$RUN/raw/warmup-${c/:/-}.txt")"
done

# ---- load: round-robin over the configurations of each application ----
one_run() {  # one_run CASE RAWFILE: sets L_* (lib-fastcgi.sh fcgi_load) and BUSY
    local c=$1 s url attempt
    s=$(case_server "$c") url=$(case_url "$c")
    for attempt in $(seq 0 "$RETRIES"); do
        wait_others
        BUSY=$(wait_quiet)
        CHECK_MSG=
        if ! srv_alive "$s"; then
            L_STATUS="SERVER DIED" L_RPS=- L_REQS=0 L_NON2XX=- L_CONN=- L_READ=- L_WRITE=- L_TIMEOUT=- L_P50=- L_P99=-
            L_SRV=- L_APP=- L_REAPED=- L_USREQ=- L_US_SRV=- L_US_APP=- L_LGCPU=- L_OTHER=- L_SECS=-
        elif ! check_url "$url" "$EXPECTED" && ! { [ "$c" = c:nginx-kc ] && [[ $CHECK_MSG = *curl-error-28* ]]; }; then
            L_STATUS="CHECK FAILED: $CHECK_MSG" L_RPS=- L_REQS=0 L_NON2XX=- L_CONN=- L_READ=- L_WRITE=- L_TIMEOUT=- L_P50=- L_P99=-
            L_SRV=- L_APP=- L_REAPED=- L_USREQ=- L_US_SRV=- L_US_APP=- L_LGCPU=- L_OTHER=- L_SECS=-
        else
            # nginx's keep_conn set-up: after a load, each app process is held by a connection idle in one
            # worker's keepalive pool, so a request the other worker sends on a new connection waits in the
            # backlog until nginx closes an idle one (upstream keepalive_timeout, 60 s): the stall the
            # configuration is known for. Counted, reported, and the load runs anyway.
            if [ "$c" = c:nginx-kc ] && [[ ${CHECK_MSG:-} = *curl-error-28* ]]; then
                KC_STALLS=$(( KC_STALLS + 1 ))
                warn "$c: the check request got no answer within 10 s (nginx keep_conn stall); loading anyway"
            fi
            fcgi_load "$s" "$(case_appset "$c")" "$url" "$(stat -c %s "$EXPECTED")" "$2"
        fi
        [[ $L_OTHER =~ ^[0-9]+$ ]] && [ "$L_OTHER" -gt "$OTHER_MAX" ] && [ "$attempt" -lt "$RETRIES" ] || return 0
        log "$c: other processes used ${L_OTHER}% of a core during the run (> OTHER_MAX=$OTHER_MAX): again"
    done
}
KC_STALLS=0 CHECK_MSG=
T0=$(date +%s) k=0
ncase=$(( ${#GOOD[@]} * REPS )) done_n=0
for rep in $(seq "$REPS"); do
    for kind in c php; do
        group=(); for c in "${GOOD[@]}"; do [ "${c%%:*}" = "$kind" ] && group+=("$c"); done
        n=${#group[@]}; [ "$n" = 0 ] && continue
        k=$(( k + 1 ))
        for i in $(seq 0 $(( n - 1 ))); do
            c=${group[$(( (i + k - 1) % n ))]}
            one_run "$c" "$RUN/raw/${c/:/-}-$rep.txt"
            done_n=$(( done_n + 1 ))
            # for Stoa any failure, non-2xx, socket error or timeout fails the script; for the peers a failed
            # check, a crash or a failed wrk (nginx's keep_conn set-up stalls and times out by design)
            case $c:$L_STATUS in
                *:stoa-*:*) [ "$L_STATUS" = ok ] && [ "$L_NON2XX" = 0 ] && [ "$(( ${L_CONN/-/1} + ${L_READ/-/1} + ${L_WRITE/-/1} + ${L_TIMEOUT/-/1} ))" = 0 ] || FAILED=1 ;;
                *:ok|*:STALLED*) ;;
                *) FAILED=1 ;;
            esac
            procs=$({ awk '{print $2}' "$RUN/raw/${c/:/-}-$rep.txt.cpu0" 2>/dev/null || true; } | sort | uniq -c | awk '{printf "%s%s×%s", (NR > 1 ? " + " : ""), $2, $1}')
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$c" "$L_STATUS" \
                "$L_RPS" "$L_REQS" "$L_NON2XX" "$L_CONN" "$L_READ" "$L_WRITE" "$L_TIMEOUT" "$L_SRV" "$L_APP" "$L_REAPED" \
                "$L_USREQ" "$L_US_SRV" "$L_US_APP" "$L_P50" "$L_P99" "$L_LGCPU" "$BUSY" "$L_OTHER" "$L_SECS" "$procs" >> "$RUNS_TSV"
            printf '%s [%d/%d] %-12s %6s req/s  p50 %6s ms  p99 %8s ms  non2xx=%s conn/read/write/timeout=%s/%s/%s/%s  CPU %s us/req (server %s + app %s)  n=%s wrk=%s%% busy=%s%% other=%s%% %s\n' \
                "$(date +%T)" "$done_n" "$ncase" "$c" "$L_RPS" "$L_P50" "$L_P99" "$L_NON2XX" "$L_CONN" "$L_READ" "$L_WRITE" "$L_TIMEOUT" \
                "$L_USREQ" "$L_US_SRV" "$L_US_APP" "$L_REQS" "$L_LGCPU" "$BUSY" "$L_OTHER" "$([ "$L_STATUS" = ok ] || echo "<< $L_STATUS")" >&2
            if [ "$L_STATUS" = "SERVER DIED" ]; then
                s=$(case_server "$c")
                warn "$s died; last lines of its output:"; tail -n 20 "$RUN/logs/$s.out" | sed 's/^/    /' >&2 || true
            fi
        done
    done
done
log "loads took $(( $(date +%s) - T0 )) s"

# ---- after the loads: idle FastCGI connections, and anything the servers logged ----
NOTES=
[ "$KC_STALLS" = 0 ] || NOTES+="nginx keep_conn: $KC_STALLS of the check requests before its runs got no answer within 10 s (the route was loaded anyway); "
ss -xpH state established > "$RUN/raw/ss-after.txt" 2>/dev/null || true
for f in "${FPM_LIST[@]}"; do   # connections held open to php-fpm (ss: the accepted, php-fpm side ends)
    n=$(grep -cF " ${FPM_SOCK[$f]} " "$RUN/raw/ss-after.txt" || true)
    log "$f: $n connections to ${FPM_SOCK[$f]} still established after the loads"
    [ "$n" = 0 ] || NOTES+="$f: $n connections still established after the loads (kept alive by its client); "
done
for s in "${UP[@]}" "${FPM_LIST[@]}"; do
    msgs=$(cat "$RUN/logs/$s.out" "$RUN/logs/$s-error.log" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' |
           grep -Ev 'server started|  ?INFO |^stoa: listening on|NOTICE' || true)
    [ -z "$msgs" ] || { warn "$s logged (see $RUN/logs; $(wc -l <<< "$msgs") lines, last 10):"; tail -n 10 <<< "$msgs" | sed 's/^/    /' >&2
                        NOTES+="$s logged $(wc -l <<< "$msgs") lines, e.g. \`$(tail -n1 <<< "$msgs" | cut -c1-160)\`; "; }
done
for s in "${UP[@]}"; do
    case $s in stoa-*) ;; *) continue ;; esac
    t=$(date +%s%N); srv_stop "$s"; t=$(( ($(date +%s%N) - t) / 1000000 ))
    log "$s stopped (SIGTERM) in $t ms"; NOTES+="$s stopped in $t ms after SIGTERM; "
done
srv_stop_all
rm -f "$RUN"/pids/app-*.pid

# ---- report ----
mkdir -p "$(dirname "$OUT")"
{
    echo "date=$(date '+%F %H:%M %Z')"
    echo "command=$COMMAND"
    echo "machine=$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), $(awk '/MemTotal/ {printf "%.0f GiB RAM", $2 / 1048576}' /proc/meminfo)"
    echo "versions=$(dpkg-query -W -f '${Package} ${Version}; ' nginx-light lighttpd wrk spawn-fcgi libfcgi0ldbl php8.2-fpm gcc 2>/dev/null)stoa $STOA_REV"
    echo "params=wrk -t1 -c$CONC -d$DUR --latency (HTTP/1.1 keep-alive), GET /fcgi/hello?$QUERY or /hello.php?$QUERY ($(stat -c %s "$EXPECTED")-byte page); warm-up wrk $WARM per configuration; REPS=$REPS; nginx keepalive $NGINX_KEEPALIVE per worker; CLK_TCK $CLK_TCK"
    echo "notes=${NOTES:-none}"
    echo "failed=$FAILED"
} > "$RUN/raw/meta.txt"
"$PYTHON" - "$RUN/raw/meta.txt" "$RUNS_TSV" > "$OUT" <<'PY'
import csv, statistics, sys
meta = dict(l.rstrip("\n").split("=", 1) for l in open(sys.argv[1]) if "=" in l)
runs = list(csv.DictReader(open(sys.argv[2]), delimiter="\t"))
LABEL = {
    "c:nginx-nk": "nginx, 1 conn/request", "c:nginx-kc": "nginx, keep_conn + keepalive pool",
    "c:lighttpd": "lighttpd (spawns, max-procs 2)", "php:nginx": "nginx",
}
def label(c):
    if c in LABEL: return LABEL[c]
    s = c.split(":", 1)[1]
    if s.startswith("stoa-w"): return f"**Stoa**, workers = {s[6:]}" + (" (spawns, processes = 2)" if c.startswith("c:") else "")
    return s
def num(x):
    try: return float(x)
    except (TypeError, ValueError): return None
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
def fmt(x, d=0): return "-" if x is None else f"{x:,.{d}f}"
def tot(rs, k): return sum(int(num(r[k]) or 0) for r in rs)
cases = list(dict.fromkeys(r["case"] for r in runs))
reps = len(set(r["rep"] for r in runs))
print(f"Run {meta['date']}: `{meta['command']}`  ")
print(f"Machine: {meta['machine']}  ")
print(f"Versions: {meta['versions']}  ")
print(f"Load: {meta['params']}")
print()
print("**CPU µs/req** = utime+stime (`/proc/PID/stat`, all threads) of the server's processes **and** of the "
      "application processes serving the configuration, after minus before the run, per request wrk completed "
      "(plus cutime+cstime: children reaped meanwhile, 0 here). *server* / *app* split it: nginx = master + 2 workers, "
      "app = the 2 spawn-fcgi'd processes of the route or the php-fpm master + 4 children (not nginx's children; "
      "added by the script); lighttpd and Stoa = their own process, app = the 2 processes they spawned (their "
      "children), for Stoa on PHP the php-fpm instance (+ its idle C children). "
      + ("Cells are medians of the rounds; req/s shows min-max. " if reps > 1 else "")
      + "non-2xx, errors (wrk connect+read+write) and timeouts are summed over the rounds. wrk counts as a *timeout* a "
      "response that came more than 2 s after its request, and leaves it out of the latency percentiles; a request "
      "that never gets an answer is counted nowhere (only fewer requests: *STALLED* when none came at all). "
      "*other %* = CPU used during the run by everything but the measured processes and wrk (% of one core; "
      "near or above 100: the run was disturbed).")
print()
agg = {}
for kind, title in (("c", "C libfcgi application (2 processes)"), ("php", "PHP (php-fpm, pm = static, max_children = 4)")):
    cs = [c for c in cases if c.startswith(kind + ":")]
    if not cs: continue
    print(f"### {title}")
    print()
    print("| configuration | req/s | p50 ms | p99 ms | non-2xx | errors | timeouts | CPU µs/req | server | app | wrk CPU % | other % |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c in cs:
        rs = [r for r in runs if r["case"] == c]
        bad = sorted(set(r["status"] for r in rs if r["status"] != "ok"))
        rps = [num(r["rps"]) for r in rs]
        vals = [x for x in rps if x is not None]
        spread = f" ({min(vals):,.0f}-{max(vals):,.0f})" if len(vals) > 1 else ""
        m = lambda k: med([num(r[k]) for r in rs])
        agg[c] = dict(rps=med(rps), p99=m("p99_ms"), us=m("us_per_req"),
                      errs=tot(rs, "non2xx") + tot(rs, "connect") + tot(rs, "read") + tot(rs, "write") + tot(rs, "timeout"))
        print(f"| {label(c)}{' **' + '; '.join(bad) + '**' if bad else ''} | {fmt(med(rps))}{spread} | {fmt(m('p50_ms'), 2)} | {fmt(m('p99_ms'), 2)} "
              f"| {tot(rs, 'non2xx')} | {tot(rs, 'connect') + tot(rs, 'read') + tot(rs, 'write')} | {tot(rs, 'timeout')} "
              f"| {fmt(m('us_per_req'), 1)} | {fmt(m('us_srv'), 1)} | {fmt(m('us_app'), 1)} | {fmt(m('loadgen_cpu'))} | {fmt(m('other'))} |")
    print()
print("### Stoa's ratios")
print()
print("req/s = Stoa / peer (> 1: Stoa faster); p99 = Stoa / peer (<= 1: no worse); CPU = Stoa / peer CPU µs/req (< 1: "
      "Stoa cheaper). *Best* = the peer configuration with the most req/s. Targets (issue 4): C app >= 1.3x nginx's best "
      "and >= 1.1x lighttpd with a p99 no worse than theirs; PHP >= 1.2x nginx.")
print()
print("| app | Stoa | peer | req/s ratio | p99 ratio | CPU/req ratio | target |")
print("|---|---|---|---:|---:|---:|---|")
def best(cs):
    cs = [c for c in cs if c in agg and agg[c]["rps"]]
    return max(cs, key=lambda c: agg[c]["rps"]) if cs else None
for kind in ("c", "php"):
    stoas = [c for c in cases if c.startswith(kind + ":stoa")]
    peers = [c for c in cases if c.startswith(kind + ":") and c not in stoas]
    comps = []
    if kind == "c":
        ng = best([c for c in peers if "nginx" in c]); li = best([c for c in peers if "lighttpd" in c])
        if ng: comps.append(("nginx's best: " + label(ng), ng, 1.3))
        if li: comps.append((label(li), li, 1.1))
    else:
        ng = best([c for c in peers if "nginx" in c])
        if ng: comps.append((label(ng), ng, 1.2))
    bp = best(peers)
    if bp and all(bp != x[1] for x in comps): comps.append(("best peer: " + label(bp), bp, None))
    for st in stoas:
        for name, pc, tgt in comps:
            a, b = agg.get(st), agg.get(pc)
            if not a or not b: continue
            r = a["rps"] / b["rps"] if a["rps"] and b["rps"] else None
            p = a["p99"] / b["p99"] if a["p99"] and b["p99"] else None
            u = a["us"] / b["us"] if a["us"] and b["us"] else None
            t = ""
            if tgt is not None and r is not None:
                ok = r >= tgt and (kind != "c" or (p is not None and p <= 1))
                t = f">= {tgt:g}x" + (" with p99 <= peer's" if kind == "c" else "") + ": " + ("**met**" if ok else "**missed**")
                if kind == "c" and r >= tgt and not (p is not None and p <= 1): t += " (p99)"
            print(f"| {'C' if kind == 'c' else 'PHP'} | {label(st)} | {name} | {fmt(r, 2)}x | {fmt(p, 2)} | {fmt(u, 2)} | {t} |")
print()
print("Processes counted: " + "; ".join(
    f"{label(c)} ({'C' if c.startswith('c:') else 'PHP'}): " + next((r['procs'] for r in runs if r['case'] == c and r['procs']), '-')
    for c in cases) + ".\n")
bad = [f"{label(c)} ({c.split(':')[0]})" for c in agg if agg[c]["errs"]]
if bad: print("Configurations with non-2xx, errors or timeouts: " + ", ".join(bad) + ".\n")
if meta.get("notes", "none") != "none": print(f"Notes: {meta['notes']}\n")
if meta.get("failed") != "0": print("**Some configuration failed a check or a run was not clean (see the cells in bold and the script's log).**\n")
PY
cat "$OUT"
log "report: $OUT; raw output: $RUN/raw; server logs: $RUN/logs"
[ $FAILED = 0 ] || { log "some configuration failed a check or a run was not clean (see above)"; exit 1; }
