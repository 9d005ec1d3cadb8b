#!/bin/bash
# bench/cache.sh - the response cache: Stoa's cache, Varnish and nginx proxy_cache in front of the same
# origin (crates/stoa/tests/cache_support/origin.py), one process (worker, thread pool) each, loaded
# in alternation.
#
# Usage: bench/cache.sh   (as root for package installs; ~2 min with the defaults)
# Knobs (environment):
#   CACHES="stoa varnish nginx"
#   DUR=10s CONC=60   wrk -t1 -c$CONC -d$DUR (HTTP/1.1 keep-alive) per run, all on one cached 10 KB object
#   REPS=3            rounds; each loads every cache once, the first one rotating
#   WARM=2s           unrecorded warm-up per cache after start (the object is stored in it)
#   SIZE=10240        the object's bytes
#   PIN=1             caches on CPU 0, wrk and the origin on CPU 1 (taskset); 0: no pinning
#   COLD=1000         clients asking at once for one cold object (the origin takes 1 s to answer it); 0: skip
#   RUN=/tmp/stoa-bench-cache  work folder      OUT=$RUN/results.md  Markdown report (also on stdout)
#   STOA=target/release/stoa   built with `cargo build --release` when missing (BUILD=1: always)
# Ports: Stoa 18671, Varnish 18672, nginx 18673; the origin on 18670.
#
# Stoa: workers = 1, a [[cache_zone]] of 64M in memory, the route's cache with its defaults, access log
# off. Varnish 7.1: varnishd -F, the builtin VCL, -s malloc,64M, one thread pool with CONC+10 threads
# (a busy keep-alive connection holds a worker thread: fewer would queue the load, not save CPU).
# nginx: worker_processes 1, proxy_cache_path (keys_zone 10m, levels 1:2) on $RUN, proxy_cache_lock on,
# upstream keepalive, access_log off. Each answers the object from its cache after the first request
# (the origin's Cache-Control: max-age=3600); the origin's request count is checked after each round.
# CPU per hit = utime+stime (/proc/PID/stat, all threads) of the cache's own processes only (nginx:
# master + worker; Varnish: manager + child), after minus before the run, per request wrk completed.
# The cold-object test opens COLD connections (Python, asyncio), then sends the same GET on all of
# them at once, and reports how many requests reached the origin (collapsed forwarding: 1 is right).
# Only the processes this script starts are stopped, by PID. Loopback only.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
RUN=${RUN:-/tmp/stoa-bench-cache}
OUT=${OUT:-$RUN/results.md}
CACHES=${CACHES:-stoa varnish nginx}
DUR=${DUR:-10s} CONC=${CONC:-60} REPS=${REPS:-3} WARM=${WARM:-2s} PIN=${PIN:-1} SIZE=${SIZE:-10240}
COLD=${COLD:-1000}
QUIET_MAX=${QUIET_MAX:-3} QUIET_PCT=${QUIET_PCT:-15}
DEFAULT_STOA=$REPO_DIR/target/release/stoa
STOA=${STOA:-$DEFAULT_STOA}
[[ $STOA = /* ]] || STOA=$PWD/$STOA
ORIGIN_PY=$REPO_DIR/crates/stoa/tests/cache_support/origin.py
COMMAND="$(for v in CACHES DUR CONC REPS WARM PIN SIZE COLD; do printf '%s=%q ' "$v" "${!v}"; done)bench/cache.sh"
read -r -a CACHE_LIST <<< "$CACHES"
declare -A CACHE_PORT=([stoa]=18671 [varnish]=18672 [nginx]=18673)
for c in "${CACHE_LIST[@]}"; do [ -n "${CACHE_PORT[$c]:-}" ] || die "unknown cache: $c (stoa, varnish, nginx)"; done
OPORT=18670
OBJ="/obj?cc=max-age%3D3600&size=$SIZE"

ensure_tools nginx:nginx-light varnishd:varnish wrk:wrk curl:curl python3:python3
[[ " $CACHES " = *" stoa "* ]] && ensure_fresh_stoa
NOFILE=$(raise_nofile 65536)
[ "$NOFILE" -gt $(( COLD + 100 )) ] || die "open files limit $NOFILE is too low for COLD=$COLD"
bench_init
rm -rf "$RUN/raw" "$RUN/bin"; mkdir -p "$RUN/raw" "$RUN/bin"
chmod 755 "$RUN"

CACHE_CPU=() LOAD_CPU=()
if [ "$PIN" = 1 ]; then
    [ "$(nproc)" -ge 2 ] || die "PIN=1 needs 2 CPUs"
    CACHE_CPU=(taskset -c 0) LOAD_CPU=(taskset -c 1)
    printf '#!/bin/sh\nexec taskset -c 1 %s "$@"\n' "$(command -v wrk)" > "$RUN/bin/wrk"
    chmod 755 "$RUN/bin/wrk"
    PATH=$RUN/bin:$PATH
fi

origin_start() {
    port_free "$OPORT" || die "origin port $OPORT is in use"
    "${LOAD_CPU[@]}" "$PYTHON" "$ORIGIN_PY" --port "$OPORT" > "$RUN/logs/origin.out" 2>&1 &
    SRV_PID[origin]=$!
    SRV_PORT[origin]=$OPORT
    for _ in $(seq 100); do curl -s --max-time 1 "http://127.0.0.1:$OPORT/__count" > /dev/null && return 0; sleep 0.1; done
    die "the origin did not start"
}
origin_count() {  # origin_count PATH: requests the origin saw for PATH
    curl -s --max-time 5 "http://127.0.0.1:$OPORT/__count?path=$1" | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["requests"])'
}

cache_start() {  # cache_start NAME
    local name=$1 port=${CACHE_PORT[$1]} d=$RUN/$1
    port_free "$port" || { warn "$name: port $port is in use"; return 1; }
    rm -rf "$d"; mkdir -p "$d/logs" "$d/www"; chmod 755 "$d"
    case $name in
        stoa)
            cat > "$d/stoa.toml" <<EOF
listen = ["127.0.0.1:$port"]
workers = 1
user = "root"
[log]
access = "off"
[[cache_zone]]
name = "bench"
memory = "64M"
[[pool]]
name = "origin"
protocol = "http"
address = ["127.0.0.1:$OPORT"]
[[site]]
root = "$d/www"
[[site.route]]
prefix = "/"
proxy = { pool = "origin" }
cache = { zone = "bench" }
EOF
            "${CACHE_CPU[@]}" "$STOA" serve --config "$d/stoa.toml" > "$RUN/logs/$name.out" 2>&1 & ;;
        varnish)
            printf 'vcl 4.1;\nbackend default { .host = "127.0.0.1"; .port = "%s"; }\n' "$OPORT" > "$d/default.vcl"
            "${CACHE_CPU[@]}" varnishd -F -n "$d/varnish" -a "127.0.0.1:$port" -f "$d/default.vcl" -s malloc,64M \
                -p thread_pools=1 -p thread_pool_min=$(( CONC + 10 )) -p thread_pool_max=$(( CONC + 10 )) \
                > "$RUN/logs/$name.out" 2>&1 & ;;
        nginx)
            mkdir -p "$d/cache" "$d/tmp"
            cat > "$d/nginx.conf" <<EOF
worker_processes 1; daemon off; pid $d/nginx.pid;
error_log $d/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path $d/tmp; proxy_temp_path $d/tmp; fastcgi_temp_path $d/tmp; uwsgi_temp_path $d/tmp; scgi_temp_path $d/tmp;
  proxy_cache_path $d/cache levels=1:2 keys_zone=bench:10m max_size=1g inactive=1d;
  upstream origin { server 127.0.0.1:$OPORT; keepalive 32; }
  server {
    listen 127.0.0.1:$port;
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_cache bench;
      proxy_cache_lock on;
      proxy_cache_lock_timeout 10s;
    }
  }
}
EOF
            "${CACHE_CPU[@]}" nginx -p "$d" -e "$d/logs/error.log" -c "$d/nginx.conf" > "$RUN/logs/$name.out" 2>&1 & ;;
    esac
    SRV_PID[$name]=$!
    SRV_PORT[$name]=$port
    echo "${SRV_PID[$name]}" > "$RUN/pids/$name.pid"
    srv_ready "$name" "http://127.0.0.1:$port/__count"
}

origin_start
FAILED=0 UP=()
for c in "${CACHE_LIST[@]}"; do
    if cache_start "$c"; then UP+=("$c"); else FAILED=1; fi
done
[ ${#UP[@]} -gt 0 ] || die "no cache started"
for c in "${UP[@]}"; do
    # Each cache stores the object under its own query (the origin counts per path: /obj-NAME).
    url="http://127.0.0.1:${CACHE_PORT[$c]}${OBJ/\/obj/\/obj-$c}"
    len=$(curl -s --max-time 5 "$url" | wc -c)
    [ "$len" = "$SIZE" ] || { warn "$c: check request got $len bytes"; FAILED=1; }
    timeout 60 wrk -t1 -c"$CONC" -d"$WARM" "$url" > "$RUN/raw/warmup-$c.txt" 2>&1 || warn "$c: warm-up failed"
done
log "load average $(cut -d' ' -f1-3 /proc/loadavg); caches: $(for c in "${UP[@]}"; do printf '%s=PID %s ' "$c" "${SRV_PID[$c]}"; done)"

RUNS_TSV=$RUN/raw/runs.tsv
printf 'rep\tcache\tstatus\trps\trequests\tnon2xx\terrors\tticks\tus_per_req\tp50_ms\tp99_ms\torigin\n' > "$RUNS_TSV"
n=${#UP[@]}
for rep in $(seq "$REPS"); do
    for i in $(seq 0 $(( n - 1 ))); do
        c=${UP[$(( (i + rep - 1) % n ))]}
        BUSY=$(wait_quiet)
        run_load "$c" wrk "http://127.0.0.1:${CACHE_PORT[$c]}${OBJ/\/obj/\/obj-$c}" "$SIZE" "$RUN/raw/$c-$rep.txt"
        oc=$(origin_count "/obj-$c")
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$c" "$R_STATUS" "$R_RPS" "$R_REQS" \
            "$R_NON2XX" "$R_ERRS" "$R_TICKS" "$R_USREQ" "$R_P50" "$R_P99" "$oc" >> "$RUNS_TSV"
        log "[$rep/$REPS] $(printf '%-8s' "$c") $R_RPS req/s  p99 $R_P99 ms  $R_USREQ us/hit  origin=$oc  non2xx=$R_NON2XX errors=$R_ERRS busy=$BUSY% $([ "$R_STATUS" = ok ] || echo "<< $R_STATUS")"
        if [ "$c" = stoa ] && { [ "$R_STATUS" != ok ] || [ "$R_NON2XX" != 0 ] || [ "$R_ERRS" != 0 ]; }; then FAILED=1; fi
    done
done

COLD_TSV=$RUN/raw/cold.tsv
printf 'cache\tclients\tok\tsame_body\torigin\tsecs\n' > "$COLD_TSV"
if [ "$COLD" -gt 0 ]; then
    for c in "${UP[@]}"; do
        path="/cold-$c"
        "$PYTHON" - "${CACHE_PORT[$c]}" "$path?cc=max-age%3D3600&delay=1&size=$SIZE" "$COLD" > "$RUN/raw/cold-$c.txt" 2>&1 <<'PY' || warn "$c: cold test failed"
import asyncio, sys, time, hashlib
port, target, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
async def one(reader, writer, start):
    await start.wait()
    writer.write(f"GET {target} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await asyncio.wait_for(reader.read(-1), 60)
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head.startswith(b"HTTP/1.1 200"), hashlib.sha256(body).hexdigest()
async def main():
    conns = []
    for _ in range(n):
        conns.append(await asyncio.open_connection("127.0.0.1", port))
    start = asyncio.Event()
    tasks = [asyncio.create_task(one(r, w, start)) for r, w in conns]
    t0 = time.time()
    start.set()
    res = await asyncio.gather(*tasks, return_exceptions=True)
    ok = [r for r in res if isinstance(r, tuple) and r[0]]
    print(f"RESULT {len(ok)} {len(set(h for _, h in ok))} {time.time() - t0:.2f}")
asyncio.run(main())
PY
        x=($(awk '/^RESULT/ {print $2, $3, $4}' "$RUN/raw/cold-$c.txt"))
        oc=$(origin_count "$path")
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$c" "$COLD" "${x[0]:--}" "${x[1]:--}" "$oc" "${x[2]:--}" >> "$COLD_TSV"
        log "cold: $c: $COLD clients, ${x[0]:--} answered 200, ${x[1]:--} distinct bodies, origin saw $oc request(s), ${x[2]:--} s"
        [ "$c" != stoa ] || [ "$oc" = 1 ] || FAILED=1
    done
fi
srv_stop_all

{
    echo "date=$(date '+%F %H:%M %Z')"
    echo "command=$COMMAND"
    echo "machine=$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
    echo "versions=$(nginx -v 2>&1 | sed 's/.*: //'), $(varnishd -V 2>&1 | head -1 | sed 's/.*(\(varnish-[0-9.]*\).*/\1/'), wrk $(dpkg-query -W -f '${Version}' wrk 2>/dev/null), stoa $(git -C "$REPO_DIR" rev-parse --short HEAD)"
    echo "failed=$FAILED"
} > "$RUN/raw/meta.txt"
mkdir -p "$(dirname "$OUT")"
"$PYTHON" - "$RUN/raw/meta.txt" "$RUNS_TSV" "$COLD_TSV" > "$OUT" <<'PY'
import csv, statistics, sys
meta = dict(l.rstrip("\n").split("=", 1) for l in open(sys.argv[1]) if "=" in l)
runs = list(csv.DictReader(open(sys.argv[2]), delimiter="\t"))
cold = list(csv.DictReader(open(sys.argv[3]), delimiter="\t"))
def num(x):
    try: return float(x)
    except (TypeError, ValueError): return None
print(f"### Cache hits, {meta['date']}\n")
print(f"`{meta['command']}` on {meta['machine']}; {meta['versions']}.\n")
print("| cache | req/s (median) | CPU µs per hit (median, range) | p99 ms | origin requests | Stoa / it |")
print("|---|---|---|---|---|---|")
caches = list(dict.fromkeys(r["cache"] for r in runs))
med = {}
for c in caches:
    rs = [r for r in runs if r["cache"] == c]
    us = [num(r["us_per_req"]) for r in rs if num(r["us_per_req"]) is not None]
    med[c] = statistics.median(us) if us else None
for c in caches:
    rs = [r for r in runs if r["cache"] == c]
    us = [num(r["us_per_req"]) for r in rs if num(r["us_per_req"]) is not None]
    rps = [num(r["rps"]) for r in rs if num(r["rps"]) is not None]
    p99 = [num(r["p99_ms"]) for r in rs if num(r["p99_ms"]) is not None]
    ratio = f"{med['stoa'] / med[c]:.2f}" if med.get("stoa") and med.get(c) and c != "stoa" else ""
    print(f"| {c} | {statistics.median(rps):.0f} | {med[c]:.2f} ({min(us):.2f}–{max(us):.2f}) | {statistics.median(p99):.2f} | {rs[-1]['origin']} | {ratio} |"
          if us and rps and p99 else f"| {c} | - | - | - | - | |")
if cold:
    print("\n| cache | clients on one cold object | answered 200 | distinct bodies | origin requests | seconds |")
    print("|---|---|---|---|---|---|")
    for r in cold:
        print(f"| {r['cache']} | {r['clients']} | {r['ok']} | {r['same_body']} | {r['origin']} | {r['secs']} |")
print(f"\nfailed={meta['failed']}")
PY
cat "$OUT"
[ "$FAILED" = 0 ]
