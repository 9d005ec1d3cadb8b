//! Fuzz target `range`: see fuzz/README.md and `checks::range`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::range(data));
