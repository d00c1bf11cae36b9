//! Property tests: every record, request and response survives encode → decode unchanged, every
//! strict prefix of a valid encoding is an error, and arbitrary bytes never make a decoder panic.
//!
//! The strategies below generate every variant of [`Request`], [`Response`] and the multi
//! sub-ops/results, with unicode strings, null, empty and non-empty buffers and vectors.

use bytes::BytesMut;
use proptest::collection::vec;
use proptest::prelude::*;
use zkit_proto::frame::{decode_frame, DEFAULT_MAX_FRAME};
use zkit_proto::records::*;
use zkit_proto::{OpCode, Reader, Record, Request, Response};

fn string() -> impl Strategy<Value = String> {
    vec(any::<char>(), 0..12).prop_map(String::from_iter)
}

fn opt_string() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(string())
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..24)
}

/// znode data: null (buffer length -1) or a buffer, possibly empty.
fn opt_bytes() -> impl Strategy<Value = Option<Vec<u8>>> {
    proptest::option::of(bytes())
}

fn strings() -> impl Strategy<Value = Vec<String>> {
    vec(string(), 0..4)
}

fn stat() -> impl Strategy<Value = Stat> {
    (
        (any::<i64>(), any::<i64>(), any::<i64>(), any::<i64>()),
        (any::<i32>(), any::<i32>(), any::<i32>()),
        (any::<i64>(), any::<i32>(), any::<i32>(), any::<i64>()),
    )
        .prop_map(
            |(
                (czxid, mzxid, ctime, mtime),
                (version, cversion, aversion),
                (ephemeral_owner, data_length, num_children, pzxid),
            )| Stat {
                czxid,
                mzxid,
                ctime,
                mtime,
                version,
                cversion,
                aversion,
                ephemeral_owner,
                data_length,
                num_children,
                pzxid,
            },
        )
}

fn id() -> impl Strategy<Value = Id> {
    (string(), string()).prop_map(|(scheme, id)| Id { scheme, id })
}

fn acl() -> impl Strategy<Value = Acl> {
    (any::<i32>(), id()).prop_map(|(perms, id)| Acl { perms, id })
}

fn acls() -> impl Strategy<Value = Vec<Acl>> {
    vec(acl(), 0..3)
}

fn connect_request() -> impl Strategy<Value = ConnectRequest> {
    (
        any::<i32>(),
        any::<i64>(),
        any::<i32>(),
        any::<i64>(),
        bytes(),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(
            |(protocol_version, last_zxid_seen, time_out, session_id, passwd, read_only)| {
                ConnectRequest {
                    protocol_version,
                    last_zxid_seen,
                    time_out,
                    session_id,
                    passwd,
                    read_only,
                }
            },
        )
}

fn connect_response() -> impl Strategy<Value = ConnectResponse> {
    (
        any::<i32>(),
        any::<i32>(),
        any::<i64>(),
        bytes(),
        proptest::option::of(any::<bool>()),
    )
        .prop_map(
            |(protocol_version, time_out, session_id, passwd, read_only)| ConnectResponse {
                protocol_version,
                time_out,
                session_id,
                passwd,
                read_only,
            },
        )
}

fn request_header() -> impl Strategy<Value = RequestHeader> {
    (any::<i32>(), any::<i32>()).prop_map(|(xid, op)| RequestHeader { xid, op })
}

fn reply_header() -> impl Strategy<Value = ReplyHeader> {
    (any::<i32>(), any::<i64>(), any::<i32>()).prop_map(|(xid, zxid, err)| ReplyHeader {
        xid,
        zxid,
        err,
    })
}

fn watcher_event() -> impl Strategy<Value = WatcherEvent> {
    (any::<i32>(), any::<i32>(), string()).prop_map(|(event_type, state, path)| WatcherEvent {
        event_type,
        state,
        path,
    })
}

fn create() -> impl Strategy<Value = CreateRequest> {
    (string(), opt_bytes(), acls(), any::<i32>()).prop_map(|(path, data, acl, flags)| {
        CreateRequest {
            path,
            data,
            acl,
            flags,
        }
    })
}

fn create_ttl() -> impl Strategy<Value = CreateTtlRequest> {
    (string(), opt_bytes(), acls(), any::<i32>(), any::<i64>()).prop_map(
        |(path, data, acl, flags, ttl)| CreateTtlRequest {
            path,
            data,
            acl,
            flags,
            ttl,
        },
    )
}

fn delete() -> impl Strategy<Value = DeleteRequest> {
    (string(), any::<i32>()).prop_map(|(path, version)| DeleteRequest { path, version })
}

fn path_watch() -> impl Strategy<Value = PathWatchRequest> {
    (string(), any::<bool>()).prop_map(|(path, watch)| PathWatchRequest { path, watch })
}

fn set_data() -> impl Strategy<Value = SetDataRequest> {
    (string(), opt_bytes(), any::<i32>()).prop_map(|(path, data, version)| SetDataRequest {
        path,
        data,
        version,
    })
}

fn set_acl() -> impl Strategy<Value = SetAclRequest> {
    (string(), acls(), any::<i32>()).prop_map(|(path, acl, version)| SetAclRequest {
        path,
        acl,
        version,
    })
}

fn check() -> impl Strategy<Value = CheckVersionRequest> {
    (string(), any::<i32>()).prop_map(|(path, version)| CheckVersionRequest { path, version })
}

fn watches() -> impl Strategy<Value = WatchesRequest> {
    (string(), any::<i32>()).prop_map(|(path, watcher_type)| WatchesRequest { path, watcher_type })
}

fn add_watch() -> impl Strategy<Value = AddWatchRequest> {
    (string(), any::<i32>()).prop_map(|(path, mode)| AddWatchRequest { path, mode })
}

fn set_watches() -> impl Strategy<Value = SetWatches> {
    (any::<i64>(), strings(), strings(), strings()).prop_map(
        |(relative_zxid, data_watches, exist_watches, child_watches)| SetWatches {
            relative_zxid,
            data_watches,
            exist_watches,
            child_watches,
        },
    )
}

fn set_watches2() -> impl Strategy<Value = SetWatches2> {
    (
        any::<i64>(),
        strings(),
        strings(),
        strings(),
        strings(),
        strings(),
    )
        .prop_map(
            |(relative_zxid, data, exist, child, persistent, recursive)| SetWatches2 {
                relative_zxid,
                data_watches: data,
                exist_watches: exist,
                child_watches: child,
                persistent_watches: persistent,
                persistent_recursive_watches: recursive,
            },
        )
}

fn auth() -> impl Strategy<Value = AuthPacket> {
    (any::<i32>(), string(), bytes()).prop_map(|(auth_type, scheme, auth)| AuthPacket {
        auth_type,
        scheme,
        auth,
    })
}

fn reconfig() -> impl Strategy<Value = ReconfigRequest> {
    (opt_string(), opt_string(), opt_string(), any::<i64>()).prop_map(
        |(joining_servers, leaving_servers, new_members, cur_config_id)| ReconfigRequest {
            joining_servers,
            leaving_servers,
            new_members,
            cur_config_id,
        },
    )
}

fn sasl() -> impl Strategy<Value = SaslRequest> {
    bytes().prop_map(|token| SaslRequest { token })
}

fn client_info() -> impl Strategy<Value = ClientInfo> {
    (string(), string()).prop_map(|(auth_scheme, user)| ClientInfo { auth_scheme, user })
}

fn multi_header() -> impl Strategy<Value = MultiHeader> {
    (any::<i32>(), any::<bool>(), any::<i32>()).prop_map(|(op_type, done, err)| MultiHeader {
        op_type,
        done,
        err,
    })
}

fn multi_op() -> impl Strategy<Value = MultiOp> {
    prop_oneof![
        create().prop_map(MultiOp::Create),
        create().prop_map(MultiOp::Create2),
        create().prop_map(MultiOp::CreateContainer),
        create_ttl().prop_map(MultiOp::CreateTtl),
        delete().prop_map(MultiOp::Delete),
        set_data().prop_map(MultiOp::SetData),
        check().prop_map(MultiOp::Check),
    ]
}

fn multi_read_op() -> impl Strategy<Value = MultiReadOp> {
    prop_oneof![
        path_watch().prop_map(MultiReadOp::GetChildren),
        path_watch().prop_map(MultiReadOp::GetData),
    ]
}

fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        create().prop_map(Request::Create),
        create().prop_map(Request::Create2),
        create().prop_map(Request::CreateContainer),
        create_ttl().prop_map(Request::CreateTtl),
        delete().prop_map(Request::Delete),
        string().prop_map(|path| Request::DeleteContainer { path }),
        path_watch().prop_map(Request::Exists),
        path_watch().prop_map(Request::GetData),
        set_data().prop_map(Request::SetData),
        string().prop_map(|path| Request::GetAcl { path }),
        set_acl().prop_map(Request::SetAcl),
        path_watch().prop_map(Request::GetChildren),
        path_watch().prop_map(Request::GetChildren2),
        string().prop_map(|path| Request::Sync { path }),
        Just(Request::Ping),
        check().prop_map(Request::Check),
        vec(multi_op(), 0..5).prop_map(Request::Multi),
        vec(multi_read_op(), 0..5).prop_map(Request::MultiRead),
        reconfig().prop_map(Request::Reconfig),
        watches().prop_map(Request::CheckWatches),
        watches().prop_map(Request::RemoveWatches),
        auth().prop_map(Request::Auth),
        set_watches().prop_map(Request::SetWatches),
        set_watches2().prop_map(Request::SetWatches2),
        sasl().prop_map(Request::Sasl),
        string().prop_map(|prefix_path| Request::GetEphemerals { prefix_path }),
        string().prop_map(|path| Request::GetAllChildrenNumber { path }),
        add_watch().prop_map(Request::AddWatch),
        Just(Request::WhoAmI),
        Just(Request::CloseSession),
    ]
}

fn multi_result() -> impl Strategy<Value = MultiResult> {
    prop_oneof![
        string().prop_map(|path| MultiResult::Create { path }),
        (string(), stat()).prop_map(|(path, stat)| MultiResult::Create2 { path, stat }),
        Just(MultiResult::Delete),
        stat().prop_map(|stat| MultiResult::SetData { stat }),
        Just(MultiResult::Check),
        any::<i32>().prop_map(|err| MultiResult::Error { err }),
    ]
}

fn multi_read_result() -> impl Strategy<Value = MultiReadResult> {
    prop_oneof![
        strings().prop_map(|children| MultiReadResult::GetChildren { children }),
        (opt_bytes(), stat()).prop_map(|(data, stat)| MultiReadResult::GetData { data, stat }),
        any::<i32>().prop_map(|err| MultiReadResult::Error { err }),
    ]
}

/// A response together with an op code whose reply has that shape.
fn response() -> impl Strategy<Value = (OpCode, Response)> {
    prop_oneof![
        prop_oneof![
            Just(OpCode::Delete),
            Just(OpCode::Check),
            Just(OpCode::Ping),
            Just(OpCode::SetWatches),
            Just(OpCode::CloseSession),
            Just(OpCode::RemoveWatches),
        ]
        .prop_map(|op| (op, Response::Empty)),
        string().prop_map(|path| (OpCode::Create, Response::Create { path })),
        (
            prop_oneof![
                Just(OpCode::Create2),
                Just(OpCode::CreateContainer),
                Just(OpCode::CreateTtl)
            ],
            string(),
            stat()
        )
            .prop_map(|(op, path, stat)| (op, Response::Create2 { path, stat })),
        (
            prop_oneof![
                Just(OpCode::Exists),
                Just(OpCode::SetData),
                Just(OpCode::SetAcl)
            ],
            stat()
        )
            .prop_map(|(op, stat)| (op, Response::Stat(stat))),
        (opt_bytes(), stat())
            .prop_map(|(data, stat)| (OpCode::GetData, Response::GetData { data, stat })),
        (acls(), stat()).prop_map(|(acl, stat)| (OpCode::GetAcl, Response::GetAcl { acl, stat })),
        strings().prop_map(|children| (OpCode::GetChildren, Response::GetChildren { children })),
        (strings(), stat()).prop_map(|(children, stat)| (
            OpCode::GetChildren2,
            Response::GetChildren2 { children, stat }
        )),
        string().prop_map(|path| (OpCode::Sync, Response::Sync { path })),
        vec(multi_result(), 0..5).prop_map(|r| (OpCode::Multi, Response::Multi(r))),
        vec(multi_read_result(), 0..5).prop_map(|r| (OpCode::MultiRead, Response::MultiRead(r))),
        strings().prop_map(|e| (OpCode::GetEphemerals, Response::Ephemerals(e))),
        any::<i32>().prop_map(|n| (OpCode::GetAllChildrenNumber, Response::AllChildrenNumber(n))),
        vec(client_info(), 0..3).prop_map(|c| (OpCode::WhoAmI, Response::WhoAmI(c))),
        any::<i32>().prop_map(|e| (OpCode::AddWatch, Response::Error(e))),
    ]
}

/// Round trip plus: every strict prefix fails. `tolerated_prefix` is a prefix length allowed to
/// decode (the optional trailing readOnly of the handshake records).
fn check_record<T: Record + PartialEq + std::fmt::Debug>(
    v: &T,
    tolerated_prefix: Option<usize>,
) -> Result<(), TestCaseError> {
    let bytes = v.to_bytes();
    let decoded = T::decode_exact(&bytes);
    prop_assert_eq!(decoded.as_ref(), Ok(v));
    for n in 0..bytes.len() {
        if Some(n) != tolerated_prefix {
            prop_assert!(T::decode_from(&bytes[..n]).is_err(), "prefix {}", n);
        }
    }
    Ok(())
}

macro_rules! record_round_trips {
    ($($name:ident: $strategy:expr;)*) => {
        proptest! {
            $(
                #[test]
                fn $name(v in $strategy) {
                    check_record(&v, None)?;
                }
            )*
        }
    };
}

record_round_trips! {
    stat_round_trips: stat();
    id_round_trips: id();
    acl_round_trips: acl();
    request_header_round_trips: request_header();
    reply_header_round_trips: reply_header();
    watcher_event_round_trips: watcher_event();
    create_round_trips: create();
    create_ttl_round_trips: create_ttl();
    delete_round_trips: delete();
    path_watch_round_trips: path_watch();
    set_data_round_trips: set_data();
    set_acl_round_trips: set_acl();
    check_round_trips: check();
    watches_round_trips: watches();
    add_watch_round_trips: add_watch();
    set_watches_round_trips: set_watches();
    set_watches2_round_trips: set_watches2();
    auth_round_trips: auth();
    reconfig_round_trips: reconfig();
    sasl_round_trips: sasl();
    client_info_round_trips: client_info();
    multi_header_round_trips: multi_header();
}

proptest! {
    #[test]
    fn connect_request_round_trips(v in connect_request()) {
        let len = v.to_bytes().len();
        // Dropping the readOnly byte leaves a valid old-client record.
        check_record(&v, v.read_only.map(|_| len - 1))?;
    }

    #[test]
    fn connect_response_round_trips(v in connect_response()) {
        let len = v.to_bytes().len();
        check_record(&v, v.read_only.map(|_| len - 1))?;
    }

    #[test]
    fn request_round_trips_and_truncations_fail(
        req in request(),
        xid in any::<i32>(),
        trailing in bytes(),
    ) {
        let mut buf = BytesMut::new();
        req.encode(xid, &mut buf);
        let mut r = Reader::new(&buf);
        let header = RequestHeader::decode(&mut r)?;
        prop_assert_eq!(header, RequestHeader { xid, op: req.op_code().code() });
        let body = r.rest();
        let decoded = Request::decode(&header, body);
        prop_assert_eq!(decoded.as_ref(), Ok(&req));
        for n in 0..body.len() {
            prop_assert!(Request::decode(&header, &body[..n]).is_err(), "prefix {}", n);
        }
        // Apache ignores bytes after the record; so do we.
        let mut long = body.to_vec();
        long.extend_from_slice(&trailing);
        prop_assert_eq!(Request::decode(&header, &long), Ok(req));
    }

    #[test]
    fn response_round_trips_and_truncations_fail((op, resp) in response()) {
        let mut buf = BytesMut::new();
        resp.encode(&mut buf);
        let decoded = Response::decode(op, &buf);
        prop_assert_eq!(decoded.as_ref(), Ok(&resp));
        for n in 0..buf.len() {
            prop_assert!(Response::decode(op, &buf[..n]).is_err(), "prefix {}", n);
        }
    }

    /// Garbage never panics, whatever op code it claims to be.
    #[test]
    fn arbitrary_bytes_never_panic(
        op in prop_oneof![any::<i32>(), -12i32..110],
        body in vec(any::<u8>(), 0..256),
    ) {
        let header = RequestHeader { xid: 1, op };
        let _ = Request::decode(&header, &body);
        if let Some(op) = OpCode::from_i32(op) {
            let _ = Response::decode(op, &body);
        }
        let _ = ConnectRequest::decode_from(&body);
        if let Ok(Some((consumed, payload))) = decode_frame(&body, DEFAULT_MAX_FRAME) {
            prop_assert_eq!(consumed, payload.len() + 4);
            prop_assert!(consumed <= body.len());
        }
    }

    /// Mutating one byte of a valid request never panics (exercises the deeper paths that
    /// random bytes rarely reach).
    #[test]
    fn mutated_requests_never_panic(
        req in request(),
        pos in any::<prop::sample::Index>(),
        byte in any::<u8>(),
    ) {
        let mut buf = BytesMut::new();
        req.encode_body(&mut buf);
        if !buf.is_empty() {
            let i = pos.index(buf.len());
            buf[i] = byte;
        }
        let header = RequestHeader { xid: 1, op: req.op_code().code() };
        let _ = Request::decode(&header, &buf);
    }
}
