# bench/lib-fastcgi.sh - helpers for bench/fastcgi.sh (source it after bench/lib.sh; bash only).
#
# lib.sh starts nginx / lighttpd / Stoa serving static files; this file starts them with the FastCGI
# configurations (bench/conf/*-fastcgi.*), the application processes nginx needs (spawn-fcgi) and the
# php-fpm instances, measures the CPU of a server together with its application processes, and runs
# one wrk load. Every process is tracked by PID: servers and php-fpm masters in SRV_PID, spawn-fcgi'd
# applications in BG_PIDS (lib.sh's srv_stop_all, the EXIT trap, stops exactly those).
#
# Globals the caller sets: RUN, W (doc root), APP (the libfcgi binary), STOA_RUN, DUR, CONC, NOFILE.

declare -A APP_PIDS=()     # spawn-fcgi sets: name -> "PID PID"
declare -A FPM_SOCK=()     # php-fpm instance name -> its socket

IS_ROOT=0; [ "$(id -u)" = 0 ] && IS_ROOT=1

wait_load_avg() {  # wait up to LOAD_WAIT s for the 1-min load average to drop below LOAD_MAX; prints it
    local i l
    for i in $(seq 0 5 "$LOAD_WAIT"); do
        l=$(cut -d' ' -f1 /proc/loadavg)
        awk -v l="$l" -v m="$LOAD_MAX" 'BEGIN {exit !(l < m)}' && { echo "$l"; return 0; }
        [ "$i" = 0 ] && log "load average $l >= $LOAD_MAX: waiting up to ${LOAD_WAIT}s for a quiet machine ($(uptime | sed 's/.*load/load/'); other wrk: $(pgrep -ax wrk | paste -sd';' || true))"
        sleep 5
    done
    warn "load average still $l after ${LOAD_WAIT}s: measuring anyway (see the 'other %' column)"
    echo "$l"
}

wait_answer() {  # wait_answer NAME PID URL: up to 10 s for URL to answer; 1 (with the log tail) if not
    local name=$1 pid=$2 url=$3 i
    for i in $(seq 100); do
        alive "$pid" || break
        curl -s -o /dev/null --max-time 2 "$url" && return 0
        sleep 0.1
    done
    if alive "$pid"; then warn "$name (PID $pid) does not answer $url after 10 s"
    else warn "$name exited at start-up"; fi
    tail -n 20 "$RUN/logs/$name.out" "$RUN/logs/$name-error.log" 2>/dev/null | sed 's/^/    /' >&2 || true
    return 1
}

wait_socket() {  # wait_socket PATH PID: up to 10 s for a Unix socket to appear
    local i
    for i in $(seq 100); do [ -S "$1" ] && return 0; alive "$2" || return 1; sleep 0.1; done
    return 1
}

# spawn_fcgi NAME SOCKET: the C app, 2 processes on one Unix socket (spawn-fcgi -F 2), for nginx.
# spawn-fcgi forks the processes and exits; their PIDs come from its -P file (one a line).
spawn_fcgi() {
    local name=$1 sock=$2 p opts=()
    [ $IS_ROOT = 1 ] && opts=(-u www-data -g www-data -U www-data -G www-data)
    rm -f "$sock" "$RUN/raw/spawn-$name.pids"
    spawn-fcgi -s "$sock" -M 0660 -F 2 "${opts[@]}" -P "$RUN/raw/spawn-$name.pids" -- "$APP" \
        > "$RUN/logs/spawn-$name.out" 2>&1 || { warn "spawn-fcgi ($name) failed:"; sed 's/^/    /' "$RUN/logs/spawn-$name.out" >&2; return 1; }
    APP_PIDS[$name]=$(paste -sd' ' "$RUN/raw/spawn-$name.pids")
    for p in ${APP_PIDS[$name]}; do
        BG_PIDS+=("$p"); echo "$p" > "$RUN/pids/app-$name-$p.pid"
        alive "$p" || { warn "spawn-fcgi ($name): process $p is not running"; return 1; }
    done
    [ "$(wc -w <<< "${APP_PIDS[$name]}")" = 2 ] || { warn "spawn-fcgi ($name): not 2 processes: ${APP_PIDS[$name]}"; return 1; }
}

# fpm_start NAME: a php-fpm instance (static pool of 4) on $RUN/sock/NAME.sock, master in the foreground
fpm_start() {
    local name=$1 sock=$RUN/sock/$1.sock pid opts=(-F) user="; not root: the pool runs as the invoking user"
    [ $IS_ROOT = 1 ] && { opts+=(-R); user="user = www-data"; }
    rm -f "$sock"
    render_conf "$BENCH_DIR/conf/php-fpm-fastcgi.conf" "$RUN/$name.conf" RUN="$RUN" SOCK="$sock" USER="$user" NAME="$name"
    "$PHP_FPM" "${opts[@]}" -y "$RUN/$name.conf" > "$RUN/logs/$name.out" 2>&1 &
    pid=$!
    SRV_PID[$name]=$pid; echo "$pid" > "$RUN/pids/$name.pid"
    wait_socket "$sock" "$pid" || { warn "$name: no socket $sock:"; tail -n 20 "$RUN/logs/$name.out" | sed 's/^/    /' >&2; srv_stop "$name"; return 1; }
    FPM_SOCK[$name]=$sock
}

fcgi_srv_start() {  # fcgi_srv_start NAME: nginx | lighttpd | stoa-wN; waits until it answers on /
    local name=$1 port=${SRV_PORT[$1]} pid
    port_free "$port" || { warn "$name: port $port is already in use by someone else"; return 1; }
    case $name in
        nginx)
            mkdir -p "$RUN/nginx-tmp"
            render_conf "$BENCH_DIR/conf/nginx-fastcgi.conf" "$RUN/nginx.conf" RUN="$RUN" PORT="$port" ROOT="$W" \
                SOCK_NK="$RUN/sock/app-nk.sock" SOCK_KC="$RUN/sock/app-kc.sock" SOCK_PHP="${FPM_SOCK[php-fpm-nginx]:-$RUN/sock/php-fpm-nginx.sock}" \
                KEEPALIVE="$NGINX_KEEPALIVE"
            nginx -p "$RUN" -e "$RUN/logs/nginx-error.log" -c "$RUN/nginx.conf" > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
        lighttpd)
            render_conf "$BENCH_DIR/conf/lighttpd-fastcgi.conf" "$RUN/lighttpd.conf" RUN="$RUN" PORT="$port" ROOT="$W" \
                APP="$APP" SOCK="$RUN/sock/lighttpd-app.sock"
            install -m 644 /dev/null "$RUN/logs/lighttpd-error.log"   # opened after lighttpd drops to www-data
            [ $IS_ROOT = 1 ] && chown www-data "$RUN/logs/lighttpd-error.log"
            lighttpd -D -f "$RUN/lighttpd.conf" > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
        stoa-w[0-9]*)
            render_conf "$BENCH_DIR/conf/stoa-fastcgi.toml" "$RUN/$name.toml" PORT="$port" WORKERS="${name#stoa-w}" ROOT="$W" \
                APP="$APP" SOCK_PHP="${FPM_SOCK[php-fpm-$name]:-$RUN/sock/php-fpm-$name.sock}"
            "$STOA_RUN" check "$RUN/$name.toml" > "$RUN/logs/$name-check.out" 2>&1 ||
                { warn "$name: \`stoa check\` rejects $RUN/$name.toml (a Stoa without [[pool]]? BUILD=1 rebuilds):"
                  sed 's/^/    /' "$RUN/logs/$name-check.out" >&2; return 1; }
            "$STOA_RUN" serve --config "$RUN/$name.toml" > "$RUN/logs/$name.out" 2>&1 &
            pid=$! ;;
        *) die "unknown server name: $name" ;;
    esac
    SRV_PID[$name]=$pid; echo "$pid" > "$RUN/pids/$name.pid"
    wait_answer "$name" "$pid" "http://127.0.0.1:$port/" || { srv_stop "$name"; return 1; }
}

# proc_snapshot ROOT_PID...: one line per process in the trees under the given PIDs (each root and all
# its descendants; zombies included): "PID COMM UTIME+STIME CUTIME+CSTIME" (clock ticks).
proc_snapshot() {
    { cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk -v roots="$*" '
        { s = $0; c = $0; sub(/^.*\) /, "", s); sub(/^[0-9]+ \(/, "", c); sub(/\) [^)]*$/, "", c)
          n = split(s, f, " "); if (n < 15) next
          pid = $1 + 0; par[pid] = f[2] + 0; comm[pid] = c; self[pid] = f[12] + f[13]; kids[pid] = f[14] + f[15] }
        END { t = split(roots, q, " "); h = 1
              while (h <= t) { p = q[h++] + 0; if (!(p in self) || (p in seen)) continue; seen[p] = 1
                               gsub(/ /, "_", comm[p]); print p, comm[p], self[p], kids[p]
                               for (c in par) if (par[c] == p && c != p) q[++t] = c } }'
}

# case_roots SERVER APPSET: the PIDs whose trees make up one configuration: the server's main process
# (its descendants: nginx workers, lighttpd's and Stoa's spawned apps) plus the separate application
# processes of the case (spawn-fcgi set, or a php-fpm master with its children).
case_roots() {
    local r=${SRV_PID[$1]:-}
    case $2 in
        "") ;;
        php-fpm-*) r+=" ${SRV_PID[$2]:-}" ;;
        *) r+=" ${APP_PIDS[$2]:-}" ;;
    esac
    echo "$r"
}

is_app_comm() { case $1 in hello_fcgi|php-fpm*) return 0 ;; *) return 1 ;; esac; }

# cpu_split SNAPSHOT_FILE: "SERVER APP REAPED" ticks: utime+stime of the server's own processes, of the
# application processes (comm hello_fcgi / php-fpm*), and cutime+cstime of all (children they reaped)
cpu_split() {
    awk '{ if ($2 == "hello_fcgi" || $2 ~ /^php-fpm/) a += $3; else s += $3; k += $4 } END { print s + 0, a + 0, k + 0 }' "$1"
}
app_pids_of() { awk '$2 == "hello_fcgi" || $2 ~ /^php-fpm/ {print $1}' "$1" | sort -n | paste -sd' '; }

# fcgi_load SERVER APPSET URL EXPECTED_SIZE RAWFILE: one wrk run. Sets L_* globals:
# L_STATUS (ok / text) L_RPS L_REQS L_NON2XX L_CONN L_READ L_WRITE L_TIMEOUT L_P50 L_P99 (ms)
# L_SRV L_APP L_REAPED (ticks) L_USREQ L_US_SRV L_US_APP (CPU us per request) L_LGCPU (wrk, % of a core)
# L_OTHER (CPU of everything else on the box, % of a core) L_SECS L_APPS_BEFORE L_APPS_AFTER
fcgi_load() {
    local srv=$1 set=$2 url=$3 size=$4 f=$5 rc=0 st0 st1 a b tm x roots
    L_STATUS=ok L_RPS=- L_REQS=0 L_NON2XX=- L_CONN=- L_READ=- L_WRITE=- L_TIMEOUT=- L_P50=- L_P99=-
    L_SRV=- L_APP=- L_REAPED=- L_USREQ=- L_US_SRV=- L_US_APP=- L_LGCPU=- L_OTHER=- L_SECS=-
    roots=$(case_roots "$srv" "$set")
    proc_snapshot $roots > "$f.cpu0"
    st0=($(head -1 /proc/stat))
    local TIMEFORMAT='TIME %3U %3S %3R'
    { time timeout $(( $(dur_secs "$DUR") + 30 )) wrk -t1 -c"$CONC" -d"$DUR" --latency -s "$BENCH_DIR/wrk-report.lua" "$url" > "$f" 2>&1; } 2>> "$f" || rc=$?
    st1=($(head -1 /proc/stat))
    proc_snapshot $roots > "$f.cpu1"
    a=($(cpu_split "$f.cpu0")) b=($(cpu_split "$f.cpu1"))
    L_APPS_BEFORE=$(app_pids_of "$f.cpu0") L_APPS_AFTER=$(app_pids_of "$f.cpu1")
    tm=($(awk '/^TIME / {print $2, $3, $4}' "$f"))
    L_SECS=${tm[2]:-0}
    L_LGCPU=$(awk -v u="${tm[0]:-0}" -v s="${tm[1]:-0}" -v r="${tm[2]:-0}" 'BEGIN {printf "%.0f", (r > 0 ? 100 * (u + s) / r : 0)}')
    x=($(awk '/^RESULT / {print $2, $3, $4, $5, $6, $7, $8, $9, $10, $11}' "$f"))
    if [ ${#x[@]} = 10 ]; then
        L_REQS=${x[0]} L_NON2XX=${x[3]} L_CONN=${x[4]} L_READ=${x[5]} L_WRITE=${x[6]} L_TIMEOUT=${x[7]} L_P50=${x[8]} L_P99=${x[9]}
        L_RPS=$(awk -v n="${x[0]}" -v us="${x[1]}" 'BEGIN {printf "%.0f", (us > 0 ? n * 1e6 / us : 0)}')
        local bpr=$(( x[0] > 0 ? x[2] / x[0] : 0 ))
        [ "${x[0]}" -gt 0 ] && [ "$bpr" -lt "$size" ] && L_STATUS="short responses: $bpr bytes/response"
    else
        L_STATUS="wrk failed (rc $rc)"
    fi
    [ $rc = 0 ] || [ "$L_STATUS" != ok ] || L_STATUS="wrk exit code $rc"
    # wrk counts a timeout only for a response that came later than 2 s: requests that never get one
    # show up nowhere but in the request count
    [ "$L_STATUS" != ok ] || [ "$L_REQS" != 0 ] || L_STATUS="STALLED: no response in $DUR"
    L_SRV=$(( b[0] - a[0] )) L_APP=$(( b[1] - a[1] )) L_REAPED=$(( b[2] - a[2] ))
    # a process that exited during the run takes its CPU with it (unless a server process reaped it:
    # L_REAPED): flag it instead of reporting a too low CPU/request
    if [ "$L_APPS_BEFORE" != "$L_APPS_AFTER" ]; then
        L_STATUS="APP PROCESSES CHANGED: before [$L_APPS_BEFORE] after [$L_APPS_AFTER]"
    fi
    if [ "$L_REQS" -gt 0 ]; then
        local us='BEGIN {printf "%.1f", t * 1e6 / hz / n}'
        L_USREQ=$(awk -v t=$(( L_SRV + L_APP + L_REAPED )) -v n="$L_REQS" -v hz="$CLK_TCK" "$us")
        L_US_SRV=$(awk -v t="$L_SRV" -v n="$L_REQS" -v hz="$CLK_TCK" "$us")
        L_US_APP=$(awk -v t=$(( L_APP + L_REAPED )) -v n="$L_REQS" -v hz="$CLK_TCK" "$us")
    fi
    local i boxt=0
    for i in 1 2 3 6 7 8; do boxt=$(( boxt + st1[i] - st0[i] )); done
    L_OTHER=$(awk -v b="$boxt" -v m=$(( L_SRV + L_APP + L_REAPED )) -v u="${tm[0]:-0}" -v s="${tm[1]:-0}" -v r="${tm[2]:-0}" -v hz="$CLK_TCK" \
        'BEGIN {o = (b - m - (u + s) * hz) / (r > 0 ? r * hz : 1) * 100; printf "%.0f", (o < 0 ? 0 : o)}')
    srv_alive "$srv" || L_STATUS="SERVER DIED"
}
