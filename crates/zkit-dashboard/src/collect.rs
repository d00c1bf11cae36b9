//! The collector: once per interval it reads the server (four-letter words of every member,
//! the metrics), scans the tree within a node budget, recognizes the recipes, and publishes one
//! [`Snapshot`] that every page and every server-sent-event stream shares (N browsers = one
//! collection). It skips intervals while nobody looks (no event stream open and no page asked
//! for a while); a page that finds the snapshot stale asks for a fresh one.
//!
//! # The scan
//! Breadth-first from each configured root (default `/`), one `getChildren` per node, at most
//! [`crate::DashboardConfig::node_budget`] nodes per scan (the page says when it was cut).
//! It does not descend into `/zookeeper` nor into the members of a recipe (lock contenders,
//! queue items, latch nodes: leaves in every recipe; see [`recipes::recipe_members`]). Owners
//! of contender nodes come from `dump` when the server answers it, else from one `exists` each.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::StreamExt as _;
use tokio::sync::{watch, Notify};
use tokio_util::sync::CancellationToken;

use crate::charts::{self, History, Sample};
pub use crate::config::hosts_of;
use crate::four_letter::{self, Connection, Dump};
use crate::model::{MemberStatus, Overview, RootChild, ScanInfo, SessionRow, Snapshot};
use crate::recipes::{self, child_path, Found, Listing};
use crate::zk::Zk;
use crate::DashboardConfig;

/// How long a four-letter word may take.
const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(2);
/// How many reads a scan keeps in flight.
const SCAN_CONCURRENCY: usize = 32;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The collector's shared state.
#[derive(Debug)]
pub struct Collector {
    /// The latest snapshot.
    pub snapshot: watch::Sender<Arc<Snapshot>>,
    /// Wakes the loop for an early collection.
    pub wake: Notify,
    /// When a page last asked for data.
    pub last_interest: std::sync::Mutex<Instant>,
    /// Session ids of the dashboard itself and signed-in users.
    pub own_sessions: std::sync::Mutex<BTreeSet<i64>>,
}

impl Default for Collector {
    fn default() -> Self {
        Collector::new()
    }
}

impl Collector {
    /// A collector with an empty snapshot.
    pub fn new() -> Collector {
        Collector {
            snapshot: watch::channel(Arc::new(Snapshot::default())).0,
            wake: Notify::new(),
            last_interest: std::sync::Mutex::new(Instant::now()),
            own_sessions: std::sync::Mutex::new(BTreeSet::new()),
        }
    }

    /// Notes that someone looks.
    pub fn touch(&self) {
        *self.last_interest.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
    }

    /// The latest snapshot, collected anew first when it is older than `max_age` (waiting at
    /// most `wait` for it).
    pub async fn fresh(&self, max_age: Duration, wait: Duration) -> Arc<Snapshot> {
        self.touch();
        let mut rx = self.snapshot.subscribe();
        let current = rx.borrow_and_update().clone();
        let age = now_ms().saturating_sub(current.taken_ms);
        if current.seq > 0 && age <= i64::try_from(max_age.as_millis()).unwrap_or(i64::MAX) {
            return current;
        }
        self.wake.notify_one();
        let _ = tokio::time::timeout(wait, rx.changed()).await;
        let latest = rx.borrow().clone();
        latest
    }
}

/// Runs collections until `stop`.
pub async fn run(
    config: DashboardConfig,
    zk: Zk,
    collector: Arc<Collector>,
    stop: CancellationToken,
) {
    let mut history = History::default();
    let mut seq = 0;
    loop {
        let idle = {
            let last = *collector
                .last_interest
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            // The sender itself is not a receiver; every open event stream is one.
            collector.snapshot.receiver_count() == 0 && last.elapsed() > config.idle_after
        };
        if !idle || seq == 0 {
            seq += 1;
            let snapshot = collect_once(&config, &zk, &collector, &mut history, seq).await;
            collector.snapshot.send_replace(Arc::new(snapshot));
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(config.interval) => {}
            () = collector.wake.notified() => {}
        }
    }
}

async fn collect_once(
    config: &DashboardConfig,
    zk: &Zk,
    collector: &Collector,
    history: &mut History,
    seq: u64,
) -> Snapshot {
    let mut errors = Vec::new();
    let (members, dumps, cons, watches) = match &config.admin_url {
        Some(url) => admin_status(config, url).await,
        None => members_status(&config.members).await,
    };
    let dump = merge_dumps(&dumps);
    let sample = metrics_sample(config, &members, &mut errors).await;
    history.push(sample);

    let started = Instant::now();
    let (listing, mut scan) = scan(zk, &config.roots, config.node_budget).await;
    scan.took_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    if listing.is_empty() {
        errors.push(format!("cannot read the tree of {}", config.connect));
    }

    let found = recipes::recognize(&listing);
    let owners = owners(zk, &found, &listing, dump.as_ref(), config.node_budget).await;
    let overview = overview(zk, &found, &listing, &owners).await;

    let root = listing
        .get("/")
        .map(|names| {
            names
                .iter()
                .map(|name| RootChild {
                    name: name.clone(),
                    children: listing.get(&child_path("/", name)).map(Vec::len),
                })
                .collect()
        })
        .unwrap_or_default();

    let own = {
        let mut own = collector
            .own_sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // A lost session is replaced by a new one with a new id.
        own.insert(zk.session_id());
        own.clone()
    };
    let (sessions, sessions_note) = sessions(dump.as_ref(), &cons, &owners, &own);

    let mut snapshot = Snapshot {
        taken_ms: now_ms(),
        seq,
        server: config.connect.clone(),
        members,
        root,
        sessions,
        sessions_note,
        overview,
        watches,
        scan,
        history: history.points(),
        metrics_source: if config.metrics_url.is_some() {
            "prometheus"
        } else {
            "mntr"
        },
        errors,
        event: String::new(),
    };
    snapshot.event = crate::render::event_json(&snapshot);
    snapshot
}

type MemberReads = (
    Vec<MemberStatus>,
    Vec<Dump>,
    Vec<(String, Vec<Connection>)>,
    Option<BTreeMap<i64, Vec<String>>>,
);

/// Asks every member for `srvr`, `mntr`, `dump`, `cons` and `wchc`.
async fn members_status(addrs: &[String]) -> MemberReads {
    let per_member = addrs.iter().map(|addr| async move {
        let ask = |w: &'static str| four_letter::ask(addr, w, FOUR_LETTER_TIMEOUT);
        let (srvr, mntr, dump, cons, wchc) = futures::join!(
            ask("srvr"),
            ask("mntr"),
            ask("dump"),
            ask("cons"),
            ask("wchc")
        );
        (addr.clone(), srvr, mntr, dump, cons, wchc)
    });
    let replies = futures::future::join_all(per_member).await;
    let mut members = Vec::new();
    let mut dumps = Vec::new();
    let mut conns = Vec::new();
    let mut watches: Option<BTreeMap<i64, Vec<String>>> = None;
    for (addr, srvr, mntr, dump, cons, wchc) in replies {
        let mut m = MemberStatus {
            addr: addr.clone(),
            ..MemberStatus::default()
        };
        match srvr {
            Ok(text) => {
                for line in text.lines() {
                    if let Some((k, v)) = line.split_once(':') {
                        let v = v.trim().to_string();
                        match k.trim() {
                            "Zxid" => m.zxid = Some(v),
                            "Mode" => m.mode = Some(v),
                            "Zookeeper version" => m.version = Some(v),
                            _ => {}
                        }
                    }
                }
            }
            Err(e) => m.errors.push(format!("srvr: {e}")),
        }
        match mntr {
            Ok(text) => m.mntr = four_letter::parse_mntr(&text),
            Err(e) => m.errors.push(format!("mntr: {e}")),
        }
        match dump {
            Ok(text) => {
                let d = four_letter::parse_dump(&text);
                m.sessions = Some(d.sessions.len());
                dumps.push(d);
            }
            Err(e) => m.errors.push(format!("dump: {e}")),
        }
        match cons {
            Ok(text) => {
                let c = four_letter::parse_cons(&text);
                if m.sessions.is_none() {
                    m.sessions = Some(c.iter().filter(|c| c.session.is_some()).count());
                }
                conns.push((addr.clone(), c));
            }
            Err(e) => m.errors.push(format!("cons: {e}")),
        }
        match wchc {
            Ok(text) => {
                let w = watches.get_or_insert_with(BTreeMap::new);
                for (sid, paths) in four_letter::parse_wchc(&text) {
                    w.entry(sid).or_default().extend(paths);
                }
            }
            Err(e) => m.errors.push(format!("wchc: {e}")),
        }
        members.push(m);
    }
    (members, dumps, conns, watches)
}

/// The one member's status from its AdminServer's JSON commands.
async fn admin_status(config: &DashboardConfig, url: &str) -> MemberReads {
    use crate::admin_json;
    let base = url.trim_end_matches('/');
    let get = |name: &'static str| async move {
        let text =
            crate::http_get::get(&format!("{base}/commands/{name}"), FOUR_LETTER_TIMEOUT).await?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        match v["error"].as_str() {
            Some(e) => Err(e.to_string()),
            None => Ok(v),
        }
    };
    let (stats, monitor, dump, cons, watches) = futures::join!(
        get("server_stats"),
        get("monitor"),
        get("dump"),
        get("connections"),
        get("watches")
    );
    let mut m = MemberStatus {
        addr: config
            .members
            .first()
            .cloned()
            .unwrap_or_else(|| config.connect.clone()),
        ..MemberStatus::default()
    };
    match stats {
        Ok(v) => (m.version, m.zxid, m.mode) = admin_json::server_stats(&v),
        Err(e) => m.errors.push(format!("server_stats: {e}")),
    }
    match monitor {
        Ok(v) => m.mntr = admin_json::monitor(&v),
        Err(e) => m.errors.push(format!("monitor: {e}")),
    }
    let mut dumps = Vec::new();
    match dump {
        Ok(v) => {
            let d = admin_json::dump(&v);
            m.sessions = Some(d.sessions.len());
            dumps.push(d);
        }
        Err(e) => m.errors.push(format!("dump: {e}")),
    }
    let mut conns = Vec::new();
    match cons {
        Ok(v) => conns.push((m.addr.clone(), admin_json::connections(&v))),
        Err(e) => m.errors.push(format!("connections: {e}")),
    }
    let watches = match watches {
        Ok(v) => Some(admin_json::watches(&v)),
        Err(e) => {
            m.errors.push(format!("watches: {e}"));
            None
        }
    };
    (vec![m], dumps, conns, watches)
}

/// All members' dumps in one (sessions united; ephemerals are the same tree on every member).
fn merge_dumps(dumps: &[Dump]) -> Option<Dump> {
    let mut out: Option<Dump> = None;
    for d in dumps {
        let o = out.get_or_insert_with(Dump::default);
        o.sessions.extend(&d.sessions);
        for (sid, paths) in &d.ephemerals {
            o.ephemerals.entry(*sid).or_insert_with(|| paths.clone());
        }
    }
    if let Some(o) = out.as_mut() {
        o.sessions.sort_unstable();
        o.sessions.dedup();
    }
    out
}

async fn metrics_sample(
    config: &DashboardConfig,
    members: &[MemberStatus],
    errors: &mut Vec<String>,
) -> Sample {
    let mut sample = Sample {
        at_ms: now_ms(),
        ..Sample::default()
    };
    if let Some(url) = &config.metrics_url {
        match crate::http_get::get(url, FOUR_LETTER_TIMEOUT).await {
            Ok(text) => sample.ops = charts::parse_prometheus(&text),
            Err(e) => errors.push(format!("metrics {url}: {e}")),
        }
        return sample;
    }
    let num = |m: &MemberStatus, k: &str| m.mntr.get(k).and_then(|v| v.parse::<f64>().ok());
    let add = |slot: &mut Option<(u64, u64)>, c: Option<f64>, s: Option<f64>| {
        if let (Some(c), Some(s)) = (c, s) {
            let (c0, s0) = slot.unwrap_or((0, 0));
            *slot = Some((c0 + c as u64, s0 + s as u64));
        }
    };
    for m in members.iter().filter(|m| !m.mntr.is_empty()) {
        add(
            &mut sample.reads,
            num(m, "cnt_readlatency"),
            num(m, "sum_readlatency"),
        );
        add(
            &mut sample.updates,
            num(m, "cnt_updatelatency"),
            num(m, "sum_updatelatency"),
        );
        if let Some(p) = num(m, "packets_received") {
            sample.packets = Some(sample.packets.unwrap_or(0) + p as u64);
        }
        if let Some(x) = num(m, "max_latency") {
            sample.max_latency_ms = Some(sample.max_latency_ms.unwrap_or(0.0).max(x));
        }
    }
    sample
}

/// Breadth-first listing under `roots` within `budget` nodes.
async fn scan(zk: &Zk, roots: &[String], budget: usize) -> (Listing, ScanInfo) {
    let mut listing = Listing::new();
    let mut frontier: Vec<String> = Vec::new();
    // The root's children are always shown, whatever the roots.
    frontier.push("/".to_string());
    for r in roots {
        if r != "/" {
            frontier.push(r.clone());
        }
    }
    let scan_all = roots.iter().any(|r| r == "/");
    let mut info = ScanInfo {
        roots: roots.to_vec(),
        budget,
        ..ScanInfo::default()
    };
    while !frontier.is_empty() {
        if info.listed >= budget {
            break;
        }
        let take = frontier.len().min(budget - info.listed);
        let batch: Vec<String> = frontier.drain(..take).collect();
        let reads = futures::stream::iter(batch.into_iter().map(|path| async move {
            let r = zk.children(&path).await;
            (path, r)
        }))
        .buffer_unordered(SCAN_CONCURRENCY);
        let results: Vec<(String, zkit::Result<Option<Vec<String>>>)> = reads.collect().await;
        for (path, result) in results {
            info.listed += 1;
            let Ok(Some(mut children)) = result else {
                continue;
            };
            children.sort();
            let descend = path != "/" || scan_all;
            if descend {
                let members = recipes::recipe_members(&children);
                for c in &children {
                    let child = child_path(&path, c);
                    if child == "/zookeeper" || members.contains(c.as_str()) {
                        continue;
                    }
                    frontier.push(child);
                }
            }
            listing.insert(path, children);
        }
        frontier.sort();
    }
    if !frontier.is_empty() {
        info.truncated = true;
    }
    (listing, info)
}

/// Ephemeral owners of every contender node of the found recipes (full path → owner).
async fn owners(
    zk: &Zk,
    found: &[Found],
    listing: &Listing,
    dump: Option<&Dump>,
    budget: usize,
) -> HashMap<String, i64> {
    let mut owners: HashMap<String, i64> = HashMap::new();
    if let Some(d) = dump {
        for (sid, paths) in &d.ephemerals {
            for p in paths {
                owners.insert(p.clone(), *sid);
            }
        }
    }
    // Nodes whose owner `dump` did not give (no dump, or persistent TTL nodes): ask each.
    let mut wanted = Vec::new();
    for f in found {
        let dirs: Vec<String> = match f {
            Found::Lock(p) | Found::Election(p) => vec![p.clone()],
            Found::Semaphore(p) => vec![child_path(p, "leases"), child_path(p, "locks")],
            _ => continue,
        };
        for dir in dirs {
            for c in listing.get(&dir).into_iter().flatten() {
                let path = child_path(&dir, c);
                if !owners.contains_key(&path) && zkit::protected::sequence_of(c).is_some() {
                    wanted.push(path);
                }
            }
        }
    }
    wanted.truncate(budget);
    let stats = futures::stream::iter(wanted.into_iter().map(|path| async move {
        let owner = zk.owner(&path).await;
        (path, owner)
    }))
    .buffer_unordered(SCAN_CONCURRENCY)
    .collect::<Vec<_>>()
    .await;
    for (path, owner) in stats {
        if let Ok(Some(o)) = owner {
            owners.insert(path, o);
        }
    }
    owners
}

async fn overview(
    zk: &Zk,
    found: &[Found],
    listing: &Listing,
    owners: &HashMap<String, i64>,
) -> Overview {
    let mut o = Overview::default();
    let children = |p: &str| listing.get(p).cloned().unwrap_or_default();
    for f in found {
        match f {
            Found::Lock(p) => o.locks.push(recipes::lock_view(p, &children(p), owners)),
            Found::Semaphore(p) => o
                .semaphores
                .push(recipes::semaphore_view(p, listing, owners)),
            Found::Election(p) => o
                .elections
                .push(recipes::election_view(p, &children(p), owners)),
            Found::Queue(p) => o.queues.push(recipes::queue_view(p, &children(p))),
            Found::Barrier(p) => o.barriers.push(recipes::barrier_view(p, &children(p))),
            Found::Ledgers(p) => o.ledgers.push(recipes::ledgers_view(p, listing)),
            Found::Procedure(p) => {
                let mut expected = HashMap::new();
                let acquired = child_path(p, "acquired");
                for instance in children(&acquired) {
                    if let Ok(Some(data)) = zk.data(&child_path(&acquired, &instance)).await {
                        if let (Some(h), _) = zkit::procedure::layout::decode_instance(&data) {
                            expected.insert(instance, h.members.into_iter().collect());
                        }
                    }
                }
                o.procedures
                    .push(recipes::procedure_view(p, listing, &expected));
            }
            Found::Transactions(p) => o.transactions.push(zk.transactions(p).await),
        }
    }
    o
}

/// The session list: `dump`'s sessions with their ephemerals, `cons`' peers and timeouts;
/// without `dump`, the sessions `cons` shows and the owners of recipe nodes.
fn sessions(
    dump: Option<&Dump>,
    cons: &[(String, Vec<Connection>)],
    owners: &HashMap<String, i64>,
    own: &BTreeSet<i64>,
) -> (Vec<SessionRow>, Option<String>) {
    let mut ids: BTreeSet<i64> = BTreeSet::new();
    let mut note = None;
    match dump {
        Some(d) => ids.extend(&d.sessions),
        None => {
            note = Some(
                "the server did not answer `dump`: sessions from `cons` and from the owners of \
                 recipe nodes; ephemerals only for those"
                    .to_string(),
            );
            ids.extend(
                owners
                    .values()
                    .filter(|o| **o != 0 && !recipes::is_ttl_owner(**o)),
            );
        }
    }
    for (_, conns) in cons {
        ids.extend(conns.iter().filter_map(|c| c.session));
    }
    let rows = ids
        .into_iter()
        .map(|id| {
            let conn = cons
                .iter()
                .find_map(|(m, cs)| cs.iter().find(|c| c.session == Some(id)).map(|c| (m, c)));
            let ephemerals = match dump {
                Some(d) => d.ephemerals.get(&id).cloned().unwrap_or_default(),
                None => {
                    let mut e: Vec<String> = owners
                        .iter()
                        .filter(|(_, o)| **o == id)
                        .map(|(p, _)| p.clone())
                        .collect();
                    e.sort();
                    e
                }
            };
            SessionRow {
                id,
                peer: conn.map(|(_, c)| c.peer.clone()),
                member: conn.map(|(m, _)| m.clone()),
                timeout_ms: conn.and_then(|(_, c)| c.timeout_ms),
                ephemerals,
                dashboard: own.contains(&id),
            }
        })
        .collect();
    (rows, note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_come_from_the_connect_string() {
        assert_eq!(
            hosts_of("a:1,b:2/chroot"),
            vec!["a:1".to_string(), "b:2".to_string()]
        );
        assert_eq!(hosts_of("localhost"), vec!["localhost:2181".to_string()]);
    }

    #[test]
    fn sessions_merge_dump_and_cons() {
        let dump = Dump {
            sessions: vec![1, 2],
            ephemerals: [(2, vec!["/e".to_string()])].into(),
        };
        let cons = vec![(
            "m1".to_string(),
            vec![Connection {
                peer: "127.0.0.1:9".into(),
                session: Some(2),
                timeout_ms: Some(5000),
                queued: 0,
                received: 0,
                sent: 0,
            }],
        )];
        let (rows, note) = sessions(Some(&dump), &cons, &HashMap::new(), &[1].into());
        assert!(note.is_none());
        assert_eq!(rows.len(), 2);
        assert!(rows[0].dashboard);
        assert_eq!(rows[1].ephemerals, vec!["/e"]);
        assert_eq!(rows[1].timeout_ms, Some(5000));

        let owners: HashMap<String, i64> = [("/l/lock-0000000001".to_string(), 7)].into();
        let (rows, note) = sessions(None, &[], &owners, &BTreeSet::new());
        assert!(note.is_some());
        assert_eq!(rows[0].id, 7);
        assert_eq!(rows[0].ephemerals, vec!["/l/lock-0000000001"]);
    }
}
