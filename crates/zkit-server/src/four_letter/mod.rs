//! Four-letter words (`echo srvr | nc host 2181`) in Apache ZooKeeper's output formats, so
//! monitoring scripts written for ZooKeeper work unchanged. Formats follow ZooKeeper 3.8's
//! `StatCommand`, `MonitorCommand`, `ConsCommand`, `DumpCommand`, `ConfCommand`, `EnvCommand`
//! and `DigestCommand`; words outside the whitelist get ZooKeeper's `<cmd> is not executed
//! because it is not in the whitelist.` line. The AdminServer (`admin_http`) reuses the values
//! computed here, so text and JSON always agree.
//!
//! All of ZooKeeper 3.8's words: conf, cons, crst, dirs, dump, envi, gtmk, hash, isro, mntr,
//! ruok, srst, srvr, stat, stmk, wchc, wchp, wchs. Where zkit differs from Apache:
//! - `hash` prints the digest of the tree as it is now (one `zxid: digest` line, computed on
//!   demand by `zkit_core::digest`, Apache's `DigestCalculator`); Apache prints its history of digests taken every
//!   128 txns, which zkit does not keep.
//! - `cons`: a handshake is not a request to zkit's counters, so a new session shows `lop=NA`
//!   until its first request (Apache: `SESS`), and `lresp` is wall-clock ms since the epoch
//!   (Apache: its monotonic clock).
//! - `gtmk`/`stmk` keep the trace mask, which zkit's tracing does not consult; `dirs` reports
//!   the data directory's size for both directories (zkit keeps log and snapshots together).
//!
//! Nothing here changes the data tree; core state is read between pipeline batches.
//!
//! # Layout
//! - this file: the dispatch ([`answer`]) and the round trips to the pipeline ([`inspect`],
//!   [`core_stats`]);
//! - `views`: what each word reports (shared with the admin endpoint);
//! - `format`: Apache's text layouts and Java's number and date formats.

mod format;
pub(crate) mod views;

use std::fmt::Write;
use std::sync::atomic::Ordering::Relaxed;

use tokio::sync::oneshot;
use zkit_core::{Core, Stats};

use crate::shared::Shared;
use crate::to_core::{Inspection, ToCore};
use format::{conf, cons, dump, server_stats};
use views::{data_dir_size, environment, monitor, ConnView, TreeDigest, WatchView};

/// Apache's `ZK_NOT_SERVING` line.
const NOT_SERVING: &str = "This ZooKeeper instance is not currently serving requests\n";

/// The reply to `word` (one of ZooKeeper's four-letter words). `arg` is the 8-byte argument
/// that follows `stmk` (the new trace mask); ignored by the other words.
pub(crate) async fn answer(word: &str, arg: Option<i64>, shared: &Shared) -> String {
    // Apache counts a four-letter word as one packet received (the connection did that) and
    // one sent, before it runs the command: `srvr` after `srst` shows `Received: 1, Sent: 1`.
    shared.metrics.packets_sent.fetch_add(1, Relaxed);
    if !shared.config.four_letter_words.allows(word) {
        return format!("{word} is not executed because it is not in the whitelist.\n");
    }
    match word {
        "ruok" => "imok".to_string(),
        "gtmk" => shared.metrics.trace_mask.load(Relaxed).to_string(),
        "stmk" => {
            if let Some(mask) = arg {
                shared.metrics.trace_mask.store(mask, Relaxed);
            }
            shared.metrics.trace_mask.load(Relaxed).to_string()
        }
        "crst" => {
            shared.metrics.reset_connections();
            "Connection stats reset.\n".to_string()
        }
        "hash" => match inspect(shared, TreeDigest::of).await {
            // `DigestCommand`: `Long.toHexString(zxid) + ": " + digest`.
            Some(d) => format!("{:x}: {}\n", d.zxid, d.digest),
            None => NOT_SERVING.to_string(),
        },
        "cons" => cons(
            shared,
            &inspect(shared, ConnView::of).await.unwrap_or_default(),
        ),
        "wchc" | "wchp" | "wchs" | "dump" => {
            let Some(view) = inspect(shared, WatchView::of).await else {
                return NOT_SERVING.to_string();
            };
            match word {
                "wchc" => view.by_session(),
                "wchp" => view.by_path(),
                "wchs" => {
                    let summary = view.summary();
                    format!(
                        "{} connections watching {} paths\nTotal watches:{}\n",
                        summary.connections, summary.paths, summary.watches
                    )
                }
                _ => dump(shared, &view),
            }
        }
        "isro" => "rw".to_string(),
        "srst" => {
            shared.metrics.reset();
            "Server stats reset.\n".to_string()
        }
        "conf" => conf(shared),
        "envi" => {
            let mut s = String::from("Environment:\n");
            for (k, v) in environment() {
                let _ = writeln!(s, "{k}={v}");
            }
            s
        }
        "dirs" => {
            // zkit keeps log and snapshots in one directory: both sizes are its size.
            let size = data_dir_size(shared);
            format!("datadir_size: {size}\nlogdir_size: {size}\n")
        }
        "srvr" | "stat" | "mntr" => {
            let Some(stats) = core_stats(shared).await else {
                return NOT_SERVING.to_string();
            };
            match word {
                "srvr" => server_stats(shared, &stats, false),
                "stat" => server_stats(shared, &stats, true),
                _ => {
                    let mut s = String::new();
                    for (k, v) in monitor(shared, &stats) {
                        let _ = writeln!(s, "zk_{k}\t{v}");
                    }
                    s
                }
            }
        }
        other => format!("{other} is not a four-letter word zkit knows.\n"),
    }
}

/// Runs `f` on the core between two pipeline batches; `None` if the pipeline has stopped.
pub(crate) async fn inspect<T: Send + 'static>(
    shared: &Shared,
    f: impl FnOnce(&Core) -> T + Send + 'static,
) -> Option<T> {
    let (reply, rx) = oneshot::channel();
    let job = Box::new(move |core: &Core| {
        // The asker may have gone; nothing to do then.
        let _ = reply.send(f(core));
    });
    shared
        .to_core
        .send(ToCore::Inspect(Inspection(job)))
        .await
        .ok()?;
    rx.await.ok()
}

/// The core's counters, between two pipeline batches; `None` if the pipeline has stopped.
pub(crate) async fn core_stats(shared: &Shared) -> Option<Stats> {
    let (reply, rx) = oneshot::channel();
    shared.to_core.send(ToCore::Stats { reply }).await.ok()?;
    rx.await.ok()
}
