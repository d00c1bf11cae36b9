//! The configuration service: a [`ConfigStore`] that writes and reads values
//! under a prefix, and a [`ConfigWatcher`] that streams every change of a key or of a whole
//! subtree, surviving connection loss and session expiry.
//!
//! # Layout
//! - [`view`]: the pure core: [`ConfigView`] decides, from what the watcher has already reported
//!   and from a fresh read, which [`ConfigChange`]s to report, so that a value never goes
//!   backwards and nothing is reported twice. No I/O.
//! - [`store`]: [`ConfigStore`], a key-value store without the classic exists-then-create
//!   race: `write` is one idempotent upsert (create, on `NodeExists` set).
//! - [`watcher`]: [`ConfigWatcher`], the async driver on persistent recursive watches (with a
//!   one-shot fallback for servers without `addWatch`).
//!
//! This module does not define a file format: `import`/`export` of TOML and JSON trees belong to
//! the CLI, which builds on [`flatten_tree`].

pub mod store;
pub mod view;
pub mod watcher;

pub use store::{flatten_tree, resolve_key, ConfigStore, Versioned};
pub use view::{ChangeKind, ConfigChange, ConfigView};
pub use watcher::{ConfigWatcher, ConfigWatcherOptions, WatchMode};
