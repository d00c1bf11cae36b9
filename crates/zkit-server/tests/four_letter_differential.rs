//! Four-letter words and AdminServer JSON, zkit against Apache ZooKeeper 3.8: the same small
//! workload (two sessions, a few nodes, ephemerals, a data, a child and an exist watch) runs on
//! both servers, then every word is sent to both and the answers are compared by structure —
//! the same keys and line kinds, each value of the same shape — and by the relations that must
//! hold: our sessions' watches, ephemerals, last ops and timeouts are the same on both; zkit's
//! counts are exact for the workload (Apache's server may be shared with other tests, so its
//! counts are only bounded below).
//!
//! What zkit deliberately does not print is listed here, with why, so that any other
//! difference fails the test. The AdminServer half runs when the Apache server was started
//! with `APACHE_ZK_ADMIN_PORT` (scripts/apache-zk), found through its zoo.cfg in
//! `ZKIT_APACHE_ZK_DIR`.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use common::{four_letter, WAIT};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use zkit_client::{Acls, Client, CreateMode, OneshotWatcher};
use zkit_server::{Server, ServerConfig};

/// `mntr` keys every ZooKeeper monitoring integration reads; both servers must print them.
const MONITORING_KEYS: [&str; 15] = [
    "zk_version",
    "zk_avg_latency",
    "zk_max_latency",
    "zk_min_latency",
    "zk_packets_received",
    "zk_packets_sent",
    "zk_num_alive_connections",
    "zk_outstanding_requests",
    "zk_server_state",
    "zk_znode_count",
    "zk_watch_count",
    "zk_ephemerals_count",
    "zk_approximate_data_size",
    "zk_open_file_descriptor_count",
    "zk_max_file_descriptor_count",
];

/// `conf` keys zkit prints beyond Apache's standalone set (zkit's own settings).
const ZKIT_CONF_EXTRAS: [&str; 4] = [
    "clientPortAddress",
    "extendedTypesEnabled",
    "znode.container.checkIntervalMs",
    "jute.maxbuffer",
];

/// `envi` keys zkit adds; Apache's `java.*` and `os.memory.*` keys have no zkit meaning.
const ZKIT_ENV_EXTRAS: [&str; 2] = ["zkit.version", "os.pid"];

fn jvm_only_env_key(key: &str) -> bool {
    key.starts_with("java.") || key.starts_with("os.memory.")
}

/// One server's side of the workload: the sessions stay open (and the watches armed) while
/// the words are compared.
struct Workload {
    a: Client,
    b: Client,
    _watches: Vec<OneshotWatcher>,
}

impl Workload {
    fn sid_a(&self) -> String {
        format!("{:#x}", self.a.session_id().0)
    }

    fn sid_b(&self) -> String {
        format!("{:#x}", self.b.session_id().0)
    }
}

async fn session(addr: &str) -> Client {
    Client::connector()
        .with_session_timeout(Duration::from_secs(10))
        .connect(addr)
        .await
        .expect("zkit-client session")
}

/// Two sessions; `base` (data "base") with p1 ("hello" then "hello2"), e1 (A's ephemeral) and
/// e2 (B's, "abc"); A watches p1's data (last op getData), B watches `base`'s children and
/// missing `nope` through exists (last op exists).
async fn workload(addr: &str, base: &str) -> Workload {
    let a = session(addr).await;
    let b = session(addr).await;
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    a.create(base, b"base", &persistent).await.unwrap();
    a.create(&format!("{base}/p1"), b"hello", &persistent)
        .await
        .unwrap();
    a.create(&format!("{base}/e1"), b"", &ephemeral)
        .await
        .unwrap();
    b.create(&format!("{base}/e2"), b"abc", &ephemeral)
        .await
        .unwrap();
    a.set_data(&format!("{base}/p1"), b"hello2", None)
        .await
        .unwrap();
    // A child watch, which mntr counts but wchc/wchp/wchs do not list (Apache's
    // `DataTree.getWatches()` reads only the data watch table).
    let (_, _, child_watch) = b.get_and_watch_children(base).await.unwrap();
    let (stat, exist_watch) = b
        .check_and_watch_stat(&format!("{base}/nope"))
        .await
        .unwrap();
    assert!(stat.is_none());
    let (_, _, data_watch) = a.get_and_watch_data(&format!("{base}/p1")).await.unwrap();
    Workload {
        a,
        b,
        _watches: vec![child_watch, exist_watch, data_watch],
    }
}

/// The shape of a value, as monitoring parses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Int,
    Float,
    Hex,
    Text,
}

fn shape(v: &str) -> Shape {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let unsigned = v.strip_prefix('-').unwrap_or(v);
    if digits(unsigned) {
        Shape::Int
    } else if unsigned
        .split_once('.')
        .is_some_and(|(i, f)| digits(i) && digits(f))
    {
        Shape::Float
    } else if v
        .strip_prefix("0x")
        .is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        Shape::Hex
    } else {
        Shape::Text
    }
}

/// `key<sep>value` lines; panics on a line without `sep` (a line kind the parser missed).
fn key_values(word: &str, text: &str, sep: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (k, v) = l
                .split_once(sep)
                .unwrap_or_else(|| panic!("{word}: line without {sep:?}: {l:?}\n{text}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn keys(map: &BTreeMap<String, String>) -> BTreeSet<&str> {
    map.keys().map(String::as_str).collect()
}

/// Same value shape for every key both sides print.
fn same_shapes(word: &str, apache: &BTreeMap<String, String>, zkit: &BTreeMap<String, String>) {
    for (k, z) in zkit {
        if let Some(a) = apache.get(k) {
            assert_eq!(shape(a), shape(z), "{word} {k}: Apache {a:?} vs zkit {z:?}");
        }
    }
}

/// srvr (and the part of stat after the client list).
fn check_server_stats(word: &str, apache: &str, zkit: &str) -> BTreeMap<String, String> {
    let a = key_values(word, apache, ": ");
    let z = key_values(word, zkit, ": ");
    assert_eq!(keys(&a), keys(&z), "{word} keys\n{apache}\n{zkit}");
    same_shapes(word, &a, &z);
    for side in [&a, &z] {
        assert_eq!(side["Mode"], "standalone");
        assert!(side["Zookeeper version"].starts_with("3.8."), "{side:?}");
        assert!(
            side["Zookeeper version"].contains(", built on "),
            "{side:?}"
        );
        let latency: Vec<Shape> = side["Latency min/avg/max"].split('/').map(shape).collect();
        assert_eq!(latency, [Shape::Int, Shape::Float, Shape::Int], "{side:?}");
    }
    z
}

/// A client line's `key=value` fields, in order.
type Fields = Vec<(String, String)>;

/// One `cons`/`stat` client line (` /ip:port[ops](k=v,...)`): its interest ops and fields;
/// `None` for a line of another kind.
fn client_line(line: &str) -> Option<(u8, Fields)> {
    let rest = line.strip_prefix(" /")?;
    let (addr, rest) = rest.split_once('[')?;
    let (ops, rest) = rest.split_once("](")?;
    let fields = rest.strip_suffix(')')?;
    let pairs = fields
        .split(',')
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect::<Option<Vec<_>>>()?;
    addr.parse::<SocketAddr>().ok()?;
    Some((ops.parse().ok()?, pairs))
}

const BRIEF_KEYS: [&str; 3] = ["queued", "recved", "sent"];
const FULL_KEYS: [&str; 14] = [
    "queued", "recved", "sent", "sid", "lop", "est", "to", "lcxid", "lzxid", "lresp", "llat",
    "minlat", "avglat", "maxlat",
];

/// Every `cons` line is a brief or a full client line with Apache's keys in Apache's order
/// (`lcxid` only once a non-negative xid was answered); returns the full lines by session id.
fn cons_lines(server: &str, text: &str) -> BTreeMap<String, Fields> {
    assert!(text.ends_with("\n\n"), "{server} cons: {text:?}");
    let mut by_session = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (ops, pairs) =
            client_line(line).unwrap_or_else(|| panic!("{server} cons line: {line:?}"));
        let names: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
        if names == BRIEF_KEYS {
            continue;
        }
        let expected: Vec<&str> = FULL_KEYS
            .iter()
            .copied()
            .filter(|k| *k != "lcxid" || names.contains(&"lcxid"))
            .collect();
        assert_eq!(names, expected, "{server} cons line: {line}");
        assert_eq!(ops, 1, "{server} cons line: {line}");
        for (k, v) in &pairs {
            let want = match k.as_str() {
                "sid" | "lcxid" | "lzxid" => Shape::Hex,
                "lop" => Shape::Text,
                _ => Shape::Int,
            };
            assert_eq!(shape(v), want, "{server} cons {k}={v}: {line}");
        }
        let sid = pairs[3].1.clone();
        by_session.insert(sid, pairs);
    }
    by_session
}

fn field<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// `wchc` as session → paths, `wchp` as path → sessions: a header line, then tab-indented
/// lines; a blank line at the end.
fn watch_blocks(server: &str, text: &str) -> BTreeMap<String, BTreeSet<String>> {
    assert!(text.ends_with('\n'), "{server}: {text:?}");
    let mut blocks: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current = None;
    for line in text.lines().filter(|l| !l.is_empty()) {
        if let Some(member) = line.strip_prefix('\t') {
            let head: &String = current
                .as_ref()
                .unwrap_or_else(|| panic!("{server}: indented line first: {text:?}"));
            blocks
                .get_mut(head)
                .expect("head")
                .insert(member.to_string());
        } else {
            blocks.entry(line.to_string()).or_default();
            current = Some(line.to_string());
        }
    }
    blocks
}

/// `java.util.Date.toString()`: `Mon Nov 30 02:17:56 UTC 2026`.
fn is_java_date(s: &str) -> bool {
    let parts: Vec<&str> = s.split(' ').collect();
    parts.len() == 6
        && parts[0].len() == 3
        && parts[1].len() == 3
        && parts[2].len() == 2
        && parts[3].len() == 8
        && parts[3].bytes().filter(|b| *b == b':').count() == 2
        && shape(parts[5]) == Shape::Int
}

/// `dump`: every line is one of Apache's line kinds; returns session → ephemeral paths.
fn dump_ephemerals(server: &str, text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut section = "";
    let mut ephemerals: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut owner = String::new();
    let counts = |l: &str, prefix: &str| {
        l.strip_prefix(prefix)
            .and_then(|r| r.strip_suffix("):"))
            .and_then(|r| r.split_once(")/("))
            .is_some_and(|(a, b)| shape(a) == Shape::Int && shape(b) == Shape::Int)
    };
    for line in text.lines() {
        match line {
            "SessionTracker dump:" | "ephemeral nodes dump:" | "Connections dump:" => {
                section = line;
            }
            l if counts(l, "Session Sets (") || counts(l, "Connections Sets (") => {}
            l if l.starts_with("Sessions with Ephemerals (") => {
                assert_eq!(section, "ephemeral nodes dump:", "{server}: {text}");
            }
            l if l.split_once(" expire at ").is_some_and(|(n, at)| {
                shape(n) == Shape::Int && at.strip_suffix(':').is_some_and(is_java_date)
            }) => {}
            l if section == "SessionTracker dump:" => {
                let sid = l.strip_prefix('\t').unwrap_or("");
                assert_eq!(shape(sid), Shape::Hex, "{server} dump line {l:?}");
            }
            l if section == "ephemeral nodes dump:" => {
                if let Some(path) = l.strip_prefix('\t') {
                    assert!(path.starts_with('/'), "{server} dump line {l:?}");
                    ephemerals
                        .entry(owner.clone())
                        .or_default()
                        .insert(path.to_string());
                } else {
                    let sid = l.strip_suffix(':').unwrap_or("");
                    assert_eq!(shape(sid), Shape::Hex, "{server} dump line {l:?}");
                    owner = sid.to_string();
                }
            }
            l if section == "Connections dump:" => {
                let (ip, sid) = l
                    .strip_prefix("\tip: /")
                    .and_then(|r| r.split_once(" sessionId: "))
                    .unwrap_or_else(|| panic!("{server} dump line {l:?}"));
                assert!(ip.parse::<SocketAddr>().is_ok(), "{server} dump line {l:?}");
                assert_eq!(shape(sid), Shape::Hex, "{server} dump line {l:?}");
            }
            l => panic!("{server}: dump line of no known kind: {l:?}\n{text}"),
        }
    }
    assert_eq!(section, "Connections dump:", "{server}: {text}");
    ephemerals
}

/// CRC-32 (zlib's), bit by bit: an implementation independent of the server's table.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for b in bytes {
        crc ^= u32::from(*b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Apache's tree digest (`DigestCalculator`, summed like `AdHash`) of the tree as `client`
/// reads it: every node's path ("/" as ""), data and persisted stat, where the persisted
/// cversion is (visible cversion + children) / 2; nodes under /zookeeper/ count 0. Valid for
/// trees without containers or TTL nodes, whose persisted owner clients do not see.
async fn digest_as_seen(client: &Client) -> i64 {
    let mut sum = 0i64;
    let mut pending = vec!["/".to_string()];
    while let Some(path) = pending.pop() {
        let (data, stat) = client.get_data(&path).await.unwrap();
        for child in client.list_children(&path).await.unwrap() {
            pending.push(format!("{}/{child}", path.trim_end_matches('/')));
        }
        if path.starts_with("/zookeeper/") {
            continue;
        }
        let mut bytes = if path == "/" {
            Vec::new()
        } else {
            path.into_bytes()
        };
        bytes.extend_from_slice(&data);
        for long in [stat.czxid, stat.mzxid, stat.pzxid, stat.ctime, stat.mtime] {
            bytes.extend_from_slice(&long.to_be_bytes());
        }
        let stored_cversion = (stat.cversion + stat.num_children) / 2;
        for int in [stat.version, stored_cversion, stat.aversion] {
            bytes.extend_from_slice(&int.to_be_bytes());
        }
        bytes.extend_from_slice(&stat.ephemeral_owner.to_be_bytes());
        sum = sum.wrapping_add(i64::from(crc32(&bytes)));
    }
    sum
}

/// Every four-letter word, both servers, after the same workload.
#[tokio::test]
async fn four_letter_words_match_apache() {
    let Some(apache) = zkit_testkit::apache_zk() else {
        return;
    };
    let apache_addr: SocketAddr = apache.parse().expect("ZKIT_APACHE_ZK is host:port");
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let zkit_addr = server.addr();
    // One path on both servers, so paths compare as they are.
    let base = zkit_testkit::unique_path("fourletter-diff");
    let on_apache = workload(&apache, &base).await;
    let on_zkit = workload(&zkit_addr.to_string(), &base).await;

    let mut answers = BTreeMap::new();
    for word in [
        "conf", "cons", "dump", "envi", "ruok", "srvr", "stat", "wchs", "wchc", "wchp", "mntr",
        "isro", "hash", "dirs", "gtmk",
    ] {
        let a = four_letter(apache_addr, word).await;
        let z = four_letter(zkit_addr, word).await;
        // ZKIT_DIFF_PRINT=1 shows both answers (with --no-capture) when a check needs a look.
        if std::env::var_os("ZKIT_DIFF_PRINT").is_some() {
            eprintln!("=== {word}\n--- Apache\n{a}\n--- zkit\n{z}");
        }
        answers.insert(word, (a, z));
    }
    let get = |w: &str| {
        let (a, z) = &answers[w];
        (a.as_str(), z.as_str())
    };

    // ruok, isro: the same text.
    for word in ["ruok", "isro"] {
        let (a, z) = get(word);
        assert_eq!(a, z, "{word}");
    }
    let (a, z) = get("gtmk");
    assert_eq!(
        (shape(a), shape(z)),
        (Shape::Int, Shape::Int),
        "gtmk {a:?} {z:?}"
    );

    // srvr / stat: the same keys and value shapes; zkit's counts exact for the workload
    // (5 nodes of a fresh tree + base, p1, e1, e2).
    let (a, z) = get("srvr");
    let srvr = check_server_stats("srvr", a, z);
    assert_eq!(srvr["Node count"], "9", "{z}");
    let (a, z) = get("stat");
    let mut stat_parts = Vec::new();
    for (server, text) in [("Apache", a), ("zkit", z)] {
        let (head, rest) = text
            .split_once("Clients:\n")
            .unwrap_or_else(|| panic!("{server} stat: {text}"));
        let (clients, tail) = rest
            .split_once("\n\n")
            .unwrap_or_else(|| panic!("{server} stat: {text}"));
        for line in clients.lines() {
            let (_, pairs) =
                client_line(line).unwrap_or_else(|| panic!("{server} stat client: {line:?}"));
            let names: Vec<&str> = pairs.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(names, BRIEF_KEYS, "{server} stat client: {line:?}");
        }
        stat_parts.push(format!("{head}{tail}"));
    }
    check_server_stats("stat", &stat_parts[0], &stat_parts[1]);

    // mntr: zkit prints no key Apache does not, every monitoring key on both, the same value
    // shapes; zkit's values exact for the workload.
    let (a, z) = get("mntr");
    let mntr_a = key_values("mntr", a, "\t");
    let mntr_z = key_values("mntr", z, "\t");
    let (keys_a, keys_z) = (keys(&mntr_a), keys(&mntr_z));
    let only_zkit: Vec<&&str> = keys_z.difference(&keys_a).collect();
    assert!(
        only_zkit.is_empty(),
        "mntr keys Apache lacks: {only_zkit:?}"
    );
    for key in MONITORING_KEYS {
        assert!(mntr_a.contains_key(key), "Apache mntr lacks {key}");
        assert!(mntr_z.contains_key(key), "zkit mntr lacks {key}:\n{z}");
    }
    same_shapes("mntr", &mntr_a, &mntr_z);
    let not_in_zkit = keys_a.difference(&keys_z).count();
    eprintln!("mntr: {not_in_zkit} of Apache's keys are not measured by zkit");
    let data_size = 44
        + base.len()
        + "base".len()
        + format!("{base}/p1").len()
        + "hello2".len()
        + format!("{base}/e1").len()
        + format!("{base}/e2").len()
        + "abc".len();
    for (key, want) in [
        ("zk_server_state", "standalone".to_string()),
        ("zk_znode_count", srvr["Node count"].clone()),
        ("zk_ephemerals_count", "2".into()),
        // The data watch, the exist watch and the child watch.
        ("zk_watch_count", "3".into()),
        ("zk_global_sessions", "2".into()),
        ("zk_approximate_data_size", data_size.to_string()),
        // The workload's writes: four creates and a setData (handshakes are not counted).
        ("zk_cnt_updatelatency", "5".into()),
    ] {
        assert_eq!(mntr_z[key], want, "zkit {key}:\n{z}");
    }
    for key in [
        "zk_znode_count",
        "zk_ephemerals_count",
        "zk_watch_count",
        "zk_global_sessions",
        "zk_approximate_data_size",
    ] {
        let at_least: u64 = mntr_z[key].parse().unwrap();
        assert!(
            mntr_a[key].parse::<u64>().unwrap() >= at_least,
            "Apache {key} {} < {at_least}",
            mntr_a[key]
        );
    }
    assert_eq!(mntr_a["zk_server_state"], "standalone");

    // conf: Apache's keys, plus zkit's own settings.
    let (a, z) = get("conf");
    let conf_a = key_values("conf", a, "=");
    let conf_z = key_values("conf", z, "=");
    let (keys_a, keys_z) = (keys(&conf_a), keys(&conf_z));
    assert!(keys_a.is_subset(&keys_z), "conf:\n{a}\n{z}");
    let extras: BTreeSet<&str> = keys_z.difference(&keys_a).copied().collect();
    assert_eq!(
        extras,
        ZKIT_CONF_EXTRAS.into_iter().collect(),
        "conf extras"
    );
    let conf_shapes = |c: &BTreeMap<String, String>| {
        // A path's shape is text; an in-memory zkit server has an empty data dir.
        c.iter()
            .filter(|(k, _)| !k.starts_with("dataDir") && !k.starts_with("dataLogDir"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<BTreeMap<_, _>>()
    };
    same_shapes("conf", &conf_shapes(&conf_a), &conf_shapes(&conf_z));

    // envi: Apache's keys that have a meaning outside a JVM, in the same block.
    let (a, z) = get("envi");
    let (a_body, z_body) = (
        a.strip_prefix("Environment:\n")
            .expect("Apache envi header"),
        z.strip_prefix("Environment:\n").expect("zkit envi header"),
    );
    let env_a = key_values("envi", a_body, "=");
    let env_z = key_values("envi", z_body, "=");
    let (keys_a, keys_z) = (keys(&env_a), keys(&env_z));
    for k in keys_a.difference(&keys_z) {
        assert!(jvm_only_env_key(k), "zkit envi lacks {k}");
    }
    for k in keys_z.difference(&keys_a) {
        assert!(ZKIT_ENV_EXTRAS.contains(k), "zkit envi adds {k}");
    }
    assert_eq!(env_a["os.name"], env_z["os.name"]);
    assert_eq!(env_a["os.arch"], env_z["os.arch"]);
    assert_eq!(env_a["os.version"], env_z["os.version"]);

    // cons: Apache's line format; our sessions' lines agree on what the workload fixed.
    let (a, z) = get("cons");
    let cons_a = cons_lines("Apache", a);
    let cons_z = cons_lines("zkit", z);
    for (sid_apache, sid_zkit, last_op) in [
        (on_apache.sid_a(), on_zkit.sid_a(), "GETD"),
        (on_apache.sid_b(), on_zkit.sid_b(), "EXIS"),
    ] {
        let line_a = cons_a
            .get(&sid_apache)
            .unwrap_or_else(|| panic!("Apache cons lacks {sid_apache}:\n{a}"));
        let line_z = cons_z
            .get(&sid_zkit)
            .unwrap_or_else(|| panic!("zkit cons lacks {sid_zkit}:\n{z}"));
        for line in [line_a, line_z] {
            // A ping may slip in after the workload's last request.
            let lop = field(line, "lop").unwrap();
            assert!(lop == last_op || lop == "PING", "lop {lop}: {line:?}");
        }
        // Same client library, same requests: same timeout and the same last xid.
        for key in ["to", "lcxid"] {
            assert_eq!(field(line_a, key), field(line_z, key), "cons {key}");
        }
    }

    // wchc / wchp / wchs: our sessions watch the same paths on both.
    let (a, z) = get("wchc");
    let (wchc_a, wchc_z) = (watch_blocks("Apache", a), watch_blocks("zkit", z));
    for (apache_sid, zkit_sid, path) in [
        (on_apache.sid_a(), on_zkit.sid_a(), format!("{base}/p1")),
        (on_apache.sid_b(), on_zkit.sid_b(), format!("{base}/nope")),
    ] {
        let want: BTreeSet<String> = [path].into_iter().collect();
        assert_eq!(wchc_a.get(&apache_sid), Some(&want), "Apache wchc:\n{a}");
        assert_eq!(wchc_z.get(&zkit_sid), Some(&want), "zkit wchc:\n{z}");
    }
    let (a, z) = get("wchp");
    let (wchp_a, wchp_z) = (watch_blocks("Apache", a), watch_blocks("zkit", z));
    for (path, apache_sid, zkit_sid) in [
        (format!("{base}/p1"), on_apache.sid_a(), on_zkit.sid_a()),
        (format!("{base}/nope"), on_apache.sid_b(), on_zkit.sid_b()),
    ] {
        assert_eq!(
            wchp_a.get(&path),
            Some(&[apache_sid].into_iter().collect()),
            "Apache wchp:\n{a}"
        );
        assert_eq!(
            wchp_z.get(&path),
            Some(&[zkit_sid].into_iter().collect()),
            "zkit wchp:\n{z}"
        );
    }
    let (a, z) = get("wchs");
    for text in [a, z] {
        let (head, total) = text
            .strip_suffix('\n')
            .and_then(|t| t.split_once("\nTotal watches:"))
            .unwrap_or_else(|| panic!("wchs: {text:?}"));
        let words: Vec<&str> = head.split(' ').collect();
        assert_eq!(
            (words.len(), words[1], words[2], words[4]),
            (5, "connections", "watching", "paths"),
            "wchs: {text:?}"
        );
        assert_eq!(shape(words[0]), Shape::Int);
        assert_eq!(shape(words[3]), Shape::Int);
        assert_eq!(shape(total), Shape::Int);
    }
    assert_eq!(z, "2 connections watching 2 paths\nTotal watches:2\n");

    // dump: Apache's line kinds; our sessions' ephemerals listed alike.
    let (a, z) = get("dump");
    let (eph_a, eph_z) = (dump_ephemerals("Apache", a), dump_ephemerals("zkit", z));
    for (apache_sid, zkit_sid, node) in [
        (on_apache.sid_a(), on_zkit.sid_a(), "e1"),
        (on_apache.sid_b(), on_zkit.sid_b(), "e2"),
    ] {
        let want: BTreeSet<String> = [format!("{base}/{node}")].into_iter().collect();
        assert_eq!(eph_a.get(&apache_sid), Some(&want), "Apache dump:\n{a}");
        assert_eq!(eph_z.get(&zkit_sid), Some(&want), "zkit dump:\n{z}");
    }

    // hash: `zxid-hex: digest` lines. Apache logs one every 128 txns (possibly none yet);
    // zkit prints the digest at its last zxid.
    let (a, z) = get("hash");
    let hash_line = |l: &str| {
        l.split_once(": ").is_some_and(|(zxid, digest)| {
            shape(&format!("0x{zxid}")) == Shape::Hex && shape(digest) == Shape::Int
        })
    };
    assert!(a.lines().all(hash_line), "Apache hash: {a:?}");
    assert!(
        z.ends_with('\n') && z.lines().count() == 1,
        "zkit hash: {z:?}"
    );
    assert!(z.lines().all(hash_line), "zkit hash: {z:?}");
    let zxid = srvr["Zxid"].trim_start_matches("0x");
    assert!(
        z.starts_with(&format!("{zxid}: ")),
        "hash {z:?} vs Zxid {zxid}"
    );
    // zkit's digest is Apache's formula over the tree its clients see (the formula itself is
    // checked against a digest Apache printed, in four_letter.rs's unit tests).
    let seen = digest_as_seen(&on_zkit.a).await;
    assert_eq!(z, format!("{zxid}: {seen}\n"), "zkit hash vs its tree");

    // dirs: the same two keys, sizes in bytes.
    let (a, z) = get("dirs");
    let (dirs_a, dirs_z) = (key_values("dirs", a, ": "), key_values("dirs", z, ": "));
    assert_eq!(keys(&dirs_a), keys(&dirs_z));
    same_shapes("dirs", &dirs_a, &dirs_z);

    // stmk: the 8-byte mask after the word; the answer is the new mask. 306 is the default,
    // so a shared Apache is left as it was.
    let mut stmk = b"stmk".to_vec();
    stmk.extend_from_slice(&306i64.to_be_bytes());
    let mut stmk_answers = Vec::new();
    for addr in [apache_addr, zkit_addr] {
        let mut raw = common::Raw::connect(addr).await;
        raw.send_raw(&stmk).await;
        let mut answer = String::new();
        tokio::time::timeout(WAIT, raw.stream.read_to_string(&mut answer))
            .await
            .expect("stmk answered in time")
            .unwrap();
        stmk_answers.push(answer);
    }
    assert_eq!(stmk_answers, ["306", "306"]);

    // crst, srst last: they zero counters. After crst our sessions' lines show no last op.
    for word in ["crst", "srst"] {
        let a = four_letter(apache_addr, word).await;
        let z = four_letter(zkit_addr, word).await;
        assert_eq!(a, z, "{word}");
    }
    let cons_z = cons_lines("zkit", &four_letter(zkit_addr, "cons").await);
    let cons_a = cons_lines("Apache", &four_letter(apache_addr, "cons").await);
    for (line, server) in [
        (&cons_a[&on_apache.sid_a()], "Apache"),
        (&cons_z[&on_zkit.sid_a()], "zkit"),
    ] {
        let lop = field(line, "lop").unwrap();
        if lop == "NA" {
            assert_eq!(field(line, "lzxid"), Some("0xffffffffffffffff"), "{server}");
            assert_eq!(field(line, "lcxid"), None, "{server}");
        } else {
            assert_eq!(lop, "PING", "{server} after crst: {line:?}");
        }
    }

    drop(on_zkit);
    drop(on_apache);
    server.stop().await;
}

/// The admin port of the Apache server, from the zoo.cfg scripts/apache-zk wrote.
fn apache_admin() -> Option<SocketAddr> {
    let dir = std::env::var("ZKIT_APACHE_ZK_DIR").ok()?;
    let cfg = std::fs::read_to_string(format!("{dir}/zoo.cfg")).ok()?;
    let get = |key: &str| {
        cfg.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
            .map(str::trim)
    };
    if get("admin.enableServer") != Some("true") {
        return None;
    }
    format!("127.0.0.1:{}", get("admin.serverPort")?)
        .parse()
        .ok()
}

async fn http_get_json(addr: SocketAddr, path: &str) -> Value {
    let text = common::http_response(addr, path).await;
    let (head, body) = text.split_once("\r\n\r\n").expect("HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{path}: {head}");
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        // Size line, chunk, CRLF ... until a zero-size chunk.
        let mut rest = body;
        let mut joined = String::new();
        loop {
            let (size, after) = rest.split_once("\r\n").expect("chunk size");
            let size = usize::from_str_radix(size.trim(), 16).expect("hex chunk size");
            if size == 0 {
                break;
            }
            joined.push_str(&after[..size]);
            rest = &after[size + 2..];
        }
        joined
    } else {
        body.to_string()
    };
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

/// Admin objects whose keys are session ids, paths or expiry times.
const DYNAMIC_MAPS: [&str; 4] = [
    "session_id_to_watched_paths",
    "path_to_session_ids",
    "expiry_time_to_session_ids",
    "session_id_to_ephemeral_paths",
];

fn json_shape(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Compares the key sets (and value kinds) of two JSON objects, recursing into objects;
/// `omitted` are Apache's keys zkit leaves out (`a.b` for nested), `extra` zkit's additions.
fn compare_objects(
    at: &str,
    apache: &Value,
    zkit: &Value,
    omitted: &dyn Fn(&str) -> bool,
    extra: &dyn Fn(&str) -> bool,
) {
    let (Value::Object(a), Value::Object(z)) = (apache, zkit) else {
        panic!("{at}: not objects: {apache} / {zkit}");
    };
    for (k, av) in a {
        let path = if at.is_empty() {
            k.clone()
        } else {
            format!("{at}.{k}")
        };
        match z.get(k) {
            None => assert!(omitted(&path), "zkit lacks {path}: {zkit}"),
            Some(zv) => {
                assert_eq!(json_shape(av), json_shape(zv), "{path}: {av} / {zv}");
                // Maps keyed by session, path or time differ by nature between servers.
                if av.is_object() && !DYNAMIC_MAPS.contains(&k.as_str()) {
                    compare_objects(&path, av, zv, omitted, extra);
                }
            }
        }
    }
    for k in z.keys().filter(|k| !a.contains_key(*k)) {
        let path = if at.is_empty() {
            k.clone()
        } else {
            format!("{at}.{k}")
        };
        assert!(extra(&path), "zkit adds {path}: {zkit}");
    }
}

/// AdminServer `/commands/<name>`: Apache 3.8's field names for every command zkit serves.
#[tokio::test]
async fn admin_commands_match_apache() {
    let Some(apache) = zkit_testkit::apache_zk() else {
        return;
    };
    let Some(apache_admin) = apache_admin() else {
        eprintln!(
            "SKIP apache admin: start Apache with APACHE_ZK_ADMIN_PORT set (scripts/apache-zk) \
             and export ZKIT_APACHE_ZK_DIR"
        );
        return;
    };
    let server = Server::start(ServerConfig {
        admin_listen: Some("127.0.0.1:0".parse().unwrap()),
        ..ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    let zkit_admin = server.config().admin_listen.expect("bound admin address");
    let base = zkit_testkit::unique_path("admin-diff");
    let on_apache = workload(&apache, &base).await;
    let on_zkit = workload(&server.addr().to_string(), &base).await;

    // Apache's keys zkit does not produce, and why: response sizes and auth failures are not
    // measured; monitor lists only what zkit measures (checked as a subset below).
    let omitted = |path: &str| {
        matches!(
            path,
            "client_response"
                | "server_stats.client_response_stats"
                | "server_stats.auth_failed_count"
        )
    };
    let nothing = |_: &str| false;
    for name in [
        "ruok",
        "stats",
        "server_stats",
        "connections",
        "watches",
        "watches_by_path",
        "watch_summary",
        "configuration",
        "dump",
        "is_read_only",
        "dirs",
        "hash",
        "get_trace_mask",
    ] {
        let a = http_get_json(apache_admin, &format!("/commands/{name}")).await;
        let z = http_get_json(zkit_admin, &format!("/commands/{name}")).await;
        assert_eq!(z["command"], name, "{z}");
        assert!(z["error"].is_null(), "{z}");
        compare_objects("", &a, &z, &omitted, &nothing);
        // Arrays of objects: our session's entry has the same fields on both.
        if name == "connections" || name == "stats" {
            let entry = |v: &Value, sid: i64| {
                v["connections"]
                    .as_array()
                    .expect("connections array")
                    .iter()
                    .find(|c| name == "stats" || c["session_id"] == sid)
                    .cloned()
                    .unwrap_or_else(|| panic!("{name}: no entry for {sid:#x}: {v}"))
            };
            compare_objects(
                name,
                &entry(&a, on_apache.a.session_id().0),
                &entry(&z, on_zkit.a.session_id().0),
                &nothing,
                &nothing,
            );
        }
        if name == "hash" {
            let entries = |v: &Value| v["digests"].as_array().cloned().unwrap_or_default();
            let template = serde_json::json!({"zxid": 0, "digest": 0, "digest_version": 2});
            for d in entries(&a).iter().chain(&entries(&z)) {
                compare_objects("digests", &template, d, &nothing, &nothing);
            }
            assert_eq!(entries(&z).len(), 1, "{z}");
        }
    }

    // Aliases resolve to the same primary names as on Apache.
    for alias in [
        "conf", "config", "crst", "cons", "env", "envi", "gtmk", "isro", "mntr", "srvr", "srst",
        "stat", "wchs", "wchc", "wchp",
    ] {
        let a = http_get_json(apache_admin, &format!("/commands/{alias}?traceMask=306")).await;
        let z = http_get_json(zkit_admin, &format!("/commands/{alias}?traceMask=306")).await;
        assert_eq!(a["command"], z["command"], "alias {alias}");
    }

    // monitor: zkit's keys are Apache's (a subset), with the same value kinds.
    let a = http_get_json(apache_admin, "/commands/monitor").await;
    let z = http_get_json(zkit_admin, "/commands/monitor").await;
    compare_objects("", &a, &z, &|_| true, &nothing);

    // environment: Apache's non-JVM keys, plus zkit's own.
    let a = http_get_json(apache_admin, "/commands/environment").await;
    let z = http_get_json(zkit_admin, "/commands/environment").await;
    compare_objects("", &a, &z, &|k| jvm_only_env_key(k), &|k| {
        ZKIT_ENV_EXTRAS.contains(&k)
    });

    // An unknown command: 200 with the error in the body, on both.
    let a = http_get_json(apache_admin, "/commands/no_such_command").await;
    let z = http_get_json(zkit_admin, "/commands/no_such_command").await;
    assert_eq!(a, z);

    drop(on_zkit);
    drop(on_apache);
    server.stop().await;
}
