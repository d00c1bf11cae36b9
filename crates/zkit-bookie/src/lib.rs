//! zkit-bookie: a BookKeeper-style bookie (the storage server of zkit's replicated ledger),
//! its wire protocol and a client connection to it.
//!
//! # Layout
//! - [`protocol`]: the framed, versioned bookie protocol (pure: encode into `BytesMut`,
//!   check-then-parse decode) and, in [`protocol::entry`], the entry format and digests
//!   (CRC32C, HMAC-SHA256) shared with the ledger client. Byte by byte in
//!   `docs/BOOKIE-PROTOCOL.md`.
//! - [`core`]: the pure state machine: per-ledger state (master key, fenced flag, LAC, last
//!   entry) and the decision for every request. No I/O, no clock.
//! - [`storage`]: the [`storage::Storage`] trait with the file store (journal with group
//!   commit, entry logs, index, checkpoints, recovery) and an in-memory store.
//! - [`cookie`]: the cookie that ties data dirs to a bookie and its cluster, and the startup
//!   check that refuses wiped or swapped dirs.
//! - [`registration`] — [`registration::RegistrationManager`], how a bookie announces itself
//!   (available / read-only) and keeps its cookie in the metadata store; an in-memory
//!   implementation for tests (the ZooKeeper one lives in `zkit::ledger`).
//! - [`server`]: the tokio shell: listener, pipelined connections, disk monitor (read-only
//!   mode), checkpoints, registration, graceful stop.
//! - [`metrics`]: counters and histograms, served as Prometheus text on `/metrics`;
//!   [`histogram`]: the latency histogram they and the storage share.
//! - [`client`]: an async, pipelined connection to one bookie.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod client;
pub mod cookie;
pub mod core;
pub mod histogram;
pub mod metrics;
pub mod protocol;
pub mod registration;
pub mod server;
pub mod storage;

pub use client::{BookieClient, ClientError, ClientOptions};
pub use registration::{MemoryRegistration, RegistrationError, RegistrationManager};
pub use server::{Bookie, BookieConfig, BookieError};
