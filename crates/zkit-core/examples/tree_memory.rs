//! Bytes of RSS per znode of a [`DataTree`]: builds N nodes of 100 bytes under one parent,
//! named as `zkit-bench compare` names them (`/zkit-mem/n{i}`), and prints the process's RSS
//! (`/proc/self/status` VmRSS) before and after, and the step per node. The tree alone: no
//! server, WAL or sessions, so the figure is what the records, the path index and the child
//! set cost.
//!
//! `cargo run --release -p zkit-core --example tree_memory -- [NODES] [VALUE_BYTES]`
//! (default 1,000,000 nodes of 100 bytes). Measures only.

use zkit_core::tree::{open_acl, DataTree};

const NOW: i64 = 1_700_000_000_000;

/// VmRSS of this process in bytes (0 where /proc is not there).
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let nodes: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let value_size: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let before = rss();
    let mut tree = DataTree::new(false);
    tree.create("/zkit-mem", None, &open_acl(), 0, 0, 1, NOW)
        .expect("a fresh tree");
    let (value, acl) = (vec![b'x'; value_size], open_acl());
    for i in 0..nodes {
        let path = format!("/zkit-mem/n{i}");
        tree.create(&path, Some(&value), &acl, 0, 1, 2 + i as i64, NOW)
            .expect("unique paths");
    }
    let after = rss();
    let step = after.saturating_sub(before);
    println!(
        "{nodes} znodes of {value_size} B: RSS {:.1} MiB before, {:.1} MiB after; {:.1} B per znode",
        before as f64 / 1048576.0,
        after as f64 / 1048576.0,
        step as f64 / nodes as f64
    );
    assert_eq!(tree.len(), nodes + 5);
}
