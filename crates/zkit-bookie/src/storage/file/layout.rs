//! File names, small file helpers, and the checkpoint file.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};

use bytes::{Buf, BufMut, BytesMut};

use crate::storage::{Result, StorageError};

pub(super) fn journal_name(seq: u64) -> String {
    format!("journal-{seq:016x}.log")
}

pub(super) fn entry_log_name(id: u32) -> String {
    format!("entrylog-{id:08x}.log")
}

/// Files named `prefix<hex>.log` in `dir`, by number.
pub(super) fn numbered(dir: &Path, prefix: &str) -> Result<BTreeMap<u64, PathBuf>> {
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

pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StorageError::io(format!("fsync dir {}", dir.display()), e))
}

pub(super) fn open_append(path: &Path) -> Result<(File, u64)> {
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

pub(super) fn corrupt(file: &Path, offset: u64, reason: impl Into<String>) -> StorageError {
    StorageError::Corrupt {
        file: file.to_path_buf(),
        offset,
        reason: reason.into(),
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Checkpoint {
    pub(super) journal_seq: u64,
    pub(super) index_len: u64,
    pub(super) log_id: u32,
    pub(super) log_len: u64,
    /// Which index file is current ([`index_name`]); garbage collection rewrites the index
    /// into the next one.
    pub(super) index_gen: u64,
}

pub(super) const CHECKPOINT_MAGIC: &[u8; 8] = b"ZKBCKPT1";
/// The checkpoint with an index generation (written from now on; the first is still read).
pub(super) const CHECKPOINT_MAGIC_2: &[u8; 8] = b"ZKBCKPT2";

/// The index file of generation `gen`: `index.log`, then `index-<gen:016x>.log`.
pub(super) fn index_name(gen: u64) -> String {
    if gen == 0 {
        "index.log".into()
    } else {
        format!("index-{gen:016x}.log")
    }
}

impl Checkpoint {
    pub(super) fn encode(&self) -> Vec<u8> {
        let mut b = BytesMut::new();
        b.put_slice(CHECKPOINT_MAGIC_2);
        b.put_u64(self.journal_seq);
        b.put_u64(self.index_len);
        b.put_u32(self.log_id);
        b.put_u64(self.log_len);
        b.put_u64(self.index_gen);
        let crc = crc32c::crc32c(&b);
        b.put_u32(crc);
        b.to_vec()
    }

    pub(super) fn read(path: &Path) -> Result<Option<Checkpoint>> {
        let data = match fs::read(path) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StorageError::io(format!("read {}", path.display()), e)),
        };
        let body = match (data.len(), data.get(..8)) {
            (40, Some(m)) if m == CHECKPOINT_MAGIC => 36,
            (48, Some(m)) if m == CHECKPOINT_MAGIC_2 => 44,
            _ => return Err(corrupt(path, 0, "not a checkpoint file")),
        };
        let crc = u32::from_be_bytes([data[body], data[body + 1], data[body + 2], data[body + 3]]);
        if crc32c::crc32c(&data[..body]) != crc {
            return Err(corrupt(path, body as u64, "checkpoint checksum mismatch"));
        }
        let mut b = &data[8..body];
        Ok(Some(Checkpoint {
            journal_seq: b.get_u64(),
            index_len: b.get_u64(),
            log_id: b.get_u32(),
            log_len: b.get_u64(),
            index_gen: if body == 44 { b.get_u64() } else { 0 },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_checkpoint_formats_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("checkpoint");
        let cp = Checkpoint {
            journal_seq: 7,
            index_len: 99,
            log_id: 3,
            log_len: 4096,
            index_gen: 2,
        };
        fs::write(&path, cp.encode()).unwrap();
        assert_eq!(Checkpoint::read(&path).unwrap(), Some(cp));
        // The first format (no index generation), as older bookies wrote it: generation 0.
        let mut b = BytesMut::new();
        b.put_slice(CHECKPOINT_MAGIC);
        b.put_u64(7);
        b.put_u64(99);
        b.put_u32(3);
        b.put_u64(4096);
        let crc = crc32c::crc32c(&b);
        b.put_u32(crc);
        fs::write(&path, &b).unwrap();
        assert_eq!(
            Checkpoint::read(&path).unwrap(),
            Some(Checkpoint { index_gen: 0, ..cp })
        );
        assert_eq!(index_name(0), "index.log");
        b[20] ^= 1;
        fs::write(&path, &b).unwrap();
        assert!(Checkpoint::read(&path).is_err(), "a flipped byte is caught");
    }
}
