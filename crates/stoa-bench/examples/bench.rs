//! `stoa bench` without the server: the same load generator in a binary
//! that builds in release mode in a minute or two instead of the whole
//! server's fat LTO, for profiling and comparing the generator itself
//! (bench/loadgen-tls.sh: `STOA=target/release/examples/bench`).
//!
//! `cargo build --release -p stoa-bench --example bench`, then
//! `target/release/examples/bench -k -c 50 -d 5 http://127.0.0.1:8080/`.

use std::process::ExitCode;

fn main() -> ExitCode {
    // stoa_bench::main skips its first argument, "stoa bench" in the
    // real binary: the program's name here.
    stoa_bench::main(std::env::args_os().collect())
}
