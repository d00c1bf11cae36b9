//! `zkit elect PATH --id NAME -- CMD…`: joins the leader election at PATH and runs CMD while
//! leader, on [`zkit::election::LeaderLatch`].
//!
//! CMD gets the environment variables `ZKIT_FENCING_TOKEN` (the leader node's sequence number,
//! larger for every later leader: pass it to the resources CMD writes so they can reject a
//! deposed leader), `ZKIT_LEADER_ID` and `ZKIT_ELECTION_PATH`. On loss of leadership (session lost,
//! node deleted; a disconnect is not a loss while the session provably lives, see
//! `zkit::session`) CMD gets SIGTERM, then SIGKILL after `--grace`, and
//! `zkit elect` contends again; when CMD exits by itself, `zkit elect` leaves the election and
//! exits with CMD's exit code. SIGTERM, SIGINT and SIGHUP to `zkit elect` are passed on to CMD;
//! it leaves the election only once CMD has exited (SIGKILL after `--grace`), and exits with
//! CMD's status.
//!
//! What it cannot do: if `zkit elect` itself is killed with SIGKILL, it can neither wait for
//! CMD nor stop it; the kernel kills CMD (`PR_SET_PDEATHSIG`, see [`super::child`]) but not the
//! processes CMD started, and the next leader starts only after our session expires. CMD's own
//! writes should be fenced with `ZKIT_FENCING_TOKEN`.

use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use tokio::process::Command;
use zkit::election::LeaderLatch;

use super::child::{exit_code, Child, Ended, Signals};
use super::conn::{ConnArgs, DEFAULT_SESSION_TIMEOUT};

/// `zkit elect …`.
#[derive(Debug, Args)]
pub struct ElectArgs {
    /// The election's znode path (created if missing).
    path: String,
    /// This participant's id (stored in its node); default `<hostname-less>pid-<pid>`.
    #[arg(long)]
    id: Option<String>,
    /// Connection; the session timeout is how long after our death (or partition) another
    /// participant may lead.
    #[command(flatten)]
    conn: ConnArgs,
    /// Time between SIGTERM (lost leadership) or a signal passed on to CMD, and SIGKILL.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    grace: Duration,
    /// The command to run while leader, after `--`.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// Runs `zkit elect …`; returns CMD's exit code (128+signal if it was killed by one), or
/// 128 + N when signal N came while no CMD ran.
pub async fn run(args: ElectArgs) -> anyhow::Result<std::process::ExitCode> {
    run_exit_code(args).await.map(super::process_exit)
}

/// What [`run`] does, with the exit code as a number.
async fn run_exit_code(args: ElectArgs) -> anyhow::Result<i32> {
    // First, so that no signal can kill zkit while CMD runs (see `child`).
    let mut signals = Signals::install().context("installing signal handlers")?;
    let Some((program, program_args)) = args.command.split_first() else {
        bail!("no command given after --");
    };
    let id = args
        .id
        .clone()
        .unwrap_or_else(|| format!("pid-{}", std::process::id()));
    let session = tokio::select! {
        session = args.conn.session(DEFAULT_SESSION_TIMEOUT) => session?,
        received = signals.recv() => return Ok(received.exit_code()),
    };
    let latch = LeaderLatch::start(&session, &args.path, &id)?;
    loop {
        let leadership = tokio::select! {
            l = latch.await_leadership() => l?,
            received = signals.recv() => {
                eprintln!("zkit elect: got {} while not leader; leaving the election", received.name());
                latch.close().await;
                session.close();
                return Ok(received.exit_code());
            }
        };
        let token = leadership.fencing_token.unwrap_or(-1);
        eprintln!(
            "zkit elect: {id} leads {} (fencing token {token}); starting CMD",
            args.path
        );
        let mut command = Command::new(program);
        command
            .args(program_args)
            .env("ZKIT_FENCING_TOKEN", token.to_string())
            .env("ZKIT_LEADER_ID", &id)
            .env("ZKIT_ELECTION_PATH", &args.path);
        let mut child = Child::spawn(command, "zkit elect")
            .await
            .with_context(|| format!("starting {program}"))?;
        let lost = async {
            latch.await_loss().await;
            eprintln!(
                "zkit elect: {id} lost leadership of {}; stopping CMD",
                args.path
            );
        };
        // Leadership is given up (latch.close) only once CMD has exited.
        match child.run_until(&mut signals, args.grace, lost).await? {
            Ended::Exited(status) | Ended::Signalled(_, status) => {
                eprintln!("zkit elect: CMD exited ({status}); leaving the election");
                latch.close().await;
                session.close();
                return Ok(exit_code(status));
            }
            // Lost leadership: CMD is stopped; contend again.
            Ended::Stopped(_) => {}
        }
    }
}
