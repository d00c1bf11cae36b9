//! Session layer and protected creates against every server of `common::servers()`, with real
//! connection faults from `zkit_testkit::FaultProxy`.

mod common;

use std::time::Duration;

use common::{children, eventually, servers, session};
use zkit::protected::{create_protected_sequential_with, protected_marker, ProtectedCreate};
use zkit::zkit_client::CreateMode;
use zkit::{retry, RetryPolicy, SessionState};
use zkit_testkit::{unique_path, FaultProxy};

#[tokio::test]
async fn dropped_connection_is_suspended_then_reconnected_same_session() {
    for target in servers().await {
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let s = session(&proxy.connect_string(), Duration::from_secs(10)).await;
        assert_eq!(s.state().state, SessionState::Connected);
        assert_eq!(s.generation(), 1);
        let id = s.session_id();
        let mut events = s.subscribe();
        proxy.drop_connections().await;
        let mut seen = Vec::new();
        while !seen.contains(&SessionState::Reconnected) {
            let event = tokio::time::timeout(Duration::from_secs(15), events.recv())
                .await
                .expect("event in time")
                .expect("event");
            assert_eq!(event.generation, 1);
            assert_eq!(event.session_id, id);
            seen.push(event.state);
        }
        assert_eq!(
            seen,
            vec![SessionState::Suspended, SessionState::Reconnected]
        );
        assert_eq!(s.session_id(), id);
        s.close();
        let closed = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                if events.recv().await.expect("event").state == SessionState::Closed {
                    return;
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "{}: Closed emitted", target.name);
        eprintln!("{}: suspended/reconnected ok", target.name);
    }
}

/// The validity rule on a real server: a black-holed link is `Suspended` with `valid_until`
/// standing still, and `Lost` comes when that deadline passes (not a full session timeout after
/// the disconnect); the old client is ended as expired and a new session built. A link that comes back
/// inside the window is `Reconnected`, same session, no `Lost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_exactly_when_the_validity_deadline_passes() {
    for target in servers().await {
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let requested = target.min_session_timeout.max(Duration::from_secs(4));
        let s = session(&proxy.connect_string(), requested).await;
        let timeout = s.session_timeout();
        let mut events = s.subscribe();

        // Inside the window: no Lost, the same session.
        proxy.pause();
        let frozen = s.valid_until().expect("valid while connected");
        tokio::time::timeout(timeout, async {
            while events.recv().await.expect("event").state != SessionState::Suspended {}
        })
        .await
        .expect("Suspended on a black-holed link");
        assert_eq!(
            s.valid_until(),
            Some(frozen),
            "{}: frozen while suspended",
            target.name
        );
        proxy.resume();
        proxy.drop_connections().await;
        let back = tokio::time::timeout(timeout * 2, async {
            loop {
                match events.recv().await.expect("event").state {
                    SessionState::Reconnected => return true,
                    SessionState::Lost => return false,
                    _ => {}
                }
            }
        })
        .await
        .expect("an outcome in time");
        assert!(
            back,
            "{}: a reconnect inside the window is not Lost",
            target.name
        );
        assert_eq!(s.generation(), 1);
        assert!(s.valid_until().expect("valid again") > frozen);

        // Past the window: Lost at the deadline.
        proxy.pause();
        let deadline = s.valid_until().expect("valid");
        let lost_at = tokio::time::timeout(timeout * 3, async {
            while events.recv().await.expect("event").state != SessionState::Lost {}
            tokio::time::Instant::now()
        })
        .await
        .expect("Lost in time");
        assert!(
            lost_at >= deadline,
            "{}: Lost before the deadline",
            target.name
        );
        // Scheduling slack only: a disconnect-based rule would come up to a timeout later.
        assert!(
            lost_at < deadline + timeout / 4,
            "{}: Lost {:?} after the deadline",
            target.name,
            lost_at - deadline
        );
        assert_eq!(
            s.valid_until(),
            None,
            "{}: nothing is valid once Lost",
            target.name
        );
        let old = s.client();
        proxy.resume();
        let event = tokio::time::timeout(timeout * 3, s.wait_connected())
            .await
            .expect("a new session in time")
            .expect("connected");
        assert_eq!(event.generation, 2);
        // The old client is ended as expired: it cannot revive the old session. Its close was
        // queued before `Lost`; if the link was up again by then (a black-holed connection that
        // the resume revived), the close is a closeSession the server answers, so the client
        // reaches `Expired` once that answer is in, which may come after the new session.
        let mut old_state = old.state_watcher();
        let closed = tokio::time::timeout(timeout, async {
            let mut state = old_state.state();
            while !state.is_terminated() {
                state = old_state.changed().await;
            }
            state
        })
        .await;
        assert_eq!(
            closed,
            Ok(zkit::zkit_client::SessionState::Expired),
            "{}",
            target.name
        );
        // A request that still uses it fails as a lost session does, not as a closed `Session`
        // (which recipes take for the end of their work).
        let late = old
            .check_stat("/")
            .await
            .map(|_| ())
            .map_err(zkit::Error::from);
        assert_eq!(late, Err(zkit::Error::SessionExpired), "{}", target.name);
        assert!(!s.is_closed());
        s.close();
        eprintln!("{}: validity deadline ok", target.name);
    }
}

/// A ConnectRequest held by the link and let through late: the new session's validity counts
/// from the request's send, so most of it is spent when the answer arrives. The session layer
/// renews it before handing the session out, rather than declaring a healthy session `Lost` at
/// once. (Not on the ensemble: there the client gives up on a held member after a third of the
/// timeout and tries the next, so no answer comes that late.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_answered_late_starts_with_its_validity_renewed() {
    for target in servers().await {
        if target.kind == zkit_testkit::TargetKind::Ensemble {
            continue;
        }
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let requested = target.min_session_timeout.max(Duration::from_secs(4));
        proxy.pause();
        let addr = proxy.connect_string();
        let connect = tokio::spawn(async move { session(&addr, requested).await });
        // Let the request wait past 60 % of the timeout: without a renewal, at most 30 % of
        // it (90 % minus the 60 % spent) would be left.
        tokio::time::sleep(requested * 6 / 10).await;
        proxy.resume();
        let s = connect.await.expect("connect task");
        assert_eq!(s.session_timeout(), requested, "{}", target.name);
        let left = s
            .valid_until()
            .unwrap_or_else(|| panic!("{}: valid once connected", target.name))
            .saturating_duration_since(tokio::time::Instant::now());
        assert!(
            left > requested / 2,
            "{}: only {left:?} of validity left on a new session",
            target.name
        );
        assert_eq!(s.generation(), 1, "{}", target.name);
        s.close();
        eprintln!("{}: late connect renewed, {left:?} left", target.name);
    }
}

#[tokio::test]
async fn digest_auth_and_chroot_from_the_connect_string() {
    for target in servers().await {
        let root = unique_path("chroot");
        let plain = session(&target.addr, Duration::from_secs(10)).await;
        plain
            .client()
            .create(
                &root,
                b"",
                &CreateMode::Persistent.with_acls(zkit::zkit_client::Acls::anyone_all()),
            )
            .await
            .expect("create root");
        let chrooted = zkit::Session::connect(
            &format!("{}{root}", target.addr),
            zkit::SessionOptions::default().with_digest_auth("alice:secret"),
        )
        .await
        .expect("chrooted session with auth");
        let node = chrooted
            .create_protected_sequential("/job-", b"x", CreateMode::PersistentSequential)
            .await
            .expect("create under chroot");
        assert!(
            node.name.starts_with("_c_") && node.name.contains("-job-"),
            "{node:?}"
        );
        let seen = children(&plain, &root).await;
        assert_eq!(seen, vec![node.name.clone()], "{}", target.name);
    }
}

/// The create is sent into a black-holed link and the connection is then dropped, so the
/// outcome is unknown to the client; the protected create must end with exactly one node.
/// Repeated under connection churn: whichever way each attempt went, never two nodes per call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protected_create_survives_connection_loss_without_double_create() {
    for target in servers().await {
        let parent = unique_path("protected");
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let s = session(&proxy.connect_string(), Duration::from_secs(10)).await;
        let observer = session(&target.addr, Duration::from_secs(10)).await;
        let patient = ProtectedCreate {
            policy: RetryPolicy::UntilElapsed {
                max_elapsed: Duration::from_secs(20),
                sleep: Duration::from_millis(20),
            },
            mode: CreateMode::PersistentSequential,
            ..ProtectedCreate::ephemeral()
        };
        // Deterministic: the create never reaches the server, the retry creates it once.
        proxy.pause();
        let create = tokio::spawn({
            let (s, prefix, options) = (s.clone(), format!("{parent}/job-"), patient.clone());
            async move { create_protected_sequential_with(&s, &prefix, b"", &options).await }
        });
        tokio::task::yield_now().await;
        proxy.drop_connections().await;
        proxy.resume();
        let node = create.await.expect("task").expect("created");
        assert_eq!(children(&observer, &parent).await, vec![node.name.clone()]);

        // Churn: drop connections while creating; every call must yield exactly one node.
        let mut made = vec![node.name];
        for round in 0..20 {
            let options = ProtectedCreate {
                uuid: uuid_for(round),
                ..patient.clone()
            };
            let create = tokio::spawn({
                let (s, prefix, options) = (s.clone(), format!("{parent}/job-"), options.clone());
                async move { create_protected_sequential_with(&s, &prefix, b"", &options).await }
            });
            if round % 2 == 0 {
                tokio::task::yield_now().await;
            }
            proxy.drop_connections().await;
            let node = create.await.expect("task").expect("created");
            let marker = protected_marker(&options.uuid);
            let mine: Vec<String> = children(&observer, &parent)
                .await
                .into_iter()
                .filter(|c| c.starts_with(&marker))
                .collect();
            assert_eq!(
                mine,
                vec![node.name.clone()],
                "{}: round {round}",
                target.name
            );
            made.push(node.name);
        }
        let mut all = children(&observer, &parent).await;
        all.sort();
        made.sort();
        assert_eq!(all, made, "{}", target.name);
        eprintln!("{}: protected create ok", target.name);
    }
}

fn uuid_for(round: u32) -> String {
    format!("{:08x}-0000-4000-8000-{:012x}", round, std::process::id())
}

/// A protected create that gives up (policy `Never`) after an uncertain attempt deletes the
/// node in the background if it was created after all: no orphan.
#[tokio::test]
async fn giving_up_leaves_no_orphan() {
    for target in servers().await {
        let parent = unique_path("orphan");
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let s = session(&proxy.connect_string(), Duration::from_secs(10)).await;
        let observer = session(&target.addr, Duration::from_secs(10)).await;
        observer
            .client()
            .create(
                &parent,
                b"",
                &CreateMode::Persistent.with_acls(zkit::zkit_client::Acls::anyone_all()),
            )
            .await
            .expect("parent");
        let options = ProtectedCreate {
            policy: RetryPolicy::Never,
            mode: CreateMode::PersistentSequential,
            ..ProtectedCreate::ephemeral()
        };
        let create = tokio::spawn({
            let (s, prefix, options) = (s.clone(), format!("{parent}/job-"), options.clone());
            async move { create_protected_sequential_with(&s, &prefix, b"", &options).await }
        });
        proxy.drop_connections().await;
        match create.await.expect("task") {
            Ok(node) => {
                // The create won the race with the drop: the node is the caller's to delete.
                observer.client().sync(&node.path).await.expect("sync");
                observer
                    .client()
                    .delete(&node.path, None)
                    .await
                    .expect("delete");
            }
            Err(err) => assert!(err.is_recoverable(), "{err:?}"),
        }
        eventually("no orphan", Duration::from_secs(15), || {
            let (o, p) = (observer.clone(), parent.clone());
            async move { children(&o, &p).await.is_empty() }
        })
        .await;
        eprintln!("{}: orphan cleanup ok", target.name);
    }
}

/// A resilient config updater in a few lines on `retry`: read-modify-write with a version check;
/// ConnectionLoss retried by the policy, BadVersion by re-reading.
#[tokio::test]
async fn config_updater_on_retry() {
    for target in servers().await {
        let path = unique_path("config");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let policy = RetryPolicy::default();
        let anyone = CreateMode::Persistent.with_acls(zkit::zkit_client::Acls::anyone_all());
        s.client()
            .create(&path, b"0", &anyone)
            .await
            .expect("create");
        let writers: Vec<_> = (0..4)
            .map(|_| {
                let (s, path, policy) = (s.clone(), path.clone(), policy.clone());
                tokio::spawn(async move {
                    for _ in 0..10 {
                        loop {
                            let (data, stat) = retry(&policy, || s.client().get_data(&path))
                                .await
                                .expect("get");
                            let n: u64 = String::from_utf8_lossy(&data).parse().expect("number");
                            let next = (n + 1).to_string();
                            match retry(&policy, || {
                                s.client()
                                    .set_data(&path, next.as_bytes(), Some(stat.version))
                            })
                            .await
                            {
                                Ok(_) => break,
                                Err(zkit::Error::BadVersion) => continue,
                                Err(err) => panic!("{err}"),
                            }
                        }
                    }
                })
            })
            .collect();
        for w in writers {
            w.await.expect("writer");
        }
        let (data, _) = s.client().get_data(&path).await.expect("get");
        assert_eq!(data, b"40", "{}", target.name);
    }
}
