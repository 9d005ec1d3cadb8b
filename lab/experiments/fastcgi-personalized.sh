#!/bin/bash
# ABOUT: personalized content: cached FastCGI with affinity, FastCGI with its cache off, the in-process API with and without a kept connection, random routing, CGI (fastcgi-application-performance.txt)
#
# Open Market's FastCGI paper (§5): each request checks a user's password,
# reads the user's attributes from a database and fills them into a 3,000
# byte content file. 10 client processes on disjoint sets of users,
# throughput only:
#   FastCGI (kept connection, a cache of users, affinity)  83 requests/s
#   API (a connection per request, no cache)                27
#   API with sustained database connections                 61
#   FastCGI with its cache disabled                         50
# Here every design runs in one Stoa (`workers = 1`, pinned with its
# FastCGI processes to the server CPU; the load on the other CPUs):
#   fcgi-affinity  `stoa demo-app personalized` cached, 2 processes,
#                  affinity = "query:user", each process's cache bounded
#                  (CACHE users, the least recently used discarded)
#   fcgi-random    the same routed at random: affinity on a per-request
#                  number (`r={seq}`), so each request reaches a process
#                  drawn by a hash, whoever its user (the paper's pool of
#                  processes, "assigned to an idle child at random")
#   fcgi-uncached  the app's uncached mode: the kept connection read for
#                  every request, no cache (§5.4's "cache disabled")
#   fcgi-api       the app's per-request mode behind FastCGI
#   lua-api        the paper's API: Stoa's in-process Lua route
#                  (lab/src/dynamic/personalized.lua), a connection per request
#   lua-kept       the API with a kept connection (one per worker)
#   lua-cached     the API with a kept connection and a cache (§6)
#   cgi            a process and a connection per request
# and in full runs the contrasts, on caches that never discard:
#   fcgi-random-unbounded  fcgi-random with unbounded caches
#   fcgi-affinity-fixed, fcgi-random-fixed
#                  the same pools with each client's users fixed (drawn at
#                  random from its own SET users): every cache soon holds
#                  every user, so routing cannot matter (the previous
#                  form of this experiment)
# The users (§5.1, §5.3): 10 clients on disjoint sets of users; each client
# visits WINDOW users in turn, and a user makes VISITS requests (10, the
# paper's) and leaves, replaced by a new one (`stoa bench`'s `{seq%N}` and
# `{seq/N}`: user cK-sS-gG is client K's S-th turn in generation G), so the
# caches miss in steady state as the paper's did: with affinity once per
# user, at random once per user and process, and more when a process's
# cache cannot hold every user. CACHE (users per process) defaults to a
# fifth more than the users affinity routes to a process (10 * WINDOW / 2),
# fewer than all of them. Each FastCGI process counts its lookups and hits
# (STOA_PERSONALIZED_STATS); the summary gives the hit rate.
# Stoa restarts before every measured run (cold caches; a short warm-up
# first), REPEATS rounds (5; --quick 2) alternate the designs. Knobs: USERS
# (cycle, the default, or fixed: every cell on fixed sets), WINDOW (100),
# VISITS (10), CACHE, SET (users per client of the fixed sets, 100),
# LAB_SECS (seconds per run), REPEATS, SERVER_CPUS, LOAD_CPUS, CELLS
# (a space-separated subset).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
lab_init
ensure_tools python3:python3 curl:curl taskset:util-linux
SRC=$LAB_DIR/src/dynamic
PORT=18501
SET=${SET:-100}
USERS=${USERS:-cycle}
WINDOW=${WINDOW:-100}
VISITS=${VISITS:-10}
PROCS=2
CACHE=${CACHE:-$(( (10 * WINDOW / PROCS) * 6 / 5 ))}
case $USERS in cycle|fixed) ;; *) die "USERS=$USERS: cycle or fixed" ;; esac
[ "$WINDOW" -ge 1 ] && [ "$VISITS" -ge 1 ] || die "WINDOW and VISITS must be at least 1"
# The paper's designs, then (full runs) the contrasts that show what makes
# affinity pay: the caches unbounded, with users coming and going, and
# with fixed sets of users.
DEFAULT_CELLS="fcgi-affinity fcgi-random fcgi-uncached fcgi-api lua-api lua-kept lua-cached cgi"
[ "$QUICK" = 1 ] || DEFAULT_CELLS+=" fcgi-random-unbounded fcgi-affinity-fixed fcgi-random-fixed"
read -r -a CELLS <<< "${CELLS:-$DEFAULT_CELLS}"
# A generation of users every WINDOW * VISITS requests of a client: enough
# generations for more requests than a client sends in a run.
LIFE=$(( WINDOW * VISITS ))
GENS=$(( LAB_SECS * 4000 / LIFE + 2 ))
WARM_SECS=1; [ "$QUICK" = 1 ] && WARM_SECS=0.5
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
RUN_T0=$(date +%s)
mkdir -p "$RUN/www" "$RUN/content" "$RUN/stats"

# The users (records of about 100 bytes) and a 3,000-byte content file.
"$PYTHON" - "$RUN/users.db" "$RUN/content/page.html" "$SET" "$WINDOW" "$GENS" <<'PY2'
import os, sqlite3, sys
db, page, nset, window, gens = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
if os.path.exists(db): os.remove(db)
c = sqlite3.connect(db)
c.execute("CREATE TABLE users(id TEXT PRIMARY KEY, password TEXT, attrs TEXT)")
def rec(uid, i):
    return (uid, "pw" + uid, "NAME=User %s;CITY=City %d;PLAN=gold;LANG=en;SINCE=19%02d" % (uid, i % 97, i % 100))
ids = ["c%du%d" % (k, j) for k in range(1, 11) for j in range(1, nset + 1)]
ids += ["c%ds%dg%d" % (k, s, g) for k in range(1, 11) for g in range(gens) for s in range(window)]
c.executemany("INSERT INTO users VALUES (?, ?, ?)", (rec(u, i) for i, u in enumerate(ids)))
c.commit()
para = "<p>Dear $NAME of $CITY, your $PLAN plan (since $SINCE, language $LANG) includes this page.</p>\n"
body = "<!DOCTYPE html>\n<title>For $NAME</title>\n"
while len(body) + len(para) < 3000: body += para
open(page, "w").write(body + " " * (3000 - len(body)))
PY2

env_kv="STOA_PERSONALIZED_DB = \"$RUN/users.db\", STOA_PERSONALIZED_CONTENT = \"$RUN/content\""
stats_kv="STOA_PERSONALIZED_STATS = \"$RUN/stats\", STOA_PERSONALIZED_CACHE = \"$CACHE\""
cat > "$RUN/personalized.cgi" <<SH
#!/bin/sh
exec "$STOA" demo-app personalized-cgi
SH
chmod 755 "$RUN/personalized.cgi"
for m in per-request kept cached; do
    sed -e "s|@MODE@|$m|" -e "s|@DB@|$RUN/users.db|" -e "s|@CONTENT@|$RUN/content|" "$SRC/personalized.lua" > "$RUN/lua-$m.lua"
done
# The config: every route and pool (checked, and served while every design's
# page is compared), or one cell's (its route and the pool behind it: a
# measured run starts only the processes it uses).
pool_toml() {  # pool_toml NAME
    local affinity="" mode=cached stats="$stats_kv"
    case $1 in
        affinity) affinity='affinity = "query:user"' ;;
        random) affinity='affinity = "query:r"' ;;
        affinity-unbounded) affinity='affinity = "query:user"'; stats="STOA_PERSONALIZED_STATS = \"$RUN/stats\"" ;;
        random-unbounded) affinity='affinity = "query:r"'; stats="STOA_PERSONALIZED_STATS = \"$RUN/stats\"" ;;
        uncached) mode=uncached ;;
        api) mode=per-request ;;
    esac
    printf '[[pool]]\nname = "%s"\ncommand = ["%s", "demo-app", "personalized"]\nprocesses = %s\n%s\nenv = { %s, %s, STOA_PERSONALIZED_MODE = "%s" }\n' \
        "$1" "$STOA" "$PROCS" "$affinity" "$env_kv" "$stats" "$mode"
}
cell_pool() {  # the pool behind a FastCGI cell
    case $1 in
        fcgi-affinity) echo affinity ;;
        fcgi-random) echo random ;;
        fcgi-uncached) echo uncached ;;
        fcgi-api) echo api ;;
        fcgi-affinity-fixed) echo affinity-unbounded ;;
        fcgi-random-fixed | fcgi-random-unbounded) echo random-unbounded ;;
    esac
}
route_toml() {  # route_toml CELL
    local pool
    pool=$(cell_pool "$1")
    printf '[[site.route]]\nprefix = "/%s/"\n' "$1"
    case $1 in
        fcgi-*) printf 'fastcgi = { pool = "%s" }\n' "$pool" ;;
        lua-api) printf 'lua = { script = "%s" }\n' "$RUN/lua-per-request.lua" ;;
        lua-kept) printf 'lua = { script = "%s" }\n' "$RUN/lua-kept.lua" ;;
        lua-cached) printf 'lua = { script = "%s" }\n' "$RUN/lua-cached.lua" ;;
        cgi) printf 'cgi = { script = "%s", env = { %s } }\n' "$RUN/personalized.cgi" "$env_kv" ;;
        *) die "no such cell: $1" ;;
    esac
}
write_conf() {  # write_conf FILE CELL...
    local file=$1 c p pools=()
    shift
    for c in "$@"; do
        p=$(cell_pool "$c")
        [ -n "$p" ] && [[ " ${pools[*]} " != *" $p "* ]] && pools+=("$p")
    done
    {
        printf 'listen = ["127.0.0.1:%s"]\nworkers = 1\nuser = "root"\n[log]\naccess = "off"\n' "$PORT"
        for p in "${pools[@]}"; do pool_toml "$p"; done
        printf '[[site]]\nroot = "%s"\n' "$RUN/www"
        for c in "$@"; do route_toml "$c"; done
    } > "$file"
}
# (fcgi-api, the app in its per-request mode, gives the reference page.)
ALL_CELLS=("${CELLS[@]}")
[[ " ${CELLS[*]} " == *" fcgi-api "* ]] || ALL_CELLS+=(fcgi-api)
write_conf "$RUN/stoa.toml" "${ALL_CELLS[@]}"
"$STOA" check "$RUN/stoa.toml" >&2 || die "bad config"
for c in "${CELLS[@]}"; do write_conf "$RUN/$c.stoa.toml" "$c"; done

# Stoa and the FastCGI processes it spawns, on the server CPUs from the
# start (the pool's processes inherit the mask). start_stoa [CELL]: with a
# cell, only its route and pool.
start_stoa() {
    local conf=$RUN/stoa.toml probe=fcgi-api
    [ -n "${1:-}" ] && conf=$RUN/$1.stoa.toml && probe=$1
    rm -f "$RUN"/stats/*
    taskset -c "$SERVER_CPUS" "$STOA" serve --config "$conf" > "$RUN/logs/stoa.out" 2>&1 &
    SRV_PID[stoa]=$!
    echo "${SRV_PID[stoa]}" > "$RUN/pids/stoa.pid"
    local i
    for i in $(seq 100); do
        curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/$probe/?user=c1u1&pw=pwc1u1&file=page.html&r=0" && return 0
        srv_alive stoa || break
        sleep 0.1
    done
    tail -n 20 "$RUN/logs/stoa.out" >&2
    die "stoa did not answer on port $PORT"
}
# The FastCGI processes' cache counters, summed: "lookups hits".
cache_counts() {
    { cat "$RUN"/stats/personalized-*.txt 2>/dev/null || true; } |
        awk '{for (i = 1; i <= NF; i++) {split($i, kv, "="); t[kv[1]] += kv[2]}} END {printf "%d %d\n", t["lookups"], t["hits"]}'
}
start_stoa
# Every design answers the same bytes (the Rust app's page is the reference).
curl -sf "http://127.0.0.1:$PORT/fcgi-api/?user=c7u3&pw=pwc7u3&file=page.html" > "$RUN/expected.html" ||
    die "the reference page did not come"
grep -q "Dear User c7u3 of City" "$RUN/expected.html" || die "the reference page is wrong: $(head -c 200 "$RUN/expected.html")"
for c in "${CELLS[@]}"; do
    curl -s "http://127.0.0.1:$PORT/$c/?user=c7u3&pw=pwc7u3&file=page.html&r=1" > "$RUN/got.html"
    cmp -s "$RUN/got.html" "$RUN/expected.html" || die "$c answers differently: $(head -c 200 "$RUN/got.html")"
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/$c/?user=c7u3&pw=wrong&file=page.html&r=1")
    [ "$code" = 401 ] || die "$c accepts a wrong password (HTTP $code)"
done
srv_stop stoa

scenario() {  # scenario CELL SECS FILE
    local cell=$1 secs=$2 j u
    {
        printf '[run]\nname = "%s"\nurl = "http://127.0.0.1:%s/"\nkeep_alive = true\nduration = "%ss"\nseed = %s\n' \
            "$cell" "$PORT" "$secs" "${REP:-1}"
        printf '[clients]\nstart = 10\nfirst_delay = ["0s", "50ms"]\n'
        if [ "$USERS" = cycle ] && [ "${cell%-fixed}" = "$cell" ]; then
            # Client K's request N: its user is turn N % WINDOW of
            # generation N / (WINDOW * VISITS).
            u="c{client}s{seq%$WINDOW}g{seq/$LIFE}"
            printf '[[mix]]\npath = "/%s/?user=%s&pw=pw%s&file=page.html&r={seq}"\n' "$cell" "$u" "$u"
        else
            for j in $(seq "$SET"); do
                printf '[[mix]]\npath = "/%s/?user=c{client}u%d&pw=pwc{client}u%d&file=page.html&r={seq}"\n' "$cell" "$j" "$j"
            done
        fi
    } > "$3"
}

one_round() {
    local cell tag rps req cpu c0 c1
    for cell in "${CELLS[@]}"; do
        tag=$cell-r$REP
        start_stoa "$cell"
        scenario "$cell" "$WARM_SECS" "$RUN/warm.toml"
        on_load_cpus "$STOA" bench -q --scenario "$RUN/warm.toml" > "$RUN/warmup.txt" 2>&1 ||
            warn "warm-up $tag exited $?"
        c0=$(cache_counts)
        scenario "$cell" "$LAB_SECS" "$RUN/$cell.toml"
        lab_measure "$cell" "$STOA" bench -q --scenario "$RUN/$cell.toml" --json "$OUT/raw/$tag.json" \
            > "$OUT/raw/$tag.txt" 2>&1 || warn "stoa bench $tag exited $?"
        cpu=${M_SRV_CPU_S[stoa]:-}
        read -r rps req errs <<< "$("$PYTHON" -c 'import json,sys; sys.path.insert(0, sys.argv[2]); import verdict; d=json.load(open(sys.argv[1])); print("%.1f %d %d" % (d["requests_per_second"], d["responses"], verdict.errors(d)))' "$OUT/raw/$tag.json" "$LAB_DIR/src" 2>/dev/null || echo "- 0 0")"
        srv_stop stoa
        c1=$(cache_counts)
        [ "$rps" != - ] || { warn "$tag: no result"; continue; }
        lab_record "rps:$cell" "$rps" "requests/s"
        lab_record "errors:$cell" "$errs" "requests"
        [ -n "$cpu" ] && [ "$req" -gt 0 ] &&
            lab_record "cpu_ms:$cell" "$(awk -v c="$cpu" -v n="$req" 'BEGIN {printf "%.4f", c * 1000 / n}')" "ms/request"
        # The cache's hit rate over the measured run (the counters are
        # written every 256 lookups: to within that a process).
        local hit
        hit=$(awk -v a="$c0" -v b="$c1" 'BEGIN {split(a, x, " "); split(b, y, " "); n = y[1] - x[1];
            if (n > 1000) printf "%.1f", 100 * (y[2] - x[2]) / n}')
        [ -n "$hit" ] && case $cell in fcgi-*) lab_record "hit:$cell" "$hit" "%" ;; esac
        log "$tag: $rps requests/s, server CPU ${cpu:-?} s over $req responses, $errs failed${hit:+, cache hits $hit%}"
    done
}
rm -f "$OUT/raw/measures.jsonl"
lab_repeat one_round
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

"$PYTHON" "$SRC/personalized-summary.py" "$OUT" "$QUICK" "$(machine)" \
    "$(date -u -d "@$RUN_T0" '+%Y-%m-%d %H:%M')-$(date -u +%H:%M) UTC" "$LOAD_START" "$LOAD_END" \
    "lab/run fastcgi-personalized$([ "$QUICK" = 1 ] && echo ' --quick')" "$SET" "$LAB_SECS" "$REPEATS" \
    "$SERVER_CPUS" "$LOAD_CPUS" "$USERS" "$WINDOW" "$VISITS" "$CACHE" "$PROCS" > "$RUN/summary.body" || die "personalized-summary.py failed"
{ lab_summary_head; echo; cat "$RUN/summary.body"; } > "$OUT/summary.md"
log "wrote $OUT/summary.md"
cat "$OUT/summary.md"
