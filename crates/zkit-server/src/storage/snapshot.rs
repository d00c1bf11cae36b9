//! Snapshots: whole-state images written atomically beside the WAL, and pruning of both.
//!
//! ```text
//! DIR/snap-%016x        named by the zxid of the last txn the image contains
//!   header  16 bytes    magic "ZKSN" | version u32 = 1 | zxid i64
//!   body                opaque bytes (the shell's serialized tree and sessions)
//!   trailer 16 bytes    body length u64 | crc32c(body) u32 | magic "NSKZ"
//! ```
//!
//! The checksum sits in a trailer so a large state can be streamed out, and read back
//! ([`SnapshotStore::open_body`]), without a second pass.
//! A snapshot is written to `snap-….tmp`, fsynced, renamed into place and the directory fsynced:
//! a visible `snap-…` file is always complete, unless the disk damaged it later, and then
//! [`SnapshotStore::latest_valid`] (and recovery, which streams) falls back to the next
//! newest one. Pruning keeps the newest N snapshots and the WAL segments the oldest of them
//! still needs. This module never interprets the body.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::datadir::sync_dir;
use super::error::{IoContext, Result, StorageError};
#[cfg(feature = "failpoints")]
use super::failpoint;
use super::wal::{FsyncMode, Wal};

/// Magic at the start of a snapshot.
pub const SNAPSHOT_MAGIC: [u8; 4] = *b"ZKSN";
/// Magic at the very end of a snapshot.
pub const SNAPSHOT_END_MAGIC: [u8; 4] = *b"NSKZ";
/// Snapshot format version.
pub const SNAPSHOT_VERSION: u32 = 1;
/// How many snapshots pruning keeps by default.
pub const DEFAULT_KEEP_SNAPSHOTS: usize = 3;

/// What a pruned snapshot is renamed to end with before it is deleted.
const DELETING_SUFFIX: &str = ".deleting";

const HEADER_LEN: usize = 16;
const TRAILER_LEN: usize = 16;

/// A verified snapshot read back from disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The zxid of the last txn in the image.
    pub zxid: i64,
    /// Its file.
    pub path: PathBuf,
    body: Vec<u8>,
}

impl Snapshot {
    /// The body exactly as written.
    pub fn body(&self) -> &[u8] {
        &self.body
    }
}

/// The body of one snapshot file, read in order through [`std::io::Read`] with its checksum
/// computed on the way ([`SnapshotStore::open_body`]). What it yields is unverified until
/// [`SnapshotBody::finish`] says the checksum holds.
#[derive(Debug)]
pub struct SnapshotBody {
    /// The zxid of the last txn in the image.
    pub zxid: i64,
    /// Its file.
    pub path: PathBuf,
    file: fs::File,
    len: u64,
    read: u64,
    crc: u32,
    want_crc: u32,
    /// The first read error, kept for [`SnapshotBody::finish`] (a reader's caller may only
    /// see that reading stopped).
    error: Option<io::Error>,
}

impl SnapshotBody {
    /// The body's length in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the body is empty (never, for a snapshot zkit wrote).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Reads what is left of the body and checks the checksum over all of it.
    ///
    /// # Errors
    /// [`StorageError::Io`] when reading failed (also earlier, through `Read`);
    /// [`StorageError::Corruption`] when the checksum does not match.
    pub fn finish(mut self) -> Result<()> {
        let mut rest = [0u8; 64 * 1024];
        while self.error.is_none() && io::Read::read(&mut self, &mut rest).is_ok_and(|n| n > 0) {}
        if let Some(err) = self.error.take() {
            return Err(StorageError::io(
                format!("read {}", self.path.display()),
                err,
            ));
        }
        if self.read != self.len {
            return Err(StorageError::Corruption {
                file: self.path.clone(),
                offset: HEADER_LEN as u64 + self.read,
                reason: "snapshot shorter than its trailer says".into(),
            });
        }
        if self.crc != self.want_crc {
            return Err(StorageError::Corruption {
                file: self.path.clone(),
                offset: HEADER_LEN as u64,
                reason: "snapshot checksum mismatch".into(),
            });
        }
        Ok(())
    }
}

impl io::Read for SnapshotBody {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        use std::os::unix::fs::FileExt;
        let left = self.len - self.read;
        let n = usize::try_from(left).unwrap_or(usize::MAX).min(buf.len());
        if n == 0 {
            return Ok(0);
        }
        match self
            .file
            .read_at(&mut buf[..n], HEADER_LEN as u64 + self.read)
        {
            Ok(got) => {
                self.crc = crc32c::crc32c_append(self.crc, &buf[..got]);
                self.read += got as u64;
                Ok(got)
            }
            // Retried by the caller, as `Read` says.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                let copy = io::Error::new(e.kind(), e.to_string());
                self.error.get_or_insert(e);
                Err(copy)
            }
        }
    }
}

/// The snapshot directory.
#[derive(Debug, Clone)]
pub struct SnapshotStore {
    dir: PathBuf,
    fsync: FsyncMode,
    /// The thread deleting the files a crash left (see [`SnapshotStore::open`]), until
    /// [`SnapshotStore::wait_for_leftovers`] joins it. Shared by clones.
    leftovers: Arc<Mutex<Option<JoinHandle<()>>>>,
}

impl SnapshotStore {
    /// Opens `dir` (created if missing) and deletes what a crash left: the `.tmp` file of a
    /// snapshot being written and the `.deleting` files of a prune. They are deleted in cuts
    /// on a thread of their own, so that a start does not wait for them (an interrupted
    /// snapshot of 10,000,000 znodes is up to 1.6 GB); a `.tmp` is first renamed `.deleting`,
    /// since a snapshot written after the start may take its name.
    ///
    /// # Errors
    /// [`StorageError::Io`] when the directory cannot be made or listed, a leftover renamed, or
    /// the thread started.
    pub fn open(dir: impl AsRef<Path>, fsync: FsyncMode) -> Result<SnapshotStore> {
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).ctx(|| format!("create {}", dir.display()))?;
        let entries = fs::read_dir(&dir).ctx(|| format!("list {}", dir.display()))?;
        let mut doomed = Vec::new();
        for entry in entries {
            let entry = entry.ctx(|| format!("list {}", dir.display()))?;
            let name = entry.file_name();
            let Some(name) = name.to_str().filter(|n| n.starts_with("snap-")) else {
                continue;
            };
            let path = entry.path();
            if name.ends_with(DELETING_SUFFIX) {
                doomed.push(path);
            } else if name.ends_with(".tmp") {
                let deleting = crate::storage::delete::with_suffix(&path, DELETING_SUFFIX);
                fs::rename(&path, &deleting)
                    .ctx(|| format!("rename {} to {}", path.display(), deleting.display()))?;
                doomed.push(deleting);
            }
        }
        let leftovers = if doomed.is_empty() {
            None
        } else {
            let thread = std::thread::Builder::new()
                .name("zkit-snap-leftovers".into())
                .spawn(move || {
                    for path in doomed {
                        if let Err(e) = crate::storage::delete::delete_in_cuts(&path) {
                            tracing::warn!(file = %path.display(), error = %e,
                                "deleting a snapshot file a crash left failed");
                        }
                    }
                })
                .ctx(|| "start the thread deleting leftover snapshot files".to_owned())?;
            Some(thread)
        };
        Ok(SnapshotStore {
            dir,
            fsync,
            leftovers: Arc::new(Mutex::new(leftovers)),
        })
    }

    /// Waits until the files a crash left (see [`SnapshotStore::open`]) are deleted: for tests
    /// and tools that inspect the directory.
    pub fn wait_for_leftovers(&self) {
        let thread = self
            .leftovers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(thread) = thread {
            // The thread only logs; a panic in it has nothing to report here.
            let _ = thread.join();
        }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `body` as the snapshot at `zxid`. See [`SnapshotStore::write_with`].
    ///
    /// # Errors
    /// As [`SnapshotStore::write_with`].
    pub fn write_snapshot(&self, zxid: i64, body: &[u8]) -> Result<PathBuf> {
        self.write_with(zxid, |w| w.write_all(body))
    }

    /// Streams a snapshot at `zxid`: `fill` writes the body; then the file is fsynced, renamed
    /// to `snap-%016x` and the directory fsynced (fsyncs skipped under [`FsyncMode::Never`]).
    /// Safe to call from a background thread while the WAL is being written.
    ///
    /// # Errors
    /// [`StorageError::Io`] when writing fails or `fill` fails; the temp file is removed and
    /// older snapshots are untouched.
    pub fn write_with(
        &self,
        zxid: i64,
        fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<PathBuf> {
        let path = self.dir.join(snapshot_name(zxid));
        let tmp = self.dir.join(format!("{}.tmp", snapshot_name(zxid)));
        let result = self
            .write_tmp(&tmp, zxid, fill)
            .and_then(|()| self.publish(&tmp, &path));
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result.map(|()| path)
    }

    fn write_tmp(
        &self,
        tmp: &Path,
        zxid: i64,
        fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
    ) -> Result<()> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(tmp)
            .ctx(|| format!("create {}", tmp.display()))?;
        let paced = PacedFile {
            file,
            unsynced: 0,
            sync_every: (self.fsync == FsyncMode::Always).then_some(SYNC_EVERY),
        };
        let mut w = ChecksumWriter {
            inner: BufWriter::with_capacity(1 << 20, paced),
            crc: 0,
            len: 0,
        };
        let mut header = [0u8; HEADER_LEN];
        header[0..4].copy_from_slice(&SNAPSHOT_MAGIC);
        header[4..8].copy_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        header[8..16].copy_from_slice(&zxid.to_le_bytes());
        let written = w.inner.write_all(&header).and_then(|()| fill(&mut w));
        written.ctx(|| format!("write {}", tmp.display()))?;
        let mut trailer = [0u8; TRAILER_LEN];
        trailer[0..8].copy_from_slice(&w.len.to_le_bytes());
        trailer[8..12].copy_from_slice(&w.crc.to_le_bytes());
        trailer[12..16].copy_from_slice(&SNAPSHOT_END_MAGIC);
        let mut inner = w.inner;
        inner
            .write_all(&trailer)
            .and_then(|()| inner.flush())
            .ctx(|| format!("write {}", tmp.display()))?;
        let file = inner
            .into_inner()
            .map_err(|e| StorageError::io(format!("write {}", tmp.display()), e.into_error()))?
            .file;
        if self.fsync == FsyncMode::Always {
            file.sync_all().ctx(|| format!("fsync {}", tmp.display()))?;
        }
        Ok(())
    }

    fn publish(&self, tmp: &Path, path: &Path) -> Result<()> {
        #[cfg(feature = "failpoints")]
        fail::fail_point!(failpoint::SNAPSHOT_BEFORE_RENAME, |_| Err(
            StorageError::io(
                format!("rename {}", tmp.display()),
                failpoint::injected(failpoint::SNAPSHOT_BEFORE_RENAME)
            )
        ));
        fs::rename(tmp, path).ctx(|| format!("rename {} to {}", tmp.display(), path.display()))?;
        #[cfg(feature = "failpoints")]
        fail::fail_point!(failpoint::SNAPSHOT_AFTER_RENAME, |_| Err(StorageError::io(
            format!("fsync {}", self.dir.display()),
            failpoint::injected(failpoint::SNAPSHOT_AFTER_RENAME)
        )));
        if self.fsync == FsyncMode::Always {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }

    /// The snapshot files, newest first, by the zxid in their names (not verified).
    ///
    /// # Errors
    /// [`StorageError::Io`] when the directory cannot be listed.
    pub fn list(&self) -> Result<Vec<(i64, PathBuf)>> {
        let mut found = Vec::new();
        let entries = fs::read_dir(&self.dir).ctx(|| format!("list {}", self.dir.display()))?;
        for entry in entries {
            let entry = entry.ctx(|| format!("list {}", self.dir.display()))?;
            if let Some(zxid) = entry.file_name().to_str().and_then(parse_snapshot_name) {
                found.push((zxid, entry.path()));
            }
        }
        found.sort_by_key(|s| std::cmp::Reverse(s.0));
        Ok(found)
    }

    /// Reads and verifies one snapshot file.
    ///
    /// # Errors
    /// [`StorageError::Corruption`] when magic, version, zxid, length or checksum is wrong;
    /// [`StorageError::Io`] when it cannot be read.
    pub fn read(path: &Path) -> Result<Snapshot> {
        let mut body = Self::open_body(path)?;
        let mut bytes = Vec::with_capacity(usize::try_from(body.len()).unwrap_or(0));
        // A read error is kept by the body and reported by `finish`.
        let _ = io::Read::read_to_end(&mut body, &mut bytes);
        let zxid = body.zxid;
        body.finish()?;
        Ok(Snapshot {
            zxid,
            path: path.to_path_buf(),
            body: bytes,
        })
    }

    /// Opens one snapshot file to stream its body ([`SnapshotBody`]): the header, the trailer
    /// and the length are checked here, the checksum by [`SnapshotBody::finish`] once the
    /// body has been read.
    ///
    /// # Errors
    /// [`StorageError::Corruption`] when magic, version, zxid or length is wrong;
    /// [`StorageError::Io`] when it cannot be read.
    pub fn open_body(path: &Path) -> Result<SnapshotBody> {
        use std::os::unix::fs::FileExt;
        let corrupt = |offset: u64, reason: &str| StorageError::Corruption {
            file: path.to_path_buf(),
            offset,
            reason: reason.to_owned(),
        };
        let file = fs::File::open(path).ctx(|| format!("open {}", path.display()))?;
        let size = file
            .metadata()
            .ctx(|| format!("stat {}", path.display()))?
            .len();
        if size < (HEADER_LEN + TRAILER_LEN) as u64 {
            return Err(corrupt(0, "snapshot shorter than header and trailer"));
        }
        let mut header = [0u8; HEADER_LEN];
        file.read_exact_at(&mut header, 0)
            .ctx(|| format!("read {}", path.display()))?;
        if header[0..4] != SNAPSHOT_MAGIC {
            return Err(corrupt(0, "bad snapshot magic"));
        }
        if header[4..8] != SNAPSHOT_VERSION.to_le_bytes() {
            return Err(corrupt(4, "unsupported snapshot version"));
        }
        let mut z = [0u8; 8];
        z.copy_from_slice(&header[8..16]);
        let zxid = i64::from_le_bytes(z);
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(parse_snapshot_name)
            != Some(zxid)
        {
            return Err(corrupt(8, "zxid in header does not match the file name"));
        }
        let t = size - TRAILER_LEN as u64;
        let mut trailer = [0u8; TRAILER_LEN];
        file.read_exact_at(&mut trailer, t)
            .ctx(|| format!("read {}", path.display()))?;
        if trailer[12..] != SNAPSHOT_END_MAGIC {
            return Err(corrupt(t, "bad snapshot trailer (incomplete file?)"));
        }
        let mut l = [0u8; 8];
        l.copy_from_slice(&trailer[..8]);
        let len = t - HEADER_LEN as u64;
        if u64::from_le_bytes(l) != len {
            return Err(corrupt(t, "snapshot length mismatch"));
        }
        let mut c = [0u8; 4];
        c.copy_from_slice(&trailer[8..12]);
        Ok(SnapshotBody {
            zxid,
            path: path.to_path_buf(),
            file,
            len,
            read: 0,
            crc: 0,
            want_crc: u32::from_le_bytes(c),
            error: None,
        })
    }

    /// The newest snapshot that verifies; damaged newer ones are skipped with a warning.
    ///
    /// # Errors
    /// [`StorageError::Io`] when the directory cannot be listed or a file cannot be read (an
    /// unreadable disk is not silently skipped; only checksum/format damage is).
    pub fn latest_valid(&self) -> Result<Option<Snapshot>> {
        for (_, path) in self.list()? {
            match Self::read(&path) {
                Ok(snapshot) => return Ok(Some(snapshot)),
                Err(e @ StorageError::Corruption { .. }) => {
                    tracing::warn!(file = %path.display(), error = %e, "skipping damaged snapshot");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Deletes all but the newest `keep` snapshots (at least one is always kept) and returns the
    /// zxid of the oldest one kept, which is how far the WAL may be pruned. Each is first renamed
    /// to `….deleting` (so that nothing reads or lists it as a snapshot again; [`Self::open`]
    /// removes one a crash leaves), then deleted in cuts (see `storage/delete.rs`), which
    /// takes about 1 ms per MB: call it off the request path.
    ///
    /// # Errors
    /// [`StorageError::Io`] when a file cannot be renamed or deleted.
    pub fn prune(&self, keep: usize) -> Result<Option<i64>> {
        let list = self.list()?;
        let keep = keep.max(1);
        let mut doomed = Vec::new();
        for (_, path) in list.iter().skip(keep) {
            let deleting = crate::storage::delete::with_suffix(path, DELETING_SUFFIX);
            fs::rename(path, &deleting)
                .ctx(|| format!("rename {} to {}", path.display(), deleting.display()))?;
            doomed.push(deleting);
        }
        if !doomed.is_empty() && self.fsync == FsyncMode::Always {
            sync_dir(&self.dir)?;
        }
        for path in &doomed {
            crate::storage::delete::delete_in_cuts(path)
                .ctx(|| format!("remove {}", path.display()))?;
        }
        Ok(list
            .get(..keep.min(list.len()))
            .and_then(|kept| kept.last())
            .map(|(zxid, _)| *zxid))
    }
}

/// Keeps the newest `keep` snapshots and deletes the WAL segments entirely older than the oldest
/// kept one (so every kept snapshot can still be replayed forward). Returns (snapshots kept's
/// oldest zxid, segments deleted).
///
/// # Errors
/// [`StorageError::Io`] when deleting fails.
pub fn prune(
    snapshots: &SnapshotStore,
    wal: &mut Wal,
    keep: usize,
) -> Result<(Option<i64>, usize)> {
    let Some(oldest) = snapshots.prune(keep)? else {
        return Ok((None, 0));
    };
    Ok((Some(oldest), wal.prune_through(oldest)?))
}

/// `snap-%016x`.
pub fn snapshot_name(zxid: i64) -> String {
    format!("snap-{:016x}", zxid as u64)
}

fn parse_snapshot_name(name: &str) -> Option<i64> {
    let hex = name.strip_prefix("snap-")?;
    if hex.len() != 16 {
        return None;
    }
    u64::from_str_radix(hex, 16).ok().map(|z| z as i64)
}

/// With fsync on, a snapshot is made durable this many bytes at a time as it is written, not
/// all at once at its end: written back in one burst, a snapshot of millions of znodes (hundreds
/// of MB) filled the disk's queue, and every WAL fdatasync meanwhile waited behind it (the
/// tail of the acknowledged writes).
const SYNC_EVERY: u64 = 4 << 20;

/// A snapshot file that fdatasyncs itself every `sync_every` bytes written (see [`SYNC_EVERY`]).
struct PacedFile {
    file: File,
    unsynced: u64,
    sync_every: Option<u64>,
}

impl Write for PacedFile {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = self.file.write(data)?;
        if let Some(every) = self.sync_every {
            self.unsynced += n as u64;
            if self.unsynced >= every {
                self.file.sync_data()?;
                self.unsynced = 0;
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

struct ChecksumWriter<W> {
    inner: W,
    crc: u32,
    len: u64,
}

impl<W: Write> Write for ChecksumWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(data)?;
        self.crc = crc32c::crc32c_append(self.crc, &data[..n]);
        self.len += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paced_file_syncs_every_so_many_bytes_and_keeps_every_byte() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("paced");
        let file = File::create(&path).expect("create");
        let mut paced = PacedFile {
            file,
            unsynced: 0,
            sync_every: Some(10),
        };
        let data: Vec<u8> = (0..91u8).collect();
        for chunk in data.chunks(7) {
            paced.write_all(chunk).expect("write");
        }
        // 91 bytes in 13 writes of 7: a sync once 10 or more are unsynced (after 14, 28, 42,
        // 56, 70, 84 bytes), so the 7 of the last write are left.
        assert_eq!(paced.unsynced, 7);
        paced.flush().expect("flush");
        assert_eq!(fs::read(&path).expect("read"), data);

        // Without fsync nothing is counted.
        let mut unpaced = PacedFile {
            file: File::create(dir.path().join("unpaced")).expect("create"),
            unsynced: 0,
            sync_every: None,
        };
        unpaced.write_all(&data).expect("write");
        assert_eq!(unpaced.unsynced, 0);
    }
}
