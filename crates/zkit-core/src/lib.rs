//! The pure ZooKeeper server state machine: data tree, sessions, watches, request → txn → apply.
//!
//! No tokio, no `std::fs`, no `std::net`, no clocks: time is an argument (`now`, milliseconds
//! since the Unix epoch, supplied by the shell), and randomness (session passwords) is supplied
//! by the shell too. The shell drives it like raft-rs's `RawNode`:
//!
//! ```text
//! core.set_peer_ip(conn, "127.0.0.1".into());            // optional: ip identity (whoAmI)
//! core.connect(now, conn, connect_request, fresh_passwd); // handshake
//! core.handle(now, conn, xid, request);                   // a decoded request
//! core.tick(now);                                         // session expiry, container/TTL reaping
//! let ready = core.ready();                               // txns to log, messages, closes
//! wal.append(&ready.txns)?; wal.sync()?;                  // durable before any message is sent
//! send(ready.messages); close(ready.closes);              // in order
//! ```
//!
//! Every state change is a [`Txn`] applied by the one [`Core::apply`], used live and for
//! recovery (WAL replay). Requests are validated completely before anything changes. As in
//! Apache, a failed write is logged too (an error txn): it consumes a zxid and changes nothing
//! else. [`Core::snapshot`]/[`Core::restore`] checkpoint the state; [`Core::dump`] prints it.
//!
//! ZooKeeper 3.8 is the oracle, quirks included (each is commented where it is matched).
//!
//! # Layout
//! - [`path`]: `PathUtils.validatePath` and the parent/name split.
//! - [`tree`]: the data tree (compact shared node records, path index, interned ACLs), stats,
//!   ephemeral/container/TTL indexes, primitive mutations, copy-on-write captures.
//! - [`session`]: session ids, expiry rounding.
//! - [`watch`]: watch tables (one-shot, persistent, persistent-recursive).
//! - [`acl`]: ACL fix-up, digest ids, the permission check (ops and watch delivery).
//! - `prep`: request → [`TxnOp`] validation in Apache's check order, with a multi overlay.
//! - [`txn`]: [`Txn`]/[`TxnOp`] and their binary encoding.
//! - [`image`]: a core built from another server's persisted nodes and sessions (importing
//!   an Apache ZooKeeper data dir).
//! - `snapshot`: [`Core::snapshot_capture`] (cheap, then serialized off the caller's path),
//!   [`Core::snapshot`], [`Core::restore`], [`Core::dump`].
//! - this file: [`Core`], which dispatches requests, applies txns, fires watches and queues
//!   the messages.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod acl;
pub mod image;
pub mod path;
mod prep;
pub mod session;
mod snapshot;
pub mod tree;
pub mod txn;
pub mod watch;

use std::collections::BTreeMap;

use zkit_proto::op::{add_watch_mode, event_type, keeper_state, watcher_type, xid as special_xid};
use zkit_proto::{
    ClientInfo, ConnectRequest, ConnectResponse, ErrorCode, Id, MultiOp, MultiReadOp,
    MultiReadResult, MultiResult, ReplyHeader, Request, Response, Stat, WatcherEvent,
};

use crate::prep::{CreateOp, Overlay};
use crate::session::Session;
use crate::tree::DataTree;
use crate::watch::WatchTable;

pub use crate::snapshot::{RestoreError, SnapshotCapture};
pub use crate::txn::{Txn, TxnOp};

/// A connection, named by the shell. Unique for the life of the server.
pub type ConnId = u64;

/// Server settings the state machine needs.
#[derive(Debug, Clone)]
pub struct Config {
    /// tickTime in ms (default 2000). Session timeouts are clamped to [2, 20] ticks.
    pub tick_time_ms: u32,
    /// Override of the lower session-timeout bound (ms); `None` = 2 × tick.
    pub min_session_timeout_ms: Option<u32>,
    /// Override of the upper session-timeout bound (ms); `None` = 20 × tick.
    pub max_session_timeout_ms: Option<u32>,
    /// extendedTypesEnabled: TTL nodes allowed.
    pub extended_types: bool,
    /// znode.container.checkIntervalMs (default 60000).
    pub container_check_interval_ms: u64,
    /// Server id used in session-id generation (0 for standalone).
    pub server_id: u8,
    /// `zookeeper.DigestAuthenticationProvider.superDigest`: a digest id (`user:base64hash`,
    /// see [`acl::digest_id`]); a connection authenticating as it bypasses every ACL.
    pub super_digest: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            tick_time_ms: 2000,
            min_session_timeout_ms: None,
            max_session_timeout_ms: None,
            extended_types: false,
            container_check_interval_ms: 60_000,
            server_id: 0,
            super_digest: None,
        }
    }
}

/// One message the shell must write to a connection, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Outbound {
    /// The handshake reply. If `close_after` the shell closes the connection after sending it
    /// (expired/unknown session, bad password).
    Connect {
        /// The reply.
        response: ConnectResponse,
        /// Close the connection after sending.
        close_after: bool,
    },
    /// A reply: header, then `body` only when `header.err == 0`.
    Reply {
        /// Header.
        header: ReplyHeader,
        /// Body (ignored unless err == 0).
        body: Response,
    },
    /// A watch notification (xid -1), sent before the reply of the write that caused it.
    Event {
        /// zxid to put in the header (-1, as ZooKeeper up to 3.8).
        zxid: i64,
        /// The event.
        event: WatcherEvent,
    },
    /// Close the connection after everything before it is written (closeSession, AuthFailed).
    Close,
}

/// What the shell must do after feeding the core: persist `txns`, then write `messages`.
#[derive(Debug, Default)]
pub struct Ready {
    /// Txns to make durable before any of `messages` is sent. Already applied in memory.
    pub txns: Vec<Txn>,
    /// Messages per connection, in the order they must leave.
    pub messages: Vec<(ConnId, Outbound)>,
}

/// Counters for four-letter words and metrics.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Number of znodes including the special ones, counted as Apache does (its root is
    /// stored under both "" and "/", so a fresh server reports 5).
    pub node_count: u64,
    /// Sum of path and data lengths (Apache's `approximateDataSize`).
    pub approximate_data_size: u64,
    /// Live sessions.
    pub sessions: u64,
    /// Ephemeral nodes.
    pub ephemerals: u64,
    /// Watch registrations (one-shot + persistent).
    pub watches: u64,
    /// Distinct watched paths.
    pub watched_paths: u64,
    /// Last applied zxid.
    pub last_zxid: i64,
}

/// Per-connection state.
#[derive(Debug, Clone, Default)]
struct Conn {
    /// The attached session (None before the handshake or after close).
    session: Option<i64>,
    /// Timeout negotiated on this connection (Apache touches with the connection's timeout).
    timeout_ms: i32,
    /// Ids added by auth packets (digest, ip), in order, without duplicates.
    auth: Vec<Id>,
    /// The peer address, if the shell told us (`ip:<addr>` identity).
    peer_ip: Option<String>,
}

/// The result of applying one (sub-)op.
#[derive(Debug, Clone)]
struct OpOutcome {
    err: i32,
    path: String,
    stat: Option<Stat>,
}

impl OpOutcome {
    fn ok(path: &str, stat: Option<Stat>) -> OpOutcome {
        OpOutcome {
            err: 0,
            path: path.to_owned(),
            stat,
        }
    }

    fn err(code: ErrorCode) -> OpOutcome {
        OpOutcome {
            err: code as i32,
            path: String::new(),
            stat: None,
        }
    }
}

/// The kind of a write request, to shape its reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteKind {
    Create,
    Create2,
    Delete,
    SetData,
    SetAcl,
    Check,
}

/// The state machine.
#[derive(Debug)]
pub struct Core {
    config: Config,
    tree: DataTree,
    sessions: BTreeMap<i64, Session>,
    conns: BTreeMap<ConnId, Conn>,
    data_watches: WatchTable,
    child_watches: WatchTable,
    last_zxid: i64,
    next_session_id: i64,
    next_reap: i64,
    out: Ready,
}

fn event(event_type: i32, path: &str) -> WatcherEvent {
    WatcherEvent {
        event_type,
        state: keeper_state::SYNC_CONNECTED,
        path: path.to_owned(),
    }
}

/// The create flavour of a multi sub-op. Apache's `MultiOperationRecord` rebuilds every create
/// sub-op with `Op.create(path, data, acl, flags[, ttl])`, whose op code comes from the flags
/// alone: TTL modes → createTTL, CONTAINER → createContainer, anything else → create. So the
/// wire op code (1, 15, 19, 21) is ignored: a create2 inside a multi answers a plain
/// CreateResult without stat (observed on 3.8), and a create with the CONTAINER flag makes a
/// container.
fn multi_create_kind(flags: i32, ttl: i64) -> CreateOp {
    use zkit_proto::op::create_mode as cm;
    match flags {
        cm::CONTAINER => CreateOp::Container,
        cm::PERSISTENT_WITH_TTL | cm::PERSISTENT_SEQUENTIAL_WITH_TTL => CreateOp::Ttl(ttl),
        _ => CreateOp::Create,
    }
}

/// Java's `String.trim()`: strips chars <= ' ' at both ends.
fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

impl Core {
    /// A fresh server state at `now` (ms since epoch; seeds session-id generation).
    pub fn new(config: Config, now: i64) -> Core {
        let tree = DataTree::new(config.extended_types);
        Core::with_tree(config, now, tree)
    }

    fn with_tree(config: Config, now: i64, tree: DataTree) -> Core {
        let next_session_id = session::initial_session_id(now, config.server_id);
        let next_reap = now.saturating_add(config.container_check_interval_ms.max(1) as i64);
        Core {
            config,
            tree,
            sessions: BTreeMap::new(),
            conns: BTreeMap::new(),
            data_watches: WatchTable::default(),
            child_watches: WatchTable::default(),
            last_zxid: 0,
            next_session_id,
            next_reap,
            out: Ready::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The zxid of the last applied txn.
    pub fn last_zxid(&self) -> i64 {
        self.last_zxid
    }

    /// The zxid the next txn gets. Saturates instead of overflowing (a restored snapshot could
    /// claim any last zxid); a saturated txn is then ignored by `apply` rather than panicking.
    fn next_zxid(&self) -> i64 {
        self.last_zxid.saturating_add(1)
    }

    /// The data tree (read-only), for 4lw dumps and tests.
    pub fn tree(&self) -> &DataTree {
        &self.tree
    }

    /// Live sessions and their timeouts (ms), for 4lw `dump`/`cons` and tests.
    pub fn sessions(&self) -> impl Iterator<Item = (i64, i32)> + '_ {
        self.sessions.iter().map(|(id, s)| (*id, s.timeout_ms))
    }

    /// Every data-table watch registration (data and exist watches, and the persistent ones,
    /// which Apache registers in both tables) as (path, connection), sorted by path then
    /// connection. Child watches are left out, as Apache's `DataTree.getWatches()` reads only
    /// its data `WatchManager` (4lw `wchc`/`wchp`/`wchs`, admin `watches`).
    pub fn watches(&self) -> Vec<(String, ConnId)> {
        let all: std::collections::BTreeSet<(String, ConnId)> = self
            .data_watches
            .entries()
            .map(|(p, c)| (p.clone(), c))
            .collect();
        all.into_iter().collect()
    }

    /// Live sessions with their expiry deadline (ms since epoch, on a tick boundary; `None`
    /// until the first tick after recovery), for 4lw `dump`.
    pub fn session_deadlines(&self) -> Vec<(i64, Option<i64>)> {
        self.sessions
            .iter()
            .map(|(id, s)| (*id, s.deadline))
            .collect()
    }

    /// The connections the core knows (opened by the shell and not yet disconnected).
    pub fn connections(&self) -> Vec<ConnId> {
        self.conns.keys().copied().collect()
    }

    /// The session attached to `conn`, if any.
    pub fn session_of(&self, conn: ConnId) -> Option<i64> {
        self.conns.get(&conn).and_then(|c| c.session)
    }

    /// Tells the core the peer address of `conn` (before or after its handshake): it becomes
    /// the connection's `ip:<addr>` identity, reported by whoAmI and used by `ip` auth.
    pub fn set_peer_ip(&mut self, conn: ConnId, ip: String) {
        self.conns.entry(conn).or_default().peer_ip = Some(ip);
    }

    fn min_timeout(&self) -> i32 {
        self.config
            .min_session_timeout_ms
            .map_or(2 * i64::from(self.config.tick_time_ms), i64::from)
            .min(i64::from(i32::MAX)) as i32
    }

    fn max_timeout(&self) -> i32 {
        self.config
            .max_session_timeout_ms
            .map_or(20 * i64::from(self.config.tick_time_ms), i64::from)
            .min(i64::from(i32::MAX)) as i32
    }

    fn deadline(&self, now: i64, timeout_ms: i32) -> i64 {
        session::round_to_next_interval(
            now.saturating_add(i64::from(timeout_ms)),
            i64::from(self.config.tick_time_ms),
        )
    }

    fn push(&mut self, conn: ConnId, msg: Outbound) {
        self.out.messages.push((conn, msg));
    }

    fn reply(&mut self, conn: ConnId, xid: i32, err: i32, body: Response) {
        let header = ReplyHeader {
            xid,
            zxid: self.last_zxid,
            err,
        };
        let body = if err == 0 { body } else { Response::Empty };
        self.push(conn, Outbound::Reply { header, body });
    }

    fn reply_err(&mut self, conn: ConnId, xid: i32, err: ErrorCode) {
        self.reply(conn, xid, err as i32, Response::Empty);
    }

    /// Everything `conn` is authenticated as: its `ip:<addr>` and the auth-packet ids, without
    /// duplicates, sorted by (scheme, id). Apache keeps them in a hash set, so its order is
    /// unspecified; sorting matches what a 3.8 server was seen to return for whoAmI
    /// (digest ids before ip).
    fn auth_info(&self, conn: ConnId) -> Vec<Id> {
        let Some(c) = self.conns.get(&conn) else {
            return Vec::new();
        };
        let mut ids: std::collections::BTreeSet<Id> = c.auth.iter().cloned().collect();
        if let Some(ip) = &c.peer_ip {
            ids.insert(Id {
                scheme: "ip".into(),
                id: ip.clone(),
            });
        }
        ids.into_iter().collect()
    }

    /// Drops `conn`'s watches and detaches it from its session (it is being closed).
    fn detach(&mut self, conn: ConnId) {
        self.data_watches.remove_conn(conn);
        self.child_watches.remove_conn(conn);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.session = None;
        }
    }

    // ----- handshake -----

    /// A handshake arrived on `conn`. `fresh_passwd` is 16 random bytes the shell drew, used if
    /// a new session is created. The reply comes out of [`Core::ready`] (after the session's txn).
    pub fn connect(&mut self, now: i64, conn: ConnId, req: ConnectRequest, fresh_passwd: [u8; 16]) {
        if req.last_zxid_seen > self.last_zxid {
            // Apache: "Refusing session request for client ... as it has seen zxid ..." and
            // closes without a ConnectResponse; the client tries another server.
            self.push(conn, Outbound::Close);
            return;
        }
        let timeout = req.time_out.max(self.min_timeout()).min(self.max_timeout());
        let read_only = req.read_only.map(|_| false);
        if req.session_id == 0 {
            let mut id = self.next_session_id;
            while id == 0 || id == tree::CONTAINER_OWNER || self.sessions.contains_key(&id) {
                id = id.wrapping_add(1);
            }
            self.next_session_id = id.wrapping_add(1);
            let txn = Txn {
                zxid: self.next_zxid(),
                session: id,
                time: now,
                op: TxnOp::CreateSession {
                    timeout_ms: timeout,
                    passwd: fresh_passwd.to_vec(),
                },
            };
            self.commit(txn);
            let deadline = self.deadline(now, timeout);
            if let Some(s) = self.sessions.get_mut(&id) {
                s.deadline = Some(deadline);
            }
            let c = self.conns.entry(conn).or_default();
            c.session = Some(id);
            c.timeout_ms = timeout;
            self.push(
                conn,
                Outbound::Connect {
                    response: ConnectResponse {
                        protocol_version: 0,
                        time_out: timeout,
                        session_id: id,
                        passwd: fresh_passwd.to_vec(),
                        read_only,
                    },
                    close_after: false,
                },
            );
            return;
        }
        // Apache closes every other connection of the session before it even checks the
        // password (ZooKeeperServer.processConnectRequest → closeSession(CLIENT_RECONNECT)).
        let others: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(c, st)| **c != conn && st.session == Some(req.session_id))
            .map(|(c, _)| *c)
            .collect();
        for other in others {
            self.detach(other);
            self.push(other, Outbound::Close);
        }
        let deadline = self.deadline(now, timeout);
        let valid = match self.sessions.get_mut(&req.session_id) {
            Some(s) if s.passwd == req.passwd => {
                s.deadline = Some(deadline);
                Some(s.passwd.clone())
            }
            _ => None,
        };
        match valid {
            Some(passwd) => {
                let c = self.conns.entry(conn).or_default();
                c.session = Some(req.session_id);
                c.timeout_ms = timeout;
                self.push(
                    conn,
                    Outbound::Connect {
                        response: ConnectResponse {
                            protocol_version: 0,
                            time_out: timeout,
                            session_id: req.session_id,
                            passwd,
                            read_only,
                        },
                        close_after: false,
                    },
                );
            }
            None => self.push(
                conn,
                Outbound::Connect {
                    response: ConnectResponse {
                        protocol_version: 0,
                        time_out: 0,
                        session_id: 0,
                        passwd: vec![0; 16],
                        read_only,
                    },
                    close_after: true,
                },
            ),
        }
    }

    // ----- requests -----

    /// The live session of `conn`, touched (unless `touch` is false). `None` (and a Close
    /// queued) when the connection has no live session: Apache drops such a request
    /// (`MissingSessionException`) and the connection is closed by the expiry.
    fn live_session(&mut self, now: i64, conn: ConnId, touch: bool) -> Option<i64> {
        let (session, timeout) = match self.conns.get(&conn) {
            Some(Conn {
                session: Some(s),
                timeout_ms,
                ..
            }) if self.sessions.contains_key(s) => (*s, *timeout_ms),
            _ => {
                self.detach(conn);
                self.push(conn, Outbound::Close);
                return None;
            }
        };
        if touch {
            let deadline = self.deadline(now, timeout);
            if let Some(s) = self.sessions.get_mut(&session) {
                s.deadline = Some(deadline);
            }
        }
        Some(session)
    }

    /// A decoded request on an established connection.
    pub fn handle(&mut self, now: i64, conn: ConnId, xid: i32, req: Request) {
        // auth and sasl are answered by Apache before the request pipeline: no touch.
        let touch = !matches!(req, Request::Auth(_) | Request::Sasl(_));
        let Some(session) = self.live_session(now, conn, touch) else {
            return;
        };
        match req {
            Request::Create(r) => self.write_create(
                now,
                conn,
                xid,
                session,
                CreateOp::Create,
                r.path,
                r.data,
                r.acl,
                r.flags,
            ),
            Request::Create2(r) => self.write_create(
                now,
                conn,
                xid,
                session,
                CreateOp::Create2,
                r.path,
                r.data,
                r.acl,
                r.flags,
            ),
            Request::CreateContainer(r) => self.write_create(
                now,
                conn,
                xid,
                session,
                CreateOp::Container,
                r.path,
                r.data,
                r.acl,
                r.flags,
            ),
            Request::CreateTtl(r) => self.write_create(
                now,
                conn,
                xid,
                session,
                CreateOp::Ttl(r.ttl),
                r.path,
                r.data,
                r.acl,
                r.flags,
            ),
            Request::Delete(r) => self.write(now, conn, xid, session, WriteKind::Delete, |o| {
                o.delete(&r.path, r.version)
            }),
            // Apache 3.8 reads a client's deleteContainer path from the raw request buffer
            // (`new String(request.request.array())`), which starts with the request header,
            // so the "path" always holds NUL bytes: BadArguments, as a failed write. Only the
            // reaper really deletes containers.
            Request::DeleteContainer { .. } => {
                self.write(now, conn, xid, session, WriteKind::Delete, |_| {
                    Err(ErrorCode::BadArguments)
                })
            }
            Request::SetData(r) => self.write(now, conn, xid, session, WriteKind::SetData, |o| {
                o.set_data(&r.path, r.data.as_deref(), r.version)
            }),
            Request::SetAcl(r) => self.write(now, conn, xid, session, WriteKind::SetAcl, |o| {
                o.set_acl(&r.path, &r.acl, r.version)
            }),
            // Outside a multi, Apache 3.8 logs a CheckVersionTxn and then sends no reply at
            // all when the check passes (FinalRequestProcessor has no `case check`, so the
            // client waits forever). We answer err 0 with no body, like check inside a multi
            // (the conformance suite records the difference).
            Request::Check(r) => self.write(now, conn, xid, session, WriteKind::Check, |o| {
                o.check(&r.path, r.version)
            }),
            Request::Multi(ops) => self.multi(now, conn, xid, session, ops),
            // Standalone 3.8: reconfigEnabled is false → ReconfigDisabled, as a failed write
            // (it consumes a zxid, like every failed write in Apache).
            Request::Reconfig(_) => self.write(now, conn, xid, session, WriteKind::SetData, |_| {
                Err(ErrorCode::ReconfigDisabled)
            }),
            Request::CloseSession => {
                let txn = Txn {
                    zxid: self.next_zxid(),
                    session,
                    time: now,
                    op: TxnOp::CloseSession,
                };
                self.commit(txn);
                self.reply(conn, xid, 0, Response::Empty);
                self.detach(conn);
                self.push(conn, Outbound::Close);
            }
            Request::Exists(r) => {
                if r.path.contains('\0') {
                    return self.reply_err(conn, xid, ErrorCode::BadArguments);
                }
                if r.watch {
                    self.data_watches.add(&r.path, conn, watch::STANDARD);
                }
                match self.tree.stat(&r.path) {
                    Some(stat) => self.reply(conn, xid, 0, Response::Stat(stat)),
                    None => self.reply_err(conn, xid, ErrorCode::NoNode),
                }
            }
            Request::GetData(r) => match self.get_data(conn, &r.path, r.watch) {
                Ok((data, stat)) => self.reply(conn, xid, 0, Response::GetData { data, stat }),
                Err(e) => self.reply_err(conn, xid, e),
            },
            Request::GetChildren(r) => match self.get_children(conn, &r.path, r.watch) {
                Ok((children, _)) => self.reply(conn, xid, 0, Response::GetChildren { children }),
                Err(e) => self.reply_err(conn, xid, e),
            },
            Request::GetChildren2(r) => match self.get_children(conn, &r.path, r.watch) {
                Ok((children, stat)) => {
                    self.reply(conn, xid, 0, Response::GetChildren2 { children, stat })
                }
                Err(e) => self.reply_err(conn, xid, e),
            },
            Request::GetAcl { path } => {
                let auth = self.auth_info(conn);
                match self.tree.get(&path) {
                    None => self.reply_err(conn, xid, ErrorCode::NoNode),
                    Some(n) => {
                        let acl = n.acl().to_vec();
                        let stat = n.stat(self.config.extended_types);
                        if let Err(e) = acl::check(
                            &acl,
                            zkit_proto::op::perms::READ | zkit_proto::op::perms::ADMIN,
                            &auth,
                        ) {
                            return self.reply_err(conn, xid, e);
                        }
                        // READ without ADMIN sees digest ids as `user:x` (ZOOKEEPER-1392).
                        let acl = match acl::check(&acl, zkit_proto::op::perms::ADMIN, &auth) {
                            Ok(()) => acl,
                            Err(_) => acl::redact(&acl),
                        };
                        self.reply(conn, xid, 0, Response::GetAcl { acl, stat });
                    }
                }
            }
            Request::Sync { path } => self.reply(conn, xid, 0, Response::Sync { path }),
            Request::Ping => self.reply(conn, special_xid::PING, 0, Response::Empty),
            Request::MultiRead(ops) => {
                let results = ops
                    .into_iter()
                    .map(|op| match op {
                        MultiReadOp::GetChildren(r) => {
                            match self.get_children(conn, &r.path, r.watch) {
                                Ok((children, _)) => MultiReadResult::GetChildren { children },
                                Err(e) => MultiReadResult::Error { err: e as i32 },
                            }
                        }
                        MultiReadOp::GetData(r) => match self.get_data(conn, &r.path, r.watch) {
                            Ok((data, stat)) => MultiReadResult::GetData { data, stat },
                            Err(e) => MultiReadResult::Error { err: e as i32 },
                        },
                    })
                    .collect();
                self.reply(conn, xid, 0, Response::MultiRead(results));
            }
            Request::CheckWatches(r) | Request::RemoveWatches(r)
                if !(1..=3).contains(&r.watcher_type) =>
            {
                // 3.8's WatcherType.fromInt knows only 1..3 and throws; FinalRequestProcessor
                // turns that into MarshallingError.
                self.reply_err(conn, xid, ErrorCode::MarshallingError);
            }
            // A non-empty path without any '/' ("bad"): 3.8's WatchManager.containsWatcher walks
            // it with PathParentIterator, whose first next() computes the parent with
            // `path.substring(0, path.lastIndexOf('/'))` and throws; FinalRequestProcessor
            // answers the exception with MarshallingError. ("" and "a/b" get NoWatcher.)
            Request::CheckWatches(r) if !r.path.is_empty() && !r.path.contains('/') => {
                self.reply_err(conn, xid, ErrorCode::MarshallingError);
            }
            Request::CheckWatches(r) => {
                // 3.8 quirk kept on purpose: containsWatcher answers for the path, not for
                // this connection's membership (see WatchTable::contains_any).
                let found = match r.watcher_type {
                    watcher_type::CHILDREN => self.child_watches.contains_any(&r.path),
                    watcher_type::DATA => self.data_watches.contains_any(&r.path),
                    _ => {
                        self.child_watches.contains_any(&r.path)
                            || self.data_watches.contains_any(&r.path)
                    }
                };
                let err = if found {
                    0
                } else {
                    ErrorCode::NoWatcher as i32
                };
                self.reply(conn, xid, err, Response::Empty);
            }
            Request::RemoveWatches(r) => {
                // The server removes and answers; the DataWatchRemoved/ChildWatchRemoved events
                // are synthesised by the client library (ZKWatchManager), not sent by Apache.
                let removed = match r.watcher_type {
                    watcher_type::CHILDREN => self.child_watches.remove(&r.path, conn),
                    watcher_type::DATA => self.data_watches.remove(&r.path, conn),
                    _ => {
                        let c = self.child_watches.remove(&r.path, conn);
                        let d = self.data_watches.remove(&r.path, conn);
                        c || d
                    }
                };
                let err = if removed {
                    0
                } else {
                    ErrorCode::NoWatcher as i32
                };
                self.reply(conn, xid, err, Response::Empty);
            }
            Request::AddWatch(r) => {
                match r.mode {
                    add_watch_mode::PERSISTENT => {
                        self.data_watches.add(&r.path, conn, watch::PERSISTENT);
                        self.child_watches.add(&r.path, conn, watch::PERSISTENT);
                    }
                    add_watch_mode::PERSISTENT_RECURSIVE => {
                        // 3.8's DataTree.addWatch registers the mode in both tables. A recursive
                        // watch never fires NodeChildrenChanged, and in the child table it
                        // replaces a one-shot getChildren watch of the same connection on the
                        // same path (ZOOKEEPER-4466), which then never fires: observed on 3.8.
                        self.data_watches
                            .add(&r.path, conn, watch::PERSISTENT_RECURSIVE);
                        self.child_watches
                            .add(&r.path, conn, watch::PERSISTENT_RECURSIVE);
                    }
                    _ => return self.reply_err(conn, xid, ErrorCode::MarshallingError),
                }
                self.reply(conn, xid, 0, Response::Error(0));
            }
            Request::SetWatches(r) => {
                self.set_watches(
                    conn,
                    r.relative_zxid,
                    &r.data_watches,
                    &r.exist_watches,
                    &r.child_watches,
                    &[],
                    &[],
                );
                self.reply(conn, xid, 0, Response::Empty);
            }
            Request::SetWatches2(r) => {
                self.set_watches(
                    conn,
                    r.relative_zxid,
                    &r.data_watches,
                    &r.exist_watches,
                    &r.child_watches,
                    &r.persistent_watches,
                    &r.persistent_recursive_watches,
                );
                self.reply(conn, xid, 0, Response::Empty);
            }
            Request::Auth(p) => {
                let id = match p.scheme.as_str() {
                    "digest" => Some(Id {
                        scheme: "digest".into(),
                        id: acl::digest_id(&String::from_utf8_lossy(&p.auth)),
                    }),
                    "ip" => self
                        .conns
                        .get(&conn)
                        .and_then(|c| c.peer_ip.clone())
                        .map(|ip| Id {
                            scheme: "ip".into(),
                            id: ip,
                        }),
                    _ => None,
                };
                // Apache answers auth with zxid 0, outside the pipeline.
                let header = |err| ReplyHeader { xid, zxid: 0, err };
                // DigestAuthenticationProvider: the super digest adds `super:` beside the id.
                let is_super = id.as_ref().is_some_and(|id| {
                    id.scheme == "digest" && self.config.super_digest.as_ref() == Some(&id.id)
                });
                match id {
                    Some(id) => {
                        if let Some(c) = self.conns.get_mut(&conn) {
                            if is_super && !c.auth.contains(&acl::super_id()) {
                                c.auth.push(acl::super_id());
                            }
                            if id.scheme != "ip" && !c.auth.contains(&id) {
                                c.auth.push(id);
                            }
                        }
                        self.push(
                            conn,
                            Outbound::Reply {
                                header: header(0),
                                body: Response::Empty,
                            },
                        );
                    }
                    None => {
                        self.push(
                            conn,
                            Outbound::Reply {
                                header: header(ErrorCode::AuthFailed as i32),
                                body: Response::Empty,
                            },
                        );
                        self.detach(conn);
                        self.push(conn, Outbound::Close);
                    }
                }
            }
            Request::Sasl(_) => {
                // A standalone 3.8 server without a JAAS login has no SASL server on the
                // connection: the NullPointerException is caught and it answers err 0 with a
                // SetSASLResponse whose token is null. A null buffer is the int -1 on the wire,
                // which is exactly what ErrorResponse{-1} encodes.
                let header = ReplyHeader {
                    xid,
                    zxid: 0,
                    err: 0,
                };
                self.push(
                    conn,
                    Outbound::Reply {
                        header,
                        body: Response::Error(-1),
                    },
                );
            }
            Request::GetEphemerals { prefix_path } => {
                let all = self.tree.ephemerals_of(session);
                let trimmed = java_trim(&prefix_path);
                let list = if trimmed.is_empty() || trimmed == "/" {
                    all
                } else {
                    all.into_iter()
                        .filter(|p| p.starts_with(&prefix_path))
                        .collect()
                };
                self.reply(conn, xid, 0, Response::Ephemerals(list));
            }
            Request::GetAllChildrenNumber { path } => {
                let auth = self.auth_info(conn);
                let Some(node) = self.tree.get(&path) else {
                    return self.reply_err(conn, xid, ErrorCode::NoNode);
                };
                if let Err(e) = acl::check(node.acl(), zkit_proto::op::perms::READ, &auth) {
                    return self.reply_err(conn, xid, e);
                }
                let n = i32::try_from(self.tree.descendant_count(&path)).unwrap_or(i32::MAX);
                self.reply(conn, xid, 0, Response::AllChildrenNumber(n));
            }
            Request::WhoAmI => {
                let infos = self
                    .auth_info(conn)
                    .iter()
                    .map(|id| ClientInfo {
                        auth_scheme: id.scheme.clone(),
                        user: acl::user_of(id),
                    })
                    .collect();
                self.reply(conn, xid, 0, Response::WhoAmI(infos));
            }
        }
    }

    fn get_data(
        &mut self,
        conn: ConnId,
        path: &str,
        watch: bool,
    ) -> Result<(Option<Vec<u8>>, Stat), ErrorCode> {
        let auth = self.auth_info(conn);
        let n = self.tree.get(path).ok_or(ErrorCode::NoNode)?;
        acl::check(n.acl(), zkit_proto::op::perms::READ, &auth)?;
        let out = (
            n.data().map(<[u8]>::to_vec),
            n.stat(self.config.extended_types),
        );
        if watch {
            self.data_watches.add(path, conn, watch::STANDARD);
        }
        Ok(out)
    }

    fn get_children(
        &mut self,
        conn: ConnId,
        path: &str,
        watch: bool,
    ) -> Result<(Vec<String>, Stat), ErrorCode> {
        let auth = self.auth_info(conn);
        let n = self.tree.get(path).ok_or(ErrorCode::NoNode)?;
        acl::check(n.acl(), zkit_proto::op::perms::READ, &auth)?;
        let out = (
            n.children().into_iter().map(str::to_owned).collect(),
            n.stat(self.config.extended_types),
        );
        if watch {
            self.child_watches.add(path, conn, watch::STANDARD);
        }
        Ok(out)
    }

    /// `DataTree.setWatches`: re-registration after reconnect; events for what changed since
    /// `relative_zxid` are queued immediately (before the reply).
    #[allow(clippy::too_many_arguments)]
    fn set_watches(
        &mut self,
        conn: ConnId,
        relative_zxid: i64,
        data: &[String],
        exist: &[String],
        child: &[String],
        persistent: &[String],
        recursive: &[String],
    ) {
        for path in data {
            match self.tree.get(path) {
                None => self.push(
                    conn,
                    Outbound::Event {
                        zxid: -1,
                        event: event(event_type::NODE_DELETED, path),
                    },
                ),
                Some(n) if n.mzxid > relative_zxid => self.push(
                    conn,
                    Outbound::Event {
                        zxid: -1,
                        event: event(event_type::NODE_DATA_CHANGED, path),
                    },
                ),
                Some(_) => self.data_watches.add(path, conn, watch::STANDARD),
            }
        }
        for path in exist {
            if self.tree.get(path).is_some() {
                self.push(
                    conn,
                    Outbound::Event {
                        zxid: -1,
                        event: event(event_type::NODE_CREATED, path),
                    },
                );
            } else {
                self.data_watches.add(path, conn, watch::STANDARD);
            }
        }
        for path in child {
            match self.tree.get(path) {
                None => self.push(
                    conn,
                    Outbound::Event {
                        zxid: -1,
                        event: event(event_type::NODE_DELETED, path),
                    },
                ),
                Some(n) if n.pzxid > relative_zxid => self.push(
                    conn,
                    Outbound::Event {
                        zxid: -1,
                        event: event(event_type::NODE_CHILDREN_CHANGED, path),
                    },
                ),
                Some(_) => self.child_watches.add(path, conn, watch::STANDARD),
            }
        }
        for path in persistent {
            self.child_watches.add(path, conn, watch::PERSISTENT);
            self.data_watches.add(path, conn, watch::PERSISTENT);
        }
        for path in recursive {
            // As addWatch: both tables (DataTree.setWatches calls addWatch).
            self.data_watches
                .add(path, conn, watch::PERSISTENT_RECURSIVE);
            self.child_watches
                .add(path, conn, watch::PERSISTENT_RECURSIVE);
        }
    }

    /// Preps with `f`; logs and applies the txn (or an error txn: failed writes consume a
    /// zxid in Apache); returns the outcome of the op or the error.
    fn prep_commit(
        &mut self,
        now: i64,
        conn: ConnId,
        session: i64,
        f: impl FnOnce(&mut Overlay<'_>) -> Result<TxnOp, ErrorCode>,
    ) -> Result<OpOutcome, i32> {
        let auth = self.auth_info(conn);
        let prepped = f(&mut Overlay::new(&self.tree, session, &auth));
        let zxid = self.next_zxid();
        let op = match &prepped {
            Ok(op) => op.clone(),
            Err(e) => TxnOp::Error { err: *e as i32 },
        };
        let mut outcomes = self.commit(Txn {
            zxid,
            session,
            time: now,
            op,
        });
        match prepped {
            Err(e) => Err(e as i32),
            Ok(_) => match outcomes.pop() {
                Some(o) if o.err == 0 => Ok(o),
                Some(o) => Err(o.err),
                None => Err(ErrorCode::SystemError as i32),
            },
        }
    }

    fn write(
        &mut self,
        now: i64,
        conn: ConnId,
        xid: i32,
        session: i64,
        kind: WriteKind,
        f: impl FnOnce(&mut Overlay<'_>) -> Result<TxnOp, ErrorCode>,
    ) {
        match self.prep_commit(now, conn, session, f) {
            Err(e) => self.reply(conn, xid, e, Response::Empty),
            Ok(o) => {
                let stat = o.stat.unwrap_or_default();
                let body = match kind {
                    WriteKind::Create => Response::Create { path: o.path },
                    WriteKind::Create2 => Response::Create2 { path: o.path, stat },
                    WriteKind::Delete | WriteKind::Check => Response::Empty,
                    WriteKind::SetData | WriteKind::SetAcl => Response::Stat(stat),
                };
                self.reply(conn, xid, 0, body);
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn write_create(
        &mut self,
        now: i64,
        conn: ConnId,
        xid: i32,
        session: i64,
        op: CreateOp,
        path: String,
        data: Option<Vec<u8>>,
        acl_list: Vec<zkit_proto::Acl>,
        flags: i32,
    ) {
        let kind = if op == CreateOp::Create {
            WriteKind::Create
        } else {
            WriteKind::Create2
        };
        self.write(now, conn, xid, session, kind, |o| {
            o.create(op, &path, data.as_deref(), &acl_list, flags)
        });
    }

    /// multi (14): every sub-op prepped against the overlay first; all or nothing; one zxid.
    fn multi(&mut self, now: i64, conn: ConnId, xid: i32, session: i64, ops: Vec<MultiOp>) {
        let auth = self.auth_info(conn);
        let mut failed = None;
        let mut txn_ops = Vec::with_capacity(ops.len());
        {
            let mut overlay = Overlay::new(&self.tree, session, &auth);
            for (i, op) in ops.iter().enumerate() {
                let r = match op {
                    MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r) => {
                        let kind = multi_create_kind(r.flags, -1);
                        overlay.create(kind, &r.path, r.data.as_deref(), &r.acl, r.flags)
                    }
                    MultiOp::CreateTtl(r) => {
                        let kind = multi_create_kind(r.flags, r.ttl);
                        overlay.create(kind, &r.path, r.data.as_deref(), &r.acl, r.flags)
                    }
                    MultiOp::Delete(r) => overlay.delete(&r.path, r.version),
                    MultiOp::SetData(r) => overlay.set_data(&r.path, r.data.as_deref(), r.version),
                    MultiOp::Check(r) => overlay.check(&r.path, r.version),
                };
                match r {
                    Ok(t) => txn_ops.push(t),
                    Err(e) => {
                        failed = Some((i, e));
                        break;
                    }
                }
            }
        }
        let zxid = self.next_zxid();
        let results = if let Some((at, e)) = failed {
            self.commit(Txn {
                zxid,
                session,
                time: now,
                op: TxnOp::Error { err: e as i32 },
            });
            (0..ops.len())
                .map(|i| MultiResult::Error {
                    err: match i.cmp(&at) {
                        std::cmp::Ordering::Less => 0,
                        std::cmp::Ordering::Equal => e as i32,
                        std::cmp::Ordering::Greater => ErrorCode::RuntimeInconsistency as i32,
                    },
                })
                .collect()
        } else {
            let outcomes = self.commit(Txn {
                zxid,
                session,
                time: now,
                op: TxnOp::Multi(txn_ops),
            });
            ops.iter()
                .zip(outcomes)
                .map(|(op, o)| {
                    if o.err != 0 {
                        return MultiResult::Error { err: o.err };
                    }
                    let stat = o.stat.unwrap_or_default();
                    match op {
                        MultiOp::Create(r) | MultiOp::Create2(r) | MultiOp::CreateContainer(r)
                            if multi_create_kind(r.flags, -1) == CreateOp::Create =>
                        {
                            MultiResult::Create { path: o.path }
                        }
                        MultiOp::CreateTtl(r)
                            if multi_create_kind(r.flags, r.ttl) == CreateOp::Create =>
                        {
                            MultiResult::Create { path: o.path }
                        }
                        MultiOp::Create(_)
                        | MultiOp::Create2(_)
                        | MultiOp::CreateContainer(_)
                        | MultiOp::CreateTtl(_) => MultiResult::Create2 { path: o.path, stat },
                        MultiOp::Delete(_) => MultiResult::Delete,
                        MultiOp::SetData(_) => MultiResult::SetData { stat },
                        MultiOp::Check(_) => MultiResult::Check,
                    }
                })
                .collect()
        };
        self.reply(conn, xid, 0, Response::Multi(results));
    }

    /// A request whose op code `op` is unknown or whose body did not decode: answered with the
    /// given error code. For Unimplemented this is Apache's `UnimplementedRequestProcessor`:
    /// a reply with zxid -1, then the connection is closed. A write ([`OpCode::is_write`])
    /// is logged as an error txn first and so consumes a zxid, as in Apache, whose
    /// `PrepRequestProcessor` gives the request its txn header before reading the body.
    ///
    /// [`OpCode::is_write`]: zkit_proto::OpCode::is_write
    pub fn reject(&mut self, now: i64, conn: ConnId, xid: i32, op: i32, err: ErrorCode) {
        let Some(session) = self.live_session(now, conn, true) else {
            return;
        };
        if err != ErrorCode::Unimplemented
            && zkit_proto::OpCode::from_i32(op).is_some_and(zkit_proto::OpCode::is_write)
        {
            return self.write(now, conn, xid, session, WriteKind::Delete, |_| Err(err));
        }
        if err == ErrorCode::Unimplemented {
            let header = ReplyHeader {
                xid,
                zxid: -1,
                err: err as i32,
            };
            self.push(
                conn,
                Outbound::Reply {
                    header,
                    body: Response::Empty,
                },
            );
            self.detach(conn);
            self.push(conn, Outbound::Close);
        } else {
            self.reply_err(conn, xid, err);
        }
    }

    /// The connection closed (by the client or the shell). Its watches die; its session lives on
    /// until it expires or a new connection reattaches to it.
    pub fn disconnect(&mut self, _now: i64, conn: ConnId) {
        self.detach(conn);
        self.conns.remove(&conn);
    }

    /// Time passes: expire sessions, run the container/TTL reaper when due.
    pub fn tick(&mut self, now: i64) {
        let tick = i64::from(self.config.tick_time_ms);
        let mut expired = Vec::new();
        for (id, s) in self.sessions.iter_mut() {
            let deadline = *s.deadline.get_or_insert_with(|| {
                session::round_to_next_interval(now.saturating_add(i64::from(s.timeout_ms)), tick)
            });
            if deadline <= now {
                expired.push(*id);
            }
        }
        for id in expired {
            self.expire(now, id);
        }
        if now >= self.next_reap {
            let interval = self.config.container_check_interval_ms.max(1) as i64;
            while self.next_reap <= now {
                self.next_reap = self.next_reap.saturating_add(interval);
            }
            self.reap(now);
        }
    }

    /// Expires `session`: a closeSession txn (deleting its ephemerals, firing watches), then
    /// the attached connections are closed.
    fn expire(&mut self, now: i64, session: i64) {
        let txn = Txn {
            zxid: self.next_zxid(),
            session,
            time: now,
            op: TxnOp::CloseSession,
        };
        self.commit(txn);
        let conns: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.session == Some(session))
            .map(|(id, _)| *id)
            .collect();
        for conn in conns {
            self.detach(conn);
            self.push(conn, Outbound::Close);
        }
    }

    /// `ContainerManager`: containers that had a child and are empty, TTL nodes that are empty
    /// and older (by mtime) than their ttl; each deleted by its own deleteContainer txn.
    fn reap(&mut self, now: i64) {
        let mut candidates = std::collections::BTreeSet::new();
        for path in self.tree.containers() {
            if let Some(n) = self.tree.get(path) {
                // Stored cversion > 0: it has had a child, so a fresh container survives.
                if n.num_children() == 0 && n.cversion > 0 {
                    candidates.insert(path.clone());
                }
            }
        }
        for path in self.tree.ttls() {
            if let Some(n) = self.tree.get(path) {
                if let tree::EphemeralType::Ttl(ttl) =
                    tree::EphemeralType::of(n.ephemeral_owner, self.config.extended_types)
                {
                    if n.num_children() == 0 && ttl != 0 && now.saturating_sub(n.mtime) > ttl {
                        candidates.insert(path.clone());
                    }
                }
            }
        }
        for path in candidates {
            let prepped = Overlay::new(&self.tree, 0, &[]).delete_container(&path);
            if let Ok(op) = prepped {
                let txn = Txn {
                    zxid: self.next_zxid(),
                    session: 0,
                    time: now,
                    op,
                };
                self.commit(txn);
            }
        }
    }

    /// Takes what the shell must do now.
    pub fn ready(&mut self) -> Ready {
        std::mem::take(&mut self.out)
    }

    // ----- apply -----

    /// Applies, then queues the txn for the WAL.
    fn commit(&mut self, txn: Txn) -> Vec<OpOutcome> {
        let outcomes = self.apply_txn(&txn);
        self.out.txns.push(txn);
        outcomes
    }

    /// Applies a txn (recovery: WAL replay). Live traffic goes through the same function.
    /// Watch events it triggers are queued for [`Core::ready`]. A txn whose zxid is not above
    /// [`Core::last_zxid`] is ignored (already applied), so replaying a log that overlaps a
    /// snapshot is safe. A txn that does not fit the tree (corrupt log) changes nothing for
    /// that op and never panics.
    pub fn apply(&mut self, txn: &Txn) {
        self.apply_txn(txn);
    }

    fn apply_txn(&mut self, txn: &Txn) -> Vec<OpOutcome> {
        if txn.zxid <= self.last_zxid {
            // Already in the state (a WAL segment overlapping the snapshot it was replayed
            // onto): applying it again would double-count, so replay is idempotent instead.
            return Vec::new();
        }
        self.last_zxid = txn.zxid;
        match &txn.op {
            TxnOp::Multi(ops) => ops.iter().map(|op| self.apply_op(txn, op)).collect(),
            op => vec![self.apply_op(txn, op)],
        }
    }

    fn apply_op(&mut self, txn: &Txn, op: &TxnOp) -> OpOutcome {
        let zxid = txn.zxid;
        match op {
            TxnOp::CreateSession { timeout_ms, passwd } => {
                self.sessions.insert(
                    txn.session,
                    Session {
                        timeout_ms: *timeout_ms,
                        passwd: passwd.clone(),
                        deadline: None,
                    },
                );
                OpOutcome::ok("", None)
            }
            TxnOp::CloseSession => {
                for path in self.tree.ephemerals_of(txn.session) {
                    let acl = self.acl_of(&path);
                    if self.tree.delete(&path, zxid).is_ok() {
                        self.fire_deleted(&path, &acl);
                    }
                }
                self.sessions.remove(&txn.session);
                OpOutcome::ok("", None)
            }
            TxnOp::Create {
                path,
                data,
                acl,
                ephemeral_owner,
                parent_cversion,
            } => match self.tree.create(
                path,
                data.as_deref(),
                acl,
                *ephemeral_owner,
                *parent_cversion,
                zxid,
                txn.time,
            ) {
                Ok(stat) => {
                    self.fire(path, event_type::NODE_CREATED, true, false, acl);
                    self.fire_parent_children_changed(path);
                    OpOutcome::ok(path, Some(stat))
                }
                Err(e) => OpOutcome::err(e),
            },
            TxnOp::Delete { path } | TxnOp::DeleteContainer { path } => {
                let acl = self.acl_of(path);
                match self.tree.delete(path, zxid) {
                    Ok(()) => {
                        self.fire_deleted(path, &acl);
                        OpOutcome::ok(path, None)
                    }
                    Err(e) => OpOutcome::err(e),
                }
            }
            TxnOp::SetData {
                path,
                data,
                version,
            } => {
                match self
                    .tree
                    .set_data(path, data.as_deref(), *version, zxid, txn.time)
                {
                    Ok(stat) => {
                        let acl = self.acl_of(path);
                        self.fire(path, event_type::NODE_DATA_CHANGED, true, false, &acl);
                        OpOutcome::ok(path, Some(stat))
                    }
                    Err(e) => OpOutcome::err(e),
                }
            }
            TxnOp::SetAcl { path, acl, version } => match self.tree.set_acl(path, acl, *version) {
                Ok(stat) => OpOutcome::ok(path, Some(stat)),
                Err(e) => OpOutcome::err(e),
            },
            TxnOp::Check { path, .. } => match self.tree.stat(path) {
                Some(stat) => OpOutcome::ok(path, Some(stat)),
                None => OpOutcome::err(ErrorCode::NoNode),
            },
            TxnOp::Multi(ops) => {
                // Never produced by prep (multi does not nest); replayed flat if a log has it.
                for op in ops {
                    self.apply_op(txn, op);
                }
                OpOutcome::ok("", None)
            }
            TxnOp::Error { err } => OpOutcome {
                err: *err,
                path: String::new(),
                stat: None,
            },
        }
    }

    /// The ACL of `path` (empty when absent), captured for watch delivery. Shared with the
    /// tree's ACL table: no copy of the list.
    fn acl_of(&self, path: &str) -> std::sync::Arc<[zkit_proto::Acl]> {
        self.tree
            .get(path)
            .map_or_else(|| std::sync::Arc::from(Vec::new()), |n| n.acl_shared())
    }

    /// Fires `event_type` on `path` in the data and/or child table, one event per connection.
    /// `acl` is the node's ACL at the trigger (for NodeDeleted, before the delete): only
    /// connections that may READ it get the event. The watch is consumed either way, as in
    /// Apache's `WatchManager.triggerWatch` + `ServerCnxn.process(event, acl)`
    /// (CVE-2024-23944, ZOOKEEPER-4799; in Debian's 3.8.0-11+deb12u2 too).
    fn fire(&mut self, path: &str, kind: i32, data: bool, child: bool, acl: &[zkit_proto::Acl]) {
        let mut conns = std::collections::BTreeSet::new();
        let children_changed = kind == event_type::NODE_CHILDREN_CHANGED;
        if data {
            conns.extend(self.data_watches.trigger(path, children_changed));
        }
        if child {
            conns.extend(self.child_watches.trigger(path, children_changed));
        }
        let conns = conns
            .into_iter()
            .filter(|c| acl::check(acl, zkit_proto::op::perms::READ, &self.auth_info(*c)).is_ok())
            .collect();
        self.emit(conns, kind, path);
    }

    /// `DataTree.deleteNode`'s triggers: NodeDeleted to data and child watchers of the path
    /// (once per connection), NodeChildrenChanged to child watchers of the parent.
    fn fire_deleted(&mut self, path: &str, acl: &[zkit_proto::Acl]) {
        self.fire(path, event_type::NODE_DELETED, true, true, acl);
        self.fire_parent_children_changed(path);
    }

    /// NodeChildrenChanged to the child watchers of `path`'s parent (after a create or delete).
    fn fire_parent_children_changed(&mut self, path: &str) {
        if let Some(parent) = path::parent_of(path) {
            let parent_acl = self.acl_of(parent);
            self.fire(
                parent,
                event_type::NODE_CHILDREN_CHANGED,
                false,
                true,
                &parent_acl,
            );
        }
    }

    fn emit(&mut self, conns: std::collections::BTreeSet<ConnId>, event_type: i32, path: &str) {
        for conn in conns {
            if self.conns.contains_key(&conn) {
                // zxid -1: ZooKeeper up to 3.8 sends notifications with zxid -1.
                self.push(
                    conn,
                    Outbound::Event {
                        zxid: -1,
                        event: event(event_type, path),
                    },
                );
            }
        }
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        let mut paths: std::collections::BTreeSet<&String> = self.data_watches.paths().collect();
        paths.extend(self.child_watches.paths());
        Stats {
            // Apache's DataTree maps both "" and "/" to the root and counts map entries, so a
            // fresh server reports 5 nodes; we match that count.
            node_count: self.tree.len() as u64 + 1,
            approximate_data_size: self.tree.approximate_data_size(),
            sessions: self.sessions.len() as u64,
            ephemerals: self.tree.ephemeral_count() as u64,
            watches: (self.data_watches.count() + self.child_watches.count()) as u64,
            watched_paths: paths.len() as u64,
            last_zxid: self.last_zxid,
        }
    }
}
