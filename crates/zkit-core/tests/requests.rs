//! What the data-driven language (`testdata/*.txt`, run by `scenarios.rs`) cannot say: the
//! handshake's exact reply fields (readOnly omitted when the client omitted it, the password
//! handed out, the txn it logged) and snapshots cut at every length. Everything else about
//! requests — stats, error precedence, "do not mutate on failure", watches, multi, ACLs and
//! auth, the reaper — is in the data files.

mod common;

use common::*;
use zkit_core::{Config, Outbound, TxnOp};
use zkit_proto::op::create_mode as cm;
use zkit_proto::*;

const C: u64 = 1;
const D: u64 = 2;

fn set(path: &str, data: &[u8], version: i32) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data: Some(data.to_vec()),
        version,
    })
}

#[test]
fn session_negotiation_and_reattach() {
    let mut h = H::new();
    // Timeout clamped to [4000, 40000] with the default 2000 tick.
    h.core
        .connect(h.now, C, connect_req(0, vec![0; 16], 100), [9; 16]);
    assert!(h.txns.is_empty());
    let msgs = h.ready();
    assert!(matches!(
        h.txns[0].op,
        TxnOp::CreateSession {
            timeout_ms: 4000,
            ..
        }
    ));
    let (sid, passwd) = match &msgs[..] {
        [(
            C,
            Outbound::Connect {
                response,
                close_after: false,
            },
        )] => {
            assert_eq!(response.time_out, 4000);
            assert_eq!(response.read_only, Some(false));
            assert_eq!(h.txns[0].session, response.session_id);
            (response.session_id, response.passwd.clone())
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(passwd, vec![9; 16]);
    // Reattach from D with the right password closes C.
    let mut req = connect_req(sid, passwd.clone(), 1_000_000);
    req.read_only = None;
    h.core.connect(h.now, D, req, [0; 16]);
    let msgs = h.ready();
    assert_eq!(msgs[0], (C, Outbound::Close));
    match &msgs[1] {
        (
            D,
            Outbound::Connect {
                response,
                close_after: false,
            },
        ) => {
            assert_eq!((response.session_id, response.time_out), (sid, 40_000));
            assert_eq!(
                response.read_only, None,
                "omitted when the request omitted it"
            );
        }
        other => panic!("{other:?}"),
    }
    // C's requests are now refused (closed), D works.
    let msgs = h.send(C, Request::Ping);
    assert_eq!(msgs, vec![(C, Outbound::Close)]);
    h.ok(D, Request::Ping);
    // Wrong password: zeroed response, close after; the attached connection is closed too.
    h.core
        .connect(h.now, 3, connect_req(sid, vec![1; 16], 5000), [0; 16]);
    let msgs = h.ready();
    assert_eq!(msgs[0], (D, Outbound::Close));
    match &msgs[1] {
        (
            3,
            Outbound::Connect {
                response,
                close_after: true,
            },
        ) => {
            assert_eq!((response.time_out, response.session_id), (0, 0));
            assert_eq!(response.passwd, vec![0; 16]);
        }
        other => panic!("{other:?}"),
    }
    // Unknown session.
    h.core
        .connect(h.now, 4, connect_req(12345, vec![0; 16], 5000), [0; 16]);
    assert!(matches!(
        &h.ready()[..],
        [(
            4,
            Outbound::Connect {
                close_after: true,
                ..
            }
        )]
    ));
    // Client ahead of the server: closed without a response.
    let mut req = connect_req(0, vec![0; 16], 5000);
    req.last_zxid_seen = h.core.last_zxid() + 1;
    h.core.connect(h.now, 5, req, [0; 16]);
    assert_eq!(h.ready(), vec![(5, Outbound::Close)]);
}

#[test]
fn snapshot_restore_round_trip() {
    let mut h = H::with(Config {
        extended_types: true,
        ..Config::default()
    });
    h.session(C);
    h.create(C, "/a", 0);
    h.create(C, "/a/e", cm::EPHEMERAL);
    h.ok(
        C,
        Request::CreateContainer(create("/c", b"", cm::CONTAINER)),
    );
    h.ok(C, set("/a", b"data", -1));
    let snap = h.core.snapshot();
    let restored = zkit_core::Core::restore(h.core.config().clone(), h.now, &snap)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(restored.dump(), h.core.dump());
    assert_eq!(restored.stats().ephemerals, 1);
    for n in 0..snap.len() {
        assert!(zkit_core::Core::restore(Config::default(), 0, &snap[..n]).is_err());
    }
}
