//! Container and TTL reaping (check interval 1 s on both servers). Reaping runs on the server's
//! clock, and Apache's reaper has its own granularity, so the transcript records final states
//! and the watch events, never how long anything took; waits are bounded polls.

use std::time::Duration;

use anyhow::Result;

use crate::harness::Ctx;
use crate::scenarios::nodes::{PERSISTENT, PERSISTENT_SEQUENTIAL_WITH_TTL, PERSISTENT_WITH_TTL};

const REAP_LIMIT: Duration = Duration::from_secs(15);

pub async fn container_reaping(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    let mut w = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.create_container(&ctx.p("/c")).await?;
    c.create_container(&ctx.p("/never")).await?;
    c.create_container(&ctx.p("/kept")).await?;
    c.create(&ctx.p("/c/child"), "", PERSISTENT).await?;
    c.create(&ctx.p("/kept/child"), "", PERSISTENT).await?;
    c.create_container(&ctx.p("/nested")).await?;
    c.create_container(&ctx.p("/nested/inner")).await?;
    c.create(&ctx.p("/nested/inner/leaf"), "", PERSISTENT)
        .await?;
    w.exists(&ctx.p("/c"), true).await?;
    w.get_children(&ctx.p(""), true).await?;
    c.delete(&ctx.p("/c/child"), -1).await?;
    c.delete(&ctx.p("/nested/inner/leaf"), -1).await?;
    let reaped = ctx.wait_exists(&ctx.p("/c"), false, REAP_LIMIT).await?;
    ctx.note(format!("container /R/c reaped within limit: {reaped}"));
    // The inner container goes first; its parent then has had a child and is empty.
    let reaped = ctx
        .wait_exists(&ctx.p("/nested"), false, REAP_LIMIT)
        .await?;
    ctx.note(format!("container /R/nested reaped within limit: {reaped}"));
    w.barrier().await?;
    ctx.note("-- a container that never had a child, and one with a child, stay");
    c.exists(&ctx.p("/never"), false).await?;
    c.exists(&ctx.p("/kept"), false).await?;
    c.get_children(&ctx.p(""), false).await?;
    w.close().await?;
    c.close().await
}

pub async fn ttl_nodes(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    let mut w = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.create_ttl(&ctx.p("/short"), PERSISTENT_WITH_TTL, 200)
        .await?;
    c.create_ttl(&ctx.p("/short-seq-"), PERSISTENT_SEQUENTIAL_WITH_TTL, 200)
        .await?;
    c.create_ttl(&ctx.p("/long"), PERSISTENT_WITH_TTL, 600_000)
        .await?;
    c.create_ttl(&ctx.p("/parent"), PERSISTENT_WITH_TTL, 200)
        .await?;
    c.create(&ctx.p("/parent/child"), "", PERSISTENT).await?;
    w.exists(&ctx.p("/short"), true).await?;
    w.get_data(&ctx.p("/long"), true).await?;
    let reaped = ctx.wait_exists(&ctx.p("/short"), false, REAP_LIMIT).await?;
    ctx.note(format!("ttl /R/short reaped within limit: {reaped}"));
    let reaped = ctx
        .wait_exists(&ctx.p("/short-seq-0000000001"), false, REAP_LIMIT)
        .await?;
    ctx.note(format!(
        "ttl /R/short-seq-0000000001 reaped within limit: {reaped}"
    ));
    w.barrier().await?;
    ctx.note("-- a TTL node with a child and a long TTL stay");
    c.exists(&ctx.p("/long"), false).await?;
    c.exists(&ctx.p("/parent"), false).await?;
    ctx.note("-- once its child is gone, the TTL parent expires too");
    c.delete(&ctx.p("/parent/child"), -1).await?;
    let reaped = ctx
        .wait_exists(&ctx.p("/parent"), false, REAP_LIMIT)
        .await?;
    ctx.note(format!("ttl /R/parent reaped within limit: {reaped}"));
    c.get_children(&ctx.p(""), false).await?;
    w.close().await?;
    c.close().await
}
