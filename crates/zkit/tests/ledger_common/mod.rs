//! A small ledger cluster for the ledger tests: in-process bookies on real files (or memory),
//! each registered through its own ZooKeeper session, under a fresh metadata root on one of
//! the servers under test; and checks on what the bookies hold.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use zkit::ledger::{LedgerClient, LedgerOptions, ZkRegistrationManager};
use zkit::{Session, SessionOptions};
use zkit_bookie::storage::{FileStorageOptions, FsyncMode, MemoryStorage, Storage};
use zkit_bookie::{Bookie, BookieClient, BookieConfig, ClientOptions};
#[allow(unused_imports)] // not every test file waits
pub use zkit_testkit::eventually;

/// Bound for every wait.
pub const LIMIT: Duration = Duration::from_secs(30);

/// How a bookie stores.
#[derive(Clone)]
pub enum Store {
    /// Files under the cluster's temp dir.
    Files,
    /// Memory (its `set_full` simulates a full disk).
    Memory(Arc<MemoryStorage>),
}

/// One bookie of the cluster.
pub struct Node {
    pub bookie: Option<Bookie>,
    pub session: Option<Session>,
    pub port: u16,
    pub dir: PathBuf,
    pub store: Store,
}

/// Bookies and a client under one root.
pub struct Cluster {
    pub addr: String,
    pub root: String,
    pub session: Session,
    pub client: LedgerClient,
    pub nodes: Vec<Node>,
    pub tmp: tempfile::TempDir,
}

pub async fn session(addr: &str) -> Session {
    Session::connect(
        addr,
        SessionOptions::default().with_session_timeout(Duration::from_secs(4)),
    )
    .await
    .expect("session connects")
}

/// Options with short timeouts so failures show quickly.
pub fn options(root: &str) -> LedgerOptions {
    LedgerOptions {
        root: root.to_string(),
        request_timeout: Duration::from_secs(3),
        connect_timeout: Duration::from_secs(2),
        speculative_read_delay: Duration::from_millis(50),
        ..LedgerOptions::default()
    }
}

/// A bookie on `127.0.0.1:port` storing under `dir`: no fsync, no free-space limits.
pub fn config(dir: &std::path::Path, port: u16) -> BookieConfig {
    let mut c = BookieConfig::new(format!("127.0.0.1:{port}").parse().unwrap(), dir);
    c.storage = FileStorageOptions {
        fsync: FsyncMode::Never,
        ..FileStorageOptions::default()
    };
    c.min_free_bytes = 0;
    c.writable_free_bytes = 0;
    c
}

impl Cluster {
    /// `n` bookies on files.
    pub async fn start(addr: &str, n: usize) -> Cluster {
        Cluster::start_with(addr, vec![Store::Files; n]).await
    }

    /// One bookie per `stores` entry.
    pub async fn start_with(addr: &str, stores: Vec<Store>) -> Cluster {
        let root = format!("/ledgers-{}", uuid::Uuid::new_v4().simple());
        let session = session(addr).await;
        let client = LedgerClient::with_options(&session, options(&root)).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let mut c = Cluster {
            addr: addr.to_string(),
            root,
            session,
            client,
            nodes: Vec::new(),
            tmp,
        };
        for (i, store) in stores.into_iter().enumerate() {
            let dir = c.tmp.path().join(format!("bookie{i}"));
            c.nodes.push(Node {
                bookie: None,
                session: None,
                port: 0,
                dir,
                store,
            });
            c.start_bookie(i).await;
        }
        c
    }

    /// Starts (or restarts, on the same dir and port) bookie `i`.
    pub async fn start_bookie(&mut self, i: usize) {
        let s = session(&self.addr).await;
        let reg = Arc::new(ZkRegistrationManager::with_root(&s, &self.root));
        let node = &mut self.nodes[i];
        let b = match &node.store {
            Store::Files => Bookie::start(config(&node.dir, node.port), reg)
                .await
                .expect("bookie starts"),
            Store::Memory(m) => {
                let mut cfg =
                    BookieConfig::in_memory(format!("127.0.0.1:{}", node.port).parse().unwrap());
                cfg.min_free_bytes = 0;
                cfg.writable_free_bytes = 0;
                cfg.disk_check_interval = Duration::from_millis(50);
                Bookie::start_with_storage(cfg, Arc::clone(m) as Arc<dyn Storage>, reg)
                    .await
                    .expect("bookie starts")
            }
        };
        node.port = b.addr().port();
        node.bookie = Some(b);
        node.session = Some(s);
    }

    /// Bookie `i`'s id.
    pub fn id(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.nodes[i].port)
    }

    /// The index of bookie `id`.
    pub fn index_of(&self, id: &str) -> usize {
        (0..self.nodes.len())
            .find(|i| self.id(*i) == id)
            .unwrap_or_else(|| panic!("no bookie {id}"))
    }

    /// Crashes bookie `i`: stops serving without a checkpoint and ends its session (its
    /// registration goes, as a killed process's does once its session expires).
    pub async fn crash(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        if let Some(b) = node.bookie.take() {
            b.halt().await;
        }
        if let Some(s) = node.session.take() {
            s.close();
        }
    }

    /// A connection to bookie `i`.
    pub async fn bookie_client(&self, i: usize) -> BookieClient {
        BookieClient::connect(
            format!("127.0.0.1:{}", self.nodes[i].port).parse().unwrap(),
            ClientOptions::default(),
        )
        .await
        .expect("connect to bookie")
    }

    /// Stops everything.
    pub async fn stop(mut self) {
        self.client.close();
        for i in 0..self.nodes.len() {
            if let Some(b) = self.nodes[i].bookie.take() {
                b.stop().await;
            }
            if let Some(s) = self.nodes[i].session.take() {
                s.close();
            }
        }
        self.session.close();
    }
}

/// The payload of entry `i` in these tests.
pub fn payload(i: i64) -> bytes::Bytes {
    bytes::Bytes::from(format!("entry-{i:06}-{}", "x".repeat(40)))
}
