//! Bad input: malformed frames, truncated records, bad lengths, invalid UTF-8, requests before
//! the handshake and odd handshakes. What is compared is the *behaviour*: an error code (and
//! whether the connection is still usable afterwards) or a closed connection. Plus a
//! robustness test: garbage-sending clients beside a healthy one, against zkit.

use std::time::Duration;

use anyhow::Result;
use bytes::{BufMut, BytesMut};
use zkit_proto::codec::{put_bool, put_buffer, put_i32, put_i64, put_ustring};

use crate::harness::{incoming_label, Ctx};
use crate::scenarios::nodes::PERSISTENT;
use crate::wire::{body, op, Incoming, WireClient};

/// How long to wait for a reaction to bad input before calling the server silent.
const REACTION: Duration = Duration::from_secs(10);

/// Sends `bytes` as they are on a fresh session, logs the reaction and whether the connection
/// still answers a normal request.
///
/// A write that fails is the server closing the connection, recorded as a read that sees the
/// end would be: whether a server's close reaches the client while it is still writing (a
/// frame over jute.maxbuffer, refused once its length is read) or after depends on socket
/// buffers and scheduling, not on the server.
async fn case(ctx: &Ctx, label: &str, bytes: &[u8]) -> Result<()> {
    ctx.note(format!("-- {label}"));
    let mut c = ctx.client().await?;
    if c.wire.send_bytes(bytes).await.is_err() {
        c.log_incoming(label, &Incoming::Closed);
        return Ok(());
    }
    if c.observe(label, REACTION).await? {
        c.exists(&ctx.p(""), false).await?;
        c.close().await?;
    } else {
        c.disconnect().await;
    }
    Ok(())
}

/// An unknown op: Apache answers Unimplemented, then closes the connection from its selector
/// thread, which races any request sent after the reply (answered in some runs, not in
/// others); so what is recorded after the reply is that the connection ends.
async fn unknown_op_case(ctx: &Ctx, label: &str, bytes: &[u8]) -> Result<()> {
    ctx.note(format!("-- {label}"));
    let mut c = ctx.client().await?;
    if c.wire.send_bytes(bytes).await.is_err() {
        ctx.note("send failed: CLOSED");
        return Ok(());
    }
    if c.observe(label, REACTION).await? {
        let after = c.wire.recv(REACTION).await?;
        ctx.note(format!(
            "after {label}: {}",
            crate::harness::incoming_label(&after)
        ));
    } else {
        c.disconnect().await;
    }
    Ok(())
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.put_i32(payload.len() as i32);
    b.put_slice(payload);
    b.to_vec()
}

fn request(xid: i32, opcode: i32, body: &[u8]) -> Vec<u8> {
    let mut b = BytesMut::new();
    put_i32(&mut b, xid);
    put_i32(&mut b, opcode);
    b.put_slice(body);
    frame(&b)
}

pub async fn malformed_frames(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.close().await?;
    case(&ctx, "negative length -1", &(-1i32).to_be_bytes()).await?;
    case(&ctx, "negative length -1000", &(-1000i32).to_be_bytes()).await?;
    case(&ctx, "length i32::MAX", &i32::MAX.to_be_bytes()).await?;
    case(
        &ctx,
        "length 2,000,000 (over jute.maxbuffer)",
        &2_000_000i32.to_be_bytes(),
    )
    .await?;
    case(&ctx, "zero-length frame", &frame(&[])).await?;
    case(&ctx, "3-byte frame", &frame(&[0, 0, 1])).await?;
    case(&ctx, "4-byte frame (xid only)", &frame(&[0, 0, 0, 9])).await?;
    case(&ctx, "header only, getData", &request(9, op::GET_DATA, &[])).await?;
    case(&ctx, "header only, create", &request(9, op::CREATE, &[])).await?;
    unknown_op_case(
        &ctx,
        "unknown op 10 with body",
        &request(9, 10, &body::path(&ctx.p(""))),
    )
    .await?;
    unknown_op_case(&ctx, "unknown op 12345, no body", &request(9, 12345, &[])).await?;
    frame_sizes(&ctx).await?;
    case(
        &ctx,
        "two requests in one write",
        &[
            request(9, op::EXISTS, &body::path_watch(&ctx.p(""), false)),
            request(10, op::GET_DATA, &body::path_watch(&ctx.p(""), false)),
        ]
        .concat(),
    )
    .await?;
    Ok(())
}

/// Frames around jute.maxbuffer (1,048,575): data just under it is stored and read back;
/// a frame over it closes the connection (or is refused) rather than being buffered.
async fn frame_sizes(ctx: &Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    let big = vec![b'z'; 1_000_000];
    c.call(
        "create(/R/big, 1,000,000 bytes)",
        op::CREATE,
        &body::create(&ctx.p("/big"), &big, &crate::wire::open_acl(), 0, None),
    )
    .await?;
    c.get_data(&ctx.p("/big"), false).await?;
    c.close().await?;
    for (label, len) in [
        (
            "setData frame of 1,048,575 bytes (the limit)",
            1_048_575usize,
        ),
        ("setData frame of 1,048,576 bytes (limit + 1)", 1_048_576),
        ("setData frame of 1,050,000 bytes", 1_050_000),
        ("setData frame of 1,100,000 bytes", 1_100_000),
    ] {
        // Frame payload = 8 (header) + 4 + path + 4 + data + 4 (version).
        let path = ctx.p("/big");
        let data_len = len - 8 - 4 - path.len() - 4 - 4;
        let b = body::set_data(&path, &vec![b'y'; data_len], -1);
        case(ctx, label, &request(9, op::SET_DATA, &b)).await?;
    }
    let mut c = ctx.client().await?;
    c.exists(&ctx.p("/big"), false).await?;
    c.close().await
}

pub async fn truncated_records(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.close().await?;
    let root = ctx.p("");
    let create = body::create(&ctx.p("/x"), b"data", &crate::wire::open_acl(), 0, None);
    let path_watch = body::path_watch(&root, false);
    let set_data = body::set_data(&root, b"v", -1);
    let delete = body::path_int(&ctx.p("/x"), -1);
    // (label, op, body, bytes cut off its end)
    let cases: [(&str, i32, &[u8], usize); 7] = [
        (
            "create cut inside the path",
            op::CREATE,
            &create,
            create.len() - 6,
        ),
        ("create without flags", op::CREATE, &create, 4),
        ("create2 without flags", op::CREATE2, &create, 4),
        (
            "getData without the watch flag",
            op::GET_DATA,
            &path_watch,
            1,
        ),
        ("exists without the watch flag", op::EXISTS, &path_watch, 1),
        ("setData without the version", op::SET_DATA, &set_data, 4),
        ("delete without the version", op::DELETE, &delete, 4),
    ];
    for (label, opcode, full, cut) in cases {
        case(&ctx, label, &request(9, opcode, &full[..full.len() - cut])).await?;
    }

    let mut b = BytesMut::new();
    put_i32(&mut b, 100);
    b.put_slice(b"/abc");
    case(
        &ctx,
        "string length beyond the frame",
        &request(9, op::EXISTS, &b),
    )
    .await?;
    let mut b = BytesMut::new();
    put_i32(&mut b, -5);
    put_bool(&mut b, false);
    case(&ctx, "string length -5", &request(9, op::EXISTS, &b)).await?;
    let mut b = BytesMut::new();
    put_i32(&mut b, -1);
    put_bool(&mut b, false);
    case(&ctx, "null path in exists", &request(9, op::EXISTS, &b)).await?;
    // Where Apache dereferences the path before validating it, a null path is a
    // NullPointerException → MarshallingError (for a write, logged as an error txn);
    // setData/setACL/check validate first → BadArguments.
    for (label, opcode, rest) in [
        ("null path in getData", op::GET_DATA, &[0u8][..]),
        ("null path in getACL", op::GET_ACL, &[][..]),
        ("null path in delete", op::DELETE, &[0xff; 4][..]),
        // data null, no ACL entries, flags 0.
        (
            "null path in create",
            op::CREATE,
            &[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0][..],
        ),
        ("null path in setData", op::SET_DATA, &[0xff; 8][..]),
        (
            "null path in checkWatches",
            op::CHECK_WATCHES,
            &[0, 0, 0, 2][..],
        ),
    ] {
        let mut b = BytesMut::new();
        put_i32(&mut b, -1);
        b.put_slice(rest);
        case(&ctx, label, &request(9, opcode, &b)).await?;
    }
    let mut b = BytesMut::new();
    put_ustring(&mut b, &ctx.p("/y"));
    put_i32(&mut b, -1); // null data
    put_i32(&mut b, -1); // null ACL vector
    put_i32(&mut b, 0);
    case(
        &ctx,
        "create with a null ACL vector",
        &request(9, op::CREATE, &b),
    )
    .await?;
    let mut b = BytesMut::new();
    put_ustring(&mut b, &ctx.p("/z"));
    put_buffer(&mut b, b"");
    put_i32(&mut b, 1_000_000); // ACL count with no entries
    case(
        &ctx,
        "create with an ACL count of 1,000,000",
        &request(9, op::CREATE, &b),
    )
    .await?;
    let mut b = BytesMut::new();
    put_i32(&mut b, 2);
    b.put_slice(&[b'/', 0xff]);
    put_bool(&mut b, false);
    case(&ctx, "path that is not UTF-8", &request(9, op::EXISTS, &b)).await?;
    let mut b = body::path_watch(&root, false);
    b.put_slice(b"trailing garbage");
    case(
        &ctx,
        "trailing bytes after exists",
        &request(9, op::EXISTS, &b),
    )
    .await?;

    let m = body::multi(&[body::SubOp::Check {
        path: &root,
        version: -1,
    }]);
    case(
        &ctx,
        "multi without terminator",
        &request(9, op::MULTI, &m[..m.len() - 9]),
    )
    .await?;
    let mut b = BytesMut::new();
    put_i32(&mut b, 99);
    put_bool(&mut b, false);
    put_i32(&mut b, -1);
    b.put_slice(&body::path(&root));
    put_i32(&mut b, -1);
    put_bool(&mut b, true);
    put_i32(&mut b, -1);
    case(
        &ctx,
        "multi with sub-op type 99",
        &request(9, op::MULTI, &b),
    )
    .await?;
    let mut b = BytesMut::new();
    put_i64(&mut b, 0);
    put_i32(&mut b, 5); // data watches: 5 claimed, none present
    case(
        &ctx,
        "setWatches with a short vector",
        &request(-8, op::SET_WATCHES, &b),
    )
    .await?;

    // Apache's PrepRequestProcessor gives a write its txn header (and zxid) before reading
    // the body, so an undecodable write is logged as an error txn: its reply carries a new
    // zxid, between the writes around it. An undecodable read consumes nothing.
    ctx.note("-- undecodable writes consume a zxid");
    let mut c = ctx.client().await?;
    c.create(&ctx.p("/before"), "", PERSISTENT).await?;
    let create = body::create(&ctx.p("/x"), b"data", &crate::wire::open_acl(), 0, None);
    c.call("create cut inside the path", op::CREATE, &create[..6])
        .await?;
    let delete = body::path_int(&ctx.p("/before"), -1);
    c.call(
        "delete without the version",
        op::DELETE,
        &delete[..delete.len() - 4],
    )
    .await?;
    let mut null_path = BytesMut::new();
    put_i32(&mut null_path, -1);
    put_i32(&mut null_path, -1);
    c.call("delete with a null path", op::DELETE, &null_path)
        .await?;
    c.call(
        "exists with a null path",
        op::EXISTS,
        &[0xff, 0xff, 0xff, 0xff, 0],
    )
    .await?;
    c.create(&ctx.p("/after"), "", PERSISTENT).await?;
    c.close().await
}

/// Sends `bytes` as the very first thing on a new connection and logs the reaction.
async fn pre_handshake(ctx: &Ctx, label: &str, bytes: &[u8]) -> Result<()> {
    let mut w = WireClient::connect_raw(ctx.target.addr).await?;
    let outcome = if w.send_bytes(bytes).await.is_err() {
        "send failed: CLOSED".to_owned()
    } else {
        match w.read_frame(REACTION).await? {
            Ok(f) => format!("a {}-byte frame", f.len()),
            Err(other) => incoming_label(&other),
        }
    };
    ctx.note(format!("before handshake: {label} -> {outcome}"));
    w.shutdown().await;
    Ok(())
}

pub async fn requests_before_handshake(ctx: Ctx) -> Result<()> {
    pre_handshake(
        &ctx,
        "getData request",
        &request(1, op::GET_DATA, &body::path_watch("/", false)),
    )
    .await?;
    pre_handshake(&ctx, "ping", &request(-2, op::PING, &[])).await?;
    pre_handshake(&ctx, "empty frame", &frame(&[])).await?;
    pre_handshake(&ctx, "10-byte frame", &frame(&[0; 10])).await?;
    pre_handshake(&ctx, "length -1", &(-1i32).to_be_bytes()).await?;
    pre_handshake(&ctx, "length 2,000,000", &2_000_000i32.to_be_bytes()).await?;
    pre_handshake(&ctx, "unknown four-letter word 'xxxx'", b"xxxx").await?;
    Ok(())
}

fn connect_request(
    proto: i32,
    last_zxid: i64,
    timeout: i32,
    session: i64,
    passwd: &[u8],
    read_only: Option<bool>,
) -> Vec<u8> {
    let mut b = BytesMut::new();
    put_i32(&mut b, proto);
    put_i64(&mut b, last_zxid);
    put_i32(&mut b, timeout);
    put_i64(&mut b, session);
    put_buffer(&mut b, passwd);
    if let Some(ro) = read_only {
        put_bool(&mut b, ro);
    }
    frame(&b)
}

async fn handshake(ctx: &Ctx, label: &str, bytes: &[u8]) -> Result<()> {
    let mut w = WireClient::connect_raw(ctx.target.addr).await?;
    w.send_bytes(bytes).await?;
    let text = match w.read_connect_response().await? {
        Ok(c) => {
            let text = format!(
                "proto={} timeout={} session={} passwd_len={} readOnly={:?}",
                c.protocol_version,
                c.timeout,
                if c.session_id == 0 { "0" } else { "new" },
                c.passwd.len(),
                c.read_only
            );
            if c.timeout > 0 {
                // Usable? One request, then close the session so it does not linger.
                let xid = w
                    .send_request(op::EXISTS, &body::path_watch("/", false))
                    .await?;
                let r = w.recv(REACTION).await?;
                let usable = matches!(r, Incoming::Packet { xid: x, err: 0, .. } if x == xid);
                let _ = w.send_request(op::CLOSE_SESSION, &[]).await;
                let _ = w.recv(REACTION).await;
                format!("{text} usable={usable}")
            } else {
                let after = w.recv(REACTION).await?;
                format!("{text}, then {}", incoming_label(&after))
            }
        }
        Err(other) => incoming_label(&other),
    };
    ctx.note(format!("handshake {label} -> {text}"));
    w.shutdown().await;
    Ok(())
}

pub async fn invalid_handshakes(ctx: Ctx) -> Result<()> {
    let z = [0u8; 16];
    handshake(
        &ctx,
        "normal",
        &connect_request(0, 0, 30_000, 0, &z, Some(false)),
    )
    .await?;
    handshake(
        &ctx,
        "old client without readOnly",
        &connect_request(0, 0, 30_000, 0, &z, None),
    )
    .await?;
    handshake(
        &ctx,
        "readOnly=true",
        &connect_request(0, 0, 30_000, 0, &z, Some(true)),
    )
    .await?;
    handshake(
        &ctx,
        "timeout 1 ms (clamped up)",
        &connect_request(0, 0, 1, 0, &z, Some(false)),
    )
    .await?;
    handshake(
        &ctx,
        "timeout 10^9 ms (clamped down)",
        &connect_request(0, 0, 1_000_000_000, 0, &z, Some(false)),
    )
    .await?;
    handshake(
        &ctx,
        "timeout -5",
        &connect_request(0, 0, -5, 0, &z, Some(false)),
    )
    .await?;
    handshake(
        &ctx,
        "protocolVersion 7",
        &connect_request(7, 0, 30_000, 0, &z, Some(false)),
    )
    .await?;
    handshake(
        &ctx,
        "3-byte password",
        &connect_request(0, 0, 30_000, 0, &[1, 2, 3], Some(false)),
    )
    .await?;
    handshake(
        &ctx,
        "lastZxidSeen far ahead",
        &connect_request(0, 1 << 60, 30_000, 0, &z, Some(false)),
    )
    .await?;
    handshake(
        &ctx,
        "unknown session",
        &connect_request(0, 0, 30_000, 0x1234_5678, &z, Some(false)),
    )
    .await?;
    let mut trailing = connect_request(0, 0, 30_000, 0, &z, Some(false));
    trailing.extend_from_slice(&[]);
    let payload_len = trailing.len() - 4 + 5;
    let mut with_extra = (payload_len as i32).to_be_bytes().to_vec();
    with_extra.extend_from_slice(&trailing[4..]);
    with_extra.extend_from_slice(&[9, 9, 9, 9, 9]);
    handshake(&ctx, "5 trailing bytes", &with_extra).await?;
    Ok(())
}

/// Garbage-sending connections beside a healthy session: the healthy one keeps working, and
/// the server still accepts new sessions afterwards. Bounded: a fixed number of garbage
/// connections and requests, every read with a timeout.
pub async fn garbage_beside_healthy() {
    let server = crate::harness::start_zkit().await.expect("start zkit");
    let addr = server.addr();
    let garbage = tokio::spawn(async move {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for i in 0..40u32 {
            let Ok(mut w) = WireClient::connect_raw(addr).await else {
                continue;
            };
            // Half the connections garble after a valid handshake, half from the first byte.
            if i % 2 == 0 {
                let mut b = BytesMut::new();
                put_i32(&mut b, 0);
                put_i64(&mut b, 0);
                put_i32(&mut b, 30_000);
                put_i64(&mut b, 0);
                put_buffer(&mut b, &[0; 16]);
                put_bool(&mut b, false);
                let _ = w.send_frame(&b).await;
                let _ = w.recv(Duration::from_secs(2)).await;
            }
            let len = (next() % 300) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if i % 3 == 0 && bytes.len() >= 12 {
                // A plausible frame header with a random op code and a random body.
                let body_len = (bytes.len() - 4) as i32;
                bytes[..4].copy_from_slice(&body_len.to_be_bytes());
                bytes[8..12].copy_from_slice(&((next() % 110) as i32 - 11).to_be_bytes());
            }
            let _ = w.send_bytes(&bytes).await;
            let _ = w.recv(Duration::from_millis(200)).await;
            w.shutdown().await;
        }
    });

    let (mut healthy, _) = WireClient::new_session(addr, 30_000)
        .await
        .expect("healthy session");
    let root = format!("/garbage-neighbour-{}", std::process::id());
    let mut ok = 0;
    for i in 0..60 {
        let path = if i == 0 {
            root.clone()
        } else {
            format!("{root}/n{i}")
        };
        let body = body::create(&path, b"x", &crate::wire::open_acl(), 0, None);
        let xid = healthy
            .send_request(op::CREATE, &body)
            .await
            .expect("send create");
        match healthy.recv(Duration::from_secs(10)).await.expect("recv") {
            Incoming::Packet { xid: x, err: 0, .. } if x == xid => ok += 1,
            other => panic!("healthy create {i} failed beside garbage: {other:?}"),
        }
    }
    garbage.await.expect("garbage task");
    assert_eq!(ok, 60);
    let xid = healthy
        .send_request(op::GET_CHILDREN, &body::path_watch(&root, false))
        .await
        .expect("send");
    match healthy.recv(Duration::from_secs(10)).await.expect("recv") {
        Incoming::Packet { xid: x, err: 0, .. } if x == xid => {}
        other => panic!("getChildren after garbage: {other:?}"),
    }
    // A brand-new session still works.
    let (mut fresh, connected) = WireClient::new_session(addr, 30_000)
        .await
        .expect("fresh session");
    assert!(connected.timeout > 0, "fresh session refused");
    let xid = fresh
        .send_request(op::EXISTS, &body::path_watch(&root, false))
        .await
        .expect("send");
    assert!(matches!(
        fresh.recv(Duration::from_secs(10)).await.expect("recv"),
        Incoming::Packet { xid: x, err: 0, .. } if x == xid
    ));
    server.stop().await;
}
