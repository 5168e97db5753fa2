//! libFuzzer target; the body and what it checks are in `platter_agent::fuzz::smartctl`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| platter_agent::fuzz::smartctl(data));
