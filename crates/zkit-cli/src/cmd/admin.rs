//! Operator conveniences: `zkit srvr|mntr|ruok` (a four-letter word sent to a server, its
//! answer printed as is, the way `echo srvr | nc host 2181` does).
//!
//! They work the same against `zkit serve` and Apache ZooKeeper.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long a four-letter word may take, connect included.
const FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the four-letter word goes.
#[derive(Debug, Clone, Args)]
pub struct FourLetterArgs {
    /// Server to ask, as `HOST:PORT`.
    #[arg(long, env = "ZKIT_SERVER", default_value = "127.0.0.1:2181")]
    pub server: String,
}

/// Four-letter-word shortcuts (the server's whitelist decides which are answered).
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// `srvr`: version, latency, counts, zxid, mode.
    Srvr(FourLetterArgs),
    /// `mntr`: monitoring key/value lines.
    Mntr(FourLetterArgs),
    /// `ruok`: exits 0 when the server answers `imok`.
    Ruok(FourLetterArgs),
}

/// Runs a four-letter-word shortcut.
pub async fn run(command: AdminCommand) -> Result<ExitCode> {
    let (word, args) = match &command {
        AdminCommand::Srvr(a) => ("srvr", a),
        AdminCommand::Mntr(a) => ("mntr", a),
        AdminCommand::Ruok(a) => ("ruok", a),
    };
    let answer = four_letter(&args.server, word).await?;
    print!("{answer}");
    if word == "ruok" {
        if answer == "imok" {
            println!();
            return Ok(ExitCode::SUCCESS);
        }
        eprintln!("server at {} did not answer imok", args.server);
        return Ok(ExitCode::FAILURE);
    }
    if answer.contains("is not executed because it is not in the whitelist") {
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Sends `word` to `server` and returns the whole answer (the server closes after it).
pub async fn four_letter(server: &str, word: &str) -> Result<String> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(server)
            .await
            .with_context(|| format!("cannot connect to {server}"))?;
        stream.write_all(word.as_bytes()).await?;
        let mut out = Vec::new();
        stream.read_to_end(&mut out).await?;
        Ok::<_, anyhow::Error>(String::from_utf8_lossy(&out).into_owned())
    };
    tokio::time::timeout(FOUR_LETTER_TIMEOUT, exchange)
        .await
        .map_err(|_| anyhow!("{server} did not answer {word} within {FOUR_LETTER_TIMEOUT:?}"))?
}
