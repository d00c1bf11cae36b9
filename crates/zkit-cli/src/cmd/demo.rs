//! `zkit demo`: start an embedded server on a free port and show, section by section, what
//! zkit does. Each capability adds a [`Section`] to [`sections`]; the demo ends with a summary
//! table (section, PASS/FAIL, duration) and exits non-zero if any section failed.

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use clap::Args;
use tokio::sync::mpsc;
use zkit_client::{Acls, AddWatchMode, CreateMode, EventType};
use zkit_server::{Server, ServerConfig};

use super::conn::ConnArgs;

/// Options of `zkit demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// How many changes the "Watched value" section makes.
    #[arg(long, default_value_t = 20)]
    pub changes: u32,
}

/// What a section gets: where the server is, and the demo's options.
pub struct DemoContext {
    /// Connect string of the embedded server.
    pub server: String,
    /// `--changes`.
    pub changes: u32,
}

/// A section's future: its report lines, or why it failed.
pub type SectionFuture<'a> = Pin<Box<dyn Future<Output = Result<Vec<String>>> + Send + 'a>>;

/// One part of the demo.
pub struct Section {
    /// Title, also the summary row's name.
    pub name: &'static str,
    /// Runs the section against the embedded server.
    pub run: for<'a> fn(&'a DemoContext) -> SectionFuture<'a>,
}

/// Every section, in the order they run.
pub fn sections() -> Vec<Section> {
    vec![
        Section {
            name: "Watched value",
            run: |ctx| Box::pin(watched_value(ctx)),
        },
        Section {
            name: "Distributed lock",
            run: |ctx| Box::pin(one_line(super::lock::demo_lock(&ctx.server))),
        },
        Section {
            name: "Configuration service",
            run: |ctx| Box::pin(one_line(super::config::demo_config(&ctx.server))),
        },
        Section {
            name: "Distributed procedure",
            run: |ctx| Box::pin(one_line(super::proc::demo_proc(&ctx.server))),
        },
        Section {
            name: "Two-phase commit",
            run: |ctx| Box::pin(one_line(super::txn::demo_txn(&ctx.server))),
        },
        Section {
            name: "Replicated ledger",
            run: |ctx| Box::pin(one_line(super::ledger_demo::demo_ledger(&ctx.server))),
        },
    ]
}

/// Adapts a section that reports in one block of text (lines split on '\n').
async fn one_line(report: impl Future<Output = Result<String>>) -> Result<Vec<String>> {
    Ok(report.await?.lines().map(str::to_owned).collect())
}

/// Runs the demo.
pub async fn run(args: DemoArgs) -> Result<ExitCode> {
    let server = Server::start(ServerConfig::ephemeral())
        .await
        .context("cannot start the embedded server")?;
    println!(
        "zkit demo — embedded ZooKeeper-compatible server on {}",
        server.addr()
    );
    println!();
    let ctx = DemoContext {
        server: server.addr().to_string(),
        changes: args.changes,
    };
    let mut results = Vec::new();
    for (i, section) in sections().into_iter().enumerate() {
        println!("== {}. {}", i + 1, section.name);
        let started = Instant::now();
        let outcome = (section.run)(&ctx).await;
        let took = started.elapsed();
        match &outcome {
            Ok(lines) => lines.iter().for_each(|l| println!("   {l}")),
            Err(err) => println!("   FAILED: {err:#}"),
        }
        println!();
        results.push((section.name, outcome.is_ok(), took));
    }
    server.stop().await;

    let width = results.iter().map(|r| r.0.len()).max().unwrap_or(0).max(7);
    println!("Summary");
    println!(
        "  {:<width$}  {:<6}  {:>10}",
        "section", "result", "duration"
    );
    for (name, ok, took) in &results {
        let result = if *ok { "PASS" } else { "FAIL" };
        println!(
            "  {name:<width$}  {result:<6}  {:>10}",
            super::conn::human_duration(*took)
        );
    }
    let failed = results.iter().filter(|r| !r.1).count();
    if failed > 0 {
        println!("{failed} of {} sections failed", results.len());
        return Ok(ExitCode::FAILURE);
    }
    println!("all {} sections passed", results.len());
    Ok(ExitCode::SUCCESS)
}

/// Section 1: one client writes a value N times; a second client with a persistent watch sees
/// every change, in order. The writer waits until the watcher has read each value before
/// writing the next, so each change is observed on its own and the notification latency
/// (write sent → watcher has read the new value) is measured per change.
async fn watched_value(ctx: &DemoContext) -> Result<Vec<String>> {
    const PATH: &str = "/zkit-demo-value";
    let conn = ConnArgs::to(&ctx.server);
    let writer = conn.client().await?;
    let watcher = conn.client().await?;
    writer
        .create(
            PATH,
            b"0",
            &CreateMode::Persistent.with_acls(Acls::anyone_all()),
        )
        .await
        .context("create the value node")?;
    let mut watch = watcher
        .watch(PATH, AddWatchMode::Persistent)
        .await
        .context("set the persistent watch")?;

    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel::<(String, u32)>();
    let changes = ctx.changes;
    let observer = tokio::spawn(async move {
        let mut events = 0u32;
        while events < changes {
            let event = watch.changed().await;
            match event.event_type {
                EventType::NodeDataChanged => {
                    events += 1;
                    let (data, _) = watcher.get_data(PATH).await?;
                    let value = String::from_utf8_lossy(&data).into_owned();
                    if seen_tx.send((value, events)).is_err() {
                        break;
                    }
                }
                other => bail!("unexpected event {other:?} on {}", event.path),
            }
        }
        Ok::<_, anyhow::Error>(events)
    });

    let mut latencies = Vec::with_capacity(changes as usize);
    for i in 1..=changes {
        let value = format!("value-{i}");
        let sent = Instant::now();
        writer.set_data(PATH, value.as_bytes(), None).await?;
        let (seen, events) = tokio::time::timeout(Duration::from_secs(10), seen_rx.recv())
            .await
            .with_context(|| format!("no notification for change {i} within 10 s"))?
            .context("the watcher stopped")?;
        latencies.push(sent.elapsed());
        ensure!(
            seen == value,
            "change {i}: watcher read {seen:?}, expected {value:?}"
        );
        ensure!(events == i, "change {i}: watcher counted {events} events");
    }
    let events = observer.await.context("watcher task")??;
    writer.delete(PATH, None).await?;

    let total: Duration = latencies.iter().sum();
    let min = latencies.iter().min().copied().unwrap_or_default();
    let max = latencies.iter().max().copied().unwrap_or_default();
    let avg = total / changes.max(1);
    Ok(vec![
        format!("writer set {PATH} {changes} times; watcher got {events} NodeDataChanged events"),
        format!("every value seen, in order: value-1 … value-{changes}"),
        format!("write → watcher has read it: min {min:.2?}, avg {avg:.2?}, max {max:.2?}"),
    ])
}
