//! Driving the other libraries' programs (kazoo in Python, Curator in Java) from the interop
//! tests: the lines of a finished run, a program driven line by line, the lock-exclusion check,
//! and the loop that runs one interop case against every server.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use zkit::Session;
use zkit_testkit::Target;

/// Runs `cmd` (stdout piped) to completion, at most 120 s; returns its stdout lines, or panics
/// with its stderr when it failed. `what` names it in the messages.
pub async fn finished_lines(mut cmd: tokio::process::Command, what: &str) -> Vec<String> {
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{what} finishes"))
        .unwrap_or_else(|e| panic!("{what} output: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// A long-running program driven line by line: lines in on its stdin, lines out of its stdout.
pub struct Driven {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Driven {
    /// Spawns `cmd` with stdin and stdout piped.
    pub fn start(mut cmd: tokio::process::Command) -> Driven {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the foreign program");
        let stdin = child.stdin.take().expect("stdin");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Driven {
            child,
            stdin,
            lines,
        }
    }

    /// The next line it prints (at most 90 s).
    pub async fn line(&mut self) -> String {
        let line = tokio::time::timeout(Duration::from_secs(90), self.lines.next_line())
            .await
            .expect("the foreign program answers in time")
            .expect("read");
        match line {
            Some(line) => line,
            None => panic!("the foreign program exited: {}", self.stderr().await),
        }
    }

    /// What it wrote to stderr (when that is piped), once it has exited.
    async fn stderr(&mut self) -> String {
        let mut text = String::new();
        if let Some(mut stderr) = self.child.stderr.take() {
            let _ = tokio::io::AsyncReadExt::read_to_string(&mut stderr, &mut text).await;
        }
        text
    }

    /// Writes `line` to its stdin.
    pub async fn tell(&mut self, line: &str) {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("tell the foreign program");
    }

    /// Tells it `command` and returns its one-line reply.
    pub async fn ask(&mut self, command: &str) -> String {
        self.tell(command).await;
        let reply = tokio::time::timeout(Duration::from_secs(90), self.lines.next_line())
            .await
            .unwrap_or_else(|_| panic!("no reply to {command:?} in time"))
            .expect("read");
        match reply {
            Some(reply) => reply,
            None => panic!(
                "the foreign program exited on {command:?}: {}",
                self.stderr().await
            ),
        }
    }

    /// Closes its stdin and waits until it exits successfully ([`super::foreign_finished`]).
    pub async fn finish(self, what: &str, target: &str) {
        drop(self.stdin);
        super::foreign_finished(self.child, what, target).await;
    }
}

/// Checks mutual exclusion with the other library's lock: waits for `foreign` (holding its lock
/// `rounds` times, marking `enter <foreign_name>` / `exit <foreign_name>` in `marks` while it
/// holds) and for `rust` (the zkit side doing the same with `enter rust` / `exit rust`, already
/// started by the caller or run here), then that the marks never interleave and both sides
/// completed every round.
pub async fn check_exclusion(
    foreign: tokio::process::Child,
    foreign_name: &str,
    rust: impl Future<Output = ()>,
    marks: &Path,
    rounds: usize,
    target: &str,
) {
    rust.await;
    super::foreign_finished(foreign, foreign_name, target).await;
    let text = std::fs::read_to_string(marks).expect("marks");
    assert_eq!(
        super::check_no_interleaving(&text, foreign_name),
        (rounds, rounds),
        "{target}"
    );
}

/// Runs `case(program, dir, target, session)` once against every server `target` of
/// [`super::servers`], each time with a fresh `session` to it (10 s session timeout): the
/// program (a kazoo script, or the classpath of the compiled Java side) and the directory it
/// lives in (for files a case shares with it) are passed through to every case.
pub async fn each_target<P: Clone, F, Fut>(program: &P, dir: &Path, mut case: F)
where
    F: FnMut(P, PathBuf, Target, Session) -> Fut,
    Fut: Future<Output = ()>,
{
    for mut target in super::servers().await {
        // Held here: a case's future may capture only some fields of its target, and the
        // embedded server must outlive the case.
        let _server = target.server.take();
        let session = super::session(&target.addr, Duration::from_secs(10)).await;
        case(program.clone(), dir.to_path_buf(), target, session).await;
    }
}

/// [`each_target`] for a kazoo program: writes `source` as `dir/name` into a fresh temp dir
/// first, or prints a SKIP line and runs nothing when kazoo cannot run here
/// ([`super::kazoo_script`]).
pub async fn each_kazoo_target<F, Fut>(name: &str, source: &str, case: F)
where
    F: FnMut(PathBuf, PathBuf, Target, Session) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(script) = super::kazoo_script(dir.path(), name, source) else {
        return;
    };
    each_target(&script, dir.path(), case).await;
}
