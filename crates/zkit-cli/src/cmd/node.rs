//! zkCli-like node commands: `ls`, `get`, `set`, `create`, `rm`, `stat`, `watch`.
//!
//! Each command opens one session with zkit's client (`zkit-client`), does its work and exits,
//! so they work the same against `zkit serve` and Apache ZooKeeper (`watch` runs until stopped;
//! it is in `watch.rs`). Output is meant for scripts:
//! one item per line on stdout, diagnostics on stderr, and a non-zero exit code on any error.
//! Errors name the path and ZooKeeper's code, e.g. `Error: node /a does not exist (NoNode)`.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use zkit_client::{Acls, Client, CreateMode, Error as ZkError, Stat};

/// How long a one-shot command waits for a session before giving up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Session timeout asked for by one-shot commands (the server clamps it).
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the server is: `HOST:PORT[,HOST:PORT…][/chroot]`.
#[derive(Debug, Clone, Args)]
pub struct ServerArg {
    /// Server(s) to talk to, as `HOST:PORT[,HOST:PORT…][/chroot]`.
    #[arg(long, env = "ZKIT_SERVER", default_value = "127.0.0.1:2181")]
    pub server: String,
    /// Authenticate the session with digest `user:password` (ZooKeeper's `addauth digest`).
    #[arg(long, env = "ZKIT_AUTH")]
    pub auth: Option<String>,
}

/// The node commands.
#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// List the children of a node (`-R`: the node and all its descendants, as full paths).
    Ls {
        /// Node path.
        path: String,
        /// Recurse into descendants.
        #[arg(short = 'R', long)]
        recursive: bool,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Print a node's data (and with `--stat`, its Stat).
    Get {
        /// Node path.
        path: String,
        /// Also print the node's Stat after the data.
        #[arg(long, short = 's')]
        stat: bool,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Set a node's data.
    Set {
        /// Node path.
        path: String,
        /// New data (UTF-8 text).
        data: String,
        /// Expected data version (fails with BadVersion if different).
        #[arg(long, short = 'v', allow_negative_numbers = true)]
        version: Option<i32>,
        /// Print the node's new Stat.
        #[arg(long, short = 's')]
        stat: bool,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Create a node and print its path (with the sequence suffix if sequential).
    Create {
        /// Node path.
        path: String,
        /// Initial data (UTF-8 text; empty if omitted).
        data: Option<String>,
        /// Ephemeral node (it dies with this command's session, i.e. immediately).
        #[arg(long, short = 'e', conflicts_with_all = ["container", "ttl"])]
        ephemeral: bool,
        /// Sequential node: the server appends a 10-digit counter.
        #[arg(long, short = 's', conflicts_with = "container")]
        sequential: bool,
        /// Container node: removed by the server once its last child is gone.
        #[arg(long, short = 'c', conflicts_with = "ttl")]
        container: bool,
        /// TTL node (e.g. `30s`): removed when childless and unmodified for this long.
        #[arg(long, short = 't', value_parser = humantime::parse_duration)]
        ttl: Option<Duration>,
        /// Create missing parents first, as persistent nodes open to everyone (kazoo's
        /// `makepath`, Curator's `creatingParentsIfNeeded`); parents that exist are left as
        /// they are.
        #[arg(long, short = 'p')]
        parents: bool,
        /// ACL entries in zkCli syntax (`auth::cdrwa`, `digest:user:hash:cdrwa`,
        /// `world:anyone:r`, `ip:10.0.0.0/8:r`), repeatable or comma-separated
        /// [default: world:anyone:cdrwa].
        #[arg(long)]
        acl: Vec<String>,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Delete a node (`--recursive`: with all its descendants).
    Rm {
        /// Node path.
        path: String,
        /// Delete descendants first.
        #[arg(long, short = 'r')]
        recursive: bool,
        /// Expected data version of the node itself.
        #[arg(long, short = 'v', allow_negative_numbers = true)]
        version: Option<i32>,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Print a node's Stat.
    Stat {
        /// Node path.
        path: String,
        #[command(flatten)]
        server: ServerArg,
    },
    /// Watch a node with a persistent watch and print one line per change: `TYPE PATH`.
    ///
    /// Runs across disconnects, server restarts and session expiry: after each reconnect (or
    /// new session) the node is read again and a change made meanwhile is printed as well, one
    /// line per kind (several writes to the data while disconnected print one
    /// NodeDataChanged). In one case a change is printed twice: when the connection drops
    /// between its event and the read that follows it.
    ///
    /// With -R, only PATH itself is re-read after a reconnect: changes of its descendants made
    /// while disconnected are not printed (ZooKeeper does not replay them to persistent
    /// watches); every change after the reconnect is. `zkit config watch` re-reads a whole
    /// subtree.
    Watch {
        /// Node path.
        path: String,
        /// Persistent recursive watch: events for all descendants too (see above for what a
        /// reconnect may miss).
        #[arg(long, short = 'r', short_alias = 'R')]
        recursive: bool,
        /// Exit after this many events.
        #[arg(long, short = 'n')]
        count: Option<u64>,
        #[command(flatten)]
        server: ServerArg,
    },
}

/// Runs one node command on a fresh session, closed before returning (so ephemerals go and
/// the server forgets the session at once instead of at its timeout).
pub async fn run(command: NodeCommand) -> Result<ExitCode> {
    let server = match &command {
        NodeCommand::Ls { server, .. }
        | NodeCommand::Get { server, .. }
        | NodeCommand::Set { server, .. }
        | NodeCommand::Create { server, .. }
        | NodeCommand::Rm { server, .. }
        | NodeCommand::Stat { server, .. } => server.clone(),
        NodeCommand::Watch {
            path,
            recursive,
            count,
            server,
        } => {
            super::watch::run(server, path, *recursive, *count).await?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    let client = connect_with(&server).await?;
    let result = execute(&client, command).await;
    close(client).await;
    result.map(|()| ExitCode::SUCCESS)
}

/// Closes the session and waits (briefly) for the server to confirm.
pub async fn close(client: Client) {
    // Not waiting forever: the session would expire anyway.
    let _ = tokio::time::timeout(Duration::from_secs(2), client.close()).await;
}

async fn execute(client: &Client, command: NodeCommand) -> Result<()> {
    match command {
        NodeCommand::Ls {
            path, recursive, ..
        } => {
            let mut out = Vec::new();
            if recursive {
                list_tree(client, &path, &mut out).await?;
            } else {
                let mut children = client
                    .list_children(&path)
                    .await
                    .map_err(|e| node_error(e, &path))?;
                children.sort();
                out = children;
            }
            print_lines(&out)?;
        }
        NodeCommand::Get { path, stat, .. } => {
            let (data, node_stat) = client
                .get_data(&path)
                .await
                .map_err(|e| node_error(e, &path))?;
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(&data)?;
            stdout.write_all(b"\n")?;
            if stat {
                stdout.write_all(format_stat(&node_stat).as_bytes())?;
            }
            stdout.flush()?;
        }
        NodeCommand::Set {
            path,
            data,
            version,
            stat,
            ..
        } => {
            let node_stat = client
                .set_data(&path, data.as_bytes(), version)
                .await
                .map_err(|e| node_error(e, &path))?;
            if stat {
                print!("{}", format_stat(&node_stat));
            }
        }
        NodeCommand::Create {
            path,
            data,
            ephemeral,
            sequential,
            container,
            ttl,
            parents,
            acl,
            ..
        } => {
            let acl = super::admin::parse_acl_list(&acl)?;
            if parents {
                if let Some(parent) = ancestors(&path).last() {
                    ensure_path(client, parent).await?;
                }
            }
            let mode = match (ephemeral, sequential, container) {
                (true, true, _) => CreateMode::EphemeralSequential,
                (true, false, _) => CreateMode::Ephemeral,
                (false, true, _) => CreateMode::PersistentSequential,
                (false, false, true) => CreateMode::Container,
                (false, false, false) => CreateMode::Persistent,
            };
            let acls = if acl.is_empty() {
                Acls::anyone_all()
            } else {
                Acls::new(&acl)
            };
            let mut options = mode.with_acls(acls);
            if let Some(ttl) = ttl {
                options = options.with_ttl(ttl);
            }
            let (_, sequence) = match client
                .create(&path, data.unwrap_or_default().as_bytes(), &options)
                .await
            {
                Ok(created) => created,
                // NoNode from a create means a missing parent: name it, not the child.
                Err(ZkError::NoNode) => {
                    let parent = missing_parent(client, &path).await;
                    return Err(anyhow!(
                        "cannot create {path}: its parent {parent} does not exist (NoNode); \
                         `zkit create -p` creates missing parents"
                    ));
                }
                Err(e) => return Err(node_error(e, &path)),
            };
            if sequential {
                println!("{path}{sequence}");
            } else {
                println!("{path}");
            }
        }
        NodeCommand::Rm {
            path,
            recursive,
            version,
            ..
        } => {
            if recursive {
                let mut tree = Vec::new();
                list_tree(client, &path, &mut tree).await?;
                // Deepest first, so every node is childless when its turn comes; the root
                // itself (first in pre-order) goes last, with the expected version.
                for node in tree.iter().skip(1).rev() {
                    match client.delete(node, None).await {
                        // Someone else removed it meanwhile: the goal is reached anyway.
                        Ok(()) | Err(ZkError::NoNode) => {}
                        Err(e) => return Err(node_error(e, node)),
                    }
                }
            }
            client
                .delete(&path, version)
                .await
                .map_err(|e| node_error(e, &path))?;
        }
        NodeCommand::Stat { path, .. } => {
            let node_stat = client
                .check_stat(&path)
                .await
                .map_err(|e| node_error(e, &path))?
                .ok_or_else(|| node_error(ZkError::NoNode, &path))?;
            print!("{}", format_stat(&node_stat));
        }
        // Runs on its own (it reconnects), see `run`.
        NodeCommand::Watch { .. } => {}
    }
    Ok(())
}

/// Opens a session, failing after [`CONNECT_TIMEOUT`] instead of retrying forever.
pub async fn connect(server: &str) -> Result<Client> {
    connect_auth(server, None).await
}

/// Opens a session on `arg.server`, authenticated with `--auth user:password` if given.
pub async fn connect_with(arg: &ServerArg) -> Result<Client> {
    connect_auth(&arg.server, arg.auth.as_deref()).await
}

async fn connect_auth(server: &str, auth: Option<&str>) -> Result<Client> {
    let mut connector = Client::connector();
    if let Some(user_password) = auth {
        if !user_password.contains(':') {
            anyhow::bail!("--auth expects user:password");
        }
        connector = connector.with_auth("digest", user_password.as_bytes());
    }
    let connecting = connector
        .with_session_timeout(SESSION_TIMEOUT)
        .with_fail_eagerly()
        .connect(server);
    tokio::time::timeout(CONNECT_TIMEOUT, connecting)
        .await
        .map_err(|_| anyhow!("no session with {server} within {CONNECT_TIMEOUT:?}"))?
        .with_context(|| format!("cannot connect to {server}"))
}

/// Collects `path` and all its descendants in pre-order (parents before children, siblings
/// sorted). Nodes deleted while walking are skipped.
async fn list_tree(client: &Client, path: &str, out: &mut Vec<String>) -> Result<()> {
    let mut stack = vec![path.to_string()];
    while let Some(node) = stack.pop() {
        let mut children = match client.list_children(&node).await {
            Ok(children) => children,
            Err(ZkError::NoNode) if node != path => continue,
            Err(e) => return Err(node_error(e, &node)),
        };
        children.sort();
        for child in children.iter().rev() {
            stack.push(child_path(&node, child));
        }
        out.push(node);
    }
    Ok(())
}

fn child_path(parent: &str, child: &str) -> String {
    if parent.ends_with('/') {
        format!("{parent}{child}")
    } else {
        format!("{parent}/{child}")
    }
}

fn print_lines(lines: &[String]) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    for line in lines {
        writeln!(stdout, "{line}")?;
    }
    stdout.flush()?;
    Ok(())
}

/// The ancestors of `path`, shortest first (`/a/b/c` → `/a`, `/a/b`); none for `/x`. A chroot
/// in the connect string is the client's business: paths here are relative to it.
fn ancestors(path: &str) -> Vec<&str> {
    path.match_indices('/')
        .map(|(i, _)| &path[..i])
        .filter(|p| !p.is_empty())
        .collect()
}

/// Creates `path` and its missing ancestors as persistent, open nodes (kazoo's `ensure_path`);
/// nodes that exist are left as they are.
pub async fn ensure_path(client: &Client, path: &str) -> anyhow::Result<()> {
    let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
    for node in ancestors(path).into_iter().chain(std::iter::once(path)) {
        match client.create(node, b"", &options).await {
            // Someone else (or an earlier run) made it: what is wanted either way.
            Ok(_) | Err(ZkError::NodeExists) => {}
            Err(e) => return Err(node_error(e, node)),
        }
    }
    Ok(())
}

/// The shortest ancestor of `path` that does not exist (or the parent, if that cannot be read).
async fn missing_parent(client: &Client, path: &str) -> String {
    let chain = ancestors(path);
    for parent in &chain {
        if let Ok(None) = client.check_stat(parent).await {
            return (*parent).to_string();
        }
    }
    chain.last().map_or("/", |p| p).to_string()
}

/// A readable error naming the node and ZooKeeper's error code.
pub fn node_error(err: ZkError, path: &str) -> anyhow::Error {
    let what = match &err {
        ZkError::NoNode => format!("node {path} does not exist (NoNode)"),
        ZkError::NodeExists => format!("node {path} already exists (NodeExists)"),
        ZkError::BadVersion => format!("node {path} has a different version (BadVersion)"),
        ZkError::NotEmpty => format!("node {path} has children (NotEmpty)"),
        ZkError::NoChildrenForEphemerals => {
            format!("the parent of {path} is ephemeral and cannot have children (NoChildrenForEphemerals)")
        }
        ZkError::NoAuth => format!("not authorized for {path} (NoAuth)"),
        ZkError::InvalidAcl => format!("invalid ACL for {path} (InvalidACL)"),
        ZkError::BadArguments(why) => format!("bad arguments for {path}: {why} (BadArguments)"),
        ZkError::Unimplemented => format!(
            "the server does not support this operation on {path} (Unimplemented; \
             TTL nodes need extended types enabled)"
        ),
        ZkError::SessionExpired => "session expired (SessionExpired)".to_string(),
        ZkError::ConnectionLoss => {
            format!("connection lost during the operation on {path} (ConnectionLoss)")
        }
        other => format!("operation on {path} failed: {other}"),
    };
    anyhow!(what)
}

/// zkCli's Stat layout, one `name = value` line per field; times in RFC 3339 (UTC).
pub fn format_stat(stat: &Stat) -> String {
    format!(
        "cZxid = {:#x}\nctime = {}\nmZxid = {:#x}\nmtime = {}\npZxid = {:#x}\ncversion = {}\n\
         dataVersion = {}\naclVersion = {}\nephemeralOwner = {:#x}\ndataLength = {}\nnumChildren = {}\n",
        stat.czxid,
        format_time(stat.ctime),
        stat.mzxid,
        format_time(stat.mtime),
        stat.pzxid,
        stat.cversion,
        stat.version,
        stat.aversion,
        stat.ephemeral_owner,
        stat.data_length,
        stat.num_children,
    )
}

fn format_time(ms: i64) -> String {
    let at = UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_millis(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestors_are_shortest_first_without_the_root() {
        assert_eq!(ancestors("/a/b/c"), vec!["/a", "/a/b"]);
        assert!(ancestors("/x").is_empty());
    }

    #[test]
    fn child_paths_join_with_one_slash() {
        assert_eq!(child_path("/", "a"), "/a");
        assert_eq!(child_path("/a", "b"), "/a/b");
    }

    #[test]
    fn stat_lines_match_zkcli_names() {
        let text = format_stat(&Stat {
            czxid: 0x10,
            mzxid: 0x11,
            pzxid: 0x12,
            ctime: 0,
            mtime: 1_000,
            version: 3,
            cversion: 4,
            aversion: 5,
            ephemeral_owner: 0xab,
            data_length: 6,
            num_children: 7,
        });
        assert!(text.starts_with("cZxid = 0x10\nctime = 1970-01-01T00:00:00.000Z\n"));
        assert!(text.contains("mtime = 1970-01-01T00:00:01.000Z\n"));
        assert!(text.contains("dataVersion = 3\n"));
        assert!(text.contains("ephemeralOwner = 0xab\n"));
        assert!(text.ends_with("numChildren = 7\n"));
    }

    #[test]
    fn errors_name_path_and_code() {
        let e = node_error(ZkError::NoNode, "/a");
        assert_eq!(e.to_string(), "node /a does not exist (NoNode)");
    }
}
