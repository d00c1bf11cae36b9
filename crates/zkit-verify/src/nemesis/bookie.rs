//! The bookies of the ledger workload as real `zkit bookie` processes (metadata and
//! registration on the server under test), and the nemesis that kills (SIGKILL) and restarts
//! them on the same data dir and port, or stops (SIGSTOP) and continues them.
//!
//! A bookie prints `… listening on ADDR` on stdout once it serves; its stderr goes to
//! `bookie-N.log`. Its id is `127.0.0.1:PORT`, kept in its cookie, so a restart asks for the
//! same port (a port picked free before the first start).

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt as _;
use tokio::sync::Mutex;
use zkit_testkit::{tied_command, ChildGuard};

use super::server::signal;
use super::{Fault, Nemesis};
use crate::Error;

/// One bookie process.
#[derive(Debug)]
struct Bookie {
    port: u16,
    dir: PathBuf,
    log: PathBuf,
    child: Option<ChildGuard>,
    paused: bool,
}

/// The bookies of one run.
#[derive(Debug)]
pub struct Bookies {
    program: PathBuf,
    server: String,
    bookies: Vec<Bookie>,
}

fn launch(program: &Path, server: &str, b: &Bookie) -> Result<ChildGuard, Error> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&b.log)?;
    let mut command = tied_command(program);
    command
        .args(["bookie", "--port", &b.port.to_string(), "--server", server])
        .args(["--fsync", "always", "--session-timeout", "2s"])
        .arg("--data-dir")
        .arg(&b.dir)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    let mut guard = ChildGuard::spawn_tied(command)
        .map_err(|e| Error::Process(format!("cannot start {}: {e}", program.display())))?;
    let stdout = guard
        .child_mut()
        .stdout
        .take()
        .ok_or_else(|| Error::Process("bookie without stdout".into()))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if !sent && line.contains("listening on") {
                let _ = tx.send(());
                sent = true;
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30)).map_err(|_| {
        Error::Process(format!(
            "bookie on port {} did not start (see {})",
            b.port,
            b.log.display()
        ))
    })?;
    Ok(guard)
}

impl Bookies {
    /// Starts `n` bookies of the `zkit` binary `program`, registered on `server`, with data
    /// and logs under `dir`.
    ///
    /// # Errors
    /// When one does not start.
    pub async fn start(
        program: PathBuf,
        server: String,
        dir: &Path,
        n: usize,
    ) -> Result<Bookies, Error> {
        let mut held = Vec::new();
        let mut bookies = Vec::new();
        for i in 0..n {
            let l = std::net::TcpListener::bind("127.0.0.1:0")?;
            let port = l.local_addr()?.port();
            held.push(l);
            bookies.push(Bookie {
                port,
                dir: dir.join(format!("bookie-{i}")),
                log: dir.join(format!("bookie-{i}.log")),
                child: None,
                paused: false,
            });
        }
        drop(held);
        let mut set = Bookies {
            program,
            server,
            bookies,
        };
        for i in 0..n {
            set.restart(i).await?;
        }
        Ok(set)
    }

    /// How many bookies there are.
    pub fn len(&self) -> usize {
        self.bookies.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.bookies.is_empty()
    }

    fn get(&mut self, i: usize) -> Result<&mut Bookie, Error> {
        self.bookies
            .get_mut(i)
            .ok_or_else(|| Error::Setup(format!("no bookie {i}")))
    }

    /// kill -9 of bookie `i`.
    ///
    /// # Errors
    /// When waiting for it fails.
    pub fn kill9(&mut self, i: usize) -> Result<(), Error> {
        let b = self.get(i)?;
        if let Some(mut c) = b.child.take() {
            c.kill9()?;
        }
        b.paused = false;
        Ok(())
    }

    /// (Re)starts bookie `i` on its port and dir, retrying for a while (its port and its old
    /// registration are released as the old process is reaped and its session expires).
    ///
    /// # Errors
    /// When it does not come back.
    pub async fn restart(&mut self, i: usize) -> Result<(), Error> {
        self.kill9(i)?;
        let (program, server) = (self.program.clone(), self.server.clone());
        let mut last = None;
        for attempt in 0..10u64 {
            let b = self.get(i)?;
            let spec = Bookie {
                port: b.port,
                dir: b.dir.clone(),
                log: b.log.clone(),
                child: None,
                paused: false,
            };
            let (p, s) = (program.clone(), server.clone());
            match tokio::task::spawn_blocking(move || launch(&p, &s, &spec))
                .await
                .map_err(|e| Error::Process(e.to_string()))?
            {
                Ok(child) => {
                    self.get(i)?.child = Some(child);
                    return Ok(());
                }
                Err(e) => last = Some(e),
            }
            tokio::time::sleep(Duration::from_millis(300 * (attempt + 1))).await;
        }
        Err(last.unwrap_or_else(|| Error::Process("bookie restart failed".into())))
    }

    /// SIGSTOP (`true`) or SIGCONT (`false`) of bookie `i`.
    ///
    /// # Errors
    /// When the signal cannot be sent.
    pub fn set_paused(&mut self, i: usize, paused: bool) -> Result<(), Error> {
        let b = self.get(i)?;
        if let Some(c) = &b.child {
            signal(c.id(), if paused { "STOP" } else { "CONT" })?;
            b.paused = paused;
        }
        Ok(())
    }

    /// Continues every stopped bookie and restarts every dead one.
    ///
    /// # Errors
    /// When one does not come back.
    pub async fn ensure_running(&mut self) -> Result<(), Error> {
        for i in 0..self.bookies.len() {
            if self.bookies[i].paused {
                self.set_paused(i, false)?;
            }
            let alive = match self.bookies[i].child.as_mut() {
                Some(c) => c.child_mut().try_wait()?.is_none(),
                None => false,
            };
            if !alive {
                self.restart(i).await?;
            }
        }
        Ok(())
    }

    /// Stops every bookie (kill -9: the run is over, its data dirs are not reused).
    pub fn stop(&mut self) {
        for i in 0..self.bookies.len() {
            let _ = self.set_paused(i, false);
            let _ = self.kill9(i);
        }
    }
}

/// Kills/restarts and pauses/continues bookies.
#[derive(Debug)]
pub struct BookieNemesis {
    /// The bookies.
    pub bookies: Arc<Mutex<Bookies>>,
}

impl Nemesis for BookieNemesis {
    fn name(&self) -> &'static str {
        "bookie"
    }

    fn handles(&self, fault: &Fault) -> bool {
        matches!(fault, Fault::KillBookie { .. } | Fault::PauseBookie { .. })
    }

    fn inject<'a>(&'a mut self, fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>> {
        async move {
            let mut b = self.bookies.lock().await;
            match fault {
                Fault::KillBookie { bookie, .. } => {
                    let i = *bookie as usize % b.len().max(1);
                    b.kill9(i)?;
                    Ok(format!("killed bookie {i}"))
                }
                Fault::PauseBookie { bookie, .. } => {
                    let i = *bookie as usize % b.len().max(1);
                    b.set_paused(i, true)?;
                    Ok(format!("stopped bookie {i}"))
                }
                _ => Ok(String::new()),
            }
        }
        .boxed()
    }

    fn heal<'a>(&'a mut self, fault: &'a Fault) -> BoxFuture<'a, Result<String, Error>> {
        async move {
            let mut b = self.bookies.lock().await;
            match fault {
                Fault::KillBookie { bookie, .. } => {
                    let i = *bookie as usize % b.len().max(1);
                    b.restart(i).await?;
                    Ok(format!("bookie {i} restarted"))
                }
                Fault::PauseBookie { bookie, .. } => {
                    let i = *bookie as usize % b.len().max(1);
                    b.set_paused(i, false)?;
                    Ok(format!("bookie {i} continued"))
                }
                _ => Ok(String::new()),
            }
        }
        .boxed()
    }
}
