//! [`self_test`]: every checker's known-good and known-bad histories, run at once (the
//! binary's `self-test` command).

use super::{ledger, locks, queue, register, sessions, set, unique_ids, Example};

/// Every checker's examples, checker by checker.
fn all_examples() -> Vec<Example> {
    [
        register::examples(),
        set::examples(),
        unique_ids::examples(),
        queue::examples(),
        sessions::examples(),
        locks::examples(),
        ledger::examples(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Runs every checker's known-good and known-bad histories; returns one line per case and
/// whether all behaved (good passes, bad is caught).
pub fn self_test() -> (bool, Vec<String>) {
    let mut all = true;
    let mut lines = Vec::new();
    for (name, checker, history, good) in all_examples() {
        let verdict = checker.check(&history).map(|r| r.is_valid());
        let right = verdict.as_ref().is_ok_and(|v| *v == good);
        all &= right;
        lines.push(format!(
            "{} {}: {} history {} ({})",
            if right { "ok  " } else { "FAIL" },
            checker.name(),
            if good { "good" } else { "bad" },
            name,
            match verdict {
                Ok(true) => "valid".to_owned(),
                Ok(false) => "violation found".to_owned(),
                Err(e) => format!("error: {e}"),
            }
        ));
    }
    (all, lines)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_self_test_case_behaves() {
        let (ok, lines) = super::self_test();
        assert!(ok, "{}", lines.join("\n"));
        assert!(lines.len() >= 14, "{}", lines.join("\n"));
    }

    /// Each example's verdict, with the history around the violations of one that is wrong.
    #[test]
    fn every_example_gets_its_verdict() {
        crate::checker::assert_examples_behave(super::all_examples());
    }
}
