//! The data tree: znodes with their persisted stat, the ephemeral/container/TTL indexes, and
//! the primitive mutations `apply` performs (Apache's `DataTree`).
//!
//! Mutations here trust that prep validated the request; they still refuse (with an error code,
//! never a panic) anything that would break the tree's invariants, so a corrupt WAL cannot
//! crash recovery. Watches are not this module's business: the caller fires them.

use std::collections::{BTreeMap, BTreeSet};

use zkit_proto::{op::perms, Acl, ErrorCode, Id, Stat};

use crate::path::{self, CONFIG_PATH, PROC_PATH, QUOTA_PATH};

/// `EphemeralType.CONTAINER_EPHEMERAL_OWNER`: the ephemeralOwner of container nodes.
pub const CONTAINER_OWNER: i64 = i64::MIN;
/// `EphemeralType.EXTENDED_MASK`: the top byte marking extended types (TTL).
const EXTENDED_MASK: i64 = 0xff00_0000_0000_0000_u64 as i64;
/// Bits 40..56: the extended feature (0 = TTL).
const EXTENDED_FEATURE_MASK: i64 = 0x00ff_ff00_0000_0000;
/// Largest TTL (`EphemeralType.TTL.maxValue()`): 40 bits.
pub const MAX_TTL: i64 = 0x0000_00ff_ffff_ffff;

/// What a raw ephemeralOwner means (`EphemeralType.get`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EphemeralType {
    /// 0: a plain persistent node.
    Void,
    /// A session id: an ephemeral node.
    Normal(i64),
    /// A container.
    Container,
    /// A TTL node with its ttl (ms).
    Ttl(i64),
}

impl EphemeralType {
    /// Decodes a raw owner. TTL owners are only recognised with extended types enabled, as in
    /// Apache (without them they read as a plain session id).
    pub fn of(owner: i64, extended_types: bool) -> EphemeralType {
        if extended_types
            && owner & EXTENDED_MASK == EXTENDED_MASK
            && owner & EXTENDED_FEATURE_MASK == 0
        {
            return EphemeralType::Ttl(owner & MAX_TTL);
        }
        match owner {
            CONTAINER_OWNER => EphemeralType::Container,
            0 => EphemeralType::Void,
            s => EphemeralType::Normal(s),
        }
    }
}

/// The raw owner of a TTL node (`EphemeralType.TTL.toEphemeralOwner`).
pub fn ttl_owner(ttl: i64) -> i64 {
    EXTENDED_MASK | (ttl & MAX_TTL)
}

/// `ZooDefs.Ids.OPEN_ACL_UNSAFE`.
pub fn open_acl() -> Vec<Acl> {
    vec![Acl {
        perms: perms::ALL,
        id: Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    }]
}

/// One znode. `cversion` is the *stored* one: the number of child creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Data; `None` when created or set with a null buffer (Apache keeps the null and
    /// getData returns it; dataLength is 0).
    pub data: Option<Vec<u8>>,
    /// ACL as stored (after fix-up).
    pub acl: Vec<Acl>,
    /// Creating zxid.
    pub czxid: i64,
    /// Last data-modifying zxid.
    pub mzxid: i64,
    /// Creation time.
    pub ctime: i64,
    /// Last data modification time.
    pub mtime: i64,
    /// Data version.
    pub version: i32,
    /// Stored cversion: child creates.
    pub cversion: i32,
    /// ACL version.
    pub aversion: i32,
    /// Raw ephemeralOwner (session, container marker or TTL encoding).
    pub ephemeral_owner: i64,
    /// Last child create/delete zxid.
    pub pzxid: i64,
    /// Child names.
    pub children: BTreeSet<String>,
}

impl Node {
    fn new(data: Option<Vec<u8>>, acl: Vec<Acl>, owner: i64, zxid: i64, time: i64) -> Node {
        Node {
            data,
            acl,
            czxid: zxid,
            mzxid: zxid,
            ctime: time,
            mtime: time,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: owner,
            pzxid: zxid,
            children: BTreeSet::new(),
        }
    }

    /// Data length; 0 for null data (`DataNode.copyStat`: `data == null ? 0 : data.length`).
    pub fn data_len(&self) -> usize {
        self.data.as_ref().map_or(0, Vec::len)
    }

    /// The client-visible stat (`DataNode.copyStat`): cversion = 2 × stored − numChildren,
    /// ephemeralOwner 0 unless a real ephemeral.
    pub fn stat(&self, extended_types: bool) -> Stat {
        let num_children = i32::try_from(self.children.len()).unwrap_or(i32::MAX);
        Stat {
            czxid: self.czxid,
            mzxid: self.mzxid,
            ctime: self.ctime,
            mtime: self.mtime,
            version: self.version,
            cversion: self.cversion.wrapping_mul(2).wrapping_sub(num_children),
            aversion: self.aversion,
            ephemeral_owner: match EphemeralType::of(self.ephemeral_owner, extended_types) {
                EphemeralType::Normal(s) => s,
                _ => 0,
            },
            data_length: i32::try_from(self.data_len()).unwrap_or(i32::MAX),
            num_children,
            pzxid: self.pzxid,
        }
    }
}

/// The tree and its indexes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataTree {
    nodes: BTreeMap<String, Node>,
    ephemerals: BTreeMap<i64, BTreeSet<String>>,
    containers: BTreeSet<String>,
    ttls: BTreeSet<String>,
    extended_types: bool,
}

impl DataTree {
    /// A fresh tree with `/`, `/zookeeper`, `/zookeeper/quota` and `/zookeeper/config`, with
    /// Apache's initial stats: all zero, except `/zookeeper/config`, whose ACL is
    /// world:anyone READ set with version -1 (ZOOKEEPER-2014), leaving its aversion at -1.
    pub fn new(extended_types: bool) -> DataTree {
        let mut nodes = BTreeMap::new();
        let blank = |children: &[&str]| Node {
            children: children.iter().map(|c| (*c).to_owned()).collect(),
            ..Node::new(Some(Vec::new()), open_acl(), 0, 0, 0)
        };
        nodes.insert("/".to_owned(), blank(&["zookeeper"]));
        nodes.insert(PROC_PATH.to_owned(), blank(&["quota", "config"]));
        nodes.insert(QUOTA_PATH.to_owned(), blank(&[]));
        let mut config = blank(&[]);
        config.acl = vec![Acl {
            perms: perms::READ,
            ..open_acl().remove(0)
        }];
        config.aversion = -1;
        nodes.insert(CONFIG_PATH.to_owned(), config);
        DataTree {
            nodes,
            ephemerals: BTreeMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            extended_types,
        }
    }

    /// Whether TTL owners are recognised.
    pub fn extended_types(&self) -> bool {
        self.extended_types
    }

    /// The node at `path`.
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path)
    }

    /// Client-visible stat of `path`.
    pub fn stat(&self, path: &str) -> Option<Stat> {
        self.get(path).map(|n| n.stat(self.extended_types))
    }

    /// All nodes, in path order.
    pub fn nodes(&self) -> impl Iterator<Item = (&String, &Node)> {
        self.nodes.iter()
    }

    /// Number of nodes (each path once).
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Never true: the root always exists.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Ephemeral paths of `session`, sorted.
    pub fn ephemerals_of(&self, session: i64) -> Vec<String> {
        self.ephemerals
            .get(&session)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Number of ephemeral nodes.
    pub fn ephemeral_count(&self) -> usize {
        self.ephemerals.values().map(BTreeSet::len).sum()
    }

    /// Container paths.
    pub fn containers(&self) -> &BTreeSet<String> {
        &self.containers
    }

    /// TTL node paths.
    pub fn ttls(&self) -> &BTreeSet<String> {
        &self.ttls
    }

    /// Number of descendants of `path` (`DataTree.getAllChildrenNumber`).
    pub fn descendant_count(&self, path: &str) -> usize {
        if path == "/" {
            return self.nodes.len().saturating_sub(1);
        }
        let prefix = format!("{path}/");
        self.nodes
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .count()
    }

    /// Sum of path and data lengths (`DataTree.approximateDataSize`).
    pub fn approximate_data_size(&self) -> u64 {
        self.nodes
            .iter()
            .map(|(k, n)| (k.len() + n.data_len()) as u64)
            .sum()
    }

    fn index(&mut self, path: &str, owner: i64) {
        match EphemeralType::of(owner, self.extended_types) {
            EphemeralType::Container => {
                self.containers.insert(path.to_owned());
            }
            EphemeralType::Ttl(_) => {
                self.ttls.insert(path.to_owned());
            }
            EphemeralType::Normal(s) => {
                self.ephemerals
                    .entry(s)
                    .or_default()
                    .insert(path.to_owned());
            }
            EphemeralType::Void => {}
        }
    }

    fn unindex(&mut self, path: &str, owner: i64) {
        self.containers.remove(path);
        self.ttls.remove(path);
        if let Some(set) = self.ephemerals.get_mut(&owner) {
            set.remove(path);
            if set.is_empty() {
                self.ephemerals.remove(&owner);
            }
        }
    }

    /// `DataTree.createNode`: the parent's stored cversion becomes `parent_cversion` (and its
    /// pzxid `zxid`) only if that is larger, as Apache does for fuzzy-snapshot replay.
    #[allow(clippy::too_many_arguments)] // mirrors DataTree.createNode
    pub fn create(
        &mut self,
        path: &str,
        data: Option<Vec<u8>>,
        acl: Vec<Acl>,
        owner: i64,
        parent_cversion: i32,
        zxid: i64,
        time: i64,
    ) -> Result<Stat, ErrorCode> {
        if path == "/" || self.nodes.contains_key(path) {
            return Err(ErrorCode::NodeExists);
        }
        let parent_path = path::parent_of(path).ok_or(ErrorCode::BadArguments)?;
        let name = path::name_of(path);
        let parent = self.nodes.get_mut(parent_path).ok_or(ErrorCode::NoNode)?;
        if parent_cversion > parent.cversion {
            parent.cversion = parent_cversion;
            parent.pzxid = zxid;
        }
        parent.children.insert(name.to_owned());
        let node = Node::new(data, acl, owner, zxid, time);
        let stat = node.stat(self.extended_types);
        self.nodes.insert(path.to_owned(), node);
        self.index(path, owner);
        Ok(stat)
    }

    /// `DataTree.deleteNode`. Refuses special paths and nodes with children.
    pub fn delete(&mut self, path: &str, zxid: i64) -> Result<(), ErrorCode> {
        if path::is_special(path) {
            return Err(ErrorCode::BadArguments);
        }
        let node = self.nodes.get(path).ok_or(ErrorCode::NoNode)?;
        if !node.children.is_empty() {
            return Err(ErrorCode::NotEmpty);
        }
        let owner = node.ephemeral_owner;
        let parent_path = path::parent_of(path).ok_or(ErrorCode::BadArguments)?;
        self.nodes.remove(path);
        self.unindex(path, owner);
        if let Some(parent) = self.nodes.get_mut(parent_path) {
            parent.children.remove(path::name_of(path));
            // Only move pzxid forward (Apache: a higher pzxid from a create must win).
            if zxid > parent.pzxid {
                parent.pzxid = zxid;
            }
        }
        Ok(())
    }

    /// `DataTree.setData`.
    pub fn set_data(
        &mut self,
        path: &str,
        data: Option<Vec<u8>>,
        version: i32,
        zxid: i64,
        time: i64,
    ) -> Result<Stat, ErrorCode> {
        let node = self.nodes.get_mut(path).ok_or(ErrorCode::NoNode)?;
        node.data = data;
        node.version = version;
        node.mzxid = zxid;
        node.mtime = time;
        Ok(node.stat(self.extended_types))
    }

    /// `DataTree.setACL`.
    pub fn set_acl(&mut self, path: &str, acl: Vec<Acl>, version: i32) -> Result<Stat, ErrorCode> {
        let node = self.nodes.get_mut(path).ok_or(ErrorCode::NoNode)?;
        node.acl = acl;
        node.aversion = version;
        Ok(node.stat(self.extended_types))
    }

    /// Inserts a node wholesale (snapshot restore). The caller inserts parents first.
    pub(crate) fn restore_node(&mut self, path: String, node: Node) {
        let owner = node.ephemeral_owner;
        self.nodes.insert(path.clone(), node);
        self.index(&path, owner);
    }

    /// Adds `name` to `parent`'s children (snapshot restore); false if the parent is missing.
    pub(crate) fn link_child(&mut self, parent: &str, name: &str) -> bool {
        match self.nodes.get_mut(parent) {
            Some(n) => {
                n.children.insert(name.to_owned());
                true
            }
            None => false,
        }
    }

    /// An empty tree without even the root (snapshot restore fills it).
    pub(crate) fn empty(extended_types: bool) -> DataTree {
        DataTree {
            nodes: BTreeMap::new(),
            ephemerals: BTreeMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            extended_types,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_nodes_have_apache_stats() {
        let t = DataTree::new(false);
        let root = t.stat("/").unwrap_or_default();
        assert_eq!((root.cversion, root.num_children, root.pzxid), (-1, 1, 0));
        let zk = t.stat("/zookeeper").unwrap_or_default();
        assert_eq!((zk.cversion, zk.num_children), (-2, 2));
        let cfg = t
            .get("/zookeeper/config")
            .map(|n| (n.aversion, n.acl[0].perms));
        assert_eq!(cfg, Some((-1, perms::READ)));
        assert_eq!(t.descendant_count("/"), 3);
        assert_eq!(t.descendant_count("/zookeeper"), 2);
    }

    #[test]
    fn ephemeral_types() {
        assert_eq!(EphemeralType::of(0, true), EphemeralType::Void);
        assert_eq!(EphemeralType::of(5, true), EphemeralType::Normal(5));
        assert_eq!(
            EphemeralType::of(CONTAINER_OWNER, true),
            EphemeralType::Container
        );
        assert_eq!(
            EphemeralType::of(ttl_owner(100), true),
            EphemeralType::Ttl(100)
        );
        assert_eq!(
            EphemeralType::of(ttl_owner(MAX_TTL), true),
            EphemeralType::Ttl(MAX_TTL)
        );
        assert!(matches!(
            EphemeralType::of(ttl_owner(100), false),
            EphemeralType::Normal(_)
        ));
    }

    #[test]
    fn cversion_and_pzxid() {
        let mut t = DataTree::new(false);
        t.create("/a", None, open_acl(), 0, 1, 1, 10).ok();
        t.create("/a/x", Some(vec![]), open_acl(), 0, 1, 2, 11).ok();
        t.create("/a/y", Some(vec![]), open_acl(), 0, 2, 3, 12).ok();
        assert_eq!(t.delete("/a", 4), Err(ErrorCode::NotEmpty));
        t.delete("/a/x", 4).ok();
        let a = t.stat("/a").unwrap_or_default();
        // 2 creates + 1 delete = 3 changes; stored 2 → 2*2 - 1.
        assert_eq!((a.cversion, a.num_children, a.pzxid, a.mzxid), (3, 1, 4, 1));
        assert_eq!(t.delete("/zookeeper", 5), Err(ErrorCode::BadArguments));
    }
}
