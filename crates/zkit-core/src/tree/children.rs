//! A parent's children: a set of node ids that becomes [`Sharded`] once it is large, so that a
//! parent with millions of children never rehashes them all in one insert.

use hashbrown::HashTable;

use super::sharded::Sharded;

/// Children from which a set is kept in shards: below it one table is smaller (a sharded set
/// has 16 table headers) and its growth moves at most this many ids, a fraction of a
/// millisecond.
const SHARDED_FROM: usize = 1 << 16;

/// Hash of a node id in a [`ChildSet`]: ids are small consecutive integers chosen by the tree
/// (never by a client), so a multiplicative mix spreads them perfectly.
fn id_hash(id: u32) -> u64 {
    u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A parent's children: node ids, hashed by [`id_hash`].
#[derive(Clone)]
pub(crate) enum ChildSet {
    /// One table, while small.
    One(HashTable<u32>),
    /// Sharded, from [`SHARDED_FROM`] children on (and after, even if it shrinks).
    Sharded(Box<Sharded<u32>>),
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
            ChildSet::Sharded(s) => s.len(),
        }
    }

    /// Whether there is none.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `id`, known not to be there.
    pub(crate) fn insert(&mut self, id: u32) {
        match self {
            ChildSet::One(t) if t.len() + 1 >= SHARDED_FROM => {
                let mut sharded = Box::<Sharded<u32>>::default();
                sharded.reserve(2 * SHARDED_FROM, |&c| id_hash(c));
                for c in std::mem::take(t).into_iter().chain([id]) {
                    sharded.insert_unique(id_hash(c), c, |&c| id_hash(c));
                }
                *self = ChildSet::Sharded(sharded);
            }
            ChildSet::One(t) => {
                t.insert_unique(id_hash(id), id, |&c| id_hash(c));
            }
            ChildSet::Sharded(s) => s.insert_unique(id_hash(id), id, |&c| id_hash(c)),
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
            ChildSet::Sharded(s) => s.remove(id_hash(id), |&c| c == id).is_some(),
        }
    }

    /// The ids, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &u32> {
        let (one, sharded) = match self {
            ChildSet::One(t) => (Some(t.iter()), None),
            ChildSet::Sharded(s) => (None, Some(s.iter())),
        };
        one.into_iter()
            .flatten()
            .chain(sharded.into_iter().flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_set_goes_to_shards_and_keeps_every_id() {
        let mut set = ChildSet::default();
        let n = SHARDED_FROM as u32 + 1000;
        for id in 0..n {
            assert!(matches!(
                (&set, (id as usize) < SHARDED_FROM),
                (ChildSet::One(_), true) | (ChildSet::Sharded(_), false)
            ));
            set.insert(id);
        }
        assert_eq!(set.len(), n as usize);
        let mut ids: Vec<u32> = set.iter().copied().collect();
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
        assert_eq!(set.iter().copied().collect::<Vec<_>>(), vec![7]);
    }

    #[test]
    fn a_small_set_is_one_table() {
        let mut set = ChildSet::default();
        for id in [3, 1, 2] {
            set.insert(id);
        }
        assert!(matches!(set, ChildSet::One(_)));
        assert!(set.remove(1));
        let mut ids: Vec<u32> = set.iter().copied().collect();
        ids.sort_unstable();
        assert_eq!(ids, vec![2, 3]);
    }
}
