//! Property tests: random request sequences never panic, failed requests never change the
//! state, and replaying the emitted txns (also through their binary encoding) into a fresh
//! core with `apply` rebuilds exactly the same state; a snapshot restores it too.

mod common;

use bytes::BytesMut;
use common::*;
use proptest::prelude::*;
use zkit_core::{Config, Core, Outbound, Txn};
use zkit_proto::*;

const PATHS: &[&str] = &["/a", "/a/b", "/a/b/c", "/c", "/c/d", "/t", "/a/t"];
const BAD_PATHS: &[&str] = &["/", "/zookeeper", "/a/", "bad", "/a//b", "/zookeeper/quota"];

#[derive(Debug, Clone)]
enum Action {
    Connect(u64),
    Reconnect(u64, u64),
    Disconnect(u64),
    Tick(i64),
    Req(u64, Request),
}

fn path() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => prop::sample::select(PATHS).prop_map(str::to_owned),
        1 => prop::sample::select(BAD_PATHS).prop_map(str::to_owned),
    ]
}

fn create_req() -> impl Strategy<Value = CreateRequest> {
    (
        path(),
        prop_oneof![6 => 0..5i32, 1 => 0..8i32],
        prop::bool::weighted(0.95),
    )
        .prop_map(|(path, flags, acl)| CreateRequest {
            path,
            data: Some(b"d".to_vec()),
            acl: if acl { open_acl() } else { vec![] },
            flags,
        })
}

fn multi_op() -> impl Strategy<Value = MultiOp> {
    prop_oneof![
        create_req().prop_map(MultiOp::Create),
        create_req().prop_map(MultiOp::Create2),
        (path(), -1..2i32)
            .prop_map(|(path, version)| MultiOp::Delete(DeleteRequest { path, version })),
        (path(), -1..2i32).prop_map(|(path, version)| MultiOp::SetData(SetDataRequest {
            path,
            data: Some(b"m".to_vec()),
            version
        })),
        (path(), -1..2i32)
            .prop_map(|(path, version)| MultiOp::Check(CheckVersionRequest { path, version })),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        3 => create_req().prop_map(Request::Create),
        1 => create_req().prop_map(Request::Create2),
        1 => create_req().prop_map(Request::CreateContainer),
        1 => (create_req(), -1..3000i64).prop_map(|(r, ttl)| Request::CreateTtl(CreateTtlRequest {
            path: r.path, data: r.data, acl: r.acl, flags: r.flags, ttl
        })),
        2 => (path(), -1..2i32).prop_map(|(path, version)| Request::Delete(DeleteRequest { path, version })),
        1 => path().prop_map(|path| Request::DeleteContainer { path }),
        2 => (path(), -1..2i32).prop_map(|(path, version)| Request::SetData(SetDataRequest {
            path, data: Some(b"s".to_vec()), version
        })),
        1 => (path(), -1..2i32, any::<bool>()).prop_map(|(path, version, ok)| Request::SetAcl(SetAclRequest {
            path, acl: if ok { open_acl() } else { vec![] }, version
        })),
        1 => (path(), -1..2i32).prop_map(|(path, version)| Request::Check(CheckVersionRequest { path, version })),
        2 => prop::collection::vec(multi_op(), 0..4).prop_map(Request::Multi),
        1 => (path(), any::<bool>()).prop_map(|(path, watch)| Request::GetData(PathWatchRequest { path, watch })),
        1 => (path(), any::<bool>()).prop_map(|(path, watch)| Request::Exists(PathWatchRequest { path, watch })),
        1 => (path(), any::<bool>()).prop_map(|(path, watch)| Request::GetChildren2(PathWatchRequest { path, watch })),
        1 => (path(), 0..3i32).prop_map(|(path, mode)| Request::AddWatch(AddWatchRequest { path, mode })),
        1 => (path(), 0..6i32).prop_map(|(path, watcher_type)| Request::RemoveWatches(WatchesRequest { path, watcher_type })),
        1 => Just(Request::Ping),
        1 => Just(Request::CloseSession),
        1 => path().prop_map(|path| Request::GetAllChildrenNumber { path }),
        1 => path().prop_map(|prefix_path| Request::GetEphemerals { prefix_path }),
    ]
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        1 => (1..4u64).prop_map(Action::Connect),
        1 => (1..4u64, 1..4u64).prop_map(|(a, b)| Action::Reconnect(a, b)),
        1 => (1..4u64).prop_map(Action::Disconnect),
        2 => (0..3000i64).prop_map(Action::Tick),
        30 => (1..4u64, request()).prop_map(|(c, r)| Action::Req(c, r)),
    ]
}

fn run(actions: Vec<Action>) -> Result<(), TestCaseError> {
    let config = Config {
        extended_types: true,
        container_check_interval_ms: 1000,
        ..Config::default()
    };
    let mut h = H::with(config.clone());
    let mut passwds = std::collections::BTreeMap::new();
    for c in 1..4 {
        passwds.insert(c, h.session(c));
    }
    for a in actions {
        match a {
            Action::Connect(c) => {
                h.core.disconnect(h.now, c);
                let (sid, pw) = h.session(c);
                passwds.insert(c, (sid, pw));
            }
            Action::Reconnect(from, to) => {
                if let Some((sid, pw)) = passwds.get(&from).cloned() {
                    h.core
                        .connect(h.now, to, connect_req(sid, pw, 6000), [0; 16]);
                    h.ready();
                }
            }
            Action::Disconnect(c) => h.core.disconnect(h.now, c),
            Action::Tick(dt) => {
                h.now += dt;
                h.core.tick(h.now);
                h.ready();
            }
            Action::Req(c, r) => {
                let before = h.tree_dump();
                let msgs = h.send(c, r.clone());
                for (conn, m) in &msgs {
                    if let Outbound::Reply { header, .. } = m {
                        if *conn == c && header.err != 0 {
                            prop_assert_eq!(
                                &h.tree_dump(),
                                &before,
                                "{:?} failed but changed state",
                                r
                            );
                        }
                    }
                }
            }
        }
    }
    // Replay, through the binary encoding, into a fresh core.
    let mut fresh = Core::new(config.clone(), T0);
    for txn in &h.txns {
        let mut buf = BytesMut::new();
        txn.encode(&mut buf);
        let decoded = Txn::decode(&buf);
        prop_assert_eq!(decoded.as_ref(), Ok(txn));
        fresh.apply(txn);
    }
    prop_assert_eq!(fresh.dump(), h.core.dump());
    let restored = Core::restore(config, h.now, &h.core.snapshot());
    prop_assert!(restored.is_ok());
    prop_assert_eq!(
        restored.map(|c| c.dump()).unwrap_or_default(),
        h.core.dump()
    );
    // zxids are consecutive.
    for (i, t) in h.txns.iter().enumerate() {
        prop_assert_eq!(t.zxid, i as i64 + 1);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_replay_to_the_same_state(actions in prop::collection::vec(action(), 1..120)) {
        run(actions)?;
    }
}

#[test]
fn replay_over_a_snapshot_is_idempotent() {
    let config = Config::default();
    let mut h = H::with(config.clone());
    h.session(1);
    h.create(1, "/a", 0);
    let snap = h.core.snapshot();
    h.create(1, "/a/b", 0);
    h.ok(
        1,
        Request::SetData(SetDataRequest {
            path: "/a".into(),
            data: Some(b"x".to_vec()),
            version: -1,
        }),
    );
    let mut restored = Core::restore(config, h.now, &snap).unwrap_or_else(|e| panic!("{e}"));
    // The whole log, including txns already in the snapshot.
    for txn in &h.txns {
        restored.apply(txn);
    }
    assert_eq!(restored.dump(), h.core.dump());
}
