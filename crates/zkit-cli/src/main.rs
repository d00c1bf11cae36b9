//! `zkit`: the command-line tool. This file only parses arguments and dispatches; each command
//! family lives in its own module under [`cmd`] (one file per family, e.g. `cmd/node.rs`), so new
//! families are added as a module plus one enum variant here.

mod allocator;
mod cmd;
#[cfg(feature = "dhat-heap")]
mod heap_profile;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

/// zkit: a ZooKeeper-compatible coordination server, zkCli-style client commands, and
/// coordination recipes (locks, leader election, watched configuration, two-phase commit,
/// distributed procedures, service discovery, a replicated ledger) as commands.
///
/// Client commands share the connection flags --server HOSTS (or ZKIT_SERVER; default
/// 127.0.0.1:2181, `HOST:PORT[,HOST:PORT…][/chroot]`), --auth USER:PASSWORD,
/// --session-timeout and --tls-ca/--tls-cert/--tls-key.
#[derive(Debug, Parser)]
#[command(name = "zkit", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a ZooKeeper-compatible server.
    Serve(cmd::serve::ServeArgs),
    /// zkCli-like node commands (ls, get, set, create, rm, stat, watch).
    #[command(flatten)]
    Node(cmd::node::NodeCommand),
    /// Start an embedded server and demonstrate what zkit does.
    Demo(cmd::demo::DemoArgs),
    /// Four-letter-word shortcuts: srvr, mntr, ruok.
    #[command(flatten)]
    Admin(cmd::admin::AdminCommand),
    /// An interactive shell with zkCli's commands (ls, get, set, create, delete, addWatch, …),
    /// line editing, history and tab completion; reads commands line by line when piped.
    ///
    /// `help` in the shell lists the commands. The history file is $ZKIT_SHELL_HISTORY, else
    /// $XDG_DATA_HOME/zkit/shell_history (~/.local/share/zkit/shell_history), 1000 lines at
    /// most. Piped, the exit status is the last command's (0 if it succeeded or there was none).
    Shell(cmd::shell::ShellArgs),
    /// Read or replace a node's ACL.
    #[command(subcommand)]
    Acl(cmd::acl::AclCommand),
    /// Print the digest ACL id of USER:PASSWORD (`user:base64(sha1(user:password))`, as Apache's
    /// DigestAuthenticationProvider computes it), for `digest:<id>:cdrwa` ACLs and superDigest.
    Digest {
        /// `user:password`.
        user_password: String,
    },
    /// Write the tree (data, ACLs, modes) as JSON lines, for `zkit import`.
    Export(cmd::export::ExportArgs),
    /// Load what `zkit export` wrote into a server.
    Import(cmd::import::ImportArgs),
    /// Run a command while holding a distributed lock (like flock(1)).
    Lock(cmd::lock::LockArgs),
    /// The watched configuration store: set, get, watch, import, export.
    Config(cmd::config::ConfigArgs),
    /// Run a command while this process is the elected leader.
    Elect(cmd::elect::ElectArgs),
    /// HBase-style two-phase distributed procedures: members and coordinator.
    #[command(subcommand)]
    Proc(cmd::proc::ProcCommand),
    /// Two-phase-commit transactions: participants, coordinators, inspection, demo.
    #[command(subcommand)]
    Txn(cmd::txn::TxnCommand),
    /// Run a bookie: the replicated ledger's storage server (`zkit bookie ls`: list bookies).
    Bookie(BookieCli),
    /// The replicated ledger: write, read, list, recover, audit.
    #[command(subcommand)]
    Ledger(cmd::ledger::LedgerCommand),
    /// The web dashboard: status, tree, sessions, locks and the other recipes, live.
    Ui(cmd::ui::UiArgs),
    /// Service discovery (curator-x-discovery's layout): register while CMD runs, list, watch.
    #[command(subcommand)]
    Service(cmd::service::ServiceCommand),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Print a shell completion script (e.g. `zkit completions bash > /etc/bash_completion.d/zkit`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Write the man pages (`zkit.1`, `zkit-serve.1`, … one per command) into DIR.
    Man {
        /// The directory (created if missing), e.g. `/usr/local/share/man/man1`.
        dir: std::path::PathBuf,
    },
}

/// `zkit bookie`: run a bookie (flags), or a bookie subcommand.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct BookieCli {
    #[command(subcommand)]
    command: Option<BookieCommand>,
    #[command(flatten)]
    run: Option<cmd::bookie::BookieArgs>,
    /// ZooKeeper, for running a bookie (`ls` takes its own).
    #[command(flatten)]
    conn: cmd::conn::ConnArgs,
}

/// `zkit bookie …` subcommands.
#[derive(Debug, Subcommand)]
enum BookieCommand {
    /// List the registered bookies (writable and read-only).
    Ls(cmd::ledger::LedgerCommon),
}

/// `zkit bench …`.
#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Lock acquire+release cycles per second and acquire latency.
    Lock(cmd::bench_lock::BenchLockArgs),
    /// Ledger add latency, pipelined throughput, recovery time (bookie processes, fsync on).
    Ledger(cmd::bench_ledger::BenchLedgerArgs),
    /// Time for one full procedure with N members.
    Proc(cmd::bench_proc::BenchProcArgs),
    /// Latency and throughput of all-yes 2PC transactions.
    Txn(cmd::bench_txn::BenchTxnArgs),
    /// Load-test a ZooKeeper-compatible server: ops/s and latency percentiles.
    Server(cmd::bench_server::BenchServerArgs),
}

fn main() -> ExitCode {
    allocator::tune();
    let cli = Cli::parse();
    if matches!(cli.command, Command::Serve(_)) {
        allocator::no_huge_pages();
    }
    // Dropped after the runtime: the profile covers the whole server run.
    #[cfg(feature = "dhat-heap")]
    let _profiler = matches!(cli.command, Command::Serve(_)).then(heap_profile::start);
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all();
    if let Command::Serve(args) = &cli.command {
        runtime.worker_threads(cmd::serve::worker_threads(args));
    }
    match runtime.build() {
        Ok(runtime) => runtime.block_on(run(cli)),
        Err(err) => {
            eprintln!("Error: cannot start the tokio runtime: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Serve(args) => {
            #[cfg(feature = "dhat-heap")]
            heap_profile::print_on_sigusr1();
            cmd::serve::run(args).await
        }
        Command::Node(command) => cmd::node::run(command).await,
        Command::Demo(args) => cmd::demo::run(args).await,
        Command::Admin(command) => cmd::admin::run(command).await,
        Command::Shell(args) => cmd::shell::run(args).await,
        Command::Acl(command) => cmd::acl::run_acl(command).await,
        Command::Export(args) => cmd::export::run(args).await,
        Command::Import(args) => cmd::import::run(args).await,
        Command::Lock(args) => cmd::lock::run(args).await,
        Command::Config(args) => cmd::config::run(args).await,
        Command::Elect(args) => cmd::elect::run(args).await,
        Command::Proc(command) => cmd::proc::run(command).await,
        Command::Txn(command) => cmd::txn::run(command).await,
        Command::Bookie(BookieCli {
            command: Some(BookieCommand::Ls(common)),
            ..
        }) => cmd::ledger::bookie_ls(&common).await,
        Command::Bookie(BookieCli {
            run: Some(args),
            conn,
            ..
        }) => cmd::bookie::run(args, conn).await,
        Command::Bookie(BookieCli { .. }) => Err(anyhow::anyhow!(
            "zkit bookie needs --port and --data-dir (or a subcommand: ls)"
        )),
        Command::Ledger(command) => cmd::ledger::run(command).await,
        Command::Ui(args) => cmd::ui::run(args).await,
        Command::Digest { user_password } => {
            if user_password.contains(':') {
                println!("{}", zkit_core::acl::digest_id(&user_password));
                Ok(ExitCode::SUCCESS)
            } else {
                Err(anyhow::anyhow!(
                    "expected USER:PASSWORD, got {user_password:?} (no ':')"
                ))
            }
        }
        Command::Completions { shell } => {
            // Into a buffer first: clap_complete panics on a write error (`| head`).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "zkit", &mut script);
            use std::io::Write as _;
            match std::io::stdout().lock().write_all(&script) {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
                Err(err) => Err(anyhow::Error::new(err).context("writing the completion script")),
            }
        }
        Command::Man { dir } => write_man_pages(&dir),
        Command::Service(command) => cmd::service::run(command).await,
        Command::Bench(BenchCommand::Txn(args)) => cmd::bench_txn::run(args).await,
        Command::Bench(BenchCommand::Server(args)) => cmd::bench_server::run(args).await,
        Command::Bench(BenchCommand::Proc(args)) => cmd::bench_proc::run(args).await,
        Command::Bench(BenchCommand::Lock(args)) => cmd::bench_lock::run(args).await,
        Command::Bench(BenchCommand::Ledger(args)) => cmd::bench_ledger::run(args).await,
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("Error: {}", error_chain(&err));
            ExitCode::FAILURE
        }
    }
}

/// Writes `zkit.1` and one page per command (`zkit-lock.1`, `zkit-bench-server.1`, …).
fn write_man_pages(dir: &std::path::Path) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    clap_mangen::generate_to(Cli::command(), dir)
        .with_context(|| format!("writing man pages into {}", dir.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// The error and its causes joined with `: `, each said once: many errors already end their
/// message with their cause's (`cannot listen on A: Address already in use`), and printing the
/// chain as well would repeat it.
fn error_chain(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::error_chain;

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::AddrInUse, "Address already in use");
        let err = anyhow::Error::new(zkit_server::Error::Bind {
            addr: "127.0.0.1:2181".parse().expect("addr"),
            source: io,
        })
        .context("starting the server");
        assert_eq!(
            error_chain(&err),
            "starting the server: cannot listen on 127.0.0.1:2181: Address already in use"
        );
        // A cause the message does not contain is still shown.
        let err = anyhow::anyhow!("disk full").context("writing /a");
        assert_eq!(error_chain(&err), "writing /a: disk full");
    }
}
