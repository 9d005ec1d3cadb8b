# lab/lib.sh - shared by lab/experiments/*.sh (sourced; bash). Builds on
# bench/lib.sh (servers by PID, packages, CPU accounting) and adds what the
# seeds' experiments need: Apache, Tomcat, ab, result folders, summaries.

LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../bench/lib.sh
source "$LAB_DIR/../bench/lib.sh"

STOA=${STOA:-$DEFAULT_STOA}
NOFILE=${NOFILE:-4096}

# lab_init: RUN (work folder), OUT (results), traps. Full runs write into
# lab/results/NAME (checked in); quick ones into $RUN/results.
lab_init() {
    RUN=${RUN:-/tmp/stoa-lab-$LAB_NAME}
    mkdir -p "$RUN"
    if [ "${QUICK:-0}" = 1 ]; then OUT=${OUT:-$RUN/results}; else OUT=${OUT:-$LAB_DIR/results/$LAB_NAME}; fi
    # KEEP_OUT=1: an experiment that reruns some of its rows into the
    # existing results (dynamic-routes' MERGE) removes only their files.
    [ "${KEEP_OUT:-0}" = 1 ] || rm -rf "$OUT"
    mkdir -p "$OUT/raw"
    bench_init
    ensure_fresh_stoa
    NOFILE=$(raise_nofile "$NOFILE")
    lab_cpus
    lab_meta_begin
    # lab_meta_end writes raw/meta.json however the script ends; then the
    # servers stop (bench/lib.sh's trap).
    trap 'lab_meta_end; srv_stop_all' EXIT
    log "lab $LAB_NAME (quick=$QUICK): work in $RUN, results in $OUT; servers on CPU $SERVER_CPUS, load generators on CPU $LOAD_CPUS; $REPEATS repeats"
}

# ensure_pkgs PKG...: Debian packages without a command of their own
# (libraries, tomcat10), installed with apt-get when root.
ensure_pkgs() {
    local p missing=()
    for p; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    [ ${#missing[@]} = 0 ] && return 0
    [ "$(id -u)" = 0 ] || die "missing Debian packages: ${missing[*]} (apt-get install ${missing[*]})"
    wait_for_apt
    log "installing ${missing[*]}"
    # tomcat10's postinst would start a system service where services may
    # start: the lab runs its own instance, so none is started.
    RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
        { apt-get update >&2 && RUNLEVEL=1 DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" >&2; } ||
        die "apt-get install ${missing[*]} failed"
}

# the machine, for summaries
machine() {
    printf '%s cores, %s, %s GiB, Linux %s' "$(nproc)" \
        "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" \
        "$(awk '/MemTotal/ {printf "%d", $2/1048576}' /proc/meminfo)" "$(uname -r)"
}

# apache_start PORT ROOT [NAME]: Apache in the foreground of a background
# job; SRV_PID[NAME] (default apache2). APACHE_MPM: event (default) or
# prefork, each with Debian's stock sizing (mpm_event.conf,
# mpm_prefork.conf); APACHE_SIZING: other sizing lines instead
# ("StartServers 3\nMinSpareThreads 75"), printf-expanded.
apache_start() {
    local port=$1 root=$2 name=${3:-apache2} i dir
    dir=$RUN/$name
    ensure_tools apache2:apache2
    mkdir -p "$dir"
    render_conf "$LAB_DIR/conf/apache2.conf" "$dir/apache2.conf" RUN="$dir" PORT="$port" ROOT="$root"
    case ${APACHE_MPM:-event} in
        event) printf 'LoadModule mpm_event_module modules/mod_mpm_event.so\n' > "$dir/mpm.conf"
               printf '%b\n' "${APACHE_SIZING:-StartServers 2\nMinSpareThreads 25\nMaxSpareThreads 75\nThreadLimit 64\nThreadsPerChild 25\nMaxRequestWorkers 150\nMaxConnectionsPerChild 0}" >> "$dir/mpm.conf" ;;
        prefork) printf 'LoadModule mpm_prefork_module modules/mod_mpm_prefork.so\n' > "$dir/mpm.conf"
                 printf '%b\n' "${APACHE_SIZING:-StartServers 5\nMinSpareServers 5\nMaxSpareServers 10\nMaxRequestWorkers 150\nMaxConnectionsPerChild 0}" >> "$dir/mpm.conf" ;;
        *) die "APACHE_MPM=${APACHE_MPM}: event or prefork" ;;
    esac
    port_free "$port" || die "$name: port $port is in use"
    # setsid: prefork's parent, stopping, signals its whole process group,
    # which would otherwise be this script's
    APACHE_RUN_DIR="$dir" setsid /usr/sbin/apache2 -f "$dir/apache2.conf" -DFOREGROUND \
        > "$RUN/logs/$name.out" 2>&1 &
    SRV_PID[$name]=$!
    echo "${SRV_PID[$name]}" > "$RUN/pids/$name.pid"
    for i in $(seq 100); do
        curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/" && { srv_pin "$name"; return 0; }
        alive "${SRV_PID[$name]}" || break
        sleep 0.1
    done
    tail -n 20 "$RUN/logs/$name.out" "$dir/error.log" 2>/dev/null >&2 || true
    die "$name did not answer on port $port"
}

# tomcat_start PORT ROOT_FILE...: a private Tomcat 10 (tests/proxy-peers/
# tomcat/tomcat.sh) serving the given files (or folders) from its ROOT webapp;
# SRV_PID[tomcat].
tomcat_start() {
    local port=$1 base="$RUN/tomcat" f i
    shift
    ensure_tools java:default-jre-headless javac:default-jdk-headless
    ensure_pkgs tomcat10 libxerial-sqlite-jdbc-java
    [ -x /usr/share/tomcat10/bin/catalina.sh ] || die "tomcat10 is not installed (apt-get install tomcat10)"
    rm -rf "$base"
    sh "$REPO_DIR/tests/proxy-peers/tomcat/tomcat.sh" setup "$base" "$port" tomcat >&2
    for f; do cp -r "$f" "$base/webapps/ROOT/"; done
    # Static files through Tomcat's own DefaultServlet (the app's web.xml
    # is metadata-complete and maps only its servlets).
    sed -i 's|</web-app>|  <servlet><servlet-name>default</servlet-name><servlet-class>org.apache.catalina.servlets.DefaultServlet</servlet-class><load-on-startup>1</load-on-startup></servlet>\n  <servlet-mapping><servlet-name>default</servlet-name><url-pattern>/</url-pattern></servlet-mapping>\n</web-app>|' \
        "$base/webapps/ROOT/WEB-INF/web.xml"
    sh "$REPO_DIR/tests/proxy-peers/tomcat/tomcat.sh" run "$base" > "$RUN/logs/tomcat.out" 2>&1 &
    SRV_PID[tomcat]=$!
    echo "${SRV_PID[tomcat]}" > "$RUN/pids/tomcat.pid"
    for i in $(seq 600); do
        curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/health" && { srv_pin tomcat; return 0; }
        alive "${SRV_PID[tomcat]}" || break
        sleep 0.1
    done
    tail -n 30 "$RUN/logs/tomcat.out" >&2 || true
    die "tomcat did not answer on port $port"
}

# stoa_start NAME PORT ROOT [WORKERS]: `stoa serve` with the bench config.
stoa_start() {
    local name=$1 port=$2 root=$3 workers=${4:-1}
    SRV_PORT[$name]=$port
    render_conf "$BENCH_DIR/conf/stoa.toml" "$RUN/$name.toml" PORT="$port" ROOT="$root" WORKERS="$workers"
    "$STOA" serve --config "$RUN/$name.toml" > "$RUN/logs/$name.out" 2>&1 &
    SRV_PID[$name]=$!
    echo "${SRV_PID[$name]}" > "$RUN/pids/$name.pid"
    local i
    for i in $(seq 100); do
        curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/" && { srv_pin "$name"; return 0; }
        alive "${SRV_PID[$name]}" || break
        sleep 0.1
    done
    die "$name did not answer on port $port"
}

# peer_start NAME PORT ROOT: nginx or lighttpd from bench/lib.sh.
peer_start() {
    SRV_PORT[$1]=$2
    srv_start "$1" "$3" || die "$1 did not start"
    srv_pin "$1"
}

# ab_field FILE 'Requests per second' -> the number
ab_field() { sed -n "s/^$2:[[:space:]]*\([0-9.]*\).*/\1/p" "$1" | head -1; }

# ---------------------------------------------------------------- measurement hygiene
# Every experiment gets, from lab_init, without typing anything by hand:
# - CPUs: servers on SERVER_CPUS, load generators on LOAD_CPUS (taskset),
#   so "one CPU" means one CPU for every server, the same one for each;
# - raw/meta.json: the commit, the binary and its sha256, the machine, the
#   load average before and after, every server's CPU time (utime+stime of
#   its process tree, children it reaped included) and every measured run
#   (lab_measure) with its load average, wall time and CPU time;
# - repeats: REPEATS runs of each measurement (5; 2 with --quick), their
#   values in raw/measures.jsonl (lab_record), median and min-max from
#   lab_stat or lab/src/verdict.py.
# Knobs: SERVER_CPUS, LOAD_CPUS (taskset lists), REPEATS, LAB_SECS (seconds
# per timed run: 10, --quick 2).

# lab_cpus: SERVER_CPUS defaults to CPU 0, LOAD_CPUS to every other CPU.
# On a one-CPU machine nothing can be separated: both are CPU 0 and
# meta.json says so (cpus.separate = false).
lab_cpus() {
    local n
    n=$(nproc)
    SERVER_CPUS=${SERVER_CPUS:-0}
    if [ -z "${LOAD_CPUS:-}" ]; then
        case $n in 1) LOAD_CPUS=0 ;; 2) LOAD_CPUS=1 ;; *) LOAD_CPUS=1-$(( n - 1 )) ;; esac
    fi
    [ "$n" -ge 2 ] || warn "one CPU: servers and load generator share it"
    taskset -c "$SERVER_CPUS" true 2>/dev/null || die "SERVER_CPUS=$SERVER_CPUS is not a CPU list taskset accepts here"
    taskset -c "$LOAD_CPUS" true 2>/dev/null || die "LOAD_CPUS=$LOAD_CPUS is not a CPU list taskset accepts here"
    if [ "${QUICK:-0}" = 1 ]; then REPEATS=${REPEATS:-2}; LAB_SECS=${LAB_SECS:-2}
    else REPEATS=${REPEATS:-5}; LAB_SECS=${LAB_SECS:-10}; fi
    export SERVER_CPUS LOAD_CPUS REPEATS LAB_SECS
}

# srv_pin NAME [CPUS]: every process and thread of server NAME onto CPUS
# (default SERVER_CPUS). Processes it forks later (Apache's children,
# Tomcat's threads) inherit the mask. The start functions below call it.
srv_pin() {
    local name=$1 cpus=${2:-$SERVER_CPUS} p
    for p in $(srv_pids "$name"); do
        taskset -a -p -c "$cpus" "$p" > /dev/null 2>&1 || warn "could not pin $name (PID $p) to CPU $cpus"
    done
    SRV_CPUS[$name]=$cpus
    SRV_T0[$name]=$(date +%s.%N)
}
declare -A SRV_CPUS=() SRV_T0=()

# on_load_cpus CMD...: CMD pinned to the load generator's CPUs.
on_load_cpus() { taskset -c "$LOAD_CPUS" "$@"; }

# srv_cpu_total NAME: CPU ticks of the server's processes (utime+stime) and
# of the children they have reaped (cutime+cstime): Apache's and nginx's
# exited workers count too.
srv_cpu_total() {
    srv_proc_cat "$1" stat | awk '{ sub(/.*\) /, ""); split($0, f, " "); t += f[12] + f[13] + f[14] + f[15] } END { print t + 0 }'
}

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# json_str TEXT: TEXT as a JSON string (backslash, quote, newline, tab
# and carriage return escaped; labels, paths and versions hold no other
# control characters). Pure bash: it runs for every recorded value.
json_str() {
    local s=${1//\\/\\\\}
    s=${s//\"/\\\"}; s=${s//$'\n'/\\n}; s=${s//$'\t'/\\t}; s=${s//$'\r'/\\r}
    printf '"%s"' "$s"
}

# lab_meta_begin: what is known before the first server starts.
lab_meta_begin() {
    META=$RUN/meta.jsonl
    : > "$META"
    local commit dirty sha ver
    commit=$(git -C "$REPO_DIR" rev-parse HEAD 2>/dev/null || echo unknown)
    dirty=false
    # Results of earlier experiments (lab/results) do not change what is measured.
    [ -z "$(git -C "$REPO_DIR" status --porcelain --untracked-files=no -- . ':!lab/results' 2>/dev/null)" ] || dirty=true
    sha=$(sha256sum "$STOA" | cut -d' ' -f1)
    ver=$("$STOA" --version 2>/dev/null | head -1 || true)
    printf '{"kind":"begin","experiment":%s,"quick":%s,"started":"%s","commit":"%s","dirty":%s,"stoa":%s,"stoa_sha256":"%s","stoa_version":%s,"machine":%s,"nproc":%s,"cpus":{"servers":"%s","load":"%s","separate":%s},"repeats":%s,"run_secs":%s,"loadavg_before":"%s"}\n' \
        "$(json_str "$LAB_NAME")" "$([ "${QUICK:-0}" = 1 ] && echo true || echo false)" "$(date -u +%FT%TZ)" \
        "$commit" "$dirty" "$(json_str "$STOA")" "$sha" "$(json_str "$ver")" "$(json_str "$(machine)")" "$(nproc)" \
        "$SERVER_CPUS" "$LOAD_CPUS" "$([ "$(nproc)" -ge 2 ] && echo true || echo false)" "$REPEATS" "$LAB_SECS" "$(loadavg)" >> "$META"
}

# lab_note KEY VALUE: one more fact for meta.json (a tool's version ...).
lab_note() {
    printf '{"kind":"note","key":%s,"value":%s}\n' "$(json_str "$1")" "$(json_str "$2")" >> "$META"
}

# lab_meta_end: raw/meta.json from the lines gathered in $RUN/meta.jsonl
# (again at exit: a later call adds what happened since, its end wins).
lab_meta_end() {
    [ -n "${META:-}" ] && [ -f "$META" ] || return 0
    printf '{"kind":"end","ended":"%s","loadavg_after":"%s"}\n' "$(date -u +%FT%TZ)" "$(loadavg)" >> "$META"
    mkdir -p "$OUT/raw"
    "$PYTHON" - "$META" "$OUT/raw/meta.json" <<'PY' || warn "could not write $OUT/raw/meta.json"
import json, sys
meta = {"servers": [], "runs": [], "notes": {}}
for line in open(sys.argv[1]):
    d = json.loads(line)
    kind = d.pop("kind")
    if kind in ("begin", "end"):
        meta.update(d)
    elif kind == "server":
        meta["servers"].append(d)
    elif kind == "run":
        meta["runs"].append(d)
    elif kind == "note":
        meta["notes"][d["key"]] = d["value"]
with open(sys.argv[2], "w") as f:
    json.dump(meta, f, indent=1)
    f.write("\n")
PY
}

# srv_stop NAME (replaces bench/lib.sh's, which it then calls): the
# server's CPU time and memory go into meta.json before it stops.
eval "bench_$(declare -f srv_stop)"
srv_stop() {
    local name=$1 p=${SRV_PID[$1]:-} t0 now ticks rss
    if [ -n "$p" ] && [ -n "${META:-}" ] && alive "$p"; then
        ticks=$(srv_cpu_total "$name"); rss=$(srv_rss_kb "$name"); now=$(date +%s.%N)
        t0=${SRV_T0[$name]:-$now}
        printf '{"kind":"server","name":"%s","pid":%s,"cpus":"%s","up_s":%.1f,"cpu_s":%.2f,"rss_kb_at_stop":%s}\n' \
            "$name" "$p" "${SRV_CPUS[$name]:-unpinned}" "$(awk -v a="$t0" -v b="$now" 'BEGIN {print b - a}')" \
            "$(awk -v t="$ticks" -v hz="$CLK_TCK" 'BEGIN {print t / hz}')" "${rss:-0}" >> "$META"
    fi
    unset "SRV_CPUS[$name]" "SRV_T0[$name]"
    bench_srv_stop "$name"
}

# srv_restart NAME: stop NAME and start it again with the experiment's
# start function `start NAME` (each experiment defines one): no backlog,
# cache or JIT state carried from one measured run to the next.
srv_restart() { srv_stop "$1"; start "$1"; }

# machine_busy: the CPU time of the whole machine so far, in clock ticks
# (/proc/stat: every state but idle and iowait). During a measured run,
# this less the servers' and the load's own CPU is other work's.
machine_busy() { awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8 + $9; exit}' /proc/stat; }

# lab_measure LABEL CMD...: runs CMD on the load CPUs and records the run
# in meta.json: label, repeat (REP), wall seconds, CPU seconds of CMD and
# of every running server during it, of the whole machine (machine_cpu_s),
# load average before and after, exit status. Sets M_SECS, M_GEN_CPU_S and M_SRV_CPU_S[NAME]; returns CMD's
# status. Call it in the script's shell (not in $(...)) to keep them.
declare -A M_SRV_CPU_S=()
lab_measure() {
    local label=$1 rc=0 la0 la1 s0 s1 c0 c1 m0 m1 n srvs=() first=1 json="" me=$BASHPID
    shift
    declare -A t0=()
    for n in "${!SRV_PID[@]}"; do srvs+=("$n"); t0[$n]=$(srv_cpu_total "$n"); done
    la0=$(loadavg); s0=$(date +%s.%N)
    c0=$(awk '{print $16 + $17}' "/proc/$me/stat")
    m0=$(machine_busy)
    on_load_cpus "$@" || rc=$?
    m1=$(machine_busy)
    c1=$(awk '{print $16 + $17}' "/proc/$me/stat")
    s1=$(date +%s.%N); la1=$(loadavg)
    M_SECS=$(awk -v a="$s0" -v b="$s1" 'BEGIN {printf "%.3f", b - a}')
    M_GEN_CPU_S=$(awk -v t=$(( c1 - c0 )) -v hz="$CLK_TCK" 'BEGIN {printf "%.2f", t / hz}')
    M_SRV_CPU_S=()
    for n in "${srvs[@]}"; do
        M_SRV_CPU_S[$n]=$(awk -v t=$(( $(srv_cpu_total "$n") - ${t0[$n]} )) -v hz="$CLK_TCK" 'BEGIN {printf "%.2f", t / hz}')
        [ $first = 1 ] || json+=","
        json+="\"$n\":${M_SRV_CPU_S[$n]}"; first=0
    done
    printf '{"kind":"run","label":%s,"rep":%s,"started":"%s","secs":%s,"load_cpu_s":%s,"server_cpu_s":{%s},"machine_cpu_s":%s,"loadavg_before":"%s","loadavg_after":"%s","rc":%s}\n' \
        "$(json_str "$label")" "${REP:-null}" "$(date -u -d "@${s0%.*}" +%FT%TZ)" "$M_SECS" "$M_GEN_CPU_S" "$json" \
        "$(awk -v t=$(( m1 - m0 )) -v hz="$CLK_TCK" 'BEGIN {printf "%.2f", t / hz}')" "$la0" "$la1" "$rc" >> "$META"
    return $rc
}

# lab_record LABEL VALUE [UNIT]: one measured value of repeat REP, into
# raw/measures.jsonl (what lab_stat and verdict.py's measures() read).
lab_record() {
    local v=$2
    [[ $v =~ ^-?[0-9]+([.][0-9]+)?([eE][-+]?[0-9]+)?$ ]] || { warn "lab_record $1: '$v' is not a number: recorded as null"; v=null; }
    printf '{"label":%s,"rep":%s,"value":%s,"unit":%s}\n' "$(json_str "$1")" "${REP:-null}" "$v" "$(json_str "${3:-}")" \
        >> "$OUT/raw/measures.jsonl"
}

# lab_repeat CMD...: CMD run REPEATS times with REP=1..REPEATS exported.
# Put the loop over servers inside CMD so repeats alternate between them.
lab_repeat() {
    local r
    for r in $(seq "$REPEATS"); do
        REP=$r; export REP
        log "repeat $r of $REPEATS: $*"
        "$@"
    done
    unset REP
}

# lab_stat LABEL: sets STAT_MEDIAN STAT_MIN STAT_MAX STAT_N, STAT_TEXT
# ("median UNIT (min-max, n=N)") and STAT_SHORT ("median (min-max)") from
# LABEL's recorded values (STAT_N=0 and the texts "-" when there are
# none). Call it in the script's shell.
lab_stat() {
    local line texts
    STAT_MEDIAN='' STAT_MIN='' STAT_MAX='' STAT_N=0 STAT_TEXT=- STAT_SHORT=-
    line=$("$PYTHON" "$LAB_DIR/src/verdict.py" --stat "$OUT" "$1" 2>/dev/null) || return 0
    read -r STAT_MEDIAN STAT_MIN STAT_MAX STAT_N texts <<< "$line"
    STAT_SHORT=${texts%%|*} STAT_TEXT=${texts#*|}
}

# ab_run LABEL FILE URL CONC [AB_ARGS...]: ab for LAB_SECS seconds (-t; the
# -n after it lifts ab's implied 50,000-request cap), on the load CPUs,
# recorded by lab_measure. ab -r: a failed socket is counted, not fatal.
ab_run() {
    local label=$1 f=$2 url=$3 c=$4
    shift 4
    lab_measure "$label" timeout $(( LAB_SECS + 60 )) ab -r -t "$LAB_SECS" -n 2000000 -c "$c" "$@" "$url" > "$f" 2>&1
}

# ab_parse FILE: sets AB_RPS AB_COMPLETE AB_FAILED AB_F_CONNECT AB_F_RECEIVE
# AB_F_LENGTH AB_F_EXCEPT AB_NON2XX AB_KA AB_DOCLEN AB_SECS ("" when absent).
ab_parse() {
    local f=$1
    AB_RPS=$(ab_field "$f" 'Requests per second')
    AB_COMPLETE=$(ab_field "$f" 'Complete requests')
    AB_FAILED=$(ab_field "$f" 'Failed requests')
    AB_NON2XX=$(ab_field "$f" 'Non-2xx responses')
    AB_KA=$(ab_field "$f" 'Keep-Alive requests')
    AB_DOCLEN=$(ab_field "$f" 'Document Length')
    AB_SECS=$(ab_field "$f" 'Time taken for tests')
    read -r AB_F_CONNECT AB_F_RECEIVE AB_F_LENGTH AB_F_EXCEPT <<< "$(sed -n 's/^ *(Connect: \([0-9]*\), Receive: \([0-9]*\), Length: \([0-9]*\), Exceptions: \([0-9]*\))/\1 \2 \3 \4/p' "$f" | head -1)"
    AB_F_CONNECT=${AB_F_CONNECT:-0} AB_F_RECEIVE=${AB_F_RECEIVE:-0} AB_F_LENGTH=${AB_F_LENGTH:-0} AB_F_EXCEPT=${AB_F_EXCEPT:-0}
}

# lab_summary_head: the verdict table and the provenance line that open
# summary.md (lab/src/verdict.py renders both from verdicts.json and
# raw/meta.json).
lab_summary_head() { lab_meta_end; "$PYTHON" "$LAB_DIR/src/verdict.py" "$OUT"; }
