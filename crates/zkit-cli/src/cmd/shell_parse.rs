//! `zkit shell`'s command line: zkCli's commands and options ([`ShellCommand`], parsed with
//! clap), its usage text, and the splitting of a typed line into words.

use std::time::Duration;

use clap::{Parser, Subcommand};
use zkit_client::AddWatchMode;

use super::shell_complete::USAGE;

/// One line typed into the shell, parsed with zkCli's options.
#[derive(Debug, Parser)]
#[command(
    name = "",
    no_binary_name = true,
    disable_help_subcommand = true,
    disable_help_flag = true,
    disable_version_flag = true
)]
pub(crate) struct Line {
    #[command(subcommand)]
    pub(crate) command: ShellCommand,
}

/// The shell's commands, zkCli's names and options.
#[derive(Debug, Subcommand)]
pub(crate) enum ShellCommand {
    /// ls [-s] [-w] [-R] path
    Ls {
        path: String,
        /// Print the node's Stat after the children.
        #[arg(short = 's')]
        stat: bool,
        /// Watch the children.
        #[arg(short = 'w')]
        watch: bool,
        /// The node and all its descendants, one path a line.
        #[arg(short = 'R')]
        recursive: bool,
    },
    /// get [-s] [-w] path
    Get {
        path: String,
        #[arg(short = 's')]
        stat: bool,
        #[arg(short = 'w')]
        watch: bool,
    },
    /// set [-s] [-v version] path data
    Set {
        path: String,
        data: String,
        #[arg(short = 's')]
        stat: bool,
        #[arg(short = 'v', allow_negative_numbers = true)]
        version: Option<i32>,
    },
    /// create [-s] [-e] [-c] [-t ttl] path [data] [acl]
    Create {
        path: String,
        data: Option<String>,
        acl: Option<String>,
        #[arg(short = 's')]
        sequential: bool,
        #[arg(short = 'e')]
        ephemeral: bool,
        #[arg(short = 'c')]
        container: bool,
        /// Milliseconds, as zkCli takes it (`30s` and other durations work too).
        #[arg(short = 't', value_parser = parse_ttl)]
        ttl: Option<Duration>,
    },
    /// delete [-v version] path
    Delete {
        path: String,
        #[arg(short = 'v', allow_negative_numbers = true)]
        version: Option<i32>,
    },
    /// deleteall path
    #[command(name = "deleteall", alias = "rmr")]
    DeleteAll {
        path: String,
        /// zkCli's batch size; accepted and ignored (nodes go one by one).
        #[arg(short = 'b')]
        batch: Option<u32>,
    },
    /// stat [-w] path
    Stat {
        path: String,
        #[arg(short = 'w')]
        watch: bool,
    },
    /// addWatch [-m mode] path
    #[command(name = "addWatch")]
    AddWatch {
        path: String,
        /// PERSISTENT or PERSISTENT_RECURSIVE (the default, as in zkCli).
        #[arg(short = 'm', value_parser = parse_watch_mode)]
        mode: Option<AddWatchMode>,
    },
    /// getAcl [-s] path
    #[command(name = "getAcl")]
    GetAcl {
        path: String,
        #[arg(short = 's')]
        stat: bool,
    },
    /// setAcl [-s] [-v version] [-R] path acl
    #[command(name = "setAcl")]
    SetAcl {
        path: String,
        acl: String,
        #[arg(short = 's')]
        stat: bool,
        #[arg(short = 'v', allow_negative_numbers = true)]
        version: Option<i32>,
        #[arg(short = 'R')]
        recursive: bool,
    },
    /// addauth scheme auth
    #[command(name = "addauth")]
    AddAuth {
        scheme: String,
        auth: Option<String>,
    },
    /// sync path
    Sync { path: String },
    /// getEphemerals [path]
    #[command(name = "getEphemerals")]
    GetEphemerals { path: Option<String> },
    /// whoami
    #[command(name = "whoami")]
    WhoAmI,
    /// config [-w] [-s]
    Config {
        #[arg(short = 's')]
        stat: bool,
        #[arg(short = 'w')]
        watch: bool,
    },
    /// history
    History,
    /// redo cmdno
    Redo { number: usize },
    /// connect [host:port]
    Connect { server: Option<String> },
    /// close
    Close,
    /// quit
    Quit,
    /// help
    Help,
}

pub(crate) fn usage_text() -> String {
    let mut out = String::from("zkit shell: zkCli's commands\n");
    for (name, args) in USAGE {
        out.push_str(format!("\t{name} {args}").trim_end());
        out.push('\n');
    }
    out
}

/// zkCli takes `-t` in milliseconds; a duration with a unit (`30s`) is accepted too.
fn parse_ttl(text: &str) -> Result<Duration, String> {
    match text.parse::<u64>() {
        Ok(ms) => Ok(Duration::from_millis(ms)),
        Err(_) => humantime::parse_duration(text).map_err(|e| format!("-t {text:?}: {e}")),
    }
}

fn parse_watch_mode(text: &str) -> Result<AddWatchMode, String> {
    match text.to_ascii_uppercase().as_str() {
        "PERSISTENT" => Ok(AddWatchMode::Persistent),
        "PERSISTENT_RECURSIVE" => Ok(AddWatchMode::PersistentRecursive),
        _ => Err(format!(
            "{text:?}: mode is one of PERSISTENT, PERSISTENT_RECURSIVE"
        )),
    }
}

/// Splits a line into words as zkCli's `MyCommandOptions.parseCommand` does: at whitespace,
/// a word in double or single quotes kept whole (without its quotes).
pub fn split_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut word = String::new();
        if c == '"' || c == '\'' {
            chars.next();
            for d in chars.by_ref() {
                if d == c {
                    break;
                }
                word.push(d);
            }
        } else {
            while let Some(&d) = chars.peek() {
                if d.is_whitespace() {
                    break;
                }
                word.push(d);
                chars.next();
            }
        }
        words.push(word);
    }
    words
}
