//! Every ```sh block of the README runs as written, in order, against the scratch server the
//! README itself names (the block after `<!-- readme-test: server -->`, started here with
//! `--port 0`). A block after `<!-- readme-test: skip (why) -->` is not run (servers that run
//! until stopped, builds, Apache set-up); everything else must exit 0 under `sh -e`.
//!
//! Each block runs in one scratch directory with the `zkit` under test first on PATH,
//! `ZKIT_SERVER` pointing at the server, and `$A`/`$B` (the README's two servers of the
//! export/import example) as the server and a chroot `/copy` on it.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// One block: far more than any runs for (the benchmarks take a second or two each).
const BLOCK_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, PartialEq)]
enum Mark {
    Run,
    Skip,
    Server,
}

/// The README's ```sh blocks in order, each with the mark of the comment right before it.
fn sh_blocks(readme: &str) -> Vec<(Mark, usize, String)> {
    let mut blocks = Vec::new();
    let mut mark = Mark::Run;
    let mut lines = readme.lines().enumerate();
    while let Some((number, line)) = lines.next() {
        let line = line.trim();
        if line.starts_with("<!-- readme-test: skip") {
            mark = Mark::Skip;
        } else if line == "<!-- readme-test: server -->" {
            mark = Mark::Server;
        } else if line == "```sh" {
            let body: Vec<&str> = lines
                .by_ref()
                .map(|(_, l)| l)
                .take_while(|l| l.trim() != "```")
                .collect();
            blocks.push((
                std::mem::replace(&mut mark, Mark::Run),
                number + 1,
                body.join("\n"),
            ));
        } else if !line.is_empty() {
            // A mark applies to the very next block only, with blank lines between at most.
            mark = Mark::Run;
        }
    }
    blocks
}

#[test]
fn marks_apply_to_the_next_block_only() {
    let text = "<!-- readme-test: skip (x) -->\n```sh\na\n```\n\ntext\n```sh\nb\nc\n```\n";
    let blocks = sh_blocks(text);
    assert_eq!(blocks.len(), 2);
    assert_eq!((&blocks[0].0, blocks[0].2.as_str()), (&Mark::Skip, "a"));
    assert_eq!((&blocks[1].0, blocks[1].2.as_str()), (&Mark::Run, "b\nc"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_command_blocks_run_as_written() {
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    let readme = std::fs::read_to_string(&readme_path).expect("read README.md");
    let blocks = sh_blocks(&readme);
    let zkit = Path::new(env!("CARGO_BIN_EXE_zkit"));
    let path = format!(
        "{}:{}",
        zkit.parent().expect("bin dir").display(),
        std::env::var("PATH").unwrap_or_default()
    );

    // The scratch server, as the README starts it (on a free port instead of 2181).
    let servers: Vec<_> = blocks.iter().filter(|b| b.0 == Mark::Server).collect();
    assert_eq!(
        servers.len(),
        1,
        "README.md names exactly one scratch server"
    );
    let command = servers[0].2.split(" #").next().expect("a command").trim();
    assert!(command.starts_with("zkit serve"), "{command}");
    let mut server = Command::new("sh")
        .arg("-c")
        .arg(format!("exec {command} --port 0"))
        .env("PATH", &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("start the scratch server");
    let mut stdout = BufReader::new(server.stdout.take().expect("stdout")).lines();
    let first = tokio::time::timeout(BLOCK_WAIT, stdout.next_line())
        .await
        .expect("server started in time")
        .expect("read")
        .expect("a line");
    let addr = common::listening_addr(&first);

    let dir = tempfile::tempdir().expect("tempdir");
    let run = |script: String| {
        let mut command = Command::new("sh");
        command
            .arg("-ec")
            .arg(script)
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("ZKIT_SERVER", &addr)
            .env("A", &addr)
            .env("B", format!("{addr}/copy"))
            .env_remove("ZKIT_AUTH")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        async move {
            tokio::time::timeout(BLOCK_WAIT, command.output())
                .await
                .expect("block finished in time")
                .expect("run sh")
        }
    };
    // `$B` is a chroot on the same server: its root must exist.
    let out = run("zkit create /copy".into()).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let mut ran = 0;
    for (mark, line, body) in &blocks {
        if *mark != Mark::Run {
            continue;
        }
        let out = run(body.clone()).await;
        assert!(
            out.status.success(),
            "README.md block at line {line} failed ({}):\n{body}\n--- stdout\n{}\n--- stderr\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    // The command-line, service and export/import blocks at least.
    assert!(ran >= 3, "only {ran} README blocks ran");
    let _ = server.kill().await;
}

/// The README's first command, `cargo run --release -- demo`, is run from the workspace root,
/// where `cargo run` needs exactly one binary among the default members: the `zkit` CLI. (The
/// block is skipped above: it builds the release binary.) A second binary crate left in the
/// default members makes that command fail with "could not determine which binary to run".
#[test]
fn the_first_readme_command_finds_one_binary_to_run() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let (_, _, first) = sh_blocks(&readme).into_iter().next().unwrap();
    assert!(
        first.contains("cargo run --release -- demo"),
        "the README no longer starts with the demo command:\n{first}"
    );
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let defaults: Vec<&str> = meta["workspace_default_members"]
        .as_array()
        .expect("cargo metadata without workspace_default_members (cargo older than 1.71?)")
        .iter()
        .filter_map(|id| id.as_str())
        .collect();
    let mut bins: Vec<String> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| defaults.contains(&p["id"].as_str().unwrap_or("")))
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter(|t| {
            t["kind"]
                .as_array()
                .is_some_and(|k| k.iter().any(|k| k == "bin"))
        })
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect();
    bins.sort();
    assert_eq!(
        bins,
        ["zkit"],
        "binaries `cargo run` at the root would choose from"
    );
}
