//! The journal thread's side of the file store: appends to the journal and entry logs, the
//! index updates after each sync, checkpoints.

use std::fs::{self, File};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use bytes::{BufMut, Bytes, BytesMut};

use super::layout::{entry_log_name, journal_name, numbered, open_append, sync_dir, Checkpoint};
use super::{FileStorageOptions, FsyncMode, Loc, Shared};
use crate::protocol::entry::MasterKey;
use crate::storage::journal::{self, Sink, TYPE_LOC};
use crate::storage::{Record, Result, StorageError};

/// The journal thread's side: files being appended.
pub(super) struct FileSink {
    pub(super) shared: Arc<Shared>,
    pub(super) opts: FileStorageOptions,
    pub(super) ledger_cur: PathBuf,
    pub(super) journal_cur: PathBuf,
    pub(super) journal: File,
    pub(super) journal_seq: u64,
    pub(super) journal_len: u64,
    pub(super) since_checkpoint: u64,
    pub(super) log: File,
    pub(super) log_id: u32,
    pub(super) log_len: u64,
    pub(super) index_log: File,
    pub(super) index_len: u64,
    pub(super) index_gen: u64,
    /// Index records not yet in `index.log`.
    pub(super) pending_index: BytesMut,
    /// Locations computed by the last `write`, applied by `publish`.
    pub(super) staged: Vec<Loc>,
    pub(super) buf_journal: BytesMut,
    pub(super) buf_log: BytesMut,
}

pub(super) fn put_index_key(b: &mut BytesMut, ledger_id: i64, key: &MasterKey) {
    journal::encode_record(
        &Record::Key {
            ledger_id,
            master_key: *key,
        },
        b,
    );
}

pub(super) fn put_index_loc(b: &mut BytesMut, ledger_id: i64, entry_id: i64, lac: i64, loc: Loc) {
    journal::put_record(b, |b| {
        b.put_u8(TYPE_LOC);
        b.put_i64(ledger_id);
        b.put_i64(entry_id);
        b.put_i64(lac);
        b.put_u32(loc.log);
        b.put_u64(loc.offset);
        b.put_u32(loc.len);
    });
}

impl FileSink {
    pub(super) fn roll_log(&mut self) -> Result<()> {
        if self.opts.fsync == FsyncMode::Always {
            self.log
                .sync_data()
                .map_err(|e| StorageError::io("fsync entry log", e))?;
        }
        let id = self.log_id + 1;
        let path = self.ledger_cur.join(entry_log_name(id));
        let (f, len) = open_append(&path)?;
        let read = f
            .try_clone()
            .map_err(|e| StorageError::io("clone entry log handle", e))?;
        self.shared
            .logs
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, Arc::new(read));
        self.log = f;
        self.log_id = id;
        self.log_len = len;
        Ok(())
    }

    /// Appends one entry to the entry log buffer; returns its location.
    pub(super) fn stage_entry(&mut self, ledger_id: i64, entry_id: i64, entry: &Bytes) -> Loc {
        let offset = self.log_len + self.buf_log.len() as u64 + 20;
        self.buf_log
            .put_u32(u32::try_from(entry.len()).unwrap_or(u32::MAX));
        self.buf_log.put_i64(ledger_id);
        self.buf_log.put_i64(entry_id);
        self.buf_log.put_slice(entry);
        Loc {
            log: self.log_id,
            offset,
            len: u32::try_from(entry.len()).unwrap_or(u32::MAX),
        }
    }

    pub(super) fn apply(&mut self, record: &Record, loc: Option<Loc>) {
        let mut index = self.shared.index.write().unwrap_or_else(|p| p.into_inner());
        match record {
            Record::Key {
                ledger_id,
                master_key,
            } => {
                if index.key(*ledger_id, *master_key) {
                    put_index_key(&mut self.pending_index, *ledger_id, master_key);
                }
            }
            Record::Fence { ledger_id } => {
                if let Some(l) = index.ledgers.get_mut(ledger_id) {
                    if !l.fenced {
                        l.fenced = true;
                        journal::encode_record(record, &mut self.pending_index);
                    }
                }
            }
            Record::Delete { ledger_id } => {
                if index.ledgers.remove(ledger_id).is_some() {
                    journal::encode_record(record, &mut self.pending_index);
                }
            }
            Record::Add {
                ledger_id,
                entry_id,
                lac,
                ..
            } => {
                if let (Some(l), Some(loc)) = (index.ledgers.get_mut(ledger_id), loc) {
                    l.entries.insert(*entry_id, loc);
                    l.lac = l.lac.max(*lac);
                    l.adds += 1;
                    put_index_loc(&mut self.pending_index, *ledger_id, *entry_id, *lac, loc);
                }
            }
        }
    }

    pub(super) fn rollback(&mut self) {
        // Cut both files back to where the round began; if even that fails, the next write
        // appends after garbage, which recovery would call corruption: poison instead.
        let j = self.journal.set_len(self.journal_len);
        let l = self.log.set_len(self.log_len);
        if let Err(e) = j.and(l) {
            tracing::error!(error = %e, "cannot roll back a failed journal write");
        }
    }

    pub(super) fn do_checkpoint(&mut self) -> Result<()> {
        let always = self.opts.fsync == FsyncMode::Always;
        if always {
            self.log
                .sync_data()
                .map_err(|e| StorageError::io("fsync entry log", e))?;
        }
        if !self.pending_index.is_empty() {
            if let Err(e) = self.index_log.write_all(&self.pending_index) {
                let _ = self.index_log.set_len(self.index_len);
                return Err(StorageError::io("append index log", e));
            }
            if always {
                self.index_log
                    .sync_data()
                    .map_err(|e| StorageError::io("fsync index log", e))?;
            }
            self.index_len += self.pending_index.len() as u64;
            self.pending_index.clear();
        }
        // A new journal file, so every older one can go.
        let seq = self.journal_seq + 1;
        let path = self.journal_cur.join(journal_name(seq));
        let (f, len) = open_append(&path)?;
        sync_dir(&self.journal_cur)?;
        if always {
            self.journal
                .sync_data()
                .map_err(|e| StorageError::io("fsync journal", e))?;
        }
        self.journal = f;
        self.journal_seq = seq;
        self.journal_len = len;
        let cp = Checkpoint {
            journal_seq: seq,
            index_len: self.index_len,
            index_gen: self.index_gen,
            log_id: self.log_id,
            log_len: self.log_len,
        };
        let tmp = self.ledger_cur.join("checkpoint.tmp");
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(&cp.encode())?;
            f.sync_all()?;
            fs::rename(&tmp, self.ledger_cur.join("checkpoint"))
        };
        write().map_err(|e| StorageError::io("write the checkpoint", e))?;
        sync_dir(&self.ledger_cur)?;
        self.since_checkpoint = 0;
        for (old, path) in numbered(&self.journal_cur, "journal-")? {
            if old < seq {
                fs::remove_file(&path)
                    .map_err(|e| StorageError::io(format!("trim {}", path.display()), e))?;
            }
        }
        sync_dir(&self.journal_cur)?;
        self.shared.checkpoints.fetch_add(1, Relaxed);
        Ok(())
    }
}

impl Sink for FileSink {
    fn write(&mut self, jobs: &[Vec<Record>]) -> Result<()> {
        self.buf_journal.clear();
        self.buf_log.clear();
        self.staged.clear();
        for r in jobs.iter().flatten() {
            journal::encode_record(r, &mut self.buf_journal);
        }
        let adds = jobs.iter().flatten().filter_map(|r| match r {
            Record::Add {
                ledger_id,
                entry_id,
                entry,
                ..
            } => Some((*ledger_id, *entry_id, entry.len())),
            _ => None,
        });
        let bytes: u64 = adds.clone().map(|(_, _, n)| n as u64 + 20).sum();
        if self.log_len > 0 && self.log_len + bytes > self.opts.entry_log_size {
            self.roll_log()?;
        }
        for r in jobs.iter().flatten() {
            if let Record::Add {
                ledger_id,
                entry_id,
                entry,
                ..
            } = r
            {
                let loc = self.stage_entry(*ledger_id, *entry_id, entry);
                self.staged.push(loc);
            }
        }
        let written = self
            .journal
            .write_all(&self.buf_journal)
            .map_err(|e| StorageError::io("append journal", e))
            .and_then(|()| {
                self.log
                    .write_all(&self.buf_log)
                    .map_err(|e| StorageError::io("append entry log", e))
            });
        if let Err(e) = written {
            self.rollback();
            return Err(e);
        }
        self.journal_len += self.buf_journal.len() as u64;
        self.since_checkpoint += self.buf_journal.len() as u64;
        self.log_len += self.buf_log.len() as u64;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        if self.opts.fsync == FsyncMode::Never {
            return Ok(());
        }
        let start = Instant::now();
        self.journal
            .sync_data()
            .map_err(|e| StorageError::io("fsync journal", e))?;
        self.shared
            .fsyncs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .observe(start.elapsed());
        Ok(())
    }

    fn publish(&mut self, jobs: Vec<Vec<Record>>) {
        let staged = std::mem::take(&mut self.staged);
        let mut locs = staged.into_iter();
        for r in jobs.iter().flatten() {
            let loc = match r {
                Record::Add { .. } => locs.next(),
                _ => None,
            };
            self.apply(r, loc);
        }
    }

    fn collect_garbage(&mut self) -> Result<()> {
        FileSink::collect_garbage(self)
    }

    fn checkpoint(&mut self, forced: bool) -> Result<()> {
        if self.since_checkpoint == 0 && self.pending_index.is_empty() {
            // Nothing written since the last checkpoint.
            return Ok(());
        }
        if forced || self.since_checkpoint >= self.opts.checkpoint_bytes {
            self.do_checkpoint()
        } else {
            Ok(())
        }
    }
}
