//! The journal: its record format, the scanner that reads it back, and the group-commit thread.
//!
//! # Record format (journal and index log alike)
//! ```text
//! len      u32 BE   payload bytes
//! crc      u32 BE   CRC32C of the payload
//! hcrc     u32 BE   CRC32C of the 8 bytes above
//! payload  type u8, then the fields of that type
//! ```
//! The header's own CRC tells a torn tail from corruption: a file cut anywhere leaves either an
//! incomplete header or a sound header whose payload runs past the end (a *torn tail*, cut off
//! on recovery: nothing in it was acknowledged, since an add is answered only after the fsync
//! covering all of its record). A complete record whose header or payload CRC fails is
//! *corruption*: the bookie refuses to start on it and names the file and offset. (BookKeeper's
//! `Journal.scanJournal` stops at the first short read the same way.)
//!
//! # Group commit
//! [`GroupCommit`] owns a [`Sink`] on a dedicated thread. Each round takes every job queued
//! while the previous round's fsync ran, writes them all, runs one fsync for the lot, then
//! resolves them in submission order (BookKeeper's `Journal` force-write thread batches the same
//! way). A write error (disk full) fails the round's jobs and the sink rolls the files back to
//! where the round began; an fsync error poisons the journal (what it covered may be lost, so
//! nothing later may be acknowledged until a restart recovers from disk).

use std::sync::mpsc;
use std::sync::Mutex;
use std::thread::JoinHandle;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::sync::oneshot;

use super::{Commit, Record, Result, StorageError};
use crate::protocol::entry::{EntryHeader, MASTER_KEY_LEN};

/// Record header bytes.
pub const RECORD_HEADER_LEN: usize = 12;

const TYPE_KEY: u8 = 1;
const TYPE_ADD: u8 = 2;
const TYPE_FENCE: u8 = 3;
/// Index-log only: where an entry lives.
pub(crate) const TYPE_LOC: u8 = 4;
const TYPE_DELETE: u8 = 5;

/// Appends one framed record with `payload` written by the closure.
pub(crate) fn put_record(buf: &mut BytesMut, payload: impl FnOnce(&mut BytesMut)) {
    let start = buf.len();
    buf.put_bytes(0, RECORD_HEADER_LEN);
    payload(buf);
    let body = &buf[start + RECORD_HEADER_LEN..];
    let len = u32::try_from(body.len()).unwrap_or(u32::MAX);
    let crc = crc32c::crc32c(body);
    let mut head = [0u8; 8];
    head[..4].copy_from_slice(&len.to_be_bytes());
    head[4..].copy_from_slice(&crc.to_be_bytes());
    let hcrc = crc32c::crc32c(&head);
    buf[start..start + 8].copy_from_slice(&head);
    buf[start + 8..start + 12].copy_from_slice(&hcrc.to_be_bytes());
}

/// Encodes a journal record.
pub fn encode_record(record: &Record, buf: &mut BytesMut) {
    put_record(buf, |b| match record {
        Record::Key {
            ledger_id,
            master_key,
        } => {
            b.put_u8(TYPE_KEY);
            b.put_i64(*ledger_id);
            b.put_slice(master_key);
        }
        Record::Add {
            ledger_id,
            entry_id,
            entry,
            ..
        } => {
            b.put_u8(TYPE_ADD);
            b.put_i64(*ledger_id);
            b.put_i64(*entry_id);
            b.put_slice(entry);
        }
        Record::Fence { ledger_id } => {
            b.put_u8(TYPE_FENCE);
            b.put_i64(*ledger_id);
        }
        Record::Delete { ledger_id } => {
            b.put_u8(TYPE_DELETE);
            b.put_i64(*ledger_id);
        }
    });
}

/// Decodes a journal record's payload (already CRC-checked); `Err` names what is wrong.
pub fn decode_record(mut payload: Bytes) -> std::result::Result<Record, &'static str> {
    if payload.is_empty() {
        return Err("empty record");
    }
    let kind = payload.get_u8();
    let need = |p: &Bytes, n: usize| {
        if p.remaining() < n {
            Err("short record")
        } else {
            Ok(())
        }
    };
    match kind {
        TYPE_KEY => {
            need(&payload, 8 + MASTER_KEY_LEN)?;
            let ledger_id = payload.get_i64();
            let mut master_key = [0u8; MASTER_KEY_LEN];
            payload.copy_to_slice(&mut master_key);
            Ok(Record::Key {
                ledger_id,
                master_key,
            })
        }
        TYPE_ADD => {
            need(&payload, 16)?;
            let ledger_id = payload.get_i64();
            let entry_id = payload.get_i64();
            let header = EntryHeader::parse(&payload).ok_or("entry shorter than its header")?;
            if header.ledger_id != ledger_id || header.entry_id != entry_id {
                return Err("entry header does not match the record");
            }
            Ok(Record::Add {
                ledger_id,
                entry_id,
                lac: header.lac,
                entry: payload,
            })
        }
        TYPE_FENCE => {
            need(&payload, 8)?;
            Ok(Record::Fence {
                ledger_id: payload.get_i64(),
            })
        }
        TYPE_DELETE => {
            need(&payload, 8)?;
            Ok(Record::Delete {
                ledger_id: payload.get_i64(),
            })
        }
        _ => Err("unknown record type"),
    }
}

/// How a scan ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanEnd {
    /// At the end of the data, on a record boundary.
    Clean,
    /// An incomplete record starts at this offset (a torn tail).
    Torn(u64),
    /// A complete record at this offset fails its checks.
    Corrupt(u64, &'static str),
}

/// Splits `data` into record payloads (with their offsets) up to the first incomplete or bad
/// record. Pure.
pub fn scan(data: &Bytes) -> (Vec<(u64, Bytes)>, ScanEnd) {
    let mut out = Vec::new();
    let mut at = 0usize;
    loop {
        let rest = &data[at..];
        if rest.is_empty() {
            return (out, ScanEnd::Clean);
        }
        if rest.len() < RECORD_HEADER_LEN {
            return (out, ScanEnd::Torn(at as u64));
        }
        let word = |i: usize| u32::from_be_bytes([rest[i], rest[i + 1], rest[i + 2], rest[i + 3]]);
        let (len, crc, hcrc) = (word(0) as usize, word(4), word(8));
        if crc32c::crc32c(&rest[..8]) != hcrc {
            return (
                out,
                ScanEnd::Corrupt(at as u64, "record header checksum mismatch"),
            );
        }
        let end = RECORD_HEADER_LEN + len;
        if rest.len() < end {
            return (out, ScanEnd::Torn(at as u64));
        }
        let payload = data.slice(at + RECORD_HEADER_LEN..at + end);
        if crc32c::crc32c(&payload) != crc {
            return (out, ScanEnd::Corrupt(at as u64, "record checksum mismatch"));
        }
        out.push((at as u64, payload));
        at += end;
    }
}

/// What the group-commit thread drives: the files behind the journal.
pub trait Sink: Send + 'static {
    /// Writes the records of every job, in order, without syncing. On error nothing written
    /// in this call may survive (roll back), or the sink must report itself poisoned through
    /// later errors.
    ///
    /// # Errors
    /// The write's failure.
    fn write(&mut self, jobs: &[Vec<Record>]) -> Result<()>;
    /// Makes everything written durable.
    ///
    /// # Errors
    /// The sync's failure (poisons the journal).
    fn sync(&mut self) -> Result<()>;
    /// Called after a successful sync with the jobs it covered: make them readable.
    fn publish(&mut self, jobs: Vec<Vec<Record>>);
    /// Reclaims the space of deleted ledgers (see `file::compact`); between rounds. The
    /// default does nothing.
    ///
    /// # Errors
    /// The collection's failure (nothing is lost: it is retried next time).
    fn collect_garbage(&mut self) -> Result<()> {
        Ok(())
    }
    /// Checkpoints if `forced` or if the sink thinks it is time; between rounds.
    ///
    /// # Errors
    /// The checkpoint's failure (the journal is kept, nothing is lost).
    fn checkpoint(&mut self, forced: bool) -> Result<()>;
}

enum Job {
    Append(Vec<Record>, oneshot::Sender<Result<()>>),
    Checkpoint(oneshot::Sender<Result<()>>),
    CollectGarbage(oneshot::Sender<Result<()>>),
}

/// The group-commit thread. See the module docs.
#[derive(Debug)]
pub struct GroupCommit {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl GroupCommit {
    /// Moves `sink` to a new thread named `name`.
    ///
    /// # Errors
    /// When the thread cannot be spawned.
    pub fn start<S: Sink>(sink: S, name: &str) -> Result<GroupCommit> {
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(sink, rx))
            .map_err(|e| StorageError::io("spawn the journal thread", e))?;
        Ok(GroupCommit {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    fn send(&self, job: Job) {
        let guard = self.tx.lock().unwrap_or_else(|p| p.into_inner());
        // If the thread is gone the job (and its sender) drops: the commit says Stopped.
        if let Some(tx) = guard.as_ref() {
            let _ = tx.send(job);
        }
    }

    /// Queues records; submission order is journal order.
    pub fn submit(&self, records: Vec<Record>) -> Commit {
        let (done, commit) = Commit::channel();
        self.send(Job::Append(records, done));
        commit
    }

    /// Queues a checkpoint between rounds.
    pub fn checkpoint(&self) -> Commit {
        let (done, commit) = Commit::channel();
        self.send(Job::Checkpoint(done));
        commit
    }

    /// Queues a garbage collection between rounds.
    pub fn collect_garbage(&self) -> Commit {
        let (done, commit) = Commit::channel();
        self.send(Job::CollectGarbage(done));
        commit
    }

    /// Finishes queued work and stops the thread.
    pub fn shutdown(&self) {
        self.tx.lock().unwrap_or_else(|p| p.into_inner()).take();
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = thread {
            let _ = t.join();
        }
    }
}

impl Drop for GroupCommit {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn run<S: Sink>(mut sink: S, rx: mpsc::Receiver<Job>) {
    let mut poisoned: Option<String> = None;
    let mut jobs = Vec::new();
    let mut dones = Vec::new();
    let mut checkpoints = Vec::new();
    let mut collections = Vec::new();
    while let Ok(first) = rx.recv() {
        // Everything queued while the previous fsync ran joins this round.
        let mut next = Some(first);
        while let Some(job) = next.take().or_else(|| rx.try_recv().ok()) {
            match job {
                Job::Append(records, done) => {
                    jobs.push(records);
                    dones.push(done);
                }
                Job::Checkpoint(done) => checkpoints.push(done),
                Job::CollectGarbage(done) => collections.push(done),
            }
        }
        if !jobs.is_empty() {
            let result = match &poisoned {
                Some(why) => Err(StorageError::Poisoned(why.clone())),
                None => sink
                    .write(&jobs)
                    .and_then(|()| sink.sync().inspect_err(|e| poisoned = Some(e.to_string()))),
            };
            if result.is_ok() {
                sink.publish(std::mem::take(&mut jobs));
            } else {
                jobs.clear();
            }
            for done in dones.drain(..) {
                let _ = done.send(result.clone());
            }
        }
        if poisoned.is_none() {
            let forced = !checkpoints.is_empty();
            let result = sink.checkpoint(forced);
            if let Err(e) = &result {
                tracing::warn!(error = %e, "checkpoint failed; the journal is kept");
            }
            for done in checkpoints.drain(..) {
                let _ = done.send(result.clone());
            }
            if !collections.is_empty() {
                let result = sink.collect_garbage();
                if let Err(e) = &result {
                    tracing::warn!(error = %e, "garbage collection failed; retried next time");
                }
                for done in collections.drain(..) {
                    let _ = done.send(result.clone());
                }
            }
        } else {
            for done in checkpoints.drain(..).chain(collections.drain(..)) {
                let _ = done.send(Err(StorageError::Poisoned(
                    poisoned.clone().unwrap_or_default(),
                )));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc as std_mpsc;
    use std::sync::{Arc, Mutex as StdMutex};
    use std::time::Duration;

    fn fence(l: i64) -> Record {
        Record::Fence { ledger_id: l }
    }

    #[test]
    fn records_round_trip_and_every_cut_is_torn_never_corrupt() {
        let entry =
            crate::protocol::entry::Digester::new(crate::protocol::entry::DigestType::Crc32c, b"")
                .encode(
                    EntryHeader {
                        ledger_id: 3,
                        entry_id: 4,
                        lac: 2,
                        length: 9,
                    },
                    b"payload",
                );
        let records = vec![
            Record::Key {
                ledger_id: 3,
                master_key: [7; 32],
            },
            Record::Add {
                ledger_id: 3,
                entry_id: 4,
                lac: 2,
                entry,
            },
            fence(3),
        ];
        let mut buf = BytesMut::new();
        for r in &records {
            encode_record(r, &mut buf);
        }
        let data = buf.freeze();
        let (got, end) = scan(&data);
        assert_eq!(end, ScanEnd::Clean);
        let decoded: Vec<Record> = got
            .into_iter()
            .map(|(_, p)| decode_record(p).unwrap())
            .collect();
        assert_eq!(decoded, records);
        for cut in 0..data.len() {
            let (got, end) = scan(&data.slice(..cut));
            assert!(
                matches!(end, ScanEnd::Torn(_) | ScanEnd::Clean),
                "cut {cut}: {end:?}"
            );
            // Every record wholly before the cut is there.
            let whole = got.iter().map(|(o, p)| *o as usize + 12 + p.len()).max();
            assert!(whole.unwrap_or(0) <= cut);
        }
        for flip in 0..data.len() {
            let mut bad = data.to_vec();
            bad[flip] ^= 1;
            let (_, end) = scan(&Bytes::from(bad));
            assert!(
                matches!(end, ScanEnd::Corrupt(..)),
                "flip at {flip}: {end:?}"
            );
        }
    }

    /// A sink whose fsyncs the test completes by hand: each `sync` reports what it covers and
    /// blocks until the test sends on `release`.
    struct HandSink {
        written: Arc<StdMutex<Vec<i64>>>,
        synced_upto: usize,
        syncs: std_mpsc::Sender<Vec<i64>>,
        release: std_mpsc::Receiver<()>,
    }

    impl Sink for HandSink {
        fn write(&mut self, jobs: &[Vec<Record>]) -> Result<()> {
            let mut w = self.written.lock().unwrap();
            for r in jobs.iter().flatten() {
                if let Record::Fence { ledger_id } = r {
                    w.push(*ledger_id);
                }
            }
            Ok(())
        }
        fn sync(&mut self) -> Result<()> {
            let w = self.written.lock().unwrap().clone();
            let covered = w[self.synced_upto..].to_vec();
            self.synced_upto = w.len();
            self.syncs.send(covered).unwrap();
            self.release.recv().unwrap();
            Ok(())
        }
        fn publish(&mut self, _: Vec<Vec<Record>>) {}
        fn checkpoint(&mut self, _: bool) -> Result<()> {
            Ok(())
        }
    }

    fn resolved(c: &mut Commit) -> Option<Result<()>> {
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        match std::pin::Pin::new(c).poll(&mut cx) {
            std::task::Poll::Ready(r) => Some(r),
            std::task::Poll::Pending => None,
        }
    }

    fn wait_resolved(c: &mut Commit) -> Result<()> {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(r) = resolved(c) {
                return r;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "commit never resolved"
            );
            std::thread::yield_now();
        }
    }

    use std::future::Future;

    #[test]
    fn group_commit_acknowledges_only_after_the_covering_fsync_and_shares_it() {
        let (sync_tx, syncs) = std_mpsc::channel();
        let (release, release_rx) = std_mpsc::channel();
        let sink = HandSink {
            written: Arc::default(),
            synced_upto: 0,
            syncs: sync_tx,
            release: release_rx,
        };
        let gc = GroupCommit::start(sink, "test-journal").unwrap();
        let mut a = gc.submit(vec![fence(1)]);
        // The first fsync covers A alone and is held.
        assert_eq!(
            syncs.recv_timeout(Duration::from_secs(10)).unwrap(),
            vec![1]
        );
        let mut b = gc.submit(vec![fence(2)]);
        let mut c = gc.submit(vec![fence(3)]);
        assert!(
            resolved(&mut a).is_none(),
            "A acknowledged before its fsync returned"
        );
        release.send(()).unwrap();
        wait_resolved(&mut a).unwrap();
        // B and C arrived during the first fsync: they share the second.
        assert_eq!(
            syncs.recv_timeout(Duration::from_secs(10)).unwrap(),
            vec![2, 3]
        );
        assert!(
            resolved(&mut b).is_none(),
            "B acknowledged before its fsync"
        );
        assert!(
            resolved(&mut c).is_none(),
            "C acknowledged before its fsync"
        );
        release.send(()).unwrap();
        wait_resolved(&mut b).unwrap();
        wait_resolved(&mut c).unwrap();
        drop(release);
        gc.shutdown();
    }

    struct FailingSink {
        fail_write: bool,
    }

    impl Sink for FailingSink {
        fn write(&mut self, _: &[Vec<Record>]) -> Result<()> {
            if self.fail_write {
                self.fail_write = false;
                return Err(StorageError::DiskFull("test".into()));
            }
            Ok(())
        }
        fn sync(&mut self) -> Result<()> {
            Err(StorageError::io("fsync", std::io::Error::other("test")))
        }
        fn publish(&mut self, _: Vec<Vec<Record>>) {
            panic!("published after a failure");
        }
        fn checkpoint(&mut self, _: bool) -> Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_write_fails_its_round_and_a_failed_fsync_poisons() {
        let gc = GroupCommit::start(FailingSink { fail_write: true }, "test-journal").unwrap();
        let mut a = gc.submit(vec![fence(1)]);
        assert!(wait_resolved(&mut a).unwrap_err().is_disk_full());
        let mut b = gc.submit(vec![fence(2)]);
        assert!(matches!(
            wait_resolved(&mut b),
            Err(StorageError::Io { .. })
        ));
        let mut c = gc.submit(vec![fence(3)]);
        assert!(matches!(
            wait_resolved(&mut c),
            Err(StorageError::Poisoned(_))
        ));
        gc.shutdown();
    }
}
