//! The server under test as a real OS process on a durable data dir, and the nemesis that
//! kills (SIGKILL) and restarts it, or stops (SIGSTOP) and continues (SIGCONT) it.
//!
//! The process is `zkit serve` (the product), or `zkit-verify serve` (the same server library
//! with test-only knobs: a small WAL segment for the disk-full fault, and the deliberately
//! broken fail points). Both print `… listening on ADDR` on stdout; the first start asks for
//! port 0, restarts ask for the port it got, so clients reconnect to the same address. Its
//! stderr (the server log) goes to a file.

use std::io::BufRead as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt as _;
use tokio::sync::Mutex;
use zkit_testkit::{tied_command, ChildGuard};

use super::{Fault, Nemesis};
use crate::Error;

/// How to start the server.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// The program.
    pub program: PathBuf,
    /// Arguments before the common ones (`serve`).
    pub args: Vec<String>,
    /// The data dir.
    pub data_dir: PathBuf,
    /// tickTime in ms.
    pub tick_ms: u64,
    /// Arguments after the common ones.
    pub extra: Vec<String>,
    /// Where its stderr goes.
    pub log: PathBuf,
}

impl ServerSpec {
    /// `zkit serve --fsync always` on `data_dir`.
    pub fn zkit_serve(program: PathBuf, data_dir: PathBuf, tick_ms: u64, log: PathBuf) -> Self {
        ServerSpec {
            program,
            args: vec!["serve".into()],
            data_dir,
            tick_ms,
            extra: vec![
                "--fsync".into(),
                "always".into(),
                "--4lw-whitelist".into(),
                "*".into(),
                "--max-client-cnxns".into(),
                "0".into(),
            ],
            log,
        }
    }
}

/// The running server process.
#[derive(Debug)]
pub struct ServerProcess {
    spec: ServerSpec,
    addr: SocketAddr,
    child: Option<ChildGuard>,
    paused: bool,
    starts: u32,
}

fn launch(spec: &ServerSpec, port: u16) -> Result<(ChildGuard, SocketAddr), Error> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&spec.log)?;
    let mut command = tied_command(&spec.program);
    command
        .args(&spec.args)
        .arg("--port")
        .arg(port.to_string())
        .arg("--data-dir")
        .arg(&spec.data_dir)
        .arg("--tick-time")
        .arg(spec.tick_ms.to_string())
        .args(&spec.extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    let mut guard = ChildGuard::spawn_tied(command)
        .map_err(|e| Error::Process(format!("cannot start {}: {e}", spec.program.display())))?;
    let stdout = guard
        .child_mut()
        .stdout
        .take()
        .ok_or_else(|| Error::Process("server without stdout".into()))?;
    let (tx, rx) = std::sync::mpsc::channel();
    // Read until the address line, then keep draining so the pipe never fills.
    std::thread::spawn(move || {
        let mut sent = false;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if !sent {
                if let Some(addr) = line.split("listening on ").nth(1) {
                    let _ = tx.send(addr.trim().to_owned());
                    sent = true;
                }
            }
        }
    });
    let addr = rx.recv_timeout(Duration::from_secs(30)).map_err(|_| {
        Error::Process(format!(
            "server did not start listening (see {})",
            spec.log.display()
        ))
    })?;
    let addr = addr
        .parse()
        .map_err(|e| Error::Process(format!("bad server address {addr:?}: {e}")))?;
    Ok((guard, addr))
}

/// Sends `sig` (a name such as `KILL` or `STOP`) to process `pid` with kill(1).
pub(super) fn signal(pid: u32, sig: &str) -> Result<(), Error> {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Process(format!("kill -{sig} {pid} failed")))
    }
}

impl ServerProcess {
    /// Starts the server on a free port.
    ///
    /// # Errors
    /// When it cannot be started or never prints its address.
    pub async fn start(spec: ServerSpec) -> Result<ServerProcess, Error> {
        let s = spec.clone();
        let (child, addr) = tokio::task::spawn_blocking(move || launch(&s, 0))
            .await
            .map_err(|e| Error::Process(e.to_string()))??;
        Ok(ServerProcess {
            spec,
            addr,
            child: Some(child),
            paused: false,
            starts: 1,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(ChildGuard::id)
    }

    /// How many times it was started.
    pub fn starts(&self) -> u32 {
        self.starts
    }

    /// The data dir.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.spec.data_dir
    }

    /// kill -9 (a stopped process dies too).
    ///
    /// # Errors
    /// When waiting for it fails.
    pub fn kill9(&mut self) -> Result<(), Error> {
        if let Some(mut child) = self.child.take() {
            child.kill9()?;
        }
        self.paused = false;
        Ok(())
    }

    /// Starts it again on the same port and data dir (retrying briefly: the old process's
    /// lock is released as the kernel reaps it).
    ///
    /// # Errors
    /// When it does not come back.
    pub async fn restart(&mut self) -> Result<(), Error> {
        self.kill9()?;
        let port = self.addr.port();
        let mut last = None;
        for attempt in 0..10u64 {
            let s = self.spec.clone();
            match tokio::task::spawn_blocking(move || launch(&s, port))
                .await
                .map_err(|e| Error::Process(e.to_string()))?
            {
                Ok((child, _)) => {
                    self.child = Some(child);
                    self.starts += 1;
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(100 * (attempt + 1))).await;
        }
        Err(last.unwrap_or_else(|| Error::Process("restart failed".into())))
    }

    /// SIGSTOP.
    ///
    /// # Errors
    /// When the signal cannot be sent.
    pub fn pause(&mut self) -> Result<(), Error> {
        if let Some(pid) = self.pid() {
            signal(pid, "STOP")?;
            self.paused = true;
        }
        Ok(())
    }

    /// SIGCONT.
    ///
    /// # Errors
    /// When the signal cannot be sent.
    pub fn resume(&mut self) -> Result<(), Error> {
        if let Some(pid) = self.pid() {
            signal(pid, "CONT")?;
        }
        self.paused = false;
        Ok(())
    }

    /// Makes sure it runs and is not stopped (after a failed fault).
    ///
    /// # Errors
    /// When it cannot be brought back.
    pub async fn ensure_running(&mut self) -> Result<(), Error> {
        if self.paused {
            self.resume()?;
        }
        let alive = match self.child.as_mut() {
            Some(c) => c.child_mut().try_wait()?.is_none(),
            None => false,
        };
        if !alive {
            self.restart().await?;
        }
        Ok(())
    }

    /// SIGTERM (a graceful stop: final snapshot), then SIGKILL after 10 s.
    pub fn stop(&mut self) {
        let _ = self.resume();
        if let Some(mut child) = self.child.take() {
            let _ = signal(child.id(), "TERM");
            for _ in 0..100 {
                if child.child_mut().try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = child.kill9();
        }
    }
}

/// Kills/restarts and pauses/continues a shared [`ServerProcess`].
#[derive(Debug)]
pub struct ServerNemesis {
    /// The server.
    pub server: Arc<Mutex<ServerProcess>>,
}

impl Nemesis for ServerNemesis {
    fn name(&self) -> &'static str {
        "server"
    }

    fn handles(&self, fault: &Fault) -> bool {
        matches!(fault, Fault::KillServer { .. } | Fault::PauseServer { .. })
    }

    fn inject<'a>(&'a mut self, fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>> {
        async move {
            let mut s = self.server.lock().await;
            let pid = s.pid().unwrap_or(0);
            match fault {
                Fault::KillServer { .. } => {
                    s.kill9()?;
                    Ok(format!("killed pid {pid}"))
                }
                Fault::PauseServer { .. } => {
                    s.pause()?;
                    Ok(format!("stopped pid {pid}"))
                }
                _ => Ok(String::new()),
            }
        }
        .boxed()
    }

    fn heal<'a>(&'a mut self, fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>> {
        async move {
            let mut s = self.server.lock().await;
            match fault {
                Fault::KillServer { .. } => {
                    s.restart().await?;
                    Ok(format!("restarted as pid {}", s.pid().unwrap_or(0)))
                }
                Fault::PauseServer { .. } => {
                    s.resume()?;
                    Ok("continued".into())
                }
                _ => Ok(String::new()),
            }
        }
        .boxed()
    }
}
