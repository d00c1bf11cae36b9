//! Watches: one-shot data/exist/child semantics, event order relative to replies, persistent
//! and persistent-recursive watches (addWatch), checkWatches/removeWatches, and re-registration
//! with SetWatches/SetWatches2 after a reconnect (events for changes made while disconnected).
//!
//! Events caused by another session's write are collected with a ping barrier on the watching
//! connection: the server queues the event before answering the write, and per connection it
//! answers the later ping after it, so no sleep is involved.

use anyhow::Result;

use crate::harness::Ctx;
use crate::scenarios::nodes::{EPHEMERAL, PERSISTENT};
use crate::wire::{body, op};

const CHILDREN: i32 = 1;
const DATA: i32 = 2;
const ANY: i32 = 3;
const PERSISTENT_WATCH: i32 = 4;
const PERSISTENT_RECURSIVE_WATCH: i32 = 5;

pub async fn one_shot_watches(ctx: Ctx) -> Result<()> {
    let mut m = ctx.client().await?;
    let mut w = ctx.client().await?;
    m.create(&ctx.p(""), "", PERSISTENT).await?;

    ctx.note(
        "-- exists on a missing node sets a watch; getData/getChildren on a missing node do not",
    );
    w.exists(&ctx.p("/n"), true).await?;
    w.get_data(&ctx.p("/n2"), true).await?;
    w.get_children(&ctx.p("/n2"), true).await?;
    m.create(&ctx.p("/n"), "a", PERSISTENT).await?;
    m.create(&ctx.p("/n2"), "a", PERSISTENT).await?;
    w.barrier().await?;

    ctx.note("-- data watch fires once");
    w.get_data(&ctx.p("/n"), true).await?;
    m.set_data(&ctx.p("/n"), "b", -1).await?;
    m.set_data(&ctx.p("/n"), "c", -1).await?;
    w.barrier().await?;

    ctx.note("-- exists and getData watches on one path give one event");
    w.exists(&ctx.p("/n"), true).await?;
    w.get_data(&ctx.p("/n"), true).await?;
    m.set_data(&ctx.p("/n"), "d", -1).await?;
    w.barrier().await?;

    ctx.note("-- child watch: create and delete of children, not their data");
    w.get_children(&ctx.p(""), true).await?;
    m.set_data(&ctx.p("/n"), "e", -1).await?;
    m.create(&ctx.p("/k"), "", PERSISTENT).await?;
    m.create(&ctx.p("/k2"), "", PERSISTENT).await?;
    w.barrier().await?;
    w.get_children2(&ctx.p(""), true).await?;
    m.delete(&ctx.p("/k2"), -1).await?;
    w.barrier().await?;

    ctx.note("-- setData on the parent does not fire its child watch; setACL fires nothing");
    w.get_children(&ctx.p(""), true).await?;
    w.get_data(&ctx.p("/k"), true).await?;
    m.set_data(&ctx.p(""), "p", -1).await?;
    m.set_acl(&ctx.p("/k"), &crate::wire::open_acl(), -1)
        .await?;
    w.barrier().await?;

    ctx.note("-- delete fires NodeDeleted once for data+exist+child watches, and the parent's child watch");
    w.exists(&ctx.p("/k"), true).await?;
    w.get_children(&ctx.p("/k"), true).await?;
    m.delete(&ctx.p("/k"), -1).await?;
    w.barrier().await?;

    ctx.note("-- the writer's own watches fire too; a failed write fires nothing");
    m.get_data(&ctx.p("/n"), true).await?;
    m.set_data(&ctx.p("/n"), "f", 999).await?;
    m.barrier().await?;
    m.set_data(&ctx.p("/n"), "f", -1).await?;

    ctx.note("-- ephemeral deletion on close fires watches");
    let mut e = ctx.client().await?;
    e.create(&ctx.p("/eph"), "", EPHEMERAL).await?;
    w.exists(&ctx.p("/eph"), true).await?;
    w.get_children(&ctx.p(""), true).await?;
    e.close().await?;
    w.barrier().await?;

    ctx.note(
        "-- watches die with their connection: a new connection of another session sees nothing",
    );
    w.get_data(&ctx.p("/n"), true).await?;
    w.disconnect().await;
    m.set_data(&ctx.p("/n"), "g", -1).await?;
    m.barrier().await?;
    m.close().await
}

pub async fn event_order_vs_replies(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    ctx.note("-- own writes: the event precedes the write's reply");
    c.exists(&ctx.p("/a"), true).await?;
    c.create(&ctx.p("/a"), "", PERSISTENT).await?;
    c.get_data(&ctx.p("/a"), true).await?;
    c.get_children(&ctx.p(""), true).await?;
    c.delete(&ctx.p("/a"), -1).await?;
    ctx.note("-- a multi fires events in op order before its reply");
    c.create(&ctx.p("/x"), "", PERSISTENT).await?;
    c.create(&ctx.p("/y"), "", PERSISTENT).await?;
    c.exists(&ctx.p("/z"), true).await?;
    c.get_data(&ctx.p("/x"), true).await?;
    c.get_data(&ctx.p("/y"), true).await?;
    c.get_children(&ctx.p(""), true).await?;
    c.multi(
        "setData y, create z, delete x",
        &[
            body::SubOp::SetData {
                path: &ctx.p("/y"),
                data: b"1",
                version: -1,
            },
            body::SubOp::Create {
                path: &ctx.p("/z"),
                data: b"",
                flags: 0,
            },
            body::SubOp::Delete {
                path: &ctx.p("/x"),
                version: -1,
            },
        ],
    )
    .await?;
    ctx.note("-- pipelined requests: replies in request order, events where they happen");
    c.get_data(&ctx.p("/y"), true).await?;
    let x1 = c
        .wire
        .send_request(op::SET_DATA, &body::set_data(&ctx.p("/y"), b"2", -1))
        .await?;
    let x2 = c
        .wire
        .send_request(op::EXISTS, &body::path_watch(&ctx.p("/y"), true))
        .await?;
    let x3 = c
        .wire
        .send_request(op::SET_DATA, &body::set_data(&ctx.p("/y"), b"3", -1))
        .await?;
    let x4 = c
        .wire
        .send_request(op::GET_DATA, &body::path_watch(&ctx.p("/y"), false))
        .await?;
    c.await_reply("pipelined setData(/R/y)", op::SET_DATA, x1)
        .await?;
    c.await_reply("pipelined exists(/R/y, watch)", op::EXISTS, x2)
        .await?;
    c.await_reply("pipelined setData(/R/y)", op::SET_DATA, x3)
        .await?;
    c.await_reply("pipelined getData(/R/y)", op::GET_DATA, x4)
        .await?;
    c.close().await
}

pub async fn persistent_watches(ctx: Ctx) -> Result<()> {
    let mut m = ctx.client().await?;
    let mut w = ctx.client().await?;
    m.create(&ctx.p(""), "", PERSISTENT).await?;
    w.add_watch(&ctx.p("/p"), 0).await?;
    m.create(&ctx.p("/p"), "", PERSISTENT).await?;
    m.set_data(&ctx.p("/p"), "1", -1).await?;
    m.set_data(&ctx.p("/p"), "2", -1).await?;
    m.create(&ctx.p("/p/c"), "", PERSISTENT).await?;
    m.set_data(&ctx.p("/p/c"), "x", -1).await?;
    m.create(&ctx.p("/p/c/g"), "", PERSISTENT).await?;
    m.delete(&ctx.p("/p/c/g"), -1).await?;
    m.delete(&ctx.p("/p/c"), -1).await?;
    m.delete(&ctx.p("/p"), -1).await?;
    m.create(&ctx.p("/p"), "", PERSISTENT).await?;
    w.barrier().await?;
    ctx.note("-- a one-shot watch beside the persistent one");
    w.get_data(&ctx.p("/p"), true).await?;
    m.set_data(&ctx.p("/p"), "3", -1).await?;
    m.set_data(&ctx.p("/p"), "4", -1).await?;
    w.barrier().await?;
    ctx.note("-- addWatch errors");
    w.add_watch("bad", 0).await?;
    w.add_watch(&ctx.p("/x"), 2).await?;
    w.add_watch(&ctx.p("/x"), -1).await?;
    w.close().await?;
    m.close().await
}

pub async fn persistent_recursive_watches(ctx: Ctx) -> Result<()> {
    let mut m = ctx.client().await?;
    let mut w = ctx.client().await?;
    m.create(&ctx.p(""), "", PERSISTENT).await?;
    w.add_watch(&ctx.p("/r"), 1).await?;
    m.create(&ctx.p("/r"), "", PERSISTENT).await?;
    m.create(&ctx.p("/r/a"), "", PERSISTENT).await?;
    m.create(&ctx.p("/r/a/b"), "", PERSISTENT).await?;
    m.set_data(&ctx.p("/r/a/b"), "x", -1).await?;
    m.set_data(&ctx.p("/r"), "x", -1).await?;
    m.create(&ctx.p("/rr"), "", PERSISTENT).await?;
    m.create(&ctx.p("/r/e"), "", EPHEMERAL).await?;
    m.delete(&ctx.p("/r/a/b"), -1).await?;
    m.delete(&ctx.p("/r/a"), -1).await?;
    w.barrier().await?;
    ctx.note("-- recursive watch on a prefix sibling does not match /rr; one on the root path");
    w.add_watch(&ctx.p(""), 1).await?;
    m.create(&ctx.p("/rr/x"), "", PERSISTENT).await?;
    m.set_data(&ctx.p("/r"), "y", -1).await?;
    w.barrier().await?;
    ctx.note("-- persistent and recursive on one path, plus a one-shot child watch");
    w.add_watch(&ctx.p("/r"), 0).await?;
    w.get_children(&ctx.p("/r"), true).await?;
    m.create(&ctx.p("/r/z"), "", PERSISTENT).await?;
    w.barrier().await?;
    m.close().await?;
    w.barrier().await?;
    w.close().await
}

pub async fn check_and_remove_watches(ctx: Ctx) -> Result<()> {
    let mut m = ctx.client().await?;
    let mut w = ctx.client().await?;
    m.create(&ctx.p(""), "", PERSISTENT).await?;
    m.create(&ctx.p("/n"), "", PERSISTENT).await?;
    ctx.note("-- no watches");
    for ty in [
        CHILDREN,
        DATA,
        ANY,
        PERSISTENT_WATCH,
        PERSISTENT_RECURSIVE_WATCH,
    ] {
        w.check_watches(&ctx.p("/n"), ty).await?;
        w.remove_watches(&ctx.p("/n"), ty).await?;
    }
    w.check_watches(&ctx.p("/missing"), DATA).await?;
    w.check_watches("bad", DATA).await?;
    w.check_watches(&ctx.p("/n"), 9).await?;
    ctx.note("-- a data watch");
    w.get_data(&ctx.p("/n"), true).await?;
    w.check_watches(&ctx.p("/n"), CHILDREN).await?;
    w.check_watches(&ctx.p("/n"), DATA).await?;
    w.check_watches(&ctx.p("/n"), ANY).await?;
    ctx.note("-- another session cannot see or remove it");
    m.check_watches(&ctx.p("/n"), DATA).await?;
    m.remove_watches(&ctx.p("/n"), DATA).await?;
    w.remove_watches(&ctx.p("/n"), CHILDREN).await?;
    w.remove_watches(&ctx.p("/n"), DATA).await?;
    w.check_watches(&ctx.p("/n"), DATA).await?;
    m.set_data(&ctx.p("/n"), "x", -1).await?;
    w.barrier().await?;
    ctx.note("-- exist watch on a missing node counts as a data watch");
    w.exists(&ctx.p("/missing"), true).await?;
    w.check_watches(&ctx.p("/missing"), DATA).await?;
    w.remove_watches(&ctx.p("/missing"), ANY).await?;
    w.check_watches(&ctx.p("/missing"), DATA).await?;
    ctx.note("-- child + data watches, removed with Any");
    w.get_data(&ctx.p("/n"), true).await?;
    w.get_children(&ctx.p("/n"), true).await?;
    w.check_watches(&ctx.p("/n"), CHILDREN).await?;
    w.remove_watches(&ctx.p("/n"), ANY).await?;
    w.check_watches(&ctx.p("/n"), ANY).await?;
    m.create(&ctx.p("/n/c"), "", PERSISTENT).await?;
    w.barrier().await?;
    ctx.note("-- persistent watches");
    w.add_watch(&ctx.p("/n"), 0).await?;
    w.check_watches(&ctx.p("/n"), PERSISTENT_WATCH).await?;
    w.check_watches(&ctx.p("/n"), PERSISTENT_RECURSIVE_WATCH)
        .await?;
    w.check_watches(&ctx.p("/n"), DATA).await?;
    w.check_watches(&ctx.p("/n"), ANY).await?;
    w.remove_watches(&ctx.p("/n"), PERSISTENT_WATCH).await?;
    w.check_watches(&ctx.p("/n"), ANY).await?;
    w.add_watch(&ctx.p("/n"), 1).await?;
    w.check_watches(&ctx.p("/n"), PERSISTENT_RECURSIVE_WATCH)
        .await?;
    w.check_watches(&ctx.p("/n"), ANY).await?;
    w.remove_watches(&ctx.p("/n"), ANY).await?;
    w.check_watches(&ctx.p("/n"), PERSISTENT_RECURSIVE_WATCH)
        .await?;
    m.set_data(&ctx.p("/n"), "y", -1).await?;
    w.barrier().await?;
    w.close().await?;
    m.close().await
}

async fn set_watches_common(ctx: Ctx, v2: bool) -> Result<()> {
    let mut w = ctx.client().await?;
    for rel in [
        "",
        "/d",
        "/gone",
        "/kids",
        "/quiet",
        "/quietkids",
        "/p",
        "/r",
    ] {
        w.create(&ctx.p(rel), "", PERSISTENT).await?;
    }
    let relative = w.last_zxid;
    let (sid, passwd) = (w.session_id, w.passwd.clone());
    let name = w.name.clone();
    ctx.note("-- watcher disconnects (session lives); another session changes things");
    w.disconnect().await;
    let mut m = ctx.client().await?;
    m.set_data(&ctx.p("/d"), "changed", -1).await?;
    m.delete(&ctx.p("/gone"), -1).await?;
    m.create(&ctx.p("/new"), "", PERSISTENT).await?;
    m.create(&ctx.p("/kids/k"), "", PERSISTENT).await?;
    m.set_data(&ctx.p("/p"), "missed", -1).await?;
    m.create(&ctx.p("/r/missed"), "", PERSISTENT).await?;
    let Some(mut w) = ctx.resume(&name, sid, &passwd, relative, 30_000).await? else {
        anyhow::bail!("reconnect refused");
    };
    let d = ctx.p("/d");
    let gone = ctx.p("/gone");
    let quiet = ctx.p("/quiet");
    let missing_data = ctx.p("/never");
    let new = ctx.p("/new");
    let absent = ctx.p("/absent");
    let quiet_existing = ctx.p("/quiet");
    let kids = ctx.p("/kids");
    let quietkids = ctx.p("/quietkids");
    let p = ctx.p("/p");
    let r = ctx.p("/r");
    let data = [
        d.as_str(),
        gone.as_str(),
        quiet.as_str(),
        missing_data.as_str(),
    ];
    let exist = [new.as_str(), absent.as_str(), quiet_existing.as_str()];
    let child = [kids.as_str(), gone.as_str(), quietkids.as_str()];
    let (label, opcode, body) = if v2 {
        (
            "setWatches2",
            op::SET_WATCHES2,
            body::set_watches(
                relative,
                &data,
                &exist,
                &child,
                Some((&[p.as_str()], &[r.as_str()])),
            ),
        )
    } else {
        (
            "setWatches",
            op::SET_WATCHES,
            body::set_watches(relative, &data, &exist, &child, None),
        )
    };
    w.call_xid(label, -8, opcode, &body).await?;
    ctx.note("-- re-armed watches fire on later changes");
    m.set_data(&ctx.p("/quiet"), "now", -1).await?;
    m.create(&ctx.p("/absent"), "", PERSISTENT).await?;
    m.create(&ctx.p("/quietkids/k"), "", PERSISTENT).await?;
    m.create(&ctx.p("/never"), "", PERSISTENT).await?;
    m.set_data(&ctx.p("/p"), "seen", -1).await?;
    m.create(&ctx.p("/r/seen"), "", PERSISTENT).await?;
    m.set_data(&ctx.p("/d"), "again", -1).await?;
    w.barrier().await?;
    m.close().await?;
    w.close().await
}

pub async fn set_watches_after_reconnect(ctx: Ctx) -> Result<()> {
    set_watches_common(ctx, false).await
}

pub async fn set_watches2_after_reconnect(ctx: Ctx) -> Result<()> {
    set_watches_common(ctx, true).await
}
