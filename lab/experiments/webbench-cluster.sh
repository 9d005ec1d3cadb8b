#!/bin/bash
# ABOUT: WebBench's 61 MB tree: requests/s and bytes/s for 1-64 clients, and 1, 2, 4 Stoa nodes in network namespaces with traffic split by percentages (webbench-carrier-class-linux.txt)
#
# The paper (Ibrahim, Ericsson Research) ran WebBench: 16 client PCs, a
# controller, and the standard 61 MB workload tree (WBTREE) on an NFS
# document root shared by 1-12 single-CPU server nodes of a Linux cluster;
# the controller gives each node a percentage of the traffic (its Figure 5);
# each client sends its next request as soon as a response arrives, and the
# results are requests/s and bytes/s against 1-64 clients (Apache 1.3.14:
# 828 requests/s, Apache 2.0a8: 846 on one CPU; 4,152 and 4,434 on eight).
# Here:
#   1. the tree (`stoa bench tree --size 61MB`), one Stoa node (one
#      worker, as one CPU) and Apache (event MPM) beside it, against 1, 2,
#      4, 8, 16, 32 and 64 clients (a `[tree]` mix, keep-alive);
#   2. the cluster: 1, 2 and 4 Stoa nodes, each in a network namespace of
#      its own (ip netns, a veth pair each, 10.196.K.0/24) serving the same
#      document root (the paper's NFS: here one file system), the traffic
#      split by configured percentages as WebBench's controller did: one
#      `stoa bench` process per node with the node's share of the clients,
#      all at once, their HDR logs and JSON results merged by `stoa bench
#      merge`; the per-node accounting from both sides (each client
#      process's counts, each node's access log); and the same nodes behind
#      a Stoa reverse proxy as the front end (round-robin).
# Without network namespaces (not root, no CAP_NET_ADMIN) the nodes listen
# on 127.0.0.2, 127.0.0.3, ... instead (said in the summary). Knobs: DUR
# (seconds per run), CLIENTS ("1 2 4 ..."), CLUSTER_CLIENTS, CLUSTER_RATE
# (the open-loop split's total requests/s), TREE_SIZE.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
lab_init
ensure_tools python3:python3 curl:curl apache2:apache2 ip:iproute2
if [ "$QUICK" = 1 ]; then
    DUR=${DUR:-1} CLIENTS=${CLIENTS:-1 16 64} CLUSTER_CLIENTS=${CLUSTER_CLIENTS:-16} CLUSTER_RATE=${CLUSTER_RATE:-1000}
else
    DUR=${DUR:-$LAB_SECS} CLIENTS=${CLIENTS:-1 2 4 8 16 32 64} CLUSTER_CLIENTS=${CLUSTER_CLIENTS:-32} CLUSTER_RATE=${CLUSTER_RATE:-2000}
fi
TREE_SIZE=${TREE_SIZE:-61MB}
P_NODE=19610 P_APACHE=19611 P_FRONT=19612
NS_PREFIX=swb$$
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# ---------------------------------------------------------------- the tree
mkdir -p "$RUN/www"
rm -rf "$RUN/www/wbtree"
"$STOA" bench tree "$RUN/www/wbtree" --size "$TREE_SIZE" > "$OUT/raw/tree.txt"
TREE_FILES=$(find "$RUN/www/wbtree" -type f | wc -l)
TREE_BYTES=$(du -sb "$RUN/www/wbtree" | cut -f1)
chmod -R a+rX "$RUN/www"; chmod 755 "$RUN"
log "tree: $TREE_FILES files, $TREE_BYTES bytes"

scenario() {  # scenario FILE NAME URL CLIENTS [RATE]: closed loop, or open at RATE/s
    cat > "$1" <<TOML
[run]
name = "$2"
url = "$3"
keep_alive = true
duration = "${DUR}s"
timeout = "30s"
connections = $4
${5:+rate = $5}
[tree]
dir = "$RUN/www/wbtree"
prefix = "/wbtree/"
TOML
}

node_conf() {  # node_conf FILE ADDR PORT ACCESS_LOG
    cat > "$1" <<TOML
listen = ["$2:$3"]
workers = 1
[log]
access = "$4"
[limits]
keepalive_timeout = "60s"
[[site]]
root = "$RUN/www"
TOML
}

# ---------------------------------------------------------------- 1. clients
# One CPU for every server: Stoa (one worker), Apache 2.4 with the event
# MPM and with prefork (the modern forms of the paper's Apache 2.0a8 and
# 1.3.14) and Tomcat 10 (the paper's Tomcat 3.1), each alone, pinned to
# SERVER_CPUS, restarted before every round; stoa bench on LOAD_CPUS;
# REPEATS rounds, the servers alternating within each.
node_conf "$RUN/single.toml" 127.0.0.1 "$P_NODE" off
first=$(cd "$RUN/www" && find wbtree -type f | sort | sed -n 1p)
SERVERS1=(stoa apache2-event apache2-prefork tomcat)
declare -A PORT1=([stoa]=$P_NODE [apache2-event]=$P_APACHE [apache2-prefork]=$P_APACHE [tomcat]=$P_FRONT)
start() {
    case $1 in
        stoa)
            "$STOA" serve --config "$RUN/single.toml" > "$RUN/logs/stoa.out" 2>&1 &
            SRV_PID[stoa]=$!; echo "${SRV_PID[stoa]}" > "$RUN/pids/stoa.pid"
            srv_ready stoa "http://127.0.0.1:$P_NODE/$first" || die "stoa did not start"
            srv_pin stoa ;;
        apache2-event) APACHE_MPM=event apache_start "$P_APACHE" "$RUN/www" apache2-event ;;
        apache2-prefork) APACHE_MPM=prefork apache_start "$P_APACHE" "$RUN/www" apache2-prefork ;;
        tomcat) tomcat_start "$P_FRONT" "$RUN/www/wbtree" ;;
    esac
    check_url "http://127.0.0.1:${PORT1[$1]}/$first" "$RUN/www/$first" || die "$1 does not serve the tree: $CHECK_MSG"
}
clients_round() {
    local srv c port tag
    for srv in "${SERVERS1[@]}"; do
        # --quick: Tomcat (20-40 s to start on a busy box) starts once
        srv_alive "$srv" || start "$srv"
        port=${PORT1[$srv]}
        for c in $CLIENTS; do
            tag=$srv-c$c
            scenario "$RUN/sc.toml" "$tag" "http://127.0.0.1:$port/" "$c"
            lab_measure "$tag" "$STOA" bench -q --scenario "$RUN/sc.toml" --json "$OUT/raw/$tag-$REP.json" \
                > "$OUT/raw/$tag-$REP.txt" 2>&1 || warn "stoa bench $tag exited $?"
            python3 - "$OUT/raw/$tag-$REP.json" "$tag" "$REP" "${M_SRV_CPU_S[$srv]:-}" "$LAB_DIR/src" >> "$OUT/raw/measures.jsonl" <<'PY' || true
import json, sys
sys.path.insert(0, sys.argv[5])
import verdict
d = json.load(open(sys.argv[1]))
tag, rep, cpu = sys.argv[2], int(sys.argv[3]), sys.argv[4]
rec = lambda k, v, u: print(json.dumps({"label": "%s-%s" % (k, tag), "rep": rep, "value": v, "unit": u}))
rec("rps", d["requests_per_second"], "req/s")
rec("mbps", d["bytes"]["received"] / d["duration_s"] / 1e6, "MB/s")
rec("errors", verdict.errors(d), "requests")
if cpu and d.get("responses"):
    rec("cpu-us", 1e6 * float(cpu) / d["responses"], "us/req")
PY
            log "round $REP, $srv, $c clients: $(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print('%.0f requests/s, %.1f MB/s' % (d['requests_per_second'], d['bytes']['received'] / d['duration_s'] / 1e6))" "$OUT/raw/$tag-$REP.json" 2>/dev/null || echo '-')"
        done
        [ "$QUICK" = 1 ] && [ "$srv" = tomcat ] && [ "$REP" != "$REPEATS" ] || srv_stop "$srv"
    done
}
lab_repeat clients_round

# ---------------------------------------------------------------- 2. the cluster
# Network namespaces, cleaned up on any exit (the EXIT trap runs after the
# servers in them are stopped).
NETNS=1
NS_MADE=()
ns_cleanup() {
    local n
    for n in "${NS_MADE[@]}"; do
        ip link del "${n}h" 2>/dev/null || true
        ip netns del "$n" 2>/dev/null || true
    done
    NS_MADE=()
}
trap 'srv_stop_all; ns_cleanup; lab_meta_end' EXIT
ns_make() {  # ns_make K -> NODE_ADDR[K]
    local k=$1 n=${NS_PREFIX}n$1
    ip netns add "$n" 2>/dev/null || return 1
    NS_MADE+=("$n")
    ip link add "${n}h" type veth peer name "${n}n" &&
        ip link set "${n}n" netns "$n" &&
        ip addr add "10.196.$k.1/24" dev "${n}h" &&
        ip link set "${n}h" up &&
        ip netns exec "$n" ip addr add "10.196.$k.2/24" dev "${n}n" &&
        ip netns exec "$n" ip link set "${n}n" up &&
        ip netns exec "$n" ip link set lo up || return 1
    NODE_ADDR[$k]=10.196.$k.2
}
# Namespaces a killed run (SIGKILL: no trap) left behind: swbPIDnK, whose
# PID is gone.
for n in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^swb[0-9]+n[0-9]+$' || true); do
    p=${n#swb}; p=${p%%n*}
    if ! alive "$p"; then
        warn "removing network namespace $n left by an earlier run (PID $p is gone)"
        ip link del "${n}h" 2>/dev/null || true
        ip netns del "$n" 2>/dev/null || true
    fi
done
declare -A NODE_ADDR=()
for k in 1 2 3 4; do
    if [ $NETNS = 1 ] && ! ns_make "$k"; then
        warn "network namespaces are not available here (ip netns add failed: not root or no CAP_NET_ADMIN): the nodes listen on 127.0.0.2-5 instead"
        NETNS=0
        ns_cleanup
    fi
done
if [ $NETNS = 0 ]; then
    for k in 1 2 3 4; do NODE_ADDR[$k]=127.0.0.$((k + 1)); done
fi

nodes_start() {  # nodes_start N: nodes 1..N, each with its access log
    local k
    for k in $(seq "$1"); do
        rm -f "$RUN/logs/node$k-access.log"
        node_conf "$RUN/node$k.toml" "${NODE_ADDR[$k]}" "$P_NODE" "$RUN/logs/node$k-access.log"
        if [ $NETNS = 1 ]; then
            ip netns exec "${NS_PREFIX}n$k" "$STOA" serve --config "$RUN/node$k.toml" > "$RUN/logs/node$k.out" 2>&1 &
        else
            "$STOA" serve --config "$RUN/node$k.toml" > "$RUN/logs/node$k.out" 2>&1 &
        fi
        SRV_PID[node$k]=$!; echo "${SRV_PID[node$k]}" > "$RUN/pids/node$k.pid"
    done
    for k in $(seq "$1"); do
        local i ok=0
        for i in $(seq 100); do
            curl -s -o /dev/null --max-time 1 "http://${NODE_ADDR[$k]}:$P_NODE/$first" && { ok=1; break; }
            sleep 0.1
        done
        [ $ok = 1 ] || { tail "$RUN/logs/node$k.out" >&2; die "node $k did not answer at ${NODE_ADDR[$k]}:$P_NODE"; }
        check_url "http://${NODE_ADDR[$k]}:$P_NODE/$first" "$RUN/www/$first" || die "node $k: $CHECK_MSG"
    done
    sleep 1.2   # the access logs are flushed every second: start them empty of checks
    for k in $(seq "$1"); do : > "$RUN/logs/node$k-access.log"; done
}
nodes_stop() { local k; for k in $(seq "$1"); do srv_stop "node$k"; done; }
access_counts() {  # access_counts N: requests in each node's access log (after a flush)
    local k
    for k in $(seq "$1"); do printf '%s ' "$(wc -l < "$RUN/logs/node$k-access.log")"; done
}

# split NAME PCT...: one stoa bench process per node, its share of the
# CLUSTER_CLIENTS clients, all started together; then the merge. With
# RATE=R set: open loop instead, each process at its share of R
# requests/s (over 64 connections), so the split is exact whatever the
# nodes' speeds.
CLUSTER_RUNS=()
split() {
    local name=$1 k=0 pct n pids=() total=0 rate=
    shift
    local nn=$#
    nodes_start "$nn"
    for pct; do
        k=$((k + 1))
        n=$(( (CLUSTER_CLIENTS * pct + 50) / 100 )); [ "$n" -ge 1 ] || n=1
        if [ -n "${RATE:-}" ]; then n=64; rate=$(( RATE * pct / 100 )); fi
        total=$((total + n))
        scenario "$RUN/$name-node$k.toml" "$name-node$k" "http://${NODE_ADDR[$k]}:$P_NODE/" "$n" "$rate"
        "$STOA" bench -q --scenario "$RUN/$name-node$k.toml" --json "$OUT/raw/$name-node$k.json" \
            --hdr-log "$OUT/raw/$name-node$k.hdr" > "$OUT/raw/$name-node$k.txt" 2>&1 &
        pids+=($!)
        BG_PIDS+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || warn "a stoa bench process of $name exited $?"; done
    BG_PIDS=()
    sleep 1.2
    echo "$name|$*|$(access_counts "$nn")|$total|${RATE:-}" >> "$RUN/cluster.txt"
    nodes_stop "$nn"
    "$STOA" bench merge --json "$OUT/raw/$name-merged.json" --hdr-log "$OUT/raw/$name-merged.hdr" \
        "$OUT"/raw/"$name"-node*.hdr "$OUT"/raw/"$name"-node*.json > "$OUT/raw/$name-merged.txt" ||
        die "stoa bench merge failed for $name"
    CLUSTER_RUNS+=("$name")
    log "$name: $(tail -n +1 "$OUT/raw/$name-merged.txt" | grep -m1 '^Results')"
}
# front NAME N: the N nodes behind a Stoa reverse proxy (round-robin), one
# stoa bench process against the proxy.
front() {
    local name=$1 nn=$2 k addrs=""
    nodes_start "$nn"
    for k in $(seq "$nn"); do addrs+="${addrs:+, }\"${NODE_ADDR[$k]}:$P_NODE\""; done
    cat > "$RUN/front.toml" <<TOML
listen = ["127.0.0.1:$P_FRONT"]
workers = 1
[log]
access = "off"
[[pool]]
name = "nodes"
protocol = "http"
address = [$addrs]
balance = "round-robin"
[[site]]
[[site.route]]
prefix = "/"
proxy = { pool = "nodes" }
TOML
    "$STOA" serve --config "$RUN/front.toml" > "$RUN/logs/front.out" 2>&1 &
    SRV_PID[front]=$!; echo "${SRV_PID[front]}" > "$RUN/pids/front.pid"
    local i
    for i in $(seq 100); do curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$P_FRONT/$first" && break; sleep 0.1; done
    check_url "http://127.0.0.1:$P_FRONT/$first" "$RUN/www/$first" || die "the front end: $CHECK_MSG"
    sleep 1.2
    for k in $(seq "$nn"); do : > "$RUN/logs/node$k-access.log"; done
    scenario "$RUN/$name.toml" "$name" "http://127.0.0.1:$P_FRONT/" "$CLUSTER_CLIENTS"
    "$STOA" bench -q --scenario "$RUN/$name.toml" --json "$OUT/raw/$name.json" --hdr-log "$OUT/raw/$name.hdr" \
        > "$OUT/raw/$name.txt" 2>&1 || warn "stoa bench $name exited $?"
    sleep 1.2
    echo "$name|front $nn|$(access_counts "$nn")|$CLUSTER_CLIENTS|" >> "$RUN/cluster.txt"
    srv_stop front
    nodes_stop "$nn"
    CLUSTER_RUNS+=("$name")
}

: > "$RUN/cluster.txt"
split nodes1 100
if [ "$QUICK" = 0 ]; then
    split nodes2 50 50
    split nodes4 25 25 25 25
    split nodes4-uneven 40 30 20 10
fi
RATE=$CLUSTER_RATE split nodes4-uneven-rate 40 30 20 10
front front2 2
[ "$QUICK" = 1 ] || front front4 4
srv_stop_all
ns_cleanup
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

# the body first: it writes verdicts.json and clients.svg, which the head reads
python3 "$LAB_DIR/src/webbench-summary.py" "$OUT" "$RUN/cluster.txt" "$QUICK" "$(machine)" "$LOAD_START" "$LOAD_END" \
    "$NETNS" "$TREE_FILES" "$TREE_BYTES" "$DUR" "$CLIENTS" "$CLUSTER_CLIENTS" "$CLUSTER_RATE" > "$RUN/summary-body.md" ||
    die "webbench-summary.py failed"
{ lab_summary_head; echo; cat "$RUN/summary-body.md"; } > "$OUT/summary.md"
log "wrote $OUT/summary.md"
cat "$OUT/summary.md"
