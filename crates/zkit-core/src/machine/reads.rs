//! Reads: answered from the tree as it is, in pipeline order, without a txn (no zxid is
//! consumed). Each checks READ (getACL: READ or ADMIN) as Apache's `FinalRequestProcessor`
//! does; a watch is set only where Apache sets one (exists also on a missing node).

use zkit_proto::op::perms;
use zkit_proto::{ErrorCode, MultiReadOp, MultiReadResult, PathWatchRequest, Response, Stat};

use crate::acl;
use crate::conn::ConnId;
use crate::watch;
use crate::Core;

/// Java's `String.trim()`: strips chars <= ' ' at both ends.
fn java_trim(s: &str) -> &str {
    s.trim_matches(|c: char| c <= ' ')
}

impl Core {
    /// exists (3): a data watch is set even when the node is missing.
    pub(super) fn exists(&mut self, conn: ConnId, xid: i32, r: PathWatchRequest) {
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

    /// getData (4).
    pub(super) fn get_data_request(&mut self, conn: ConnId, xid: i32, r: PathWatchRequest) {
        match self.get_data(conn, &r.path, r.watch) {
            Ok((data, stat)) => self.reply(conn, xid, 0, Response::GetData { data, stat }),
            Err(e) => self.reply_err(conn, xid, e),
        }
    }

    /// getChildren (8), or getChildren2 (12) `with_stat`.
    pub(super) fn get_children_request(
        &mut self,
        conn: ConnId,
        xid: i32,
        r: PathWatchRequest,
        with_stat: bool,
    ) {
        match self.get_children(conn, &r.path, r.watch) {
            Ok((children, stat)) if with_stat => {
                self.reply(conn, xid, 0, Response::GetChildren2 { children, stat })
            }
            Ok((children, _)) => self.reply(conn, xid, 0, Response::GetChildren { children }),
            Err(e) => self.reply_err(conn, xid, e),
        }
    }

    /// getACL (6): READ or ADMIN.
    pub(super) fn get_acl(&mut self, conn: ConnId, xid: i32, path: &str) {
        let auth = self.auth_info(conn);
        match self.tree.get(path) {
            None => self.reply_err(conn, xid, ErrorCode::NoNode),
            Some(n) => {
                let acl = n.acl().to_vec();
                let stat = n.stat(self.config.extended_types);
                if let Err(e) = acl::check(&acl, perms::READ | perms::ADMIN, &auth) {
                    return self.reply_err(conn, xid, e);
                }
                // READ without ADMIN sees digest ids as `user:x` (ZOOKEEPER-1392).
                let acl = match acl::check(&acl, perms::ADMIN, &auth) {
                    Ok(()) => acl,
                    Err(_) => acl::redact(&acl),
                };
                self.reply(conn, xid, 0, Response::GetAcl { acl, stat });
            }
        }
    }

    /// multiRead (22): each sub-read answered on its own; a failed one is an error result.
    pub(super) fn multi_read(&mut self, conn: ConnId, xid: i32, ops: Vec<MultiReadOp>) {
        let results = ops
            .into_iter()
            .map(|op| match op {
                MultiReadOp::GetChildren(r) => match self.get_children(conn, &r.path, r.watch) {
                    Ok((children, _)) => MultiReadResult::GetChildren { children },
                    Err(e) => MultiReadResult::Error { err: e as i32 },
                },
                MultiReadOp::GetData(r) => match self.get_data(conn, &r.path, r.watch) {
                    Ok((data, stat)) => MultiReadResult::GetData { data, stat },
                    Err(e) => MultiReadResult::Error { err: e as i32 },
                },
            })
            .collect();
        self.reply(conn, xid, 0, Response::MultiRead(results));
    }

    /// getEphemerals (103): the session's ephemerals, all of them for a blank or "/" prefix.
    pub(super) fn get_ephemerals(&mut self, conn: ConnId, xid: i32, session: i64, prefix: &str) {
        let all = self.tree.ephemerals_of(session);
        let trimmed = java_trim(prefix);
        let list = if trimmed.is_empty() || trimmed == "/" {
            all
        } else {
            all.into_iter().filter(|p| p.starts_with(prefix)).collect()
        };
        self.reply(conn, xid, 0, Response::Ephemerals(list));
    }

    /// getAllChildrenNumber (104): READ on the node, then its descendant count.
    pub(super) fn get_all_children_number(&mut self, conn: ConnId, xid: i32, path: &str) {
        let auth = self.auth_info(conn);
        let Some(node) = self.tree.get(path) else {
            return self.reply_err(conn, xid, ErrorCode::NoNode);
        };
        if let Err(e) = acl::check(node.acl(), perms::READ, &auth) {
            return self.reply_err(conn, xid, e);
        }
        let n = i32::try_from(self.tree.descendant_count(path)).unwrap_or(i32::MAX);
        self.reply(conn, xid, 0, Response::AllChildrenNumber(n));
    }

    fn get_data(
        &mut self,
        conn: ConnId,
        path: &str,
        watch: bool,
    ) -> Result<(Option<Vec<u8>>, Stat), ErrorCode> {
        let auth = self.auth_info(conn);
        let n = self.tree.get(path).ok_or(ErrorCode::NoNode)?;
        acl::check(n.acl(), perms::READ, &auth)?;
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
        acl::check(n.acl(), perms::READ, &auth)?;
        let out = (
            n.children().into_iter().map(str::to_owned).collect(),
            n.stat(self.config.extended_types),
        );
        if watch {
            self.child_watches.add(path, conn, watch::STANDARD);
        }
        Ok(out)
    }
}
