//! Round trips and rejections of the codec.

use super::entry::{DigestType, Digester};
use super::framing::put_frame;
use super::*;
use bytes::{BufMut, BytesMut};

fn add(id: u64) -> Request {
    let d = Digester::new(DigestType::Crc32c, b"");
    let entry = d.encode(
        EntryHeader {
            ledger_id: 1,
            entry_id: 0,
            lac: -1,
            length: 3,
        },
        b"abc",
    );
    Request {
        id,
        op: RequestOp::Add(AddRequest {
            ledger_id: 1,
            entry_id: 0,
            flags: 0,
            master_key: entry::master_key(b""),
            entry,
        }),
    }
}

#[test]
fn every_prefix_of_a_frame_is_incomplete_and_nothing_is_consumed() {
    let mut full = BytesMut::new();
    encode_request(&add(9), &mut full);
    for cut in 0..full.len() {
        let mut part = BytesMut::from(&full[..cut]);
        assert_eq!(decode_request(&mut part, DEFAULT_MAX_FRAME), Ok(None));
        assert_eq!(part.len(), cut);
    }
    let got = decode_request(&mut full, DEFAULT_MAX_FRAME).unwrap();
    assert_eq!(got, Some(Decoded::Ok(add(9))));
    assert!(full.is_empty());
}

#[test]
fn oversized_short_and_wrong_version_frames_are_frame_errors() {
    let mut big = BytesMut::from(&(1_000_001u32).to_be_bytes()[..]);
    assert_eq!(
        decode_request(&mut big, 1_000_000),
        Err(FrameError::TooLarge {
            len: 1_000_001,
            max: 1_000_000
        })
    );
    let mut short = BytesMut::from(&[0, 0, 0, 2, 1, 1][..]);
    assert_eq!(
        decode_request(&mut short, DEFAULT_MAX_FRAME),
        Err(FrameError::TooShort(2))
    );
    let mut v2 = BytesMut::new();
    encode_request(&add(5), &mut v2);
    v2[4] = 2;
    assert_eq!(
        decode_request(&mut v2, DEFAULT_MAX_FRAME),
        Err(FrameError::BadVersion {
            version: 2,
            request_id: 5
        })
    );
}

fn bad_reason(bytes: &mut BytesMut) -> &'static str {
    match decode_request(bytes, DEFAULT_MAX_FRAME) {
        Ok(Some(Decoded::Bad {
            reason, request_id, ..
        })) => {
            assert_eq!(request_id, 3);
            reason
        }
        other => panic!("expected a bad request, got {other:?}"),
    }
}

#[test]
fn bad_contents_are_bad_requests_with_the_request_id() {
    // Unknown op.
    let mut b = BytesMut::new();
    put_frame(&mut b, |b| {
        b.put_u8(VERSION);
        b.put_u8(99);
        b.put_u64(3);
    });
    assert_eq!(bad_reason(&mut b), "unknown op");

    // Negative ledger id.
    let mut b = BytesMut::new();
    encode_request(
        &Request {
            id: 3,
            op: RequestOp::ReadLac { ledger_id: -5 },
        },
        &mut b,
    );
    assert_eq!(bad_reason(&mut b), "negative ledger id");

    // Entry header naming another entry.
    let mut req = add(3);
    if let RequestOp::Add(a) = &mut req.op {
        a.entry_id = 1;
    }
    let mut b = BytesMut::new();
    encode_request(&req, &mut b);
    assert_eq!(
        bad_reason(&mut b),
        "entry header names another ledger or entry"
    );

    // Trailing bytes after a complete body.
    let mut b = BytesMut::new();
    put_frame(&mut b, |b| {
        b.put_u8(VERSION);
        b.put_u8(Op::BookieInfo as u8);
        b.put_u64(3);
        b.put_u8(0);
    });
    assert_eq!(bad_reason(&mut b), "trailing bytes");

    // An entry length that runs past the frame.
    let mut b = BytesMut::new();
    put_frame(&mut b, |b| {
        b.put_u8(VERSION);
        b.put_u8(Op::Add as u8);
        b.put_u64(3);
        b.put_i64(1);
        b.put_i64(0);
        b.put_u16(0);
        b.put_slice(&[0; 32]);
        b.put_u32(u32::MAX);
    });
    assert_eq!(bad_reason(&mut b), "short body");

    // Unknown flags.
    let mut b = BytesMut::new();
    put_frame(&mut b, |b| {
        b.put_u8(VERSION);
        b.put_u8(Op::Read as u8);
        b.put_u64(3);
        b.put_i64(1);
        b.put_i64(0);
        b.put_u16(0x80);
    });
    assert_eq!(bad_reason(&mut b), "unknown read flags");
}

#[test]
fn a_response_list_longer_than_its_frame_is_malformed() {
    let mut b = BytesMut::new();
    put_frame(&mut b, |b| {
        b.put_u8(VERSION);
        b.put_u8(Op::ListLedgers as u8);
        b.put_u64(1);
        b.put_u16(0);
        b.put_u8(0);
        b.put_u32(u32::MAX);
    });
    assert!(matches!(
        decode_response(&mut b, DEFAULT_MAX_FRAME),
        Err(ResponseError::Malformed { .. })
    ));
}
