//! `stoa bench`: the load generator.

use std::ffi::OsString;
use std::process::ExitCode;

/// Entry point for `stoa bench ARGS...`; `args[0]` is "stoa bench".
pub fn main(args: Vec<OsString>) -> ExitCode {
    let _ = args;
    eprintln!("stoa bench: not built yet");
    ExitCode::from(2)
}
