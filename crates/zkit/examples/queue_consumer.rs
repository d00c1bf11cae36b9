//! A queue consumer process for the kill -9 test (`tests/recipes_queue_process.rs`), usable by
//! hand too. Two modes:
//!
//! - `queue_consumer HOSTS PATH LOG`: takes items with the at-most-once `Queue::take` forever
//!   and appends `taken <sequence> <data>` to LOG.
//! - `queue_consumer HOSTS PATH LOG --ack-into RESULTS [--work-ms N] [--session-timeout-ms N]`:
//!   claims items (`Queue::claim`), "processes" each one for N ms (default 0), and acknowledges
//!   it with a multi that also creates `RESULTS/<item node name>` holding this process's pid:
//!   the result and the ack are atomic, and a second delivery of an acked item would make that
//!   create fail. Appends `claimed <seq>` before and `acked <seq>` after the ack. If an item
//!   arrives whose result already exists, or the ack's create fails with NodeExists, it appends
//!   `DOUBLE <seq>` and exits with status 3.
//!
//! LOG lines are written with one `write` each (O_APPEND), so concurrent consumers' lines do
//! not interleave.
//!
//! `cargo run -p zkit --example queue_consumer -- 127.0.0.1:2181 /queue /tmp/consumed.log`

use std::io::Write;
use std::time::Duration;

use zkit::queue::Queue;
use zkit::zkit_client as zk;
use zkit::{Error, Session, SessionOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(hosts), Some(path), Some(log)) = (args.next(), args.next(), args.next()) else {
        return Err(
            "usage: queue_consumer HOSTS PATH LOG [--ack-into RESULTS] [--work-ms N] \
             [--session-timeout-ms N]"
                .into(),
        );
    };
    let (mut results, mut work, mut timeout) = (None, Duration::ZERO, None);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--ack-into" => results = Some(value),
            "--work-ms" => work = Duration::from_millis(value.parse()?),
            "--session-timeout-ms" => timeout = Some(Duration::from_millis(value.parse()?)),
            other => return Err(format!("unknown option {other}").into()),
        }
    }
    let mut options = SessionOptions::default();
    if let Some(timeout) = timeout {
        options = options.with_session_timeout(timeout);
    }
    let session = Session::connect(&hosts, options).await?;
    let queue = Queue::new(&session, &path)?;
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let mut write = |line: String| log.write_all(line.as_bytes());
    let Some(results) = results else {
        loop {
            let item = queue.take().await?;
            write(format!(
                "taken {} {}\n",
                item.sequence,
                String::from_utf8_lossy(&item.data)
            ))?;
        }
    };
    let pid = std::process::id().to_string();
    loop {
        let claim = queue.claim().await?;
        let seq = claim.item().sequence;
        let name = claim
            .item_path()
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
        let result = format!("{results}/{name}");
        write(format!("claimed {seq}\n"))?;
        // Delivered again after its ack committed? (The check the atomic create repeats.)
        if session.client().check_stat(&result).await?.is_some() {
            write(format!("DOUBLE {seq}\n"))?;
            std::process::exit(3);
        }
        // The "processing" the kill -9 may interrupt.
        tokio::time::sleep(work).await;
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        match claim
            .ack_with(|multi| multi.add_create(&result, pid.as_bytes(), &persistent))
            .await
        {
            Ok(()) => write(format!("acked {seq}\n"))?,
            Err(Error::NodeExists) => {
                write(format!("DOUBLE {seq}\n"))?;
                std::process::exit(3);
            }
            // The claiming session expired: the item comes back (its ack committed entirely or
            // not at all), and the session layer has a new session for the next claim.
            Err(Error::SessionLost) => write(format!("lost {seq}\n"))?,
            Err(err) => return Err(err.into()),
        }
    }
}
