//! A fixed, repeatable run of the core's request paths, for counting the instructions one
//! request costs: a tree of 10,000 nodes of 100 bytes, then N requests of one kind through
//! `Core::handle` + `ready`, exactly as the server's pipeline makes them.
//!
//! On a shared machine wall-clock micro-benchmarks move by tens of percent from run to run; an
//! instruction count does not. Count with valgrind and take the difference of two runs:
//!
//! ```text
//! cargo build --release -p zkit-core --example op_cost
//! valgrind --tool=cachegrind --cache-sim=no target/release/examples/op_cost set 0
//! valgrind --tool=cachegrind --cache-sim=no target/release/examples/op_cost set 100000
//! ```
//!
//! (instructions of the second − the first) / 100,000 = instructions per setData. Kinds:
//! `create`, `get`, `set`, `exists`. Measures only.

mod common;

use common::{create, session_core, CONN, NOW};
use zkit_proto::{PathWatchRequest, Request, SetDataRequest};

const NODES: usize = 10_000;

fn main() {
    let mut args = std::env::args().skip(1);
    let kind = args.next().unwrap_or_else(|| "set".into());
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100_000);
    let paths: Vec<String> = (0..NODES).map(|i| format!("/bench/node-{i:08}")).collect();
    let mut core = session_core("/bench");
    for (i, path) in paths.iter().enumerate() {
        core.handle(NOW, CONN, 2 + i as i32, create(path.clone()));
    }
    core.ready();
    let mut replies = 0usize;
    for i in 0..n {
        let path = paths[(i * 7919) % NODES].clone();
        let request = match kind.as_str() {
            "create" => create(format!("/bench/new-{i:010}")),
            "get" => Request::GetData(PathWatchRequest { path, watch: false }),
            "exists" => Request::Exists(PathWatchRequest { path, watch: false }),
            "set" => Request::SetData(SetDataRequest {
                path,
                data: Some(vec![b'y'; 100]),
                version: -1,
            }),
            other => {
                eprintln!("op_cost: unknown kind {other:?} (create, get, set, exists)");
                std::process::exit(2);
            }
        };
        core.handle(NOW, CONN, 7, request);
        replies += core.ready().messages.len();
    }
    println!("{kind}: {n} requests, {replies} replies");
}
