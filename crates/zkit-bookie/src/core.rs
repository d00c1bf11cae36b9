//! The bookie's pure state machine: per-ledger state and the decision for each request.
//! No I/O, no clock, no tokio: the shell (`server`) feeds it requests, carries out the journal
//! records it asks for, and reports back with [`BookieCore::committed`] once they are durable.
//!
//! A ledger comes into being on this bookie with its first add or fence (BookKeeper's
//! `HandleFactory.getHandle` creates the handle and journals the master key the same way).
//! Decisions follow BookKeeper's `BookieImpl` and `LedgerDescriptorImpl`:
//! - read-only bookie → adds rejected with `ReadOnly` (`WriteEntryProcessor`);
//! - wrong master key → `Unauthorized` (`LedgerDescriptorImpl.checkAccess`);
//! - fenced ledger → non-recovery adds rejected with `Fenced` (`BookieImpl.addEntry`); recovery
//!   adds are accepted (`BookieImpl.recoveryAddEntry`);
//! - fencing sets the flag at once (later adds are refused even before the fence is durable) and
//!   journals it; the fence is answered only once its record is durable
//!   (`LedgerDescriptorImpl.fenceAndLogInJournal`).
//!
//! A rejected request changes nothing. The LAC and last entry of a ledger move only when an
//! add is durable, so a reader never sees an entry a crash could take back.

use std::collections::BTreeMap;

use crate::protocol::entry::MasterKey;
use crate::protocol::{AddRequest, Status};
use crate::storage::{Record, RecoveredLedger};

/// What the core knows of one ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerState {
    /// The master key of the first add or fence.
    pub master_key: MasterKey,
    /// Fenced: only recovery adds accepted.
    pub fenced: bool,
    /// A fence record is durable.
    pub fence_durable: bool,
    /// The key record is durable.
    pub key_durable: bool,
    /// Highest LAC in the durable entries (-1: none).
    pub lac: i64,
    /// Highest durable entry id (-1: none).
    pub last_entry: i64,
    /// Durable adds (a re-added entry counts again).
    pub entries: u64,
}

impl LedgerState {
    fn new(master_key: MasterKey) -> LedgerState {
        LedgerState {
            master_key,
            fenced: false,
            fence_durable: false,
            key_durable: false,
            lac: -1,
            last_entry: -1,
            entries: 0,
        }
    }
}

/// Journal records to write for a request, and what to tell the core once they are durable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// Records, in order.
    pub records: Vec<Record>,
    /// Summary for [`BookieCore::committed`].
    pub ack: Ack,
}

/// What a durable group of records means for the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// Ledger.
    pub ledger_id: i64,
    /// The key record was in the group.
    pub key: bool,
    /// A fence record was in the group.
    pub fence: bool,
    /// An add: entry id and the LAC its header carries.
    pub add: Option<(i64, i64)>,
}

/// The bookie's decisions. See the module docs.
#[derive(Debug, Clone)]
pub struct BookieCore {
    ledgers: BTreeMap<i64, LedgerState>,
    read_only: bool,
    max_entry_size: usize,
    entries: u64,
}

impl BookieCore {
    /// A core with what storage recovered; entries over `max_entry_size` bytes are refused.
    pub fn new(recovered: Vec<RecoveredLedger>, max_entry_size: usize) -> BookieCore {
        let mut entries = 0;
        let ledgers = recovered
            .into_iter()
            .map(|r| {
                entries += r.entries;
                (
                    r.ledger_id,
                    LedgerState {
                        master_key: r.master_key,
                        fenced: r.fenced,
                        fence_durable: r.fenced,
                        key_durable: true,
                        lac: r.lac,
                        last_entry: r.last_entry,
                        entries: r.entries,
                    },
                )
            })
            .collect();
        BookieCore {
            ledgers,
            read_only: false,
            max_entry_size,
            entries,
        }
    }

    /// Read-only: adds are rejected.
    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// Switches read-only mode.
    pub fn set_read_only(&mut self, read_only: bool) {
        self.read_only = read_only;
    }

    /// A ledger's state.
    pub fn ledger(&self, ledger_id: i64) -> Option<&LedgerState> {
        self.ledgers.get(&ledger_id)
    }

    /// Ledgers held.
    pub fn ledger_count(&self) -> u64 {
        self.ledgers.len() as u64
    }

    /// Durable adds over all ledgers.
    pub fn entry_count(&self) -> u64 {
        self.entries
    }

    /// Ledger ids above `start_after`, at most `max`, and whether more follow.
    pub fn list(&self, start_after: i64, max: u32) -> (Vec<i64>, bool) {
        let mut ids: Vec<i64> = self
            .ledgers
            .range(start_after.saturating_add(1)..)
            .map(|(id, _)| *id)
            .take(max as usize + 1)
            .collect();
        let more = ids.len() > max as usize;
        ids.truncate(max as usize);
        (ids, more)
    }

    /// Looks up or creates a ledger, checking the key (no change on `Unauthorized`).
    fn handle(&mut self, ledger_id: i64, key: &MasterKey) -> Result<&mut LedgerState, Status> {
        if let Some(l) = self.ledgers.get(&ledger_id) {
            if l.master_key != *key {
                return Err(Status::Unauthorized);
            }
        }
        Ok(self
            .ledgers
            .entry(ledger_id)
            .or_insert_with(|| LedgerState::new(*key)))
    }

    /// Decides an add.
    ///
    /// # Errors
    /// The status to answer; nothing changed.
    pub fn add(&mut self, req: &AddRequest) -> Result<Pending, Status> {
        if self.read_only {
            return Err(Status::ReadOnly);
        }
        if req.entry.len() > self.max_entry_size {
            return Err(Status::TooLarge);
        }
        if let Some(l) = self.ledgers.get(&req.ledger_id) {
            if l.master_key != req.master_key {
                return Err(Status::Unauthorized);
            }
            if l.fenced && !req.is_recovery() {
                return Err(Status::Fenced);
            }
        }
        let l = self.handle(req.ledger_id, &req.master_key)?;
        let mut records = Vec::with_capacity(2);
        let key = !l.key_durable;
        if key {
            records.push(Record::Key {
                ledger_id: req.ledger_id,
                master_key: req.master_key,
            });
        }
        records.push(Record::Add {
            ledger_id: req.ledger_id,
            entry_id: req.entry_id,
            lac: req.lac(),
            entry: req.entry.clone(),
        });
        Ok(Pending {
            records,
            ack: Ack {
                ledger_id: req.ledger_id,
                key,
                fence: false,
                add: Some((req.entry_id, req.lac())),
            },
        })
    }

    /// Decides a fence: `Ok(None)` when the ledger is already durably fenced (answer now),
    /// `Ok(Some(_))` when records must be made durable before answering.
    ///
    /// # Errors
    /// `Unauthorized` for a wrong key; nothing changed.
    pub fn fence(&mut self, ledger_id: i64, key: &MasterKey) -> Result<Option<Pending>, Status> {
        let l = self.handle(ledger_id, key)?;
        l.fenced = true;
        if l.fence_durable {
            return Ok(None);
        }
        let mut records = Vec::with_capacity(2);
        let with_key = !l.key_durable;
        if with_key {
            records.push(Record::Key {
                ledger_id,
                master_key: *key,
            });
        }
        records.push(Record::Fence { ledger_id });
        Ok(Some(Pending {
            records,
            ack: Ack {
                ledger_id,
                key: with_key,
                fence: true,
                add: None,
            },
        }))
    }

    /// Forgets a ledger whose metadata is gone (the garbage collector's decision): reads answer
    /// `NoLedger` from now on. Returns the record that makes it durable, `None` when the bookie
    /// does not hold the ledger.
    pub fn delete(&mut self, ledger_id: i64) -> Option<Record> {
        let l = self.ledgers.remove(&ledger_id)?;
        self.entries = self.entries.saturating_sub(l.entries);
        Some(Record::Delete { ledger_id })
    }

    /// The ids of every ledger held, ascending.
    pub fn ledger_ids(&self) -> Vec<i64> {
        self.ledgers.keys().copied().collect()
    }

    /// Records that a pending group is durable. Returns the ledger's new LAC when it moved.
    pub fn committed(&mut self, ack: &Ack) -> Option<i64> {
        let l = self.ledgers.get_mut(&ack.ledger_id)?;
        if ack.key {
            l.key_durable = true;
        }
        if ack.fence {
            l.fence_durable = true;
        }
        let (entry_id, lac) = ack.add?;
        l.entries += 1;
        self.entries += 1;
        l.last_entry = l.last_entry.max(entry_id);
        if lac > l.lac {
            l.lac = lac;
            Some(lac)
        } else {
            None
        }
    }

    /// Checks a plain read: `NoLedger` when the bookie has never seen the ledger.
    ///
    /// # Errors
    /// `NoLedger`.
    pub fn check_read(&self, ledger_id: i64) -> Result<&LedgerState, Status> {
        self.ledgers.get(&ledger_id).ok_or(Status::NoLedger)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::entry::{master_key, DigestType, Digester, EntryHeader};
    use crate::protocol::FLAG_RECOVERY_ADD;

    fn add(ledger_id: i64, entry_id: i64, password: &[u8], flags: u16) -> AddRequest {
        let entry = Digester::new(DigestType::Crc32c, password).encode(
            EntryHeader {
                ledger_id,
                entry_id,
                lac: entry_id - 1,
                length: entry_id + 1,
            },
            b"x",
        );
        AddRequest {
            ledger_id,
            entry_id,
            flags,
            master_key: master_key(password),
            entry,
        }
    }

    fn core() -> BookieCore {
        BookieCore::new(Vec::new(), 1024)
    }

    #[test]
    fn first_add_journals_the_key_then_only_adds() {
        let mut c = core();
        let p = c.add(&add(1, 0, b"pw", 0)).unwrap();
        assert!(matches!(
            p.records[..],
            [Record::Key { .. }, Record::Add { .. }]
        ));
        // Until the key is durable, each add carries it again (a failed write loses nothing).
        let p2 = c.add(&add(1, 1, b"pw", 0)).unwrap();
        assert_eq!(p2.records.len(), 2);
        assert_eq!(c.committed(&p.ack), None, "LAC -1 does not move");
        let p3 = c.add(&add(1, 2, b"pw", 0)).unwrap();
        assert!(matches!(p3.records[..], [Record::Add { .. }]));
        assert_eq!(c.committed(&p3.ack), Some(1));
        let l = c.ledger(1).unwrap();
        assert_eq!((l.lac, l.last_entry, l.entries), (1, 2, 2));
        assert_eq!(c.entry_count(), 2);
    }

    #[test]
    fn wrong_key_is_unauthorized_and_changes_nothing() {
        let mut c = core();
        let p = c.add(&add(1, 0, b"pw", 0)).unwrap();
        c.committed(&p.ack);
        let before = c.ledger(1).cloned();
        assert_eq!(c.add(&add(1, 1, b"other", 0)), Err(Status::Unauthorized));
        assert_eq!(c.fence(1, &master_key(b"other")), Err(Status::Unauthorized));
        assert_eq!(c.ledger(1).cloned(), before);
    }

    #[test]
    fn fenced_ledger_takes_only_recovery_adds_and_fence_is_at_once() {
        let mut c = core();
        let key = master_key(b"pw");
        let p = c.add(&add(1, 0, b"pw", 0)).unwrap();
        c.committed(&p.ack);
        let f = c.fence(1, &key).unwrap().expect("fence must be journaled");
        assert!(matches!(f.records[..], [Record::Fence { ledger_id: 1 }]));
        // Fenced before the fence is durable.
        assert_eq!(c.add(&add(1, 1, b"pw", 0)), Err(Status::Fenced));
        // A second fence before the first is durable journals again (answered after it).
        assert!(c.fence(1, &key).unwrap().is_some());
        c.committed(&f.ack);
        assert_eq!(c.fence(1, &key), Ok(None));
        assert!(c.add(&add(1, 1, b"pw", FLAG_RECOVERY_ADD)).is_ok());
    }

    #[test]
    fn fencing_an_unknown_ledger_creates_it_fenced() {
        let mut c = core();
        let f = c.fence(9, &master_key(b"pw")).unwrap().unwrap();
        assert!(matches!(
            f.records[..],
            [Record::Key { .. }, Record::Fence { .. }]
        ));
        assert_eq!(c.add(&add(9, 0, b"pw", 0)), Err(Status::Fenced));
        assert_eq!(c.check_read(9).map(|l| l.last_entry), Ok(-1));
        assert_eq!(c.check_read(10).err(), Some(Status::NoLedger));
    }

    #[test]
    fn read_only_and_too_large_reject_adds_only() {
        let mut c = core();
        c.set_read_only(true);
        assert_eq!(c.add(&add(1, 0, b"pw", 0)), Err(Status::ReadOnly));
        assert!(c.ledger(1).is_none());
        // Fencing still works in read-only mode (recovery must be able to fence).
        assert!(c.fence(2, &master_key(b"pw")).is_ok());
        c.set_read_only(false);
        let mut big = add(1, 0, b"pw", 0);
        big.entry = bytes::Bytes::from(vec![0u8; 2048]);
        assert_eq!(c.add(&big), Err(Status::TooLarge));
    }

    /// A core recovered with ledger 4: fenced, LAC 7, last entry 8, 9 entries.
    fn recovered_ledger_4() -> BookieCore {
        BookieCore::new(
            vec![RecoveredLedger {
                ledger_id: 4,
                master_key: master_key(b"pw"),
                fenced: true,
                lac: 7,
                last_entry: 8,
                entries: 9,
            }],
            1024,
        )
    }

    #[test]
    fn a_deleted_ledger_is_forgotten_and_a_later_add_starts_it_again_with_its_key() {
        let mut c = recovered_ledger_4();
        assert_eq!(c.delete(4), Some(Record::Delete { ledger_id: 4 }));
        assert_eq!(c.delete(4), None, "already gone");
        assert_eq!(c.check_read(4), Err(Status::NoLedger));
        assert_eq!(c.entry_count(), 0);
        assert!(c.ledger_ids().is_empty());
        // Not fenced any more: the ledger's state went with it.
        let p = c.add(&add(4, 0, b"pw", 0)).unwrap();
        assert!(matches!(
            p.records[..],
            [Record::Key { .. }, Record::Add { .. }]
        ));
    }

    #[test]
    fn list_pages_through_ledgers() {
        let mut c = core();
        for id in [5, 1, 3, 9] {
            c.fence(id, &master_key(b"")).unwrap();
        }
        assert_eq!(c.list(-1, 2), (vec![1, 3], true));
        assert_eq!(c.list(3, 2), (vec![5, 9], false));
        assert_eq!(c.list(9, 2), (vec![], false));
    }

    #[test]
    fn recovered_state_is_durable_state() {
        let c = recovered_ledger_4();
        let mut c2 = c.clone();
        assert_eq!(c2.fence(4, &master_key(b"pw")), Ok(None));
        assert_eq!(c.entry_count(), 9);
        assert_eq!(c.ledger(4).unwrap().lac, 7);
    }
}
