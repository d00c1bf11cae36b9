//! The connection task: one tokio task per client that owns the socket, the session, the
//! pending requests and the watch registrations. [`crate::Client`] handles talk to it through
//! an unbounded channel of [`Command`]s; the task talks back through per-request oneshots,
//! watcher channels and the shared [`Shared`] state.
//!
//! What it does, as `ClientCnxn` does:
//! - **Connect**: hosts round-robin ([`crate::hosts::HostProvider`]), each attempt (TCP connect,
//!   TLS, ConnectRequest, ConnectResponse) bounded by the connect timeout; a random pause before
//!   each reconnect and a back-off after a full round. Only the ConnectRequest is written before
//!   its response (`ClientCnxnSocketNIO` holds the rest back, so that an expired session's
//!   close cannot race a write into an RST). Then auth packets, SetWatches and the requests that
//!   waited.
//! - **Serve**: requests are written as they arrive (pipelined); replies must come back in xid
//!   order (`Xid out of order` drops the connection); frames are processed strictly in arrival
//!   order on this one task, so a watch event reaches its watcher before any later reply
//!   completes. Pings after idle sending, the read timeout on idle receiving.
//! - **Lose the connection**: requests in flight (and those waiting for it) fail with
//!   ConnectionLoss, persistent watchers hear `Disconnected`, one-shot registrations are kept
//!   and re-registered, with the last zxid seen, on the next connection.
//! - **End**: on expiry (ConnectResponse timeOut ≤ 0), AuthFailed, or close, every request fails
//!   with the state's error and every watcher gets the terminal session event.
//!
//! # Files
//! - `handle`: what the client handles and the task exchange ([`Command`], [`Submit`],
//!   [`Reply`], the published [`Shared`] state, watcher channels, [`Config`]).
//! - `task`: the state machine ([`Task`]: connect, serve, reconnect or end) and how it ends.
//! - `connect`: connection attempts, the handshake, and what waits for a connection.
//! - `serve`: one connection's loop: socket reads and writes, pings, the read timeout and
//!   read-only probing.
//! - `write`: commands turned into frames (requests, auth, close).
//! - `read`: incoming frames matched to what is pending.
//! - `watches`: registering, firing, removing and re-registering (SetWatches) watches.

mod connect;
mod handle;
mod read;
mod serve;
mod task;
mod watches;
mod write;

pub(crate) use self::handle::{
    Command, Config, Reply, Shared, Submit, Unwatch, WatchIntent, WatcherEvents, WatcherReceiver,
};
pub(crate) use self::task::new_task;
