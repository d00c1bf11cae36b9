//! Pipelined throughput of zkit-client next to the third-party `zookeeper-client` 0.11 from
//! crates.io (the client zkit ran on before), in one run against one zkit server: each round issues K creates without
//! waiting, then K getData, and awaits them; rounds alternate between the two clients and the
//! median of each is reported.
//!
//! ```sh
//! cargo run --release -p zkit-client --example throughput -- [--ops 20000] [--rounds 5] [--server HOST:PORT]
//! ```
//!
//! Without `--server`, an in-memory zkit server runs in a child process.

#[path = "support/server.rs"]
mod support;

use std::time::{Duration, Instant};

use support::{serve_if_asked, ChildServer};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// (create ops/s, get ops/s) of one round: `create` for each of `paths` issued at once and
/// awaited, then `get` for each the same way. Both clients' rounds are this one.
async fn timed_round<'a, C, G, CF, GF, CT, GT, CE, GE>(
    paths: &'a [String],
    create: C,
    get: G,
) -> (f64, f64)
where
    C: Fn(&'a str) -> CF,
    G: Fn(&'a str) -> GF,
    CF: std::future::Future<Output = Result<CT, CE>>,
    GF: std::future::Future<Output = Result<GT, GE>>,
    CE: std::fmt::Debug,
    GE: std::fmt::Debug,
{
    let ops = paths.len() as f64;
    let started = Instant::now();
    let creates: Vec<_> = paths.iter().map(|p| create(p)).collect();
    for c in creates {
        c.await.expect("create");
    }
    let create_rate = ops / started.elapsed().as_secs_f64();
    let started = Instant::now();
    let gets: Vec<_> = paths.iter().map(|p| get(p)).collect();
    for g in gets {
        g.await.expect("get");
    }
    (create_rate, ops / started.elapsed().as_secs_f64())
}

/// The `ops` paths of one round under `root`.
fn round_paths(root: &str, ops: usize) -> Vec<String> {
    (0..ops).map(|i| format!("{root}/n{i}")).collect()
}

/// (create ops/s, get ops/s) of one zkit-client round.
async fn zkit_round(client: &zkit_client::Client, root: &str, ops: usize) -> (f64, f64) {
    let options = zkit_client::CreateMode::Persistent.with_acls(zkit_client::Acls::anyone_all());
    let paths = round_paths(root, ops);
    timed_round(
        &paths,
        |p| client.create(p, b"0123456789", &options),
        |p| client.get_data(p),
    )
    .await
}

/// (create ops/s, get ops/s) of one zookeeper-client round.
async fn third_party_round(
    client: &zookeeper_client::Client,
    root: &str,
    ops: usize,
) -> (f64, f64) {
    let options =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let paths = round_paths(root, ops);
    timed_round(
        &paths,
        |p| client.create(p, b"0123456789", &options),
        |p| client.get_data(p),
    )
    .await
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    serve_if_asked();
    let ops: usize = arg("--ops").map_or(20_000, |s| s.parse().expect("--ops N"));
    let rounds: usize = arg("--rounds").map_or(5, |s| s.parse().expect("--rounds N"));
    let child;
    let addr = match arg("--server") {
        Some(addr) => addr,
        None => {
            child = ChildServer::start();
            child.addr.clone()
        }
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let ours = zkit_client::Client::connector()
            .with_session_timeout(Duration::from_secs(30))
            .connect(&addr)
            .await
            .expect("zkit-client connect");
        let theirs = zookeeper_client::Client::connector()
            .with_session_timeout(Duration::from_secs(30))
            .connect(&addr)
            .await
            .expect("zookeeper-client connect");
        let options =
            zkit_client::CreateMode::Persistent.with_acls(zkit_client::Acls::anyone_all());
        let (mut ours_c, mut ours_g, mut theirs_c, mut theirs_g) = (vec![], vec![], vec![], vec![]);
        for round in 0..rounds {
            let root = format!("/tp-{}-{round}", std::process::id());
            ours.create(&root, b"", &options).await.expect("root");
            ours.create(&format!("{root}/a"), b"", &options).await.expect("root");
            ours.create(&format!("{root}/b"), b"", &options).await.expect("root");
            // Alternate which goes first.
            let (a, b) = if round % 2 == 0 {
                let a = zkit_round(&ours, &format!("{root}/a"), ops).await;
                let b = third_party_round(&theirs, &format!("{root}/b"), ops).await;
                (a, b)
            } else {
                let b = third_party_round(&theirs, &format!("{root}/b"), ops).await;
                let a = zkit_round(&ours, &format!("{root}/a"), ops).await;
                (a, b)
            };
            println!(
                "round {round}: zkit-client create {:.0}/s get {:.0}/s | zookeeper-client create {:.0}/s get {:.0}/s",
                a.0, a.1, b.0, b.1
            );
            ours_c.push(a.0);
            ours_g.push(a.1);
            theirs_c.push(b.0);
            theirs_g.push(b.1);
        }
        println!(
            "median of {rounds} rounds, {ops} pipelined ops each:\n  zkit-client      create {:>8.0}/s  get {:>8.0}/s\n  zookeeper-client create {:>8.0}/s  get {:>8.0}/s",
            median(ours_c),
            median(ours_g),
            median(theirs_c),
            median(theirs_g)
        );
    });
}
