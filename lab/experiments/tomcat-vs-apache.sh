#!/bin/bash
# ABOUT: the 1358-byte page, ab -n 10000 -c 60 with and without -k: Tomcat, Apache, nginx, lighttpd, Stoa (tomcat-vs-apache-ab.txt)
#
# The paper ran ApacheBench 1.3 against Apache 1.3 and Tomcat 3 standalone
# on one machine: `ab -n 10000 -c 60 [-k] http://localhost/index.html`, a
# 1358-byte page. Here the same command against Tomcat 10 standalone,
# Apache 2.4 (event MPM), nginx, lighttpd and Stoa (one worker), each
# alone on 127.0.0.1, with `stoa bench` run the same way beside ab.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
lab_init
ensure_tools ab:apache2-utils curl:curl nginx:nginx-light lighttpd:lighttpd apache2:apache2
N=10000; C=60
[ "$QUICK" = 1 ] && N=2000
gen_docroot "$RUN/www"

declare -A PORT=([tomcat]=18480 [apache2]=18481 [nginx]=18482 [lighttpd]=18483 [stoa]=18484)
start() {
    case $1 in
        tomcat) tomcat_start "${PORT[tomcat]}" "$RUN/www/index.html" ;;
        apache2) apache_start "${PORT[apache2]}" "$RUN/www" ;;
        nginx|lighttpd) peer_start "$1" "${PORT[$1]}" "$RUN/www" ;;
        stoa) stoa_start stoa "${PORT[stoa]}" "$RUN/www" 1 ;;
    esac
}
stop() { srv_stop "$1"; }

rows=()
for s in tomcat apache2 nginx lighttpd stoa; do
    log "$s: starting"
    start "$s"
    url="http://127.0.0.1:${PORT[$s]}/index.html"
    check_url "$url" "$RUN/www/index.html" || die "$s does not serve the page right"
    # warm-up (JIT, caches)
    ab -q -n 500 -c 10 -k "$url" > /dev/null 2>&1 || true
    for k in "" "-k"; do
        tag="$s${k:+-k}"
        ab -n "$N" -c "$C" $k "$url" > "$OUT/raw/ab-$tag.txt" 2>&1 || warn "ab $tag exited $?"
        "$STOA" bench -q -n "$N" -c "$C" $k --json "$OUT/raw/bench-$tag.json" "$url" \
            > "$OUT/raw/bench-$tag.txt" 2>&1 || warn "stoa bench $tag exited $?"
        rows+=("$tag")
    done
    stop "$s"
done

# The paper's figures (requests per second).
declare -A PAPER=([apache2-k]="417, 428" [apache2]="284, 287" [tomcat-k]="216, 226 (Tomcat 3 kept no connection alive)" [tomcat]="229, 228")

{
    echo "# tomcat-vs-apache: ab -n $N -c $C, with and without keep-alive"
    echo
    echo "Run $(date -u '+%Y-%m-%d %H:%M UTC') on $(machine); quick=$QUICK."
    echo "Command: \`lab/run tomcat-vs-apache$([ "$QUICK" = 1 ] && echo ' --quick')\`. Every server alone on 127.0.0.1, one process or worker where it has the choice (Stoa \`-w 1\`, nginx 1 worker, lighttpd; Apache event MPM with Debian's sizing; Tomcat 10 with its default connector), the load generator on the same 2 cores."
    echo
    echo "| server | keep-alive | ab req/s | stoa bench req/s | ab \"Time per request\" (mean) | ab \"(across all)\" | stoa bench mean / p50 / p99 ms | ab failed | ab keep-alive reqs | paper req/s |"
    echo "|---|---|---|---|---|---|---|---|---|---|"
    for tag in "${rows[@]}"; do
        a="$OUT/raw/ab-$tag.txt"; j="$OUT/raw/bench-$tag.json"
        rps=$(ab_field "$a" 'Requests per second')
        tpr=$(sed -n 's/^Time per request:[[:space:]]*\([0-9.]*\) \[ms\] (mean)$/\1/p' "$a" | head -1)
        tpa=$(sed -n 's/^Time per request:[[:space:]]*\([0-9.]*\) \[ms\] (mean, across.*/\1/p' "$a" | head -1)
        failed=$(ab_field "$a" 'Failed requests')
        kar=$(ab_field "$a" 'Keep-Alive requests'); kar=${kar:-0}
        sb=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); l=d['latency_ms']; print('%.0f|%.2f / %.2f / %.2f' % (d['requests_per_second'], l['mean'], l['p50'], l['p99']))" "$j" 2>/dev/null || echo "-|-")
        echo "| ${tag%-k} | $([[ $tag == *-k ]] && echo yes || echo no) | ${rps:--} | ${sb%%|*} | ${tpr:--} | ${tpa:--} | ${sb#*|} | ${failed:--} | $kar | ${PAPER[$tag]:--} |"
    done
    cat <<'TXT'

What the columns say:

- ab's first "Time per request" is concurrency x elapsed / requests, not a
  measured latency: with 60 clients it reads 60x its "across all" figure,
  and neither is the mean time a request took. stoa bench measures every
  request and reports the distribution.
- ab counts "Failed requests" by comparing every response's length with
  the first one's; stoa bench counts outcomes by kind.
- The paper's machine (a 1999 Linux box) served 284-428 requests/s; the
  ratios between servers are what carries over, not the absolute numbers.
  The paper's conclusion held there: Apache was faster than Tomcat
  standalone, and keep-alive mattered for Apache (Tomcat 3 did not keep
  connections alive at all).
TXT
} > "$OUT/summary.md"
log "wrote $OUT/summary.md"
cat "$OUT/summary.md"
