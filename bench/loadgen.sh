#!/bin/bash
# bench/loadgen.sh - load generators compared: wrk, ab -k and `stoa bench`, against lighttpd (one
# process: there the load generator is the bottleneck on a 2-core box) and nginx, same doc root.
#
# Usage: bench/loadgen.sh            (as root for package installs; ~3-4 min with the defaults)
# Knobs (environment):
#   SERVERS="lighttpd nginx"
#   FILE=index.html    the 1358-byte file of bench/lib.sh gen_docroot
#   DUR=10s            wrk and stoa bench duration (one thread, $CONC keep-alive connections)
#   ABN=200000         ab -k request count (ab has no duration with a fixed count of its own)
#   CONC=60            connections
#   REPS=3             rounds; generators and servers alternate inside each round, medians reported
#   MEM_REQS=10000000  requests of the memory check (stoa bench -n against lighttpd; 0 = skip it)
#   QUIET_MAX=20 QUIET_PCT=15   before each run wait up to QUIET_MAX s for the box to be < QUIET_PCT % busy
#   RUN=/tmp/stoa-bench-loadgen  work folder     OUT=$RUN/results.md  Markdown report (also on stdout)
#   STOA=target/release/stoa     built with `cargo build --release` when missing (BUILD=1: always)
#
# For every run: the requests/s the generator achieved (complete responses / wall time) and the
# generator's own CPU time per request (utime+stime of its process from bash `time`, i.e. getrusage
# of the child, divided by its complete responses). Then Stoa's ratios to wrk: CPU per request
# (target <= 0.8) and requests/s against lighttpd (target >= 1.1); and stoa bench's RSS sampled
# every 5 s over MEM_REQS requests (it must stay flat). Exit status 1 if a run failed.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
RUN=${RUN:-/tmp/stoa-bench-loadgen}
OUT=${OUT:-$RUN/results.md}
SERVERS=${SERVERS:-lighttpd nginx}
FILE=${FILE:-index.html}
DUR=${DUR:-10s} ABN=${ABN:-200000} CONC=${CONC:-60} REPS=${REPS:-3}
MEM_REQS=${MEM_REQS:-10000000}
STOA=${STOA:-$REPO_DIR/target/release/stoa}
[[ $STOA = /* ]] || STOA=$PWD/$STOA
TOOLS=(wrk abk stoa)
read -r -a SRVS <<< "$SERVERS"

ensure_tools nginx:nginx-light lighttpd:lighttpd wrk:wrk ab:apache2-utils curl:curl
ensure_stoa
NOFILE=$(raise_nofile 65536)
export NOFILE

bench_init
rm -rf "$RUN/raw" "$RUN/www"; mkdir -p "$RUN/raw"
gen_docroot "$RUN/www"
srv_assign_ports "${SRVS[@]}"
for s in "${SRVS[@]}"; do
    srv_start "$s" "$RUN/www" || die "$s did not start"
    check_url "http://127.0.0.1:${SRV_PORT[$s]}/$FILE" "$RUN/www/$FILE" || die "$s: $CHECK_MSG"
done

# run_gen SERVER TOOL RAWFILE: sets G_RPS G_REQS G_CPU_US (generator CPU us per request) G_ERRS G_STATUS
run_gen() {
    local srv=$1 tool=$2 f=$3 url rc=0 tm
    url="http://127.0.0.1:${SRV_PORT[$srv]}/$FILE"
    G_RPS=- G_REQS=0 G_CPU_US=- G_ERRS=- G_STATUS=ok
    local TIMEFORMAT='TIME %3U %3S %3R'
    case $tool in
        wrk)  { time timeout $(( $(dur_secs "$DUR") + 30 )) wrk -t1 -c"$CONC" -d"$DUR" -s "$BENCH_DIR/wrk-report.lua" "$url" > "$f" 2>&1; } 2>> "$f" || rc=$? ;;
        abk)  { time timeout 300 ab -r -k -n "$ABN" -c "$CONC" "$url" > "$f" 2>&1; } 2>> "$f" || rc=$? ;;
        stoa) { time timeout $(( $(dur_secs "$DUR") + 30 )) "$STOA" bench -q -k --threads 1 -c "$CONC" -d "$DUR" --json "$f.json" "$url" > "$f" 2>&1; } 2>> "$f" || rc=$? ;;
    esac
    tm=($(awk '/^TIME / {print $2, $3, $4}' "$f"))
    case $tool in
        wrk)  G_REQS=$(awk '/^RESULT / {print $2; exit}' "$f"); G_ERRS=$(awk '/^RESULT / {print $6 + $7 + $8 + $9 + $5; exit}' "$f") ;;
        abk)  G_REQS=$(awk '/^Complete requests:/ {print $3}' "$f"); G_ERRS=$(awk '/^Failed requests:/ {f = $3} /^Non-2xx/ {n = $3} END {print f + n}' "$f") ;;
        stoa) if [ -s "$f.json" ]; then
                  G_REQS=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["responses"])' "$f.json")
                  G_ERRS=$("$PYTHON" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["failed"] + j["non_2xx"])' "$f.json")
              fi ;;
    esac
    G_REQS=${G_REQS:-0}
    if [ "$rc" != 0 ] || [ "$G_REQS" = 0 ]; then G_STATUS="$tool failed (rc $rc)"; return; fi
    [ "${G_ERRS:-0}" = 0 ] || G_STATUS="$G_ERRS errors"
    # Each tool's own measure of its run time (the wall time would add start-up and reporting).
    case $tool in
        wrk)  G_RPS=$(awk '/^RESULT / {printf "%.0f", $2 * 1e6 / $3; exit}' "$f") ;;
        abk)  G_RPS=$(awk '/^Requests per second:/ {printf "%.0f", $4}' "$f") ;;
        stoa) G_RPS=$("$PYTHON" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(round(j["responses"] / j["duration_s"]))' "$f.json") ;;
    esac
    G_CPU_US=$(awk -v u="${tm[0]}" -v s="${tm[1]}" -v n="$G_REQS" 'BEGIN {printf "%.3f", (u + s) * 1e6 / n}')
}

declare -A RPS=() CPU=()
fail=0
for rep in $(seq "$REPS"); do
    for si in "${!SRVS[@]}"; do
        srv=${SRVS[$si]}
        for ti in "${!TOOLS[@]}"; do
            # rotate the order so that drift on the box hits every generator alike
            tool=${TOOLS[$(( (ti + rep + si) % ${#TOOLS[@]} ))]}
            wait_no_other_load 600
            busy=$(wait_quiet)
            run_gen "$srv" "$tool" "$RUN/raw/$srv-$tool-$rep.txt"
            log "round $rep $srv $tool: $G_RPS req/s, $G_CPU_US us CPU/request ($G_REQS requests; box was ${busy}% busy before) $G_STATUS"
            [ "$G_STATUS" = ok ] || fail=1
            RPS[$srv,$tool]+="$G_RPS "; CPU[$srv,$tool]+="$G_CPU_US "
        done
    done
done

median() { tr ' ' '\n' | grep -v '^-*$' | sort -g | awk '{a[NR] = $1} END {if (NR == 0) print "-"; else print a[int((NR + 1) / 2)]}'; }

MEM_LINE="skipped (MEM_REQS=0)"
if [ "$MEM_REQS" -gt 0 ]; then
    srv=${SRVS[0]}
    wait_no_other_load 600
    wait_quiet > /dev/null
    log "memory check: stoa bench -n $MEM_REQS against $srv"
    "$STOA" bench -q -k --threads 1 -c "$CONC" -n "$MEM_REQS" --json "$RUN/raw/mem.json" \
        "http://127.0.0.1:${SRV_PORT[$srv]}/$FILE" > "$RUN/raw/mem.txt" 2>&1 &
    mpid=$!; BG_PIDS+=("$mpid")
    samples=()
    while alive "$mpid"; do
        v=$(awk '/^VmRSS:/ {print $2}' "/proc/$mpid/status" 2>/dev/null || true)
        [ -n "$v" ] && samples+=("$v")
        sleep 5
    done
    wait "$mpid" || fail=1
    if [ ${#samples[@]} -ge 2 ]; then
        MEM_LINE="RSS of stoa bench over $MEM_REQS requests, sampled every 5 s (kB): first ${samples[0]}, max $(printf '%s\n' "${samples[@]}" | sort -n | tail -1), last ${samples[-1]} (${#samples[@]} samples)"
    else
        MEM_LINE="too short to sample (${#samples[@]} samples)"
    fi
    log "$MEM_LINE"
fi

{
    echo "## Load generators: wrk, ab -k, stoa bench ($(date -u +%F), $(nproc) cores)"
    echo
    echo "\`DUR=$DUR ABN=$ABN CONC=$CONC REPS=$REPS bench/loadgen.sh\`: GET /$FILE (1358 bytes), one thread and $CONC"
    echo "keep-alive connections per generator (wrk -t1, ab -k, stoa bench -k --threads 1); median of $REPS."
    echo "CPU/request: the generator's own utime+stime divided by its complete responses."
    echo
    echo "| server | generator | requests/s | generator CPU us/request |"
    echo "|---|---|---:|---:|"
    for srv in "${SRVS[@]}"; do
        for tool in "${TOOLS[@]}"; do
            name=$tool; [ "$tool" = abk ] && name="ab -k"; [ "$tool" = stoa ] && name="stoa bench"
            echo "| $srv | $name | $(echo "${RPS[$srv,$tool]}" | median) | $(echo "${CPU[$srv,$tool]}" | median) |"
        done
    done
    echo
    for srv in "${SRVS[@]}"; do
        r=$(awk -v a="$(echo "${RPS[$srv,stoa]}" | median)" -v b="$(echo "${RPS[$srv,wrk]}" | median)" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}')
        c=$(awk -v a="$(echo "${CPU[$srv,stoa]}" | median)" -v b="$(echo "${CPU[$srv,wrk]}" | median)" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}')
        echo "- $srv: stoa bench / wrk requests/s = **$r** (target >= 1.1 against lighttpd), CPU per request = **$c** (target <= 0.8)"
    done
    echo "- memory: $MEM_LINE"
} > "$OUT"
cat "$OUT"
exit $fail
