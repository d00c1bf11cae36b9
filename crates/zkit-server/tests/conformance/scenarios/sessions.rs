//! Sessions: ephemerals deleted by closeSession (with their watches), reconnect with the right
//! and a wrong password, unknown sessions, lastZxidSeen from the future, and expiry of a session
//! whose connection is gone (smallest timeout: 2 × tickTime, 1000 ms with scripts/apache-zk).

use std::time::Duration;

use anyhow::Result;

use crate::harness::Ctx;
use crate::scenarios::nodes::{EPHEMERAL, EPHEMERAL_SEQUENTIAL, PERSISTENT};
use crate::wire::{body, op};

pub async fn ephemerals_and_close_session(ctx: Ctx) -> Result<()> {
    let mut w = ctx.client().await?;
    w.create(&ctx.p(""), "", PERSISTENT).await?;
    let mut c = ctx.client().await?;
    c.create2(&ctx.p("/e1"), "", EPHEMERAL).await?;
    c.create2(&ctx.p("/e2-"), "", EPHEMERAL_SEQUENTIAL).await?;
    c.call("whoAmI", op::WHO_AM_I, &[]).await?;
    w.exists(&ctx.p("/e1"), true).await?;
    w.get_data(&ctx.p("/e2-0000000001"), true).await?;
    w.get_children(&ctx.p(""), true).await?;
    let (sid, passwd, name) = (c.session_id, c.passwd.clone(), c.name.clone());
    c.close().await?;
    // Three events: NodeDeleted e1, NodeDeleted e2, NodeChildrenChanged; the order of the
    // deletions inside one closeSession is not specified (Apache: hash order).
    w.collect_unordered_events(3, Duration::from_secs(10))
        .await?;
    w.barrier().await?;
    w.get_children2(&ctx.p(""), false).await?;
    ctx.note("-- the closed session cannot be resumed");
    ctx.resume(&name, sid, &passwd, 0, 30_000).await?;
    w.close().await
}

pub async fn reconnect_password(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.create(&ctx.p("/e"), "", EPHEMERAL).await?;
    c.get_data(&ctx.p("/e"), true).await?;
    let (sid, passwd, name, last) = (c.session_id, c.passwd.clone(), c.name.clone(), c.last_zxid);
    c.disconnect().await;
    ctx.note("-- wrong password");
    let mut wrong = passwd.clone();
    wrong[0] ^= 0xff;
    ctx.resume(&name, sid, &wrong, last, 30_000).await?;
    ctx.note("-- short password");
    ctx.resume(&name, sid, &passwd[..8], last, 30_000).await?;
    ctx.note("-- unknown session id");
    ctx.resume("unknown", sid ^ 0x5555, &passwd, last, 30_000)
        .await?;
    ctx.note("-- lastZxidSeen ahead of the server");
    ctx.resume(&name, sid, &passwd, last + 1_000_000, 30_000)
        .await?;
    ctx.note("-- right password: same session, ephemeral kept, old watches gone");
    let Some(mut c) = ctx.resume(&name, sid, &passwd, last, 30_000).await? else {
        anyhow::bail!("reconnect with the right password refused");
    };
    c.exists(&ctx.p("/e"), false).await?;
    c.call("getEphemerals", op::GET_EPHEMERALS, &body::path(&ctx.p("")))
        .await?;
    let mut m = ctx.client().await?;
    m.set_data(&ctx.p("/e"), "x", -1).await?;
    c.barrier().await?;
    ctx.note("-- a second connection to the same session takes it over");
    let Some(mut c2) = ctx.resume(&name, sid, &passwd, c.last_zxid, 30_000).await? else {
        anyhow::bail!("second reconnect refused");
    };
    c2.exists(&ctx.p("/e"), false).await?;
    let after = c.wire.recv(Duration::from_secs(5)).await?;
    ctx.note(format!(
        "first connection after takeover: {}",
        crate::harness::incoming_label(&after)
    ));
    m.close().await?;
    c2.close().await
}

pub async fn session_expiry(ctx: Ctx) -> Result<()> {
    let mut w = ctx.client().await?;
    w.create(&ctx.p(""), "", PERSISTENT).await?;
    let mut c = ctx.client_with_timeout(1).await?;
    c.create(&ctx.p("/e"), "", EPHEMERAL).await?;
    c.create(&ctx.p("/f"), "", EPHEMERAL).await?;
    w.exists(&ctx.p("/e"), true).await?;
    w.get_children(&ctx.p(""), true).await?;
    let (sid, passwd, name, last) = (c.session_id, c.passwd.clone(), c.name.clone(), c.last_zxid);
    ctx.note("-- the connection is cut; nothing pings for the session any more");
    c.disconnect().await;
    // Expiry runs on the server's clock: wait (bounded) for the events rather than sleeping.
    w.collect_unordered_events(2, Duration::from_secs(20))
        .await?;
    w.barrier().await?;
    w.get_children(&ctx.p(""), false).await?;
    ctx.note("-- the expired session cannot be resumed");
    ctx.resume(&name, sid, &passwd, last, 4000).await?;
    w.close().await
}

/// Every request, pings included, refreshes a session's deadline: a 4 s session that pings
/// every second outlives several timeouts with its ephemeral intact. Bounded: 10 pings.
pub async fn pings_keep_a_session_alive(ctx: Ctx) -> Result<()> {
    let mut w = ctx.client().await?;
    w.create(&ctx.p(""), "", PERSISTENT).await?;
    let mut c = ctx.client_with_timeout(4000).await?;
    c.create(&ctx.p("/e"), "", EPHEMERAL).await?;
    for _ in 0..10 {
        // The wait is the point of the test: idle time shorter than the timeout, repeatedly.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        c.barrier().await?;
    }
    ctx.note("-- after ~10 s of pings at 1 s intervals (timeout 4 s)");
    w.exists(&ctx.p("/e"), false).await?;
    c.exists(&ctx.p("/e"), false).await?;
    c.close().await?;
    w.close().await
}
