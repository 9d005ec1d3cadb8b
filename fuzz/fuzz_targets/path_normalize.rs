//! Fuzz target `path_normalize`: see fuzz/README.md and `checks::path_normalize`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::path_normalize(data));
