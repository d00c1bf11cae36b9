//! `zkit export --server A [PATH] [--output F]`: the tree under PATH as JSON lines, one node per
//! line (parents before children), for `zkit import` into another server (zkit serve, Apache
//! standalone or an ensemble). The line format, [`ExportedNode`], is shared with `cmd/import.rs`.
//!
//! - Data: `"data"` when it is UTF-8, else `"data_base64"` (standard base64).
//! - ACL: zkCli's `scheme:id:perms` entries (`digest:alice:<hash>:cdrwa`, `world:anyone:r`).
//! - Mode: `persistent`, `container` or `ttl` (with `ttl_ms`). Through the ZooKeeper protocol a
//!   container or TTL node looks persistent on every server (their Stat's ephemeralOwner reads
//!   0, as Apache's `DataNode.getClientEphemeralOwner` reports it), so an export from a server
//!   writes them as `persistent`; `zkit import` honours all three modes in a file.
//! - `sequence`: the number the node's next sequential child would get (its stored child
//!   version: children created so far, `(Stat.cversion + numChildren) / 2`, as Apache's
//!   `DataNode.copyStat` reports it), so that `zkit import` can raise the copy's to it:
//!   sequential names (locks, queues) created after the import never reuse one.
//! - Ephemeral nodes are skipped (they belong to sessions that do not move) and listed on
//!   stderr; `/zookeeper` is skipped; PATH itself is exported unless it is `/`.
//!
//! The walk reads node by node while the server serves others: it is not a point-in-time
//! snapshot of the tree.

use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use base64::Engine as _;
use clap::Args;
use serde::{Deserialize, Serialize};
use zkit_client::{Acl, Client, Error as ZkError, Permission};

use super::conn::{close, ConnArgs};
use super::print::node_error;

/// A node's create mode, as far as an export knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// A plain persistent node.
    Persistent,
    /// A container node (the server deletes it once its last child is gone).
    Container,
    /// A TTL node (`ttl_ms`).
    Ttl,
}

/// One line of an export.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedNode {
    /// Absolute path.
    pub path: String,
    /// The data, when it is UTF-8 text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<String>,
    /// The data in standard base64, when it is not UTF-8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_base64: Option<String>,
    /// ACL entries, zkCli's `scheme:id:perms`.
    pub acl: Vec<String>,
    /// Create mode.
    pub mode: Mode,
    /// The TTL of a `ttl` node, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// The sequence number the node's next sequential child gets on the source.
    #[serde(default)]
    pub sequence: i32,
}

impl ExportedNode {
    /// The node's data bytes.
    ///
    /// # Errors
    /// Both `data` and `data_base64` given, or bad base64.
    pub fn data_bytes(&self) -> Result<Vec<u8>> {
        match (&self.data, &self.data_base64) {
            (Some(_), Some(_)) => bail!("{}: both data and data_base64", self.path),
            (Some(text), None) => Ok(text.clone().into_bytes()),
            (None, Some(b64)) => base64::engine::general_purpose::STANDARD
                .decode(b64)
                .with_context(|| format!("{}: data_base64 is not base64", self.path)),
            (None, None) => Ok(Vec::new()),
        }
    }
}

/// The stored child version (creates of children so far; it numbers sequential children) of a
/// Stat, which reports `2 × stored − numChildren` (Apache's `DataNode.copyStat`).
pub fn stored_cversion(stat: &zkit_client::Stat) -> i32 {
    let stored = (i64::from(stat.cversion) + i64::from(stat.num_children)) / 2;
    i32::try_from(stored).unwrap_or(i32::MAX)
}

/// `scheme:id:perms` with perms as zkCli's letters (`cdrwa`).
pub fn acl_text(acl: &Acl) -> String {
    let p = acl.permission();
    let letters: String = [
        (Permission::CREATE, 'c'),
        (Permission::DELETE, 'd'),
        (Permission::READ, 'r'),
        (Permission::WRITE, 'w'),
        (Permission::ADMIN, 'a'),
    ]
    .into_iter()
    .filter(|(bit, _)| p.has(*bit))
    .map(|(_, c)| c)
    .collect();
    format!("{}:{}:{letters}", acl.scheme(), acl.id())
}

/// Arguments of `zkit export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The subtree to export.
    #[arg(default_value = "/")]
    pub path: String,
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Write to this file instead of stdout.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
}

/// Runs `zkit export`; returns the exit code.
///
/// # Errors
/// Connection errors, a missing PATH, write errors.
pub async fn run(args: ExportArgs) -> anyhow::Result<std::process::ExitCode> {
    run_exit_code(args).await.map(super::process_exit)
}

/// What [`run`] does, with the exit code as a number.
async fn run_exit_code(args: ExportArgs) -> anyhow::Result<i32> {
    let client = args.conn.client().await?;
    let result = export(&client, &args).await;
    close(client).await;
    result
}

async fn export(client: &Client, args: &ExportArgs) -> Result<i32> {
    let started = Instant::now();
    let out: Box<dyn Write> = match &args.output {
        Some(file) => Box::new(
            std::fs::File::create(file).with_context(|| format!("creating {}", file.display()))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = BufWriter::new(out);
    let (mut exported, mut ephemerals) = (0u64, 0u64);
    let mut stack = vec![args.path.clone()];
    while let Some(path) = stack.pop() {
        let (data, stat) = match client.get_data(&path).await {
            Ok(found) => found,
            // Deleted while we walked: nothing to copy.
            Err(ZkError::NoNode) if path != args.path => continue,
            Err(err) => return Err(node_error(err, &path)),
        };
        if stat.ephemeral_owner != 0 {
            eprintln!(
                "zkit export: skipped ephemeral {path} (session {:#x})",
                stat.ephemeral_owner
            );
            ephemerals += 1;
            continue;
        }
        let mut children = match client.list_children(&path).await {
            Ok(children) => children,
            Err(ZkError::NoNode) if path != args.path => continue,
            Err(err) => return Err(node_error(err, &path)),
        };
        children.sort();
        for child in children.iter().rev() {
            let child_path = if path == "/" {
                format!("/{child}")
            } else {
                format!("{path}/{child}")
            };
            if child_path != "/zookeeper" {
                stack.push(child_path);
            }
        }
        if path == "/" {
            continue;
        }
        let acl = match client.get_acl(&path).await {
            Ok((acl, _)) => acl,
            Err(ZkError::NoNode) if path != args.path => continue,
            Err(err) => return Err(node_error(err, &path)),
        };
        let (text, base64) = match String::from_utf8(data) {
            Ok(text) => (Some(text), None),
            Err(bytes) => (
                None,
                Some(base64::engine::general_purpose::STANDARD.encode(bytes.as_bytes())),
            ),
        };
        let node = ExportedNode {
            path,
            data: text,
            data_base64: base64,
            acl: acl.iter().map(acl_text).collect(),
            mode: Mode::Persistent,
            ttl_ms: None,
            sequence: stored_cversion(&stat),
        };
        serde_json::to_writer(&mut out, &node)?;
        out.write_all(b"\n")?;
        exported += 1;
    }
    out.flush()?;
    eprintln!(
        "zkit export: {exported} nodes from {} in {:.1?}; {ephemerals} ephemeral nodes skipped",
        args.path,
        started.elapsed()
    );
    Ok(0)
}
