//! `zkit config`: the configuration service from the command line (`set`, `get`, `watch`,
//! `import`, `export`), on [`zkit::config`], and the `demo` section [`demo_config`].
//!
//! KEY is an absolute znode path or a path relative to `--prefix` (default `/config`). `watch`
//! prints one line per change, the value last on the line, so `cut`/`awk` can take it apart:
//! `<path> <initial|changed|removed> version=<v> zxid=<0x..> <value>` (newlines in values are
//! printed as `\n`). This module parses and prints; the logic is in the library.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use zkit::config::{
    flatten_tree, resolve_key, ChangeKind, ConfigChange, ConfigStore, ConfigWatcher,
};
use zkit::{Session, SessionOptions};
use zkit_client as zk;

use super::conn::{ConnArgs, DEFAULT_SESSION_TIMEOUT};

/// Operations of one `import` multi: each batch is applied atomically.
const IMPORT_BATCH: usize = 200;

/// `zkit config …`.
#[derive(Debug, Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    command: ConfigCommand,
    #[command(flatten)]
    conn: ConnArgs,
    /// Where relative keys live.
    #[arg(long, default_value = "/config", global = true)]
    prefix: String,
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Write VALUE at KEY (created with its parents if missing).
    Set {
        /// Absolute path, or relative to --prefix.
        key: String,
        /// The value (UTF-8 text).
        value: String,
    },
    /// Print the value at KEY (exit code 1 if it does not exist).
    Get {
        /// Absolute path, or relative to --prefix.
        key: String,
    },
    /// Print the value of KEY, or of every node under PREFIX, then one line per change.
    Watch {
        /// Absolute path, or relative to --prefix.
        key: String,
        /// Exit (code 0) after printing a change whose value is exactly this.
        #[arg(long)]
        until: Option<String>,
        /// Do not print the initial values, only changes.
        #[arg(long)]
        changes_only: bool,
    },
    /// Load a tree of values from a `.toml` or `.json` file under --prefix, in one multi per
    /// batch of nodes (each batch is atomic).
    Import {
        /// The file; its extension picks the format.
        file: PathBuf,
    },
    /// Print the tree under PREFIX (default: --prefix) as JSON or TOML; values are strings.
    Export {
        /// Absolute path, or relative to --prefix.
        prefix: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Json)]
        format: Format,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Json,
    Toml,
}

/// Runs `zkit config …`; returns the process exit code.
pub async fn run(args: ConfigArgs) -> anyhow::Result<std::process::ExitCode> {
    run_exit_code(args).await.map(super::process_exit)
}

/// What [`run`] does, with the exit code as a number.
async fn run_exit_code(args: ConfigArgs) -> anyhow::Result<i32> {
    let session = args.conn.session(DEFAULT_SESSION_TIMEOUT).await?;
    let store = ConfigStore::new(&session, &args.prefix)?;
    let code = match args.command {
        ConfigCommand::Set { key, value } => {
            let v = store.write(&key, value.as_bytes()).await.with_context(|| {
                format!("writing {}", store.path_of(&key).unwrap_or(key.clone()))
            })?;
            eprintln!("{} version={}", store.path_of(&key)?, v.version);
            0
        }
        ConfigCommand::Get { key } => match store.read(&key).await? {
            Some(v) => {
                let mut out = std::io::stdout().lock();
                out.write_all(&v.value)?;
                out.write_all(b"\n")?;
                0
            }
            None => {
                eprintln!("Error: {} does not exist (NoNode)", store.path_of(&key)?);
                1
            }
        },
        ConfigCommand::Watch {
            key,
            until,
            changes_only,
        } => {
            let path = store.path_of(&key)?;
            let mut watcher = ConfigWatcher::new(&session, &path)?;
            loop {
                let change = watcher.next().await?;
                if !(changes_only && change.kind == ChangeKind::Initial) {
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "{}", watch_line(&change))?;
                    out.flush()?;
                }
                if until
                    .as_deref()
                    .is_some_and(|u| change.value.as_deref() == Some(u.as_bytes()))
                {
                    break 0;
                }
            }
        }
        ConfigCommand::Import { file } => {
            let tree = read_tree_file(&file)?;
            let nodes = flatten_tree(&tree)?;
            let written = import(&session, &args.prefix, &nodes).await?;
            eprintln!("imported {written} nodes under {}", args.prefix);
            0
        }
        ConfigCommand::Export { prefix, format } => {
            let root = match prefix {
                Some(p) => resolve_key(&args.prefix, &p)?,
                None => args.prefix.clone(),
            };
            let tree = export(&session.client(), &root).await?;
            let text = match format {
                Format::Json => serde_json::to_string_pretty(&tree)? + "\n",
                Format::Toml => toml::to_string(&tree)?,
            };
            std::io::stdout().write_all(text.as_bytes())?;
            0
        }
    };
    session.close();
    Ok(code)
}

/// One line of `watch` output, the value last.
fn watch_line(change: &ConfigChange) -> String {
    let kind = match change.kind {
        ChangeKind::Initial => "initial",
        ChangeKind::Changed => "changed",
        ChangeKind::Removed => "removed",
    };
    let value = change
        .value_lossy()
        .replace('\\', "\\\\")
        .replace('\n', "\\n");
    format!(
        "{} {kind} version={} zxid={:#x} {value}",
        change.path, change.version, change.mzxid
    )
}

fn read_tree_file(file: &PathBuf) -> Result<serde_json::Value> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    match file.extension().and_then(|e| e.to_str()) {
        Some("toml") => {
            toml::from_str(&text).with_context(|| format!("parsing {}", file.display()))
        }
        Some("json") => {
            serde_json::from_str(&text).with_context(|| format!("parsing {}", file.display()))
        }
        _ => bail!("{}: the file must end in .toml or .json", file.display()),
    }
}

/// Writes `nodes` (relative paths, parents first) under `prefix`, one multi per batch; a batch
/// that races with another writer (NodeExists / NoNode) is planned again. Returns how many
/// nodes were created or set.
async fn import(
    session: &Session,
    prefix: &str,
    nodes: &[(String, Option<Vec<u8>>)],
) -> Result<usize> {
    let client = session.client();
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    if prefix != "/" {
        client
            .mkdir(prefix, &options)
            .await
            .with_context(|| format!("creating {prefix}"))?;
    }
    let base = prefix.trim_end_matches('/');
    let mut written = 0;
    for batch in nodes.chunks(IMPORT_BATCH) {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let paths: Vec<String> = batch.iter().map(|(p, _)| format!("{base}{p}")).collect();
            let exists = futures_join(&client, &paths).await?;
            let mut multi = client.new_multi_writer();
            let mut ops = 0;
            for ((path, data), present) in
                paths.iter().zip(batch.iter().map(|(_, d)| d)).zip(exists)
            {
                match (present, data) {
                    (false, data) => {
                        multi.add_create(path, data.as_deref().unwrap_or_default(), &options)?;
                        ops += 1;
                    }
                    (true, Some(data)) => {
                        multi.add_set_data(path, data, None)?;
                        ops += 1;
                    }
                    (true, None) => {}
                }
            }
            if ops == 0 {
                break;
            }
            match multi.commit().await {
                Ok(_) => {
                    written += ops;
                    break;
                }
                Err(err) => {
                    let err = zk::Error::from(err);
                    if matches!(err, zk::Error::NodeExists | zk::Error::NoNode) && attempts < 5 {
                        continue;
                    }
                    return Err(anyhow!("import batch failed: {err}"));
                }
            }
        }
    }
    Ok(written)
}

async fn futures_join(client: &zk::Client, paths: &[String]) -> Result<Vec<bool>> {
    let mut out = Vec::with_capacity(paths.len());
    // Send every request before awaiting any: one round trip for the batch.
    let pending: Vec<_> = paths.iter().map(|p| client.check_stat(p)).collect();
    for (p, fut) in paths.iter().zip(pending) {
        out.push(
            fut.await
                .with_context(|| format!("checking {p}"))?
                .is_some(),
        );
    }
    Ok(out)
}

/// The tree under `root` as nested objects; leaves are strings (lossy UTF-8). A node with both
/// data and children keeps its children only (and says so on stderr).
async fn export(client: &zk::Client, root: &str) -> Result<serde_json::Value> {
    let children = match client.list_children(root).await {
        Ok(c) => c,
        Err(zk::Error::NoNode) => bail!("{root} does not exist (NoNode)"),
        Err(e) => return Err(e.into()),
    };
    let mut map = serde_json::Map::new();
    let mut sorted = children;
    sorted.sort();
    for child in sorted {
        let path = zkit::protected::join(root, &child);
        let value = Box::pin(export_node(client, &path)).await?;
        if let Some(value) = value {
            map.insert(child, value);
        }
    }
    Ok(serde_json::Value::Object(map))
}

async fn export_node(client: &zk::Client, path: &str) -> Result<Option<serde_json::Value>> {
    let (data, _) = match client.get_data(path).await {
        Ok(d) => d,
        Err(zk::Error::NoNode) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let children = match client.list_children(path).await {
        Ok(c) => c,
        Err(zk::Error::NoNode) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    if children.is_empty() {
        return Ok(Some(serde_json::Value::String(
            String::from_utf8_lossy(&data).into_owned(),
        )));
    }
    if !data.is_empty() {
        eprintln!("note: {path} has both data and children; its data is not exported");
    }
    Ok(Some(Box::pin(export(client, path)).await?))
}

/// The `zkit demo` section of the configuration service: one updater (this process), three
/// `zkit config watch` processes, and a restart of the server in the middle of the updates.
/// Every watcher must end on the final value, and none may print a value lower than one it
/// printed before.
///
/// The section runs its own durable server (a temporary data dir) rather than the demo's shared
/// one at `server_addr`, because it stops and restarts it: stop, then start again on the same
/// port from the same data dir, so the tree and the zxids survive, as with a real restart.
///
/// # Errors
/// When the server cannot be started or restarted, a watcher cannot be spawned, or a watcher
/// ends wrong (the error says which and why).
pub async fn demo_config(server_addr: &str) -> Result<String> {
    use tokio::io::{AsyncBufReadExt, BufReader};
    const WATCHERS: usize = 3;
    const FINAL: u32 = 40;
    const RESTART_AFTER: u32 = 20;

    let data_dir = std::env::temp_dir().join(format!("zkit-demo-config-{}", uuid_like()));
    let mut config = zkit_server::ServerConfig::ephemeral();
    config.data_dir = Some(data_dir.clone());
    config.tick_time = Duration::from_millis(500);
    config.fsync = zkit_server::config::FsyncMode::Never;
    let server = zkit_server::Server::start(config.clone())
        .await
        .context("starting the config demo's durable server")?;
    let addr = server.addr();
    let outcome = async {
        let session = Session::connect(&addr.to_string(), SessionOptions::default()).await?;
        let store = ConfigStore::new(&session, "/demo-config")?;
        store.write("level", b"0").await?;
        let exe = std::env::current_exe().context("locating the zkit binary")?;
        let mut watchers = Vec::new();
        for _ in 0..WATCHERS {
            let mut child = tokio::process::Command::new(&exe)
                .args([
                    "config",
                    "watch",
                    "/demo-config/level",
                    "--until",
                    &FINAL.to_string(),
                ])
                .args(["--server", &addr.to_string(), "--session-timeout", "4s"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .kill_on_drop(true)
                .spawn()
                .with_context(|| format!("spawning {} config watch", exe.display()))?;
            let stdout = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
            let mut lines = BufReader::new(stdout).lines();
            // Each watcher's initial snapshot comes before the first update.
            let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
                .await
                .context("a watcher printed nothing within 20 s")??
                .ok_or_else(|| anyhow!("a watcher exited before printing"))?;
            ensure_value(&first, 0)?;
            watchers.push((child, lines));
        }
        let mut server = Some(server);
        for value in 1..=FINAL {
            if value == RESTART_AFTER + 1 {
                if let Some(s) = server.take() {
                    s.stop().await;
                }
                let mut again = config.clone();
                again.listen = addr;
                server = Some(
                    zkit_server::Server::start(again)
                        .await
                        .context("restarting the server on the same port")?,
                );
            }
            store.write("level", value.to_string().as_bytes()).await?;
        }
        let mut seen = Vec::new();
        for (i, (mut child, mut lines)) in watchers.into_iter().enumerate() {
            let mut values = vec![0u32];
            let collect = async {
                while let Some(line) = lines.next_line().await? {
                    let v: u32 = line
                        .rsplit(' ')
                        .next()
                        .and_then(|v| v.parse().ok())
                        .ok_or_else(|| anyhow!("watcher {i}: unexpected line {line:?}"))?;
                    if values.last().is_some_and(|&last| v < last) {
                        bail!("watcher {i} went backwards: {v} after {values:?}");
                    }
                    values.push(v);
                }
                anyhow::Ok(())
            };
            tokio::time::timeout(Duration::from_secs(30), collect)
                .await
                .with_context(|| format!("watcher {i} did not reach {FINAL} within 30 s"))??;
            let status = child.wait().await?;
            if values.last() != Some(&FINAL) || !status.success() {
                bail!("watcher {i} ended on {:?} ({status})", values.last());
            }
            seen.push(values.len() - 1);
        }
        session.close();
        if let Some(s) = server.take() {
            s.stop().await;
        }
        anyhow::Ok(seen)
    }
    .await;
    let _ = std::fs::remove_dir_all(&data_dir);
    let seen = outcome?;
    Ok(format!(
        "{WATCHERS} `zkit config watch` processes followed {FINAL} updates across a server \
         restart (stop + start on {addr} from its data dir, after update {RESTART_AFTER}); \
         they printed {seen:?} changes each, all ended on {FINAL}, none went backwards \
         (own durable server; the shared demo server at {server_addr} was left alone)"
    ))
}

fn ensure_value(line: &str, expected: u32) -> Result<()> {
    match line.rsplit(' ').next().and_then(|v| v.parse::<u32>().ok()) {
        Some(v) if v == expected => Ok(()),
        _ => bail!("expected the initial value {expected}, got {line:?}"),
    }
}

/// A name unique enough for a temp dir: pid and time.
fn uuid_like() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{}-{nanos}", std::process::id())
}
