//! Server selection for the zkit library's black-box tests: every test runs against each
//! server [`servers`] returns, `zkit_testkit::targets()`: the embedded zkit server, Apache
//! ZooKeeper standalone (`ZKIT_APACHE_ZK`) and an Apache ensemble (`ZKIT_APACHE_ENSEMBLE`), the
//! Apache ones skipped with a `SKIP` line when unset (a failure under `CI`); `ZKIT_TARGETS`
//! restricts them.
#![allow(dead_code)]

use std::time::Duration;

pub mod foreign;
pub mod txn;

use zkit::{Session, SessionOptions};

#[allow(unused_imports)] // not every test file waits
pub use zkit_testkit::{eventually, Target};

/// The servers every recipe test runs against (`zkit_testkit::targets`).
pub async fn servers() -> Vec<Target> {
    zkit_testkit::targets().await
}

/// A session to `addr` with the given session timeout.
pub async fn session(addr: &str, session_timeout: Duration) -> Session {
    Session::connect(
        addr,
        SessionOptions::default().with_session_timeout(session_timeout),
    )
    .await
    .expect("session connects")
}

/// Children of `path` (empty when it does not exist), as of now: `sync` first, so that a
/// session on another ensemble member than the writer's sees every write acknowledged before
/// the call (ZooKeeper promises one session's order, not a fresh view across sessions).
pub async fn children(session: &Session, path: &str) -> Vec<String> {
    session
        .client()
        .sync(path)
        .await
        .unwrap_or_else(|err| panic!("sync {path}: {err}"));
    match session.client().list_children(path).await {
        Ok(children) => children,
        Err(zkit::zkit_client::Error::NoNode) => Vec::new(),
        Err(err) => panic!("list {path}: {err}"),
    }
}

/// The last version and mzxid a config watcher reported for each path.
#[derive(Default)]
pub struct ConfigVersions(std::collections::HashMap<String, (i32, i64)>);

impl ConfigVersions {
    /// Checks that `change` (unless a removal) moves its path's version and mzxid strictly
    /// forward, and remembers them.
    pub fn check(&mut self, change: &zkit::config::ConfigChange) {
        if change.kind == zkit::config::ChangeKind::Removed {
            return;
        }
        if let Some(&(version, mzxid)) = self.0.get(&change.path) {
            assert!(
                change.version > version && change.mzxid > mzxid,
                "{} went backwards: v{} z{} after v{version} z{mzxid}",
                change.path,
                change.version,
                change.mzxid
            );
        }
        self.0
            .insert(change.path.clone(), (change.version, change.mzxid));
    }
}

/// Writes `source` as `<class>.java` into `dir` and compiles it there with javac.
pub fn javac(dir: &std::path::Path, class: &str, source: &str, classpath: &str) -> bool {
    let file = dir.join(format!("{class}.java"));
    std::fs::write(&file, source).expect("write java");
    let status = std::process::Command::new("javac")
        .arg("-cp")
        .arg(classpath)
        .arg("-d")
        .arg(dir)
        .arg(&file)
        .status();
    matches!(status, Ok(s) if s.success())
}

/// The Rust side of an interop test: `rounds` acquisitions of a zkit `Mutex` on `path`, each
/// appending `enter rust` / `exit rust` to `marks` around a 1-ms critical section.
pub async fn rust_contender(session: &Session, path: &str, marks: &std::path::Path, rounds: usize) {
    let mutex = zkit::lock::Mutex::new(session, path);
    contend(|| mutex.lock(), marks, rounds).await;
}

/// As [`rust_contender`] with any lock: `acquire` takes it once.
pub async fn contend<F, Fut>(acquire: F, marks: &std::path::Path, rounds: usize)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = zkit::Result<zkit::lock::LockGuard>>,
{
    for _ in 0..rounds {
        let guard = acquire().await.expect("lock");
        append_mark(marks, "enter rust\n");
        tokio::time::sleep(Duration::from_millis(1)).await;
        append_mark(marks, "exit rust\n");
        guard.release().await.expect("release");
    }
}

/// Waits (at most 120 s) for the other library's contender process and checks it succeeded.
pub async fn foreign_finished(child: tokio::process::Child, what: &str, target: &str) {
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("{what} finishes"))
        .unwrap_or_else(|e| panic!("{what} output: {e}"));
    assert!(
        out.status.success(),
        "{target}: {what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Appends `line` to the marks file `file` (created if missing).
pub fn append_mark(file: &std::path::Path, line: &str) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)
        .expect("open marks");
    f.write_all(line.as_bytes()).expect("append");
}

/// Checks that the marks two lock holders wrote to a shared file come in `enter X` / `exit X`
/// pairs (no overlap); returns the rounds of `foreign` (the other library's holder) and of
/// `rust`. Panics on an overlap or an unknown holder.
pub fn check_no_interleaving(text: &str, foreign: &str) -> (usize, usize) {
    let mut counts = (0, 0);
    let mut lines = text.lines();
    while let Some(enter) = lines.next() {
        let who = enter
            .strip_prefix("enter ")
            .unwrap_or_else(|| panic!("expected an enter mark, got {enter:?}"));
        let exit = lines.next().unwrap_or_else(|| panic!("{who} never exited"));
        assert_eq!(
            exit,
            format!("exit {who}"),
            "overlap: {who} entered, then {exit:?}"
        );
        match who {
            "rust" => counts.1 += 1,
            other if other == foreign => counts.0 += 1,
            other => panic!("unknown holder {other}"),
        }
    }
    counts
}

/// Debian's kazoo is installed for Debian's Python; a pyenv `python3` on PATH would not see it.
pub const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// Writes the kazoo program `source` to `dir/name` and returns its path when kazoo can run here
/// (Debian's python3-kazoo under [`SYSTEM_PYTHON`]); else prints a SKIP line and returns `None`
/// (a failure under CI).
pub fn kazoo_script(dir: &std::path::Path, name: &str, source: &str) -> Option<std::path::PathBuf> {
    let available = std::path::Path::new(SYSTEM_PYTHON).is_file()
        && std::path::Path::new("/usr/lib/python3/dist-packages/kazoo").is_dir();
    if !available {
        if std::env::var_os("CI").is_some() {
            panic!("kazoo interop cannot run under CI: python3-kazoo missing");
        }
        eprintln!("SKIP kazoo: /usr/bin/python3 with python3-kazoo not found");
        return None;
    }
    let script = dir.join(name);
    std::fs::write(&script, source).expect("write script");
    Some(script)
}

/// The kazoo program `script` with `args`: stdin closed, stdout and stderr piped, killed on drop.
pub fn kazoo(script: &std::path::Path, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(SYSTEM_PYTHON);
    cmd.arg(script)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// A Curator interop test that cannot run here (`why`): a SKIP line, or under CI a failure
/// naming `test`, so a CI machine without Java or the jars cannot pass it silently.
pub fn skip_curator(test: &str, why: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{test} cannot run under CI: {why}");
    }
    eprintln!("SKIP curator: {why}");
}
