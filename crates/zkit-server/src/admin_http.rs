//! The optional HTTP admin endpoint (ZooKeeper's AdminServer, `admin.serverPort`):
//! `GET /metrics` in Prometheus' text format, `GET /commands` (the list) and
//! `GET /commands/<name>` answering JSON the way ZooKeeper's `JettyAdminServer` does
//! (`ruok`, `stat`/`stats`/`srvr`, `mntr`/`monitor`, `cons`/`connections`, `wchc`/`watches`,
//! `wchp`/`watches_by_path`), each object with `command` and `error` fields.
//!
//! HTTP/1.1 only, on hyper; read-only: nothing here changes the data tree. It asks the pipeline
//! for a snapshot of the counters between batches, like the four-letter words.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Map, Value};
use tokio::net::TcpListener;
use tracing::{debug, info};

use crate::connection::Shared;
use crate::four_letter::{self, WatchView};
use crate::metrics::CoreGauges;
use crate::Error;

/// Binds the admin listener; returns it with its real address (port 0 picks one).
pub(crate) async fn bind(addr: SocketAddr) -> Result<(TcpListener, SocketAddr), Error> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error::Bind { addr, source })?;
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
) -> Result<Response<Full<Bytes>>, Infallible> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Ok(respond(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET\n".into(),
        ));
    }
    let path = req.uri().path().trim_end_matches('/');
    Ok(match path {
        "/metrics" => match gauges(&shared).await {
            Some(g) => respond(
                StatusCode::OK,
                "text/plain; version=0.0.4",
                shared.metrics.prometheus(&g),
            ),
            None => unavailable(),
        },
        "/commands" | "" => {
            let names: Vec<Value> = COMMANDS.iter().map(|(n, _)| json!(n)).collect();
            json_response(
                StatusCode::OK,
                &json!({ "commands": names, "command": "commands", "error": Value::Null }),
            )
        }
        p => match p.strip_prefix("/commands/") {
            Some(name) => command(name, &shared).await,
            None => respond(StatusCode::NOT_FOUND, "text/plain", "not found\n".into()),
        },
    })
}

fn unavailable() -> Response<Full<Bytes>> {
    respond(
        StatusCode::SERVICE_UNAVAILABLE,
        "text/plain",
        "This ZooKeeper instance is not currently serving requests\n".into(),
    )
}

/// Primary names and their aliases, as ZooKeeper's `Commands` registers them.
const COMMANDS: [(&str, &[&str]); 5] = [
    ("ruok", &[]),
    ("stats", &["stat", "srvr"]),
    ("monitor", &["mntr"]),
    ("connections", &["cons"]),
    ("watches", &["wchc"]),
];

const WATCHES_BY_PATH: (&str, &[&str]) = ("watches_by_path", &["wchp"]);

fn primary(name: &str) -> Option<&'static str> {
    COMMANDS
        .iter()
        .chain(std::iter::once(&WATCHES_BY_PATH))
        .find(|(n, aliases)| *n == name || aliases.contains(&name))
        .map(|(n, _)| *n)
}

async fn gauges(shared: &Shared) -> Option<CoreGauges> {
    four_letter::inspect(shared, |core| {
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

/// `/commands/<name>`.
async fn command(name: &str, shared: &Shared) -> Response<Full<Bytes>> {
    let Some(cmd) = primary(name) else {
        return json_response(
            StatusCode::NOT_FOUND,
            &json!({ "command": name, "error": "Command not found" }),
        );
    };
    let mut out = Map::new();
    match cmd {
        "ruok" => {}
        "stats" | "monitor" => {
            let Some(g) = gauges(shared).await else {
                return unavailable();
            };
            let m = &shared.metrics;
            let lat = m.latency();
            let server_stats = json!({
                "packets_sent": m.packets_sent.load(Relaxed),
                "packets_received": m.packets_received.load(Relaxed),
                "max_latency": lat.max_ms,
                "min_latency": lat.min_ms,
                "avg_latency": lat.avg_ms(),
                "outstanding_requests": m.outstanding.load(Relaxed).max(0),
                "num_alive_client_connections": m.connections().len(),
                "last_processed_zxid": g.last_zxid,
                "server_state": "standalone",
                "data_dir_size": 0,
                "log_dir_size": 0,
                "uptime": m.started.elapsed().as_millis() as u64,
            });
            out.insert("version".into(), json!(four_letter::version()));
            if cmd == "stats" {
                out.insert("read_only".into(), json!(false));
                out.insert("server_stats".into(), server_stats);
                out.insert("node_count".into(), json!(g.znodes));
            } else {
                // monitor: mntr's keys without the `zk_` prefix.
                if let Value::Object(stats) = server_stats {
                    out.extend(stats);
                }
                out.insert("znode_count".into(), json!(g.znodes));
                out.insert("watch_count".into(), json!(g.watches));
                out.insert("ephemerals_count".into(), json!(g.ephemerals));
                out.insert("approximate_data_size".into(), json!(g.data_size));
                out.insert("global_sessions".into(), json!(g.sessions));
                out.insert("local_sessions".into(), json!(0));
            }
        }
        "connections" => {
            let view = four_letter::inspect(shared, WatchView::of)
                .await
                .unwrap_or_default();
            let conns: Vec<Value> = shared
                .metrics
                .connections_by_id()
                .into_iter()
                .map(|(id, c)| {
                    let last = c.last();
                    let lat = c.latency();
                    json!({
                        "remote_socket_address": c.peer.to_string(),
                        "interest_ops": 1,
                        "outstanding_requests": c.queued(),
                        "packets_received": c.received.load(Relaxed),
                        "packets_sent": c.sent.load(Relaxed),
                        "session_id": view.conn_sessions.get(&id).map(|s| format!("{s:#x}")),
                        "last_operation": last.op,
                        "last_cxid": last.xid,
                        "last_zxid": last.zxid,
                        "last_response_time": last.at_ms,
                        "last_latency": lat.last_ms,
                        "min_latency": lat.min_ms,
                        "avg_latency": lat.avg_ms(),
                        "max_latency": lat.max_ms,
                    })
                })
                .collect();
            out.insert("connections".into(), json!(conns));
            out.insert("secure_connections".into(), json!([]));
        }
        "watches" | "watches_by_path" => {
            let Some(view) = four_letter::inspect(shared, WatchView::of).await else {
                return unavailable();
            };
            if cmd == "watches" {
                let map: Map<String, Value> = view
                    .session_paths()
                    .into_iter()
                    .map(|(sid, paths)| (sid.to_string(), json!(paths)))
                    .collect();
                out.insert("session_id_to_watched_paths".into(), Value::Object(map));
            } else {
                let map: Map<String, Value> = view
                    .path_sessions()
                    .into_iter()
                    .map(|(path, sids)| (path, json!(sids)))
                    .collect();
                out.insert("path_to_session_ids".into(), Value::Object(map));
            }
        }
        _ => {}
    }
    out.insert("command".into(), json!(cmd));
    out.insert("error".into(), Value::Null);
    json_response(StatusCode::OK, &Value::Object(out))
}
