//! `zkit ledger …`: the replicated ledger from the shell. `write` turns stdin lines into the
//! entries of a new ledger, `read` prints a ledger's entries (recovering it first when its
//! writer left it open, or tailing it with `--follow`), `ls`/`info`/`delete`/`recover` manage
//! ledgers, `audit` shows what auto-recovery has to do, and `autorecovery` runs the auditor
//! and a replication worker. Output is for scripts: one item per line on stdout, flushed line
//! by line; diagnostics on stderr; non-zero exit on any error.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use clap::{Args, Subcommand, ValueEnum};
use futures::StreamExt;
use zkit::ledger::auditor::{short_bookies, AutoRecovery, AutoRecoveryOptions, ReplicasCheck};
use zkit::ledger::layout::{self, LedgerMetadata};
use zkit::ledger::{CreateOptions, Digest, LedgerClient, LedgerError, LedgerOptions};
use zkit::Session;

use super::conn::{ConnArgs, DEFAULT_SESSION_TIMEOUT};

/// Exit code of `write` when the ledger was fenced under it (another process recovered it).
pub const EXIT_FENCED: u8 = 75;

/// Options every `zkit ledger` command shares.
#[derive(Debug, Clone, Args)]
pub struct LedgerCommon {
    /// ZooKeeper (zkit serve or Apache ZooKeeper).
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Metadata root.
    #[arg(long, env = "ZKIT_LEDGER_ROOT", default_value = zkit::ledger::DEFAULT_ROOT)]
    pub root: String,
    /// A bookie request gives up after this (a bookie that does not answer is replaced).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub bookie_timeout: Duration,
}

impl LedgerCommon {
    pub(crate) async fn connect(&self) -> Result<(Session, LedgerClient)> {
        let session = self.conn.session(DEFAULT_SESSION_TIMEOUT).await?;
        let client = LedgerClient::with_options(
            &session,
            LedgerOptions {
                root: self.root.clone(),
                request_timeout: self.bookie_timeout,
                ..LedgerOptions::default()
            },
        )?;
        Ok((session, client))
    }
}

/// Entry digests.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum DigestArg {
    /// CRC32C: catches corruption.
    Crc32c,
    /// HMAC-SHA256 keyed by the password: also catches forgery.
    Hmac,
}

/// `zkit ledger …`.
#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    /// Write each stdin line as an entry of a new ledger: prints `ledger ID`, then `acked N`
    /// for each acknowledged entry; closes the ledger at end of input.
    Write {
        #[command(flatten)]
        common: LedgerCommon,
        /// E: bookies per fragment.
        #[arg(long, default_value_t = 3)]
        ensemble: usize,
        /// Qw: copies of each entry.
        #[arg(long, default_value_t = 2)]
        write_quorum: usize,
        /// Qa: acknowledgements per entry.
        #[arg(long, default_value_t = 2)]
        ack_quorum: usize,
        /// The ledger's password.
        #[arg(long, env = "ZKIT_LEDGER_PASSWORD", default_value = "")]
        password: String,
        /// Entry digest.
        #[arg(long, value_enum, default_value = "crc32c")]
        digest: DigestArg,
    },
    /// Print entries of a ledger, one per line. An open ledger is recovered first (which
    /// fences its writer); with `--follow` it is tailed instead, without recovery.
    Read {
        #[command(flatten)]
        common: LedgerCommon,
        /// Ledger id.
        id: i64,
        /// First entry.
        #[arg(long, default_value_t = 0)]
        from: i64,
        /// Last entry [default: the last one].
        #[arg(long)]
        to: Option<i64>,
        /// Follow new entries as they are confirmed, until the ledger is closed.
        #[arg(long)]
        follow: bool,
        /// The ledger's password.
        #[arg(long, env = "ZKIT_LEDGER_PASSWORD", default_value = "")]
        password: String,
        /// Also print each entry's id before it (`ID<TAB>payload`).
        #[arg(long)]
        ids: bool,
    },
    /// List ledger ids (with `-l`: state, last entry, length, fragments).
    Ls {
        #[command(flatten)]
        common: LedgerCommon,
        /// Long listing.
        #[arg(short = 'l', long)]
        long: bool,
    },
    /// Show a ledger's metadata.
    Info {
        #[command(flatten)]
        common: LedgerCommon,
        /// Ledger id.
        id: i64,
        /// Print the stored JSON as is.
        #[arg(long)]
        json: bool,
    },
    /// Delete a ledger (its metadata; bookies drop their copies when they garbage-collect).
    Delete {
        #[command(flatten)]
        common: LedgerCommon,
        /// Ledger id.
        id: i64,
    },
    /// Recover an open ledger (fence its writer, find its end, close it).
    Recover {
        #[command(flatten)]
        common: LedgerCommon,
        /// Ledger id.
        id: i64,
        /// The ledger's password.
        #[arg(long, env = "ZKIT_LEDGER_PASSWORD", default_value = "")]
        password: String,
    },
    /// List under-replicated ledgers (marked by the auditor); with `--check`, also every
    /// ledger with a fragment on a bookie that is not registered now, and every closed
    /// ledger with a bookie that is up but lacks the first or last entry of its share of a
    /// fragment; with `--full`, lacks any entry of it (every entry is read). Marks nothing.
    Audit {
        #[command(flatten)]
        common: LedgerCommon,
        /// Look at every ledger's metadata and replicas now.
        #[arg(long)]
        check: bool,
        /// Like `--check`, reading every entry of each bookie's share (slower: one read
        /// per entry and replica).
        #[arg(long)]
        full: bool,
    },
    /// Run auto-recovery (an auditor candidate and a replication worker) until SIGINT/SIGTERM.
    Autorecovery {
        #[command(flatten)]
        common: LedgerCommon,
        /// How long a bookie must be gone before its ledgers are re-replicated.
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        lost_bookie_delay: Duration,
        /// How long an open ledger's last fragment is left to its writer.
        #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
        open_ledger_grace: Duration,
        /// Do not contend to be the auditor.
        #[arg(long)]
        no_auditor: bool,
        /// Do not run a replication worker.
        #[arg(long)]
        no_worker: bool,
        /// The auditor's replicas check reads every entry of each bookie's share of each
        /// fragment, not only the first and last (finds a bookie missing entries in the
        /// middle; one read per entry and replica on every audit).
        #[arg(long)]
        full_check: bool,
        /// The log filter [default: RUST_LOG, else info].
        #[arg(long)]
        log_level: Option<String>,
    },
}

fn out(line: &str) -> Result<()> {
    let mut o = std::io::stdout().lock();
    o.write_all(line.as_bytes())?;
    o.write_all(b"\n")?;
    o.flush()?;
    Ok(())
}

/// Runs a ledger command.
pub async fn run(command: LedgerCommand) -> anyhow::Result<std::process::ExitCode> {
    run_exit_code(command)
        .await
        .map(std::process::ExitCode::from)
}

/// What [`run`] does, with the exit code as a number.
async fn run_exit_code(command: LedgerCommand) -> anyhow::Result<u8> {
    match &command {
        LedgerCommand::Autorecovery { log_level, .. } => {
            init_logging(log_level.as_deref(), "info")?
        }
        _ => init_logging(None, "warn")?,
    }
    match command {
        LedgerCommand::Write {
            common,
            ensemble,
            write_quorum,
            ack_quorum,
            password,
            digest,
        } => {
            let opts = CreateOptions {
                ensemble,
                write_quorum,
                ack_quorum,
                password: password.into_bytes(),
                digest: match digest {
                    DigestArg::Crc32c => Digest::Crc32c,
                    DigestArg::Hmac => Digest::HmacSha256,
                },
            };
            write(&common, &opts).await
        }
        LedgerCommand::Read {
            common,
            id,
            from,
            to,
            follow,
            password,
            ids,
        } => read(&common, id, from, to, follow, password.as_bytes(), ids).await,
        LedgerCommand::Ls { common, long } => {
            let (session, client) = common.connect().await?;
            for id in client.list().await? {
                if long {
                    match client.info(id).await {
                        Ok(i) => out(&summary(id, &i.metadata))?,
                        Err(LedgerError::NoSuchLedger(_)) => {}
                        Err(e) => return Err(e.into()),
                    }
                } else {
                    out(&id.to_string())?;
                }
            }
            session.close();
            Ok(0)
        }
        LedgerCommand::Info { common, id, json } => {
            let (session, client) = common.connect().await?;
            let info = client.info(id).await?;
            if json {
                out(&String::from_utf8_lossy(&layout::encode_metadata(
                    &info.metadata,
                )))?;
            } else {
                for line in describe(&info.metadata) {
                    out(&line)?;
                }
                out(&format!("path {}", info.path))?;
                out(&format!("version {}", info.version))?;
            }
            session.close();
            Ok(0)
        }
        LedgerCommand::Delete { common, id } => {
            let (session, client) = common.connect().await?;
            client.delete(id).await?;
            out(&format!("deleted {id}"))?;
            session.close();
            Ok(0)
        }
        LedgerCommand::Recover {
            common,
            id,
            password,
        } => {
            let (session, client) = common.connect().await?;
            let m = client.recover(id, password.as_bytes()).await?;
            out(&format!(
                "recovered {id} last-entry {} length {}",
                m.last_entry_id, m.length
            ))?;
            client.close();
            session.close();
            Ok(0)
        }
        LedgerCommand::Audit {
            common,
            check,
            full,
        } => {
            let check = match (check, full) {
                (_, true) => Some(ReplicasCheck::All),
                (true, false) => Some(ReplicasCheck::Ends),
                (false, false) => None,
            };
            audit(&common, check).await
        }
        LedgerCommand::Autorecovery {
            common,
            lost_bookie_delay,
            open_ledger_grace,
            no_auditor,
            no_worker,
            full_check,
            log_level: _,
        } => {
            let shutdown = super::signal::shutdown_signal()?;
            let (session, client) = common.connect().await?;
            let ar = AutoRecovery::start(
                &session,
                &client,
                AutoRecoveryOptions {
                    auditor: !no_auditor,
                    worker: !no_worker,
                    lost_bookie_delay,
                    open_ledger_grace,
                    replicas_check: if full_check {
                        ReplicasCheck::All
                    } else {
                        ReplicasCheck::Ends
                    },
                    ..AutoRecoveryOptions::default()
                },
            )
            .await?;
            out("zkit ledger autorecovery running")?;
            shutdown.await;
            ar.stop().await;
            client.close();
            session.close();
            Ok(0)
        }
    }
}

/// Logs to stderr: `level`, else `RUST_LOG`, else `default`.
fn init_logging(level: Option<&str>, default: &str) -> Result<()> {
    let filter = match level {
        Some(l) => tracing_subscriber::EnvFilter::try_new(l).context("bad --log-level")?,
        None => tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default)),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    Ok(())
}

/// One line per ledger for `ls -l`.
fn summary(id: i64, m: &LedgerMetadata) -> String {
    format!(
        "{id}\t{}\tlast-entry {}\tlength {}\tE{} Qw{} Qa{}\tfragments {}",
        m.state,
        m.last_entry_id,
        m.length,
        m.ensemble_size,
        m.write_quorum,
        m.ack_quorum,
        m.ensembles.len()
    )
}

fn describe(m: &LedgerMetadata) -> Vec<String> {
    let mut v = vec![
        format!("state {}", m.state),
        format!(
            "quorums E{} Qw{} Qa{}",
            m.ensemble_size, m.write_quorum, m.ack_quorum
        ),
        format!("digest {}", layout::digest_name(m.digest_type)),
        format!("last-entry {}", m.last_entry_id),
        format!("length {}", m.length),
        format!("ctime {}", m.ctime_ms),
    ];
    for (first, ens) in &m.ensembles {
        v.push(format!("fragment {first} {}", ens.join(" ")));
    }
    v
}

async fn write(common: &LedgerCommon, opts: &CreateOptions) -> Result<u8> {
    use tokio::io::AsyncBufReadExt;
    let (session, client) = common.connect().await?;
    let writer = client.create(opts).await?;
    let id = writer.id();
    out(&format!("ledger {id}"))?;
    // Acknowledgements are printed by their own task, in entry order, as they come.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<zkit::ledger::PendingAdd>();
    let printer = tokio::spawn(async move {
        while let Some(p) = rx.recv().await {
            let n = p.await?;
            out(&format!("acked {n}")).map_err(|e| LedgerError::BadArguments(e.to_string()))?;
        }
        Ok::<_, LedgerError>(())
    });
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).split(b'\n');
    let mut submitted = 0u64;
    let failure = loop {
        let line = match lines.next_segment().await {
            Ok(Some(l)) => l,
            Ok(None) => break None,
            Err(e) => break Some(anyhow::Error::from(e).context("reading stdin")),
        };
        match writer.submit(Bytes::from(line)).await {
            Ok(p) => {
                submitted += 1;
                if tx.send(p).is_err() {
                    break None;
                }
            }
            Err(e) => break Some(e.into()),
        }
    };
    drop(tx);
    let printed = printer.await.context("printer task")?;
    let result = match (failure, printed) {
        (Some(e), _) => Err(e),
        (None, Err(e)) => Err(e.into()),
        (None, Ok(())) => {
            let m = writer.close().await?;
            eprintln!(
                "closed ledger {id}: {submitted} entries, last entry {}, length {}",
                m.last_entry_id, m.length
            );
            Ok(0)
        }
    };
    client.close();
    session.close();
    match result {
        Err(e)
            if matches!(
                e.downcast_ref::<LedgerError>(),
                Some(LedgerError::Fenced(_))
            ) =>
        {
            eprintln!("Error: {e:#}");
            Ok(EXIT_FENCED)
        }
        other => other,
    }
}

async fn read(
    common: &LedgerCommon,
    id: i64,
    from: i64,
    to: Option<i64>,
    follow: bool,
    password: &[u8],
    ids: bool,
) -> Result<u8> {
    let (session, client) = common.connect().await?;
    let print = |e: &zkit::ledger::LedgerEntry| -> Result<()> {
        let mut o = std::io::stdout().lock();
        if ids {
            write!(o, "{}\t", e.entry_id)?;
        }
        o.write_all(&e.payload)?;
        o.write_all(b"\n")?;
        o.flush()?;
        Ok(())
    };
    if follow {
        let reader = client.open_no_recovery(id, password).await?;
        let mut s = std::pin::pin!(reader.follow(from, Duration::from_secs(2)));
        while let Some(e) = s.next().await {
            let e = e?;
            if to.is_some_and(|t| e.entry_id > t) {
                break;
            }
            print(&e)?;
            if to == Some(e.entry_id) {
                break;
            }
        }
    } else {
        let reader = client.open(id, password).await?;
        let last = to.unwrap_or(reader.last_add_confirmed());
        if from <= last {
            let mut s = std::pin::pin!(reader.entries(from, last));
            while let Some(e) = s.next().await {
                print(&e?)?;
            }
        } else if to.is_some() {
            bail!("empty range {from}..={last}");
        }
    }
    client.close();
    session.close();
    Ok(0)
}

async fn audit(common: &LedgerCommon, check: Option<ReplicasCheck>) -> Result<u8> {
    let (session, client) = common.connect().await?;
    let store = client.store();
    for id in store.list_underreplicated().await? {
        if let Some((mark, _)) = store.read_mark(id).await? {
            out(&format!(
                "under-replicated {id} missing {} marked {}",
                mark.replicas.join(","),
                mark.ctime_ms
            ))?;
        }
    }
    if let Some(check) = check {
        let (writable, readonly) = store.bookies().await?;
        let present: BTreeSet<String> = writable.into_iter().chain(readonly).collect();
        for id in client.list().await? {
            let Ok(info) = client.info(id).await else {
                continue;
            };
            let missing: Vec<&str> = info
                .metadata
                .bookies()
                .into_iter()
                .filter(|b| !present.contains(*b))
                .collect();
            if !missing.is_empty() {
                out(&format!("unavailable {id} on {}", missing.join(",")))?;
            }
            let short = short_bookies(&client, id, &info.metadata, &present, check, 256).await;
            if !short.is_empty() {
                let short: Vec<String> = short.into_iter().collect();
                out(&format!("short {id} on {}", short.join(",")))?;
            }
        }
    }
    session.close();
    Ok(0)
}

/// `zkit bookie ls`: the registered bookies.
pub async fn bookie_ls(common: &LedgerCommon) -> Result<std::process::ExitCode> {
    bookie_ls_exit_code(common)
        .await
        .map(std::process::ExitCode::from)
}

/// What [`bookie_ls`] does, with the exit code as a number.
async fn bookie_ls_exit_code(common: &LedgerCommon) -> Result<u8> {
    let (session, client) = common.connect().await?;
    let (writable, readonly) = client.bookies().await?;
    for b in writable {
        out(&format!("{b}\twritable"))?;
    }
    for b in readonly {
        out(&format!("{b}\tread-only"))?;
    }
    session.close();
    Ok(0)
}
