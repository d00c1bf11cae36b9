//! A resilient configuration updater on zkit: write a random value to `/config` every few
//! seconds, surviving connection loss (retried by the policy) and session expiry (the session
//! layer builds a new session by itself; the next write simply uses it).
//!
//! `cargo run -p zkit --example config_updater -- 127.0.0.1:2181 [count]`

use std::time::Duration;

use rand::Rng;
use zkit::zkit_client::{Acls, CreateMode};
use zkit::{retry, Error, RetryPolicy, Session, SessionOptions};

const PATH: &str = "/config";

/// The classic active key-value store's write: exists → create or set, retried as a whole
/// (it is idempotent). NodeExists/NoNode races with other writers just go round again.
async fn write(session: &Session, policy: &RetryPolicy, value: &str) -> Result<(), Error> {
    loop {
        let attempt = retry(policy, || async {
            let client = session.client();
            match client.check_stat(PATH).await? {
                None => client
                    .create(
                        PATH,
                        value.as_bytes(),
                        &CreateMode::Persistent.with_acls(Acls::anyone_all()),
                    )
                    .await
                    .map(|_| ()),
                Some(stat) => client
                    .set_data(PATH, value.as_bytes(), Some(stat.version))
                    .await
                    .map(|_| ()),
            }
        })
        .await;
        match attempt {
            Err(Error::NodeExists | Error::NoNode | Error::BadVersion) => continue,
            other => return other,
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let hosts = args.next().unwrap_or_else(|| "127.0.0.1:2181".into());
    let count: u32 = args.next().and_then(|n| n.parse().ok()).unwrap_or(5);
    let session = Session::connect(&hosts, SessionOptions::default()).await?;
    let policy = RetryPolicy::default();
    for _ in 0..count {
        let value = rand::thread_rng().gen_range(0..100).to_string();
        write(&session, &policy, &value).await?;
        println!("Set {PATH} to {value}");
        tokio::time::sleep(Duration::from_millis(rand::thread_rng().gen_range(0..1000))).await;
    }
    Ok(())
}
