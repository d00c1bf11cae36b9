//! What the zkit-cli tests share: running the built `zkit` binary as a one-shot command
//! ([`zkit_within`], [`zkit_at`]) and as a durable `zkit serve` process ([`serve`]).
//!
//! Every command runs without the `ZKIT_SERVER` and `ZKIT_AUTH` of the environment, so a
//! developer's settings cannot change what a test sees, and is killed if it outlives its bound.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

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
