//! Child processes in tests: locating the built `zkit` binary, and killing children with
//! SIGKILL (a crash, not a clean shutdown) while never leaking them when a test fails.
//!
//! `env!("CARGO_BIN_EXE_zkit")` only exists inside the `zkit-cli` package; tests elsewhere use
//! [`zkit_bin`], which finds the binary next to the running test executable.
//!
//! A guard's `Drop` does not run when the parent itself is killed (SIGKILL, or a signal it does
//! not handle). For long-lived harnesses (zkit-verify's servers and bookies) [`tied_command`] and
//! [`ChildGuard::spawn_tied`] make the kernel kill the child then too: the child starts under
//! util-linux's `setpriv --pdeathsig KILL`, which sets the parent-death signal before it execs
//! the program (so the child's pid is the program's). Linux sends that signal when the *thread*
//! that forked the child ends, so tied children are forked by one thread that lives as long as
//! the process, never by a short-lived blocking-pool thread. The tie holds from the moment the
//! program runs: a parent killed in the instant between `setpriv` starting and its exec leaves
//! the child untied.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::{mpsc, OnceLock};

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

    /// Spawns `command`, made by [`tied_command`], from the process's spawner thread, so the
    /// child is killed when this process dies however it dies, and guards it.
    ///
    /// # Errors
    /// When spawning fails.
    pub fn spawn_tied(command: Command) -> io::Result<ChildGuard> {
        Ok(ChildGuard {
            child: Some(spawn_on_spawner(command)?),
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

/// The program that sets a parent-death signal and execs the rest of its command line.
const SETPRIV: &str = "/usr/bin/setpriv";

/// A `Command` for `program` whose child the kernel kills (SIGKILL) when this process dies:
/// `setpriv --pdeathsig KILL -- program`, to be spawned with [`ChildGuard::spawn_tied`]. Without
/// `setpriv` (util-linux) it is a plain `Command` for `program`, and only the guard's `Drop`
/// stops the child.
pub fn tied_command(program: impl AsRef<OsStr>) -> Command {
    if Path::new(SETPRIV).is_file() {
        let mut command = Command::new(SETPRIV);
        command.args(["--pdeathsig", "KILL", "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns `command` from one thread that lives as long as the process: the parent-death signal
/// fires when the forking thread ends, not the process.
fn spawn_on_spawner(command: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("tied-spawner".into())
            .spawn(move || {
                for (mut command, reply) in rx {
                    let _ = reply.send(command.spawn());
                }
            })
            .expect("spawn the tied-spawner thread");
        tx
    });
    let (reply, result) = mpsc::channel();
    spawner
        .send((command, reply))
        .map_err(|_| io::Error::other("the tied-spawner thread is gone"))?;
    result
        .recv()
        .map_err(|_| io::Error::other("the tied-spawner thread dropped a request"))?
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

    /// Set in the re-executed test binary that plays the parent of a tied child.
    const TIED_PARENT_ENV: &str = "ZKIT_TESTKIT_TIED_PARENT";

    /// The parent's part: spawn a tied `sleep`, print its pid, and wait to be killed. Runs only
    /// when re-executed by `a_tied_child_dies_with_its_parent`, from a short-lived thread (as
    /// a blocking-pool task would), which must not matter.
    #[test]
    fn tied_parent_role() {
        if std::env::var_os(TIED_PARENT_ENV).is_none() {
            return;
        }
        let (guard, tid) = std::thread::spawn(|| {
            let mut sleep = tied_command("sleep");
            sleep.arg("600");
            let guard = ChildGuard::spawn_tied(sleep).expect("spawn tied sleep");
            // setpriv sets the signal and then execs the program: a parent killed before that
            // leaves an untied child (the kernel checks nothing at prctl time), so wait for
            // the exec, while this thread is still alive.
            let comm = format!("/proc/{}/comm", guard.id());
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while std::fs::read_to_string(&comm).map_or(true, |c| c.trim() != "sleep")
                && std::time::Instant::now() < deadline
            {
                std::thread::yield_now();
            }
            let tid = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
            (guard, tid)
        })
        .join()
        .expect("spawning thread");
        // Wait until the kernel has reaped the spawning thread (its children are handed on at
        // that point): a child tied to it would have been killed by now.
        let task = Path::new("/proc").join(tid);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while task.exists() && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        println!("tied-child-pid {}", guard.id());
        std::thread::sleep(std::time::Duration::from_secs(600));
    }

    fn alive(pid: u32) -> bool {
        // A zombie (state Z) is dead; a missing entry is dead and reaped.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| {
                stat.rsplit_once(')')
                    .map(|(_, rest)| !rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(false)
    }

    #[test]
    fn a_tied_child_dies_with_its_parent() {
        if !Path::new(SETPRIV).is_file() {
            eprintln!("SKIP: no {SETPRIV}");
            return;
        }
        use std::io::BufRead;
        let exe = std::env::current_exe().expect("current_exe");
        let mut parent = ChildGuard::spawn(
            Command::new(exe)
                .args(["--exact", "process::tests::tied_parent_role", "--nocapture"])
                .env(TIED_PARENT_ENV, "1")
                .stdout(std::process::Stdio::piped()),
        )
        .expect("re-exec the test binary as the parent");
        let stdout = parent.child_mut().stdout.take().expect("parent stdout");
        let pid: u32 = std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix("tied-child-pid ").map(str::to_owned))
            .expect("the parent printed its child's pid")
            .parse()
            .expect("a pid");
        assert!(alive(pid), "tied child {pid} is not running");
        parent.kill9().expect("kill -9 the parent");
        // The kernel delivers the parent-death signal as the parent exits; allow it to be
        // scheduled, but a child that outlives this is not tied.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while alive(pid) && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        let survived = alive(pid);
        if survived {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
        }
        assert!(!survived, "tied child {pid} outlived its parent's kill -9");
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
