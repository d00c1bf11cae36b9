//! A real crash: three `zkit proc member` processes, one of them killed with SIGKILL while in
//! its acquire command. The coordinator must abort, naming it, as soon as the server expires the
//! dead process's session, long before the procedure timeout; the survivors run their cleanup
//! command; no znode is left. Needs the `zkit` binary (`cargo build -p zkit-cli`).

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{children, servers, session};
use zkit::procedure::Coordinator;
use zkit_testkit::{unique_path, zkit_bin, ChildGuard};

fn spawn_member(addr: &str, base: &str, name: &str, log: &std::path::Path) -> ChildGuard {
    let mut child = ChildGuard::spawn(
        Command::new(zkit_bin())
            .args(["proc", "member", "--server", addr, "--base", base])
            .args([
                "--session-timeout",
                "1s",
                "--signature",
                "flush",
                "--name",
                name,
            ])
            // The member "victim" hangs in acquire, where the test kills it.
            .args([
                "--acquire",
                "if [ \"$ZKIT_PROC_MEMBER\" = victim ]; then exec sleep 20; fi",
            ])
            .args(["--inside", "echo done"])
            .args([
                "--cleanup",
                &format!(
                    "echo \"$ZKIT_PROC_MEMBER $ZKIT_PROC_ABORT_SOURCE\" >> '{}'",
                    log.display()
                ),
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit()),
    )
    .expect("spawn zkit proc member");
    let stdout = child.child_mut().stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("ready line");
    assert_eq!(line.trim(), format!("member {name} ready"));
    child
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_member_process_aborts_long_before_the_timeout() {
    for target in servers().await {
        let base = unique_path("proc-kill");
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("cleanup.log");
        let _a = spawn_member(&target.addr, &base, "a", &log);
        let _b = spawn_member(&target.addr, &base, "b", &log);
        let mut victim = spawn_member(&target.addr, &base, "victim", &log);
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let coordinator = Coordinator::new(&s, &base);
        let members: Vec<String> = ["a", "b", "victim"].iter().map(|m| m.to_string()).collect();
        let timeout = Duration::from_secs(120);
        let run =
            tokio::spawn(
                async move { coordinator.run("flush", "i1", b"", &members, timeout).await },
            );
        // Kill the victim once the other two joined the barrier (it is in its acquire command).
        common::eventually("a and b acquired", Duration::from_secs(20), || async {
            children(&s, &format!("{base}/flush/acquired/i1"))
                .await
                .len()
                == 2
        })
        .await;
        let killed = Instant::now();
        victim.kill9().expect("kill -9");
        let err = run.await.expect("run task").expect_err("aborted");
        let took = killed.elapsed();
        assert_eq!(
            err.abort_reason().map(|r| r.source.as_str()),
            Some("victim"),
            "{err}"
        );
        // At most the (negotiated) session timeout plus a tick or two; far below the timeout.
        assert!(
            took < Duration::from_secs(15),
            "{}: abort took {took:?}",
            target.name
        );
        // Acknowledged abort: the survivors' cleanup commands ran before run() returned.
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        let mut lines: Vec<&str> = logged.lines().collect();
        lines.sort();
        assert_eq!(lines, ["a victim", "b victim"], "{}", target.name);
        for dir in ["acquired", "reached", "abort", "running"] {
            let left = children(&s, &format!("{base}/flush/{dir}")).await;
            assert!(
                left.is_empty(),
                "{}: {dir}/ not empty: {left:?}",
                target.name
            );
        }
        eprintln!(
            "{}: killed member process aborted the procedure after {took:?}",
            target.name
        );
    }
}
