//! `zkit serve --config`: zoo.cfg keys applied, flags overriding them, ignored keys warned
//! about, bad values refused with their line number, the admin endpoint started, and SIGHUP
//! re-reading the log level.

mod common;

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

const WAIT: Duration = Duration::from_secs(30);

async fn four_letter(addr: &str, word: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(word.as_bytes()).await.unwrap();
    let mut out = String::new();
    tokio::time::timeout(WAIT, s.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    out
}

type Lines<R> = tokio::io::Lines<BufReader<R>>;

async fn next_line<R: tokio::io::AsyncRead + Unpin>(lines: &mut Lines<R>) -> String {
    tokio::time::timeout(WAIT, lines.next_line())
        .await
        .expect("a line in time")
        .unwrap()
        .expect("output ended")
}

/// Reads lines until one contains `needle` (bounded by WAIT).
async fn wait_for<R: tokio::io::AsyncRead + Unpin>(lines: &mut Lines<R>, needle: &str) {
    lines_until(lines, needle).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_file_flags_warnings_admin_and_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("zoo.cfg");
    let write_cfg = |level: &str| {
        std::fs::write(
            &cfg,
            format!(
                "# test\ntickTime=500\nclientPort=0\nmaxClientCnxns=5\n\
                 4lw.commands.whitelist=conf, ruok\ninitLimit=5\nadmin.serverPort=0\n\
                 dataDir={}\nlogLevel={level}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
    };
    write_cfg("warn");
    let mut child = Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .args(["--tick-time", "700"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = next_line(&mut stdout).await;
    let addr = common::listening_addr(&line);
    let line = next_line(&mut stdout).await;
    assert!(
        line.starts_with("zkit serve admin endpoint on http://127.0.0.1:"),
        "{line}"
    );

    let conf = four_letter(&addr, "conf").await;
    assert!(conf.contains("tickTime=700\n"), "the flag wins: {conf}");
    assert!(conf.contains("maxClientCnxns=5\n"), "{conf}");
    assert_eq!(four_letter(&addr, "ruok").await, "imok");
    assert!(four_letter(&addr, "srvr")
        .await
        .contains("not in the whitelist"));

    // The ignored key is reported on stderr; then SIGHUP re-reads the level.
    wait_for(&mut stderr, "initLimit ignored").await;
    write_cfg("zkit_server=debug,info");
    let pid = child.id().unwrap().to_string();
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .await
        .unwrap()
        .success());
    wait_for(&mut stderr, "log level reloaded").await;
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .unwrap()
        .success());
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "{status:?}");
}

#[tokio::test]
async fn a_bad_value_is_refused_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("zoo.cfg");
    std::fs::write(&cfg, "tickTime=2000\nclientPort=twenty\n").unwrap();
    let out = tokio::time::timeout(
        WAIT,
        Command::new(env!("CARGO_BIN_EXE_zkit"))
            .args(["serve", "--in-memory", "--config"])
            .arg(&cfg)
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("line 2") && stderr.contains("clientPort"),
        "{stderr}"
    );
}

/// Reads stderr lines until one contains `needle`; every line read, in order.
async fn lines_until<R: tokio::io::AsyncRead + Unpin>(
    lines: &mut Lines<R>,
    needle: &str,
) -> Vec<String> {
    let mut seen = Vec::new();
    let found = tokio::time::timeout(WAIT, async {
        while let Some(l) = lines.next_line().await.unwrap() {
            let hit = l.contains(needle);
            seen.push(l);
            if hit {
                return true;
            }
        }
        false
    })
    .await;
    assert!(matches!(found, Ok(true)), "no {needle:?} in {seen:?}");
    seen
}

fn start_serve(args: &[&str]) -> tokio::process::Child {
    Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args(["serve", "--in-memory", "--port", "0", "--log-level", "info"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_lines_and_an_oversized_request_warning() {
    let mut child = start_serve(&["--max-client-cnxns", "7", "--tick-time", "500"]);
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = next_line(&mut stdout).await;
    let addr = common::listening_addr(&line);
    let start = lines_until(&mut stderr, "zkit server limits")
        .await
        .join("\n");
    for field in [
        "data_dir=(in memory",
        "fsync=none (in memory)",
        &format!("client={addr}"),
        "secure=off",
        "admin=off",
        "max_client_cnxns=7",
        "jute_maxbuffer=1048575",
        "tick_time_ms=500",
        "min_session_timeout_ms=1000",
        "max_session_timeout_ms=10000",
    ] {
        assert!(start.contains(field), "no {field:?} in:\n{start}");
    }

    // A frame longer than jute.maxbuffer: one WARN naming the client, and the connection
    // closes.
    let mut s = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let me = s.local_addr().unwrap().to_string();
    s.write_all(&0x7fff_0000_i32.to_be_bytes()).await.unwrap();
    s.write_all(&[0; 64]).await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(WAIT, s.read_to_end(&mut rest))
        .await
        .expect("closed in time")
        .ok();
    let warned = lines_until(&mut stderr, "Len error").await;
    let line = warned.last().unwrap();
    assert!(line.contains("WARN") && line.contains(&me), "{line}");
    assert!(line.contains("jute.maxbuffer (1048575 bytes)"), "{line}");
    // The server still serves.
    assert!(four_letter(&addr, "srvr")
        .await
        .contains("Mode: standalone"));
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_log_format_writes_one_object_per_line() {
    let mut child = start_serve(&["--log-format", "json"]);
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
    next_line(&mut stdout).await;
    let lines = lines_until(&mut stderr, "zkit server limits").await;
    let objects: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l:?} is not JSON: {e}")))
        .collect();
    let storage = objects
        .iter()
        .find(|o| o["fields"]["message"] == "zkit server storage")
        .expect("the storage line");
    assert_eq!(storage["level"], "INFO");
    assert!(storage["fields"]["data_dir"]
        .as_str()
        .is_some_and(|d| d.contains("in memory")));
    child.kill().await.unwrap();
}
