#!/usr/bin/env bash
# Runs every test of Stoa: formatting, lints, unit, integration and fuzz-corpus
# replay tests. Installs what it needs when it can (root: Debian packages with
# apt-get; rustup components), and says clearly what is missing otherwise.
set -euo pipefail
cd "$(dirname "$0")"

missing=()
command -v cargo >/dev/null 2>&1 || missing+=("cargo (Rust toolchain: https://rustup.rs)")

# Debian packages the tests use (the reverse proxy's: python3 for tests/proxy-peers/backend.py;
# tomcat10, libxerial-sqlite-jdbc-java and default-jdk-headless, for javac, for proxy_tomcat.rs;
# postgresql, for initdb and pg_ctl, for lua_postgres.rs; logrotate, for logs.rs; dpkg-dev, man-db,
# systemd, zsh and fish, for the Debian package's test: dpkg-shlibdeps, man,
# systemd-analyze, and the shells its completions are for; systemd also for
# systemd-socket-activate, for systemd.rs; haproxy, the PROXY protocol's
# sender in wire.rs; python3-venv, for the aioquic venv of h3.rs; caddy, h3.rs's HTTP/3
# reference and bench_h3.rs's peer).
apt_pkgs=(curl nginx python3-grpcio python3-h2 php-cgi gcc perl libfcgi-dev libfcgi-perl php-fpm apache2 apache2-utils chromium caddy
  dokuwiki adminer php-sqlite3 cgit gitweb fcgiwrap git libfcgi-bin openssl
  python3 tomcat10 libxerial-sqlite-jdbc-java default-jdk-headless postgresql
  dpkg-dev man-db systemd zsh fish haproxy logrotate
  python3-brotli python3-zstandard varnish python3-venv caddy)
need_apt=()
# The real applications of real_wordpress.rs, real_mediawiki.rs and
# real_phpmyadmin.rs (dbconfig-no-thanks: phpmyadmin installs without
# asking for a database of its own).
apt_pkgs+=(wordpress mariadb-server php-mysql mediawiki php-cli dbconfig-no-thanks phpmyadmin)
for p in "${apt_pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || command -v "$p" >/dev/null 2>&1 || need_apt+=("$p")
done
if ((${#need_apt[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test.sh: installing ${need_apt[*]} with apt-get"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    missing+=("Debian packages: ${need_apt[*]} (apt-get install ${need_apt[*]})")
  fi
fi
# h2spec (Go), the HTTP/2 conformance suite run by crates/stoa/tests/h2.rs:
# installed with `go install` from the Go module proxy when it is missing.
h2spec_mod=github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible
if command -v go >/dev/null 2>&1; then
  export PATH="$PATH:$(go env GOPATH)/bin"
fi
if ! command -v h2spec >/dev/null 2>&1; then
  if command -v go >/dev/null 2>&1; then
    echo "test.sh: installing h2spec with go install"
    go install "$h2spec_mod" || missing+=("h2spec (go install $h2spec_mod failed)")
  else
    missing+=("h2spec (needs Go: go install $h2spec_mod)")
  fi
fi
# Pebble and pebble-challtestsrv (Go), the ACME server and its DNS for
# crates/stoa/tests/acme.rs, pinned; `go install` also leaves Pebble's
# module (its test certificates) in the module cache, where the test
# reads them.
pebble_version=v2.10.3
for tool in pebble pebble-challtestsrv; do
  if ! command -v "$tool" >/dev/null 2>&1 ||
    ! [ -d "$(go env GOMODCACHE 2>/dev/null)/github.com/letsencrypt/pebble/v2@$pebble_version" ]; then
    if command -v go >/dev/null 2>&1; then
      echo "test.sh: installing $tool $pebble_version with go install"
      go install "github.com/letsencrypt/pebble/v2/cmd/$tool@$pebble_version" ||
        missing+=("$tool (go install github.com/letsencrypt/pebble/v2/cmd/$tool@$pebble_version failed)")
    else
      missing+=("$tool (needs Go: go install github.com/letsencrypt/pebble/v2/cmd/$tool@$pebble_version)")
    fi
  fi
done
# cargo-deb, which builds the Debian package that packaging/test-deb.sh
# installs: a pinned version, built from crates.io when it is missing
# (about a minute on two cores, once per machine).
cargo_deb_version=3.8.0
if command -v cargo >/dev/null 2>&1 && ! cargo deb --version >/dev/null 2>&1; then
  echo "test.sh: installing cargo-deb $cargo_deb_version with cargo install"
  # Its own build directory: not the project's target/ (CARGO_TARGET_DIR).
  cargo_deb_build=$(mktemp -d)
  cargo install cargo-deb --locked --version "$cargo_deb_version" --target-dir "$cargo_deb_build" ||
    missing+=("cargo-deb (cargo install cargo-deb --locked --version $cargo_deb_version failed)")
  rm -rf "$cargo_deb_build"
fi
if ((${#missing[@]})); then
  printf 'test.sh: missing: %s\n' "${missing[@]}" >&2
  exit 2
fi

if command -v rustup >/dev/null 2>&1; then
  for c in rustfmt clippy; do
    rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
  done
fi

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy -D warnings"
cargo clippy --workspace --all-targets -- -D warnings
echo "== cargo test"
cargo test --workspace
echo "== the lab's verdict, chart and summary scripts (Python unit tests)"
python3 lab/src/test_verdict.py
python3 lab/src/dynamic/test_dynamic.py
echo "== the Debian package (packaging/test-deb.sh)"
packaging/test-deb.sh
