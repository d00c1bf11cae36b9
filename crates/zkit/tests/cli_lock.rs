//! `zkit lock … -- CMD` end to end (the built `zkit` binary, see `zkit_testkit::zkit_bin`):
//! the child gets the fencing token, is stopped with SIGTERM when the lock is lost (the link to
//! the server is black-holed through a `FaultProxy`), and zkit exits with the documented codes
//! (76 lost, 75 timeout, else the child's code).

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{eventually, servers, session};
use zkit::lock::Mutex;
use zkit_testkit::{unique_path, zkit_bin, FaultProxy};

const EXIT_TIMEOUT: i32 = 75;
const EXIT_LOST: i32 = 76;

fn zkit_lock(server: &str, path: &str, extra: &[&str], cmd: &[&str]) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(zkit_bin());
    c.arg("lock").arg("--server").arg(server).arg(path);
    c.args(extra).arg("--").args(cmd);
    c.stdin(Stdio::null()).kill_on_drop(true);
    c
}

#[tokio::test]
async fn exit_codes_token_and_timeout() {
    for target in servers().await {
        let path = unique_path("cli-lock");
        let status = zkit_lock(
            &target.addr,
            &path,
            &[],
            &["sh", "-c", "test -n \"$ZKIT_FENCING_TOKEN\" && exit 7"],
        )
        .status()
        .await
        .expect("run zkit");
        assert_eq!(
            status.code(),
            Some(7),
            "{}: child's code passes through",
            target.name
        );

        let s = session(&target.addr, Duration::from_secs(10)).await;
        let held = Mutex::new(&s, &path).lock().await.expect("lock");
        let status = zkit_lock(&target.addr, &path, &["--timeout", "300ms"], &["true"])
            .status()
            .await
            .expect("run zkit");
        assert_eq!(status.code(), Some(EXIT_TIMEOUT), "{}", target.name);
        held.release().await.expect("release");
        eprintln!("{}: cli exit codes ok", target.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn child_is_terminated_when_the_lock_is_lost() {
    for target in servers().await {
        let path = unique_path("cli-lost");
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("child.log");
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let script = format!(
            "trap 'echo term >> {log}; exit 0' TERM; echo \"token $ZKIT_FENCING_TOKEN\" >> {log}; \
             while true; do sleep 0.05; done",
            log = log.display()
        );
        let mut child = zkit_lock(
            &proxy.connect_string(),
            &path,
            &["--grace", "5s", "--session-timeout", "4s"],
            &["sh", "-c", &script],
        )
        .spawn()
        .expect("spawn zkit");
        eventually("child started", Duration::from_secs(20), || {
            let log = log.clone();
            async move { std::fs::read_to_string(&log).is_ok_and(|t| t.starts_with("token ")) }
        })
        .await;
        // Black-hole the link: zkit sees Suspended, then Lost when the session's validity
        // deadline passes, and stops the child.
        proxy.pause();
        let status = tokio::time::timeout(Duration::from_secs(30), child.wait())
            .await
            .expect("zkit exits after the loss")
            .expect("status");
        assert_eq!(status.code(), Some(EXIT_LOST), "{}", target.name);
        let text = std::fs::read_to_string(&log).expect("log");
        assert!(
            text.lines().any(|l| l == "term"),
            "{}: child got SIGTERM: {text:?}",
            target.name
        );
        proxy.resume();
        eprintln!("{}: cli kill on loss ok", target.name);
    }
}
