//! The path index: path → node id. It stores only the ids; an id is hashed by the path inside
//! its record, so each path is stored once (in the record). The ids are spread over
//! [`SHARDS`] hash tables chosen by bits of the path's hash.
//!
//! Why shards: a hash table grows by doubling, and doubling rehashes every entry, which here
//! means reading every record's path again, one cache miss each. One table of 7.3 million
//! ids took 2–7 s to double, during which the tree (and so the whole server) answered
//! nobody: long enough for sessions to expire. With 64 shards, each doubling rehashes a
//! 64th of the ids, at a different moment from the others, for the same memory.

use hashbrown::HashTable;

/// Number of shards: a power of two.
pub(super) const SHARDS: usize = 64;

/// The shard of a path with this hash. hashbrown places an entry by the hash's low bits and
/// tags it with its top 7, so the shard takes bits from the middle: within a shard, entries
/// still spread over the whole table.
fn shard(hash: u64) -> usize {
    (hash >> 32) as usize & (SHARDS - 1)
}

/// Node ids by path hash, in [`SHARDS`] tables.
pub(super) struct PathIndex {
    shards: Box<[HashTable<u32>]>,
    len: usize,
}

impl PathIndex {
    /// An empty index.
    pub(super) fn new() -> PathIndex {
        PathIndex {
            shards: (0..SHARDS).map(|_| HashTable::new()).collect(),
            len: 0,
        }
    }

    /// The id among those with `hash` for which `is` holds.
    pub(super) fn find(&self, hash: u64, is: impl FnMut(&u32) -> bool) -> Option<u32> {
        self.shards[shard(hash)].find(hash, is).copied()
    }

    /// Adds `id`, whose path has `hash` and is not in the index yet. `rehash` gives the hash
    /// of an id already in the index (for a growing shard).
    pub(super) fn insert_unique(&mut self, hash: u64, id: u32, rehash: impl Fn(&u32) -> u64) {
        self.shards[shard(hash)].insert_unique(hash, id, rehash);
        self.len += 1;
    }

    /// Removes `id`, whose path has `hash`; false if it was not there.
    pub(super) fn remove(&mut self, hash: u64, id: u32) -> bool {
        match self.shards[shard(hash)].find_entry(hash, |&i| i == id) {
            Ok(entry) => {
                entry.remove();
                self.len -= 1;
                true
            }
            Err(_) => false,
        }
    }

    /// Ids in the index.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Makes room for `additional` more ids spread evenly (restore), with a little to spare
    /// for the unevenness of the spread.
    pub(super) fn reserve(&mut self, additional: usize, rehash: impl Fn(&u32) -> u64) {
        let each = additional / SHARDS + additional / (SHARDS * 16) + 1;
        for table in self.shards.iter_mut() {
            table.reserve(each, &rehash);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hash that puts `k` in shard `k % SHARDS` with distinct low bits.
    fn hash(k: u32) -> u64 {
        (u64::from(k % SHARDS as u32) << 32) | u64::from(k)
    }

    #[test]
    fn finds_inserts_and_removes_across_shards() {
        let mut index = PathIndex::new();
        for id in 0..1000u32 {
            index.insert_unique(hash(id), id, |&i| hash(i));
        }
        assert_eq!(index.len(), 1000);
        assert!(index
            .shards
            .iter()
            .all(|t| t.len() == 1000 / SHARDS || t.len() == 1000 / SHARDS + 1));
        for id in 0..1000u32 {
            assert_eq!(index.find(hash(id), |&i| i == id), Some(id));
        }
        assert!(index.remove(hash(7), 7));
        assert!(!index.remove(hash(7), 7));
        assert_eq!(index.find(hash(7), |&i| i == 7), None);
        assert_eq!(index.len(), 999);
    }

    #[test]
    fn the_shard_comes_from_the_middle_bits() {
        assert_eq!(shard(0x0000_0005_ffff_ffff), 5);
        assert_eq!(shard(0xff00_0000_0000_0000), 0);
        assert_eq!(shard(u64::from(u32::MAX)), 0);
    }
}
