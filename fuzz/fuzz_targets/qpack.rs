//! Fuzz target `qpack`: see fuzz/README.md and `checks::run`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::run("qpack", data));
