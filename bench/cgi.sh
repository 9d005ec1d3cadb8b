#!/usr/bin/env bash
# bench/cgi.sh - CGI throughput: Stoa against Apache (event MPM + mod_cgid) and lighttpd (mod_cgi).
#
# Every server is started by this script on loopback and serves the same three CGI programs from one
# folder: hello (C, compiled here with cc -O2), hello.pl (Perl) and hello.sh (/bin/sh), each printing
# the same ~1.3 KB page for ?q=hello (sources in bench/src/). Before any load, every server must return
# HTTP 200 and the byte-identical page for every program (and again before each run). Then
# `wrk -t1 -c16 -d$DUR` per (program, server), round-robin over the servers within each program, the
# starting server rotating from case to case. Prints a Markdown report with Stoa's ratio to each peer.
#
# Usage: bench/cgi.sh            (as root: installs missing Debian packages with apt-get; ~5 min)
# Knobs (environment):
#   SERVERS="apache lighttpd stoa-w2 stoa-w1"   stoa-wN = Stoa with `workers = N`
#   PROGS="hello hello.pl hello.sh"             programs under /cgi-bin/
#   DUR=10s CONC=16 REPS=2 WARM=1s              wrk duration / connections, rounds, warm-up per server+program
#   LOAD_MAX=1.5 LOAD_WAIT=240                  before starting, wait up to LOAD_WAIT s for the 1-min load average < LOAD_MAX
#   QUIET_PCT=15 QUIET_MAX=10                   before each run, wait up to QUIET_MAX s for the box to be < QUIET_PCT % busy
#   OTHER_MAX=50 RETRIES=1                      run again when other processes used > OTHER_MAX % of a core during a run
#   FLOOR_N=1000                                runs of each program in the bare spawn loop (0: skip it)
#   CGROUP=auto                                 0: no cpuacct cgroup (see below); CPU from /proc only
#   RUN=/tmp/stoa-bench-cgi                     work folder (doc root, configs, logs, raw wrk output)
#   OUT=$RUN/results.md                         Markdown report (also printed to stdout)
#   STOA=target/release/stoa                    built with `cargo build --release` when missing (BUILD=1: always)
# Ports: apache 18190, lighttpd 18192, stoa-w2 18193, stoa-w1 18194 (PORT_stoa_w1=... overrides).
#
# CPU per request = CPU time of ALL the server's processes INCLUDING the CGI programs it ran, after the
# run minus before, divided by the requests wrk completed. From /proc/PID/stat of the server's main
# process and every descendant: utime+stime (fields 14, 15: the process itself, all its threads) plus
# cutime+cstime (fields 16, 17: children it has waited for). A CGI program's CPU lands in cutime+cstime
# of the process that reaps it: Stoa and lighttpd themselves, for Apache the mod_cgid daemon (the CGI
# processes are its children). The report splits the total into "server" (utime+stime) and "CGI
# children" (cutime+cstime; for Apache this also holds any event-MPM child process that exited).
# BUT the mod_cgid daemon ignores SIGCHLD (SigIgn in /proc/PID/status), so the kernel reaps its CGI
# children itself and their CPU is added to nobody's cutime/cstime: for Apache the /proc sum misses the
# CGI programs entirely. So, as root, each server is also started in its own cpuacct cgroup (v1,
# /sys/fs/cgroup/cpuacct/stoa-bench-cgi.PID.NAME, removed at exit), whose cpuacct.usage counts every
# process in it however it ends; that total ("CPU us/req") is the one compared, the /proc columns
# show the split and cross-check it (for Stoa and lighttpd the two agree).
# The floor: bench/src/spawnloop.c runs each program FLOOR_N times in a row with posix_spawn, a stdout
# pipe read to the end and waitpid, no HTTP: its CPU per run (getrusage, itself + children) is what
# any CGI server must spend at least; 2 cores / floor = the most req/s this box could give.
# Exit status: 0 if every server started, every check passed and every run was clean, else 1.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
RUN=${RUN:-/tmp/stoa-bench-cgi}
OUT=${OUT:-$RUN/results.md}
SERVERS=${SERVERS:-apache lighttpd stoa-w2 stoa-w1}
PROGS=${PROGS:-hello hello.pl hello.sh}
DUR=${DUR:-10s} CONC=${CONC:-16} REPS=${REPS:-2} WARM=${WARM:-1s}
LOAD_MAX=${LOAD_MAX:-1.5} LOAD_WAIT=${LOAD_WAIT:-240}
export QUIET_PCT=${QUIET_PCT:-15} QUIET_MAX=${QUIET_MAX:-10}
OTHER_MAX=${OTHER_MAX:-50} RETRIES=${RETRIES:-1}
CGROUP=${CGROUP:-auto} FLOOR_N=${FLOOR_N:-1000}
STOA=${STOA:-$REPO_DIR/target/release/stoa}
[[ $STOA = /* ]] || STOA=$PWD/$STOA
COMMAND="$(for v in SERVERS PROGS DUR CONC REPS; do d=$(eval "echo \${$v}"); printf '%s=%q ' "$v" "$d"; done)bench/cgi.sh"
read -r -a SRVS <<< "$SERVERS"
read -r -a PROG_LIST <<< "$PROGS"
QUERY=q=hello

# ---------------------------------------------------------------- CGI-specific helpers
# (lib.sh knows nginx / lighttpd / stoa-wN serving static files; these cover the CGI set-up.)

# srv_cpu_split NAME: "SELF CHILDREN" clock ticks over the server's main PID and all its descendants
# (zombies included), from one snapshot of /proc: SELF = utime+stime, CHILDREN = cutime+cstime.
srv_cpu_split() {
    local root=${SRV_PID[$1]:-}
    [ -n "$root" ] || { echo "0 0"; return; }
    { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v root="$root" '
        { s = $0; sub(/^.*\) /, "", s); n = split(s, f, " ")
          if (n < 15) next
          pid = $1 + 0; par[pid] = f[2] + 0; self[pid] = f[12] + f[13]; kids[pid] = f[14] + f[15] }
        END { q[1] = root + 0; h = 1; t = 1; a = 0; b = 0
              while (h <= t) { p = q[h++]; if (!(p in self)) continue; a += self[p]; b += kids[p]
                               for (c in par) if (par[c] == p && c != p) q[++t] = c }
              print a, b }'
}
srv_zombies() {  # srv_zombies NAME: how many of the server's descendants are zombies (exited, not reaped)
    { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v root="${SRV_PID[$1]}" '
        { s = $0; sub(/^.*\) /, "", s); split(s, f, " "); par[$1 + 0] = f[2] + 0; st[$1 + 0] = f[1] }
        END { q[1] = root + 0; h = 1; t = 1; z = 0
              while (h <= t) { p = q[h++]; if (st[p] == "Z") z++
                               for (c in par) if (par[c] == p && c != p) q[++t] = c }
              print z }'
}
# lib.sh's run_load samples srv_cpu_ticks before and after the load (its CPU/request and "other %"):
# count the CGI children there too.
# With a cgroup, the cgroup's total (so that run_load's "other %" does not count Apache's CGI programs).
srv_cpu_ticks() {
    if [ -n "${SRV_CG[$1]:-}" ]; then awk -v hz="$CLK_TCK" '{printf "%.0f\n", $1 * hz / 1e9}' "${SRV_CG[$1]}/cpuacct.usage"
    else srv_cpu_split "$1" | awk '{print $1 + $2}'; fi
}
srv_cg_ns() { if [ -n "${SRV_CG[$1]:-}" ]; then cat "${SRV_CG[$1]}/cpuacct.usage"; else echo -; fi; }

declare -A SRV_CG=()
CG_ROOT=/sys/fs/cgroup/cpuacct
cg_create() {  # cg_create NAME: make a cpuacct cgroup for the server and print its folder (nothing if unavailable)
    [ "$CGROUP" != 0 ] && [ -w "$CG_ROOT/cgroup.procs" ] || return 0
    local d=$CG_ROOT/stoa-bench-cgi.$$.$1
    mkdir "$d" 2>/dev/null && echo "$d" || true
}
cg_cleanup() {  # remove our cgroups (only those named stoa-bench-cgi.*, and only when empty: rmdir)
    local d i
    for d in "$CG_ROOT"/stoa-bench-cgi.*; do
        [ -d "$d" ] || continue
        case $d in "$CG_ROOT"/stoa-bench-cgi.$$.*) ;; *) [ -s "$d/cgroup.procs" ] && continue ;; esac  # another run's, in use
        for i in 1 2 3 4 5 6 7 8 9 10; do rmdir "$d" 2>/dev/null && break; sleep 0.2; done
        [ -d "$d" ] && warn "could not remove cgroup $d (processes left: $(cat "$d/cgroup.procs" | paste -sd' '))"
    done
    return 0
}

cgi_assign_ports() {
    local n seq=0 v
    for n; do
        case $n in
            apache) SRV_PORT[$n]=18190 ;;
            lighttpd) SRV_PORT[$n]=18192 ;;
            stoa-w[0-9]*) SRV_PORT[$n]=$(( 18193 + seq )); seq=$(( seq + 1 )) ;;
            *) die "unknown server name: $n (apache, lighttpd, stoa-wN)" ;;
        esac
        v=PORT_${n//-/_}
        [ -z "${!v:-}" ] || SRV_PORT[$n]=${!v}
    done
}

cgi_srv_start() {  # cgi_srv_start NAME: start, wait until it answers on /; returns 1 (with a message) if not
    local name=$1 port pid i cg
    port=${SRV_PORT[$name]}
    port_free "$port" || { warn "$name: port $port is already in use by someone else"; return 1; }
    cg=$(cg_create "$name")
    # in_cg CMD...: run CMD (exec) in the server's cgroup; its children (CGI programs included) inherit it
    in_cg() { [ -z "$cg" ] || echo "$BASHPID" > "$cg/cgroup.procs" || warn "cannot join cgroup $cg"; exec "$@"; }
    case $name in
        apache)
            render_conf "$BENCH_DIR/conf/apache2-cgi.conf" "$RUN/apache2.conf" RUN="$RUN" PORT="$port" ROOT="$W" CGIDIR="$CGI"
            ( in_cg apache2 -f "$RUN/apache2.conf" -DFOREGROUND ) > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
        lighttpd)
            render_conf "$BENCH_DIR/conf/lighttpd-cgi.conf" "$RUN/lighttpd.conf" RUN="$RUN" PORT="$port" ROOT="$W"
            install -m 644 /dev/null "$RUN/logs/lighttpd-error.log"   # opened after lighttpd drops to www-data
            [ "$(id -u)" = 0 ] && chown www-data "$RUN/logs/lighttpd-error.log"
            ( in_cg lighttpd -D -f "$RUN/lighttpd.conf" ) > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
        stoa-w[0-9]*)
            render_conf "$BENCH_DIR/conf/stoa-cgi.toml" "$RUN/$name.toml" PORT="$port" WORKERS="${name#stoa-w}" ROOT="$W" CGIDIR="$CGI"
            "$STOA_RUN" check "$RUN/$name.toml" > "$RUN/logs/$name-check.out" 2>&1 ||
                { warn "$name: \`stoa check\` rejects $RUN/$name.toml (a Stoa without CGI? BUILD=1 rebuilds):"
                  sed 's/^/    /' "$RUN/logs/$name-check.out" >&2; return 1; }
            ( in_cg "$STOA_RUN" serve --config "$RUN/$name.toml" ) > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
        *) die "unknown server name: $name" ;;
    esac
    SRV_PID[$name]=$pid
    echo "$pid" > "$RUN/pids/$name.pid"
    if [ -n "$cg" ]; then
        sleep 0.05
        if grep -qx "$pid" "$cg/cgroup.procs"; then SRV_CG[$name]=$cg
        else warn "$name (PID $pid) is not in its cgroup $cg: CPU from /proc only"; fi
    fi
    for i in $(seq 100); do
        alive "$pid" || break
        curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/" && return 0
        sleep 0.1
    done
    if alive "$pid"; then warn "$name (PID $pid) does not answer on port $port after 10 s"
    else warn "$name exited at start-up"; fi
    tail -n 20 "$RUN/logs/$name.out" "$RUN/logs/$name-error.log" 2>/dev/null | sed 's/^/    /' >&2 || true
    srv_stop "$name"
    return 1
}

wait_load_avg() {  # wait up to LOAD_WAIT s for the 1-min load average to drop below LOAD_MAX
    local i l
    for i in $(seq 0 5 "$LOAD_WAIT"); do
        l=$(cut -d' ' -f1 /proc/loadavg)
        awk -v l="$l" -v m="$LOAD_MAX" 'BEGIN {exit !(l < m)}' && { echo "$l"; return 0; }
        [ "$i" = 0 ] && log "load average $l >= $LOAD_MAX: waiting up to ${LOAD_WAIT}s for a quiet machine ($(uptime | sed 's/.*load/load/'))"
        sleep 5
    done
    warn "load average still $l after ${LOAD_WAIT}s: measuring anyway (see the 'other %' column)"
    echo "$l"
}

# ---------------------------------------------------------------- set-up
ensure_tools apache2:apache2 lighttpd:lighttpd wrk:wrk curl:curl perl:perl cc:gcc python3:python3
[ -f /usr/lib/apache2/modules/mod_cgid.so ] || die "mod_cgid.so missing (Debian package apache2-bin)"
if [[ " $SERVERS " = *" stoa"* ]]; then
    ensure_fresh_stoa
fi
NOFILE=$(raise_nofile 65536)

bench_init
trap 'srv_stop_all; cg_cleanup' EXIT
cg_cleanup   # empty ones left by a killed run
rm -rf "$RUN/raw" "$RUN/www"; rm -f "$RUN"/logs/*; mkdir -p "$RUN/raw"
STOA_REV="$(git -C "$REPO_DIR" rev-parse --short HEAD 2>/dev/null || echo '(no commit)')$(git -C "$REPO_DIR" status --porcelain -- crates Cargo.toml Cargo.lock 2>/dev/null | grep -q . && echo ' + uncommitted changes in crates/' || true)"
if [[ " $SERVERS " = *" stoa"* ]]; then   # run a copy: a rebuild of target/ during the run changes nothing
    STOA_RUN=$RUN/stoa
    cp "$STOA" "$STOA_RUN.new" && mv "$STOA_RUN.new" "$STOA_RUN"
    STOA_REV+=", binary $(stat -c '%y' "$STOA" | cut -c1-19), sha256 $(sha256sum "$STOA_RUN" | cut -c1-12)"
fi
W=$RUN/www CGI=$RUN/www/cgi-bin
mkdir -p "$CGI"
chmod 755 "$RUN" "$W" "$CGI"
echo '<!DOCTYPE html><title>stoa cgi bench</title>' > "$W/index.html"
cc -O2 -Wall -o "$CGI/hello" "$BENCH_DIR/src/hello.c" || die "cc -O2 bench/src/hello.c failed"
cc -O2 -Wall -o "$RUN/spawnloop" "$BENCH_DIR/src/spawnloop.c" || die "cc -O2 bench/src/spawnloop.c failed"
install -m 755 "$BENCH_DIR/src/hello.pl" "$BENCH_DIR/src/hello.sh" "$CGI/"
chmod 644 "$W/index.html"
QUERY_STRING=$QUERY "$CGI/hello" | sed 1,2d > "$RUN/expected.html"   # the page after the CGI head
for p in "${PROG_LIST[@]}"; do
    [ -x "$CGI/$p" ] || die "no program $p in bench/src (PROGS=$PROGS)"
    QUERY_STRING=$QUERY "$CGI/$p" | sed 1,2d | cmp -s - "$RUN/expected.html" || die "$p prints another page than hello"
done
EXPECTED=$RUN/expected.html
cgi_assign_ports "${SRVS[@]}"

FAILED=0
RUNS_TSV=$RUN/raw/runs.tsv
printf 'rep\tprog\tserver\tstatus\trps\trequests\tnon2xx\terrors\tself_ticks\tchild_ticks\tcgroup_ns\tus_per_req\tus_proc\tus_self\tus_cgi\tp50_ms\tp99_ms\tloadgen_cpu\tbusy\tother\tsecs\n' > "$RUNS_TSV"

# ---- start every server, check every program ----
UP=()
for s in "${SRVS[@]}"; do
    log "starting $s on 127.0.0.1:${SRV_PORT[$s]}"
    if ! cgi_srv_start "$s"; then FAILED=1; continue; fi
    ok=1
    for p in "${PROG_LIST[@]}"; do
        if check_url "http://127.0.0.1:${SRV_PORT[$s]}/cgi-bin/$p?$QUERY" "$EXPECTED" "$RUN/raw/head-$s-$p.txt"; then
            log "$s: /cgi-bin/$p?$QUERY: 200, expected page ($(stat -c %s "$EXPECTED") bytes)"
        else
            warn "$s: /cgi-bin/$p?$QUERY: $CHECK_MSG"; ok=0
        fi
    done
    if [ $ok = 1 ]; then UP+=("$s"); else FAILED=1; warn "$s fails a check: not loaded"; srv_stop "$s"; fi
done
[ ${#UP[@]} -gt 0 ] || die "no server came up and passed the checks"
for s in "${UP[@]}"; do
    log "$s: processes $(srv_pids "$s" | while read -r p; do printf '%s(%s) ' "$p" "$(cat "/proc/$p/comm" 2>/dev/null)"; done)"
done

log "load average $(wait_load_avg) (uptime: $(uptime | sed 's/.*load/load/')); other load generators: $(pgrep -ax wrk; pgrep -ax ab; true)"
wait_no_other_load 300
for s in "${UP[@]}"; do
    for p in "${PROG_LIST[@]}"; do
        timeout 60 wrk -t1 -c"$CONC" -d"$WARM" "http://127.0.0.1:${SRV_PORT[$s]}/cgi-bin/$p?$QUERY" > "$RUN/raw/warmup-$s-$p.txt" 2>&1 ||
            warn "$s: warm-up wrk failed: $(tail -n1 "$RUN/raw/warmup-$s-$p.txt")"
    done
done

# ---- the floor: each program run FLOOR_N times by a bare posix_spawn loop (no HTTP) ----
printf 'rep\tprog\truns\tcpu_us\tspawner_us\tchild_us\twall_us\tbusy\n' > "$RUN/raw/floor.tsv"
floor_measure() {  # floor_measure REP: once per round; the report keeps the lowest CPU per program
    local p b x
    [ "$FLOOR_N" -gt 0 ] || return 0
    for p in "${PROG_LIST[@]}"; do
        b=$(wait_quiet)
        (cd "$CGI" && timeout 120 "$RUN/spawnloop" "$FLOOR_N" "$CGI/$p" QUERY_STRING=$QUERY GATEWAY_INTERFACE=CGI/1.1 \
            REQUEST_METHOD=GET SCRIPT_NAME=/cgi-bin/$p SCRIPT_FILENAME="$CGI/$p" SERVER_NAME=127.0.0.1 SERVER_PORT=18193 \
            SERVER_PROTOCOL=HTTP/1.1 SERVER_SOFTWARE=spawnloop REMOTE_ADDR=127.0.0.1 REMOTE_PORT=40000 \
            REQUEST_URI="/cgi-bin/$p?$QUERY" DOCUMENT_ROOT="$W" REDIRECT_STATUS=200 HTTP_HOST=127.0.0.1 PATH="$PATH") \
            > "$RUN/raw/floor-$p-$1.txt" 2>&1 || { warn "spawn loop of $p failed: $(tail -n1 "$RUN/raw/floor-$p-$1.txt")"; continue; }
        x=($(awk '/^FLOOR / {for (i = 2; i <= NF; i++) {split($i, kv, "="); printf "%s ", kv[2]}}' "$RUN/raw/floor-$p-$1.txt"))
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$p" "${x[@]:0:5}" "$b" >> "$RUN/raw/floor.tsv"
        log "floor $p: ${x[1]} us CPU per run (spawner ${x[2]} + program ${x[3]}), ${x[4]} us wall; busy before ${b}%"
    done
}

# ---- load: round-robin over the servers within each program ----
one_run() {  # one_run SERVER PROG RAWFILE: sets R_* (see lib.sh run_load), BUSY, C_SELF C_CHILD (ticks), C_CG (ns)
    local url="http://127.0.0.1:${SRV_PORT[$1]}/cgi-bin/$2?$QUERY" attempt a b ca cb
    for attempt in $(seq 0 "$RETRIES"); do
        BUSY=$(wait_quiet)
        C_SELF=- C_CHILD=- C_CG=-
        if ! srv_alive "$1"; then
            R_STATUS="SERVER DIED" R_RPS=- R_REQS=0 R_NON2XX=- R_ERRS=- R_TICKS=- R_USREQ=- R_P50=- R_P99=- R_LGCPU=- R_SECS=- R_OTHER=-
        elif ! check_url "$url" "$EXPECTED"; then
            R_STATUS="CHECK FAILED: $CHECK_MSG" R_RPS=- R_REQS=0 R_NON2XX=- R_ERRS=- R_TICKS=- R_USREQ=- R_P50=- R_P99=- R_LGCPU=- R_SECS=- R_OTHER=-
        else
            a=($(srv_cpu_split "$1")) ca=$(srv_cg_ns "$1")
            run_load "$1" wrk "$url" "$(stat -c %s "$EXPECTED")" "$3"
            sleep 0.2   # let the last CGI processes of the run exit and be reaped
            b=($(srv_cpu_split "$1")) cb=$(srv_cg_ns "$1")
            C_SELF=$(( b[0] - a[0] )) C_CHILD=$(( b[1] - a[1] ))
            [ "$ca" = - ] || C_CG=$(( cb - ca ))
        fi
        [[ $R_OTHER =~ ^[0-9]+$ ]] && [ "$R_OTHER" -gt "$OTHER_MAX" ] && [ "$attempt" -lt "$RETRIES" ] || return 0
        log "$1 $2: other processes used ${R_OTHER}% of a core during the run (> OTHER_MAX=$OTHER_MAX): again"
    done
}
us() { awk -v t="$1" -v n="$2" -v hz="$CLK_TCK" 'BEGIN {if (t == "-" || n + 0 == 0) print "-"; else printf "%.1f", t * 1e6 / hz / n}'; }
ncase=$(( ${#PROG_LIST[@]} * REPS )) k=0 n=${#UP[@]}
T0=$(date +%s)
for rep in $(seq "$REPS"); do
    floor_measure "$rep"
    for p in "${PROG_LIST[@]}"; do
        k=$(( k + 1 ))
        for i in $(seq 0 $(( n - 1 ))); do
            s=${UP[$(( (i + k - 1) % n ))]}
            one_run "$s" "$p" "$RUN/raw/$s-$p-$rep.txt"
            [ "$R_STATUS" = ok ] && [ "$R_NON2XX" = 0 ] && [ "$R_ERRS" = 0 ] || FAILED=1
            tot=-; [ "$C_SELF" = - ] || tot=$(( C_SELF + C_CHILD ))
            USP=$(us "$tot" "$R_REQS") USS=$(us "$C_SELF" "$R_REQS") USC=$(us "$C_CHILD" "$R_REQS") USR=$USP
            [ "$C_CG" = - ] || USR=$(awk -v t="$C_CG" -v n="$R_REQS" 'BEGIN {if (n + 0 == 0) print "-"; else printf "%.1f", t / 1e3 / n}')
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$p" "$s" "$R_STATUS" \
                "$R_RPS" "$R_REQS" "$R_NON2XX" "$R_ERRS" "$C_SELF" "$C_CHILD" "$C_CG" "$USR" "$USP" "$USS" "$USC" "$R_P50" "$R_P99" \
                "$R_LGCPU" "$BUSY" "$R_OTHER" "$R_SECS" >> "$RUNS_TSV"
            printf '%s [%d/%d] %-9s %-8s %6s req/s  CPU %6s us/req (/proc: server %s + reaped CGI %s)  n=%s non2xx=%s err=%s p99=%sms busy=%s%% other=%s%% %s\n' \
                "$(date +%T)" "$k" "$ncase" "$p" "$s" "$R_RPS" "$USR" "$USS" "$USC" "$R_REQS" "$R_NON2XX" "$R_ERRS" \
                "$R_P99" "$BUSY" "$R_OTHER" "$([ "$R_STATUS" = ok ] || echo "<< $R_STATUS")" >&2
            if [ "$R_STATUS" = "SERVER DIED" ]; then
                warn "$s died; last lines of its output:"; tail -n 20 "$RUN/logs/$s.out" | sed 's/^/    /' >&2 || true
            fi
        done
    done
done
log "loads took $(( $(date +%s) - T0 )) s"

ZOMBIES=
for s in "${UP[@]}"; do  # leftovers: zombie or still-running CGI processes after the loads
    srv_alive "$s" || continue
    z=$(srv_zombies "$s")
    [ "$z" = 0 ] || { warn "$s: $z zombie children after the loads"; ZOMBIES+="$s: $z zombie children; "; }
done
for s in "${UP[@]}"; do  # anything the servers logged (errors, warnings, panics), less start-up notes
    msgs=$(cat "$RUN/logs/$s.out" "$RUN/logs/$s-error.log" 2>/dev/null | sed 's/\x1b\[[0-9;]*m//g' |
           grep -Ev 'server started|  ?INFO |^stoa: listening on|resuming normal operations|Command line:' || true)
    [ -z "$msgs" ] || { warn "$s logged (see $RUN/logs):"; tail -n 10 <<< "$msgs" | sed 's/^/    /' >&2; }
done
srv_stop_all

# ---- report ----
mkdir -p "$(dirname "$OUT")"
{
    echo "date=$(date '+%F %H:%M %Z')"
    echo "command=$COMMAND"
    echo "machine=$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), $(awk '/MemTotal/ {printf "%.0f GiB RAM", $2 / 1048576}' /proc/meminfo)"
    echo "versions=$(dpkg-query -W -f '${Package} ${Version}; ' apache2 lighttpd wrk perl dash gcc 2>/dev/null)stoa $STOA_REV"
    echo "params=wrk -t1 -c$CONC -d$DUR (HTTP/1.1 keep-alive), GET /cgi-bin/PROGRAM?$QUERY ($(stat -c %s "$EXPECTED")-byte page); warm-up wrk $WARM per server and program; REPS=$REPS; CLK_TCK $CLK_TCK"
    echo "zombies=${ZOMBIES:-none}"
    echo "cgroups=$(for x in "${SRVS[@]}"; do [ -n "${SRV_CG[$x]:-}" ] && printf '%s ' "$x"; done)"
    echo "other_max=$OTHER_MAX"
    echo "failed=$FAILED"
} > "$RUN/raw/meta.txt"
"$PYTHON" - "$RUN/raw/meta.txt" "$RUNS_TSV" "$RUN/raw/floor.tsv" > "$OUT" <<'PY'
import csv, statistics, sys
meta = dict(l.rstrip("\n").split("=", 1) for l in open(sys.argv[1]) if "=" in l)
runs = list(csv.DictReader(open(sys.argv[2]), delimiter="\t"))
ncores = int(meta["machine"].split()[0])
LABEL = {"hello": "C (`hello`, cc -O2)", "hello.pl": "Perl (`hello.pl`)", "hello.sh": "sh (`hello.sh`, dash)"}
def num(x):
    try: return float(x)
    except (TypeError, ValueError): return None
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
def fmt(x, d=0): return "-" if x is None else f"{x:,.{d}f}"
floor = {}
for r in csv.DictReader(open(sys.argv[3]), delimiter="\t"):  # the least disturbed round: lowest CPU
    if num(r["cpu_us"]) and (r["prog"] not in floor or num(r["cpu_us"]) < num(floor[r["prog"]]["cpu_us"])): floor[r["prog"]] = r
progs = list(dict.fromkeys(r["prog"] for r in runs))
servers = list(dict.fromkeys(r["server"] for r in runs))
stoas = [s for s in servers if s.startswith("stoa")]
peers = [s for s in servers if not s.startswith("stoa")]
reps = len(set(r["rep"] for r in runs))
print(f"Run {meta['date']}: `{meta['command']}`  ")
print(f"Machine: {meta['machine']}  ")
print(f"Versions: {meta['versions']}  ")
print(f"Load: {meta['params']}")
print()
cg = meta.get("cgroups", "").split()
print("**CPU µs/req** = CPU time of *all* the server's processes, the CGI programs it ran included, per request "
      "(after minus before the run, divided by the requests wrk completed). "
      + (f"For {', '.join(cg)} it is `cpuacct.usage` of a cpuacct cgroup the script started the server in: "
         "it counts every process in the group however it ends. " if cg else "")
      + "The **/proc** columns sum `/proc/PID/stat` over the server's main process and every descendant: "
      "*server* = utime+stime (fields 14-15), *reaped CGI* = cutime+cstime (fields 16-17: children the process "
      "waited for, i.e. the CGI programs; for Apache also event-MPM children that exited). Stoa and lighttpd reap "
      "their CGI programs, so both methods agree; Apache's mod_cgid daemon ignores SIGCHLD, the kernel reaps its "
      "CGI programs, and their CPU appears in no cutime: Apache's /proc total leaves the CGI programs out. "
      + ("" if "apache" in cg or "apache" not in servers else "**No cgroup for Apache in this run: its CPU µs/req misses the CGI programs.** ")
      + ("Cells are medians of the rounds (leaving out runs with *other %* > OTHER_MAX when the case has a cleaner one); "
         "req/s shows min-max of those. " if reps > 1 else "")
      + "non-2xx and errors are summed over the rounds; errors = wrk connect+read+write+timeout errors. "
      "*other %* = CPU used during the run by everything but the server and wrk (% of one core; near 100: disturbed).")
print()
agg = {}
left_out = []
for p in progs:
    print(f"#### {LABEL.get(p, p)}")
    print()
    print("| server | req/s | CPU µs/req | /proc total | /proc server | /proc reaped CGI | non-2xx | errors | p50 ms | p99 ms | wrk CPU % | other % |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for s in servers:
        allr = [r for r in runs if r["prog"] == p and r["server"] == s]
        bad = [r["status"] for r in allr if r["status"] != "ok"]
        # runs another process disturbed (other % > OTHER_MAX even after the retries) are left out
        # of the medians when the case has an undisturbed one
        omax = num(meta.get("other_max")) or 50
        rs = [r for r in allr if (num(r["other"]) or 0) <= omax] or allr
        if len(rs) < len(allr): left_out.append(f"{p} {s}: {len(allr) - len(rs)} of {len(allr)}")
        elif any((num(r["other"]) or 0) > omax for r in allr): left_out.append(f"{p} {s}: all {len(allr)} disturbed, kept")
        rps = [num(r["rps"]) for r in rs]
        m = med(rps)
        agg[(p, s)] = (m, med([num(r["us_per_req"]) for r in rs]))
        spread = ""
        vals = [x for x in rps if x is not None]
        if len(vals) > 1: spread = f" ({min(vals):,.0f}-{max(vals):,.0f})"
        n2 = sum(int(num(r["non2xx"]) or 0) for r in allr); er = sum(int(num(r["errors"]) or 0) for r in allr)
        print(f"| {s}{' **' + '; '.join(bad) + '**' if bad else ''} | {fmt(m)}{spread} | {fmt(med([num(r['us_per_req']) for r in rs]), 1)} "
              f"| {fmt(med([num(r['us_proc']) for r in rs]), 1)} | {fmt(med([num(r['us_self']) for r in rs]), 1)} | {fmt(med([num(r['us_cgi']) for r in rs]), 1)} | {n2} | {er} "
              f"| {fmt(med([num(r['p50_ms']) for r in rs]), 2)} | {fmt(med([num(r['p99_ms']) for r in rs]), 2)} "
              f"| {fmt(med([num(r['loadgen_cpu']) for r in rs]))} | {fmt(med([num(r['other']) for r in rs]))} |")
    f = floor.get(p)
    if f and num(f["cpu_us"]):
        print(f"| *floor: spawn loop, no HTTP* | *≤ {ncores * 1e6 / num(f['cpu_us']):,.0f}* | *{num(f['cpu_us']):,.1f}* | | "
              f"*{num(f['spawner_us']):,.1f}* | *{num(f['child_us']):,.1f}* | | | | | | |")
    print()
if left_out: print("Disturbed runs left out of the medians: " + "; ".join(left_out) + " (all runs: `raw/runs.tsv`).\n")
TARGET = {"apache": 2.0, "lighttpd": 1.5}
print("#### Stoa's ratios")
print()
print("req/s ratio = Stoa / peer (> 1: Stoa faster); CPU ratio = Stoa / peer CPU per request (< 1: Stoa cheaper). "
      "Targets (issue 3), C program: >= 2x Apache, >= 1.5x lighttpd. "
      f"*Floor ratio* = the floor's req/s ceiling ({ncores} cores / the spawn loop's CPU per run) / peer req/s: "
      "what a server that cost nothing beyond spawning the program could reach at best on this box.")
print()
print("| program | Stoa | peer | req/s ratio | CPU/req ratio | floor ratio | target |")
print("|---|---|---|---:|---:|---:|---|")
for p in progs:
    for st in stoas:
        for pe in peers:
            a, b = agg.get((p, st), (None, None)), agg.get((p, pe), (None, None))
            r = a[0] / b[0] if a[0] and b[0] else None
            c = a[1] / b[1] if a[1] and b[1] else None
            t = ""
            if p == "hello" and pe in TARGET and r is not None:
                t = f">= {TARGET[pe]:g}x: " + ("**met**" if r >= TARGET[pe] else "**missed**")
            f = floor.get(p)
            fr = ncores * 1e6 / num(f["cpu_us"]) / b[0] if f and num(f["cpu_us"]) and b[0] else None
            fx = lambda x: "-" if x is None else f"{x:.2f}x"
            print(f"| {p} | {st} | {pe} | {fx(r)} | {fmt(c, 2)} | {fx(fr)} | {t} |")
print()
if meta.get("zombies", "none") != "none": print(f"Zombies after the loads: {meta['zombies']}\n")
if meta.get("failed") != "0": print("**Some server failed a check or a run (see the cells in bold and the script's log).**\n")
PY
cat "$OUT"
log "report: $OUT; raw output: $RUN/raw; server logs: $RUN/logs"
[ $FAILED = 0 ] || { log "some server failed a check or a run (see above)"; exit 1; }
