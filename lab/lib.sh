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
    log "lab $LAB_NAME (quick=$QUICK): work in $RUN, results in $OUT"
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

# apache_start PORT ROOT: Apache (event MPM, Debian's sizing) in the
# foreground of a background job; SRV_PID[apache2].
apache_start() {
    local port=$1 root=$2 i
    ensure_tools apache2:apache2
    mkdir -p "$RUN/apache2"
    render_conf "$LAB_DIR/conf/apache2.conf" "$RUN/apache2/apache2.conf" RUN="$RUN/apache2" PORT="$port" ROOT="$root"
    port_free "$port" || die "apache2: port $port is in use"
    APACHE_RUN_DIR="$RUN/apache2" /usr/sbin/apache2 -f "$RUN/apache2/apache2.conf" -DFOREGROUND \
        > "$RUN/logs/apache2.out" 2>&1 &
    SRV_PID[apache2]=$!
    echo "${SRV_PID[apache2]}" > "$RUN/pids/apache2.pid"
    for i in $(seq 100); do
        curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/" && return 0
        alive "${SRV_PID[apache2]}" || break
        sleep 0.1
    done
    tail -n 20 "$RUN/logs/apache2.out" "$RUN/apache2/error.log" 2>/dev/null >&2 || true
    die "apache2 did not answer on port $port"
}

# tomcat_start PORT ROOT_FILE...: a private Tomcat 10 (tests/proxy-peers/
# tomcat/tomcat.sh) serving the given files from its ROOT webapp;
# SRV_PID[tomcat].
tomcat_start() {
    local port=$1 base="$RUN/tomcat" f i
    shift
    ensure_tools java:default-jre-headless javac:default-jdk-headless
    ensure_pkgs tomcat10 libxerial-sqlite-jdbc-java
    [ -x /usr/share/tomcat10/bin/catalina.sh ] || die "tomcat10 is not installed (apt-get install tomcat10)"
    rm -rf "$base"
    sh "$REPO_DIR/tests/proxy-peers/tomcat/tomcat.sh" setup "$base" "$port" tomcat >&2
    for f; do cp "$f" "$base/webapps/ROOT/"; done
    # Static files through Tomcat's own DefaultServlet (the app's web.xml
    # is metadata-complete and maps only its servlets).
    sed -i 's|</web-app>|  <servlet><servlet-name>default</servlet-name><servlet-class>org.apache.catalina.servlets.DefaultServlet</servlet-class><load-on-startup>1</load-on-startup></servlet>\n  <servlet-mapping><servlet-name>default</servlet-name><url-pattern>/</url-pattern></servlet-mapping>\n</web-app>|' \
        "$base/webapps/ROOT/WEB-INF/web.xml"
    sh "$REPO_DIR/tests/proxy-peers/tomcat/tomcat.sh" run "$base" > "$RUN/logs/tomcat.out" 2>&1 &
    SRV_PID[tomcat]=$!
    echo "${SRV_PID[tomcat]}" > "$RUN/pids/tomcat.pid"
    for i in $(seq 600); do
        curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/health" && return 0
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
        curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/" && return 0
        alive "${SRV_PID[$name]}" || break
        sleep 0.1
    done
    die "$name did not answer on port $port"
}

# peer_start NAME PORT ROOT: nginx or lighttpd from bench/lib.sh.
peer_start() {
    SRV_PORT[$1]=$2
    srv_start "$1" "$3" || die "$1 did not start"
}

# ab_field FILE 'Requests per second' -> the number
ab_field() { sed -n "s/^$2:[[:space:]]*\([0-9.]*\).*/\1/p" "$1" | head -1; }
