//! A configuration watcher on zkit: print the value of `/config` and then every change, the
//! counterpart of the `config_updater` example. Unlike a one-shot watch (which may
//! skip values written between the event and the re-read), [`zkit::config::ConfigWatcher`]
//! uses a persistent recursive watch and re-syncs after reconnects and new sessions, so the
//! latest value is never missed and values never go backwards.
//!
//! `cargo run -p zkit --example config_watcher -- 127.0.0.1:2181 [/config] [count]`

use zkit::config::{ChangeKind, ConfigWatcher};
use zkit::{Session, SessionOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let hosts = args.next().unwrap_or_else(|| "127.0.0.1:2181".to_string());
    let path = args.next().unwrap_or_else(|| "/config".to_string());
    let count: Option<usize> = args.next().map(|c| c.parse()).transpose()?;
    let session = Session::connect(&hosts, SessionOptions::default()).await?;
    let mut watcher = ConfigWatcher::new(&session, &path)?;
    let mut seen = 0;
    while count.map_or(true, |n| seen < n) {
        let change = watcher.next().await?;
        match change.kind {
            ChangeKind::Removed => println!("{} was deleted", change.path),
            _ => println!("Read {} as {}", change.path, change.value_lossy()),
        }
        seen += 1;
    }
    session.close();
    Ok(())
}
