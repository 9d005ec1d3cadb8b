//! Fuzz target `h2_conn`: see fuzz/README.md and `stoa_h2::fuzzing`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stoa_h2::fuzzing::fuzz_check(data));
