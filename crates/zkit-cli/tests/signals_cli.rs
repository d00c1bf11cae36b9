//! Signals to `zkit lock`, `zkit elect`, `zkit proc member` and `zkit service register` while
//! their CMD runs, with real processes on an embedded zkit server:
//!
//! - SIGTERM to zkit reaches CMD; CMD has exited before zkit exits, and before the next holder
//!   (a second `zkit lock` / `zkit elect` waiting on the same path, or the coordinator's abort)
//!   goes ahead; zkit exits with CMD's status.
//! - A CMD that ignores SIGTERM is SIGKILLed after `--grace`; zkit exits with 137.
//! - kill -9 of zkit: the kernel kills CMD (PR_SET_PDEATHSIG).
//!
//! The overlap check is the operating system's: every holder's CMD `mkdir`s one marker dir
//! (which fails if it is there) on entry and `rmdir`s it on exit; a failed `mkdir` is written to
//! an overlap file that must stay absent.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};
use zkit::{Session, SessionOptions};
use zkit_server::{Server, ServerConfig};

/// The first holder's CMD: enters (marker dir), and on SIGTERM takes 300 ms to clean up, then
/// leaves (removes the marker) and exits with 3.
const HOLDER: &str = r#"if mkdir "$MARK" 2>/dev/null; then :; else echo "overlap first" >> "$OVERLAP"; fi
trap 'echo term >> "$LOG"; sleep 0.3; rmdir "$MARK"; echo end >> "$LOG"; exit 3' TERM
echo "start $$" >> "$LOG"
while :; do sleep 0.05; done"#;

/// A CMD that ignores SIGTERM.
const STUBBORN: &str = r#"trap '' TERM
echo "start $$" >> "$LOG"
while :; do sleep 0.05; done"#;

/// The next holder's CMD: enters and leaves at once.
const NEXT: &str = r#"if mkdir "$MARK" 2>/dev/null; then rmdir "$MARK"; else echo "overlap next" >> "$OVERLAP"; fi
echo start >> "$LOG_NEXT""#;

/// Which wrapper runs CMD.
#[derive(Debug, Clone, Copy)]
enum Wrapper {
    Lock,
    Elect,
    ProcMember,
    Service,
}

/// One test's server, paths and files; kills every CMD it saw start when dropped (the old,
/// unsafe behaviour leaves them running).
struct Scene {
    server: Server,
    addr: String,
    path: String,
    dir: tempfile::TempDir,
}

impl Scene {
    async fn new() -> Scene {
        let mut config = ServerConfig::ephemeral();
        config.tick_time = Duration::from_millis(250);
        config.min_session_timeout = Some(Duration::from_millis(1000));
        let server = Server::start(config).await.expect("embedded server");
        let addr = server.addr().to_string();
        Scene {
            server,
            addr,
            path: format!("/signals-{}-{}", std::process::id(), rand::random::<u32>()),
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `wrapper` running `script` as its CMD (for `proc member`: the acquire phase).
    fn spawn(&self, wrapper: Wrapper, id: &str, script: &str, extra: &[&str]) -> Child {
        let mut c = Command::new(env!("CARGO_BIN_EXE_zkit"));
        match wrapper {
            Wrapper::Lock => {
                c.args(["lock", "--server", &self.addr, &self.path]);
                c.args(extra).args(["--", "sh", "-c", script]);
            }
            Wrapper::Elect => {
                c.args(["elect", &self.path, "--id", id, "--server", &self.addr]);
                c.args(extra).args(["--", "sh", "-c", script]);
            }
            Wrapper::Service => {
                c.args([
                    "service", "register", id, "--port", "1", "--server", &self.addr,
                ]);
                c.args(["--base", &self.path]);
                c.args(extra).args(["--", "sh", "-c", script]);
            }
            Wrapper::ProcMember => {
                c.args([
                    "proc", "member", "--server", &self.addr, "--base", &self.path,
                ]);
                c.args(["--signature", "sig", "--name", id, "--acquire", script]);
                c.args(extra);
            }
        }
        // A member says `member NAME ready` on stdout once registered.
        let stdout = match wrapper {
            Wrapper::ProcMember => Stdio::piped(),
            Wrapper::Lock | Wrapper::Elect | Wrapper::Service => Stdio::null(),
        };
        c.env("MARK", self.file("mark"))
            .env("OVERLAP", self.file("overlap"))
            .env("LOG", self.file(&format!("log-{id}")))
            .env("LOG_NEXT", self.file("log-next"))
            .stdin(Stdio::null())
            .stdout(stdout)
            .kill_on_drop(true);
        c.spawn().expect("spawn zkit")
    }

    /// For `proc member` (`first`): once the member is registered, a coordinator that starts
    /// instance `i1` on it (started earlier, it would find no live member `m1` and abort).
    async fn coordinator_for(&self, wrapper: Wrapper, first: &mut Child) -> Option<Child> {
        use tokio::io::AsyncBufReadExt as _;
        if !matches!(wrapper, Wrapper::ProcMember) {
            return None;
        }
        let stdout = first.stdout.take().expect("member stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the member registers in time")
            .expect("read the member's stdout");
        assert_eq!(ready.as_deref(), Some("member m1 ready"));
        Some(self.coordinator())
    }

    /// A coordinator that starts instance `i1` on member `m1`.
    fn coordinator(&self) -> Child {
        Command::new(env!("CARGO_BIN_EXE_zkit"))
            .args([
                "proc", "run", "sig", "--server", &self.addr, "--base", &self.path,
            ])
            .args(["--instance", "i1", "--members", "m1", "--timeout", "60s"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn zkit proc run")
    }

    fn log(&self, id: &str) -> String {
        std::fs::read_to_string(self.file(&format!("log-{id}"))).unwrap_or_default()
    }

    /// Waits (bounded) until CMD of `id` logged its start; returns its pid.
    async fn started(&self, id: &str) -> u32 {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let log = self.log(id);
            if let Some(pid) = log.lines().find_map(|l| l.strip_prefix("start ")) {
                return pid.trim().parse().expect("pid");
            }
            assert!(
                Instant::now() < deadline,
                "CMD of {id} did not start: {log:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits (bounded) until `n` nodes are under `path` (a waiter has queued behind the holder).
    async fn contenders(&self, path: &str, n: usize) {
        let session = Session::connect(&self.addr, SessionOptions::default())
            .await
            .expect("session");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let children = session
                .client()
                .list_children(path)
                .await
                .unwrap_or_default();
            if children.len() >= n {
                break;
            }
            assert!(Instant::now() < deadline, "{n} contenders: {children:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        session.close();
    }

    fn overlaps(&self) -> String {
        std::fs::read_to_string(self.file("overlap")).unwrap_or_default()
    }
}

/// Whether process `pid` still exists (a zombie counts as gone: it runs no code).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "pid (comm) S ...": the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Kills `pid` with SIGKILL if it still runs (test cleanup after a failure).
struct KillOnDrop(Vec<u32>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if alive(pid) {
                // SAFETY: kill(2) takes no pointers.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        }
    }
}

fn signal(child: &Child, signal: libc::c_int) {
    let pid = child.id().expect("zkit still running");
    // SAFETY: kill(2) takes no pointers; the pid is our own unreaped child.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

async fn exited(child: &mut Child, what: &str) -> ExitStatus {
    tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap_or_else(|_| panic!("{what} did not exit"))
        .expect("wait")
}

fn code(status: ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.code().or_else(|| status.signal().map(|s| 128 + s))
}

/// SIGTERM to the first holder's zkit while a second one waits: CMD gets it, cleans up and
/// exits (3) before zkit exits with 3 and before the next holder's CMD runs.
async fn sigterm_is_passed_on_and_waited_for(wrapper: Wrapper) {
    let scene = Scene::new().await;
    // A short session timeout: were the lock given up with CMD still running, the next holder
    // would start one session timeout later, well within this test's bounds.
    let quick = ["--session-timeout", "2s", "--grace", "10s"];
    let mut first = scene.spawn(wrapper, "m1", HOLDER, &quick);
    let coordinator = scene.coordinator_for(wrapper, &mut first).await;
    let pid = scene.started("m1").await;
    let _cleanup = KillOnDrop(vec![pid]);
    let mut next = match wrapper {
        Wrapper::Lock | Wrapper::Elect => {
            let next = scene.spawn(wrapper, "next", NEXT, &quick);
            scene.contenders(&scene.path, 2).await;
            Some(next)
        }
        Wrapper::ProcMember | Wrapper::Service => None,
    };

    signal(&first, libc::SIGTERM);
    let status = exited(&mut first, "the first zkit").await;
    // At the moment zkit has exited, CMD must be gone, having run its SIGTERM handler.
    let cmd_alive = alive(pid);
    let log = scene.log("m1");
    if let Some(next) = next.as_mut() {
        let next_status = exited(next, "the next zkit").await;
        assert_eq!(code(next_status), Some(0), "{wrapper:?}: next holder");
        assert!(
            std::fs::read_to_string(scene.file("log-next")).is_ok_and(|l| l.contains("start")),
            "{wrapper:?}: the next holder's CMD ran"
        );
    }
    if let Some(mut coordinator) = coordinator {
        // The member aborts (its acquire command failed), so the coordinator ends: after CMD.
        let status = exited(&mut coordinator, "the coordinator").await;
        assert_eq!(code(status), Some(2), "{wrapper:?}: the procedure aborted");
    }
    assert_eq!(scene.overlaps(), "", "{wrapper:?}: two holders at once");
    assert!(!cmd_alive, "{wrapper:?}: CMD still ran when zkit exited");
    assert!(
        log.lines().any(|l| l == "term") && log.lines().any(|l| l == "end"),
        "{wrapper:?}: CMD got SIGTERM and finished its handler before zkit exited: {log:?}"
    );
    assert_eq!(
        code(status),
        Some(3),
        "{wrapper:?}: zkit exits with CMD's status"
    );
    scene.server.stop().await;
}

/// A CMD that ignores SIGTERM: SIGKILLed `--grace` after the signal; zkit exits with 137 once
/// it is gone.
async fn stubborn_cmd_is_killed_after_the_grace(wrapper: Wrapper) {
    let scene = Scene::new().await;
    let grace = Duration::from_secs(1);
    let mut first = scene.spawn(wrapper, "m1", STUBBORN, &["--grace", "1s"]);
    let coordinator = scene.coordinator_for(wrapper, &mut first).await;
    let pid = scene.started("m1").await;
    let _cleanup = KillOnDrop(vec![pid]);
    let signalled = Instant::now();
    signal(&first, libc::SIGTERM);
    let status = exited(&mut first, "zkit").await;
    let took = signalled.elapsed();
    assert!(!alive(pid), "{wrapper:?}: CMD still ran when zkit exited");
    assert_eq!(
        code(status),
        Some(137),
        "{wrapper:?}: CMD's status (SIGKILL)"
    );
    assert!(
        took >= grace,
        "{wrapper:?}: zkit exited {took:?} after the signal, before the grace ended"
    );
    drop(coordinator);
    scene.server.stop().await;
}

/// kill -9 of zkit: nothing in zkit runs any more; the kernel kills CMD (parent-death signal).
async fn kill9_of_zkit_kills_cmd(wrapper: Wrapper) {
    let scene = Scene::new().await;
    let mut first = scene.spawn(wrapper, "m1", HOLDER, &[]);
    let coordinator = scene.coordinator_for(wrapper, &mut first).await;
    let pid = scene.started("m1").await;
    let _cleanup = KillOnDrop(vec![pid]);
    signal(&first, libc::SIGKILL);
    exited(&mut first, "zkit").await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(pid) {
        assert!(
            Instant::now() < deadline,
            "{wrapper:?}: CMD {pid} still runs 5 s after zkit was killed with SIGKILL"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !scene.log("m1").contains("term"),
        "{wrapper:?}: CMD got SIGKILL, not SIGTERM"
    );
    drop(coordinator);
    scene.server.stop().await;
}

/// SIGTERM to a `zkit lock` still waiting for the lock: it gives up (128 + 15) and never runs
/// CMD, and the holder keeps the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_waiting_for_the_lock_gives_up_on_sigterm() {
    let scene = Scene::new().await;
    let mut first = scene.spawn(Wrapper::Lock, "m1", HOLDER, &[]);
    let pid = scene.started("m1").await;
    let _cleanup = KillOnDrop(vec![pid]);
    let mut waiter = scene.spawn(Wrapper::Lock, "next", NEXT, &[]);
    scene.contenders(&scene.path, 2).await;
    signal(&waiter, libc::SIGTERM);
    let status = exited(&mut waiter, "the waiting zkit").await;
    assert_eq!(code(status), Some(143), "exit 128 + SIGTERM");
    assert!(
        !scene.file("log-next").exists(),
        "the waiter's CMD must not run"
    );
    assert!(alive(pid), "the holder's CMD runs on");
    signal(&first, libc::SIGTERM);
    assert_eq!(code(exited(&mut first, "the holder").await), Some(3));
    assert_eq!(scene.overlaps(), "");
    scene.server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_passes_sigterm_on_and_waits() {
    sigterm_is_passed_on_and_waited_for(Wrapper::Lock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_passes_sigterm_on_and_waits() {
    sigterm_is_passed_on_and_waited_for(Wrapper::Elect).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proc_member_passes_sigterm_on_and_waits() {
    sigterm_is_passed_on_and_waited_for(Wrapper::ProcMember).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_kills_a_stubborn_cmd_after_the_grace() {
    stubborn_cmd_is_killed_after_the_grace(Wrapper::Lock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_kills_a_stubborn_cmd_after_the_grace() {
    stubborn_cmd_is_killed_after_the_grace(Wrapper::Elect).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proc_member_kills_a_stubborn_cmd_after_the_grace() {
    stubborn_cmd_is_killed_after_the_grace(Wrapper::ProcMember).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_cmd_dies_with_a_killed_zkit() {
    kill9_of_zkit_kills_cmd(Wrapper::Lock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elect_cmd_dies_with_a_killed_zkit() {
    kill9_of_zkit_kills_cmd(Wrapper::Elect).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proc_member_cmd_dies_with_a_killed_zkit() {
    kill9_of_zkit_kills_cmd(Wrapper::ProcMember).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_passes_sigterm_on_and_waits() {
    sigterm_is_passed_on_and_waited_for(Wrapper::Service).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_kills_a_stubborn_cmd_after_the_grace() {
    stubborn_cmd_is_killed_after_the_grace(Wrapper::Service).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_cmd_dies_with_a_killed_zkit() {
    kill9_of_zkit_kills_cmd(Wrapper::Service).await;
}
