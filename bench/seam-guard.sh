#!/bin/bash
# bench/seam-guard.sh - issue 11's performance guard: syscalls and instructions per request, before/after.
#
# Usage: bench/seam-guard.sh [--cpu] [--no-fcgi] STOA_BINARY [STOA_BINARY_2]
#        e.g. bench/seam-guard.sh /work/bin-before/stoa target/release/stoa
#        (as root: installs valgrind/strace/gcc/libfcgi-dev with apt-get when missing; ~2 min a binary)
#
# Every binary runs `stoa serve -w 1 --access-log $ACCESS_LOG` on 127.0.0.1:$PORT, one process at a time,
# started as nobody when run as root (setpriv; so callgrind can write its output file), serving the
# doc root of bench/static.sh (lib.sh gen_docroot; index.html = 1358 B). Two routes:
#   static  GET /index.html (the per-worker small-file cache)
#   fcgi    GET /fcgi/?q=hello on the C libfcgi app of bench/fastcgi.sh (bench/src/hello.c), a [[pool]]
#           of 2 processes spawned by Stoa (--no-fcgi skips it). Only Stoa's own work is counted: the
#           app runs natively outside valgrind, and perf/strace count the server process only.
# Two loads, both bounded by count (and by `timeout`):
#   saturated  `stoa bench -k -c $CONC -n $SYS_N` (the load generator is the FIRST binary's `bench`,
#              so that it is the same for both binaries): back-to-back keep-alive requests
#   lockstep   bench/lockstep.py: one keep-alive connection, each request sent only once every server
#              thread sits in epoll_wait (/proc/TID/syscall), so every request costs exactly one
#              wake-up. This is what makes instruction counts repeatable: under the saturated load,
#              whether the server finds the next request already there or sleeps for it depends on
#              timing, and that alone moved instructions per request by 5-15 % between runs.
#   file-N  GET /N.html (SIZES="75264 1048576" adds these; 75264 is in the small-file cache, 1048576 is
#           sent with sendfile; issue 16)
# Measurements, per binary and route, everything divided by the requests served:
#   a. syscalls per request, started after a warm-up and a start-up check (not counted):
#      - perf stat on syscall tracepoints (unperturbed; recvfrom split into all and failed, i.e. EAGAIN)
#        under the saturated and the lockstep load, when perf works here
#      - strace -f -c under the saturated load. ptrace slows the server so much that the next request
#        is always already there: strace shows fewer EAGAIN reads and epoll_waits than a real run has.
#   b. callgrind instructions (Ir) per request under the lockstep load: two fresh servers, one for
#      $IR_N1 requests, one for $IR_N2, (Ir(N2) - Ir(N1)) / (N2 - N1), so start-up, the start-up check,
#      the connection's accept/close and shutdown (SIGTERM) cancel. Repeated $IR_REPS times.
#   c. (--cpu only; meant for a quiet machine) server CPU per request, utime+stime from /proc, under
#      `wrk -t1 -c$CPU_CONC -d$CPU_DUR` on /index.html, $CPU_REPS rounds alternating the binaries
#      (lib.sh run_load; the "other %" column says how disturbed each run was).
# Knobs (environment): ACCESS_LOG=off (or a file, e.g. /dev/null: the access log's cost) SIZES="" PORT=18290 CONC=10 SYS_N=20000 LOCK_N=2000 IR_N1=2000 IR_N2=12000 IR_REPS=1
#   CPU_DUR=10s CPU_CONC=60 CPU_REPS=3  RUN=/tmp/stoa-seam-guard  OUT=$RUN/results.txt
# Output: a plain-text report on stdout and in $OUT; raw tool output in $RUN/raw.
# Exit status: 0 if every server started and every load completed with 200s only, else 1.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
CPU=0 FCGI=1 BINS=()
for a; do
    case $a in
        --cpu) CPU=1 ;;
        --no-fcgi) FCGI=0 ;;
        -*) die "unknown option $a (see --help)" ;;
        *) [[ $a = /* ]] || a=$PWD/$a; [ -x "$a" ] || die "not an executable: $a"; BINS+=("$a") ;;
    esac
done
[ ${#BINS[@]} -ge 1 ] && [ ${#BINS[@]} -le 2 ] || die "give one or two Stoa binaries (see --help)"
RUN=${RUN:-/tmp/stoa-seam-guard}
OUT=${OUT:-$RUN/results.txt}
PORT=${PORT:-18290} CONC=${CONC:-10} SYS_N=${SYS_N:-20000} LOCK_N=${LOCK_N:-2000}
IR_N1=${IR_N1:-2000} IR_N2=${IR_N2:-12000} IR_REPS=${IR_REPS:-1}
CPU_DUR=${CPU_DUR:-10s} CPU_CONC=${CPU_CONC:-60} CPU_REPS=${CPU_REPS:-3} SIZES=${SIZES:-}
ACCESS_LOG=${ACCESS_LOG:-off}
[ "$IR_N2" -gt "$IR_N1" ] || die "IR_N2 must be larger than IR_N1"
LOADGEN=${BINS[0]}

tools=(valgrind:valgrind strace:strace curl:curl python3:python3 setpriv:util-linux)
[ $FCGI = 1 ] && tools+=(cc:gcc)
[ $CPU = 1 ] && tools+=(wrk:wrk)
ensure_tools "${tools[@]}"
if [ $FCGI = 1 ] && [ ! -f /usr/include/fcgi_stdio.h ]; then
    [ "$(id -u)" = 0 ] || die "libfcgi-dev is missing (apt-get install libfcgi-dev), or use --no-fcgi"
    wait_for_apt
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libfcgi-dev >&2 || die "apt-get install libfcgi-dev failed"
fi
PERF=0
perf stat -e syscalls:sys_enter_writev -- true > /dev/null 2>&1 && PERF=1
[ $PERF = 1 ] || warn "perf cannot count syscall tracepoints here: strace -c only (whose EAGAIN and epoll_wait counts are low)"
AS_NOBODY=()
[ "$(id -u)" = 0 ] && AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups --)

bench_init
rm -rf "$RUN/raw" "$RUN/www" "$RUN/cg" "$RUN/bin"
mkdir -p "$RUN/raw" "$RUN/cg" "$RUN/bin"
chmod 755 "$RUN"; chmod 1777 "$RUN/cg"
W=$RUN/www
gen_docroot "$W"
ROUTES=(static)
for z in $SIZES; do [ -f "$W/$z.html" ] || die "no $z.html in the doc root (lib.sh gen_docroot)"; ROUTES+=("file-$z"); done
if [ $FCGI = 1 ]; then
    HELLO_C=$BENCH_DIR/src/hello.c
    cc -O2 -Wall -DFCGI -o "$RUN/bin/hello_fcgi" "$HELLO_C" -lfcgi || die "cc -O2 -DFCGI $HELLO_C -lfcgi failed"
    chmod 755 "$RUN/bin" "$RUN/bin/hello_fcgi"
    cat > "$RUN/fcgi.toml" <<EOF
# written by bench/seam-guard.sh: the C libfcgi app of bench/fastcgi.sh, 2 processes spawned by Stoa
listen = ["127.0.0.1:$PORT"]
workers = 1
[log]
access = "off"
[[pool]]
name = "hello"
command = ["$RUN/bin/hello_fcgi"]
processes = 2
[[site]]
root = "$W"
index = ["index.html"]
[[site.route]]
prefix = "/fcgi/"
fastcgi = { pool = "hello" }
EOF
    chmod 644 "$RUN/fcgi.toml"
    ROUTES+=(fcgi)
fi
route_path() { case $1 in static) echo /index.html ;; fcgi) echo '/fcgi/?q=hello' ;; file-*) echo "/${1#file-}.html" ;; esac; }
port_free "$PORT" || die "port $PORT is in use (PORT=...)"

# sg_start NAME BINARY ROUTE [CALLGRIND_OUT]: start one server (under callgrind when CALLGRIND_OUT is
# given), wait until ROUTE answers 200 (up to 60 s: valgrind starts slowly); sets SIZE (body bytes)
sg_start() {
    local name=$1 bin=$2 route=$3 cg=${4:-} pid i args pre=()
    case $route in
        static|file-*) args=(serve -l "127.0.0.1:$PORT" -w 1 --access-log "$ACCESS_LOG" "$W") ;;
        fcgi)   args=(serve --config "$RUN/fcgi.toml" -w 1 --access-log "$ACCESS_LOG") ;;
    esac
    [ -n "$cg" ] && pre=(valgrind --tool=callgrind --vgdb=no --trace-children=no --child-silent-after-fork=yes
                         "--callgrind-out-file=$cg" "--log-file=$cg.valgrind.log")
    "${AS_NOBODY[@]}" "${pre[@]}" "$bin" "${args[@]}" > "$RUN/logs/$name.out" 2>&1 &
    pid=$!
    SRV_PID[$name]=$pid; echo "$pid" > "$RUN/pids/$name.pid"
    for i in $(seq 300); do
        alive "$pid" || break
        if curl -s -o "$RUN/raw/check-body" --max-time 5 -w '%{http_code}' "http://127.0.0.1:$PORT$(route_path "$route")" 2>/dev/null | grep -qx 200; then
            SIZE=$(stat -c %s "$RUN/raw/check-body")
            [ "$route" != fcgi ] && ! cmp -s "$RUN/raw/check-body" "$W$(route_path "$route")" && { warn "$name: wrong body"; srv_stop "$name"; return 1; }
            return 0
        fi
        sleep 0.2
    done
    warn "$name does not answer $(route_path "$route") on port $PORT"; tail -n 20 "$RUN/logs/$name.out" | sed 's/^/    /' >&2
    srv_stop "$name"; return 1
}

# saturated SERVER_NAME ROUTE RAWFILE: the bounded keep-alive load; prints the requests completed
saturated() {
    timeout 300 "$LOADGEN" bench -k -c "$CONC" -n "$SYS_N" -q "http://127.0.0.1:$PORT$(route_path "$2")" > "$3" 2>&1 || true
    awk '/^Complete requests:/ {c = $3} /^Failed requests:/ {f = $3} /^Non-2xx responses:/ {n = $3}
         END {if (f + n > 0 || c == "") print 0; else print c}' "$3"
}
lockstep() {  # lockstep SERVER_NAME ROUTE N RAWFILE: prints the requests answered 200 with the right size
    timeout 600 "$PYTHON" "$BENCH_DIR/lockstep.py" --port "$PORT" --pid "${SRV_PID[$1]}" --path "$(route_path "$2")" \
        -n "$3" --size "$SIZE" > "$4" 2>&1 || true
    sed -n 's/.* ok=\([0-9]*\) bad=0 .*/\1/p' "$4" | grep . || echo 0
}

PERF_EVENTS=(recvfrom read writev write sendto sendmsg epoll_wait epoll_pwait sendfile64 accept4 close)
# perf_load SERVER_NAME ROUTE LOAD(saturated|lockstep) TAG: per-request syscall counts from perf stat
perf_load() {
    local name=$1 route=$2 load=$3 tag=$4 ev=() e sp n f
    f=$RUN/raw/perf-$tag.txt
    for e in "${PERF_EVENTS[@]}"; do ev+=(-e "syscalls:sys_enter_$e"); done
    ev+=(-e syscalls:sys_exit_recvfrom --filter 'ret < 0' -e syscalls:sys_exit_read --filter 'ret < 0' -e raw_syscalls:sys_enter)
    perf stat -x, "${ev[@]}" -p "${SRV_PID[$name]}" -o "$f" & sp=$!
    BG_PIDS+=("$sp"); sleep 0.5
    if [ "$load" = saturated ]; then n=$(saturated "$name" "$route" "$RUN/raw/load-$tag.txt")
    else n=$(lockstep "$name" "$route" "$LOCK_N" "$RUN/raw/load-$tag.txt"); fi
    kill -INT "$sp"; wait "$sp" || true
    BG_PIDS=("${BG_PIDS[@]/$sp}")
    [ "$n" -gt 0 ] || { warn "$tag: the load failed (see $RUN/raw/load-$tag.txt)"; FAILED=1; echo "  perf   $load: LOAD FAILED"; return; }
    # the two filtered exits come after the plain events: label them
    awk -F, -v n="$n" -v loadname="$load" '
        /^[0-9]/ { ev = $3; sub(/^syscalls:sys_(enter|exit)_/, "", ev); sub(/^raw_syscalls:sys_enter$/, "ALL", ev)
                   if (ev in seen) ev = ev "-failed"; seen[ev] = 1
                   if ($1 > 0 || ev ~ /^(recvfrom|writev|epoll_wait)/) out = out sprintf(" %s=%.3f", ev, $1 / n) }
        END { printf "  perf   %-9s (%d req):%s\n", loadname, n, out }' "$f"
}
# strace_load SERVER_NAME ROUTE TAG: strace -f -c over the saturated load
strace_load() {
    local name=$1 route=$2 tag=$3 sp n f
    f=$RUN/raw/strace-$tag.txt
    strace -f -c -o "$f" -p "${SRV_PID[$name]}" 2> "$RUN/raw/strace-$tag.err" & sp=$!
    BG_PIDS+=("$sp"); sleep 1
    n=$(saturated "$name" "$route" "$RUN/raw/load-$tag.txt")
    sleep 0.3; kill -INT "$sp"; wait "$sp" || true
    BG_PIDS=("${BG_PIDS[@]/$sp}")
    [ "$n" -gt 0 ] || { warn "$tag: the load failed (see $RUN/raw/load-$tag.txt)"; FAILED=1; echo "  strace saturated: LOAD FAILED"; return; }
    awk -v n="$n" '
        $1 ~ /^[0-9.]+$/ && NF >= 5 { name = $NF; calls = $4; err = (NF == 6 ? $5 : 0)
                   if (name == "total") next
                   out = out sprintf(" %s=%.3f", name, calls / n); if (err > 0) out = out sprintf("(%.3f failed)", err / n) }
        END { printf "  strace saturated (%d req):%s\n", n, out }' "$f"
}
# ir_run SERVER_NAME BINARY ROUTE N TAG: one callgrind server, N lockstep requests; sets IRV to its Ir
ir_run() {  # total (0 on failure). Not in a subshell: the EXIT trap must know the server's PID.
    local name=$1 bin=$2 route=$3 n=$4 tag=$5 cg got
    cg=$RUN/cg/$tag.out
    IRV=0
    sg_start "$name" "$bin" "$route" "$cg" || return 0
    got=$(lockstep "$name" "$route" "$n" "$RUN/raw/load-$tag.txt")
    srv_stop "$name"   # SIGTERM: Stoa stops cleanly and callgrind writes $cg
    [ "$got" = "$n" ] || { warn "$tag: $got of $n requests answered (see $RUN/raw/load-$tag.txt)"; return 0; }
    IRV=$(awk '/^summary:/ {print $2}' "$cg" 2>/dev/null)
    [ -n "$IRV" ] || { warn "$tag: no callgrind summary in $cg"; IRV=0; }
}
say() { printf '%s\n' "$*" | tee -a "$RUN/raw/report.txt"; }

FAILED=0
{
    echo "# bench/seam-guard.sh $(date '+%F %H:%M %Z')"
    echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), load average $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "tools: $(valgrind --version), $(strace -V | head -1), $([ $PERF = 1 ] && perf --version || echo 'no perf'), load generator $LOADGEN bench"
    echo "knobs: SIZES=\"$SIZES\" CONC=$CONC SYS_N=$SYS_N LOCK_N=$LOCK_N IR_N1=$IR_N1 IR_N2=$IR_N2 IR_REPS=$IR_REPS"
} | tee "$RUN/raw/report.txt"
declare -A IR=()
for i in "${!BINS[@]}"; do
    b=${BINS[$i]} name=stoa-$i
    echo "binary $i: $b (sha256 $(sha256sum "$b" | cut -c1-12), built $(stat -c '%y' "$b" | cut -c1-19))" | tee -a "$RUN/raw/report.txt"
    for route in "${ROUTES[@]}"; do
        log "binary $i, $route: syscalls"
        say " route $route: GET $(route_path "$route")"
        if sg_start "$name" "$b" "$route"; then
            say "  body $SIZE bytes"
            saturated "$name" "$route" "$RUN/raw/warmup-$i-$route.txt" > /dev/null   # warm-up, not counted
            if [ $PERF = 1 ]; then
                say "$(perf_load "$name" "$route" saturated "$i-$route-sat")"
                say "$(perf_load "$name" "$route" lockstep "$i-$route-lock")"
            fi
            say "$(strace_load "$name" "$route" "$i-$route-strace")"
            srv_alive "$name" || { say "  SERVER DIED"; FAILED=1; }
            srv_stop "$name"
        else
            say "  SERVER DID NOT START"; FAILED=1
        fi
        grep -q 'LOAD FAILED' "$RUN/raw/report.txt" && FAILED=1
        for r in $(seq "$IR_REPS"); do
            log "binary $i, $route: callgrind, $IR_N1 and $IR_N2 lockstep requests (round $r of $IR_REPS)"
            ir_run "$name" "$b" "$route" "$IR_N1" "$i-$route-$r-n1"; a=$IRV
            ir_run "$name" "$b" "$route" "$IR_N2" "$i-$route-$r-n2"; c=$IRV
            if [ "$a" -gt 0 ] && [ "$c" -gt 0 ]; then
                v=$(awk -v a="$a" -v c="$c" -v n1="$IR_N1" -v n2="$IR_N2" 'BEGIN {printf "%.0f", (c - a) / (n2 - n1)}')
                IR[$i-$route]+="$v "
                say "  callgrind lockstep round $r: Ir($IR_N1)=$a Ir($IR_N2)=$c -> $v Ir/request"
            else
                say "  callgrind lockstep round $r: FAILED"; FAILED=1
            fi
        done
    done
done
{
    echo "summary: instructions per request (callgrind, lockstep; rounds, then min-max spread)"
    for route in "${ROUTES[@]}"; do
        for i in "${!BINS[@]}"; do
            echo "${IR[$i-$route]:-}" | awk -v r="$route" -v i="$i" '{min = max = $1; for (k = 1; k <= NF; k++) {if ($k < min) min = $k; if ($k > max) max = $k}
                printf "  %-6s binary %d: %s(spread %.2f %%)\n", r, i, $0, (min > 0 ? 100 * (max - min) / min : 0)}'
        done
        if [ ${#BINS[@]} = 2 ] && [ -n "${IR[0-$route]:-}" ] && [ -n "${IR[1-$route]:-}" ]; then
            awk -v a="${IR[0-$route]}" -v b="${IR[1-$route]}" -v r="$route" 'BEGIN {
                na = split(a, x, " "); nb = split(b, y, " "); sa = sb = 0
                for (k = 1; k <= na; k++) sa += x[k]; for (k = 1; k <= nb; k++) sb += y[k]
                printf "  %-6s binary 1 / binary 0: %.4f (%+.2f %%; issue 11 allows +2 %%)\n", r, (sb / nb) / (sa / na), 100 * ((sb / nb) / (sa / na) - 1) }'
        fi
    done
} | tee -a "$RUN/raw/report.txt"

if [ $CPU = 1 ]; then
    DUR=$CPU_DUR CONC=$CPU_CONC
    log "CPU per request: wrk -t1 -c$CONC -d$DUR, $CPU_REPS rounds alternating the binaries"
    echo "CPU per request (wrk -t1 -c$CONC -d$DUR /index.html, server utime+stime / requests):" | tee -a "$RUN/raw/report.txt"
    for r in $(seq "$CPU_REPS"); do
        order=("${!BINS[@]}")
        [ $(( r % 2 )) = 0 ] && [ ${#BINS[@]} = 2 ] && order=(1 0)
        for i in "${order[@]}"; do
            name=stoa-$i
            sg_start "$name" "${BINS[$i]}" static || { FAILED=1; continue; }
            timeout 60 wrk -t1 -c"$CONC" -d2s "http://127.0.0.1:$PORT/index.html" > "$RUN/raw/cpu-warm-$i-$r.txt" 2>&1 || true
            BUSY=$(wait_quiet)
            run_load "$name" wrk "http://127.0.0.1:$PORT/index.html" 1358 "$RUN/raw/cpu-$i-$r.txt"
            srv_stop "$name"
            [ "$R_STATUS" = ok ] && [ "$R_NON2XX" = 0 ] && [ "$R_ERRS" = 0 ] || FAILED=1
            printf '  round %d binary %d: %s us/req, %s req/s, %s requests, busy before %s %%, other %s %% of a core, %s\n' \
                "$r" "$i" "$R_USREQ" "$R_RPS" "$R_REQS" "$BUSY" "$R_OTHER" "$R_STATUS" | tee -a "$RUN/raw/report.txt"
        done
    done
fi
srv_stop_all
mkdir -p "$(dirname "$OUT")"
cp "$RUN/raw/report.txt" "$OUT"
log "report: $OUT; raw output: $RUN/raw; callgrind files: $RUN/cg (callgrind_annotate FILE)"
[ $FAILED = 0 ] || { log "something failed (see above)"; exit 1; }
