//! The write-ahead log: append-only, checksummed, pre-allocated segment files.
//!
//! Records are opaque payloads (the shell puts encoded txns in them) tagged with their zxid.
//! Layout, all integers little-endian:
//!
//! ```text
//! DIR/wal-%016x.log      named by the zxid of its first record
//!   header  16 bytes     magic "ZKWL" | version u32 = 1 | first zxid i64 (same as the name)
//!   record  8 + len      len u32 | crc32c u32 | zxid i64 | payload
//!                        len = 8 + payload length (so a valid len is never 0)
//!                        crc32c covers the zxid bytes and the payload
//!   zeros                the pre-allocated rest of the segment; a len of 0 means "end"
//! ```
//!
//! Segments are pre-allocated with `fallocate` (so a full disk fails at roll time, not in the middle
//! of a record) and rolled when the next record does not fit in `segment_size`. A new segment is
//! made as `….log.tmp`, its header fsynced, then renamed and the directory fsynced, so a segment
//! that is visible always has a valid header.
//!
//! Writes come from a single writer: [`Wal::append_batch`] encodes and writes a batch with
//! positional writes, [`Wal::sync`] fdatasyncs it. A caller acknowledges a record only after the
//! `sync` that follows its `append_batch` returned `Ok`. Any write or fsync error poisons the log:
//! after a failed fsync the page cache cannot be trusted (the PostgreSQL "fsyncgate" lesson), so
//! the only way on is to reopen, which re-reads what is really on disk. See `commit` for the
//! group-commit thread that drives this from async code.
//!
//! [`Wal::open`] reads the last segment whole and repairs the torn tail a crash can leave; of the
//! earlier segments it checks only the headers (every segment with `truncate_corrupt`). Their
//! records are checked one by one when they are read ([`Wal::read_from`]), with the same rules, so
//! a recovery reads the log it replays once and never the log older than its snapshot. What counts
//! as torn, at the first bad record at offset X of the *last* segment:
//! - no valid record (length, checksum and increasing zxid all right) starts anywhere after X:
//!   a crash mid-write, a short file or a damaged final record look alike and are truncated; or
//! - the header at X is all zeros up to its sector's end while valid data follows: a sector that
//!   was never written back before power loss, with later sectors of the same unsynced batch on
//!   disk (the torn-write rule etcd uses). Those later records were never acknowledged; or
//! - a whole zero sector overlaps the bad record before the file's last non-zero byte: the same
//!   kind of hole, starting inside the record. (A payload holding 512 aligned zero bytes that is
//!   also hit by bit rot would be taken for torn: an accepted, logged risk.)
//!
//! Everything else — a bad record followed by valid ones, or any bad record in an earlier segment
//! — is [`StorageError::Corruption`] naming file and offset: from `open` for the last segment, a
//! bad header or (with `truncate_corrupt`) anything, from the reader for the records of an earlier
//! segment. With `truncate_corrupt`, `open` cuts the log there instead (later segments deleted)
//! with an error-level log line.
//! This module knows nothing about txns, sessions or the tree.

use std::fs::{self, File, OpenOptions};
use std::io::Read as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use super::datadir::sync_dir;
use super::error::{IoContext, Result, StorageError};

mod segment;

#[cfg(feature = "failpoints")]
use super::failpoint;
use segment::{check_header, list_segments, remove_file, scan, segment_header, Scan, Stop};
pub use segment::{
    encode_record, segment_name, SegmentInfo, MAX_PAYLOAD_LEN, RECORD_HEADER_LEN,
    SEGMENT_HEADER_LEN, SEGMENT_MAGIC, SEGMENT_VERSION,
};

/// Default segment size: 64 MiB, as ZooKeeper's preAllocSize.
pub const DEFAULT_SEGMENT_SIZE: u64 = 64 << 20;

/// An fdatasync at least this long is logged (at debug), to find latency spikes.
const SLOW_FSYNC: std::time::Duration = std::time::Duration::from_millis(50);

/// Whether appended records are fdatasynced before `sync` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FsyncMode {
    /// fdatasync on every `sync`: acknowledged writes survive power loss.
    #[default]
    Always,
    /// Never fsync (`--fsync never`): for tests and benchmarks that say so. Survives a process
    /// crash (the page cache keeps the data) but not power loss.
    Never,
}

/// How a [`Wal`] is opened.
#[derive(Debug, Clone)]
pub struct WalOptions {
    /// Segment size in bytes; segments are pre-allocated to it and rolled when full.
    pub segment_size: u64,
    /// fsync policy.
    pub fsync: FsyncMode,
    /// Cut the log at corruption instead of refusing to open (`--truncate-corrupt`).
    pub truncate_corrupt: bool,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            segment_size: DEFAULT_SEGMENT_SIZE,
            fsync: FsyncMode::Always,
            truncate_corrupt: false,
        }
    }
}

/// A repair that [`Wal::open`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Truncation {
    /// The segment cut.
    pub file: PathBuf,
    /// Where it was cut (the offset of the first bad record).
    pub offset: u64,
    /// What was wrong there.
    pub reason: String,
    /// False for a torn tail; true when `truncate_corrupt` cut real corruption.
    pub corrupt: bool,
    /// Later segment files deleted with it (only when `corrupt`).
    pub deleted_segments: Vec<PathBuf>,
}

/// What [`Wal::open`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Records read and checked by the open: those of the last segment, or of every segment
    /// with `truncate_corrupt`. The records of earlier segments are checked when they are read
    /// ([`Wal::read_from`]).
    pub records_checked: u64,
    /// Segment files after repair.
    pub segments: usize,
    /// The last valid zxid, if any.
    pub last_zxid: Option<i64>,
    /// Repairs made; empty after a clean shutdown.
    pub truncations: Vec<Truncation>,
}

/// One record read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    /// Its zxid.
    pub zxid: i64,
    /// Its payload.
    pub payload: Vec<u8>,
}

#[derive(Debug)]
struct Active {
    file: File,
    /// Where the next record goes.
    offset: u64,
    /// Pre-allocated size.
    capacity: u64,
}

/// The write-ahead log of one data dir. Single writer; `Send`, so it can live on a blocking thread.
#[derive(Debug)]
pub struct Wal {
    dir: PathBuf,
    opts: WalOptions,
    segments: Vec<SegmentInfo>,
    active: Option<Active>,
    last_zxid: Option<i64>,
    /// Bytes written to the active segment since the last fsync.
    dirty: bool,
    poisoned: bool,
    buf: Vec<u8>,
}

impl Wal {
    /// Opens the log in `dir` (created if missing): reads the last segment whole and repairs a
    /// torn tail, and checks the other segments' headers (with `opts.truncate_corrupt`, reads
    /// every segment whole and cuts the log at the first damage); see the module docs.
    /// Leftover `.tmp` files from a crash during a roll are removed.
    ///
    /// # Errors
    /// [`StorageError::Corruption`] for damage other than a torn tail in what it reads (unless
    /// `opts.truncate_corrupt`), [`StorageError::Io`] when reading or repairing fails.
    pub fn open(dir: impl AsRef<Path>, opts: WalOptions) -> Result<(Wal, RecoveryReport)> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).ctx(|| format!("create {}", dir.display()))?;
        let mut segments = list_segments(&dir)?;
        let mut report = RecoveryReport::default();
        let mut last_zxid: Option<i64> = None;
        let mut dir_changed = false;
        // Only the log's tail may be torn: the segment that was last when the log was opened.
        let tail = segments.last().map(|s| s.path.clone());
        // ends[i]: where the next record of segments[i] would go, once that segment was read
        // whole (`None`: only its header was checked).
        let mut ends: Vec<Option<u64>> = Vec::with_capacity(segments.len());
        let mut dropped_empty = false;
        let mut i = 0;
        while i < segments.len() {
            let is_last = i + 1 == segments.len();
            let is_tail = tail.as_ref() == Some(&segments[i].path);
            let seg = segments[i].clone();
            if !is_last && !opts.truncate_corrupt {
                // Not needed to open the log: its records are checked when they are read
                // (`WalReader`), so a recovery reads only the log it replays.
                check_segment_header(&seg)?;
                ends.push(None);
                i += 1;
                continue;
            }
            let buf = fs::read(&seg.path).ctx(|| format!("read {}", seg.path.display()))?;
            let outcome = match check_header(&buf, seg.first_zxid) {
                Ok(()) => scan(&buf, seg.first_zxid, last_zxid, |_, _| {}),
                Err(_) if is_tail && buf.iter().all(|&b| b == 0) => {
                    // Created but never written (only possible without fsync).
                    tracing::warn!(file = %seg.path.display(), "removing WAL segment with an unwritten header");
                    remove_file(&seg.path)?;
                    segments.remove(i);
                    dir_changed = true;
                    // The segment before it is the last now: read it whole.
                    if only_header_checked(&ends) {
                        ends.pop();
                        i -= 1;
                    }
                    continue;
                }
                Err(reason) => Scan {
                    end: 0,
                    records: 0,
                    last_zxid,
                    stop: Stop::Bad {
                        offset: 0,
                        reason,
                        torn: false,
                    },
                },
            };
            report.records_checked += outcome.records;
            last_zxid = outcome.last_zxid;
            let Stop::Bad {
                offset,
                reason,
                torn,
            } = outcome.stop
            else {
                if is_last && !dropped_empty && outcome.end as u64 == SEGMENT_HEADER_LEN {
                    // An empty last segment is named after a record that never made it; the
                    // next append may carry a smaller zxid, so the name would lie. Drop it, and
                    // read the segment before it whole: that one is the last now.
                    remove_file(&seg.path)?;
                    segments.remove(i);
                    dir_changed = true;
                    dropped_empty = true;
                    if only_header_checked(&ends) {
                        ends.pop();
                        i -= 1;
                    }
                    continue;
                }
                ends.push(Some(outcome.end as u64));
                i += 1;
                continue;
            };
            let torn = torn && is_tail;
            if !torn && !opts.truncate_corrupt {
                return Err(StorageError::Corruption {
                    file: seg.path.clone(),
                    offset: offset as u64,
                    reason,
                });
            }
            let deleted: Vec<PathBuf> = segments.drain(i + 1..).map(|s| s.path).collect();
            for path in &deleted {
                remove_file(path)?;
            }
            if torn {
                tracing::warn!(file = %seg.path.display(), offset, %reason,
                    "truncating torn record at the tail of the write-ahead log");
            } else {
                tracing::error!(file = %seg.path.display(), offset, %reason,
                    deleted_segments = deleted.len(),
                    "truncating CORRUPT write-ahead log as requested (--truncate-corrupt); later records are lost");
            }
            report.truncations.push(Truncation {
                file: seg.path.clone(),
                offset: offset as u64,
                reason,
                corrupt: !torn,
                deleted_segments: deleted,
            });
            dir_changed = true;
            if (offset as u64) <= SEGMENT_HEADER_LEN {
                remove_file(&seg.path)?;
                segments.remove(i);
                if only_header_checked(&ends) {
                    // The segment before it is the last now: read it whole.
                    ends.pop();
                    i -= 1;
                    continue;
                }
            } else {
                truncate_and_refill(&seg.path, offset as u64, buf.len() as u64)?;
                ends.push(Some(offset as u64));
            }
            break;
        }
        if dir_changed && opts.fsync == FsyncMode::Always {
            sync_dir(&dir)?;
        }
        let active = match (segments.last(), ends.last()) {
            (Some(seg), Some(&Some(end))) => {
                let file = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(&seg.path)
                    .ctx(|| format!("open {}", seg.path.display()))?;
                let capacity = file
                    .metadata()
                    .ctx(|| format!("stat {}", seg.path.display()))?
                    .len();
                Some(Active {
                    file,
                    offset: end,
                    capacity,
                })
            }
            _ => None,
        };
        report.segments = segments.len();
        report.last_zxid = last_zxid;
        Ok((
            Wal {
                dir,
                opts,
                segments,
                active,
                last_zxid,
                dirty: false,
                poisoned: false,
                buf: Vec::new(),
            },
            report,
        ))
    }

    /// The log's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The zxid of the last record appended (or recovered), if any.
    pub fn last_zxid(&self) -> Option<i64> {
        self.last_zxid
    }

    /// The segment files, oldest first; the last is the one being appended to.
    pub fn segments(&self) -> &[SegmentInfo] {
        &self.segments
    }

    /// True after a write or fsync error: every later call fails until the log is reopened.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// The options the log was opened with.
    pub fn options(&self) -> &WalOptions {
        &self.opts
    }

    /// Writes `records` (zxids strictly increasing, all greater than [`Wal::last_zxid`]) to the
    /// log, rolling segments as needed. Not durable until [`Wal::sync`] returns `Ok`.
    ///
    /// # Errors
    /// [`StorageError::ZxidNotIncreasing`] / [`StorageError::RecordTooLarge`] before anything is
    /// written (the log stays usable); [`StorageError::Io`] when writing fails, after which the
    /// log is poisoned (records of this batch may or may not be on disk, whole or torn; reopening
    /// recovers a valid prefix); [`StorageError::Poisoned`] after an earlier failure.
    pub fn append_batch<P: AsRef<[u8]>>(&mut self, records: &[(i64, P)]) -> Result<()> {
        if self.poisoned {
            return Err(StorageError::Poisoned);
        }
        let mut last = self.last_zxid;
        for (zxid, payload) in records {
            if let Some(last) = last {
                if *zxid <= last {
                    return Err(StorageError::ZxidNotIncreasing { zxid: *zxid, last });
                }
            }
            let len = payload.as_ref().len();
            if len > MAX_PAYLOAD_LEN {
                return Err(StorageError::RecordTooLarge {
                    len,
                    max: MAX_PAYLOAD_LEN,
                });
            }
            last = Some(*zxid);
        }
        if records.is_empty() {
            return Ok(());
        }
        let result = self.write_records(records);
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    fn write_records<P: AsRef<[u8]>>(&mut self, records: &[(i64, P)]) -> Result<()> {
        #[cfg(feature = "failpoints")]
        fail::fail_point!(failpoint::WAL_BEFORE_WRITE, |_| Err(StorageError::io(
            "write-ahead log append",
            failpoint::injected(failpoint::WAL_BEFORE_WRITE)
        )));
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let mut result = Ok(());
        for (zxid, payload) in records {
            let payload = payload.as_ref();
            let need = (RECORD_HEADER_LEN + payload.len()) as u64;
            let fits = self
                .active
                .as_ref()
                .is_some_and(|a| a.offset + buf.len() as u64 + need <= a.capacity);
            if !fits {
                result = self.flush_buf(&buf).and_then(|()| self.roll(*zxid, need));
                buf.clear();
                if result.is_err() {
                    break;
                }
            }
            encode_record(&mut buf, *zxid, payload);
            self.last_zxid = Some(*zxid);
        }
        if result.is_ok() {
            result = self.flush_buf(&buf);
        }
        buf.clear();
        self.buf = buf;
        result
    }

    fn flush_buf(&mut self, buf: &[u8]) -> Result<()> {
        if buf.is_empty() {
            return Ok(());
        }
        let Some(active) = self.active.as_mut() else {
            return Ok(());
        };
        let path = &self.segments[self.segments.len() - 1].path;
        #[cfg(feature = "failpoints")]
        fail::fail_point!(failpoint::WAL_PARTIAL_WRITE, |_| {
            let half = &buf[..buf.len() / 2];
            let _ = active.file.write_all_at(half, active.offset);
            Err(StorageError::io(
                format!("write {}", path.display()),
                failpoint::injected(failpoint::WAL_PARTIAL_WRITE),
            ))
        });
        active
            .file
            .write_all_at(buf, active.offset)
            .ctx(|| format!("write {} at {}", path.display(), active.offset))?;
        active.offset += buf.len() as u64;
        self.dirty = true;
        Ok(())
    }

    /// Starts a new segment whose first record is `first_zxid` and needs `need` bytes.
    fn roll(&mut self, first_zxid: i64, need: u64) -> Result<()> {
        let started = std::time::Instant::now();
        let always = self.opts.fsync == FsyncMode::Always;
        if let Some(active) = &self.active {
            if self.dirty && always {
                let path = &self.segments[self.segments.len() - 1].path;
                active
                    .file
                    .sync_data()
                    .ctx(|| format!("fdatasync {}", path.display()))?;
            }
        }
        self.dirty = false;
        let synced_old = started.elapsed();
        let path = self.dir.join(segment_name(first_zxid));
        let tmp = path.with_extension("log.tmp");
        let capacity = self
            .opts
            .segment_size
            .max(SEGMENT_HEADER_LEN + need)
            .max(SEGMENT_HEADER_LEN + RECORD_HEADER_LEN as u64);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .ctx(|| format!("create {}", tmp.display()))?;
        let made = preallocate(&file, capacity)
            .and_then(|()| file.write_all_at(&segment_header(first_zxid), 0))
            .and_then(|()| if always { file.sync_all() } else { Ok(()) })
            .and_then(|()| fs::rename(&tmp, &path));
        if let Err(e) = made {
            // Typically ENOSPC from fallocate: leave no half-made file behind.
            let _ = fs::remove_file(&tmp);
            return Err(StorageError::io(
                format!("create segment {}", path.display()),
                e,
            ));
        }
        if always {
            sync_dir(&self.dir)?;
        }
        tracing::debug!(
            first_zxid = format_args!("{first_zxid:#x}"),
            capacity,
            ?synced_old,
            took = ?started.elapsed(),
            "rolled to a new WAL segment"
        );
        self.segments.push(SegmentInfo { first_zxid, path });
        self.active = Some(Active {
            file,
            offset: SEGMENT_HEADER_LEN,
            capacity,
        });
        Ok(())
    }

    /// Makes everything appended so far durable (fdatasync, unless [`FsyncMode::Never`]).
    /// Records may be acknowledged only after this returns `Ok`.
    ///
    /// # Errors
    /// [`StorageError::Io`] when the fsync fails (the log is then poisoned: those records may or
    /// may not survive, and nothing later is accepted); [`StorageError::Poisoned`] after an
    /// earlier failure.
    pub fn sync(&mut self) -> Result<()> {
        if self.poisoned {
            return Err(StorageError::Poisoned);
        }
        let result = self.sync_inner();
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    fn sync_inner(&mut self) -> Result<()> {
        if !self.dirty {
            return Ok(());
        }
        #[cfg(feature = "failpoints")]
        fail::fail_point!(failpoint::WAL_AFTER_WRITE, |_| Err(StorageError::io(
            "write-ahead log fdatasync",
            failpoint::injected(failpoint::WAL_AFTER_WRITE)
        )));
        if let (Some(active), FsyncMode::Always) = (&self.active, self.opts.fsync) {
            let path = &self.segments[self.segments.len() - 1].path;
            let started = std::time::Instant::now();
            active
                .file
                .sync_data()
                .ctx(|| format!("fdatasync {}", path.display()))?;
            let took = started.elapsed();
            if took >= SLOW_FSYNC {
                tracing::debug!(?took, "slow WAL fdatasync");
            }
        }
        #[cfg(feature = "failpoints")]
        fail::fail_point!(failpoint::WAL_AFTER_FSYNC, |_| Err(StorageError::io(
            "write-ahead log ack",
            failpoint::injected(failpoint::WAL_AFTER_FSYNC)
        )));
        self.dirty = false;
        Ok(())
    }

    /// Reads every record with a zxid `>= from`, oldest first. Each segment's header and records
    /// are checked as they are read (the open read only the last segment's): a bad one yields
    /// [`StorageError::Corruption`] naming file and offset, after the records before it, and ends
    /// the iteration.
    pub fn read_from(&self, from: i64) -> WalReader {
        // Segment i holds zxids in [first_i, first_{i+1}): skip those entirely below `from`.
        let start = self
            .segments
            .windows(2)
            .take_while(|w| w[1].first_zxid <= from)
            .count();
        WalReader {
            segments: self.segments[start..].to_vec(),
            from,
            pending: std::collections::VecDeque::new(),
            buf: Vec::new(),
            last_zxid: None,
            deferred: None,
            failed: false,
        }
    }

    /// Deletes the segments whose records all have zxids `<= zxid` (never the segment being
    /// appended to), e.g. everything older than the oldest kept snapshot. Returns how many.
    ///
    /// # Errors
    /// [`StorageError::Io`] when a file cannot be renamed or deleted or the directory not
    /// fsynced.
    pub fn prune_through(&mut self, zxid: i64) -> Result<usize> {
        self.detach_through(zxid)?.remove()
    }

    /// The cheap half of [`Wal::prune_through`]: forgets the segments whose records all have
    /// zxids `<= zxid` and renames each to `….log.pruned`, so that nothing reads or lists it as
    /// a segment again. Deleting them, the slow half (tens of milliseconds for a 64 MiB file
    /// here), is [`Pruned::remove`], which needs no access to the log and so can run on another
    /// thread while the log goes on. A `.pruned` file a crash leaves behind is deleted when the
    /// log is next opened.
    ///
    /// # Errors
    /// [`StorageError::Io`] when a segment cannot be renamed; the segments before it are
    /// detached (and returned by no one: the next open deletes them).
    pub fn detach_through(&mut self, zxid: i64) -> Result<Pruned> {
        let n = self
            .segments
            .windows(2)
            .take_while(|w| zxid.checked_add(1).is_some_and(|z| w[1].first_zxid <= z))
            .count();
        let mut files = Vec::with_capacity(n);
        for seg in self.segments.drain(..n) {
            let pruned = segment::pruned_path(&seg.path);
            fs::rename(&seg.path, &pruned)
                .ctx(|| format!("rename {} to {}", seg.path.display(), pruned.display()))?;
            files.push(pruned);
        }
        Ok(Pruned {
            files,
            dir: self.dir.clone(),
            sync: self.opts.fsync == FsyncMode::Always,
        })
    }
}

/// Segments detached from the log by [`Wal::detach_through`], to be deleted.
#[derive(Debug)]
#[must_use = "the detached segments stay on disk until removed"]
pub struct Pruned {
    files: Vec<PathBuf>,
    dir: PathBuf,
    sync: bool,
}

impl Pruned {
    /// How many segments were detached.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether none was.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Deletes the detached segments (then fsyncs the directory when the log fsyncs); returns
    /// how many.
    ///
    /// # Errors
    /// [`StorageError::Io`] when a file cannot be deleted or the directory not fsynced.
    pub fn remove(self) -> Result<usize> {
        for file in &self.files {
            segment::remove_pruned(file)?;
        }
        if !self.files.is_empty() && self.sync {
            sync_dir(&self.dir)?;
        }
        Ok(self.files.len())
    }
}

/// Iterator returned by [`Wal::read_from`].
#[derive(Debug)]
pub struct WalReader {
    segments: Vec<SegmentInfo>,
    from: i64,
    /// The zxids and places in `buf` of the records of the segment still to hand out. Each is
    /// copied out only when handed out: copying a whole segment's records up front held
    /// 64 MiB of them at once, on fresh pages for every segment.
    pending: std::collections::VecDeque<(i64, std::ops::Range<usize>)>,
    /// The segment being read, whole. One buffer for every segment: a fresh 64 MiB for each
    /// would have the kernel fault in and zero its pages again.
    buf: Vec<u8>,
    last_zxid: Option<i64>,
    /// Corruption found after records that are still pending.
    deferred: Option<StorageError>,
    failed: bool,
}

impl WalReader {
    fn load_next_segment(&mut self) -> Result<bool> {
        if self.segments.is_empty() {
            return Ok(false);
        }
        let seg = self.segments.remove(0);
        self.buf.clear();
        File::open(&seg.path)
            .and_then(|mut file| file.read_to_end(&mut self.buf))
            .ctx(|| format!("read {}", seg.path.display()))?;
        let buf = &self.buf;
        let corrupt = |offset: usize, reason: String| StorageError::Corruption {
            file: seg.path.clone(),
            offset: offset as u64,
            reason,
        };
        check_header(buf, seg.first_zxid).map_err(|r| corrupt(0, r))?;
        let from = self.from;
        let pending = &mut self.pending;
        let outcome = scan(buf, seg.first_zxid, self.last_zxid, |zxid, payload| {
            if zxid >= from {
                pending.push_back((zxid, payload));
            }
        });
        self.last_zxid = outcome.last_zxid;
        if let Stop::Bad { offset, reason, .. } = outcome.stop {
            // Records before the bad one are still handed out first.
            self.segments.clear();
            if self.pending.is_empty() {
                return Err(corrupt(offset, reason));
            }
            self.deferred = Some(corrupt(offset, reason));
        }
        Ok(true)
    }
}

impl Iterator for WalReader {
    type Item = Result<WalRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.failed {
                return None;
            }
            if let Some((zxid, at)) = self.pending.pop_front() {
                let payload = self.buf.get(at).map(<[u8]>::to_vec).unwrap_or_default();
                return Some(Ok(WalRecord { zxid, payload }));
            }
            if let Some(err) = self.deferred.take() {
                self.failed = true;
                return Some(Err(err));
            }
            match self.load_next_segment() {
                Ok(true) => continue,
                Ok(false) => return None,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// Whether the segment before the one just removed was only header-checked by the open, so
/// that, being the last now, it must be read whole. (With `truncate_corrupt` it was read whole
/// already; reading it again would take its own records for out of order.)
fn only_header_checked(ends: &[Option<u64>]) -> bool {
    matches!(ends.last(), Some(None))
}

/// Checks a segment's header alone (its records are checked when they are read).
fn check_segment_header(seg: &SegmentInfo) -> Result<()> {
    let mut header = Vec::with_capacity(SEGMENT_HEADER_LEN as usize);
    File::open(&seg.path)
        .and_then(|file| file.take(SEGMENT_HEADER_LEN).read_to_end(&mut header))
        .ctx(|| format!("read {}", seg.path.display()))?;
    check_header(&header, seg.first_zxid).map_err(|reason| StorageError::Corruption {
        file: seg.path.clone(),
        offset: 0,
        reason,
    })
}

fn preallocate(file: &File, len: u64) -> std::io::Result<()> {
    match fs4::fs_std::FileExt::allocate(file, len) {
        Ok(()) => Ok(()),
        // Filesystems without fallocate: a sparse file still reads as zeros.
        Err(e) if e.kind() == std::io::ErrorKind::Unsupported || e.raw_os_error() == Some(95) => {
            file.set_len(len)
        }
        Err(e) => Err(e),
    }
}

/// Cuts `path` at `offset` and re-extends it with zeros to `capacity`, so no stale byte of the
/// torn record stays behind to confuse a later read.
fn truncate_and_refill(path: &Path, offset: u64, capacity: u64) -> Result<()> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .ctx(|| format!("open {}", path.display()))?;
    file.set_len(offset)
        .and_then(|()| preallocate(&file, capacity.max(offset)))
        .and_then(|()| file.sync_all())
        .ctx(|| format!("truncate {} at {offset}", path.display()))
}
