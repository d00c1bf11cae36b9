//! [`FileStorage`]: the bookie's files, as BookKeeper's interleaved ledger storage lays them out.
//!
//! ```text
//! JOURNAL_DIR/current/journal-<seq:016x>.log   journal records (see `journal`), group-committed
//! LEDGER_DIR/current/entrylog-<id:08x>.log     entry logs: [len u32][ledger i64][entry i64][entry]
//! LEDGER_DIR/current/index.log                 index records: key, fence, location of each entry
//! LEDGER_DIR/current/checkpoint                the last checkpoint (journal seq, index and entry
//!                                              log lengths), replaced atomically
//! ```
//!
//! An add is written to the journal and to the current entry log in the same round; only the
//! journal is fdatasynced before the add is acknowledged (BookKeeper's `Journal` +
//! `EntryLogger`). The in-memory index (ledger, entry → entry log, offset) is updated after that
//! sync, so a read sees only durable entries. A checkpoint (BookKeeper's `SyncThread`) fsyncs
//! the entry log, appends the index changes to `index.log`, starts a new journal file, writes
//! the checkpoint file (temp file, fsync, rename, fsync dir) and deletes the journal files
//! before it. Recovery loads the index log up to the checkpoint, cuts the entry logs back to the
//! checkpoint, and replays the journal from there; a torn journal tail is cut, a corrupt record
//! refuses to open with the file and offset named.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::journal::{self, GroupCommit, ScanEnd, Sink, TYPE_LOC};
use super::{
    Commit, DiskUsage, Record, RecoveredLedger, Result, Storage, StorageError, StorageStats,
};
use crate::metrics::Histogram;
use crate::protocol::entry::{MasterKey, MASTER_KEY_LEN};

/// When the journal is fdatasynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncMode {
    /// Before every acknowledgement (group-committed).
    Always,
    /// Never: an add is acknowledged once written to the page cache. Survives kill -9, not a
    /// power loss. For tests and benchmarks.
    Never,
}

/// Tuning for [`FileStorage`].
#[derive(Debug, Clone)]
pub struct FileStorageOptions {
    /// Journal sync policy.
    pub fsync: FsyncMode,
    /// An entry log is closed and a new one started past this size.
    pub entry_log_size: u64,
    /// A checkpoint runs once this many journal bytes were written since the last one.
    pub checkpoint_bytes: u64,
}

impl Default for FileStorageOptions {
    fn default() -> Self {
        FileStorageOptions {
            fsync: FsyncMode::Always,
            entry_log_size: 256 << 20,
            checkpoint_bytes: 64 << 20,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Loc {
    log: u32,
    offset: u64,
    len: u32,
}

#[derive(Debug)]
struct LedgerIndex {
    key: MasterKey,
    fenced: bool,
    lac: i64,
    entries: BTreeMap<i64, Loc>,
    adds: u64,
}

#[derive(Debug, Default)]
struct Index {
    ledgers: HashMap<i64, LedgerIndex>,
}

impl Index {
    fn key(&mut self, ledger_id: i64, key: MasterKey) -> bool {
        let mut new = false;
        self.ledgers.entry(ledger_id).or_insert_with(|| {
            new = true;
            LedgerIndex {
                key,
                fenced: false,
                lac: -1,
                entries: BTreeMap::new(),
                adds: 0,
            }
        });
        new
    }
}

/// State shared by the journal thread and readers.
#[derive(Debug, Default)]
struct Shared {
    index: RwLock<Index>,
    logs: RwLock<HashMap<u32, Arc<File>>>,
    fsyncs: Mutex<Histogram>,
    checkpoints: AtomicU64,
}

/// The file store. See the module docs.
#[derive(Debug)]
pub struct FileStorage {
    journal: GroupCommit,
    shared: Arc<Shared>,
    recovered: Vec<RecoveredLedger>,
    ledger_dir: PathBuf,
    journal_dir: PathBuf,
}

/// `DIR/current`, where the bookie keeps its files (and the cookie, `VERSION`).
pub fn current_dir(dir: &Path) -> PathBuf {
    dir.join("current")
}

fn journal_name(seq: u64) -> String {
    format!("journal-{seq:016x}.log")
}

fn entry_log_name(id: u32) -> String {
    format!("entrylog-{id:08x}.log")
}

/// Files named `prefix<hex>.log` in `dir`, by number.
fn numbered(dir: &Path, prefix: &str) -> Result<BTreeMap<u64, PathBuf>> {
    let mut out = BTreeMap::new();
    let rd =
        fs::read_dir(dir).map_err(|e| StorageError::io(format!("list {}", dir.display()), e))?;
    for ent in rd {
        let ent = ent.map_err(|e| StorageError::io(format!("list {}", dir.display()), e))?;
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        if let Some(hex) = name
            .strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(".log"))
        {
            if let Ok(n) = u64::from_str_radix(hex, 16) {
                out.insert(n, ent.path());
            }
        }
    }
    Ok(out)
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StorageError::io(format!("fsync dir {}", dir.display()), e))
}

fn open_append(path: &Path) -> Result<(File, u64)> {
    let f = OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .open(path)
        .map_err(|e| StorageError::io(format!("open {}", path.display()), e))?;
    let len = f
        .metadata()
        .map_err(|e| StorageError::io(format!("stat {}", path.display()), e))?
        .len();
    Ok((f, len))
}

fn corrupt(file: &Path, offset: u64, reason: impl Into<String>) -> StorageError {
    StorageError::Corrupt {
        file: file.to_path_buf(),
        offset,
        reason: reason.into(),
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Checkpoint {
    journal_seq: u64,
    index_len: u64,
    log_id: u32,
    log_len: u64,
}

const CHECKPOINT_MAGIC: &[u8; 8] = b"ZKBCKPT1";

impl Checkpoint {
    fn encode(&self) -> Vec<u8> {
        let mut b = BytesMut::new();
        b.put_slice(CHECKPOINT_MAGIC);
        b.put_u64(self.journal_seq);
        b.put_u64(self.index_len);
        b.put_u32(self.log_id);
        b.put_u64(self.log_len);
        let crc = crc32c::crc32c(&b);
        b.put_u32(crc);
        b.to_vec()
    }

    fn read(path: &Path) -> Result<Option<Checkpoint>> {
        let data = match fs::read(path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StorageError::io(format!("read {}", path.display()), e)),
        };
        if data.len() != 40 || &data[..8] != CHECKPOINT_MAGIC {
            return Err(corrupt(path, 0, "not a checkpoint file"));
        }
        let crc = u32::from_be_bytes([data[36], data[37], data[38], data[39]]);
        if crc32c::crc32c(&data[..36]) != crc {
            return Err(corrupt(path, 36, "checkpoint checksum mismatch"));
        }
        let mut b = &data[8..36];
        Ok(Some(Checkpoint {
            journal_seq: b.get_u64(),
            index_len: b.get_u64(),
            log_id: b.get_u32(),
            log_len: b.get_u64(),
        }))
    }
}

/// The journal thread's side: files being appended.
struct FileSink {
    shared: Arc<Shared>,
    opts: FileStorageOptions,
    ledger_cur: PathBuf,
    journal_cur: PathBuf,
    journal: File,
    journal_seq: u64,
    journal_len: u64,
    since_checkpoint: u64,
    log: File,
    log_id: u32,
    log_len: u64,
    index_log: File,
    index_len: u64,
    /// Index records not yet in `index.log`.
    pending_index: BytesMut,
    /// Locations computed by the last `write`, applied by `publish`.
    staged: Vec<Loc>,
    buf_journal: BytesMut,
    buf_log: BytesMut,
}

fn put_index_key(b: &mut BytesMut, ledger_id: i64, key: &MasterKey) {
    journal::encode_record(
        &Record::Key {
            ledger_id,
            master_key: *key,
        },
        b,
    );
}

fn put_index_loc(b: &mut BytesMut, ledger_id: i64, entry_id: i64, lac: i64, loc: Loc) {
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
    fn roll_log(&mut self) -> Result<()> {
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
    fn stage_entry(&mut self, ledger_id: i64, entry_id: i64, entry: &Bytes) -> Loc {
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

    fn apply(&mut self, record: &Record, loc: Option<Loc>) {
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

    fn rollback(&mut self) {
        // Cut both files back to where the round began; if even that fails, the next write
        // appends after garbage, which recovery would call corruption: poison instead.
        let j = self.journal.set_len(self.journal_len);
        let l = self.log.set_len(self.log_len);
        if let Err(e) = j.and(l) {
            tracing::error!(error = %e, "cannot roll back a failed journal write");
        }
    }

    fn do_checkpoint(&mut self) -> Result<()> {
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
        let index_path = ledger_cur.join("index.log");
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
            let mut v: Vec<RecoveredLedger> = index
                .ledgers
                .iter()
                .map(|(id, l)| RecoveredLedger {
                    ledger_id: *id,
                    master_key: l.key,
                    fenced: l.fenced,
                    lac: l.lac,
                    last_entry: l.entries.keys().next_back().copied().unwrap_or(-1),
                    entries: l.adds,
                })
                .collect();
            v.sort_by_key(|r| r.ledger_id);
            v
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
fn replay_round(sink: &mut FileSink, records: Vec<Record>) -> Result<()> {
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

fn flush_log_buf(sink: &mut FileSink) -> Result<()> {
    sink.log
        .write_all(&sink.buf_log)
        .map_err(|e| StorageError::io("append entry log", e))?;
    sink.log_len += sink.buf_log.len() as u64;
    sink.buf_log.clear();
    Ok(())
}

fn apply_index_record(
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
        Record::Add { .. } => return Err("entry record in the index log"),
    }
    Ok(())
}

fn dir_bytes(dir: &Path) -> u64 {
    fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.metadata().ok())
                .filter(|m| m.is_file())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

impl Storage for FileStorage {
    fn submit(&self, records: Vec<Record>) -> Commit {
        self.journal.submit(records)
    }

    fn read(&self, ledger_id: i64, entry_id: i64) -> Result<Option<Bytes>> {
        let loc = {
            let index = self.shared.index.read().unwrap_or_else(|p| p.into_inner());
            match index
                .ledgers
                .get(&ledger_id)
                .and_then(|l| l.entries.get(&entry_id))
            {
                Some(loc) => *loc,
                None => return Ok(None),
            }
        };
        let file = self
            .shared
            .logs
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(&loc.log)
            .cloned()
            .ok_or_else(|| StorageError::Corrupt {
                file: current_dir(&self.ledger_dir).join(entry_log_name(loc.log)),
                offset: loc.offset,
                reason: "entry log missing".into(),
            })?;
        let mut buf = vec![0u8; loc.len as usize];
        file.read_exact_at(&mut buf, loc.offset)
            .map_err(|e| StorageError::io(format!("read entry log {:08x}", loc.log), e))?;
        Ok(Some(Bytes::from(buf)))
    }

    fn checkpoint(&self) -> Commit {
        self.journal.checkpoint()
    }

    fn recovered(&self) -> Vec<RecoveredLedger> {
        self.recovered.clone()
    }

    fn disk_usage(&self) -> DiskUsage {
        let stats = fs4::statvfs(&self.ledger_dir).ok();
        let ledger_cur = current_dir(&self.ledger_dir);
        let journal_cur = current_dir(&self.journal_dir);
        let mut used = dir_bytes(&ledger_cur);
        if journal_cur != ledger_cur {
            used += dir_bytes(&journal_cur);
        }
        DiskUsage {
            free_bytes: stats.as_ref().map_or(0, |s| s.available_space()),
            total_bytes: stats.as_ref().map_or(0, |s| s.total_space()),
            used_bytes: used,
        }
    }

    fn stats(&self) -> StorageStats {
        StorageStats {
            fsync: self
                .shared
                .fsyncs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            checkpoints: self.shared.checkpoints.load(Relaxed),
        }
    }

    fn shutdown(&self) {
        self.journal.shutdown();
    }
}

// Keep the key length in sync with the index record layout above.
const _: () = assert!(MASTER_KEY_LEN == 32);
