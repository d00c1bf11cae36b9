//! `zkit shell` with stdin piped, run as a subprocess: every command's output in a scripted
//! session, errors printed zkCli's way with the shell going on, the exit status, watch events
//! (caused by the shell itself and by another client), and the same script against Apache
//! ZooKeeper (`ZKIT_APACHE_ZK`) printing the same.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use zkit_server::{Server, ServerConfig};

const WAIT: Duration = Duration::from_secs(30);

struct Output {
    code: i32,
    stdout: String,
    stderr: String,
}

/// Starts `zkit shell --server SERVER` (no server or auth from the environment) with stdin,
/// stdout and stderr piped; killed on drop.
fn spawn_shell(server: &str) -> tokio::process::Child {
    Command::new(env!("CARGO_BIN_EXE_zkit"))
        .args(["shell", "--server", server])
        .env_remove("ZKIT_SERVER")
        .env_remove("ZKIT_AUTH")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("run zkit shell")
}

/// Runs `zkit shell --server SERVER` with `script` on stdin.
async fn shell(server: &str, script: &str) -> Output {
    let mut child = spawn_shell(server);
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(script.as_bytes()).await.expect("script");
    drop(stdin);
    let out = tokio::time::timeout(WAIT, child.wait_with_output())
        .await
        .expect("zkit shell finished in time")
        .expect("zkit shell output");
    Output {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The script every server runs, under ROOT (a fresh node).
const SCRIPT: &str = "\
create ROOT hello
create ROOT/b
create -s ROOT/q- x
create -e ROOT/eph
create -c ROOT/c
create -t 60000 ROOT/t
create ROOT/b
ls ROOT
ls -s ROOT
get ROOT
get -s ROOT
set ROOT world
set -s -v 1 ROOT again
set -v 7 ROOT bad
stat ROOT
get ROOT/nope
delete ROOT
delete -v 0 ROOT/b
get -w ROOT
set ROOT w2
ls -w ROOT
create ROOT/d
stat -w ROOT/x
create ROOT/x
addWatch -m PERSISTENT ROOT/x
set ROOT/x 1
addWatch ROOT/r
create ROOT/r
create ROOT/r/s 'two words'
get ROOT/r/s
getAcl ROOT
setAcl -s ROOT world:anyone:cdrwa
addauth digest alice:secret
whoami
create ROOT/sec data auth::cdrwa
getAcl ROOT/sec
setAcl ROOT/sec world:anyone:x
sync ROOT
config
getEphemerals ROOT
ls -R ROOT/r
nosuchcommand ROOT
history
redo 8
deleteall ROOT/r
deleteall ROOT
stat ROOT
";

/// The output with what differs from run to run (zxids, times, session ids) and from server
/// to server masked, and `root` written ROOT.
fn normalize(text: &str, root: &str) -> String {
    text.replace(root, "ROOT")
        .lines()
        .map(|line| {
            for field in [
                "cZxid",
                "mZxid",
                "pZxid",
                "ctime",
                "mtime",
                "ephemeralOwner",
            ] {
                if let Some(rest) = line.strip_prefix(field) {
                    if rest.starts_with(" = ") {
                        // A persistent node's owner is 0 on every server: keep that.
                        if field == "ephemeralOwner" && rest == " = 0x0" {
                            return line.to_string();
                        }
                        return format!("{field} = *");
                    }
                }
            }
            // The digest id of alice:secret is the same everywhere; the line is kept.
            line.to_string()
        })
        .map(|line| line + "\n")
        .collect()
}

fn unique_root(tag: &str) -> String {
    format!(
        "/zkit-shell-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos()
    )
}

async fn run_script(server: &str, root: &str) -> (Output, String, String) {
    let out = shell(server, &SCRIPT.replace("ROOT", root)).await;
    let stdout = normalize(&out.stdout, root);
    let stderr = normalize(&out.stderr, root);
    (out, stdout, stderr)
}

const ALICE: &str = "alice:aYXlLOpEooaV1cRAvUL1fp9Qt7E=";

fn expected_stdout() -> String {
    let stat = |cversion: i32, version: i32, aversion: i32, len: i32, children: i32| {
        format!(
            "cZxid = *\nctime = *\nmZxid = *\nmtime = *\npZxid = *\ncversion = {cversion}\n\
             dataVersion = {version}\naclVersion = {aversion}\nephemeralOwner = 0x0\n\
             dataLength = {len}\nnumChildren = {children}"
        )
    };
    let lines = [
        // ls, ls -s
        "[b, c, eph, q-0000000001, t]".to_string(),
        "[b, c, eph, q-0000000001, t]".to_string(),
        stat(5, 0, 0, 5, 5),
        // get, get -s
        "hello".to_string(),
        "hello".to_string(),
        stat(5, 0, 0, 5, 5),
        // set -s -v 1
        stat(5, 2, 0, 5, 5),
        // stat
        stat(5, 2, 0, 5, 5),
        // get -w, then set: the event prints after the set
        "again".to_string(),
        String::new(),
        "WATCHER::".to_string(),
        String::new(),
        "WatchedEvent state:SyncConnected type:NodeDataChanged path:ROOT".to_string(),
        // ls -w, then create ROOT/d
        "[c, eph, q-0000000001, t]".to_string(),
        String::new(),
        "WATCHER::".to_string(),
        String::new(),
        "WatchedEvent state:SyncConnected type:NodeChildrenChanged path:ROOT".to_string(),
        // stat -w on a missing node, then create it
        String::new(),
        "WATCHER::".to_string(),
        String::new(),
        "WatchedEvent state:SyncConnected type:NodeCreated path:ROOT/x".to_string(),
        // addWatch -m PERSISTENT, set
        String::new(),
        "WATCHER::".to_string(),
        String::new(),
        "WatchedEvent state:SyncConnected type:NodeDataChanged path:ROOT/x".to_string(),
        // addWatch (recursive), two creates
        String::new(),
        "WATCHER::".to_string(),
        String::new(),
        "WatchedEvent state:SyncConnected type:NodeCreated path:ROOT/r".to_string(),
        String::new(),
        "WATCHER::".to_string(),
        String::new(),
        "WatchedEvent state:SyncConnected type:NodeCreated path:ROOT/r/s".to_string(),
        "two words".to_string(),
        // getAcl, setAcl -s
        "'world,'anyone".to_string(),
        ": cdrwa".to_string(),
        stat(9, 3, 1, 2, 7),
        // whoami: the server's list, in its order
        "Auth scheme: User".to_string(),
        "digest: alice".to_string(),
        "ip: 127.0.0.1".to_string(),
        // getAcl ROOT/sec
        "'digest,'".to_string() + ALICE,
        ": cdrwa".to_string(),
        "Sync is OK".to_string(),
        // config: a standalone server's /zookeeper/config is empty
        String::new(),
        "[ROOT/eph]".to_string(),
        // ls -R
        "ROOT/r".to_string(),
        "ROOT/r/s".to_string(),
    ];
    let mut out = lines.join("\n");
    out.push('\n');
    // history: the last ten commands and itself
    let script: Vec<&str> = SCRIPT.lines().collect();
    let here = script
        .iter()
        .position(|l| *l == "history")
        .expect("history in the script");
    for (i, line) in script.iter().enumerate().take(here + 1).skip(here - 10) {
        out.push_str(&format!("{i} - {line}\n"));
    }
    // redo 8 is `ls -s ROOT`
    out.push_str("[c, d, eph, q-0000000001, r, sec, t, x]\n");
    out.push_str(&stat(10, 3, 1, 2, 8));
    out.push('\n');
    // deleteall ROOT/r: the recursive watch sees both deletions, deepest first
    for path in ["ROOT/r/s", "ROOT/r"] {
        out.push_str(&format!(
            "\nWATCHER::\n\nWatchedEvent state:SyncConnected type:NodeDeleted path:{path}\n"
        ));
    }
    // deleteall ROOT: the persistent watch on ROOT/x sees its deletion
    out.push_str("\nWATCHER::\n\nWatchedEvent state:SyncConnected type:NodeDeleted path:ROOT/x\n");
    out
}

fn expected_stderr() -> String {
    let mut lines = vec![
        "Created ROOT",
        "Created ROOT/b",
        "Created ROOT/q-0000000001",
        "Created ROOT/eph",
        "Created ROOT/c",
        "Created ROOT/t",
        "Node already exists: ROOT/b",
        "version No is not valid : ROOT",
        "Node does not exist: ROOT/nope",
        "Node not empty: ROOT",
        "Created ROOT/d",
        "Node does not exist: ROOT/x",
        "Created ROOT/x",
        "Created ROOT/r",
        "Created ROOT/r/s",
        "Created ROOT/sec",
        "ACL \"world:anyone:x\": unknown permission 'x' (use cdrwa)",
    ];
    // `nosuchcommand`: the usage, then the error
    let usage = "zkit shell: zkCli's commands";
    lines.push(usage);
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// Checks the stderr of the script: every error line in order, the usage for the unknown
/// command, the final `stat` of the deleted root.
fn check_stderr(stderr: &str) {
    let expected = expected_stderr();
    assert!(
        stderr.starts_with(&expected),
        "stderr:\n{stderr}\nexpected to start with:\n{expected}"
    );
    let rest = &stderr[expected.len()..];
    assert!(
        rest.contains("\tls [-s] [-w] [-R] path\n"),
        "usage lists ls: {rest}"
    );
    assert!(
        rest.ends_with("\nCommand not found nosuchcommand\nNode does not exist: ROOT\n"),
        "{rest}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_session_prints_what_zkcli_prints() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let s = server.addr().to_string();
    let root = unique_root("zkit");
    let (out, stdout, stderr) = run_script(&s, &root).await;
    assert_eq!(stdout, expected_stdout(), "stdout:\n{}", out.stdout);
    check_stderr(&stderr);
    // The last command failed (`stat` of the deleted root): so does the shell.
    assert_eq!(out.code, 1, "{}", out.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_does_not_stop_the_shell_and_the_last_command_sets_the_status() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let s = server.addr().to_string();
    let out = shell(&s, "get /missing\nls /zookeeper/nope\n\nls /\n").await;
    assert_eq!(out.stdout, "[zookeeper]\n");
    assert_eq!(
        out.stderr,
        "Node does not exist: /missing\nNode does not exist: /zookeeper/nope\n"
    );
    assert_eq!(out.code, 0);
    let out = shell(&s, "ls /\nget /missing\n").await;
    assert_eq!(out.code, 1);
    // `quit` ends the script there; `close` leaves the shell without a session.
    let out = shell(&s, "close\nls /\nconnect\nls /\nquit\nls /nope\n").await;
    assert_eq!(out.stdout, "[zookeeper]\n");
    assert_eq!(out.stderr, "Not connected\n");
    assert_eq!(out.code, 0);
    // Nothing at all: nothing printed, success.
    let out = shell(&s, "").await;
    assert_eq!(
        (out.code, out.stdout.as_str(), out.stderr.as_str()),
        (0, "", "")
    );
}

/// An event caused by another client prints while the shell waits for its next line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_from_other_clients_print_while_the_shell_waits() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let s = server.addr().to_string();
    let other = zkit_client::Client::connect(&s).await.unwrap();
    other
        .create(
            "/w",
            b"v1",
            &zkit_client::CreateMode::Persistent.with_acls(zkit_client::Acls::anyone_all()),
        )
        .await
        .unwrap();
    let mut child = spawn_shell(&s);
    let mut stdin = child.stdin.take().expect("stdin");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    stdin.write_all(b"get -w /w\n").await.unwrap();
    // The watch is set once the data is printed.
    assert_eq!(next(&mut lines).await, "v1");
    other.set_data("/w", b"v2", None).await.unwrap();
    assert_eq!(next(&mut lines).await, "");
    assert_eq!(next(&mut lines).await, "WATCHER::");
    assert_eq!(next(&mut lines).await, "");
    assert_eq!(
        next(&mut lines).await,
        "WatchedEvent state:SyncConnected type:NodeDataChanged path:/w"
    );
    stdin.write_all(b"get /w\n").await.unwrap();
    assert_eq!(next(&mut lines).await, "v2");
    drop(stdin);
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("exit in time")
        .expect("status");
    assert!(status.success());
}

/// The next line of the shell's stdout, within [`WAIT`].
async fn next(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> String {
    tokio::time::timeout(WAIT, lines.next_line())
        .await
        .expect("a line in time")
        .expect("read")
        .expect("not the end")
}

/// The same script against Apache ZooKeeper prints the same (zxids, times and session ids
/// aside).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_script_prints_the_same_against_apache_zookeeper() {
    let Some(apache) = zkit_testkit::apache_zk() else {
        return;
    };
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let s = server.addr().to_string();
    let (zkit_out, zkit_stdout, zkit_stderr) = run_script(&s, &unique_root("zkit")).await;
    let (apache_out, apache_stdout, apache_stderr) =
        run_script(&apache, &unique_root("apache")).await;
    assert_eq!(
        zkit_stdout, apache_stdout,
        "zkit:\n{}\napache:\n{}",
        zkit_out.stdout, apache_out.stdout
    );
    assert_eq!(zkit_stderr, apache_stderr);
    assert_eq!(zkit_out.code, apache_out.code);
    // And both are what zkCli prints.
    assert_eq!(apache_stdout, expected_stdout());
    check_stderr(&apache_stderr);
}
