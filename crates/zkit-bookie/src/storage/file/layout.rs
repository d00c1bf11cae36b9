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
}

pub(super) const CHECKPOINT_MAGIC: &[u8; 8] = b"ZKBCKPT1";

impl Checkpoint {
    pub(super) fn encode(&self) -> Vec<u8> {
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

    pub(super) fn read(path: &Path) -> Result<Option<Checkpoint>> {
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
