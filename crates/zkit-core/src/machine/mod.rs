//! The `impl Core` blocks, one file per concern, and what they share: construction, the
//! read-only accessors the shell uses, the reply helpers and [`Core::handle`], which only
//! dispatches a request to the file that answers it.
//!
//! - `sessions`: the handshake, the live-session check every request passes, closeSession,
//!   disconnect, expiry by `tick`.
//! - `reads`: exists, getData, getChildren(2), getACL, getAllChildrenNumber, getEphemerals,
//!   sync, multiRead.
//! - `writes`: prep → txn → apply for every write, multi, and the error txn a failed write
//!   logs.
//! - `watches`: addWatch, checkWatches, removeWatches, setWatches(2).
//! - `auth`: auth packets, sasl, whoAmI, and the ids a connection is authenticated as.
//! - `reaper`: containers and TTL nodes (`ContainerManager`).
//! - `apply`: the one apply path (live and replay) and watch firing.
//! - `snapshot`: capture, restore and the text dump.

mod apply;
mod auth;
mod reads;
mod reaper;
mod sessions;
mod snapshot;
mod watches;
mod writes;

use std::collections::BTreeMap;

use zkit_proto::{ErrorCode, ReplyHeader, Request, Response};

use crate::conn::ConnId;
use crate::prep::CreateOp;
use crate::session;
use crate::tree::DataTree;
use crate::watch::WatchTable;
use crate::{Config, Core, Outbound, Ready, Stats};

impl Core {
    /// A fresh server state at `now` (ms since epoch; seeds session-id generation).
    pub fn new(config: Config, now: i64) -> Core {
        let tree = DataTree::with_hash_seed(config.extended_types, config.hash_seed);
        Core::with_tree(config, now, tree)
    }

    pub(crate) fn with_tree(config: Config, now: i64, tree: DataTree) -> Core {
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
        self.conns.entry(conn).or_default().set_peer_ip(ip);
    }

    /// Tells the core that `conn` presented a verified TLS client certificate whose subject
    /// is `subject` (the X.500 name as `X509AuthenticationProvider.getClientId` writes it):
    /// the connection is authenticated as `x509:<subject>`, and also as `super` when that is
    /// the configured `x509_super_user`, as Apache's provider does when the handshake ends.
    pub fn set_x509_identity(&mut self, conn: ConnId, subject: String) {
        let is_super = self.config.x509_super_user.as_ref() == Some(&subject);
        let c = self.conns.entry(conn).or_default();
        if is_super {
            c.add_auth(crate::acl::super_id());
        }
        c.add_auth(zkit_proto::Id {
            scheme: "x509".into(),
            id: subject,
        });
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

    /// Drops `conn`'s watches and detaches it from its session (it is being closed).
    fn detach(&mut self, conn: ConnId) {
        self.data_watches.remove_conn(conn);
        self.child_watches.remove_conn(conn);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.session = None;
        }
    }

    /// A decoded request on an established connection.
    pub fn handle(&mut self, now: i64, conn: ConnId, xid: i32, req: Request) {
        // auth and sasl are answered by Apache before the request pipeline: no touch.
        let touch = !matches!(req, Request::Auth(_) | Request::Sasl(_));
        let Some(session) = self.live_session(now, conn, touch) else {
            return;
        };
        match req {
            Request::Create(r) => self.create(now, conn, xid, session, CreateOp::Create, r),
            Request::Create2(r) => self.create(now, conn, xid, session, CreateOp::Create2, r),
            Request::CreateContainer(r) => {
                self.create(now, conn, xid, session, CreateOp::Container, r)
            }
            Request::CreateTtl(r) => self.create_ttl(now, conn, xid, session, r),
            Request::Delete(r) => self.delete(now, conn, xid, session, r),
            Request::DeleteContainer { .. } => self.delete_container(now, conn, xid, session),
            Request::SetData(r) => self.set_data(now, conn, xid, session, r),
            Request::SetAcl(r) => self.set_acl(now, conn, xid, session, r),
            Request::Check(r) => self.check(now, conn, xid, session, r),
            Request::Multi(ops) => self.multi(now, conn, xid, session, ops),
            Request::Reconfig(_) => self.reconfig(now, conn, xid, session),
            Request::CloseSession => self.close_session(now, conn, xid, session),
            Request::Exists(r) => self.exists(conn, xid, r),
            Request::GetData(r) => self.get_data_request(conn, xid, r),
            Request::GetChildren(r) => self.get_children_request(conn, xid, r, false),
            Request::GetChildren2(r) => self.get_children_request(conn, xid, r, true),
            Request::GetAcl { path } => self.get_acl(conn, xid, &path),
            Request::Sync { path } => self.reply(conn, xid, 0, Response::Sync { path }),
            Request::Ping => self.reply(conn, zkit_proto::op::xid::PING, 0, Response::Empty),
            Request::MultiRead(ops) => self.multi_read(conn, xid, ops),
            Request::CheckWatches(r) => self.check_watches(conn, xid, r),
            Request::RemoveWatches(r) => self.remove_watches(conn, xid, r),
            Request::AddWatch(r) => self.add_watch(conn, xid, r),
            Request::SetWatches(r) => self.set_watches_request(conn, xid, r),
            Request::SetWatches2(r) => self.set_watches2_request(conn, xid, r),
            Request::Auth(p) => self.auth(conn, xid, p),
            Request::Sasl(_) => self.sasl(conn, xid),
            Request::GetEphemerals { prefix_path } => {
                self.get_ephemerals(conn, xid, session, &prefix_path)
            }
            Request::GetAllChildrenNumber { path } => {
                self.get_all_children_number(conn, xid, &path)
            }
            Request::WhoAmI => self.who_am_i(conn, xid),
        }
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
            return self.failed_write(now, conn, xid, session, err);
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

    /// Takes what the shell must do now.
    pub fn ready(&mut self) -> Ready {
        std::mem::take(&mut self.out)
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
