//! `zkit elect` end to end, against Apache ZooKeeper (`ZKIT_APACHE_ZK`, and the ensemble at
//! `ZKIT_APACHE_ENSEMBLE`) and an embedded zkit server: three `zkit elect` processes run a shell
//! loop that appends `<token> <id>` lines to a shared log while leader. The leader's process group
//! is killed with SIGKILL (the elector and its CMD, as a crashed machine); a new leader must start
//! within the session timeout + 1 s, on both servers. (Both expire sessions on tick boundaries,
//! Apache in `ExpiryQueue.roundToNextInterval`, so a session can outlive its timeout by up to one
//! tick: the servers here run with ticks of 250 ms and 500 ms, `scripts/apache-zk`, which the 1 s
//! covers.) The shared log is the fencing check: once a token has appeared, no line with a lower
//! token may follow (that would be two leaders at once).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};
use zkit_server::{Server, ServerConfig};

/// The loop CMD runs: one line per 50 ms, `<token> <id>`; on SIGTERM a last `stop` line.
const LEADER_LOOP: &str = r#"trap 'echo "$ZKIT_FENCING_TOKEN $ZKIT_LEADER_ID stop" >> "$LOG"; exit 0' TERM
echo "$ZKIT_FENCING_TOKEN $ZKIT_LEADER_ID start" >> "$LOG"
while :; do echo "$ZKIT_FENCING_TOKEN $ZKIT_LEADER_ID tick" >> "$LOG"; sleep 0.05; done"#;

fn elector(server: &str, path: &str, id: &str, log: &Path, timeout: Duration) -> Child {
    Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args([
            "elect", path, "--id", id, "--server", server, "--grace", "2s",
        ])
        .args(["--session-timeout", &format!("{}ms", timeout.as_millis())])
        .args(["--", "sh", "-c", LEADER_LOOP])
        .env("LOG", log)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        // Its own process group, so the test can kill the elector and its CMD together.
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .expect("spawn zkit elect")
}

fn kill_group(child: &Child) {
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) takes no pointers; -pid is the process group we created above.
        let _ = unsafe { libc::kill(-(pid as libc::pid_t), libc::SIGKILL) };
    }
}

/// `(token, id, what)` lines of the log.
fn read_log(log: &Path) -> Vec<(i64, String, String)> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let mut parts = l.split(' ');
            Some((
                parts.next()?.parse().ok()?,
                parts.next()?.to_string(),
                parts.next()?.to_string(),
            ))
        })
        .collect()
}

/// The fencing check: tokens never go down through the log.
fn assert_tokens_monotonic(log: &[(i64, String, String)], server: &str) {
    for pair in log.windows(2) {
        assert!(
            pair[1].0 >= pair[0].0,
            "{server}: two leaders: {:?} after {:?}",
            pair[1],
            pair[0]
        );
    }
}

async fn wait_for_leader(log: &Path, newer_than: i64, limit: Duration) -> (i64, String, Instant) {
    let deadline = Instant::now() + limit;
    loop {
        if let Some((token, id, _)) = read_log(log)
            .into_iter()
            .find(|(t, _, what)| *t > newer_than && what == "start")
        {
            return (token, id, Instant::now());
        }
        assert!(Instant::now() < deadline, "no new leader within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn kill9_leader_then_new_leader(server: &str, name: &str, timeout: Duration) {
    let dir = std::env::temp_dir().join(format!("zkit-elect-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("log");
    let _ = std::fs::remove_file(&log);
    let path = format!(
        "/elect-{}-{name}-{}",
        std::process::id(),
        rand::random::<u32>()
    );
    let mut children: Vec<(String, Child)> = (0..3)
        .map(|i| {
            let id = format!("e{i}");
            let child = elector(server, &path, &id, &log, timeout);
            (id, child)
        })
        .collect();
    let (token1, leader1, _) = wait_for_leader(&log, i64::MIN, Duration::from_secs(30)).await;
    // Let it run a little, then crash it (elector and CMD together).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idx = children.iter().position(|(id, _)| *id == leader1).unwrap();
    let killed_at = Instant::now();
    kill_group(&children[idx].1);
    let _ = children[idx].1.wait().await;
    let (token2, leader2, started_at) =
        wait_for_leader(&log, token1, timeout * 3 + Duration::from_secs(10)).await;
    let took = started_at.duration_since(killed_at);
    assert_ne!(leader1, leader2);
    let limit = timeout + Duration::from_secs(1);
    assert!(
        took <= limit,
        "{name}: new leader after {took:?}, more than session timeout {timeout:?} + 1 s"
    );
    // A clean hand-over: SIGTERM to the new leader's elector stops its CMD ("stop" line) before
    // the third participant starts.
    let idx2 = children.iter().position(|(id, _)| *id == leader2).unwrap();
    if let Some(pid) = children[idx2].1.id() {
        // SAFETY: no pointers; our own child.
        let _ = unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    }
    let (token3, leader3, _) = wait_for_leader(&log, token2, Duration::from_secs(30)).await;
    assert!(token3 > token2);
    assert_ne!(leader3, leader2);
    let entries = read_log(&log);
    let stop2 = entries
        .iter()
        .position(|(t, _, w)| *t == token2 && w == "stop")
        .expect("the deposed leader's CMD got SIGTERM");
    let start3 = entries
        .iter()
        .position(|(t, _, w)| *t == token3 && w == "start")
        .unwrap();
    assert!(
        stop2 < start3,
        "{name}: next leader started before the old CMD stopped"
    );
    assert_tokens_monotonic(&entries, name);
    for (_, child) in &children {
        kill_group(child);
    }
    for (_, mut child) in children {
        let _ = child.wait().await;
    }
    eprintln!("{name}: new leader {took:?} after kill -9 (session timeout {timeout:?})");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_of_the_leader_elects_a_new_one_in_time_on_zkit() {
    let mut config = ServerConfig::ephemeral();
    config.tick_time = Duration::from_millis(250);
    config.min_session_timeout = Some(Duration::from_millis(1000));
    let server = Server::start(config).await.unwrap();
    kill9_leader_then_new_leader(&server.addr().to_string(), "zkit", Duration::from_secs(2)).await;
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_of_the_leader_elects_a_new_one_in_time_on_apache() {
    let Some(addr) = zkit_testkit::apache_zk() else {
        return;
    };
    // The timeout the issue measured (4 s); scripts/apache-zk's tickTime 500 allows it and
    // bounds Apache's expiry rounding to 0.5 s.
    kill9_leader_then_new_leader(&addr, "apache", Duration::from_secs(4)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_of_the_leader_elects_a_new_one_in_time_on_ensemble() {
    let Some(addr) = zkit_testkit::apache_ensemble() else {
        return;
    };
    // The same members' settings as the standalone server (scripts/apache-zk): tickTime 500.
    kill9_leader_then_new_leader(&addr, "ensemble", Duration::from_secs(4)).await;
}
