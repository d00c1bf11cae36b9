//! A real disk-full for tests: a small tmpfs mounted by the test process (root only), unmounted
//! on drop, also when the test panics.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted tmpfs, unmounted on drop (lazily if a file is still open).
#[derive(Debug)]
pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size_mib` MiB at `dir` (created if missing).
    ///
    /// # Errors
    /// Why it could not: `mount` missing, not root, or the mount refused (its stderr).
    pub fn mount(dir: &Path, size_mib: u64) -> Result<Tmpfs, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
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

/// Whether this process runs as root (`id -u` is 0), which mounting a tmpfs needs.
pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Skips a disk-full test with a printed `reason`; under CI (env `CI` set) it fails instead, so
/// a CI machine that cannot mount cannot pass the test silently.
pub fn skip_disk_full(reason: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "disk-full test cannot run under CI: {reason}"
    );
    eprintln!("SKIPPED disk_full: {reason}");
}
