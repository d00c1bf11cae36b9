//! Where entries go and when enough bookies have answered (pure: no I/O, no clock).
//!
//! - [`write_set`]: round-robin striping, BookKeeper's `RoundRobinDistributionSchedule`:
//!   entry `e` of an ensemble of `E` goes to bookies `(e + i) mod E` for `i < Qw`.
//! - [`Coverage`]: BookKeeper's `RRQuorumCoverageSet`, used by fencing and by reading the LAC
//!   in recovery: enough bookies have answered once no write set has `Qa` bookies left that
//!   did not answer, because only such a set could have acknowledged an entry nobody saw.
//! - [`RecoveryRead`]: the decision for one entry read in recovery (`PendingReadOp` with
//!   `isRecoveryRead`): found on any replica → recovered; "no such entry" from
//!   `Qw - Qa + 1` replicas → missing (no ack quorum can hold it); anything else → unknown.
//! - [`choose_ensemble`] / [`choose_replacement`]: BookKeeper's
//!   `DefaultEnsemblePlacementPolicy`: random writable bookies, none twice, excluded ones
//!   left out.

use rand::seq::SliceRandom;
use rand::Rng;

/// The ensemble indexes entry `entry_id` is written to, in write-set order.
pub fn write_set(entry_id: i64, ensemble_size: usize, write_quorum: usize) -> Vec<usize> {
    let e = ensemble_size.max(1) as u64;
    let base = (entry_id.max(0) as u64) % e;
    (0..write_quorum as u64)
        .map(|i| ((base + i) % e) as usize)
        .collect()
}

/// The bookies of `ensemble` that entry `entry_id` is written to, in write-set order.
pub fn write_set_bookies(entry_id: i64, ensemble: &[String], write_quorum: usize) -> Vec<String> {
    write_set(entry_id, ensemble.len(), write_quorum)
        .into_iter()
        .filter_map(|i| ensemble.get(i).cloned())
        .collect()
}

/// Is ensemble index `index` in entry `entry_id`'s write set?
pub fn in_write_set(
    entry_id: i64,
    index: usize,
    ensemble_size: usize,
    write_quorum: usize,
) -> bool {
    let e = ensemble_size.max(1) as u64;
    let base = (entry_id.max(0) as u64) % e;
    let offset = (index as u64 + e - base) % e;
    offset < write_quorum as u64
}

/// How one bookie answered a fence or LAC read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Not answered (yet), or failed: it may hold entries nobody knows about.
    Unknown,
    /// Answered (OK, or "no such ledger/entry").
    Heard,
}

/// BookKeeper's `RRQuorumCoverageSet`. See the module docs.
#[derive(Debug, Clone)]
pub struct Coverage {
    answers: Vec<Answer>,
    write_quorum: usize,
    ack_quorum: usize,
}

impl Coverage {
    /// Nobody heard from yet.
    pub fn new(ensemble_size: usize, write_quorum: usize, ack_quorum: usize) -> Coverage {
        Coverage {
            answers: vec![Answer::Unknown; ensemble_size],
            write_quorum,
            ack_quorum,
        }
    }

    /// Records bookie `index`'s answer.
    pub fn add(&mut self, index: usize, answer: Answer) {
        if let Some(a) = self.answers.get_mut(index) {
            *a = answer;
        }
    }

    /// True once no write set has `Qa` or more unknown bookies.
    pub fn covered(&self) -> bool {
        let e = self.answers.len();
        (0..e).all(|i| {
            let unknown = (0..self.write_quorum)
                .filter(|j| self.answers[(i + j) % e] == Answer::Unknown)
                .count();
            unknown < self.ack_quorum
        })
    }
}

/// The state of one entry's recovery read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecoveryRead<T> {
    /// Waiting for more answers.
    Pending,
    /// A replica had it (verified).
    Found(T),
    /// `Qw - Qa + 1` replicas do not have it: it was never acknowledged.
    Missing,
    /// Every replica answered and neither holds: the entry's fate cannot be known now.
    Unknown,
}

/// Collects the answers of one entry's replicas in recovery.
#[derive(Debug, Clone)]
pub struct RecoveryReadState<T> {
    replicas: usize,
    needed_missing: usize,
    missing: usize,
    failed: usize,
    found: Option<T>,
}

impl<T: Clone> RecoveryReadState<T> {
    /// For an entry with `write_quorum` replicas and the ledger's ack quorum.
    pub fn new(write_quorum: usize, ack_quorum: usize) -> RecoveryReadState<T> {
        RecoveryReadState {
            replicas: write_quorum,
            needed_missing: write_quorum + 1 - ack_quorum.min(write_quorum),
            missing: 0,
            failed: 0,
            found: None,
        }
    }

    /// A replica returned the entry (already verified).
    pub fn found(&mut self, entry: T) {
        if self.found.is_none() {
            self.found = Some(entry);
        }
    }

    /// A replica answered "no such entry" or "no such ledger".
    pub fn missing(&mut self) {
        self.missing += 1;
    }

    /// A replica failed (error, timeout, bad digest).
    pub fn failed(&mut self) {
        self.failed += 1;
    }

    /// The decision so far.
    pub fn decision(&self) -> RecoveryRead<T> {
        if let Some(e) = &self.found {
            return RecoveryRead::Found(e.clone());
        }
        if self.missing >= self.needed_missing {
            return RecoveryRead::Missing;
        }
        if self.missing + self.failed >= self.replicas {
            return RecoveryRead::Unknown;
        }
        RecoveryRead::Pending
    }
}

/// Not enough bookies to choose from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not enough bookies: need {needed}, {available} available")]
pub struct NotEnoughBookies {
    /// How many were needed.
    pub needed: usize,
    /// How many could be used.
    pub available: usize,
}

/// Chooses `size` distinct bookies at random from `available`, leaving out `exclude`.
///
/// # Errors
/// [`NotEnoughBookies`].
pub fn choose_ensemble<R: Rng>(
    available: &[String],
    exclude: &[String],
    size: usize,
    rng: &mut R,
) -> Result<Vec<String>, NotEnoughBookies> {
    let mut pool: Vec<&String> = available.iter().filter(|b| !exclude.contains(b)).collect();
    pool.sort();
    pool.dedup();
    if pool.len() < size {
        return Err(NotEnoughBookies {
            needed: size,
            available: pool.len(),
        });
    }
    pool.shuffle(rng);
    Ok(pool.into_iter().take(size).cloned().collect())
}

/// Chooses one bookie not in `ensemble` and not in `exclude` (BookKeeper's
/// `replaceBookie`).
///
/// # Errors
/// [`NotEnoughBookies`].
pub fn choose_replacement<R: Rng>(
    available: &[String],
    ensemble: &[String],
    exclude: &[String],
    rng: &mut R,
) -> Result<String, NotEnoughBookies> {
    let mut out: Vec<String> = ensemble.to_vec();
    out.extend(exclude.iter().cloned());
    choose_ensemble(available, &out, 1, rng)
        .map(|mut v| v.remove(0))
        .map_err(|_| NotEnoughBookies {
            needed: ensemble.len() + 1,
            available: available.iter().filter(|b| !exclude.contains(b)).count(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn write_sets_stripe_round_robin() {
        assert_eq!(write_set(0, 3, 2), vec![0, 1]);
        assert_eq!(write_set(1, 3, 2), vec![1, 2]);
        assert_eq!(write_set(2, 3, 2), vec![2, 0]);
        assert_eq!(write_set(3, 3, 2), vec![0, 1]);
        assert_eq!(write_set(4, 5, 5), vec![4, 0, 1, 2, 3]);
        for e in 0..20 {
            for i in 0..5 {
                assert_eq!(
                    in_write_set(e, i, 5, 3),
                    write_set(e, 5, 3).contains(&i),
                    "entry {e} index {i}"
                );
            }
        }
    }

    #[test]
    fn coverage_needs_a_fenced_bookie_in_every_ack_quorum() {
        // E3 Qw2 Qa2: one answer per adjacent pair is enough.
        let mut c = Coverage::new(3, 2, 2);
        assert!(!c.covered());
        c.add(0, Answer::Heard);
        assert!(!c.covered(), "pair (1,2) is all unknown");
        c.add(2, Answer::Heard);
        assert!(c.covered());
        // E3 Qw3 Qa2: two of three.
        let mut c = Coverage::new(3, 3, 2);
        c.add(1, Answer::Heard);
        assert!(!c.covered());
        c.add(2, Answer::Heard);
        assert!(c.covered());
        // E5 Qw3 Qa3: one per window of three.
        let mut c = Coverage::new(5, 3, 3);
        c.add(0, Answer::Heard);
        assert!(!c.covered());
        c.add(3, Answer::Heard);
        assert!(c.covered());
        // E1: the only bookie.
        let mut c = Coverage::new(1, 1, 1);
        assert!(!c.covered());
        c.add(0, Answer::Heard);
        assert!(c.covered());
        // Brute force against the definition on E4 Qw3 Qa2.
        for mask in 0u32..16 {
            let mut c = Coverage::new(4, 3, 2);
            for i in 0..4 {
                if mask & (1 << i) != 0 {
                    c.add(i, Answer::Heard);
                }
            }
            let want = (0..4).all(|start| {
                (0..3)
                    .filter(|j| mask & (1 << ((start + j) % 4)) == 0)
                    .count()
                    < 2
            });
            assert_eq!(c.covered(), want, "mask {mask:04b}");
        }
    }

    #[test]
    fn recovery_read_decisions() {
        // Qw2 Qa2: one "no entry" settles it.
        let mut r = RecoveryReadState::<u8>::new(2, 2);
        assert_eq!(r.decision(), RecoveryRead::Pending);
        r.missing();
        assert_eq!(r.decision(), RecoveryRead::Missing);
        // Qw3 Qa2: two needed; one failure and one missing is still pending.
        let mut r = RecoveryReadState::<u8>::new(3, 2);
        r.missing();
        r.failed();
        assert_eq!(r.decision(), RecoveryRead::Pending);
        r.failed();
        assert_eq!(r.decision(), RecoveryRead::Unknown);
        // Found wins over missing answers.
        let mut r = RecoveryReadState::new(3, 1);
        r.missing();
        r.missing();
        r.found(7u8);
        assert_eq!(r.decision(), RecoveryRead::Found(7));
        // Qw3 Qa3: one missing is enough (no quorum of 3 can hold it).
        let mut r = RecoveryReadState::<u8>::new(3, 3);
        r.missing();
        assert_eq!(r.decision(), RecoveryRead::Missing);
    }

    #[test]
    fn placement_is_distinct_and_respects_exclusions() {
        let avail: Vec<String> = (0..5).map(|i| format!("b{i}:1")).collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for _ in 0..50 {
            let e = choose_ensemble(&avail, &["b1:1".into()], 3, &mut rng).unwrap();
            assert_eq!(e.len(), 3);
            assert!(!e.contains(&"b1:1".to_string()));
            let mut d = e.clone();
            d.sort();
            d.dedup();
            assert_eq!(d.len(), 3);
            let r = choose_replacement(&avail, &e, &["b1:1".into()], &mut rng).unwrap();
            assert!(!e.contains(&r) && r != "b1:1");
        }
        assert_eq!(
            choose_ensemble(&avail, &[], 6, &mut rng),
            Err(NotEnoughBookies {
                needed: 6,
                available: 5
            })
        );
        let e: Vec<String> = avail[..4].to_vec();
        assert!(choose_replacement(&avail, &e, &["b4:1".into()], &mut rng).is_err());
    }
}
