# bench/lib.sh - shared helpers for the bench/*.sh scripts (source it; bash only).
#
# Servers are started in the foreground mode of each program, in the background of the script, and
# tracked by PID (SRV_PID[name]); srv_stop_all (installed as an EXIT trap by bench_init) stops
# exactly those PIDs. Names: nginx (2 workers), nginx-wN (N workers), lighttpd, stoa-wN (Stoa with
# `workers = N`; 0 = one per core), stoa-wN-TAG (the same with the binary $STOA_TAG), floor (the
# canned-response epoll server tests/proxy-peers/canned.c, answering every request with a 200 whose
# body is FLOOR_BODY bytes: the least CPU per request an HTTP server can spend here).
#
# Caller sets RUN (work folder) before bench_init. Knobs read here: STOA (binary), PORT_<name>,
# FLOOR_BODY (floor's body size, read when it starts), LOAD_CONNS and WRK_TIMEOUT (run_load).

BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$BENCH_DIR/.." && pwd)
CLK_TCK=$(getconf CLK_TCK)
PYTHON=${PYTHON:-$(command -v /usr/bin/python3 || command -v python3 || echo python3)}

declare -A SRV_PID=() SRV_PORT=()
declare -a BG_PIDS=()

exec {LOG_FD}>&2   # log() keeps writing to the terminal inside redirected blocks (and from traps there)
log()  { printf '%s %s\n' "$(date +%T)" "$*" >&"$LOG_FD"; }
warn() { log "WARNING: $*"; }
die()  { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------- tools and packages
wait_for_apt() {  # never run a second apt-get while another install logging to /tmp/apt.log runs:
    local i age      # wait (up to 10 min) while that log lacks its final 'done' line and is either
    for i in $(seq 600); do   # being written or has apt-get/dpkg running; a stale log does not block
        if [ ! -f /tmp/apt.log ] || [ "$(tail -n1 /tmp/apt.log)" = done ]; then return 0; fi
        age=$(( $(date +%s) - $(stat -c %Y /tmp/apt.log) ))
        if [ "$age" -gt 120 ] && ! pgrep -x apt-get >/dev/null && ! pgrep -x dpkg >/dev/null && ! pgrep -x apt >/dev/null; then
            warn "/tmp/apt.log lacks its final 'done' line but nothing has written it for ${age}s and no apt-get runs"
            return 0
        fi
        [ "$i" = 1 ] && log "waiting for the apt-get logging to /tmp/apt.log to finish ..."
        sleep 1
    done
    die "/tmp/apt.log still lacks its final 'done' line after 10 min"
}

ensure_tools() {  # ensure_tools CMD:PACKAGE ... - install missing ones with apt-get when root
    local cp missing=() pkgs=()
    for cp; do command -v "${cp%%:*}" >/dev/null 2>&1 || { missing+=("${cp%%:*}"); pkgs+=("${cp#*:}"); }; done
    [ ${#missing[@]} = 0 ] && return 0
    if [ "$(id -u)" != 0 ]; then
        die "missing commands: ${missing[*]}; install them as root: apt-get install -y ${pkgs[*]}"
    fi
    wait_for_apt
    # the commands may have appeared while we waited
    missing=() pkgs=()
    for cp; do command -v "${cp%%:*}" >/dev/null 2>&1 || { missing+=("${cp%%:*}"); pkgs+=("${cp#*:}"); }; done
    [ ${#missing[@]} = 0 ] && return 0
    log "installing ${pkgs[*]} (missing: ${missing[*]})"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}" >&2 ||
        { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}" >&2; } ||
        die "apt-get install ${pkgs[*]} failed"
    for cp; do command -v "${cp%%:*}" >/dev/null 2>&1 || die "still missing after install: ${cp%%:*}"; done
}

raise_nofile() {  # raise_nofile WANT - soft limit to min(WANT, hard limit); prints the result
    local want=$1 hard
    hard=$(ulimit -Hn)
    [ "$hard" != unlimited ] && [ "$hard" -lt "$want" ] && { ulimit -Hn "$want" 2>/dev/null || true; hard=$(ulimit -Hn); }
    [ "$hard" = unlimited ] || [ "$hard" -ge "$want" ] && hard=$want
    ulimit -n "$hard"
    ulimit -n
}

# no other load generator may run at the same time: wait up to $1 seconds (default 300)
wait_no_other_load() {
    local i max=${1:-300} others
    for i in $(seq "$max"); do
        others=$(for p in wrk ab h2load oha; do pgrep -ax "$p"; done; pgrep -af '^[^ ]*stoa bench' || true)
        [ -z "$others" ] && return 0
        [ "$i" = 1 ] && log "another load generator is running, waiting (up to ${max}s): $others"
        sleep 1
    done
    die "another load generator is still running: $others"
}

dur_secs() {  # 10s / 2m / 10 -> seconds
    case $1 in *s) echo "${1%s}" ;; *m) echo $(( ${1%m} * 60 )) ;; *) echo "$1" ;; esac
}

# ---------------------------------------------------------------- doc root, configs
gen_docroot() {  # gen_docroot DIR: index.html (1358 B), 3000.html, 75264.html, 1048576.html
    local w=$1 n
    mkdir -p "$w"
    for n in 1358 3000 75264 1048576; do
        yes 'The quick brown fox jumps over the lazy dog. 0123456789' | head -c $n > "$w/$n.html" || true
        [ "$(stat -c %s "$w/$n.html")" = $n ] || die "could not write $w/$n.html"
    done
    mv "$w/1358.html" "$w/index.html"
    chmod 755 "$w"; chmod 644 "$w"/*.html
}

render_conf() {  # render_conf TEMPLATE OUTPUT KEY=VALUE... - replaces @KEY@ (values must not hold '|')
    local t=$1 o=$2 kv args=()
    shift 2
    for kv; do args+=(-e "s|@${kv%%=*}@|${kv#*=}|g"); done
    sed "${args[@]}" "$t" > "$o"
    ! grep -q '@[A-Z_]*@' "$o" || die "unfilled placeholder in $o: $(grep -o '@[A-Z_]*@' "$o" | head -1)"
}

# ---------------------------------------------------------------- Stoa binary
# The default binary: cargo's target directory ($CARGO_TARGET_DIR when set).
DEFAULT_STOA=${CARGO_TARGET_DIR:-$REPO_DIR/target}/release/stoa

ensure_stoa() {  # build target/release/stoa when it is missing (or BUILD=1) and STOA is the default
    if [ "$STOA" = "$DEFAULT_STOA" ] && { [ ! -x "$STOA" ] || [ "${BUILD:-0}" = 1 ]; }; then
        log "building Stoa: cargo build --release (in $REPO_DIR)"
        (cd "$REPO_DIR" && cargo build --release -p stoa >&2) || die "cargo build --release failed"
    fi
    [ -x "$STOA" ] || die "Stoa binary not found: $STOA (set STOA=...)"
}

ensure_fresh_stoa() {  # ensure_stoa, and rebuild the default binary when it is older than the sources;
    ensure_stoa        # if the tree does not build right now, the existing binary is kept (a `stoa check`
                       # of the run's config then says whether it is new enough)
    if [ "$STOA" = "$DEFAULT_STOA" ] &&
       [ -n "$(find "$REPO_DIR/crates" "$REPO_DIR/Cargo.lock" -newer "$STOA" \( -name '*.rs' -o -name 'Cargo.*' \) -print -quit 2>/dev/null)" ]; then
        log "$STOA is older than the sources: cargo build --release -p stoa"
        (cd "$REPO_DIR" && cargo build --release -p stoa >&2) || warn "cargo build failed: using the existing $STOA"
    fi
}

# ---------------------------------------------------------------- server processes
srv_assign_ports() {  # srv_assign_ports NAME... - nginx 18180, floor 18181, lighttpd 18182, stoa-w* 18183,
    local n seq=0 nseq=0 v                     # 18184, ..., nginx-w* 18170, 18171, ...
    for n; do                                  # (override one with PORT_<name>, '-' read as '_')
        case $n in
            nginx) SRV_PORT[$n]=18180 ;;
            nginx-w[0-9]*) SRV_PORT[$n]=$(( 18170 + nseq )); nseq=$(( nseq + 1 )) ;;
            floor) SRV_PORT[$n]=18181 ;;
            lighttpd) SRV_PORT[$n]=18182 ;;
            stoa-w[0-9]*) SRV_PORT[$n]=$(( 18183 + seq )); seq=$(( seq + 1 )) ;;
            *) die "unknown server name: $n (nginx, nginx-wN, lighttpd, stoa-wN, floor)" ;;
        esac
        v=PORT_${n//-/_}
        [ -z "${!v:-}" ] || SRV_PORT[$n]=${!v}
    done
}

alive() {  # alive PID: exists and is not a zombie
    local st
    st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
    [ -n "$st" ] && [ "$st" != Z ]
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

stop_pid() {  # stop_pid PID: TERM, wait up to 5 s, then KILL; reap if it is our child
    local p=$1 i
    alive "$p" || { wait "$p" 2>/dev/null || true; return 0; }
    kill -TERM "$p" 2>/dev/null || true
    for i in $(seq 50); do alive "$p" || break; sleep 0.1; done
    if alive "$p"; then warn "PID $p ignored SIGTERM for 5 s; sending SIGKILL"; kill -KILL "$p" 2>/dev/null || true; sleep 0.2; fi
    wait "$p" 2>/dev/null || true
}

stop_stale() {  # stop servers a previous (killed) run left behind: only PIDs from our pid files whose
    local f p     # command line names this run folder
    for f in "$RUN"/pids/*.pid; do
        [ -f "$f" ] || continue
        p=$(cat "$f")
        if [ -n "$p" ] && alive "$p" && tr '\0' ' ' < "/proc/$p/cmdline" | grep -qF "$RUN"; then
            warn "stopping $(basename "$f" .pid) (PID $p) left running by an earlier run"
            kill -TERM "$p" 2>/dev/null || true; sleep 1; alive "$p" && kill -KILL "$p" 2>/dev/null || true
        fi
        rm -f "$f"
    done
}

srv_start() {  # srv_start NAME ROOT - start, wait until it answers; returns 1 (with a message) if not
    local name=$1 root=$2 port pid i
    port=${SRV_PORT[$name]}
    port_free "$port" || { warn "$name: port $port is already in use by someone else"; return 1; }
    case $name in
        nginx|nginx-w[0-9]*)
            # nginx: 2 workers (= cores of the reference machine); nginx-wN: N (nginx-w1 = one server
            # process serving, as lighttpd, stoa-w1 and floor; its master only waits)
            local nw=2
            [ "$name" = nginx ] || nw=${name#nginx-w}
            mkdir -p "$RUN/$name-tmp"
            render_conf "$BENCH_DIR/conf/nginx.conf" "$RUN/$name.conf" RUN="$RUN" NAME="$name" PORT="$port" ROOT="$root" \
                NOFILE="$NOFILE" WORKERS="$nw" WORKER_CONNS=$(( NOFILE < 16384 ? NOFILE - 64 : 16384 ))
            nginx -p "$RUN" -e "$RUN/logs/$name-error.log" -c "$RUN/$name.conf" > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
        floor)
            # built here, not kept in bench/src/: proxy.sh uses the same source (one copy to maintain)
            local src=$REPO_DIR/tests/proxy-peers/canned.c
            if [ ! -x "$RUN/canned" ] || [ "$src" -nt "$RUN/canned" ]; then
                cc -O2 -Wall -o "$RUN/canned" "$src" || die "cannot build $src"
            fi
            "$RUN/canned" "$port" "${FLOOR_BODY:-1358}" 1 > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
        lighttpd)
            render_conf "$BENCH_DIR/conf/lighttpd.conf" "$RUN/lighttpd.conf" RUN="$RUN" PORT="$port" ROOT="$root" \
                NOFILE="$NOFILE" MAXCONN=$(( NOFILE / 2 > 12000 ? 12000 : NOFILE / 2 ))
            # errorlog is opened after lighttpd drops to www-data
            install -m 644 /dev/null "$RUN/logs/lighttpd-error.log"
            [ "$(id -u)" = 0 ] && chown www-data "$RUN/logs/lighttpd-error.log"
            lighttpd -D -f "$RUN/lighttpd.conf" > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
        stoa-w[0-9]*)
            # stoa-wN-TAG: a second Stoa binary, $STOA_TAG (e.g. SERVERS="stoa-w1 stoa-w1-before"
            # STOA_before=/work/bin-before/stoa compares two builds in the same alternating runs)
            local workers=${name#stoa-w} bin=$STOA tag
            if [[ $workers = *-* ]]; then
                tag=STOA_${workers#*-}; workers=${workers%%-*}
                bin=${!tag:-}; [ -x "$bin" ] || die "$name: set $tag to a Stoa binary"
            fi
            render_conf "$BENCH_DIR/conf/stoa.toml" "$RUN/$name.toml" PORT="$port" ROOT="$root" WORKERS="$workers"
            "$bin" serve --config "$RUN/$name.toml" > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
        *) die "unknown server name: $name" ;;
    esac
    SRV_PID[$name]=$pid
    echo "$pid" > "$RUN/pids/$name.pid"
    srv_ready "$name" "http://127.0.0.1:$port/"
}

# srv_ready NAME URL [CURL_ARGS...]: waits up to 10 s for server NAME (SRV_PID) to answer URL; if it
# does not, says why with the tail of its logs ($RUN/logs/NAME.out, NAME-error.log), stops it and
# returns 1. Shared by every script that starts servers with SRV_PID.
srv_ready() {
    local name=$1 url=$2 pid=${SRV_PID[$1]} i
    shift 2
    for i in $(seq 100); do
        alive "$pid" || break
        curl -s "$@" -o /dev/null --max-time 2 "$url" && return 0
        sleep 0.1
    done
    if alive "$pid"; then warn "$name (PID $pid) does not answer on $url after 10 s"
    else warn "$name exited at start-up"; fi
    tail -n 20 "$RUN/logs/$name.out" "$RUN/logs/$name-error.log" 2>/dev/null | sed 's/^/    /' >&2 || true
    srv_stop "$name"
    return 1
}

srv_stop() {
    local p=${SRV_PID[$1]:-}
    [ -n "$p" ] && stop_pid "$p"
    unset "SRV_PID[$1]"
    rm -f "$RUN/pids/$1.pid"
}

srv_stop_all() {
    local n p
    for p in "${BG_PIDS[@]}"; do [ -z "$p" ] || stop_pid "$p"; done
    BG_PIDS=()
    for n in "${!SRV_PID[@]}"; do srv_stop "$n"; done
}

srv_alive() { [ -n "${SRV_PID[$1]:-}" ] && alive "${SRV_PID[$1]}"; }

srv_pids() {  # the server's main PID and all its descendants (nginx workers ...), one per line
    # One ps and one awk for the whole tree: a pgrep per process took 1.1 s
    # for a tree of 100 (Apache's prefork children), this 9 ms, and the lab
    # samples servers' CPU time and memory every half second.
    local root=${SRV_PID[$1]:-}
    [ -n "$root" ] || return 0
    ps -e -o pid= -o ppid= | awk -v r="$root" '
        { kids[$2] = kids[$2] " " $1; seen[$1] = 1 }
        END {
            if (!(r in seen)) exit
            q[1] = r; n = 1
            for (i = 1; i <= n; i++) { print q[i]; m = split(kids[q[i]], a, " "); for (j = 1; j <= m; j++) q[++n] = a[j] }
        }'
}

# srv_proc_cat NAME FILE: /proc/PID/FILE of each of the server's processes,
# concatenated (one that ended meanwhile is left out).
srv_proc_cat() {
    local p files=()
    for p in $(srv_pids "$1"); do files+=("/proc/$p/$2"); done
    [ ${#files[@]} = 0 ] || cat "${files[@]}" 2>/dev/null || true
}

srv_cpu_ticks() {  # utime+stime (clock ticks) summed over the server's processes (threads included)
    # fields 14 and 15, counted after the ")" that ends the command name
    srv_proc_cat "$1" stat | awk '{ sub(/.*\) /, ""); split($0, f, " "); t += f[12] + f[13] } END { print t + 0 }'
}

srv_rss_kb() {  # VmRSS (kB) summed over the server's processes
    srv_proc_cat "$1" status | awk '/^VmRSS:/ { t += $2 } END { print t + 0 }'
}

srv_pss_kb() {  # Pss (kB) summed over the server's processes (shared pages counted once in all)
    srv_proc_cat "$1" smaps_rollup | awk '/^Pss:/ { t += $2 } END { print t + 0 }'
}

# ---------------------------------------------------------------- checks and load
check_url() {  # check_url URL EXPECTED_FILE [SAVE_HEAD]: HTTP 200 and a byte-identical body
    local code body=$RUN/raw/check-body head=${3:-/dev/null}
    code=$(curl -s --max-time 10 -D "$head" -o "$body" -w '%{http_code}' "$1") || code="curl-error-$?"
    if [ "$code" = 200 ] && cmp -s "$body" "$2"; then return 0; fi
    CHECK_MSG="HTTP $code, $(stat -c %s "$body" 2>/dev/null || echo 0) of $(stat -c %s "$2") bytes"
    cmp -s "$body" "$2" || CHECK_MSG+=", body differs"
    return 1
}

busy_pct() {  # % of all cores busy over 1 s (/proc/stat)
    local a b i t=0
    a=($(head -1 /proc/stat)); sleep 1; b=($(head -1 /proc/stat))
    for i in 1 2 3 4 5 6 7 8; do t=$(( t + b[i] - a[i] )); done
    echo $(( 100 - 100 * (b[4] - a[4] + b[5] - a[5]) / (t > 0 ? t : 1) ))
}

wait_quiet() {  # wait up to QUIET_MAX s for the box to be < QUIET_PCT % busy with no other load
    local i b o            # generator running (ours run in the foreground); prints the last busy %
    for i in $(seq "${QUIET_MAX:-20}"); do
        b=$(busy_pct)
        o=$(pgrep -x wrk; pgrep -x ab; pgrep -x h2load; pgrep -f holdconns.py; pgrep -f '^[^ ]*stoa bench' || true)
        [ "$b" -lt "${QUIET_PCT:-15}" ] && [ -z "$o" ] && break
    done
    echo "$b"
}

# run_load SERVER TOOL URL EXPECTED_SIZE RAWFILE - TOOL: wrk | wrkclose | ab | abk (wrkclose = wrk
# sending "Connection: close": a new connection per request). wrk opens ${LOAD_CONNS:-$CONC}
# connections; WRK_TIMEOUT (when set) is its --timeout. Sets R_* globals:
# R_STATUS (ok / failure text), R_RPS, R_REQS, R_NON2XX, R_ERRS (wrk socket errors, ab failed),
# R_KA (ab keep-alive requests; "-" for wrk), R_TICKS, R_USREQ (server CPU us per request),
# R_P50, R_P99 (ms), R_LGCPU (load generator CPU, % of one core), R_SECS (wall), R_OTHER (CPU used
# by everything else on the box during the run, % of one core: > a few % means the run was disturbed).
run_load() {
    local srv=$1 tool=$2 url=$3 size=$4 f=$5 t0 t1 rc=0 tm
    R_STATUS=ok R_RPS=- R_REQS=0 R_NON2XX=- R_ERRS=- R_KA=- R_TICKS=- R_USREQ=- R_P50=- R_P99=- R_LGCPU=- R_SECS=- R_OTHER=-
    local st0 st1
    st0=($(head -1 /proc/stat))
    t0=$(srv_cpu_ticks "$srv")
    local TIMEFORMAT='TIME %3U %3S %3R' wrk_args=(-t1 -c"${LOAD_CONNS:-$CONC}" -d"$DUR" -s "$BENCH_DIR/wrk-report.lua")
    [ -z "${WRK_TIMEOUT:-}" ] || wrk_args+=(--timeout "$WRK_TIMEOUT")
    [ "$tool" = wrkclose ] && wrk_args+=(-H "Connection: close")
    if [ "$tool" = wrk ] && [ "${LOAD_CONNS:-$CONC}" -ge "${WINDOW_CONNS:-1000000000}" ]; then
        # Steady state only: count CPU and requests in a window that opens once all the connections
        # are established (see window_load)
        window_load "$srv" "$url" "$f" "${wrk_args[@]}" || rc=$?
        return 0
    fi
    case $tool in
        wrk|wrkclose) { time timeout $(( $(dur_secs "$DUR") + 30 )) wrk "${wrk_args[@]}" "$url" > "$f" 2>&1; } 2>> "$f" || rc=$? ;;
        ab)  { time timeout 300 ab -r -n "$ABN" -c "$CONC" "$url" > "$f" 2>&1; } 2>> "$f" || rc=$? ;;
        abk) { time timeout 300 ab -r -k -n "$ABN" -c "$CONC" "$url" > "$f" 2>&1; } 2>> "$f" || rc=$? ;;
    esac
    t1=$(srv_cpu_ticks "$srv")
    st1=($(head -1 /proc/stat))
    tm=($(awk '/^TIME / {print $2, $3, $4}' "$f"))
    R_SECS=${tm[2]:-0}
    R_LGCPU=$(awk -v u="${tm[0]:-0}" -v s="${tm[1]:-0}" -v r="${tm[2]:-0}" 'BEGIN {printf "%.0f", (r > 0 ? 100 * (u + s) / r : 0)}')
    if [ "$tool" = wrk ] || [ "$tool" = wrkclose ]; then
        local x
        x=($(awk '/^RESULT / {print $2, $3, $4, $5, $6 + $7 + $8 + $9, $10, $11}' "$f"))
        if [ ${#x[@]} = 7 ]; then
            R_REQS=${x[0]} R_NON2XX=${x[3]} R_ERRS=${x[4]} R_P50=${x[5]} R_P99=${x[6]}
            R_RPS=$(awk -v n="${x[0]}" -v us="${x[1]}" 'BEGIN {printf "%.0f", (us > 0 ? n * 1e6 / us : 0)}')
            local bpr=$(( x[0] > 0 ? x[2] / x[0] : 0 ))
            [ "${x[0]}" -gt 0 ] && [ "$bpr" -lt "$size" ] && R_STATUS="short responses: $bpr bytes/response"
        else
            R_STATUS="wrk failed (rc $rc)"
        fi
    else
        local x
        x=($(awk '/^Complete requests:/ {c = $3} /^Failed requests:/ {f = $3} /^Non-2xx responses:/ {n = $3}
                  /^Keep-Alive requests:/ {k = $3} /^Requests per second:/ {r = $4} /^Document Length:/ {d = $3}
                  $1 == "50%" {p50 = $2} $1 == "99%" {p99 = $2}
                  END {if (c != "") printf "%s %s %s %s %.0f %s %s %s", c, f + 0, n + 0, (k == "" ? "-" : k), r, d, p50, p99}' "$f"))
        if [ ${#x[@]} = 8 ]; then
            R_REQS=${x[0]} R_ERRS=${x[1]} R_NON2XX=${x[2]} R_KA=${x[3]} R_RPS=${x[4]} R_P50=${x[6]} R_P99=${x[7]}
            [ "${x[5]}" = "$size" ] || R_STATUS="ab: document length ${x[5]} (want $size)"
        else
            R_STATUS="ab failed (rc $rc): $(grep -m1 -iE 'error|apr_|refused|reset' "$f" || tail -n1 "$f")"
        fi
    fi
    [ $rc = 0 ] || [ "$R_STATUS" != ok ] || R_STATUS="$tool exit code $rc"
    # CPU used on the box during the run by anything but this server and the load generator
    local i boxt=0
    for i in 1 2 3 6 7 8; do boxt=$(( boxt + st1[i] - st0[i] )); done
    R_OTHER=$(awk -v b="$boxt" -v srv=$(( t1 - t0 )) -v u="${tm[0]:-0}" -v s="${tm[1]:-0}" -v r="${tm[2]:-0}" -v hz="$CLK_TCK" \
        'BEGIN {o = (b - srv - (u + s) * hz) / (r > 0 ? r * hz : 1) * 100; printf "%.0f", (o < 0 ? 0 : o)}')
    if [ -n "$t0" ] && [ -n "$t1" ] && [ "$R_REQS" -gt 0 ]; then
        R_TICKS=$(( t1 - t0 ))
        R_USREQ=$(awk -v t="$R_TICKS" -v n="$R_REQS" -v hz="$CLK_TCK" 'BEGIN {printf "%.2f", t * 1e6 / hz / n}')
    fi
    srv_alive "$srv" || R_STATUS="SERVER DIED"
}

# ss_bytes PORT: "connections bytes": the established TCP connections whose local port is PORT, and the
# bytes they have had acknowledged (tcp_info bytes_acked: what the clients received), summed
ss_bytes() {
    ss -Htin state established "( sport = :$1 )" 2>/dev/null |
        awk '/^[0-9]/ {n++} {for (i = 1; i <= NF; i++) if ($i ~ /^bytes_acked:/) {sub(/^bytes_acked:/, "", $i); b += $i}}
             END {printf "%d %.0f\n", n, b}'
}

# window_load SERVER URL RAWFILE WRK_ARGS...: run_load's wrk keep-alive run with many connections
# (LOAD_CONNS >= WINDOW_CONNS), measured in steady state. wrk opens its connections inside its run, so
# over the whole run the server's CPU includes N accepts and first requests. Here wrk runs for up to
# $WINDOW_SETTLE (default 15) s + DUR + 2 s; the window opens 1 s after all LOAD_CONNS connections
# are established on the server's port (ss), and closes DUR later, when wrk is stopped (SIGINT: it
# prints its summary). In the window: server CPU (/proc),
# box CPU (/proc/stat), wrk's CPU, and the bytes the server's connections had acknowledged (ss
# bytes_acked); requests = those bytes / wrk's bytes per response over the whole run. A connection
# that closes inside the window takes its bytes with it (none should: every server here allows more
# than the requests a connection makes in DUR at these counts). p50/p99 are wrk's, whole run.
# Sets R_* like run_load; R_STATUS says when the connections never were all established.
window_load() {
    local srv=$1 url=$2 f=$3 port settle d wpid i c b0 b1 t0 t1 w0 w1 st0 st1 s0 s1 n=${LOAD_CONNS:-$CONC} rc=0
    shift 3
    local args=("$@")
    port=${SRV_PORT[$srv]}
    settle=${WINDOW_SETTLE:-15}
    d=$(dur_secs "$DUR")
    # -d replaced: the settle time plus the window plus a margin
    args=("${args[@]/#-d*/-d$(( settle + d + 2 ))s}")
    wrk "${args[@]}" "$url" > "$f" 2>&1 &
    wpid=$!; BG_PIDS+=("$wpid")
    c=0
    for i in $(seq $(( settle * 10 ))); do
        read -r c _ <<< "$(ss_bytes "$port")"
        [ "$c" -ge "$n" ] && break
        sleep 0.1
    done
    if [ "$c" -ge "$n" ]; then
        sleep 1
        st0=($(head -1 /proc/stat)); t0=$(srv_cpu_ticks "$srv"); w0=$(pid_cpu_ticks "$wpid"); s0=$(date +%s.%N)
        read -r _ b0 <<< "$(ss_bytes "$port")"
        sleep "$d"
        read -r c b1 <<< "$(ss_bytes "$port")"
        st1=($(head -1 /proc/stat)); t1=$(srv_cpu_ticks "$srv"); w1=$(pid_cpu_ticks "$wpid"); s1=$(date +%s.%N)
    fi
    kill -INT "$wpid" 2> /dev/null || true   # the window is over: wrk prints its summary and exits
    wait "$wpid" || rc=$?
    BG_PIDS=("${BG_PIDS[@]/$wpid}")
    local x
    x=($(awk '/^RESULT / {print $2, $3, $4, $5, $6 + $7 + $8 + $9, $10, $11}' "$f"))
    if [ ${#x[@]} != 7 ]; then R_STATUS="wrk failed (rc $rc)"; srv_alive "$srv" || R_STATUS="SERVER DIED"; return 0; fi
    R_NON2XX=${x[3]} R_ERRS=${x[4]} R_P50=${x[5]} R_P99=${x[6]}
    if [ -z "${t0:-}" ]; then
        R_STATUS="only $c of $n connections established within ${settle} s"
        srv_alive "$srv" || R_STATUS="SERVER DIED"; return 0
    fi
    [ "$c" -ge "$n" ] || R_STATUS="$(( n - c )) of $n connections closed in the window"
    R_SECS=$(awk -v a="$s0" -v b="$s1" 'BEGIN {printf "%.3f", b - a}')
    R_REQS=$(awk -v b0="$b0" -v b1="$b1" -v n="${x[0]}" -v by="${x[2]}" 'BEGIN {printf "%.0f", (n > 0 ? (b1 - b0) / (by / n) : 0)}')
    R_RPS=$(awk -v n="$R_REQS" -v s="$R_SECS" 'BEGIN {printf "%.0f", n / s}')
    R_LGCPU=$(awk -v t=$(( w1 - w0 )) -v s="$R_SECS" -v hz="$CLK_TCK" 'BEGIN {printf "%.0f", 100 * t / hz / s}')
    local j boxt=0
    for j in 1 2 3 6 7 8; do boxt=$(( boxt + st1[j] - st0[j] )); done
    R_OTHER=$(awk -v b="$boxt" -v srv=$(( t1 - t0 )) -v w=$(( w1 - w0 )) -v r="$R_SECS" -v hz="$CLK_TCK" \
        'BEGIN {o = (b - srv - w) / (r * hz) * 100; printf "%.0f", (o < 0 ? 0 : o)}')
    if [ "$R_REQS" -gt 0 ]; then
        R_TICKS=$(( t1 - t0 ))
        R_USREQ=$(awk -v t="$R_TICKS" -v n="$R_REQS" -v hz="$CLK_TCK" 'BEGIN {printf "%.2f", t * 1e6 / hz / n}')
    fi
    [ $rc = 0 ] || [ "$R_STATUS" != ok ] || R_STATUS="wrk exit code $rc"
    srv_alive "$srv" || R_STATUS="SERVER DIED"
}

pid_cpu_ticks() {  # utime+stime (clock ticks) of one process
    local f
    f=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null) || { echo 0; return; }
    set -- $f
    echo $(( ${12} + ${13} ))
}

# hold_conns SERVER N PATH OUTFILE: open N idle keep-alive connections (holdconns.py), sample the
# server's RSS while they are open, close them. Sets H_RSS H_PSS H_READY H_DONE H_CPU_MS.
hold_conns() {
    local srv=$1 n=$2 path=$3 f=$4 pid i t0
    H_RSS=- H_PSS=- H_READY="no READY line" H_DONE="-" H_CPU_MS=-
    t0=$(srv_cpu_ticks "$srv")
    "$PYTHON" "$BENCH_DIR/holdconns.py" --port "${SRV_PORT[$srv]}" --conns "$n" --path "$path" --max-time 150 > "$f" 2>&1 &
    pid=$!; BG_PIDS+=("$pid")
    for i in $(seq 1200); do  # up to 120 s to set the connections up
        grep -q '^READY' "$f" && break
        alive "$pid" || break
        sleep 0.1
    done
    if grep -q '^READY' "$f"; then
        sleep 1                                        # let the server settle
        H_RSS=$(srv_rss_kb "$srv"); H_PSS=$(srv_pss_kb "$srv")
        H_CPU_MS=$(( ( $(srv_cpu_ticks "$srv") - t0 ) * 1000 / CLK_TCK ))
        H_READY=$(grep -m1 '^READY' "$f" | cut -d' ' -f2-)
    fi
    stop_pid "$pid"                                    # SIGTERM: the client reports and closes all
    local keep=() b
    for b in "${BG_PIDS[@]}"; do [ "$b" = "$pid" ] || keep+=("$b"); done
    BG_PIDS=("${keep[@]}")
    H_DONE=$(grep -m1 '^DONE' "$f" | cut -d' ' -f2- || true)
    [ -n "$H_DONE" ] || H_DONE="client output: $(tail -n1 "$f")"
}

bench_init() {  # bench_init: folders under $RUN (locked against a second run), EXIT/INT/TERM traps
    mkdir -p "$RUN/raw" "$RUN/logs" "$RUN/pids"
    exec {RUN_LOCK_FD}> "$RUN/.lock"
    flock -n "$RUN_LOCK_FD" || die "another bench script is using $RUN (set RUN=... to run both)"
    stop_stale
    trap 'srv_stop_all' EXIT
    trap 'log "interrupted"; exit 130' INT TERM
}
