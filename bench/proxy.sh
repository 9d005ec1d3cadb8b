#!/bin/bash
# bench/proxy.sh - the reverse proxy (issue 12): Stoa, nginx and HAProxy in front of the same
# canned-response backend, one process (worker, thread) each, loaded in alternation.
#
# Usage: bench/proxy.sh   (as root for package installs; ~3 min with the defaults)
# Knobs (environment):
#   PROXIES="stoa nginx haproxy"
#   DUR=10s CONC=60   wrk -t1 -c$CONC -d$DUR (HTTP/1.1 keep-alive) per run
#   REPS=5            rounds; each round loads every proxy once, the first one rotating
#   WARM=2s           unrecorded wrk warm-up per proxy after start
#   PIN=1             proxies on CPU 0, wrk and the backend on CPU 1 (taskset); 0: no pinning
#   QUIET_MAX=3 QUIET_PCT=15   before each run wait up to QUIET_MAX s for the box to be < QUIET_PCT % busy
#   BODY=13           bytes of the backend's response body
#   UPSTREAM=http     https: the proxies reach the backend over TLS 1.3, verified against a test CA made
#                     here (openssl), kept alive, sessions resumed: Stoa `tls = { ca, server_name }`,
#                     nginx `proxy_pass https://` with `proxy_ssl_session_reuse on`, `proxy_ssl_verify on`
#                     and `keepalive` raised to CONC (every connection kept alive, not only 32; Stoa's
#                     `capacity` likewise), HAProxy `server ... ssl verify required`. The backend is then an
#                     nginx (worker_processes 1, on CPU 1 with wrk) answering `return 200` over TLS 1.3
#                     on port 18598, instead of canned.c.
#   RUN=/tmp/stoa-bench-proxy  work folder (configs, logs, raw tool output)
#   OUT=$RUN/results.md        Markdown report (also printed to stdout)
#   STOA=target/release/stoa   built with `cargo build --release` when missing (BUILD=1: always)
# Ports: backend 18597, Stoa 18592, nginx 18591, HAProxy 18595.
#
# The backend is tests/proxy-peers/canned.c (epoll, one read and one write per request), so the proxy,
# not the backend, is measured. nginx: tests/proxy-peers/nginx-proxy.conf (worker_processes 1,
# upstream keepalive 32, proxy_http_version 1.1, Connection "") with its access log off; HAProxy:
# tests/proxy-peers/haproxy.cfg (nbthread 1, http-reuse safe); Stoa: workers = 1, a protocol = "http"
# pool with its defaults (at most 32 kept-alive connections), access log off. Each adds the client's
# address (X-Forwarded-For; Stoa also Forwarded and X-Forwarded-Host/-Proto).
# For every run: req/s and p99 (wrk, bench/wrk-report.lua) and the proxy's CPU time per request =
# utime+stime (/proc/PID/stat, all threads) of the proxy's own processes only (nginx: master + its
# one worker; HAProxy and Stoa: one process) after minus before the run, per request wrk completed;
# the backend's and wrk's CPU are not in it.
# Exit status: 0 if every proxy started and every Stoa run was clean (200s only, no errors), else 1.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
RUN=${RUN:-/tmp/stoa-bench-proxy}
OUT=${OUT:-$RUN/results.md}
PROXIES=${PROXIES:-stoa nginx haproxy}
DUR=${DUR:-10s} CONC=${CONC:-60} REPS=${REPS:-5} WARM=${WARM:-2s} PIN=${PIN:-1} BODY=${BODY:-13}
UPSTREAM=${UPSTREAM:-http}
case $UPSTREAM in http|https) ;; *) die "UPSTREAM=$UPSTREAM: http or https" ;; esac
QUIET_MAX=${QUIET_MAX:-3} QUIET_PCT=${QUIET_PCT:-15}
STOA=${STOA:-$REPO_DIR/target/release/stoa}
[[ $STOA = /* ]] || STOA=$PWD/$STOA
PEERS=$REPO_DIR/tests/proxy-peers
COMMAND="$(for v in PROXIES DUR CONC REPS WARM PIN UPSTREAM; do printf '%s=%q ' "$v" "${!v}"; done)bench/proxy.sh"
read -r -a PROXY_LIST <<< "$PROXIES"
declare -A PROXY_PORT=([stoa]=18592 [nginx]=18591 [haproxy]=18595)
for p in "${PROXY_LIST[@]}"; do [ -n "${PROXY_PORT[$p]:-}" ] || die "unknown proxy: $p (stoa, nginx, haproxy)"; done
BPORT=18597

ensure_tools nginx:nginx-light haproxy:haproxy wrk:wrk curl:curl cc:gcc python3:python3 openssl:openssl
[[ " $PROXIES " = *" stoa "* ]] && ensure_fresh_stoa
NOFILE=$(raise_nofile 65536)
bench_init
rm -rf "$RUN/raw" "$RUN/bin"; mkdir -p "$RUN/raw" "$RUN/bin"

PROXY_CPU=() LOAD_CPU=()
if [ "$PIN" = 1 ]; then
    [ "$(nproc)" -ge 2 ] || die "PIN=1 needs 2 CPUs"
    PROXY_CPU=(taskset -c 0) LOAD_CPU=(taskset -c 1)
    # run_load (lib.sh) runs `wrk` from PATH: this one runs it on CPU 1
    printf '#!/bin/sh\nexec taskset -c 1 %s "$@"\n' "$(command -v wrk)" > "$RUN/bin/wrk"
    chmod 755 "$RUN/bin/wrk"
    PATH=$RUN/bin:$PATH
fi

if [ "$UPSTREAM" = http ]; then
    cc -O2 -Wall -o "$RUN/canned" "$PEERS/canned.c" || die "cannot build canned.c"
    port_free "$BPORT" || die "backend port $BPORT is in use"
    "${LOAD_CPU[@]}" "$RUN/canned" "$BPORT" "$BODY" 1 > "$RUN/logs/canned.out" 2>&1 &
    SRV_PID[canned]=$!
else
    # A test CA and a certificate for backend.test (P-256).
    BPORT=18598 PKI=$RUN/pki
    rm -rf "$PKI" "$RUN/tlsbackend"; mkdir -p "$PKI" "$RUN/tlsbackend/logs"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=bench test CA" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign \
        -keyout "$PKI/ca.key" -out "$PKI/ca.pem" 2> "$RUN/logs/openssl.out" || die "openssl: cannot make the CA"
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=backend.test" \
        -keyout "$PKI/backend.key" -out "$PKI/backend.csr" 2>> "$RUN/logs/openssl.out" || die "openssl: key"
    printf 'subjectAltName=DNS:backend.test\nextendedKeyUsage=serverAuth\n' > "$PKI/ext.cnf"
    openssl x509 -req -in "$PKI/backend.csr" -CA "$PKI/ca.pem" -CAkey "$PKI/ca.key" -CAcreateserial -days 2 \
        -extfile "$PKI/ext.cnf" -out "$PKI/backend.pem" 2>> "$RUN/logs/openssl.out" || die "openssl: cannot sign"
    chmod 755 "$PKI"; chmod 644 "$PKI"/*
    body="Hello, world\n$(printf '%*s' $(( BODY > 13 ? BODY - 13 : 0 )) '' | tr ' ' x)"
    {
        echo "worker_processes 1; daemon off; pid $RUN/tlsbackend/nginx.pid;"
        echo "error_log $RUN/tlsbackend/logs/error.log warn; events { worker_connections 4096; }"
        echo "http { access_log off; keepalive_requests 1000000; keepalive_timeout 300s;"
        echo "  server { listen 127.0.0.1:$BPORT ssl; ssl_protocols TLSv1.3; ssl_session_cache shared:S:1m;"
        echo "    ssl_certificate $PKI/backend.pem; ssl_certificate_key $PKI/backend.key;"
        echo "    location / { default_type text/plain; return 200 \"$body\"; } } }"
    } > "$RUN/tlsbackend/nginx.conf"
    port_free "$BPORT" || die "backend port $BPORT is in use"
    "${LOAD_CPU[@]}" nginx -p "$RUN/tlsbackend" -e "$RUN/tlsbackend/logs/error.log" -c "$RUN/tlsbackend/nginx.conf" \
        > "$RUN/logs/tlsbackend.out" 2>&1 &
    SRV_PID[tlsbackend]=$!
    for _ in $(seq 50); do
        curl -s --max-time 1 --cacert "$PKI/ca.pem" --resolve "backend.test:$BPORT:127.0.0.1" \
            "https://backend.test:$BPORT/" > /dev/null && break
        sleep 0.1
    done
fi
BACKEND=127.0.0.1:$BPORT

proxy_start() {  # proxy_start NAME: NAME in front of the backend on its port, answering
    local name=$1 port=${PROXY_PORT[$1]} d=$RUN/$1 i
    port_free "$port" || { warn "$name: port $port is in use"; return 1; }
    rm -rf "$d"; mkdir -p "$d/logs" "$d/tmp"
    case $name in
        stoa)
            render_conf "$PEERS/stoa-proxy.toml" "$d/stoa.toml" RUN="$d" PORT="$port" BACKEND="$BACKEND"
            [ "$UPSTREAM" = http ] ||
                sed -i "s|^address = .*|&\ntls = { ca = \"$PKI/ca.pem\", server_name = \"backend.test\" }\ncapacity = $(( CONC > 32 ? CONC : 32 ))|" \
                    "$d/stoa.toml"
            chmod 755 "$RUN" "$d" "$d/tmp"
            "${PROXY_CPU[@]}" "$STOA" serve --config "$d/stoa.toml" > "$RUN/logs/$name.out" 2>&1 & ;;
        nginx)
            render_conf "$PEERS/nginx-proxy.conf" "$d/nginx.conf" RUN="$d" PORT="$port" BACKEND="$BACKEND"
            sed -i 's|^\( *access_log\) .*;|\1 off;|' "$d/nginx.conf"
            [ "$UPSTREAM" = http ] || sed -i "s|proxy_pass http://backend;|proxy_pass https://backend; \
proxy_ssl_session_reuse on; proxy_ssl_verify on; proxy_ssl_trusted_certificate $PKI/ca.pem; \
proxy_ssl_name backend.test; proxy_ssl_server_name on; proxy_ssl_protocols TLSv1.3;|" "$d/nginx.conf"
            # Every upstream connection kept: with `keepalive 32` and 60 clients, nginx opens (and closes
            # after one request) a connection per request beyond 32: a TLS handshake each (~4x the CPU).
            [ "$UPSTREAM" = http ] || sed -i "s|keepalive 32;|keepalive $(( CONC > 32 ? CONC : 32 ));|" "$d/nginx.conf"
            "${PROXY_CPU[@]}" nginx -p "$d" -e "$d/logs/nginx-error.log" -c "$d/nginx.conf" > "$RUN/logs/$name.out" 2>&1 & ;;
        haproxy)
            render_conf "$PEERS/haproxy.cfg" "$d/haproxy.cfg" RUN="$d" PORT="$port" BACKEND="$BACKEND"
            [ "$UPSTREAM" = http ] || sed -i "s|^\( *server s1 .*\)|\1 ssl verify required ca-file $PKI/ca.pem \
sni str(backend.test) ssl-min-ver TLSv1.3 alpn http/1.1|" "$d/haproxy.cfg"
            "${PROXY_CPU[@]}" haproxy -db -f "$d/haproxy.cfg" > "$RUN/logs/$name.out" 2>&1 & ;;
    esac
    SRV_PID[$name]=$!
    SRV_PORT[$name]=$port
    echo "${SRV_PID[$name]}" > "$RUN/pids/$name.pid"
    srv_ready "$name" "http://127.0.0.1:$port/"
}

FAILED=0 UP=()
for p in "${PROXY_LIST[@]}"; do
    if proxy_start "$p"; then UP+=("$p"); else FAILED=1; fi
done
[ ${#UP[@]} -gt 0 ] || die "no proxy started"
for p in "${UP[@]}"; do
    body=$(curl -s --max-time 5 "http://127.0.0.1:${PROXY_PORT[$p]}/")
    [ "${#body}" -ge $(( BODY - 1 )) ] || { warn "$p: check request got '${body}'"; FAILED=1; }
    timeout 60 wrk -t1 -c"$CONC" -d"$WARM" "http://127.0.0.1:${PROXY_PORT[$p]}/" > "$RUN/raw/warmup-$p.txt" 2>&1 ||
        warn "$p: warm-up failed"
done
log "load average $(cut -d' ' -f1-3 /proc/loadavg); proxies: $(for p in "${UP[@]}"; do printf '%s=PID %s ' "$p" "${SRV_PID[$p]}"; done)"

RUNS_TSV=$RUN/raw/runs.tsv
printf 'rep\tproxy\tstatus\trps\trequests\tnon2xx\terrors\tticks\tus_per_req\tp50_ms\tp99_ms\tloadgen_cpu\tbusy\tother\tsecs\n' > "$RUNS_TSV"
n=${#UP[@]}
for rep in $(seq "$REPS"); do
    for i in $(seq 0 $(( n - 1 ))); do
        p=${UP[$(( (i + rep - 1) % n ))]}
        BUSY=$(wait_quiet)
        run_load "$p" wrk "http://127.0.0.1:${PROXY_PORT[$p]}/" "$BODY" "$RUN/raw/$p-$rep.txt"
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$rep" "$p" "$R_STATUS" "$R_RPS" "$R_REQS" \
            "$R_NON2XX" "$R_ERRS" "$R_TICKS" "$R_USREQ" "$R_P50" "$R_P99" "$R_LGCPU" "$BUSY" "$R_OTHER" "$R_SECS" >> "$RUNS_TSV"
        log "[$rep/$REPS] $(printf '%-8s' "$p") $R_RPS req/s  p99 $R_P99 ms  $R_USREQ us/req  non2xx=$R_NON2XX errors=$R_ERRS  busy=$BUSY% other=$R_OTHER% $([ "$R_STATUS" = ok ] || echo "<< $R_STATUS")"
        if [ "$p" = stoa ] && { [ "$R_STATUS" != ok ] || [ "$R_NON2XX" != 0 ] || [ "$R_ERRS" != 0 ]; }; then FAILED=1; fi
    done
done
for p in "${UP[@]}"; do
    msgs=$(grep -Ev 'listening on|INFO|^\s*$' "$RUN/logs/$p.out" "$RUN/$p/logs/nginx-error.log" 2>/dev/null | tail -n 5 || true)
    [ -z "$msgs" ] || warn "$p logged: $msgs"
done
srv_stop_all

{
    echo "date=$(date '+%F %H:%M %Z')"
    echo "command=$COMMAND"
    echo "machine=$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r); load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "versions=$(nginx -v 2>&1 | sed 's/.*: //'), HAProxy $(haproxy -v | head -1 | awk '{print $3}'), wrk $(dpkg-query -W -f '${Version}' wrk 2>/dev/null), stoa $(git -C "$REPO_DIR" rev-parse --short HEAD)"
    echo "pin=$PIN"
    echo "upstream=$UPSTREAM"
    echo "failed=$FAILED"
} > "$RUN/raw/meta.txt"
mkdir -p "$(dirname "$OUT")"
"$PYTHON" - "$RUN/raw/meta.txt" "$RUNS_TSV" > "$OUT" <<'PY'
import csv, statistics, sys
meta = dict(l.rstrip("\n").split("=", 1) for l in open(sys.argv[1]) if "=" in l)
runs = list(csv.DictReader(open(sys.argv[2]), delimiter="\t"))
def num(x):
    try: return float(x)
    except (TypeError, ValueError): return None
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None
def rng(xs, d=0):
    xs = [x for x in xs if x is not None]
    return f" ({min(xs):,.{d}f}-{max(xs):,.{d}f})" if len(xs) > 1 else ""
def fmt(x, d=0): return "-" if x is None else f"{x:,.{d}f}"
proxies = list(dict.fromkeys(r["proxy"] for r in runs))
print(f"Run {meta['date']}: `{meta['command']}`  ")
print(f"Machine: {meta['machine']}  ")
print(f"Versions: {meta['versions']}  ")
print("Load: wrk -t1 -c60 keep-alive, GET / ("
      + ("a 13-byte body from an nginx backend over TLS 1.3, verified, kept alive, sessions resumed"
         if meta.get("upstream") == "https" else "a 13-byte body from tests/proxy-peers/canned.c")
      + ")"
      + ("; proxies on CPU 0, wrk and the backend on CPU 1" if meta.get("pin") == "1" else ""))
print()
print("**CPU µs/req** = utime+stime of the proxy's own processes (nginx master + worker; HAProxy, Stoa: one), "
      "not the backend's nor wrk's, per completed request. Cells: median of the rounds (min-max). "
      "*other %* = CPU used by everything else on the box during the run (% of one core).")
print()
print("| proxy | req/s | p50 ms | p99 ms | CPU µs/req | non-2xx | errors | wrk CPU % | other % |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
by = {p: [r for r in runs if r["proxy"] == p] for p in proxies}
for p, rs in by.items():
    col = lambda k: [num(r[k]) for r in rs]
    bad = sorted(set(r["status"] for r in rs if r["status"] != "ok"))
    print(f"| {p}{' **' + '; '.join(bad) + '**' if bad else ''} | {fmt(med(col('rps')))}{rng(col('rps'))} "
          f"| {fmt(med(col('p50_ms')), 2)} | {fmt(med(col('p99_ms')), 2)}{rng(col('p99_ms'), 2)} "
          f"| {fmt(med(col('us_per_req')), 1)}{rng(col('us_per_req'), 1)} "
          f"| {sum(int(num(r['non2xx']) or 0) for r in rs)} | {sum(int(num(r['errors']) or 0) for r in rs)} "
          f"| {fmt(med(col('loadgen_cpu')))} | {fmt(med(col('other')))}{rng(col('other'))} |")
print()
if "stoa" in by:
    print("Stoa / peer, per round (the same round's runs paired), median (min-max). Targets (issue 12): "
          "CPU/req <= 0.8x nginx's and <= 0.9x HAProxy's, p99 no worse (<= 1).")
    print()
    print("| peer | req/s ratio | p99 ratio | CPU/req ratio | CPU target |")
    print("|---|---:|---:|---:|---|")
    for peer, tgt in (("nginx", 0.8), ("haproxy", 0.9)):
        if peer not in by: continue
        pairs = [(a, b) for a in by["stoa"] for b in by[peer] if a["rep"] == b["rep"]]
        def ratios(k):
            return [num(a[k]) / num(b[k]) for a, b in pairs if num(a[k]) and num(b[k])]
        r, p, u = ratios("rps"), ratios("p99_ms"), ratios("us_per_req")
        mu = med(u)
        print(f"| {peer} | {fmt(med(r), 2)}{rng(r, 2)} | {fmt(med(p), 2)}{rng(p, 2)} | {fmt(mu, 2)}{rng(u, 2)} "
              f"| <= {tgt}: {'**met**' if mu is not None and mu <= tgt else '**missed**'} |")
    print()
if meta.get("failed") != "0": print("**A proxy failed to start, a check failed or a Stoa run was not clean (see the script's log).**\n")
PY
cat "$OUT"
log "report: $OUT; raw output: $RUN/raw"
[ "$FAILED" = 0 ]
