//! Cross-database two-phase commit: two PostgreSQL databases as participants
//! ([`zkit::txn::PostgresResource`], `PREPARE TRANSACTION`), against Apache ZooKeeper and the
//! embedded zkit server. After commit both rows exist, after abort neither, also across a crash
//! of the coordinator between prepare and decision (with a participant restarted while its
//! transaction is prepared in PostgreSQL: in doubt, resolved from `pg_prepared_xacts`).
//!
//! PostgreSQL comes from `ZKIT_PG_URL` (`scripts/test` starts one with `scripts/postgres`);
//! without it the tests print `SKIP postgres: ZKIT_PG_URL not set`, except under CI.
#![cfg(feature = "postgres")]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::txn::RunningTxn;
use tokio::sync::mpsc;
use tokio_postgres::NoTls;
use zkit::txn::decide::Vote;
use zkit::txn::participant::Observer;
use zkit::txn::{
    Coordinator, Outcome, Participant, ParticipantEvent, PostgresResource, Recoverer, TxnOptions,
};
use zkit::Session;

fn pg_url() -> Option<String> {
    match std::env::var("ZKIT_PG_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url.trim().to_string()),
        _ if std::env::var_os("CI").is_some() => {
            panic!("ZKIT_PG_URL is not set but CI is: run the tests through scripts/test")
        }
        _ => {
            eprintln!("SKIP postgres: ZKIT_PG_URL not set");
            None
        }
    }
}

fn with_db(url: &str, db: &str) -> String {
    match url.rsplit_once('/') {
        Some((base, _)) if base.contains("://") && base.len() > "postgres://".len() => {
            format!("{base}/{db}")
        }
        _ => format!("{url} dbname={db}"),
    }
}

async fn pg(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.expect("postgres");
    tokio::spawn(connection);
    client
}

/// Two fresh databases, each with table `t(k text primary key)`; returns their URLs.
async fn two_databases(url: &str) -> [String; 2] {
    let admin = pg(url).await;
    let mut urls = Vec::new();
    for i in 1..=2 {
        let db = format!("zkit_txn_{}_{}", std::process::id(), uuid_suffix(i));
        admin
            .batch_execute(&format!("CREATE DATABASE {db}"))
            .await
            .expect("create database");
        let db_url = with_db(url, &db);
        pg(&db_url)
            .await
            .batch_execute("CREATE TABLE t (k text PRIMARY KEY)")
            .await
            .expect("create table");
        urls.push(db_url);
    }
    [urls[0].clone(), urls[1].clone()]
}

fn uuid_suffix(i: u32) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!("{}_{i}", N.fetch_add(1, Ordering::Relaxed))
}

async fn has_row(url: &str, k: &str) -> bool {
    pg(url)
        .await
        .query_opt("SELECT k FROM t WHERE k = $1", &[&k])
        .await
        .expect("select")
        .is_some()
}

async fn prepared_count(url: &str) -> i64 {
    pg(url)
        .await
        .query_one(
            "SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database()",
            &[],
        )
        .await
        .expect("pg_prepared_xacts")
        .get(0)
}

struct Dbs {
    addr: String,
    options: TxnOptions,
    urls: [String; 2],
    nodes: [Option<(Session, Participant)>; 2],
    events: mpsc::UnboundedReceiver<(String, ParticipantEvent)>,
    tx: mpsc::UnboundedSender<(String, ParticipantEvent)>,
}

const DB: [&str; 2] = ["DB1", "DB2"];

impl Dbs {
    async fn start(&mut self, i: usize) {
        let session = common::session(&self.addr, Duration::from_secs(10)).await;
        let resource = PostgresResource::connect(DB[i], &self.urls[i])
            .await
            .expect("postgres resource");
        let tx = self.tx.clone();
        let observer: Observer = Arc::new(move |name, event| {
            let _ = tx.send((name.to_string(), event.clone()));
        });
        let p = Participant::start(
            &session,
            &self.options,
            DB[i],
            Arc::new(resource),
            Some(observer),
        )
        .expect("participant");
        self.nodes[i] = Some((session, p));
    }

    fn kill(&mut self, i: usize) {
        if let Some((session, p)) = self.nodes[i].take() {
            p.stop();
            drop(p);
            session.close();
        }
    }

    async fn expect(
        &mut self,
        want: impl Fn(&str, &ParticipantEvent) -> bool,
        what: &str,
    ) -> ParticipantEvent {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            match tokio::time::timeout_at(deadline, self.events.recv()).await {
                Ok(Some((name, event))) if want(&name, &event) => return event,
                Ok(Some(_)) => {}
                _ => panic!("timed out waiting for {what}"),
            }
        }
    }

    /// Waits until participant `name` applied the decision on `txid`.
    async fn expect_applied(&mut self, name: &str, txid: &str, what: &str) {
        self.expect(
            |n, e| n == name && matches!(e, ParticipantEvent::Applied { txid: t, .. } if t == txid),
            what,
        )
        .await;
    }
}

/// A payload inserting row `k` into table `t` of both databases.
fn insert_into_both(k: &str) -> Vec<u8> {
    format!(r#"{{"DB1": "INSERT INTO t VALUES ('{k}')", "DB2": "INSERT INTO t VALUES ('{k}')"}}"#)
        .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_databases_commit_abort_and_survive_a_coordinator_crash() {
    let Some(url) = pg_url() else { return };
    for target in common::servers().await {
        let root = zkit_testkit::unique_path("txn-pg");
        let options = TxnOptions {
            vote_timeout: Duration::from_secs(2),
            ack_timeout: Duration::from_secs(5),
            recovery_grace: Duration::from_millis(200),
            ..TxnOptions::with_root(&root)
        };
        let urls = two_databases(&url).await;
        let (tx, events) = mpsc::unbounded_channel();
        let mut dbs = Dbs {
            addr: target.addr.clone(),
            options: options.clone(),
            urls: urls.clone(),
            nodes: [None, None],
            events,
            tx,
        };
        dbs.start(0).await;
        dbs.start(1).await;
        for _ in 0..2 {
            dbs.expect(|_, e| matches!(e, ParticipantEvent::Ready), "ready")
                .await;
        }
        let session = common::session(&target.addr, Duration::from_secs(10)).await;
        let coordinator = Coordinator::new(&session, options.clone()).expect("coordinator");

        // Commit: both rows.
        let outcome = coordinator
            .begin(&DB, &insert_into_both("a"))
            .expect("begin")
            .commit()
            .await;
        assert_eq!(outcome, Ok(Outcome::Committed), "{}", target.name);
        assert!(has_row(&urls[0], "a").await && has_row(&urls[1], "a").await);

        // Abort: DB2's insert violates the primary key, so DB2 votes no; DB1's prepared insert
        // is rolled back.
        let payload =
            br#"{"DB1": "INSERT INTO t VALUES ('b')", "DB2": "INSERT INTO t VALUES ('a')"}"#;
        let outcome = coordinator
            .begin(&DB, payload)
            .expect("begin")
            .commit()
            .await;
        assert!(
            matches!(outcome, Ok(Outcome::Aborted(ref r)) if r.contains("DB2")),
            "{outcome:?}"
        );
        assert!(!has_row(&urls[0], "b").await && !has_row(&urls[1], "b").await);
        assert_eq!(prepared_count(&urls[0]).await, 0);

        // Coordinator crash between prepare and decision; DB1's participant also crashes while
        // its transaction is prepared in PostgreSQL. The recoverer commits; DB1, restarted,
        // finds the transaction in pg_prepared_xacts and commits it.
        let recoverer_session = common::session(&target.addr, Duration::from_secs(10)).await;
        let _recoverer =
            Recoverer::start(&recoverer_session, &options, "r", None).expect("recoverer");
        let crashing = RunningTxn::begin(
            &target.addr,
            Duration::from_secs(10),
            TxnOptions {
                decision_delay: Duration::from_secs(60),
                vote_timeout: Duration::from_secs(60),
                ..options.clone()
            },
            &DB,
            &insert_into_both("c"),
        )
        .await;
        let txid = crashing.txid.clone();
        for _ in 0..2 {
            dbs.expect(
                |_, e| matches!(e, ParticipantEvent::Voted { vote: Vote::Yes, txid: t } if *t == txid),
                "yes votes",
            )
            .await;
        }
        dbs.kill(0);
        assert_eq!(
            prepared_count(&urls[0]).await,
            1,
            "DB1 holds a prepared transaction"
        );
        crashing.crash();
        dbs.expect_applied("DB2", &txid, "DB2 applied").await;
        assert!(has_row(&urls[1], "c").await);
        dbs.start(0).await;
        let started = dbs
            .expect(
                |n, e| n == "DB1" && matches!(e, ParticipantEvent::Started { .. }),
                "DB1 restarted",
            )
            .await;
        assert_eq!(
            started,
            ParticipantEvent::Started {
                in_doubt: vec![txid.clone()]
            }
        );
        dbs.expect(
            |n, e| n == "DB1" && matches!(e, ParticipantEvent::Ready),
            "DB1 ready",
        )
        .await;
        assert!(
            has_row(&urls[0], "c").await,
            "{}: DB1 committed after restart",
            target.name
        );
        assert_eq!(prepared_count(&urls[0]).await, 0);

        // Coordinator crash with a vote missing (DB2 down): presumed abort at the deadline
        // rolls back DB1's prepared insert.
        dbs.kill(1);
        let crashing = RunningTxn::begin(
            &target.addr,
            Duration::from_secs(10),
            options.clone(),
            &DB,
            &insert_into_both("d"),
        )
        .await;
        let txid = crashing.txid.clone();
        dbs.expect(
            |n, e| n == "DB1" && matches!(e, ParticipantEvent::Voted { txid: t, .. } if *t == txid),
            "DB1 voted",
        )
        .await;
        crashing.crash();
        dbs.expect_applied("DB1", &txid, "DB1 applied abort").await;
        assert!(!has_row(&urls[0], "d").await);
        assert_eq!(prepared_count(&urls[0]).await, 0);
        dbs.start(1).await;
        dbs.expect_applied("DB2", &txid, "DB2 applied abort when back")
            .await;
        assert!(!has_row(&urls[1], "d").await);
        dbs.kill(0);
        dbs.kill(1);
    }
}
