#!/usr/bin/env bash
# Runs the README's first command exactly as written, `cargo run --release
# -- serve`, from the repository root (the release build comes first, so
# the wait is long), and checks that the demo answers on 127.0.0.1:8080:
# `/` and the comments pages (FastCGI and Lua) must be 200. Then stops the server by its PID
# and makes sure port 8080 is free again, so tests that run after it are
# not disturbed.
set -euo pipefail
cd "$(dirname "$0")/.."

url=http://127.0.0.1:8080
wait_s=${README_SERVE_WAIT:-1200}   # a cold release build (LTO, SQLite) takes minutes
log=$(mktemp)

say() { printf 'readme-serve: %s\n' "$*"; }

if ! command -v curl >/dev/null 2>&1; then
  # test.sh installs its packages later; this check needs curl now.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl >/dev/null
  else
    say "missing: curl (apt-get install curl)"
    exit 2
  fi
fi

answers() { curl -s -o /dev/null --max-time 2 "$url/"; }

if answers; then
  say "something already answers on $url; cannot tell the demo from it"
  exit 1
fi

# Its own process group (job control), so that stopping it while it is
# still building also stops the compilers cargo started.
set -m
cargo run --release -- serve >"$log" 2>&1 &
cargo_pid=$!
set +m

# The stoa server's PID. Cargo on Unix replaces itself with the program
# (exec), so it is cargo's own PID; were it to spawn it instead, stoa is
# its child. (The pools' processes are stoa too, `stoa demo-app`, but
# children of the server: the server stops them itself.)
is_stoa() {
  local exe
  exe=$(readlink /proc/"$1"/exe 2>/dev/null) || return 1
  case "${exe##*/}" in stoa | "stoa (deleted)") return 0 ;; *) return 1 ;; esac
}
stoa_pids() {
  local p
  if is_stoa "$cargo_pid"; then
    echo "$cargo_pid"
    return
  fi
  for p in $(cat /proc/"$cargo_pid"/task/*/children 2>/dev/null); do
    if is_stoa "$p"; then echo "$p"; fi
  done
}

stopped=0
stop() {
  [ "$stopped" = 1 ] && return 0
  stopped=1
  local pids p i alive
  pids=$(stoa_pids)
  if [ -n "$pids" ]; then
    for p in $pids; do kill -TERM "$p" 2>/dev/null || true; done
  else
    # No stoa yet (still building): cargo and its compilers, by group.
    pids=$cargo_pid
    kill -TERM -- -"$cargo_pid" 2>/dev/null || true
  fi
  # SIGTERM lets in-flight requests finish and stops the pools' processes
  # (shutdown_timeout is 10 s); after 30 s, SIGKILL.
  for i in $(seq 300); do
    alive=0
    for p in $pids "$cargo_pid"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  for p in $pids "$cargo_pid"; do
    if kill -0 "$p" 2>/dev/null; then
      say "PID $p did not stop on SIGTERM; killing it"
      kill -KILL "$p" 2>/dev/null || true
    fi
  done
  wait "$cargo_pid" 2>/dev/null || true
  # The port must be free for whatever runs next.
  for i in $(seq 100); do
    answers || return 0
    sleep 0.1
  done
  say "port 8080 still answers after the server stopped"
  return 1
}
fail() {
  say "$*"
  say "output of cargo run (last 40 lines):"
  tail -n 40 "$log" | sed 's/^/  | /'
  stop || true
  exit 1
}
trap 'stop || true; rm -f "$log"' EXIT

say "cargo run --release -- serve (waiting up to ${wait_s}s for $url/)"
t0=$SECONDS
until answers; do
  kill -0 "$cargo_pid" 2>/dev/null || fail "cargo run exited before the demo answered"
  [ $((SECONDS - t0)) -lt "$wait_s" ] || fail "no answer on $url/ within ${wait_s}s"
  sleep 1
done
say "answering after $((SECONDS - t0))s (stoa PID $(stoa_pids | tr '\n' ' '))"

for path in / /comments/ /lua-comments/; do
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 30 "$url$path") || code=000
  [ "$code" = 200 ] || fail "GET $path: $code, expected 200"
  say "GET $path: 200"
done

stop || fail "could not stop the server"
say "stopped; port 8080 is free"
