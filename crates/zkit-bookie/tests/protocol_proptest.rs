//! Protocol round trips for arbitrary requests and responses, streams of frames split at
//! arbitrary points, and hostile input: the decoders never panic and never read past a frame.
//! Hand-picked hostile inputs, and any input fuzzing finds a bug with, are kept in
//! `hostile_inputs` below.

#[path = "../../../fuzz/src/bookie.rs"]
mod fuzz_checks;

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use zkit_bookie::protocol::entry::{DigestType, Digester, EntryHeader};
use zkit_bookie::protocol::*;

fn entry_for(ledger_id: i64, entry_id: i64, payload: Vec<u8>, hmac: bool) -> Bytes {
    let kind = if hmac {
        DigestType::HmacSha256
    } else {
        DigestType::Crc32c
    };
    Digester::new(kind, b"pw").encode(
        EntryHeader {
            ledger_id,
            entry_id,
            lac: entry_id - 1,
            length: payload.len() as i64,
        },
        &payload,
    )
}

fn request_op() -> impl Strategy<Value = RequestOp> {
    let id = 0..i64::MAX;
    prop_oneof![
        (
            id.clone(),
            0..1_000_000i64,
            any::<bool>(),
            any::<[u8; 32]>(),
            proptest::collection::vec(any::<u8>(), 0..300),
            any::<bool>()
        )
            .prop_map(|(l, e, rec, k, p, hmac)| RequestOp::Add(AddRequest {
                ledger_id: l,
                entry_id: e,
                flags: if rec { FLAG_RECOVERY_ADD } else { 0 },
                master_key: k,
                entry: entry_for(l, e, p, hmac),
            })),
        (
            id.clone(),
            id.clone(),
            proptest::option::of(any::<[u8; 32]>())
        )
            .prop_map(|(l, e, fence)| RequestOp::Read(ReadRequest {
                ledger_id: l,
                entry_id: e,
                fence
            })),
        id.clone().prop_map(|l| RequestOp::ReadLac { ledger_id: l }),
        (id.clone(), -1..i64::MAX, 0..=MAX_LONG_POLL_MS).prop_map(|(l, p, t)| {
            RequestOp::LongPollLac(LongPollRequest {
                ledger_id: l,
                previous_lac: p,
                timeout_ms: t,
            })
        }),
        (id.clone(), any::<[u8; 32]>()).prop_map(|(l, k)| RequestOp::Fence {
            ledger_id: l,
            master_key: k
        }),
        (-1..i64::MAX, 1..=MAX_LIST).prop_map(|(s, m)| RequestOp::ListLedgers {
            start_after: s,
            max: m
        }),
        Just(RequestOp::BookieInfo),
    ]
}

fn status() -> impl Strategy<Value = Status> {
    (1u16..=10).prop_map(|c| Status::from_code(c).unwrap())
}

fn response() -> impl Strategy<Value = Response> {
    let body = prop_oneof![
        (any::<i64>(), any::<i64>()).prop_map(|(l, e)| ResponseBody::Add {
            ledger_id: l,
            entry_id: e
        }),
        (
            any::<i64>(),
            any::<i64>(),
            proptest::collection::vec(any::<u8>(), 0..200)
        )
            .prop_map(|(l, e, b)| ResponseBody::Read {
                ledger_id: l,
                entry_id: e,
                entry: b.into()
            }),
        (any::<i64>(), any::<i64>(), any::<i64>()).prop_map(|(l, lac, last)| ResponseBody::Lac {
            ledger_id: l,
            lac,
            last_entry: last
        }),
        (
            any::<i64>(),
            any::<i64>(),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..100))
        )
            .prop_map(|(l, lac, e)| ResponseBody::LongPoll {
                ledger_id: l,
                lac,
                entry: e.map(Bytes::from)
            }),
        any::<i64>().prop_map(|l| ResponseBody::Fence { ledger_id: l }),
        (
            proptest::collection::vec(any::<i64>(), 0..50),
            any::<bool>()
        )
            .prop_map(|(ids, more)| ResponseBody::Ledgers { ids, more }),
        (
            any::<u64>(),
            any::<u64>(),
            any::<bool>(),
            any::<u64>(),
            any::<u64>()
        )
            .prop_map(|(f, t, ro, l, e)| ResponseBody::Info(BookieInfo {
                free_bytes: f,
                total_bytes: t,
                read_only: ro,
                ledgers: l,
                entries: e
            })),
    ];
    prop_oneof![
        (any::<u64>(), body).prop_map(|(id, b)| Response::ok(id, b)),
        (any::<u64>(), 1u8..=7, status()).prop_map(|(id, op, s)| Response::error(id, op, s)),
    ]
}

proptest! {
    #[test]
    fn requests_round_trip_through_a_stream_split_anywhere(
        ops in proptest::collection::vec(request_op(), 1..8),
        split in any::<prop::sample::Index>(),
    ) {
        let reqs: Vec<Request> = ops
            .into_iter()
            .enumerate()
            .map(|(i, op)| Request { id: i as u64 * 31, op })
            .collect();
        let mut wire = BytesMut::new();
        for r in &reqs {
            encode_request(r, &mut wire);
        }
        let at = split.index(wire.len() + 1);
        let mut buf = BytesMut::from(&wire[..at]);
        let mut rest = &wire[at..];
        let mut got = Vec::new();
        loop {
            match decode_request(&mut buf, DEFAULT_MAX_FRAME).unwrap() {
                Some(Decoded::Ok(r)) => got.push(r),
                Some(bad) => panic!("{bad:?}"),
                None if rest.is_empty() => break,
                None => {
                    buf.extend_from_slice(rest);
                    rest = &[];
                }
            }
        }
        prop_assert_eq!(got, reqs);
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn responses_round_trip(resps in proptest::collection::vec(response(), 1..8)) {
        let mut wire = BytesMut::new();
        for r in &resps {
            encode_response(r, &mut wire);
        }
        let mut got = Vec::new();
        while let Some(r) = decode_response(&mut wire, DEFAULT_MAX_FRAME).unwrap() {
            got.push(r);
        }
        prop_assert_eq!(got, resps);
    }

    #[test]
    fn arbitrary_bytes_pass_the_fuzz_checks(
        data in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        fuzz_checks::exercise(&data);
    }

    #[test]
    fn valid_streams_with_noise_pass_the_fuzz_checks(
        ops in proptest::collection::vec(request_op(), 1..4),
        noise in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let mut wire = BytesMut::new();
        for (i, op) in ops.into_iter().enumerate() {
            encode_request(&Request { id: i as u64, op }, &mut wire);
        }
        wire.extend_from_slice(&noise);
        fuzz_checks::exercise(&wire);
    }

    #[test]
    fn a_request_with_a_flipped_byte_never_decodes_to_another_entry(
        op in request_op(),
        flip in any::<prop::sample::Index>(),
        bit in 0u8..8,
    ) {
        let req = Request { id: 1, op };
        let mut wire = BytesMut::new();
        encode_request(&req, &mut wire);
        let at = flip.index(wire.len());
        wire[at] ^= 1 << bit;
        if let Ok(Some(Decoded::Ok(Request { op: RequestOp::Add(a), .. }))) =
            decode_request(&mut wire, DEFAULT_MAX_FRAME)
        {
            // Whatever survived the flip still names the ledger and entry its header names.
            let h = EntryHeader::parse(&a.entry).unwrap();
            prop_assert_eq!((h.ledger_id, h.entry_id), (a.ledger_id, a.entry_id));
        }
    }
}

/// Hostile inputs through the fuzz target's checks (add here, with a comment naming the bug,
/// every input `fuzz/fuzz_targets/bookie_decoder.rs` reports).
#[test]
fn hostile_inputs() {
    let cases: &[(&str, &[u8])] = &[
        (
            "a length prefix of exactly the limit with nothing after it",
            &[0, 0x50, 0, 0],
        ),
        (
            "a 4 GiB frame announced in 4 bytes",
            &[0xff, 0xff, 0xff, 0xff, 1, 1],
        ),
        (
            "an add whose entry length field is u32::MAX",
            &[
                0, 0, 0, 0x3e, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0,
                0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
            ],
        ),
        (
            "a ledger list response claiming u32::MAX ids",
            &[
                0, 0, 0, 0x11, 1, 6, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
            ],
        ),
    ];
    for (what, case) in cases {
        eprintln!("{what}");
        fuzz_checks::exercise(case);
    }
}
