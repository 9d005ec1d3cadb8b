#!/bin/bash
# bench/lua-ir.sh - instructions per Lua request (callgrind), exact on a busy machine: `stoa serve` (one
# worker, access log off) with bench/dynamic.sh's `luareq` handler (req.args, req.headers, req.method, a
# counter; the same script), under `valgrind --tool=callgrind`, loaded by `stoa bench -k -c 10` with the
# same browser-like header fields, N1 then N2 requests against fresh servers;
# Ir per request = (Ir(N2) - Ir(N1)) / (N2 - N1), so start-up and stop cancel out.
#
# Usage: bench/lua-ir.sh BINARY...   (each binary in turn; ~30 s each)
#        `nginx` as a BINARY: nginx + lua-nginx-module (Debian's libnginx-mod-http-lua) under
#        callgrind instead, `master_process off`, running bench/dynamic.sh's `nginx-luareq` block
#        (or, with SCRIPT=hello, `ngx.print` of the same constant page), the same load
#        (LOADGEN must then be a Stoa binary when `nginx` comes first)
# Knobs (environment):
#   N1=2000 N2=6000    requests of the two runs
#   PORT=18565         Stoa's port (nginx's too)
#   SCRIPT=req         which handler: req (bench/dynamic.sh's luareq) or hello (a constant page)
#   RUN=/tmp/stoa-bench-lua-ir   work folder: callgrind files (callgrind_annotate RUN/NAME-N.out)
#   LOADGEN=first BINARY   the `stoa bench` used as load generator
# Exit status: 0 when every run answered all its requests, else 1.
set -euo pipefail
case ${1:-} in -h|--help|'') sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
N1=${N1:-2000} N2=${N2:-6000} PORT=${PORT:-18565} SCRIPT=${SCRIPT:-req}
RUN=${RUN:-/tmp/stoa-bench-lua-ir}
LOADGEN=${LOADGEN:-$1}
[ "$LOADGEN" != nginx ] || die "LOADGEN=STOA_BINARY: nginx cannot be the load generator"
ensure_tools valgrind:valgrind curl:curl
bench_init
mkdir -p "$RUN/site"
case $SCRIPT in
    req) cat > "$RUN/handler.lua" <<'EOF'
local hits = 0
return function(req)
  hits = hits + 1
  local h = req.headers
  return 200, { ["content-type"] = "text/plain" },
    "hello " .. (req.args.name or "") .. " " .. req.method .. " " .. (h["user-agent"] or "") .. " " .. hits
end
EOF
    ;;
    hello) cat > "$RUN/handler.lua" <<'EOF'
local page = string.rep("hello ", 100)
return function(req)
  return 200, { ["content-type"] = "text/html" }, page
end
EOF
    ;;
    *) die "SCRIPT=$SCRIPT: req or hello" ;;
esac
cat > "$RUN/stoa.toml" <<EOF
listen = ["127.0.0.1:$PORT"]
workers = 1
user = "root"
[log]
access = "off"
[[site]]
root = "$RUN/site"
[[site.route]]
prefix = "/"
lua = { script = "$RUN/handler.lua" }
EOF
# nginx's equivalent (bench/dynamic.sh's nginx-luareq and lua blocks).
case $SCRIPT in
    req) NGX_LUA='hits = hits + 1
        local h = ngx.req.get_headers()
        ngx.print("hello " .. (ngx.req.get_uri_args().name or "") .. " " .. ngx.req.get_method() .. " " .. (h["user-agent"] or "") .. " " .. hits)' ;;
    hello) NGX_LUA='ngx.print(page)' ;;
esac
mkdir -p "$RUN/nginx"
cat > "$RUN/nginx/nginx.conf" <<EOF
load_module /usr/lib/nginx/modules/ndk_http_module.so;
load_module /usr/lib/nginx/modules/ngx_http_lua_module.so;
worker_processes 1;
pid $RUN/nginx/nginx.pid;
error_log $RUN/nginx/error.log;
daemon off;
events { worker_connections 1024; }
http {
  access_log off;
  init_by_lua_block { page = string.rep("hello ", 100); hits = 0 }
  server {
    listen 127.0.0.1:$PORT;
    location / {
      default_type text/plain;
      content_by_lua_block {
        $NGX_LUA
      }
    }
  }
}
EOF
# bench/dynamic.sh's REQ_HEADERS.
HDRS=(-H "User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"
    -H "Accept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
    -H "Accept-Language: en-US,en;q=0.5" -H "Accept-Encoding: gzip, deflate, br"
    -H "Cookie: session=3f9a1c2b7d; theme=dark" -H "Upgrade-Insecure-Requests: 1")
URL="http://127.0.0.1:$PORT/hello?name=stoa"

# one BINARY N TAG: a fresh server, N requests; prints the Ir total (0 on failure)
one() {
    local bin=$1 n=$2 tag=$3 i done=0
    port_free "$PORT" || die "port $PORT is in use (PORT=...)"
    if [ "$bin" = nginx ]; then
        valgrind --tool=callgrind --vgdb=no "--callgrind-out-file=$RUN/$tag.out" "--log-file=$RUN/$tag.vg.log" \
            nginx -c "$RUN/nginx/nginx.conf" -p "$RUN/nginx" -g 'master_process off;' > "$RUN/$tag.serve.log" 2>&1 &
    else
        valgrind --tool=callgrind --vgdb=no "--callgrind-out-file=$RUN/$tag.out" "--log-file=$RUN/$tag.vg.log" \
            "$bin" serve --config "$RUN/stoa.toml" > "$RUN/$tag.serve.log" 2>&1 &
    fi
    SRV_PID[stoa]=$!
    for i in $(seq 300); do
        curl -s -o /dev/null --max-time 5 "$URL" && break
        sleep 0.2
    done
    "$LOADGEN" bench -k -c 10 -n "$n" -l -q "${HDRS[@]}" "$URL" > "$RUN/$tag.load" 2>&1 || true
    done=$(awk '/^Complete requests:/ {c = $3} /^Failed requests:/ {f = $3} END {print (f == 0 ? c : 0)}' "$RUN/$tag.load")
    srv_stop stoa
    [ "$done" = "$n" ] || { warn "$tag: $done of $n requests answered (see $RUN/$tag.load)"; echo 0; return; }
    awk '/^summary:/ {print $2}' "$RUN/$tag.out"
}

FAILED=0
for bin in "$@"; do
    [[ $bin = /* || $bin = nginx ]] || bin=$PWD/$bin
    name=$(basename "$bin")
    a=$(one "$bin" "$N1" "$name-$N1") b=$(one "$bin" "$N2" "$name-$N2")
    if [ "$a" -gt 0 ] && [ "$b" -gt 0 ]; then
        echo "$bin: Ir($N1)=$a Ir($N2)=$b -> $(( (b - a) / (N2 - N1) )) Ir per Lua request ($SCRIPT)"
    else
        echo "$bin: FAILED"; FAILED=1
    fi
done
exit "$FAILED"
