//! `zkit serve --config`: zoo.cfg keys applied, flags overriding them, ignored keys warned
//! about, bad values refused with their line number, the admin endpoint started, and SIGHUP
//! re-reading the log level.

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
    let addr = line
        .strip_prefix("zkit serve listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
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
