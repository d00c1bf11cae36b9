//! The harness: which servers to compare, a logging client that turns every reply and event
//! into transcript lines, and `run` which executes one scenario against both servers and
//! compares the transcripts.
//!
//! Apache ZooKeeper comes from `ZKIT_APACHE_ZK=host:port` (started by `scripts/apache-zk`, with
//! extendedTypesEnabled, a 1 s container check interval, tickTime 500 and maxSessionTimeout 40000). zkit is started
//! in-process per scenario by [`start_zkit`], the one place that knows the embedding API.

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use zkit_proto::{ErrorCode, Reader};

use crate::transcript::{compare, Line, Shared, Transcript};
use crate::wire::{body, op, AclEntry, Connected, Incoming, WireClient, REPLY_TIMEOUT};

/// A server under test.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    pub addr: SocketAddr,
    pub server: Server,
}

/// Which implementation a [`Target`] is. Scenarios do not branch on it, except through
/// [`Ctx::known_difference`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Apache,
    Zkit,
}

/// A running embedded zkit server.
pub struct ZkitServer {
    inner: zkit_server::Server,
}

/// Starts zkit configured like `scripts/apache-zk` configures Apache ZooKeeper. The single
/// adapter between this suite and zkit-server's embedding API.
pub async fn start_zkit() -> Result<ZkitServer> {
    let config = zkit_server::ServerConfig {
        extended_types: true,
        container_check_interval: Duration::from_secs(1),
        tick_time: Duration::from_millis(500),
        max_session_timeout: Some(Duration::from_millis(40_000)),
        ..zkit_server::ServerConfig::ephemeral()
    };
    let inner = zkit_server::Server::start(config)
        .await
        .context("start zkit server")?;
    Ok(ZkitServer { inner })
}

impl ZkitServer {
    pub fn addr(&self) -> SocketAddr {
        self.inner.addr()
    }
    pub async fn stop(self) {
        self.inner.stop().await;
    }
}

/// Apache ZooKeeper's address, or `None` (after printing the skip notice) when not configured.
/// Panics when `CI` is set and the address is missing: CI must compare, not skip.
pub fn apache_addr() -> Option<SocketAddr> {
    match std::env::var("ZKIT_APACHE_ZK") {
        Ok(v) if !v.is_empty() => Some(
            v.parse()
                .unwrap_or_else(|e| panic!("ZKIT_APACHE_ZK={v:?} is not host:port ({e})")),
        ),
        _ => {
            if std::env::var_os("CI").is_some() {
                panic!(
                    "ZKIT_APACHE_ZK not set but CI is: the Apache comparison is mandatory in CI"
                );
            }
            println!("SKIP apache: ZKIT_APACHE_ZK not set");
            None
        }
    }
}

/// A scenario: drives one target through `Ctx` and records into its transcript.
pub type Scenario = fn(Ctx) -> Pin<Box<dyn Future<Output = Result<()>> + Send>>;

/// Runs `scenario` against Apache (when configured) and zkit, and asserts equal transcripts.
pub async fn run(name: &str, scenario: Scenario) {
    let apache = match apache_addr() {
        Some(addr) => {
            let t = Target {
                addr,
                server: Server::Apache,
            };
            Some(run_one(name, t, scenario).await)
        }
        None => None,
    };
    if let Some(Err(e)) = &apache {
        panic!("{name}: scenario failed against Apache ZooKeeper: {e}");
    }
    // Development aid: record the oracle's transcript without running zkit.
    if std::env::var_os("ZKIT_CONFORMANCE_APACHE_ONLY").is_some() {
        if let Some(Ok(a)) = &apache {
            println!("{name} (Apache only):\n{}", a.join("\n"));
            return;
        }
    }

    let server = start_zkit().await.expect("start zkit");
    let zkit = run_one(
        name,
        Target {
            addr: server.addr(),
            server: Server::Zkit,
        },
        scenario,
    )
    .await;
    server.stop().await;

    let zkit = match zkit {
        Ok(z) => z,
        Err(e) => match apache {
            Some(Ok(a)) => panic!(
                "{name}: scenario failed against zkit: {e}\napache transcript:\n{}",
                a.join("\n")
            ),
            _ => panic!("{name}: scenario failed against zkit: {e}"),
        },
    };
    match apache {
        Some(Ok(a)) => {
            if let Err(diff) = compare(&a, &zkit) {
                panic!("{name}: {diff}");
            }
            println!("{name}: {} lines identical", a.len());
        }
        _ => println!("{name} (zkit only):\n{}", zkit.join("\n")),
    }
    let findings = CODEC_FINDINGS.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(
        findings, 0,
        "{name}: zkit-proto failed to round-trip {findings} request/reply bodies (printed above)"
    );
}

async fn run_one(name: &str, target: Target, scenario: Scenario) -> Result<Vec<String>, String> {
    let ctx = Ctx::new(target, name);
    let tr = ctx.tr.clone();
    // Every scenario is bounded: its own waits are bounded, and this is the backstop.
    let result = tokio::time::timeout(Duration::from_secs(90), scenario(ctx)).await;
    let (lines, findings) = {
        let tr = tr.lock().expect("transcript lock");
        (tr.finish(), tr.codec_findings.clone())
    };
    if !findings.is_empty() {
        // Printed, and turned into a failure by `run` after the comparison.
        println!(
            "{name}: zkit-proto round-trip findings against {:?}:\n{}",
            target.addr,
            findings.join("\n")
        );
        CODEC_FINDINGS.fetch_add(findings.len(), std::sync::atomic::Ordering::SeqCst);
    }
    match result {
        Ok(Ok(())) => Ok(lines),
        Ok(Err(e)) => Err(format!("{e:#}\ntranscript so far:\n{}", lines.join("\n"))),
        Err(_) => Err(format!(
            "timed out after 90 s\ntranscript so far:\n{}",
            lines.join("\n")
        )),
    }
}

/// Codec findings seen by this test process (one test per process under nextest).
static CODEC_FINDINGS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// What a scenario gets: the target, its transcript and its unique root path.
#[derive(Clone)]
pub struct Ctx {
    pub target: Target,
    pub tr: Shared,
    pub root: String,
}

impl Ctx {
    fn new(target: Target, name: &str) -> Self {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let root = format!("/conformance-{name}-{}-{nanos}", std::process::id());
        Self {
            target,
            tr: Arc::new(Mutex::new(Transcript::new(root.clone()))),
            root,
        }
    }

    /// `root` + `rel` (`rel` starts with '/', or is empty for the root itself).
    pub fn p(&self, rel: &str) -> String {
        format!("{}{rel}", self.root)
    }

    pub fn note(&self, s: impl Into<String>) {
        self.tr.lock().expect("transcript lock").note(s);
    }

    /// Where the transcript is now; pass it to [`Ctx::known_difference`].
    pub fn mark(&self) -> usize {
        self.tr.lock().expect("transcript lock").len()
    }

    /// A deliberate, documented difference between Apache ZooKeeper and zkit: asserts that
    /// the lines logged since `mark` are exactly `apache` (zxids shown as `z*`) on Apache and
    /// exactly `zkit` on zkit, then replaces them with one line naming the difference, the same
    /// on both servers, so the comparison still covers everything around it. Any other
    /// outcome fails the scenario. The caller's comment must say why zkit differs.
    pub fn known_difference(
        &self,
        mark: usize,
        what: &str,
        apache: &[&str],
        zkit: &[&str],
    ) -> Result<()> {
        let observed = self.tr.lock().expect("transcript lock").take_from(mark);
        let expected = match self.target.server {
            Server::Apache => apache,
            Server::Zkit => zkit,
        };
        anyhow::ensure!(
            observed == expected,
            "known difference {what:?}: on {:?} expected {expected:#?}, observed {observed:#?}",
            self.target.server
        );
        self.note(format!(
            "KNOWN DIFFERENCE {what}: apache {apache:?}, zkit {zkit:?}"
        ));
        Ok(())
    }

    /// A new session with a 30 s timeout.
    pub async fn client(&self) -> Result<Client> {
        self.client_with_timeout(30_000).await
    }

    pub async fn client_with_timeout(&self, timeout_ms: i32) -> Result<Client> {
        let (wire, connected) = WireClient::new_session(self.target.addr, timeout_ms).await?;
        let name = self
            .tr
            .lock()
            .expect("transcript lock")
            .register_session(connected.session_id);
        let c = Client {
            name,
            wire,
            tr: self.tr.clone(),
            session_id: connected.session_id,
            passwd: connected.passwd.clone(),
            last_zxid: 0,
            ctx_root: self.root.clone(),
            reply_timeout: REPLY_TIMEOUT,
        };
        c.log_connected("connect", &connected);
        Ok(c)
    }

    /// Reconnects to an existing session (`passwd` may be wrong on purpose). Logs the handshake
    /// outcome; `None` when the server refused (the connection is then closed by us).
    pub async fn resume(
        &self,
        name: &str,
        session_id: i64,
        passwd: &[u8],
        last_zxid: i64,
        timeout_ms: i32,
    ) -> Result<Option<Client>> {
        let (wire, connected) =
            WireClient::resume(self.target.addr, session_id, passwd, last_zxid, timeout_ms).await?;
        let mut c = Client {
            name: name.to_owned(),
            wire,
            tr: self.tr.clone(),
            session_id,
            passwd: passwd.to_vec(),
            last_zxid,
            ctx_root: self.root.clone(),
            reply_timeout: REPLY_TIMEOUT,
        };
        match connected {
            Ok(connected) if connected.timeout > 0 => {
                c.log_connected("reconnect", &connected);
                Ok(Some(c))
            }
            Ok(refused) => {
                c.log_connected("reconnect", &refused);
                // ZooKeeper closes the connection after the "expired" answer.
                let after = c.wire.recv(REPLY_TIMEOUT).await?;
                c.log_incoming("after refusal", &after);
                c.wire.shutdown().await;
                Ok(None)
            }
            Err(other) => {
                c.log_incoming("reconnect", &other);
                c.wire.shutdown().await;
                Ok(None)
            }
        }
    }

    /// Polls `exists(path)` on a fresh silent connection until it reports `want_exists`, up to
    /// `limit`. Reaping and expiry happen on the server's clock; we wait for the outcome, and
    /// the transcript records only the final state (timings differ between servers by design).
    pub async fn wait_exists(
        &self,
        path: &str,
        want_exists: bool,
        limit: Duration,
    ) -> Result<bool> {
        let (mut w, _) = WireClient::new_session(self.target.addr, 30_000).await?;
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let xid = w
                .send_request(op::EXISTS, &body::path_watch(path, false))
                .await?;
            let exists = loop {
                match w.recv(REPLY_TIMEOUT).await? {
                    Incoming::Packet { xid: x, err, .. } if x == xid => break err == 0,
                    Incoming::Packet { .. } => continue,
                    other => anyhow::bail!("poll exists: {other:?}"),
                }
            };
            if exists == want_exists {
                close_quietly(w).await;
                return Ok(true);
            }
            if tokio::time::Instant::now() >= deadline {
                close_quietly(w).await;
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

async fn close_quietly(mut w: WireClient) {
    if w.send_request(op::CLOSE_SESSION, &[]).await.is_ok() {
        let _ = w.recv(Duration::from_secs(5)).await;
    }
    w.shutdown().await;
}

/// A reply as the scenario sees it.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A reply header with this error code (the body is in the transcript).
    Answered { err: i32 },
    /// A close, silence or garbage instead (logged as such).
    NotAnswered,
}

impl Reply {
    pub fn err(&self) -> Option<i32> {
        match self {
            Reply::Answered { err, .. } => Some(*err),
            Reply::NotAnswered => None,
        }
    }
}

/// A session over a [`WireClient`] that logs everything into the transcript.
pub struct Client {
    pub name: String,
    pub wire: WireClient,
    tr: Shared,
    pub session_id: i64,
    pub passwd: Vec<u8>,
    /// Highest reply-header zxid seen (for lastZxidSeen / relativeZxid).
    pub last_zxid: i64,
    ctx_root: String,
    /// How long [`Client::call`] waits for its reply before logging "NO ANSWER".
    pub reply_timeout: Duration,
}

/// Ops whose reply-header zxid is the zxid of their own txn (so it is stable under other
/// clients' traffic and goes into the transcript). A read's header zxid is "last processed",
/// which on a shared Apache server includes other tests' writes, so it is left out.
fn is_write(op: i32) -> bool {
    matches!(
        op,
        op::CREATE
            | op::CREATE2
            | op::CREATE_CONTAINER
            | op::CREATE_TTL
            | op::DELETE
            | op::SET_DATA
            | op::SET_ACL
            | op::MULTI
            | op::CHECK
            | op::CLOSE_SESSION
    )
}

pub fn err_name(err: i32) -> String {
    match ErrorCode::from_i32(err) {
        Some(e) => format!("{e:?}"),
        None => format!("err{err}"),
    }
}

fn event_name(t: i32) -> String {
    match t {
        -1 => "None".into(),
        1 => "NodeCreated".into(),
        2 => "NodeDeleted".into(),
        3 => "NodeDataChanged".into(),
        4 => "NodeChildrenChanged".into(),
        5 => "DataWatchRemoved".into(),
        6 => "ChildWatchRemoved".into(),
        7 => "PersistentWatchRemoved".into(),
        t => format!("event{t}"),
    }
}

impl Client {
    pub fn log(&self, line: Line) {
        self.tr.lock().expect("transcript lock").push(line);
    }

    fn log_connected(&self, what: &str, c: &Connected) {
        let tr = self.tr.lock().expect("transcript lock");
        let sid = if c.session_id == 0 {
            "0".to_owned()
        } else if c.session_id == self.session_id || self.session_id == 0 {
            tr.session_name(c.session_id)
        } else {
            "other".to_owned()
        };
        drop(tr);
        self.log(Line::default().text(format!(
            "[{}] {what} -> proto={} timeout={} session={} passwd_len={} passwd_zero={} readOnly={:?}",
            self.name,
            c.protocol_version,
            c.timeout,
            sid,
            c.passwd.len(),
            c.passwd.iter().all(|b| *b == 0),
            c.read_only
        )));
    }

    /// Logs the outcome of `Incoming` that is not a packet.
    pub fn log_incoming(&self, what: &str, inc: &Incoming) {
        self.log(Line::default().text(format!(
            "[{}] {what} -> {}",
            self.name,
            incoming_label(inc)
        )));
    }

    fn log_event(&self, zxid: i64, body: &[u8]) {
        let mut line = Line::default().text(format!("[{}] EVENT ", self.name));
        let mut r = Reader::new(body);
        match (r.read_i32(), r.read_i32(), r.read_ustring()) {
            (Ok(t), Ok(state), Ok(path)) => {
                line.push_text(format!("{} {path} state={state} zxid=", event_name(t)));
                if zxid == -1 {
                    line.push_text("-1");
                } else {
                    line.push_zxid(zxid);
                }
                if !r.is_empty() {
                    line.push_text(format!(" trailing={}", r.remaining()));
                }
            }
            _ => line.push_text(format!("undecodable {body:02x?}")),
        }
        self.log(line);
    }

    /// Sends a request and waits for its reply, logging events that arrive first. `label`
    /// describes the request in the transcript.
    pub async fn call(&mut self, label: &str, op: i32, body: &[u8]) -> Result<Reply> {
        self.check_request_codec(label, op, body);
        let xid = match self.wire.send_request(op, body).await {
            Ok(xid) => xid,
            Err(_) => return Ok(self.send_failed(label)),
        };
        self.await_reply(label, op, xid).await
    }

    /// Cross-checks `zkit-proto` against the bytes this suite writes by hand: a request body it
    /// decodes must re-encode to the same bytes (trailing bytes aside). Deliberately malformed
    /// requests fail to decode and are skipped: how servers treat them is in the transcript.
    fn check_request_codec(&self, label: &str, op: i32, body: &[u8]) {
        let header = zkit_proto::RequestHeader { xid: 1, op };
        if let Ok(req) = zkit_proto::Request::decode(&header, body) {
            let mut again = bytes::BytesMut::new();
            req.encode_body(&mut again);
            if body.get(..again.len()) != Some(&again[..]) {
                self.tr
                    .lock()
                    .expect("transcript lock")
                    .codec_findings
                    .push(format!(
                        "request {label}: op {op} body {body:02x?} re-encodes as {:02x?}",
                        &again[..]
                    ));
            }
        }
    }

    /// The same for a server's successful reply: `Response::decode` then `encode` must give
    /// back the bytes Apache (or zkit) sent.
    fn check_response_codec(&self, label: &str, op: i32, body: &[u8]) {
        let Some(opcode) = zkit_proto::OpCode::from_i32(op) else {
            return;
        };
        match zkit_proto::Response::decode(opcode, body) {
            Ok(resp) => {
                let mut again = bytes::BytesMut::new();
                resp.encode(&mut again);
                if again[..] != *body {
                    self.tr
                        .lock()
                        .expect("transcript lock")
                        .codec_findings
                        .push(format!(
                            "reply to {label}: {body:02x?} re-encodes as {:02x?}",
                            &again[..]
                        ));
                }
            }
            // Replies with no Response shape (sasl) are expected not to decode.
            Err(zkit_proto::DecodeError::UnknownOp(_)) => {}
            Err(e) => self
                .tr
                .lock()
                .expect("transcript lock")
                .codec_findings
                .push(format!(
                    "reply to {label}: {body:02x?} does not decode: {e}"
                )),
        }
    }

    /// A send on a connection the server already closed: logged like a close.
    fn send_failed(&self, label: &str) -> Reply {
        self.log_incoming(label, &Incoming::Closed);
        Reply::NotAnswered
    }

    /// Like [`Client::call`] with an explicit xid.
    pub async fn call_xid(&mut self, label: &str, xid: i32, op: i32, body: &[u8]) -> Result<Reply> {
        if self
            .wire
            .send_request_with_xid(xid, op, body)
            .await
            .is_err()
        {
            return Ok(self.send_failed(label));
        }
        self.await_reply(label, op, xid).await
    }

    /// Reads until the reply to `xid`, logging watch events and anything unexpected.
    pub async fn await_reply(&mut self, label: &str, op: i32, xid: i32) -> Result<Reply> {
        loop {
            match self.wire.recv(self.reply_timeout).await? {
                Incoming::Packet {
                    xid: -1,
                    zxid,
                    body,
                    ..
                } => self.log_event(zxid, &body),
                Incoming::Packet {
                    xid: x,
                    zxid,
                    err,
                    body,
                } => {
                    if zxid > self.last_zxid {
                        self.last_zxid = zxid;
                    }
                    if x != xid {
                        // Not a reply header (e.g. a handshake-shaped answer): only the
                        // xid and size are stable enough to compare.
                        let err = match ErrorCode::from_i32(err) {
                            Some(e) => format!("{e:?}"),
                            None => "not-an-error-code".to_owned(),
                        };
                        self.log(Line::default().text(format!(
                            "[{}] {label}: UNEXPECTED reply xid {x} (expected {xid}) err={err} body={} bytes",
                            self.name,
                            body.len()
                        )));
                        continue;
                    }
                    let mut line = Line::default().text(format!("[{}] {label} -> ", self.name));
                    if err == 0 {
                        line.push_text("ok");
                    } else {
                        line.push_text(err_name(err));
                    }
                    if is_write(op) {
                        line.push_text(" zxid=");
                        line.push_zxid(zxid);
                    }
                    if err == 0 {
                        self.check_response_codec(label, op, &body);
                        self.render_body(&mut line, op, &body);
                    } else if !body.is_empty() {
                        line.push_text(format!(" +{} body bytes", body.len()));
                    }
                    self.log(line);
                    return Ok(Reply::Answered { err });
                }
                other => {
                    self.log_incoming(label, &other);
                    return Ok(Reply::NotAnswered);
                }
            }
        }
    }

    /// A ping round trip. Per connection the server sends everything queued before the ping's
    /// reply, so events caused by earlier completed writes are logged by the time this returns.
    pub async fn barrier(&mut self) -> Result<()> {
        if self
            .wire
            .send_request_with_xid(-2, op::PING, &[])
            .await
            .is_err()
        {
            self.send_failed("ping");
            return Ok(());
        }
        loop {
            match self.wire.recv(REPLY_TIMEOUT).await? {
                Incoming::Packet {
                    xid: -1,
                    zxid,
                    body,
                    ..
                } => self.log_event(zxid, &body),
                Incoming::Packet { xid: -2, .. } => return Ok(()),
                Incoming::Packet { xid, err, .. } => self.log(Line::default().text(format!(
                    "[{}] ping: UNEXPECTED reply xid {xid} err={}",
                    self.name,
                    err_name(err)
                ))),
                other => {
                    self.log_incoming("ping", &other);
                    return Ok(());
                }
            }
        }
    }

    /// Waits (bounded by `limit` each) for `n` events that the server may send in any order
    /// (e.g. the deletions of one session's ephemerals: ZooKeeper deletes them in hash order),
    /// and logs them sorted.
    pub async fn collect_unordered_events(&mut self, n: usize, limit: Duration) -> Result<()> {
        let mut events = Vec::new();
        for _ in 0..n {
            match self.wire.recv(limit).await? {
                Incoming::Packet {
                    xid: -1,
                    zxid,
                    body,
                    ..
                } => events.push((zxid, body)),
                other => {
                    self.log_incoming("awaiting events", &other);
                    break;
                }
            }
        }
        let mut lines: Vec<(String, i64, Vec<u8>)> = events
            .into_iter()
            .map(|(z, b)| (format!("{b:02x?}"), z, b))
            .collect();
        // Sort by type then path (the body starts with the type, then state, then path).
        lines.sort_by(|a, b| a.2.cmp(&b.2));
        self.log(Line::default().text(format!(
            "[{}] {} events (any order):",
            self.name,
            lines.len()
        )));
        for (_, z, b) in lines {
            self.log_event(z, &b);
        }
        Ok(())
    }

    /// Logs the next thing the server does on this connection (any packet, a close, or
    /// silence for `limit`); true when it was a packet.
    pub async fn observe(&mut self, label: &str, limit: Duration) -> Result<bool> {
        let inc = self.wire.recv(limit).await?;
        let text = match &inc {
            Incoming::Packet { xid, err, body, .. } => {
                format!(
                    "reply xid={xid} err={} body={} bytes",
                    err_name(*err),
                    body.len()
                )
            }
            other => incoming_label(other),
        };
        self.log(Line::default().text(format!("[{}] {label} -> {text}", self.name)));
        Ok(matches!(inc, Incoming::Packet { .. }))
    }

    fn render_body(&self, line: &mut Line, op: i32, body: &[u8]) {
        let mut r = Reader::new(body);
        let ok = self.render_records(line, op, &mut r);
        match ok {
            Ok(()) if r.is_empty() => {}
            Ok(()) => line.push_text(format!(" trailing={}", r.remaining())),
            Err(e) => line.push_text(format!(" UNDECODABLE({e}) {body:02x?}")),
        }
    }

    fn render_records(&self, line: &mut Line, op: i32, r: &mut Reader<'_>) -> Result<()> {
        match op {
            op::CREATE | op::SYNC => line.push_text(format!(" {}", r.read_ustring()?)),
            op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => {
                line.push_text(format!(" {}", r.read_ustring()?));
                self.render_stat(line, r)?;
            }
            op::EXISTS | op::SET_DATA | op::SET_ACL => self.render_stat(line, r)?,
            op::GET_DATA => {
                line.push_text(format!(" data={}", data_str(r.read_opt_buffer()?)));
                self.render_stat(line, r)?;
            }
            op::GET_ACL => {
                line.push_text(format!(" acl={}", render_acl(r)?));
                self.render_stat(line, r)?;
            }
            op::GET_CHILDREN | op::GET_EPHEMERALS => {
                line.push_text(format!(" {}", sorted(r.read_string_vec()?)));
            }
            op::GET_CHILDREN2 => {
                line.push_text(format!(" {}", sorted(r.read_string_vec()?)));
                self.render_stat(line, r)?;
            }
            op::GET_ALL_CHILDREN_NUMBER => line.push_text(format!(" {}", r.read_i32()?)),
            op::ADD_WATCH => line.push_text(format!(" errResponse={}", r.read_i32()?)),
            op::WHO_AM_I => {
                let n = r.read_i32()?;
                let mut items = Vec::new();
                for _ in 0..n.max(0) {
                    let scheme = r.read_ustring()?;
                    let user = r.read_ustring()?;
                    items.push(format!("{scheme}:{user}"));
                }
                line.push_text(format!(" [{}]", items.join(", ")));
            }
            op::MULTI | op::MULTI_READ => {
                line.push_text(" [");
                loop {
                    let ty = r.read_i32()?;
                    let done = r.read_bool()?;
                    let err = r.read_i32()?;
                    if done {
                        line.push_text(format!("] end(type={ty} err={err})"));
                        break;
                    }
                    line.push_text(format!(" {{type={ty} err={}", err_name(err)));
                    match ty {
                        op::CREATE => line.push_text(format!(" {}", r.read_ustring()?)),
                        op::CREATE2 => {
                            line.push_text(format!(" {}", r.read_ustring()?));
                            self.render_stat(line, r)?;
                        }
                        op::SET_DATA => self.render_stat(line, r)?,
                        op::GET_CHILDREN => {
                            line.push_text(format!(" {}", sorted(r.read_string_vec()?)))
                        }
                        op::GET_DATA => {
                            line.push_text(format!(" data={}", data_str(r.read_opt_buffer()?)));
                            self.render_stat(line, r)?;
                        }
                        -1 => line.push_text(format!(" errResponse={}", err_name(r.read_i32()?))),
                        _ => {}
                    }
                    line.push_text("}");
                }
            }
            _ => {
                if !r.is_empty() {
                    let rest = r.read_bytes(r.remaining())?;
                    line.push_text(format!(" body={rest:02x?}"));
                }
            }
        }
        Ok(())
    }

    fn render_stat(&self, line: &mut Line, r: &mut Reader<'_>) -> Result<()> {
        let czxid = r.read_i64()?;
        let mzxid = r.read_i64()?;
        let ctime = r.read_i64()?;
        let mtime = r.read_i64()?;
        let version = r.read_i32()?;
        let cversion = r.read_i32()?;
        let aversion = r.read_i32()?;
        let owner = r.read_i64()?;
        let data_length = r.read_i32()?;
        let num_children = r.read_i32()?;
        let pzxid = r.read_i64()?;
        // A node never modified has mtime == ctime (one txn set both). After a change, only
        // mtime >= ctime is stable: a write within the same millisecond keeps them equal.
        let times = match (czxid == mzxid, ctime.cmp(&mtime)) {
            (true, std::cmp::Ordering::Equal) => "ctime==mtime",
            (true, _) => "ctime!=mtime-on-unmodified-node",
            (false, std::cmp::Ordering::Greater) => "ctime>mtime",
            (false, _) => "ctime<=mtime",
        };
        // ctime must be a plausible wall-clock time in ms (both servers use epoch millis).
        let plausible = ctime > 1_500_000_000_000;
        line.push_text(" stat{czxid=");
        line.push_zxid(czxid);
        line.push_text(" mzxid=");
        line.push_zxid(mzxid);
        line.push_text(" pzxid=");
        line.push_zxid(pzxid);
        let owner = self.tr.lock().expect("transcript lock").session_name(owner);
        line.push_text(format!(
            " {times}{} v={version} cv={cversion} av={aversion} owner={owner} len={data_length} children={num_children}}}",
            if plausible { "" } else { " ctime-not-epoch-ms" }
        ));
        Ok(())
    }

    // ---- conveniences: each logs one line ----

    pub async fn create(&mut self, path: &str, data: &str, flags: i32) -> Result<Reply> {
        let label = format!("create({}, {data:?}, mode={flags})", self.rel(path));
        self.call(
            &label,
            op::CREATE,
            &body::create(path, data.as_bytes(), &crate::wire::open_acl(), flags, None),
        )
        .await
    }

    pub async fn create2(&mut self, path: &str, data: &str, flags: i32) -> Result<Reply> {
        let label = format!("create2({}, {data:?}, mode={flags})", self.rel(path));
        self.call(
            &label,
            op::CREATE2,
            &body::create(path, data.as_bytes(), &crate::wire::open_acl(), flags, None),
        )
        .await
    }

    pub async fn create_container(&mut self, path: &str) -> Result<Reply> {
        let label = format!("createContainer({})", self.rel(path));
        self.call(
            &label,
            op::CREATE_CONTAINER,
            &body::create(path, b"", &crate::wire::open_acl(), 4, None),
        )
        .await
    }

    pub async fn create_ttl(&mut self, path: &str, flags: i32, ttl: i64) -> Result<Reply> {
        let label = format!("createTTL({}, mode={flags}, ttl={ttl})", self.rel(path));
        self.call(
            &label,
            op::CREATE_TTL,
            &body::create(path, b"", &crate::wire::open_acl(), flags, Some(ttl)),
        )
        .await
    }

    pub async fn create_acl(
        &mut self,
        path: &str,
        acl: &[AclEntry],
        label_acl: &str,
    ) -> Result<Reply> {
        let label = format!("create({}, acl={label_acl})", self.rel(path));
        self.call(&label, op::CREATE, &body::create(path, b"", acl, 0, None))
            .await
    }

    pub async fn delete(&mut self, path: &str, version: i32) -> Result<Reply> {
        let label = format!("delete({}, v={version})", self.rel(path));
        self.call(&label, op::DELETE, &body::path_int(path, version))
            .await
    }

    pub async fn exists(&mut self, path: &str, watch: bool) -> Result<Reply> {
        let label = format!("exists({}, watch={watch})", self.rel(path));
        self.call(&label, op::EXISTS, &body::path_watch(path, watch))
            .await
    }

    pub async fn get_data(&mut self, path: &str, watch: bool) -> Result<Reply> {
        let label = format!("getData({}, watch={watch})", self.rel(path));
        self.call(&label, op::GET_DATA, &body::path_watch(path, watch))
            .await
    }

    pub async fn set_data(&mut self, path: &str, data: &str, version: i32) -> Result<Reply> {
        let label = format!("setData({}, {data:?}, v={version})", self.rel(path));
        self.call(
            &label,
            op::SET_DATA,
            &body::set_data(path, data.as_bytes(), version),
        )
        .await
    }

    pub async fn get_acl(&mut self, path: &str) -> Result<Reply> {
        let label = format!("getACL({})", self.rel(path));
        self.call(&label, op::GET_ACL, &body::path(path)).await
    }

    pub async fn set_acl(&mut self, path: &str, acl: &[AclEntry], version: i32) -> Result<Reply> {
        let label = format!(
            "setACL({}, {}, v={version})",
            self.rel(path),
            acl_label(acl)
        );
        self.call(&label, op::SET_ACL, &body::set_acl(path, acl, version))
            .await
    }

    pub async fn get_children(&mut self, path: &str, watch: bool) -> Result<Reply> {
        let label = format!("getChildren({}, watch={watch})", self.rel(path));
        self.call(&label, op::GET_CHILDREN, &body::path_watch(path, watch))
            .await
    }

    pub async fn get_children2(&mut self, path: &str, watch: bool) -> Result<Reply> {
        let label = format!("getChildren2({}, watch={watch})", self.rel(path));
        self.call(&label, op::GET_CHILDREN2, &body::path_watch(path, watch))
            .await
    }

    pub async fn add_watch(&mut self, path: &str, mode: i32) -> Result<Reply> {
        let label = format!("addWatch({}, mode={mode})", self.rel(path));
        self.call(&label, op::ADD_WATCH, &body::path_int(path, mode))
            .await
    }

    pub async fn check_watches(&mut self, path: &str, ty: i32) -> Result<Reply> {
        let label = format!("checkWatches({}, type={ty})", self.rel(path));
        self.call(&label, op::CHECK_WATCHES, &body::path_int(path, ty))
            .await
    }

    pub async fn remove_watches(&mut self, path: &str, ty: i32) -> Result<Reply> {
        let label = format!("removeWatches({}, type={ty})", self.rel(path));
        self.call(&label, op::REMOVE_WATCHES, &body::path_int(path, ty))
            .await
    }

    pub async fn multi(&mut self, label: &str, ops: &[body::SubOp<'_>]) -> Result<Reply> {
        self.call(&format!("multi({label})"), op::MULTI, &body::multi(ops))
            .await
    }

    pub async fn multi_read(&mut self, label: &str, ops: &[body::SubOp<'_>]) -> Result<Reply> {
        self.call(
            &format!("multiRead({label})"),
            op::MULTI_READ,
            &body::multi(ops),
        )
        .await
    }

    /// closeSession, then waits for the server to close the connection.
    pub async fn close(mut self) -> Result<()> {
        let r = self.call("closeSession", op::CLOSE_SESSION, &[]).await?;
        if r.err().is_some() {
            let after = self.wire.recv(REPLY_TIMEOUT).await?;
            self.log_incoming("after closeSession", &after);
        }
        self.wire.shutdown().await;
        Ok(())
    }

    /// Drops the TCP connection without closing the session.
    pub async fn disconnect(self) {
        self.wire.shutdown().await;
    }

    fn rel(&self, path: &str) -> String {
        path.replace(&self.ctx_root, "/R")
    }
}

pub fn incoming_label(inc: &Incoming) -> String {
    match inc {
        Incoming::Packet { xid, err, body, .. } => {
            format!(
                "packet(xid={xid} err={} body={} bytes)",
                err_name(*err),
                body.len()
            )
        }
        Incoming::Closed => "CLOSED".into(),
        Incoming::Silent => "NO ANSWER".into(),
        Incoming::Garbled(g) => format!("GARBLED {g}"),
    }
}

fn data_str(d: Option<Vec<u8>>) -> String {
    match d {
        None => "null".into(),
        Some(d) if d.len() > 64 => {
            let sum = d
                .iter()
                .fold(0u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(*b)));
            format!("<{} bytes, hash {sum:08x}>", d.len())
        }
        Some(d) => format!("{:?}", String::from_utf8_lossy(&d)),
    }
}

fn sorted(mut v: Vec<String>) -> String {
    // ZooKeeper returns children in hash order; clients must not depend on it.
    v.sort();
    format!("{v:?}")
}

fn render_acl(r: &mut Reader<'_>) -> Result<String> {
    let n = r.read_i32()?;
    let mut items = Vec::new();
    for _ in 0..n.max(0) {
        let perms = r.read_i32()?;
        let scheme = r.read_ustring()?;
        let id = r.read_ustring()?;
        items.push(format!("{perms}:{scheme}:{id}"));
    }
    Ok(format!("[{}]", items.join(", ")))
}

pub fn acl_label(acl: &[AclEntry]) -> String {
    let items: Vec<String> = acl
        .iter()
        .map(|a| format!("{}:{}:{}", a.perms, a.scheme, a.id))
        .collect();
    format!("[{}]", items.join(", "))
}
