//! zkCli-like node commands: `ls`, `get`, `set`, `create`, `rm`, `stat`, `watch`.
//!
//! Each command opens one session with zkit's client (`zkit-client`), does its work and exits,
//! so they work the same against `zkit serve` and Apache ZooKeeper (`watch` runs until stopped;
//! it is in `watch.rs`). Output is meant for scripts:
//! one item per line on stdout, diagnostics on stderr, and a non-zero exit code on any error.
//! Errors name the path and ZooKeeper's code, e.g. `Error: node /a does not exist (NoNode)`.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, UNIX_EPOCH};

use anyhow::{anyhow, Context, Result};
use clap::Subcommand;
use zkit_client::{Acl, Acls, Client, CreateMode, CreateOptions, Error as ZkError, Stat};

use super::conn::{close, ConnArgs};
use super::print::node_error;

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
        conn: ConnArgs,
    },
    /// Print a node's data and a newline (`--output F`: the exact bytes to F; `--hex`: as hex).
    Get {
        /// Node path.
        path: String,
        /// Also print the node's Stat after the data.
        #[arg(long, short = 's')]
        stat: bool,
        /// Write the data, byte for byte and without a newline, to this file (`-`: stdout).
        #[arg(long, short = 'o', value_name = "FILE")]
        output: Option<PathBuf>,
        /// Print the data as lowercase hex digits (two per byte) and a newline.
        #[arg(long, short = 'x', conflicts_with = "output")]
        hex: bool,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Set a node's data.
    Set {
        /// Node path.
        path: String,
        /// New data as text; `-` reads it from stdin.
        #[arg(required_unless_present = "file", conflicts_with = "file")]
        data: Option<String>,
        /// Read the new data from this file (`-`: stdin), byte for byte.
        #[arg(long, short = 'f', value_name = "FILE")]
        file: Option<PathBuf>,
        /// Expected data version (fails with BadVersion if different).
        #[arg(long, short = 'v', allow_negative_numbers = true)]
        version: Option<i32>,
        /// Print the node's new Stat.
        #[arg(long, short = 's')]
        stat: bool,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Create a node and print its path (with the sequence suffix if sequential).
    Create {
        /// Node path.
        path: String,
        /// Initial data as text (empty if omitted); `-` reads it from stdin.
        #[arg(conflicts_with = "file")]
        data: Option<String>,
        /// Read the initial data from this file (`-`: stdin), byte for byte.
        #[arg(long, short = 'f', value_name = "FILE")]
        file: Option<PathBuf>,
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
        conn: ConnArgs,
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
        conn: ConnArgs,
    },
    /// Print a node's Stat.
    Stat {
        /// Node path.
        path: String,
        #[command(flatten)]
        conn: ConnArgs,
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
        conn: ConnArgs,
    },
}

/// Runs one node command on a fresh session, closed before returning (so ephemerals go and
/// the server forgets the session at once instead of at its timeout).
pub async fn run(command: NodeCommand) -> Result<ExitCode> {
    let conn = match &command {
        NodeCommand::Ls { conn, .. }
        | NodeCommand::Get { conn, .. }
        | NodeCommand::Set { conn, .. }
        | NodeCommand::Create { conn, .. }
        | NodeCommand::Rm { conn, .. }
        | NodeCommand::Stat { conn, .. } => conn.clone(),
        NodeCommand::Watch {
            path,
            recursive,
            count,
            conn,
        } => {
            super::watch::run(conn, path, *recursive, *count).await?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    let client = conn.client().await?;
    let result = execute(&client, command).await;
    close(client).await;
    result.map(|()| ExitCode::SUCCESS)
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
        NodeCommand::Get {
            path,
            stat,
            output,
            hex,
            ..
        } => {
            let (data, node_stat) = client
                .get_data(&path)
                .await
                .map_err(|e| node_error(e, &path))?;
            let mut stdout = std::io::stdout().lock();
            match output {
                Some(file) if file.as_os_str() == "-" => stdout.write_all(&data)?,
                Some(file) => std::fs::write(&file, &data)
                    .with_context(|| format!("writing {}", file.display()))?,
                None if hex => {
                    stdout.write_all(hex_text(&data).as_bytes())?;
                    stdout.write_all(b"\n")?;
                }
                None => {
                    stdout.write_all(&data)?;
                    stdout.write_all(b"\n")?;
                }
            }
            if stat {
                stdout.write_all(format_stat(&node_stat).as_bytes())?;
            }
            stdout.flush()?;
        }
        NodeCommand::Set {
            path,
            data,
            file,
            version,
            stat,
            ..
        } => {
            let data = read_data(data.as_deref(), file.as_deref())?;
            let node_stat = client
                .set_data(&path, &data, version)
                .await
                .map_err(|e| node_error(e, &path))?;
            if stat {
                print!("{}", format_stat(&node_stat));
            }
        }
        NodeCommand::Create {
            path,
            data,
            file,
            ephemeral,
            sequential,
            container,
            ttl,
            parents,
            acl,
            ..
        } => {
            let acl = super::acl::parse_acl_list(&acl)?;
            let data = read_data(data.as_deref(), file.as_deref())?;
            if parents {
                if let Some(parent) = ancestors(&path).last() {
                    ensure_path(client, parent).await?;
                }
            }
            let options = create_options(&acl, ephemeral, sequential, container, ttl);
            let (_, sequence) = match client.create(&path, &data, &options).await {
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
                delete_descendants(client, &path).await?;
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

/// The data of `set`/`create`: the text argument, stdin for `-` (argument or `--file -`), a
/// file's bytes, or nothing.
fn read_data(text: Option<&str>, file: Option<&Path>) -> Result<Vec<u8>> {
    let stdin = || {
        let mut data = Vec::new();
        std::io::stdin()
            .lock()
            .read_to_end(&mut data)
            .context("reading the data from stdin")?;
        Ok(data)
    };
    match (text, file) {
        (Some("-"), _) => stdin(),
        (Some(text), _) => Ok(text.as_bytes().to_vec()),
        (None, Some(file)) if file.as_os_str() == "-" => stdin(),
        (None, Some(file)) => {
            std::fs::read(file).with_context(|| format!("reading {}", file.display()))
        }
        (None, None) => Ok(Vec::new()),
    }
}

/// Lowercase hex, two digits per byte.
fn hex_text(data: &[u8]) -> String {
    use std::fmt::Write as _;
    data.iter()
        .fold(String::with_capacity(data.len() * 2), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}

/// Deletes every descendant of `path` (not `path` itself), deepest first.
async fn delete_descendants(client: &Client, path: &str) -> Result<()> {
    let mut tree = Vec::new();
    list_tree(client, path, &mut tree).await?;
    // Deepest first, so every node is childless when its turn comes; the root itself (first
    // in pre-order) is the caller's.
    for node in tree.iter().skip(1).rev() {
        match client.delete(node, None).await {
            // Someone else removed it meanwhile: the goal is reached anyway.
            Ok(()) | Err(ZkError::NoNode) => {}
            Err(e) => return Err(node_error(e, node)),
        }
    }
    Ok(())
}

/// The options of a create with zkCli's flags: `-e` ephemeral, `-s` sequential, `-c` container
/// (which the others override), `-t` a TTL; `acl` (world:anyone with every permission when
/// empty).
pub fn create_options(
    acl: &[Acl],
    ephemeral: bool,
    sequential: bool,
    container: bool,
    ttl: Option<Duration>,
) -> CreateOptions<'_> {
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
        Acls::new(acl)
    };
    let options = mode.with_acls(acls);
    match ttl {
        Some(ttl) => options.with_ttl(ttl),
        None => options,
    }
}

/// Deletes `path` and all its descendants (`zkit rm -r`); a tree that is not there is fine.
pub async fn delete_tree(client: &Client, path: &str) -> Result<()> {
    match client.check_stat(path).await {
        Ok(None) => return Ok(()),
        Ok(Some(_)) => {}
        Err(e) => return Err(node_error(e, path)),
    }
    delete_descendants(client, path).await?;
    match client.delete(path, None).await {
        Ok(()) | Err(ZkError::NoNode) => Ok(()),
        Err(e) => Err(node_error(e, path)),
    }
}

/// Collects `path` and all its descendants in pre-order (parents before children, siblings
/// sorted). Nodes deleted while walking are skipped.
pub(crate) async fn list_tree(client: &Client, path: &str, out: &mut Vec<String>) -> Result<()> {
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
    fn hex_is_two_lowercase_digits_per_byte() {
        assert_eq!(hex_text(&[0x00, 0xff, 0x0a, 0x7f]), "00ff0a7f");
        assert_eq!(hex_text(&[]), "");
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
}
