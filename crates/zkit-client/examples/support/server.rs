//! For the measuring examples: a zkit server in a *child process* (this same example binary,
//! re-run with `--serve`), so that the measuring process holds only clients.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// The child's flag.
pub const SERVE_FLAG: &str = "--serve";

/// If this process was started with [`SERVE_FLAG`]: runs an in-memory zkit server (no
/// connection limit), prints `ADDR <address>`, and serves until stdin closes. Never returns
/// then.
pub fn serve_if_asked() {
    if !std::env::args().any(|a| a == SERVE_FLAG) {
        return;
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let server = zkit_server::Server::start(zkit_server::ServerConfig::ephemeral())
            .await
            .expect("start zkit server");
        println!("ADDR {}", server.addr());
        // Until the parent goes away.
        let _ = tokio::task::spawn_blocking(|| {
            let mut sink = String::new();
            let _ = std::io::stdin().read_line(&mut sink);
        })
        .await;
        server.stop().await;
    });
    std::process::exit(0);
}

/// A zkit server in a child process, stopped on drop.
pub struct ChildServer {
    child: Child,
    /// Its `host:port`.
    pub addr: String,
}

impl ChildServer {
    /// Starts it and waits for its address.
    pub fn start() -> ChildServer {
        let exe = std::env::current_exe().expect("current_exe");
        let mut child = Command::new(exe)
            .arg(SERVE_FLAG)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn server child");
        let stdout = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read address");
        let addr = line
            .trim()
            .strip_prefix("ADDR ")
            .unwrap_or_else(|| panic!("unexpected server output {line:?}"))
            .to_owned();
        ChildServer { child, addr }
    }
}

impl Drop for ChildServer {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// VmRSS of a process in KiB (`/proc/<pid>/status`).
#[allow(dead_code)] // used by idle_sessions only
pub fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}
