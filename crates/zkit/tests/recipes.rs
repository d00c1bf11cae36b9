//! ReadWriteLock, Semaphore, RevocableMutex, LeaseLock and SimpleLock against every server of
//! `common::servers()`.

mod common;

use std::time::Duration;

use common::{children, eventually, servers, session};
use zkit::lock::{LeaseLock, ReadWriteLock, RevocableMutex, Semaphore, SimpleLock};
use zkit::Error;
use zkit_testkit::unique_path;

/// How long an acquisition that must time out waits.
const SHORT: Duration = Duration::from_millis(300);
/// Bound for an acquisition that must succeed: generous, since a cold JVM under a parallel test
/// run can take longer than `SHORT` even for an uncontended lock.
const AMPLE: Duration = Duration::from_secs(10);

#[tokio::test]
async fn read_write_lock_semantics() {
    for target in servers().await {
        let path = unique_path("rw");
        let a = session(&target.addr, Duration::from_secs(10)).await;
        let b = session(&target.addr, Duration::from_secs(10)).await;
        let rw_a = ReadWriteLock::new(&a, &path);
        let rw_b = ReadWriteLock::new(&b, &path);

        // Readers share.
        let r1 = rw_a.read(Some(AMPLE)).await.expect("read a");
        let r2 = rw_b.read(Some(AMPLE)).await.expect("read b shares");
        // A writer waits for readers.
        assert!(
            matches!(rw_b.write(Some(SHORT)).await, Err(Error::BadArguments(_))),
            "no upgrade"
        );
        let rw_c = ReadWriteLock::new(&b, &path);
        assert!(matches!(
            rw_c.write(Some(SHORT)).await,
            Err(Error::Timeout(_))
        ));
        r1.release().await.expect("release");
        r2.release().await.expect("release");
        // A writer excludes readers and writers.
        let w = rw_c.write(Some(AMPLE)).await.expect("write");
        assert!(matches!(
            rw_a.read(Some(SHORT)).await,
            Err(Error::Timeout(_))
        ));
        assert!(matches!(
            ReadWriteLock::new(&a, &path).write(Some(SHORT)).await,
            Err(Error::Timeout(_))
        ));
        // ... but its holder may also read (downgrade).
        let r_own = rw_c.read(Some(AMPLE)).await.expect("writer may read");
        w.release().await.expect("release");
        // Readers behind the writer's remaining read lock may now share it.
        let r3 = rw_a
            .read(Some(AMPLE))
            .await
            .expect("read after write released");
        r_own.release().await.expect("release");
        r3.release().await.expect("release");
        let names = children(&a, &path).await;
        assert!(names.is_empty(), "{}: left {names:?}", target.name);
        eprintln!("{}: rw ok", target.name);
    }
}

#[tokio::test]
async fn semaphore_grants_at_most_n_leases() {
    for target in servers().await {
        let path = unique_path("sem");
        let a = session(&target.addr, Duration::from_secs(10)).await;
        let b = session(&target.addr, Duration::from_secs(10)).await;
        let sem_a = Semaphore::new(&a, &path, 2);
        let sem_b = Semaphore::new(&b, &path, 2);
        let l1 = sem_a.acquire(Some(AMPLE)).await.expect("lease 1");
        let l2 = sem_b.acquire(Some(AMPLE)).await.expect("lease 2");
        assert!(matches!(
            sem_b.acquire(Some(SHORT)).await,
            Err(Error::Timeout(_))
        ));
        eventually(
            "timed-out lease node removed",
            Duration::from_secs(10),
            || {
                let sem = sem_a.clone();
                async move { sem.lease_count().await.expect("count") == 2 }
            },
        )
        .await;
        let waiting = tokio::spawn({
            let sem = sem_b.clone();
            async move { sem.acquire(None).await }
        });
        l1.release().await.expect("release");
        let l3 = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("waiter gets the freed lease")
            .expect("task")
            .expect("lease 3");
        // Lease 3 and the releases went through b, perhaps on another ensemble member.
        a.client().sync(&path).await.expect("sync");
        assert_eq!(sem_a.lease_count().await.expect("count"), 2);
        l2.release().await.expect("release");
        l3.release().await.expect("release");
        a.client().sync(&path).await.expect("sync");
        assert_eq!(sem_a.lease_count().await.expect("count"), 0);
        eprintln!("{}: semaphore ok", target.name);
    }
}

#[tokio::test]
async fn revocable_mutex_holder_is_asked_to_release() {
    for target in servers().await {
        let path = unique_path("revocable");
        let a = session(&target.addr, Duration::from_secs(10)).await;
        let b = session(&target.addr, Duration::from_secs(10)).await;
        let guard = RevocableMutex::new(&a, &path).lock().await.expect("lock");
        let revoke = guard.revocation_requested();
        assert!(!revoke.is_cancelled());
        let other = RevocableMutex::new(&b, &path);
        // a locked through its own session, perhaps on another ensemble member.
        b.client().sync(&path).await.expect("sync");
        let holder = other.request_revoke().await.expect("revoke");
        assert_eq!(holder.as_deref(), guard.path().rsplit('/').next());
        tokio::time::timeout(Duration::from_secs(5), revoke.cancelled())
            .await
            .expect("holder told");
        assert!(!guard.is_lost(), "a revocation request is not a loss");
        guard.release().await.expect("release");
        other
            .lock()
            .await
            .expect("b locks")
            .release()
            .await
            .expect("release");
        eprintln!("{}: revocable ok", target.name);
    }
}

/// The lease lock's node is a TTL node: a holder that vanishes without releasing (here: its
/// guard is leaked with `mem::forget` and its session closed) loses it when the server reaps the
/// node, and the waiter then gets it. The holder's lost-signal fires at `max_locked_time`.
#[tokio::test]
async fn lease_lock_is_reaped_by_ttl() {
    for target in servers().await {
        let path = unique_path("lease");
        let a = session(&target.addr, Duration::from_secs(10)).await;
        let b = session(&target.addr, Duration::from_secs(10)).await;
        let ttl = Duration::from_millis(1500);
        let held = match LeaseLock::new(&a, &path, AMPLE, ttl).acquire().await {
            Err(Error::Unimplemented(why)) => {
                panic!("{}: TTL nodes refused: {why}", target.name)
            }
            other => other.expect("lease"),
        };
        let lost = held.lost();
        tokio::time::timeout(ttl * 2, lost.cancelled())
            .await
            .expect("lost-signal at max_locked_time");
        // Crash: no release, no cleanup; the node survives the session (it is persistent).
        std::mem::forget(held);
        a.close();
        drop(a);
        // Waiter: Apache reaps every second (scripts/apache-zk), the test server every 200 ms.
        let got = LeaseLock::new(&b, &path, Duration::from_secs(15), ttl)
            .acquire()
            .await
            .expect("waiter gets the lease after the TTL reaper");
        got.release().await.expect("release");
        eventually("all lease nodes gone", Duration::from_secs(5), || {
            let (b, p) = (b.clone(), path.clone());
            async move { children(&b, &p).await.is_empty() }
        })
        .await;
        eprintln!("{}: lease ok", target.name);
    }
}

#[tokio::test]
async fn simple_lock_unique_name() {
    for target in servers().await {
        let path = format!("{}/the-lock", unique_path("simple"));
        let a = session(&target.addr, Duration::from_secs(10)).await;
        let b = session(&target.addr, Duration::from_secs(10)).await;
        let g = SimpleLock::new(&a, &path)
            .lock(Some(AMPLE))
            .await
            .expect("lock");
        assert!(matches!(
            SimpleLock::new(&b, &path).lock(Some(SHORT)).await,
            Err(Error::Timeout(_))
        ));
        let waiter = tokio::spawn({
            let (b, p) = (b.clone(), path.clone());
            async move { SimpleLock::new(&b, &p).lock(None).await }
        });
        let token = g.fencing_token();
        g.release().await.expect("release");
        let g2 = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("waiter wakes")
            .expect("task")
            .expect("lock");
        assert!(g2.fencing_token() > token, "czxid grows");
        g2.release().await.expect("release");
        eprintln!("{}: simple ok", target.name);
    }
}
