//! What packagers install: shell completions and man pages generated from the command
//! definitions, and the sample configurations under packaging/, which `zkit serve --config`
//! must accept without a warning.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const WAIT: Duration = Duration::from_secs(30);

async fn zkit(args: &[&str]) -> (i32, String, String) {
    common::zkit_within(WAIT, args).await
}

#[tokio::test]
async fn completions_for_bash_zsh_and_fish() {
    for (shell, marker) in [
        ("bash", "_zkit()"),
        ("zsh", "#compdef zkit"),
        ("fish", "complete -c zkit"),
    ] {
        let (code, out, err) = zkit(&["completions", shell]).await;
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(out.contains(marker), "{shell}: no {marker:?}");
        for word in ["lock", "server", "session-timeout", "tls-ca"] {
            assert!(out.contains(word), "{shell}: no {word}");
        }
    }
}

#[tokio::test]
async fn man_pages_for_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let man = dir.path().join("man1");
    let (code, _, err) = zkit(&["man", man.to_str().unwrap()]).await;
    assert_eq!(code, 0, "{err}");
    for page in [
        "zkit.1",
        "zkit-serve.1",
        "zkit-lock.1",
        "zkit-bench-server.1",
        "zkit-get.1",
    ] {
        let text =
            std::fs::read_to_string(man.join(page)).unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(text.contains(".TH"), "{page} is not a man page");
    }
    let lock = std::fs::read_to_string(man.join("zkit-lock.1")).unwrap();
    assert!(
        lock.contains("session\\-timeout"),
        "zkit-lock.1 lacks the shared flags"
    );
}

/// Starts `zkit serve --config FILE` on free ports and a temp data dir; returns its stderr
/// up to the "listening" line, after stopping it.
async fn serve_with(config: &Path) -> String {
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args(["serve", "--config"])
        .arg(config)
        .args(["--port", "0", "--admin-port", "0", "--data-dir"])
        .arg(data.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(WAIT, stdout.next_line())
        .await
        .expect("started in time")
        .unwrap()
        .unwrap_or_default();
    child.start_kill().unwrap();
    let out = child.wait_with_output().await.unwrap();
    assert!(
        first.starts_with("zkit serve listening on "),
        "{config:?}: {first:?}"
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn sample_configs_are_accepted_without_warnings() {
    let packaging = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../packaging");
    for file in ["zoo.cfg", "zkit.toml"] {
        let stderr = serve_with(&packaging.join(file)).await;
        assert!(!stderr.contains("WARN"), "{file}: {stderr}");
    }
}
