//! libFuzzer target: arbitrary bytes as a snapshot file (`SnapshotStore::read`) and as a
//! snapshot body (`Core::restore`). See `src/storage.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

// A module of this target, not of the library: the zkit-proto tests include the library by
// path and must not need zkit-server.
#[path = "../src/storage.rs"]
#[allow(dead_code)] // each target uses one of the two checks
mod storage;

fuzz_target!(|data: &[u8]| storage::exercise_snapshot(data));
