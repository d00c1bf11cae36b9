//! The command families of the `zkit` binary, one module each. Every module exposes an argument
//! type (clap `Args` or `Subcommand`) and an `async fn run(args) -> anyhow::Result<ExitCode>`.

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
pub mod proc;
pub mod serve;
pub mod service;
pub mod txn;
pub mod ui;
pub mod watch;
