//! `zkit`: the command-line tool. This file only parses arguments and dispatches; each command
//! family lives in its own module under [`cmd`] (one file per family, e.g. `cmd/node.rs`), so new
//! families are added as a module plus one enum variant here.

mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// zkit: a ZooKeeper-compatible server, client tools and coordination recipes.
#[derive(Debug, Parser)]
#[command(name = "zkit", version, about)]
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
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => cmd::serve::run(args).await,
        Command::Node(command) => cmd::node::run(command).await,
        Command::Demo(args) => cmd::demo::run(args).await,
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("Error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
