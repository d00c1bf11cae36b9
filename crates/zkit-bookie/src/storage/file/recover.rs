//! Opening the file store: the index log and entry logs back to the checkpoint, then a journal
//! replay.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};

use super::layout::{
    corrupt, entry_log_name, index_name, journal_name, numbered, open_append, sync_dir, Checkpoint,
};
use super::sink::FileSink;
use super::{current_dir, FileStorage, FileStorageOptions, FsyncMode, Index, Loc, Shared};
use crate::storage::journal::{self, GroupCommit, ScanEnd, Sink, TYPE_LOC};
use crate::storage::{recovered_of, Record, Result, StorageError};

impl FileStorage {
    /// Opens (creating if needed) and recovers the store in `ledger_dir` with its journal in
    /// `journal_dir` (may be the same directory). Blocks on disk I/O.
    ///
    /// # Errors
    /// [`StorageError::Corrupt`] naming the file and offset when a journal or index record in
    /// the middle fails its checksum or a file the checkpoint names is missing or short;
    /// [`StorageError::Io`] / [`StorageError::DiskFull`] on I/O failure.
    pub fn open(
        ledger_dir: &Path,
        journal_dir: &Path,
        opts: FileStorageOptions,
    ) -> Result<FileStorage> {
        let ledger_cur = current_dir(ledger_dir);
        let journal_cur = current_dir(journal_dir);
        for d in [&ledger_cur, &journal_cur] {
            fs::create_dir_all(d)
                .map_err(|e| StorageError::io(format!("create {}", d.display()), e))?;
        }
        let cp = Checkpoint::read(&ledger_cur.join("checkpoint"))?.unwrap_or_default();
        let shared = Arc::new(Shared::default());

        // The index log, up to the checkpoint.
        let index_path = ledger_cur.join(index_name(cp.index_gen));
        // Index files of other generations: an older one the checkpoint replaced, or a
        // rewrite that a crash interrupted before its checkpoint.
        for ent in fs::read_dir(&ledger_cur)
            .map_err(|e| StorageError::io(format!("list {}", ledger_cur.display()), e))?
            .flatten()
        {
            let name = ent.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("index")
                && name.ends_with(".log")
                && *name != *index_name(cp.index_gen)
            {
                fs::remove_file(ent.path())
                    .map_err(|e| StorageError::io(format!("remove {name}"), e))?;
            }
        }
        let (index_log, len) = open_append(&index_path)?;
        if len < cp.index_len {
            return Err(corrupt(
                &index_path,
                len,
                format!("shorter than the checkpointed {} bytes", cp.index_len),
            ));
        }
        if len > cp.index_len {
            index_log
                .set_len(cp.index_len)
                .map_err(|e| StorageError::io("cut the index log back to the checkpoint", e))?;
        }
        let data = Bytes::from(
            fs::read(&index_path).map_err(|e| StorageError::io("read the index log", e))?,
        );
        let (records, end) = journal::scan(&data);
        match end {
            ScanEnd::Clean => {}
            ScanEnd::Torn(at) => return Err(corrupt(&index_path, at, "incomplete index record")),
            ScanEnd::Corrupt(at, why) => return Err(corrupt(&index_path, at, why)),
        }
        {
            let mut index = shared.index.write().unwrap_or_else(|p| p.into_inner());
            for (at, payload) in records {
                apply_index_record(&mut index, payload)
                    .map_err(|why| corrupt(&index_path, at, why))?;
            }
        }

        // Entry logs: what the checkpoint covers stays; later bytes come back from the journal.
        let logs = numbered(&ledger_cur, "entrylog-")?;
        for (&id, path) in &logs {
            let id32 = u32::try_from(id).unwrap_or(u32::MAX);
            if id32 > cp.log_id {
                fs::remove_file(path)
                    .map_err(|e| StorageError::io(format!("remove {}", path.display()), e))?;
            }
        }
        let log_path = ledger_cur.join(entry_log_name(cp.log_id));
        let (log, log_len) = open_append(&log_path)?;
        if log_len < cp.log_len {
            return Err(corrupt(
                &log_path,
                log_len,
                format!("shorter than the checkpointed {} bytes", cp.log_len),
            ));
        }
        log.set_len(cp.log_len)
            .map_err(|e| StorageError::io("cut the entry log back to the checkpoint", e))?;
        {
            let mut handles = shared.logs.write().unwrap_or_else(|p| p.into_inner());
            for (&id, path) in &logs {
                let id32 = u32::try_from(id).unwrap_or(u32::MAX);
                if id32 <= cp.log_id {
                    let f = File::open(path)
                        .map_err(|e| StorageError::io(format!("open {}", path.display()), e))?;
                    handles.insert(id32, Arc::new(f));
                }
            }
            let read = log
                .try_clone()
                .map_err(|e| StorageError::io("clone entry log handle", e))?;
            handles.insert(cp.log_id, Arc::new(read));
        }

        // Journal files: older than the checkpoint are trimmed; the rest are replayed.
        let journals = numbered(&journal_cur, "journal-")?;
        let mut replay = Vec::new();
        for (seq, path) in journals {
            if seq < cp.journal_seq {
                fs::remove_file(&path)
                    .map_err(|e| StorageError::io(format!("trim {}", path.display()), e))?;
            } else {
                replay.push((seq, path));
            }
        }
        for (i, (seq, _)) in replay.iter().enumerate() {
            if *seq != cp.journal_seq + i as u64 {
                return Err(corrupt(
                    &journal_cur.join(journal_name(cp.journal_seq + i as u64)),
                    0,
                    "journal file missing (the sequence has a gap)",
                ));
            }
        }
        if cp != Checkpoint::default() && replay.is_empty() {
            return Err(corrupt(
                &journal_cur.join(journal_name(cp.journal_seq)),
                0,
                "the journal file the checkpoint names is missing",
            ));
        }

        let (journal, journal_seq, journal_len) = match replay.last() {
            Some((seq, path)) => {
                let (f, len) = open_append(path)?;
                (f, *seq, len)
            }
            None => {
                let path = journal_cur.join(journal_name(cp.journal_seq));
                let (f, len) = open_append(&path)?;
                sync_dir(&journal_cur)?;
                (f, cp.journal_seq, len)
            }
        };
        let mut sink = FileSink {
            shared: Arc::clone(&shared),
            opts,
            ledger_cur: ledger_cur.clone(),
            journal_cur: journal_cur.clone(),
            journal,
            journal_seq,
            journal_len,
            since_checkpoint: 0,
            log,
            log_id: cp.log_id,
            log_len: cp.log_len,
            index_log,
            index_len: cp.index_len,
            index_gen: cp.index_gen,
            pending_index: BytesMut::new(),
            staged: Vec::new(),
            buf_journal: BytesMut::new(),
            buf_log: BytesMut::new(),
        };
        let last = replay.len().saturating_sub(1);
        let mut replayed = 0u64;
        for (i, (_, path)) in replay.iter().enumerate() {
            let data = Bytes::from(
                fs::read(path)
                    .map_err(|e| StorageError::io(format!("read {}", path.display()), e))?,
            );
            let (records, end) = journal::scan(&data);
            let mut batch = Vec::with_capacity(records.len());
            for (at, payload) in records {
                let record =
                    journal::decode_record(payload).map_err(|why| corrupt(path, at, why))?;
                if let Record::Add { ledger_id, .. } = &record {
                    let known = batch
                        .iter()
                        .any(|r| matches!(r, Record::Key { ledger_id: k, .. } if k == ledger_id))
                        || shared
                            .index
                            .read()
                            .unwrap_or_else(|p| p.into_inner())
                            .ledgers
                            .contains_key(ledger_id);
                    if !known {
                        return Err(corrupt(path, at, "entry of a ledger with no key record"));
                    }
                }
                batch.push(record);
                // Replay in bounded rounds so a long journal does not sit in one buffer.
                if batch.len() >= 4096 {
                    replay_round(&mut sink, std::mem::take(&mut batch))?;
                }
            }
            replay_round(&mut sink, batch)?;
            replayed += data.len() as u64;
            match end {
                ScanEnd::Clean => {}
                ScanEnd::Torn(at) if i == last => {
                    tracing::warn!(file = %path.display(), offset = at, "cutting a torn journal tail");
                    let f = OpenOptions::new()
                        .write(true)
                        .open(path)
                        .map_err(|e| StorageError::io(format!("open {}", path.display()), e))?;
                    f.set_len(at)
                        .and_then(|()| match sink.opts.fsync {
                            FsyncMode::Always => f.sync_all(),
                            FsyncMode::Never => Ok(()),
                        })
                        .map_err(|e| StorageError::io("cut the torn journal tail", e))?;
                    sink.journal_len = at;
                }
                ScanEnd::Torn(at) => {
                    return Err(corrupt(
                        path,
                        at,
                        "incomplete record before the last journal file",
                    ))
                }
                ScanEnd::Corrupt(at, why) => return Err(corrupt(path, at, why)),
            }
        }
        // Replayed entries were re-appended to the entry log (not synced: the journal still
        // holds them). Rewrites of the journal must not happen: only the entry log was written.
        sink.since_checkpoint = replayed;
        let recovered = {
            let index = shared.index.read().unwrap_or_else(|p| p.into_inner());
            recovered_of(&index.ledgers)
        };
        let journal = GroupCommit::start(sink, "zkit-bookie-journal")?;
        Ok(FileStorage {
            journal,
            shared,
            recovered,
            ledger_dir: ledger_dir.to_path_buf(),
            journal_dir: journal_dir.to_path_buf(),
        })
    }
}

/// Re-applies replayed journal records: entries go to the entry log (not the journal again).
pub(super) fn replay_round(sink: &mut FileSink, records: Vec<Record>) -> Result<()> {
    sink.buf_log.clear();
    sink.staged.clear();
    for r in &records {
        if let Record::Add {
            ledger_id,
            entry_id,
            entry,
            ..
        } = r
        {
            if sink.log_len > 0
                && sink.log_len + sink.buf_log.len() as u64 > sink.opts.entry_log_size
            {
                flush_log_buf(sink)?;
                sink.roll_log()?;
            }
            let loc = sink.stage_entry(*ledger_id, *entry_id, entry);
            sink.staged.push(loc);
        }
    }
    flush_log_buf(sink)?;
    sink.publish(vec![records]);
    Ok(())
}

pub(super) fn flush_log_buf(sink: &mut FileSink) -> Result<()> {
    sink.log
        .write_all(&sink.buf_log)
        .map_err(|e| StorageError::io("append entry log", e))?;
    sink.log_len += sink.buf_log.len() as u64;
    sink.buf_log.clear();
    Ok(())
}

pub(super) fn apply_index_record(
    index: &mut Index,
    mut payload: Bytes,
) -> std::result::Result<(), &'static str> {
    if payload.first() == Some(&TYPE_LOC) {
        if payload.len() != 1 + 8 + 8 + 8 + 4 + 8 + 4 {
            return Err("bad location record");
        }
        payload.advance(1);
        let ledger_id = payload.get_i64();
        let entry_id = payload.get_i64();
        let lac = payload.get_i64();
        let loc = Loc {
            log: payload.get_u32(),
            offset: payload.get_u64(),
            len: payload.get_u32(),
        };
        let l = index
            .ledgers
            .get_mut(&ledger_id)
            .ok_or("location of a ledger with no key record")?;
        l.entries.insert(entry_id, loc);
        l.lac = l.lac.max(lac);
        l.adds += 1;
        return Ok(());
    }
    match journal::decode_record(payload)? {
        Record::Key {
            ledger_id,
            master_key,
        } => {
            index.key(ledger_id, master_key);
        }
        Record::Fence { ledger_id } => {
            index
                .ledgers
                .get_mut(&ledger_id)
                .ok_or("fence of a ledger with no key record")?
                .fenced = true;
        }
        Record::Delete { ledger_id } => {
            index.ledgers.remove(&ledger_id);
        }
        Record::Add { .. } => return Err("entry record in the index log"),
    }
    Ok(())
}
