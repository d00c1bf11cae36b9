//! Data-tree micro-benchmarks: creating 10,000 nodes (through the raw tree and through the full
//! request → txn → apply path of [`Core`]), the getData hot path (lookup, stat, reply) and the
//! setData one (path check, lookup, version check, txn, the node's record rebuilt, reply).
//!
//! Run with `cargo bench -p zkit-core --bench data_tree`. Measures only; nothing here asserts a
//! time.
// criterion_group!/criterion_main! generate undocumented public items.
#![allow(missing_docs)]

#[path = "../examples/common/mod.rs"]
mod common;

use common::{create, session_core, CONN, NOW};
use criterion::measurement::WallTime;
use criterion::{
    black_box, criterion_group, criterion_main, BatchSize, BenchmarkGroup, Criterion, Throughput,
};
use zkit_core::tree::{open_acl, DataTree};
use zkit_core::Core;
use zkit_proto::{PathWatchRequest, Request, SetDataRequest};

const NODES: usize = 10_000;
fn paths() -> Vec<String> {
    (0..NODES).map(|i| format!("/bench/node-{i:08}")).collect()
}

/// A core with one connected session and `/bench`.
fn connected_core() -> Core {
    session_core("/bench")
}

fn create_10k(c: &mut Criterion) {
    let paths = paths();
    let mut group = c.benchmark_group("create 10k nodes (100 B)");
    group.throughput(Throughput::Elements(NODES as u64));
    group.sample_size(20);
    group.bench_function("DataTree::create", |b| {
        b.iter_batched(
            || {
                let mut tree = DataTree::new(false);
                tree.create("/bench", None, &open_acl(), 0, 0, 1, NOW)
                    .expect("fresh tree");
                tree
            },
            |mut tree| {
                let (value, acl) = (vec![b'x'; 100], open_acl());
                for (i, path) in paths.iter().enumerate() {
                    let r = tree.create(path, Some(&value), &acl, 0, 1, 2 + i as i64, NOW);
                    black_box(r).expect("unique paths");
                }
                tree
            },
            BatchSize::LargeInput,
        )
    });
    group.bench_function(
        "Core::handle + ready (request → txn → apply → reply)",
        |b| {
            b.iter_batched(
                connected_core,
                |mut core| {
                    for (i, path) in paths.iter().enumerate() {
                        core.handle(NOW, CONN, 2 + i as i32, create(path.clone()));
                        black_box(core.ready());
                    }
                    core
                },
                BatchSize::LargeInput,
            )
        },
    );
    group.finish();
}

/// A core holding `/bench` and the nodes of [`paths`].
fn populated_core(paths: &[String]) -> Core {
    let mut core = connected_core();
    for (i, path) in paths.iter().enumerate() {
        core.handle(NOW, CONN, 2 + i as i32, create(path.clone()));
    }
    core.ready();
    core
}

fn get_data(c: &mut Criterion) {
    let paths = paths();
    let mut core = populated_core(&paths);
    let mut group = c.benchmark_group("getData hot path (10k-node tree)");
    group.throughput(Throughput::Elements(1));
    let mut i = 0;
    group.bench_function("DataTree::get + stat", |b| {
        b.iter(|| {
            i = (i + 7919) % NODES;
            let node = core.tree().get(black_box(&paths[i])).expect("created");
            black_box(node.stat(false))
        })
    });
    handle_each(
        &mut group,
        "Core::handle(GetData) + ready",
        &mut core,
        &paths,
        |path| Request::GetData(PathWatchRequest { path, watch: false }),
    );
    group.finish();
}

fn set_data(c: &mut Criterion) {
    let paths = paths();
    let mut core = populated_core(&paths);
    let mut group = c.benchmark_group("setData hot path (10k-node tree)");
    group.throughput(Throughput::Elements(1));
    handle_each(
        &mut group,
        "Core::handle(SetData) + ready",
        &mut core,
        &paths,
        |path| {
            Request::SetData(SetDataRequest {
                path,
                data: Some(vec![b'y'; 100]),
                version: -1,
            })
        },
    );
    group.finish();
}

/// Benchmarks `core.handle(request(path)) + ready()`, one request per iteration, over `paths`
/// in a stride that jumps around the tree.
fn handle_each(
    group: &mut BenchmarkGroup<'_, WallTime>,
    name: &str,
    core: &mut Core,
    paths: &[String],
    request: impl Fn(String) -> Request,
) {
    let mut i = 0;
    group.bench_function(name, |b| {
        b.iter(|| {
            i = (i + 7919) % NODES;
            core.handle(NOW, CONN, 7, request(paths[i].clone()));
            black_box(core.ready())
        })
    });
}

criterion_group!(benches, create_10k, get_data, set_data);
criterion_main!(benches);
