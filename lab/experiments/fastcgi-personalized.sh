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
#                  affinity = "query:user"
#   fcgi-random    the same without affinity (round-robin)
#   fcgi-nocache   the cached app with every request a user it has not
#                  seen: its kept connection read each time, the cache
#                  never hit (the binary has no cache switch; the cost of
#                  filling a cache that never hits is in the figure)
#   fcgi-api       the app's per-request mode behind FastCGI
#   lua-api        the paper's API: Stoa's in-process Lua route
#                  (lab/src/dynamic/personalized.lua), a connection per request
#   lua-kept       the API with a kept connection (one per worker)
#   lua-cached     the API with a kept connection and a cache (§6)
#   cgi            a process and a connection per request
# Each client k draws its users at random from its own set of SET users
# (the paper's "disjoint sets of users"); fcgi-nocache's client k asks for
# user k-n (n = its request number) instead. Stoa restarts before every
# measured run (cold caches; a short warm-up first), REPEATS rounds (5;
# --quick 2) alternate the designs. Knobs: SET (users per client, 100),
# LAB_SECS (seconds per run), REPEATS, SERVER_CPUS, LOAD_CPUS.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
lab_init
ensure_tools python3:python3 curl:curl taskset:util-linux
SRC=$LAB_DIR/src/dynamic
PORT=18501
SET=${SET:-100}
CELLS=(fcgi-affinity fcgi-random fcgi-nocache fcgi-api lua-api lua-kept lua-cached cgi)
# Users of fcgi-nocache: each client's n-th request names user cK-nN, so
# the table needs more than any client sends in a run.
STREAM=$(( LAB_SECS * 4000 ))
WARM_SECS=1; [ "$QUICK" = 1 ] && WARM_SECS=0.5
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
RUN_T0=$(date +%s)
mkdir -p "$RUN/www" "$RUN/content"

# The users (records of about 100 bytes) and a 3,000-byte content file.
"$PYTHON" - "$RUN/users.db" "$RUN/content/page.html" "$SET" "$STREAM" <<'PY'
import os, sqlite3, sys
db, page, nset, nstream = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if os.path.exists(db): os.remove(db)
c = sqlite3.connect(db)
c.execute("CREATE TABLE users(id TEXT PRIMARY KEY, password TEXT, attrs TEXT)")
def rec(uid, i):
    return (uid, "pw" + uid, "NAME=User %s;CITY=City %d;PLAN=gold;LANG=en;SINCE=19%02d" % (uid, i % 97, i % 100))
ids = ["c%du%d" % (k, j) for k in range(1, 11) for j in range(1, nset + 1)]
ids += ["c%dn%d" % (k, n) for k in range(1, 11) for n in range(1, nstream + 1)]
c.executemany("INSERT INTO users VALUES (?, ?, ?)", (rec(u, i) for i, u in enumerate(ids)))
c.commit()
para = "<p>Dear $NAME of $CITY, your $PLAN plan (since $SINCE, language $LANG) includes this page.</p>\n"
body = "<!DOCTYPE html>\n<title>For $NAME</title>\n"
while len(body) + len(para) < 3000: body += para
open(page, "w").write(body + " " * (3000 - len(body)))
PY

env_kv="STOA_PERSONALIZED_DB = \"$RUN/users.db\", STOA_PERSONALIZED_CONTENT = \"$RUN/content\""
cat > "$RUN/personalized.cgi" <<SH
#!/bin/sh
exec "$STOA" demo-app personalized-cgi
SH
chmod 755 "$RUN/personalized.cgi"
for m in per-request kept cached; do
    sed -e "s|@MODE@|$m|" -e "s|@DB@|$RUN/users.db|" -e "s|@CONTENT@|$RUN/content|" "$SRC/personalized.lua" > "$RUN/lua-$m.lua"
done
cat > "$RUN/stoa.toml" <<TOML
listen = ["127.0.0.1:$PORT"]
workers = 1
user = "root"
[log]
access = "off"
[[pool]]
name = "affinity"
command = ["$STOA", "demo-app", "personalized"]
processes = 2
affinity = "query:user"
env = { $env_kv, STOA_PERSONALIZED_MODE = "cached" }
[[pool]]
name = "random"
command = ["$STOA", "demo-app", "personalized"]
processes = 2
balance = "round-robin"
env = { $env_kv, STOA_PERSONALIZED_MODE = "cached" }
[[pool]]
name = "api"
command = ["$STOA", "demo-app", "personalized"]
processes = 2
env = { $env_kv, STOA_PERSONALIZED_MODE = "per-request" }
[[site]]
root = "$RUN/www"
[[site.route]]
prefix = "/fcgi-affinity/"
fastcgi = { pool = "affinity" }
[[site.route]]
prefix = "/fcgi-nocache/"
fastcgi = { pool = "affinity" }
[[site.route]]
prefix = "/fcgi-random/"
fastcgi = { pool = "random" }
[[site.route]]
prefix = "/fcgi-api/"
fastcgi = { pool = "api" }
[[site.route]]
prefix = "/lua-api/"
lua = { script = "$RUN/lua-per-request.lua" }
[[site.route]]
prefix = "/lua-kept/"
lua = { script = "$RUN/lua-kept.lua" }
[[site.route]]
prefix = "/lua-cached/"
lua = { script = "$RUN/lua-cached.lua" }
[[site.route]]
prefix = "/cgi/"
cgi = { script = "$RUN/personalized.cgi", env = { $env_kv } }
TOML
"$STOA" check "$RUN/stoa.toml" >&2 || die "bad config"

# Stoa and the FastCGI processes it spawns, on the server CPUs from the
# start (the pool's processes inherit the mask).
start_stoa() {
    taskset -c "$SERVER_CPUS" "$STOA" serve --config "$RUN/stoa.toml" > "$RUN/logs/stoa.out" 2>&1 &
    SRV_PID[stoa]=$!
    echo "${SRV_PID[stoa]}" > "$RUN/pids/stoa.pid"
    local i
    for i in $(seq 100); do
        curl -sf -o /dev/null --max-time 2 "http://127.0.0.1:$PORT/fcgi-api/?user=c1u1&pw=pwc1u1&file=page.html" && return 0
        srv_alive stoa || break
        sleep 0.1
    done
    tail -n 20 "$RUN/logs/stoa.out" >&2
    die "stoa did not answer on port $PORT"
}
start_stoa
# Every design answers the same bytes (the Rust app's page is the reference).
curl -sf "http://127.0.0.1:$PORT/fcgi-api/?user=c7u3&pw=pwc7u3&file=page.html" > "$RUN/expected.html" ||
    die "the reference page did not come"
grep -q "Dear User c7u3 of City" "$RUN/expected.html" || die "the reference page is wrong: $(head -c 200 "$RUN/expected.html")"
for c in "${CELLS[@]}"; do
    [ "$c" = fcgi-nocache ] && continue
    curl -s "http://127.0.0.1:$PORT/$c/?user=c7u3&pw=pwc7u3&file=page.html" > "$RUN/got.html"
    cmp -s "$RUN/got.html" "$RUN/expected.html" || die "$c answers differently: $(head -c 200 "$RUN/got.html")"
    code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/$c/?user=c7u3&pw=wrong&file=page.html")
    [ "$code" = 401 ] || die "$c accepts a wrong password (HTTP $code)"
done
srv_stop stoa

scenario() {  # scenario CELL SECS FILE
    local cell=$1 secs=$2 j
    {
        printf '[run]\nname = "%s"\nurl = "http://127.0.0.1:%s/"\nkeep_alive = true\nduration = "%ss"\nseed = %s\n' \
            "$cell" "$PORT" "$secs" "${REP:-1}"
        printf '[clients]\nstart = 10\nfirst_delay = ["0s", "50ms"]\n'
        if [ "$cell" = fcgi-nocache ]; then
            printf '[[mix]]\npath = "/fcgi-nocache/?user=c{client}n{seq}&pw=pwc{client}n{seq}&file=page.html"\n'
        else
            for j in $(seq "$SET"); do
                printf '[[mix]]\npath = "/%s/?user=c{client}u%d&pw=pwc{client}u%d&file=page.html"\n' "$cell" "$j" "$j"
            done
        fi
    } > "$3"
}

one_round() {
    local cell tag rps req cpu
    for cell in "${CELLS[@]}"; do
        tag=$cell-r$REP
        start_stoa
        scenario "$cell" "$WARM_SECS" "$RUN/warm.toml"
        on_load_cpus "$STOA" bench -q --scenario "$RUN/warm.toml" > "$RUN/warmup.txt" 2>&1 ||
            warn "warm-up $tag exited $?"
        scenario "$cell" "$LAB_SECS" "$RUN/$cell.toml"
        lab_measure "$cell" "$STOA" bench -q --scenario "$RUN/$cell.toml" --json "$OUT/raw/$tag.json" \
            > "$OUT/raw/$tag.txt" 2>&1 || warn "stoa bench $tag exited $?"
        cpu=${M_SRV_CPU_S[stoa]:-}
        read -r rps req errs <<< "$("$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); print("%.1f %d %d" % (d["requests_per_second"], d["responses"], d["failed"] + d["non_2xx"]))' "$OUT/raw/$tag.json" 2>/dev/null || echo "- 0 0")"
        srv_stop stoa
        [ "$rps" != - ] || { warn "$tag: no result"; continue; }
        lab_record "rps:$cell" "$rps" "requests/s"
        lab_record "errors:$cell" "$errs" "requests"
        [ -n "$cpu" ] && [ "$req" -gt 0 ] &&
            lab_record "cpu_ms:$cell" "$(awk -v c="$cpu" -v n="$req" 'BEGIN {printf "%.4f", c * 1000 / n}')" "ms/request"
        log "$tag: $rps requests/s, server CPU ${cpu:-?} s over $req responses, $errs failed"
    done
}
rm -f "$OUT/raw/measures.jsonl"
lab_repeat one_round
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

"$PYTHON" "$SRC/personalized-summary.py" "$OUT" "$QUICK" "$(machine)" \
    "$(date -u -d "@$RUN_T0" '+%Y-%m-%d %H:%M')-$(date -u +%H:%M) UTC" "$LOAD_START" "$LOAD_END" \
    "lab/run fastcgi-personalized$([ "$QUICK" = 1 ] && echo ' --quick')" "$SET" "$LAB_SECS" "$REPEATS" \
    "$SERVER_CPUS" "$LOAD_CPUS" > "$RUN/summary.body" || die "personalized-summary.py failed"
{ lab_summary_head; echo; cat "$RUN/summary.body"; } > "$OUT/summary.md"
log "wrote $OUT/summary.md"
cat "$OUT/summary.md"
