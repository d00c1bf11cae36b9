//! Disk full: the server's data dir lives on a small tmpfs that this process mounts (root
//! only, as `zkit-server/tests/disk_full.rs` does); the fault writes a filler file until
//! ENOSPC, and healing deletes it. The mount is undone when [`Tmpfs`] is dropped.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use futures::FutureExt as _;

use super::{Fault, Nemesis};
use crate::Error;

pub use zkit_testkit::Tmpfs;

/// Fills and frees the file system holding the data dir.
#[derive(Debug)]
pub struct DiskNemesis {
    /// The filler file (on the same file system as the data dir, outside it).
    pub filler: PathBuf,
}

fn fill(path: &Path) -> Result<u64, Error> {
    let mut f = std::fs::File::create(path)?;
    let chunk = vec![0xa5u8; 1 << 20];
    let mut written = 0u64;
    loop {
        match f.write(&chunk) {
            Ok(0) => break,
            Ok(n) => written += n as u64,
            Err(e) if e.raw_os_error() == Some(28) => break, // ENOSPC
            Err(e) => return Err(e.into()),
        }
    }
    let _ = f.sync_all();
    Ok(written)
}

impl Nemesis for DiskNemesis {
    fn name(&self) -> &'static str {
        "disk"
    }

    fn handles(&self, fault: &Fault) -> bool {
        matches!(fault, Fault::DiskFull { .. })
    }

    fn inject<'a>(&'a mut self, _fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>> {
        async move {
            let path = self.filler.clone();
            let written = tokio::task::spawn_blocking(move || fill(&path))
                .await
                .map_err(|e| Error::Process(e.to_string()))??;
            Ok(format!("filled {} KiB", written / 1024))
        }
        .boxed()
    }

    fn heal<'a>(&'a mut self, _fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>> {
        async move {
            std::fs::remove_file(&self.filler)?;
            Ok("freed".into())
        }
        .boxed()
    }
}
