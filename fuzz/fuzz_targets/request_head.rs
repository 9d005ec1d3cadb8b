//! Fuzz target `request_head`: see fuzz/README.md and `checks::request_head`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::request_head(data));
