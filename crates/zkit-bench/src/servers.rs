//! The servers under test: `zkit serve` (the `zkit` binary, as a child process) and Apache
//! ZooKeeper (through `scripts/apache-zk`), each with its data under a directory of the
//! harness's choosing, and what the harness reads about them from `/proc` (RSS, CPU time).
//!
//! Must not leave a server behind: `zkit serve` is `kill_on_drop`, Apache is stopped through
//! its script when a [`RunningServer`] is dropped on an error path.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use tokio::io::{AsyncBufReadExt as _, BufReader};

/// The command line a report records as the one that produced it: `given` (a wrapper script
/// passes its own), else this process's arguments, each one holding a space quoted.
pub fn command_line(given: Option<&str>) -> String {
    given.map(str::to_owned).unwrap_or_else(|| {
        std::env::args()
            .map(|a| if a.contains(' ') { format!("'{a}'") } else { a })
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// The `zkit` binary to run: `explicit`, else the `zkit` next to this executable (both are
/// built into the same target directory), else `zkit` on `PATH`.
pub fn zkit_binary(explicit: Option<&Path>) -> PathBuf {
    if let Some(path) = explicit {
        return path.to_path_buf();
    }
    if let Ok(exe) = std::env::current_exe() {
        let sibling = exe.with_file_name("zkit");
        if sibling.is_file() {
            return sibling;
        }
    }
    PathBuf::from("zkit")
}

/// Which server a figure belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// `zkit serve`.
    Zkit,
    /// Apache ZooKeeper.
    Apache,
}

impl Which {
    /// How reports name it.
    pub fn name(self) -> &'static str {
        match self {
            Which::Zkit => "zkit",
            Which::Apache => "Apache ZooKeeper",
        }
    }
}

/// A running server under test.
pub struct RunningServer {
    /// Which server it is.
    pub which: Which,
    addr: String,
    pid: u32,
    /// Its data directory.
    pub data_dir: PathBuf,
    /// zkit's child process (Apache is stopped through its script).
    child: Option<tokio::process::Child>,
    /// Apache's script and directory.
    apache: Option<(PathBuf, PathBuf)>,
}

impl RunningServer {
    /// Starts `zkit serve` (the `zkit` binary at `zkit`) with its data under `dir`, fsync
    /// always.
    pub async fn start_zkit(zkit: &Path, dir: &Path, port: u16) -> Result<Self> {
        let data_dir = dir.join("data");
        std::fs::create_dir_all(dir)?;
        let mut child = tokio::process::Command::new(zkit)
            .args(["serve", "--host", "127.0.0.1", "--port", &port.to_string()])
            .arg("--data-dir")
            .arg(&data_dir)
            .args([
                "--fsync",
                "always",
                "--max-client-cnxns",
                "0",
                "--log-level",
            ])
            // ZKIT_BENCH_SERVE_LOG: the server's log filter (e.g.
            // `warn,zkit_server::storage=debug` for its slow WAL groups), to its stderr.
            .arg(std::env::var("ZKIT_BENCH_SERVE_LOG").unwrap_or_else(|_| "warn".into()))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start `{} serve`", zkit.display()))?;
        let pid = child.id().context("zkit serve exited at once")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .context("zkit serve did not start within 30 s")??
            .context("zkit serve exited before listening")?;
        let addr = line
            .strip_prefix("zkit serve listening on ")
            .with_context(|| format!("unexpected first line from zkit serve: {line:?}"))?
            .trim()
            .to_string();
        // Keep draining stdout so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Ok(RunningServer {
            which: Which::Zkit,
            addr,
            pid,
            data_dir,
            child: Some(child),
            apache: None,
        })
    }

    /// Starts Apache ZooKeeper through `script` (scripts/apache-zk) in `dir`.
    pub async fn start_apache(script: &Path, dir: &Path, port: u16, heap: &str) -> Result<Self> {
        std::fs::create_dir_all(dir)?;
        let status = tokio::process::Command::new(script)
            .arg("start")
            .arg(dir)
            .arg(port.to_string())
            .env("APACHE_ZK_HEAP", heap)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .await
            .with_context(|| format!("cannot run {}", script.display()))?;
        if !status.success() {
            bail!("{} start failed ({status})", script.display());
        }
        let pid: u32 = std::fs::read_to_string(dir.join("zk.pid"))
            .context("apache-zk wrote no zk.pid")?
            .trim()
            .parse()
            .context("bad zk.pid")?;
        Ok(RunningServer {
            which: Which::Apache,
            addr: format!("127.0.0.1:{port}"),
            pid,
            data_dir: dir.join("data"),
            child: None,
            apache: Some((script.to_path_buf(), dir.to_path_buf())),
        })
    }

    /// The client address, `host:port`.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Resident set size in bytes (VmRSS).
    pub fn rss(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    }

    /// User + system CPU time the server has used so far.
    pub fn cpu(&self) -> Option<Duration> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
        let rest = &stat[stat.rfind(')')? + 2..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: u64 = fields.get(11)?.parse().ok()?;
        let stime: u64 = fields.get(12)?.parse().ok()?;
        // SAFETY: sysconf has no preconditions.
        #[allow(unsafe_code)]
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        let hz = if hz > 0 { hz as f64 } else { 100.0 };
        Some(Duration::from_secs_f64((utime + stime) as f64 / hz))
    }

    /// Stops the server: SIGTERM for zkit (graceful), the script for Apache.
    pub async fn stop(mut self) -> Result<()> {
        if let Some(mut child) = self.child.take() {
            if let Some(pid) = child.id() {
                // SIGTERM: `zkit serve` stops gracefully.
                #[allow(unsafe_code)]
                // SAFETY: kill(2) on our own child's pid.
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGTERM);
                }
            }
            match tokio::time::timeout(Duration::from_secs(20), child.wait()).await {
                Ok(status) => {
                    status?;
                }
                Err(_) => {
                    child.kill().await?;
                }
            }
        }
        if let Some((script, dir)) = self.apache.take() {
            stop_apache(&script, &dir).await?;
        }
        Ok(())
    }
}

async fn stop_apache(script: &Path, dir: &Path) -> Result<()> {
    let status = tokio::process::Command::new(script)
        .arg("stop")
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .await?;
    if !status.success() {
        bail!("{} stop failed ({status})", script.display());
    }
    Ok(())
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        // On an error path: never leave a JVM behind (zkit's child is kill_on_drop).
        if let Some((script, dir)) = self.apache.take() {
            let _ = std::process::Command::new(script)
                .arg("stop")
                .arg(dir)
                .stdout(Stdio::null())
                .status();
        }
    }
}

/// Bytes allocated on disk below `dir` (like `du`; Apache pads its logs with sparse files, so
/// the apparent size would overstate it).
pub fn disk_usage(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    let mut total = 0;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            total += disk_usage(&entry.path());
        } else {
            total += meta.blocks() * 512;
        }
    }
    total
}

/// A port nobody listens on right now.
pub fn free_port() -> Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}
