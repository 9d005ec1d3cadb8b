//! Fuzz target `response_head`: see fuzz/README.md and `checks::response_head`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::response_head(data));
