#!/usr/bin/env bash
# Builds the Debian package of Stoa: target/debian/stoa_VERSION-1_ARCH.deb
# (under CARGO_TARGET_DIR when set), and prints its path last. Arguments go
# to cargo deb: `--fast` compresses less (xz's 30 s of CPU become 5 s for
# a package 15% larger; the tests use it).
#
#   1. the release binary (`cargo build --release -p stoa`; nothing to do
#      when `cargo run --release` or an earlier run built it);
#   2. what that binary generates from its own command-line definition,
#      into target/release/packaging/: the manual pages (`stoa man --dir`,
#      gzipped as Debian policy asks) and the bash, zsh and fish
#      completions (`stoa completions SHELL`). cargo-deb's assets are
#      files, so they must exist before it runs; generating them here
#      rather than in a build script keeps every other build free of them;
#   3. `cargo deb --no-build`, from [package.metadata.deb] in
#      crates/stoa/Cargo.toml (assets, conffiles, maintainer scripts in
#      packaging/debian/, the systemd unit packaging/stoa.service).
#
# Needs cargo-deb (`cargo install cargo-deb --locked`; test.sh installs it)
# and dpkg-dev (dpkg-shlibdeps, for the package's dependencies).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf 'build-deb: %s\n' "$*" >&2; }

if ! cargo deb --version >/dev/null 2>&1; then
    say "missing: cargo-deb (cargo install cargo-deb --locked)"
    exit 2
fi

# Where cargo puts its output, whatever CARGO_TARGET_DIR or .cargo/config say.
target=$(cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
[ -n "$target" ] || { say "cannot tell cargo's target directory"; exit 1; }

say "cargo build --release -p stoa"
cargo build --release -p stoa
stoa=$target/release/stoa

gen=$target/release/packaging
rm -rf "$gen"
mkdir -p "$gen/man" "$gen/completions"
"$stoa" man --dir "$gen/man" >/dev/null
# -n: no name or time stamp inside, so the same pages give the same bytes.
gzip -9n "$gen"/man/*.1
"$stoa" completions bash >"$gen/completions/stoa.bash"
"$stoa" completions zsh >"$gen/completions/_stoa"
"$stoa" completions fish >"$gen/completions/stoa.fish"
pages=("$gen"/man/*.1.gz)
say "generated ${#pages[@]} manual pages and 3 completion scripts in $gen"

mkdir -p "$target/debian"
# cargo deb prints the paths of the packages it wrote: stoa's .deb, and
# the stoa-dbgsym .ddeb with the debug line tables.
deb=$(cargo deb -p stoa --no-build --output "$target/debian/" "$@" | grep '/stoa_[^/]*\.deb$' | tail -n 1)
[ -f "$deb" ] || { say "cargo deb did not say where the package is (got: $deb)"; exit 1; }
echo "$deb"
