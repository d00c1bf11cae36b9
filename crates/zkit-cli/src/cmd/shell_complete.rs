//! `zkit shell` on a terminal: tab completion ([`complete`], pure: command names, and znode
//! paths from the children of the typed path's parent) and the rustyline editor, run on a
//! thread of its own because reading a line blocks.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, Result};
use rustyline::completion::Completer;
use rustyline::config::{CompletionType, Config};
use rustyline::error::ReadlineError;
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::history::{DefaultHistory, History as _};
use rustyline::validate::Validator;
use rustyline::{Editor, Helper};
use zkit_client::Client;

/// The most lines the history file keeps.
pub const HISTORY_SIZE: usize = 1000;

/// zkCli's usage lines, as `help` (and an unknown command) prints them.
pub(crate) const USAGE: &[(&str, &str)] = &[
    ("addWatch", "[-m mode] path # optional mode is one of [PERSISTENT, PERSISTENT_RECURSIVE] - default is PERSISTENT_RECURSIVE"),
    ("addauth", "scheme auth"),
    ("close", ""),
    ("config", "[-w] [-s]"),
    ("connect", "host:port"),
    ("create", "[-s] [-e] [-c] [-t ttl] path [data] [acl]"),
    ("delete", "[-v version] path"),
    ("deleteall", "path [-b batch size]"),
    ("get", "[-s] [-w] path"),
    ("getAcl", "[-s] path"),
    ("getEphemerals", "path"),
    ("help", ""),
    ("history", ""),
    ("ls", "[-s] [-w] [-R] path"),
    ("quit", ""),
    ("redo", "cmdno"),
    ("set", "[-s] [-v version] path data"),
    ("setAcl", "[-s] [-v version] [-R] path acl"),
    ("stat", "[-w] path"),
    ("sync", "path"),
    ("whoami", ""),
];

/// The command names, for completion.
pub fn command_names() -> impl Iterator<Item = &'static str> {
    USAGE.iter().map(|(name, _)| *name)
}

/// The shell's current session, shared with the completer (none after `close`).
pub type SharedClient = Arc<Mutex<Option<Client>>>;

/// How long completion waits for the server's list of children.
const COMPLETION_TIMEOUT: Duration = Duration::from_secs(2);

/// The completions of the word before `pos` in `line`: where that word starts, and the
/// candidates replacing it. The first word completes to command names (`commands`); a later
/// word starting with `/` to the children of its parent that start with the rest, as full
/// paths (`children(parent)` asks the server; `None`, e.g. no such node, completes nothing).
/// Options and data complete to nothing.
pub fn complete(
    line: &str,
    pos: usize,
    commands: &mut dyn Iterator<Item = &str>,
    children: &mut dyn FnMut(&str) -> Option<Vec<String>>,
) -> (usize, Vec<String>) {
    let before = line.get(..pos).unwrap_or(line);
    let start = before.rfind(char::is_whitespace).map_or(0, |i| {
        i + before[i..].chars().next().map_or(1, char::len_utf8)
    });
    let word = &before[start..];
    if before[..start].trim().is_empty() {
        let mut names: Vec<String> = commands
            .filter(|name| name.starts_with(word))
            .map(str::to_string)
            .collect();
        names.sort();
        return (start, names);
    }
    let Some(slash) = word.rfind('/').filter(|_| word.starts_with('/')) else {
        return (start, Vec::new());
    };
    let parent = if slash == 0 { "/" } else { &word[..slash] };
    let prefix = &word[slash + 1..];
    let Some(mut names) = children(parent) else {
        return (start, Vec::new());
    };
    names.retain(|name| name.starts_with(prefix));
    names.sort();
    let base = if parent == "/" { "" } else { parent };
    (
        start,
        names
            .into_iter()
            .map(|name| format!("{base}/{name}"))
            .collect(),
    )
}

/// The history file: `$ZKIT_SHELL_HISTORY`, else `zkit/shell_history` under the user's data
/// directory (`$XDG_DATA_HOME`, else `~/.local/share`); none without a home.
pub fn history_file() -> Option<PathBuf> {
    let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(path) = var("ZKIT_SHELL_HISTORY") {
        return Some(PathBuf::from(path));
    }
    let data = var("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".local/share")))?;
    Some(data.join("zkit").join("shell_history"))
}

/// rustyline's helper: completion only (no hints, highlighting or multi-line validation).
struct ShellHelper {
    client: SharedClient,
    runtime: tokio::runtime::Handle,
}

impl ShellHelper {
    /// The children of `parent`, asked of the server (from the editor's thread, which is not a
    /// runtime thread, so blocking on the runtime is allowed).
    fn children(&self, parent: &str) -> Option<Vec<String>> {
        let client = self.client.lock().ok()?.clone()?;
        let listing = client.list_children(parent);
        // The timer is made inside the runtime: this thread has none of its own.
        self.runtime
            .block_on(async move { tokio::time::timeout(COMPLETION_TIMEOUT, listing).await })
            .ok()?
            .ok()
    }
}

impl Completer for ShellHelper {
    type Candidate = String;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<String>)> {
        Ok(complete(line, pos, &mut command_names(), &mut |parent| {
            self.children(parent)
        }))
    }
}

impl Hinter for ShellHelper {
    type Hint = String;
}
impl Highlighter for ShellHelper {}
impl Validator for ShellHelper {}
impl Helper for ShellHelper {}

/// A request to the editor thread: the prompt, and where the line goes (`None`: end of input).
type ReadRequest = (String, tokio::sync::oneshot::Sender<Option<String>>);

/// The line editor on its thread.
pub struct LineEditor {
    requests: Option<std::sync::mpsc::Sender<ReadRequest>>,
    printer: Option<Box<dyn rustyline::ExternalPrinter + Send>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl LineEditor {
    /// Starts the editor thread, with the history loaded from `history` (if any).
    pub fn start(
        client: SharedClient,
        runtime: tokio::runtime::Handle,
        history: Option<PathBuf>,
    ) -> Result<LineEditor> {
        let config = Config::builder()
            .max_history_size(HISTORY_SIZE)
            .context("history size")?
            .auto_add_history(true)
            .completion_type(CompletionType::List)
            .build();
        let mut editor: Editor<ShellHelper, DefaultHistory> =
            Editor::with_config(config).context("starting the line editor")?;
        editor.set_helper(Some(ShellHelper { client, runtime }));
        if let Some(path) = &history {
            // A first run has no history file yet.
            let _ = editor.load_history(path);
        }
        let printer = editor
            .create_external_printer()
            .ok()
            .map(|p| Box::new(p) as Box<dyn rustyline::ExternalPrinter + Send>);
        let (requests, incoming) = std::sync::mpsc::channel::<ReadRequest>();
        let thread = std::thread::Builder::new()
            .name("zkit-shell-editor".into())
            .spawn(move || {
                while let Ok((prompt, reply)) = incoming.recv() {
                    let line = match editor.readline(&prompt) {
                        Ok(line) => Some(line),
                        // Ctrl-C drops the line being typed, as a shell does.
                        Err(ReadlineError::Interrupted) => Some(String::new()),
                        Err(_) => None,
                    };
                    let _ = reply.send(line);
                }
                if let Some(path) = &history {
                    if let Some(dir) = path.parent() {
                        let _ = std::fs::create_dir_all(dir);
                    }
                    if editor.history().len() > 0 {
                        if let Err(err) = editor.save_history(path) {
                            eprintln!("cannot save the history to {}: {err}", path.display());
                        }
                    }
                }
            })
            .context("starting the line editor's thread")?;
        Ok(LineEditor {
            requests: Some(requests),
            printer,
            thread: Some(thread),
        })
    }

    /// Reads one line after `prompt`; `None` at the end of input (Ctrl-D).
    pub fn read(
        &self,
        prompt: String,
    ) -> impl std::future::Future<Output = Option<String>> + Send + 'static {
        let (reply, line) = tokio::sync::oneshot::channel();
        let sent = self
            .requests
            .as_ref()
            .is_some_and(|requests| requests.send((prompt, reply)).is_ok());
        async move {
            if sent {
                line.await.ok().flatten()
            } else {
                None
            }
        }
    }

    /// Prints above the line being edited.
    pub fn print(&mut self, text: &str) {
        let printed = self
            .printer
            .as_mut()
            .is_some_and(|printer| printer.print(text.to_string()).is_ok());
        if !printed {
            print!("{text}");
        }
    }

    /// Stops the thread, which saves the history.
    pub fn finish(mut self) {
        self.requests = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(parent: &str) -> Option<Vec<String>> {
        match parent {
            "/" => Some(vec![
                "zookeeper".into(),
                "app".into(),
                "apps".into(),
                "b".into(),
            ]),
            "/app" => Some(vec!["one".into(), "two".into(), "other".into()]),
            _ => None,
        }
    }

    fn run(line: &str) -> (usize, Vec<String>) {
        let mut asked = Vec::new();
        let result = complete(
            line,
            line.len(),
            &mut command_names(),
            &mut |parent: &str| {
                asked.push(parent.to_string());
                tree(parent)
            },
        );
        assert!(asked.len() <= 1, "one listing per completion: {asked:?}");
        result
    }

    #[test]
    fn the_first_word_completes_to_command_names() {
        assert_eq!(
            run("ge"),
            (
                0,
                vec!["get".into(), "getAcl".into(), "getEphemerals".into()]
            )
        );
        assert_eq!(run("  del"), (2, vec!["delete".into(), "deleteall".into()]));
        assert_eq!(run("nosuch"), (0, vec![]));
    }

    #[test]
    fn paths_complete_from_the_parents_children() {
        assert_eq!(run("ls /ap"), (3, vec!["/app".into(), "/apps".into()]));
        assert_eq!(
            run("get -s /app/o"),
            (7, vec!["/app/one".into(), "/app/other".into()])
        );
        assert_eq!(
            run("ls /app/"),
            (
                3,
                vec!["/app/one".into(), "/app/other".into(), "/app/two".into()]
            )
        );
        assert_eq!(
            run("ls /"),
            (
                3,
                vec![
                    "/app".into(),
                    "/apps".into(),
                    "/b".into(),
                    "/zookeeper".into()
                ]
            )
        );
        // A parent that does not exist, an option, data: nothing.
        assert_eq!(run("ls /nope/x"), (3, vec![]));
        assert_eq!(run("ls -"), (3, vec![]));
        assert_eq!(run("set /b da"), (7, vec![]));
    }

    /// The helper asks a real server, from a thread outside the runtime (as rustyline's is).
    #[test]
    fn the_helper_lists_children_from_the_server() {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        let (server, client) = runtime.block_on(async {
            let server = zkit_server::Server::start(zkit_server::ServerConfig::ephemeral())
                .await
                .expect("server");
            let client = Client::connect(&server.addr().to_string())
                .await
                .expect("client");
            let open =
                zkit_client::CreateMode::Persistent.with_acls(zkit_client::Acls::anyone_all());
            for path in ["/app", "/app/one", "/app/other", "/app/two"] {
                client.create(path, b"", &open).await.expect("create");
            }
            (server, client)
        });
        let helper = ShellHelper {
            client: Arc::new(Mutex::new(Some(client))),
            runtime: runtime.handle().clone(),
        };
        let found = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    complete(
                        "get /app/o",
                        10,
                        &mut command_names(),
                        &mut |parent: &str| helper.children(parent),
                    )
                })
                .join()
                .expect("completion thread")
        });
        assert_eq!(
            found,
            (4, vec!["/app/one".to_string(), "/app/other".to_string()])
        );
        // No session (after `close`): nothing, and no error.
        *helper.client.lock().expect("lock") = None;
        assert_eq!(helper.children("/app"), None);
        drop(server);
    }

    #[test]
    fn completion_only_looks_before_the_cursor() {
        let line = "get /ap -s";
        let (start, names) = complete(line, 7, &mut command_names(), &mut |p: &str| tree(p));
        assert_eq!(
            (start, names),
            (4, vec!["/app".to_string(), "/apps".to_string()])
        );
    }
}
