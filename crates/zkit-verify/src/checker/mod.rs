//! Checkers: pure functions from a [`History`] to a [`Report`]. No I/O, no clock, no server.
//!
//! Each checker states one guarantee and lists every [`Violation`] with the indices of the
//! events that show it, so a report can print the minimal sub-history around it
//! ([`Report::render`]). Each has self-tests fed known-good and known-bad histories (in its own
//! module, and [`self_test`] runs them all at once for the binary's `self-test` command).
//!
//! - [`register`]: linearizability of a CAS register per key ([`wgl`] search, info ops as
//!   Jepsen handles them).
//! - [`set`]: acknowledged adds present at the final read, definitely-failed adds absent.
//! - [`unique_ids`]: sequential names unique, increasing per parent in zxid and real-time order,
//!   and still there at the end.
//! - [`queue`]: every acknowledged item consumed exactly once (claim/ack), none lost.
//! - [`sessions`]: monotonic reads per session, ephemerals gone once their session's expiry
//!   is observed, no session outliving its timeout across a partition.
//! - [`locks`]: no two holders with overlapping validity, fencing tokens increasing.
//! - [`ledger`]: acknowledged entries survive recovery, readers agree, fenced writers are
//!   never acknowledged.

pub mod ledger;
pub mod locks;
pub mod queue;
pub mod register;
pub mod sessions;
pub mod set;
pub mod unique_ids;
pub mod wgl;

mod examples;

pub use examples::self_test;

use std::fmt::Write as _;

use crate::history::{History, HistoryError};

/// One broken guarantee.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// What is wrong, in words.
    pub message: String,
    /// The events that show it (invokes and completions), in index order.
    pub indices: Vec<usize>,
}

/// What one checker found in one history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The checker.
    pub checker: &'static str,
    /// Operations it looked at.
    pub operations: usize,
    /// What is wrong (empty: nothing).
    pub violations: Vec<Violation>,
    /// Parts it could not decide (e.g. a linearizability search over its budget); neither a
    /// pass nor a violation.
    pub unknown: Vec<String>,
}

impl Report {
    /// A report with nothing found yet.
    pub fn new(checker: &'static str) -> Report {
        Report {
            checker,
            operations: 0,
            violations: Vec::new(),
            unknown: Vec::new(),
        }
    }

    /// True when there is no violation.
    pub fn is_valid(&self) -> bool {
        self.violations.is_empty()
    }

    /// Records a violation shown by `indices`.
    pub fn violation(&mut self, message: impl Into<String>, mut indices: Vec<usize>) {
        indices.sort_unstable();
        indices.dedup();
        indices.retain(|i| *i != usize::MAX);
        self.violations.push(Violation {
            message: message.into(),
            indices,
        });
    }

    /// One line: checker, operations, violations, undecided parts.
    pub fn summary(&self) -> String {
        format!(
            "{}: {} operations, {} violations{}",
            self.checker,
            self.operations,
            self.violations.len(),
            if self.unknown.is_empty() {
                String::new()
            } else {
                format!(", {} undecided", self.unknown.len())
            }
        )
    }

    /// The summary, then every violation (up to `max`) with its sub-history from `history`.
    pub fn render(&self, history: &History, max: usize) -> String {
        let mut out = self.summary();
        out.push('\n');
        for (n, v) in self.violations.iter().take(max).enumerate() {
            let _ = writeln!(out, "violation {}: {}", n + 1, v.message);
            for line in history.excerpt(&v.indices).lines() {
                let _ = writeln!(out, "    {line}");
            }
        }
        if self.violations.len() > max {
            let _ = writeln!(out, "... and {} more", self.violations.len() - max);
        }
        for u in &self.unknown {
            let _ = writeln!(out, "undecided: {u}");
        }
        out
    }
}

/// A checker: one guarantee over a history.
pub trait Checker {
    /// Its name in reports.
    fn name(&self) -> &'static str;

    /// Checks `history`.
    ///
    /// # Errors
    /// [`HistoryError::Malformed`] when the history does not pair up.
    fn check(&self, history: &History) -> Result<Report, HistoryError>;
}

/// A self-test case: name, checker, history, whether the history is good.
pub type Example = (&'static str, Box<dyn Checker>, History, bool);

/// Asserts that each of a checker's examples gets its verdict (good passes, bad is caught),
/// showing the history around the violations of one that does not.
#[cfg(test)]
pub(crate) fn assert_examples_behave(examples: Vec<Example>) {
    for (name, checker, history, good) in examples {
        let report = checker.check(&history).unwrap();
        assert_eq!(
            report.is_valid(),
            good,
            "{name}: {}",
            report.render(&history, 3)
        );
    }
}
