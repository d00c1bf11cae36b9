//! A raw ZooKeeper wire client for conformance tests: it sends exactly the bytes a scenario asks
//! for (well-formed requests, malformed ones, garbage) and reports every packet the server sends
//! back — replies and watch events (xid -1) — in arrival order, or that the server closed.
//!
//! It deliberately does *not* use `zkit-proto`'s `Request`/`Response` types: the suite is an
//! oracle for the server built on them, so it encodes request bodies by hand (on
//! `zkit-proto`'s checked jute primitives) and must be able to express requests no well-typed
//! encoder can (truncated bodies, bogus op codes, bad lengths). It never retries or reconnects
//! behind the scenario's back.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use zkit_proto::codec::{
    put_bool, put_buffer, put_i32, put_i64, put_opt_buffer, put_string_vec, put_ustring,
};
use zkit_proto::Reader;

/// How long to wait for a packet before calling the server silent. Generous: Apache under a
/// loaded 2-core machine can take a while, and a real hang must still end the test.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(15);

/// Op codes used by the scenarios (PROTOCOL.md, "Op codes").
#[allow(dead_code)]
pub mod op {
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const EXISTS: i32 = 3;
    pub const GET_DATA: i32 = 4;
    pub const SET_DATA: i32 = 5;
    pub const GET_ACL: i32 = 6;
    pub const SET_ACL: i32 = 7;
    pub const GET_CHILDREN: i32 = 8;
    pub const SYNC: i32 = 9;
    pub const PING: i32 = 11;
    pub const GET_CHILDREN2: i32 = 12;
    pub const CHECK: i32 = 13;
    pub const MULTI: i32 = 14;
    pub const CREATE2: i32 = 15;
    pub const RECONFIG: i32 = 16;
    pub const CHECK_WATCHES: i32 = 17;
    pub const REMOVE_WATCHES: i32 = 18;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const DELETE_CONTAINER: i32 = 20;
    pub const CREATE_TTL: i32 = 21;
    pub const MULTI_READ: i32 = 22;
    pub const AUTH: i32 = 100;
    pub const SET_WATCHES: i32 = 101;
    pub const SASL: i32 = 102;
    pub const GET_EPHEMERALS: i32 = 103;
    pub const GET_ALL_CHILDREN_NUMBER: i32 = 104;
    pub const SET_WATCHES2: i32 = 105;
    pub const ADD_WATCH: i32 = 106;
    pub const WHO_AM_I: i32 = 107;
    pub const CLOSE_SESSION: i32 = -11;
}

/// One ACL entry as sent.
#[derive(Debug, Clone)]
pub struct AclEntry {
    pub perms: i32,
    pub scheme: String,
    pub id: String,
}

/// `world:anyone` with all permissions (ZooDefs.Ids.OPEN_ACL_UNSAFE).
pub fn open_acl() -> Vec<AclEntry> {
    vec![AclEntry {
        perms: 31,
        scheme: "world".into(),
        id: "anyone".into(),
    }]
}

/// The handshake reply.
#[derive(Debug, Clone)]
pub struct Connected {
    pub protocol_version: i32,
    pub timeout: i32,
    pub session_id: i64,
    pub passwd: Vec<u8>,
    /// `None` when the server omitted the trailing readOnly byte.
    pub read_only: Option<bool>,
}

/// What reading from the connection produced.
#[derive(Debug, Clone)]
pub enum Incoming {
    /// A frame: reply header plus the rest of the payload.
    Packet {
        xid: i32,
        zxid: i64,
        err: i32,
        body: Vec<u8>,
    },
    /// The server closed the connection (EOF or reset).
    Closed,
    /// Nothing within the timeout.
    Silent,
    /// A frame too short for a reply header, or a bad length.
    Garbled(String),
}

/// A raw connection.
pub struct WireClient {
    stream: TcpStream,
    next_xid: i32,
}

impl WireClient {
    /// A TCP connection with no handshake yet.
    pub async fn connect_raw(addr: SocketAddr) -> Result<Self> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connect {addr}"))?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            next_xid: 1,
        })
    }

    /// Connects and opens a new session asking for `timeout_ms`.
    pub async fn new_session(addr: SocketAddr, timeout_ms: i32) -> Result<(Self, Connected)> {
        match Self::resume(addr, 0, &[0; 16], 0, timeout_ms).await? {
            (c, Ok(connected)) => Ok((c, connected)),
            (_, Err(other)) => bail!("handshake for a new session: {other:?}"),
        }
    }

    /// Connects with an explicit handshake (reconnect: session id, password, last zxid seen).
    pub async fn resume(
        addr: SocketAddr,
        session_id: i64,
        passwd: &[u8],
        last_zxid_seen: i64,
        timeout_ms: i32,
    ) -> Result<(Self, Result<Connected, Incoming>)> {
        let mut c = Self::connect_raw(addr).await?;
        let mut b = BytesMut::new();
        put_i32(&mut b, 0); // protocolVersion
        put_i64(&mut b, last_zxid_seen);
        put_i32(&mut b, timeout_ms);
        put_i64(&mut b, session_id);
        put_buffer(&mut b, passwd);
        put_bool(&mut b, false); // readOnly
        c.send_frame(&b).await?;
        let connected = c.read_connect_response().await?;
        Ok((c, connected))
    }

    /// Reads a ConnectResponse (or what came instead).
    pub async fn read_connect_response(&mut self) -> Result<Result<Connected, Incoming>> {
        let frame = match self.read_frame(REPLY_TIMEOUT).await? {
            Ok(f) => f,
            Err(other) => return Ok(Err(other)),
        };
        let mut r = Reader::new(&frame);
        let connected = Connected {
            protocol_version: r.read_i32()?,
            timeout: r.read_i32()?,
            session_id: r.read_i64()?,
            passwd: r.read_buffer()?,
            read_only: if r.is_empty() {
                None
            } else {
                Some(r.read_bool()?)
            },
        };
        if !r.is_empty() {
            return Ok(Err(Incoming::Garbled(format!(
                "connect response with {} trailing bytes",
                r.remaining()
            ))));
        }
        Ok(Ok(connected))
    }

    /// Writes `payload` with its 4-byte length prefix.
    pub async fn send_frame(&mut self, payload: &[u8]) -> Result<()> {
        let mut b = BytesMut::with_capacity(payload.len() + 4);
        b.put_i32(i32::try_from(payload.len()).context("frame too long")?);
        b.put_slice(payload);
        self.send_bytes(&b).await
    }

    /// Writes bytes as they are (no length prefix).
    pub async fn send_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await?;
        Ok(())
    }

    /// Sends a request with the next xid; returns that xid.
    pub async fn send_request(&mut self, op: i32, body: &[u8]) -> Result<i32> {
        let xid = self.next_xid;
        self.next_xid += 1;
        self.send_request_with_xid(xid, op, body).await?;
        Ok(xid)
    }

    /// Sends a request with an explicit xid (pings, setWatches, or deliberate oddities).
    pub async fn send_request_with_xid(&mut self, xid: i32, op: i32, body: &[u8]) -> Result<()> {
        let mut b = BytesMut::with_capacity(body.len() + 8);
        put_i32(&mut b, xid);
        put_i32(&mut b, op);
        b.put_slice(body);
        self.send_frame(&b).await
    }

    /// Reads one frame: `Ok(Ok(payload))`, or `Ok(Err(what happened instead))`.
    pub async fn read_frame(&mut self, timeout: Duration) -> Result<Result<Vec<u8>, Incoming>> {
        let read = async {
            let mut len = [0u8; 4];
            if let Err(e) = self.stream.read_exact(&mut len).await {
                return Ok::<_, anyhow::Error>(Err(closed_or(e)));
            }
            let len = i32::from_be_bytes(len);
            if !(0..=16 * 1024 * 1024).contains(&len) {
                return Ok(Err(Incoming::Garbled(format!("frame length {len}"))));
            }
            let mut payload = vec![0u8; len as usize];
            if let Err(e) = self.stream.read_exact(&mut payload).await {
                return Ok(Err(closed_or(e)));
            }
            Ok(Ok(payload))
        };
        match tokio::time::timeout(timeout, read).await {
            Ok(r) => r,
            Err(_) => Ok(Err(Incoming::Silent)),
        }
    }

    /// The next packet from the server, whatever it is.
    pub async fn recv(&mut self, timeout: Duration) -> Result<Incoming> {
        let frame = match self.read_frame(timeout).await? {
            Ok(f) => f,
            Err(other) => return Ok(other),
        };
        if frame.len() < 16 {
            return Ok(Incoming::Garbled(format!(
                "{}-byte frame: {:02x?}",
                frame.len(),
                frame
            )));
        }
        let mut r = Reader::new(&frame);
        let xid = r.read_i32()?;
        let zxid = r.read_i64()?;
        let err = r.read_i32()?;
        Ok(Incoming::Packet {
            xid,
            zxid,
            err,
            body: r.rest().to_vec(),
        })
    }

    /// Closes our side.
    pub async fn shutdown(mut self) {
        let _ = self.stream.shutdown().await;
    }
}

fn closed_or(e: std::io::Error) -> Incoming {
    use std::io::ErrorKind::*;
    match e.kind() {
        UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe => Incoming::Closed,
        _ => Incoming::Garbled(format!("io error: {e}")),
    }
}

/// Request body builders (jute records, PROTOCOL.md "Records").
pub mod body {
    use super::*;

    pub fn acl(b: &mut BytesMut, acl: &[AclEntry]) {
        put_i32(b, acl.len() as i32);
        for a in acl {
            put_i32(b, a.perms);
            put_ustring(b, &a.scheme);
            put_ustring(b, &a.id);
        }
    }

    /// CreateRequest (ops 1, 15, 19), plus the ttl for op 21 when `ttl` is given.
    pub fn create(
        path: &str,
        data: &[u8],
        acl_list: &[AclEntry],
        flags: i32,
        ttl: Option<i64>,
    ) -> BytesMut {
        create_opt(path, Some(data), acl_list, flags, ttl)
    }

    /// [`create`] whose data may be null (`None`: buffer length -1, what zkCli's
    /// `create /a` without data sends).
    pub fn create_opt(
        path: &str,
        data: Option<&[u8]>,
        acl_list: &[AclEntry],
        flags: i32,
        ttl: Option<i64>,
    ) -> BytesMut {
        let mut b = BytesMut::new();
        put_ustring(&mut b, path);
        put_opt_buffer(&mut b, data);
        acl(&mut b, acl_list);
        put_i32(&mut b, flags);
        if let Some(ttl) = ttl {
            put_i64(&mut b, ttl);
        }
        b
    }

    /// {path, int} records: DeleteRequest, CheckVersionRequest, CheckWatches/RemoveWatches,
    /// AddWatchRequest.
    pub fn path_int(path: &str, v: i32) -> BytesMut {
        let mut b = BytesMut::new();
        put_ustring(&mut b, path);
        put_i32(&mut b, v);
        b
    }

    /// {path, bool watch}: exists, getData, getChildren(2).
    pub fn path_watch(path: &str, watch: bool) -> BytesMut {
        let mut b = BytesMut::new();
        put_ustring(&mut b, path);
        put_bool(&mut b, watch);
        b
    }

    /// {path}: getACL, sync, getEphemerals, getAllChildrenNumber.
    pub fn path(path: &str) -> BytesMut {
        let mut b = BytesMut::new();
        put_ustring(&mut b, path);
        b
    }

    pub fn set_data(path: &str, data: &[u8], version: i32) -> BytesMut {
        set_data_opt(path, Some(data), version)
    }

    /// [`set_data`] whose data may be null (`None`: buffer length -1).
    pub fn set_data_opt(path: &str, data: Option<&[u8]>, version: i32) -> BytesMut {
        let mut b = BytesMut::new();
        put_ustring(&mut b, path);
        put_opt_buffer(&mut b, data);
        put_i32(&mut b, version);
        b
    }

    pub fn set_acl(path: &str, acl_list: &[AclEntry], version: i32) -> BytesMut {
        let mut b = BytesMut::new();
        put_ustring(&mut b, path);
        acl(&mut b, acl_list);
        put_i32(&mut b, version);
        b
    }

    /// SetWatches (persistent = None) or SetWatches2.
    pub fn set_watches(
        relative_zxid: i64,
        data: &[&str],
        exist: &[&str],
        child: &[&str],
        persistent: Option<(&[&str], &[&str])>,
    ) -> BytesMut {
        let mut b = BytesMut::new();
        put_i64(&mut b, relative_zxid);
        put_string_vec(&mut b, data);
        put_string_vec(&mut b, exist);
        put_string_vec(&mut b, child);
        if let Some((p, pr)) = persistent {
            put_string_vec(&mut b, p);
            put_string_vec(&mut b, pr);
        }
        b
    }

    /// One sub-op of a multi / multiRead.
    pub enum SubOp<'a> {
        Create {
            path: &'a str,
            data: &'a [u8],
            flags: i32,
        },
        Create2 {
            path: &'a str,
            data: &'a [u8],
            flags: i32,
        },
        Delete {
            path: &'a str,
            version: i32,
        },
        SetData {
            path: &'a str,
            data: &'a [u8],
            version: i32,
        },
        Check {
            path: &'a str,
            version: i32,
        },
        GetChildren {
            path: &'a str,
        },
        GetData {
            path: &'a str,
        },
    }

    /// MultiRequest: MultiHeader{type, done=false, err=-1} + record per op, then the terminator.
    pub fn multi(ops: &[SubOp<'_>]) -> BytesMut {
        let mut b = BytesMut::new();
        for o in ops {
            let (ty, rec) = match o {
                SubOp::Create { path, data, flags } => {
                    (op::CREATE, create(path, data, &open_acl(), *flags, None))
                }
                SubOp::Create2 { path, data, flags } => {
                    (op::CREATE2, create(path, data, &open_acl(), *flags, None))
                }
                SubOp::Delete { path, version } => (op::DELETE, path_int(path, *version)),
                SubOp::SetData {
                    path,
                    data,
                    version,
                } => (op::SET_DATA, set_data(path, data, *version)),
                SubOp::Check { path, version } => (op::CHECK, path_int(path, *version)),
                SubOp::GetChildren { path } => (op::GET_CHILDREN, path_watch(path, false)),
                SubOp::GetData { path } => (op::GET_DATA, path_watch(path, false)),
            };
            put_i32(&mut b, ty);
            put_bool(&mut b, false);
            put_i32(&mut b, -1);
            b.put_slice(&rec);
        }
        put_i32(&mut b, -1);
        put_bool(&mut b, true);
        put_i32(&mut b, -1);
        b
    }
}
