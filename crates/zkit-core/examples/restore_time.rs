//! Time to restore a snapshot of N znodes of 100 bytes (named as `zkit-bench compare` names
//! them, `/zkit-mem/n{i}`), the core's share of a server's recovery, and how long taking the
//! snapshot's capture holds the state machine. Builds the state through [`Core`], writes its
//! snapshot to memory, then restores it ROUNDS times and prints each restore's time.
//!
//! `cargo run --release -p zkit-core --example restore_time -- [NODES] [ROUNDS]`
//! (default 1,000,000 nodes, 3 rounds). Measures only.

use std::time::Instant;

mod common;

use common::{create, session_core, CONN, NOW};
use zkit_core::{Config, Core};

fn main() {
    let mut args = std::env::args().skip(1);
    let nodes: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(3);
    let mut core = session_core("/zkit-mem");
    let t = Instant::now();
    for i in 0..nodes {
        core.handle(NOW, CONN, 2 + i as i32, create(format!("/zkit-mem/n{i}")));
        core.ready();
    }
    println!("{nodes} creates: {:.2} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let capture = core.snapshot_capture();
    println!("capture: {:.3} ms", t.elapsed().as_secs_f64() * 1e3);
    let mut bytes = Vec::new();
    capture.write_to(&mut bytes).expect("writing to memory");
    drop(capture);
    println!("snapshot: {} MB", bytes.len() / 1_000_000);
    for _ in 0..rounds {
        let t = Instant::now();
        let restored = Core::restore(Config::default(), NOW, &bytes).expect("its own snapshot");
        println!("restore: {:.3} s", t.elapsed().as_secs_f64());
        drop(restored);
    }
}
