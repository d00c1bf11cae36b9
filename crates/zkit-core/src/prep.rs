//! Request validation: turns a write request into a [`TxnOp`] or an error code, without
//! touching the tree (Apache's `PrepRequestProcessor`, in its exact check order).
//!
//! Prep reads through an [`Overlay`]: the tree plus the changes of earlier sub-ops of the same
//! multi (Apache's outstanding `ChangeRecord`s), so that a multi sees its own creates, deletes
//! and version bumps, and sequential numbering advances across sub-ops. A failed prep leaves
//! nothing behind: the overlay is simply dropped.

use std::collections::BTreeMap;
use std::sync::Arc;

use zkit_proto::op::{create_mode, perms};
use zkit_proto::{Acl, ErrorCode, Id};

use crate::acl;
use crate::path;
use crate::tree::{self, DataTree, EphemeralType};
use crate::txn::TxnOp;

/// What prep needs to know about a node (Apache's `ChangeRecord`).
#[derive(Debug, Clone)]
struct Record {
    version: i32,
    aversion: i32,
    cversion: i32,
    child_count: usize,
    owner: i64,
    acl: RecordAcl,
}

/// A record's ACL: the tree's shared list for a node read from it (no copy per setData,
/// delete or check), or the list a create or setACL of this request gives.
#[derive(Debug, Clone)]
enum RecordAcl {
    Tree(Arc<[Acl]>),
    New(Vec<Acl>),
}

impl std::ops::Deref for RecordAcl {
    type Target = [Acl];

    fn deref(&self) -> &[Acl] {
        match self {
            RecordAcl::Tree(acl) => acl,
            RecordAcl::New(acl) => acl,
        }
    }
}

/// The tree as seen by the sub-op being prepped.
pub struct Overlay<'a> {
    tree: &'a DataTree,
    changes: BTreeMap<String, Option<Record>>,
    /// Whether `changes` is kept: only a multi's later sub-ops read it.
    tracks_changes: bool,
    extended_types: bool,
    session: i64,
    auth: &'a [Id],
}

/// The create flavours (op codes 1, 15, 19, 21).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CreateOp {
    /// create (1)
    Create,
    /// create2 (15)
    Create2,
    /// createContainer (19)
    Container,
    /// createTTL (21) with its ttl
    Ttl(i64),
}

/// `CreateMode.fromFlag`: (ephemeral, sequential, container, ttl) or BadArguments.
fn mode_of(flags: i32) -> Result<(bool, bool, bool, bool), ErrorCode> {
    Ok(match flags {
        create_mode::PERSISTENT => (false, false, false, false),
        create_mode::EPHEMERAL => (true, false, false, false),
        create_mode::PERSISTENT_SEQUENTIAL => (false, true, false, false),
        create_mode::EPHEMERAL_SEQUENTIAL => (true, true, false, false),
        create_mode::CONTAINER => (false, false, true, false),
        create_mode::PERSISTENT_WITH_TTL => (false, false, false, true),
        create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL => (false, true, false, true),
        _ => return Err(ErrorCode::BadArguments),
    })
}

fn bad_path(path: &str) -> Result<(), ErrorCode> {
    path::validate_path(path).map_err(|_| ErrorCode::BadArguments)
}

/// `checkAndIncVersion`.
fn check_version(current: i32, expected: i32) -> Result<i32, ErrorCode> {
    if expected != -1 && expected != current {
        return Err(ErrorCode::BadVersion);
    }
    Ok(current.wrapping_add(1))
}

/// `getParentPathAndValidate`: no '/', a NUL or a special path → BadArguments.
fn parent_for_delete(path: &str) -> Result<&str, ErrorCode> {
    if path.contains('\0') || path::is_special(path) {
        return Err(ErrorCode::BadArguments);
    }
    path::parent_of(path).ok_or(ErrorCode::BadArguments)
}

impl<'a> Overlay<'a> {
    /// A view of `tree` for a request of `session` whose connection holds `auth`.
    pub fn new(tree: &'a DataTree, session: i64, auth: &'a [Id]) -> Overlay<'a> {
        Overlay {
            tree,
            changes: BTreeMap::new(),
            tracks_changes: true,
            extended_types: tree.extended_types(),
            session,
            auth,
        }
    }

    /// A view of `tree` for one request on its own (not a multi's sub-op): nothing is prepped
    /// after it against the same view, so the changes it makes are not kept (each would cost
    /// a copy of its path and a map entry, on every write).
    pub fn lone(tree: &'a DataTree, session: i64, auth: &'a [Id]) -> Overlay<'a> {
        Overlay {
            tracks_changes: false,
            ..Overlay::new(tree, session, auth)
        }
    }

    /// Keeps the change a sub-op makes to `path` for the sub-ops after it (`None`: deleted).
    fn note(&mut self, path: &str, change: Option<Record>) {
        if self.tracks_changes {
            self.changes.insert(path.to_owned(), change);
        }
    }

    /// `getRecordForPath`: NoNode when absent (in the tree or deleted by an earlier sub-op).
    fn record(&self, path: &str) -> Result<Record, ErrorCode> {
        if let Some(change) = self.changes.get(path) {
            return change.clone().ok_or(ErrorCode::NoNode);
        }
        let n = self.tree.get(path).ok_or(ErrorCode::NoNode)?;
        Ok(Record {
            version: n.version,
            aversion: n.aversion,
            cversion: n.cversion,
            child_count: n.num_children(),
            owner: n.ephemeral_owner,
            acl: RecordAcl::Tree(n.acl_shared()),
        })
    }

    fn check_acl(&self, rec: &Record, perm: i32) -> Result<(), ErrorCode> {
        acl::check(&rec.acl, perm, self.auth)
    }

    /// create / create2 / createContainer / createTTL (`pRequest2TxnCreate`).
    pub fn create(
        &mut self,
        op: CreateOp,
        path: &str,
        data: Option<Vec<u8>>,
        acl_list: Vec<Acl>,
        flags: i32,
    ) -> Result<TxnOp, ErrorCode> {
        // validateCreateRequest: mode, then TTL rules.
        let (ephemeral, sequential, _container, is_ttl) = mode_of(flags)?;
        let ttl = match op {
            CreateOp::Ttl(ttl) => ttl,
            _ => -1,
        };
        if is_ttl && !self.extended_types {
            return Err(ErrorCode::Unimplemented);
        }
        if is_ttl {
            if ttl <= 0 || ttl > tree::MAX_TTL {
                return Err(ErrorCode::BadArguments);
            }
        } else if ttl >= 0 {
            return Err(ErrorCode::BadArguments);
        }
        if let (CreateOp::Ttl(_), false) = (op, is_ttl) {
            // Apache would go on with a negative ttl and fail while applying the txn; refuse
            // here instead so the log never holds a txn that cannot be replayed.
            return Err(ErrorCode::BadArguments);
        }
        // validatePathForCreate: has a '/', no NUL.
        if path.contains('\0') {
            return Err(ErrorCode::BadArguments);
        }
        let parent_path = path::parent_of(path).ok_or(ErrorCode::BadArguments)?;
        let acl_list = acl::fixup_owned(acl_list, self.auth)?;
        let mut parent = self.record(parent_path)?;
        self.check_acl(&parent, perms::CREATE)?;
        let path = if sequential {
            format!("{path}{:010}", parent.cversion)
        } else {
            path.to_owned()
        };
        bad_path(&path)?;
        if self.record(&path).is_ok() {
            return Err(ErrorCode::NodeExists);
        }
        if matches!(
            EphemeralType::of(parent.owner, self.extended_types),
            EphemeralType::Normal(_)
        ) {
            return Err(ErrorCode::NoChildrenForEphemerals);
        }
        let new_cversion = parent.cversion.wrapping_add(1);
        // The node kind follows the op for containers and TTLs, and the flags otherwise, as
        // Apache's DataTree applies CreateContainerTxn / CreateTTLTxn / CreateTxn.
        let owner = match op {
            CreateOp::Container => tree::CONTAINER_OWNER,
            CreateOp::Ttl(ttl) => tree::ttl_owner(ttl),
            _ if ephemeral => self.session,
            _ => 0,
        };
        parent.child_count += 1;
        parent.cversion = new_cversion;
        self.note(parent_path, Some(parent));
        if self.tracks_changes {
            let node = Record {
                version: 0,
                aversion: 0,
                cversion: 0,
                child_count: 0,
                owner,
                acl: RecordAcl::New(acl_list.clone()),
            };
            self.note(&path, Some(node));
        }
        Ok(TxnOp::Create {
            path,
            data,
            acl: acl_list,
            ephemeral_owner: owner,
            parent_cversion: new_cversion,
        })
    }

    fn remove(&mut self, parent_path: &str, mut parent: Record, path: &str) {
        parent.child_count = parent.child_count.saturating_sub(1);
        self.note(parent_path, Some(parent));
        self.note(path, None);
    }

    /// delete: BadArguments (special/malformed), NoNode (parent), NoAuth, NoNode, BadVersion,
    /// NotEmpty.
    pub fn delete(&mut self, path: &str, version: i32) -> Result<TxnOp, ErrorCode> {
        let parent_path = parent_for_delete(path)?;
        let parent = self.record(parent_path)?;
        self.check_acl(&parent, perms::DELETE)?;
        let node = self.record(path)?;
        check_version(node.version, version)?;
        if node.child_count > 0 {
            return Err(ErrorCode::NotEmpty);
        }
        self.remove(parent_path, parent, path);
        Ok(TxnOp::Delete {
            path: path.to_owned(),
        })
    }

    /// deleteContainer (reaper or op 20): NotEmpty if it has children, BadVersion if it is a
    /// real ephemeral (Apache's odd but exact code), no ACL or version check.
    pub fn delete_container(&mut self, path: &str) -> Result<TxnOp, ErrorCode> {
        let parent_path = parent_for_delete(path)?;
        let node = self.record(path)?;
        if node.child_count > 0 {
            return Err(ErrorCode::NotEmpty);
        }
        if matches!(
            EphemeralType::of(node.owner, self.extended_types),
            EphemeralType::Normal(_)
        ) {
            return Err(ErrorCode::BadVersion);
        }
        let parent = self.record(parent_path)?;
        self.remove(parent_path, parent, path);
        Ok(TxnOp::DeleteContainer {
            path: path.to_owned(),
        })
    }

    /// setData: BadArguments, NoNode, NoAuth, BadVersion.
    pub fn set_data(
        &mut self,
        path: String,
        data: Option<Vec<u8>>,
        version: i32,
    ) -> Result<TxnOp, ErrorCode> {
        bad_path(&path)?;
        let mut node = self.record(&path)?;
        self.check_acl(&node, perms::WRITE)?;
        let new_version = check_version(node.version, version)?;
        node.version = new_version;
        self.note(&path, Some(node));
        Ok(TxnOp::SetData {
            path,
            data,
            version: new_version,
        })
    }

    /// setACL: BadArguments, InvalidAcl, NoNode, NoAuth, BadVersion (on aversion).
    pub fn set_acl(
        &mut self,
        path: &str,
        acl_list: &[Acl],
        version: i32,
    ) -> Result<TxnOp, ErrorCode> {
        bad_path(path)?;
        let acl_list = acl::fixup(acl_list, self.auth)?;
        let mut node = self.record(path)?;
        self.check_acl(&node, perms::ADMIN)?;
        let new_version = check_version(node.aversion, version)?;
        node.aversion = new_version;
        node.acl = RecordAcl::New(acl_list.clone());
        self.note(path, Some(node));
        Ok(TxnOp::SetAcl {
            path: path.to_owned(),
            acl: acl_list,
            version: new_version,
        })
    }

    /// check: BadArguments, NoNode, NoAuth, BadVersion.
    pub fn check(&mut self, path: &str, version: i32) -> Result<TxnOp, ErrorCode> {
        bad_path(path)?;
        let node = self.record(path)?;
        self.check_acl(&node, perms::READ)?;
        let v = check_version(node.version, version)?;
        Ok(TxnOp::Check {
            path: path.to_owned(),
            version: v,
        })
    }
}
