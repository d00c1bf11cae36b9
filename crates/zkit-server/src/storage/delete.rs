//! Deleting large files without holding up the log's writes.
//!
//! A pruned snapshot is hundreds of MB (1.6 GB at 10,000,000 znodes), a pruned WAL segment
//! 64 MiB. Unlinking such a file frees all of its blocks at once. On the machine these figures
//! come from (ext4 mounted with `discard`, a virtio disk), each `rm` of a 400 MB file took about
//! 0.1 s, and the acknowledged writes of a pipelined set running meanwhile waited up to 50–100 ms
//! behind it; the same files cut from the end 8 MiB at a time, with a short pause after each cut,
//! took 0.4 s to go and the writes saw no such wait (docs/PERFORMANCE.md, "Old snapshots deleted
//! in cuts"). Dropping the file's cached pages first did not help: the cost is in freeing the
//! blocks. RocksDB's `DeleteScheduler` deletes its files in chunks by `ftruncate` for the same
//! reason.

use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How much of a file one cut removes.
const CUT: u64 = 8 << 20;

/// The pause after each cut, in which the log's requests reach the disk.
const PAUSE: Duration = Duration::from_millis(2);

/// Deletes `path`: a file larger than [`CUT`] is first cut down from its end, [`CUT`] bytes at a
/// time with a short pause after each cut; then it is unlinked. Blocks the calling thread for
/// about 1 ms per MB of a large file: call it where nothing waits on it. A file that is already
/// gone is no error.
///
/// # Errors
/// What opening, truncating or unlinking the file returns (other than `NotFound`).
pub(crate) fn delete_in_cuts(path: &Path) -> io::Result<()> {
    cut_then_unlink(path, CUT, PAUSE)
}

/// `path` with `suffix` added to its file name: what a file to be deleted is renamed to first,
/// so that nothing reads or lists it under its own name again.
pub(crate) fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(suffix);
    path.with_file_name(name)
}

fn cut_then_unlink(path: &Path, cut: u64, pause: Duration) -> io::Result<()> {
    let file = match OpenOptions::new().write(true).open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut len = file.metadata()?.len();
    while len > cut {
        len -= cut;
        file.set_len(len)?;
        std::thread::sleep(pause);
    }
    drop(file);
    match std::fs::remove_file(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_many_cuts_and_a_small_one_are_deleted() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big");
        std::fs::write(&big, vec![7u8; 10 * 4096 + 123]).unwrap();
        cut_then_unlink(&big, 4096, Duration::ZERO).unwrap();
        assert!(!big.exists());
        let small = dir.path().join("small");
        std::fs::write(&small, b"x").unwrap();
        delete_in_cuts(&small).unwrap();
        assert!(!small.exists());
    }

    #[test]
    fn a_missing_file_is_no_error_and_a_directory_is_one() {
        let dir = tempfile::tempdir().unwrap();
        delete_in_cuts(&dir.path().join("gone")).unwrap();
        assert!(delete_in_cuts(dir.path()).is_err());
        assert!(dir.path().exists());
    }
}
