//! How long the slowest single create takes while a [`DataTree`] grows to N nodes of 100 bytes
//! under one parent: the pause a client sees when the tree's tables grow. Prints the slowest
//! creates (over 20 ms), the slowest of all, and the whole run's rate.
//!
//! `cargo run --release -p zkit-core --example tree_growth -- [NODES]` (default 8,000,000;
//! needs about 2.5 GB). Measures only.

use std::time::{Duration, Instant};

use zkit_core::tree::{open_acl, DataTree};

const NOW: i64 = 1_700_000_000_000;

fn main() {
    let nodes: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(8_000_000);
    let mut tree = DataTree::new(false);
    tree.create("/growth", None, &open_acl(), 0, 0, 1, NOW)
        .expect("a fresh tree");
    let (value, acl) = (vec![b'x'; 100], open_acl());
    let mut slowest = (Duration::ZERO, 0usize);
    let start = Instant::now();
    for i in 0..nodes {
        let path = format!("/growth/n-{i:010}");
        let t = Instant::now();
        tree.create(&path, Some(&value), &acl, 0, 1, 2 + i as i64, NOW)
            .expect("unique paths");
        let took = t.elapsed();
        if took > Duration::from_millis(20) {
            println!("create #{}: {:.1} ms", i + 1, took.as_secs_f64() * 1e3);
        }
        if took > slowest.0 {
            slowest = (took, i + 1);
        }
    }
    let all = start.elapsed();
    println!(
        "{nodes} creates in {:.2} s ({:.0}/s); slowest: #{} in {:.1} ms",
        all.as_secs_f64(),
        nodes as f64 / all.as_secs_f64(),
        slowest.1,
        slowest.0.as_secs_f64() * 1e3
    );
}
