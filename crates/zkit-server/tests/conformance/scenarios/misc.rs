//! The less common ops: unknown op codes, reconfig and sasl on a standalone server without
//! them, whoAmI, auth packets, a standalone check (13), a client-sent deleteContainer (20),
//! ping with an ordinary xid, an empty setWatches — and the four-letter word `ruok`.

use std::time::Duration;

use anyhow::Result;
use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use zkit_proto::codec::{put_buffer, put_i32, put_i64, put_ustring};

use crate::harness::Ctx;
use crate::scenarios::nodes::PERSISTENT;
use crate::wire::{body, op};

pub async fn unusual_ops(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.call("whoAmI", op::WHO_AM_I, &[]).await?;
    // Apache answers a ping with xid -2 whatever xid it came with.
    c.wire.send_request_with_xid(7, op::PING, &[]).await?;
    c.observe("ping with xid 7", Duration::from_secs(5)).await?;
    c.call(
        "setWatches empty (ordinary xid)",
        op::SET_WATCHES,
        &body::set_watches(0, &[], &[], &[], None),
    )
    .await?;
    c.call(
        "check (op 13) alone, bad version",
        op::CHECK,
        &body::path_int(&ctx.p(""), 3),
    )
    .await?;
    c.call(
        "check (op 13) alone, missing",
        op::CHECK,
        &body::path_int(&ctx.p("/missing"), -1),
    )
    .await?;

    ctx.note("-- reconfig on a standalone server with reconfig disabled");
    let mut b = BytesMut::new();
    put_ustring(&mut b, "server.2=127.0.0.1:1234:1235");
    put_ustring(&mut b, "");
    put_ustring(&mut b, "");
    put_i64(&mut b, -1);
    c.call("reconfig", op::RECONFIG, &b).await?;

    ctx.note("-- deleteContainer (20) sent by a client");
    c.create_container(&ctx.p("/cont")).await?;
    c.create(&ctx.p("/plain"), "", PERSISTENT).await?;
    c.call(
        "deleteContainer(/R/cont)",
        op::DELETE_CONTAINER,
        &body::path(&ctx.p("/cont")),
    )
    .await?;
    c.call(
        "deleteContainer(/R/plain)",
        op::DELETE_CONTAINER,
        &body::path(&ctx.p("/plain")),
    )
    .await?;
    c.call(
        "deleteContainer(/R/missing)",
        op::DELETE_CONTAINER,
        &body::path(&ctx.p("/missing")),
    )
    .await?;
    c.exists(&ctx.p("/cont"), false).await?;
    c.exists(&ctx.p("/plain"), false).await?;

    ctx.note("-- auth packets (xid -4)");
    let mut auth = BytesMut::new();
    put_i32(&mut auth, 0);
    put_ustring(&mut auth, "digest");
    put_buffer(&mut auth, b"alice:secret");
    c.call_xid("auth digest alice", -4, 100, &auth).await?;
    c.call("whoAmI", op::WHO_AM_I, &[]).await?;
    c.close().await?;

    for (label, opcode) in [
        ("unknown op 10", 10),
        ("unknown op 999", 999),
        ("unknown op -5", -5),
        ("notification op 0", 0),
    ] {
        ctx.note(format!("-- {label}"));
        let mut c = ctx.client().await?;
        c.call(label, opcode, &body::path(&ctx.p(""))).await?;
        // Apache answers Unimplemented and then closes the connection from its selector
        // thread (UnimplementedRequestProcessor → sendCloseSession), so a request sent after
        // the reply races the close there: answered in some runs, not in others. What is
        // deterministic is that the connection ends, so that is what is recorded.
        let after = c.wire.recv(Duration::from_secs(5)).await?;
        ctx.note(format!(
            "after {label}: {}",
            crate::harness::incoming_label(&after)
        ));
    }

    ctx.note("-- sasl on a server without SASL");
    let mut c = ctx.client().await?;
    let mut sasl = BytesMut::new();
    put_buffer(&mut sasl, b"token");
    c.call("sasl", op::SASL, &sasl).await?;
    c.exists(&ctx.p(""), false).await?;
    c.close().await?;

    ctx.note("-- auth with an unknown scheme");
    let mut c = ctx.client().await?;
    let mut auth = BytesMut::new();
    put_i32(&mut auth, 0);
    put_ustring(&mut auth, "nosuchscheme");
    put_buffer(&mut auth, b"x");
    c.call_xid("auth nosuchscheme", -4, 100, &auth).await?;
    let after = c.wire.recv(Duration::from_secs(5)).await?;
    ctx.note(format!(
        "after failed auth: {}",
        crate::harness::incoming_label(&after)
    ));
    Ok(())
}

/// Apache 3.8 behaviours that look like accidents rather than protocol, kept in their own
/// scenario so that zkit's deliberate differences show up here and nowhere else, each asserted
/// for both servers ([`Ctx::known_difference`]):
/// - a successful standalone check (op 13, outside multi) gets no reply at all (a failing one
///   gets its error), so a client waiting for it would hang;
/// - createSession (-10) sent as a request after the handshake is answered with a
///   handshake-shaped frame (xid 0), then the connection is closed.
pub async fn apache_quirks(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.reply_timeout = Duration::from_secs(5);
    let mark = ctx.mark();
    c.call(
        "check (op 13) alone",
        op::CHECK,
        &body::path_int(&ctx.p(""), 0),
    )
    .await?;
    // Apache 3.8 logs the CheckVersionTxn (the zxid is consumed) but FinalRequestProcessor has
    // no `case check` outside a multi, so no reply is ever sent and the caller hangs: a server
    // bug. zkit answers err 0 with no body, as check does inside a multi.
    ctx.known_difference(
        mark,
        "successful standalone check",
        &["[s1] check (op 13) alone -> NO ANSWER"],
        &["[s1] check (op 13) alone -> ok zxid=z*"],
    )?;
    c.exists(&ctx.p(""), false).await?;
    c.close().await?;
    let mut c = ctx.client().await?;
    let mark = ctx.mark();
    c.call("createSession op -10", -10, &body::path(&ctx.p("")))
        .await?;
    // Apache hands a createSession op after the handshake to its connect path, which answers
    // with a 21-byte handshake-shaped frame (not a reply header for the request's xid) and
    // closes. zkit treats -10 like any op that is not a client request: Unimplemented for the
    // request's xid, then the close (UnimplementedRequestProcessor), which clients understand.
    ctx.known_difference(
        mark,
        "createSession op after the handshake",
        &[
            "[s2] createSession op -10: UNEXPECTED reply xid 0 (expected 1) err=not-an-error-code body=21 bytes",
            "[s2] createSession op -10 -> CLOSED",
        ],
        &["[s2] createSession op -10 -> Unimplemented"],
    )?;
    c.exists(&ctx.p(""), false).await?;
    c.close().await
}

/// Four-letter words on a fresh connection (Apache's whitelist is `*` in scripts/apache-zk).
/// Values differ between servers (versions, counters, paths); what is compared is the shape:
/// `ruok` exactly, the key sets of `srvr`/`stat`, the presence of the core `mntr` and `conf`
/// keys with the values both servers are configured alike for, and `envi`'s header.
pub async fn four_letter_words(ctx: Ctx) -> Result<()> {
    ctx.note(format!("ruok -> {:?}", four_letter(&ctx, "ruok").await?));

    let srvr = four_letter(&ctx, "srvr").await?;
    ctx.note(format!("srvr keys -> {:?}", colon_keys(&srvr)));
    let mode = srvr
        .lines()
        .find(|l| l.starts_with("Mode:"))
        .unwrap_or("<none>");
    ctx.note(format!("srvr mode -> {mode}"));
    let zxid_hex = srvr
        .lines()
        .find_map(|l| l.strip_prefix("Zxid: 0x"))
        .map(|h| i64::from_str_radix(h.trim(), 16).is_ok());
    ctx.note(format!("srvr zxid is hex -> {zxid_hex:?}"));

    let stat = four_letter(&ctx, "stat").await?;
    ctx.note(format!("stat keys -> {:?}", colon_keys(&stat)));
    // The client list follows "Clients:", one indented line per connection (this one at least).
    let listed = stat.lines().any(|l| l.starts_with(" /127.0.0.1:"));
    ctx.note(format!("stat lists this client -> {listed}"));

    let mntr = four_letter(&ctx, "mntr").await?;
    let all_tab_separated = mntr.lines().all(|l| l.split_once('\t').is_some());
    ctx.note(format!(
        "mntr lines are key<TAB>value -> {all_tab_separated}"
    ));
    for key in [
        "zk_version",
        "zk_server_state",
        "zk_avg_latency",
        "zk_max_latency",
        "zk_min_latency",
        "zk_packets_received",
        "zk_packets_sent",
        "zk_num_alive_connections",
        "zk_outstanding_requests",
        "zk_znode_count",
        "zk_watch_count",
        "zk_ephemerals_count",
        "zk_approximate_data_size",
    ] {
        let value = mntr
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix('\t')));
        let shown = match (key, value) {
            ("zk_server_state", Some(v)) => v.to_owned(),
            (_, Some(_)) => "present".to_owned(),
            (_, None) => "MISSING".to_owned(),
        };
        ctx.note(format!("mntr {key} -> {shown}"));
    }

    let conf = four_letter(&ctx, "conf").await?;
    for key in [
        "clientPort",
        "dataDir",
        "tickTime",
        "maxClientCnxns",
        "minSessionTimeout",
        "maxSessionTimeout",
        "serverId",
    ] {
        let value = conf
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix('=')));
        let shown = match (key, value) {
            ("tickTime" | "minSessionTimeout" | "maxSessionTimeout", Some(v)) => v.to_owned(),
            (_, Some(_)) => "present".to_owned(),
            (_, None) => "MISSING".to_owned(),
        };
        ctx.note(format!("conf {key} -> {shown}"));
    }

    let envi = four_letter(&ctx, "envi").await?;
    ctx.note(format!("envi first line -> {:?}", envi.lines().next()));
    let has_version = envi.lines().any(|l| l.starts_with("zookeeper.version="));
    ctx.note(format!("envi has zookeeper.version -> {has_version}"));

    let isro = four_letter(&ctx, "isro").await?;
    ctx.note(format!("isro -> {isro:?}"));
    Ok(())
}

/// The `Key:` names of a srvr/stat answer, skipping the indented client lines.
fn colon_keys(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with(' '))
        .filter_map(|l| l.split_once(':').map(|(k, _)| k.to_owned()))
        .collect()
}

async fn four_letter(ctx: &Ctx, word: &str) -> Result<String> {
    let mut s = tokio::net::TcpStream::connect(ctx.target.addr).await?;
    s.write_all(word.as_bytes()).await?;
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut out)).await??;
    Ok(String::from_utf8_lossy(&out).into_owned())
}
