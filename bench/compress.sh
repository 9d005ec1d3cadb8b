#!/bin/bash
# bench/compress.sh - on-the-fly compression: server CPU per response and requests/s, Stoa's `compress`
# against nginx's `gzip on` and Caddy's `encode` at the same levels, one server process each.
#
# Usage: bench/compress.sh   (as root for package installs; ~3 min with the defaults)
# Cases (each with `Accept-Encoding: CODING`, checked first: 200, that Content-Encoding, and the body
# decoded by curl --compressed equal to the file):
#   static-gzip / static-br / static-zstd  GET /page100k.html (102,400 bytes of HTML: the repository's
#       docs in a <pre>). Stoa keeps a compressed form per file version (made once); nginx's gzip
#       filter and Caddy's encode compress every response. nginx has no brotli or zstd (the brotli
#       module is not in Debian's nginx), Caddy 2.6 no brotli: those rows have Stoa alone.
#   fastcgi-gzip  GET /page.php: php-fpm (static pool of 4, one instance per server) reads
#       page50k.html (51,200 bytes) and writes it; compressed on the fly by the server.
#   proxy-gzip    GET /up/page50k.html through the server's reverse proxy to an upstream nginx
#       (one worker, no compression, shared); compressed on the fly.
# Servers: stoa (`workers = 1`), nginx (one worker, `gzip on`, gzip_comp_level = $GZIP_LEVEL), caddy
# (`encode gzip $GZIP_LEVEL zstd`, GOMAXPROCS=1; skipped when `apt-get install caddy` fails). Stoa's
# levels: gzip $GZIP_LEVEL, brotli $BR_LEVEL, zstd $ZSTD_LEVEL.
# Each measurement: `wrk -t1 -c$CONC -d$DUR -H "Accept-Encoding: CODING"`, the server's CPU = utime+stime
# of all its processes (/proc, bench/lib.sh srv_cpu_ticks) after minus before, divided by the responses.
# The upstream nginx and php-fpm are not counted. Rounds alternate: REPS rounds over every case, the
# starting server rotating; cells show the median.
# Knobs: DUR=5s CONC=20 REPS=3 GZIP_LEVEL=6 BR_LEVEL=5 ZSTD_LEVEL=3 SERVERS="stoa nginx caddy"
#   RUN=/tmp/stoa-bench-compress OUT=$RUN/results.md STOA=target/release/stoa
# Ports: stoa 18390, nginx 18391, caddy 18392, upstream nginx 18393.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
RUN=${RUN:-/tmp/stoa-bench-compress}
OUT=${OUT:-$RUN/results.md}
DUR=${DUR:-5s} CONC=${CONC:-20} REPS=${REPS:-3}
GZIP_LEVEL=${GZIP_LEVEL:-6} BR_LEVEL=${BR_LEVEL:-5} ZSTD_LEVEL=${ZSTD_LEVEL:-3}
SERVERS=${SERVERS:-stoa nginx caddy}
STOA=${STOA:-$REPO_DIR/target/release/stoa}
[[ $STOA = /* ]] || STOA=$PWD/$STOA
PHP_FPM=${PHP_FPM:-$(ls /usr/sbin/php-fpm* 2>/dev/null | head -n1)}
COMMAND="$(for v in DUR CONC REPS GZIP_LEVEL BR_LEVEL ZSTD_LEVEL SERVERS; do
    d=$(eval "echo \${$v}"); printf '%s=%q ' "$v" "$d"; done)bench/compress.sh"

ensure_tools nginx:nginx-light wrk:wrk curl:curl
[ -x "$PHP_FPM" ] || ensure_tools php-fpm8.2:php-fpm
PHP_FPM=${PHP_FPM:-$(ls /usr/sbin/php-fpm* | head -n1)}
if [[ " $SERVERS " = *" caddy "* ]] && ! command -v caddy >/dev/null; then
    [ "$(id -u)" = 0 ] && { wait_for_apt; DEBIAN_FRONTEND=noninteractive apt-get install -y caddy >&2 || true; }
    command -v caddy >/dev/null || { warn "caddy is not installed: its rows are left out"; SERVERS=${SERVERS/caddy/}; }
fi
[ -x "$STOA" ] || ensure_stoa
read -r -a SRVS <<< "$SERVERS"
NOFILE=$(raise_nofile 65536); export NOFILE
bench_init
IS_ROOT=0; [ "$(id -u)" = 0 ] && IS_ROOT=1
rm -rf "$RUN/raw" "$RUN/www" "$RUN/sock"; mkdir -p "$RUN/raw" "$RUN/sock" "$RUN/caddy-home"
W=$RUN/www
mkdir -p "$W"

# ---- the pages: HTML as sites write it (the repository's docs, escaped, in a <pre>) ----
page() {  # page BYTES FILE
    { printf '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>Stoa</title></head><body><pre>\n'
      for _ in 1 2 3 4 5 6 7 8; do cat "$REPO_DIR"/docs/*.md; done | sed 's/&/\&amp;/g; s/</\&lt;/g'; } | head -c "$1" > "$2" || true
    [ "$(stat -c %s "$2")" = "$1" ] || die "could not write $2"
}
page 102400 "$W/page100k.html"
page 51200 "$W/page50k.html"
printf '<?php\nheader("Content-Type: text/html; charset=utf-8");\nreadfile(__DIR__ . "/page50k.html");\n' > "$W/page.php"
chmod 755 "$W"; chmod 644 "$W"/*

declare -A PORT=([stoa]=18390 [nginx]=18391 [caddy]=18392 [upstream]=18393)
TYPES="text/html text/css application/javascript application/json image/svg+xml"

# ---- the upstream and the php-fpm instances (not measured) ----
start_bg() {  # start_bg NAME CMD...: a process tracked in SRV_PID (stopped at exit)
    local name=$1; shift
    "$@" > "$RUN/logs/$name.out" 2>&1 &
    SRV_PID[$name]=$!; echo "$!" > "$RUN/pids/$name.pid"
}
cat > "$RUN/upstream.conf" <<EOF
worker_processes 1; daemon off; pid $RUN/upstream.pid; error_log $RUN/logs/upstream-error.log warn;
events { worker_connections 4096; }
http { access_log off; include /etc/nginx/mime.types; sendfile on; keepalive_requests 100000;
       server { listen 127.0.0.1:${PORT[upstream]}; root $W; } }
EOF
start_bg upstream nginx -p "$RUN" -e "$RUN/logs/upstream-error.log" -c "$RUN/upstream.conf"
srv_ready upstream "http://127.0.0.1:${PORT[upstream]}/page50k.html" || die "the upstream nginx did not start"
for s in "${SRVS[@]}"; do
    [ "$s" = caddy ] && continue
    user="; not root"; opts=(-F); [ $IS_ROOT = 1 ] && { user="user = www-data"; opts+=(-R); }
    render_conf "$BENCH_DIR/conf/php-fpm-fastcgi.conf" "$RUN/fpm-$s.conf" RUN="$RUN" SOCK="$RUN/sock/fpm-$s.sock" USER="$user" NAME="fpm-$s"
    start_bg "fpm-$s" "$PHP_FPM" "${opts[@]}" -y "$RUN/fpm-$s.conf"
    for i in $(seq 100); do [ -S "$RUN/sock/fpm-$s.sock" ] && break; sleep 0.1; done
    [ -S "$RUN/sock/fpm-$s.sock" ] || die "php-fpm for $s did not start (see $RUN/logs/fpm-$s.out)"
done

# ---- the servers ----
start_server() {  # start_server NAME
    local s=$1 p=${PORT[$1]}
    case $s in
        stoa)
            cat > "$RUN/stoa.toml" <<EOF
listen = ["127.0.0.1:$p"]
workers = 1
[log]
access = "off"
[limits]
keepalive_timeout = "60s"
[[pool]]
name = "php"
address = ["unix:$RUN/sock/fpm-stoa.sock"]
[[pool]]
name = "up"
protocol = "http"
address = ["127.0.0.1:${PORT[upstream]}"]
[[site]]
root = "$W"
compress = { encodings = ["zstd", "br", "gzip"], gzip_level = $GZIP_LEVEL, brotli_level = $BR_LEVEL, zstd_level = $ZSTD_LEVEL }
[[site.route]]
suffix = ".php"
fastcgi = { pool = "php" }
[[site.route]]
prefix = "/up/"
proxy = { pool = "up", strip_prefix = true }
EOF
            start_bg stoa "$STOA" serve --config "$RUN/stoa.toml" ;;
        nginx)
            cat > "$RUN/nginx.conf" <<EOF
user www-data; worker_processes 1; daemon off; pid $RUN/nginx.pid; error_log $RUN/logs/nginx-error.log warn;
worker_rlimit_nofile $NOFILE;
events { worker_connections 8192; }
http {
    access_log off; include /etc/nginx/mime.types; default_type application/octet-stream;
    sendfile on; keepalive_timeout 60s; keepalive_requests 100000;
    open_file_cache max=1000 inactive=60s; open_file_cache_valid 1s;
    client_body_temp_path $RUN/nginx-tmp;
    gzip on; gzip_comp_level $GZIP_LEVEL; gzip_min_length 256; gzip_vary on; gzip_proxied any;
    gzip_types $TYPES;
    upstream php { server unix:$RUN/sock/fpm-nginx.sock; keepalive 8; }
    upstream up { server 127.0.0.1:${PORT[upstream]}; keepalive 8; }
    server {
        listen 127.0.0.1:$p; root $W;
        location ~ \.php\$ { include /etc/nginx/fastcgi_params; fastcgi_param SCRIPT_FILENAME \$document_root\$fastcgi_script_name;
                             fastcgi_keep_conn on; fastcgi_pass php; }
        location /up/ { proxy_pass http://up/; proxy_http_version 1.1; proxy_set_header Connection ""; }
    }
}
EOF
            mkdir -p "$RUN/nginx-tmp"
            start_bg nginx nginx -p "$RUN" -e "$RUN/logs/nginx-error.log" -c "$RUN/nginx.conf" ;;
        caddy)
            cat > "$RUN/Caddyfile" <<EOF
{
    admin off
    auto_https off
}
http://127.0.0.1:$p {
    root * $W
    encode {
        gzip $GZIP_LEVEL
        zstd
    }
    file_server
}
EOF
            HOME=$RUN/caddy-home XDG_DATA_HOME=$RUN/caddy-home XDG_CONFIG_HOME=$RUN/caddy-home GOMAXPROCS=1 \
                start_bg caddy caddy run --config "$RUN/Caddyfile" --adapter caddyfile ;;
    esac
    srv_ready "$s" "http://127.0.0.1:$p/page50k.html"
}

# the cases a server takes: "case path coding"
cases_for() {
    case $1 in
        stoa)  echo "static-gzip static-br static-zstd fastcgi-gzip proxy-gzip" ;;
        nginx) echo "static-gzip fastcgi-gzip proxy-gzip" ;;
        caddy) echo "static-gzip static-zstd" ;;
    esac
}
case_path() { case $1 in static-*) echo /page100k.html ;; fastcgi-*) echo /page.php ;; proxy-*) echo /up/page50k.html ;; esac; }
case_file() { case $1 in static-*) echo "$W/page100k.html" ;; *) echo "$W/page50k.html" ;; esac; }

RUNS=$RUN/raw/runs.tsv
printf 'rep\tcase\tserver\trps\tresponses\tticks\tus_per_resp\tbytes\tstatus\n' > "$RUNS"
STARTED=()
for s in "${SRVS[@]}"; do start_server "$s" && STARTED+=("$s") || warn "$s did not start: left out"; done
FAILED=0
# check every case once: status, coding, body decoded back to the file; bytes on the wire
declare -A BYTES=()
for s in "${STARTED[@]}"; do
    for c in $(cases_for "$s"); do
        coding=${c#*-} url="http://127.0.0.1:${PORT[$s]}$(case_path "$c")"
        head=$(curl -s --max-time 10 -H "Accept-Encoding: $coding" -D - -o "$RUN/raw/$s-$c.enc" "$url" | tr -d '\r')
        grep -qi "^content-encoding: $coding\$" <<< "$head" || { warn "$s $c: not $coding-encoded:"; sed 's/^/    /' <<< "$head" >&2; FAILED=1; }
        curl -s --max-time 10 --compressed -H "Accept-Encoding: $coding" -o "$RUN/raw/$s-$c.dec" "$url"
        cmp -s "$RUN/raw/$s-$c.dec" "$(case_file "$c")" || { warn "$s $c: the decoded body differs from the file"; FAILED=1; }
        BYTES[$s-$c]=$(stat -c %s "$RUN/raw/$s-$c.enc")
    done
done
# warm-up (unrecorded): makes Stoa's kept forms, as they are in steady state
for s in "${STARTED[@]}"; do for c in $(cases_for "$s"); do
    wrk -t1 -c4 -d1s -H "Accept-Encoding: ${c#*-}" "http://127.0.0.1:${PORT[$s]}$(case_path "$c")" > /dev/null 2>&1 || true
done; done

LOADAVG0=$(cut -d' ' -f1-3 /proc/loadavg)
ALLCASES="static-gzip static-br static-zstd fastcgi-gzip proxy-gzip"
k=0
for rep in $(seq "$REPS"); do
    for c in $ALLCASES; do
        order=()
        for s in "${STARTED[@]}"; do [[ " $(cases_for "$s") " = *" $c "* ]] && order+=("$s"); done
        [ ${#order[@]} = 0 ] && continue
        k=$(( k + 1 )); rot=$(( k % ${#order[@]} ))
        order=("${order[@]:$rot}" "${order[@]:0:$rot}")
        for s in "${order[@]}"; do
            f=$RUN/raw/wrk-$rep-$c-$s.txt url="http://127.0.0.1:${PORT[$s]}$(case_path "$c")"
            t0=$(srv_cpu_ticks "$s")
            wrk -t1 -c"$CONC" -d"$DUR" -H "Accept-Encoding: ${c#*-}" "$url" > "$f" 2>&1 || true
            t1=$(srv_cpu_ticks "$s")
            n=$(awk '/requests in/ {print $1}' "$f"); rps=$(awk '/^Requests\/sec/ {printf "%.0f", $2}' "$f")
            bad=$(awk '/Non-2xx/ {b += $NF} /Socket errors/ {b += 1} END {print b + 0}' "$f")
            st=ok; [ "$bad" = 0 ] || { st="errors: $(grep -E 'Non-2xx|Socket errors' "$f" | paste -sd' ')"; FAILED=1; }
            srv_alive "$s" || { st="SERVER DIED"; FAILED=1; }
            us=$(awk -v t=$(( t1 - t0 )) -v n="${n:-0}" -v hz="$CLK_TCK" 'BEGIN {printf "%.1f", (n > 0 ? t * 1e6 / hz / n : 0)}')
            printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$c" "$s" "${rps:-0}" "${n:-0}" $(( t1 - t0 )) "$us" "${BYTES[$s-$c]:-}" "$st" >> "$RUNS"
            log "$c $s: $rps req/s, $us µs CPU/response ($st)"
        done
    done
done

# ---- report: medians; ratios against nginx's and Caddy's gzip of the same case ----
{
    echo "# bench/compress.sh - $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "Command: \`$COMMAND\`  "
    echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo); load average before: $LOADAVG0, after: $(cut -d' ' -f1-3 /proc/loadavg)  "
    echo "Stoa: $STOA; nginx: $(nginx -v 2>&1 | sed 's/.*: //'); caddy: $(command -v caddy >/dev/null && caddy version | cut -d' ' -f1 || echo -)"
    echo
    echo "| case | server | req/s | CPU µs/response | x nginx gzip | x caddy gzip | bytes/response |"
    echo "|---|---|---:|---:|---:|---:|---:|"
    awk -F'\t' 'NR > 1 {k = $2 SUBSEP $3; n[k]++; rps[k, n[k]] = $4; us[k, n[k]] = $7; by[k] = $8; if ($9 != "ok") bad[k] = $9}
        function med(a, k, c,   i, j, t, v) { for (i = 1; i <= c; i++) v[i] = a[k, i]
            for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
            return (c % 2 ? v[(c + 1) / 2] : (v[c / 2] + v[c / 2 + 1]) / 2) }
        END {
            split("static-gzip static-br static-zstd fastcgi-gzip proxy-gzip", cs, " ")
            split("stoa nginx caddy", ss, " ")
            for (ci = 1; ci in cs; ci++) {
                c = cs[ci]; base = c; sub(/-.*/, "-gzip", base)
                ng = ((base, "nginx") in n) ? med(us, base SUBSEP "nginx", n[base, "nginx"]) : 0
                cg = ((base, "caddy") in n) ? med(us, base SUBSEP "caddy", n[base, "caddy"]) : 0
                for (si = 1; si in ss; si++) { s = ss[si]; k = c SUBSEP s; if (!(k in n)) continue
                    u = med(us, k, n[k]); r = med(rps, k, n[k])
                    printf "| %s | %s | %.0f | %.1f | %s | %s | %s |%s\n", c, s, r, u,
                        (ng > 0 ? sprintf("%.2f", u / ng) : "-"), (cg > 0 ? sprintf("%.2f", u / cg) : "-"), by[k],
                        ((k in bad) ? " " bad[k] : "") } } }' "$RUNS"
    echo
    echo "Raw runs: $RUNS (one line per wrk run)."
} | tee "$OUT"
exit $FAILED
