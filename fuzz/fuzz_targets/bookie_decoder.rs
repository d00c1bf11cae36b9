//! libFuzzer target: arbitrary bytes as a bookie connection's input, through the bookie
//! protocol's request and response decoders. See `fuzz/src/bookie.rs`.
#![no_main]

#[path = "../src/bookie.rs"]
mod checks;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| checks::exercise(data));
