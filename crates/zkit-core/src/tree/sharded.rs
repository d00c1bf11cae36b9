//! A hash table split into [`SHARDS`] tables of unequal shares, so that it never grows all at
//! once.
//!
//! A hash table grows by doubling: at 7/8 of each power of two it moves every entry to a table
//! twice the size. For the tree's largest table, the path index, that is tens of megabytes read and, worse on a VM, twice as many written into
//! fresh pages, all within one insert: a stall of 100-200 ms at 2M entries here, during which
//! the pipeline answered nobody. Split evenly, the shards would all reach 7/8 within a few
//! thousand inserts of each other, the same stall in a few pieces. So shard `i` takes a share
//! proportional to `2^(i/16)`: the shards' doublings fall at 16 evenly spaced points of each
//! doubling of the whole, each moving a sixteenth of the entries (about 1/11 for the largest
//! shard), and the total work is what one table would do.
//!
//! The shard is chosen from bits 40-49 of the hash, which hashbrown uses neither for the
//! bucket (low bits) nor for the control byte (top 7 bits) below 2^40 buckets per shard.

use hashbrown::HashTable;

/// Number of shards.
pub(crate) const SHARDS: usize = 16;

/// Resolution of the shares: the shard is chosen by 10 bits of the hash.
const SLICES: usize = 1024;

/// `SHARD_END[i]`: the end (exclusive, in [`SLICES`]ths) of shard `i`'s share of the hash
/// range, about `1024 * (2^((i+1)/16) - 1)`, rounded so that every share is larger than the
/// one before (by 2^(1/16), within rounding).
const SHARD_END: [u16; SHARDS] = [
    45, 92, 141, 193, 247, 303, 362, 423, 487, 554, 624, 697, 773, 853, 936, 1024,
];

/// Which shard each value of the hash's bits 40-49 goes to.
const SHARD_OF: [u8; SLICES] = {
    let mut table = [0u8; SLICES];
    let mut slice = 0;
    let mut shard = 0;
    while slice < SLICES {
        while slice as u16 >= SHARD_END[shard] {
            shard += 1;
        }
        table[slice] = shard as u8;
        slice += 1;
    }
    table
};

fn shard_of(hash: u64) -> usize {
    SHARD_OF[((hash >> 40) as usize) & (SLICES - 1)] as usize
}

/// A hash table of `T` in [`SHARDS`] shards (see the module's header). The same calls as
/// hashbrown's [`HashTable`], for the ones the tree needs.
#[derive(Clone)]
pub(crate) struct Sharded<T> {
    shards: [HashTable<T>; SHARDS],
}

impl<T> Default for Sharded<T> {
    fn default() -> Self {
        Sharded {
            shards: std::array::from_fn(|_| HashTable::new()),
        }
    }
}

impl<T> Sharded<T> {
    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.shards.iter().map(HashTable::len).sum()
    }

    /// Whether there is none.
    pub(crate) fn is_empty(&self) -> bool {
        self.shards.iter().all(HashTable::is_empty)
    }

    /// The entry with `hash` for which `eq` holds.
    pub(crate) fn find(&self, hash: u64, eq: impl FnMut(&T) -> bool) -> Option<&T> {
        self.shards[shard_of(hash)].find(hash, eq)
    }

    /// Inserts `value` (with `hash`), known not to be there; `hasher` gives the hash of any
    /// entry (for a shard's growth).
    pub(crate) fn insert_unique(&mut self, hash: u64, value: T, hasher: impl Fn(&T) -> u64) {
        self.shards[shard_of(hash)].insert_unique(hash, value, hasher);
    }

    /// Removes and returns the entry with `hash` for which `eq` holds.
    pub(crate) fn remove(&mut self, hash: u64, eq: impl FnMut(&T) -> bool) -> Option<T> {
        let (value, _) = self.shards[shard_of(hash)]
            .find_entry(hash, eq)
            .ok()?
            .remove();
        Some(value)
    }

    /// Room for `additional` more entries spread as hashes spread, without growing.
    pub(crate) fn reserve(&mut self, additional: usize, hasher: impl Fn(&T) -> u64) {
        let mut start = 0;
        for (shard, end) in self.shards.iter_mut().zip(SHARD_END) {
            let share = additional.saturating_mul(usize::from(end - start)) / SLICES;
            // A little over the share: the hashes spread only about evenly.
            shard.reserve(share + share / 16 + 1, &hasher);
            start = end;
        }
    }

    /// Every entry, in no particular order (tests).
    #[cfg(test)]
    fn iter(&self) -> impl Iterator<Item = &T> {
        self.shards.iter().flat_map(HashTable::iter)
    }

    /// The shards' capacities (tests).
    #[cfg(test)]
    fn capacities(&self) -> [usize; SHARDS] {
        std::array::from_fn(|i| self.shards[i].capacity())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(v: u64) -> u64 {
        // A well-mixed 64-bit hash of a small integer (splitmix64's finalizer).
        let mut z = v.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    #[test]
    fn shares_grow_by_a_sixteenth_of_an_octave() {
        let width = |i: usize| SHARD_END[i] - if i == 0 { 0 } else { SHARD_END[i - 1] };
        assert_eq!(usize::from(SHARD_END[SHARDS - 1]), SLICES);
        for i in 1..SHARDS {
            let ratio = f64::from(width(i)) / f64::from(width(i - 1));
            assert!((1.02..=1.07).contains(&ratio), "shard {i}: {ratio}");
        }
        assert_eq!(SHARD_OF[0], 0);
        assert_eq!(SHARD_OF[44], 0);
        assert_eq!(SHARD_OF[45], 1);
        assert_eq!(SHARD_OF[SLICES - 1], 15);
    }

    #[test]
    fn finds_inserts_and_removes_like_one_table() {
        let mut t: Sharded<u64> = Sharded::default();
        for v in 0..50_000u64 {
            t.insert_unique(h(v), v, |&x| h(x));
        }
        assert_eq!(t.len(), 50_000);
        for v in (0..50_000u64).step_by(7) {
            assert_eq!(t.find(h(v), |&x| x == v), Some(&v));
        }
        assert_eq!(t.find(h(50_000), |&x| x == 50_000), None);
        for v in (0..50_000u64).filter(|v| v % 3 == 0) {
            assert_eq!(t.remove(h(v), |&x| x == v), Some(v));
        }
        assert_eq!(t.remove(h(3), |&x| x == 3), None);
        assert_eq!(t.len(), 50_000 - 16_667);
        assert_eq!(t.iter().count(), t.len());
        assert!(t.iter().all(|v| v % 3 != 0));
        assert!(!t.is_empty());
    }

    /// The point of the shards: growing from 0 to 2M entries, no insert moves more than a
    /// small part of the table, and the shards double at different times.
    #[test]
    fn no_insert_rehashes_more_than_a_tenth_of_the_entries() {
        let mut t: Sharded<u64> = Sharded::default();
        let mut caps = t.capacities();
        let mut worst = 0usize;
        let mut growths = Vec::new();
        for v in 0..2_000_000u64 {
            t.insert_unique(h(v), v, |&x| h(x));
            let now = t.capacities();
            if now != caps {
                // One insert grows one shard: it moved that shard's entries.
                let grown: Vec<usize> = (0..SHARDS).filter(|&i| now[i] != caps[i]).collect();
                assert_eq!(grown.len(), 1, "at {v}: {grown:?}");
                let moved = t.shards[grown[0]].len() - 1;
                if v >= 100_000 {
                    worst = worst.max(moved * 1000 / t.len());
                    growths.push(v);
                }
                caps = now;
            }
        }
        // Between 100k and 2M entries (over four doublings) each shard doubled about four
        // times, each time alone, moving at most about 1/11 of all the entries.
        assert!(worst <= 100, "an insert moved {worst}/1000 of the entries");
        assert!(growths.len() >= 4 * SHARDS - 2, "{}", growths.len());
        // The doublings are spread out, not bunched: no two within 1 % of each other's size.
        let bunched = growths
            .windows(2)
            .filter(|w| (w[1] - w[0]) * 100 < w[0])
            .count();
        assert!(bunched <= growths.len() / 8, "{bunched} of {growths:?}");
    }

    #[test]
    fn reserve_makes_room_for_that_many_without_growing() {
        let mut t: Sharded<u64> = Sharded::default();
        t.reserve(100_000, |&x| h(x));
        let caps = t.capacities();
        for v in 0..100_000u64 {
            t.insert_unique(h(v), v, |&x| h(x));
        }
        assert_eq!(t.capacities(), caps);
    }
}
