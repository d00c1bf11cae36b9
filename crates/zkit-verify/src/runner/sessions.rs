//! The sessions workload: clients that track their ZooKeeper session and an observer that
//! asks who owns the ephemerals.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use rand::rngs::StdRng;
use rand::Rng;
use tokio_util::sync::CancellationToken as Cancel;

use super::recorder::Recorder;
use super::shared::Shared;
use crate::executor::Reply;
use crate::history::{EventKind, Op, Process};
use crate::zk_ops::Zk;

/// The sessions workload's client: tracks its ZooKeeper session, keeps an ephemeral per
/// session, reads and writes its own ephemeral and a shared znode through that session.
pub(super) async fn session_client(
    shared: Arc<Shared>,
    c: u32,
    mut rng: StdRng,
    ephemerals: Arc<StdMutex<Vec<String>>>,
) {
    let rec = shared.recorder.clone();
    let zk = loop {
        match Zk::connect(&shared.connects[c as usize], shared.config.session_timeout).await {
            Ok(zk) => break zk,
            Err(_) if !shared.stop.is_cancelled() => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(_) => return,
        }
    };
    let mut process = rec.new_process();
    let notice_process = rec.new_process();
    let mut known: Option<(i64, String)> = None;
    let shared_path = shared_path(&shared);
    let timeout = shared.config.op_timeout;
    while !shared.stop.is_cancelled() {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(rng.gen_range(2..15))) => {}
            () = shared.stop.cancelled() => break,
        }
        let (sid, negotiated, _) = zk.current();
        if known.as_ref().map(|k| k.0) != Some(sid) {
            let path = format!("{}/e-{c}-{sid:x}", shared.layout.sessions());
            let start = Op::SessionStart {
                client: c,
                session: None,
                timeout_ms: None,
            };
            rec.invoke(process, start.clone());
            let created = tokio::time::timeout(timeout, zk.create_ephemeral(&path)).await;
            match created {
                Ok(Ok(owner)) if owner == sid => {
                    rec.complete(
                        process,
                        Reply {
                            kind: EventKind::Ok,
                            op: Op::SessionStart {
                                client: c,
                                session: Some(sid),
                                timeout_ms: Some(
                                    u64::try_from(negotiated.as_millis()).unwrap_or(u64::MAX),
                                ),
                            },
                            error: None,
                        },
                    );
                    crate::lock_vec(&ephemerals).push(path.clone());
                    known = Some((sid, path));
                    // When this client gives up on the session, ask the server whether it
                    // really expired it; only a server's "expired" is an observed expiry.
                    let (zk2, rec2, stop2) = (zk.clone(), rec.clone(), shared.stop.clone());
                    let (direct, t) = (shared.direct.clone(), shared.config.session_timeout);
                    let grace = shared.config.grace();
                    let probe = zk.probe_current();
                    tokio::spawn(async move {
                        tokio::select! {
                            () = zk2.until_given_up(&probe) => {}
                            () = stop2.cancelled() => return,
                        }
                        // Not before the server must have expired it: an earlier reconnect
                        // would itself keep the session alive.
                        tokio::select! {
                            () = tokio::time::sleep_until(probe.server_deadline(t, grace)) => {}
                            () = stop2.cancelled() => return,
                        }
                        if let Ok(true) = Zk::server_says_expired(&direct, &probe, t).await {
                            rec2.instant(
                                notice_process,
                                Op::SessionExpired {
                                    client: c,
                                    session: probe.id(),
                                },
                            );
                        }
                    });
                }
                other => {
                    let error = format!("{other:?}");
                    rec.complete(
                        process,
                        Reply {
                            kind: EventKind::Info,
                            op: start,
                            error: Some(error),
                        },
                    );
                    process = rec.new_process();
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            continue;
        }
        let own = known.as_ref().map(|k| k.1.clone()).unwrap_or_default();
        let path = if rng.gen_bool(0.5) {
            own
        } else {
            shared_path.clone()
        };
        let write = rng.gen_bool(0.4);
        let invoked = if write {
            Op::SessionWrite {
                session: sid,
                path: path.clone(),
                seen: None,
            }
        } else {
            Op::SessionRead {
                session: sid,
                path: path.clone(),
                seen: None,
            }
        };
        rec.invoke(process, invoked.clone());
        let reply = if write {
            match tokio::time::timeout(timeout, zk.write_seen(sid, &path)).await {
                Ok(Ok(seen)) => ok_reply(Op::SessionWrite {
                    session: sid,
                    path,
                    seen: Some(seen),
                }),
                Ok(Err(e)) => zk_err_reply(invoked, &e, false),
                Err(_) => err_reply(invoked, "timed out", false),
            }
        } else {
            match tokio::time::timeout(timeout, zk.read_seen(sid, &path)).await {
                Ok(Ok(seen)) => ok_reply(Op::SessionRead {
                    session: sid,
                    path,
                    seen,
                }),
                Ok(Err(e)) => zk_err_reply(invoked, &e, true),
                Err(_) => err_reply(invoked, "timed out", true),
            }
        };
        let info = reply.kind == EventKind::Info;
        rec.complete(process, reply);
        if info {
            process = rec.new_process();
        }
    }
    zk.close();
}

/// The znode every session of the workload reads and writes.
pub(super) fn shared_path(shared: &Shared) -> String {
    format!("{}/shared", shared.layout.sessions())
}

/// A write of the shared znode through `zk`'s current session, retried (up to 10 times) until
/// one is acknowledged: its completion shows a quorum committing after every fault healed.
pub(super) async fn quorum_write(
    rec: &Recorder,
    process: &mut Process,
    zk: &Zk,
    path: &str,
    timeout: Duration,
) {
    for _ in 0..10 {
        let session = zk.current().0;
        let invoked = Op::SessionWrite {
            session,
            path: path.to_owned(),
            seen: None,
        };
        rec.invoke(*process, invoked.clone());
        let reply = match tokio::time::timeout(timeout, zk.write_seen(session, path)).await {
            Ok(Ok(seen)) => ok_reply(Op::SessionWrite {
                session,
                path: path.to_owned(),
                seen: Some(seen),
            }),
            Ok(Err(e)) => zk_err_reply(invoked, &e, false),
            Err(_) => err_reply(invoked, "timed out", false),
        };
        let kind = reply.kind;
        rec.complete(*process, reply);
        match kind {
            EventKind::Ok => return,
            EventKind::Info => *process = rec.new_process(),
            _ => {}
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn ok_reply(op: Op) -> Reply {
    Reply {
        kind: EventKind::Ok,
        op,
        error: None,
    }
}

fn err_reply(op: Op, error: &str, read: bool) -> Reply {
    Reply {
        kind: if read {
            EventKind::Fail
        } else {
            EventKind::Info
        },
        op,
        error: Some(error.to_owned()),
    }
}

/// A zkit error as a reply: definite errors fail, others are unknown unless `read`.
fn zk_err_reply(op: Op, err: &zkit::Error, read: bool) -> Reply {
    match crate::zk_ops::Outcome::of(err) {
        crate::zk_ops::Outcome::Definite(e) => Reply {
            kind: EventKind::Fail,
            op,
            error: Some(e),
        },
        crate::zk_ops::Outcome::Unknown(e) => err_reply(op, &e, read),
    }
}

/// The sessions workload's observer: a session of its own, straight to the server (never
/// partitioned), asking who owns the ephemerals.
pub(super) async fn observer(
    shared: Arc<Shared>,
    mut rng: StdRng,
    ephemerals: Arc<StdMutex<Vec<String>>>,
    until: Cancel,
) {
    let rec = shared.recorder.clone();
    let Ok(zk) = Zk::connect(&shared.direct, shared.config.session_timeout).await else {
        return;
    };
    let process = rec.new_process();
    while !until.is_cancelled() {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(rng.gen_range(5..25))) => {}
            () = until.cancelled() => break,
        }
        let path = {
            let list = crate::lock_vec(&ephemerals);
            if list.is_empty() {
                continue;
            }
            list[rng.gen_range(0..list.len())].clone()
        };
        observe(&rec, process, &zk, &path, shared.config.op_timeout).await;
    }
    zk.close();
}

/// One observation (a read: a failed one is a fail, so the process stays).
pub(super) async fn observe(
    rec: &Recorder,
    process: Process,
    zk: &Zk,
    path: &str,
    timeout: Duration,
) {
    // The session layer may replace an expired ZooKeeper session under the read: the observer
    // is recorded only when one session made the whole read.
    let before = zk.current().0;
    let invoked = Op::ObserveEphemeral {
        path: path.to_owned(),
        owner: None,
        observer: None,
    };
    rec.invoke(process, invoked.clone());
    let reply = match tokio::time::timeout(timeout, zk.owner(path)).await {
        Ok(Ok(owner)) => ok_reply(Op::ObserveEphemeral {
            path: path.to_owned(),
            owner,
            observer: (zk.current().0 == before).then_some(before),
        }),
        Ok(Err(e)) => zk_err_reply(invoked, &e, true),
        Err(_) => err_reply(invoked, "timed out", true),
    };
    rec.complete(process, reply);
}
