#!/bin/bash
# ABOUT: BENCH1-4: the comments app per route (CGI, FastCGI Perl/Rust, PHP, servlet, Lua) behind Stoa and Apache, SQLite and PostgreSQL (apache-dynamic-content-technologies.txt)
#
# The paper (§3-4) wrote one small application per technology: a form POST
# inserted into a database (its Figures 1-4) and a "Select *" page printed
# as an HTML table, and drove each through Apache 1.3 with four benchmarks:
#   BENCH1  a client more every 2 s, each thinking 1..T s between requests
#           (T = 2, 5, 8; same seed), killed when a response takes over
#           3 s: the clients served then (figure 5) and the traffic
#           (table 1); 73.5 KB page
#   BENCH2  a client more every 10 s up to 20, requests back to back: the
#           mean time per number of concurrent clients (figure 6); 195 KB
#   BENCH3  threads of one request each, 14-30 per second: the errors; 50 KB
#   BENCH4  100 threads over 10 s, 200 ms before their request: the running
#           mean and deviation per response (figures 7 and 8); 50 KB
# Here the same application is written once per route, each answering byte
# for byte the same page (lab/src/dynamic/: Perl CGI and mod_perl, Perl
# FastCGI, PHP, a servlet, Lua, and `stoa demo-app table` in Rust on Stoa's
# FastCGI library), on SQLite and on a private PostgreSQL cluster, each
# behind Stoa and behind Apache (prefork, as 1.3 was). The load comes from
# `stoa bench` scenarios (ramps, think time, abort rules, --rate, levels,
# running_every). Knobs (environment): B1_EVERY B1_MAX B1_THINKS B1_TAIL B2_STEP
# B3_RATES B3_DUR B4_N PG=0 (skip PostgreSQL) ROWS="regex" (only those rows,
# e.g. ROWS='^stoa:lua:pg$|fcgi-rust'), STOA_WORKERS (Stoa's `workers`,
# default 0: one per core), MERGE=1 (a full run of the ROWS only, merged
# into the checked-in lab/results/dynamic-routes: their raw files and rows
# replaced, every other row's kept, each row with its own time and load).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# The knobs the caller gave, before defaults fill them (the summary's command line).
GIVEN=""
for v in MERGE ROWS BENCHES REPEATS REPEAT_FROM B2_REPEATS B1_CAP B1_THINKS B3_RATES STOA_WORKERS PG; do
    [ -n "${!v:-}" ] && GIVEN+="$v='${!v}' "
done
MERGE=${MERGE:-0}
if [ "$MERGE" = 1 ]; then
    [ "$QUICK" = 0 ] || { echo "MERGE=1 is for full runs" >&2; exit 2; }
    [ -n "${ROWS:-}" ] || { echo "MERGE=1 needs ROWS=regex (the rows to run again)" >&2; exit 2; }
    KEEP_OUT=1
fi
# REPEATS runs of BENCH1-3 per row (1 by default: a full run of every row
# takes hours); the first repeat's files are ROW-b1-thinkT-knee.json,
# ROW-b2.json, ROW-b3-rateR.json, repeat N's end in -rN (-b1-thinkT-rN-knee,
# -b2-rN, -b3-rateR-rN). B2_REPEATS (default REPEATS) caps the repeats that
# run BENCH2, the longest benchmark. A later repeat's knee search starts
# from the repeat before's knee. REPEAT_FROM=N (with MERGE=1): the ROWS'
# repeats below N are kept and N..REPEATS run, BENCH4 (B4_REPEATS runs of
# its own) not again. raw/meta.json records REPEATS; the verdicts pool
# think times, levels or routes over the repeats and say so in their unit.
REPEATS=${REPEATS:-1}
REPEAT_FROM=${REPEAT_FROM:-1}
# BENCHES: which benchmarks run (default "1 2 3 4"). Fewer (with MERGE=1)
# replace only those benchmarks' files of the ROWS (of repeats
# REPEAT_FROM..REPEATS): BENCHES=2 REPEAT_FROM=4 REPEATS=5 adds BENCH2's
# repeats 4 and 5 and keeps every other file. BENCH1 replaces only the
# think times in B1_THINKS: BENCHES=1 B1_THINKS=2 B1_CAP=2048 searches
# the knees at T = 2 s again with a higher cap, keeping T = 5 and 8 s.
BENCHES=${BENCHES:-1 2 3 4}
for b in $BENCHES; do
    case $b in 1|2|3|4) ;; *) echo "BENCHES='$BENCHES': each must be 1, 2, 3 or 4" >&2; exit 2 ;; esac
done
has_bench() { [[ " $BENCHES " == *" $1 "* ]]; }
ALL_BENCHES=1; for b in 1 2 3 4; do has_bench $b || ALL_BENCHES=0; done
[ "$ALL_BENCHES" = 1 ] || [ "$MERGE" = 1 ] ||
    { echo "BENCHES='$BENCHES' needs MERGE=1 (the other benchmarks' files are the checked-in rows')" >&2; exit 2; }
BENCH_NOTE=""; [ "$ALL_BENCHES" = 1 ] || BENCH_NOTE=" (BENCH$(echo $BENCHES | sed 's/ /, BENCH/g') only)"
if [ "$REPEAT_FROM" != 1 ]; then
    [ "$MERGE" = 1 ] || { echo "REPEAT_FROM needs MERGE=1 (the earlier repeats are the checked-in rows')" >&2; exit 2; }
    [ "$REPEAT_FROM" -le "$REPEATS" ] || { echo "REPEAT_FROM=$REPEAT_FROM is above REPEATS=$REPEATS" >&2; exit 2; }
fi
lab_init
ensure_tools python3:python3 curl:curl perl:perl apache2:apache2 php-fpm8.2:php8.2-fpm \
    java:default-jre-headless javac:default-jdk-headless
ensure_pkgs libdbi-perl libdbd-sqlite3-perl libdbd-pg-perl libcgi-fast-perl libfcgi-perl \
    libapache2-mod-php8.2 php8.2-sqlite3 php8.2-pgsql libapache2-mod-perl2 libapache-dbi-perl \
    tomcat10 libxerial-sqlite-jdbc-java libpostgresql-jdbc-java
SRC=$LAB_DIR/src/dynamic
PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
PG=${PG:-1}
if [ "$PG" = 1 ] && { [ -z "$PGBIN" ] || [ ! -x "$PGBIN/initdb" ]; }; then
    ensure_pkgs postgresql
    PGBIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
fi
[ "$PG" = 1 ] && [ "$(id -u)" != 0 ] && { warn "PostgreSQL rows need root (the cluster runs as the postgres user): skipped"; PG=0; }
ROWS=${ROWS:-.}
# Servers (front ends, back ends, databases) on SERVER_CPUS, stoa bench on
# LOAD_CPUS (taskset); Stoa gets a worker per server CPU.
STOA_WORKERS=${STOA_WORKERS:-$(taskset -c "$SERVER_CPUS" nproc)}
STOA_W=$STOA_WORKERS; [ "$STOA_W" = 0 ] && STOA_W=$(taskset -c "$SERVER_CPUS" nproc)

# Ports (19600-19699 are the lab's dynamic-routes and webbench-cluster).
P_STOA=19601 P_APACHE=19602 P_TOMCAT=19603 P_PG=19604
for p in $P_STOA $P_APACHE $P_TOMCAT $P_PG; do port_free "$p" || die "port $p is in use"; done

# The load. Full: the paper's shapes, compressed in time to fit the
# machine (see the summary); quick: the same machinery in seconds.
# BENCH1 is a search for each route's knee (B1_MODE=knee, the default): at
# the paper's 2 s pacing a route that serves thousands of clients would
# take hours to reach them, so each probe starts N clients at once (their
# first requests spread over one think time), runs B1_PROBE, and fails at
# the paper's rule, a response over 3 s. The cap B1_CAP is probed first;
# below it, N is bisected on a log scale until the bracket is within
# B1_PRECISION (a ratio). B1_MODE=ramp keeps the ramp (a client more every
# B1_EVERY up to B1_MAX, the paper's own shape with B1_EVERY=2s).
if [ "$QUICK" = 1 ]; then
    B1_MODE=${B1_MODE:-knee} B1_CAP=${B1_CAP:-8} B1_PROBE=${B1_PROBE:-1s} B1_PRECISION=${B1_PRECISION:-2}
    B1_EVERY=${B1_EVERY:-50ms} B1_MAX=${B1_MAX:-10} B1_THINKS=${B1_THINKS:-1} B1_TAIL=${B1_TAIL:-0.8} B1_FIRST_MIN=${B1_FIRST_MIN:-0s}
    B2_STEP=${B2_STEP:-250ms} B2_MAX=${B2_MAX:-3} B2_WARMUPS=${B2_WARMUPS:-0}
    B3_RATES=${B3_RATES:-14} B3_DUR=${B3_DUR:-1}
    B4_N=${B4_N:-8} B4_EVERY=${B4_EVERY:-50ms} B4_REPEATS=${B4_REPEATS:-1} WARM=${WARM:-10}
    APACHE_START=${APACHE_START:-5} RESTART=${RESTART:-b2}
    # BENCH1-3 on the rows the verdicts read; BENCH4 on all (FULL_ROWS=.
    # for every benchmark on every row: about 4 minutes).
    FULL_ROWS=${FULL_ROWS:-^apache:(cgi|fcgi-perl|php|mod_perl|servlet):sqlite$}
    B1_ROWS=${B1_ROWS:-^apache:(cgi|fcgi-perl):sqlite$}
else
    B1_MODE=${B1_MODE:-knee} B1_CAP=${B1_CAP:-1024} B1_PROBE=${B1_PROBE:-20s} B1_PRECISION=${B1_PRECISION:-1.25}
    B1_EVERY=${B1_EVERY:-2s} B1_MAX=${B1_MAX:-400} B1_THINKS=${B1_THINKS:-2 5 8} B1_TAIL=${B1_TAIL:-3} B1_FIRST_MIN=${B1_FIRST_MIN:-1s}
    B2_STEP=${B2_STEP:-10s} B2_MAX=${B2_MAX:-20} B2_WARMUPS=${B2_WARMUPS:-1}
    B3_RATES=${B3_RATES:-14 16 17 20 22 30 100} B3_DUR=${B3_DUR:-10}
    B4_N=${B4_N:-100} B4_EVERY=${B4_EVERY:-100ms} B4_REPEATS=${B4_REPEATS:-5} WARM=${WARM:-200}
    APACHE_START=${APACHE_START:-30} RESTART=${RESTART:-every} FULL_ROWS=${FULL_ROWS:-.} B1_ROWS=${B1_ROWS:-.}
fi
B2_REPEATS=${B2_REPEATS:-$REPEATS}
# RESTART=every: the front end restarts before every benchmark and every
# knee probe; b2 (--quick, to stay under two minutes): before BENCH2 only,
# where BENCH1's backlog (CGI above all) would otherwise land.
[ "$REPEAT_FROM" = 1 ] && [ "$ALL_BENCHES" = 1 ] || lab_note repeats_here "$REPEAT_FROM-$REPEATS$BENCH_NOTE"
[ "$ALL_BENCHES" = 1 ] || lab_note benches_here "${BENCHES// /,}"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
RUN_T0=$(date +%s)
env_prefix() { printf '%s' "$GIVEN"; }

# ---------------------------------------------------------------- data
mkdir -p "$RUN/db" "$RUN/www/php" "$RUN/cgi" "$RUN/sock"
python3 "$SRC/gen.py" "$RUN/db" >&2
chmod 777 "$RUN/db" "$RUN/sock"; chmod 666 "$RUN/db/comments.db"
SQLITE=$RUN/db/comments.db
PGHOST=$RUN/pgsock
install -m 755 "$SRC/comments.pl" "$RUN/cgi/comments.pl"
install -m 644 "$SRC/comments.php" "$RUN/www/php/comments.php"
sed -e "s|@SQLITE@|$SQLITE|" -e "s|@PGHOST@|$PGHOST|" -e "s|@PGPORT@|$P_PG|" "$SRC/comments.lua" > "$RUN/comments.lua"
chmod 755 "$RUN" "$RUN/www" "$RUN/www/php"

# ---------------------------------------------------------------- servers
bg_start() {  # bg_start NAME COMMAND...: a background server tracked by PID, on the server CPUs
    local name=$1; shift
    taskset -c "$SERVER_CPUS" "$@" > "$RUN/logs/$name.out" 2>&1 &
    SRV_PID[$name]=$!
    echo "${SRV_PID[$name]}" > "$RUN/pids/$name.pid"
}
wait_http() {  # wait_http NAME URL SECONDS
    local i
    for i in $(seq $(( $3 * 10 ))); do
        curl -s -o /dev/null --max-time 2 "$2" && return 0
        srv_alive "$1" || break
        sleep 0.1
    done
    tail -n 30 "$RUN/logs/$1.out" >&2 || true
    die "$1 did not answer at $2"
}

# Tomcat first: the JVM takes the longest to start, in the background of
# everything else.
tomcat_setup() {
    local base=$RUN/tomcat jni
    rm -rf "$base"
    sh "$REPO_DIR/tests/proxy-peers/tomcat/tomcat.sh" setup "$base" "$P_TOMCAT" lab >&2
    javac -nowarn --release 17 -cp /usr/share/java/tomcat10-servlet-api.jar \
        -d "$base/webapps/ROOT/WEB-INF/classes" "$SRC/servlet/labdyn/Comments.java"
    cp -L /usr/share/java/postgresql.jar "$base/webapps/ROOT/WEB-INF/lib/" 2>/dev/null || true
    sed -i 's|</web-app>|  <servlet><servlet-name>lab</servlet-name><servlet-class>labdyn.Comments</servlet-class><load-on-startup>1</load-on-startup></servlet>\n  <servlet-mapping><servlet-name>lab</servlet-name><url-pattern>/tomcat/comments</url-pattern></servlet-mapping>\n</web-app>|' \
        "$base/webapps/ROOT/WEB-INF/web.xml"
    # The proxy tests' setenv.sh limits the JIT to C1 and the heap to
    # 192 MB (two instances there); one instance here, with the full JIT.
    jni=$(dirname "$(ls /usr/lib/*/jni/libsqlitejdbc.so | head -n1)")
    echo "JAVA_OPTS=\"-Xmx512m -XX:+UseSerialGC -Djava.library.path=$jni -Dlab.sqlite=$SQLITE -Dlab.pgurl=jdbc:postgresql://127.0.0.1:$P_PG/comments\"" \
        > "$base/bin/setenv.sh"
}
tomcat_setup
bg_start tomcat sh "$REPO_DIR/tests/proxy-peers/tomcat/tomcat.sh" run "$RUN/tomcat"

# PostgreSQL: a private cluster (initdb) on a Unix socket, and 127.0.0.1
# for JDBC; run as the postgres user (initdb refuses root).
pg_start() {
    local u=postgres
    id "$u" >/dev/null 2>&1 || useradd --system --no-create-home "$u"
    rm -rf "$RUN/pg" "$PGHOST"; mkdir -p "$RUN/pg" "$PGHOST"; chown "$u" "$RUN/pg" "$PGHOST"
    setpriv --reuid "$u" --regid "$u" --init-groups -- "$PGBIN/initdb" -D "$RUN/pg/data" -A trust -U postgres -N \
        > "$RUN/logs/initdb.out" 2>&1 || { cat "$RUN/logs/initdb.out" >&2; die "initdb failed"; }
    bg_start postgres setpriv --reuid "$u" --regid "$u" --init-groups -- "$PGBIN/postgres" -D "$RUN/pg/data" \
        -k "$PGHOST" -h 127.0.0.1 -p "$P_PG" -c max_connections=400 -c shared_buffers=64MB
    local i
    for i in $(seq 100); do
        "$PGBIN/pg_isready" -q -h "$PGHOST" -p "$P_PG" && break
        srv_alive postgres || break
        sleep 0.1
    done
    "$PGBIN/pg_isready" -q -h "$PGHOST" -p "$P_PG" || { tail "$RUN/logs/postgres.out" >&2; die "postgres did not start"; }
    psql -q -h "$PGHOST" -p "$P_PG" -U postgres -c "CREATE ROLE lab LOGIN" -c "CREATE DATABASE comments OWNER lab" >&2
    PGOPTIONS="-c client_min_messages=warning" \
        psql -q -h "$PGHOST" -p "$P_PG" -U lab -d comments -v ON_ERROR_STOP=1 -f "$RUN/db/comments.sql" >&2
    psql -q -h "$PGHOST" -p "$P_PG" -U postgres -d comments -c "VACUUM ANALYZE" >&2
}
pg_stop() {  # a fast shutdown (SIGINT): SIGTERM would wait for the kept connections
    local p=${SRV_PID[postgres]:-} i
    [ -n "$p" ] || return 0
    kill -INT "$p" 2>/dev/null || true
    for i in $(seq 100); do alive "$p" || break; sleep 0.1; done
    srv_stop postgres
}
trap 'pg_stop; lab_meta_end; srv_stop_all' EXIT
[ "$PG" = 1 ] && pg_start

# php-fpm for Stoa (Apache runs mod_php): 8 static children.
cat > "$RUN/php-fpm.conf" <<CONF
[global]
pid = $RUN/php-fpm.pid
error_log = $RUN/logs/php-fpm-error.log
daemonize = no
[lab]
user = root
group = root
listen = $RUN/sock/php.sock
listen.mode = 0666
pm = static
pm.max_children = 8
clear_env = no
CONF
bg_start php-fpm php-fpm8.2 -R -F -y "$RUN/php-fpm.conf"

# FastCGI process managers for Apache's mod_proxy_fcgi (Stoa spawns its
# own pools): 8 Perl processes, one Rust process (threaded; one kept
# PostgreSQL connection, its requests' queries pipelined on it).
PGCONN="host=$PGHOST port=$P_PG dbname=comments user=lab"
APP_ENV=(env "LAB_SQLITE=$SQLITE" "LAB_PGHOST=$PGHOST" "LAB_PGPORT=$P_PG" "PERL5LIB=$SRC" "STOA_TABLE_DB=$SQLITE" "STOA_TABLE_PG=$PGCONN")
bg_start fcgi-perl "${APP_ENV[@]}" python3 "$SRC/fcgi-spawn.py" "$RUN/sock/perl.sock" 8 perl "$SRC/comments.fcgi"
bg_start fcgi-rust "${APP_ENV[@]}" python3 "$SRC/fcgi-spawn.py" "$RUN/sock/rust.sock" 1 "$STOA" demo-app table

# Stoa: every route in one server (by default 2 workers, one per core).
cat > "$RUN/stoa.toml" <<TOML
listen = ["127.0.0.1:$P_STOA"]
workers = $STOA_WORKERS
user = "root"
[log]
access = "off"
[cgi]
max_processes = 64
[[pool]]
name = "perl"
command = ["/usr/bin/perl", "$SRC/comments.fcgi"]
processes = 8
env = { LAB_SQLITE = "$SQLITE", LAB_PGHOST = "$PGHOST", LAB_PGPORT = "$P_PG", PERL5LIB = "$SRC" }
[[pool]]
name = "rust"
command = ["{stoa}", "demo-app", "table"]
processes = 1
env = { STOA_TABLE_DB = "$SQLITE", STOA_TABLE_PG = "$PGCONN" }
[[pool]]
name = "php"
address = ["unix:$RUN/sock/php.sock"]
capacity = 8
[[pool]]
name = "tomcat"
protocol = "http"
address = ["127.0.0.1:$P_TOMCAT"]
[[site]]
root = "$RUN/www"
[[site.route]]
prefix = "/cgi/"
cgi = { dir = "$RUN/cgi", env = { LAB_SQLITE = "$SQLITE", LAB_PGHOST = "$PGHOST", LAB_PGPORT = "$P_PG", PERL5LIB = "$SRC" } }
[[site.route]]
prefix = "/fcgi/"
fastcgi = { pool = "perl" }
[[site.route]]
prefix = "/rust/"
fastcgi = { pool = "rust" }
[[site.route]]
prefix = "/php/"
php = { pool = "php", front_controller = "", params = { LAB_SQLITE = "$SQLITE", LAB_PGHOST = "$PGHOST", LAB_PGPORT = "$P_PG" } }
[[site.route]]
prefix = "/tomcat/"
proxy = { pool = "tomcat" }
[[site.route]]
prefix = "/lua/"
lua = { script = "$RUN/comments.lua" }
TOML
"$STOA" check "$RUN/stoa.toml" >&2 || die "bad Stoa config"
stoa_up() {
    bg_start stoa "$STOA" serve --config "$RUN/stoa.toml"
    wait_http stoa "http://127.0.0.1:$P_STOA/lua/" 20
}
stoa_up

# Apache, prefork as the paper's 1.3 (30 children at start, at least 10
# spare, at most 50 spare, 1000 connections per child, keep-alive 5 s, no
# access log), one instance per technology with only its modules loaded.
apache_conf() {  # apache_conf FLAVOUR -> $RUN/apache2/apache2.conf
    local f=$1 c=$RUN/apache2/apache2.conf
    mkdir -p "$RUN/apache2"
    cat > "$c" <<CONF
ServerRoot /usr/lib/apache2
ServerName localhost
Listen 127.0.0.1:$P_APACHE
PidFile $RUN/apache2/apache2.pid
DefaultRuntimeDir $RUN/apache2
ErrorLog $RUN/apache2/error.log
LogLevel warn
User www-data
Group www-data
LoadModule mpm_prefork_module modules/mod_mpm_prefork.so
LoadModule authz_core_module modules/mod_authz_core.so
LoadModule mime_module modules/mod_mime.so
LoadModule alias_module modules/mod_alias.so
LoadModule env_module modules/mod_env.so
StartServers $APACHE_START
MinSpareServers 10
MaxSpareServers 50
MaxRequestWorkers 150
MaxConnectionsPerChild 1000
KeepAlive On
KeepAliveTimeout 5
TypesConfig /etc/mime.types
DocumentRoot $RUN/www
<Directory $RUN/www>
    Require all granted
</Directory>
SetEnv LAB_SQLITE $SQLITE
SetEnv LAB_PGHOST $PGHOST
SetEnv LAB_PGPORT $P_PG
CONF
    case $f in
        cgi) cat >> "$c" <<CONF
LoadModule cgi_module modules/mod_cgi.so
SetEnv PERL5LIB $SRC
ScriptAlias /cgi/ $RUN/cgi/
<Directory $RUN/cgi>
    Require all granted
</Directory>
CONF
        ;;
        fcgi) cat >> "$c" <<CONF
LoadModule proxy_module modules/mod_proxy.so
LoadModule proxy_fcgi_module modules/mod_proxy_fcgi.so
ProxyPass /fcgi/ "unix:$RUN/sock/perl.sock|fcgi://localhost/"
ProxyPass /rust/ "unix:$RUN/sock/rust.sock|fcgi://localhost/"
CONF
        ;;
        php) cat >> "$c" <<CONF
LoadModule php_module modules/libphp8.2.so
<FilesMatch "\.php\$">
    SetHandler application/x-httpd-php
</FilesMatch>
CONF
        ;;
        perl) cat >> "$c" <<CONF
LoadModule perl_module modules/mod_perl.so
PerlSwitches -I$SRC
PerlModule Apache::DBI
PerlModule ModPerl::Registry
PerlModule LabComments
Alias /perl/ $RUN/cgi/
<Location /perl/>
    SetHandler perl-script
    PerlResponseHandler ModPerl::Registry
    PerlOptions +ParseHeaders
    Options +ExecCGI
</Location>
<Directory $RUN/cgi>
    Require all granted
</Directory>
CONF
        ;;
        proxy) cat >> "$c" <<CONF
LoadModule proxy_module modules/mod_proxy.so
LoadModule proxy_http_module modules/mod_proxy_http.so
ProxyPass /tomcat/ http://127.0.0.1:$P_TOMCAT/tomcat/
CONF
        ;;
    esac
}
apache_up() {
    CUR_FLAVOUR=$1
    apache_conf "$1"
    # its own session: prefork signals its whole process group when it stops
    bg_start apache2 setsid env APACHE_RUN_DIR="$RUN/apache2" /usr/sbin/apache2 -f "$RUN/apache2/apache2.conf" -DFOREGROUND
    wait_http apache2 "http://127.0.0.1:$P_APACHE/" 20
}

# ---------------------------------------------------------------- rows
# ROW = front:route:db, its URL path (the table is added per benchmark).
declare -A RPATH=([cgi]=/cgi/comments.pl [fcgi-perl]=/fcgi/ [fcgi-rust]=/rust/ [php]=/php/comments.php
    [servlet]=/tomcat/comments [lua]=/lua/ [mod_perl]=/perl/comments.pl)
declare -A PORT_OF=([stoa]=$P_STOA [apache]=$P_APACHE)
declare -A ROUTE_LABEL=([cgi]="CGI (Perl DBI)" [fcgi-perl]="FastCGI (Perl CGI::Fast)" [fcgi-rust]="FastCGI (Rust, stoa-fastcgi)"
    [php]="PHP" [servlet]="servlet (Tomcat 10, JDBC)" [lua]="Lua (in-process)" [mod_perl]="mod_perl (Registry, Apache::DBI)")
declare -A FRONT_HOW=([stoa:cgi]="cgi route" [stoa:fcgi-perl]="[[pool]] of 8" [stoa:fcgi-rust]="[[pool]] of 1 (threaded)"
    [stoa:php]="php route, php-fpm (8 static)" [stoa:servlet]="proxy route" [stoa:lua]="lua route"
    [apache:cgi]="mod_cgi" [apache:fcgi-perl]="mod_proxy_fcgi, 8 processes" [apache:fcgi-rust]="mod_proxy_fcgi, 1 process"
    [apache:php]="mod_php (prefork)" [apache:servlet]="mod_proxy_http" [apache:mod_perl]="mod_perl (prefork)")
declare -A ROW_STATUS=() ROW_WHEN=()
ROW_LIST=()
# Every row, in the order of the tables (a MERGE run keeps the rows it
# does not run).
ALL_ROWS=()
for r in cgi fcgi-perl fcgi-rust php servlet lua; do ALL_ROWS+=(stoa:$r:sqlite stoa:$r:pg); done
for r in cgi fcgi-perl fcgi-rust php mod_perl servlet; do ALL_ROWS+=(apache:$r:sqlite apache:$r:pg); done

url_of() {  # url_of ROW [QUERY] -> the URL (with &db=pg on PostgreSQL rows)
    local front=${1%%:*} rest=${1#*:}
    local route=${rest%%:*} db=${rest#*:} q=${2:-}
    [ "$db" = pg ] && q+="${q:+&}db=pg"
    echo "http://127.0.0.1:${PORT_OF[$front]}${RPATH[$route]}${q:+?$q}"
}

check_row() {  # a POST stored and read back; the b1 page byte for byte
    local row=$1 body tag
    tag="check-${row//:/-}-$RANDOM"
    body=$(curl -s --max-time 20 -d "name=lab&email=lab@example.org&comments=$tag" "$(url_of "$row")" 2>&1) || true
    [ "$body" = "All done OK" ] || { ROW_STATUS[$row]="POST answered: ${body:0:200}"; return 1; }
    curl -s --max-time 20 "$(url_of "$row" t=none)" | grep -q "$tag" ||
        { ROW_STATUS[$row]="the posted comment is not in the page"; return 1; }
    curl -s --max-time 20 -o "$RUN/raw/check.html" "$(url_of "$row" t=b1)" || true
    cmp -s "$RUN/raw/check.html" "$RUN/db/expected-b1.html" ||
        { ROW_STATUS[$row]="the b1 page differs ($(stat -c %s "$RUN/raw/check.html") bytes): $(head -c 200 "$RUN/raw/check.html" | tr '\n' ' ')"; return 1; }
    ROW_STATUS[$row]=ok
}

# bench TAG SCENARIO-FILE [ARGS...]: one `stoa bench` scenario on the load
# CPUs, measured by lab_measure (meta.json: its wall and CPU time, every
# server's, the whole machine's, so that other work on the box shows).
bench() {
    local tag=$1 sc=$2 rc=0; shift 2
    lab_measure "$tag" "$STOA" bench -q --scenario "$sc" --json "$OUT/raw/$tag.json" "$@" > "$OUT/raw/$tag.txt" 2>&1 || rc=$?
    [ "$rc" = 0 ] || warn "stoa bench $tag exited $rc ($(tail -n1 "$OUT/raw/$tag.txt"))"
}

# restart_front ROW: the row's front end stopped and started again before
# each benchmark, so that no backlog (CGI processes still running, a
# FastCGI queue, prefork children) carries from one benchmark into the
# next; a few requests then warm it (mod_perl compiles per child, pools
# start their processes).
restart_front() {
    local row=$1 front=${1%%:*}
    if [ "$front" = stoa ]; then srv_stop stoa; stoa_up
    else srv_stop apache2; apache_up "$CUR_FLAVOUR"; fi
    on_load_cpus "$STOA" bench -q -n 20 -c 4 "$(url_of "$row" t=b3)" > /dev/null 2>&1 || true
}

# row_servers ROW: the servers whose processes do the row's work (front
# end, back end, database), for its CPU time, memory and connections.
row_servers() {
    local front=${1%%:*} rest=${1#*:}
    local route=${rest%%:*} db=${rest#*:}
    local s=(); [ "$front" = stoa ] && s+=(stoa) || s+=(apache2)
    case $route in
        servlet) s+=(tomcat) ;;
        php) [ "$front" = stoa ] && s+=(php-fpm) ;;
        fcgi-perl) [ "$front" = apache ] && s+=(fcgi-perl) ;;
        fcgi-rust) [ "$front" = apache ] && s+=(fcgi-rust) ;;
    esac
    [ "$db" = pg ] && s+=(postgres)
    echo "${s[@]}"
}
# sample_row ROW FILE: until killed, every 0.5 s the row's servers' RSS
# (kB, summed) and its database connections (PostgreSQL: connections the
# row's processes hold, lab/src/dynamic/pgconns.py; SQLite: open
# descriptors of the file), one line each.
sample_row() {
    # Runs in the background while processes come and go (CGI programs,
    # prefork children): a process gone between listing and reading is no
    # error here (set -e would end the sampler, and the caller's kill).
    set +e +o pipefail
    local row=$1 f=$2 n p rss conns pids
    while :; do
        rss=0; conns=0; pids=()
        for n in $(row_servers "$row"); do
            [ "$n" = postgres ] && continue
            rss=$(( rss + $(srv_rss_kb "$n") ))
            pids+=($(srv_pids "$n"))
            if [[ $row != *:pg ]]; then
                for p in $(srv_pids "$n"); do
                    conns=$(( conns + $( (find "/proc/$p/fd" -lname "$SQLITE" 2>/dev/null || true) | wc -l) ))
                done
            fi
        done
        if [[ $row == *:pg ]]; then
            # Not the database's backends: Tomcat's pool and php-fpm's
            # children keep theirs while the later rows run.
            conns=$(python3 "$LAB_DIR/src/dynamic/pgconns.py" "$PGHOST/.s.PGSQL.$P_PG" "$P_PG" "${pids[@]}" 2>/dev/null || echo 0)
        fi
        echo "$rss $conns" >> "$f"
        sleep 0.5
    done
}

# b1_probe ROW THINK N TAG: N clients for B1_PROBE (at least THINK + 3 s,
# so that every client has sent and a request slower than 3 s shows),
# thinking 1..THINK s; 0 when no response took over 3 s and none failed
# or had a status other than 2xx.
b1_probe() {
    local row=$1 think=$2 n=$3 tag=$4 secs
    secs=$(awk -v p="$(dur_ms "$B1_PROBE")" -v t="$think" 'BEGIN {s = p / 1000; if (s < t + 3) s = t + 3; printf "%.1fs", s}')
    cat > "$RUN/sc.toml" <<TOML
[run]
name = "$tag"
url = "$(url_of "$row" t=b1)"
seed = 1
keep_alive = false
timeout = "10s"
duration = "$secs"
[clients]
start = $n
first_delay = ["0s", "${think}s"]
[think]
distribution = "uniform"
min = "1s"
max = "${think}s"
[abort]
latency_over = "3s"
errors_over = 0
TOML
    bench "$tag" "$RUN/sc.toml"
    "$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(1 if d.get("abort") or not d.get("successful") or d.get("failed") or d.get("non_2xx") else 0)' \
        "$OUT/raw/$tag.json" 2>/dev/null
}
# b1_knee ROW TAG THINK [SUFFIX SEED]: the largest N of clients served
# without a response over 3 s and without a failed or non-2xx one (a front
# end whose queue is bounded answers 503 at once instead of late: a client
# not served all the same), the front end restarted before each probe;
# TAG-b1-thinkT[SUFFIX]-knee.json lists the probes. Without a SEED, B1_CAP
# is probed first, then N steps down by 4x until one is served, then the
# bracket is bisected on a log scale to within B1_PRECISION. A later
# repeat starts from SEED, the knee the repeat before found, and steps by
# B1_PRECISION up (while served, to the cap) or down (while not): two or
# three probes instead of five or six, to the same precision.
b1_knee() {
    local row=$1 tag=$2 think=$3 rs=${4:-} seed=${5:-} lo=0 hi="" n probes="" base step
    base=$tag-b1-think$think$rs
    b1_try() {
        [ -z "$probes" ] || [ "$RESTART" != every ] || restart_front "$row"
        if b1_probe "$row" "$think" "$1" "$base-n$1"; then lo=$1; probes+="${probes:+ }$1:1"
        else hi=$1; probes+="${probes:+ }$1:0"; fi
    }
    if [ -n "$seed" ] && [ "$seed" -ge 1 ] && [ "$seed" -lt "$B1_CAP" ]; then
        b1_try "$seed"; step=$B1_PRECISION
    else
        b1_try "$B1_CAP"; step=4
    fi
    while :; do
        if [ -z "$hi" ]; then  # every probe served: up, to the cap
            [ "$lo" -ge "$B1_CAP" ] && break
            n=$(awk -v a="$lo" -v s="$step" -v c="$B1_CAP" 'BEGIN {n = int(a * s); if (n <= a) n = a + 1; if (n > c) n = c; print n}')
        elif [ "$lo" = 0 ]; then  # none served: down
            [ "$hi" -le 1 ] && break
            n=$(awk -v b="$hi" -v s="$step" 'BEGIN {n = b / s; if (n > int(n)) n = int(n) + 1; if (n >= b) n = b - 1; if (n < 1) n = 1; print n}')
        else
            awk -v a="$lo" -v b="$hi" -v p="$B1_PRECISION" 'BEGIN {exit !(b / a <= p)}' && break
            n=$(awk -v a="$lo" -v b="$hi" 'BEGIN {printf "%d", sqrt(a * b) + 0.5}')
            { [ "$n" -le "$lo" ] || [ "$n" -ge "$hi" ]; } && break
        fi
        b1_try "$n"
    done
    "$PYTHON" - "$OUT/raw" "$base" "$lo" "${hi:-}" "$B1_CAP" $probes <<'PY'
import json, os, sys
raw, base, lo, hi, cap = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
probes = []
for p in sys.argv[6:]:
    n, ok = p.split(":")
    try:
        d = json.load(open(os.path.join(raw, "%s-n%s.json" % (base, n))))
    except (OSError, ValueError):
        d = {}
    probes.append({"clients": int(n), "served": ok == "1", "requests_per_second": d.get("requests_per_second"),
                   "kb_per_s": d["bytes"]["received"] / max(d["duration_s"], 1e-9) / 1024 if d.get("bytes") else None,
                   "p99_ms": (d.get("latency_ms") or {}).get("p99"), "abort": d.get("abort"),
                   "failed": d.get("failed"), "non_2xx": d.get("non_2xx")})
served = [p for p in probes if p["served"]]
best = max(served, key=lambda p: p["clients"]) if served else None
json.dump({"knee": lo, "capped": lo >= cap, "failed_at": int(hi) if hi else None,
           "kb_per_s_at_knee": best["kb_per_s"] if best else None,
           "requests_per_second_at_knee": best["requests_per_second"] if best else None,
           "probes": probes}, open(os.path.join(raw, base + "-knee.json"), "w"), indent=1)
PY
}

# b2_run ROW TAG SUFFIX: BENCH2, a client more every B2_STEP (paper: 10 s)
# up to 20, back to back: the levels table. The paper's 3 warm-up runs:
# B2_WARMUPS runs of the same ramp at a fifth of the step, not counted. The
# row's servers' CPU time over the measured run, and their memory and
# database connections sampled every 0.5 s.
b2_run() {
    local row=$1 tag=$2 rs=$3 i
    restart_front "$row"
    local b2dur
    b2dur=$(awk -v e="$(dur_ms "$B2_STEP")" -v m="$B2_MAX" 'BEGIN {printf "%.1fs", e * m / 1000}')
    b2sc() {  # b2sc NAME STEP DURATION
        cat > "$RUN/sc.toml" <<TOML
[run]
name = "$1"
url = "$(url_of "$row" t=b2)"
keep_alive = false
timeout = "30s"
duration = "$3"
[clients]
start = 1
add = 1
every = "$2"
max = $B2_MAX
TOML
    }
    for i in $(seq "$B2_WARMUPS"); do
        b2sc "$tag-b2-warmup$i$rs" "$(awk -v e="$(dur_ms "$B2_STEP")" 'BEGIN {printf "%dms", e / 5}')" \
            "$(awk -v e="$(dur_ms "$B2_STEP")" -v m="$B2_MAX" 'BEGIN {printf "%.1fs", e * m / 5000}')"
        bench "$tag-b2-warmup$i$rs" "$RUN/sc.toml"
    done
    b2sc "$tag-b2$rs" "$B2_STEP" "$b2dur"
    local srvs sp n cpu=0
    srvs=$(row_servers "$row")
    : > "$RUN/sample.txt"
    sample_row "$row" "$RUN/sample.txt" &
    sp=$!
    # beside the load generator, off the servers' CPUs
    taskset -pc "$LOAD_CPUS" "$sp" > /dev/null 2>&1 || true
    bench "$tag-b2$rs" "$RUN/sc.toml"
    # the row's servers' share of what lab_measure took for every server
    for n in $srvs; do cpu=$(awk -v a="$cpu" -v b="${M_SRV_CPU_S[$n]:-0}" 'BEGIN {print a + b}'); done
    kill "$sp" 2>/dev/null || true; wait "$sp" 2>/dev/null || true
    "$PYTHON" - "$OUT/raw/$tag-b2$rs.json" "$RUN/sample.txt" "$cpu" "$srvs" \
        > "$OUT/raw/$tag-b2$rs-resources.json" <<'PY' || warn "no resources for $row"
import json, sys
d = json.load(open(sys.argv[1]))
cpu_s, srvs = float(sys.argv[3]), sys.argv[4].split()
s = [tuple(int(x) for x in l.split()) for l in open(sys.argv[2]) if len(l.split()) == 2]
n = d.get("responses") or 0
json.dump({"servers": srvs, "cpu_s": cpu_s, "responses": n,
           "cpu_ms_per_request": cpu_s * 1000 / n if n else None,
           "rss_kb_max": max((a for a, _ in s), default=None),
           "db_connections_max": max((b for _, b in s), default=None), "samples": len(s)}, sys.stdout)
PY
}

run_row() {
    local row=$1 tag=${1//:/-} t think r load0 i
    load0=$(cut -d' ' -f1 /proc/loadavg)
    ROW_WHEN[$row]="$(date -u +%H:%M) UTC, load $load0"
    local warm=$tag-warmup rep rs seed b
    if [ "$REPEAT_FROM" = 1 ] && [ "$ALL_BENCHES" = 1 ]; then
        rm -f "$OUT/raw/$tag"-*
    elif [ "$REPEAT_FROM" = 1 ]; then
        # only the benchmarks that run again (BENCH2's warm-ups included;
        # BENCH1's think times in B1_THINKS)
        for b in $BENCHES; do
            if [ "$b" = 1 ]; then
                for t in $B1_THINKS; do rm -f "$OUT/raw/$tag"-b1-think"$t"-* "$OUT/raw/$tag"-b1-think"$t".*; done
            else
                rm -f "$OUT/raw/$tag"-b"$b"*
            fi
        done
    else
        warm+=-r$REPEAT_FROM
        for rep in $(seq "$REPEAT_FROM" "$REPEATS"); do
            for b in $BENCHES; do
                if [ "$b" = 1 ]; then
                    for t in $B1_THINKS; do
                        rm -f "$OUT/raw/$tag"-b1-think"$t"-r"$rep".* "$OUT/raw/$tag"-b1-think"$t"-r"$rep"-*
                    done
                elif [ "$b" != 4 ]; then
                    rm -f "$OUT/raw/$tag"-b"$b"*-r"$rep".* "$OUT/raw/$tag"-b"$b"*-r"$rep"-*
                fi
            done
        done
    fi
    local full=1; [[ $row =~ $FULL_ROWS ]] || full=0
    # Warm-up (the paper ran BENCH2 three times before the measured run):
    # Tomcat's JIT, Apache's prefork children compiling mod_perl's script.
    on_load_cpus "$STOA" bench -q -n "$WARM" -c 10 "$(url_of "$row" t=b3)" > "$OUT/raw/$warm.txt" 2>&1 ||
        warn "warm-up of $row exited $?"
    for rep in $(seq "$REPEAT_FROM" "$REPEATS"); do
        [ "$full" = 1 ] || break
        rs=""; [ "$rep" = 1 ] || rs=-r$rep
        REP=$rep
        [ "$REPEATS" = 1 ] || log "$row: repeat $rep of $REPEATS"
        for think in $B1_THINKS; do
            [[ $row =~ $B1_ROWS ]] && has_bench 1 || break
            [ "$RESTART" = every ] && restart_front "$row"
            if [ "$B1_MODE" = knee ]; then
                seed=""
                [ "$rep" = 1 ] || seed=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["knee"])' \
                    "$OUT/raw/$tag-b1-think$think$([ "$rep" = 2 ] || echo "-r$((rep - 1))")-knee.json" 2>/dev/null) || seed=""
                b1_knee "$row" "$tag" "$think" "$rs" "$seed"
                continue
            fi
            # The ramp: a client every B1_EVERY (paper: 2 s) up to B1_MAX,
            # think uniform 1..T s, abort when a response takes over 3 s;
            # each client also thinks before its first request.
            cat > "$RUN/sc.toml" <<TOML
[run]
name = "$tag-b1-think$think$rs"
url = "$(url_of "$row" t=b1)"
seed = 1
keep_alive = false
timeout = "10s"
duration = "$(awk -v e="$(dur_ms "$B1_EVERY")" -v m="$B1_MAX" -v t="$B1_TAIL" 'BEGIN {printf "%.1fs", e * m / 1000 + t}')"
[clients]
start = 1
add = 1
every = "$B1_EVERY"
max = $B1_MAX
first_delay = ["$B1_FIRST_MIN", "${think}s"]
[think]
distribution = "uniform"
min = "1s"
max = "${think}s"
[abort]
latency_over = "3s"
TOML
            bench "$tag-b1-think$think$rs" "$RUN/sc.toml"
        done
        [ "$rep" -gt "$B2_REPEATS" ] || ! has_bench 2 || b2_run "$row" "$tag" "$rs"
        # BENCH3: R single requests per second, each on its own connection,
        # R x B3_DUR of them: the run lasts until the last one ended (the
        # paper: "we only managed to increase the test time"), so a slow
        # route shows as a longer test, and a request over 30 s as an error.
        for r in $B3_RATES; do
            has_bench 3 || break
            [ "$RESTART" = every ] && restart_front "$row"
            cat > "$RUN/sc.toml" <<TOML
[run]
name = "$tag-b3-rate$r$rs"
url = "$(url_of "$row" t=b3)"
keep_alive = false
timeout = "30s"
rate = $r
connections = 1024
requests = $(( r * B3_DUR ))
TOML
            bench "$tag-b3-rate$r$rs" "$RUN/sc.toml"
        done
        [ "$RESTART" = every ] && restart_front "$row"
    done
    # BENCH4: B4_N clients, one every B4_EVERY (paper: 100 over 10 s),
    # each waiting 200 ms and making one request; running mean and
    # deviation after every response. B4_REPEATS runs (ROW-b4, then
    # ROW-b4-rN), the front end restarted between them with RESTART=every.
    local b4tag
    for i in $(seq "$B4_REPEATS"); do
        [ "$REPEAT_FROM" = 1 ] && has_bench 4 || break
        b4tag=$tag-b4; [ "$i" = 1 ] || b4tag=$tag-b4-r$i
        REP=$i
        [ "$i" = 1 ] || [ "$RESTART" != every ] || restart_front "$row"
        cat > "$RUN/sc.toml" <<TOML
[run]
name = "$b4tag"
url = "$(url_of "$row" t=b3)"
keep_alive = false
timeout = "30s"
running_every = 1
[clients]
start = 1
add = 1
every = "$B4_EVERY"
max = $B4_N
requests = 1
first_delay = "200ms"
TOML
        bench "$b4tag" "$RUN/sc.toml"
    done
    ROW_WHEN[$row]+=" to $(cut -d' ' -f1 /proc/loadavg)"
}
dur_ms() { case $1 in *ms) echo "${1%ms}" ;; *s) awk -v s="${1%s}" 'BEGIN {print s * 1000}' ;; *) awk -v s="$1" 'BEGIN {print s * 1000}' ;; esac; }

do_rows() {  # do_rows FRONT ROUTE...: check and run each route on each database
    local front=$1 route db row; shift
    for route; do
        for db in sqlite pg; do
            row=$front:$route:$db
            [[ $row =~ $ROWS ]] || continue
            ROW_LIST+=("$row")
            if [ "$db" = pg ] && [ "$PG" != 1 ]; then ROW_STATUS[$row]="skipped (PG=0)"; continue; fi
            if check_row "$row"; then
                log "$row: ok, running"
                run_row "$row"
            else
                warn "$row: ${ROW_STATUS[$row]}"
            fi
        done
    done
}

wait_http tomcat "http://127.0.0.1:$P_TOMCAT/tomcat/comments?t=b3" 90
log "all back ends up; Stoa rows"
do_rows stoa cgi fcgi-perl fcgi-rust php servlet lua
srv_stop stoa
for f in cgi fcgi php perl proxy; do
    case $f in
        cgi) routes=(cgi) ;; fcgi) routes=(fcgi-perl fcgi-rust) ;; php) routes=(php) ;;
        perl) routes=(mod_perl) ;; proxy) routes=(servlet) ;;
    esac
    want=0
    for r in "${routes[@]}"; do [[ apache:$r:sqlite =~ $ROWS || apache:$r:pg =~ $ROWS ]] && want=1; done
    [ $want = 1 ] || continue
    log "Apache ($f)"
    apache_up "$f"
    do_rows apache "${routes[@]}"
    srv_stop apache2
done
pg_stop
srv_stop_all
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- reports
# rows.tsv: row, tag, route, front end, status, when (time and 1-min load
# average at the row's start and end). Kept in OUT, so that a MERGE run
# replaces only its own rows; runs.tsv lists the runs that made them.
rows_file=$OUT/rows.tsv
declare -A OLD_ROW=()
if [ "$MERGE" = 1 ] && [ -f "$rows_file" ]; then
    while IFS= read -r line; do OLD_ROW[${line%%$'\t'*}]=$line; done < "$rows_file"
fi
declare -A RAN=()
for row in "${ROW_LIST[@]}"; do RAN[$row]=1; done
tmp_rows=$RUN/rows.tsv
: > "$tmp_rows"
for row in "${ALL_ROWS[@]}"; do
    front=${row%%:*} rest=${row#*:}; route=${rest%%:*}
    if [ -z "${RAN[$row]:-}" ] && [ -n "${OLD_ROW[$row]:-}" ]; then
        echo "${OLD_ROW[$row]}" >> "$tmp_rows"; continue
    fi
    [ -n "${RAN[$row]:-}" ] || continue
    when=${ROW_WHEN[$row]:-}
    # Added repeats or benchmarks run again: the row's first run keeps its
    # time beside theirs.
    { [ "$REPEAT_FROM" = 1 ] && [ "$ALL_BENCHES" = 1 ]; } || [ -z "${OLD_ROW[$row]:-}" ] ||
        when="$(cut -f6 <<< "${OLD_ROW[$row]}"); repeats $REPEAT_FROM-$REPEATS$BENCH_NOTE at $when"
    how=${FRONT_HOW[$front:$route]:-}
    [ "$front" = stoa ] && how+=", $STOA_W worker$([ "$STOA_W" = 1 ] || echo s)"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$row" "${row//:/-}" "${ROUTE_LABEL[$route]}" "$how" \
        "${ROW_STATUS[$row]:-not run}" "$when" >> "$tmp_rows"
done
mv "$tmp_rows" "$rows_file"
runs_file=$OUT/runs.tsv
[ "$MERGE" = 1 ] || : > "$runs_file"
printf '%s\t%s\t%s\t%s\t%s\n' "$(date -u -d "@$RUN_T0" '+%Y-%m-%d %H:%M')-$(date -u +%H:%M) UTC" \
    "$(env_prefix)lab/run dynamic-routes$([ "$QUICK" = 1 ] && echo ' --quick')" "$LOAD_START" "$LOAD_END" \
    "$([ "$ROWS" = . ] && echo 'every row' || echo "rows matching $ROWS")" >> "$runs_file"
# Charts of the bench report's machinery: every row's BENCH2 and BENCH4 on
# the same plots.
for b in b2 b4; do
    files=("$OUT"/raw/*-sqlite-$b.json)
    [ -e "${files[0]}" ] && "$STOA" bench compare "${files[@]}" --html "$OUT/compare-sqlite-$b.html" > "$OUT/raw/compare-sqlite-$b.txt" 2>&1 || true
    files=("$OUT"/raw/*-pg-$b.json)
    [ -e "${files[0]}" ] && "$STOA" bench compare "${files[@]}" --html "$OUT/compare-pg-$b.html" > "$OUT/raw/compare-pg-$b.txt" 2>&1 || true
done
"$PYTHON" "$SRC/summary.py" "$OUT" "$rows_file" "$QUICK" "$(machine)" "$runs_file" \
    "BENCHES='$BENCHES' REPEATS=$REPEATS B2_REPEATS=$B2_REPEATS B1_MODE=$B1_MODE B1_CAP=$B1_CAP B1_PROBE=$B1_PROBE B1_PRECISION=$B1_PRECISION B1_EVERY=$B1_EVERY B1_MAX=$B1_MAX B1_THINKS='$B1_THINKS' B1_TAIL=${B1_TAIL}s B1_FIRST_MIN=$B1_FIRST_MIN B2_STEP=$B2_STEP B2_MAX=$B2_MAX B2_WARMUPS=$B2_WARMUPS B3_RATES='$B3_RATES' B3_DUR=${B3_DUR}s B4_N=$B4_N B4_EVERY=$B4_EVERY B4_REPEATS=$B4_REPEATS WARM=$WARM RESTART=$RESTART FULL_ROWS='$FULL_ROWS' B1_ROWS='$B1_ROWS' SERVER_CPUS=$SERVER_CPUS LOAD_CPUS=$LOAD_CPUS" \
    > "$RUN/summary.body" || die "summary.py failed"
"$PYTHON" "$SRC/dynamic-verdicts.py" "$OUT" "$rows_file" "$QUICK" || die "dynamic-verdicts.py failed"
{ lab_summary_head; echo; cat "$RUN/summary.body"; } > "$OUT/summary.md"
log "wrote $OUT/summary.md"
cat "$OUT/summary.md"
bad=$(awk -F'\t' '$5 != "ok" && $5 !~ /^(pending|not built|skipped)/' "$rows_file")
[ -z "$bad" ] || die "rows that failed their check: $(echo "$bad" | cut -f1 | tr '\n' ' ')"
