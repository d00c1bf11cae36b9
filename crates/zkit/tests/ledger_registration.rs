//! Bookie registration through `zkit::ledger::ZkRegistrationManager` against real servers
//! (the embedded zkit server, and Apache ZooKeeper when configured): a real bookie's ephemeral
//! appears under `available/`, moves under `available/readonly/` in read-only mode and back,
//! disappears on stop and when its session ends; the cookie and instance id are kept in
//! ZooKeeper and a wiped data dir is refused.

mod common;
mod ledger_common;

use std::sync::Arc;
use std::time::Duration;

use common::{children, eventually, servers, session};
use ledger_common::config;
use zkit::ledger::ZkRegistrationManager;
use zkit_bookie::cookie::CookieError;
use zkit_bookie::{Bookie, BookieError};

const LIMIT: Duration = Duration::from_secs(20);

#[tokio::test]
async fn registration_follows_the_bookie_mode_and_life() {
    for target in servers().await {
        let name = target.name;
        let root = format!("/ledgers-{}", uuid::Uuid::new_v4().simple());
        let observer = session(&target.addr, Duration::from_secs(10)).await;
        let s = session(&target.addr, Duration::from_secs(4)).await;
        let tmp = tempfile::tempdir().unwrap();
        let data = tmp.path().join("data");
        let reg = Arc::new(ZkRegistrationManager::with_root(&s, &root));
        let bookie = Bookie::start(config(&data, 0), reg.clone()).await.unwrap();
        let id = bookie.bookie_id().to_string();
        let port = bookie.addr().port();
        let available = format!("{root}/available");
        let readonly = format!("{root}/available/readonly");

        // Registered: an ephemeral of the bookie's session. `sync` first: the observer may be
        // served by another ensemble member than the bookie's session.
        observer.client().sync(&root).await.unwrap();
        let (_, stat) = observer
            .client()
            .get_data(&format!("{available}/{id}"))
            .await
            .unwrap_or_else(|e| panic!("{name}: not registered: {e}"));
        assert_eq!(stat.ephemeral_owner, s.session_id(), "{name}");
        assert!(observer
            .client()
            .check_stat(&format!("{root}/cookies/{id}"))
            .await
            .unwrap()
            .is_some());
        assert!(observer
            .client()
            .check_stat(&format!("{root}/INSTANCEID"))
            .await
            .unwrap()
            .is_some());

        // Read-only: moves under readonly/, and back.
        bookie.force_read_only(true);
        eventually("read-only registration", LIMIT, || async {
            children(&observer, &readonly).await == vec![id.clone()]
                && !children(&observer, &available).await.contains(&id)
        })
        .await;
        bookie.force_read_only(false);
        eventually("writable registration", LIMIT, || async {
            children(&observer, &available).await.contains(&id)
                && children(&observer, &readonly).await.is_empty()
        })
        .await;

        // Stop: gone.
        bookie.stop().await;
        assert!(
            !children(&observer, &available).await.contains(&id),
            "{name}"
        );
        assert!(children(&observer, &readonly).await.is_empty(), "{name}");

        // Restart on the same dir and address: the cookies agree. Halted (no unregister),
        // the node goes with its session.
        let bookie = Bookie::start(config(&data, port), reg.clone())
            .await
            .unwrap_or_else(|e| panic!("{name}: restart refused: {e}"));
        assert!(children(&observer, &available).await.contains(&id));
        bookie.halt().await;
        assert!(children(&observer, &available).await.contains(&id));
        drop(reg);
        s.close();
        eventually("ephemeral gone with the session", LIMIT, || async {
            !children(&observer, &available).await.contains(&id)
        })
        .await;

        // A wiped data dir is refused: ZooKeeper still has the cookie.
        std::fs::remove_dir_all(&data).unwrap();
        let s2 = session(&target.addr, Duration::from_secs(4)).await;
        let reg2 = Arc::new(ZkRegistrationManager::with_root(&s2, &root));
        match Bookie::start(config(&data, port), reg2).await {
            Err(BookieError::Cookie(CookieError::MissingLocal(_))) => {}
            r => panic!("{name}: wiped dir accepted: {r:?}"),
        }
        assert!(!children(&observer, &available).await.contains(&id));
        s2.close();
        observer.close();
    }
}
