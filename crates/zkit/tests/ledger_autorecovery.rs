//! Auto-recovery against real bookies (in-process, on files) with the metadata on each server
//! under test: a bookie crashes and its data dir is wiped; the elected auditor marks its
//! ledgers under-replicated and the replication workers copy every fragment it held to the
//! other bookies, recovering the open ledger its dead writer left, until every entry has
//! `Qw` copies again and no metadata names the lost bookie.

mod common;
mod ledger_common;

use std::collections::BTreeSet;
use std::time::Duration;

use ledger_common::{eventually, payload, Cluster, LIMIT};
use zkit::ledger::auditor::{AutoRecovery, AutoRecoveryOptions};
use zkit::ledger::metadata::MetadataStore;
use zkit::ledger::schedule::write_set;
use zkit::ledger::{CreateOptions, LedgerState};
use zkit_bookie::protocol::entry::{DigestType, Digester};

const PW: &[u8] = b"pw";

/// Ledger options with this file's password and digest.
fn options(ensemble: usize, write_quorum: usize, ack_quorum: usize) -> CreateOptions {
    CreateOptions {
        ensemble,
        write_quorum,
        ack_quorum,
        password: PW.to_vec(),
        digest: DigestType::Crc32c,
    }
}

/// `count` closed ledgers of `entries` entries each ([`payload`] 0, 1, …); their ids.
/// Whether no ledger is marked under-replicated (a failed listing counts as not yet).
async fn no_marks(store: &MetadataStore) -> bool {
    store
        .list_underreplicated()
        .await
        .map(|v| v.is_empty())
        .unwrap_or(false)
}

async fn closed_ledgers(c: &Cluster, o: &CreateOptions, count: usize, entries: i64) -> Vec<i64> {
    let mut ids = Vec::new();
    for _ in 0..count {
        let w = c.client.create(o).await.unwrap();
        w.append_batch((0..entries).map(payload).collect())
            .await
            .unwrap();
        w.close().await.unwrap();
        ids.push(w.id());
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_bookies_ledgers_are_rereplicated_to_write_quorum() {
    for target in common::servers().await {
        let name = target.name;
        let mut c = Cluster::start(&target.addr, 5).await;
        let o = options(3, 2, 2);
        // Closed ledgers, and one left open by a writer that is gone.
        let mut ids = closed_ledgers(&c, &o, 4, 60).await;
        let open = c.client.create(&o).await.unwrap();
        open.append_batch((0..40).map(payload).collect())
            .await
            .unwrap();
        let open_id = open.id();
        let victim_id = open.metadata().ensembles[&0][0].clone();
        drop(open);
        ids.push(open_id);

        let opts = |i: usize| AutoRecoveryOptions {
            id: format!("ar{i}"),
            lost_bookie_delay: Duration::from_millis(500),
            check_interval: Duration::from_secs(5),
            open_ledger_grace: Duration::from_millis(500),
            worker_poll: Duration::from_secs(2),
            ..AutoRecoveryOptions::default()
        };
        // Two auto-recovery processes (sessions): one auditor between them.
        let s1 = ledger_common::session(&c.addr).await;
        let s2 = ledger_common::session(&c.addr).await;
        let l1 =
            zkit::ledger::LedgerClient::with_options(&s1, ledger_common::options(&c.root)).unwrap();
        let l2 =
            zkit::ledger::LedgerClient::with_options(&s2, ledger_common::options(&c.root)).unwrap();
        let a1 = AutoRecovery::start(&s1, &l1, opts(1)).await.unwrap();
        let a2 = AutoRecovery::start(&s2, &l2, opts(2)).await.unwrap();
        tokio::time::timeout(LIMIT, async {
            tokio::select! { r = a1.await_auditor() => r, r = a2.await_auditor() => r }
        })
        .await
        .expect("an auditor is elected")
        .unwrap();
        assert!(
            a1.is_auditor() ^ a2.is_auditor(),
            "{name}: exactly one auditor"
        );

        let victim = c.index_of(&victim_id);
        c.crash(victim).await;
        std::fs::remove_dir_all(&c.nodes[victim].dir).unwrap();

        let store = c.client.store().clone();
        eventually(
            "no metadata names the lost bookie and no mark is left",
            LIMIT,
            || {
                let store = store.clone();
                let ids = ids.clone();
                let victim_id = victim_id.clone();
                async move {
                    for id in &ids {
                        match store.read(*id).await {
                            Ok((m, _)) if m.bookies().contains(victim_id.as_str()) => return false,
                            Ok(_) => {}
                            Err(_) => return false,
                        }
                    }
                    no_marks(&store).await
                }
            },
        )
        .await;

        // Every entry is on every bookie of its write set, intact.
        let d = Digester::new(DigestType::Crc32c, PW);
        for id in &ids {
            let (m, _) = store.read(*id).await.unwrap();
            assert_eq!(m.state, LedgerState::Closed, "{name}: ledger {id}");
            let want_last = if *id == open_id { 39 } else { 59 };
            assert_eq!(
                m.last_entry_id, want_last,
                "{name}: ledger {id}: nothing lost"
            );
            let mut holders = BTreeSet::new();
            for e in 0..=m.last_entry_id {
                let ens = m.ensemble_for(e);
                for slot in write_set(e, ens.len(), m.write_quorum) {
                    let b = &ens[slot];
                    holders.insert(b.clone());
                    let bc = c.bookie_client(c.index_of(b)).await;
                    let raw = bc.read(*id, e, None).await.unwrap_or_else(|err| {
                        panic!("{name}: ledger {id} entry {e} not on {b}: {err}")
                    });
                    assert_eq!(d.verify(&raw, *id, e).unwrap().payload, payload(e));
                }
            }
            assert!(!holders.contains(&victim_id));
        }
        a1.stop().await;
        a2.stop().await;
        l1.close();
        l2.close();
        s1.close();
        s2.close();
        c.stop().await;
    }
}

/// A bookie comes back with its data gone but its cookie kept (so it starts, and is up): the
/// lost-bookie path sees nothing wrong, but the auditor's replicas check finds it short of its
/// fragments, and the workers copy them to another bookie until every entry has `Qw` copies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bookie_back_with_missing_data_is_found_and_its_fragments_rereplicated() {
    for target in common::servers().await {
        let name = target.name;
        let mut c = Cluster::start(&target.addr, 4).await;
        let o = options(3, 3, 2);
        let ids = closed_ledgers(&c, &o, 3, 50).await;
        let (m0, _) = c.client.store().read(ids[0]).await.unwrap();
        let victim_id = m0.ensembles[&0][0].clone();
        let victim = c.index_of(&victim_id);
        c.crash(victim).await;
        // Everything but the cookie (`current/VERSION`) goes.
        for f in std::fs::read_dir(c.nodes[victim].dir.join("current")).unwrap() {
            let f = f.unwrap();
            if f.file_name() != "VERSION" {
                std::fs::remove_file(f.path()).unwrap();
            }
        }
        c.start_bookie(victim).await;
        let bc = c.bookie_client(victim).await;
        assert!(bc.read(ids[0], 0, None).await.is_err(), "{name}: data gone");

        let s1 = ledger_common::session(&c.addr).await;
        let l1 =
            zkit::ledger::LedgerClient::with_options(&s1, ledger_common::options(&c.root)).unwrap();
        let a1 = AutoRecovery::start(
            &s1,
            &l1,
            AutoRecoveryOptions {
                id: "ar1".into(),
                lost_bookie_delay: Duration::from_millis(500),
                check_interval: Duration::from_millis(500),
                worker_poll: Duration::from_millis(500),
                ..AutoRecoveryOptions::default()
            },
        )
        .await
        .unwrap();

        // Every entry is on every bookie of its write set, intact.
        let d = Digester::new(DigestType::Crc32c, PW);
        let store = c.client.store().clone();
        for id in &ids {
            let id = *id;
            eventually(
                &format!("{name}: ledger {id} back to Qw copies"),
                LIMIT,
                || {
                    let store = store.clone();
                    let c = &c;
                    let d = d.clone();
                    async move {
                        let Ok((m, _)) = store.read(id).await else {
                            return false;
                        };
                        for e in 0..=m.last_entry_id {
                            let ens = m.ensemble_for(e);
                            for slot in write_set(e, ens.len(), m.write_quorum) {
                                let bc = c.bookie_client(c.index_of(&ens[slot])).await;
                                match bc.read(id, e, None).await {
                                    Ok(raw) => {
                                        assert_eq!(
                                            d.verify(&raw, id, e).unwrap().payload,
                                            payload(e)
                                        )
                                    }
                                    Err(_) => return false,
                                }
                            }
                        }
                        true
                    }
                },
            )
            .await;
        }
        eventually("no mark is left", LIMIT, || no_marks(&store)).await;
        a1.stop().await;
        l1.close();
        s1.close();
        c.stop().await;
    }
}
