#!/bin/bash
# bench/proxy-race.sh - the keep-alive race (issue 12): Stoa, nginx and HAProxy in turn in front of
# the same kind of backend, counting the requests each one loses.
#
# Usage: bench/proxy-race.sh   (~35 s per proxy and seed; as root it installs nginx-light and haproxy)
# Knobs (environment):
#   PROXIES="stoa nginx haproxy"   in this order, one after the other
#   SEEDS="1"        race_client.py seeds; each seed is one 30 s run per proxy
#   DURATION=30      seconds of requests per run
#   INTERVAL=1 JITTER=0.01   requests every INTERVAL +- JITTER s (uniform), GET and POST in turn
#   IDLE_CLOSE=1 RACE_WINDOW=5   the backend: tests/proxy-peers/backend.py --idle-close 1
#                    --race-window 5 (closes a kept-alive connection idle for 1 s; a request arriving
#                    within 5 ms after that is answered with a reset and no response, as if it had
#                    crossed the backend's FIN on a network)
#   RUN=/tmp/stoa-bench-proxy-race   work folder (configs, logs, raw client output)
#   OUT=$RUN/results.md              Markdown report (also printed to stdout)
#   STOA=target/release/stoa         built with `cargo build --release` when missing (BUILD=1: always)
# Ports: Stoa 18592, nginx 18591, HAProxy 18595; each run gets a fresh backend on a free port.
#
# Configurations: nginx tests/proxy-peers/nginx-proxy.conf (1 worker, upstream keepalive 32,
# proxy_http_version 1.1, its default proxy_next_upstream "error timeout": idempotent requests are
# retried, POST is not); HAProxy tests/proxy-peers/haproxy.cfg (nbthread 1, http-reuse safe, its
# default retry-on conn-failure); Stoa one worker, a `protocol = "http"` pool with its defaults
# (keepalive_timeout 2s, so its parked connections outlive the backend's 1 s).
# An error is anything but a 200 at the client: a 502, or the client connection closed or reset.
# Exit status: 0 when Stoa lost no request (the others' counts are what they are), else 1.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
RUN=${RUN:-/tmp/stoa-bench-proxy-race}
OUT=${OUT:-$RUN/results.md}
PROXIES=${PROXIES:-stoa nginx haproxy}
SEEDS=${SEEDS:-1} DURATION=${DURATION:-30} INTERVAL=${INTERVAL:-1} JITTER=${JITTER:-0.01}
IDLE_CLOSE=${IDLE_CLOSE:-1} RACE_WINDOW=${RACE_WINDOW:-5}
STOA=${STOA:-$REPO_DIR/target/release/stoa}
[[ $STOA = /* ]] || STOA=$PWD/$STOA
PEERS=$REPO_DIR/tests/proxy-peers
COMMAND="$(for v in PROXIES SEEDS DURATION INTERVAL JITTER IDLE_CLOSE RACE_WINDOW; do
    printf '%s=%q ' "$v" "${!v}"; done)bench/proxy-race.sh"
read -r -a PROXY_LIST <<< "$PROXIES"
read -r -a SEED_LIST <<< "$SEEDS"
declare -A PROXY_PORT=([stoa]=18592 [nginx]=18591 [haproxy]=18595)
for p in "${PROXY_LIST[@]}"; do [ -n "${PROXY_PORT[$p]:-}" ] || die "unknown proxy: $p (stoa, nginx, haproxy)"; done

ensure_tools nginx:nginx-light haproxy:haproxy curl:curl python3:python3
[[ " $PROXIES " = *" stoa "* ]] && ensure_fresh_stoa
bench_init
rm -rf "$RUN/raw"; mkdir -p "$RUN/raw"

backend_start() {  # backend_start LOG: backend.py on a free port; sets BACKEND (host:port)
    local i
    "$PYTHON" "$PEERS/backend.py" --port 0 --name race --idle-close "$IDLE_CLOSE" --race-window "$RACE_WINDOW" \
        > "$1" 2>&1 &
    SRV_PID[backend]=$!
    for i in $(seq 50); do
        BACKEND=$(sed -n '1s/^listening on //p' "$1")
        [ -n "$BACKEND" ] && return 0
        sleep 0.1
    done
    die "backend.py did not start: $(cat "$1")"
}

proxy_start() {  # proxy_start NAME: NAME in front of $BACKEND on its port, answering
    local name=$1 port=${PROXY_PORT[$1]} d=$RUN/$1 i
    port_free "$port" || die "$name: port $port is in use"
    rm -rf "$d"; mkdir -p "$d/logs" "$d/tmp"
    case $name in
        stoa)
            render_conf "$PEERS/stoa-proxy.toml" "$d/stoa.toml" RUN="$d" PORT="$port" BACKEND="$BACKEND"
            # Kept as root, as this script always ran it: unlike bench/proxy.sh it does not open its run folder to nobody.
            sed -i 's/^workers = 1$/&\nuser = "root"/' "$d/stoa.toml"
            "$STOA" serve --config "$d/stoa.toml" > "$d/logs/out.log" 2>&1 & ;;
        nginx)
            render_conf "$PEERS/nginx-proxy.conf" "$d/nginx.conf" RUN="$d" PORT="$port" BACKEND="$BACKEND"
            nginx -p "$d" -e "$d/logs/nginx-error.log" -c "$d/nginx.conf" > "$d/logs/out.log" 2>&1 & ;;
        haproxy)
            render_conf "$PEERS/haproxy.cfg" "$d/haproxy.cfg" RUN="$d" PORT="$port" BACKEND="$BACKEND"
            haproxy -db -f "$d/haproxy.cfg" > "$d/logs/out.log" 2>&1 & ;;
    esac
    SRV_PID[$name]=$!
    for i in $(seq 100); do
        alive "${SRV_PID[$name]}" || break
        curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/check" && return 0
        sleep 0.1
    done
    die "$name did not answer on port $port: $(tail -n 5 "$d/logs/"*.log)"
}

stat_of() {  # stat_of NAME: a number from the backend's /stats
    curl -s --max-time 2 "http://$BACKEND/stats" | "$PYTHON" -c "import json,sys; print(json.load(sys.stdin)['$1'])"
}

TSV=$RUN/raw/runs.tsv
printf 'seed\tproxy\trequests\terrors\tstatuses\tfailures\tidle_closes\trace_resets\tretries\n' > "$TSV"
log "versions: $(nginx -v 2>&1 | sed 's/.*: //'), $(haproxy -v | head -1 | awk '{print $1, $3}'), stoa $(git -C "$REPO_DIR" rev-parse --short HEAD)"
for seed in "${SEED_LIST[@]}"; do
    for p in "${PROXY_LIST[@]}"; do
        backend_start "$RUN/raw/backend-$p-$seed.log"
        proxy_start "$p"
        sleep "$(awk -v s="$IDLE_CLOSE" 'BEGIN {print s + 0.5}')"   # the check's connection has been closed by now
        c0=$(stat_of idle_closes) r0=$(stat_of race_resets)
        log "seed $seed: $p in front of backend.py on $BACKEND: ${DURATION}s of requests ..."
        f=$RUN/raw/client-$p-$seed.json
        timeout $(( ${DURATION%.*} + 120 )) "$PYTHON" "$PEERS/race_client.py" "http://127.0.0.1:${PROXY_PORT[$p]}/race" \
            --duration "$DURATION" --interval "$INTERVAL" --jitter "$JITTER" --seed "$seed" --method alternate > "$f" || true
        [ -s "$f" ] || echo '{"requests": 0, "errors": -1, "statuses": {}, "failures": ["client failed"]}' > "$f"
        c1=$(stat_of idle_closes) r1=$(stat_of race_resets)
        retries=-
        [ "$p" = stoa ] && retries=$(grep -c 'retrying on a new one' "$RUN/stoa/logs/out.log" || true)
        "$PYTHON" - "$f" "$seed" "$p" $(( c1 - c0 )) $(( r1 - r0 )) "$retries" >> "$TSV" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
fails = "; ".join(f"#{f['n']} {f['method']} {f.get('status', f.get('error', ''))}" if isinstance(f, dict) else str(f)
                  for f in r["failures"])
st = " ".join(f"{k}:{v}" for k, v in sorted(r["statuses"].items()))
print("\t".join(map(str, [sys.argv[2], sys.argv[3], r["requests"], r["errors"], st, fails or "-",
                          sys.argv[4], sys.argv[5], sys.argv[6]])))
PY
        log "$(tail -n1 "$TSV" | cut -f2-9 | tr '\t' ' ')"
        srv_stop "$p"; srv_stop backend
    done
done

mkdir -p "$(dirname "$OUT")"
"$PYTHON" - "$TSV" "$COMMAND" > "$OUT" <<'PY'
import csv, subprocess, sys, time
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
sh = lambda c: subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
print(f"Run {time.strftime('%Y-%m-%d %H:%M %Z')}: `{sys.argv[2]}`  ")
model = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
load = " ".join(open("/proc/loadavg").read().split()[:3])
print(f"Machine: {sh('nproc')} cores, {model}, kernel {sh('uname -r')}; load average {load}  ")
hv = sh("haproxy -v").split()
print(f"Versions: {sh('nginx -v 2>&1').split(': ')[-1]}, HAProxy {hv[2] if len(hv) > 2 else '?'}")
print()
print("| seed | proxy | requests | errors | statuses | failures | backend idle closes | raced (reset) | Stoa retries |")
print("|---|---|---:|---:|---|---|---:|---:|---:|")
for r in rows:
    print(f"| {r['seed']} | {r['proxy']} | {r['requests']} | **{r['errors']}** | {r['statuses']} | {r['failures']} "
          f"| {r['idle_closes']} | {r['race_resets']} | {r['retries']} |")
print()
tot = {}
for r in rows:
    t = tot.setdefault(r["proxy"], [0, 0])
    t[0] += int(r["requests"]); t[1] += int(r["errors"])
print("Errors side by side: " + ", ".join(f"{p} {e} of {n}" for p, (n, e) in tot.items()) + ".")
PY
cat "$OUT"
bad=$(awk -F'\t' '$2 == "stoa" && $4 != 0' "$TSV")
[ -z "$bad" ] || { log "Stoa lost requests (see $RUN/raw)"; exit 1; }
