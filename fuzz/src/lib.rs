//! What the `request_decoder` fuzz target checks, as a plain library so that
//! `crates/zkit-proto/tests/fuzz_regressions.rs` can replay saved inputs with `cargo test`.
//!
//! The input is treated as the bytes a client sends on one connection: the first frame is the
//! handshake (or a four-letter word), every later frame is `RequestHeader` + body. Decoding must
//! never panic, must not over-read, and whatever decodes must re-encode to something that
//! decodes to the same value (so the server's view of a request is stable).

use bytes::BytesMut;
use zkit_proto::frame::{decode_frame, is_four_letter_word, DEFAULT_MAX_FRAME};
use zkit_proto::records::{
    Acl, ConnectRequest, CreateRequest, DeleteRequest, Id, MultiOp, MultiReadOp, PathWatchRequest,
    RequestHeader, SetDataRequest, SetWatches2,
};
use zkit_proto::{Reader, Record, Request};

/// Runs every check on one input; panics (what the fuzzer reports) when one fails.
pub fn exercise(data: &[u8]) {
    if let Some(first4) = data.first_chunk::<4>() {
        let _ = is_four_letter_word(*first4);
    }
    // A small limit too, so the length checks are hit with small inputs.
    for max in [DEFAULT_MAX_FRAME, 64] {
        let mut rest = data;
        let mut first = true;
        while let Ok(Some((consumed, payload))) = decode_frame(rest, max) {
            assert_eq!(consumed, payload.len() + 4, "frame accounting");
            assert!(consumed <= rest.len(), "frame over-read");
            if first {
                handshake(payload);
                first = false;
            } else {
                request(payload);
            }
            rest = &rest[consumed..];
        }
    }
    // The raw input as a request payload too, without framing.
    request(data);
}

fn handshake(payload: &[u8]) {
    if let Ok(c) = ConnectRequest::decode_from(payload) {
        let again = ConnectRequest::decode_from(&c.to_bytes());
        assert_eq!(again.as_ref(), Ok(&c), "ConnectRequest re-encode");
    }
}

fn request(payload: &[u8]) {
    let mut r = Reader::new(payload);
    let Ok(header) = RequestHeader::decode(&mut r) else {
        return;
    };
    let body = r.rest();
    let Ok(req) = Request::decode(&header, body) else {
        return;
    };
    assert_eq!(req.op_code().code(), header.op, "op code preserved");
    let mut buf = BytesMut::new();
    req.encode(header.xid, &mut buf);
    let mut r = Reader::new(&buf);
    let h2 = RequestHeader::decode(&mut r).expect("re-encoded header decodes");
    assert_eq!(h2, header, "header re-encode");
    assert_eq!(
        Request::decode(&h2, r.rest()).as_ref(),
        Ok(&req),
        "request re-encode"
    );
}

/// Valid framed inputs to start the fuzzer from: a handshake followed by requests of the
/// structurally richest kinds (multi, multiRead, create with ACLs, setWatches2).
pub fn seeds() -> Vec<Vec<u8>> {
    let connect = ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        time_out: 30_000,
        session_id: 0,
        passwd: vec![0; 16],
        read_only: Some(false),
    };
    let create = CreateRequest {
        path: "/a".into(),
        data: Some(b"x".to_vec()),
        acl: vec![Acl {
            perms: 31,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }],
        flags: 0,
    };
    let requests = vec![
        Request::Create(create.clone()),
        Request::Multi(vec![
            MultiOp::Create(create.clone()),
            MultiOp::Delete(DeleteRequest {
                path: "/a".into(),
                version: -1,
            }),
            MultiOp::SetData(SetDataRequest {
                path: "/b".into(),
                data: None,
                version: 0,
            }),
        ]),
        Request::MultiRead(vec![MultiReadOp::GetData(PathWatchRequest {
            path: "/".into(),
            watch: false,
        })]),
        Request::SetWatches2(SetWatches2 {
            relative_zxid: 1,
            data_watches: vec!["/d".into()],
            exist_watches: vec![],
            child_watches: vec!["/c".into()],
            persistent_watches: vec![],
            persistent_recursive_watches: vec!["/r".into()],
        }),
        Request::Ping,
    ];
    let mut seeds = Vec::new();
    let mut all = BytesMut::new();
    zkit_proto::frame::encode_frame(&mut all, |b| connect.encode(b));
    for (xid, req) in (1..).zip(&requests) {
        let mut one = BytesMut::new();
        zkit_proto::frame::encode_frame(&mut one, |b| connect.encode(b));
        zkit_proto::frame::encode_frame(&mut one, |b| req.encode(xid, b));
        seeds.push(one.to_vec());
        zkit_proto::frame::encode_frame(&mut all, |b| req.encode(xid, b));
    }
    seeds.push(all.to_vec());
    seeds.push(b"ruok".to_vec());
    seeds
}
