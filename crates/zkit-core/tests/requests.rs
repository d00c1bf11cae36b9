//! Every rule of the request surface, without a server: tree ops and their Stat semantics,
//! error precedence, "do not mutate on failure", sessions, watches, multi, reaper, misc ops.

mod common;

use common::*;
use zkit_core::{Config, Outbound, TxnOp};
use zkit_proto::op::{add_watch_mode, create_mode as cm, event_type as ev, watcher_type};
use zkit_proto::*;

const C: u64 = 1;
const D: u64 = 2;

fn pw(path: &str, watch: bool) -> PathWatchRequest {
    PathWatchRequest {
        path: path.into(),
        watch,
    }
}

fn del(path: &str, version: i32) -> Request {
    Request::Delete(DeleteRequest {
        path: path.into(),
        version,
    })
}

fn set(path: &str, data: &[u8], version: i32) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data: Some(data.to_vec()),
        version,
    })
}

fn err(h: &mut H, conn: u64, req: Request) -> i32 {
    h.call(conn, req).err()
}

/// Asserts `req` fails with `code`, changes nothing but the zxid, and consumes one zxid.
fn fails(h: &mut H, req: Request, code: ErrorCode) {
    let before = h.tree_dump();
    let zxid = h.core.last_zxid();
    let r = h.call(C, req.clone());
    assert_eq!(r.err(), code as i32, "{req:?}");
    assert_eq!(r.body, Response::Empty);
    assert_eq!(h.tree_dump(), before, "state changed by failing {req:?}");
    assert_eq!(r.header.zxid, zxid + 1, "failed writes consume a zxid");
    assert!(matches!(
        h.txns.last().map(|t| &t.op),
        Some(TxnOp::Error { .. })
    ));
}

#[test]
fn special_nodes() {
    let mut h = H::new();
    h.session(C);
    let root = h.stat(C, "/").unwrap_or_default();
    assert_eq!((root.num_children, root.cversion), (1, -1));
    let r = h.ok(
        C,
        Request::GetAcl {
            path: "/zookeeper/config".into(),
        },
    );
    match r.body {
        Response::GetAcl { acl, stat } => {
            assert_eq!(acl[0].perms, 1);
            assert_eq!(stat.aversion, -1);
        }
        other => panic!("{other:?}"),
    }
    let r = h.ok(C, Request::GetChildren(pw("/zookeeper", false)));
    assert_eq!(
        r.body,
        Response::GetChildren {
            children: vec!["config".into(), "quota".into()]
        }
    );
    for p in ["/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config"] {
        fails(&mut h, del(p, -1), ErrorCode::BadArguments);
    }
    // 3.8 has no special-path rule for setACL.
    let r = h.call(
        C,
        Request::SetAcl(SetAclRequest {
            path: "/zookeeper".into(),
            acl: open_acl(),
            version: -1,
        }),
    );
    assert_eq!(r.err(), 0);
    assert_eq!(h.core.stats().node_count, 5);
}

#[test]
fn create_stat_and_sequential_naming() {
    let mut h = H::new();
    h.session(C);
    let z0 = h.core.last_zxid();
    h.now += 5;
    let r = h.ok(C, Request::Create2(create("/a", b"hello", cm::PERSISTENT)));
    let s = r.stat();
    assert_eq!(r.header.zxid, z0 + 1);
    assert_eq!((s.czxid, s.mzxid, s.pzxid), (z0 + 1, z0 + 1, z0 + 1));
    assert_eq!((s.ctime, s.mtime), (h.now, h.now));
    assert_eq!(
        (s.version, s.cversion, s.aversion, s.ephemeral_owner),
        (0, 0, 0, 0)
    );
    assert_eq!((s.data_length, s.num_children), (5, 0));

    assert_eq!(
        h.create(C, "/a/x", cm::PERSISTENT_SEQUENTIAL),
        "/a/x0000000000"
    );
    assert_eq!(h.create(C, "/a/plain", cm::PERSISTENT), "/a/plain");
    h.ok(C, del("/a/x0000000000", -1));
    // Stored cversion counts creates only: the next suffix is 2, not 3.
    assert_eq!(
        h.create(C, "/a/", cm::PERSISTENT_SEQUENTIAL),
        "/a/0000000002"
    );
    let a = h.stat(C, "/a").unwrap_or_default();
    // 3 creates + 1 delete visible to clients.
    assert_eq!((a.cversion, a.num_children), (4, 2));
    assert_eq!(a.pzxid, h.core.last_zxid());
    assert_eq!(
        (a.mzxid, a.version),
        (z0 + 1, 0),
        "child changes leave mzxid/version"
    );
    // Sequential on the root: a digits-only top-level name.
    let p = h.create(C, "/", cm::PERSISTENT_SEQUENTIAL);
    assert_eq!(p, "/0000000001");
}

#[test]
fn create_error_precedence() {
    let mut h = H::new();
    h.session(C);
    h.create(C, "/e", cm::EPHEMERAL);
    h.create(C, "/p", cm::PERSISTENT);
    let mk = |path: &str, acl: Vec<Acl>, flags: i32| {
        Request::Create(CreateRequest {
            path: path.into(),
            data: Some(vec![]),
            acl,
            flags,
        })
    };
    fails(&mut h, mk("/x", open_acl(), 7), ErrorCode::BadArguments);
    fails(
        &mut h,
        mk("/x", open_acl(), cm::PERSISTENT_WITH_TTL),
        ErrorCode::Unimplemented,
    );
    // TTL mode check comes before the path and ACL checks.
    fails(
        &mut h,
        mk("bad", vec![], cm::PERSISTENT_WITH_TTL),
        ErrorCode::Unimplemented,
    );
    fails(&mut h, mk("bad", vec![], 0), ErrorCode::BadArguments);
    fails(&mut h, mk("/x\0", vec![], 0), ErrorCode::BadArguments);
    fails(&mut h, mk("/missing/x", vec![], 0), ErrorCode::InvalidAcl);
    fails(&mut h, mk("/missing/x", open_acl(), 0), ErrorCode::NoNode);
    fails(&mut h, mk("/p//x", open_acl(), 0), ErrorCode::NoNode);
    fails(&mut h, mk("//x", open_acl(), 0), ErrorCode::BadArguments);
    fails(&mut h, mk("/p/", open_acl(), 0), ErrorCode::BadArguments);
    fails(&mut h, mk("/p/.", open_acl(), 0), ErrorCode::BadArguments);
    fails(
        &mut h,
        mk("/p/\u{1}", open_acl(), 0),
        ErrorCode::BadArguments,
    );
    fails(&mut h, mk("/p", open_acl(), 0), ErrorCode::NodeExists);
    fails(&mut h, mk("/", open_acl(), 0), ErrorCode::NodeExists);
    fails(
        &mut h,
        mk("/e/x", open_acl(), 0),
        ErrorCode::NoChildrenForEphemerals,
    );
    // NodeExists comes before NoChildrenForEphemerals only when the child exists; path
    // validation comes before both.
    fails(&mut h, mk("/e/", open_acl(), 0), ErrorCode::BadArguments);
    let auth_acl = vec![Acl {
        perms: 31,
        id: Id {
            scheme: "auth".into(),
            id: String::new(),
        },
    }];
    fails(&mut h, mk("/y", auth_acl, 0), ErrorCode::InvalidAcl);
}

#[test]
fn ttl_and_container_creates() {
    let mut h = H::with(Config {
        extended_types: true,
        ..Config::default()
    });
    h.session(C);
    let ttl = |path: &str, flags: i32, ttl: i64| {
        Request::CreateTtl(CreateTtlRequest {
            path: path.into(),
            data: Some(vec![]),
            acl: open_acl(),
            flags,
            ttl,
        })
    };
    fails(
        &mut h,
        ttl("/t", cm::PERSISTENT_WITH_TTL, 0),
        ErrorCode::BadArguments,
    );
    fails(
        &mut h,
        ttl("/t", cm::PERSISTENT_WITH_TTL, 1 << 40),
        ErrorCode::BadArguments,
    );
    fails(
        &mut h,
        ttl("/t", cm::PERSISTENT, 100),
        ErrorCode::BadArguments,
    );
    fails(
        &mut h,
        Request::Create(create("/t", b"", cm::PERSISTENT_WITH_TTL)),
        ErrorCode::BadArguments,
    );
    let r = h.ok(
        C,
        ttl("/t", cm::PERSISTENT_SEQUENTIAL_WITH_TTL, (1 << 40) - 1),
    );
    match &r.body {
        Response::Create2 { path, stat } => {
            // Failed creates do not bump the root's stored cversion (still 0).
            assert_eq!(path, "/t0000000000");
            assert_eq!(stat.ephemeral_owner, 0, "TTL owner shows as 0");
        }
        other => panic!("{other:?}"),
    }
    let r = h.ok(
        C,
        Request::CreateContainer(create("/c", b"", cm::CONTAINER)),
    );
    assert_eq!(r.stat().ephemeral_owner, 0, "container owner shows as 0");
    let (sid, _) = (h.core.session_of(C).unwrap_or_default(), ());
    let r = h.ok(C, Request::Create2(create("/e", b"", cm::EPHEMERAL)));
    assert_eq!(r.stat().ephemeral_owner, sid);
    // Children of containers and TTL nodes are allowed.
    h.create(C, "/c/x", cm::PERSISTENT);
    h.create(C, "/t0000000000/x", cm::PERSISTENT);
}

#[test]
fn delete_set_data_set_acl() {
    let mut h = H::new();
    h.session(C);
    h.create(C, "/a", 0);
    h.create(C, "/a/b", 0);
    fails(&mut h, del("/nope", -1), ErrorCode::NoNode);
    fails(&mut h, del("/nope/x", -1), ErrorCode::NoNode);
    fails(&mut h, del("nope", -1), ErrorCode::BadArguments);
    fails(&mut h, del("/a", 0), ErrorCode::NotEmpty);
    fails(&mut h, del("/a", 3), ErrorCode::BadVersion);
    fails(&mut h, set("/a", b"x", 3), ErrorCode::BadVersion);
    fails(&mut h, set("/nope", b"x", -1), ErrorCode::NoNode);
    fails(&mut h, set("/a/", b"x", -1), ErrorCode::BadArguments);
    h.now += 100;
    let s = h.ok(C, set("/a", b"xyz", 0)).stat();
    assert_eq!(
        (s.version, s.data_length, s.mtime, s.mzxid),
        (1, 3, h.now, h.core.last_zxid())
    );
    assert!(s.ctime < s.mtime);
    let s = h.ok(C, set("/a", b"", -1)).stat();
    assert_eq!(s.version, 2);
    let acl = |v| {
        Request::SetAcl(SetAclRequest {
            path: "/a".into(),
            acl: open_acl(),
            version: v,
        })
    };
    fails(&mut h, acl(5), ErrorCode::BadVersion);
    fails(
        &mut h,
        Request::SetAcl(SetAclRequest {
            path: "/a".into(),
            acl: vec![],
            version: -1,
        }),
        ErrorCode::InvalidAcl,
    );
    // InvalidACL is checked before NoNode for setACL.
    fails(
        &mut h,
        Request::SetAcl(SetAclRequest {
            path: "/nope".into(),
            acl: vec![],
            version: -1,
        }),
        ErrorCode::InvalidAcl,
    );
    assert_eq!(h.ok(C, acl(0)).stat().aversion, 1);
    h.ok(C, del("/a/b", 0));
    h.ok(C, del("/a", -1));
    assert_eq!(h.stat(C, "/a"), None);
}

#[test]
fn reads_and_misc_ops() {
    let mut h = H::new();
    let (sid, _) = h.session(C);
    h.create(C, "/a", 0);
    h.create(C, "/a/b", 0);
    h.create(C, "/a/b/c", 0);
    h.create(C, "/a/e1", cm::EPHEMERAL);
    h.create(C, "/x", cm::EPHEMERAL);
    assert_eq!(
        err(&mut h, C, Request::GetData(pw("/nope", false))),
        ErrorCode::NoNode as i32
    );
    assert_eq!(
        err(&mut h, C, Request::Exists(pw("/a\0", false))),
        ErrorCode::BadArguments as i32
    );
    let r = h.ok(C, Request::GetAllChildrenNumber { path: "/a".into() });
    assert_eq!(r.body, Response::AllChildrenNumber(3));
    let r = h.ok(C, Request::GetAllChildrenNumber { path: "/".into() });
    assert_eq!(r.body, Response::AllChildrenNumber(8));
    let r = h.call(
        C,
        Request::GetAllChildrenNumber {
            path: "/nope".into(),
        },
    );
    assert_eq!(r.err(), ErrorCode::NoNode as i32);
    let r = h.ok(
        C,
        Request::GetEphemerals {
            prefix_path: "/".into(),
        },
    );
    assert_eq!(
        r.body,
        Response::Ephemerals(vec!["/a/e1".into(), "/x".into()])
    );
    let r = h.ok(
        C,
        Request::GetEphemerals {
            prefix_path: "/a".into(),
        },
    );
    assert_eq!(r.body, Response::Ephemerals(vec!["/a/e1".into()]));
    assert!(sid != 0);
    let zxid = h.core.last_zxid();
    let r = h.ok(
        C,
        Request::Sync {
            path: "whatever".into(),
        },
    );
    assert_eq!(
        (r.body, r.header.zxid),
        (
            Response::Sync {
                path: "whatever".into()
            },
            zxid
        )
    );
    let r = h.ok(C, Request::Ping);
    assert_eq!((r.header.xid, r.header.zxid), (-2, zxid));
    // Reads do not consume zxids.
    assert_eq!(h.core.last_zxid(), zxid);
    // check outside multi: a write (consumes a zxid), answered with no body (Apache 3.8
    // sends no reply at all; zkit answers like a check inside a multi).
    let r = h.ok(
        C,
        Request::Check(CheckVersionRequest {
            path: "/a".into(),
            version: 0,
        }),
    );
    assert_eq!((r.header.zxid, r.body), (zxid + 1, Response::Empty));
    fails(
        &mut h,
        Request::Check(CheckVersionRequest {
            path: "/a".into(),
            version: 9,
        }),
        ErrorCode::BadVersion,
    );
    fails(
        &mut h,
        Request::Reconfig(ReconfigRequest {
            joining_servers: None,
            leaving_servers: None,
            new_members: None,
            cur_config_id: -1,
        }),
        ErrorCode::ReconfigDisabled,
    );
    let r = h.ok(C, Request::Sasl(SaslRequest { token: vec![] }));
    assert_eq!((r.header.zxid, r.body), (0, Response::Error(-1)));
}

#[test]
fn auth_and_who_am_i() {
    let mut h = H::new();
    h.core.set_peer_ip(C, "127.0.0.1".into());
    h.session(C);
    let info = |s: &str, u: &str| ClientInfo {
        auth_scheme: s.into(),
        user: u.into(),
    };
    let r = h.ok(C, Request::WhoAmI);
    assert_eq!(r.body, Response::WhoAmI(vec![info("ip", "127.0.0.1")]));
    let auth = |who: &str| {
        Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: "digest".into(),
            auth: who.as_bytes().to_vec(),
        })
    };
    let r = h.ok(C, auth("bob:secret"));
    assert_eq!(r.header.zxid, 0, "auth replies carry zxid 0");
    h.ok(C, auth("amy:x"));
    h.ok(C, auth("bob:secret"));
    // Deduplicated, digest before ip, as a 3.8 server answers.
    let r = h.ok(C, Request::WhoAmI);
    assert_eq!(
        r.body,
        Response::WhoAmI(vec![
            info("digest", "amy"),
            info("digest", "bob"),
            info("ip", "127.0.0.1")
        ])
    );
    // `auth` expands to every digest id (not ip).
    let auth_acl = vec![Acl {
        perms: 31,
        id: Id {
            scheme: "auth".into(),
            id: String::new(),
        },
    }];
    h.ok(
        C,
        Request::Create(CreateRequest {
            path: "/s".into(),
            data: Some(vec![]),
            acl: auth_acl,
            flags: 0,
        }),
    );
    match h.ok(C, Request::GetAcl { path: "/s".into() }).body {
        Response::GetAcl { acl, .. } => {
            let ids: Vec<&str> = acl.iter().map(|a| a.id.id.as_str()).collect();
            assert_eq!(
                ids,
                [
                    zkit_core::acl::digest_id("amy:x").as_str(),
                    "bob:fyVmFCwVbTJYrznoSu1koqYEYF0="
                ]
            );
        }
        other => panic!("{other:?}"),
    }
    let msgs = h.send(
        C,
        Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: "kerberos".into(),
            auth: vec![],
        }),
    );
    assert!(
        matches!(&msgs[0].1, Outbound::Reply { header, .. } if header.err == ErrorCode::AuthFailed as i32 && header.zxid == 0)
    );
    assert_eq!(msgs[1].1, Outbound::Close);
}

#[test]
fn undecodable_writes_consume_a_zxid_and_reads_do_not() {
    let mut h = H::new();
    h.session(C);
    let before = h.tree_dump();
    let zxid = h.core.last_zxid();
    // A multi holding getData (op 14) and a truncated create (op 1): error txns.
    for (xid, op) in [(7, 14), (8, 1)] {
        h.core
            .reject(h.now, C, xid, op, ErrorCode::MarshallingError);
        let msgs = h.ready();
        assert!(
            matches!(&msgs[..], [(C, Outbound::Reply { header, body: Response::Empty })]
                if header.err == -5 && header.xid == xid && header.zxid == h.core.last_zxid()),
            "{msgs:?}"
        );
        assert!(matches!(
            h.txns.last().map(|t| &t.op),
            Some(TxnOp::Error { err: -5 })
        ));
    }
    assert_eq!(h.core.last_zxid(), zxid + 2);
    // A read (exists, op 3) with a null path: no txn, the previous zxid.
    let txns = h.txns.len();
    h.core.reject(h.now, C, 9, 3, ErrorCode::MarshallingError);
    let msgs = h.ready();
    assert!(
        matches!(&msgs[..], [(C, Outbound::Reply { header, .. })]
            if header.err == -5 && header.zxid == zxid + 2),
        "{msgs:?}"
    );
    assert_eq!(h.txns.len(), txns);
    assert_eq!(h.tree_dump(), before);
}

#[test]
fn null_data_stays_null() {
    let mut h = H::new();
    h.session(C);
    let mut null = create("/n", b"", 0);
    null.data = None;
    h.ok(C, Request::Create(null));
    let get = |h: &mut H| match h.ok(C, Request::GetData(pw("/n", false))).body {
        Response::GetData { data, stat } => (data, stat.data_length),
        other => panic!("{other:?}"),
    };
    assert_eq!(get(&mut h), (None, 0));
    h.ok(C, set("/n", b"ab", -1));
    assert_eq!(get(&mut h), (Some(b"ab".to_vec()), 2));
    h.ok(
        C,
        Request::SetData(SetDataRequest {
            path: "/n".into(),
            data: None,
            version: -1,
        }),
    );
    assert_eq!(get(&mut h), (None, 0));
    // Empty is not null.
    h.ok(C, set("/n", b"", -1));
    assert_eq!(get(&mut h), (Some(vec![]), 0));
    // A snapshot and the txn log keep the null.
    h.ok(
        C,
        Request::Create(CreateRequest {
            data: None,
            ..create("/m", b"", 0)
        }),
    );
    let restored = zkit_core::Core::restore(Config::default(), h.now, &h.core.snapshot())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(restored.dump(), h.core.dump());
    assert!(restored.dump().contains("data=null"), "{}", restored.dump());
    let mut replayed = zkit_core::Core::new(Config::default(), h.now);
    for txn in &h.txns {
        let mut bytes = bytes::BytesMut::new();
        txn.encode(&mut bytes);
        let txn = zkit_core::Txn::decode(&bytes).unwrap_or_else(|e| panic!("{e}"));
        replayed.apply(&txn);
    }
    assert_eq!(replayed.dump(), h.core.dump());
}

#[test]
fn check_watches_on_a_path_without_slash_is_a_marshalling_error() {
    let mut h = H::new();
    h.session(C);
    let check = |path: &str, watcher_type| {
        Request::CheckWatches(WatchesRequest {
            path: path.into(),
            watcher_type,
        })
    };
    // Apache 3.8: PathParentIterator throws on "bad"; "" and "a/b" are just not watched.
    for t in [
        watcher_type::CHILDREN,
        watcher_type::DATA,
        watcher_type::ANY,
    ] {
        assert_eq!(err(&mut h, C, check("bad", t)), -5);
    }
    assert_eq!(err(&mut h, C, check("", watcher_type::DATA)), -121);
    assert_eq!(err(&mut h, C, check("a/b", watcher_type::DATA)), -121);
}

#[test]
fn unknown_op_is_rejected_and_closed() {
    let mut h = H::new();
    h.session(C);
    h.core.reject(h.now, C, 7, 10, ErrorCode::Unimplemented);
    let msgs = h.ready();
    assert!(
        matches!(&msgs[0].1, Outbound::Reply { header, .. } if header.err == -6 && header.xid == 7)
    );
    assert_eq!(msgs[1].1, Outbound::Close);
}

// ----- sessions -----

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
fn expiry_deletes_ephemerals_in_one_txn_and_fires_watches() {
    let mut h = H::new();
    let (sid, passwd) = h.session(C);
    h.session(D);
    h.create(C, "/p", 0);
    h.create(C, "/p/e1", cm::EPHEMERAL);
    h.create(C, "/e2", cm::EPHEMERAL_SEQUENTIAL);
    h.ok(D, Request::GetChildren(pw("/p", true)));
    h.ok(D, Request::Exists(pw("/p/e1", true)));
    // 10 s timeout from T0 (a multiple of the tick) → deadline T0 + 12000 (next boundary).
    h.core.tick(T0 + 11_999);
    assert!(h.ready().is_empty());
    // A ping refreshes the deadline.
    h.now = T0 + 11_000;
    h.ok(C, Request::Ping);
    h.ok(D, Request::Ping);
    h.core.tick(T0 + 12_000);
    assert!(h.ready().is_empty());
    h.now = T0 + 20_000;
    h.ok(D, Request::Ping);
    let n = h.txns.len();
    h.core.tick(T0 + 22_000);
    let msgs = h.ready();
    let closes: Vec<_> = h.txns[n..]
        .iter()
        .filter(|t| t.op == TxnOp::CloseSession)
        .map(|t| t.session)
        .collect();
    assert_eq!(closes, vec![sid], "only C expired (D pinged later)");
    assert_eq!(
        events(&msgs, D),
        vec![
            (ev::NODE_DELETED, "/p/e1".into()),
            (ev::NODE_CHILDREN_CHANGED, "/p".into())
        ]
    );
    assert!(msgs.contains(&(C, Outbound::Close)));
    assert_eq!(h.stat(D, "/p/e1"), None);
    assert_eq!(h.stat(D, "/e20000000002"), None);
    // Reconnecting to the expired session is refused.
    h.core
        .connect(h.now, 9, connect_req(sid, passwd, 10_000), [0; 16]);
    assert!(matches!(
        &h.ready()[..],
        [(
            9,
            Outbound::Connect {
                close_after: true,
                ..
            }
        )]
    ));
}

#[test]
fn close_session_request() {
    let mut h = H::new();
    h.session(C);
    h.session(D);
    h.create(C, "/e", cm::EPHEMERAL);
    h.ok(D, Request::GetData(pw("/e", true)));
    let msgs = h.send(C, Request::CloseSession);
    assert_eq!(events(&msgs, D), vec![(ev::NODE_DELETED, "/e".into())]);
    let n = msgs.len();
    assert!(
        matches!(&msgs[n - 2], (C, Outbound::Reply { header, .. }) if header.err == 0 && header.zxid == h.core.last_zxid())
    );
    assert_eq!(msgs[n - 1], (C, Outbound::Close));
    assert_eq!(h.core.stats().sessions, 1);
}

// ----- watches -----

#[test]
fn one_shot_watches() {
    let mut h = H::new();
    h.session(C);
    h.session(D);
    // exists sets a watch on a missing node (and answers NoNode); getData does not.
    assert_eq!(
        h.call(D, Request::Exists(pw("/a", true))).err(),
        ErrorCode::NoNode as i32
    );
    assert_eq!(
        h.call(D, Request::GetData(pw("/nope", true))).err(),
        ErrorCode::NoNode as i32
    );
    assert_eq!(h.core.stats().watches, 1);
    let msgs = h.send(C, Request::Create(create("/a", b"", 0)));
    assert_eq!(events(&msgs, D), vec![(ev::NODE_CREATED, "/a".into())]);
    // Event to D queued before C's reply.
    assert!(matches!(msgs.last(), Some((C, Outbound::Reply { .. }))));
    h.ok(D, Request::GetData(pw("/a", true)));
    h.ok(D, Request::GetChildren(pw("/a", true)));
    h.ok(D, Request::Exists(pw("/a", true)));
    let msgs = h.send(C, set("/a", b"1", -1));
    assert_eq!(
        events(&msgs, D),
        vec![(ev::NODE_DATA_CHANGED, "/a".into())],
        "one event for getData+exists"
    );
    assert!(
        events(&h.send(C, set("/a", b"2", -1)), D).is_empty(),
        "one-shot"
    );
    h.create(C, "/a/k", 0);
    let msgs = h.send(C, Request::Create(create("/a/k2", b"", 0)));
    assert!(
        events(&msgs, D).is_empty(),
        "child watch consumed by the first create"
    );
    h.ok(D, Request::GetData(pw("/a/k", true)));
    h.ok(D, Request::GetChildren(pw("/a/k", true)));
    h.ok(D, Request::GetChildren(pw("/a", true)));
    let msgs = h.send(C, del("/a/k", -1));
    assert_eq!(
        events(&msgs, D),
        vec![
            (ev::NODE_DELETED, "/a/k".into()),
            (ev::NODE_CHILDREN_CHANGED, "/a".into())
        ]
    );
    // setACL fires nothing.
    h.ok(D, Request::GetData(pw("/a", true)));
    let msgs = h.send(
        C,
        Request::SetAcl(SetAclRequest {
            path: "/a".into(),
            acl: open_acl(),
            version: -1,
        }),
    );
    assert!(events(&msgs, D).is_empty());
    // Disconnect kills D's watches.
    assert!(h.core.stats().watches > 0);
    h.core.disconnect(h.now, D);
    assert_eq!(h.core.stats().watches, 0);
    assert!(events(&h.send(C, set("/a", b"3", -1)), D).is_empty());
}

#[test]
fn persistent_and_recursive_watches() {
    let mut h = H::new();
    h.session(C);
    h.session(D);
    h.create(C, "/a", 0);
    let add = |path: &str, mode| {
        Request::AddWatch(AddWatchRequest {
            path: path.into(),
            mode,
        })
    };
    assert_eq!(
        h.ok(D, add("/a", add_watch_mode::PERSISTENT)).body,
        Response::Error(0)
    );
    for _ in 0..2 {
        let msgs = h.send(C, set("/a", b"x", -1));
        assert_eq!(events(&msgs, D), vec![(ev::NODE_DATA_CHANGED, "/a".into())]);
    }
    let msgs = h.send(C, Request::Create(create("/a/b", b"", 0)));
    assert_eq!(
        events(&msgs, D),
        vec![(ev::NODE_CHILDREN_CHANGED, "/a".into())]
    );
    // Recursive on the root sees everything below, never NodeChildrenChanged.
    h.session(3);
    h.ok(3, add("/", add_watch_mode::PERSISTENT_RECURSIVE));
    let msgs = h.send(C, Request::Create(create("/a/b/c", b"", 0)));
    assert_eq!(events(&msgs, 3), vec![(ev::NODE_CREATED, "/a/b/c".into())]);
    assert!(events(&msgs, D).is_empty());
    let msgs = h.send(C, set("/a/b/c", b"1", -1));
    assert_eq!(
        events(&msgs, 3),
        vec![(ev::NODE_DATA_CHANGED, "/a/b/c".into())]
    );
    let msgs = h.send(C, del("/a/b/c", -1));
    assert_eq!(events(&msgs, 3), vec![(ev::NODE_DELETED, "/a/b/c".into())]);
    // Recursive plus a one-shot on the same path: one event.
    h.ok(3, Request::GetData(pw("/a", true)));
    let msgs = h.send(C, set("/a", b"y", -1));
    assert_eq!(events(&msgs, 3), vec![(ev::NODE_DATA_CHANGED, "/a".into())]);
    // Invalid mode.
    assert_eq!(
        h.call(3, add("/a", 7)).err(),
        ErrorCode::MarshallingError as i32
    );
}

#[test]
fn check_and_remove_watches() {
    let mut h = H::new();
    h.session(C);
    h.create(C, "/a", 0);
    let chk = |t| {
        Request::CheckWatches(WatchesRequest {
            path: "/a".into(),
            watcher_type: t,
        })
    };
    let rm = |t| {
        Request::RemoveWatches(WatchesRequest {
            path: "/a".into(),
            watcher_type: t,
        })
    };
    assert_eq!(
        err(&mut h, C, chk(watcher_type::ANY)),
        ErrorCode::NoWatcher as i32
    );
    h.ok(C, Request::GetData(pw("/a", true)));
    assert_eq!(err(&mut h, C, chk(watcher_type::DATA)), 0);
    assert_eq!(
        err(&mut h, C, chk(watcher_type::CHILDREN)),
        ErrorCode::NoWatcher as i32
    );
    assert_eq!(err(&mut h, C, chk(watcher_type::ANY)), 0);
    assert_eq!(
        err(&mut h, C, chk(watcher_type::PERSISTENT)),
        ErrorCode::MarshallingError as i32
    );
    assert_eq!(
        err(&mut h, C, rm(watcher_type::CHILDREN)),
        ErrorCode::NoWatcher as i32
    );
    let msgs = h.send(C, rm(watcher_type::ANY));
    assert!(
        events(&msgs, C).is_empty(),
        "Apache sends no removal event; the client makes it"
    );
    assert_eq!(
        err(&mut h, C, rm(watcher_type::DATA)),
        ErrorCode::NoWatcher as i32
    );
    assert!(events(&h.send(C, set("/a", b"", -1)), C).is_empty());
}

#[test]
fn set_watches_rules() {
    let mut h = H::new();
    h.session(C);
    h.session(D);
    h.create(C, "/same", 0);
    h.create(C, "/changed", 0);
    let rel = h.core.last_zxid();
    h.ok(C, set("/changed", b"x", -1));
    h.create(C, "/changed/kid", 0);
    h.create(C, "/exists", 0);
    let sw = Request::SetWatches(SetWatches {
        relative_zxid: rel,
        data_watches: vec!["/gone".into(), "/changed".into(), "/same".into()],
        exist_watches: vec!["/exists".into(), "/absent".into()],
        child_watches: vec!["/gone".into(), "/changed".into(), "/same".into()],
    });
    let msgs = h.send(D, sw);
    assert_eq!(
        events(&msgs, D),
        vec![
            (ev::NODE_DELETED, "/gone".into()),
            (ev::NODE_DATA_CHANGED, "/changed".into()),
            (ev::NODE_CREATED, "/exists".into()),
            (ev::NODE_DELETED, "/gone".into()),
            (ev::NODE_CHILDREN_CHANGED, "/changed".into()),
        ]
    );
    assert!(matches!(msgs.last(), Some((D, Outbound::Reply { header, .. })) if header.err == 0));
    // Re-armed: /same (data + child), /absent (exist).
    let msgs = h.send(C, Request::Create(create("/absent", b"", 0)));
    assert_eq!(events(&msgs, D), vec![(ev::NODE_CREATED, "/absent".into())]);
    let msgs = h.send(C, Request::Create(create("/same/k", b"", 0)));
    assert_eq!(
        events(&msgs, D),
        vec![(ev::NODE_CHILDREN_CHANGED, "/same".into())]
    );
    let msgs = h.send(C, set("/same", b"", -1));
    assert_eq!(
        events(&msgs, D),
        vec![(ev::NODE_DATA_CHANGED, "/same".into())]
    );
    // SetWatches2 persistent/recursive.
    h.ok(
        D,
        Request::SetWatches2(SetWatches2 {
            relative_zxid: h.core.last_zxid(),
            data_watches: vec![],
            exist_watches: vec![],
            child_watches: vec![],
            persistent_watches: vec!["/same".into()],
            persistent_recursive_watches: vec!["/exists".into()],
        }),
    );
    let msgs = h.send(C, Request::Create(create("/exists/k", b"", 0)));
    assert_eq!(
        events(&msgs, D),
        vec![(ev::NODE_CREATED, "/exists/k".into())]
    );
    for _ in 0..2 {
        let msgs = h.send(C, set("/same", b"", -1));
        assert_eq!(
            events(&msgs, D),
            vec![(ev::NODE_DATA_CHANGED, "/same".into())]
        );
    }
}

// ----- multi -----

#[test]
fn multi_success_and_failure() {
    let mut h = H::new();
    h.session(C);
    h.session(D);
    h.create(C, "/m", 0);
    h.ok(D, Request::GetChildren(pw("/m", true)));
    let z = h.core.last_zxid();
    let ops = vec![
        MultiOp::Create(create("/m/s", b"", cm::PERSISTENT_SEQUENTIAL)),
        MultiOp::Create2(create("/m/s", b"", cm::PERSISTENT_SEQUENTIAL)),
        MultiOp::SetData(SetDataRequest {
            path: "/m/s0000000000".into(),
            data: Some(b"x".to_vec()),
            version: 0,
        }),
        MultiOp::Check(CheckVersionRequest {
            path: "/m/s0000000000".into(),
            version: 1,
        }),
        MultiOp::Delete(DeleteRequest {
            path: "/m/s0000000001".into(),
            version: 0,
        }),
    ];
    let msgs = h.send(C, Request::Multi(ops));
    assert_eq!(
        events(&msgs, D),
        vec![(ev::NODE_CHILDREN_CHANGED, "/m".into())]
    );
    let rep = msgs.iter().find_map(|(c, m)| match m {
        Outbound::Reply { header, body } if *c == C => Some((*header, body.clone())),
        _ => None,
    });
    let (header, body) = rep.unwrap_or_else(|| panic!("no reply"));
    assert_eq!(
        (header.err, header.zxid),
        (0, z + 1),
        "one zxid for the whole multi"
    );
    match body {
        Response::Multi(r) => {
            assert_eq!(
                r[0],
                MultiResult::Create {
                    path: "/m/s0000000000".into()
                }
            );
            // A create2 inside a multi answers a plain CreateResult (Apache rebuilds the op
            // from its flags), and sequential numbering sees the earlier sub-op.
            assert_eq!(
                r[1],
                MultiResult::Create {
                    path: "/m/s0000000001".into()
                }
            );
            assert!(matches!(&r[2], MultiResult::SetData { stat } if stat.version == 1));
            assert_eq!(r[3], MultiResult::Check);
            assert_eq!(r[4], MultiResult::Delete);
        }
        other => panic!("{other:?}"),
    }
    // ...and a plain create with the CONTAINER flag makes a container, answered with a stat.
    let r = h.ok(
        C,
        Request::Multi(vec![MultiOp::Create(create("/m/c", b"", cm::CONTAINER))]),
    );
    match r.body {
        Response::Multi(v) => assert!(
            matches!(&v[0], MultiResult::Create2 { path, stat } if path == "/m/c" && stat.czxid == z + 2)
        ),
        other => panic!("{other:?}"),
    }
    assert!(h.core.tree().containers().contains("/m/c"));
    let z = z + 1;
    // Failure in the middle: nothing applied, exact encoding, a zxid consumed.
    let before = h.tree_dump();
    let ops = vec![
        MultiOp::Create(create("/m/new", b"", 0)),
        MultiOp::Delete(DeleteRequest {
            path: "/m/new".into(),
            version: 0,
        }),
        MultiOp::SetData(SetDataRequest {
            path: "/m/new".into(),
            data: Some(vec![]),
            version: -1,
        }),
        MultiOp::Check(CheckVersionRequest {
            path: "/m".into(),
            version: 0,
        }),
    ];
    let r = h.ok(C, Request::Multi(ops));
    assert_eq!(
        r.body,
        Response::Multi(vec![
            MultiResult::Error { err: 0 },
            MultiResult::Error { err: 0 },
            MultiResult::Error {
                err: ErrorCode::NoNode as i32
            },
            MultiResult::Error {
                err: ErrorCode::RuntimeInconsistency as i32
            },
        ])
    );
    assert_eq!(h.tree_dump(), before);
    assert_eq!(r.header.zxid, z + 2);
    // Empty multi: an empty result, still a write.
    let r = h.ok(C, Request::Multi(vec![]));
    assert_eq!((r.body, r.header.zxid), (Response::Multi(vec![]), z + 3));
}

#[test]
fn multi_read() {
    let mut h = H::new();
    h.session(C);
    h.create(C, "/r", 0);
    h.create(C, "/r/k", 0);
    let r = h.ok(
        C,
        Request::MultiRead(vec![
            MultiReadOp::GetChildren(pw("/r", false)),
            MultiReadOp::GetData(pw("/nope", false)),
            MultiReadOp::GetData(pw("/r/k", true)),
        ]),
    );
    match r.body {
        Response::MultiRead(v) => {
            assert_eq!(
                v[0],
                MultiReadResult::GetChildren {
                    children: vec!["k".into()]
                }
            );
            assert_eq!(
                v[1],
                MultiReadResult::Error {
                    err: ErrorCode::NoNode as i32
                }
            );
            assert!(matches!(v[2], MultiReadResult::GetData { .. }));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        h.core.stats().watches,
        1,
        "multiRead honours the watch flag"
    );
}

// ----- reaper -----

#[test]
fn containers_and_ttl_nodes_are_reaped() {
    let mut h = H::with(Config {
        extended_types: true,
        container_check_interval_ms: 1000,
        ..Config::default()
    });
    h.session(C);
    h.session(D);
    h.ok(
        C,
        Request::CreateContainer(create("/used", b"", cm::CONTAINER)),
    );
    h.ok(
        C,
        Request::CreateContainer(create("/fresh", b"", cm::CONTAINER)),
    );
    h.create(C, "/used/k", 0);
    h.ok(C, del("/used/k", -1));
    h.ok(
        C,
        Request::CreateTtl(CreateTtlRequest {
            path: "/ttl".into(),
            data: Some(vec![]),
            acl: open_acl(),
            flags: cm::PERSISTENT_WITH_TTL,
            ttl: 1500,
        }),
    );
    h.ok(D, Request::Exists(pw("/used", true)));
    h.ok(D, Request::GetChildren(pw("/", true)));
    let n = h.txns.len();
    h.core.tick(T0 + 999);
    assert!(h.ready().is_empty(), "not due yet");
    h.core.tick(T0 + 1000);
    let msgs = h.ready();
    assert_eq!(
        h.txns[n..].iter().map(|t| t.op.clone()).collect::<Vec<_>>(),
        vec![TxnOp::DeleteContainer {
            path: "/used".into()
        }]
    );
    assert_eq!(h.txns[n].session, 0);
    assert_eq!(
        events(&msgs, D),
        vec![
            (ev::NODE_DELETED, "/used".into()),
            (ev::NODE_CHILDREN_CHANGED, "/".into())
        ]
    );
    assert!(h.stat(C, "/fresh").is_some());
    h.core.tick(T0 + 1500);
    assert!(
        h.ready().is_empty(),
        "TTL not yet elapsed; next run at +2000"
    );
    h.now = T0 + 1000;
    h.ok(C, Request::Ping);
    h.ok(D, Request::Ping);
    h.core.tick(T0 + 2000);
    h.ready();
    assert!(h.stat(C, "/ttl").is_none(), "now - mtime = 2000 > 1500");
    // deleteContainer sent by a client: always BadArguments in 3.8 (see lib.rs).
    h.now = T0 + 2000;
    h.ok(
        C,
        Request::CreateContainer(create("/c2", b"", cm::CONTAINER)),
    );
    fails(
        &mut h,
        Request::DeleteContainer { path: "/c2".into() },
        ErrorCode::BadArguments,
    );
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
