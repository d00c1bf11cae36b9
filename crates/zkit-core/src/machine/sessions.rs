//! Sessions (Apache's `ZooKeeperServer.processConnectRequest` and `SessionTrackerImpl`): the
//! handshake, the live-session check every request passes, closeSession, disconnect and expiry.

use zkit_proto::{ConnectRequest, ConnectResponse, Response};

use crate::conn::{Conn, ConnId};
use crate::session;
use crate::tree;
use crate::{Core, Outbound, Txn, TxnOp};

impl Core {
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
            self.attach(conn, id, timeout, fresh_passwd.to_vec(), read_only);
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
            Some(passwd) => self.attach(conn, req.session_id, timeout, passwd, read_only),
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

    /// Commits the txn that closes `session` at `now`.
    fn commit_close(&mut self, now: i64, session: i64) {
        let txn = Txn {
            zxid: self.next_zxid(),
            session,
            time: now,
            op: TxnOp::CloseSession,
        };
        self.commit(txn);
    }

    /// Puts `conn` on `session` (negotiated `timeout`) and queues the ConnectResponse that
    /// says so, with the session's password.
    fn attach(
        &mut self,
        conn: ConnId,
        session: i64,
        timeout: i32,
        passwd: Vec<u8>,
        read_only: Option<bool>,
    ) {
        let c = self.conns.entry(conn).or_default();
        c.session = Some(session);
        c.timeout_ms = timeout;
        self.push(
            conn,
            Outbound::Connect {
                response: ConnectResponse {
                    protocol_version: 0,
                    time_out: timeout,
                    session_id: session,
                    passwd,
                    read_only,
                },
                close_after: false,
            },
        );
    }

    /// The live session of `conn`, touched (unless `touch` is false). `None` (and a Close
    /// queued) when the connection has no live session: Apache drops such a request
    /// (`MissingSessionException`) and the connection is closed by the expiry.
    pub(super) fn live_session(&mut self, now: i64, conn: ConnId, touch: bool) -> Option<i64> {
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

    /// closeSession (-11): the txn (deleting the session's ephemerals, firing their watches),
    /// the reply, then the connection is closed.
    pub(super) fn close_session(&mut self, now: i64, conn: ConnId, xid: i32, session: i64) {
        self.commit_close(now, session);
        self.reply(conn, xid, 0, Response::Empty);
        self.detach(conn);
        self.push(conn, Outbound::Close);
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
        self.commit_close(now, session);
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
}
