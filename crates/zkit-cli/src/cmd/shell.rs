//! `zkit shell`: an interactive shell with zkCli's command names, argument forms and output
//! (`ls [-s] [-w] [-R] path`, `get [-s] [-w] path`, `create [-s] [-e] [-c] [-t ttl] path [data]
//! [acl]`, …; `help` lists them), as Apache's `ZooKeeperMain` and its `cli/*Command` classes
//! print them.
//!
//! - Errors print as zkCli prints them (`Node does not exist: /x`) on stderr, and the shell goes
//!   on with the next command.
//! - Watch events (from `ls -w`, `get -w`, `stat -w`, `config -w`, `addWatch`) and session
//!   state changes print as zkCli's watcher does: a blank line, `WATCHER::`, a blank line and
//!   `WatchedEvent state:SyncConnected type:NodeDataChanged path:/x`. An event caused by one of
//!   the shell's own commands prints right after that command's output (the server sends it
//!   before the command's reply).
//! - On a terminal: line editing, a history file (`$ZKIT_SHELL_HISTORY`, else
//!   `$XDG_DATA_HOME/zkit/shell_history` or `~/.local/share/zkit/shell_history`, at most
//!   [`shell_complete::HISTORY_SIZE`] lines) and tab completion of command names and znode paths (the server is
//!   asked for the children of the typed path's parent), with rustyline.
//! - Not on a terminal (stdin piped): commands are read line by line, nothing is printed but the
//!   commands' own output (no banner, no prompt), and the exit status is the last command's
//!   (0 when it succeeded, or when there was none; 1 when it failed), as `ZooKeeperMain` exits
//!   with the last command's exit code.
//!
//! The completion itself is the pure [`shell_complete::complete`](super::shell_complete).

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Parser};
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use futures::{FutureExt as _, StreamExt as _};
use tokio::io::AsyncBufReadExt as _;
use zkit_client::{
    AddWatchMode, Client, Error as ZkError, EventType, OneshotWatcher, PersistentWatcher,
    SessionState, StateWatcher, WatchedEvent,
};

use super::acl::{parse_acl_list, perms_text};
use super::conn::{close, ConnArgs};
use super::node::{create_options, delete_tree, format_stat, list_tree};
use super::shell_complete::{self, command_names};
use super::shell_parse::{split_words, usage_text, Line, ShellCommand};

/// How many earlier commands `history` lists (zkCli: the last ten and this one).
const HISTORY_SHOWN: usize = 10;

/// `zkit shell`.
#[derive(Debug, Args)]
pub struct ShellArgs {
    #[command(flatten)]
    conn: ConnArgs,
}

/// zkCli's message for a failed operation on `path` (its `CliWrapperException`).
fn zkcli_error(err: &ZkError, path: &str) -> String {
    match err {
        ZkError::NoNode => format!("Node does not exist: {path}"),
        ZkError::NoChildrenForEphemerals => format!("Ephemerals cannot have children: {path}"),
        ZkError::NodeExists => format!("Node already exists: {path}"),
        ZkError::NotEmpty => format!("Node not empty: {path}"),
        ZkError::NotReadOnly => format!("Not a read-only call: {path}"),
        ZkError::InvalidAcl => format!("Acl is not valid : {path}"),
        ZkError::NoAuth => format!("Insufficient permission : {path}"),
        ZkError::BadArguments(_) => format!("Arguments are not valid : {path}"),
        ZkError::BadVersion => format!("version No is not valid : {path}"),
        ZkError::QuotaExceeded => format!("Quota has exceeded : {path}"),
        // KeeperException.getMessage for the others.
        other => format!("KeeperErrorCode = {} for {path}", code_name(other)),
    }
}

/// ZooKeeper's name for an error code (`KeeperException.Code`'s, as its messages spell it).
fn code_name(err: &ZkError) -> String {
    match err {
        ZkError::ConnectionLoss => "ConnectionLoss".into(),
        ZkError::SessionExpired => "Session expired".into(),
        ZkError::Unimplemented => "Unimplemented".into(),
        ZkError::OperationTimeout => "OperationTimeout".into(),
        ZkError::AuthFailed => "AuthFailed".into(),
        ZkError::SessionMoved => "Session moved".into(),
        other => other.to_string(),
    }
}

/// What one watch delivers next, with the watch again when it goes on delivering.
enum Delivery {
    Event(WatchedEvent, Option<PersistentWatcher>),
    State(SessionState, StateWatcher),
}

/// The watches the shell holds: every event future, polled together.
#[derive(Default)]
struct Watches {
    pending: FuturesUnordered<BoxFuture<'static, Delivery>>,
}

impl Watches {
    fn oneshot(&mut self, watcher: OneshotWatcher) {
        self.pending
            .push(async move { Delivery::Event(watcher.changed().await, None) }.boxed());
    }

    fn persistent(&mut self, mut watcher: PersistentWatcher) {
        self.pending.push(
            async move {
                let event = watcher.changed().await;
                Delivery::Event(event, Some(watcher))
            }
            .boxed(),
        );
    }

    fn state(&mut self, mut watcher: StateWatcher) {
        self.pending.push(
            async move {
                let state = watcher.changed().await;
                Delivery::State(state, watcher)
            }
            .boxed(),
        );
    }

    /// The text to print for a delivery (none for what the state watcher already reports),
    /// and the watch put back when it goes on.
    fn handle(&mut self, delivery: Delivery) -> Option<String> {
        match delivery {
            Delivery::State(state, watcher) => {
                if !state.is_terminated() {
                    self.state(watcher);
                }
                Some(event_text(EventType::Session, state, ""))
            }
            Delivery::Event(event, watcher) => {
                if let Some(watcher) = watcher {
                    let ends = (event.event_type == EventType::Session
                        && event.session_state.is_terminated())
                        || event.event_type == EventType::PersistentWatchRemoved;
                    if !ends {
                        self.persistent(watcher);
                    }
                }
                // Session changes print once, from the state watcher (zkCli's one default
                // watcher sees each once).
                (event.event_type != EventType::Session)
                    .then(|| event_text(event.event_type, event.session_state, &event.path))
            }
        }
    }
}

/// zkCli's watcher output for one event: `printMessage("WATCHER::")` and
/// `printMessage(event.toString())`, each a blank line and the text.
pub fn event_text(event_type: EventType, state: SessionState, path: &str) -> String {
    let type_name = match event_type {
        EventType::Session => "None".to_string(),
        other => format!("{other:?}"),
    };
    let path = if path.is_empty() { "null" } else { path };
    format!("\nWATCHER::\n\nWatchedEvent state:{state:?} type:{type_name} path:{path}\n")
}

/// Where the shell writes: stdout, or rustyline's printer while a line is being edited.
fn say(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

fn say_err(text: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "{text}");
}

/// What the loop does after a line.
#[derive(Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Quit,
}

/// The shell's state: the session (none after `close`), its watches, the line history.
struct Shell {
    conn: ConnArgs,
    client: Option<Client>,
    watches: Watches,
    history: Vec<String>,
    /// Whether the last command failed (the exit status when stdin ends).
    failed: bool,
    /// The session shared with the completer (which runs on the line editor's thread).
    shared: shell_complete::SharedClient,
}

impl Shell {
    async fn connect(&mut self) -> Result<()> {
        self.drop_session().await;
        let client = self.conn.client().await?;
        self.watches.state(client.state_watcher());
        if let Ok(mut shared) = self.shared.lock() {
            *shared = Some(client.clone());
        }
        self.client = Some(client);
        Ok(())
    }

    async fn drop_session(&mut self) {
        self.watches = Watches::default();
        if let Ok(mut shared) = self.shared.lock() {
            *shared = None;
        }
        if let Some(client) = self.client.take() {
            close(client).await;
        }
    }

    fn prompt(&self) -> String {
        let state = match self.client.as_ref().map(Client::state) {
            Some(SessionState::SyncConnected) => "CONNECTED",
            Some(SessionState::ConnectedReadOnly) => "CONNECTEDREADONLY",
            Some(SessionState::Disconnected) => "CONNECTING",
            Some(SessionState::AuthFailed) => "AUTH_FAILED",
            Some(_) | None => "CLOSED",
        };
        format!(
            "[zk: {}({state}) {}] ",
            self.conn.server,
            self.history.len()
        )
    }

    /// Prints the events already delivered (e.g. the ones the last command caused).
    fn drain_events(&mut self, print: &mut dyn FnMut(&str)) {
        while let Some(Some(delivery)) = self.watches.pending.next().now_or_never() {
            if let Some(text) = self.watches.handle(delivery) {
                print(&text);
            }
        }
    }

    /// Runs one typed line (zkCli's `executeLine`): recorded in the history unless empty.
    async fn execute_line(&mut self, line: &str) -> Flow {
        let words = split_words(line);
        if words.is_empty() {
            return Flow::Continue;
        }
        self.history.push(line.to_string());
        let (flow, result) = self.execute_words(words).await;
        self.failed = result.is_err();
        if let Err(message) = result {
            say_err(&message);
        }
        flow
    }

    async fn execute_words(&mut self, words: Vec<String>) -> (Flow, Result<(), String>) {
        let name = words[0].as_str();
        if !command_names().any(|n| n == name) && name != "rmr" {
            say_err(&usage_text());
            return (Flow::Continue, Err(format!("Command not found {name}")));
        }
        let command = match Line::try_parse_from(&words) {
            Ok(line) => line.command,
            Err(err) => return (Flow::Continue, Err(err.to_string().trim_end().to_string())),
        };
        match command {
            ShellCommand::Quit => (Flow::Quit, Ok(())),
            ShellCommand::Redo { number } => {
                // The redo line itself is the last entry: it cannot be redone.
                let current = self.history.len() - 1;
                if number >= current {
                    return (Flow::Continue, Err("Command index out of range".into()));
                }
                let line = self.history[number].clone();
                let words = split_words(&line);
                if words.first().map(String::as_str) == Some("redo") {
                    return (Flow::Continue, Err("No redoing redos".into()));
                }
                // zkCli records the redone command in place of the `redo`.
                self.history[current] = line;
                Box::pin(self.execute_words(words)).await
            }
            other => (Flow::Continue, self.execute(other).await),
        }
    }

    async fn execute(&mut self, command: ShellCommand) -> Result<(), String> {
        match command {
            ShellCommand::Help => {
                say_err(&usage_text());
                return Ok(());
            }
            ShellCommand::History => {
                let last = self.history.len().saturating_sub(1);
                let first = last.saturating_sub(HISTORY_SHOWN);
                for (i, line) in self.history.iter().enumerate().skip(first) {
                    say(&format!("{i} - {line}\n"));
                }
                return Ok(());
            }
            ShellCommand::Connect { server } => {
                if let Some(server) = server {
                    self.conn.server = server;
                }
                return self.connect().await.map_err(|e| format!("{e:#}"));
            }
            ShellCommand::Close => {
                self.drop_session().await;
                return Ok(());
            }
            _ => {}
        }
        let Some(client) = self.client.clone() else {
            return Err("Not connected".into());
        };
        match command {
            ShellCommand::Ls {
                path,
                stat,
                watch,
                recursive,
            } => {
                if recursive {
                    let mut tree = Vec::new();
                    list_tree(&client, &path, &mut tree)
                        .await
                        .map_err(|e| format!("{e:#}"))?;
                    if watch {
                        for node in &tree {
                            if let Ok((_, watcher)) = client.list_and_watch_children(node).await {
                                self.watches.oneshot(watcher);
                            }
                        }
                    }
                    say(&tree.iter().map(|p| format!("{p}\n")).collect::<String>());
                    return Ok(());
                }
                let (mut children, node_stat) = match (stat, watch) {
                    (true, true) => {
                        let (children, stat, watcher) = client
                            .get_and_watch_children(&path)
                            .await
                            .map_err(|e| zkcli_error(&e, &path))?;
                        self.watches.oneshot(watcher);
                        (children, Some(stat))
                    }
                    (true, false) => {
                        let (children, stat) = client
                            .get_children(&path)
                            .await
                            .map_err(|e| zkcli_error(&e, &path))?;
                        (children, Some(stat))
                    }
                    (false, true) => {
                        let (children, watcher) = client
                            .list_and_watch_children(&path)
                            .await
                            .map_err(|e| zkcli_error(&e, &path))?;
                        self.watches.oneshot(watcher);
                        (children, None)
                    }
                    (false, false) => (
                        client
                            .list_children(&path)
                            .await
                            .map_err(|e| zkcli_error(&e, &path))?,
                        None,
                    ),
                };
                children.sort();
                let mut out = format!("[{}]\n", children.join(", "));
                if let Some(node_stat) = node_stat {
                    out.push_str(&format_stat(&node_stat));
                }
                say(&out);
            }
            ShellCommand::Get { path, stat, watch } => {
                let (data, node_stat) = if watch {
                    let (data, stat, watcher) = client
                        .get_and_watch_data(&path)
                        .await
                        .map_err(|e| zkcli_error(&e, &path))?;
                    self.watches.oneshot(watcher);
                    (data, stat)
                } else {
                    client
                        .get_data(&path)
                        .await
                        .map_err(|e| zkcli_error(&e, &path))?
                };
                let mut out = format!("{}\n", String::from_utf8_lossy(&data));
                if stat {
                    out.push_str(&format_stat(&node_stat));
                }
                say(&out);
            }
            ShellCommand::Set {
                path,
                data,
                stat,
                version,
            } => {
                let node_stat = client
                    .set_data(&path, data.as_bytes(), version)
                    .await
                    .map_err(|e| zkcli_error(&e, &path))?;
                if stat {
                    say(&format_stat(&node_stat));
                }
            }
            ShellCommand::Create {
                path,
                data,
                acl,
                sequential,
                ephemeral,
                container,
                ttl,
            } => {
                // CreateCommand's checks, in its words.
                if container && (ephemeral || sequential) {
                    return Err("-c cannot be combined with -s or -e. Containers cannot be ephemeral or sequential.".into());
                }
                if ttl.is_some() && ephemeral {
                    return Err("TTLs cannot be used with Ephemeral znodes".into());
                }
                if ttl.is_some() && container {
                    return Err("TTLs cannot be used with Container znodes".into());
                }
                let acl = match acl {
                    Some(text) => parse_acl_list(&[text]).map_err(|e| format!("{e:#}"))?,
                    None => Vec::new(),
                };
                let options = create_options(&acl, ephemeral, sequential, container, ttl);
                let data = data.unwrap_or_default();
                let (_, sequence) = client
                    .create(&path, data.as_bytes(), &options)
                    .await
                    .map_err(|e| zkcli_error(&e, &path))?;
                // On stderr, as CreateCommand prints it.
                if sequential {
                    say_err(&format!("Created {path}{sequence}"));
                } else {
                    say_err(&format!("Created {path}"));
                }
            }
            ShellCommand::Delete { path, version } => {
                client
                    .delete(&path, version)
                    .await
                    .map_err(|e| zkcli_error(&e, &path))?;
            }
            ShellCommand::DeleteAll { path, .. } => {
                // ZKUtil.deleteRecursive fails on a missing root; delete_tree does not.
                match client.check_stat(&path).await {
                    Ok(Some(_)) => {}
                    Ok(None) => return Err(zkcli_error(&ZkError::NoNode, &path)),
                    Err(e) => return Err(zkcli_error(&e, &path)),
                }
                delete_tree(&client, &path)
                    .await
                    .map_err(|e| format!("{e:#}"))?;
            }
            ShellCommand::Stat { path, watch } => {
                let node_stat = if watch {
                    let (stat, watcher) = client
                        .check_and_watch_stat(&path)
                        .await
                        .map_err(|e| zkcli_error(&e, &path))?;
                    self.watches.oneshot(watcher);
                    stat
                } else {
                    client
                        .check_stat(&path)
                        .await
                        .map_err(|e| zkcli_error(&e, &path))?
                };
                let node_stat = node_stat.ok_or_else(|| zkcli_error(&ZkError::NoNode, &path))?;
                say(&format_stat(&node_stat));
            }
            ShellCommand::AddWatch { path, mode } => {
                let watcher = client
                    .watch(&path, mode.unwrap_or(AddWatchMode::PersistentRecursive))
                    .await
                    .map_err(|e| zkcli_error(&e, &path))?;
                self.watches.persistent(watcher);
            }
            ShellCommand::GetAcl { path, stat } => {
                let (acl, node_stat) = client
                    .get_acl(&path)
                    .await
                    .map_err(|e| zkcli_error(&e, &path))?;
                // `Id.toString()` (jute's record text) and the permission letters.
                let mut out = String::new();
                for a in &acl {
                    out.push_str(&format!(
                        "'{},'{}\n: {}\n",
                        a.scheme(),
                        a.id(),
                        perms_text(a.permission())
                    ));
                }
                if stat {
                    out.push_str(&format_stat(&node_stat));
                }
                say(&out);
            }
            ShellCommand::SetAcl {
                path,
                acl,
                stat,
                version,
                recursive,
            } => {
                let acl = parse_acl_list(&[acl]).map_err(|e| format!("{e:#}"))?;
                if recursive {
                    let mut tree = Vec::new();
                    list_tree(&client, &path, &mut tree)
                        .await
                        .map_err(|e| format!("{e:#}"))?;
                    for node in &tree {
                        if let Err(e) = client.set_acl(node, &acl, version).await {
                            say_err(&zkcli_error(&e, node));
                        }
                    }
                } else {
                    let node_stat = client
                        .set_acl(&path, &acl, version)
                        .await
                        .map_err(|e| zkcli_error(&e, &path))?;
                    if stat {
                        say(&format_stat(&node_stat));
                    }
                }
            }
            ShellCommand::AddAuth { scheme, auth } => {
                client
                    .auth(&scheme, auth.unwrap_or_default().as_bytes())
                    .await
                    .map_err(|e| format!("addauth {scheme}: {e}"))?;
            }
            ShellCommand::Sync { path } => match client.sync(&path).await {
                Ok(()) => say("Sync is OK\n"),
                Err(e) => return Err(zkcli_error(&e, &path)),
            },
            ShellCommand::GetEphemerals { path } => {
                let prefix = path.unwrap_or_else(|| "/".to_string());
                let mut paths = client
                    .get_ephemerals(&prefix)
                    .await
                    .map_err(|e| zkcli_error(&e, &prefix))?;
                paths.sort();
                say(&format!("[{}]\n", paths.join(", ")));
            }
            ShellCommand::WhoAmI => {
                let users = client
                    .list_auth_users()
                    .await
                    .map_err(|e| format!("whoami: {e}"))?;
                let mut out = String::from("Auth scheme: User\n");
                for user in &users {
                    out.push_str(&format!("{}: {}\n", user.scheme(), user.user()));
                }
                say(&out);
            }
            ShellCommand::Config { stat, watch } => {
                let (data, node_stat) = if watch {
                    let (data, stat, watcher) = client
                        .get_and_watch_config()
                        .await
                        .map_err(|e| zkcli_error(&e, "/zookeeper/config"))?;
                    self.watches.oneshot(watcher);
                    (data, stat)
                } else {
                    client
                        .get_config()
                        .await
                        .map_err(|e| zkcli_error(&e, "/zookeeper/config"))?
                };
                let mut out = format!("{}\n", String::from_utf8_lossy(&data));
                if stat {
                    out.push_str(&format_stat(&node_stat));
                }
                say(&out);
            }
            // Handled above.
            ShellCommand::Help
            | ShellCommand::History
            | ShellCommand::Connect { .. }
            | ShellCommand::Close
            | ShellCommand::Redo { .. }
            | ShellCommand::Quit => {}
        }
        Ok(())
    }
}

/// Runs `zkit shell`.
pub async fn run(args: ShellArgs) -> Result<ExitCode> {
    let mut shell = Shell {
        conn: args.conn,
        client: None,
        watches: Watches::default(),
        history: Vec::new(),
        failed: false,
        shared: shell_complete::SharedClient::default(),
    };
    shell.connect().await?;
    if std::io::stdin().is_terminal() {
        interactive(&mut shell).await?;
    } else {
        piped(&mut shell).await?;
    }
    shell.drop_session().await;
    Ok(if shell.failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Commands from a pipe or file, line by line; events print as they come between lines.
async fn piped(shell: &mut Shell) -> Result<()> {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    loop {
        tokio::select! {
            biased;
            Some(delivery) = shell.watches.pending.next(), if !shell.watches.pending.is_empty() => {
                if let Some(text) = shell.watches.handle(delivery) {
                    say(&text);
                }
            }
            // `next_line` is cancel-safe: a line half read when an event comes is kept.
            line = lines.next_line() => {
                let Some(line) = line? else { break };
                let flow = shell.execute_line(&line).await;
                shell.drain_events(&mut |text| say(text));
                if flow == Flow::Quit {
                    return Ok(());
                }
            }
        }
    }
    shell.drain_events(&mut |text| say(text));
    Ok(())
}

/// On a terminal: rustyline on a thread of its own (it blocks), events printed above the line
/// being edited.
async fn interactive(shell: &mut Shell) -> Result<()> {
    say(&format!(
        "Welcome to zkit shell ({}): `help` lists the commands, Ctrl-D leaves.\n",
        shell.conn.server
    ));
    let mut editor = shell_complete::LineEditor::start(
        shell.shared.clone(),
        tokio::runtime::Handle::current(),
        shell_complete::history_file(),
    )?;
    loop {
        let mut reading = std::pin::pin!(editor.read(shell.prompt()));
        let line = loop {
            tokio::select! {
                biased;
                Some(delivery) = shell.watches.pending.next(), if !shell.watches.pending.is_empty() => {
                    if let Some(text) = shell.watches.handle(delivery) {
                        editor.print(&text);
                    }
                }
                line = &mut reading => break line,
            }
        };
        let Some(line) = line else { break };
        let flow = shell.execute_line(&line).await;
        shell.drain_events(&mut |text| say(text));
        if flow == Flow::Quit {
            break;
        }
    }
    editor.finish();
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn words_split_at_spaces_and_keep_quoted_text() {
        assert_eq!(split_words("  ls   /a "), vec!["ls", "/a"]);
        assert_eq!(
            split_words("create /a \"hello world\" 'x y'"),
            vec!["create", "/a", "hello world", "x y"]
        );
        assert!(split_words("   ").is_empty());
    }

    #[test]
    fn every_command_parses_with_zkclis_options() {
        let parse = |line: &str| Line::try_parse_from(split_words(line)).map(|l| l.command);
        assert!(matches!(
            parse("ls -s -w -R /a"),
            Ok(ShellCommand::Ls {
                stat: true,
                watch: true,
                recursive: true,
                ..
            })
        ));
        assert!(matches!(
            parse("set -s -v -1 /a data"),
            Ok(ShellCommand::Set {
                version: Some(-1),
                stat: true,
                ..
            })
        ));
        assert!(matches!(
            parse("create -e -s /a d world:anyone:r"),
            Ok(ShellCommand::Create {
                ephemeral: true,
                sequential: true,
                acl: Some(_),
                ..
            })
        ));
        match parse("create -t 5000 /t") {
            Ok(ShellCommand::Create { ttl, .. }) => assert_eq!(ttl, Some(Duration::from_secs(5))),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse("addWatch -m persistent /a"),
            Ok(ShellCommand::AddWatch {
                mode: Some(AddWatchMode::Persistent),
                ..
            })
        ));
        assert!(parse("addWatch -m sometimes /a").is_err());
        assert!(parse("get").is_err());
        for name in command_names() {
            // Every listed command is a subcommand (arguments aside).
            let err = parse(name).err().map(|e| e.kind());
            assert_ne!(
                err,
                Some(clap::error::ErrorKind::InvalidSubcommand),
                "{name}"
            );
        }
    }

    #[test]
    fn events_print_as_zkclis_watcher_does() {
        assert_eq!(
            event_text(
                EventType::NodeDataChanged,
                SessionState::SyncConnected,
                "/x"
            ),
            "\nWATCHER::\n\nWatchedEvent state:SyncConnected type:NodeDataChanged path:/x\n"
        );
        assert_eq!(
            event_text(EventType::Session, SessionState::Disconnected, ""),
            "\nWATCHER::\n\nWatchedEvent state:Disconnected type:None path:null\n"
        );
    }

    #[test]
    fn errors_read_as_zkclis() {
        assert_eq!(
            zkcli_error(&ZkError::NoNode, "/x"),
            "Node does not exist: /x"
        );
        assert_eq!(zkcli_error(&ZkError::NotEmpty, "/x"), "Node not empty: /x");
        assert_eq!(
            zkcli_error(&ZkError::ConnectionLoss, "/x"),
            "KeeperErrorCode = ConnectionLoss for /x"
        );
    }
}
