//! libFuzzer target; the body and what it checks are in `platter::fuzz::spec`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| platter::fuzz::spec(data));
