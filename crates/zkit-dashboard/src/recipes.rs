//! Recognizing coordination recipes from node names and layouts: pure functions of a scanned
//! tree (the children of every listed node) and the ephemeral owners of contender nodes.
//!
//! | recipe | recognized by |
//! |---|---|
//! | zkit `Mutex`, Curator `InterProcessMutex`, zkit `LeaseLock` | children `…lock-NNNNNNNNNN` (`_c_<uuid>-lock-…` when protected); a TTL owner makes it a lease |
//! | kazoo `Lock` / `ReadLock` | children `<uuid>__lock__NNNNNNNNNN` / `__rlock__` |
//! | read/write locks (zkit, Curator) | children with `__READ__` / `__WRIT__` |
//! | semaphores (zkit, Curator `InterProcessSemaphoreV2`) | a node with `leases/` (and `locks/`); leases `…lease-NNNNNNNNNN` |
//! | LeaderLatch (zkit, Curator) | children `…latch-NNNNNNNNNN`; the lowest sequence leads |
//! | queues (zkit, Curator `SimpleDistributedQueue`) | children `qn-NNNNNNNNNN` (and zkit's `claim-qn-…`) |
//! | double barriers (zkit, Curator) | a node with a `ready` child, or named `…barrier…` with children |
//! | 2PC transactions (`zkit::txn`) | a node with `inbox/` and `coordinators/` children |
//! | procedures (`zkit::procedure`, HBase) | a node with `acquired/`, `reached/` and `abort/` |
//! | ledgers and bookies (BookKeeper) | `/ledgers` with `available/`; ledgers `L0000000001` below it |
//!
//! Ordering is by sequence number only, as every one of these recipes orders (protected names
//! start with a random UUID); the holders come from the same decision function the zkit locks
//! use ([`zkit::lock::decide_with`]), so the page says what a contender would decide.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use zkit::lock::{decide_with, role_of, sorted_contenders, Decision, Role, Rule};

/// The children of every node a scan listed (sorted names), by path.
pub type Listing = BTreeMap<String, Vec<String>>;

/// A found recipe before its details are read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// A lock directory (mutex, kazoo lock, read/write lock).
    Lock(String),
    /// A semaphore (its `leases/` child holds the leases).
    Semaphore(String),
    /// A LeaderLatch directory.
    Election(String),
    /// A queue node.
    Queue(String),
    /// A double barrier node.
    Barrier(String),
    /// The root of a 2PC transaction tree.
    Transactions(String),
    /// The root of one procedure signature.
    Procedure(String),
    /// A BookKeeper-style `/ledgers` root.
    Ledgers(String),
}

impl Found {
    /// The path it was found at.
    pub fn path(&self) -> &str {
        match self {
            Found::Lock(p)
            | Found::Semaphore(p)
            | Found::Election(p)
            | Found::Queue(p)
            | Found::Barrier(p)
            | Found::Transactions(p)
            | Found::Procedure(p)
            | Found::Ledgers(p) => p,
        }
    }
}

/// `parent` + `/` + `child`.
pub fn child_path(parent: &str, child: &str) -> String {
    if parent == "/" {
        format!("/{child}")
    } else {
        format!("{parent}/{child}")
    }
}

fn name_of(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The part of a sequential node's name before its 10-digit sequence number (`_c_<uuid>-lock-`
/// for `_c_<uuid>-lock-0000000007`); `None` for a name without one.
fn sequence_stem(name: &str) -> Option<&str> {
    zkit::protected::sequence_of(name)?;
    name.get(..name.len() - 10)
}

/// How the names of the known recipes' members end before their sequence number.
const MEMBER_STEM_ENDS: [&str; 8] = [
    zkit::lock::MUTEX_NAME,
    zkit::election::LATCH_NAME,
    "lease-",
    zkit::queue::ITEM_PREFIX,
    zkit::lock::KAZOO_LOCK_NAME,
    "__rlock__",
    zkit::lock::READ_MARKER,
    zkit::lock::WRITE_MARKER,
];

/// The children a scan need not list: the members of a recipe (lock contenders, latch nodes,
/// leases, queue items), which are leaves in every recipe, and of which a queue may hold very
/// many. A child is taken for a member when its name ends in a sequence number and the part
/// before it either ends like a known recipe's member (`lock-`, `latch-`, `qn-`, `__lock__`,
/// …) or is shared by a sibling (a family of sequential creates, such as Curator's
/// `queue-NNNNNNNNNN`). A lone node whose name merely ends in ten digits (a date, the tail of
/// a uuid) is listed like any other.
pub fn recipe_members(children: &[String]) -> BTreeSet<&str> {
    let mut stems: HashMap<&str, usize> = HashMap::new();
    for c in children {
        if let Some(stem) = sequence_stem(c) {
            *stems.entry(stem).or_default() += 1;
        }
    }
    children
        .iter()
        .filter(|c| {
            sequence_stem(c).is_some_and(|stem| {
                stems.get(stem).is_some_and(|n| *n > 1)
                    || MEMBER_STEM_ENDS.iter().any(|end| stem.ends_with(end))
            })
        })
        .map(String::as_str)
        .collect()
}

/// Whether a child name is a sequential contender of a lock-like recipe: its marker comes
/// right before the sequence number.
fn contender_marker(name: &str) -> Option<&'static str> {
    let stem = sequence_stem(name)?;
    if stem.ends_with(zkit::lock::READ_MARKER) || stem.ends_with(zkit::lock::WRITE_MARKER) {
        Some("rw")
    } else if stem.ends_with(zkit::election::LATCH_NAME) {
        Some("latch")
    } else if stem.ends_with(zkit::lock::KAZOO_LOCK_NAME) || stem.ends_with("__rlock__") {
        Some("kazoo")
    } else if stem.ends_with(zkit::lock::MUTEX_NAME) {
        Some("mutex")
    } else {
        None
    }
}

/// Every recipe in `listing`, parents before children.
pub fn recognize(listing: &Listing) -> Vec<Found> {
    let mut out = Vec::new();
    for (path, children) in listing {
        let has = |n: &str| children.iter().any(|c| c == n);
        if has("inbox") && has("coordinators") {
            out.push(Found::Transactions(path.clone()));
            continue;
        }
        if has("acquired") && has("reached") && has("abort") {
            out.push(Found::Procedure(path.clone()));
            continue;
        }
        if name_of(path) == "ledgers" && has("available") {
            out.push(Found::Ledgers(path.clone()));
            continue;
        }
        if has("leases") {
            let leases = listing.get(&child_path(path, "leases"));
            if leases.is_some_and(|l| l.iter().all(|n| n.contains("lease-"))) {
                out.push(Found::Semaphore(path.clone()));
                continue;
            }
        }
        // A semaphore's own lease directory is shown with the semaphore.
        if name_of(path) == "leases" && children.iter().any(|n| n.contains("lease-")) {
            continue;
        }
        let contenders: Vec<&str> = sorted_contenders(children)
            .into_iter()
            .map(|(_, n)| n)
            .collect();
        let markers: Vec<&str> = contenders
            .iter()
            .filter_map(|n| contender_marker(n))
            .collect();
        if markers.contains(&"latch") {
            out.push(Found::Election(path.clone()));
        } else if !markers.is_empty() {
            out.push(Found::Lock(path.clone()));
        } else if children
            .iter()
            .any(|c| c.starts_with(zkit::queue::ITEM_PREFIX) && c.len() == 13)
        {
            out.push(Found::Queue(path.clone()));
        } else if has(zkit::barrier::READY_NODE)
            || (name_of(path).to_ascii_lowercase().contains("barrier") && !children.is_empty())
        {
            out.push(Found::Barrier(path.clone()));
        }
    }
    out
}

/// One contender node of a lock, semaphore or election.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Contender {
    /// The node's name.
    pub node: String,
    /// Its sequence number: the fencing token of a holder.
    pub token: i64,
    /// The owner session (`None`: unknown, e.g. `dump` not answered and the node vanished).
    pub session: Option<i64>,
    /// `read` or `write` for read/write locks, empty otherwise.
    pub role: &'static str,
}

/// A lock with its holders and waiters in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LockView {
    /// The lock directory.
    pub path: String,
    /// What kind of lock.
    pub kind: &'static str,
    /// Who holds it (several readers of a read/write lock may).
    pub holders: Vec<Contender>,
    /// Who waits, in the order they will get it.
    pub waiters: Vec<Contender>,
}

/// Whether an `ephemeralOwner` marks a TTL node (ZooKeeper's `EphemeralType.TTL`: top byte
/// 0xFF), not a session.
pub fn is_ttl_owner(owner: i64) -> bool {
    (owner as u64) >> 56 == 0xFF
}

fn contender(dir: &str, node: &str, token: i64, owners: &HashMap<String, i64>) -> Contender {
    let role = if node.contains("__READ__") || node.contains("__rlock__") {
        "read"
    } else if node.contains("__WRIT__") {
        "write"
    } else {
        ""
    };
    Contender {
        node: node.to_string(),
        token,
        session: owners
            .get(&child_path(dir, node))
            .copied()
            .filter(|o| *o != 0 && !is_ttl_owner(*o)),
        role,
    }
}

/// The holders and waiters of the lock at `path` with these `children`.
pub fn lock_view(path: &str, children: &[String], owners: &HashMap<String, i64>) -> LockView {
    let contenders = sorted_contenders(children);
    let rw = contenders
        .iter()
        .any(|(_, n)| n.contains("__READ__") || n.contains("__WRIT__"));
    let kazoo = contenders
        .iter()
        .any(|(_, n)| n.contains("__lock__") || n.contains("__rlock__"));
    let ttl = contenders.iter().any(|(_, n)| {
        owners
            .get(&child_path(path, n))
            .is_some_and(|o| is_ttl_owner(*o))
    });
    let kind = match (rw, kazoo, ttl) {
        (true, _, _) => "read/write lock",
        (_, true, _) => "kazoo lock",
        (_, _, true) => "lease lock (TTL)",
        _ => "mutex",
    };
    let mut view = LockView {
        path: path.to_string(),
        kind,
        holders: Vec::new(),
        waiters: Vec::new(),
    };
    for (token, node) in &contenders {
        let rule = if role_of(node) == Role::Read {
            Rule::Shared
        } else {
            Rule::Exclusive { max_leases: 1 }
        };
        let c = contender(path, node, *token, owners);
        if decide_with(node, children, rule, None) == Decision::Acquired {
            view.holders.push(c);
        } else {
            view.waiters.push(c);
        }
    }
    view
}

/// A semaphore: who holds leases, who waits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SemaphoreView {
    /// The semaphore's path.
    pub path: String,
    /// The leases held.
    pub leases: Vec<Contender>,
    /// Contenders in `locks/` (Curator's internal mutex, taken briefly while acquiring).
    pub acquiring: Vec<Contender>,
}

/// The semaphore at `path` from `listing`.
pub fn semaphore_view(
    path: &str,
    listing: &Listing,
    owners: &HashMap<String, i64>,
) -> SemaphoreView {
    let part = |dir: &str| {
        let dir = child_path(path, dir);
        listing
            .get(&dir)
            .map(|children| {
                sorted_contenders(children)
                    .into_iter()
                    .map(|(t, n)| contender(&dir, n, t, owners))
                    .collect()
            })
            .unwrap_or_default()
    };
    SemaphoreView {
        path: path.to_string(),
        leases: part("leases"),
        acquiring: part("locks"),
    }
}

/// A LeaderLatch election.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ElectionView {
    /// The latch directory.
    pub path: String,
    /// The leader (the lowest sequence number).
    pub leader: Option<Contender>,
    /// The other candidates in line.
    pub candidates: Vec<Contender>,
}

/// The election at `path` with these `children`.
pub fn election_view(
    path: &str,
    children: &[String],
    owners: &HashMap<String, i64>,
) -> ElectionView {
    let mut line = sorted_contenders(children)
        .into_iter()
        .filter(|(_, n)| n.contains("latch-"))
        .map(|(t, n)| contender(path, n, t, owners));
    ElectionView {
        path: path.to_string(),
        leader: line.next(),
        candidates: line.collect(),
    }
}

/// A queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueView {
    /// The queue node.
    pub path: String,
    /// Items waiting (claimed ones included).
    pub depth: usize,
    /// Items a consumer claimed and has not acknowledged yet.
    pub claimed: usize,
    /// The head item, if any.
    pub head: Option<String>,
}

/// The queue at `path` with these `children`.
pub fn queue_view(path: &str, children: &[String]) -> QueueView {
    let items = zkit::queue::items_in_order(children);
    let unclaimed = zkit::queue::unclaimed_items(children);
    QueueView {
        path: path.to_string(),
        depth: items.len(),
        claimed: items.len() - unclaimed.len(),
        head: items.first().map(|s| (*s).to_string()),
    }
}

/// A double barrier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BarrierView {
    /// The barrier node.
    pub path: String,
    /// Members inside.
    pub members: Vec<String>,
    /// Whether `ready` exists (everyone entered).
    pub ready: bool,
}

/// The barrier at `path` with these `children`.
pub fn barrier_view(path: &str, children: &[String]) -> BarrierView {
    BarrierView {
        path: path.to_string(),
        members: children
            .iter()
            .filter(|c| *c != zkit::barrier::READY_NODE)
            .cloned()
            .collect(),
        ready: children.iter().any(|c| c == zkit::barrier::READY_NODE),
    }
}

/// Ledgers and bookies of a BookKeeper-style `/ledgers` tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgersView {
    /// The root (`/ledgers`).
    pub path: String,
    /// Writable bookies (`available/<host:port>`).
    pub bookies: Vec<String>,
    /// Read-only bookies (`available/readonly/<host:port>`).
    pub readonly: Vec<String>,
    /// Ledger ids found (flat `L0000000001` or hierarchical `00/0000/L0001`), ascending.
    pub ledgers: Vec<i64>,
    /// Ledgers marked under-replicated (`underreplication/ledgers/…`).
    pub underreplicated: usize,
}

/// The ledgers view of `root` from `listing`.
pub fn ledgers_view(root: &str, listing: &Listing) -> LedgersView {
    let available = child_path(root, "available");
    let list = |p: &str| listing.get(p).cloned().unwrap_or_default();
    let bookies = list(&available)
        .into_iter()
        .filter(|b| b != "readonly")
        .collect();
    let readonly = list(&child_path(&available, "readonly"));
    let skip = [
        available.clone(),
        child_path(root, "underreplication"),
        child_path(root, "cookies"),
        child_path(root, "layout"),
    ];
    let under = child_path(root, "underreplication");
    let mut ledgers = Vec::new();
    let mut underreplicated = 0;
    for (path, children) in listing.range(root.to_string()..) {
        if !path.starts_with(root) {
            break;
        }
        for c in children {
            let Some(id) = c
                .strip_prefix('L')
                .or_else(|| c.strip_prefix("urL"))
                .filter(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|d| d.parse::<i64>().ok())
            else {
                continue;
            };
            if path.starts_with(&under) {
                underreplicated += 1;
            } else if !skip.iter().any(|s| path.starts_with(s.as_str())) {
                ledgers.push(id);
            }
        }
    }
    ledgers.sort_unstable();
    LedgersView {
        path: root.to_string(),
        bookies,
        readonly,
        ledgers,
        underreplicated,
    }
}

/// One procedure instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcedureInstance {
    /// The instance name.
    pub instance: String,
    /// `acquiring`, `in barrier` (released, members running), `aborted`.
    pub phase: &'static str,
    /// The expected members (from the instance header; empty when it names none).
    pub expected: Vec<String>,
    /// Members that acquired the barrier.
    pub acquired: Vec<String>,
    /// Members done inside the barrier.
    pub done: Vec<String>,
}

/// A procedure signature and its instances.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcedureView {
    /// `<base>/<signature>`.
    pub path: String,
    /// Live members (`members/`).
    pub members: Vec<String>,
    /// Instances, by name.
    pub instances: Vec<ProcedureInstance>,
}

/// The procedure at `root` from `listing`; `expected` gives each instance's expected members
/// (read from `acquired/<instance>`'s header).
pub fn procedure_view(
    root: &str,
    listing: &Listing,
    expected: &HashMap<String, Vec<String>>,
) -> ProcedureView {
    let list = |p: &str| listing.get(p).cloned().unwrap_or_default();
    let acquired_dir = child_path(root, "acquired");
    let reached_dir = child_path(root, "reached");
    let aborted = list(&child_path(root, "abort"));
    let reached = list(&reached_dir);
    let mut names = list(&acquired_dir);
    for extra in aborted.iter().chain(&reached) {
        if !names.contains(extra) {
            names.push(extra.clone());
        }
    }
    names.sort();
    let instances = names
        .into_iter()
        .map(|instance| {
            let phase = if aborted.contains(&instance) {
                "aborted"
            } else if reached.contains(&instance) {
                "in barrier"
            } else {
                "acquiring"
            };
            ProcedureInstance {
                expected: expected.get(&instance).cloned().unwrap_or_default(),
                acquired: list(&child_path(&acquired_dir, &instance)),
                done: list(&child_path(&reached_dir, &instance)),
                phase,
                instance,
            }
        })
        .collect();
    ProcedureView {
        path: root.to_string(),
        members: list(&child_path(root, "members")),
        instances,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(entries: &[(&str, &[&str])]) -> Listing {
        entries
            .iter()
            .map(|(p, c)| (p.to_string(), c.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn recognizes_each_layout() {
        let l = listing(&[
            ("/", &["app", "zkit", "ledgers"]),
            (
                "/app",
                &["mutex", "kazoo", "rw", "sem", "latch", "q", "bar", "plain"],
            ),
            (
                "/app/mutex",
                &["_c_9f-lock-0000000002", "_c_1a-lock-0000000001"],
            ),
            ("/app/kazoo", &["abcd__lock__0000000000"]),
            (
                "/app/rw",
                &["_c_a-__WRIT__0000000000", "_c_b-__READ__0000000001"],
            ),
            ("/app/sem", &["leases", "locks"]),
            ("/app/sem/leases", &["_c_x-lease-0000000000"]),
            ("/app/sem/locks", &[]),
            (
                "/app/latch",
                &["_c_b-latch-0000000004", "_c_a-latch-0000000003"],
            ),
            ("/app/q", &["qn-0000000000", "qn-0000000001"]),
            ("/app/bar", &["m1", "ready"]),
            ("/app/plain", &["a", "b"]),
            ("/zkit", &["txn", "procedure"]),
            ("/zkit/txn", &["members", "inbox", "coordinators", "tx-1"]),
            ("/zkit/procedure", &["flush"]),
            (
                "/zkit/procedure/flush",
                &["acquired", "reached", "abort", "members", "running"],
            ),
            ("/ledgers", &["available", "00"]),
        ]);
        let found = recognize(&l);
        let expect = vec![
            Found::Barrier("/app/bar".into()),
            Found::Lock("/app/kazoo".into()),
            Found::Election("/app/latch".into()),
            Found::Lock("/app/mutex".into()),
            Found::Queue("/app/q".into()),
            Found::Lock("/app/rw".into()),
            Found::Semaphore("/app/sem".into()),
            Found::Ledgers("/ledgers".into()),
            Found::Procedure("/zkit/procedure/flush".into()),
            Found::Transactions("/zkit/txn".into()),
        ];
        assert_eq!(found, expect);
    }

    #[test]
    fn a_name_ending_in_ten_digits_is_not_a_recipe_member_alone() {
        // Directories named with a date or a uuid whose tail is all digits, beside a holder.
        let root = strings(&[
            "orders-2026120401",
            "browser-lock-77-0-4f2a9c0e1b3d4e5f8a1234567890",
            "plain",
        ]);
        assert!(recipe_members(&root).is_empty());
        assert!(recognize(&listing(&[(
            "/",
            &["browser-lock-77-0-4f2a9c0e1b3d4e5f8a1234567890"]
        )]))
        .is_empty());
        // Members of the known recipes, alone or many; a family of sequential creates.
        let members = strings(&[
            "_c_9f-lock-0000000002",
            "abcd__lock__0000000000",
            "x__rlock__0000000001",
            "_c_a-__WRIT__0000000000",
            "_c_b-__READ__0000000001",
            "_c_x-lease-0000000000",
            "_c_b-latch-0000000004",
            "qn-0000000000",
            "claim-qn-0000000001",
            "queue-0000000003",
            "queue-0000000004",
        ]);
        let mut with_dir = members.clone();
        with_dir.push("orders-2026120401".into());
        let found = recipe_members(&with_dir);
        assert_eq!(found.len(), members.len(), "{found:?}");
        assert!(!found.contains("orders-2026120401"));
    }

    #[test]
    fn mutex_holder_is_lowest_sequence_not_lowest_name() {
        let children = strings(&[
            "_c_00-lock-0000000009",
            "_c_ff-lock-0000000003",
            "_c_77-lock-0000000005",
        ]);
        let owners: HashMap<String, i64> = [
            ("/l/_c_ff-lock-0000000003".to_string(), 0x11),
            ("/l/_c_77-lock-0000000005".to_string(), 0x22),
        ]
        .into();
        let v = lock_view("/l", &children, &owners);
        assert_eq!(v.kind, "mutex");
        assert_eq!(v.holders.len(), 1);
        assert_eq!(v.holders[0].token, 3);
        assert_eq!(v.holders[0].session, Some(0x11));
        let waiters: Vec<i64> = v.waiters.iter().map(|w| w.token).collect();
        assert_eq!(waiters, vec![5, 9]);
        assert_eq!(v.waiters[1].session, None);
    }

    #[test]
    fn readers_share_until_a_writer_and_ttl_makes_a_lease() {
        let children = strings(&[
            "_c_a-__READ__0000000001",
            "_c_b-__READ__0000000002",
            "_c_c-__WRIT__0000000003",
            "_c_d-__READ__0000000004",
        ]);
        let v = lock_view("/rw", &children, &HashMap::new());
        assert_eq!(v.kind, "read/write lock");
        let holders: Vec<i64> = v.holders.iter().map(|c| c.token).collect();
        assert_eq!(holders, vec![1, 2]);
        assert_eq!(v.waiters[0].role, "write");

        let ttl_owner = 0xFF00_0000_0000_0000_u64 as i64;
        let owners: HashMap<String, i64> = [("/t/lock-0000000000".to_string(), ttl_owner)].into();
        let v = lock_view("/t", &strings(&["lock-0000000000"]), &owners);
        assert_eq!(v.kind, "lease lock (TTL)");
        assert_eq!(v.holders[0].session, None, "a TTL owner is not a session");
    }

    #[test]
    fn election_queue_barrier_semaphore_views() {
        let e = election_view(
            "/e",
            &strings(&["_c_b-latch-0000000004", "_c_a-latch-0000000003"]),
            &HashMap::new(),
        );
        assert_eq!(e.leader.as_ref().map(|c| c.token), Some(3));
        assert_eq!(e.candidates.len(), 1);

        let q = queue_view(
            "/q",
            &strings(&["qn-0000000002", "claim-qn-0000000001", "qn-0000000001"]),
        );
        assert_eq!((q.depth, q.claimed), (2, 1));
        assert_eq!(q.head.as_deref(), Some("qn-0000000001"));

        let b = barrier_view("/b", &strings(&["m1", "m2"]));
        assert_eq!((b.members.len(), b.ready), (2, false));

        let l = listing(&[
            (
                "/s/leases",
                &["_c_x-lease-0000000001", "_c_y-lease-0000000000"],
            ),
            ("/s/locks", &[]),
        ]);
        let s = semaphore_view("/s", &l, &HashMap::new());
        let tokens: Vec<i64> = s.leases.iter().map(|c| c.token).collect();
        assert_eq!(tokens, vec![0, 1]);
    }

    #[test]
    fn ledgers_and_procedures() {
        let l = listing(&[
            (
                "/ledgers",
                &["available", "00", "underreplication", "LAYOUT"],
            ),
            ("/ledgers/available", &["127.0.0.1:3181", "readonly"]),
            ("/ledgers/available/readonly", &["127.0.0.1:3182"]),
            ("/ledgers/00", &["0000"]),
            ("/ledgers/00/0000", &["L0002", "L0001"]),
            ("/ledgers/underreplication", &["ledgers"]),
            ("/ledgers/underreplication/ledgers", &["urL0000000001"]),
        ]);
        let v = ledgers_view("/ledgers", &l);
        assert_eq!(v.bookies, vec!["127.0.0.1:3181"]);
        assert_eq!(v.readonly, vec!["127.0.0.1:3182"]);
        assert_eq!(v.ledgers, vec![1, 2]);
        assert_eq!(v.underreplicated, 1);

        let l = listing(&[
            ("/p/flush", &["acquired", "reached", "abort", "members"]),
            ("/p/flush/acquired", &["i1", "i2"]),
            ("/p/flush/acquired/i1", &["rs1", "rs2"]),
            ("/p/flush/acquired/i2", &["rs1"]),
            ("/p/flush/reached", &["i1"]),
            ("/p/flush/reached/i1", &["rs1"]),
            ("/p/flush/abort", &[]),
            ("/p/flush/members", &["rs1", "rs2"]),
        ]);
        let expected: HashMap<String, Vec<String>> =
            [("i1".to_string(), strings(&["rs1", "rs2"]))].into();
        let v = procedure_view("/p/flush", &l, &expected);
        assert_eq!(v.instances.len(), 2);
        assert_eq!(v.instances[0].phase, "in barrier");
        assert_eq!(v.instances[0].done, vec!["rs1"]);
        assert_eq!(v.instances[1].phase, "acquiring");
        assert_eq!(v.members, vec!["rs1", "rs2"]);
    }
}
