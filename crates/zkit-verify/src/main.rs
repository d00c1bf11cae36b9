//! `zkit-verify`: the long verification profile, and the helpers the runs need.
//!
//! ```text
//! zkit-verify --minutes 30 [--workload W] [--nemesis F,G] [--seed S] [--runs N]
//! zkit-verify --target ensemble [--members 3] --nemesis kill-leader,isolate-leader …
//! zkit-verify --workload ledger --nemesis kill-bookie,pause-bookie,kill-client,pause-client
//! zkit-verify check history.jsonl --workload register     # re-check a saved history
//! zkit-verify self-test                                    # every checker on known histories
//! zkit-verify client --connect … --root …                  # a client process (used by runs)
//! zkit-verify serve --port 0 --data-dir D [--failpoint NAME=ACTION]   # embedded server
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use zkit_verify::client::{self, ClientConfig};
use zkit_verify::history::History;
use zkit_verify::nemesis::FaultKind;
use zkit_verify::runner::{self, EnsembleOptions, RunConfig, ServerCommand};
use zkit_verify::workload::Workload;

/// Jepsen-style verification of zkit serve: seeded workloads under faults, checked histories.
#[derive(Debug, Parser)]
#[command(name = "zkit-verify", args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Re-check a saved history (history.jsonl of a run).
    Check {
        /// The history file.
        file: PathBuf,
        /// Which checker: the workload's name.
        #[arg(long)]
        workload: String,
        /// Sessions checker: the stale-read window of an ensemble's member (ms),
        /// syncLimit × tickTime + tickTime (5500 with scripts/apache-zk's settings); it also
        /// selects the ensemble's rule (an expired session's ephemeral gone a session timeout
        /// after a quorum commits). 0, for a history of one server: gone once the expiry was
        /// observed.
        #[arg(long, default_value_t = 0)]
        stale_read_ms: u64,
    },
    /// Run every checker on its known-good and known-bad histories.
    SelfTest,
    /// A client process: JSON requests on stdin, replies on stdout (used by the runs).
    #[command(hide = true)]
    Client(ClientArgs),
    /// The zkit server library in this binary, with test-only knobs (used by the runs).
    #[command(hide = true)]
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Minutes per run (clients run this long; faults stop at 85% of it).
    #[arg(long, default_value_t = 1.0)]
    minutes: f64,
    /// Workloads (comma-separated); default: all of them, one after the other.
    #[arg(long, value_delimiter = ',')]
    workload: Vec<String>,
    /// Fault kinds (comma-separated: kill, pause, pause-long, drop, reset, stall, partition,
    /// partition-long, disk-full, kill-client, pause-client; for the ledger kill-bookie,
    /// pause-bookie; on an ensemble kill-leader, kill-follower,
    /// pause-leader, pause-follower, isolate-leader; `none`); default: the workload's own set
    /// (on an ensemble: its member faults and the connection faults).
    #[arg(long, value_delimiter = ',')]
    nemesis: Vec<String>,
    /// Seed of the first run (later runs add 1); default: from the clock, printed.
    #[arg(long)]
    seed: Option<u64>,
    /// Runs per workload.
    #[arg(long, default_value_t = 1)]
    runs: u32,
    /// Clients per run.
    #[arg(long, default_value_t = 5)]
    clients: u32,
    /// The `zkit` binary whose `serve` is tested; default: next to this binary.
    #[arg(long)]
    zkit: Option<PathBuf>,
    /// Test the embedded server of this binary instead (needed for disk-full).
    #[arg(long)]
    embedded: bool,
    /// What is tested: `zkit` (a `zkit serve` process) or `ensemble` (an Apache ZooKeeper
    /// ensemble through scripts/apache-zk: the reference the checkers are proven against).
    #[arg(long, default_value = "zkit")]
    target: String,
    /// Members of the ensemble (`--target ensemble`).
    #[arg(long, default_value_t = 3)]
    members: usize,
    /// tickTime of the server (ms).
    #[arg(long, default_value_t = 200)]
    tick_ms: u64,
    /// Session timeout of the clients (ms).
    #[arg(long, default_value_t = 1600)]
    session_timeout_ms: u64,
    /// Where runs keep data, logs and histories (a fresh temp dir by default; kept).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Do not sample the server's memory and descriptors nor churn sessions.
    #[arg(long)]
    no_soak: bool,
}

#[derive(Debug, Args)]
struct ClientArgs {
    #[arg(long)]
    connect: String,
    #[arg(long)]
    root: String,
    #[arg(long, default_value_t = 1600)]
    session_timeout_ms: u64,
    #[arg(long, default_value_t = 3200)]
    lock_timeout_ms: u64,
    #[arg(long)]
    sync_reads: bool,
}

#[derive(Debug, Args)]
struct ServeArgs {
    #[arg(long, default_value_t = 0)]
    port: u16,
    #[arg(long)]
    data_dir: PathBuf,
    #[arg(long, default_value_t = 2000)]
    tick_time: u64,
    /// WAL segment size in bytes (small: the disk-full fault bites at the next roll).
    #[arg(long)]
    wal_segment_size: Option<u64>,
    /// A fail point to configure, `NAME=ACTION` (needs the zkit-server/failpoints feature).
    #[arg(long)]
    failpoint: Vec<String>,
    /// Accepted for the same command line as `zkit serve`; always `always` here.
    #[arg(long)]
    fsync: Option<String>,
    /// Accepted for the same command line as `zkit serve` (ignored).
    #[arg(long = "4lw-whitelist")]
    four_letter_words: Option<String>,
    /// Accepted for the same command line as `zkit serve` (ignored).
    #[arg(long)]
    max_client_cnxns: Option<u32>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Some(Command::Client(args)) => runtime(1).and_then(|rt| rt.block_on(run_client(args))),
        Some(Command::Serve(args)) => {
            // The server log on stderr, as `zkit serve` writes it.
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| "info".into()),
                )
                .with_writer(std::io::stderr)
                .with_ansi(false)
                .init();
            runtime(1).and_then(|rt| rt.block_on(serve(args)))
        }
        Some(Command::Check {
            file,
            workload,
            stale_read_ms,
        }) => check(&file, &workload, Duration::from_millis(stale_read_ms)),
        Some(Command::SelfTest) => {
            let (ok, lines) = zkit_verify::checker::self_test();
            for l in lines {
                println!("{l}");
            }
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        None => {
            tracing_subscriber::fmt()
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| "warn,zkit::session=error".into()),
                )
                .with_writer(std::io::stderr)
                .init();
            runtime(2).and_then(|rt| rt.block_on(long(cli.run)))
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("zkit-verify: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn runtime(workers: usize) -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()?)
}

async fn run_client(args: ClientArgs) -> Result<ExitCode> {
    client::serve_stdio(ClientConfig {
        connect: args.connect,
        root: args.root,
        session_timeout: Duration::from_millis(args.session_timeout_ms),
        lock_timeout: Duration::from_millis(args.lock_timeout_ms),
        sync_reads: args.sync_reads,
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

async fn serve(args: ServeArgs) -> Result<ExitCode> {
    use zkit_server::storage::durable::DurableOptions;
    use zkit_server::storage::wal::WalOptions;
    use zkit_server::storage::WalStorage;
    use zkit_server::{Server, ServerConfig};

    if !args.failpoint.is_empty() && !zkit_server::storage::failpoint::ENABLED {
        bail!("--failpoint needs a build with the zkit-server/failpoints feature");
    }
    for fp in &args.failpoint {
        let (name, action) = fp
            .split_once('=')
            .with_context(|| format!("--failpoint {fp:?}: expected NAME=ACTION"))?;
        fail::cfg(name, action).map_err(|e| anyhow::anyhow!("--failpoint {fp}: {e}"))?;
    }
    let mut config = ServerConfig::ephemeral();
    config.listen.set_port(args.port);
    config.tick_time = Duration::from_millis(args.tick_time);
    let opts = DurableOptions {
        wal: WalOptions {
            segment_size: args
                .wal_segment_size
                .unwrap_or(WalOptions::default().segment_size),
            ..WalOptions::default()
        },
        ..DurableOptions::default()
    };
    let dir = args.data_dir.clone();
    let storage = tokio::task::spawn_blocking(move || WalStorage::open_with(dir, opts))
        .await?
        .with_context(|| format!("cannot open {}", args.data_dir.display()))?;
    let server = Server::start_with_storage(config, Box::new(storage)).await?;
    println!("zkit-verify serve listening on {}", server.addr());
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
        () = server.stopped() => bail!("the server stopped on its own"),
    }
    server.stop().await;
    Ok(ExitCode::SUCCESS)
}

fn check(file: &std::path::Path, workload: &str, stale_reads: Duration) -> Result<ExitCode> {
    let w = Workload::parse(workload).with_context(|| format!("unknown workload {workload}"))?;
    let f = std::fs::File::open(file).with_context(|| format!("cannot open {}", file.display()))?;
    let history = History::read_jsonl(std::io::BufReader::new(f))?;
    let report = w
        .checker(Duration::from_millis(700), stale_reads)
        .check(&history)?;
    print!("{}", report.render(&history, 10));
    Ok(if report.is_valid() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn long(args: RunArgs) -> Result<ExitCode> {
    let me = std::env::current_exe()?;
    let workloads: Vec<Workload> = if args.workload.is_empty() {
        Workload::ALL.to_vec()
    } else {
        args.workload
            .iter()
            .map(|w| Workload::parse(w).with_context(|| format!("unknown workload {w}")))
            .collect::<Result<_>>()?
    };
    let explicit: Option<Vec<FaultKind>> = if args.nemesis.is_empty() {
        None
    } else if args.nemesis == ["none"] {
        Some(Vec::new())
    } else {
        Some(
            args.nemesis
                .iter()
                .map(|n| FaultKind::parse(n).with_context(|| format!("unknown nemesis {n}")))
                .collect::<Result<_>>()?,
        )
    };
    let ensemble = match args.target.as_str() {
        "zkit" => None,
        "ensemble" => Some(EnsembleOptions {
            members: args.members,
            links: false,
        }),
        t => bail!("unknown --target {t} (zkit or ensemble)"),
    };
    let server = if args.embedded || ensemble.is_some() {
        ServerCommand::embedded(me.clone(), &["--wal-segment-size", "1048576"])
    } else {
        let zkit = args
            .zkit
            .clone()
            .unwrap_or_else(|| me.with_file_name("zkit"));
        if !zkit.is_file() {
            bail!(
                "{} not found: build it (cargo build --release -p zkit-cli) or pass --zkit",
                zkit.display()
            );
        }
        ServerCommand::zkit_serve(zkit)
    };
    let seed0 = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let base = match &args.work_dir {
        Some(d) => d.clone(),
        None => tempfile::Builder::new()
            .prefix("zkit-verify-")
            .tempdir()?
            .keep(),
    };
    println!(
        "zkit-verify: first seed {seed0}, work dir {}",
        base.display()
    );
    let mut failed = 0;
    let mut total = 0;
    for w in workloads {
        let faults = explicit.clone().unwrap_or_else(|| match ensemble {
            Some(_) => w.ensemble_faults(),
            None => w.faults(),
        });
        if faults.contains(&FaultKind::DiskFull) && !args.embedded {
            bail!("disk-full needs --embedded (a small WAL segment on a small tmpfs)");
        }
        let kinds: Vec<&str> = faults.iter().map(|k| k.name()).collect();
        println!(
            "zkit-verify: workload {} nemesis {}",
            w.name(),
            if kinds.is_empty() {
                "none".to_owned()
            } else {
                kinds.join(",")
            }
        );
        for r in 0..args.runs {
            let seed = seed0.wrapping_add(u64::from(r));
            let names: Vec<&str> = faults.iter().map(|k| k.name()).collect();
            let nemesis = if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(",")
            };
            let mut config = RunConfig::quick(
                w,
                seed,
                server.clone(),
                me.clone(),
                base.join(format!("{}-{seed}", w.name())),
            );
            config.faults = faults.clone();
            config.ensemble = ensemble;
            // The bookies of the ledger workload are `zkit bookie` processes.
            config.zkit_bin = Some(
                args.zkit
                    .clone()
                    .unwrap_or_else(|| me.with_file_name("zkit")),
            );
            config.duration = Duration::from_secs_f64(args.minutes * 60.0);
            config.clients = args.clients;
            config.tick = Duration::from_millis(args.tick_ms);
            config.session_timeout = Duration::from_millis(args.session_timeout_ms);
            config.op_timeout = config.session_timeout * 2;
            config.soak = !args.no_soak;
            config.replay = format!(
                "cargo run -p zkit-verify --release -- --workload {} --nemesis {nemesis} --seed {seed} --minutes {}{}{}",
                w.name(),
                args.minutes,
                if args.embedded { " --embedded" } else { "" },
                if ensemble.is_some() {
                    format!(" --target ensemble --members {}", args.members)
                } else {
                    String::new()
                }
            );
            let result = runner::run(config).await?;
            total += 1;
            println!("{}", result.summary());
            if let Some(soak) = &result.soak {
                print!("{soak}");
            }
            if !result.is_valid() {
                failed += 1;
                println!("{}", result.failure_report());
            }
        }
    }
    println!("zkit-verify: {total} runs, {failed} with violations");
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
