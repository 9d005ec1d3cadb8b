#!/usr/bin/env bash
# bench/dynamic.sh - one "hello" page from every route Stoa has, side by side in one run (issue 13):
#   static    the page as a file
#   ssi       an .shtml page: its first half as text, the second half by <!--#include virtual -->
#   lua       a Lua handler returning the page (read once per worker at load)
#   fastcgi   bench/src/hello.c built against libfcgi, a [[pool]] of 2 processes started by Stoa
#   cgi       bench/src/hello.c as a CGI program
#   nginx-lua the Lua handler under nginx's Lua module (Debian libnginx-mod-http-lua), when it installs
#   luareq    a Lua handler that reads its request: req.args (the query, decoded), req.headers (every
#             field), req.method, and a counter kept in the interpreter; text/plain
#             "hello NAME METHOD USER-AGENT HITS"
#   nginx-luareq  the same logic in nginx's content_by_lua_block: ngx.req.get_uri_args(),
#             ngx.req.get_headers(), ngx.req.get_method(), a global counter
#   nginx-luavar  the same page from nginx's cheapest accessors: ngx.var.arg_name (not decoded),
#             ngx.var.http_user_agent, ngx.req.get_method()
# The three request-reading cases send a browser-like set of header fields (REQ_HEADERS) and
# ?name=stoa; their page carries a count, so they are checked against a pattern, not a file.
# Every route must answer 200 with the byte-identical page first. Then `wrk -t1 -c$CONC -d$DUR --latency`
# per route; prints a Markdown table: requests/s, p99, and server CPU per request (utime+stime of the
# server's processes and cutime+cstime of the children it reaped, /proc/PID/stat fields 14-17, after
# minus before, over the requests wrk completed; for nginx its master and workers), then that CPU
# split into user and system (kernel) time.
#
# Usage: bench/dynamic.sh     (as root installs wrk / libfcgi-dev / nginx's Lua module when missing)
# Knobs: DUR=5s CONC=16 WORKERS=1 RUN=/tmp/stoa-bench-dynamic STOA=target/release/stoa
#        CASES="static ssi lua fastcgi cgi nginx-lua luareq nginx-luareq nginx-luavar"
# Ports: stoa $PORT (18260), nginx $NGINX_PORT (18261). Everything is started here on loopback and stopped by PID at exit.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

cd "$(dirname "$0")/.."
REPO=$PWD
RUN=${RUN:-/tmp/stoa-bench-dynamic}
DUR=${DUR:-5s} CONC=${CONC:-16} WORKERS=${WORKERS:-1}
CASES=${CASES:-static ssi lua fastcgi cgi nginx-lua luareq nginx-luareq nginx-luavar}
STOA=${STOA:-$REPO/target/release/stoa}
PORT=${PORT:-18260} NGINX_PORT=${NGINX_PORT:-18261}
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

need() {  # need CMD PACKAGE
    command -v "$1" >/dev/null 2>&1 && return 0
    [ "$(id -u)" = 0 ] || { echo "missing $1 (apt-get install $2)" >&2; exit 2; }
    apt-get install -y -qq "$2" >/dev/null
}
need wrk wrk
need cc gcc
[ -f /usr/include/fcgi_stdio.h ] || need /nonexistent libfcgi-dev
[ -x "$STOA" ] || cargo build --release -p stoa

rm -rf "$RUN"; mkdir -p "$RUN/www/cgi-bin" "$RUN/raw"
cc -O2 -o "$RUN/www/cgi-bin/hello" bench/src/hello.c
cc -O2 -DFCGI -o "$RUN/hello_fcgi" bench/src/hello.c -lfcgi
# The page every route returns: the CGI program's output for q=hello, less its head.
QUERY_STRING=q=hello "$RUN/www/cgi-bin/hello" | sed '1,/^\r\{0,1\}$/d' > "$RUN/expected.html"
cp "$RUN/expected.html" "$RUN/www/hello.html"
half=$(( $(wc -c < "$RUN/expected.html") / 2 ))
head -c "$half" "$RUN/expected.html" > "$RUN/www/hello.shtml"
tail -c +"$((half + 1))" "$RUN/expected.html" > "$RUN/www/part2.html"
printf '<!--#include virtual="/part2.html" -->' >> "$RUN/www/hello.shtml"
cat > "$RUN/hello.lua" <<EOF
local f = assert(io.open("$RUN/expected.html", "rb"))
local page = f:read("a")
f:close()
return function(req)
  return 200, { ["content-type"] = "text/html" }, page
end
EOF
cat > "$RUN/req.lua" <<'EOF'
local hits = 0
return function(req)
  hits = hits + 1
  local h = req.headers
  return 200, { ["content-type"] = "text/plain" },
    "hello " .. (req.args.name or "") .. " " .. req.method .. " " .. (h["user-agent"] or "") .. " " .. hits
end
EOF
# Header fields of a browser's request (the request-reading cases): wrk and curl send these.
REQ_HEADERS=(-H "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
    -H "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    -H "Accept-Language: en-US,en;q=0.5" -H "Accept-Encoding: gzip, deflate, br"
    -H "Cookie: session=3f9a1c2b7d; theme=dark" -H "Upgrade-Insecure-Requests: 1")
REQ_PAGE='^hello stoa GET Mozilla/5\.0 \(X11; Linux x86_64; rv:128\.0\) Gecko/20100101 Firefox/128\.0 [0-9]+$'

cat > "$RUN/stoa.toml" <<EOF
listen = ["127.0.0.1:$PORT"]
workers = $WORKERS
user = "root"
[log]
access = "off"
[[pool]]
name = "hello"
command = ["$RUN/hello_fcgi"]
processes = 2
[[site]]
root = "$RUN/www"
[[site.route]]
suffix = ".shtml"
ssi = {}
[[site.route]]
prefix = "/lua/"
lua = { script = "$RUN/hello.lua" }
[[site.route]]
prefix = "/luareq/"
lua = { script = "$RUN/req.lua" }
[[site.route]]
prefix = "/fcgi/"
fastcgi = { pool = "hello" }
[[site.route]]
prefix = "/cgi-bin/"
cgi = { dir = "$RUN/www/cgi-bin" }
EOF
"$STOA" serve --config "$RUN/stoa.toml" 2> "$RUN/stoa.log" &
STOA_PID=$!; PIDS+=("$STOA_PID")

NGINX_PID=
if [[ " $CASES " == *" nginx-lua"* ]]; then
    if [ ! -f /usr/share/nginx/modules-available/mod-http-lua.conf ] && [ "$(id -u)" = 0 ]; then
        apt-get install -y -qq libnginx-mod-http-lua >/dev/null 2>&1 || true
    fi
    mod=$(ls /usr/lib/nginx/modules/ngx_http_lua_module.so 2>/dev/null || true)
    ndk=$(ls /usr/lib/nginx/modules/ndk_http_module.so 2>/dev/null || true)
    if [ -n "$mod" ] && command -v nginx >/dev/null; then
        cat > "$RUN/nginx.conf" <<EOF
${ndk:+load_module $ndk;}
load_module $mod;
worker_processes $WORKERS;
pid $RUN/nginx.pid;
error_log $RUN/nginx-error.log;
daemon off;
events { worker_connections 1024; }
http {
  access_log off;
  lua_package_path "$RUN/?.lua;;";
  init_by_lua_block { local f = io.open("$RUN/expected.html", "rb"); page = f:read("a"); f:close(); hits = 0 }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    location /lua/ { default_type text/html; content_by_lua_block { ngx.print(page) } }
    location /luareq/ {
      default_type text/plain;
      content_by_lua_block {
        hits = hits + 1
        local h = ngx.req.get_headers()
        ngx.print("hello " .. (ngx.req.get_uri_args().name or "") .. " " .. ngx.req.get_method() .. " " .. (h["user-agent"] or "") .. " " .. hits)
      }
    }
    location /luavar/ {
      default_type text/plain;
      content_by_lua_block {
        hits = hits + 1
        ngx.print("hello " .. (ngx.var.arg_name or "") .. " " .. ngx.req.get_method() .. " " .. (ngx.var.http_user_agent or "") .. " " .. hits)
      }
    }
  }
}
EOF
        nginx -c "$RUN/nginx.conf" -p "$RUN" 2> "$RUN/nginx.log" &
        NGINX_PID=$!; PIDS+=("$NGINX_PID")
    else
        echo "nginx-lua: the Debian package libnginx-mod-http-lua is not installed: skipped" >&2
        CASES=$(echo " $CASES " | sed 's/ nginx-lua[a-z]* / /g; s/ nginx-lua[a-z]* / /g')
    fi
fi
sleep 1

url_of() {
    case $1 in
        static) echo "http://127.0.0.1:$PORT/hello.html" ;;
        ssi) echo "http://127.0.0.1:$PORT/hello.shtml" ;;
        lua) echo "http://127.0.0.1:$PORT/lua/hello" ;;
        fastcgi) echo "http://127.0.0.1:$PORT/fcgi/hello?q=hello" ;;
        cgi) echo "http://127.0.0.1:$PORT/cgi-bin/hello?q=hello" ;;
        nginx-lua) echo "http://127.0.0.1:$NGINX_PORT/lua/hello" ;;
        luareq) echo "http://127.0.0.1:$PORT/luareq/hello?name=stoa" ;;
        nginx-luareq) echo "http://127.0.0.1:$NGINX_PORT/luareq/hello?name=stoa" ;;
        nginx-luavar) echo "http://127.0.0.1:$NGINX_PORT/luavar/hello?name=stoa" ;;
    esac
}
pids_of() {  # the server's processes: the main one and its descendants
    local root=$1
    echo "$root"
    for c in $(cat /proc/"$root"/task/*/children 2>/dev/null); do pids_of "$c"; done
}
ticks() {  # "USER SYSTEM": utime+cutime and stime+cstime of the server's processes
    local u=0 s=0
    for p in $(pids_of "$1"); do
        # Fields after the ")" of comm: 14-17 are the 12th-15th.
        set -- $(sed 's/.*) //' /proc/"$p"/stat 2>/dev/null || echo)
        [ $# -ge 15 ] && u=$((u + ${12} + ${14})) && s=$((s + ${13} + ${15}))
    done
    echo "$u $s"
}

HZ=$(getconf CLK_TCK)
echo "| route | requests/s | p99 | server CPU µs/request | of it user | of it system |"
echo "|---|---|---|---|---|---|"
for c in $CASES; do
    url=$(url_of "$c")
    pid=$STOA_PID; [[ $c == nginx-* ]] && pid=$NGINX_PID
    hdrs=(); [[ $c == *luareq || $c == *luavar ]] && hdrs=("${REQ_HEADERS[@]}")
    for _ in $(seq 50); do curl -fsS -o /dev/null "$url" 2>/dev/null && break; sleep 0.1; done
    if [ ${#hdrs[@]} -gt 0 ]; then
        if ! curl -fsS "${hdrs[@]}" "$url" | grep -Eq "$REQ_PAGE"; then
            echo "| $c | FAILED: not the expected page | | | | |"
            continue
        fi
    elif ! curl -fsS "$url" | cmp -s - "$RUN/expected.html"; then
        echo "| $c | FAILED: not the expected page | | | | |"
        continue
    fi
    wrk -t1 -c"$CONC" -d1s "${hdrs[@]}" "$url" > /dev/null  # warm-up
    read -r ub sb < <(ticks "$pid")
    wrk -t1 -c"$CONC" -d"$DUR" --latency "${hdrs[@]}" "$url" > "$RUN/raw/$c.txt"
    read -r ua sa < <(ticks "$pid")
    rps=$(awk '/^Requests\/sec/ {print $2}' "$RUN/raw/$c.txt")
    p99=$(awk '$1 == "99%" {print $2}' "$RUN/raw/$c.txt")
    n=$(awk '/requests in/ {print $1}' "$RUN/raw/$c.txt")
    us() { awk -v t="$1" -v hz="$HZ" -v n="$n" 'BEGIN { printf "%.1f", n ? t / hz * 1e6 / n : 0 }'; }
    echo "| $c | $rps | $p99 | $(us $((ua - ub + sa - sb))) | $(us $((ua - ub))) | $(us $((sa - sb))) |"
done
