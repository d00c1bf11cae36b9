//! `zkit import --server B [--input F] [--dry-run] [--overwrite]`: loads what `zkit export`
//! wrote ([`super::export::ExportedNode`] lines) into a server.
//!
//! - The whole file is read and checked first (JSON, paths, data, ACLs, modes, duplicates), so
//!   a bad line changes nothing. Parents are created before their children.
//! - A node that exists already is an error (nothing is written) unless `--overwrite`, which
//!   replaces its data and ACL (its mode cannot change). `--dry-run` checks the file against
//!   the server and prints what would be done, without writing.
//! - A node whose ACL would keep us from creating its children is created open, and gets its
//!   ACL once its children are there.
//! - Sequential names: where the source's `sequence` is higher than the copy's, the copy's is
//!   raised to it (children created and deleted, in multis), so that the next sequential node
//!   under it gets the number it would have got on the source.
//! - Progress on a terminal (stderr), and a summary line.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use zkit_client::{Acl, Acls, Client, CreateMode, Error as ZkError};

use super::acl::parse_acl;
use super::conn::{close, ConnArgs};
use super::export::{stored_cversion, ExportedNode, Mode};
use super::print::node_error;

/// Create+delete pairs per multi when raising a sequence counter.
const PAD_PAIRS_PER_MULTI: usize = 250;
/// The child created and deleted at once to raise a sequence counter.
const PAD_CHILD: &str = "zkit-import-cversion-pad";

/// Arguments of `zkit import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Read from this file instead of stdin.
    #[arg(long, short = 'i')]
    pub input: Option<PathBuf>,
    /// Check the file against the server and print what would be done; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Replace the data and ACL of nodes that exist already (default: refuse).
    #[arg(long)]
    pub overwrite: bool,
}

/// One node to load, checked.
#[derive(Debug)]
struct Planned {
    path: String,
    data: Vec<u8>,
    acl: Vec<Acl>,
    mode: Mode,
    ttl: Option<Duration>,
    sequence: i32,
    /// Created open; its ACL is set after its children.
    defer_acl: bool,
}

fn is_open(acl: &[Acl]) -> bool {
    acl.len() == 1 && acl[0] == Acls::anyone_all()[0]
}

/// Reads and checks every line; returns the nodes parents first.
fn plan(input: impl Read) -> Result<Vec<Planned>> {
    let mut nodes: BTreeMap<String, Planned> = BTreeMap::new();
    for (n, line) in BufReader::new(input).lines().enumerate() {
        let line = line.context("reading the input")?;
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("line {}", n + 1);
        let node: ExportedNode = serde_json::from_str(&line).with_context(at)?;
        if !node.path.starts_with('/')
            || (node.path.len() > 1 && node.path.ends_with('/'))
            || node.path.contains("//")
        {
            bail!("{}: invalid path {:?}", at(), node.path);
        }
        if node.path == "/zookeeper" || node.path.starts_with("/zookeeper/") {
            bail!("{}: {} is the server's own subtree", at(), node.path);
        }
        let data = node.data_bytes().with_context(at)?;
        let acl = node
            .acl
            .iter()
            .map(|a| parse_acl(a))
            .collect::<Result<Vec<_>>>()
            .with_context(at)?;
        if acl.is_empty() {
            bail!("{}: {} has an empty ACL", at(), node.path);
        }
        let ttl = match (node.mode, node.ttl_ms) {
            (Mode::Ttl, Some(ms)) if ms > 0 => Some(Duration::from_millis(ms)),
            (Mode::Ttl, _) => bail!("{}: a ttl node needs ttl_ms > 0", at()),
            (_, Some(_)) => bail!("{}: ttl_ms on a {:?} node", at(), node.mode),
            (_, None) => None,
        };
        let planned = Planned {
            path: node.path.clone(),
            data,
            acl,
            mode: node.mode,
            ttl,
            sequence: node.sequence,
            defer_acl: false,
        };
        if nodes.insert(node.path.clone(), planned).is_some() {
            bail!("{}: {} appears twice", at(), node.path);
        }
    }
    let parents: BTreeSet<String> = nodes
        .keys()
        .filter_map(|p| parent_of(p).map(str::to_owned))
        .collect();
    let mut ordered: Vec<Planned> = nodes
        .into_values()
        .map(|mut p| {
            let needs_children_ops = parents.contains(&p.path) || p.sequence > 0;
            p.defer_acl = needs_children_ops && !is_open(&p.acl);
            p
        })
        .collect();
    // Parents first: a parent's path is a proper prefix, so fewer components sort first.
    ordered.sort_by(|a, b| {
        depth(&a.path)
            .cmp(&depth(&b.path))
            .then(a.path.cmp(&b.path))
    });
    Ok(ordered)
}

fn depth(path: &str) -> usize {
    path.matches('/').count()
}

fn parent_of(path: &str) -> Option<&str> {
    match path.rfind('/') {
        Some(0) if path.len() > 1 => Some("/"),
        Some(0) | None => None,
        Some(at) => Some(&path[..at]),
    }
}

/// Runs `zkit import`; returns the exit code.
///
/// # Errors
/// A bad input file, connection errors, existing nodes (without `--overwrite`), write errors.
pub async fn run(args: ImportArgs) -> anyhow::Result<std::process::ExitCode> {
    run_exit_code(args).await.map(super::process_exit)
}

/// What [`run`] does, with the exit code as a number.
async fn run_exit_code(args: ImportArgs) -> anyhow::Result<i32> {
    let planned = match &args.input {
        Some(file) => {
            plan(std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?)?
        }
        None => plan(std::io::stdin().lock())?,
    };
    let client = args.conn.client().await?;
    let result = load(&client, &args, &planned).await;
    close(client).await;
    result
}

/// Progress on stderr when it is a terminal.
struct Progress {
    total: usize,
    done: usize,
    tty: bool,
}

impl Progress {
    fn step(&mut self, what: &str) {
        self.done += 1;
        if self.tty && (self.done % 100 == 0 || self.done == self.total) {
            eprint!("\rzkit import: {what} {}/{}", self.done, self.total);
            let _ = std::io::stderr().flush();
            if self.done == self.total {
                eprintln!();
            }
        }
    }
}

async fn load(client: &Client, args: &ImportArgs, planned: &[Planned]) -> Result<i32> {
    let started = Instant::now();
    // Check first, so that a conflict leaves the server untouched.
    let mut existing = BTreeSet::new();
    for node in planned {
        if client
            .check_stat(&node.path)
            .await
            .map_err(|e| node_error(e, &node.path))?
            .is_some()
        {
            existing.insert(node.path.as_str());
        }
    }
    let in_file: BTreeSet<&str> = planned.iter().map(|p| p.path.as_str()).collect();
    for node in planned {
        if let Some(parent) = parent_of(&node.path) {
            if !in_file.contains(parent) && parent != "/" {
                let present = client
                    .check_stat(parent)
                    .await
                    .map_err(|e| node_error(e, parent))?;
                if present.is_none() {
                    bail!(
                        "{}: its parent {parent} is neither in the input nor on the server",
                        node.path
                    );
                }
            }
        }
    }
    if !existing.is_empty() && !args.overwrite {
        for path in existing.iter().take(10) {
            eprintln!("zkit import: {path} exists already");
        }
        bail!(
            "{} of {} nodes exist already on {}; nothing was written (--overwrite replaces \
             their data and ACL)",
            existing.len(),
            planned.len(),
            args.conn.server
        );
    }
    let (create, overwrite) = (planned.len() - existing.len(), existing.len());
    if args.dry_run {
        for node in planned {
            let what = if existing.contains(node.path.as_str()) {
                "overwrite"
            } else {
                "create"
            };
            println!(
                "{what} {} ({:?}, {} bytes)",
                node.path,
                node.mode,
                node.data.len()
            );
        }
        eprintln!(
            "zkit import: dry run: would create {create} and overwrite {overwrite} nodes on {}",
            args.conn.server
        );
        return Ok(0);
    }
    let mut progress = Progress {
        total: planned.len(),
        done: 0,
        tty: std::io::stderr().is_terminal(),
    };
    for node in planned {
        if existing.contains(node.path.as_str()) {
            client
                .set_data(&node.path, &node.data, None)
                .await
                .map_err(|e| node_error(e, &node.path))?;
            if !node.defer_acl {
                client
                    .set_acl(&node.path, &node.acl, None)
                    .await
                    .map_err(|e| node_error(e, &node.path))?;
            }
        } else {
            let open = Acls::anyone_all();
            let acls = if node.defer_acl {
                open
            } else {
                Acls::new(&node.acl)
            };
            let mode = match node.mode {
                Mode::Container => CreateMode::Container,
                Mode::Persistent | Mode::Ttl => CreateMode::Persistent,
            };
            let mut options = mode.with_acls(acls);
            if let Some(ttl) = node.ttl {
                options = options.with_ttl(ttl);
            }
            client
                .create(&node.path, &node.data, &options)
                .await
                .map_err(|e| node_error(e, &node.path))?;
        }
        progress.step("nodes");
    }
    let children: BTreeSet<&str> = planned.iter().filter_map(|p| parent_of(&p.path)).collect();
    let mut padded = 0u64;
    for node in planned {
        // A childless container would be reaped once a child came and went: leave it.
        if node.mode == Mode::Container && !children.contains(node.path.as_str()) {
            continue;
        }
        padded += raise_sequence(client, &node.path, node.sequence).await?;
    }
    for node in planned.iter().rev().filter(|n| n.defer_acl) {
        client
            .set_acl(&node.path, &node.acl, None)
            .await
            .map_err(|e| node_error(e, &node.path))?;
    }
    eprintln!(
        "zkit import: {} nodes into {} in {:.1?} (created {create}, overwrote {overwrite}; \
         {padded} sequence counters raised)",
        planned.len(),
        args.conn.server,
        started.elapsed()
    );
    Ok(0)
}

/// Raises `path`'s sequence counter (stored child version) to `wanted`, one create+delete of
/// a child per step; returns 1 if it had to, else 0.
async fn raise_sequence(client: &Client, path: &str, wanted: i32) -> Result<u64> {
    let pad = if path == "/" {
        format!("/{PAD_CHILD}")
    } else {
        format!("{path}/{PAD_CHILD}")
    };
    let options = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let mut raised = 0;
    loop {
        let stat = client
            .check_stat(path)
            .await
            .map_err(|e| node_error(e, path))?
            .with_context(|| format!("{path} vanished during the import"))?;
        let missing = i64::from(wanted) - i64::from(stored_cversion(&stat));
        if missing <= 0 {
            return Ok(raised);
        }
        raised = 1;
        let pairs = usize::try_from(missing)
            .unwrap_or(usize::MAX)
            .min(PAD_PAIRS_PER_MULTI);
        let mut multi = client.new_multi_writer();
        for _ in 0..pairs {
            multi.add_create(&pad, &[], &options)?;
            multi.add_delete(&pad, None)?;
        }
        match multi.commit().await.map_err(ZkError::from) {
            Ok(_) => {}
            Err(ZkError::NodeExists) => {
                bail!("{pad} exists: cannot raise the child version of {path}")
            }
            Err(err) => return Err(node_error(err, path)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_orders_parents_first_and_checks_lines() {
        let input = r#"{"path":"/a/b","data":"x","acl":["world:anyone:cdrwa"],"mode":"persistent","sequence":0}
{"path":"/a","data_base64":"AAE=","acl":["world:anyone:r"],"mode":"container","sequence":3}
{"path":"/t","acl":["world:anyone:cdrwa"],"mode":"ttl","ttl_ms":5000}
"#;
        let planned = plan(input.as_bytes()).unwrap();
        let paths: Vec<&str> = planned.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["/a", "/t", "/a/b"]);
        assert_eq!(planned[0].data, [0, 1]);
        assert!(
            planned[0].defer_acl,
            "a read-only parent is created open first"
        );
        assert!(!planned[2].defer_acl);
        assert_eq!(planned[1].ttl, Some(Duration::from_millis(5000)));

        for bad in [
            r#"{"path":"a","acl":["world:anyone:r"],"mode":"persistent"}"#,
            r#"{"path":"/zookeeper/x","acl":["world:anyone:r"],"mode":"persistent"}"#,
            r#"{"path":"/x","acl":["world:anyone:r"],"mode":"ttl"}"#,
            r#"{"path":"/x","acl":["world:anyone:r"],"mode":"persistent","ttl_ms":1}"#,
            r#"{"path":"/x","acl":[],"mode":"persistent"}"#,
            r#"{"path":"/x","acl":["world:anyone:q"],"mode":"persistent"}"#,
            r#"{"path":"/x","data":"a","data_base64":"YQ==","acl":["world:anyone:r"],"mode":"persistent"}"#,
            r#"{"path":"/x","acl":["world:anyone:r"],"mode":"persistent","extra":1}"#,
        ] {
            assert!(plan(bad.as_bytes()).is_err(), "accepted {bad}");
        }
        let twice =
            "{\"path\":\"/x\",\"acl\":[\"world:anyone:r\"],\"mode\":\"persistent\"}\n".repeat(2);
        assert!(plan(twice.as_bytes()).is_err(), "duplicate accepted");
    }

    #[test]
    fn parents() {
        assert_eq!(parent_of("/a"), Some("/"));
        assert_eq!(parent_of("/a/b"), Some("/a"));
        assert_eq!(parent_of("/"), None);
    }
}
