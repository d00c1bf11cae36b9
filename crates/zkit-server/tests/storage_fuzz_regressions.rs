//! Replays inputs through the same checks as the `wal_reader` and `snapshot_reader` fuzz
//! targets (`fuzz/src/storage.rs`, included below so there is one source of truth), with plain
//! `cargo test`: recovery of arbitrary WAL segments and snapshot files never panics, and what it
//! accepts reads back, reopens cleanly and takes appends.
//!
//! Add every input the fuzzer reports as a crash to the lists below (with a comment naming the
//! bug), then fix the bug. To hand the seeds to libFuzzer, run this test with
//! `ZKIT_WRITE_FUZZ_SEEDS=<dir>` (it writes `<dir>/wal_reader/*` and `<dir>/snapshot_reader/*`).

#[path = "../../../fuzz/src/storage.rs"]
mod storage_checks;

/// WAL inputs (flag byte, then the segment) that once crashed, then hand-written hostile ones.
const WAL_REGRESSIONS: &[(&str, &[u8])] = &[
    ("empty segment", &[0]),
    ("magic only", &[0, b'Z', b'K', b'W', b'L']),
    // Header for first zxid 1, then a record whose length claims 4 GiB.
    (
        "huge record length",
        &[
            0, b'Z', b'K', b'W', b'L', 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
            0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0,
        ],
    ),
    // Same header, a record length of 7 (shorter than its own zxid), truncating.
    (
        "record shorter than its zxid",
        &[
            1, b'Z', b'K', b'W', b'L', 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0,
            1, 0, 0, 0, 0, 0, 0,
        ],
    ),
    // Header claiming first zxid i64::MAX: nothing may be appended after it.
    (
        "first zxid i64::MAX",
        &[
            0, b'Z', b'K', b'W', b'L', 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f,
        ],
    ),
];

/// Snapshot inputs (file, or body) that once crashed, then hand-written hostile ones.
const SNAPSHOT_REGRESSIONS: &[(&str, &[u8])] = &[
    ("empty", &[]),
    (
        "header only",
        &[b'Z', b'K', b'S', b'N', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    ),
    // A trailer whose length field does not match.
    (
        "bad trailer length",
        &[
            b'Z', b'K', b'S', b'N', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, b'N', b'S', b'K', b'Z',
        ],
    ),
];

fn write_seeds(target: &str, seeds: &[Vec<u8>]) {
    let Some(dir) = std::env::var_os("ZKIT_WRITE_FUZZ_SEEDS") else {
        return;
    };
    let dir = std::path::Path::new(&dir).join(target);
    std::fs::create_dir_all(&dir).expect("seed dir");
    for (i, s) in seeds.iter().enumerate() {
        std::fs::write(dir.join(format!("seed-{i}")), s).expect("write seed");
    }
}

#[test]
fn wal_reader_regressions_and_seeds() {
    let seeds = storage_checks::wal_seeds();
    assert!(!seeds.is_empty());
    write_seeds("wal_reader", &seeds);
    for seed in &seeds {
        storage_checks::exercise_wal(seed);
    }
    for (name, input) in WAL_REGRESSIONS {
        eprintln!("wal: {name}");
        storage_checks::exercise_wal(input);
    }
}

#[test]
fn snapshot_reader_regressions_and_seeds() {
    let seeds = storage_checks::snapshot_seeds();
    write_seeds("snapshot_reader", &seeds);
    for seed in &seeds {
        storage_checks::exercise_snapshot(seed);
    }
    for (name, input) in SNAPSHOT_REGRESSIONS {
        eprintln!("snapshot: {name}");
        storage_checks::exercise_snapshot(input);
    }
}
