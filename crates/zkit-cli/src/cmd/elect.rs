//! `zkit elect PATH --id NAME -- CMD…`: joins the leader election at PATH and runs CMD while
//! leader, on [`zkit::election::LeaderLatch`].
//!
//! CMD gets the environment variables `ZKIT_FENCING_TOKEN` (the leader node's sequence number,
//! larger for every later leader: pass it to the resources CMD writes so they can reject a
//! deposed leader), `ZKIT_LEADER_ID` and `ZKIT_ELECTION_PATH`. On loss of leadership (connection
//! suspended, session lost, node deleted) CMD gets SIGTERM, then SIGKILL after `--grace`, and
//! `zkit elect` contends again; when CMD exits by itself, `zkit elect` leaves the election and
//! exits with CMD's exit code. SIGTERM/SIGINT to `zkit elect` stop CMD the same way.
//!
//! What it cannot do: if `zkit elect` itself is killed with SIGKILL, CMD keeps running until it
//! exits (nothing can run in a SIGKILLed process); the next leader starts only after our session
//! expires, and CMD's own writes should be fenced with `ZKIT_FENCING_TOKEN`. Run both in one
//! process group (a service manager does) to take them down together.

use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use tokio::process::{Child, Command};
use tokio::signal::unix::{signal, SignalKind};
use zkit::election::LeaderLatch;
use zkit::{Session, SessionOptions};

/// `zkit elect …`.
#[derive(Debug, Args)]
pub struct ElectArgs {
    /// The election's znode path (created if missing).
    path: String,
    /// This participant's id (stored in its node); default `<hostname-less>pid-<pid>`.
    #[arg(long)]
    id: Option<String>,
    /// Server(s) to talk to, as `HOST:PORT[,HOST:PORT…][/chroot]`.
    #[arg(long, env = "ZKIT_SERVER", default_value = "127.0.0.1:2181")]
    server: String,
    /// Session timeout: how long after our death (or partition) another participant may lead.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    session_timeout: Duration,
    /// Time between SIGTERM and SIGKILL when stopping CMD.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    grace: Duration,
    /// The command to run while leader, after `--`.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// Runs `zkit elect …`; returns CMD's exit code (128+signal if it was killed by one), or 143
/// when `zkit elect` was asked to stop.
pub async fn run(args: ElectArgs) -> Result<i32> {
    let Some((program, program_args)) = args.command.split_first() else {
        bail!("no command given after --");
    };
    let id = args
        .id
        .clone()
        .unwrap_or_else(|| format!("pid-{}", std::process::id()));
    let session = Session::connect(
        &args.server,
        SessionOptions::default().with_session_timeout(args.session_timeout),
    )
    .await
    .with_context(|| format!("connecting to {}", args.server))?;
    let latch = LeaderLatch::start(&session, &args.path, &id)?;
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    loop {
        let leadership = tokio::select! {
            l = latch.await_leadership() => l?,
            _ = term.recv() => { latch.close().await; return Ok(143); }
            _ = int.recv() => { latch.close().await; return Ok(130); }
        };
        let token = leadership.fencing_token.unwrap_or(-1);
        eprintln!(
            "zkit elect: {id} leads {} (fencing token {token}); starting CMD",
            args.path
        );
        let mut child = Command::new(program)
            .args(program_args)
            .env("ZKIT_FENCING_TOKEN", token.to_string())
            .env("ZKIT_LEADER_ID", &id)
            .env("ZKIT_ELECTION_PATH", &args.path)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {program}"))?;
        tokio::select! {
            status = child.wait() => {
                let status = status?;
                eprintln!("zkit elect: CMD exited ({status}); leaving the election");
                latch.close().await;
                session.close();
                return Ok(exit_code(status));
            }
            _ = latch.await_loss() => {
                eprintln!("zkit elect: {id} lost leadership of {}; stopping CMD", args.path);
                stop(&mut child, args.grace).await?;
            }
            _ = term.recv() => {
                stop(&mut child, args.grace).await?;
                latch.close().await;
                return Ok(143);
            }
            _ = int.recv() => {
                stop(&mut child, args.grace).await?;
                latch.close().await;
                return Ok(130);
            }
        }
    }
}

/// SIGTERM, then SIGKILL after `grace`; reaps the child.
async fn stop(child: &mut Child, grace: Duration) -> Result<()> {
    if let Some(pid) = child.id() {
        let pid = libc::pid_t::try_from(pid).context("child pid out of range")?;
        // SAFETY: kill(2) takes no pointers; the pid is our own unreaped child (so it cannot
        // have been recycled for another process). ESRCH (already exited) is fine to ignore.
        let _ = unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => {
            status?;
        }
        Err(_) => {
            eprintln!("zkit elect: CMD did not stop within {grace:?}; killing it");
            child.kill().await?;
        }
    }
    Ok(())
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}
