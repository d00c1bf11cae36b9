//! A barrier participant process for `tests/recipes_barrier_process.rs`, usable by hand too.
//! Every step is recorded in ZooKeeper under `PATH-obs` (which must exist with the children
//! `arrived`, `entered`, `leaving`, `left`, `passed`), so the test checks the order as
//! ZooKeeper saw it rather than by clocks:
//!
//! - `barrier_member double HOSTS PATH N ID HOLD_MS`: a `DoubleBarrier` member. Creates
//!   `arrived/ID`, enters, then counts `arrived` and records the count in `entered/ID`; holds
//!   HOLD_MS ("work"), creates `leaving/ID`, leaves, then counts `leaving` into `left/ID`. With
//!   a correct barrier both counts are N: nobody passed enter before all N arrived, nobody got
//!   out of leave before all N started leaving.
//! - `barrier_member wait HOSTS PATH ID`: a `Barrier` waiter. Creates `arrived/ID`, waits, then
//!   records in `passed/ID` whether `PATH-obs/released` exists (the test creates it just before
//!   lowering the barrier) and whether the barrier node is still up:
//!   `released=true up=false` for a correct pass.
//!
//! `cargo run -p zkit --example barrier_member -- double 127.0.0.1:2181 /b 3 m1 0`

use std::time::Duration;

use zkit::barrier::{Barrier, DoubleBarrier};
use zkit::zkit_client as zk;
use zkit::{Session, SessionOptions};

type BoxError = Box<dyn std::error::Error>;

async fn record(session: &Session, path: &str, data: &str) -> Result<(), BoxError> {
    session
        .client()
        .create(
            path,
            data.as_bytes(),
            &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
        )
        .await?;
    Ok(())
}

async fn count(session: &Session, path: &str) -> Result<usize, BoxError> {
    Ok(session.client().list_children(path).await?.len())
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: barrier_member double HOSTS PATH N ID HOLD_MS | wait HOSTS PATH ID";
    let (Some(mode), Some(hosts), Some(path)) = (args.first(), args.get(1), args.get(2)) else {
        return Err(usage.into());
    };
    let obs = format!("{path}-obs");
    let session = Session::connect(hosts, SessionOptions::default()).await?;
    match (mode.as_str(), &args[3..]) {
        ("double", [n, id, hold_ms]) => {
            let n: usize = n.parse()?;
            let hold = Duration::from_millis(hold_ms.parse()?);
            let barrier = DoubleBarrier::new(&session, path, n)?;
            record(&session, &format!("{obs}/arrived/{id}"), "").await?;
            barrier.enter().await?;
            let arrived = count(&session, &format!("{obs}/arrived")).await?;
            record(
                &session,
                &format!("{obs}/entered/{id}"),
                &arrived.to_string(),
            )
            .await?;
            // The member's work inside the barrier: the others' leave must wait for it.
            tokio::time::sleep(hold).await;
            record(&session, &format!("{obs}/leaving/{id}"), "").await?;
            barrier.leave().await?;
            let leaving = count(&session, &format!("{obs}/leaving")).await?;
            record(&session, &format!("{obs}/left/{id}"), &leaving.to_string()).await?;
        }
        ("wait", [id]) => {
            let barrier = Barrier::new(&session, path)?;
            record(&session, &format!("{obs}/arrived/{id}"), "").await?;
            barrier.wait().await?;
            let client = session.client();
            let released = client
                .check_stat(&format!("{obs}/released"))
                .await?
                .is_some();
            let up = client.check_stat(path).await?.is_some();
            record(
                &session,
                &format!("{obs}/passed/{id}"),
                &format!("released={released} up={up}"),
            )
            .await?;
        }
        _ => return Err(usage.into()),
    }
    session.close();
    Ok(())
}
