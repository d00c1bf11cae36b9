//! Replays inputs through the same checks as the `request_decoder` fuzz target
//! (`fuzz/src/lib.rs`, included below so there is one source of truth), with plain `cargo test`.
//!
//! Add every input the fuzzer reports as a crash to `REGRESSIONS` (as a byte literal, with a
//! comment naming the bug), then fix the bug. The seed corpus runs too; to hand it to libFuzzer,
//! run this test with `ZKIT_WRITE_FUZZ_SEEDS=<dir>` (e.g. `fuzz/corpus/request_decoder`).

#[path = "../../../fuzz/src/lib.rs"]
mod fuzz_checks;

/// Inputs that once crashed or misbehaved, newest last, then hand-written hostile inputs.
const REGRESSIONS: &[(&str, &[u8])] = &[
    // Hand-written: a 2 GiB frame announced in 4 bytes.
    ("huge frame length", &[0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0]),
    // Hand-written: negative frame length.
    ("negative frame length", &[0xff, 0xff, 0xff, 0xfe, 0, 0]),
    // Hand-written: unframed multi (xid 1, op 14) whose headers never say done.
    (
        "multi without terminator",
        &[
            0, 0, 0, 1, 0, 0, 0, 14, 0, 0, 0, 2, 0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1, b'/', 0, 0,
            0, 0,
        ],
    ),
    // Hand-written: multi nested in multi.
    (
        "nested multi",
        &[
            0, 0, 0, 1, 0, 0, 0, 14, 0, 0, 0, 14, 0, 0xff, 0xff, 0xff, 0xff,
        ],
    ),
    // Hand-written: setWatches2 with a vector count of i32::MAX.
    (
        "absurd vector count",
        &[
            0xff, 0xff, 0xff, 0xf8, 0, 0, 0, 105, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 0xff, 0xff, 0xff,
        ],
    ),
    // Hand-written: create with a path length of -2 and one of i32::MIN.
    (
        "length below -1",
        &[0, 0, 0, 1, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe],
    ),
    ("length i32::MIN", &[0, 0, 0, 1, 0, 0, 0, 1, 0x80, 0, 0, 0]),
    // Hand-written: handshake frame whose passwd claims 2 GiB.
    (
        "handshake with huge passwd",
        &[
            0, 0, 0, 28, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x75, 0x30, 0, 0, 0, 0, 0, 0, 0,
            0, 0x7f, 0xff, 0xff, 0xff,
        ],
    ),
    // Hand-written: getData path that is not UTF-8.
    (
        "invalid utf-8 path",
        &[0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 2, 0xc3, 0x28, 1],
    ),
];

#[test]
fn regressions_do_not_panic() {
    for (name, input) in REGRESSIONS {
        eprintln!("replaying {name}");
        fuzz_checks::exercise(input);
    }
}

#[test]
fn seed_corpus_passes_the_fuzz_checks() {
    let seeds = fuzz_checks::seeds();
    assert!(seeds.len() > 3);
    if let Some(dir) = std::env::var_os("ZKIT_WRITE_FUZZ_SEEDS") {
        let dir = std::path::PathBuf::from(dir);
        std::fs::create_dir_all(&dir).expect("create seed dir");
        for (i, seed) in seeds.iter().enumerate() {
            std::fs::write(dir.join(format!("seed-{i:02}")), seed).expect("write seed");
        }
    }
    for seed in &seeds {
        fuzz_checks::exercise(seed);
        // Every truncation of a valid stream as well.
        for n in 0..seed.len() {
            fuzz_checks::exercise(&seed[..n]);
        }
    }
}

/// The unframed hand-written requests above are not just survived but rejected.
#[test]
fn hostile_requests_are_rejected() {
    use zkit_proto::{Reader, Record, Request, RequestHeader};
    for (name, input) in REGRESSIONS {
        if name.contains("frame") || name.contains("handshake") {
            continue;
        }
        let mut r = Reader::new(input);
        let header = RequestHeader::decode(&mut r).expect("these inputs have a header");
        let decoded = Request::decode(&header, r.rest());
        if name.contains("utf-8") {
            // Not rejected: like Java's `new String(bytes, UTF_8)`, invalid bytes become
            // U+FFFD (Apache answers such a getData with NoNode, not an error).
            let path = match decoded {
                Ok(Request::GetData(r)) => r.path,
                other => panic!("{name}: {other:?}"),
            };
            assert_eq!(path, "\u{FFFD}(", "{name}");
            continue;
        }
        assert!(decoded.is_err(), "{name} decoded");
    }
    let frames: Vec<_> = REGRESSIONS
        .iter()
        .filter(|(name, _)| name.contains("frame"))
        .collect();
    assert_eq!(frames.len(), 2);
    for (name, input) in frames {
        assert!(
            zkit_proto::decode_frame(input, zkit_proto::DEFAULT_MAX_FRAME).is_err(),
            "{name} accepted"
        );
    }
}
