//! The dashboard in a real browser: headless Chromium driven through WebDriver (chromedriver,
//! `fantoccini`), one browser session for every step to keep the run short.
//!
//! On an embedded zkit server (with its admin endpoint, so the charts have per-op series):
//! the home page shows a lock holder and a waiter the test started (real zkit `Mutex`es); a
//! node created elsewhere appears on the open page through the event stream, without a
//! reload; an unauthenticated write from the page is refused; signing in and submitting the
//! create form makes a node that exists in the server; the watches and charts pages render.
//! Then the home page again on Apache ZooKeeper (`ZKIT_APACHE_ZK`).
//!
//! `ZKIT_DASHBOARD_SCREENSHOTS=docs/dashboard` saves a PNG of each view (see docs/DASHBOARD.md).
//! Skips with a `SKIP` line without Chromium; fails under `CI`.

mod common;

use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::{chromium, chromium_flags, eventually, save_screenshot, session, sid};
use fantoccini::{Client, ClientBuilder, Locator};
use zkit::lock::Mutex;
use zkit::zkit_client as zk;

const WAIT: Duration = Duration::from_secs(15);

/// chromedriver in its own process group: dropping it kills the group (the driver and every
/// Chromium it started), even when the test fails half-way.
struct Driver {
    child: Child,
    url: String,
    _profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        // kill(1) with a negative pid signals the whole group.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.wait();
    }
}

async fn start_browser(paths: &common::ChromiumPaths) -> (Driver, Client) {
    let port = zkit_testkit::free_port();
    let child = Command::new(&paths.driver)
        .arg(format!("--port={port}"))
        .arg("--allowed-ips=127.0.0.1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("chromedriver starts");
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _profile: tempfile::tempdir().expect("profile dir"),
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    eventually(
        "chromedriver listens",
        Duration::from_secs(20),
        || async move { tokio::net::TcpStream::connect(addr).await.is_ok() },
    )
    .await;
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": paths.chromium,
            "args": chromium_flags(driver._profile.path()),
        }),
    );
    let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a WebDriver session");
    (driver, client)
}

/// The text of the element `css`, once it exists. The live sections are replaced on every
/// event, so an element found may be gone a moment later: [`wait_text`] retries.
async fn text_of(c: &Client, css: &str) -> String {
    wait_text(c, css, "").await
}

/// Waits until the element `css` contains `needle` (the page updates itself).
async fn wait_text(c: &Client, css: &str, needle: &str) -> String {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Ok(e) = c.find(Locator::Css(css)).await {
            if let Ok(t) = e.text().await {
                if t.contains(needle) {
                    return t;
                }
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{css} never showed {needle:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn open() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

/// Holder and waiter on `lock` (two sessions); returns them once both nodes exist.
async fn holder_and_waiter(
    addr: &str,
    lock: &str,
) -> (zkit::Session, zkit::Session, zkit::lock::LockGuard) {
    let (a, b) = (session(addr).await, session(addr).await);
    let guard = Mutex::new(&a, lock).lock().await.expect("holder locks");
    let (bb, p) = (b.clone(), lock.to_string());
    tokio::spawn(async move {
        let _waits = Mutex::new(&bb, &p).lock().await;
    });
    let client = a.client();
    eventually("the waiter's node exists", WAIT, || {
        let (c, p) = (client.clone(), lock.to_string());
        async move { c.list_children(&p).await.map_or(0, |v| v.len()) == 2 }
    })
    .await;
    (a, b, guard)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_in_chromium() {
    let Some(paths) = chromium() else { return };
    let (_driver, c) = start_browser(&paths).await;

    // zkit serve with its admin endpoint (metrics for the charts) and every 4lw open.
    let mut config = zkit_server::ServerConfig::ephemeral();
    config.admin_listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
    let server = zkit_server::Server::start(config).await.expect("server");
    let zk_addr = server.addr().to_string();
    let admin = server.config().admin_listen.expect("admin");
    let mut dc = zkit_dashboard::DashboardConfig::new(&zk_addr);
    dc.metrics_url = Some(format!("http://{admin}/metrics"));
    dc.interval = Duration::from_millis(500);
    let d = common::dashboard_with(dc).await;

    // 1. The home page shows the holder (session, token) and the waiter.
    let lock = zkit_testkit::unique_path("browser-lock");
    let (a, b, guard) = holder_and_waiter(&zk_addr, &lock).await;
    // An election and a queue beside it, for the overview (and its screenshot).
    let app = zkit_testkit::unique_path("browser-app");
    let latch =
        zkit::election::LeaderLatch::start(&b, &format!("{app}/leader"), "b").expect("latch");
    latch.await_leadership_for(WAIT).await.expect("b leads");
    let queue = zkit::queue::Queue::new(&a, &format!("{app}/jobs")).expect("queue");
    for job in [b"j1", b"j2"] {
        queue.offer(job).await.expect("offer");
    }
    c.goto(&d.url("/")).await.expect("home");
    let row_css = format!("tr.lock[data-path=\"{lock}\"]");
    let row = wait_text(&c, &row_css, &sid(b.session_id())).await;
    assert!(row.contains(&sid(a.session_id())), "holder missing: {row}");
    assert!(
        row.contains(&format!("token {}", guard.fencing_token())),
        "{row}"
    );
    wait_text(&c, "tr.election", &sid(b.session_id())).await;
    wait_text(&c, "tr.queue", &format!("{app}/jobs")).await;
    let holder = text_of(&c, &format!("{row_css} .holder")).await;
    assert!(
        holder.contains(&sid(a.session_id())),
        "the holder is not in the holder column: {holder}"
    );
    let waiter = text_of(&c, &format!("{row_css} .waiter")).await;
    assert!(waiter.contains(&sid(b.session_id())), "{waiter}");
    wait_text(&c, "#live", "live").await;

    // 2. A node created elsewhere appears without a reload (event stream).
    c.execute("window.__same_page = true; return true;", vec![])
        .await
        .expect("mark the page");
    let live = zkit_testkit::unique_path("browser-live");
    a.client()
        .create(&live, b"", &open())
        .await
        .expect("create");
    wait_text(&c, "#sec-root", &live).await;
    let same = c
        .execute("return window.__same_page === true;", vec![])
        .await
        .expect("script");
    assert_eq!(same, serde_json::json!(true), "the page was reloaded");
    save_screenshot("home.png", &c.screenshot().await.expect("screenshot"));

    // 3. An unauthenticated write from the page is refused, and nothing is written.
    let refused = zkit_testkit::unique_path("browser-refused");
    let status = c
        .execute(
            "return fetch('/api/create', {method: 'POST', headers: {'Content-Type': 'application/json'}, \
             body: JSON.stringify({path: arguments[0], data: 'x'})}).then(r => r.status);",
            vec![serde_json::json!(refused)],
        )
        .await
        .expect("fetch");
    assert_eq!(status, serde_json::json!(403));
    assert!(a
        .client()
        .check_stat(&refused)
        .await
        .expect("stat")
        .is_none());

    // 4. Sign in on the tree page, fill the create form, submit: the node exists.
    c.goto(&d.url("/tree")).await.expect("tree");
    c.wait()
        .at_most(WAIT)
        .for_element(Locator::Id("signin-user"))
        .await
        .expect("sign-in form")
        .send_keys("alice")
        .await
        .expect("type");
    c.find(Locator::Id("signin-password"))
        .await
        .expect("password field")
        .send_keys("alice-password")
        .await
        .expect("type");
    c.find(Locator::Id("signin-submit"))
        .await
        .expect("button")
        .click()
        .await
        .expect("click");
    wait_text(&c, "#me-user", "alice").await;
    let created = zkit_testkit::unique_path("browser-made");
    let name = created.trim_start_matches('/');
    let form_name = c
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Id("create-name"))
        .await
        .expect("create form");
    form_name.send_keys(name).await.expect("type");
    c.find(Locator::Id("create-data"))
        .await
        .expect("data field")
        .send_keys("{\"made\":\"in the browser\"}")
        .await
        .expect("type");
    c.find(Locator::Id("create-submit"))
        .await
        .expect("button")
        .click()
        .await
        .expect("click");
    wait_text(&c, "#editor-msg", "created").await;
    let (data, stat) = a
        .client()
        .get_data(&created)
        .await
        .expect("the node exists");
    assert_eq!(data, b"{\"made\":\"in the browser\"}");
    assert_eq!(stat.ephemeral_owner, 0);
    // The page's password never reaches the DOM.
    let html = c.source().await.expect("source");
    assert!(!html.contains("alice-password"));
    // Open it: the data shows as pretty JSON.
    c.wait()
        .at_most(WAIT)
        .for_element(Locator::Css(&format!(
            "li[data-path=\"{created}\"] > a.node-name"
        )))
        .await
        .expect("the new node in the tree")
        .click()
        .await
        .expect("click");
    wait_text(&c, "#node-path", &created).await;
    wait_text(&c, "#data-view", "\"made\": \"in the browser\"").await;
    save_screenshot("tree.png", &c.screenshot().await.expect("screenshot"));

    // 5. The watch tables (the waiter watches its predecessor).
    c.goto(&d.url("/watches")).await.expect("watches");
    wait_text(&c, "#sec-watches", &lock).await;
    save_screenshot("watches.png", &c.screenshot().await.expect("screenshot"));

    // 6. Charts: some reads and writes, then per-op lines drawn in the page.
    c.goto(&d.url("/charts")).await.expect("charts");
    // Reads and writes until the page has drawn them (bounded by the waits below).
    let stop_load = tokio_util::sync::CancellationToken::new();
    let load = {
        let client = a.client();
        let base = zkit_testkit::unique_path("browser-load");
        let stop = stop_load.clone();
        tokio::spawn(async move {
            client.create(&base, b"", &open()).await.expect("create");
            let mut i = 0u32;
            while !stop.is_cancelled() && i < 200_000 {
                let _ = client.get_data(&base).await;
                if i % 4 == 0 {
                    let _ = client.set_data(&base, &i.to_be_bytes(), None).await;
                }
                i += 1;
            }
            base
        })
    };
    c.wait()
        .at_most(WAIT)
        .for_element(Locator::Css("#charts path.series"))
        .await
        .expect("a chart line");
    wait_text(&c, "#charts", "getData").await;
    wait_text(&c, "#charts", "setData").await;
    stop_load.cancel();
    let load_base = load.await.expect("load ran");
    save_screenshot("charts.png", &c.screenshot().await.expect("screenshot"));

    drop(guard);
    latch.close().await;
    for p in [&live, &created, &load_base] {
        let _ = a.client().delete(p, None).await;
    }

    // 7. Apache ZooKeeper: the same home page from its four-letter words.
    if let Some(apache) = zkit_testkit::apache_zk() {
        let base = zkit_testkit::unique_path("browser-apache");
        let lock = format!("{base}/lock");
        let d = common::dashboard_scoped(&apache, &base).await;
        let (a, b, guard) = holder_and_waiter(&apache, &lock).await;
        c.goto(&d.url("/")).await.expect("home");
        let row_css = format!("tr.lock[data-path=\"{lock}\"]");
        let row = wait_text(&c, &row_css, &sid(b.session_id())).await;
        assert!(
            row.contains(&sid(a.session_id())),
            "apache holder missing: {row}"
        );
        let status = text_of(&c, "#sec-status").await;
        assert!(status.contains("standalone"), "{status}");
        save_screenshot(
            "home-apache.png",
            &c.screenshot().await.expect("screenshot"),
        );
        guard.release().await.expect("release");
        let client = a.client();
        eventually("the waiter gets it and the nodes go", WAIT, || {
            let (c, p) = (client.clone(), lock.clone());
            async move {
                // The waiter holds forever in its task; closing b frees it.
                c.list_children(&p).await.map_or(0, |v| v.len()) <= 1
            }
        })
        .await;
        b.close();
        eventually("the lock node is empty", WAIT, || {
            let (c, p) = (client.clone(), lock.clone());
            async move { c.list_children(&p).await.map_or(0, |v| v.len()) == 0 }
        })
        .await;
        let _ = client.delete(&lock, None).await;
        let _ = client.delete(&base, None).await;
    }
    c.close().await.expect("close the browser");
    server.stop().await;
}
