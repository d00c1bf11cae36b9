//! The pure core of a ledger writer: entry ids, striping, acknowledgement in order, and the
//! bookkeeping of an ensemble change. No I/O, no clock, no tokio: the shell
//! ([`super::writer`]) feeds it appends and bookie answers and carries out the [`Send`]s it
//! asks for; acknowledged entry ids come out in order.
//!
//! The rules, after BookKeeper's `PendingAddOp` and `LedgerHandle`:
//! - entry `e` goes to its write set ([`super::schedule::write_set`]) of the current ensemble
//!   and carries the LAC the writer knew when it was appended;
//! - an entry is acknowledged once `Qa` of its write set stored it **and** every earlier entry
//!   is acknowledged, so acknowledgements leave in entry order and the LAC only moves forward;
//! - `Fenced` or `Unauthorized` from any bookie ends the writer (someone recovered the ledger,
//!   or the key is wrong): every entry not yet acknowledged fails;
//! - any other failure marks the bookie's ensemble slot failed; the shell then runs an
//!   ensemble change ([`PipelineCore::begin_ensemble_change`]): the new fragment starts at the
//!   first unacknowledged entry (`LAC + 1`), and while the change is in flight nothing is
//!   acknowledged, so that key stays right (`LedgerHandle.sendAddSuccessCallbacks` waits for
//!   `changingEnsemble` the same way). When the change is recorded
//!   ([`PipelineCore::ensemble_changed`]), what a replaced slot had acknowledged is forgotten
//!   and every unacknowledged entry of its write sets is sent to the new bookie
//!   (`unsetSuccessAndSendWriteRequest`);
//! - an answer from a slot's previous bookie (an older epoch) is ignored.

use std::collections::{BTreeSet, VecDeque};

use bytes::Bytes;
use zkit_bookie::protocol::entry::{Digester, EntryHeader};

use super::schedule::{in_write_set, write_set};

/// A request for the shell: add `entry` to the bookie in ensemble slot `index`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Send {
    /// Entry id.
    pub entry_id: i64,
    /// Ensemble slot.
    pub index: usize,
    /// The slot's epoch: answers are reported with it.
    pub epoch: u64,
    /// The bookie (its id).
    pub bookie: String,
    /// The encoded entry.
    pub entry: Bytes,
}

/// How a bookie answered an add.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddOutcome {
    /// Stored durably.
    Ok,
    /// The ledger is fenced on that bookie.
    Fenced,
    /// Wrong master key.
    Unauthorized,
    /// Anything else: connection lost, timeout, read-only, I/O error.
    Failed,
}

/// Why the writer stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Fenced by a recovery.
    Fenced,
    /// The master key was refused.
    Unauthorized,
    /// The ensemble change could not be done (the shell says why).
    EnsembleChangeFailed,
    /// Closed by its owner.
    Closed,
}

/// An ensemble change to carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsembleChange {
    /// The new fragment's first entry: the first unacknowledged one.
    pub first_entry: i64,
    /// The current ensemble.
    pub ensemble: Vec<String>,
    /// Slots to replace.
    pub replace: Vec<usize>,
}

#[derive(Debug)]
struct Pending {
    entry_id: i64,
    entry: Bytes,
    /// Header length (payload bytes of the ledger up to this entry).
    length: u64,
    acked: u64,
    sent: u64,
}

/// The writer's state. See the module docs.
#[derive(Debug)]
pub struct PipelineCore {
    ledger_id: i64,
    write_quorum: usize,
    ack_quorum: usize,
    ensemble: Vec<String>,
    epochs: Vec<u64>,
    lac: i64,
    lac_length: u64,
    next_entry: i64,
    length: u64,
    pending: VecDeque<Pending>,
    failed: BTreeSet<usize>,
    changing: bool,
    stopped: Option<Stop>,
    sends: Vec<Send>,
    acks: Vec<i64>,
}

impl PipelineCore {
    /// A writer whose last acknowledged entry is `lac` with ledger length `length`, writing
    /// to `ensemble` with quorums `write_quorum` / `ack_quorum`.
    pub fn new(
        ledger_id: i64,
        ensemble: Vec<String>,
        write_quorum: usize,
        ack_quorum: usize,
        lac: i64,
        length: u64,
    ) -> PipelineCore {
        let n = ensemble.len();
        PipelineCore {
            ledger_id,
            write_quorum,
            ack_quorum,
            ensemble,
            epochs: vec![0; n],
            lac,
            lac_length: length,
            next_entry: lac + 1,
            length,
            pending: VecDeque::new(),
            failed: BTreeSet::new(),
            changing: false,
            stopped: None,
            sends: Vec::new(),
            acks: Vec::new(),
        }
    }

    /// The last acknowledged entry (-1: none).
    pub fn lac(&self) -> i64 {
        self.lac
    }

    /// The ledger length up to the LAC.
    pub fn lac_length(&self) -> u64 {
        self.lac_length
    }

    /// The id the next append gets.
    pub fn next_entry(&self) -> i64 {
        self.next_entry
    }

    /// Entries appended and not yet acknowledged.
    pub fn in_flight(&self) -> usize {
        self.pending.len()
    }

    /// The current ensemble.
    pub fn ensemble(&self) -> &[String] {
        &self.ensemble
    }

    /// Whether an answer with `epoch` for slot `index` is from the slot's current bookie (an
    /// older epoch is from a bookie the slot no longer has).
    pub fn is_current(&self, index: usize, epoch: u64) -> bool {
        self.epochs.get(index) == Some(&epoch)
    }

    /// Why it stopped, if it did.
    pub fn stopped(&self) -> Option<Stop> {
        self.stopped
    }

    /// An ensemble change is in flight.
    pub fn is_changing(&self) -> bool {
        self.changing
    }

    /// Encodes and appends one entry; returns its id. The LAC in its header is the current one.
    ///
    /// # Errors
    /// The [`Stop`] reason once stopped (nothing is appended).
    pub fn append(&mut self, digester: &Digester, payload: &[u8]) -> Result<i64, Stop> {
        if let Some(s) = self.stopped {
            return Err(s);
        }
        let entry_id = self.next_entry;
        let length = self.length + payload.len() as u64;
        let entry = digester.encode(
            EntryHeader {
                ledger_id: self.ledger_id,
                entry_id,
                lac: self.lac,
                length: i64::try_from(length).unwrap_or(i64::MAX),
            },
            payload,
        );
        self.push(entry_id, entry, length);
        Ok(entry_id)
    }

    /// Appends an already encoded entry with the next id (recovery adds and re-replication
    /// copy entries verbatim); `length` is the one in its header.
    ///
    /// # Errors
    /// The [`Stop`] reason once stopped.
    pub fn append_encoded(&mut self, entry: Bytes, length: u64) -> Result<i64, Stop> {
        if let Some(s) = self.stopped {
            return Err(s);
        }
        let entry_id = self.next_entry;
        self.push(entry_id, entry, length);
        Ok(entry_id)
    }

    fn push(&mut self, entry_id: i64, entry: Bytes, length: u64) {
        self.next_entry += 1;
        self.length = length;
        self.pending.push_back(Pending {
            entry_id,
            entry,
            length,
            acked: 0,
            sent: 0,
        });
        if !self.changing {
            let i = self.pending.len() - 1;
            self.send_unsent(i);
        }
    }

    /// Queues a send to every slot of pending entry `i`'s write set that has not been sent to
    /// and is not failed.
    fn send_unsent(&mut self, i: usize) {
        let e = self.ensemble.len();
        let p = &mut self.pending[i];
        for index in write_set(p.entry_id, e, self.write_quorum) {
            let bit = 1u64 << index;
            if p.sent & bit != 0 || self.failed.contains(&index) {
                continue;
            }
            p.sent |= bit;
            self.sends.push(Send {
                entry_id: p.entry_id,
                index,
                epoch: self.epochs[index],
                bookie: self.ensemble[index].clone(),
                entry: p.entry.clone(),
            });
        }
    }

    /// A bookie's answer to a [`Send`].
    pub fn on_response(&mut self, entry_id: i64, index: usize, epoch: u64, outcome: AddOutcome) {
        if self.stopped.is_some() || self.epochs.get(index) != Some(&epoch) {
            return;
        }
        match outcome {
            AddOutcome::Ok => {
                let Some(first) = self.pending.front().map(|p| p.entry_id) else {
                    return;
                };
                let Ok(i) = usize::try_from(entry_id - first) else {
                    return; // already acknowledged
                };
                if let Some(p) = self.pending.get_mut(i) {
                    if in_write_set(entry_id, index, self.ensemble.len(), self.write_quorum) {
                        p.acked |= 1u64 << index;
                    }
                }
                self.deliver();
            }
            AddOutcome::Fenced => self.stop(Stop::Fenced),
            AddOutcome::Unauthorized => self.stop(Stop::Unauthorized),
            AddOutcome::Failed => {
                self.failed.insert(index);
            }
        }
    }

    fn deliver(&mut self) {
        if self.changing {
            return;
        }
        while let Some(p) = self.pending.front() {
            if (p.acked.count_ones() as usize) < self.ack_quorum {
                break;
            }
            self.lac = p.entry_id;
            self.lac_length = p.length;
            self.acks.push(p.entry_id);
            self.pending.pop_front();
        }
    }

    /// Starts an ensemble change when a slot failed and none is in flight.
    pub fn begin_ensemble_change(&mut self) -> Option<EnsembleChange> {
        if self.changing || self.failed.is_empty() || self.stopped.is_some() {
            return None;
        }
        self.changing = true;
        Some(EnsembleChange {
            first_entry: self.lac + 1,
            ensemble: self.ensemble.clone(),
            replace: self.failed.iter().copied().collect(),
        })
    }

    /// The change is recorded in the metadata: `ensemble` is the new one. Replaced slots get a
    /// new epoch and every unacknowledged entry of their write sets is sent again.
    pub fn ensemble_changed(&mut self, ensemble: Vec<String>) {
        if self.stopped.is_some() {
            return;
        }
        let replaced: Vec<usize> = (0..self.ensemble.len())
            .filter(|i| ensemble.get(*i) != self.ensemble.get(*i))
            .collect();
        self.ensemble = ensemble;
        for &i in &replaced {
            self.epochs[i] += 1;
            self.failed.remove(&i);
            let bit = !(1u64 << i);
            for p in &mut self.pending {
                p.acked &= bit;
                p.sent &= bit;
            }
        }
        self.changing = false;
        for i in 0..self.pending.len() {
            self.send_unsent(i);
        }
        self.deliver();
    }

    /// The ensemble change failed: the writer stops.
    pub fn ensemble_change_failed(&mut self) {
        self.changing = false;
        self.stop(Stop::EnsembleChangeFailed);
    }

    /// Stops the writer; appended entries not acknowledged are given up.
    pub fn stop(&mut self, why: Stop) {
        if self.stopped.is_none() {
            self.stopped = Some(why);
            self.pending.clear();
            self.sends.clear();
        }
    }

    /// Sends to carry out, in order.
    pub fn take_sends(&mut self) -> Vec<Send> {
        std::mem::take(&mut self.sends)
    }

    /// Entries acknowledged since the last call, in order.
    pub fn take_acks(&mut self) -> Vec<i64> {
        std::mem::take(&mut self.acks)
    }

    /// True when something is waiting in [`Self::take_sends`] or [`Self::take_acks`].
    pub fn has_output(&self) -> bool {
        !self.sends.is_empty() || !self.acks.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkit_bookie::protocol::entry::DigestType;

    fn ens(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("b{i}")).collect()
    }

    fn core(e: usize, qw: usize, qa: usize) -> (PipelineCore, Digester) {
        (
            PipelineCore::new(7, ens(e), qw, qa, -1, 0),
            Digester::new(DigestType::Crc32c, b"pw"),
        )
    }

    fn ok(c: &mut PipelineCore, s: &Send) {
        c.on_response(s.entry_id, s.index, s.epoch, AddOutcome::Ok);
    }

    #[test]
    fn entries_stripe_and_ack_in_order() {
        let (mut c, d) = core(3, 2, 2);
        for i in 0..3 {
            assert_eq!(c.append(&d, format!("e{i}").as_bytes()), Ok(i));
        }
        let sends = c.take_sends();
        let targets: Vec<(i64, usize)> = sends.iter().map(|s| (s.entry_id, s.index)).collect();
        assert_eq!(
            targets,
            vec![(0, 0), (0, 1), (1, 1), (1, 2), (2, 2), (2, 0)]
        );
        // Entry 1 fully acked first: not delivered before entry 0.
        ok(&mut c, &sends[2]);
        ok(&mut c, &sends[3]);
        assert!(c.take_acks().is_empty());
        assert_eq!(c.lac(), -1);
        ok(&mut c, &sends[0]);
        assert!(c.take_acks().is_empty(), "one of two is not a quorum");
        ok(&mut c, &sends[1]);
        assert_eq!(c.take_acks(), vec![0, 1]);
        assert_eq!(c.lac(), 1);
        // The next entry carries LAC 1 in its header.
        c.append(&d, b"e3").unwrap();
        let s = c.take_sends();
        let h = EntryHeader::parse(&s[0].entry).unwrap();
        assert_eq!((h.entry_id, h.lac, h.length), (3, 1, 8));
        let v = d.verify(&s[0].entry, 7, 3).unwrap();
        assert_eq!(&v.payload[..], b"e3");
    }

    #[test]
    fn ack_quorum_below_write_quorum_acks_early() {
        let (mut c, d) = core(3, 3, 2);
        c.append(&d, b"x").unwrap();
        let s = c.take_sends();
        assert_eq!(s.len(), 3);
        ok(&mut c, &s[2]);
        ok(&mut c, &s[0]);
        assert_eq!(c.take_acks(), vec![0]);
        // The late third answer is harmless.
        ok(&mut c, &s[1]);
        assert!(c.take_acks().is_empty());
        assert_eq!(c.in_flight(), 0);
    }

    #[test]
    fn fenced_stops_and_nothing_more_is_acknowledged() {
        let (mut c, d) = core(3, 2, 2);
        c.append(&d, b"a").unwrap();
        c.append(&d, b"b").unwrap();
        let s = c.take_sends();
        ok(&mut c, &s[0]);
        c.on_response(s[1].entry_id, s[1].index, s[1].epoch, AddOutcome::Fenced);
        assert_eq!(c.stopped(), Some(Stop::Fenced));
        ok(&mut c, &s[1]);
        ok(&mut c, &s[2]);
        ok(&mut c, &s[3]);
        assert!(c.take_acks().is_empty());
        assert_eq!(c.append(&d, b"c"), Err(Stop::Fenced));
        assert!(c.take_sends().is_empty());
    }

    #[test]
    fn ensemble_change_keys_at_first_unacked_and_resends_what_the_slot_lacked() {
        let (mut c, d) = core(3, 2, 2);
        for _ in 0..4 {
            c.append(&d, b"p").unwrap();
        }
        let s = c.take_sends();
        // Entry 0 acked by 0 and 1.
        ok(&mut c, &s[0]);
        ok(&mut c, &s[1]);
        assert_eq!(c.take_acks(), vec![0]);
        // Slot 1 fails on entry 1; entry 2 (slots 2, 0) fully acked meanwhile.
        c.on_response(1, 1, 0, AddOutcome::Failed);
        ok(&mut c, &s[4]);
        ok(&mut c, &s[5]);
        let change = c.begin_ensemble_change().unwrap();
        assert_eq!(change.first_entry, 1);
        assert_eq!(change.replace, vec![1]);
        assert!(c.begin_ensemble_change().is_none(), "one change at a time");
        // While changing: acks are held, new entries are not sent.
        ok(&mut c, &s[3]); // entry 1 on slot 2
        assert!(c.take_acks().is_empty());
        c.append(&d, b"q").unwrap(); // entry 4: slots 1, 2
        assert!(c.take_sends().is_empty());
        // A late answer from the replaced bookie after the change is ignored.
        let mut new = ens(3);
        new[1] = "b9".into();
        c.ensemble_changed(new);
        c.on_response(1, 1, 0, AddOutcome::Ok);
        let resend: Vec<(i64, usize, String)> = c
            .take_sends()
            .into_iter()
            .map(|s| (s.entry_id, s.index, s.bookie))
            .collect();
        // Entry 1 (slots 1,2), entry 3 (slots 0,1), entry 4 (slots 1,2; slot 2 first time).
        assert_eq!(
            resend,
            vec![
                (1, 1, "b9".to_string()),
                (3, 1, "b9".to_string()),
                (4, 1, "b9".to_string()),
                (4, 2, "b2".to_string()),
            ]
        );
        c.on_response(1, 1, 1, AddOutcome::Ok);
        assert_eq!(c.take_acks(), vec![1, 2]);
    }

    #[test]
    fn a_slot_failing_during_a_change_gets_the_next_change() {
        let (mut c, d) = core(4, 2, 2);
        c.append(&d, b"p").unwrap(); // slots 0,1
        c.append(&d, b"p").unwrap(); // slots 1,2
        let s = c.take_sends();
        c.on_response(0, 0, 0, AddOutcome::Failed);
        let ch = c.begin_ensemble_change().unwrap();
        assert_eq!(ch.replace, vec![0]);
        c.on_response(1, 2, 0, AddOutcome::Failed);
        let mut new = ens(4);
        new[0] = "n0".into();
        c.ensemble_changed(new.clone());
        let ch2 = c.begin_ensemble_change().unwrap();
        assert_eq!(ch2.replace, vec![2]);
        assert_eq!(ch2.ensemble, new);
        let _ = s;
        c.ensemble_change_failed();
        assert_eq!(c.stopped(), Some(Stop::EnsembleChangeFailed));
    }

    #[test]
    fn recovery_core_appends_verbatim_from_the_lac() {
        let d = Digester::new(DigestType::Crc32c, b"pw");
        let mut c = PipelineCore::new(7, ens(3), 2, 2, 4, 50);
        let e = d.encode(
            EntryHeader {
                ledger_id: 7,
                entry_id: 5,
                lac: 3,
                length: 60,
            },
            b"0123456789",
        );
        assert_eq!(c.append_encoded(e.clone(), 60), Ok(5));
        let s = c.take_sends();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].entry, e);
        ok(&mut c, &s[0]);
        ok(&mut c, &s[1]);
        assert_eq!(c.take_acks(), vec![5]);
        assert_eq!((c.lac(), c.lac_length()), (5, 60));
    }
}
