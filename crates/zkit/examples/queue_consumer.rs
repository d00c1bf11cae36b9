//! A queue consumer process for the kill -9 test (`tests/recipes_queue_process.rs`), usable by
//! hand too: takes items from the queue at PATH forever and appends `<sequence> <data>` to
//! LOG (one `write` per line, O_APPEND, so concurrent consumers' lines do not interleave).
//!
//! `cargo run -p zkit --example queue_consumer -- 127.0.0.1:2181 /queue /tmp/consumed.log`

use std::io::Write;

use zkit::queue::Queue;
use zkit::{Session, SessionOptions};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(hosts), Some(path), Some(log)) = (args.next(), args.next(), args.next()) else {
        return Err("usage: queue_consumer HOSTS PATH LOG".into());
    };
    let session = Session::connect(&hosts, SessionOptions::default()).await?;
    let queue = Queue::new(&session, &path)?;
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    loop {
        let item = queue.take().await?;
        let line = format!(
            "{} {}\n",
            item.sequence,
            String::from_utf8_lossy(&item.data)
        );
        log.write_all(line.as_bytes())?;
    }
}
