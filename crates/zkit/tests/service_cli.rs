//! `zkit service` end to end (the built `zkit` binary, see `zkit_testkit::zkit_bin`), on every
//! server of `common::servers()`: `register` keeps the instance listed exactly while CMD runs
//! (checked through the library, `zkit service list` and a running `zkit service watch`),
//! passes SIGTERM on to CMD, waits for it and exits with its code; a CMD that cannot start
//! gives 126 and leaves nothing registered; a CMD killed by a signal gives 128 + N.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{eventually, servers, session};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{ChildStdout, Command};
use zkit::discovery::ServiceDiscovery;
use zkit_testkit::{unique_path, zkit_bin};

const LIMIT: Duration = Duration::from_secs(30);

/// CMD for `register`: logs its environment, then loops until SIGTERM, which it logs and
/// answers with exit code 3.
const SERVICE_LOOP: &str = r#"trap 'echo term >> "$LOG"; exit 3' TERM
echo "start $ZKIT_SERVICE_NAME $ZKIT_SERVICE_ID $ZKIT_SERVICE_PATH" >> "$LOG"
while :; do sleep 0.05; done"#;

fn zkit_service(sub: &str, server: &str, base: &str) -> Command {
    let mut c = Command::new(zkit_bin());
    c.args(["service", sub, "--server", server, "--base", base])
        .stdin(Stdio::null())
        .kill_on_drop(true);
    c
}

/// SIGTERM to our own (unreaped, so not reused) child, with kill(1).
fn sigterm(child: &tokio::process::Child) {
    let pid = child.id().expect("child still running");
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -TERM {pid}");
}

async fn next_line(lines: &mut Lines<BufReader<ChildStdout>>, what: &str) -> String {
    tokio::time::timeout(LIMIT, lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .expect("read stdout")
        .unwrap_or_else(|| panic!("stdout closed before {what}"))
}

async fn list(server: &str, base: &str, name: &str) -> Vec<String> {
    let out = zkit_service("list", server, base)
        .arg(name)
        .output()
        .await
        .expect("run zkit service list");
    assert!(
        out.status.success(),
        "zkit service list: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

fn log_text(log: &Path) -> String {
    std::fs::read_to_string(log).unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registered_while_cmd_runs_and_signals_are_passed_on() {
    for target in servers().await {
        let name = target.name;
        let base = unique_path("services-cli");
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("cmd.log");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let discovery = ServiceDiscovery::<serde_json::Value>::new(&s, &base).unwrap();

        // A watcher first: it must print the empty listing, then the instance coming and going.
        let mut watcher = zkit_service("watch", &target.addr, &base)
            .arg("web")
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn zkit service watch");
        let mut watched = BufReader::new(watcher.stdout.take().expect("stdout")).lines();
        assert_eq!(next_line(&mut watched, "the initial listing").await, "--");

        let mut registrar = zkit_service("register", &target.addr, &base)
            .args(["web", "--port", "8080", "--address", "10.1.2.3"])
            .args([
                "--id",
                "web-1",
                "--payload",
                r#"{"zone":"a"}"#,
                "--grace",
                "10s",
            ])
            .args(["--", "sh", "-c", SERVICE_LOOP])
            .env("LOG", &log)
            .spawn()
            .expect("spawn zkit service register");
        eventually("CMD started", LIMIT, || {
            let log = log.clone();
            async move { log_text(&log).starts_with("start ") }
        })
        .await;
        let path = format!("{base}/web/web-1");
        assert_eq!(
            log_text(&log).lines().next(),
            Some(format!("start web web-1 {path}").as_str()),
            "{name}: CMD's environment"
        );

        // Registered before CMD started: visible now to the library, list and watch (`sync`
        // first: zkit service's session may be on another ensemble member).
        s.client().sync(&base).await.unwrap();
        let found = discovery.query_for_instances("web").await.unwrap();
        assert_eq!(found.len(), 1, "{name}: {found:?}");
        assert_eq!(found[0].id, "web-1");
        assert_eq!(found[0].address.as_deref(), Some("10.1.2.3"));
        assert_eq!(found[0].port, Some(8080));
        assert_eq!(found[0].payload, Some(serde_json::json!({"zone": "a"})));
        assert_eq!(
            found[0].payload_class.as_deref(),
            Some("java.util.LinkedHashMap"),
            "{name}: object payloads carry Jackson's @class by default"
        );
        let ephemeral = s.client().check_stat(&path).await.unwrap().expect("node");
        assert_ne!(
            ephemeral.ephemeral_owner, 0,
            "{name}: the instance is ephemeral"
        );
        assert_eq!(
            list(&target.addr, &base, "web").await,
            vec![r#"web-1 10.1.2.3:8080 {"zone":"a"}"#.to_string()],
            "{name}: zkit service list"
        );
        assert_eq!(
            next_line(&mut watched, "the registration").await,
            r#"+ web-1 10.1.2.3:8080 {"zone":"a"}"#,
            "{name}: zkit service watch"
        );

        // SIGTERM to zkit reaches CMD; zkit waits for it, exits with its code, unregisters.
        sigterm(&registrar);
        let status = tokio::time::timeout(LIMIT, registrar.wait())
            .await
            .expect("zkit service register exits")
            .expect("wait");
        assert_eq!(
            status.code(),
            Some(3),
            "{name}: CMD's exit code passes through"
        );
        assert!(
            log_text(&log).ends_with("term\n"),
            "{name}: CMD got SIGTERM"
        );
        s.client().sync(&base).await.unwrap();
        assert!(
            discovery
                .query_for_instances("web")
                .await
                .unwrap()
                .is_empty(),
            "{name}: unregistered before zkit exited"
        );
        assert!(list(&target.addr, &base, "web").await.is_empty(), "{name}");
        assert_eq!(
            next_line(&mut watched, "the unregistration").await,
            "- web-1",
            "{name}"
        );

        // The watcher stops cleanly on SIGTERM.
        sigterm(&watcher);
        let status = tokio::time::timeout(LIMIT, watcher.wait())
            .await
            .expect("zkit service watch exits")
            .expect("wait");
        assert_eq!(status.code(), Some(0), "{name}: watch exit code");
        eprintln!("{name}: zkit service register/list/watch ok");
    }
}

#[tokio::test]
async fn exit_codes_and_nothing_left_registered() {
    for target in servers().await {
        let name = target.name;
        let base = unique_path("services-cli-codes");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let discovery = ServiceDiscovery::<serde_json::Value>::new(&s, &base).unwrap();
        let cases: [(&[&str], i32); 3] = [
            (&["sh", "-c", "exit 7"], 7),
            (&["sh", "-c", "kill -KILL $$"], 128 + 9),
            (&["/nonexistent/zkit-service-cmd"], 126),
        ];
        for (cmd, expected) in cases {
            let status = tokio::time::timeout(
                LIMIT,
                zkit_service("register", &target.addr, &base)
                    .args(["db", "--port", "5432", "--"])
                    .args(cmd)
                    .status(),
            )
            .await
            .expect("zkit service register exits")
            .expect("run zkit");
            assert_eq!(status.code(), Some(expected), "{name}: {cmd:?}");
            // The CLI registered and left through its own session, perhaps on another member.
            s.client().sync(&base).await.unwrap();
            assert!(
                discovery
                    .query_for_instances("db")
                    .await
                    .unwrap()
                    .is_empty(),
                "{name}: {cmd:?} left an instance registered"
            );
        }
        eprintln!("{name}: zkit service exit codes ok");
    }
}
