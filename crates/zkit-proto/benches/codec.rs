//! Codec micro-benchmarks: the encodes and decodes on the server's per-request path — a
//! getData reply (the hot read), a create request (the hot write) and a five-op multi.
//!
//! Run with `cargo bench -p zkit-proto --bench codec`. Measures only; nothing here asserts a time.
// criterion_group!/criterion_main! generate undocumented public items.
#![allow(missing_docs)]

use bytes::BytesMut;
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use zkit_proto::op::{create_mode, perms};
use zkit_proto::{
    Acl, CheckVersionRequest, CreateRequest, DeleteRequest, Id, MultiOp, OpCode, ReplyHeader,
    Request, RequestHeader, Response, SetDataRequest, Stat,
};

fn open_acl() -> Vec<Acl> {
    vec![Acl {
        perms: perms::ALL,
        id: Id {
            scheme: "world".into(),
            id: "anyone".into(),
        },
    }]
}

fn stat() -> Stat {
    Stat {
        czxid: 0x1_0000_0042,
        mzxid: 0x1_0000_0042,
        ctime: 1_700_000_000_000,
        mtime: 1_700_000_000_000,
        version: 3,
        data_length: 100,
        pzxid: 0x1_0000_0042,
        ..Stat::default()
    }
}

fn create_request(n: usize) -> CreateRequest {
    CreateRequest {
        path: format!("/zkit-bench/run-1/node-{n:08}"),
        data: Some(vec![b'x'; 100]),
        acl: open_acl(),
        flags: create_mode::PERSISTENT,
    }
}

fn get_data_reply(c: &mut Criterion) {
    let header = ReplyHeader {
        xid: 42,
        zxid: 0x1_0000_0042,
        err: 0,
    };
    let body = Response::GetData {
        data: Some(vec![b'x'; 100]),
        stat: stat(),
    };
    let mut group = c.benchmark_group("getData reply (100 B)");
    group.throughput(Throughput::Elements(1));
    let mut buf = BytesMut::with_capacity(64 * 1024);
    group.bench_function("encode framed", |b| {
        b.iter(|| {
            buf.clear();
            zkit_proto::response::encode_reply(&mut buf, black_box(&header), black_box(&body))
        })
    });
    let mut encoded = BytesMut::new();
    body.encode(&mut encoded);
    group.bench_function("decode body", |b| {
        b.iter(|| Response::decode(OpCode::GetData, black_box(&encoded)).map(drop))
    });
    group.finish();
}

/// Benchmarks encoding `request` (header and body) and decoding its body, as group `name`.
fn request_group(c: &mut Criterion, name: &str, request: &Request, op: OpCode) {
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(1));
    let mut buf = BytesMut::with_capacity(64 * 1024);
    group.bench_function("encode", |b| {
        b.iter(|| {
            buf.clear();
            black_box(request).encode(42, &mut buf);
        })
    });
    let header = RequestHeader {
        xid: 42,
        op: op.code(),
    };
    let mut body = BytesMut::new();
    request.encode_body(&mut body);
    group.bench_function("decode", |b| {
        b.iter(|| Request::decode(black_box(&header), black_box(&body)).map(drop))
    });
    group.finish();
}

fn create(c: &mut Criterion) {
    let request = Request::Create2(create_request(7));
    request_group(c, "create request (100 B)", &request, OpCode::Create2);
}

fn multi(c: &mut Criterion) {
    let request = Request::Multi(vec![
        MultiOp::Check(CheckVersionRequest {
            path: "/zkit-bench/lock".into(),
            version: 4,
        }),
        MultiOp::Create(create_request(1)),
        MultiOp::Create(create_request(2)),
        MultiOp::SetData(SetDataRequest {
            path: "/zkit-bench/counter".into(),
            data: Some(vec![b'7'; 8]),
            version: -1,
        }),
        MultiOp::Delete(DeleteRequest {
            path: "/zkit-bench/old".into(),
            version: -1,
        }),
    ]);
    request_group(c, "multi request (5 ops)", &request, OpCode::Multi);
}

criterion_group!(benches, get_data_reply, create, multi);
criterion_main!(benches);
