//! Garbage collection of deleted ledgers' entries, on the journal thread: BookKeeper's
//! `GarbageCollectorThread` entry-log part. An entry log (never the one being appended to)
//! whose live bytes are gone is removed; one whose live share is under
//! [`FileStorageOptions::compaction_threshold`](super::FileStorageOptions) has its live
//! entries copied to the current log (compaction) and is removed after that.
//!
//! Crash safety comes from the order, as in `GarbageCollectorThread.compactEntryLog`: copied
//! entries are written and their new locations put in the index, then a checkpoint makes the
//! entry log, the index log (with every delete record and new location) and the checkpoint
//! durable, and only then are old logs removed. A crash before the checkpoint leaves the old
//! locations in force (the copies past the checkpoint are cut at recovery); a crash after it
//! leaves at most a log nothing points to, removed by the next collection.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::sync::atomic::Ordering::Relaxed;

use bytes::BytesMut;

use super::layout::{index_name, sync_dir};
use super::sink::{put_index_loc, FileSink};
use super::{entry_log_name, Loc};
use crate::storage::journal;
use crate::storage::{Record, Result, StorageError};

/// Bytes an entry takes in an entry log besides the entry: length, ledger id, entry id.
pub(super) const ENTRY_OVERHEAD: u64 = 20;

/// Copy in batches of about this many bytes.
const BATCH: usize = 4 << 20;

impl FileSink {
    /// One collection pass. See the module docs.
    pub(super) fn collect_garbage(&mut self) -> Result<()> {
        let live = self.live_bytes();
        let sizes: BTreeMap<u32, u64> = {
            let logs = self.shared.logs.read().unwrap_or_else(|p| p.into_inner());
            logs.iter()
                .map(|(&id, f)| {
                    let len = if id == self.log_id {
                        self.log_len
                    } else {
                        f.metadata().map_or(0, |m| m.len())
                    };
                    (id, len)
                })
                .collect()
        };
        // The current log becomes a candidate once it is mostly garbage: roll it.
        let cur_live = live.get(&self.log_id).copied().unwrap_or(0);
        if self.log_len > 0 && self.under_threshold(cur_live, self.log_len) {
            self.roll_log()?;
        }
        let mut remove = BTreeSet::new();
        let mut compact = BTreeSet::new();
        for (&id, &size) in &sizes {
            if id == self.log_id || size == 0 {
                continue;
            }
            let l = live.get(&id).copied().unwrap_or(0);
            if l == 0 {
                remove.insert(id);
            } else if self.under_threshold(l, size) {
                compact.insert(id);
            }
        }
        if remove.is_empty() && compact.is_empty() {
            return Ok(());
        }
        if !compact.is_empty() {
            self.copy_live(&compact)?;
        }
        let old_index = self.rewrite_index()?;
        // Everything the removal relies on (delete records, new locations) durable first.
        self.do_checkpoint()?;
        let path = self.ledger_cur.join(index_name(old_index));
        fs::remove_file(&path)
            .map_err(|e| StorageError::io(format!("remove {}", path.display()), e))?;
        let mut reclaimed = 0;
        for id in remove.iter().chain(&compact) {
            self.shared
                .logs
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .remove(id);
            let path = self.ledger_cur.join(entry_log_name(*id));
            fs::remove_file(&path)
                .map_err(|e| StorageError::io(format!("remove {}", path.display()), e))?;
            reclaimed += sizes.get(id).copied().unwrap_or(0);
        }
        sync_dir(&self.ledger_cur)?;
        let copied = self.shared.gc.copied.load(Relaxed);
        tracing::info!(
            removed = remove.len() + compact.len(),
            compacted = compact.len(),
            reclaimed,
            copied,
            "entry log garbage collected"
        );
        self.shared
            .gc
            .logs_removed
            .fetch_add((remove.len() + compact.len()) as u64, Relaxed);
        self.shared.gc.bytes_reclaimed.fetch_add(reclaimed, Relaxed);
        Ok(())
    }

    /// Writes the in-memory index (which includes the pending records) as the next index
    /// generation and switches to it; the next checkpoint names it. Returns the old generation
    /// (to remove once that checkpoint is written). A crash before the checkpoint leaves the
    /// old generation in force: recovery removes the new file and replays the journal.
    fn rewrite_index(&mut self) -> Result<u64> {
        let mut b = BytesMut::new();
        {
            let index = self.shared.index.read().unwrap_or_else(|p| p.into_inner());
            for (&ledger_id, l) in &index.ledgers {
                journal::encode_record(
                    &Record::Key {
                        ledger_id,
                        master_key: l.key,
                    },
                    &mut b,
                );
                if l.fenced {
                    journal::encode_record(&Record::Fence { ledger_id }, &mut b);
                }
                for (&entry_id, &loc) in &l.entries {
                    put_index_loc(&mut b, ledger_id, entry_id, l.lac, loc);
                }
            }
        }
        let gen = self.index_gen + 1;
        let path = self.ledger_cur.join(index_name(gen));
        let write = || -> std::io::Result<File> {
            // Left by a rewrite that failed before switching: start it over.
            match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let mut f = OpenOptions::new()
                .create_new(true)
                .read(true)
                .append(true)
                .open(&path)?;
            f.write_all(&b)?;
            f.sync_all()?;
            Ok(f)
        };
        let f = write().map_err(|e| StorageError::io("rewrite the index", e))?;
        sync_dir(&self.ledger_cur)?;
        let old = self.index_gen;
        self.index_log = f;
        self.index_len = b.len() as u64;
        self.index_gen = gen;
        self.pending_index.clear();
        Ok(old)
    }

    fn under_threshold(&self, live: u64, size: u64) -> bool {
        (live as f64) < self.opts.compaction_threshold * size as f64
    }

    /// Live bytes per entry log, from the index.
    fn live_bytes(&self) -> HashMap<u32, u64> {
        let index = self.shared.index.read().unwrap_or_else(|p| p.into_inner());
        let mut live = HashMap::new();
        for l in index.ledgers.values() {
            for loc in l.entries.values() {
                *live.entry(loc.log).or_insert(0) += u64::from(loc.len) + ENTRY_OVERHEAD;
            }
        }
        live
    }

    /// Copies the live entries of `logs` to the current log and points the index at the
    /// copies (in memory and in the pending index records).
    fn copy_live(&mut self, logs: &BTreeSet<u32>) -> Result<()> {
        // (ledger, entry, lac, old location), in log order for sequential reads.
        let mut moves: Vec<(i64, i64, i64, Loc)> = {
            let index = self.shared.index.read().unwrap_or_else(|p| p.into_inner());
            index
                .ledgers
                .iter()
                .flat_map(|(&ledger, l)| {
                    l.entries
                        .iter()
                        .filter(|(_, loc)| logs.contains(&loc.log))
                        .map(move |(&entry, &loc)| (ledger, entry, l.lac, loc))
                })
                .collect()
        };
        moves.sort_by_key(|m| (m.3.log, m.3.offset));
        let handles = self
            .shared
            .logs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        self.buf_log.clear();
        let mut batch: Vec<(i64, i64, i64, Loc)> = Vec::new();
        for (ledger, entry, lac, old) in moves {
            let file = handles.get(&old.log).ok_or_else(|| StorageError::Corrupt {
                file: self.ledger_cur.join(entry_log_name(old.log)),
                offset: old.offset,
                reason: "entry log missing".into(),
            })?;
            let mut data = vec![0u8; old.len as usize];
            file.read_exact_at(&mut data, old.offset).map_err(|e| {
                StorageError::io(format!("read entry log {:08x} to compact", old.log), e)
            })?;
            if self.log_len + (self.buf_log.len() + data.len()) as u64 + ENTRY_OVERHEAD
                > self.opts.entry_log_size
                && self.log_len + self.buf_log.len() as u64 > 0
            {
                self.flush_copies(&mut batch)?;
                self.roll_log()?;
            }
            let new = self.stage_entry(ledger, entry, &bytes::Bytes::from(data));
            batch.push((ledger, entry, lac, new));
            if self.buf_log.len() >= BATCH {
                self.flush_copies(&mut batch)?;
            }
        }
        self.flush_copies(&mut batch)
    }

    /// Writes the staged copies and moves the index to them.
    fn flush_copies(&mut self, batch: &mut Vec<(i64, i64, i64, Loc)>) -> Result<()> {
        if self.buf_log.is_empty() {
            return Ok(());
        }
        if let Err(e) = self.log.write_all(&self.buf_log) {
            // Cut the partial write so later offsets stay right.
            let _ = self.log.set_len(self.log_len);
            self.buf_log.clear();
            batch.clear();
            return Err(StorageError::io("append entry log (compaction)", e));
        }
        self.log_len += self.buf_log.len() as u64;
        self.buf_log.clear();
        let mut index = self.shared.index.write().unwrap_or_else(|p| p.into_inner());
        for (ledger, entry, lac, new) in batch.drain(..) {
            // This thread is the index's only writer: nothing moved since the entries were
            // listed.
            if let Some(l) = index.ledgers.get_mut(&ledger) {
                if let Some(loc) = l.entries.get_mut(&entry) {
                    *loc = new;
                    put_index_loc(&mut self.pending_index, ledger, entry, lac, new);
                    self.shared.gc.copied.fetch_add(1, Relaxed);
                }
            }
        }
        Ok(())
    }
}
