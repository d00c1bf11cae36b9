//! The dashboard over HTTP (no browser), against an embedded zkit server and, when
//! `ZKIT_APACHE_ZK` is set, Apache ZooKeeper: writes need a signed-in identity and its CSRF
//! token; ACLs apply to the identity; the collector finds real recipes with their holders and
//! waiters; the event stream pushes changes; zkit serve's admin endpoint mounts the dashboard.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{dashboard, eventually, http, session, sid, zkit_server};
use zkit::lock::Mutex;

/// The server addresses to test against: Apache (when set) and an embedded zkit server.
async fn targets() -> (Vec<String>, Option<zkit_server::Server>) {
    let server = zkit_server().await;
    let mut addrs = vec![server.addr().to_string()];
    if let Some(apache) = zkit_testkit::apache_zk() {
        addrs.push(apache);
    }
    (addrs, Some(server))
}

/// Deletes `path` and everything below it (tests share Apache ZooKeeper: leave nothing).
async fn delete_tree(session: &zkit::Session, path: &str) {
    let client = session.client();
    let mut stack = vec![path.to_string()];
    let mut order = Vec::new();
    while let Some(p) = stack.pop() {
        if let Ok(children) = client.list_children(&p).await {
            stack.extend(children.iter().map(|c| format!("{p}/{c}")));
        }
        order.push(p);
    }
    for p in order.iter().rev() {
        let _ = client.delete(p, None).await;
    }
}

fn cookie_of(reply: &common::Reply) -> String {
    let set = reply.header("set-cookie").expect("Set-Cookie");
    set.split(';').next().expect("name=value").to_string()
}

async fn login(addr: std::net::SocketAddr, user: &str, password: &str) -> (String, String) {
    let body = serde_json::json!({ "user": user, "password": password }).to_string();
    let r = http(
        addr,
        "POST",
        "/api/login",
        &[("Content-Type", "application/json")],
        Some(&body),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(!r.body.contains(password), "the password is never echoed");
    let set = r.header("set-cookie").expect("cookie").to_string();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    (
        cookie_of(&r),
        r.json()["csrf"].as_str().expect("csrf").to_string(),
    )
}

/// POSTs `body` to the dashboard's `/api/create` with `headers`.
async fn post_create(
    addr: std::net::SocketAddr,
    headers: &[(&str, &str)],
    body: &str,
) -> common::Reply {
    http(addr, "POST", "/api/create", headers, Some(body)).await
}

#[tokio::test]
async fn writes_need_a_signed_in_identity_and_its_csrf_token() {
    let (addrs, _server) = targets().await;
    for zk in addrs {
        let d = dashboard(&zk).await;
        let client = session(&zk).await;
        let path = zkit_testkit::unique_path("dash-write");
        let create = serde_json::json!({ "path": path, "data": "hello" }).to_string();
        let json = ("Content-Type", "application/json");
        let exists = |p: String| {
            let c = client.client();
            async move { c.check_stat(&p).await.expect("stat").is_some() }
        };

        // Not signed in: refused, nothing written.
        let r = post_create(d.addr, &[json], &create).await;
        assert_eq!(r.status, 403, "{zk}: {}", r.body);
        assert!(
            !exists(path.clone()).await,
            "{zk}: an unauthenticated write happened"
        );

        let (cookie, csrf) = login(d.addr, "alice", "secret-pw").await;
        let with_cookie = ("Cookie", cookie.as_str());

        // Signed in, but no token, or a wrong one: refused.
        let r = post_create(d.addr, &[json, with_cookie], &create).await;
        assert_eq!(r.status, 403, "{zk}: {}", r.body);
        assert!(r.body.contains("CSRF"), "{}", r.body);
        let wrong = "0".repeat(csrf.len());
        let r = post_create(
            d.addr,
            &[json, with_cookie, ("X-CSRF-Token", &wrong)],
            &create,
        )
        .await;
        assert_eq!(r.status, 403, "{zk}: {}", r.body);
        // A token without the cookie is worth nothing either.
        let r = post_create(d.addr, &[json, ("X-CSRF-Token", &csrf)], &create).await;
        assert_eq!(r.status, 403, "{zk}: {}", r.body);
        // Cross-site and non-JSON requests are refused before anything else.
        let r = post_create(
            d.addr,
            &[
                json,
                with_cookie,
                ("X-CSRF-Token", &csrf),
                ("Origin", "http://evil.example"),
            ],
            &create,
        )
        .await;
        assert_eq!(r.status, 403, "{zk}: {}", r.body);
        let r = post_create(
            d.addr,
            &[
                ("Content-Type", "text/plain"),
                with_cookie,
                ("X-CSRF-Token", &csrf),
            ],
            &create,
        )
        .await;
        assert_eq!(r.status, 415, "{zk}: {}", r.body);
        assert!(
            !exists(path.clone()).await,
            "{zk}: a refused write happened"
        );

        // Cookie and token: written, as the server shows.
        let r = post_create(
            d.addr,
            &[json, with_cookie, ("X-CSRF-Token", &csrf)],
            &create,
        )
        .await;
        assert_eq!(r.status, 200, "{zk}: {}", r.body);
        let (data, _) = client.client().get_data(&path).await.expect("created");
        assert_eq!(data, b"hello");

        // /api/me gives the token to the page of the same browser only (cookie).
        let me = http(d.addr, "GET", "/api/me", &[with_cookie], None)
            .await
            .json();
        assert_eq!(me["user"], "alice");
        assert_eq!(me["csrf"], csrf.as_str());
        let anonymous = http(d.addr, "GET", "/api/me", &[], None).await.json();
        assert!(anonymous["user"].is_null() && anonymous.get("csrf").is_none());

        // Logging out ends the identity: the old cookie and token write nothing.
        let r = http(
            d.addr,
            "POST",
            "/api/logout",
            &[json, with_cookie, ("X-CSRF-Token", &csrf)],
            Some("{}"),
        )
        .await;
        assert_eq!(r.status, 200);
        let del = serde_json::json!({ "path": path, "version": 0 }).to_string();
        let r = http(
            d.addr,
            "POST",
            "/api/delete",
            &[json, with_cookie, ("X-CSRF-Token", &csrf)],
            Some(&del),
        )
        .await;
        assert_eq!(r.status, 403, "{zk}: {}", r.body);
        assert!(exists(path.clone()).await);
        client.client().delete(&path, None).await.expect("cleanup");
    }
}

#[tokio::test]
async fn acls_apply_to_the_signed_in_identity_and_set_checks_the_version() {
    let (addrs, _server) = targets().await;
    for zk in addrs {
        let d = dashboard(&zk).await;
        let path = zkit_testkit::unique_path("dash-acl");
        let json = ("Content-Type", "application/json");
        let (alice, alice_csrf) = login(d.addr, "alice", "a-pw").await;
        let (bob, bob_csrf) = login(d.addr, "bob", "b-pw").await;
        let post = |cookie: String, csrf: String, api: &'static str, body: serde_json::Value| {
            let addr = d.addr;
            async move {
                http(
                    addr,
                    "POST",
                    api,
                    &[json, ("Cookie", &cookie), ("X-CSRF-Token", &csrf)],
                    Some(&body.to_string()),
                )
                .await
            }
        };
        let r = post(
            alice.clone(),
            alice_csrf.clone(),
            "/api/create",
            serde_json::json!({ "path": path, "data": "v0", "creator_only": true }),
        )
        .await;
        assert_eq!(r.status, 200, "{zk}: {}", r.body);

        // Bob may not read or write alice's node; the page says so.
        let q = format!("/api/node?path={path}");
        let view = http(d.addr, "GET", &q, &[("Cookie", &bob)], None)
            .await
            .json();
        assert!(view["data_b64"].is_null(), "{view}");
        assert!(
            view["notes"].to_string().contains("data: not authorized"),
            "{view}"
        );
        let r = post(
            bob.clone(),
            bob_csrf.clone(),
            "/api/set",
            serde_json::json!({ "path": path, "data": "bob", "version": 0 }),
        )
        .await;
        assert_eq!(r.status, 403, "{zk}: {}", r.body);

        // Alice reads it; a stale version is refused, the current one accepted.
        let view = http(d.addr, "GET", &q, &[("Cookie", &alice)], None)
            .await
            .json();
        assert_eq!(view["data_b64"], "djA=", "{view}"); // "v0"
        assert_eq!(view["acl"][0]["scheme"], "digest");
        let r = post(
            alice.clone(),
            alice_csrf.clone(),
            "/api/set",
            serde_json::json!({ "path": path, "data": "v1", "version": 0 }),
        )
        .await;
        assert_eq!(r.status, 200, "{zk}: {}", r.body);
        assert_eq!(r.json()["version"], 1);
        let r = post(
            alice.clone(),
            alice_csrf.clone(),
            "/api/set",
            serde_json::json!({ "path": path, "data": "v2", "version": 0 }),
        )
        .await;
        assert_eq!(
            r.status, 409,
            "{zk}: a stale version must be refused: {}",
            r.body
        );
        let r = post(
            alice,
            alice_csrf,
            "/api/delete",
            serde_json::json!({ "path": path, "version": 1 }),
        )
        .await;
        assert_eq!(r.status, 200, "{zk}: {}", r.body);
    }
}

#[tokio::test]
async fn the_collector_shows_lock_holders_waiters_elections_and_queues() {
    let (addrs, _server) = targets().await;
    for zk in addrs {
        let base = zkit_testkit::unique_path("dash-recipes");
        let d = common::dashboard_scoped(&zk, &base).await;
        // A directory whose name ends in ten digits, as a date (or the tail of a uuid) may:
        // it is not a recipe's member, and the scan must look inside it.
        let root = format!("{base}/orders-2026120401");
        let lock_path = format!("{root}/lock");
        let (a, b, c) = (session(&zk).await, session(&zk).await, session(&zk).await);
        let held = Mutex::new(&a, &lock_path).lock().await.expect("lock");
        // Two waiters, b before c.
        let waiter = |s: zkit::Session| {
            let p = lock_path.clone();
            tokio::spawn(async move { Mutex::new(&s, &p).lock().await })
        };
        let contenders = |n: usize| {
            let client = a.client();
            let p = lock_path.clone();
            async move { client.list_children(&p).await.map_or(0, |c| c.len()) == n }
        };
        let wb = waiter(b.clone());
        eventually("b waits", Duration::from_secs(10), || contenders(2)).await;
        let wc = waiter(c.clone());
        eventually("c waits", Duration::from_secs(10), || contenders(3)).await;

        let latch = zkit::election::LeaderLatch::start(&a, &format!("{root}/election"), "a")
            .expect("latch");
        latch
            .await_leadership_for(Duration::from_secs(10))
            .await
            .expect("leads");
        let queue = zkit::queue::Queue::new(&b, &format!("{root}/queue")).expect("queue");
        for i in 0..3u8 {
            queue.offer(&[i]).await.expect("offer");
        }

        let dash = Arc::new(d.dashboard.clone());
        let (aid, bid, cid) = (a.session_id(), b.session_id(), c.session_id());
        let token = held.fencing_token();
        // What the page must show, checked on each new collection until it holds.
        let check = {
            let (root, lock_path) = (root.clone(), lock_path.clone());
            move |s: &zkit_dashboard::model::Snapshot| -> Result<(), String> {
                let lock = s
                    .overview
                    .locks
                    .iter()
                    .find(|l| l.path == lock_path)
                    .ok_or("the lock is not listed")?;
                let holders: Vec<(Option<i64>, i64)> =
                    lock.holders.iter().map(|h| (h.session, h.token)).collect();
                let waiting: Vec<Option<i64>> = lock.waiters.iter().map(|w| w.session).collect();
                if lock.kind != "mutex"
                    || holders != vec![(Some(aid), token)]
                    || waiting != vec![Some(bid), Some(cid)]
                {
                    return Err(format!("wrong lock view: {lock:?}"));
                }
                let leader = s
                    .overview
                    .elections
                    .iter()
                    .find(|e| e.path.starts_with(&root))
                    .and_then(|e| e.leader.as_ref())
                    .and_then(|l| l.session);
                if leader != Some(aid) {
                    return Err(format!("leader {leader:?}"));
                }
                let depth = s
                    .overview
                    .queues
                    .iter()
                    .find(|q| q.path.starts_with(&root))
                    .map(|q| q.depth);
                if depth != Some(3) {
                    return Err(format!("queue depth {depth:?}"));
                }
                // Sessions with their ephemerals: the holder owns its lock node.
                let owns = s
                    .sessions
                    .iter()
                    .any(|r| r.id == aid && r.ephemerals.iter().any(|p| p.starts_with(&lock_path)));
                if !owns {
                    return Err("the holder's session and its lock node are not listed".into());
                }
                Ok(())
            }
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let Err(last) = check(&*dash.snapshot().await) else {
                break;
            };
            assert!(tokio::time::Instant::now() < deadline, "{zk}: {last}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The home page shows the same, rendered on the server.
        let page = http(d.addr, "GET", "/", &[], None).await;
        assert!(page.body.contains(&lock_path), "{zk}");
        assert!(page.body.contains(&sid(aid)));
        assert!(page.body.contains(&sid(cid)));

        // The holder releases: b holds, c waits; the next collection says so.
        held.release().await.expect("release");
        let next = wb.await.expect("join").expect("b locks");
        let dash2 = dash.clone();
        let p = lock_path.clone();
        eventually("b is shown as holder", Duration::from_secs(10), move || {
            let dash = dash2.clone();
            let p = p.clone();
            async move {
                let s = dash.snapshot().await;
                s.overview.locks.iter().any(|l| {
                    l.path == p
                        && l.holders.first().and_then(|h| h.session) == Some(bid)
                        && l.waiters.len() == 1
                })
            }
        })
        .await;
        next.release().await.expect("release");
        wc.await
            .expect("join")
            .expect("c locks")
            .release()
            .await
            .expect("release");
        latch.close().await;
        delete_tree(&a, &base).await;
    }
}

#[tokio::test]
async fn the_event_stream_pushes_a_new_node_without_a_request() {
    let server = zkit_server().await;
    let zk = server.addr().to_string();
    let d = common::dashboard(&zk).await;
    let name = zkit_testkit::unique_path("dash-sse");
    use tokio::io::AsyncWriteExt as _;
    let mut stream = tokio::net::TcpStream::connect(d.addr)
        .await
        .expect("connect");
    stream
        .write_all(format!("GET /events HTTP/1.1\r\nHost: {}\r\n\r\n", d.addr).as_bytes())
        .await
        .expect("send");
    let mut seen = String::new();
    let mut buf = vec![0u8; 65536];
    // The first event comes at once, before the node exists.
    read_until("event: snapshot".into(), &mut seen, &mut buf, &mut stream)
        .await
        .expect("a first event");
    assert!(seen.contains("text/event-stream"));
    assert!(!seen.contains(&name));
    let client = session(&zk).await;
    client
        .client()
        .create(
            &name,
            b"",
            &zkit::zkit_client::CreateMode::Persistent
                .with_acls(zkit::zkit_client::Acls::anyone_all()),
        )
        .await
        .expect("create");
    read_until(name.clone(), &mut seen, &mut buf, &mut stream)
        .await
        .expect("the new root child arrives on the open stream");
}

/// Reads `stream` into `seen` until `needle` shows up (at most 10 s).
async fn read_until(
    needle: String,
    seen: &mut String,
    buf: &mut [u8],
    stream: &mut tokio::net::TcpStream,
) -> Result<(), tokio::time::error::Elapsed> {
    use tokio::io::AsyncReadExt as _;
    tokio::time::timeout(Duration::from_secs(10), async {
        while !seen.contains(&needle) {
            let n = stream.read(buf).await.expect("read");
            assert!(n > 0, "the stream ended");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    })
    .await
}

/// An admin endpoint with the dashboard mounted the way `zkit serve --admin-port` does it,
/// reading the status from the AdminServer JSON, with the four-letter words closed.
#[tokio::test]
async fn zkit_serve_admin_endpoint_mounts_the_dashboard() {
    let mount = zkit_dashboard::Mount::new();
    let mut config = zkit_server::ServerConfig::ephemeral();
    config.four_letter_words = zkit_server::FourLetterWhitelist::default(); // srvr only
    config.admin_listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
    config.admin_extra = Some(Arc::new(mount.clone()));
    let server = zkit_server::Server::start(config).await.expect("server");
    let admin = server.config().admin_listen.expect("admin address");

    // Before the dashboard is set: 503, while the server's own paths answer.
    assert_eq!(http(admin, "GET", "/", &[], None).await.status, 503);
    let mut dc = zkit_dashboard::DashboardConfig::new(&server.addr().to_string());
    dc.admin_url = Some(format!("http://{admin}"));
    dc.metrics_url = Some(format!("http://{admin}/metrics"));
    dc.interval = Duration::from_millis(250);
    mount.set(
        zkit_dashboard::Dashboard::start(dc)
            .await
            .expect("dashboard"),
    );

    let holder = session(&server.addr().to_string()).await;
    let path = zkit_testkit::unique_path("dash-mounted");
    let _guard = Mutex::new(&holder, &path).lock().await.expect("lock");
    let dash = mount.get().expect("set").clone();
    let hid = holder.session_id();
    eventually(
        "the mounted dashboard shows the holder's ephemeral",
        Duration::from_secs(10),
        || {
            let dash = dash.clone();
            let p = path.clone();
            async move {
                let s = dash.snapshot().await;
                s.sessions
                    .iter()
                    .any(|r| r.id == hid && r.ephemerals.iter().any(|e| e.starts_with(&p)))
                    && s.members[0].mntr.contains_key("znode_count")
            }
        },
    )
    .await;
    let home = http(admin, "GET", "/", &[], None).await;
    assert_eq!(home.status, 200);
    assert!(home.body.contains(&path) && home.body.contains(&sid(hid)));
    assert!(home.header("content-security-policy").is_some());
    // zkit-server's own paths are unchanged.
    let metrics = http(admin, "GET", "/metrics", &[], None).await;
    assert!(metrics.body.contains("zkit_requests_total"));
    let ruok = http(admin, "GET", "/commands/ruok", &[], None).await.json();
    assert_eq!(ruok["command"], "ruok");
    // Charts from the per-op histograms once two samples exist.
    eventually("per-op chart points", Duration::from_secs(10), || {
        let dash = dash.clone();
        async move {
            let s = dash.snapshot().await;
            s.metrics_source == "prometheus"
                && s.history
                    .iter()
                    .any(|p| p.series.values().any(|v| v.rate > 0.0))
        }
    })
    .await;
    dash.close();
    server.stop().await;
}

/// A 2PC transaction waiting for votes is shown in flight, with its participants and no votes;
/// once a participant votes no and the coordinator decides, it is in doubt (P2 never acks).
#[tokio::test]
async fn the_collector_shows_transactions_in_flight_then_in_doubt() {
    let (addrs, _server) = targets().await;
    for zk in addrs {
        let root = zkit_testkit::unique_path("dash-txn");
        let d = common::dashboard_scoped(&zk, &root).await;
        let s = session(&zk).await;
        let options = zkit::txn::TxnOptions {
            root: root.clone(),
            vote_timeout: Duration::from_secs(30),
            ..zkit::txn::TxnOptions::default()
        };
        let coordinator = zkit::txn::Coordinator::new(&s, options).expect("coordinator");
        let txn = coordinator.begin(&["P1", "P2"], b"payload").expect("begin");
        let txid = txn.txid().to_string();
        let commit = tokio::spawn(txn.commit());
        let dash = d.dashboard.clone();
        let phase_is = |want: &'static str| {
            let (dash, txid) = (dash.clone(), txid.clone());
            async move {
                let s = dash.snapshot().await;
                s.overview
                    .transactions
                    .iter()
                    .flat_map(|t| &t.txns)
                    .any(|t| {
                        t.txid == txid
                            && t.phase == want
                            && t.votes.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>()
                                == ["P1", "P2"]
                    })
            }
        };
        eventually(
            "the transaction is in flight",
            Duration::from_secs(10),
            || phase_is("in flight"),
        )
        .await;
        // P1 votes no (as a participant would): the coordinator decides abort; nobody acks.
        let layout = zkit::txn::layout::Layout::new(&root).expect("layout");
        s.client()
            .create(
                &layout.vote(&txid, "P1"),
                b"no: disk full",
                &zkit::zkit_client::CreateMode::Persistent
                    .with_acls(zkit::zkit_client::Acls::anyone_all()),
            )
            .await
            .expect("vote");
        eventually(
            "the transaction is in doubt",
            Duration::from_secs(10),
            || phase_is("in doubt"),
        )
        .await;
        let shown = d.dashboard.snapshot().await;
        let row = shown
            .overview
            .transactions
            .iter()
            .flat_map(|t| &t.txns)
            .find(|t| t.txid == txid)
            .expect("txn");
        assert!(
            row.decision.as_deref().unwrap_or("").starts_with("abort"),
            "{row:?}"
        );
        assert_eq!(row.unacked, vec!["P1", "P2"]);
        commit.abort();
        coordinator.stop();
        delete_tree(&s, &root).await;
    }
}

/// A scan lists at most its node budget and the page says it was cut; a bigger budget sees all.
#[tokio::test]
async fn a_scan_cut_at_its_budget_says_so() {
    let server = zkit_server().await;
    let zk = server.addr().to_string();
    let s = session(&zk).await;
    let open =
        zkit::zkit_client::CreateMode::Persistent.with_acls(zkit::zkit_client::Acls::anyone_all());
    for i in 0..12 {
        s.client()
            .create(&format!("/n{i:02}"), b"", &open)
            .await
            .expect("create");
    }
    let mut small = zkit_dashboard::DashboardConfig::new(&zk);
    small.node_budget = 5;
    let d = common::dashboard_with(small).await;
    let snap = d.dashboard.snapshot().await;
    assert!(snap.scan.truncated, "{:?}", snap.scan);
    assert_eq!(snap.scan.listed, 5);
    let page = http(d.addr, "GET", "/", &[], None).await;
    assert!(page.body.contains("cut at its budget"), "{}", page.body);
    // The root's children are listed whatever the budget.
    assert!(page.body.contains("/n11"));

    let d = common::dashboard(&zk).await;
    let snap = d.dashboard.snapshot().await;
    assert!(!snap.scan.truncated, "{:?}", snap.scan);
    assert_eq!(
        snap.scan.listed, 13,
        "/ and its 12 children ({:?})",
        snap.scan
    );
    let page = http(d.addr, "GET", "/", &[], None).await;
    assert!(!page.body.contains("cut at its budget"));
}
