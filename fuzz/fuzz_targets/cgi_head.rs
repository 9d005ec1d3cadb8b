//! Fuzz target `cgi_head`: see fuzz/README.md and `checks::cgi_head`.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::cgi_head(data));
