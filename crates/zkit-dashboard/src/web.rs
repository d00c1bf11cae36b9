//! HTTP: the pages, the assets, the event stream and the JSON API.
//!
//! | route | what |
//! |---|---|
//! | `GET /`, `/tree`, `/watches`, `/charts` | the pages, server-rendered from the latest snapshot |
//! | `GET /assets/dashboard.js`, `/assets/dashboard.css` | built into the binary |
//! | `GET /events` | server-sent events: one `snapshot` event per collection (rendered sections + chart points) |
//! | `GET /api/snapshot` | the same event, once, as JSON |
//! | `GET /api/history` | the chart points of the last minutes (events carry only the newest) |
//! | `GET /api/node?path=P` | one node: children, data (base64), stat, ACL; read as the signed-in identity |
//! | `GET /api/me` | who is signed in, and the CSRF token of this browser's dashboard session |
//! | `POST /api/login` | `{"user","password"}`: opens a ZooKeeper session with digest `user:password` |
//! | `POST /api/logout`, `/api/create`, `/api/set`, `/api/delete` | writes: signed in + CSRF token |
//!
//! # Security
//! - A write needs the dashboard-session cookie (`HttpOnly`, `SameSite=Strict`) of a signed-in
//!   user **and** that session's CSRF token in `X-CSRF-Token`; otherwise 403. Bodies must be
//!   `application/json` (a cross-site form cannot send that without a CORS preflight, which
//!   is never granted), and a request whose `Origin` is not this host is refused.
//! - Requests whose `Host` is neither an IP address, `localhost`, nor one of
//!   [`crate::DashboardConfig::allowed_hosts`] are refused (DNS rebinding).
//! - Passwords are kept only in the ZooKeeper session that needs them for reconnects, never
//!   written into a page or a response; the page holds no secret but its CSRF token.
//! - Every response carries `Content-Security-Policy: default-src 'self'` (no inline script,
//!   no third-party origin), `X-Frame-Options: DENY` and `nosniff`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use futures::StreamExt as _;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::collect::Collector;
use crate::model::Snapshot;
use crate::render::{self, Page};
use crate::zk::{CreateKind, Zk};

use crate::DashboardConfig;

/// A response body: a whole buffer or the event stream. The same type as
/// `zkit_server::AdminBody`, so the dashboard mounts into zkit serve's admin endpoint as is.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// The dashboard-session cookie.
pub const COOKIE: &str = "zkit_dashboard";
/// The header carrying the CSRF token.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// Largest request body.
const MAX_BODY: usize = 1 << 20;
/// Signed-in sessions at most; the least recently used goes first.
const MAX_USERS: usize = 64;
/// A signed-in session unused this long is closed.
const USER_IDLE: Duration = Duration::from_secs(30 * 60);

const JS: &str = include_str!("../assets/dashboard.js");
const CSS: &str = include_str!("../assets/dashboard.css");

/// A signed-in browser.
struct User {
    name: String,
    zk: Zk,
    csrf: String,
    last: Instant,
}

/// What the HTTP side shares.
pub struct Web {
    pub(crate) config: DashboardConfig,
    pub(crate) zk: Zk,
    pub(crate) collector: Arc<Collector>,
    users: Mutex<HashMap<String, User>>,
    pub(crate) stop: tokio_util::sync::CancellationToken,
}

impl Drop for Web {
    /// The last [`crate::Dashboard`] clone is gone: stop collecting, close every session.
    fn drop(&mut self) {
        self.stop.cancel();
        self.close_users();
        self.zk.close();
    }
}

impl std::fmt::Debug for Web {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Web")
            .field("server", &self.config.connect)
            .finish_non_exhaustive()
    }
}

fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into()).boxed_unsync()
}

fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Body> {
    let mut r = Response::new(full(body));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

fn json_response(status: StatusCode, value: &Value) -> Response<Body> {
    let mut r = respond(
        status,
        "application/json",
        serde_json::to_vec(value).unwrap_or_default(),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn error(status: StatusCode, message: &str) -> Response<Body> {
    json_response(status, &json!({ "error": message }))
}

fn secure(mut r: Response<Body>) -> Response<Body> {
    let h = r.headers_mut();
    h.insert(
        "content-security-policy",
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
        ),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    r
}

fn random_token() -> String {
    use rand::RngCore as _;
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares without an early exit, so the time taken says nothing of where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn query_param(query: Option<&str>, key: &str) -> Option<String> {
    query?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == key).then(|| percent_decode(v))
    })
}

/// Decodes `%XX` and `+` of a query value (invalid escapes are kept as they are).
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn cookie_of(req: &Request<Incoming>) -> Option<String> {
    req.headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| {
            let (k, v) = kv.trim().split_once('=')?;
            (k == COOKIE).then(|| v.to_string())
        })
}

fn host_allowed(req: &Request<Incoming>, allowed: &[String]) -> bool {
    let Some(host) = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
    else {
        // HTTP/1.0 without Host: nothing to rebind.
        return true;
    };
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else {
        host.rsplit_once(':').map_or(host, |(n, _)| n)
    };
    name.parse::<std::net::IpAddr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || allowed.iter().any(|a| a.eq_ignore_ascii_case(name))
}

fn zk_status(err: &zkit::Error) -> StatusCode {
    match err {
        zkit::Error::NoNode => StatusCode::NOT_FOUND,
        zkit::Error::NodeExists | zkit::Error::BadVersion | zkit::Error::NotEmpty => {
            StatusCode::CONFLICT
        }
        zkit::Error::NoAuth => StatusCode::FORBIDDEN,
        zkit::Error::BadArguments(_) => StatusCode::BAD_REQUEST,
        _ => StatusCode::BAD_GATEWAY,
    }
}

fn zk_error(err: &zkit::Error) -> Response<Body> {
    let text = match err {
        zkit::Error::NoAuth => {
            "not authorized: the node's ACL does not allow this identity".to_string()
        }
        other => other.to_string(),
    };
    error(zk_status(err), &text)
}

#[derive(Deserialize)]
struct Login {
    user: String,
    password: String,
}

#[derive(Deserialize)]
struct CreateReq {
    path: String,
    #[serde(default)]
    data: String,
    #[serde(default)]
    kind: CreateKind,
    #[serde(default)]
    creator_only: bool,
}

#[derive(Deserialize)]
struct SetReq {
    path: String,
    #[serde(default)]
    data: String,
    /// The version the data was read at; `null` or absent means any (`-1`).
    version: Option<i32>,
}

#[derive(Deserialize)]
struct DeleteReq {
    path: String,
    version: Option<i32>,
}

impl Web {
    pub(crate) fn new(
        config: DashboardConfig,
        zk: Zk,
        collector: Arc<Collector>,
        stop: tokio_util::sync::CancellationToken,
    ) -> Web {
        Web {
            config,
            zk,
            collector,
            users: Mutex::new(HashMap::new()),
            stop,
        }
    }

    fn users(&self) -> std::sync::MutexGuard<'_, HashMap<String, User>> {
        self.users.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Closes every signed-in session idle for too long.
    pub(crate) fn expire_users(&self) {
        let mut users = self.users();
        users.retain(|_, u| {
            let keep = u.last.elapsed() < USER_IDLE;
            if !keep {
                u.zk.close();
            }
            keep
        });
    }

    /// Closes every signed-in session.
    pub(crate) fn close_users(&self) {
        for (_, u) in self.users().drain() {
            u.zk.close();
        }
    }

    /// The signed-in user of this request: `(name, zk, csrf)`.
    fn user(&self, req: &Request<Incoming>) -> Option<(String, Zk, String)> {
        let token = cookie_of(req)?;
        let mut users = self.users();
        let u = users.get_mut(&token)?;
        u.last = Instant::now();
        Some((u.name.clone(), u.zk.clone(), u.csrf.clone()))
    }

    /// Answers one request.
    pub async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        if !host_allowed(&req, &self.config.allowed_hosts) {
            return secure(error(
                StatusCode::FORBIDDEN,
                "unknown Host (add it with --allow-host)",
            ));
        }
        let resp = match (req.method().clone(), req.uri().path()) {
            (Method::GET | Method::HEAD, _) => self.get(req).await,
            (Method::POST, _) => self.post(req).await,
            _ => error(StatusCode::METHOD_NOT_ALLOWED, "GET or POST"),
        };
        secure(resp)
    }

    async fn snapshot(&self) -> Arc<Snapshot> {
        let interval = self.config.interval;
        self.collector
            .fresh(interval * 3, Duration::from_secs(5))
            .await
    }

    async fn get(&self, req: Request<Incoming>) -> Response<Body> {
        let path = req.uri().path().to_string();
        let query = req.uri().query().map(str::to_string);
        let html = |page, body: String| {
            let mut r = respond(
                StatusCode::OK,
                "text/html; charset=utf-8",
                render::page(page, &self.config.connect, &body),
            );
            r.headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            r
        };
        match path.as_str() {
            "/" => html(Page::Home, render::home(&*self.snapshot().await)),
            "/tree" => {
                let start = query_param(query.as_deref(), "path").unwrap_or_else(|| "/".into());
                html(
                    Page::Tree,
                    render::tree_page(&*self.snapshot().await, &start),
                )
            }
            "/watches" => html(Page::Watches, render::watches_page(&*self.snapshot().await)),
            "/charts" => html(Page::Charts, render::charts_page(&*self.snapshot().await)),
            "/assets/dashboard.js" => respond(StatusCode::OK, "text/javascript; charset=utf-8", JS),
            "/assets/dashboard.css" => respond(StatusCode::OK, "text/css; charset=utf-8", CSS),
            "/events" => self.events(),
            "/api/snapshot" => {
                let s = self.snapshot().await;
                let mut r = respond(StatusCode::OK, "application/json", s.event.clone());
                r.headers_mut()
                    .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
                r
            }
            "/api/history" => {
                let s = self.snapshot().await;
                json_response(
                    StatusCode::OK,
                    &json!({ "history": s.history, "metrics_source": s.metrics_source }),
                )
            }
            "/api/me" => match self.user(&req) {
                Some((name, _, csrf)) => {
                    json_response(StatusCode::OK, &json!({ "user": name, "csrf": csrf }))
                }
                None => json_response(StatusCode::OK, &json!({ "user": null })),
            },
            "/api/node" => {
                let Some(node) = query_param(query.as_deref(), "path") else {
                    return error(StatusCode::BAD_REQUEST, "path= is required");
                };
                self.collector.touch();
                let zk = self
                    .user(&req)
                    .map_or_else(|| self.zk.clone(), |(_, zk, _)| zk);
                match zk.node(&node).await {
                    Ok(Some(v)) => json_response(
                        StatusCode::OK,
                        &json!({
                            "path": v.path,
                            "children": v.children,
                            "data_b64": v.data.as_ref().map(|d| base64::engine::general_purpose::STANDARD.encode(d)),
                            "stat": v.stat,
                            "acl": v.acl,
                            "notes": v.notes,
                        }),
                    ),
                    Ok(None) => error(StatusCode::NOT_FOUND, "no such node"),
                    Err(e) => zk_error(&e),
                }
            }
            _ => respond(StatusCode::NOT_FOUND, "text/plain", "not found\n"),
        }
    }

    /// `GET /events`: the current snapshot at once, then one event per collection.
    fn events(&self) -> Response<Body> {
        self.collector.touch();
        let rx = self.collector.snapshot.subscribe();
        let stop = self.stop.clone();
        let stream =
            futures::stream::unfold((rx, stop, true), |(mut rx, stop, first)| async move {
                if !first {
                    tokio::select! {
                        () = stop.cancelled() => return None,
                        changed = rx.changed() => changed.ok()?,
                    }
                }
                let event = rx.borrow_and_update().event.clone();
                let frame = format!("event: snapshot\ndata: {event}\n\n");
                Some((
                    Ok::<_, Infallible>(Frame::data(Bytes::from(frame))),
                    (rx, stop, false),
                ))
            });
        let mut r = Response::new(StreamBody::new(stream.boxed()).boxed_unsync());
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        r
    }

    async fn post(&self, req: Request<Incoming>) -> Response<Body> {
        let path = req.uri().path().to_string();
        let json_body = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !json_body {
            return error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "requests must be application/json",
            );
        }
        if let Some(origin) = req
            .headers()
            .get(header::ORIGIN)
            .and_then(|v| v.to_str().ok())
        {
            let host = req
                .headers()
                .get(header::HOST)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            let origin_host = origin.split_once("://").map_or(origin, |(_, h)| h);
            if origin_host != host {
                return error(StatusCode::FORBIDDEN, "cross-origin request refused");
            }
        }
        let user = self.user(&req);
        let csrf_sent = req
            .headers()
            .get(CSRF_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let body = match Limited::new(req.into_body(), MAX_BODY).collect().await {
            Ok(b) => b.to_bytes(),
            Err(_) => return error(StatusCode::PAYLOAD_TOO_LARGE, "body too large"),
        };
        if path == "/api/login" {
            return self.login(&body).await;
        }
        // Every other POST writes: a signed-in identity and its CSRF token first.
        let Some((_, zk, csrf)) = user else {
            return error(StatusCode::FORBIDDEN, "sign in to write");
        };
        if !csrf_sent.is_some_and(|sent| same(&sent, &csrf)) {
            return error(StatusCode::FORBIDDEN, "missing or invalid CSRF token");
        }
        match path.as_str() {
            "/api/logout" => {
                let mut users = self.users();
                users.retain(|_, u| {
                    let keep = !same(&u.csrf, &csrf);
                    if !keep {
                        u.zk.close();
                    }
                    keep
                });
                drop(users);
                let mut r = json_response(StatusCode::OK, &json!({ "user": null }));
                r.headers_mut().insert(
                    header::SET_COOKIE,
                    HeaderValue::from_static(
                        "zkit_dashboard=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0",
                    ),
                );
                r
            }
            "/api/create" => {
                let Ok(c) = serde_json::from_slice::<CreateReq>(&body) else {
                    return error(StatusCode::BAD_REQUEST, "expected {path, data, kind}");
                };
                match zk
                    .create(&c.path, c.data.as_bytes(), c.kind, c.creator_only)
                    .await
                {
                    Ok(created) => {
                        self.collector.wake.notify_one();
                        json_response(StatusCode::OK, &json!({ "created": created }))
                    }
                    Err(e) => zk_error(&e),
                }
            }
            "/api/set" => {
                let Ok(s) = serde_json::from_slice::<SetReq>(&body) else {
                    return error(StatusCode::BAD_REQUEST, "expected {path, data, version}");
                };
                let version = s.version.filter(|v| *v >= 0);
                match zk.set(&s.path, s.data.as_bytes(), version).await {
                    Ok(v) => json_response(StatusCode::OK, &json!({ "version": v })),
                    Err(e) => zk_error(&e),
                }
            }
            "/api/delete" => {
                let Ok(d) = serde_json::from_slice::<DeleteReq>(&body) else {
                    return error(StatusCode::BAD_REQUEST, "expected {path, version}");
                };
                let version = d.version.filter(|v| *v >= 0);
                match zk.delete(&d.path, version).await {
                    Ok(()) => {
                        self.collector.wake.notify_one();
                        json_response(StatusCode::OK, &json!({ "deleted": d.path }))
                    }
                    Err(e) => zk_error(&e),
                }
            }
            _ => error(StatusCode::NOT_FOUND, "no such API"),
        }
    }

    async fn login(&self, body: &[u8]) -> Response<Body> {
        let Ok(login) = serde_json::from_slice::<Login>(body) else {
            return error(StatusCode::BAD_REQUEST, "expected {user, password}");
        };
        if login.user.is_empty() || login.user.contains(':') || login.user.len() > 256 {
            return error(StatusCode::BAD_REQUEST, "a user name without ':'");
        }
        let digest = format!("{}:{}", login.user, login.password);
        let zk = match Zk::connect(&self.config.connect, Some(&digest), &self.config.session).await
        {
            Ok(zk) => zk,
            Err(e) => {
                return error(
                    StatusCode::BAD_GATEWAY,
                    &format!("cannot open a ZooKeeper session: {e}"),
                )
            }
        };
        let token = random_token();
        let csrf = random_token();
        self.collector
            .own_sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(zk.session_id());
        {
            let mut users = self.users();
            if users.len() >= MAX_USERS {
                if let Some(oldest) = users
                    .iter()
                    .min_by_key(|(_, u)| u.last)
                    .map(|(k, _)| k.clone())
                {
                    if let Some(u) = users.remove(&oldest) {
                        u.zk.close();
                    }
                }
            }
            users.insert(
                token.clone(),
                User {
                    name: login.user.clone(),
                    zk,
                    csrf: csrf.clone(),
                    last: Instant::now(),
                },
            );
        }
        let mut r = json_response(StatusCode::OK, &json!({ "user": login.user, "csrf": csrf }));
        if let Ok(v) = HeaderValue::from_str(&format!(
            "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict"
        )) {
            r.headers_mut().insert(header::SET_COOKIE, v);
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_decoded() {
        assert_eq!(
            query_param(Some("a=1&path=%2Fx%20y%2B+z"), "path").as_deref(),
            Some("/x y+ z")
        );
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(query_param(Some("a=1"), "path"), None);
    }

    #[test]
    fn tokens_are_random_and_compared_whole() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert!(same(&a, &a.clone()));
        assert!(!same(&a, &b));
        assert!(!same(&a, &a[..63]));
    }
}
