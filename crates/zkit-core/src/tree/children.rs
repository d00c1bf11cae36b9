//! A parent's children: a set of node ids, a hash table while small and a compressed bitmap
//! ([`RoaringBitmap`]) once large.
//!
//! Node ids are slots of the tree's arena, small integers that deletes free for reuse, so the
//! ids of a large directory are dense: as a bitmap, a million children take about 125 KB
//! instead of about 10 MB of hash table, an insert or remove flips a bit in a block that is
//! likely in cache instead of probing a table of millions, and the set never rehashes.

use hashbrown::HashTable;
use roaring::RoaringBitmap;

/// Children from which a set is kept as a bitmap (and stays one, even if it shrinks): below
/// it a table is as small and its operations are as cheap.
const LARGE_FROM: usize = 1 << 10;

/// Hash of a node id in a small [`ChildSet`]: ids are small consecutive integers chosen by the
/// tree (never by a client), so a multiplicative mix spreads them perfectly.
fn id_hash(id: u32) -> u64 {
    u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A parent's children: node ids.
#[derive(Clone)]
pub(crate) enum ChildSet {
    /// One table, hashed by [`id_hash`], while small.
    One(HashTable<u32>),
    /// A bitmap, from [`LARGE_FROM`] children on.
    Large(Box<RoaringBitmap>),
}

impl Default for ChildSet {
    fn default() -> Self {
        ChildSet::One(HashTable::new())
    }
}

impl ChildSet {
    /// Number of children.
    pub(crate) fn len(&self) -> usize {
        match self {
            ChildSet::One(t) => t.len(),
            ChildSet::Large(b) => usize::try_from(b.len()).unwrap_or(usize::MAX),
        }
    }

    /// Whether there is none.
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            ChildSet::One(t) => t.is_empty(),
            ChildSet::Large(b) => b.is_empty(),
        }
    }

    /// Adds `id`, known not to be there.
    pub(crate) fn insert(&mut self, id: u32) {
        match self {
            ChildSet::One(t) if t.len() + 1 >= LARGE_FROM => {
                let mut ids: Vec<u32> = std::mem::take(t).into_iter().chain([id]).collect();
                ids.sort_unstable();
                let bitmap = RoaringBitmap::from_sorted_iter(ids)
                    .unwrap_or_else(|_| unreachable!("the ids were sorted"));
                *self = ChildSet::Large(Box::new(bitmap));
            }
            ChildSet::One(t) => {
                t.insert_unique(id_hash(id), id, |&c| id_hash(c));
            }
            ChildSet::Large(b) => {
                b.insert(id);
            }
        }
    }

    /// Removes `id`; whether it was there.
    pub(crate) fn remove(&mut self, id: u32) -> bool {
        match self {
            ChildSet::One(t) => match t.find_entry(id_hash(id), |&c| c == id) {
                Ok(entry) => {
                    entry.remove();
                    true
                }
                Err(_) => false,
            },
            ChildSet::Large(b) => b.remove(id),
        }
    }

    /// The ids, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        let (one, large) = match self {
            ChildSet::One(t) => (Some(t.iter().copied()), None),
            ChildSet::Large(b) => (None, Some(b.iter())),
        };
        one.into_iter().flatten().chain(large.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_set_becomes_a_bitmap_and_keeps_every_id() {
        let mut set = ChildSet::default();
        let n = LARGE_FROM as u32 + 1000;
        for id in 0..n {
            assert!(matches!(
                (&set, (id as usize) < LARGE_FROM),
                (ChildSet::One(_), true) | (ChildSet::Large(_), false)
            ));
            set.insert(id);
        }
        assert_eq!(set.len(), n as usize);
        let mut ids: Vec<u32> = set.iter().collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..n).collect::<Vec<_>>());
        assert!(set.remove(5));
        assert!(!set.remove(5));
        assert!(!set.remove(n));
        assert_eq!(set.len(), n as usize - 1);
        for id in 0..n {
            set.remove(id);
        }
        assert!(set.is_empty());
        assert_eq!(set.iter().count(), 0);
        set.insert(7);
        assert_eq!(set.iter().collect::<Vec<_>>(), vec![7]);
    }

    /// Inserts and removes of ids spread over several of the bitmap's 65,536-id blocks, some
    /// sparse and some dense, against a model set.
    #[test]
    fn a_large_set_matches_a_model_through_inserts_and_removes() {
        let mut set = ChildSet::default();
        let mut model = std::collections::BTreeSet::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for step in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Half of the ids in one dense block, the rest spread thinly over 64 blocks.
            let id = if x % 2 == 0 {
                (x >> 8) as u32 % 20_000
            } else {
                (x >> 8) as u32 % (1 << 22)
            };
            if model.contains(&id) {
                if step % 3 != 0 {
                    assert!(set.remove(id));
                    model.remove(&id);
                }
            } else {
                set.insert(id);
                model.insert(id);
            }
            assert_eq!(set.len(), model.len());
        }
        assert!(matches!(set, ChildSet::Large(_)));
        let mut ids: Vec<u32> = set.iter().collect();
        ids.sort_unstable();
        assert_eq!(ids, model.iter().copied().collect::<Vec<_>>());
        for id in model.iter().copied().collect::<Vec<_>>() {
            assert!(set.remove(id));
        }
        assert!(set.is_empty());
        assert!(!set.remove(1));
    }

    #[test]
    fn a_small_set_is_one_table() {
        let mut set = ChildSet::default();
        for id in [3, 1, 2] {
            set.insert(id);
        }
        assert!(matches!(set, ChildSet::One(_)));
        assert!(set.remove(1));
        let mut ids: Vec<u32> = set.iter().collect();
        ids.sort_unstable();
        assert_eq!(ids, vec![2, 3]);
    }
}
