//! zkit-verify: Jepsen-style verification of zkit.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod checker;
pub mod history;
