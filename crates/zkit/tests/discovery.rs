//! Service discovery against every server of `common::servers()`: registration in Curator's
//! layout and JSON, queries, updates, the watched cache, providers, re-registration after a
//! real session loss (a black-holed link, `FaultProxy`), and failover between the members of a
//! `zkit_server::testing::TestingCluster`.

mod common;

use std::time::Duration;

use common::{eventually, servers, session};
use serde::{Deserialize, Serialize};
use zkit::discovery::{
    DownInstancePolicy, JsonInstanceSerializer, ProviderStrategy, ServiceDiscovery,
    ServiceInstance, ServiceType, UriSpec,
};
use zkit::zkit_client as zk;
use zkit_testkit::{unique_path, FaultProxy};

const LIMIT: Duration = Duration::from_secs(20);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Details {
    zone: String,
    weight: u32,
}

fn api(id: &str, port: u16, zone: &str) -> ServiceInstance<Details> {
    ServiceInstance::new("api")
        .with_id(id)
        .with_address("10.0.0.1")
        .with_port(port)
        .with_payload(Details {
            zone: zone.into(),
            weight: 1,
        })
        .with_uri_spec(UriSpec::parse("{scheme}://{address}:{port}").unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_query_update_cache_and_provide() {
    for target in servers().await {
        let name = target.name;
        let base = unique_path("services");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let discovery = ServiceDiscovery::<Details>::new(&s, &base).unwrap();
        let (a, b) = (api("a", 8001, "x"), api("b", 8002, "y"));
        let db = ServiceInstance::new("db")
            .with_id("primary")
            .with_port(5432)
            .with_service_type(ServiceType::Static);
        discovery.register(&a).await.unwrap();
        discovery.register(&b).await.unwrap();
        discovery.register(&db).await.unwrap();

        // Curator's layout and exact JSON; ephemeral for DYNAMIC, persistent for STATIC.
        let client = s.client();
        let (data, stat) = client.get_data(&format!("{base}/api/a")).await.unwrap();
        assert_eq!(
            data,
            JsonInstanceSerializer::new().serialize(&a).unwrap(),
            "{name}"
        );
        assert_eq!(stat.ephemeral_owner, s.session_id(), "{name}");
        let (_, stat) = client
            .get_data(&format!("{base}/db/primary"))
            .await
            .unwrap();
        assert_eq!(stat.ephemeral_owner, 0, "{name}: static is persistent");

        assert_eq!(
            discovery.query_for_names().await.unwrap(),
            vec!["api", "db"]
        );
        let found = discovery.query_for_instances("api").await.unwrap();
        let ids: Vec<&str> = found.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, vec!["a", "b"], "{name}");
        assert_eq!(found[0].build_uri(), "http://10.0.0.1:8001");
        assert_eq!(found[0].payload, a.payload);
        assert_eq!(
            discovery.query_for_instance("api", "nope").await.unwrap(),
            None
        );

        // The cache sees the instances, an update, and an unregistration.
        let cache = discovery.cache("api").unwrap();
        cache
            .wait_for(LIMIT, |s| s.initialized && s.instances.len() == 2)
            .await
            .unwrap_or_else(|e| panic!("{name}: cache: {e}"));
        let mut moved = a.clone();
        moved.payload = Some(Details {
            zone: "z".into(),
            weight: 9,
        });
        discovery.update(&moved).await.unwrap();
        cache
            .wait_for(LIMIT, |s| {
                s.instances
                    .iter()
                    .any(|i| i.id == "a" && i.payload.as_ref().map(|p| p.weight) == Some(9))
            })
            .await
            .unwrap_or_else(|e| panic!("{name}: cache missed the update: {e}"));

        // Providers: round robin alternates; noted errors take an instance out; sticky sticks.
        let rr = discovery.provider("api").build().unwrap();
        rr.wait_initialized(LIMIT).await.unwrap();
        rr.cache()
            .wait_for(LIMIT, |s| s.instances.len() == 2)
            .await
            .unwrap();
        let picks: Vec<String> = (0..4).map(|_| rr.instance().unwrap().id).collect();
        assert_eq!(picks, vec!["a", "b", "a", "b"], "{name}");
        let down = discovery
            .provider("api")
            .down_instance_policy(DownInstancePolicy {
                timeout: Duration::from_secs(60),
                error_threshold: 1,
            })
            .build()
            .unwrap();
        down.cache()
            .wait_for(LIMIT, |s| s.instances.len() == 2)
            .await
            .unwrap();
        let first = down.instance().unwrap();
        down.note_error(&first);
        for _ in 0..3 {
            assert_ne!(
                down.instance().unwrap().id,
                first.id,
                "{name}: down instance chosen"
            );
        }
        let sticky = discovery
            .provider("api")
            .strategy(ProviderStrategy::Sticky(Box::new(ProviderStrategy::Random)))
            .filter(|i| i.payload.as_ref().is_some_and(|p| p.zone != "y"))
            .build()
            .unwrap();
        sticky
            .cache()
            .wait_for(LIMIT, |s| s.instances.len() == 2)
            .await
            .unwrap();
        for _ in 0..3 {
            assert_eq!(
                sticky.instance().unwrap().id,
                "a",
                "{name}: filter and stickiness"
            );
        }

        discovery.unregister("b").await.unwrap();
        cache
            .wait_for(LIMIT, |s| s.instances.len() == 1)
            .await
            .unwrap_or_else(|e| panic!("{name}: cache missed the removal: {e}"));
        assert!(client
            .check_stat(&format!("{base}/api/b"))
            .await
            .unwrap()
            .is_none());

        // close() removes everything registered here, persistent ones included.
        discovery.close().await;
        assert!(client
            .check_stat(&format!("{base}/api/a"))
            .await
            .unwrap()
            .is_none());
        assert!(client
            .check_stat(&format!("{base}/db/primary"))
            .await
            .unwrap()
            .is_none());
        eprintln!("{name}: discovery ok");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_comes_back_after_session_loss_and_deletion() {
    for target in servers().await {
        let name = target.name;
        let base = unique_path("services-loss");
        let proxy = FaultProxy::start(target.addr.clone()).await.expect("proxy");
        let s = session(&proxy.connect_string(), Duration::from_secs(2)).await;
        let observer = session(&target.addr, Duration::from_secs(10)).await;
        let discovery = ServiceDiscovery::<Details>::new(&s, &base).unwrap();
        discovery.register(&api("a", 1, "x")).await.unwrap();
        let path = format!("{base}/api/a");
        // `sync` first: the observer may be served by another ensemble member than `s`.
        let owner = |o: zkit::Session, p: String| async move {
            o.client().sync(&p).await.unwrap();
            o.client()
                .check_stat(&p)
                .await
                .unwrap()
                .map(|stat| stat.ephemeral_owner)
        };
        let first_owner = owner(observer.clone(), path.clone()).await;
        assert_eq!(first_owner, Some(s.session_id()));

        // Someone deletes it: it is recreated at once.
        observer.client().sync(&path).await.unwrap();
        observer.client().delete(&path, None).await.unwrap();
        eventually("re-created after deletion", LIMIT, || {
            let (o, p) = (observer.clone(), path.clone());
            async move { owner(o, p).await.is_some() }
        })
        .await;

        // A real session loss: the link is black-holed past the session timeout, the server
        // expires the session (its ephemeral node goes), the session layer builds a new one.
        proxy.pause();
        eventually("the server expired the session", LIMIT, || {
            let (o, p) = (observer.clone(), path.clone());
            async move { owner(o, p).await.is_none() }
        })
        .await;
        proxy.resume();
        eventually("re-registered on the new session", LIMIT, || {
            let (o, p, s) = (observer.clone(), path.clone(), s.clone());
            async move { s.generation() > 1 && owner(o, p).await == Some(s.session_id()) }
        })
        .await;
        assert_ne!(owner(observer.clone(), path.clone()).await, first_owner);
        discovery.wait_registered("a", LIMIT).await.unwrap();
        discovery.close().await;
        assert_eq!(owner(observer.clone(), path.clone()).await, None, "{name}");
        eprintln!("{name}: re-registration ok");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_between_testing_cluster_members_re_registers() {
    let cluster = zkit_server::testing::TestingCluster::start(2)
        .await
        .expect("cluster");
    let s = session(&cluster.connect_string(), Duration::from_secs(2)).await;
    let discovery = ServiceDiscovery::<Details>::new(&s, "/services").unwrap();
    discovery.register(&api("a", 1, "x")).await.unwrap();
    let on = cluster.connected_members();
    assert_eq!(on.len(), 1, "{on:?}");
    let other = 1 - on[0];
    // Members are independent (not an ensemble): the other one has no registration yet. Make
    // its zxid history longer than the first member's so that it accepts the failing-over
    // client (ZooKeeper refuses clients that have seen a later zxid).
    let observer = session(&cluster.addr(other).to_string(), Duration::from_secs(10)).await;
    for i in 0..10 {
        observer
            .client()
            .create(
                &format!("/filler-{i}"),
                b"",
                &zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all()),
            )
            .await
            .unwrap();
    }
    assert!(observer
        .client()
        .check_stat("/services/api/a")
        .await
        .unwrap()
        .is_none());
    cluster.stop(on[0]).await;
    eventually("registered on the other member", LIMIT, || {
        let o = observer.clone();
        async move {
            o.client()
                .check_stat("/services/api/a")
                .await
                .unwrap()
                .is_some()
        }
    })
    .await;
    assert!(s.generation() > 1, "a new session on the other member");
    discovery.close().await;
    cluster.shutdown().await;
}
