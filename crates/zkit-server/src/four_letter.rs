//! Four-letter words (`echo srvr | nc host 2181`) in Apache ZooKeeper's output formats, so
//! monitoring scripts written for ZooKeeper work unchanged. Formats follow ZooKeeper 3.8's
//! `StatCommand`, `MonitorCommand`, `ConfCommand` and `EnvCommand`; words outside the whitelist
//! get ZooKeeper's `<cmd> is not executed because it is not in the whitelist.` line.
//!
//! Implemented: ruok, srvr, stat, mntr, conf, envi, isro, wchs, dirs, srst. The remaining
//! words of ZooKeeper's list (cons, crst, dump, gtmk, hash, stmk, wchc, wchp) answer that they
//! are not implemented rather than pretend.

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use tokio::sync::oneshot;
use zkit_core::Stats;

use crate::connection::Shared;
use crate::pipeline::ToCore;

/// The version reported as `Zookeeper version:` / `zk_version`: the ZooKeeper protocol level
/// zkit speaks, tagged with zkit's own version.
pub(crate) fn version() -> String {
    format!("3.8.0-zkit-{}, built on unknown", env!("CARGO_PKG_VERSION"))
}

/// The reply to `word` (one of ZooKeeper's four-letter words).
pub(crate) async fn answer(word: &str, shared: &Shared) -> String {
    if !shared.config.four_letter_words.allows(word) {
        return format!("{word} is not executed because it is not in the whitelist.\n");
    }
    match word {
        "ruok" => "imok".to_string(),
        "isro" => "rw".to_string(),
        "srst" => {
            shared.metrics.reset();
            "Server stats reset.\n".to_string()
        }
        "conf" => conf(shared),
        "envi" => envi(),
        "dirs" => "datadir_size: 0\nlogdir_size: 0\n".to_string(),
        "srvr" | "stat" | "mntr" | "wchs" => {
            let Some(stats) = core_stats(shared).await else {
                return "This ZooKeeper instance is not currently serving requests\n".to_string();
            };
            match word {
                "srvr" => server_stats(shared, &stats, false),
                "stat" => server_stats(shared, &stats, true),
                "wchs" => format!(
                    "{} connections watching {} paths\nTotal watches:{}\n",
                    shared.metrics.connections().len(),
                    stats.watched_paths,
                    stats.watches
                ),
                _ => monitor(shared, &stats),
            }
        }
        other => format!("{other} is not implemented by zkit.\n"),
    }
}

async fn core_stats(shared: &Shared) -> Option<Stats> {
    let (reply, rx) = oneshot::channel();
    shared.to_core.send(ToCore::Stats { reply }).await.ok()?;
    rx.await.ok()
}

/// `srvr`, and `stat` (which adds the client list).
fn server_stats(shared: &Shared, stats: &Stats, with_clients: bool) -> String {
    let m = &shared.metrics;
    let latency = m.latency();
    let mut s = format!("Zookeeper version: {}\n", version());
    if with_clients {
        s.push_str("Clients:\n");
        for c in m.connections() {
            let _ = writeln!(
                s,
                " /{}[1](queued=0,recved={},sent={})",
                c.peer,
                c.received.load(Relaxed),
                c.sent.load(Relaxed)
            );
        }
        s.push('\n');
    }
    let _ = write!(
        s,
        "Latency min/avg/max: {}/{:.1}/{}\nReceived: {}\nSent: {}\nConnections: {}\n\
         Outstanding: {}\nZxid: {:#x}\nMode: standalone\nNode count: {}\n",
        latency.min_ms,
        latency.avg_ms(),
        latency.max_ms,
        m.packets_received.load(Relaxed),
        m.packets_sent.load(Relaxed),
        m.connections().len(),
        m.outstanding.load(Relaxed).max(0),
        stats.last_zxid,
        stats.node_count,
    );
    s
}

/// `mntr`: `key<TAB>value` lines, ZooKeeper's names.
fn monitor(shared: &Shared, stats: &Stats) -> String {
    let m = &shared.metrics;
    let latency = m.latency();
    let lines: Vec<(&str, String)> = vec![
        ("zk_version", version()),
        ("zk_server_state", "standalone".into()),
        ("zk_avg_latency", format!("{:.1}", latency.avg_ms())),
        ("zk_max_latency", latency.max_ms.to_string()),
        ("zk_min_latency", latency.min_ms.to_string()),
        (
            "zk_packets_received",
            m.packets_received.load(Relaxed).to_string(),
        ),
        ("zk_packets_sent", m.packets_sent.load(Relaxed).to_string()),
        (
            "zk_num_alive_connections",
            m.connections().len().to_string(),
        ),
        (
            "zk_outstanding_requests",
            m.outstanding.load(Relaxed).max(0).to_string(),
        ),
        ("zk_znode_count", stats.node_count.to_string()),
        ("zk_watch_count", stats.watches.to_string()),
        ("zk_ephemerals_count", stats.ephemerals.to_string()),
        (
            "zk_approximate_data_size",
            stats.approximate_data_size.to_string(),
        ),
        ("zk_global_sessions", stats.sessions.to_string()),
        ("zk_local_sessions", "0".into()),
        ("zk_uptime", m.started.elapsed().as_millis().to_string()),
        ("zk_last_zxid", format!("{:#x}", stats.last_zxid)),
    ];
    let mut s = String::new();
    for (k, v) in lines {
        let _ = writeln!(s, "{k}\t{v}");
    }
    s
}

/// `conf`: the settings, ZooKeeper's key names.
fn conf(shared: &Shared) -> String {
    let c = &shared.config;
    let (min, max) = c.session_timeout_bounds_ms();
    format!(
        "clientPort={}\nclientPortAddress={}\nsecureClientPort=-1\ntickTime={}\nmaxClientCnxns=0\n\
         minSessionTimeout={min}\nmaxSessionTimeout={max}\nserverId=0\nextendedTypesEnabled={}\n\
         znode.container.checkIntervalMs={}\njute.maxbuffer={}\n",
        c.listen.port(),
        c.listen.ip(),
        c.tick_time.as_millis(),
        c.extended_types,
        c.container_check_interval.as_millis(),
        c.max_frame,
    )
}

/// `envi`: the environment, ZooKeeper's `Environment:` block with Rust-side values.
fn envi() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let os = match std::env::consts::OS {
        "linux" => "Linux".to_string(),
        "macos" => "Mac OS X".to_string(),
        other => other.to_string(),
    };
    let user = std::env::var("USER").unwrap_or_default();
    let home = std::env::var("HOME").unwrap_or_default();
    format!(
        "Environment:\nzookeeper.version={}\nhost.name={host}\nzkit.version={}\nos.name={os}\n\
         os.arch={}\nuser.name={user}\nuser.home={home}\nuser.dir={cwd}\nos.pid={}\n",
        version(),
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH,
        std::process::id(),
    )
}
