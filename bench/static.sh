#!/bin/bash
# bench/static.sh - static files: Stoa against nginx, lighttpd and a floor server on loopback, same
# doc root, one server process each by default.
#
# Usage: bench/static.sh   (as root for package installs; ~14 min with the defaults on a quiet box,
#                           longer when disturbed runs are repeated)
# Knobs (environment):
#   SERVERS="nginx-w1 lighttpd stoa-w1 floor"  one process serving each (nginx-w1's master only waits);
#                  stoa-wN = Stoa with `workers = N` (0 = one per core), nginx-wN = nginx with N
#                  workers, nginx = 2 workers; floor = tests/proxy-peers/canned.c (epoll, one read and
#                  one write per request, keep-alive unless asked to close), restarted for each file
#                  with a body of that file's size (so its row is the floor for that size; its body is
#                  'x's, so only status and size are checked)
#   DUR=10s        wrk duration (wrk -t1 -c$CONC, keep-alive)
#   ABN=10000      ab request count (ab -n $ABN -c $CONC, with and without -k)
#   CONC=60        connections for wrk, wrkclose and ab
#   FILES="index.html 75264.html 1048576.html"   (1358 B, 73.5 KiB, 1 MiB; 3000.html also exists)
#   TOOLS="wrk wrkclose ab abk"  wrkclose = wrk -H "Connection: close" (a new connection per request),
#                  abk = ab -k
#   CONNS_LIST="60 1000 5000 10000"  wrk -t1 -cN keep-alive for each N, on CONNS_FILES only
#   CONNS_FILES=index.html            (other files and tools use CONC)
#   WINDOW_CONNS=1000  from this many connections on, a keep-alive wrk run is measured in steady state:
#                  CPU and requests are counted in a DUR-long window that opens 1 s after all the
#                  connections are established (waiting up to WINDOW_SETTLE=15 s), requests from the bytes
#                  the server's connections had acknowledged (ss); below it, over the whole wrk run
#   WRK_TIMEOUT=10s  wrk --timeout (its default 2 s counts slow replies at 10,000 connections as errors)
#   REPS=1         rounds over all cases (cells then show the median)
#   HOLD_CONNS=10000  idle keep-alive connections for the RSS test (0 = skip it)
#   WARM=2s        unrecorded wrk warm-up per server after start
#   QUIET_MAX=20 QUIET_PCT=15   before each run wait up to QUIET_MAX s for the box to be < QUIET_PCT % busy
#   OTHER_MAX=50 RETRIES=2      run again (up to RETRIES times) when other processes used > OTHER_MAX % of
#                               a core during the run (the report's "other %" column; 2-40 % is normal:
#                               kernel threads doing the loopback traffic); still above it: DISTURBED
#   RUN=/tmp/stoa-bench-static  work folder (doc root, configs, logs, raw tool output)
#   OUT=$RUN/results.md         Markdown report (also printed to stdout)
#   STOA=target/release/stoa    built with `cargo build --release` when missing (BUILD=1: always)
# Ports: nginx 18180, floor 18181, lighttpd 18182, stoa-w* 18183, 18184, ..., nginx-w* 18170, ...
# (PORT_stoa_w1=... overrides).
#
# Cases run round-robin: for each (file, tool, connections) every server is loaded once, the starting server
# rotating from case to case, so drift on the box affects all servers alike. For every run: req/s,
# and the server's CPU time per request = utime+stime (/proc/PID/stat, all its processes and
# threads) after minus before the run, divided by the requests wrk/ab completed. Then RSS idle and
# while holding $HOLD_CONNS idle keep-alive connections (bench/holdconns.py).
# Exit status: 0 if every server started and every run was clean (200s only, no errors), else 1.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
RUN=${RUN:-/tmp/stoa-bench-static}
OUT=${OUT:-$RUN/results.md}
SERVERS=${SERVERS:-nginx-w1 lighttpd stoa-w1 floor}
DUR=${DUR:-10s} ABN=${ABN:-10000} CONC=${CONC:-60} REPS=${REPS:-1} WARM=${WARM:-2s}
FILES=${FILES:-index.html 75264.html 1048576.html}
TOOLS=${TOOLS:-wrk wrkclose ab abk}
CONNS_LIST=${CONNS_LIST:-60 1000 5000 10000} CONNS_FILES=${CONNS_FILES:-index.html}
WRK_TIMEOUT=${WRK_TIMEOUT:-10s}
WINDOW_CONNS=${WINDOW_CONNS:-1000} WINDOW_SETTLE=${WINDOW_SETTLE:-15}
HOLD_CONNS=${HOLD_CONNS:-10000}
OTHER_MAX=${OTHER_MAX:-50} RETRIES=${RETRIES:-2} QUIET_MAX=${QUIET_MAX:-20} QUIET_PCT=${QUIET_PCT:-15}
STOA=${STOA:-$REPO_DIR/target/release/stoa}
[[ $STOA = /* ]] || STOA=$PWD/$STOA
COMMAND="$(for v in SERVERS DUR ABN CONC FILES TOOLS CONNS_LIST CONNS_FILES WINDOW_CONNS REPS HOLD_CONNS QUIET_MAX OTHER_MAX RETRIES; do
    d=$(eval "echo \${$v}"); printf '%s=%q ' "$v" "$d"; done)bench/static.sh"
read -r -a SRVS <<< "$SERVERS"
read -r -a FILE_LIST <<< "$FILES"
read -r -a TOOL_LIST <<< "$TOOLS"
read -r -a CONNS_ARR <<< "$CONNS_LIST"

ensure_tools nginx:nginx-light lighttpd:lighttpd wrk:wrk ab:apache2-utils curl:curl python3:python3 ss:iproute2
[[ " $SERVERS " = *" floor "* ]] && ensure_tools cc:gcc
for t in "${TOOL_LIST[@]}"; do case $t in wrk|wrkclose|ab|abk) ;; *) die "unknown tool in TOOLS: $t" ;; esac; done
for c in "${CONNS_ARR[@]}"; do [[ $c =~ ^[1-9][0-9]*$ ]] || die "CONNS_LIST: not a connection count: $c"; done
[[ " $SERVERS " = *" stoa"* ]] && ensure_stoa
NOFILE=$(raise_nofile 65536)
MAXC=$HOLD_CONNS
for c in "${CONNS_ARR[@]}"; do [ "$c" -le "$MAXC" ] || MAXC=$c; done
# wrk -cN needs N descriptors, the server N plus its own (each inherits this limit)
[ "$NOFILE" -ge $(( MAXC + 1000 )) ] || warn "open-files limit is $NOFILE: too low for $MAXC connections"
# lighttpd allows at most max-fds/2 connections (bench/lib.sh gives it NOFILE/2, at most 12,000);
# at that limit it stops accepting for a while ("sockets disabled" in its log)
[[ " $SERVERS " != *" lighttpd "* ]] || [ $(( NOFILE / 2 )) -gt "$MAXC" ] ||
    warn "open-files limit $NOFILE: lighttpd takes at most $(( NOFILE / 2 )) connections, $MAXC will make it pause accepting"
export NOFILE

bench_init
LOADAVG0=$(cut -d' ' -f1-3 /proc/loadavg)   # the box's load around the run goes into the report
rm -rf "$RUN/raw" "$RUN/www"; mkdir -p "$RUN/raw"
W=$RUN/www
gen_docroot "$W"
srv_assign_ports "${SRVS[@]}"
wait_no_other_load 300
FAILED=0
RUNS_TSV=$RUN/raw/runs.tsv RSS_TSV=$RUN/raw/rss.tsv
printf 'rep\tfile\tsize\ttool\tconns\tserver\tstatus\trps\trequests\tnon2xx\terrors\tka\tticks\tus_per_req\tp50_ms\tp99_ms\tloadgen_cpu\tbusy\tother\tsecs\n' > "$RUNS_TSV"
printf 'server\tidle_kb\tidle_pss_kb\tafter_kb\theld_kb\theld_pss_kb\tclosed_kb\thold_cpu_ms\tready\tdone\n' > "$RSS_TSV"
declare -A IDLE_RSS=() IDLE_PSS=()

# floor serves one body size at a time: (re)start it with FILE's size before FILE is loaded
floor_for() {  # floor_for FILE
    local size
    size=$(stat -c %s "$W/$1")
    [ "${FLOOR_BODY:-}" = "$size" ] && srv_alive floor && return 0
    srv_alive floor && srv_stop floor
    FLOOR_BODY=$size
    srv_start floor "$W" || warn "floor did not start with a $size-byte body"
}
check_file() {  # check_file SERVER URL FILE [SAVE_HEAD]: check_url, but floor's body is only the right size
    if [ "$1" != floor ]; then check_url "$2" "$3" "${4:-}"; return; fi
    local code got
    code=$(curl -s --max-time 10 -D "${4:-/dev/null}" -o "$RUN/raw/check-body" -w '%{http_code}' "$2") || code="curl-error-$?"
    got=$(stat -c %s "$RUN/raw/check-body" 2>/dev/null || echo 0)
    [ "$code" = 200 ] && [ "$got" = "$(stat -c %s "$3")" ] && return 0
    CHECK_MSG="HTTP $code, $got of $(stat -c %s "$3") bytes"
    return 1
}

# ---- start every server, check every file, sample idle RSS, warm up ----
STOA_VERSION="stoa: not run"   # what was started, as it was when started
if [[ " $SERVERS " = *" stoa"* ]]; then
    if [ "$STOA" = "$DEFAULT_STOA" ]; then
        STOA_VERSION="stoa at commit $(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo '(none)')"
        git -C "$REPO_DIR" status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null | grep -q . && STOA_VERSION+=" + uncommitted changes"
    else  # built elsewhere: this tree's commit would say nothing about it
        STOA_VERSION="stoa from outside this tree"
    fi
    STOA_VERSION+=", binary $STOA built $(stat -c '%y' "$STOA" | cut -c1-19) (sha256 $(sha256sum "$STOA" | cut -c1-12))"
fi
UP=()
for s in "${SRVS[@]}"; do
    log "starting $s on 127.0.0.1:${SRV_PORT[$s]}"
    [ "$s" != floor ] || FLOOR_BODY=$(stat -c %s "$W/index.html")
    if ! srv_start "$s" "$W"; then FAILED=1; continue; fi
    ok=1
    for f in "${FILE_LIST[@]}"; do
        [ "$s" != floor ] || [ "$f" = index.html ] || continue   # checked when restarted for $f
        if ! check_file "$s" "http://127.0.0.1:${SRV_PORT[$s]}/$f" "$W/$f" "$RUN/raw/head-$s-$f.txt"; then
            warn "$s: /$f: $CHECK_MSG"; ok=0
        fi
    done
    check_file "$s" "http://127.0.0.1:${SRV_PORT[$s]}/" "$W/index.html" || { warn "$s: / (index): $CHECK_MSG"; ok=0; }
    [ $ok = 1 ] || FAILED=1
    sleep 0.5
    IDLE_RSS[$s]=$(srv_rss_kb "$s"); IDLE_PSS[$s]=$(srv_pss_kb "$s")
    log "$s: PIDs $(srv_pids "$s" | paste -sd,), idle RSS ${IDLE_RSS[$s]} kB"
    UP+=("$s")
done
[ ${#UP[@]} -gt 0 ] || die "no server came up"
for s in "${UP[@]}"; do
    timeout 60 wrk -t1 -c"$CONC" -d"$WARM" "http://127.0.0.1:${SRV_PORT[$s]}/index.html" > "$RUN/raw/warmup-$s.txt" 2>&1 ||
        warn "$s: warm-up wrk failed: $(tail -n1 "$RUN/raw/warmup-$s.txt")"
done

# ---- load: round-robin over servers within each case ----
one_run() {  # one_run SERVER FILE TOOL RAWFILE: sets R_* (see run_load) and BUSY; LOAD_CONNS: wrk -c
    local url="http://127.0.0.1:${SRV_PORT[$1]}/$2" attempt
    [ "$1" != floor ] || floor_for "$2"
    for attempt in $(seq 0 "$RETRIES"); do
        BUSY=$(wait_quiet)
        if ! srv_alive "$1"; then
            R_STATUS="SERVER DIED" R_RPS=- R_REQS=0 R_NON2XX=- R_ERRS=- R_KA=- R_TICKS=- R_USREQ=- R_P50=- R_P99=- R_LGCPU=- R_SECS=- R_OTHER=-
        elif ! check_file "$1" "$url" "$W/$2"; then
            R_STATUS="CHECK FAILED: $CHECK_MSG" R_RPS=- R_REQS=0 R_NON2XX=- R_ERRS=- R_KA=- R_TICKS=- R_USREQ=- R_P50=- R_P99=- R_LGCPU=- R_SECS=- R_OTHER=-
        else
            run_load "$1" "$3" "$url" "$(stat -c %s "$W/$2")" "$4"
        fi
        # something else took the CPU during the run: do it again (up to RETRIES times)
        # (not for runs under 1 s: 10 ms clock ticks make "other" meaningless there)
        [[ $R_OTHER =~ ^[0-9]+$ ]] && [ "$R_OTHER" -gt "$OTHER_MAX" ] && [ "$attempt" -lt "$RETRIES" ] &&
            [ "${R_SECS%.*}" -ge 1 ] 2>/dev/null || return 0
        log "$1 $2 $3: other processes used ${R_OTHER}% of a core during the run (> OTHER_MAX=$OTHER_MAX): again"
    done
}
case_conns() {  # case_conns FILE TOOL: the connection counts that case runs with
    if [ "$2" = wrk ] && [[ " $CONNS_FILES " = *" $1 "* ]]; then echo "${CONNS_ARR[@]}"; else echo "$CONC"; fi
}
ncase=0
for f in "${FILE_LIST[@]}"; do for tool in "${TOOL_LIST[@]}"; do
    read -r -a cl <<< "$(case_conns "$f" "$tool")"; ncase=$(( ncase + ${#cl[@]} ))
done; done
ncase=$(( ncase * REPS )) k=0 n=${#UP[@]}
for rep in $(seq "$REPS"); do
    for f in "${FILE_LIST[@]}"; do
        for tool in "${TOOL_LIST[@]}"; do
            for LOAD_CONNS in $(case_conns "$f" "$tool"); do
                k=$(( k + 1 ))
                for i in $(seq 0 $(( n - 1 ))); do
                    s=${UP[$(( (i + k - 1) % n ))]}
                    one_run "$s" "$f" "$tool" "$RUN/raw/$s-${f%.html}-$tool-c$LOAD_CONNS-$rep.txt"
                    [ "$R_STATUS" = ok ] && [ "$R_NON2XX" = 0 ] && [ "$R_ERRS" = 0 ] || FAILED=1
                    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$f" \
                        "$(stat -c %s "$W/$f")" "$tool" "$LOAD_CONNS" "$s" "$R_STATUS" "$R_RPS" "$R_REQS" "$R_NON2XX" "$R_ERRS" "$R_KA" \
                        "$R_TICKS" "$R_USREQ" "$R_P50" "$R_P99" "$R_LGCPU" "$BUSY" "$R_OTHER" "$R_SECS" >> "$RUNS_TSV"
                    printf '%s [%2d/%d] %-12s %-8s c%-5s %-9s %8s req/s %8s us/req  n=%s non2xx=%s err=%s ka=%s p99=%sms busy=%s%% other=%s%% %s\n' \
                        "$(date +%T)" "$k" "$ncase" "$f" "$tool" "$LOAD_CONNS" "$s" "$R_RPS" "$R_USREQ" "$R_REQS" "$R_NON2XX" "$R_ERRS" "$R_KA" \
                        "$R_P99" "$BUSY" "$R_OTHER" "$([ "$R_STATUS" = ok ] || echo "<< $R_STATUS")" >&2
                    if [ "$R_STATUS" = "SERVER DIED" ]; then
                        warn "$s died; last lines of its output:"; tail -n 20 "$RUN/logs/$s.out" | sed 's/^/    /' >&2 || true
                    fi
                done
            done
        done
    done
done
LOAD_CONNS=$CONC

# ---- memory: idle, and holding $HOLD_CONNS idle keep-alive connections ----
for s in "${UP[@]}"; do
    if ! srv_alive "$s"; then
        printf '%s\t%s\t%s\t-\t-\t-\t-\t-\tserver died\t-\n' "$s" "${IDLE_RSS[$s]}" "${IDLE_PSS[$s]}" >> "$RSS_TSV"; continue
    fi
    if [ "$s" = floor ] && [ "$HOLD_CONNS" -gt 0 ]; then floor_for index.html; fi
    after=$(srv_rss_kb "$s")
    if [ "$HOLD_CONNS" -gt 0 ]; then
        log "$s: holding $HOLD_CONNS idle keep-alive connections"
        hold_conns "$s" "$HOLD_CONNS" /index.html "$RUN/raw/hold-$s.txt"
        sleep 1
        closed=$(srv_rss_kb "$s")
        log "$s: RSS idle ${IDLE_RSS[$s]} kB, after loads $after kB, with connections $H_RSS kB, after closing $closed kB; $H_READY; $H_DONE"
        [[ $H_READY = "ok=$HOLD_CONNS failed=0 non200=0 "* ]] && [[ $H_DONE = *"closed_by_server=0" ]] || FAILED=1
    else
        H_RSS=- H_PSS=- H_CPU_MS=- H_READY=- H_DONE=- closed=-
    fi
    srv_alive "$s" || { warn "$s died during the connection test"; H_DONE="$H_DONE; SERVER DIED"; FAILED=1; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$s" "${IDLE_RSS[$s]}" "${IDLE_PSS[$s]}" "$after" "$H_RSS" "$H_PSS" \
        "$closed" "$H_CPU_MS" "$H_READY" "$H_DONE" >> "$RSS_TSV"
done

for s in "${UP[@]}"; do  # anything the servers logged (errors, warnings, panics), less start-up notes
    msgs=$(cat "$RUN/logs/$s.out" "$RUN/logs/$s-error.log" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' |
           grep -Ev 'server started|  ?INFO |^(stoa: )?listening on' || true)
    [ -z "$msgs" ] || { warn "$s logged (see $RUN/logs):"; tail -n 10 <<< "$msgs" | sed 's/^/    /' >&2; }
done
srv_stop_all

# ---- report ----
mkdir -p "$(dirname "$OUT")"
{
    echo "date=$(date '+%F %H:%M %Z')"
    echo "command=$COMMAND"
    echo "machine=$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), $(awk '/MemTotal/ {printf "%.0f GiB RAM", $2 / 1048576}' /proc/meminfo)"
    echo "versions=$(dpkg-query -W -f '${Package} ${Version}; ' nginx-light lighttpd wrk apache2-utils 2>/dev/null)$STOA_VERSION"
    echo "params=wrk -t1 -c$CONC -d$DUR --timeout $WRK_TIMEOUT (keep-alive, HTTP/1.1; wrkclose: -H 'Connection: close'; on $CONNS_FILES also -c ${CONNS_LIST// /, }); ab -n $ABN -c $CONC [-k] (HTTP/1.0, -r); warm-up wrk $WARM per server; REPS=$REPS; open-files limit $NOFILE; CLK_TCK $CLK_TCK"
    echo "other_max=$OTHER_MAX"
    echo "window_conns=$WINDOW_CONNS"
    echo "failed=$FAILED"
    echo "loadavg=$LOADAVG0 at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end"
} > "$RUN/raw/meta.txt"
"$PYTHON" "$BENCH_DIR/report.py" "$RUN/raw/meta.txt" "$RUNS_TSV" "$RSS_TSV" > "$OUT"
cat "$OUT"
log "report: $OUT; raw output: $RUN/raw; server logs: $RUN/logs"
[ $FAILED = 0 ] || { log "some server failed a check, a run, or the connection test (see above)"; exit 1; }
