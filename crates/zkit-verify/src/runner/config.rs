//! What one run is: the server command and the run's knobs.

use std::path::PathBuf;
use std::time::Duration;

use crate::nemesis::partition::SYNC_LIMIT_TICKS;
use crate::nemesis::server::ServerSpec;
use crate::nemesis::{FaultKind, Timing};
use crate::workload::Workload;

/// The server program and its arguments (`zkit serve`, or `zkit-verify serve` with knobs).
#[derive(Debug, Clone)]
pub struct ServerCommand {
    /// The program.
    pub program: PathBuf,
    /// Arguments before `--port`/`--data-dir`/`--tick-time`.
    pub args: Vec<String>,
    /// Arguments after them.
    pub extra: Vec<String>,
}

impl ServerCommand {
    /// `zkit serve` (fsync always) from the `zkit` binary at `program`.
    pub fn zkit_serve(program: PathBuf) -> ServerCommand {
        let spec = ServerSpec::zkit_serve(program, PathBuf::new(), 0, PathBuf::new());
        ServerCommand {
            program: spec.program,
            args: spec.args,
            extra: spec.extra,
        }
    }

    /// The embedded server of `zkit-verify serve` with extra flags (`--wal-segment-size`,
    /// `--failpoint NAME=ACTION`).
    pub fn embedded(verify_bin: PathBuf, extra: &[&str]) -> ServerCommand {
        ServerCommand {
            program: verify_bin,
            args: vec!["serve".into()],
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

/// An Apache ZooKeeper ensemble as the target instead of the server process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnsembleOptions {
    /// Members (at least 3).
    pub members: usize,
    /// Route the member-to-member links through proxies (needed by `isolate-leader`; also
    /// turned on by it).
    pub links: bool,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The workload.
    pub workload: Workload,
    /// Fault kinds the schedule draws from (empty: none).
    pub faults: Vec<FaultKind>,
    /// The seed of every random choice.
    pub seed: u64,
    /// How long clients run (the final phase comes after).
    pub duration: Duration,
    /// Clients.
    pub clients: u32,
    /// The server (unused when `ensemble` is set).
    pub server: ServerCommand,
    /// Test an Apache ZooKeeper ensemble instead of `server` (its tickTime is the script's
    /// 500 ms, whatever `tick` says; clients sync before register reads).
    pub ensemble: Option<EnsembleOptions>,
    /// The `zkit-verify` binary (process clients).
    pub verify_bin: PathBuf,
    /// The `zkit` binary whose `zkit bookie` serves the ledger workload's bookies (default:
    /// the server's program, when that is `zkit`).
    pub zkit_bin: Option<PathBuf>,
    /// The server's tickTime.
    pub tick: Duration,
    /// The clients' session timeout.
    pub session_timeout: Duration,
    /// How long the runner waits for one operation before recording it as info.
    pub op_timeout: Duration,
    /// Where data, log and history go (created; kept).
    pub work_dir: PathBuf,
    /// Sample the server's RSS and descriptors every second, and churn sessions, watches and
    /// ephemerals next to the workload.
    pub soak: bool,
    /// The command that replays this run (printed on failure).
    pub replay: String,
    /// When set, the nemesis holds each fault until some operation succeeded since the last
    /// fault healed (at most this long): every fault then hits a working system, which a test
    /// that must see a fault do harm needs (a kill while clients are still reconnecting from
    /// the last one loses nothing). Off by default: faults that land during a recovery are
    /// worth testing too.
    pub progress_between_faults: Option<Duration>,
}

impl RunConfig {
    /// Defaults sized for a quick run: 4 clients, tick 200 ms, session timeout 1.6 s.
    pub fn quick(
        workload: Workload,
        seed: u64,
        server: ServerCommand,
        verify_bin: PathBuf,
        work_dir: PathBuf,
    ) -> RunConfig {
        RunConfig {
            workload,
            faults: workload.faults(),
            seed,
            duration: Duration::from_secs(8),
            clients: 4,
            server,
            ensemble: None,
            verify_bin,
            zkit_bin: None,
            tick: Duration::from_millis(200),
            session_timeout: Duration::from_millis(1600),
            op_timeout: Duration::from_millis(3200),
            work_dir,
            soak: false,
            replay: String::new(),
            progress_between_faults: None,
        }
    }

    pub(super) fn timing(&self) -> Timing {
        Timing {
            session_timeout: self.session_timeout,
            tick: self.tick,
            sync_limit: self.tick * SYNC_LIMIT_TICKS,
        }
    }

    /// How long past its timeout a cut-off session may live on the server.
    pub fn grace(&self) -> Duration {
        self.tick * 2 + Duration::from_millis(300)
    }

    /// How long after an observed expiry a read may still show the session's ephemeral: none
    /// on one server; on an ensemble syncLimit plus a tick, the longest a member cut off from
    /// the quorum goes on serving its old copy (see the sessions checker).
    pub fn stale_reads(&self) -> Duration {
        if self.ensemble.is_some() {
            self.timing().sync_limit + self.tick
        } else {
            Duration::ZERO
        }
    }
}
