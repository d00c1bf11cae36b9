//! The data tree: znodes with their persisted stat, the ephemeral/container/TTL indexes, and
//! the primitive mutations `apply` performs (Apache's `DataTree`).
//!
//! Mutations here trust that prep validated the request; they still refuse (with an error code,
//! never a panic) anything that would break the tree's invariants, so a corrupt WAL cannot
//! crash recovery. Watches are not this module's business: the caller fires them.
//!
//! # Representation
//! Sized for millions of nodes (a 1,000,000-node tree in a quarter of Apache's RSS)
//! and for snapshots that do not stop writes:
//! - every node is one shared [`record`] (stat, ACL id, path, data in one allocation) in an
//!   arena indexed by a `u32` node id; freed ids are reused;
//! - a path index (a hash table of ids, hashed by the path stored in the record itself, so
//!   each path is stored once; each entry keeps 32 bits of that hash, so growing the table
//!   rehashes from the entries alone instead of reading a million records), in shards of
//!   unequal shares that double one at a time ([`sharded`]): no insert rehashes more than 9 %
//!   of the index;
//! - children as a set of ids per parent (outside the records: a child create or delete
//!   never copies a sibling list), a hash set while small and a compressed bitmap from 1,024
//!   children on ([`children`]: a million children in about 125 KB; adding or removing one
//!   flips a bit);
//! - ACL lists interned in an [`AclTable`] with reference counts;
//! - a [`Capture`] of the tree is a clone of the arena, which is kept in shared chunks of
//!   1,024 slots: a reference-count bump per chunk. A mutation then copies the chunk it lands
//!   in (once per chunk while the capture lives) and the record it touches (`Arc`
//!   copy-on-write).

mod children;
mod index;
mod record;
mod restore;
mod sharded;
mod slots;
pub(crate) mod stored;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use zkit_proto::{op::perms, Acl, ErrorCode, Id, Stat};

use crate::acl::AclTable;
use crate::path::{self, CONFIG_PATH, PROC_PATH, QUOTA_PATH};

use children::ChildSet;
use index::{index_hash, index_tag, IndexEntry};
pub use record::Meta;
use record::Record;
use sharded::Sharded;
use slots::Slots;
use stored::StoredStat;

/// The tree's hasher: foldhash with a fixed seed ([`Config::hash_seed`]), so that the tree
/// does exactly the same work for the same inputs (no per-process OS randomness in the core).
///
/// [`Config::hash_seed`]: crate::Config::hash_seed
type TreeHasher = foldhash::fast::FixedState;

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

/// One znode as read from the tree: its stored stat (cversion is the *stored* one: the
/// number of child creates), path, data, ACL and children. A cheap view; it borrows the tree.
#[derive(Clone, Copy)]
pub struct Node<'a> {
    /// Stored stat fields and ACL id.
    pub meta: Meta,
    /// The path's bytes, UTF-8 (checked when the record was built or loaded).
    path: &'a [u8],
    data: Option<&'a [u8]>,
    acl: &'a Arc<[Acl]>,
    children: Option<&'a ChildSet>,
    slots: &'a Slots,
}

impl std::fmt::Debug for Node<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("path", &self.path())
            .field("meta", &self.meta)
            .field("data_len", &self.data_len())
            .field("acl", &self.acl)
            .field("num_children", &self.num_children())
            .finish()
    }
}

impl<'a> std::ops::Deref for Node<'a> {
    type Target = Meta;

    /// The stat fields read as `node.czxid`, `node.cversion`, ….
    fn deref(&self) -> &Meta {
        &self.meta
    }
}

impl<'a> Node<'a> {
    /// Its path.
    pub fn path(&self) -> &'a str {
        // Checked UTF-8 when the record was built or loaded; never fails.
        std::str::from_utf8(self.path).unwrap_or_default()
    }

    /// Data; `None` when created or set with a null buffer (Apache keeps the null and
    /// getData returns it; dataLength is 0).
    pub fn data(&self) -> Option<&'a [u8]> {
        self.data
    }

    /// Data length; 0 for null data (`DataNode.copyStat`: `data == null ? 0 : data.length`).
    pub fn data_len(&self) -> usize {
        self.data.map_or(0, <[u8]>::len)
    }

    /// ACL as stored (after fix-up).
    pub fn acl(&self) -> &'a [Acl] {
        self.acl
    }

    /// The ACL, shared (no copy of the list).
    pub fn acl_shared(&self) -> Arc<[Acl]> {
        self.acl.clone()
    }

    /// Number of children.
    pub fn num_children(&self) -> usize {
        self.children.map_or(0, ChildSet::len)
    }

    /// Child names, sorted (Apache returns its hash-set order, which is unspecified).
    pub fn children(&self) -> Vec<&'a str> {
        let slots = self.slots;
        let mut names: Vec<&'a str> = self
            .children
            .into_iter()
            .flat_map(ChildSet::iter)
            .map(|id| path::name_of(slot_path(slots, id)))
            .collect();
        names.sort_unstable();
        names
    }

    /// The client-visible stat (`DataNode.copyStat`): cversion = 2 × stored − numChildren,
    /// ephemeralOwner 0 unless a real ephemeral.
    pub fn stat(&self, extended_types: bool) -> Stat {
        stat_of(
            &self.meta,
            self.data_len(),
            self.num_children(),
            extended_types,
        )
    }
}

fn stat_of(m: &Meta, data_len: usize, children: usize, extended_types: bool) -> Stat {
    let num_children = i32::try_from(children).unwrap_or(i32::MAX);
    Stat {
        czxid: m.czxid,
        mzxid: m.mzxid,
        ctime: m.ctime,
        mtime: m.mtime,
        version: m.version,
        cversion: m.cversion.wrapping_mul(2).wrapping_sub(num_children),
        aversion: m.aversion,
        ephemeral_owner: match EphemeralType::of(m.ephemeral_owner, extended_types) {
            EphemeralType::Normal(s) => s,
            _ => 0,
        },
        data_length: i32::try_from(data_len).unwrap_or(i32::MAX),
        num_children,
        pzxid: m.pzxid,
    }
}

/// The path of the node in slot `id` ("" for a free slot, which no index entry points to).
fn slot_path(slots: &Slots, id: u32) -> &str {
    slots.get(id).map_or("", |rec| record::path(rec))
}

/// The path bytes of the node in slot `id`: what the index hashes and compares.
fn slot_key(slots: &Slots, id: u32) -> &[u8] {
    slots.get(id).map_or(b"", |rec| record::path_bytes(rec))
}

/// The path index lookup, as a function of the fields it needs (so callers can hold other
/// fields mutably). `tag` is [`index_tag`] of `path`. An entry's path is read (from its
/// record, a cache miss) only when its tag matches: the table's 7-bit control bytes alone let
/// about one probe in eight for an absent path meet a false match.
fn lookup(index: &Sharded<IndexEntry>, slots: &Slots, tag: u32, path: &[u8]) -> Option<u32> {
    index
        .find(index_hash(tag), |e| {
            e.tag == tag && slot_key(slots, e.id) == path
        })
        .map(|e| e.id)
}

/// The parent of a path given as bytes (see [`path::parent_of`]).
fn parent_bytes(p: &[u8]) -> Option<&[u8]> {
    let i = p.iter().rposition(|&c| c == b'/')?;
    Some(if i == 0 { b"/" } else { &p[..i] })
}

/// A point-in-time copy of the tree for a snapshot: the records (shared with the tree) and
/// the ACL lists. Taking one costs a reference-count increment per chunk of 1,024 nodes; it
/// is `Send` and `'static`, so it can be written out on another thread while the tree moves
/// on.
#[derive(Clone)]
pub struct Capture {
    /// Records by node id (free slots are `None`), sharing the tree's chunks.
    pub(crate) records: Slots,
    /// The ACL table: (id, list).
    pub(crate) acls: Vec<(u32, Arc<[Acl]>)>,
    /// Live nodes.
    pub(crate) count: usize,
}

impl std::fmt::Debug for Capture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not every record: a capture may hold millions.
        f.debug_struct("Capture")
            .field("nodes", &self.count)
            .field("acl_lists", &self.acls.len())
            .finish()
    }
}

/// The tree and its indexes.
pub struct DataTree {
    /// Node records by id; `None` is a free id (listed in `free`).
    slots: Slots,
    free: Vec<u32>,
    /// Path → id, hashed by `hasher` over the path inside the record (see [`IndexEntry`]), in
    /// shards that grow one at a time (see [`Sharded`]).
    index: Sharded<IndexEntry>,
    /// Seeded by the shell (see [`TreeHasher`]).
    hasher: TreeHasher,
    /// Parent id → child ids (only parents that have children).
    children: HashMap<u32, ChildSet, TreeHasher>,
    acls: AclTable,
    ephemerals: BTreeMap<i64, BTreeSet<String>>,
    containers: BTreeSet<String>,
    ttls: BTreeSet<String>,
    /// Sum of path and data lengths, kept up to date (`approximateDataSize`).
    data_size: u64,
    extended_types: bool,
}

impl std::fmt::Debug for DataTree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not every node: a tree may hold millions.
        f.debug_struct("DataTree")
            .field("nodes", &self.len())
            .field("acl_lists", &self.acls.len())
            .field("ephemerals", &self.ephemeral_count())
            .field("containers", &self.containers.len())
            .field("ttls", &self.ttls.len())
            .field("extended_types", &self.extended_types)
            .finish()
    }
}

impl DataTree {
    /// A fresh tree with `/`, `/zookeeper`, `/zookeeper/quota` and `/zookeeper/config`, with
    /// Apache's initial stats: all zero, except `/zookeeper/config`, whose ACL is
    /// world:anyone READ set with version -1 (ZOOKEEPER-2014), leaving its aversion at -1.
    pub fn new(extended_types: bool) -> DataTree {
        DataTree::with_hash_seed(extended_types, 0)
    }

    /// As [`DataTree::new`], with the path hash seeded by `hash_seed` (see
    /// [`crate::Config::hash_seed`]).
    pub fn with_hash_seed(extended_types: bool, hash_seed: u64) -> DataTree {
        let mut tree = DataTree::empty(extended_types, hash_seed);
        for p in ["/", PROC_PATH, QUOTA_PATH] {
            let meta = Meta {
                acl: tree.acls.intern(&open_acl()),
                ..Meta::default()
            };
            let tag = tree.tag(p);
            tree.insert_unlinked(record::encode(&meta, p, Some(&[])), tag);
        }
        let config_acl = tree.acls.intern(&[Acl {
            perms: perms::READ,
            ..open_acl().remove(0)
        }]);
        let config = Meta {
            stat: StoredStat {
                aversion: -1,
                ..StoredStat::default()
            },
            acl: config_acl,
        };
        let tag = tree.tag(CONFIG_PATH);
        tree.insert_unlinked(record::encode(&config, CONFIG_PATH, Some(&[])), tag);
        // Cannot fail: the four paths form a tree.
        let _ = tree.link_all();
        tree
    }

    /// Whether TTL owners are recognised.
    pub fn extended_types(&self) -> bool {
        self.extended_types
    }

    /// The path index's tag of `path` (the table is keyed by [`index_hash`] of it).
    fn tag(&self, path: &str) -> u32 {
        index_tag(&self.hasher, path.as_bytes())
    }

    fn find(&self, path: &str) -> Option<u32> {
        lookup(&self.index, &self.slots, self.tag(path), path.as_bytes())
    }

    fn node_at(&self, id: u32) -> Option<Node<'_>> {
        let rec = self.slots.get(id)?;
        let (path, data, meta) = record::parts(rec);
        Some(Node {
            meta,
            path,
            data,
            acl: self.acls.get(meta.acl),
            children: self.children.get(&id),
            slots: &self.slots,
        })
    }

    /// The node at `path`.
    pub fn get(&self, path: &str) -> Option<Node<'_>> {
        self.node_at(self.find(path)?)
    }

    /// Client-visible stat of `path`.
    pub fn stat(&self, path: &str) -> Option<Stat> {
        self.get(path).map(|n| n.stat(self.extended_types))
    }

    /// All nodes, in path order. Sorts every path: O(n log n), for dumps and tests.
    pub fn nodes(&self) -> impl Iterator<Item = (&str, Node<'_>)> {
        let mut all: Vec<(&str, u32)> = self
            .slots
            .iter()
            .enumerate()
            .filter_map(|(id, r)| r.as_ref().map(|r| (record::path(r), id as u32)))
            .collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        all.into_iter()
            .filter_map(|(p, id)| self.node_at(id).map(|n| (p, n)))
    }

    /// Number of nodes (each path once).
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// Never true: the root always exists.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The interned ACL lists (with reference counts).
    pub fn acl_table(&self) -> &AclTable {
        &self.acls
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

    /// Number of descendants of `path` (`DataTree.getAllChildrenNumber`); 0 if it is absent.
    pub fn descendant_count(&self, path: &str) -> usize {
        if path == "/" {
            return self.len().saturating_sub(1);
        }
        let Some(id) = self.find(path) else {
            return 0;
        };
        let mut count = 0;
        let mut stack = vec![id];
        while let Some(id) = stack.pop() {
            if let Some(kids) = self.children.get(&id) {
                count += kids.len();
                stack.extend(kids.iter());
            }
        }
        count
    }

    /// Sum of path and data lengths (`DataTree.approximateDataSize`).
    pub fn approximate_data_size(&self) -> u64 {
        self.data_size
    }

    fn index_owner(&mut self, path: &str, owner: i64) {
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

    fn unindex_owner(&mut self, path: &str, owner: i64) {
        self.containers.remove(path);
        self.ttls.remove(path);
        if let Some(set) = self.ephemerals.get_mut(&owner) {
            set.remove(path);
            if set.is_empty() {
                self.ephemerals.remove(&owner);
            }
        }
    }

    /// Puts a record in a free slot and the path index (not yet under its parent). The caller
    /// checked that its path (whose index tag, [`DataTree::tag`], is `tag`) is new and its ACL
    /// id is counted.
    fn insert_unlinked(&mut self, rec: Record, tag: u32) -> u32 {
        let (path, data, meta) = record::parts(&rec);
        debug_assert_eq!(index_tag(&self.hasher, path), tag);
        let hash = index_hash(tag);
        self.data_size += (path.len() + data.map_or(0, <[u8]>::len)) as u64;
        let owner = meta.ephemeral_owner;
        // Only ephemeral, container and TTL nodes are indexed by path.
        let indexed = (!matches!(
            EphemeralType::of(owner, self.extended_types),
            EphemeralType::Void
        ))
        .then(|| String::from_utf8_lossy(path).into_owned());
        let id = match self.free.pop() {
            Some(id) => {
                if let Some(slot) = self.slots.get_mut(id) {
                    *slot = Some(rec);
                }
                id
            }
            // 4 billion nodes do not fit in memory: the arena never gets there.
            None => self.slots.push(rec),
        };
        self.index
            .insert_unique(hash, IndexEntry { id, tag }, |e| index_hash(e.tag));
        if let Some(path) = indexed {
            self.index_owner(&path, owner);
        }
        id
    }

    fn link(&mut self, parent: u32, child: u32) {
        self.children.entry(parent).or_default().insert(child);
    }

    /// Links every node under its parent (restore): errors on a node without parent or a
    /// missing root.
    fn link_all(&mut self) -> Result<(), String> {
        if self.find("/").is_none() {
            return Err("no root".into());
        }
        let mut pairs = Vec::with_capacity(self.len());
        for (id, rec) in self.slots.iter().enumerate() {
            let Some(rec) = rec else { continue };
            let p = record::path_bytes(rec);
            if p == b"/" {
                continue;
            }
            let parent = parent_bytes(p).unwrap_or(b"/");
            let tag = index_tag(&self.hasher, parent);
            let pid = lookup(&self.index, &self.slots, tag, parent)
                .ok_or_else(|| format!("{} has no parent", record::path(rec)))?;
            pairs.push((pid, id as u32));
        }
        for (pid, id) in pairs {
            self.link(pid, id);
        }
        Ok(())
    }

    /// `DataTree.createNode`: the parent's stored cversion becomes `parent_cversion` (and its
    /// pzxid `zxid`) only if that is larger, as Apache does for fuzzy-snapshot replay.
    #[allow(clippy::too_many_arguments)] // mirrors DataTree.createNode
    pub fn create(
        &mut self,
        path: &str,
        data: Option<&[u8]>,
        acl: &[Acl],
        owner: i64,
        parent_cversion: i32,
        zxid: i64,
        time: i64,
    ) -> Result<Stat, ErrorCode> {
        let tag = self.tag(path);
        if path == "/" || lookup(&self.index, &self.slots, tag, path.as_bytes()).is_some() {
            return Err(ErrorCode::NodeExists);
        }
        let parent_path = path::parent_of(path).ok_or(ErrorCode::BadArguments)?;
        let parent = self.find(parent_path).ok_or(ErrorCode::NoNode)?;
        if let Some(Some(prec)) = self.slots.get_mut(parent) {
            let mut pm = record::meta(prec);
            if parent_cversion > pm.cversion {
                pm.cversion = parent_cversion;
                pm.pzxid = zxid;
                record::set_meta(prec, &pm);
            }
        }
        let meta = Meta {
            stat: StoredStat {
                czxid: zxid,
                mzxid: zxid,
                ctime: time,
                mtime: time,
                pzxid: zxid,
                ephemeral_owner: owner,
                ..StoredStat::default()
            },
            acl: self.acls.intern(acl),
        };
        let stat = stat_of(&meta, data.map_or(0, <[u8]>::len), 0, self.extended_types);
        let id = self.insert_unlinked(record::encode(&meta, path, data), tag);
        self.link(parent, id);
        Ok(stat)
    }

    /// `DataTree.deleteNode`. Refuses special paths and nodes with children.
    pub fn delete(&mut self, path: &str, zxid: i64) -> Result<(), ErrorCode> {
        if path::is_special(path) {
            return Err(ErrorCode::BadArguments);
        }
        let tag = self.tag(path);
        let id = lookup(&self.index, &self.slots, tag, path.as_bytes()).ok_or(ErrorCode::NoNode)?;
        if self.children.get(&id).is_some_and(|c| !c.is_empty()) {
            return Err(ErrorCode::NotEmpty);
        }
        let parent_path = path::parent_of(path).ok_or(ErrorCode::BadArguments)?;
        let parent = self.find(parent_path);
        self.index.remove(index_hash(tag), |e| e.id == id);
        self.children.remove(&id);
        let Some(rec) = self.slots.get_mut(id).and_then(Option::take) else {
            return Ok(());
        };
        self.free.push(id);
        let (_, data, meta) = record::parts(&rec);
        self.data_size = self
            .data_size
            .saturating_sub((path.len() + data.map_or(0, <[u8]>::len)) as u64);
        self.acls.release(meta.acl);
        self.unindex_owner(path, meta.ephemeral_owner);
        if let Some(parent) = parent {
            if let Some(kids) = self.children.get_mut(&parent) {
                kids.remove(id);
                if kids.is_empty() {
                    self.children.remove(&parent);
                }
            }
            if let Some(Some(prec)) = self.slots.get_mut(parent) {
                let mut pm = record::meta(prec);
                // Only move pzxid forward (Apache: a higher pzxid from a create must win).
                if zxid > pm.pzxid {
                    pm.pzxid = zxid;
                    record::set_meta(prec, &pm);
                }
            }
        }
        Ok(())
    }

    /// `DataTree.setData`.
    pub fn set_data(
        &mut self,
        path: &str,
        data: Option<&[u8]>,
        version: i32,
        zxid: i64,
        time: i64,
    ) -> Result<Stat, ErrorCode> {
        let id = self.find(path).ok_or(ErrorCode::NoNode)?;
        let children = self.children.get(&id).map_or(0, ChildSet::len);
        let Some(Some(rec)) = self.slots.get_mut(id) else {
            return Err(ErrorCode::NoNode);
        };
        let (_, old, mut meta) = record::parts(rec);
        let old_len = old.map_or(0, <[u8]>::len) as u64;
        meta.version = version;
        meta.mzxid = zxid;
        meta.mtime = time;
        record::set_data(rec, &meta, data);
        let new_len = data.map_or(0, <[u8]>::len);
        self.data_size = self.data_size.saturating_sub(old_len) + new_len as u64;
        Ok(stat_of(&meta, new_len, children, self.extended_types))
    }

    /// `DataTree.setACL`.
    pub fn set_acl(&mut self, path: &str, acl: &[Acl], version: i32) -> Result<Stat, ErrorCode> {
        let id = self.find(path).ok_or(ErrorCode::NoNode)?;
        let children = self.children.get(&id).map_or(0, ChildSet::len);
        let Some(Some(rec)) = self.slots.get_mut(id) else {
            return Err(ErrorCode::NoNode);
        };
        let (_, data, mut meta) = record::parts(rec);
        let data_len = data.map_or(0, <[u8]>::len);
        // Intern the new list before releasing the old: setting the same list again must not
        // drop it in between.
        let old = meta.acl;
        meta.acl = self.acls.intern(acl);
        meta.aversion = version;
        record::set_meta(rec, &meta);
        self.acls.release(old);
        Ok(stat_of(&meta, data_len, children, self.extended_types))
    }

    /// A point-in-time copy for a snapshot (cheap: see [`Capture`]).
    pub fn capture(&self) -> Capture {
        Capture {
            records: self.slots.clone(),
            acls: self.acls.entries().map(|(id, l)| (id, l.clone())).collect(),
            count: self.len(),
        }
    }

    /// An empty tree without even the root (snapshot restore fills it).
    pub(crate) fn empty(extended_types: bool, hash_seed: u64) -> DataTree {
        let hasher = TreeHasher::with_seed(hash_seed);
        DataTree {
            slots: Slots::default(),
            free: Vec::new(),
            index: Sharded::default(),
            children: HashMap::with_hasher(hasher.clone()),
            hasher,
            acls: AclTable::default(),
            ephemerals: BTreeMap::new(),
            containers: BTreeSet::new(),
            ttls: BTreeSet::new(),
            data_size: 0,
            extended_types,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_index_finds_every_node_after_growing_and_shrinking() {
        // Enough nodes for the index to grow (and rehash from its entries' tags) many times.
        let mut t = DataTree::new(false);
        let acl = open_acl();
        let n = 20_000;
        t.create("/d", None, &acl, 0, 1, 1, 0).ok();
        for i in 0..n {
            let made = t.create(&format!("/d/n{i}"), Some(b"x"), &acl, 0, i + 2, 2, 0);
            assert!(made.is_ok(), "n{i}: {made:?}");
        }
        for i in 0..n {
            assert!(t.stat(&format!("/d/n{i}")).is_some(), "n{i} lost");
        }
        assert_eq!(
            t.create("/d/n7", None, &acl, 0, 1, 3, 0),
            Err(ErrorCode::NodeExists)
        );
        for i in (0..n).step_by(2) {
            assert_eq!(t.delete(&format!("/d/n{i}"), 4), Ok(()), "n{i}");
        }
        for i in 0..n {
            assert_eq!(t.stat(&format!("/d/n{i}")).is_some(), i % 2 == 1, "n{i}");
        }
        // Freed ids are reused by new paths, which the index finds too.
        for i in 0..n / 2 {
            assert!(t
                .create(&format!("/d/m{i}"), None, &acl, 0, 1, 5, 0)
                .is_ok());
        }
        assert!((0..n / 2).all(|i| t.stat(&format!("/d/m{i}")).is_some()));
        assert_eq!(t.get("/d").map(|d| d.num_children()), Some(n as usize));
    }

    #[test]
    fn special_nodes_have_apache_stats() {
        let t = DataTree::new(false);
        let root = t.stat("/").unwrap_or_default();
        assert_eq!((root.cversion, root.num_children, root.pzxid), (-1, 1, 0));
        let zk = t.stat("/zookeeper").unwrap_or_default();
        assert_eq!((zk.cversion, zk.num_children), (-2, 2));
        let cfg = t
            .get("/zookeeper/config")
            .map(|n| (n.aversion, n.acl()[0].perms));
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
        t.create("/a", None, &open_acl(), 0, 1, 1, 10).ok();
        t.create("/a/x", Some(&[]), &open_acl(), 0, 1, 2, 11).ok();
        t.create("/a/y", Some(&[]), &open_acl(), 0, 2, 3, 12).ok();
        assert_eq!(t.delete("/a", 4), Err(ErrorCode::NotEmpty));
        t.delete("/a/x", 4).ok();
        let a = t.stat("/a").unwrap_or_default();
        // 2 creates + 1 delete = 3 changes; stored 2 → 2*2 - 1.
        assert_eq!((a.cversion, a.num_children, a.pzxid, a.mzxid), (3, 1, 4, 1));
        assert_eq!(t.delete("/zookeeper", 5), Err(ErrorCode::BadArguments));
    }
}
