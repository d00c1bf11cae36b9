//! The one apply path: every state change is a [`Txn`] applied here, live (`commit`: apply,
//! then queue the txn for the WAL) and on recovery ([`Core::apply`]), so a replayed log
//! rebuilds exactly the state that answered the clients. Applying fires the watches the
//! change triggers, filtered by the node's ACL, and queues the events.

use std::collections::BTreeSet;
use std::sync::Arc;

use zkit_proto::op::{event_type, keeper_state, perms};
use zkit_proto::{Acl, ErrorCode, Stat, WatcherEvent};

use crate::acl;
use crate::conn::ConnId;
use crate::path;
use crate::session::Session;
use crate::{Core, Outbound, Txn, TxnOp};

/// A watch notification for `path`, in the state the server sends (SyncConnected).
pub(super) fn event(event_type: i32, path: &str) -> WatcherEvent {
    WatcherEvent {
        event_type,
        state: keeper_state::SYNC_CONNECTED,
        path: path.to_owned(),
    }
}

/// The result of applying one (sub-)op.
#[derive(Debug, Clone)]
pub(super) struct OpOutcome {
    pub(super) err: i32,
    pub(super) path: String,
    pub(super) stat: Option<Stat>,
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

/// The outcomes of one txn: a lone op's, or a multi's sub-ops' in order.
#[derive(Debug)]
pub(super) enum Outcomes {
    /// The txn was already in the state (see [`Core::apply`]): nothing was applied.
    Skipped,
    /// A txn of one op.
    Lone(OpOutcome),
    /// A multi.
    Multi(Vec<OpOutcome>),
}

impl Outcomes {
    /// The last op's outcome (a lone op's own).
    pub(super) fn last(self) -> Option<OpOutcome> {
        match self {
            Outcomes::Skipped => None,
            Outcomes::Lone(o) => Some(o),
            Outcomes::Multi(mut v) => v.pop(),
        }
    }

    /// Every op's outcome, in order.
    pub(super) fn into_vec(self) -> Vec<OpOutcome> {
        match self {
            Outcomes::Skipped => Vec::new(),
            Outcomes::Lone(o) => vec![o],
            Outcomes::Multi(v) => v,
        }
    }
}

impl Core {
    /// Applies, then queues the txn for the WAL.
    pub(super) fn commit(&mut self, txn: Txn) -> Outcomes {
        let outcomes = self.apply_txn(&txn, true);
        self.out.txns.push(txn);
        outcomes
    }

    /// Applies a txn (recovery: WAL replay). Live traffic goes through the same function.
    /// Watch events it triggers are queued for [`Core::ready`]. A txn whose zxid is not above
    /// [`Core::last_zxid`] is ignored (already applied), so replaying a log that overlaps a
    /// snapshot is safe. A txn that does not fit the tree (corrupt log) changes nothing for
    /// that op and never panics.
    pub fn apply(&mut self, txn: &Txn) {
        self.apply_txn(txn, false);
    }

    /// Applies `txn`; `named`: the outcomes carry the ops' paths (for the replies of a live
    /// write; a replay has none to shape).
    fn apply_txn(&mut self, txn: &Txn, named: bool) -> Outcomes {
        if txn.zxid <= self.last_zxid {
            // Already in the state (a WAL segment overlapping the snapshot it was replayed
            // onto): applying it again would double-count, so replay is idempotent instead.
            return Outcomes::Skipped;
        }
        self.last_zxid = txn.zxid;
        match &txn.op {
            TxnOp::Multi(ops) => {
                Outcomes::Multi(ops.iter().map(|op| self.apply_op(txn, op, named)).collect())
            }
            op => Outcomes::Lone(self.apply_op(txn, op, named)),
        }
    }

    fn apply_op(&mut self, txn: &Txn, op: &TxnOp, named: bool) -> OpOutcome {
        let zxid = txn.zxid;
        // A replay shapes no reply: its outcomes go without the path (an empty one is no copy).
        let ok =
            |path: &str, stat: Option<Stat>| OpOutcome::ok(if named { path } else { "" }, stat);
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
                    let acl = self.acl_if_watched(&path);
                    if self.tree.delete(&path, zxid).is_ok() {
                        self.fire_deleted(&path, acl.as_deref());
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
                    self.fire(path, event_type::NODE_CREATED, true, false, Some(acl));
                    self.fire_parent_children_changed(path);
                    ok(path, Some(stat))
                }
                Err(e) => OpOutcome::err(e),
            },
            TxnOp::Delete { path } | TxnOp::DeleteContainer { path } => {
                let acl = self.acl_if_watched(path);
                match self.tree.delete(path, zxid) {
                    Ok(()) => {
                        self.fire_deleted(path, acl.as_deref());
                        ok(path, None)
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
                        self.fire(path, event_type::NODE_DATA_CHANGED, true, false, None);
                        ok(path, Some(stat))
                    }
                    Err(e) => OpOutcome::err(e),
                }
            }
            TxnOp::SetAcl { path, acl, version } => match self.tree.set_acl(path, acl, *version) {
                Ok(stat) => ok(path, Some(stat)),
                Err(e) => OpOutcome::err(e),
            },
            TxnOp::Check { path, .. } => match self.tree.stat(path) {
                Some(stat) => ok(path, Some(stat)),
                None => OpOutcome::err(ErrorCode::NoNode),
            },
            TxnOp::Multi(ops) => {
                // Never produced by prep (multi does not nest); replayed flat if a log has it.
                for op in ops {
                    self.apply_op(txn, op, named);
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
    pub(super) fn acl_of(&self, path: &str) -> Arc<[Acl]> {
        self.tree
            .get(path)
            .map_or_else(|| Arc::from(Vec::new()), |n| n.acl_shared())
    }

    /// The ACL of `path` when a watch could fire on it (see [`WatchTable::may_match`]), read
    /// before a delete for the NodeDeleted events; `None` saves the lookup when none can.
    fn acl_if_watched(&self, path: &str) -> Option<Arc<[Acl]>> {
        (self.data_watches.may_match(path) || self.child_watches.may_match(path))
            .then(|| self.acl_of(path))
    }

    /// Fires `event_type` on `path` in the data and/or child table, one event per connection.
    /// `acl` is the node's ACL at the trigger (for NodeDeleted, before the delete; `None`:
    /// read from the tree now, and only when a watch fires): only connections that may READ
    /// it get the event. The watch is consumed either way, as in Apache's
    /// `WatchManager.triggerWatch` + `ServerCnxn.process(event, acl)` (CVE-2024-23944,
    /// ZOOKEEPER-4799; in Debian's 3.8.0-11+deb12u2 too).
    fn fire(&mut self, path: &str, kind: i32, data: bool, child: bool, acl: Option<&[Acl]>) {
        // Most writes meet no watch at all: then there is nothing to collect or consume.
        let data = data && !self.data_watches.is_empty();
        let child = child && !self.child_watches.is_empty();
        if !data && !child {
            return;
        }
        let mut conns = BTreeSet::new();
        let children_changed = kind == event_type::NODE_CHILDREN_CHANGED;
        if data {
            self.data_watches
                .trigger_into(path, children_changed, &mut conns);
        }
        if child {
            self.child_watches
                .trigger_into(path, children_changed, &mut conns);
        }
        if conns.is_empty() {
            return;
        }
        let read;
        let acl = match acl {
            Some(acl) => acl,
            None => {
                read = self.acl_of(path);
                &read
            }
        };
        let conns = conns
            .into_iter()
            .filter(|c| acl::check(acl, perms::READ, &self.auth_info(*c)).is_ok())
            .collect();
        self.emit(conns, kind, path);
    }

    /// `DataTree.deleteNode`'s triggers: NodeDeleted to data and child watchers of the path
    /// (once per connection), NodeChildrenChanged to child watchers of the parent.
    fn fire_deleted(&mut self, path: &str, acl: Option<&[Acl]>) {
        self.fire(path, event_type::NODE_DELETED, true, true, acl);
        self.fire_parent_children_changed(path);
    }

    /// NodeChildrenChanged to the child watchers of `path`'s parent (after a create or delete).
    fn fire_parent_children_changed(&mut self, path: &str) {
        if let Some(parent) = path::parent_of(path) {
            self.fire(parent, event_type::NODE_CHILDREN_CHANGED, false, true, None);
        }
    }

    fn emit(&mut self, conns: BTreeSet<ConnId>, event_type: i32, path: &str) {
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
}
