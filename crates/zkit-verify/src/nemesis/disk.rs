//! Disk full: the server's data dir lives on a small tmpfs that this process mounts (root
//! only, as `zkit-server/tests/disk_full.rs` does); the fault writes a filler file until
//! ENOSPC, and healing deletes it. The mount is undone when [`Tmpfs`] is dropped.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use futures::future::BoxFuture;
use futures::FutureExt as _;

use super::{Fault, Nemesis};
use crate::Error;

/// A mounted tmpfs, unmounted on drop (lazily if a file is still open).
#[derive(Debug)]
pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size_mib` at `dir` (created if missing).
    ///
    /// # Errors
    /// [`Error::Setup`] when not root or the mount fails (the message says why).
    pub fn mount(dir: &Path, size_mib: u64) -> Result<Tmpfs, Error> {
        std::fs::create_dir_all(dir)?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| Error::Setup(format!("cannot run mount: {e}")))?;
        if !out.status.success() {
            return Err(Error::Setup(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(Tmpfs {
            dir: dir.to_path_buf(),
        })
    }

    /// The mount point.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let plain = Command::new("umount").arg(&self.dir).status();
        if !plain.is_ok_and(|s| s.success()) {
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        }
    }
}

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
