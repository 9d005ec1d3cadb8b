#!/bin/bash
# bench/keepalive-race.sh - the keep-alive race against an announced timeout: Stoa and nginx in turn in
# front of a backend that says `Keep-Alive: timeout=1` and, like a real server on a real network, drops a
# request that reaches a kept-alive connection in the last 5 % of that second (its close is already on
# its way: the request is read and the connection closed cleanly with no response, so the proxy cannot
# know whether it was acted on). Two clients alternate GET and POST about once a second; the report counts what each proxy
# lost. A proxy that trusts the announced timeout to the last moment loses the requests it cannot send
# again (POST); one that stops using a connection a margin before the announced end loses none.
#
# Usage: bench/keepalive-race.sh   (~30 s per proxy and seed; as root it installs nginx-light)
# Knobs (environment):
#   PROXIES="stoa nginx"   in this order (haproxy too if asked)
#   SEEDS="1"        each seed is one run per proxy; client k of a run uses seed SEED*10+k
#   CLIENTS=2        clients at once, each on its own kept-alive connection, GET and POST in turn
#   DURATION=25      seconds of requests per run
#   INTERVAL=1 JITTER=0.05   each client sends every INTERVAL +- JITTER s (uniform)
#   STAGGER=0        seconds between the clients' starts. Started together, each client's request
#                    finds the connection its previous one left about INTERVAL s before: idle for
#                    about the announced timeout, the race. (STAGGER=0.5 with two clients interleaves
#                    them: a connection then waits half as long and the race is seldom run.)
#   TIMEOUT=1 LATE=5   the backend: tests/proxy-peers/backend.py --idle-close TIMEOUT --advertise
#                    --late-close TIMEOUT*LATE/100 s in ms (announces `Keep-Alive: timeout=TIMEOUT`, closes
#                    a connection idle for TIMEOUT s, and drops, unanswered, a request that arrives after
#                    TIMEOUT*(1-LATE/100) s idle)
#   RUN=/tmp/stoa-bench-keepalive-race   work folder (configs, logs, raw client output)
#   OUT=$RUN/results.md                  Markdown report (also printed to stdout)
#   STOA=target/release/stoa             built with `cargo build --release` when missing (BUILD=1: always)
#   STOA_PORT=18592 NGINX_PORT=18591 HAPROXY_PORT=18595   the proxies' ports (each run gets a fresh
#                    backend on a free port)
#
# Configurations as bench/proxy-race.sh: nginx tests/proxy-peers/nginx-proxy.conf (1 worker, upstream
# keepalive 32, default proxy_next_upstream "error timeout": GET is sent again, POST is not); Stoa one
# worker, a `protocol = "http"` pool with its defaults (keepalive_timeout 2s; the upstream's announced
# timeout shortens it).
# A failure is anything but a 200 at a client: a 502, or the client connection closed or reset.
# Exit status: 0 when Stoa lost no request (the others' counts are what they are), else 1.
set -euo pipefail
case ${1:-} in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

. "$(dirname "$0")/lib.sh"
RUN=${RUN:-/tmp/stoa-bench-keepalive-race}
OUT=${OUT:-$RUN/results.md}
PROXIES=${PROXIES:-stoa nginx}
SEEDS=${SEEDS:-1} CLIENTS=${CLIENTS:-2} STAGGER=${STAGGER:-0} DURATION=${DURATION:-25} INTERVAL=${INTERVAL:-1} JITTER=${JITTER:-0.05}
TIMEOUT=${TIMEOUT:-1} LATE=${LATE:-5}
STOA=${STOA:-$REPO_DIR/target/release/stoa}
[[ $STOA = /* ]] || STOA=$PWD/$STOA
PEERS=$REPO_DIR/tests/proxy-peers
COMMAND="$(for v in PROXIES SEEDS CLIENTS STAGGER DURATION INTERVAL JITTER TIMEOUT LATE; do
    printf '%s=%q ' "$v" "${!v}"; done)bench/keepalive-race.sh"
read -r -a PROXY_LIST <<< "$PROXIES"
read -r -a SEED_LIST <<< "$SEEDS"
declare -A PROXY_PORT=([stoa]=${STOA_PORT:-18592} [nginx]=${NGINX_PORT:-18591} [haproxy]=${HAPROXY_PORT:-18595})
for p in "${PROXY_LIST[@]}"; do [ -n "${PROXY_PORT[$p]:-}" ] || die "unknown proxy: $p (stoa, nginx, haproxy)"; done

tools=(nginx:nginx-light curl:curl python3:python3)
[[ " $PROXIES " = *" haproxy "* ]] && tools+=(haproxy:haproxy)
ensure_tools "${tools[@]}"
[[ " $PROXIES " = *" stoa "* ]] && ensure_fresh_stoa
bench_init
rm -rf "$RUN/raw"; mkdir -p "$RUN/raw"

backend_start() {  # backend_start LOG: backend.py on a free port; sets BACKEND (host:port)
    local i
    : > "$1"   # there before the backend's first line, for the sed below
    "$PYTHON" "$PEERS/backend.py" --port 0 --name race --idle-close "$TIMEOUT" --advertise \
        --late-close "$(awk -v t="$TIMEOUT" -v l="$LATE" 'BEGIN {print t * l * 10}')" > "$1" 2>&1 &
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
            # Kept as root (as bench/proxy-race.sh): the run folder is not opened to nobody.
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
printf 'seed\tproxy\trequests\terrors\tstatuses\tfailures\tlate_drops\tidle_closes\tretries\n' > "$TSV"
log "versions: $(nginx -v 2>&1 | sed 's/.*: //'), stoa $STOA ($(git -C "$REPO_DIR" rev-parse --short HEAD) tree)"
for seed in "${SEED_LIST[@]}"; do
    for p in "${PROXY_LIST[@]}"; do
        backend_start "$RUN/raw/backend-$p-$seed.log"
        proxy_start "$p"
        sleep "$(awk -v s="$TIMEOUT" 'BEGIN {print s + 0.5}')"   # the check's connection has been closed by now
        d0=$(stat_of late_closes) c0=$(stat_of idle_closes)
        log "seed $seed: $p in front of backend.py on $BACKEND: $CLIENTS clients, ${DURATION}s of requests ..."
        pids=()
        for k in $(seq "$CLIENTS"); do
            timeout $(( ${DURATION%.*} + 120 )) "$PYTHON" "$PEERS/race_client.py" "http://127.0.0.1:${PROXY_PORT[$p]}/race" \
                --duration "$DURATION" --interval "$INTERVAL" --jitter "$JITTER" --seed $(( seed * 10 + k )) \
                --method alternate > "$RUN/raw/client-$p-$seed-$k.json" &
            pids+=($!)
            sleep "$STAGGER"
        done
        for pid in "${pids[@]}"; do wait "$pid" || true; done
        d1=$(stat_of late_closes) c1=$(stat_of idle_closes)
        retries=-
        [ "$p" = stoa ] && retries=$(grep -c 'retrying on a new one' "$RUN/stoa/logs/out.log" || true)
        "$PYTHON" - "$seed" "$p" $(( d1 - d0 )) $(( c1 - c0 )) "$retries" "$RUN/raw/client-$p-$seed-"*.json >> "$TSV" <<'PY'
import json, sys
seed, proxy, drops, closes, retries = sys.argv[1:6]
n = e = 0
st, fails = {}, []
for k, path in enumerate(sys.argv[6:], 1):
    try:
        r = json.load(open(path))
    except (OSError, ValueError):
        r = {"requests": 0, "errors": 1, "statuses": {}, "failures": ["client %d failed" % k]}
    n += r["requests"]; e += r["errors"]
    for s, c in r["statuses"].items():
        st[s] = st.get(s, 0) + c
    fails += [f"c{k}#{f['n']} {f['method']} {f.get('status', f.get('error', ''))}" if isinstance(f, dict) else str(f)
              for f in r["failures"]]
print("\t".join(map(str, [seed, proxy, n, e, " ".join(f"{k}:{v}" for k, v in sorted(st.items())),
                          "; ".join(fails) or "-", drops, closes, retries])))
PY
        log "$(tail -n1 "$TSV" | cut -f2-4,7-9 | tr '\t' ' ')"
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
print(f"Versions: {sh('nginx -v 2>&1').split(': ')[-1]}")
print()
print("| seed | proxy | requests | failed | statuses | failures | backend late drops | backend idle closes | Stoa retries |")
print("|---|---|---:|---:|---|---|---:|---:|---:|")
for r in rows:
    print(f"| {r['seed']} | {r['proxy']} | {r['requests']} | **{r['errors']}** | {r['statuses']} | {r['failures']} "
          f"| {r['late_drops']} | {r['idle_closes']} | {r['retries']} |")
print()
tot = {}
for r in rows:
    t = tot.setdefault(r["proxy"], [0, 0])
    t[0] += int(r["requests"]); t[1] += int(r["errors"])
print("Failed side by side: " + ", ".join(f"{p} {e} of {n}" for p, (n, e) in tot.items()) + ".")
PY
cat "$OUT"
bad=$(awk -F'\t' '$2 == "stoa" && $4 != 0' "$TSV")
[ -z "$bad" ] || { log "Stoa lost requests (see $RUN/raw)"; exit 1; }
