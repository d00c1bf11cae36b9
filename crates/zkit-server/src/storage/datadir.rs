//! The `--data-dir` layout and its exclusive lock.
//!
//! ```text
//! DIR/LOCK    flock'ed for the life of the server; holds the holder's pid (for the error message)
//! DIR/wal/    write-ahead log segments (see `wal`)
//! DIR/snap/   snapshots (see `snapshot`)
//! ```
//!
//! The lock is an advisory `flock` on an open file description, so it is released by the kernel
//! when the process dies, even by kill -9: a stale `LOCK` file never blocks a restart. This module
//! only creates directories and holds the lock; it never reads or writes logs or snapshots.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use fs4::fs_std::FileExt;

use super::error::{IoContext, Result, StorageError};

/// An opened, exclusively locked data dir. The lock is held until this value is dropped.
#[derive(Debug)]
pub struct DataDir {
    root: PathBuf,
    // Kept open only to hold the flock; closing it releases the lock.
    _lock: File,
}

impl DataDir {
    /// Creates `root` (and `wal/`, `snap/`) if missing and takes the exclusive lock on
    /// `root/LOCK`, writing this process's pid into it.
    ///
    /// # Errors
    /// [`StorageError::DataDirInUse`] when another process (or another `DataDir` in this process)
    /// holds the lock; [`StorageError::Io`] when the directories or lock file cannot be made.
    pub fn open(root: impl AsRef<Path>) -> Result<DataDir> {
        let root = root.as_ref().to_path_buf();
        fs::create_dir_all(&root).ctx(|| format!("create data dir {}", root.display()))?;
        let lock_path = root.join("LOCK");
        let mut lock = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false) // the holder's pid must survive our failed attempt
            .open(&lock_path)
            .ctx(|| format!("open {}", lock_path.display()))?;
        let locked =
            FileExt::try_lock_exclusive(&lock).ctx(|| format!("lock {}", lock_path.display()))?;
        if !locked {
            let mut text = String::new();
            // Best effort: the pid is only for the message.
            let pid = lock
                .read_to_string(&mut text)
                .ok()
                .and_then(|_| text.trim().parse::<u32>().ok());
            return Err(StorageError::DataDirInUse { dir: root, pid });
        }
        lock.set_len(0)
            .and_then(|()| lock.seek(SeekFrom::Start(0)))
            .and_then(|_| writeln!(lock, "{}", std::process::id()))
            .and_then(|()| lock.sync_data())
            .ctx(|| format!("write pid to {}", lock_path.display()))?;
        for sub in [WAL_DIR, SNAP_DIR] {
            let dir = root.join(sub);
            fs::create_dir_all(&dir).ctx(|| format!("create {}", dir.display()))?;
        }
        // Make the new directory entries durable before anything is logged inside them.
        sync_dir(&root)?;
        Ok(DataDir { root, _lock: lock })
    }

    /// The data dir itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `DIR/wal`, where the write-ahead log segments live.
    pub fn wal_dir(&self) -> PathBuf {
        self.root.join(WAL_DIR)
    }

    /// `DIR/snap`, where snapshots live.
    pub fn snap_dir(&self) -> PathBuf {
        self.root.join(SNAP_DIR)
    }
}

const WAL_DIR: &str = "wal";
const SNAP_DIR: &str = "snap";

/// fsyncs a directory so that creations, renames and deletions inside it survive power loss.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .ctx(|| format!("fsync directory {}", dir.display()))
}
