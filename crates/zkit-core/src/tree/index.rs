//! The path index's entries: a node id and 32 bits of its path's hash, so that growing the
//! index (a rehash of every entry) reads the table alone, never the records.

use std::hash::BuildHasher;

/// One entry of the path index: a node id and the 32 bits of its path's hash that the table
/// is keyed by ([`index_hash`]). Keeping them in the entry means growing the table (a rehash
/// of every entry, at 7/8 of each power of two) reads only the table: rehashing from the
/// paths would read every record, a cache miss each, hundreds of milliseconds on the
/// pipeline at a million nodes.
#[derive(Debug, Clone, Copy)]
pub(super) struct IndexEntry {
    /// The node's id.
    pub(super) id: u32,
    /// 32 bits of its path's hash.
    pub(super) tag: u32,
}

/// The 32 bits of a path's hash (by the tree's hasher) that the index keeps.
pub(super) fn index_tag(hasher: &impl BuildHasher, path: &[u8]) -> u32 {
    let h = hasher.hash_one(path);
    (h ^ (h >> 32)) as u32
}

/// The table hash of an index entry with `tag`: the tag spread over 64 bits (hashbrown takes
/// its control byte from the top bits and the bucket from the low ones).
pub(super) fn index_hash(tag: u32) -> u64 {
    u64::from(tag).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}
