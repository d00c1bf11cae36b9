//! Watch requests: addWatch, checkWatches, removeWatches and setWatches(2) (the re-registration
//! a client sends after reconnecting). None of them is a txn; the tables live in
//! [`crate::watch`], and firing is `apply`'s business.

use zkit_proto::op::{add_watch_mode, event_type, watcher_type};
use zkit_proto::{AddWatchRequest, ErrorCode, Response, SetWatches, SetWatches2, WatchesRequest};

use super::apply::event;
use crate::conn::ConnId;
use crate::watch;
use crate::{Core, Outbound};

/// Whether `watcher_type` is one 3.8's `WatcherType.fromInt` knows (1..3); it throws on any
/// other, which `FinalRequestProcessor` turns into MarshallingError.
fn known_watcher_type(watcher_type: i32) -> bool {
    (1..=3).contains(&watcher_type)
}

impl Core {
    /// checkWatches (17).
    pub(super) fn check_watches(&mut self, conn: ConnId, xid: i32, r: WatchesRequest) {
        if !known_watcher_type(r.watcher_type) {
            return self.reply_err(conn, xid, ErrorCode::MarshallingError);
        }
        // A non-empty path without any '/' ("bad"): 3.8's WatchManager.containsWatcher walks
        // it with PathParentIterator, whose first next() computes the parent with
        // `path.substring(0, path.lastIndexOf('/'))` and throws; FinalRequestProcessor
        // answers the exception with MarshallingError. ("" and "a/b" get NoWatcher.)
        if !r.path.is_empty() && !r.path.contains('/') {
            return self.reply_err(conn, xid, ErrorCode::MarshallingError);
        }
        // 3.8 quirk kept on purpose: containsWatcher answers for the path, not for
        // this connection's membership (see WatchTable::contains_any).
        let found = match r.watcher_type {
            watcher_type::CHILDREN => self.child_watches.contains_any(&r.path),
            watcher_type::DATA => self.data_watches.contains_any(&r.path),
            _ => {
                self.child_watches.contains_any(&r.path) || self.data_watches.contains_any(&r.path)
            }
        };
        let err = if found {
            0
        } else {
            ErrorCode::NoWatcher as i32
        };
        self.reply(conn, xid, err, Response::Empty);
    }

    /// removeWatches (18). The server removes and answers; the DataWatchRemoved /
    /// ChildWatchRemoved events are synthesised by the client library (ZKWatchManager), not
    /// sent by Apache.
    pub(super) fn remove_watches(&mut self, conn: ConnId, xid: i32, r: WatchesRequest) {
        if !known_watcher_type(r.watcher_type) {
            return self.reply_err(conn, xid, ErrorCode::MarshallingError);
        }
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

    /// addWatch (106): PERSISTENT or PERSISTENT_RECURSIVE, registered in both tables.
    pub(super) fn add_watch(&mut self, conn: ConnId, xid: i32, r: AddWatchRequest) {
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

    /// setWatches (101).
    pub(super) fn set_watches_request(&mut self, conn: ConnId, xid: i32, r: SetWatches) {
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

    /// setWatches2 (105): setWatches plus the persistent and persistent-recursive watches.
    pub(super) fn set_watches2_request(&mut self, conn: ConnId, xid: i32, r: SetWatches2) {
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

    /// `DataTree.setWatches`: re-registration after reconnect; events for what changed since
    /// `relative_zxid` are queued immediately (before the reply).
    /// Queues to `conn` the event `kind` on `path` that a watch re-set after a reconnect
    /// missed (zxid -1, as Apache sends it instead of setting the watch).
    fn push_missed(&mut self, conn: ConnId, kind: i32, path: &str) {
        self.push(
            conn,
            Outbound::Event {
                zxid: -1,
                event: event(kind, path),
            },
        );
    }

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
                None => self.push_missed(conn, event_type::NODE_DELETED, path),
                Some(n) if n.mzxid > relative_zxid => {
                    self.push_missed(conn, event_type::NODE_DATA_CHANGED, path)
                }
                Some(_) => self.data_watches.add(path, conn, watch::STANDARD),
            }
        }
        for path in exist {
            if self.tree.get(path).is_some() {
                self.push_missed(conn, event_type::NODE_CREATED, path);
            } else {
                self.data_watches.add(path, conn, watch::STANDARD);
            }
        }
        for path in child {
            match self.tree.get(path) {
                None => self.push_missed(conn, event_type::NODE_DELETED, path),
                Some(n) if n.pzxid > relative_zxid => {
                    self.push_missed(conn, event_type::NODE_CHILDREN_CHANGED, path)
                }
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
}
