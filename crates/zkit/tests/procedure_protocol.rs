//! The distributed procedure framework against every server of `common::servers()`: success with
//! per-member results, failures in either phase, a member dying, the coordinator timing out,
//! crashing and being cancelled, duplicate instances; after every case no znode is left.
//!
//! Members are tasks with their own sessions; a "dead" member is one whose session is closed
//! abruptly, a crashed coordinator one whose whole tokio runtime is dropped (its TCP connection
//! dies without a closeSession, so its ephemerals live until the server expires the session).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::{children, servers, session};
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::{mpsc, watch, Notify};
use tokio::time::{timeout, Instant};
use zkit::procedure::{
    AbortReason, Coordinator, Member, MemberHandle, ProcedureError, Subprocedure,
    SubprocedureFactory, COORDINATOR,
};
use zkit::Session;
use zkit_testkit::unique_path;

const SIG: &str = "flush";

/// What a test member does in each phase.
#[derive(Clone)]
enum Behavior {
    Ok,
    /// Fails acquire once `after` other members finished theirs (so they have joined).
    FailAcquire {
        after: usize,
    },
    FailInside,
    /// Acquire blocks until the gate is notified.
    GateAcquire(Arc<Notify>),
    /// Inside blocks until the gate is notified.
    GateInside(Arc<Notify>),
}

#[derive(Debug, Clone, PartialEq)]
enum Event {
    Acquired,
    Inside,
    Cleanup(AbortReason),
}

struct TestFactory {
    behavior: Behavior,
    events: mpsc::UnboundedSender<(String, Event)>,
    acquired: watch::Sender<usize>,
}

struct TestSub {
    member: String,
    behavior: Behavior,
    events: mpsc::UnboundedSender<(String, Event)>,
    acquired: watch::Sender<usize>,
    args: Vec<u8>,
}

impl SubprocedureFactory for TestFactory {
    fn build(&self, _signature: &str, _instance: &str, member: &str) -> Box<dyn Subprocedure> {
        Box::new(TestSub {
            member: member.to_string(),
            behavior: self.behavior.clone(),
            events: self.events.clone(),
            acquired: self.acquired.clone(),
            args: Vec::new(),
        })
    }
}

impl Subprocedure for TestSub {
    fn acquire_barrier(&mut self, args: Vec<u8>) -> BoxFuture<'_, Result<(), String>> {
        async move {
            self.args = args;
            match &self.behavior {
                Behavior::FailAcquire { after } => {
                    let mut rx = self.acquired.subscribe();
                    let _ = rx.wait_for(|n| n >= after).await;
                    return Err("disk full".into());
                }
                Behavior::GateAcquire(gate) => gate.notified().await,
                _ => {}
            }
            self.acquired.send_modify(|n| *n += 1);
            let _ = self.events.send((self.member.clone(), Event::Acquired));
            Ok(())
        }
        .boxed()
    }

    fn inside_barrier(&mut self) -> BoxFuture<'_, Result<Vec<u8>, String>> {
        async move {
            match &self.behavior {
                Behavior::FailInside => return Err("flush failed".into()),
                Behavior::GateInside(gate) => {
                    let _ = self.events.send((self.member.clone(), Event::Inside));
                    gate.notified().await;
                    return Ok(
                        format!("{}:{}", self.member, String::from_utf8_lossy(&self.args))
                            .into_bytes(),
                    );
                }
                _ => {}
            }
            let _ = self.events.send((self.member.clone(), Event::Inside));
            Ok(format!("{}:{}", self.member, String::from_utf8_lossy(&self.args)).into_bytes())
        }
        .boxed()
    }

    fn cleanup(&mut self, reason: AbortReason) -> BoxFuture<'_, ()> {
        async move {
            let _ = self
                .events
                .send((self.member.clone(), Event::Cleanup(reason)));
        }
        .boxed()
    }
}

struct Cluster {
    base: String,
    members: Vec<(String, Session, MemberHandle)>,
    /// A session of no member's, to coordinate from and to look at the tree with.
    observer: Session,
    events: mpsc::UnboundedReceiver<(String, Event)>,
    acquired: watch::Sender<usize>,
}

impl Cluster {
    async fn start(addr: &str, behaviors: &[(&str, Behavior)]) -> Cluster {
        let base = unique_path("proc");
        let (tx, events) = mpsc::unbounded_channel();
        let (acquired, _) = watch::channel(0usize);
        let mut members = Vec::new();
        for (name, behavior) in behaviors {
            let s = session(addr, Duration::from_secs(10)).await;
            let factory = Arc::new(TestFactory {
                behavior: behavior.clone(),
                events: tx.clone(),
                acquired: acquired.clone(),
            });
            let handle = Member::start(&s, &base, SIG, name, factory)
                .await
                .expect("member starts");
            members.push((name.to_string(), s, handle));
        }
        Cluster {
            base,
            members,
            observer: session(addr, Duration::from_secs(10)).await,
            events,
            acquired,
        }
    }

    /// Runs instance `i1` of the procedure with `args` from the observer, over every member,
    /// bounded by `timeout`.
    async fn run_i1(
        &self,
        args: &[u8],
        timeout: Duration,
    ) -> Result<BTreeMap<String, Vec<u8>>, ProcedureError> {
        Coordinator::new(&self.observer, &self.base)
            .run(SIG, "i1", args, &self.names(), timeout)
            .await
    }

    fn names(&self) -> Vec<String> {
        self.members.iter().map(|(n, _, _)| n.clone()).collect()
    }

    /// Waits (bounded) until `member` reported `want`.
    async fn expect(&mut self, want: impl Fn(&str, &Event) -> bool, what: &str) -> (String, Event) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match timeout(left, self.events.recv()).await {
                Ok(Some((member, event))) if want(&member, &event) => return (member, event),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => panic!("timed out waiting for {what}"),
            }
        }
    }

    /// Waits until every name in `names` reported a cleanup; returns the reasons.
    async fn expect_cleanups(&mut self, names: &[&str]) -> BTreeMap<String, AbortReason> {
        let mut seen = BTreeMap::new();
        while names.iter().any(|n| !seen.contains_key(*n)) {
            let (member, event) = self
                .expect(
                    |_, e| matches!(e, Event::Cleanup(_)),
                    &format!("cleanups of {names:?}, got {seen:?}"),
                )
                .await;
            if let Event::Cleanup(reason) = event {
                assert!(
                    seen.insert(member.clone(), reason).is_none(),
                    "{member} cleaned up twice"
                );
            }
        }
        seen
    }

    /// No procedure znode is left: only the (empty) directories and live member nodes.
    async fn assert_clean(&self, target: &str) {
        let root = format!("{}/{SIG}", self.base);
        for dir in ["acquired", "reached", "abort", "running"] {
            let left = children(&self.observer, &format!("{root}/{dir}")).await;
            assert!(left.is_empty(), "{target}: {dir}/ not empty: {left:?}");
        }
    }

    /// Checks that no procedure znode is left, then stops every member.
    async fn finish(self, target: &str) {
        self.assert_clean(target).await;
        self.stop().await;
    }

    async fn stop(self) {
        for (_, s, handle) in self.members {
            handle.stop().await;
            s.close();
        }
    }
}

/// Members `a` and `b` that succeed, and `c` behaving as `c`.
fn two_ok_and_c(c: Behavior) -> [(&'static str, Behavior); 3] {
    [("a", Behavior::Ok), ("b", Behavior::Ok), ("c", c)]
}

/// Members a and b that succeed and c that waits in its acquire until the returned gate is
/// notified.
async fn c_gated_at_acquire(addr: &str) -> (Cluster, Arc<Notify>) {
    let gate = Arc::new(Notify::new());
    let cluster = Cluster::start(addr, &two_ok_and_c(Behavior::GateAcquire(gate.clone()))).await;
    (cluster, gate)
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_members_succeed_with_results() {
    for target in servers().await {
        let cluster = Cluster::start(&target.addr, &two_ok_and_c(Behavior::Ok)).await;
        let s = cluster.observer.clone();
        let coordinator = Coordinator::new(&s, &cluster.base);
        let results = coordinator
            .run(SIG, "i1", b"t1", &cluster.names(), Duration::from_secs(30))
            .await
            .expect("procedure completes");
        let want: BTreeMap<String, Vec<u8>> = ["a", "b", "c"]
            .iter()
            .map(|m| (m.to_string(), format!("{m}:t1").into_bytes()))
            .collect();
        assert_eq!(results, want, "{}", target.name);
        cluster.assert_clean(target.name).await;
        // The same name can be used again once the instance is gone.
        let again = coordinator
            .run(SIG, "i1", b"t2", &cluster.names(), Duration::from_secs(30))
            .await
            .expect("second procedure completes");
        assert_eq!(again.get("b").map(Vec::as_slice), Some(&b"b:t2"[..]));
        cluster.finish(target.name).await;
        eprintln!("{}: success ok", target.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_in_acquire_aborts_everyone_and_names_the_member() {
    for target in servers().await {
        let mut cluster = Cluster::start(
            &target.addr,
            &two_ok_and_c(Behavior::FailAcquire { after: 2 }),
        )
        .await;
        let err = cluster
            .run_i1(b"t1", Duration::from_secs(30))
            .await
            .expect_err("procedure aborts");
        let reason = err.abort_reason().expect("an abort").clone();
        assert_eq!(
            reason,
            AbortReason::new("c", "disk full"),
            "{}",
            target.name
        );
        assert!(err.to_string().contains("member 'c': disk full"), "{err}");
        let cleanups = cluster.expect_cleanups(&["a", "b", "c"]).await;
        assert_eq!(cleanups["c"], reason);
        cluster.finish(target.name).await;
        eprintln!("{}: acquire failure ok", target.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_inside_aborts_everyone_including_finished_members() {
    for target in servers().await {
        let mut cluster = Cluster::start(
            &target.addr,
            &[
                ("a", Behavior::Ok),
                ("b", Behavior::FailInside),
                ("c", Behavior::Ok),
            ],
        )
        .await;
        let err = cluster
            .run_i1(b"t1", Duration::from_secs(30))
            .await
            .expect_err("procedure aborts");
        assert_eq!(
            err.abort_reason(),
            Some(&AbortReason::new("b", "flush failed")),
            "{}",
            target.name
        );
        // Acknowledged aborts: every live member that joined cleaned up before run returned.
        let cleanups = cluster.expect_cleanups(&["a", "b", "c"]).await;
        assert!(cleanups.values().all(|r| r.source == "b"), "{cleanups:?}");
        cluster.finish(target.name).await;
        eprintln!("{}: inside failure ok", target.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_member_aborts_at_once_not_at_the_timeout() {
    for target in servers().await {
        let (mut cluster, _gate) = c_gated_at_acquire(&target.addr).await;
        let s = cluster.observer.clone();
        let coordinator = Coordinator::new(&s, &cluster.base);
        let expected = cluster.names();
        let run = tokio::spawn(async move {
            let start = Instant::now();
            let result = coordinator
                .run(SIG, "i1", b"t1", &expected, Duration::from_secs(120))
                .await;
            (result, start.elapsed())
        });
        let mut rx = cluster.acquired.subscribe();
        timeout(Duration::from_secs(20), rx.wait_for(|n| *n >= 2))
            .await
            .expect("a and b acquire")
            .expect("counter alive");
        // c dies mid-procedure: its session is closed without any goodbye from the member.
        let (_, c_session, c_handle) = cluster.members.pop().expect("c");
        c_session.close();
        drop(c_handle);
        drop(c_session);
        let (result, elapsed) = run.await.expect("run task");
        let err = result.expect_err("procedure aborts");
        let reason = err.abort_reason().expect("an abort");
        assert_eq!(reason.source, "c", "{}: {err}", target.name);
        assert!(
            elapsed < Duration::from_secs(20),
            "{}: took {elapsed:?}",
            target.name
        );
        cluster.expect_cleanups(&["a", "b"]).await;
        cluster.finish(target.name).await;
        eprintln!("{}: dead member aborted after {elapsed:?}", target.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coordinator_timeout_makes_members_clean_up() {
    for target in servers().await {
        let (mut cluster, gate) = c_gated_at_acquire(&target.addr).await;
        let s = cluster.observer.clone();
        let err = Coordinator::new(&s, &cluster.base)
            .run(
                SIG,
                "i1",
                b"t1",
                &cluster.names(),
                Duration::from_millis(1500),
            )
            .await
            .expect_err("procedure times out");
        let reason = err.abort_reason().expect("an abort").clone();
        assert_eq!(reason.source, COORDINATOR, "{}: {err}", target.name);
        assert!(
            reason.message.contains("timed out") && reason.message.ends_with('c'),
            "{reason}"
        );
        // c's acquire finishes late: it finds the instance gone and cleans up too.
        gate.notify_one();
        let cleanups = cluster.expect_cleanups(&["a", "b", "c"]).await;
        assert_eq!(cleanups["a"], reason, "{}", target.name);
        cluster.finish(target.name).await;
        eprintln!("{}: timeout ok", target.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_instance_is_refused_and_cancellation_aborts() {
    for target in servers().await {
        let gate = Arc::new(Notify::new());
        let mut cluster = Cluster::start(
            &target.addr,
            &[
                ("a", Behavior::Ok),
                ("b", Behavior::GateAcquire(gate.clone())),
            ],
        )
        .await;
        let s = cluster.observer.clone();
        let coordinator = Coordinator::new(&s, &cluster.base);
        let (c2, expected) = (coordinator.clone(), cluster.names());
        let first = tokio::spawn(async move {
            c2.run(SIG, "i1", b"t1", &expected, Duration::from_secs(60))
                .await
        });
        cluster
            .expect(|m, e| m == "a" && *e == Event::Acquired, "a acquired")
            .await;
        let other = session(&target.addr, Duration::from_secs(10)).await;
        let dup = Coordinator::new(&other, &cluster.base)
            .run(SIG, "i1", b"t1", &cluster.names(), Duration::from_secs(5))
            .await;
        assert_eq!(
            dup,
            Err(ProcedureError::DuplicateInstance("i1".into())),
            "{}",
            target.name
        );
        // Cancelling the first run aborts it for the members.
        first.abort();
        let _ = first.await;
        let cleanups = cluster.expect_cleanups(&["a"]).await;
        assert_eq!(cleanups["a"].source, COORDINATOR);
        gate.notify_one();
        cluster.expect_cleanups(&["b"]).await;
        common::eventually(
            "instance removed after cancel",
            Duration::from_secs(10),
            || async {
                children(&s, &format!("{}/{SIG}/running", cluster.base))
                    .await
                    .is_empty()
                    && children(&s, &format!("{}/{SIG}/acquired", cluster.base))
                        .await
                        .is_empty()
            },
        )
        .await;
        cluster.finish(target.name).await;
        eprintln!("{}: duplicate + cancel ok", target.name);
    }
}

/// Runs a coordinator in its own single-threaded runtime on a thread and "crashes" it (drops the
/// runtime: no closeSession, no cleanup task) once `crash` is notified.
fn crashing_coordinator(
    addr: String,
    base: String,
    members: Vec<String>,
    crash: Arc<Notify>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async move {
            let s = session(&addr, Duration::from_secs(1)).await;
            let coordinator = Coordinator::new(&s, &base);
            tokio::select! {
                _ = coordinator.run(SIG, "i1", b"t1", &members, Duration::from_secs(60)) => {
                    panic!("the procedure must not finish before the crash");
                }
                _ = crash.notified() => {}
            }
        });
        drop(rt);
    })
}

/// Starts members `a` (always succeeding) and `b` (`b_behavior`), runs a coordinator for them
/// and crashes it once member `crash_at.0` reported event `crash_at.1`.
async fn cluster_with_crashed_coordinator(
    addr: &str,
    b_behavior: Behavior,
    crash_at: (&'static str, Event),
) -> Cluster {
    let mut cluster = Cluster::start(addr, &[("a", Behavior::Ok), ("b", b_behavior)]).await;
    let crash = Arc::new(Notify::new());
    let thread = crashing_coordinator(
        addr.to_string(),
        cluster.base.clone(),
        cluster.names(),
        crash.clone(),
    );
    let (member, event) = crash_at;
    cluster
        .expect(
            |m, e| m == member && *e == event,
            &format!("{member} {event:?}"),
        )
        .await;
    crash.notify_one();
    thread.join().expect("coordinator thread");
    cluster
}

async fn wait_owner_gone(s: &Session, base: &str) {
    // The crashed coordinator's session must expire on the server first: that is how a new
    // coordinator knows the instance is orphaned.
    common::eventually(
        "crashed coordinator's session expires",
        Duration::from_secs(30),
        || async {
            children(s, &format!("{base}/{SIG}/running"))
                .await
                .is_empty()
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_coordinator_aborts_unreleased_and_finishes_released_instances() {
    for target in servers().await {
        // Crash before the barrier is released: the new coordinator aborts.
        let gate = Arc::new(Notify::new());
        let mut cluster = cluster_with_crashed_coordinator(
            &target.addr,
            Behavior::GateAcquire(gate.clone()),
            ("a", Event::Acquired),
        )
        .await;
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let coordinator = Coordinator::new(&s, &cluster.base);
        // While the old session lives, its instance is not touched.
        wait_owner_gone(&s, &cluster.base).await;
        let recovered = coordinator.recover(SIG).await.expect("recover");
        assert_eq!(recovered.len(), 1, "{}: {recovered:?}", target.name);
        let reason = recovered[0]
            .outcome
            .as_ref()
            .expect_err("aborted")
            .abort_reason()
            .expect("abort")
            .clone();
        assert_eq!(reason.source, COORDINATOR);
        assert!(reason.message.contains("restarted"), "{reason}");
        gate.notify_one();
        cluster.expect_cleanups(&["a", "b"]).await;
        cluster.finish(target.name).await;

        // Crash after the barrier is released: the new coordinator finishes it.
        let gate = Arc::new(Notify::new());
        let cluster = cluster_with_crashed_coordinator(
            &target.addr,
            Behavior::GateInside(gate.clone()),
            ("b", Event::Inside),
        )
        .await;
        wait_owner_gone(&s, &cluster.base).await;
        let coordinator = Coordinator::new(&s, &cluster.base);
        let recovering = tokio::spawn(async move { coordinator.recover(SIG).await });
        gate.notify_one();
        let recovered = recovering.await.expect("task").expect("recover");
        assert_eq!(recovered.len(), 1, "{}: {recovered:?}", target.name);
        let results = recovered[0].outcome.as_ref().expect("finished");
        assert_eq!(
            results.get("b").map(Vec::as_slice),
            Some(&b"b:t1"[..]),
            "{}",
            target.name
        );
        assert_eq!(results.len(), 2);
        cluster.finish(target.name).await;
        eprintln!("{}: coordinator restart ok", target.name);
    }
}

#[tokio::test]
async fn missing_member_and_bad_names_fail_fast() {
    for target in servers().await {
        let cluster = Cluster::start(&target.addr, &[("a", Behavior::Ok)]).await;
        let s = cluster.observer.clone();
        let coordinator = Coordinator::new(&s, &cluster.base);
        let start = Instant::now();
        let err = coordinator
            .run(
                SIG,
                "i1",
                b"",
                &names(&["a", "ghost"]),
                Duration::from_secs(60),
            )
            .await
            .expect_err("ghost is not registered");
        assert_eq!(err.abort_reason().map(|r| r.source.as_str()), Some("ghost"));
        assert!(start.elapsed() < Duration::from_secs(20));
        assert!(matches!(
            coordinator
                .run(SIG, "a/b", b"", &names(&["a"]), Duration::from_secs(1))
                .await,
            Err(ProcedureError::BadName(_))
        ));
        let other = session(&target.addr, Duration::from_secs(10)).await;
        let dup = Member::start(
            &other,
            &cluster.base,
            SIG,
            "a",
            Arc::new(TestFactory {
                behavior: Behavior::Ok,
                events: mpsc::unbounded_channel().0,
                acquired: watch::channel(0).0,
            }),
        )
        .await;
        assert!(
            matches!(dup, Err(ProcedureError::DuplicateMember(_))),
            "{dup:?}"
        );
        cluster.finish(target.name).await;
    }
}
