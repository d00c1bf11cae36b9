//! What one run produced: the history's counts, the verdict, the failure report.

use std::path::PathBuf;
use std::time::Duration;

use crate::checker::Report;
use crate::history::{EventKind, FaultPhase, History};
use crate::nemesis::{FaultKind, Schedule};
use crate::soak::SoakReport;
use crate::workload::Workload;

/// Counts of a history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Operations invoked.
    pub ops: usize,
    /// Ok.
    pub ok: usize,
    /// Fail.
    pub fail: usize,
    /// Info (including never completed).
    pub info: usize,
    /// Faults injected.
    pub faults: usize,
}

impl Counts {
    pub(super) fn of(history: &History) -> Counts {
        let mut c = Counts {
            faults: history
                .faults
                .iter()
                .filter(|f| f.phase == FaultPhase::Start)
                .count(),
            ..Counts::default()
        };
        let mut open = 0usize;
        for e in &history.events {
            match e.kind {
                EventKind::Invoke => {
                    c.ops += 1;
                    open += 1;
                }
                EventKind::Ok => c.ok += 1,
                EventKind::Fail => c.fail += 1,
                EventKind::Info => c.info += 1,
            }
        }
        c.info += c.ops.saturating_sub(c.ok + c.fail + c.info);
        let _ = open;
        c
    }
}

/// What a run produced.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// The workload.
    pub workload: Workload,
    /// The seed.
    pub seed: u64,
    /// The planned faults.
    pub schedule: Schedule,
    /// What happened.
    pub history: History,
    /// The checker's verdict.
    pub report: Report,
    /// Counts.
    pub counts: Counts,
    /// Faults injected per kind of the run's set, in the set's order (kinds with none
    /// included).
    pub injected: Vec<(FaultKind, usize)>,
    /// Server resources, when sampled.
    pub soak: Option<SoakReport>,
    /// Where the files are.
    pub work_dir: PathBuf,
    /// How to replay it.
    pub replay: String,
    /// Wall time of the whole run.
    pub elapsed: Duration,
}

impl RunResult {
    /// No violation and nothing undecided.
    pub fn is_valid(&self) -> bool {
        self.report.is_valid() && self.report.unknown.is_empty()
    }

    /// One line: `W seed S: N ops (A ok, B fail, C info), F faults [kill=2 pause=1], T s:
    /// valid` (or the checker's verdict); the brackets hold the faults injected per kind.
    pub fn summary(&self) -> String {
        let kinds: Vec<String> = self
            .injected
            .iter()
            .map(|(k, n)| format!("{}={n}", k.name()))
            .collect();
        format!(
            "{} seed {}: {} ops ({} ok, {} fail, {} info), {} faults [{}], {:.1}s: {}",
            self.workload.name(),
            self.seed,
            self.counts.ops,
            self.counts.ok,
            self.counts.fail,
            self.counts.info,
            self.counts.faults,
            kinds.join(" "),
            self.elapsed.as_secs_f64(),
            if self.is_valid() {
                "valid".to_owned()
            } else {
                self.report.summary()
            }
        )
    }

    /// Seed, schedule, faults as they happened, violations with their sub-histories, replay.
    pub fn failure_report(&self) -> String {
        let mut out = format!("{}\n{}", self.summary(), self.schedule);
        out.push_str("faults as they happened:\n");
        for f in &self.history.faults {
            out.push_str(&format!(
                "  {:>6}ms {:?} {}{}\n",
                f.time / 1_000_000,
                f.phase,
                f.fault,
                f.note
                    .as_deref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            ));
        }
        out.push_str(&self.report.render(&self.history, 5));
        out.push_str(&format!(
            "history: {}\nserver log: {}\nreplay: {}\n",
            self.work_dir.join("history.jsonl").display(),
            self.work_dir.join("server.log").display(),
            self.replay
        ));
        out
    }
}
