//! The records of `zookeeper.jute` used by the client protocol, as plain data.
//!
//! Field names follow jute's, in snake case. Each record is declared once, in `records!`,
//! with the jute type of every field in brackets; the macro writes the struct and its
//! [`crate::codec::Record`] impl (fields in declaration order, every read checked by
//! [`crate::codec::Reader`]).

use bytes::BytesMut;

use crate::codec::{
    put_bool, put_buffer, put_i32, put_i64, put_opt_buffer, put_opt_ustring, put_string_vec,
    put_ustring, put_vec, DecodeError, Reader, Record,
};

/// Declares records: each `pub struct Name[, min N] { pub field: Type [kind], … }` becomes the
/// struct (attributes and docs as written) and its [`Record`] impl, `N` being
/// `MIN_ENCODED_LEN` (default 1). The kinds are jute's types: `i32`, `i64`, `bool`,
/// `ustring`, `path` (a ustring that must not be null, [`Reader::read_path`]), `buffer`,
/// `opt_buffer` (null is `None`), `opt_ustring`, `vec` (of records), `string_vec`, `record`
/// (a nested record) and `trailing_bool` (an optional last field: absent on the wire when
/// `None`, and read only if bytes remain, as Apache's handshake does for old clients).
macro_rules! records {
    ($(
        $(#[$meta:meta])*
        pub struct $name:ident $(, min $min:literal)? {
            $(
                $(#[$fmeta:meta])*
                pub $field:ident: $ty:ty [$kind:ident],
            )*
        }
    )*) => {$(
        $(#[$meta])*
        pub struct $name {
            $(
                $(#[$fmeta])*
                pub $field: $ty,
            )*
        }

        impl Record for $name {
            $(const MIN_ENCODED_LEN: usize = $min;)?
            fn encode(&self, buf: &mut BytesMut) {
                $(field!(put $kind, buf, self.$field);)*
            }
            fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
                Ok($name {
                    $($field: field!(read $kind, r),)*
                })
            }
        }
    )*};
}

/// One field's encoding (`put`) or checked decoding (`read`), by jute kind.
macro_rules! field {
    (put i32, $buf:ident, $v:expr) => {
        put_i32($buf, $v)
    };
    (put i64, $buf:ident, $v:expr) => {
        put_i64($buf, $v)
    };
    (put bool, $buf:ident, $v:expr) => {
        put_bool($buf, $v)
    };
    (put ustring, $buf:ident, $v:expr) => {
        put_ustring($buf, &$v)
    };
    (put path, $buf:ident, $v:expr) => {
        put_ustring($buf, &$v)
    };
    (put buffer, $buf:ident, $v:expr) => {
        put_buffer($buf, &$v)
    };
    (put opt_buffer, $buf:ident, $v:expr) => {
        put_opt_buffer($buf, $v.as_deref())
    };
    (put opt_ustring, $buf:ident, $v:expr) => {
        put_opt_ustring($buf, $v.as_deref())
    };
    (put vec, $buf:ident, $v:expr) => {
        put_vec($buf, &$v)
    };
    (put string_vec, $buf:ident, $v:expr) => {
        put_string_vec($buf, &$v)
    };
    (put record, $buf:ident, $v:expr) => {
        $v.encode($buf)
    };
    (put trailing_bool, $buf:ident, $v:expr) => {
        if let Some(v) = $v {
            put_bool($buf, v);
        }
    };
    (read i32, $r:ident) => {
        $r.read_i32()?
    };
    (read i64, $r:ident) => {
        $r.read_i64()?
    };
    (read bool, $r:ident) => {
        $r.read_bool()?
    };
    (read ustring, $r:ident) => {
        $r.read_ustring()?
    };
    (read path, $r:ident) => {
        $r.read_path()?
    };
    (read buffer, $r:ident) => {
        $r.read_buffer()?
    };
    (read opt_buffer, $r:ident) => {
        $r.read_opt_buffer()?
    };
    (read opt_ustring, $r:ident) => {
        $r.read_opt_ustring()?
    };
    (read vec, $r:ident) => {
        $r.read_vec()?
    };
    (read string_vec, $r:ident) => {
        $r.read_string_vec()?
    };
    (read record, $r:ident) => {
        Record::decode($r)?
    };
    // Clients up to 3.3 end the handshake before readOnly; Apache reads it in a try/catch.
    (read trailing_bool, $r:ident) => {
        if $r.is_empty() {
            None
        } else {
            Some($r.read_bool()?)
        }
    };
}

records! {
    /// An identity: `scheme:id` (e.g. `world:anyone`, `digest:user:hash`, `ip:10.0.0.0/8`).
    #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub struct Id, min 8 {
        /// Scheme.
        pub scheme: String [ustring],
        /// Id within the scheme.
        pub id: String [ustring],
    }

    /// One ACL entry.
    #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
    pub struct Acl, min 12 {
        /// Permission bits, see [`crate::op::perms`].
        pub perms: i32 [i32],
        /// Whom it applies to.
        pub id: Id [record],
    }

    /// Node metadata.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
    #[allow(missing_docs)]
    pub struct Stat, min 68 {
        pub czxid: i64 [i64],
        pub mzxid: i64 [i64],
        pub ctime: i64 [i64],
        pub mtime: i64 [i64],
        pub version: i32 [i32],
        pub cversion: i32 [i32],
        pub aversion: i32 [i32],
        pub ephemeral_owner: i64 [i64],
        pub data_length: i32 [i32],
        pub num_children: i32 [i32],
        pub pzxid: i64 [i64],
    }

    /// Handshake from the client. `read_only` is `None` when an old (<= 3.3) client omitted it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct ConnectRequest {
        pub protocol_version: i32 [i32],
        pub last_zxid_seen: i64 [i64],
        pub time_out: i32 [i32],
        pub session_id: i64 [i64],
        pub passwd: Vec<u8> [buffer],
        pub read_only: Option<bool> [trailing_bool],
    }

    /// Handshake reply. `read_only` is omitted on the wire when `None`.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct ConnectResponse {
        pub protocol_version: i32 [i32],
        pub time_out: i32 [i32],
        pub session_id: i64 [i64],
        pub passwd: Vec<u8> [buffer],
        pub read_only: Option<bool> [trailing_bool],
    }

    /// Header of every request after the handshake.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct RequestHeader, min 8 {
        /// Client-chosen id, echoed in the reply; negative values are special ([`crate::op::xid`]).
        pub xid: i32 [i32],
        /// Op code as sent (may be unknown).
        pub op: i32 [i32],
    }

    /// Header of every reply.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct ReplyHeader, min 16 {
        /// The request's xid (or a special one).
        pub xid: i32 [i32],
        /// Last zxid processed by the server.
        pub zxid: i64 [i64],
        /// Error code; a body follows only when 0.
        pub err: i32 [i32],
    }

    /// A watch notification (sent with xid -1).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct WatcherEvent, min 12 {
        /// Event type, see [`crate::op::event_type`].
        pub event_type: i32 [i32],
        /// Keeper state, see [`crate::op::keeper_state`].
        pub state: i32 [i32],
        /// Path, relative to nothing (the server knows no chroot).
        pub path: String [ustring],
    }

    /// create (1), create2 (15), createContainer (19).
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct CreateRequest {
        pub path: String [path],
        /// `None` is a null buffer (length -1): ZooKeeper stores it as null and getData returns
        /// null again (zkCli prints "null"); dataLength is 0 either way.
        pub data: Option<Vec<u8>> [opt_buffer],
        pub acl: Vec<Acl> [vec],
        pub flags: i32 [i32],
    }

    /// createTTL (21): a create request plus a TTL in ms.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct CreateTtlRequest {
        pub path: String [path],
        /// `None` is a null buffer, as in [`CreateRequest::data`].
        pub data: Option<Vec<u8>> [opt_buffer],
        pub acl: Vec<Acl> [vec],
        pub flags: i32 [i32],
        pub ttl: i64 [i64],
    }

    /// delete (2).
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct DeleteRequest {
        pub path: String [path],
        pub version: i32 [i32],
    }

    /// exists (3), getData (4), getChildren (8), getChildren2 (12): a path and a watch flag.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct PathWatchRequest {
        pub path: String [path],
        pub watch: bool [bool],
    }

    /// setData (5).
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct SetDataRequest {
        pub path: String [ustring],
        /// `None` is a null buffer, as in [`CreateRequest::data`].
        pub data: Option<Vec<u8>> [opt_buffer],
        pub version: i32 [i32],
    }

    /// setACL (7).
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct SetAclRequest {
        pub path: String [ustring],
        pub acl: Vec<Acl> [vec],
        pub version: i32 [i32],
    }

    /// check (13).
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct CheckVersionRequest {
        pub path: String [ustring],
        pub version: i32 [i32],
    }

    /// checkWatches (17) and removeWatches (18).
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct WatchesRequest {
        pub path: String [path],
        /// See [`crate::op::watcher_type`].
        pub watcher_type: i32 [i32],
    }

    /// addWatch (106).
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct AddWatchRequest {
        pub path: String [ustring],
        /// See [`crate::op::add_watch_mode`].
        pub mode: i32 [i32],
    }

    /// setWatches (101).
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct SetWatches {
        pub relative_zxid: i64 [i64],
        pub data_watches: Vec<String> [string_vec],
        pub exist_watches: Vec<String> [string_vec],
        pub child_watches: Vec<String> [string_vec],
    }

    /// setWatches2 (105).
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct SetWatches2 {
        pub relative_zxid: i64 [i64],
        pub data_watches: Vec<String> [string_vec],
        pub exist_watches: Vec<String> [string_vec],
        pub child_watches: Vec<String> [string_vec],
        pub persistent_watches: Vec<String> [string_vec],
        pub persistent_recursive_watches: Vec<String> [string_vec],
    }

    /// auth (100), sent with xid -4.
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct AuthPacket {
        pub auth_type: i32 [i32],
        pub scheme: String [ustring],
        pub auth: Vec<u8> [buffer],
    }

    /// reconfig (16).
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct ReconfigRequest {
        pub joining_servers: Option<String> [opt_ustring],
        pub leaving_servers: Option<String> [opt_ustring],
        pub new_members: Option<String> [opt_ustring],
        pub cur_config_id: i64 [i64],
    }

    /// sasl (102).
    #[derive(Debug, Clone, PartialEq, Eq)]
    #[allow(missing_docs)]
    pub struct SaslRequest {
        pub token: Vec<u8> [buffer],
    }
}

impl ConnectRequest {
    /// The handshake of a client asking for a new session of `time_out` ms, as the Java
    /// client 3.8 sends it: protocol version 0, no zxid seen, no session id, a zeroed 16-byte
    /// password, not read-only.
    pub fn new_session(time_out: i32) -> ConnectRequest {
        ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            time_out,
            session_id: 0,
            passwd: vec![0; 16],
            read_only: Some(false),
        }
    }
}

/// One sub-op of multi (14). The op code of each variant is its request's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum MultiOp {
    /// op 1
    Create(CreateRequest),
    /// op 15
    Create2(CreateRequest),
    /// op 19
    CreateContainer(CreateRequest),
    /// op 21
    CreateTtl(CreateTtlRequest),
    /// op 2
    Delete(DeleteRequest),
    /// op 5
    SetData(SetDataRequest),
    /// op 13
    Check(CheckVersionRequest),
}

/// One sub-op of multiRead (22).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiReadOp {
    /// op 8 (the watch flag is carried but a read in multiRead never sets a watch... see server)
    GetChildren(PathWatchRequest),
    /// op 4
    GetData(PathWatchRequest),
}

/// One result of multi (14).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiResult {
    /// type 1: CreateResponse{path}
    Create {
        /// Created path.
        path: String,
    },
    /// type 15: Create2Response{path, stat} (also for container and TTL creates)
    Create2 {
        /// Created path.
        path: String,
        /// Its stat.
        stat: Stat,
    },
    /// type 2, no body
    Delete,
    /// type 5: SetDataResponse{stat}
    SetData {
        /// New stat.
        stat: Stat,
    },
    /// type 13, no body
    Check,
    /// type -1: ErrorResponse{err}
    Error {
        /// Error code.
        err: i32,
    },
}

/// One result of multiRead (22).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiReadResult {
    /// type 8: GetChildrenResponse{children}
    GetChildren {
        /// Child names.
        children: Vec<String>,
    },
    /// type 4: GetDataResponse{data, stat}
    GetData {
        /// Data; `None` for a node whose data is null.
        data: Option<Vec<u8>>,
        /// Stat.
        stat: Stat,
    },
    /// type -1: ErrorResponse{err}
    Error {
        /// Error code.
        err: i32,
    },
}

records! {
    /// whoAmI result entry.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ClientInfo, min 8 {
        /// Auth scheme.
        pub auth_scheme: String [ustring],
        /// User within it.
        pub user: String [ustring],
    }

    /// Precedes every sub-op of a multi/multiRead request and every sub-result of its response;
    /// `{type: -1, done: true, err: -1}` ends the list.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct MultiHeader, min 9 {
        /// Sub-op (or result) type: an op code, or -1 for an error result / the terminator.
        pub op_type: i32 [i32],
        /// True only on the terminator.
        pub done: bool [bool],
        /// -1 in requests; the result's error code in responses (0 on success).
        pub err: i32 [i32],
    }
}

impl MultiHeader {
    /// The header that ends a multi request or response.
    pub const END: MultiHeader = MultiHeader {
        op_type: -1,
        done: true,
        err: -1,
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{assert_round_trip, assert_truncations_fail};

    fn stat() -> Stat {
        Stat {
            czxid: 1,
            mzxid: 2,
            ctime: 1_700_000_000_000,
            mtime: 1_700_000_000_001,
            version: 3,
            cversion: -1,
            aversion: 5,
            ephemeral_owner: 0x1234_5678_9abc_def0,
            data_length: 7,
            num_children: 8,
            pzxid: 9,
        }
    }

    fn world_anyone() -> Acl {
        Acl {
            perms: crate::op::perms::ALL,
            id: Id {
                scheme: "world".into(),
                id: "anyone".into(),
            },
        }
    }

    #[test]
    fn stat_and_acl_round_trip() {
        let bytes = assert_round_trip(&stat());
        assert_eq!(bytes.len(), Stat::MIN_ENCODED_LEN);
        assert_truncations_fail(&stat());
        let bytes = assert_round_trip(&world_anyone());
        assert_eq!(
            &bytes[..],
            b"\x00\x00\x00\x1f\x00\x00\x00\x05world\x00\x00\x00\x06anyone"
        );
        assert_truncations_fail(&world_anyone());
    }

    /// A ConnectRequest exactly as the Java client 3.8 sends it for a new session.
    #[test]
    fn connect_request_golden_bytes_from_java_client() {
        let req = ConnectRequest::new_session(30_000);
        let mut expected = vec![0, 0, 0, 0]; // protocolVersion
        expected.extend([0; 8]); // lastZxidSeen
        expected.extend([0, 0, 0x75, 0x30]); // timeOut 30000
        expected.extend([0; 8]); // sessionId
        expected.extend([0, 0, 0, 16]); // passwd length
        expected.extend([0; 16]);
        expected.push(0); // readOnly
        let bytes = assert_round_trip(&req);
        assert_eq!(&bytes[..], &expected[..]);
        assert_eq!(bytes.len(), 45);
    }

    #[test]
    fn connect_read_only_is_optional_both_ways() {
        let old = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0x42,
            time_out: 4000,
            session_id: 0x0100_0000_0000_0001,
            passwd: vec![7; 16],
            read_only: None,
        };
        let bytes = assert_round_trip(&old);
        assert_eq!(bytes.len(), 44);
        assert_truncations_fail(&old);
        let resp = ConnectResponse {
            protocol_version: 0,
            time_out: 4000,
            session_id: 1,
            passwd: vec![1; 16],
            read_only: None,
        };
        assert_eq!(assert_round_trip(&resp).len(), 36);
        assert_truncations_fail(&resp);
        let resp = ConnectResponse {
            read_only: Some(true),
            ..resp
        };
        assert_eq!(assert_round_trip(&resp).len(), 37);
    }

    #[test]
    fn headers_golden_bytes() {
        let h = ReplyHeader {
            xid: 1,
            zxid: 0x10,
            err: crate::ErrorCode::NoNode.code(),
        };
        let bytes = assert_round_trip(&h);
        assert_eq!(
            &bytes[..],
            &[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x10, 0xff, 0xff, 0xff, 0x9b]
        );
        assert_truncations_fail(&h);
        let r = RequestHeader { xid: -2, op: 11 };
        assert_eq!(
            &assert_round_trip(&r)[..],
            &[0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 11]
        );
        assert_eq!(
            &assert_round_trip(&MultiHeader::END)[..],
            &[0xff, 0xff, 0xff, 0xff, 1, 0xff, 0xff, 0xff, 0xff]
        );
    }

    #[test]
    fn watcher_event_round_trip() {
        let e = WatcherEvent {
            event_type: crate::op::event_type::NODE_DATA_CHANGED,
            state: crate::op::keeper_state::SYNC_CONNECTED,
            path: "/a/b".into(),
        };
        assert_round_trip(&e);
        assert_truncations_fail(&e);
    }

    #[test]
    fn create_family_round_trip() {
        let c = CreateRequest {
            path: "/n".into(),
            data: Some(b"v".to_vec()),
            acl: vec![world_anyone()],
            flags: crate::op::create_mode::EPHEMERAL_SEQUENTIAL,
        };
        assert_round_trip(&c);
        assert_truncations_fail(&c);
        let t = CreateTtlRequest {
            path: "/t".into(),
            data: None,
            acl: vec![],
            flags: crate::op::create_mode::PERSISTENT_WITH_TTL,
            ttl: 1_099_511_627_775,
        };
        assert_round_trip(&t);
        assert_truncations_fail(&t);
    }

    fn check<T: Record + PartialEq + std::fmt::Debug>(v: T) {
        assert_round_trip(&v);
        assert_truncations_fail(&v);
    }

    #[test]
    fn path_ops_round_trip() {
        check(DeleteRequest {
            path: "/d".into(),
            version: -1,
        });
        check(PathWatchRequest {
            path: "/w".into(),
            watch: true,
        });
        check(SetDataRequest {
            path: "/s".into(),
            data: Some(vec![0, 255]),
            version: 3,
        });
        check(SetAclRequest {
            path: "/s".into(),
            acl: vec![world_anyone()],
            version: 0,
        });
        check(CheckVersionRequest {
            path: "/c".into(),
            version: 9,
        });
        check(WatchesRequest {
            path: "/c".into(),
            watcher_type: 3,
        });
        check(AddWatchRequest {
            path: "/c".into(),
            mode: 1,
        });
    }

    #[test]
    fn set_watches_round_trip() {
        let w = SetWatches {
            relative_zxid: 77,
            data_watches: vec!["/a".into()],
            exist_watches: vec![],
            child_watches: vec!["/".into(), "/b".into()],
        };
        assert_round_trip(&w);
        assert_truncations_fail(&w);
        let w2 = SetWatches2 {
            relative_zxid: 77,
            data_watches: vec![],
            exist_watches: vec!["/x".into()],
            child_watches: vec![],
            persistent_watches: vec!["/p".into()],
            persistent_recursive_watches: vec!["/r".into()],
        };
        assert_round_trip(&w2);
        assert_truncations_fail(&w2);
    }

    #[test]
    fn auth_sasl_reconfig_whoami_round_trip() {
        let a = AuthPacket {
            auth_type: 0,
            scheme: "digest".into(),
            auth: b"user:pw".to_vec(),
        };
        assert_round_trip(&a);
        assert_truncations_fail(&a);
        let r = ReconfigRequest {
            joining_servers: None,
            leaving_servers: Some("2".into()),
            new_members: None,
            cur_config_id: -1,
        };
        let bytes = assert_round_trip(&r);
        assert_eq!(&bytes[..4], &[0xff; 4], "null ustring is length -1");
        assert_truncations_fail(&r);
        let s = SaslRequest {
            token: vec![1, 2, 3],
        };
        assert_round_trip(&s);
        assert_truncations_fail(&s);
        let c = ClientInfo {
            auth_scheme: "ip".into(),
            user: "127.0.0.1".into(),
        };
        assert_round_trip(&c);
        assert_truncations_fail(&c);
    }

    #[test]
    fn null_data_stays_null_and_empty_stays_empty() {
        let null = SetDataRequest {
            path: "/s".into(),
            data: None,
            version: -1,
        };
        let bytes = assert_round_trip(&null);
        assert_eq!(&bytes[6..10], &[0xff; 4], "null buffer is length -1");
        let empty = SetDataRequest {
            data: Some(vec![]),
            ..null
        };
        let bytes = assert_round_trip(&empty);
        assert_eq!(&bytes[6..10], &[0; 4]);
    }

    #[test]
    fn null_paths_are_rejected_where_zookeeper_dereferences_them() {
        // exists/getData/getChildren body: path null, watch false.
        let bytes = [0xff, 0xff, 0xff, 0xff, 0];
        assert_eq!(
            PathWatchRequest::decode_from(&bytes),
            Err(DecodeError::NullPath)
        );
        // setData validates the path first (BadArguments): null reads as "".
        let bytes = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 1];
        assert_eq!(
            SetDataRequest::decode_from(&bytes).map(|r| r.path),
            Ok(String::new())
        );
    }

    #[test]
    fn acl_vector_with_absurd_count_is_rejected() {
        // CreateRequest{path "/", data empty, acl count 1_000_000, ...} in 17 bytes.
        let bytes = [
            0, 0, 0, 1, b'/', 0, 0, 0, 0, 0, 0x0f, 0x42, 0x40, 0, 0, 0, 0,
        ];
        assert!(matches!(
            CreateRequest::decode_from(&bytes),
            Err(DecodeError::InvalidLength(1_000_000))
        ));
    }
}
