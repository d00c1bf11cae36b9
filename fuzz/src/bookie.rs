//! What the `bookie_decoder` fuzz target checks. Not a module of the fuzz crate's library: the
//! target and `crates/zkit-bookie/tests/protocol_proptest.rs` include this file by path, so the
//! fuzzer and plain `cargo test` run the same checks (and the proto fuzz library needs no bookie).
//!
//! The input is a connection's byte stream, decoded as bookie requests and, separately, as
//! bookie responses, with the default and a tiny frame limit. Decoding must never panic or
//! over-read; whatever decodes must re-encode to bytes that decode to the same value; an add
//! that decodes names, in its entry header, the ledger and entry it claims.

use bytes::BytesMut;
use zkit_bookie::protocol::entry::EntryHeader;
use zkit_bookie::protocol::{
    decode_request, decode_response, encode_request, encode_response, Decoded, RequestOp,
    DEFAULT_MAX_FRAME,
};

/// Runs every check on one input; panics (what the fuzzer reports) when one fails.
pub fn exercise(data: &[u8]) {
    for max in [DEFAULT_MAX_FRAME, 64] {
        let mut buf = BytesMut::from(data);
        loop {
            let before = buf.len();
            match decode_request(&mut buf, max) {
                Ok(Some(Decoded::Ok(req))) => {
                    assert!(buf.len() < before, "a request decoded from nothing");
                    if let RequestOp::Add(a) = &req.op {
                        let h = EntryHeader::parse(&a.entry).expect("add without an entry header");
                        assert_eq!((h.ledger_id, h.entry_id), (a.ledger_id, a.entry_id));
                        assert!(a.ledger_id >= 0 && a.entry_id >= 0);
                    }
                    let mut again = BytesMut::new();
                    encode_request(&req, &mut again);
                    let back = decode_request(&mut again, usize::MAX >> 1);
                    assert_eq!(
                        back,
                        Ok(Some(Decoded::Ok(req))),
                        "request re-encoding differs"
                    );
                    assert!(again.is_empty());
                }
                Ok(Some(Decoded::Bad { .. })) => assert!(buf.len() < before),
                Ok(None) => {
                    assert_eq!(buf.len(), before, "an incomplete frame was consumed");
                    break;
                }
                Err(_) => break,
            }
        }
        let mut buf = BytesMut::from(data);
        while let Ok(Some(resp)) = decode_response(&mut buf, max) {
            let mut again = BytesMut::new();
            encode_response(&resp, &mut again);
            let back = decode_response(&mut again, usize::MAX >> 1);
            assert_eq!(back, Ok(Some(resp)), "response re-encoding differs");
        }
    }
}
