//! The arena of node records by id, in shared chunks of [`CHUNK`] slots.
//!
//! A snapshot capture clones the arena: with the records in one vector that is a
//! reference-count increment per node on the pipeline, tens to hundreds of milliseconds at
//! millions of nodes. Here a clone shares the chunks (an increment per chunk, a thousandth of
//! the work), and the first mutation of a slot in a chunk that a capture still holds copies
//! that chunk (its [`CHUNK`] record pointers), after which the record itself is copied on write
//! as before. The cost of a capture is thus spread over the writes that follow it, at most one
//! chunk copy per chunk they touch.

use std::sync::Arc;

use super::record::Record;

/// Slots per chunk: a chunk of pointers is 16 KiB, so copying one after a capture is a few
/// microseconds, and a capture of 10,000,000 nodes clones about 10,000 chunk pointers.
const CHUNK: usize = 1024;

/// One chunk of [`CHUNK`] slots, inline behind its reference count (one pointer to follow from
/// the chunk list to a slot). Slots past `Slots::len` in the last chunk are `None`.
type Chunk = [Option<Record>; CHUNK];

/// The records by node id; `None` is a free slot. Cheap to clone (see the module's header).
#[derive(Clone, Default)]
pub(crate) struct Slots {
    chunks: Vec<Arc<Chunk>>,
    /// Number of slots (free ones included): the next id [`Slots::push`] gives.
    len: usize,
}

fn split(id: u32) -> (usize, usize) {
    let id = id as usize;
    (id / CHUNK, id % CHUNK)
}

impl Slots {
    /// The record in slot `id`, if the slot exists and is in use.
    pub(crate) fn get(&self, id: u32) -> Option<&Record> {
        let (c, i) = split(id);
        self.chunks.get(c)?[i].as_ref()
    }

    /// Slot `id` for writing: copies its chunk first if a capture shares it.
    pub(crate) fn get_mut(&mut self, id: u32) -> Option<&mut Option<Record>> {
        if id as usize >= self.len {
            return None;
        }
        let (c, i) = split(id);
        Some(&mut Arc::make_mut(self.chunks.get_mut(c)?)[i])
    }

    /// Appends a slot holding `rec`; returns its id (`u32::MAX` past 4 billion slots, which do
    /// not fit in memory).
    pub(crate) fn push(&mut self, rec: Record) -> u32 {
        let id = u32::try_from(self.len).unwrap_or(u32::MAX);
        let (c, i) = split(id);
        if c == self.chunks.len() {
            self.chunks.push(Arc::new(std::array::from_fn(|_| None)));
        }
        if let Some(chunk) = self.chunks.get_mut(c) {
            Arc::make_mut(chunk)[i] = Some(rec);
        }
        self.len += 1;
        id
    }

    /// Room for `more` slots' chunk pointers.
    pub(crate) fn reserve(&mut self, more: usize) {
        self.chunks.reserve(more.div_ceil(CHUNK));
    }

    /// Every slot in id order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Option<Record>> {
        self.chunks.iter().flat_map(|c| c.iter()).take(self.len)
    }

    /// The records in use, in id order.
    pub(crate) fn records(&self) -> impl Iterator<Item = &Record> {
        self.iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(b: u8) -> Record {
        Arc::from(&[b][..])
    }

    #[test]
    fn ids_span_chunks_and_clones_share_until_written() {
        let mut slots = Slots::default();
        for i in 0..(2 * CHUNK + 3) {
            assert_eq!(slots.push(rec(i as u8)) as usize, i);
        }
        assert_eq!(slots.len, 2 * CHUNK + 3);
        assert_eq!(slots.chunks.len(), 3);
        let at = |s: &Slots, id: usize| s.get(id as u32).map(|r| r[0]);
        assert_eq!(at(&slots, CHUNK + 1), Some((CHUNK + 1) as u8));
        assert_eq!(at(&slots, 2 * CHUNK + 3), None);
        assert!(slots.get_mut((2 * CHUNK + 3) as u32).is_none());

        let captured = slots.clone();
        assert!(Arc::ptr_eq(&slots.chunks[1], &captured.chunks[1]));
        // A write copies only the chunk it lands in; the capture keeps what it saw.
        *slots.get_mut((CHUNK + 1) as u32).unwrap() = None;
        assert!(!Arc::ptr_eq(&slots.chunks[1], &captured.chunks[1]));
        assert!(Arc::ptr_eq(&slots.chunks[0], &captured.chunks[0]));
        assert!(Arc::ptr_eq(&slots.chunks[2], &captured.chunks[2]));
        assert_eq!(at(&slots, CHUNK + 1), None);
        assert_eq!(at(&captured, CHUNK + 1), Some((CHUNK + 1) as u8));
        // So does an append to a shared last chunk.
        slots.push(rec(7));
        assert!(!Arc::ptr_eq(&slots.chunks[2], &captured.chunks[2]));
        assert_eq!(captured.len, 2 * CHUNK + 3);
        assert_eq!(captured.records().count(), 2 * CHUNK + 3);
        assert_eq!(slots.records().count(), 2 * CHUNK + 3);
        assert_eq!(slots.iter().count(), 2 * CHUNK + 4);
    }
}
