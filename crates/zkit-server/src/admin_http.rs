//! The optional HTTP admin endpoint (ZooKeeper's AdminServer, `admin.serverPort`):
//! `GET /metrics` in Prometheus' text format, `GET /commands` (the list) and
//! `GET /commands/<name>` answering JSON the way ZooKeeper 3.8's `JettyAdminServer` does, with
//! its field names: every command that maps to a four-letter word (`ruok`, `stats`,
//! `server_stats`, `monitor`, `connections`, `watches`, `watches_by_path`, `watch_summary`,
//! `configuration`, `environment`, `dump`, `dirs`, `hash`, `is_read_only`, `get_trace_mask`,
//! `set_trace_mask`, `stat_reset`, `connection_stat_reset`, and their 4lw aliases), each object
//! with `command` and `error` fields. The values come from `four_letter`, so text and JSON agree.
//!
//! HTTP/1.1 only, on hyper. Nothing here changes the data tree (the reset and trace-mask
//! commands touch counters only). It reads the core between pipeline batches, like the
//! four-letter words.
//!
//! Every other path (`/` included) goes to [`crate::ServerConfig::admin_extra`] when one is set
//! (the CLI mounts the web dashboard there), any method; without one they are 404 (`/` lists
//! the commands, as before).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use tokio::net::TcpListener;
use tracing::{debug, info};

use crate::admin_handler::AdminBody;
use crate::error::Error;
use crate::four_letter::views::{self, ConnInfo, ConnView, MonitorValue, TreeDigest, WatchView};
use crate::four_letter::{core_stats, inspect};
use crate::metrics::CoreGauges;
use crate::shared::Shared;
use zkit_core::Stats;

/// Binds the admin listener; returns it with its real address (port 0 picks one).
pub(crate) async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), Error> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| Error::BindPort {
            what: "admin port",
            addr,
            source,
        })?;
    let bound = listener.local_addr().map_err(|source| Error::BindPort {
        what: "admin port",
        addr,
        source,
    })?;
    Ok((listener, bound))
}

/// Serves admin requests until the server shuts down.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    if let Ok(addr) = listener.local_addr() {
        info!(%addr, "admin endpoint listening");
    }
    loop {
        let (stream, peer) = tokio::select! {
            () = shared.shutdown.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(err) => {
                    debug!(%err, "admin accept failed");
                    continue;
                }
            },
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(|req| handle(req, shared.clone()));
            let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                () = shared.shutdown.cancelled() => {}
                served = conn => if let Err(err) = served {
                    debug!(%peer, %err, "admin connection failed");
                },
            }
        });
    }
}

fn respond(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

fn json_response(status: StatusCode, value: &Value) -> Response<Full<Bytes>> {
    let body = serde_json::to_string_pretty(value).unwrap_or_else(|_| "{}".into());
    respond(status, "application/json", body)
}

async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
) -> Result<Response<AdminBody>, Infallible> {
    let path = req.uri().path();
    let own = path == "/metrics"
        || path.trim_end_matches('/') == "/commands"
        || path.starts_with("/commands/");
    if let (false, Some(extra)) = (own, &shared.config.admin_extra) {
        return Ok(extra.handle(req).await);
    }
    Ok(handle_own(req, shared).await.map(BodyExt::boxed_unsync))
}

async fn handle_own(req: Request<Incoming>, shared: Arc<Shared>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return respond(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET\n".into(),
        );
    }
    let path = req.uri().path().trim_end_matches('/');
    match path {
        "/metrics" => match (gauges(&shared).await, core_stats(&shared).await) {
            (Some(g), Some(stats)) => {
                let mut text = shared.metrics.prometheus(&g);
                apache_prometheus(&mut text, &views::monitor(&shared, &stats), &shared.metrics);
                respond(StatusCode::OK, "text/plain; version=0.0.4", text)
            }
            _ => unavailable(),
        },
        "/commands" | "" => {
            let names: Vec<Value> = COMMANDS.iter().map(|(n, _)| json!(n)).collect();
            json_response(
                StatusCode::OK,
                &json!({ "commands": names, "command": "commands", "error": Value::Null }),
            )
        }
        p => match p.strip_prefix("/commands/") {
            Some(name) => command(name, req.uri().query(), &shared).await,
            None => respond(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
        },
    }
}

fn unavailable() -> Response<Full<Bytes>> {
    respond(
        StatusCode::SERVICE_UNAVAILABLE,
        "text/plain",
        "This ZooKeeper instance is not currently serving requests\n".into(),
    )
}

/// Primary names and their aliases, as ZooKeeper 3.8's `Commands` registers them: every
/// command that maps to a four-letter word. The quorum-only ones (`leader`, `observers`,
/// `voting_view`, `zabstate`, ...) and the JVM/config-file ones (`system_properties`,
/// `initial_configuration`, `last_snapshot`) are not served.
const COMMANDS: [(&str, &[&str]); 18] = [
    ("configuration", &["conf", "config"]),
    ("connection_stat_reset", &["crst"]),
    ("connections", &["cons"]),
    ("dirs", &[]),
    ("dump", &[]),
    ("environment", &["env", "envi"]),
    ("get_trace_mask", &["gtmk"]),
    ("hash", &[]),
    ("is_read_only", &["isro"]),
    ("monitor", &["mntr"]),
    ("ruok", &[]),
    ("server_stats", &["srvr"]),
    ("set_trace_mask", &["stmk"]),
    ("stat_reset", &["srst"]),
    ("stats", &["stat"]),
    ("watch_summary", &["wchs"]),
    ("watches", &["wchc"]),
    ("watches_by_path", &["wchp"]),
];

fn primary(name: &str) -> Option<&'static str> {
    COMMANDS
        .iter()
        .find(|(n, aliases)| *n == name || aliases.contains(&name))
        .map(|(n, _)| *n)
}

/// The gauges Apache's `ZooKeeperServer.registerMetrics` registers, under the names its
/// Prometheus provider exports, so ZooKeeper's published Grafana dashboards read zkit as they
/// read Apache. (Of Apache's list, zkit does not measure the client response sizes and
/// `auth_failed_count`; a standalone server has no `quorum_size`.)
const APACHE_GAUGES: [&str; 20] = [
    "avg_latency",
    "max_latency",
    "min_latency",
    "packets_received",
    "packets_sent",
    "num_alive_connections",
    "outstanding_requests",
    "uptime",
    "znode_count",
    "watch_count",
    "ephemerals_count",
    "approximate_data_size",
    "global_sessions",
    "local_sessions",
    "open_file_descriptor_count",
    "max_file_descriptor_count",
    "connection_drop_probability",
    "outstanding_tls_handshake",
    "non_mtls_remote_conn_count",
    "non_mtls_local_conn_count",
];

/// `ServerMetrics` summaries zkit measures (`FSYNC_TIME`, `READ_LATENCY`, `UPDATE_LATENCY`):
/// Prometheus summaries with `_count` and `_sum`.
const APACHE_SUMMARIES: [&str; 3] = ["fsynctime", "readlatency", "updatelatency"];

/// The quantiles Apache's `PrometheusMetricsProvider` exports for a summary registered at
/// `DetailLevel.ADVANCED` (`readlatency`, `updatelatency`; `fsynctime` is `BASIC`: none).
const APACHE_QUANTILES: [&str; 3] = ["0.5", "0.9", "0.99"];

/// Appends the Apache-named metrics, from the same values `mntr` prints.
fn apache_prometheus(
    out: &mut String,
    monitor: &[(&'static str, MonitorValue)],
    metrics: &crate::metrics::Metrics,
) {
    use std::fmt::Write as _;
    let value = |key: &str| {
        monitor
            .iter()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| match v {
                MonitorValue::Int(i) => Some(i.to_string()),
                MonitorValue::Float(f) => Some(f.to_string()),
                MonitorValue::Text(_) => None,
            })
    };
    for name in APACHE_GAUGES {
        if let Some(v) = value(name) {
            let _ = writeln!(out, "# TYPE {name} gauge\n{name} {v}");
        }
    }
    for name in APACHE_SUMMARIES {
        if let (Some(count), Some(sum)) =
            (value(&format!("cnt_{name}")), value(&format!("sum_{name}")))
        {
            let _ = writeln!(out, "# TYPE {name} summary");
            let histogram = match name {
                "readlatency" => Some(metrics.read_histogram()),
                "updatelatency" => Some(metrics.update_histogram()),
                _ => None,
            };
            // In milliseconds, as Apache records these summaries. Over the server's lifetime,
            // where Apache's are over a sliding window; `NaN` before any request, as the Java
            // client reports an empty window.
            for q in APACHE_QUANTILES.iter().filter(|_| histogram.is_some()) {
                let value = histogram
                    .as_ref()
                    .and_then(|h| h.quantile(q.parse().unwrap_or(0.5)))
                    .map_or_else(|| "NaN".to_string(), |secs| (secs * 1000.0).to_string());
                let _ = writeln!(out, "{name}{{quantile=\"{q}\"}} {value}");
            }
            let _ = writeln!(out, "{name}_count {count}\n{name}_sum {sum}");
        }
    }
}

async fn gauges(shared: &Shared) -> Option<CoreGauges> {
    inspect(shared, |core| {
        let s = core.stats();
        CoreGauges {
            sessions: s.sessions,
            watches: s.watches,
            znodes: s.node_count,
            ephemerals: s.ephemerals,
            data_size: s.approximate_data_size,
            last_zxid: s.last_zxid,
        }
    })
    .await
}

/// `ServerStats` as `stats`/`server_stats` render it. Apache's `client_response_stats` and
/// `auth_failed_count` are left out: zkit does not measure response sizes or auth failures.
fn server_stats_json(shared: &Shared, stats: &Stats) -> Value {
    let m = &shared.metrics;
    let lat = m.latency();
    let dir_size = views::data_dir_size(shared);
    json!({
        "packets_sent": m.packets_sent.load(Relaxed),
        "packets_received": m.packets_received.load(Relaxed),
        // `fsync.warningthresholdms` defaults to 1000 ms, a bucket bound of the histogram.
        "fsync_threshold_exceed_count": m.fsync().count_above(1.0),
        "data_dir_size": dir_size,
        "log_dir_size": dir_size,
        "provider_null": false,
        "server_state": "standalone",
        "last_processed_zxid": stats.last_zxid,
        "outstanding_requests": m.outstanding.load(Relaxed).max(0),
        "avg_latency": (lat.avg_ms() * 10_000.0).round() / 10_000.0,
        "max_latency": lat.max_ms,
        "min_latency": lat.min_ms,
        "num_alive_client_connections": m.connections().len(),
        "uptime": u64::try_from(m.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "non_mtlsremote_conn_count": 0,
        "non_mtlslocal_conn_count": 0,
    })
}

/// `ServerCnxn.getConnectionInfo(brief)`.
fn connection_json(info: &ConnInfo, brief: bool) -> Value {
    let mut out = Map::new();
    out.insert("remote_socket_address".into(), json!(info.peer.to_string()));
    out.insert("interest_ops".into(), json!(info.interest_ops));
    out.insert("outstanding_requests".into(), json!(info.queued));
    out.insert("packets_received".into(), json!(info.received));
    out.insert("packets_sent".into(), json!(info.sent));
    if let (false, Some(x)) = (brief, &info.session) {
        out.insert("session_id".into(), json!(x.id));
        out.insert("last_operation".into(), json!(x.last_op));
        out.insert("established".into(), json!(x.established_ms));
        out.insert("session_timeout".into(), json!(x.timeout));
        out.insert("last_cxid".into(), json!(x.last_cxid));
        out.insert("last_zxid".into(), json!(x.last_zxid));
        out.insert("last_response_time".into(), json!(x.last_response_ms));
        out.insert("last_latency".into(), json!(x.last_latency));
        out.insert("min_latency".into(), json!(x.min_latency));
        out.insert("avg_latency".into(), json!(x.avg_latency));
        out.insert("max_latency".into(), json!(x.max_latency));
    }
    Value::Object(out)
}

/// `/commands/<name>`, with the query string for `set_trace_mask?traceMask=N`.
async fn command(name: &str, query: Option<&str>, shared: &Shared) -> Response<Full<Bytes>> {
    let Some(cmd) = primary(name) else {
        // Apache answers 200 with the error in the JSON body.
        return json_response(
            StatusCode::OK,
            &json!({ "command": name, "error": format!("Unknown command: {name}") }),
        );
    };
    let mut out = Map::new();
    let mut put = |k: &str, v: Value| {
        out.insert(k.to_string(), v);
    };
    let m = &shared.metrics;
    match cmd {
        "ruok" => {}
        "stats" | "server_stats" => {
            let Some(stats) = core_stats(shared).await else {
                return unavailable();
            };
            let view = inspect(shared, ConnView::of).await.unwrap_or_default();
            put("version", json!(views::version()));
            put("read_only", json!(false));
            put("server_stats", server_stats_json(shared, &stats));
            put("node_count", json!(stats.node_count));
            if cmd == "stats" {
                let conns: Vec<Value> = ConnInfo::all(shared, &view)
                    .iter()
                    .map(|c| connection_json(c, true))
                    .collect();
                put("connections", json!(conns));
                put("secure_connections", json!([]));
            }
        }
        "monitor" => {
            let Some(stats) = core_stats(shared).await else {
                return unavailable();
            };
            for (k, v) in views::monitor(shared, &stats) {
                put(
                    k,
                    match v {
                        MonitorValue::Int(i) => json!(i),
                        // Rounded to 4 places like the text (`AvgMinMaxCounter.getAvg`).
                        MonitorValue::Float(f) => json!((f * 10_000.0).round() / 10_000.0),
                        MonitorValue::Text(t) => json!(t),
                    },
                );
            }
        }
        "connections" => {
            let view = inspect(shared, ConnView::of).await.unwrap_or_default();
            // Every client connection; the session fields only where there is a session.
            let conns: Vec<Value> = ConnInfo::all(shared, &view)
                .iter()
                .map(|c| connection_json(c, false))
                .collect();
            put("connections", json!(conns));
            put("secure_connections", json!([]));
        }
        "watches" | "watches_by_path" | "watch_summary" | "dump" => {
            let Some(view) = inspect(shared, WatchView::of).await else {
                return unavailable();
            };
            match cmd {
                "watches" => {
                    let map: Map<String, Value> = view
                        .session_paths()
                        .into_iter()
                        .map(|(sid, paths)| (sid.to_string(), json!(paths)))
                        .collect();
                    put("session_id_to_watched_paths", Value::Object(map));
                }
                "watches_by_path" => {
                    let map: Map<String, Value> = view
                        .path_sessions()
                        .into_iter()
                        .map(|(path, sids)| (path, json!(sids)))
                        .collect();
                    put("path_to_session_ids", Value::Object(map));
                }
                "watch_summary" => {
                    let summary = view.summary();
                    put("num_connections", json!(summary.connections));
                    put("num_paths", json!(summary.paths));
                    put("num_total_watches", json!(summary.watches));
                }
                _ => {
                    let expiry: Map<String, Value> = views::sessions_by_expiry(&view)
                        .into_iter()
                        .map(|(at, sids)| (at.to_string(), json!(sids)))
                        .collect();
                    let ephemerals: Map<String, Value> = view
                        .ephemerals
                        .iter()
                        .map(|(sid, paths)| (sid.to_string(), json!(paths)))
                        .collect();
                    put("expiry_time_to_session_ids", Value::Object(expiry));
                    put("session_id_to_ephemeral_paths", Value::Object(ephemerals));
                }
            }
        }
        "configuration" => {
            let c = &shared.config;
            let (min, max) = c.session_timeout_bounds_ms();
            let dir = c.data_dir_display();
            put("client_port", json!(c.listen.port()));
            put("data_dir", json!(dir));
            put("data_log_dir", json!(dir));
            put(
                "tick_time",
                json!(u64::try_from(c.tick_time.as_millis()).unwrap_or(u64::MAX)),
            );
            put("max_client_cnxns", json!(c.limits.max_client_cnxns));
            put("min_session_timeout", json!(min));
            put("max_session_timeout", json!(max));
            put("server_id", json!(0));
            put("client_port_listen_backlog", json!(-1));
        }
        "environment" => {
            for (k, v) in views::environment() {
                put(k, json!(v));
            }
        }
        "dirs" => {
            let size = views::data_dir_size(shared);
            put("datadir_size", json!(size));
            put("logdir_size", json!(size));
        }
        "hash" => {
            let Some(d) = inspect(shared, TreeDigest::of).await else {
                return unavailable();
            };
            put(
                "digests",
                json!([{
                    "zxid": d.zxid,
                    "digest": d.digest,
                    "digest_version": zkit_core::digest::DIGEST_VERSION,
                }]),
            );
        }
        "is_read_only" => put("read_only", json!(false)),
        "get_trace_mask" => put("tracemask", json!(m.trace_mask.load(Relaxed))),
        "set_trace_mask" => {
            let mask = query
                .into_iter()
                .flat_map(|q| q.split('&'))
                .find_map(|kv| kv.strip_prefix("traceMask="))
                .and_then(|v| v.parse::<i64>().ok());
            let Some(mask) = mask else {
                return json_response(
                    StatusCode::OK,
                    &json!({
                        "command": cmd,
                        "error": "setTraceMask requires long traceMask argument",
                    }),
                );
            };
            m.trace_mask.store(mask, Relaxed);
            put("tracemask", json!(mask));
        }
        "stat_reset" => m.reset(),
        "connection_stat_reset" => m.reset_connections(),
        _ => {}
    }
    out.insert("command".into(), json!(cmd));
    out.insert("error".into(), Value::Null);
    json_response(StatusCode::OK, &Value::Object(out))
}
