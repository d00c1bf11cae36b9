//! Child processes in tests: locating the built `zkit` binary, and killing children with
//! SIGKILL (a crash, not a clean shutdown) while never leaking them when a test fails.
//!
//! `env!("CARGO_BIN_EXE_zkit")` only exists inside the `zkit-cli` package; tests elsewhere use
//! [`zkit_bin`], which finds the binary next to the running test executable.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};

/// The path of the built `zkit` binary: `target/<profile>/zkit`, found from the running test
/// executable (`target/<profile>/deps/<test>-<hash>`).
///
/// # Panics
/// When the binary is not there. `cargo test --workspace` / `cargo nextest run --workspace`
/// build it; with `-p <crate>` run `cargo build -p zkit-cli` first.
pub fn zkit_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe of the test binary");
    let candidates = zkit_bin_candidates(&exe);
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| {
            panic!(
                "the zkit binary was not found (looked at {candidates:?}); \
                 build it with `cargo build -p zkit-cli` or run the whole workspace's tests"
            )
        })
}

/// Where `zkit` may be, nearest first, for a test executable at `exe`: integration and unit
/// tests live in `target/<profile>/deps/`, the binary in `target/<profile>/`.
fn zkit_bin_candidates(exe: &Path) -> Vec<PathBuf> {
    let name = format!("zkit{}", std::env::consts::EXE_SUFFIX);
    exe.ancestors()
        .skip(1) // the executable itself
        .take(2) // deps/, then <profile>/
        .map(|dir| dir.join(&name))
        .collect()
}

/// A `Command` for the built `zkit` binary (see [`zkit_bin`]).
pub fn zkit_command() -> Command {
    Command::new(zkit_bin())
}

/// Kills `child` with SIGKILL (what `Child::kill` sends on Unix) and reaps it.
///
/// A child that already exited is only reaped. Returns its exit status.
///
/// # Errors
/// When waiting for the child fails.
pub fn kill9(child: &mut Child) -> io::Result<ExitStatus> {
    if let Some(status) = child.try_wait()? {
        return Ok(status);
    }
    // InvalidInput means it exited between try_wait and kill; wait() below reaps it either way.
    match child.kill() {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
        Err(e) => return Err(e),
    }
    child.wait()
}

/// A child process that is killed with SIGKILL and reaped when dropped, so a failing test
/// (a panic) does not leave servers or clients running.
#[derive(Debug)]
pub struct ChildGuard {
    child: Option<Child>,
}

impl ChildGuard {
    /// Spawns `command` and guards the child.
    ///
    /// # Errors
    /// When spawning fails.
    pub fn spawn(command: &mut Command) -> io::Result<ChildGuard> {
        Ok(ChildGuard {
            child: Some(command.spawn()?),
        })
    }

    /// The child's process id.
    pub fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// The guarded child, e.g. to take its stdout.
    pub fn child_mut(&mut self) -> &mut Child {
        self.child
            .as_mut()
            .expect("ChildGuard holds a child until dropped")
    }

    /// Kills the child with SIGKILL now and returns its exit status.
    ///
    /// # Errors
    /// When waiting for the child fails.
    pub fn kill9(&mut self) -> io::Result<ExitStatus> {
        kill9(self.child_mut())
    }

    /// Releases the child without killing it.
    pub fn into_inner(mut self) -> Child {
        self.child
            .take()
            .expect("ChildGuard holds a child until dropped")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = kill9(child);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zkit_bin_is_looked_for_next_to_the_deps_dir() {
        let exe = Path::new("/w/target/debug/deps/compat-0123abcd");
        let want = |p: &str| PathBuf::from(format!("{p}{}", std::env::consts::EXE_SUFFIX));
        assert_eq!(
            zkit_bin_candidates(exe),
            [
                want("/w/target/debug/deps/zkit"),
                want("/w/target/debug/zkit")
            ]
        );
    }

    #[test]
    fn kill9_kills_a_running_child() {
        let mut guard = ChildGuard::spawn(Command::new("sleep").arg("600")).expect("spawn sleep");
        let status = guard.kill9().expect("kill9");
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "{status:?}");
    }

    #[test]
    fn kill9_reaps_an_exited_child() {
        let mut child = Command::new("true").spawn().expect("spawn true");
        // wait via kill9 only: it must notice the exit (or kill a not-yet-exited child) and reap.
        let status = kill9(&mut child).expect("kill9");
        assert!(status.success() || status.code().is_none(), "{status:?}");
    }

    #[test]
    fn guard_kills_on_drop() {
        let guard = ChildGuard::spawn(Command::new("sleep").arg("600")).expect("spawn sleep");
        let pid = guard.id();
        drop(guard);
        // The guard killed and reaped it, so /proc/<pid> is gone (pids are not reused this fast:
        // the kernel hands them out in increasing order up to pid_max).
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "child {pid} still exists after the guard was dropped"
        );
    }
}
