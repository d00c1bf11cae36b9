//! The ZooKeeper client protocol ("jute") as pure data and a pure codec.
//!
//! # Layout
//! - [`codec`]: checked big-endian reads ([`codec::Reader`]) and writes into `BytesMut`, the
//!   [`codec::Record`] trait every record implements, and [`codec::DecodeError`].
//! - [`frame`]: length-prefixed framing with a configurable limit (jute.maxbuffer) and the
//!   four-letter-word check for a fresh connection.
//! - [`op`]: [`OpCode`], [`ErrorCode`], special xids, create modes, permissions, watch types.
//! - [`records`]: every record of `zookeeper.jute` the client protocol uses, each with its
//!   [`Record`] impl and an inline round-trip test.
//! - [`request`]: a decoded client request ([`Request`]) from header + body.
//! - [`response`]: a server response body ([`Response`]), its encoding, and framed-reply helpers
//!   ([`response::encode_reply`], [`response::encode_notification`]).
//!
//! This crate does no I/O and never panics on input: every read is bounds-checked and
//! "not enough bytes yet" is `Ok(None)` at the framing layer.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod codec;
pub mod frame;
pub mod op;
pub mod records;
pub mod request;
pub mod response;

pub use codec::{DecodeError, Reader, Record};
pub use frame::{decode_frame, encode_frame, FrameError, DEFAULT_MAX_FRAME};
pub use op::{ErrorCode, OpCode};
pub use records::*;
pub use request::Request;
pub use response::Response;
