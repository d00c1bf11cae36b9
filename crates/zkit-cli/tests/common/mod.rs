//! What the zkit-cli tests share: running the built `zkit` binary as a one-shot command
//! ([`zkit_within`], [`zkit_at`]) and as a durable `zkit serve` process ([`serve`]); a process
//! and its first stdout line ([`first_line`]), the address in `zkit serve`'s
//! ([`listening_addr`]), and a closed ledger written by `zkit ledger write` ([`write_ledger`]).
//!
//! Every command runs without the `ZKIT_SERVER` and `ZKIT_AUTH` of the environment, so a
//! developer's settings cannot change what a test sees, and is killed if it outlives its bound.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use zkit_testkit::ChildGuard;

/// Runs `zkit ARGS` (no ZKIT_* environment), failing the test if it takes longer than `wait`;
/// returns (exit code, stdout, stderr).
pub async fn zkit_within(wait: Duration, args: &[&str]) -> (i32, String, String) {
    let out = tokio::time::timeout(
        wait,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_zkit"))
            .args(args)
            .env_remove("ZKIT_SERVER")
            .env_remove("ZKIT_AUTH")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("zkit finished in time")
    .expect("run zkit");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `zkit ARGS --server SERVER` as [`zkit_within`] does.
pub async fn zkit_at(wait: Duration, server: &str, args: &[&str]) -> (i32, String, String) {
    zkit_within(wait, &[args, &["--server", server]].concat()).await
}

/// A `zkit serve` process and the address it printed; killed (SIGKILL) when dropped.
pub struct Serve {
    /// The process.
    pub child: Child,
    /// `HOST:PORT` from its `zkit serve listening on` line.
    pub addr: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `zkit serve ARGS --data-dir DIR` (`RUST_LOG=warn`) and returns once it printed its
/// address, at most `wait` later.
pub fn serve(dir: &Path, args: &[&str], wait: Duration) -> Serve {
    let mut child = Command::new(env!("CARGO_BIN_EXE_zkit"))
        .arg("serve")
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn zkit serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(addr) = line.strip_prefix("zkit serve listening on ") {
                let _ = tx.send(addr.trim().to_owned());
            }
        }
    });
    let addr = rx
        .recv_timeout(wait)
        .expect("zkit serve printed its address");
    Serve { child, addr }
}

/// The `HOST:PORT` of `zkit serve`'s first stdout line, `zkit serve listening on HOST:PORT`.
///
/// # Panics
/// When `line` is not that line.
pub fn listening_addr(line: &str) -> String {
    line.strip_prefix("zkit serve listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .trim()
        .to_owned()
}

/// Spawns `cmd` with piped stdout; the guard and its first stdout line, trimmed.
pub fn first_line(cmd: &mut Command) -> (ChildGuard, String) {
    let mut child = ChildGuard::spawn(cmd.stdout(Stdio::piped())).expect("spawn");
    let stdout = child.child_mut().stdout.take().unwrap();
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    (child, line.trim().to_string())
}

/// Writes `lines` as a new ledger with `zkit ledger write` on `server` (ensemble 3, write
/// quorum `write_quorum`, ack quorum 2, `RUST_LOG=warn`), closed at EOF; returns its id.
/// `zkit` is the command to run it with (the test's environment for the binary).
pub fn write_ledger(
    mut zkit: Command,
    server: &str,
    write_quorum: u32,
    lines: impl IntoIterator<Item = String>,
) -> i64 {
    let mut child = zkit
        .args(["ledger", "write", "--server", server])
        .args(["--ensemble", "3", "--write-quorum"])
        .arg(write_quorum.to_string())
        .args(["--ack-quorum", "2"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "zkit ledger write failed");
    let stdout = String::from_utf8(out.stdout).unwrap();
    let first = stdout.lines().next().unwrap_or_default();
    first
        .strip_prefix("ledger ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .parse()
        .unwrap()
}
