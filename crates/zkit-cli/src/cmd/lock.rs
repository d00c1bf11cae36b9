//! `zkit lock PATH [--timeout 5s] [--lease 30s] [--shared] -- CMD ARGS…`: like flock(1), runs CMD
//! while holding a distributed lock, and stops it if the lock is lost.
//!
//! - The fencing token (the lock node's sequence number) is passed to CMD in
//!   `ZKIT_FENCING_TOKEN`, the lock node's path in `ZKIT_LOCK_NODE`.
//! - On loss of the lock (session lost, node deleted, lease ended), CMD gets SIGTERM, then
//!   SIGKILL after `--grace`; zkit then exits with [`EXIT_LOST`]. A disconnect is not a loss:
//!   CMD keeps running while the session provably lives (`zkit::Session::valid_until`), and a
//!   reconnect to another server inside that window changes nothing.
//! - While waiting, a lost session makes zkit enter the line again on a new session (CMD has
//!   not run, so nothing is at stake); `--fail-on-session-loss` exits with [`EXIT_LOST`]
//!   instead.
//! - SIGTERM, SIGINT and SIGHUP to zkit are passed on to CMD; zkit waits for CMD (SIGKILL after
//!   `--grace`) and only then releases the lock (the rules and their limits: [`super::child`]).
//! - Otherwise zkit exits with CMD's exit code (128 + signal number if CMD died of a signal).
//!
//! Exit codes of zkit itself: [`EXIT_TIMEOUT`] (75, EX_TEMPFAIL) when `--timeout` passed before
//! the lock was acquired; [`EXIT_LOST`] (76) when the lock was lost while CMD ran, or (with
//! `--fail-on-session-loss`) the session was lost while waiting for it (CMD never ran); 126 when CMD could not be started;
//! 128 + N when signal N came before CMD ran; 1 for other errors (printed).

use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use zkit::lock::{LeaseLock, LockGuard, LockOptions, Mutex, ReadWriteLock};
use zkit::{Error, Session};

use super::conn::{ConnArgs, DEFAULT_SESSION_TIMEOUT};

use super::child::{exit_code, Child, Ended, Forwarded, Signals};

/// zkit's exit code when the lock was not acquired within `--timeout` (EX_TEMPFAIL).
pub const EXIT_TIMEOUT: i32 = 75;
/// zkit's exit code when the lock was lost while CMD ran (CMD was stopped), or the session
/// was lost while waiting for the lock (CMD never ran).
pub const EXIT_LOST: i32 = 76;
/// zkit's exit code when CMD could not be started.
pub const EXIT_CANNOT_EXECUTE: i32 = 126;

/// What `zkit lock --help` says about signals, SIGKILL and fencing.
const SIGNALS_HELP: &str = "\
Signals:
  SIGTERM, SIGINT and SIGHUP to zkit are passed on to CMD. zkit waits for CMD to exit
  (SIGKILL after --grace), only then releases the lock, and exits with CMD's status
  (128+N if CMD died of signal N). Before CMD runs, they end the wait (exit 128+N).

SIGKILL of zkit (kill -9, the OOM killer):
  zkit can then neither wait for CMD nor stop it. The kernel kills CMD (zkit starts it with
  PR_SET_PDEATHSIG=SIGKILL), but not processes CMD started; the lock passes to the next
  holder only when zkit's session expires (--session-timeout).

Fencing:
  No local mechanism covers a machine that stops while its session expires elsewhere (a
  paused VM, a long GC or swap stall, a suspended laptop): when it resumes, CMD runs on
  beside the next holder. Pass ZKIT_FENCING_TOKEN to the resource CMD writes to, and have it
  reject a token lower than the highest it has seen.";

/// Arguments of `zkit lock`.
#[derive(Debug, clap::Args)]
#[command(after_long_help = SIGNALS_HELP)]
pub struct LockArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Lock directory (a znode path; created if missing).
    pub path: String,
    /// Give up (exit 75) if the lock is not acquired within this time (default: wait forever).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub timeout: Option<Duration>,
    /// Use a TTL lease lock: the lock ends after this long even if zkit dies; CMD is
    /// stopped when it ends. Needs a server with TTL nodes enabled.
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "shared")]
    pub lease: Option<Duration>,
    /// Take the shared (read) side of a read/write lock instead of an exclusive one.
    #[arg(long)]
    pub shared: bool,
    /// Time between SIGTERM (a lost lock) or a signal passed on to CMD, and SIGKILL.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub grace: Duration,
    /// Exit with 76 when the session is lost while waiting for the lock, instead of entering
    /// the line again on a new session.
    #[arg(long)]
    pub fail_on_session_loss: bool,
    /// Accepted for compatibility and ignored: a disconnect is never taken for a loss now.
    #[arg(long, hide = true)]
    pub tolerate_suspended: bool,
    /// The command to run, after `--`.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

async fn acquire(session: &Session, args: &LockArgs) -> zkit::Result<LockGuard> {
    let options = LockOptions {
        fail_waiters_on_lost: args.fail_on_session_loss,
        ..LockOptions::default()
    };
    if let Some(lease) = args.lease {
        let max_wait = args.timeout.unwrap_or(Duration::from_secs(86_400 * 365));
        return LeaseLock::new(session, &args.path, max_wait, lease)
            .acquire()
            .await;
    }
    if args.shared {
        return ReadWriteLock::with_options(session, &args.path, options)
            .read(args.timeout)
            .await;
    }
    let mutex = Mutex::with_options(session, &args.path, options);
    match args.timeout {
        Some(timeout) => mutex.try_lock_for(timeout).await,
        None => mutex.lock().await,
    }
}

/// Runs `zkit lock`; returns the process exit code (see the module docs).
///
/// # Errors
/// Connection and lock errors other than timeout.
pub async fn run(args: LockArgs) -> anyhow::Result<std::process::ExitCode> {
    run_exit_code(args).await.map(super::process_exit)
}

/// What [`run`] does, with the exit code as a number.
async fn run_exit_code(args: LockArgs) -> anyhow::Result<i32> {
    // First, so that no signal can kill zkit while CMD runs (see `child`).
    let mut signals = Signals::install().context("installing signal handlers")?;
    let (program, rest) = args
        .command
        .split_first()
        .context("no command given after --")?;
    let gave_up = |received: Forwarded| {
        eprintln!(
            "zkit lock: got {} while waiting for {}; giving up",
            received.name(),
            args.path
        );
        received.exit_code()
    };
    let session = tokio::select! {
        session = args.conn.session(DEFAULT_SESSION_TIMEOUT) => session?,
        received = signals.recv() => return Ok(gave_up(received)),
    };
    let acquired = tokio::select! {
        acquired = acquire(&session, &args) => acquired,
        received = signals.recv() => {
            // Our contender node, if created, goes with the session.
            session.close();
            return Ok(gave_up(received));
        }
    };
    let guard = match acquired {
        Ok(guard) => guard,
        Err(Error::Timeout(after)) => {
            eprintln!(
                "zkit lock: timed out after {after:?} waiting for {}",
                args.path
            );
            return Ok(EXIT_TIMEOUT);
        }
        // The session went while we waited (with --fail-on-session-loss, or a lease lock): the
        // lock is lost before it was held; CMD never ran.
        Err(Error::SessionLost | Error::SessionExpired) => {
            eprintln!(
                "zkit lock: the session was lost while waiting for {}",
                args.path
            );
            return Ok(EXIT_LOST);
        }
        Err(err) => return Err(err).with_context(|| format!("locking {}", args.path)),
    };
    let mut command = tokio::process::Command::new(program);
    command
        .args(rest)
        .env("ZKIT_FENCING_TOKEN", guard.fencing_token().to_string())
        .env("ZKIT_LOCK_NODE", guard.path())
        .stdin(Stdio::inherit());
    let mut child = match Child::spawn(command, "zkit lock").await {
        Ok(child) => child,
        Err(err) => {
            eprintln!("zkit lock: cannot run {program}: {err}");
            let _ = guard.release().await;
            return Ok(EXIT_CANNOT_EXECUTE);
        }
    };
    let lost = guard.lost();
    let lock_lost = async {
        lost.cancelled().await;
        eprintln!(
            "zkit lock: lock on {} lost; stopping the command",
            args.path
        );
    };
    // Only once CMD has exited (whatever the reason) is the lock given up, below.
    let ended = child
        .run_until(&mut signals, args.grace, lock_lost)
        .await
        .context("waiting for the command")?;
    let code = match ended {
        Ended::Exited(status) | Ended::Signalled(_, status) => exit_code(status),
        Ended::Stopped(_) => EXIT_LOST,
    };
    // After a loss the server may be unreachable: do not hold the exit up for long; the node
    // goes with the session (or its TTL) anyway.
    let release_limit = if code == EXIT_LOST {
        Duration::from_secs(2)
    } else {
        args.conn.session_timeout_or(DEFAULT_SESSION_TIMEOUT)
    };
    match tokio::time::timeout(release_limit, guard.release()).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => {
            eprintln!("zkit lock: release failed ({err}); the node goes with the session")
        }
        Err(_) => eprintln!("zkit lock: release timed out; the node goes with the session"),
    }
    session.close();
    Ok(code)
}

/// The `zkit demo` lock section: `workers` OS processes take turns, `rounds` times each, running
/// `zkit lock PATH -- sh -c '<read counter file, add one, write it back>'`. Without mutual
/// exclusion the read-modify-write cycles would interleave and lose increments; with it the
/// counter ends at `workers × rounds`. Each critical section also appends its fencing token to a
/// log, which must be strictly increasing in the order the critical sections ran.
///
/// # Errors
/// A worker that fails, a lost increment, or a fencing token that went backwards.
pub async fn demo_lock(server_addr: &str) -> anyhow::Result<String> {
    use anyhow::{ensure, Context};

    const WORKERS: usize = 4;
    const ROUNDS: usize = 5;
    let dir = tempfile::tempdir().context("temp dir for the shared counter")?;
    let counter = dir.path().join("counter");
    let tokens = dir.path().join("tokens");
    std::fs::write(&counter, "0\n")?;
    let exe = std::env::current_exe().context("locate the zkit binary")?;
    // The read and the write are separate commands with a pause between them, so any overlap
    // of two holders would lose an increment.
    let script =
        r#"n=$(cat "$1"); sleep 0.01; echo $((n + 1)) > "$1"; echo "$ZKIT_FENCING_TOKEN" >> "$2""#;
    let started = std::time::Instant::now();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..WORKERS {
        let (exe, server) = (exe.clone(), server_addr.to_owned());
        let (counter, tokens) = (counter.clone(), tokens.clone());
        workers.spawn(async move {
            for _ in 0..ROUNDS {
                let status = tokio::process::Command::new(&exe)
                    .args([
                        "lock",
                        "--server",
                        &server,
                        "--timeout",
                        "60s",
                        "/zkit-demo/lock",
                    ])
                    .args(["--", "sh", "-c", script, "sh"])
                    .arg(&counter)
                    .arg(&tokens)
                    .status()
                    .await?;
                ensure!(status.success(), "zkit lock exited with {status}");
            }
            Ok(())
        });
    }
    while let Some(joined) = workers.join_next().await {
        joined.context("worker task")??;
    }
    let took = started.elapsed();
    let total: usize = std::fs::read_to_string(&counter)?.trim().parse()?;
    let fencing: Vec<u64> = std::fs::read_to_string(&tokens)?
        .lines()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .context("fencing token log")?;
    ensure!(
        total == WORKERS * ROUNDS,
        "counter is {total}, expected {}: increments were lost",
        WORKERS * ROUNDS
    );
    ensure!(
        fencing.windows(2).all(|w| w[0] < w[1]),
        "fencing tokens went backwards: {fencing:?}"
    );
    Ok(format!(
        "{WORKERS} processes × {ROUNDS} rounds of `zkit lock` around a shared counter file: \
         counter = {total} (expected {}), fencing tokens strictly increasing ({} .. {}), {:.1?}",
        WORKERS * ROUNDS,
        fencing.first().copied().unwrap_or_default(),
        fencing.last().copied().unwrap_or_default(),
        took
    ))
}
