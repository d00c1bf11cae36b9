//! The pure ZooKeeper server state machine: data tree, sessions, watches, request → txn → apply.
//!
//! No tokio, no `std::fs`, no `std::net`, no clocks: time is an argument (`now`, milliseconds
//! since the Unix epoch, supplied by the shell), and randomness (session passwords) is supplied
//! by the shell too. The shell drives it like raft-rs's `RawNode`:
//!
//! ```text
//! core.set_peer_ip(conn, "127.0.0.1".into());            // optional: ip identity (whoAmI)
//! core.connect(now, conn, connect_request, fresh_passwd); // handshake
//! core.handle(now, conn, xid, request);                   // a decoded request
//! core.tick(now);                                         // session expiry, container/TTL reaping
//! let ready = core.ready();                               // txns to log, messages, closes
//! wal.append(&ready.txns)?; wal.sync()?;                  // durable before any message is sent
//! send(ready.messages); close(ready.closes);              // in order
//! ```
//!
//! Every state change is a [`Txn`] applied by the one [`Core::apply`], used live and for
//! recovery (WAL replay). Requests are validated completely before anything changes. As in
//! Apache, a failed write is logged too (an error txn): it consumes a zxid and changes nothing
//! else. [`Core::snapshot`]/[`Core::restore`] checkpoint the state; [`Core::dump`] prints it.
//!
//! ZooKeeper 3.8 is the oracle, quirks included (each is commented where it is matched).
//!
//! # Layout
//! - [`path`]: `PathUtils.validatePath` and the parent/name split.
//! - [`tree`]: the data tree (compact shared node records, path index, interned ACLs), stats,
//!   ephemeral/container/TTL indexes, primitive mutations, copy-on-write captures.
//! - [`session`]: session ids, expiry rounding.
//! - [`watch`]: watch tables (one-shot, persistent, persistent-recursive).
//! - [`acl`]: ACL fix-up, digest ids, the permission check (ops and watch delivery).
//! - `prep`: request → [`TxnOp`] validation in Apache's check order, with a multi overlay.
//! - [`txn`]: [`Txn`]/[`TxnOp`] and their binary encoding.
//! - [`image`]: a core built from another server's persisted nodes and sessions (importing
//!   an Apache ZooKeeper data dir).
//! - `snapshot`: [`Core::snapshot_capture`] (cheap, then serialized off the caller's path),
//!   [`Core::snapshot`], [`Core::restore`], [`Core::dump`].
//! - `conn`: [`ConnId`] and what the core keeps per connection (session, auth ids, peer).
//! - `machine`: the `impl Core` blocks, one file per concern: `sessions` (handshake, expiry,
//!   disconnect), `reads`, `writes` (prep → txn, multi, failed writes), `watches` (addWatch,
//!   checkWatches, removeWatches, setWatches), `auth` (auth packets, sasl, whoAmI), `reaper`
//!   (containers and TTL nodes), `apply` (the one apply path and watch firing) and `snapshot`
//!   (capture, restore, dump). `machine/mod.rs` holds [`Core::handle`], a dispatch on the
//!   request type, and the helpers every file uses (replies, the live session).
//! - [`digest`]: Apache's tree digest (`DigestCalculator`), as the `hash` word reports it.
//! - `state`: the public types ([`Core`], [`Config`], [`Outbound`], [`Ready`], [`Stats`]).
//! - this file: the module list and the re-exports.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod acl;
mod conn;
pub mod digest;
pub mod image;
mod machine;
pub mod path;
mod prep;
pub mod session;
mod snapshot;
mod state;
pub mod tree;
pub mod two_threads;
pub mod txn;
pub mod watch;

pub use crate::conn::ConnId;
pub use crate::snapshot::{RestoreError, SnapshotCapture};
pub use crate::state::{Config, Core, Outbound, Ready, Stats};
pub use crate::txn::{Txn, TxnOp};
