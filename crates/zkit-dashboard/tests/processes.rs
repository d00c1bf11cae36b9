//! Real processes. First the acceptance check, automated: `chromium --headless --dump-dom http://127.0.0.1:A/` of a
//! real `zkit serve --admin-port A` process, while a real `zkit lock` process holds a lock,
//! shows a root child, the lock's path, and the sessions (the holder's among them). The same
//! three are checked in the page as the server sends it (a plain HTTP GET, no script ran), so
//! they do not depend on the page's live updates. (`--dump-dom` prints nothing with script
//! disabled, hence the separate check.)
//!
//! Then `zkit ui --server` as a process, showing another server's lock over HTTP.
//!
//! Needs the `zkit` binary (built by a workspace test run, or `cargo build -p zkit-cli`).
//! Skips with a `SKIP` line without Chromium; fails under `CI`.

mod common;

use std::io::{BufRead as _, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{chromium, chromium_flags, eventually, http, session, sid};
use zkit_testkit::process::zkit_command;
use zkit_testkit::ChildGuard;

/// The stdout lines of `child` (spawned with piped stdout), read on a thread of their own.
fn stdout_lines(child: &mut ChildGuard) -> std::sync::mpsc::Receiver<String> {
    let stdout = child.child_mut().stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(line);
        }
    });
    rx
}

/// `zkit lock --server ADDR AUTH... LOCK -- sleep 120` as a process: holds `lock` (or waits
/// for it) for two minutes or until dropped. `auth` is inserted before the lock path.
fn spawn_lock(addr: &str, auth: &[&str], lock: &str) -> ChildGuard {
    ChildGuard::spawn(
        zkit_command()
            .args(["lock", "--server", addr])
            .args(auth)
            .args([lock, "--", "sleep", "120"])
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    )
    .expect("spawn zkit lock")
}

/// Whether the page the dashboard at `ui` serves has a row for the lock `lock`.
async fn page_shows_lock(ui: SocketAddr, lock: String) -> bool {
    let page = http(ui, "GET", "/", &[], None).await;
    page.status == 200 && page.body.contains(&format!("data-path=\"{lock}\""))
}

/// Runs `zkit serve --port 0 --admin-port 0 --in-memory`; returns it with its client and
/// admin addresses (from its first two stdout lines).
fn serve() -> (ChildGuard, String, SocketAddr) {
    let mut guard = ChildGuard::spawn(
        zkit_command()
            .args(["serve", "--port", "0", "--admin-port", "0", "--in-memory"])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    )
    .expect("spawn zkit serve");
    let rx = stdout_lines(&mut guard);
    let mut client = None;
    let mut admin = None;
    while client.is_none() || admin.is_none() {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("zkit serve prints its addresses");
        if let Some(a) = line.strip_prefix("zkit serve listening on ") {
            client = Some(a.trim().to_string());
        }
        if let Some(a) = line.strip_prefix("zkit serve admin endpoint on http://") {
            admin = Some(
                a.trim()
                    .trim_end_matches('/')
                    .parse()
                    .expect("admin address"),
            );
        }
    }
    (guard, client.expect("client"), admin.expect("admin"))
}

#[tokio::test]
async fn dump_dom_of_zkit_serve_shows_root_child_lock_and_sessions() {
    let Some(paths) = chromium() else { return };
    let (_server, addr, admin) = serve();
    let lock = zkit_testkit::unique_path("dump-dom-lock");
    let _locker = spawn_lock(&addr, &[], &lock);

    // Wait until `zkit lock` holds (its node exists), and learn its session from the node.
    let observer = session(&addr).await;
    let client = observer.client();
    eventually("zkit lock holds the lock", Duration::from_secs(20), || {
        let (c, p) = (client.clone(), lock.clone());
        async move { c.list_children(&p).await.is_ok_and(|v| v.len() == 1) }
    })
    .await;
    let node = client.list_children(&lock).await.expect("children")[0].clone();
    let holder = client
        .check_stat(&format!("{lock}/{node}"))
        .await
        .expect("stat")
        .expect("the lock node")
        .ephemeral_owner;
    // The dashboard starts once the server is up (until then the admin endpoint says 503)
    // and collects once a second: wait for a collection that saw the lock.
    eventually(
        "the dashboard has collected the lock",
        Duration::from_secs(20),
        || {
            // The lock's node also among its session's ephemerals: those come from `dump`,
            // which a collection may have taken just before the node was created.
            let (lock, held) = (lock.clone(), format!("{lock}/{node}"));
            async move {
                let r = http(admin, "GET", "/api/snapshot", &[], None).await;
                r.status == 200 && r.body.contains(&lock) && r.body.contains(&held)
            }
        },
    )
    .await;

    let profile = tempfile::tempdir().expect("profile dir");
    let out = tokio::task::spawn_blocking({
        let chromium = paths.chromium.clone();
        let flags = chromium_flags(profile.path());
        move || {
            Command::new(chromium)
                .args(flags)
                .arg("--dump-dom")
                .arg(format!("http://{admin}/"))
                .stderr(Stdio::null())
                .output()
        }
    });
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("chromium exits within 60 s")
        .expect("join")
        .expect("chromium runs");
    assert!(out.status.success(), "chromium failed: {:?}", out.status);
    let dom = String::from_utf8_lossy(&out.stdout);

    check(&dom, &lock, &node, holder, observer.session_id());
    // The server-rendered page itself (no browser, no script) says the same.
    let page = http(admin, "GET", "/", &[], None).await;
    assert_eq!(page.status, 200);
    check(&page.body, &lock, &node, holder, observer.session_id());
}

/// The root child, the lock row with its holder, and the sessions in `dom`.
fn check(dom: &str, lock: &str, node: &str, holder: i64, observer: i64) {
    // A root child (the lock's parent is one), linked to the tree browser.
    assert!(
        dom.contains(&format!("<a href=\"/tree?path={lock}\">{lock}</a>")),
        "no root child {lock} in the DOM:\n{dom}"
    );
    // The lock, with its holder's session.
    assert!(
        dom.contains(&format!("<tr class=\"lock\" data-path=\"{lock}\">")),
        "the lock row is missing:\n{dom}"
    );
    let lock_row = dom
        .split(&format!("<tr class=\"lock\" data-path=\"{lock}\">"))
        .nth(1)
        .and_then(|r| r.split("</tr>").next())
        .expect("lock row");
    assert!(
        lock_row.contains(&sid(holder)),
        "holder {} not in {lock_row}",
        sid(holder)
    );
    // The sessions: the holder's (owning its lock node) and the observer's.
    let sessions = dom
        .split("id=\"sec-sessions\"")
        .nth(1)
        .and_then(|s| s.split("</section>").next())
        .expect("sessions section");
    assert!(sessions.contains(&format!("data-session=\"{}\"", sid(holder))));
    assert!(sessions.contains(&format!("{lock}/{node}")), "{sessions}");
    assert!(sessions.contains(&format!("data-session=\"{}\"", sid(observer))));
}

/// `zkit ui ARGS --port 0 --interval 200ms` as a process; returns it and the address it
/// printed.
fn spawn_ui(args: &[&str]) -> (ChildGuard, SocketAddr) {
    let mut ui = ChildGuard::spawn(
        zkit_command()
            .arg("ui")
            .args(args)
            .args(["--port", "0", "--interval", "200ms"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    )
    .expect("spawn zkit ui");
    let rx = stdout_lines(&mut ui);
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("zkit ui prints its address");
    let ui_addr: SocketAddr = line
        .strip_prefix("zkit ui listening on http://")
        .and_then(|a| a.trim().trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    (ui, ui_addr)
}

/// `zkit ui --auth` is the dashboard's own identity: a lock under a parent only alice may
/// read shows on the page of a dashboard started with `--auth alice:…`, and not on one
/// started without it.
#[tokio::test]
async fn zkit_ui_auth_flag_reads_as_that_identity() {
    let (_server, addr, _admin) = serve();
    let parent = zkit_testkit::unique_path("ui-secret");
    let created = zkit_command()
        .args([
            "create",
            "--server",
            &addr,
            "--auth",
            "alice:secret",
            "--acl",
            "auth::cdrwa",
            &parent,
        ])
        .output()
        .expect("zkit create");
    assert!(created.status.success(), "{created:?}");
    let lock = format!("{parent}/L");
    let _locker = spawn_lock(&addr, &["--auth", "alice:secret"], &lock);
    let (_alice_ui, alice_addr) = spawn_ui(&["--server", &addr, "--auth", "alice:secret"]);
    eventually(
        "alice's dashboard shows the lock",
        Duration::from_secs(20),
        || page_shows_lock(alice_addr, lock.clone()),
    )
    .await;
    // The anonymous dashboard has collected at least once it lists the parent itself (the
    // root's children are always shown), and still cannot see into it.
    let (_anon_ui, anon_addr) = spawn_ui(&["--server", &addr]);
    eventually(
        "the anonymous dashboard lists the parent",
        Duration::from_secs(20),
        || {
            let parent = parent.clone();
            async move {
                let page = http(anon_addr, "GET", "/", &[], None).await;
                page.status == 200 && page.body.contains(&parent[1..])
            }
        },
    )
    .await;
    let page = http(anon_addr, "GET", "/", &[], None).await.body;
    assert!(
        !page.contains(&format!("data-path=\"{lock}\"")),
        "a dashboard without --auth read a lock only alice may list"
    );
}

/// `zkit ui --server ZK --port 0` (a separate process) shows the lock a `zkit lock` process
/// holds on another server, and stops on SIGTERM.
#[tokio::test]
async fn zkit_ui_process_shows_another_servers_lock() {
    let (_server, addr, _admin) = serve();
    let lock = zkit_testkit::unique_path("ui-lock");
    let _locker = spawn_lock(&addr, &[], &lock);
    let (ui, ui_addr) = spawn_ui(&["--server", &addr]);
    assert!(ui_addr.ip().is_loopback(), "binds loopback by default");
    eventually("zkit ui shows the lock", Duration::from_secs(20), || {
        page_shows_lock(ui_addr, lock.clone())
    })
    .await;
    // SIGTERM: a clean exit.
    let pid = ui.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = tokio::task::spawn_blocking(move || {
        let mut ui = ui;
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = ui.child_mut().try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "zkit ui ignored SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await
    .expect("join");
    assert!(status.success(), "{status:?}");
}

/// kazoo (Debian's python3-kazoo): a holder and a waiter on one `Lock`, in two sessions.
const KAZOO_LOCKS: &str = r#"
import sys, threading
from kazoo.client import KazooClient

connect, path = sys.argv[1], sys.argv[2]
holder = KazooClient(hosts=connect, timeout=10.0)
waiter = KazooClient(hosts=connect, timeout=10.0)
holder.start(timeout=30)
waiter.start(timeout=30)
held = holder.Lock(path, "holder")
if not held.acquire(timeout=30):
    raise SystemExit("kazoo: acquire timed out")
threading.Thread(target=lambda: waiter.Lock(path, "waiter").acquire(), daemon=True).start()
print("%d %d" % (holder.client_id[0], waiter.client_id[0]), flush=True)
sys.stdin.readline()
"#;

/// kazoo's lock nodes (`<uuid>__lock__NNNNNNNNNN`) are recognized: the page shows a kazoo
/// process's holder and waiter with their sessions.
#[tokio::test]
async fn kazoo_lock_holder_and_waiter_are_shown() {
    let python = std::path::Path::new("/usr/bin/python3");
    if !python.is_file() || !std::path::Path::new("/usr/lib/python3/dist-packages/kazoo").is_dir() {
        assert!(
            std::env::var_os("CI").is_none(),
            "python3-kazoo missing under CI"
        );
        eprintln!("SKIP kazoo: /usr/bin/python3 with python3-kazoo not found");
        return;
    }
    let server = common::zkit_server().await;
    let addr = server.addr().to_string();
    let d = common::dashboard(&addr).await;
    let lock = zkit_testkit::unique_path("kazoo-lock");
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("kazoo_locks.py");
    std::fs::write(&script, KAZOO_LOCKS).expect("script");
    let mut kazoo = ChildGuard::spawn(
        Command::new(python)
            .arg(&script)
            .args([&addr, &lock])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    )
    .expect("python3 runs");
    let stdout = kazoo.child_mut().stdout.take().expect("stdout");
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).map(|_| line)
    });
    let line = tokio::time::timeout(Duration::from_secs(30), line)
        .await
        .expect("kazoo holds within 30 s")
        .expect("join")
        .expect("read");
    let ids: Vec<i64> = line
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect();
    assert_eq!(ids.len(), 2, "{line:?}");
    let (holder, waiter) = (ids[0], ids[1]);
    let dash = d.dashboard.clone();
    eventually("the kazoo lock is shown", Duration::from_secs(15), || {
        let (dash, lock) = (dash.clone(), lock.clone());
        async move {
            let s = dash.snapshot().await;
            s.overview.locks.iter().any(|l| {
                l.path == lock
                    && l.kind == "kazoo lock"
                    && l.holders.iter().map(|h| h.session).collect::<Vec<_>>() == vec![Some(holder)]
                    && l.waiters.iter().map(|w| w.session).collect::<Vec<_>>() == vec![Some(waiter)]
            })
        }
    })
    .await;
    let page = http(d.addr, "GET", "/", &[], None).await;
    assert!(page.body.contains(&sid(holder)) && page.body.contains(&sid(waiter)));
}
