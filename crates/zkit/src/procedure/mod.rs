//! HBase's distributed two-phase procedure (`org.apache.hadoop.hbase.procedure`) over ZooKeeper:
//! a [`Coordinator`] runs a named procedure across [`Member`]s, each of which builds a
//! [`Subprocedure`] that acquires a barrier, runs inside it and reports a result; any failure
//! aborts the procedure everywhere and every member that took part runs `cleanup(error)`.
//!
//! # Layout
//! - [`decide`]: the pure decision core ("given these znodes, what next?"), unit-tested.
//! - [`layout`]: znode paths, payload formats, name checks (pure).
//! - [`coordinator`]: [`Coordinator::run`] and [`Coordinator::recover`].
//! - [`member`]: [`Member::start`], the [`SubprocedureFactory`] / [`Subprocedure`] traits.
//!
//! # Znodes
//! Under `<base>/<signature>` (HBase's `ZKProcedureUtil` layout, plus two zkit directories):
//!
//! | path | kind | data |
//! |---|---|---|
//! | `acquired/<instance>` | persistent, by the coordinator | one JSON line `{"v":1,"members":[…],"timeout_ms":N}`, `\n`, then the raw argument bytes |
//! | `acquired/<instance>/<member>` | persistent, by a member after `acquire_barrier` | empty |
//! | `reached/<instance>` | persistent, by the coordinator once all expected members acquired | empty |
//! | `reached/<instance>/<member>` | persistent, by a member after `inside_barrier` | the result bytes, raw |
//! | `abort/<instance>` | persistent, by whoever aborts (first writer wins) | JSON `{"source":"<member>" or "coordinator","message":"…"}` |
//! | `members/<member>` | **ephemeral**, zkit: one per live member | empty |
//! | `running/<instance>` | **ephemeral**, zkit: the coordinator that owns the instance | empty |
//!
//! Data without the JSON header (e.g. written by HBase) is read as arguments for every member;
//! undecodable abort data becomes an abort from source `unknown`.
//!
//! # Beyond HBase
//! - Abort propagates both ways: the coordinator's timeout or cancellation writes `abort/…`, and
//!   members run `cleanup` (HBase never wired coordinator-side abort to members).
//! - An expected member whose `members/<member>` node disappears (session closed or expired,
//!   process killed) aborts the procedure at once, named as the failing member; HBase only times
//!   out. Expected members must be registered when `run` starts. Unexpected members are ignored.
//! - `running/<instance>` makes instance names unique per signature: a second `run` of a live
//!   instance fails with [`ProcedureError::DuplicateInstance`].
//! - Cleanup first makes sure `reached/<instance>` (completed) or `abort/<instance>` (aborted)
//!   exists, so nobody waiting on them hangs (HBASE-13885), then deletes the subtrees, retrying
//!   `NotEmpty` when a member adds a child meanwhile. Members never create parents, and a
//!   member's abort is a `multi` with a check on `acquired/<instance>`, so nothing is re-created
//!   behind the cleanup.
//! - A restarted coordinator ([`Coordinator::recover`]) finds instances whose owner is gone: it
//!   finishes those whose barrier was released (members may already have committed) and aborts
//!   the others, instead of wiping everything on start as HBase does.
//! - Members handle `reached/<instance>` appearing before their own acquire finished (an
//!   ordering HBase leaves as a TODO) and never run a completed instance twice (HBASE-29381).
//!
//! All waiting is on watches (children of `acquired/<instance>`, `reached/<instance>` and
//! `members/`, existence of `reached/<instance>`, `abort/<instance>`), never on polling.

pub mod coordinator;
pub mod decide;
pub mod layout;
pub mod member;
mod tree;

pub use coordinator::{Coordinator, Recovered};
pub use decide::{AbortReason, COORDINATOR};
pub use member::{Member, MemberHandle, Subprocedure, SubprocedureFactory};

/// The default base path of procedure znodes.
pub const DEFAULT_BASE: &str = "/zkit/procedure";

/// Errors of the procedure framework.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ProcedureError {
    /// The procedure was aborted; `reason.source` names the failing member (or `coordinator`).
    #[error("procedure {instance} aborted by {reason}")]
    Aborted {
        /// The instance name.
        instance: String,
        /// Who aborted and why.
        reason: AbortReason,
    },
    /// An instance with this name is already running (or left state behind that must first be
    /// resolved with [`Coordinator::recover`]).
    #[error("procedure instance {0} already exists")]
    DuplicateInstance(String),
    /// A member with this name is already registered by another session.
    #[error("member {0} is already registered")]
    DuplicateMember(String),
    /// A signature, instance, member or base path is not a valid znode name.
    #[error("{0}")]
    BadName(String),
    /// A ZooKeeper operation failed in a way the framework cannot handle.
    #[error("zookeeper: {0}")]
    Zk(#[from] crate::Error),
}

impl From<zkit_client::Error> for ProcedureError {
    fn from(err: zkit_client::Error) -> Self {
        ProcedureError::Zk(err.into())
    }
}

impl ProcedureError {
    /// The abort reason when this is [`ProcedureError::Aborted`].
    pub fn abort_reason(&self) -> Option<&AbortReason> {
        match self {
            ProcedureError::Aborted { reason, .. } => Some(reason),
            _ => None,
        }
    }
}
