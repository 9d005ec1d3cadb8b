#!/bin/sh
# A private Tomcat 10 instance on a loopback port, for the proxy's tests and
# benchmark (issue 12): Debian's tomcat10 as the binaries (CATALINA_HOME),
# a user-level CATALINA_BASE of our own, and a small servlet app:
#   POST /comments   the seeds' Figure 2: a form (name, email, comments)
#                    stored in SQLite through JDBC; answers "All done ok"
#   GET  /comments   the stored comments as HTML
#   GET  /counter    a session counter (HttpSession: JSESSIONID cookie, with
#                    ".NAME" appended as the jvmRoute, so a test can tell
#                    which instance owns a session)
#   GET  /health     "ok NAME"        GET /headers  the request as received
# Every response carries X-Instance: NAME.
#
# Usage (as any user; nothing outside BASE is written):
#   tomcat.sh setup BASE PORT [NAME]  create BASE (server.xml with one HTTP
#                                     connector on 127.0.0.1:PORT and no
#                                     shutdown port), compile and deploy
#   tomcat.sh run BASE                catalina.sh run in the foreground: the
#                                     script execs into the JVM, so the
#                                     caller's child PID is Tomcat's;
#                                     SIGTERM stops it cleanly
#   tomcat.sh start BASE PORT [NAME]  setup, run in the background (log in
#                                     BASE/logs/console.log, PID in
#                                     BASE/tomcat.pid), wait until /health
#                                     answers; prints the PID and start time
#   tomcat.sh wait PORT [SECONDS]     wait for /health (default 60 s)
#   tomcat.sh stop BASE               SIGTERM the PID in BASE/tomcat.pid
#                                     and wait for it to exit
# Environment: TOMCAT_KEEPALIVE_MS (the connector's keepAliveTimeout,
# default 20000), TOMCAT_DB (SQLite file; default BASE/comments.db: give
# two instances the same file to share the comments).
# Debian packages: tomcat10 (tomcat10-common, libtomcat10-java),
# libxerial-sqlite-jdbc-java, a JDK for javac (default-jdk-headless), curl.
#
# Example:
#   tests/proxy-peers/tomcat/tomcat.sh start /tmp/tc1 18081 tc1
#   curl -d 'name=a&email=b&comments=hello' http://127.0.0.1:18081/comments
#   curl -i http://127.0.0.1:18081/counter
#   tests/proxy-peers/tomcat/tomcat.sh stop /tmp/tc1
set -eu

HOME_DIR=${CATALINA_HOME:-/usr/share/tomcat10}
SERVLET_API=/usr/share/java/tomcat10-servlet-api.jar
SQLITE_JAR=/usr/share/java/sqlite-jdbc.jar
HERE=$(cd "$(dirname "$0")" && pwd)

die() { echo "tomcat.sh: $*" >&2; exit 1; }

setup() {
    base=$1 port=$2 name=${3:-tomcat}
    [ -x "$HOME_DIR/bin/catalina.sh" ] || die "no $HOME_DIR/bin/catalina.sh (apt-get install tomcat10)"
    [ -r "$SERVLET_API" ] || die "no $SERVLET_API (apt-get install libtomcat10-java)"
    [ -r "$SQLITE_JAR" ] || die "no $SQLITE_JAR (apt-get install libxerial-sqlite-jdbc-java)"
    command -v javac >/dev/null || die "no javac (apt-get install default-jdk-headless)"
    mkdir -p "$base/conf" "$base/logs" "$base/temp" "$base/work" \
        "$base/webapps/ROOT/WEB-INF/classes" "$base/webapps/ROOT/WEB-INF/lib"
    # Only what a proxy test needs: no shutdown port (the caller owns the
    # PID and stops it with a signal), no AJP, no lifecycle listeners, no
    # auto-deploy scanner. keepAliveTimeout is Tomcat's idle close: the
    # keep-alive race against Stoa's stash.
    cat > "$base/conf/server.xml" <<XML
<?xml version="1.0" encoding="UTF-8"?>
<Server port="-1" shutdown="SHUTDOWN">
  <Service name="Catalina">
    <Connector address="127.0.0.1" port="$port" protocol="HTTP/1.1"
               connectionTimeout="20000" keepAliveTimeout="${TOMCAT_KEEPALIVE_MS:-20000}"
               maxKeepAliveRequests="-1" />
    <Engine name="Catalina" defaultHost="localhost" jvmRoute="$name">
      <Host name="localhost" appBase="webapps" unpackWARs="false"
            autoDeploy="false" deployOnStartup="true" />
    </Engine>
  </Service>
</Server>
XML
    # Jar scanning for TLDs and fragments is most of a small app's start-up.
    cat > "$base/conf/catalina.properties" <<'PROPS'
common.loader="${catalina.base}/lib","${catalina.base}/lib/*.jar","${catalina.home}/lib","${catalina.home}/lib/*.jar"
tomcat.util.scan.StandardJarScanFilter.jarsToSkip=*
PROPS
    cat > "$base/conf/logging.properties" <<'PROPS'
handlers = java.util.logging.ConsoleHandler
.level = INFO
java.util.logging.ConsoleHandler.level = INFO
java.util.logging.ConsoleHandler.formatter = org.apache.juli.OneLineFormatter
PROPS
    # The global web.xml only declares the default and JSP servlets and
    # MIME types, none of which the app uses; an empty one keeps Tomcat
    # from warning.
    cat > "$base/conf/web.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<web-app xmlns="https://jakarta.ee/xml/ns/jakartaee" version="6.0" metadata-complete="true"/>
XML
    cat > "$base/webapps/ROOT/WEB-INF/web.xml" <<'XML'
<?xml version="1.0" encoding="UTF-8"?>
<web-app xmlns="https://jakarta.ee/xml/ns/jakartaee" version="6.0" metadata-complete="true">
  <servlet><servlet-name>comments</servlet-name><servlet-class>stoapeer.Comments</servlet-class>
    <load-on-startup>1</load-on-startup></servlet>
  <servlet><servlet-name>counter</servlet-name><servlet-class>stoapeer.Counter</servlet-class></servlet>
  <servlet><servlet-name>info</servlet-name><servlet-class>stoapeer.Info</servlet-class></servlet>
  <servlet-mapping><servlet-name>comments</servlet-name><url-pattern>/comments</url-pattern></servlet-mapping>
  <servlet-mapping><servlet-name>counter</servlet-name><url-pattern>/counter</url-pattern></servlet-mapping>
  <servlet-mapping><servlet-name>info</servlet-name><url-pattern>/health</url-pattern></servlet-mapping>
  <servlet-mapping><servlet-name>info</servlet-name><url-pattern>/headers</url-pattern></servlet-mapping>
</web-app>
XML
    javac -nowarn --release 17 -cp "$SERVLET_API" -d "$base/webapps/ROOT/WEB-INF/classes" \
        "$HERE"/src/stoapeer/*.java
    cp -L "$SQLITE_JAR" "$base/webapps/ROOT/WEB-INF/lib/sqlite-jdbc.jar"
    # Debian builds the SQLite JNI library outside the jar.
    jni=$(dirname "$(ls /usr/lib/*/jni/libsqlitejdbc.so 2>/dev/null | head -n1)")
    [ -n "$jni" ] && [ "$jni" != . ] || die "no libsqlitejdbc.so (apt-get install libxerial-sqlite-jdbc-jni)"
    # catalina.sh sources bin/setenv.sh from CATALINA_BASE. A small serial
    # heap: two instances share 2 cores with the proxy and the load.
    mkdir -p "$base/bin"
    cat > "$base/bin/setenv.sh" <<SH
JAVA_OPTS="-Xmx192m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.library.path=$jni -Dstoapeer.instance=$name${TOMCAT_DB:+ -Dstoapeer.db=$TOMCAT_DB}"
SH
}

run() {
    base=$(cd "$1" && pwd)
    [ -r "$base/conf/server.xml" ] || die "$base is not set up (tomcat.sh setup $1 PORT)"
    CATALINA_HOME=$HOME_DIR CATALINA_BASE=$base CATALINA_TMPDIR=$base/temp
    export CATALINA_HOME CATALINA_BASE CATALINA_TMPDIR
    cd "$base"
    exec "$HOME_DIR/bin/catalina.sh" run
}

wait_ready() {
    port=$1 limit=${2:-60}
    i=0
    while [ "$i" -lt $((limit * 10)) ]; do
        if curl -fsS -o /dev/null --max-time 1 "http://127.0.0.1:$port/health" 2>/dev/null; then
            return 0
        fi
        sleep 0.1
        i=$((i + 1))
    done
    die "nothing answered on 127.0.0.1:$port/health within $limit s"
}

case ${1:-} in
setup) [ $# -ge 3 ] || die "usage: tomcat.sh setup BASE PORT [NAME]"; setup "$2" "$3" "${4:-tomcat}" ;;
run) [ $# -ge 2 ] || die "usage: tomcat.sh run BASE"; run "$2" ;;
wait) [ $# -ge 2 ] || die "usage: tomcat.sh wait PORT [SECONDS]"; wait_ready "$2" "${3:-60}" ;;
start)
    [ $# -ge 3 ] || die "usage: tomcat.sh start BASE PORT [NAME]"
    setup "$2" "$3" "${4:-tomcat}"
    t0=$(date +%s%N)
    "$0" run "$2" > "$2/logs/console.log" 2>&1 &
    echo $! > "$2/tomcat.pid"
    wait_ready "$3" 60
    t1=$(date +%s%N)
    echo "tomcat $(cat "$2/tomcat.pid") ready on 127.0.0.1:$3 in $(( (t1 - t0) / 1000000 )) ms"
    ;;
stop)
    [ $# -ge 2 ] || die "usage: tomcat.sh stop BASE"
    pid=$(cat "$2/tomcat.pid")
    kill -TERM "$pid" 2>/dev/null || exit 0
    i=0
    while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; fi
    rm -f "$2/tomcat.pid"
    ;;
*) sed -n '2,/^set -eu/p' "$0" | sed '$d' >&2; exit 2 ;;
esac
