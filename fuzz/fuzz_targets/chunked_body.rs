//! Fuzz target `chunked_body`: see fuzz/README.md and `checks::chunked_body`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::chunked_body(data));
