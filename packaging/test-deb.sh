#!/usr/bin/env bash
# The Debian package's test, run by test.sh after `cargo test`: builds the
# .deb (packaging/build-deb.sh), checks what it holds, then, as root,
# installs it with `dpkg -i` and checks the installed system as an
# operator would find it (`stoa check /etc/stoa/stoa.toml`, the packaged
# configuration serving, `man stoa`, the completions, `systemd-analyze
# verify` of the unit), and purges it again (dpkg --purge), so the machine
# is left as it was.
#
# Not root: the package is built and its contents checked, and the install
# is skipped with a line saying so. A machine where a stoa package is
# already installed (an operator's) keeps it: the install is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

t0=$SECONDS
say() { printf 'test-deb: %s\n' "$*"; }
fail() {
    say "FAILED: $*"
    exit 1
}
# A command that fails outside a check still says where.
trap 'say "FAILED: line $LINENO: $BASH_COMMAND"' ERR

# --fast: a test needs no smallest package, and xz's best costs 25 s more.
deb=$(packaging/build-deb.sh --fast)
say "built $deb ($(du -k "$deb" | cut -f1) KiB) in $((SECONDS - t0))s"

# What the package holds, before anything is installed.
contents=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|')
for f in /usr/bin/stoa /etc/stoa/stoa.toml /usr/lib/systemd/system/stoa.service \
    /usr/share/man/man1/stoa.1.gz /usr/share/man/man1/stoa-serve.1.gz \
    /usr/share/man/man1/stoa-check.1.gz /usr/share/man/man1/stoa-bench.1.gz \
    /usr/share/bash-completion/completions/stoa /usr/share/zsh/vendor-completions/_stoa \
    /usr/share/fish/vendor_completions.d/stoa.fish /usr/share/doc/stoa/CONFIG.md \
    /usr/share/doc/stoa/copyright /usr/share/stoa/html/index.html /etc/logrotate.d/stoa \
    /usr/share/doc/stoa/examples/stoa.socket; do
    grep -qx "$f" <<<"$contents" || fail "$f is not in the package"
done
conffiles=$(dpkg-deb -I "$deb" conffiles)
for f in /etc/stoa/stoa.toml /etc/logrotate.d/stoa; do
    grep -qx "$f" <<<"$conffiles" || fail "$f is not a conffile: $conffiles"
done
say "contents: binary, unit, $(grep -c '^/usr/share/man/man1/.*\.gz$' <<<"$contents") manual pages, 3 completions, /etc/stoa/stoa.toml (conffile)"

if [ "$(id -u)" != 0 ]; then
    say "not root: skipping dpkg -i and the checks of the installed package (run as root, as CI does)"
    exit 0
fi
if dpkg-query -W -f='${Status}' stoa 2>/dev/null | grep -q 'install ok installed'; then
    say "a stoa package is already installed here: not replacing it; skipping dpkg -i and its checks"
    exit 0
fi

# On a machine booted with systemd, the postinst would start the service
# on port 80: deb-systemd-invoke asks policy-rc.d first, so a temporary
# one that refuses (101, "action forbidden by policy") keeps it stopped.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ -d /run/systemd/system ] && [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy"
    chmod 755 "$policy"
    made_policy=1
fi
server_pid=
cleanup() {
    if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; fi
    dpkg --purge stoa >/dev/null 2>&1 || true
    if [ "$made_policy" = 1 ]; then rm -f "$policy"; fi
}
trap cleanup EXIT

dpkg -i "$deb" >/dev/null || fail "dpkg -i $deb"
say "installed: $(dpkg-query -W -f='${Package} ${Version} (Depends: ${Depends})' stoa)"

version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
[ "$(/usr/bin/stoa --version)" = "stoa $version" ] || fail "/usr/bin/stoa --version: $(/usr/bin/stoa --version)"
# The Debian changelog's newest entry is this version's (Debian policy
# 4.4: a package's version comes from its changelog).
top=$(zcat /usr/share/doc/stoa/changelog.Debian.gz | head -n 1)
[[ "$top" == "stoa ($version-"* ]] || fail "packaging/changelog starts '$top': add an entry for $version"

# The packaged configuration validates as installed (www-data, /var/www/html,
# /var/log/stoa all present).
out=$(/usr/bin/stoa check /etc/stoa/stoa.toml 2>&1) || fail "stoa check /etc/stoa/stoa.toml: $out"
say "$out"

# The postinst's log directory, as nginx's: root's, group adm, which
# www-data may search but not write.
[ "$(stat -c '%U:%G %a' /var/log/stoa)" = "root:adm 755" ] ||
    fail "/var/log/stoa is $(stat -c '%U:%G %a' /var/log/stoa), expected root:adm 755"

# And serves: on a free port instead of 80 (another server may have it),
# as root switching to www-data, its status page answering 127.0.0.1 and
# the request landing in /var/log/stoa/access.log.
log=$(mktemp)
/usr/bin/stoa serve --config /etc/stoa/stoa.toml --listen 127.0.0.1:0 >"$log" 2>&1 &
server_pid=$!
port=
for _ in $(seq 200); do
    port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\)/.*|\1|p' "$log" | head -n 1)
    [ -n "$port" ] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
[ -n "$port" ] || fail "stoa serve --config /etc/stoa/stoa.toml did not start: $(cat "$log")"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 "http://127.0.0.1:$port/stoa-status?format=json") || code=000
[ "$code" = 200 ] || fail "GET /stoa-status from 127.0.0.1: $code, expected 200; server log: $(cat "$log")"
# The process that serves runs as www-data: the server itself, or the
# child it hands requests to when a privileged parent keeps root.
users=$({ ps -o user= -p "$server_pid" || true; ps -o user= --ppid "$server_pid" || true; } | tr -d ' ' | sort -u | tr '\n' ' ')
grep -qw www-data <<<"$users" || fail "the server runs as $users; expected www-data (user in /etc/stoa/stoa.toml)"
# Access-log lines are written about once a second.
for _ in $(seq 100); do
    grep -qs '"GET /stoa-status?format=json HTTP/1.1" 200' /var/log/stoa/access.log && break
    sleep 0.1
done
grep -q '"GET /stoa-status?format=json HTTP/1.1" 200' /var/log/stoa/access.log ||
    fail "no access-log line in /var/log/stoa/access.log: $(cat /var/log/stoa/access.log 2>&1)"
kill -TERM "$server_pid"
wait "$server_pid" || fail "stoa serve exited $? on SIGTERM: $(cat "$log")"
server_pid=
rm -f "$log"
say "serves: /stoa-status 200 as www-data, logged to /var/log/stoa/access.log"

# Manual pages, where man finds them.
page=$(man -w stoa) || fail "man -w stoa found no page"
[ "$page" = /usr/share/man/man1/stoa.1.gz ] || fail "man -w stoa: $page"
for p in stoa stoa-serve stoa-check stoa-bench; do
    text=$(MANWIDTH=80 man -l "/usr/share/man/man1/$p.1.gz" 2>&1) || fail "man -l $p.1.gz: $text"
    grep -q NAME <<<"$text" || fail "$p(1) has no NAME section"
done
text=$(MANWIDTH=80 man -l /usr/share/man/man1/stoa.1.gz)
for s in SIGNALS FILES SIGHUP /etc/stoa/stoa.toml; do
    grep -q -- "$s" <<<"$text" || fail "stoa(1) does not mention $s"
done

# Completions: present, naming the subcommands, valid for their shells
# (zsh and fish only checked where installed).
for f in /usr/share/bash-completion/completions/stoa /usr/share/zsh/vendor-completions/_stoa \
    /usr/share/fish/vendor_completions.d/stoa.fish; do
    grep -q serve "$f" && grep -q check "$f" || fail "$f does not name serve and check"
done
# bash and fish complete "stoa se" and "stoa ch" as a user's shell would.
got=$(bash -c 'source /usr/share/bash-completion/completions/stoa
    COMP_WORDS=(stoa se) COMP_CWORD=1 COMP_LINE="stoa se" COMP_POINT=7
    _stoa stoa se stoa && echo "${COMPREPLY[*]}"') || fail "the bash completion: $got"
[ "$got" = serve ] || fail "bash completes 'stoa se' as '$got', expected serve"
checked=bash
if command -v zsh >/dev/null; then
    zsh -n /usr/share/zsh/vendor-completions/_stoa || fail "zsh -n on the zsh completion"
    checked+=", zsh (syntax)"
fi
if command -v fish >/dev/null; then
    got=$(fish -c 'complete -C "stoa ch"') || fail "the fish completion: $got"
    grep -q '^check' <<<"$got" || fail "fish completes 'stoa ch' as '$got', expected check"
    checked+=", fish"
fi
say "manual pages: man -w stoa finds stoa(1); completions: $checked"

# The unit: enabled for multi-user.target by the postinst, and valid.
[ -L /etc/systemd/system/multi-user.target.wants/stoa.service ] ||
    fail "stoa.service is not enabled (no multi-user.target.wants link)"
if command -v systemd-analyze >/dev/null; then
    out=$(systemd-analyze verify /usr/lib/systemd/system/stoa.service 2>&1) ||
        fail "systemd-analyze verify stoa.service: $out"
    [ -z "$out" ] || fail "systemd-analyze verify stoa.service warns: $out"
    say "systemd-analyze verify stoa.service: clean"
else
    say "systemd-analyze missing (Debian package systemd): unit not verified"
fi

# Purged, nothing is left behind.
dpkg --purge stoa >/dev/null || fail "dpkg --purge stoa"
for f in /usr/bin/stoa /etc/stoa /var/log/stoa /usr/lib/systemd/system/stoa.service \
    /etc/systemd/system/multi-user.target.wants/stoa.service; do
    [ ! -e "$f" ] && [ ! -L "$f" ] || fail "$f is left after dpkg --purge"
done
[ ! -e /etc/logrotate.d/stoa ] || fail "/etc/logrotate.d/stoa is left after dpkg --purge"
say "purged: nothing left; passed in $((SECONDS - t0))s"
