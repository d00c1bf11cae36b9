//! The ledger client against real bookies (in-process, on real files, over TCP) with the
//! metadata on each server under test (the embedded zkit server, and Apache ZooKeeper when
//! configured): writing and reading, the errors of bad input, recovery of a ledger whose
//! writer died (fencing it, agreeing between two recoverers), a bookie failing mid-write
//! (ensemble change) and coming back, a full disk, a flipped byte, and a tailing reader.

mod common;
mod ledger_common;

use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use ledger_common::{eventually, payload, Cluster, Store, LIMIT};
use zkit::ledger::{CreateOptions, LedgerClient, LedgerError, LedgerState};
use zkit_bookie::protocol::entry::{master_key, DigestType, Digester, EntryHeader};
use zkit_bookie::storage::MemoryStorage;

const PW: &[u8] = b"secret";

fn opts(e: usize, qw: usize, qa: usize) -> CreateOptions {
    CreateOptions {
        ensemble: e,
        write_quorum: qw,
        ack_quorum: qa,
        password: PW.to_vec(),
        digest: DigestType::Crc32c,
    }
}

async fn read_all(client: &LedgerClient, id: i64) -> Vec<Bytes> {
    let r = client.open(id, PW).await.expect("open");
    let last = r.last_add_confirmed();
    if last < 0 {
        return Vec::new();
    }
    r.read(0, last)
        .await
        .expect("read")
        .into_iter()
        .map(|e| e.payload)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_read_close_list_delete() {
    for target in common::servers().await {
        let name = target.name;
        let c = Cluster::start(&target.addr, 3).await;
        for digest in [DigestType::Crc32c, DigestType::HmacSha256] {
            let o = CreateOptions {
                digest,
                ..opts(3, 2, 2)
            };
            let w = c.client.create(&o).await.unwrap();
            let id = w.id();
            // Pipelined: submit all, then wait in order.
            let mut pending = Vec::new();
            for i in 0..200 {
                pending.push(w.submit(payload(i)).await.unwrap());
            }
            for (i, p) in pending.into_iter().enumerate() {
                assert_eq!(p.await.unwrap(), i as i64, "{name}: acks in entry order");
            }
            let batch = w
                .append_batch((200..210).map(payload).collect())
                .await
                .unwrap();
            assert_eq!(batch, 200..=209);
            let closed = w.close().await.unwrap();
            assert_eq!(closed.state, LedgerState::Closed);
            assert_eq!(closed.last_entry_id, 209);
            let want_len: u64 = (0..210).map(|i| payload(i).len() as u64).sum();
            assert_eq!(closed.length, want_len, "{name}");

            let got = read_all(&c.client, id).await;
            assert_eq!(
                got,
                (0..210).map(payload).collect::<Vec<_>>(),
                "{name} {digest:?}"
            );
            // A range in the middle, and one past the end.
            let r = c.client.open(id, PW).await.unwrap();
            let mid = r.read(50, 59).await.unwrap();
            assert_eq!(mid.len(), 10);
            assert_eq!(mid[0].entry_id, 50);
            assert_eq!(
                mid[9].length,
                (0..60).map(|i| payload(i).len() as u64).sum::<u64>()
            );
            assert!(matches!(
                r.read(205, 210).await,
                Err(LedgerError::BeyondLastEntry { last: 209, .. })
            ));

            // Striping: every bookie of the ensemble holds exactly its write sets' entries.
            let ens = closed.ensembles[&0].clone();
            for (slot, b) in ens.iter().enumerate() {
                let bc = c.bookie_client(c.index_of(b)).await;
                for e in 0..210i64 {
                    let held = bc.read(id, e, None).await.is_ok();
                    let should = (e as usize % 3 == slot) || ((e as usize + 1) % 3 == slot);
                    assert_eq!(held, should, "{name}: entry {e} on slot {slot}");
                }
            }

            // The node is in BookKeeper's layout.
            let path = format!(
                "{}/{:02}/{:04}/L{:04}",
                c.root,
                id / 100_000_000,
                id / 10_000 % 10_000,
                id % 10_000
            );
            let (data, _) = c.session.client().get_data(&path).await.unwrap();
            let text = String::from_utf8(data).unwrap();
            assert!(text.contains("\"state\":\"CLOSED\""), "{name}: {text}");
            assert!(
                !text.contains("secret"),
                "{name}: the password is not stored"
            );

            assert!(c.client.list().await.unwrap().contains(&id));
            assert_eq!(c.client.info(id).await.unwrap().path, path);
            c.client.delete(id).await.unwrap();
            assert!(!c.client.list().await.unwrap().contains(&id));
            assert_eq!(
                c.client.open(id, PW).await.err(),
                Some(LedgerError::NoSuchLedger(id))
            );
        }
        c.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_clearly_and_nothing_is_lost() {
    for target in common::servers().await {
        let name = target.name;
        let c = Cluster::start(&target.addr, 3).await;
        let err = c.client.create(&opts(2, 3, 2)).await.unwrap_err();
        assert!(
            matches!(&err, LedgerError::InvalidQuorum(m) if m.contains("E >= Qw")),
            "{name}: {err}"
        );
        let err = c.client.create(&opts(3, 2, 3)).await.unwrap_err();
        assert!(
            matches!(&err, LedgerError::InvalidQuorum(m) if m.contains("Qw >= Qa")),
            "{name}: {err}"
        );
        assert!(matches!(
            c.client.create(&opts(3, 1, 0)).await,
            Err(LedgerError::InvalidQuorum(_))
        ));
        assert_eq!(
            c.client.create(&opts(4, 2, 2)).await.err(),
            Some(LedgerError::NotEnoughBookies {
                needed: 4,
                available: 3
            }),
            "{name}"
        );

        let w = c.client.create(&opts(3, 2, 2)).await.unwrap();
        let id = w.id();
        for i in 0..3 {
            w.append(payload(i)).await.unwrap();
        }
        let max = c.client.options().max_entry_size;
        assert_eq!(
            w.append(Bytes::from(vec![0u8; max + 1])).await,
            Err(LedgerError::EntryTooLarge { size: max + 1, max })
        );
        assert!(w.submit_batch(Vec::new()).await.is_err());
        // The writer goes on after refused input.
        w.append(payload(3)).await.unwrap();
        w.close().await.unwrap();
        assert_eq!(
            w.append(payload(4)).await,
            Err(LedgerError::LedgerClosed(id)),
            "{name}: add to a closed ledger"
        );
        assert_eq!(w.close().await.err(), Some(LedgerError::LedgerClosed(id)));

        assert_eq!(
            c.client.open(id, b"wrong").await.err(),
            Some(LedgerError::WrongPassword(id)),
            "{name}"
        );
        assert_eq!(
            c.client.open_no_recovery(id, b"wrong").await.err(),
            Some(LedgerError::WrongPassword(id))
        );
        let unknown = 1_999_999_999;
        assert_eq!(
            c.client.open(unknown, PW).await.err(),
            Some(LedgerError::NoSuchLedger(unknown))
        );
        assert_eq!(
            c.client.delete(unknown).await.err(),
            Some(LedgerError::NoSuchLedger(unknown))
        );
        assert_eq!(
            c.client.open(-3, PW).await.err(),
            Some(LedgerError::NoSuchLedger(-3))
        );
        // Nothing lost by any of it.
        assert_eq!(
            read_all(&c.client, id).await,
            (0..4).map(payload).collect::<Vec<_>>(),
            "{name}"
        );
        c.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_keeps_every_acknowledged_entry_agrees_and_fences_the_writer() {
    for target in common::servers().await {
        let name = target.name;
        let c = Cluster::start(&target.addr, 3).await;
        let w = c.client.create(&opts(3, 2, 2)).await.unwrap();
        let id = w.id();
        for i in 0..20 {
            w.append(payload(i)).await.unwrap();
        }
        // The writer "dies" mid-write: entry 20 reached one of its two bookies, entry 22 both,
        // entry 21 none.
        let m = w.metadata();
        let ens = m.ensembles[&0].clone();
        let d = Digester::new(DigestType::Crc32c, PW);
        let len_to = |e: i64| (0..=e).map(|i| payload(i).len() as i64).sum::<i64>();
        let raw = |e: i64| {
            d.encode(
                EntryHeader {
                    ledger_id: id,
                    entry_id: e,
                    // A pipelining writer's LAC lags: entry 19, acknowledged, is past every
                    // LAC the bookies saw (18), so only reading forward finds it.
                    lac: 17,
                    length: len_to(e),
                },
                &payload(e),
            )
        };
        let key = master_key(PW);
        let b20 = c.bookie_client(c.index_of(&ens[20 % 3])).await;
        b20.add(id, 20, key, false, raw(20)).await.unwrap();
        for slot in [22 % 3, (22 + 1) % 3] {
            let b = c.bookie_client(c.index_of(&ens[slot])).await;
            b.add(id, 22, key, false, raw(22)).await.unwrap();
        }

        // Two recoverers at once, each with its own session.
        let s1 = ledger_common::session(&c.addr).await;
        let s2 = ledger_common::session(&c.addr).await;
        let c1 = LedgerClient::with_options(&s1, ledger_common::options(&c.root)).unwrap();
        let c2 = LedgerClient::with_options(&s2, ledger_common::options(&c.root)).unwrap();
        let (r1, r2) = tokio::join!(c1.open(id, PW), c2.open(id, PW));
        let (r1, r2) = (r1.unwrap(), r2.unwrap());
        let last = r1.last_add_confirmed();
        assert_eq!(last, r2.last_add_confirmed(), "{name}: recoverers agree");
        assert!(
            last == 19 || last == 20,
            "{name}: recovered to {last}: 0..=19 acknowledged, 21 missing everywhere"
        );
        let m1 = r1.metadata();
        assert_eq!(m1.state, LedgerState::Closed);
        assert_eq!(m1.length as i64, len_to(last), "{name}");
        let a = r1.read(0, last).await.unwrap();
        let b = r2.read(0, last).await.unwrap();
        assert_eq!(a, b);
        let payloads: Vec<Bytes> = a.into_iter().map(|e| e.payload).collect();
        assert_eq!(payloads, (0..=last).map(payload).collect::<Vec<_>>());
        // Re-replicated: every recovered entry is on both of its bookies.
        for e in 0..=last {
            for slot in [e as usize % 3, (e as usize + 1) % 3] {
                let b = c.bookie_client(c.index_of(&ens[slot])).await;
                assert!(
                    b.read(id, e, None).await.is_ok(),
                    "{name}: entry {e} slot {slot}"
                );
            }
        }

        // The old writer is fenced: nothing it adds now is acknowledged.
        assert_eq!(
            w.append(payload(99)).await,
            Err(LedgerError::Fenced(id)),
            "{name}"
        );
        assert_eq!(w.close().await.err(), Some(LedgerError::Fenced(id)));
        // And a third open reads the same.
        assert_eq!(read_all(&c.client, id).await, payloads);
        s1.close();
        s2.close();
        c.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_bookie_is_replaced_and_its_entries_come_back_with_it() {
    for target in common::servers().await {
        let name = target.name;
        let mut c = Cluster::start(&target.addr, 4).await;
        let w = c.client.create(&opts(3, 2, 2)).await.unwrap();
        let id = w.id();
        let first = w.metadata().ensembles[&0].clone();
        let mut pending = Vec::new();
        for i in 0..300 {
            pending.push(w.submit(payload(i)).await.unwrap());
        }
        // Wait for some acknowledgements, then crash a bookie of the ensemble mid-stream.
        eventually("first acknowledgements", LIMIT, || async {
            w.last_add_confirmed() >= 100
        })
        .await;
        let victim = c.index_of(&first[1]);
        c.crash(victim).await;
        for i in 300..600 {
            pending.push(w.submit(payload(i)).await.unwrap());
        }
        for (i, p) in pending.into_iter().enumerate() {
            assert_eq!(p.await, Ok(i as i64), "{name}: entry {i}");
        }
        let closed = w.close().await.unwrap();
        assert!(
            closed.ensembles.len() >= 2,
            "{name}: {:?}",
            closed.ensembles
        );
        let (_, last_ens) = closed.last_ensemble();
        assert!(
            !last_ens.contains(&first[1]),
            "{name}: failed bookie replaced"
        );
        assert_eq!(
            read_all(&c.client, id).await,
            (0..600).map(payload).collect::<Vec<_>>(),
            "{name}: nothing acknowledged lost"
        );

        // Restarted on its data, the bookie serves its entries again: with the other bookies
        // of the first fragment down, the entries it held are still read.
        c.start_bookie(victim).await;
        let (_, second_key) = (0, *closed.ensembles.keys().nth(1).unwrap());
        for i in [0, 2] {
            let other = c.index_of(&first[i]);
            c.crash(other).await;
        }
        let r = c.client.open(id, PW).await.unwrap();
        for e in 0..second_key {
            let slots = [e as usize % 3, (e as usize + 1) % 3];
            if slots.contains(&1) {
                assert_eq!(
                    r.read_entry(e).await.unwrap().payload,
                    payload(e),
                    "{name}: {e}"
                );
            } else {
                assert!(
                    r.read_entry(e).await.is_err(),
                    "{name}: both replicas of {e} are down"
                );
            }
        }
        c.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_makes_a_bookie_read_only_and_writes_move_on() {
    for target in common::servers().await {
        let name = target.name;
        let stores: Vec<Store> = (0..4)
            .map(|_| Store::Memory(std::sync::Arc::new(MemoryStorage::new())))
            .collect();
        let c = Cluster::start_with(&target.addr, stores.clone()).await;
        let w = c.client.create(&opts(3, 2, 2)).await.unwrap();
        let id = w.id();
        for i in 0..50 {
            w.append(payload(i)).await.unwrap();
        }
        let full_id = w.metadata().ensembles[&0][0].clone();
        let full = c.index_of(&full_id);
        let Store::Memory(m) = &stores[full] else {
            unreachable!()
        };
        m.set_full(true);
        for i in 50..150 {
            assert_eq!(w.append(payload(i)).await, Ok(i), "{name}");
        }
        let meta = w.close().await.unwrap();
        assert!(
            !meta.last_ensemble().1.contains(&full_id),
            "{name}: {meta:?}"
        );
        assert_eq!(
            read_all(&c.client, id).await,
            (0..150).map(payload).collect::<Vec<_>>()
        );
        m.set_full(false);
        c.stop().await;
    }
}

/// Flips one byte of `needle` in every file under `dir` that holds it; returns how many.
fn flip_on_disk(dir: &std::path::Path, needle: &[u8]) -> usize {
    let mut flipped = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let mut data = std::fs::read(&p).unwrap();
            let mut changed = false;
            let mut at = 0;
            while let Some(pos) = data[at..].windows(needle.len()).position(|w| w == needle) {
                data[at + pos + 3] ^= 0x20;
                at += pos + needle.len();
                changed = true;
            }
            if changed {
                use std::os::unix::fs::FileExt;
                let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
                f.write_all_at(&data, 0).unwrap();
                flipped += 1;
            }
        }
    }
    flipped
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_is_caught_by_the_digest() {
    for target in common::servers().await {
        let name = target.name;
        let c = Cluster::start(&target.addr, 3).await;
        let meta = c
            .client
            .write_all(&opts(3, 2, 2), (0..10).map(payload).collect())
            .await
            .unwrap();
        let id = c.client.list().await.unwrap().into_iter().max().unwrap();
        let ens = meta.ensembles[&0].clone();
        // Entry 4 lives on slots 1 and 2. Corrupt it on slot 1: read from slot 2.
        let first = c.index_of(&ens[1]);
        assert!(flip_on_disk(&c.nodes[first].dir, &payload(4)) > 0, "{name}");
        let r = c.client.open(id, PW).await.unwrap();
        assert_eq!(r.read_entry(4).await.unwrap().payload, payload(4), "{name}");
        // Corrupt on both: a clear error, not bad data.
        let second = c.index_of(&ens[2]);
        assert!(flip_on_disk(&c.nodes[second].dir, &payload(4)) > 0);
        match r.read_entry(4).await {
            Err(LedgerError::Corrupt(m)) => assert!(m.contains("digest"), "{name}: {m}"),
            other => panic!("{name}: {other:?}"),
        }
        // The others are fine.
        assert_eq!(r.read(5, 9).await.unwrap().len(), 5);
        c.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tailing_reader_follows_the_writer_to_the_close() {
    for target in common::servers().await {
        let name = target.name;
        let c = Cluster::start(&target.addr, 3).await;
        let w = c.client.create(&opts(3, 2, 2)).await.unwrap();
        let id = w.id();
        w.append(payload(0)).await.unwrap();
        let reader = c.client.open_no_recovery(id, PW).await.unwrap();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let follower = tokio::spawn(async move {
            let mut s = std::pin::pin!(reader.follow(0, Duration::from_millis(300)));
            while let Some(e) = s.next().await {
                tx.send(e.expect("follow").payload).unwrap();
            }
        });
        let mut seen = Vec::new();
        for i in 1..50 {
            w.append(payload(i)).await.unwrap();
            // Entry i carries LAC i-1: the reader gets entry i-1 now, without any close.
            let got = tokio::time::timeout(LIMIT, rx.recv())
                .await
                .unwrap_or_else(|_| panic!("{name}: entry {} not seen", i - 1))
                .unwrap();
            seen.push(got);
        }
        assert_eq!(seen, (0..49).map(payload).collect::<Vec<_>>());
        // The writer is undisturbed by the reader.
        let meta = w.close().await.unwrap();
        assert_eq!(meta.last_entry_id, 49);
        let last = tokio::time::timeout(LIMIT, rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(last, payload(49), "{name}: the last entry after the close");
        tokio::time::timeout(LIMIT, follower)
            .await
            .expect("follow ends after the close")
            .unwrap();
        c.stop().await;
    }
}
