//! The command families of the `zkit` binary, one module each. Every module exposes an argument
//! type (clap `Args` or `Subcommand`) and an `async fn run(args) -> anyhow::Result<ExitCode>`.
//! [`conn`] holds the connection flags they share and the one place that connects.

pub mod acl;
pub mod admin;
pub mod bench_common;
pub mod bench_ledger;
pub mod bench_lock;
pub mod bench_proc;
pub mod bench_server;
pub mod bench_txn;
pub mod bookie;
pub mod child;
pub mod config;
pub mod conn;
pub mod demo;
pub mod elect;
pub mod export;
pub mod guard;
pub mod import;
pub mod ledger;
pub mod ledger_demo;
pub mod lock;
pub mod node;
pub mod plot;
pub mod print;
pub mod proc;
pub mod progress;
pub mod serve;
pub mod service;
pub mod shell;
pub mod shell_complete;
pub mod shell_parse;
pub mod signal;
pub mod txn;
pub mod ui;
pub mod watch;

/// A command's own exit code (0–255) as the process's; anything else is 1.
pub fn process_exit(code: i32) -> std::process::ExitCode {
    std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
}
