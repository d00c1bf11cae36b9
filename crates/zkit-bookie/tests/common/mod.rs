//! Helpers shared by the bookie's black-box tests.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use zkit_bookie::protocol::entry::{master_key, DigestType, Digester, EntryHeader, MasterKey};
use zkit_bookie::storage::{MemoryStorage, Record, Storage};
use zkit_bookie::{Bookie, BookieClient, BookieConfig, ClientOptions, MemoryRegistration};

/// Bound for every wait in these tests.
pub const WAIT: Duration = Duration::from_secs(20);

/// Loopback, port 0.
pub fn any_port() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

/// The password every test ledger uses.
pub const PASSWORD: &[u8] = b"secret";

/// The key for [`PASSWORD`].
pub fn key() -> MasterKey {
    master_key(PASSWORD)
}

/// Entry `entry_id` of `ledger_id` with a payload that tells them apart.
pub fn entry(ledger_id: i64, entry_id: i64) -> Bytes {
    let payload = format!("ledger {ledger_id} entry {entry_id} ").repeat(3);
    Digester::new(DigestType::Crc32c, PASSWORD).encode(
        EntryHeader {
            ledger_id,
            entry_id,
            lac: entry_id - 1,
            length: 0,
        },
        payload.as_bytes(),
    )
}

/// Entry `entry_id` of `ledger_id` as the storage tests write it: `payload_len` bytes that
/// depend on both ids, the length field counting `payload_len` per entry so far.
pub fn sized_entry(ledger_id: i64, entry_id: i64, payload_len: usize) -> Bytes {
    let payload: Vec<u8> = (0..payload_len)
        .map(|i| (i as i64 * 7 + entry_id * 13 + ledger_id) as u8)
        .collect();
    Digester::new(DigestType::Crc32c, b"pw").encode(
        EntryHeader {
            ledger_id,
            entry_id,
            lac: entry_id - 1,
            length: (entry_id + 1) * payload_len as i64,
        },
        &payload,
    )
}

/// The journal record that adds [`sized_entry`]`(ledger_id, entry_id, payload_len)`.
pub fn add_record(ledger_id: i64, entry_id: i64, payload_len: usize) -> Record {
    Record::Add {
        ledger_id,
        entry_id,
        lac: entry_id - 1,
        entry: sized_entry(ledger_id, entry_id, payload_len),
    }
}

/// The journal record that sets `ledger_id`'s master key (32 bytes of the id's low byte).
pub fn key_record(ledger_id: i64) -> Record {
    Record::Key {
        ledger_id,
        master_key: [ledger_id as u8; 32],
    }
}

/// A bookie on in-memory storage and registration.
pub async fn memory_bookie(
    config: impl FnOnce(&mut BookieConfig),
) -> (Bookie, Arc<MemoryStorage>, Arc<MemoryRegistration>) {
    let storage = Arc::new(MemoryStorage::new());
    let reg = Arc::new(MemoryRegistration::new());
    let mut cfg = BookieConfig::in_memory(any_port());
    cfg.min_free_bytes = 0;
    cfg.writable_free_bytes = 0;
    config(&mut cfg);
    let b = Bookie::start_with_storage(
        cfg,
        Arc::clone(&storage) as Arc<dyn Storage>,
        Arc::clone(&reg) as _,
    )
    .await
    .expect("start bookie");
    (b, storage, reg)
}

/// A client to `addr`.
pub async fn client(addr: SocketAddr) -> BookieClient {
    BookieClient::connect(addr, ClientOptions::default())
        .await
        .expect("connect")
}

/// Waits (bounded) until `f` is true.
pub async fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !f() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
