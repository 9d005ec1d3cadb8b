//! Fuzz target `ssi`: see crates/stoa-ssi/fuzz/README.md and
//! `stoa_ssi::fuzzing::fuzz_check`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stoa_ssi::fuzzing::fuzz_check(data));
