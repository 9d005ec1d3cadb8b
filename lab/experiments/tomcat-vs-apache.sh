#!/bin/bash
# ABOUT: the 1358-byte page, ab -c 60 for LAB_SECS with and without -k, repeated: Tomcat, Apache, nginx, lighttpd, Stoa; verdicts (tomcat-vs-apache-ab.txt)
#
# The paper (Jason Brittain, December 2000) ran ApacheBench 1.3c against
# Apache 1.3.12 (prefork) and Tomcat 4.0-M5 (Catalina, a CVS pre-release)
# standalone on one 500 MHz notebook: `ab -n 10000 -c 60 [-k]
# http://localhost/index.html`, a 1358-byte page, two runs each (23-46 s).
# Here the same ab command, for LAB_SECS seconds (-t) per run, against
# Tomcat 10 standalone, Apache 2.4 (event MPM), nginx (one worker),
# lighttpd and Stoa (one worker), each alone on 127.0.0.1, every server on
# CPU SERVER_CPUS and ab on LOAD_CPUS, restarted before every round, the
# servers alternating within each of REPEATS rounds. Extra cells: Tomcat
# without keep-alive on a 3,182-byte page (the page the paper's own
# non-keep-alive Tomcat runs served), and Apache with 64 threads in each
# process, more than ab's connections (where ab's "Length" failures on
# Apache with -k come from). stoa bench runs beside ab in the first round
# of full runs.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
lab_init
ensure_tools ab:apache2-utils curl:curl nginx:nginx-light lighttpd:lighttpd apache2:apache2
C=60
WARM_SECS=${WARM_SECS:-$([ "$QUICK" = 1 ] && echo 1 || echo 3)}
export WARM_SECS
gen_docroot "$RUN/www"
# the page Tomcat 4.0-M5 served in the paper's non-keep-alive runs
yes 'The quick brown fox jumps over the lazy dog. 0123456789' | head -c 3182 > "$RUN/www/page3182.html" || true
lab_note ab_version "$(ab -V 2>&1 | head -1)"
lab_note apache_version "$(/usr/sbin/apache2 -v 2>&1 | head -1)"
lab_note nginx_version "$(nginx -v 2>&1 | head -1)"
lab_note lighttpd_version "$(lighttpd -v 2>&1 | head -1)"

SERVERS=(tomcat apache2 nginx-w1 lighttpd stoa apache2-64x2)
# --quick stays under two minutes: the paper's two servers, Stoa and the
# failure check only, and Tomcat (20-40 s to start on a busy box) started
# once for all rounds; full runs restart every server before every round
[ "$QUICK" = 1 ] && SERVERS=(tomcat apache2 stoa apache2-64x2)
declare -A PORT=([tomcat]=18480 [apache2]=18481 [apache2-64x2]=18481 [nginx-w1]=18482 [lighttpd]=18483 [stoa]=18484)
start() {
    case $1 in
        tomcat) tomcat_start "${PORT[tomcat]}" "$RUN/www/index.html" "$RUN/www/page3182.html"
                lab_note tomcat_version "$(sed -n 's/.*Server version name: *//p' "$RUN/logs/tomcat.out" | head -1)" ;;
        apache2) apache_start "${PORT[apache2]}" "$RUN/www" apache2 ;;
        # 2 processes x 64 threads: more threads in each process than ab
        # has connections, so no process ever has every worker busy
        apache2-64x2) APACHE_SIZING='StartServers 2\nMinSpareThreads 64\nMaxSpareThreads 192\nThreadLimit 64\nThreadsPerChild 64\nMaxRequestWorkers 192' \
                        apache_start "${PORT[apache2-64x2]}" "$RUN/www" apache2-64x2 ;;
        nginx-w1|lighttpd) peer_start "$1" "${PORT[$1]}" "$RUN/www" ;;
        stoa) stoa_start stoa "${PORT[stoa]}" "$RUN/www" 1 ;;
    esac
}

# measure TAG URL [-k]: one ab run, its figures recorded for this repeat.
# rps = ab's "Requests per second"; served = (complete - failed) / time:
# ab counts a request it sent into a connection the server had closed as
# complete (and failed, "Length"), so its requests/s includes them.
measure() {
    local tag=$1 url=$2 k=${3:-}
    ab_run "ab-$tag" "$OUT/raw/ab-$tag-$REP.txt" "$url" "$C" $k || warn "ab $tag exited $?"
    ab_parse "$OUT/raw/ab-$tag-$REP.txt"
    lab_record "rps-$tag" "${AB_RPS:-x}" req/s
    lab_record "served-$tag" "$(awk -v c="${AB_COMPLETE:-0}" -v f="${AB_FAILED:-0}" -v s="${AB_SECS:-0}" 'BEGIN {printf "%.1f", (s > 0 ? (c - f) / s : 0)}')" req/s
    lab_record "failed-$tag" "${AB_FAILED:-x}" requests
    lab_record "failed-length-$tag" "$AB_F_LENGTH" requests
    lab_record "failed-pct-$tag" "$(awk -v c="${AB_COMPLETE:-0}" -v f="${AB_FAILED:-0}" 'BEGIN {printf "%.3f", (c > 0 ? 100 * f / c : 0)}')" %
    lab_record "ka-pct-$tag" "$(awk -v c="${AB_COMPLETE:-0}" -v k="${AB_KA:-0}" 'BEGIN {printf "%.2f", (c > 0 ? 100 * k / c : 0)}')" %
    lab_record "tpr-$tag" "$(sed -n 's/^Time per request:[[:space:]]*\([0-9.]*\) \[ms\] (mean)$/\1/p' "$OUT/raw/ab-$tag-$REP.txt" | head -1)" ms
    local srv=${tag%-k}; srv=${srv%-3182}
    [ -z "${M_SRV_CPU_S[$srv]:-}" ] || [ "${AB_COMPLETE:-0}" = 0 ] ||
        lab_record "cpu-us-$tag" "$(awk -v c="${M_SRV_CPU_S[$srv]}" -v n="$AB_COMPLETE" 'BEGIN {printf "%.1f", 1e6 * c / n}')" us/req
    # stoa bench beside ab: full runs only (--quick stays under two minutes)
    if [ "$REP" = 1 ] && [ "$QUICK" = 0 ]; then
        on_load_cpus "$STOA" bench -q -t "$LAB_SECS" -c "$C" $k --json "$OUT/raw/bench-$tag.json" "$url" \
            > "$OUT/raw/bench-$tag.txt" 2>&1 || warn "stoa bench $tag exited $?"
    fi
}

round() {
    local s url
    for s in "${SERVERS[@]}"; do
        log "round $REP: $s"
        fresh=1
        if srv_alive "$s"; then fresh=0; else start "$s"; fi
        url="http://127.0.0.1:${PORT[$s]}/index.html"
        check_url "$url" "$RUN/www/index.html" || die "$s does not serve the page right: $CHECK_MSG"
        # warm-up on the fresh server, both ways (JIT, caches, Apache's
        # process pool); the first is kept: the paper says Catalina's first
        # run after a start is always slow
        ab_run "warm-$s" "$OUT/raw/ab-warm-$s-$REP.txt" "$url" "$C" -k -t "$WARM_SECS" || true
        ab_parse "$OUT/raw/ab-warm-$s-$REP.txt"
        [ $fresh = 0 ] || lab_record "rps-cold-$s" "${AB_RPS:-x}" req/s
        ab_run "warm2-$s" "$OUT/raw/ab-warm2-$s-$REP.txt" "$url" "$C" -t "$WARM_SECS" || true
        if [ "$s" = apache2-64x2 ]; then
            measure "$s-k" "$url" -k
        else
            measure "$s" "$url"
            measure "$s-k" "$url" -k
        fi
        if [ "$s" = tomcat ]; then
            check_url "http://127.0.0.1:${PORT[$s]}/page3182.html" "$RUN/www/page3182.html" || die "tomcat: page3182.html: $CHECK_MSG"
            measure tomcat-3182 "http://127.0.0.1:${PORT[$s]}/page3182.html"
        fi
        [ "$QUICK" = 1 ] && [ "$s" = tomcat ] && [ "$REP" != "$REPEATS" ] || srv_stop "$s"
    done
}
lab_repeat round

python3 - "$OUT" "$LAB_DIR/src" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
import verdict as v
out = sys.argv[1]
m = v.measures(out)
st = lambda label, unit: v.stat(m.get(label, {}), unit)

def claim(text, where, paper, measured, low=None, high=None, why_extra="", verdict=None, why=None):
    if verdict is None:
        verdict, why = v.judge(measured, low, high)
    return {"claim": text, "where": where, "paper": paper, "measured": measured, "verdict": verdict,
            "why": why + why_extra}

# served (complete - failed) per second: ab's own figure counts Apache's failed requests
ka = v.ratio(m.get("served-apache2-k", {}), m.get("served-tomcat-k", {}))
noka = v.ratio(m.get("served-apache2", {}), m.get("served-tomcat", {}))
ap_ka = v.ratio(m.get("served-apache2-k", {}), m.get("served-apache2", {}))
tc_ka = v.ratio(m.get("served-tomcat-k", {}), m.get("served-tomcat", {}))
cold = v.ratio(m.get("rps-cold-tomcat", {}), m.get("rps-tomcat-k", {}))
page = v.ratio(m.get("served-tomcat-3182", {}), m.get("served-tomcat", {}))
dt = {r: m["tpr-tomcat-k"][r] - m["tpr-apache2-k"][r] for r in m.get("tpr-tomcat-k", {}) if r in m.get("tpr-apache2-k", {})}
claims = [
    claim("Apache serves the static page faster than Tomcat standalone, with keep-alive", "Apache 1.3 and Catalina benchmarks (ab -k)",
          "1.9x (417-428 vs 216-226 req/s)", ka, 1.52, 2.28, "; the paper's ratio +-20 %"),
    claim("... and without keep-alive", "Apache 1.3 and Catalina benchmarks (ab)",
          "1.25x (284-287 vs 228-229 req/s; Tomcat's page was 3,182 bytes)", noka, 1.0, 1.5, "; the paper's ratio +-20 %"),
    claim("keep-alive speeds Apache up", "Apache 1.3 benchmarks, -k vs none", "1.48x (417-428 vs 284-287)",
          ap_ka, 1.18, 1.78, "; the paper's ratio +-20 %"),
    claim("keep-alive does not help Tomcat (Catalina kept no connection alive: 'Keep-Alive requests: 0')",
          "Catalina benchmarks, -k vs none", "0.96x (216-226 vs 228-229)", tc_ka, 0.8, 1.2,
          "; Tomcat 10 keeps connections alive: the paper's Tomcat 4.0-M5 did not"),
    claim("the first test after a fresh start of Catalina is always slow (HotSpot compiles the busy code)",
          "Other notes", "slower (no figure)", cold, None, 0.9,
          "; first %s s of ab -k on a fresh Tomcat / the later -k run" % "WARM"),
    claim("each request took Catalina about 90 ms longer (ab's 'Time per request', mean)", "Conclusion", "about 90 ms",
          v.stat(dt, "ms"), verdict="cannot be tested here",
          why="absolute times belong to the paper's 500 MHz notebook; the difference is shown for the record"),
    claim("the non-keep-alive Tomcat figures hold for the 1358-byte page (the paper's runs served a 3,182-byte one)",
          "Catalina benchmarks: 'Document Length: 3182 bytes'", "229 req/s at 3,182 bytes", page, 0.8, 1.2,
          "; 3,182-byte / 1,358-byte page, Tomcat without keep-alive: within 20 % means the slip does not matter"),
]
import os
for c in claims:
    c["why"] = c["why"].replace("WARM", os.environ.get("WARM_SECS", "?"))
v.write(out, claims)
PY

{
    lab_summary_head
    echo
    echo "# tomcat-vs-apache: ab -c $C for ${LAB_SECS} s, with and without keep-alive, $REPEATS rounds"
    echo
    echo "Command: \`lab/run tomcat-vs-apache$([ "$QUICK" = 1 ] && echo ' --quick')\`. Every server alone on 127.0.0.1, restarted before each round and warmed up for ${WARM_SECS} s (ab -k), pinned to CPU $SERVER_CPUS (one CPU for every server); ab and stoa bench on CPU $LOAD_CPUS. One process or worker where the server has the choice (Stoa \`workers = 1\`, nginx 1 worker); Apache 2.4 with the event MPM and Debian's sizing; Tomcat 10 with its default connector. Versions in raw/meta.json (notes)."
    echo
    echo "The paper: Apache 1.3.12 (prefork, 50 servers started) and **Tomcat 4.0-M5** (Catalina, a CVS pre-release, Sun JDK 1.3 HotSpot Client, -Xms96m -Xmx96m), ab 1.3c, \`ab -n 10000 -c 60 [-k]\`, two runs of each, on a 500 MHz Pentium III notebook. Its two non-keep-alive Tomcat runs served a **3,182-byte** page (ab: \"Document Length: 3182 bytes\"), not the 1,358-byte index.html of every other run; the cell *tomcat-3182* below measures that page."
    echo
    echo "Median (min-max) over the $REPEATS rounds. *served/s* = (complete - failed) / time; *ab req/s* is ab's own figure, which counts failed requests as complete. Server CPU per request: utime+stime of the server's processes during the run (raw/meta.json) / ab's complete requests. stoa bench ran beside ab in the first round of full runs only."
    echo
    echo "| server | keep-alive | served/s | ab req/s | server CPU us/request | ab failed / of them Length | keep-alive responses % | ab 'Time per request' ms | stoa bench req/s, p50 / p99 ms (round 1) | paper req/s |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    declare -A PAPER=([apache2-k]="417, 428" [apache2]="284, 287" [tomcat-k]="216, 226 (no keep-alive)" [tomcat-3182]="229, 228" [tomcat]="- (the paper's page was 3,182 bytes)")
    for s in "${SERVERS[@]}" tomcat-3182; do
        for tag in "$s" "$s-k"; do
            [ -n "$(grep -m1 "\"served-$tag\"" "$OUT/raw/measures.jsonl" || true)" ] || continue
            lab_stat "served-$tag"; sv=$STAT_SHORT
            lab_stat "rps-$tag"; ar=$STAT_SHORT
            lab_stat "cpu-us-$tag"; cpu=$STAT_SHORT
            lab_stat "failed-$tag"; fl=$STAT_SHORT
            lab_stat "failed-length-$tag"; fll=$STAT_SHORT
            lab_stat "ka-pct-$tag"; kp=$STAT_SHORT
            lab_stat "tpr-$tag"; tp=$STAT_SHORT
            sb=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['latency_ms']; print('%.0f, %.2f / %.2f' % (d['requests_per_second'], l['p50'], l['p99']))" "$OUT/raw/bench-$tag.json" 2>/dev/null || echo "-")
            echo "| ${s} | $([[ $tag == *-k ]] && echo yes || echo no) | $sv | $ar | $cpu | $fl / $fll | $kp | $tp | $sb | ${PAPER[$tag]:--} |"
        done
    done
    echo
    echo "Requests/s of the first ${WARM_SECS} s on each fresh server (ab -k, the warm-up):"
    echo
    for s in "${SERVERS[@]}"; do lab_stat "rps-cold-$s"; echo "- $s: $STAT_TEXT"; done
    cat <<'TXT'

## ab's failed requests on Apache with -k

ab counts a request as failed ("Length") when the connection it was sent
on closes before a response as long as the first one arrives: ab had sent
its next request into a keep-alive connection that the server closed
meanwhile (ab.c, `close_connection`: 0 bytes read on a connection not
marked keep-alive for this request). It still counts that request as
complete, so its requests/s includes it (hence *served/s*, and the
keep-alive responses short of 100 %). Apache's event MPM closes a
process's idle keep-alive connections whenever every worker thread of
that process is busy (its listener has no worker to hand them to). With
Debian's sizing (25 threads a process, 2 processes at the start) ab's 60
connections keep every worker of a process busy, so Apache drops idle
connections under load. The *apache2-64x2* row is the same Apache with 64
threads in each of its processes (more than ab's 60 connections): compare
its failed column with apache2's. Tomcat, nginx, lighttpd and Stoa close
no keep-alive connection under this load (0 failed).

## What the columns say

- ab's "Time per request (mean)" is concurrency x elapsed / requests, not
  a measured latency; stoa bench measures every request (p50 / p99).
- The paper's machine served 216-428 requests/s; today's servers on this
  machine serve tens of thousands. The ratios between servers are what
  can carry over, and the verdicts above compare those.
TXT
} > "$OUT/summary.md"
log "wrote $OUT/summary.md"
cat "$OUT/summary.md"
