//! The data one collection publishes: the [`Snapshot`] every page, fragment and event is
//! rendered from, and the rows in it. Plain data (`Serialize` for the JSON API), no I/O: the
//! collector fills it, `zk` builds the 2PC rows, `render` and `web` read it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::charts::Point;
use crate::recipes;

/// One ensemble member's status.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MemberStatus {
    /// The member's client address.
    pub addr: String,
    /// `mntr`'s values (keys without `zk_`), empty when `mntr` was not answered.
    pub mntr: BTreeMap<String, String>,
    /// `srvr`'s `Zxid` and `Mode` lines.
    pub zxid: Option<String>,
    /// `srvr`'s mode (`standalone`, `leader`, `follower`).
    pub mode: Option<String>,
    /// `srvr`'s version line.
    pub version: Option<String>,
    /// Live sessions this member knows (`dump`), else its connections.
    pub sessions: Option<usize>,
    /// Why a word got no answer.
    pub errors: Vec<String>,
}

/// A live session.
#[derive(Debug, Clone, Serialize)]
pub struct SessionRow {
    /// The session id.
    pub id: i64,
    /// Where its connection comes from, and to which member.
    pub peer: Option<String>,
    /// The member it is connected to.
    pub member: Option<String>,
    /// Negotiated timeout (ms).
    pub timeout_ms: Option<u64>,
    /// Ephemeral nodes it owns.
    pub ephemerals: Vec<String>,
    /// Whether it is this dashboard's own session (or a signed-in user's).
    pub dashboard: bool,
}

/// A 2PC transaction as the overview shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TxnRow {
    /// The id.
    pub txid: String,
    /// `in flight`, `in doubt` or `decided`.
    pub phase: &'static str,
    /// Participants and their votes (`yes`, `no: …`, `-` for none yet).
    pub votes: Vec<(String, String)>,
    /// The decision and who wrote it.
    pub decision: Option<String>,
    /// Participants yet to acknowledge.
    pub unacked: Vec<String>,
    /// The coordinator that began it.
    pub coordinator: String,
}

/// A 2PC tree.
#[derive(Debug, Clone, Serialize)]
pub struct TxnTree {
    /// Its root.
    pub root: String,
    /// Live participants.
    pub members: Vec<String>,
    /// Transactions.
    pub txns: Vec<TxnRow>,
    /// Why it could not be read completely.
    pub error: Option<String>,
}

/// Every recipe found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Overview {
    /// Locks.
    pub locks: Vec<recipes::LockView>,
    /// Semaphores.
    pub semaphores: Vec<recipes::SemaphoreView>,
    /// Elections.
    pub elections: Vec<recipes::ElectionView>,
    /// Queues.
    pub queues: Vec<recipes::QueueView>,
    /// Barriers.
    pub barriers: Vec<recipes::BarrierView>,
    /// 2PC trees.
    pub transactions: Vec<TxnTree>,
    /// Procedures.
    pub procedures: Vec<recipes::ProcedureView>,
    /// Ledgers and bookies.
    pub ledgers: Vec<recipes::LedgersView>,
}

/// How the last scan went.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ScanInfo {
    /// Roots scanned.
    pub roots: Vec<String>,
    /// Nodes listed.
    pub listed: usize,
    /// The budget.
    pub budget: usize,
    /// Whether the budget cut the scan (some nodes were not looked at).
    pub truncated: bool,
    /// How long it took (ms).
    pub took_ms: u64,
}

/// A child of the root.
#[derive(Debug, Clone, Serialize)]
pub struct RootChild {
    /// The name.
    pub name: String,
    /// Its number of children, when the scan listed it.
    pub children: Option<usize>,
}

/// Everything one collection found.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Snapshot {
    /// When (Unix ms).
    pub taken_ms: i64,
    /// Sequence number of the collection (1, 2, …).
    pub seq: u64,
    /// The connect string.
    pub server: String,
    /// Every member's status.
    pub members: Vec<MemberStatus>,
    /// The root's children.
    pub root: Vec<RootChild>,
    /// Live sessions.
    pub sessions: Vec<SessionRow>,
    /// Where the session list came from, when it is incomplete.
    pub sessions_note: Option<String>,
    /// The recipes.
    pub overview: Overview,
    /// Watches by session (`wchc`), when answered.
    pub watches: Option<BTreeMap<i64, Vec<String>>>,
    /// The scan.
    pub scan: ScanInfo,
    /// Chart points, oldest first.
    pub history: Vec<Point>,
    /// Where the chart values come from.
    pub metrics_source: &'static str,
    /// Errors of this collection (the server unreachable, …).
    pub errors: Vec<String>,
    /// The event-stream payload of this snapshot, rendered once for every browser.
    #[serde(skip)]
    pub event: String,
}
