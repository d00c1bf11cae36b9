//! Four-letter words: answers in ZooKeeper's formats (parsed here the way monitoring scripts
//! parse them), consistent with the data tree, and the whitelist.

mod common;

use std::collections::HashMap;

use common::{client, four_letter};
use zkit_client::{Acls, CreateMode};
use zkit_server::{FourLetterWhitelist, Server, ServerConfig};

/// `key: value` lines (srvr/stat) or `key<TAB>value` lines (mntr).
fn parse(text: &str, sep: &str) -> HashMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(sep))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[tokio::test]
async fn answers_match_zookeeper_formats() {
    let server = Server::start(ServerConfig::ephemeral()).await.unwrap();
    let addr = server.addr();
    assert_eq!(four_letter(addr, "ruok").await, "imok");

    let before = parse(&four_letter(addr, "srvr").await, ": ");
    let nodes_before: u64 = before["Node count"].parse().unwrap();
    assert_eq!(before["Mode"], "standalone");
    assert!(before["Zookeeper version"].starts_with("3.8"));

    let zk = client(addr).await;
    let mut last_zxid = 0;
    for i in 0..3 {
        let (stat, _) = zk
            .create(
                &format!("/n{i}"),
                b"abc",
                &CreateMode::Persistent.with_acls(Acls::anyone_all()),
            )
            .await
            .unwrap();
        last_zxid = stat.czxid;
    }

    let srvr = four_letter(addr, "srvr").await;
    let after = parse(&srvr, ": ");
    for key in [
        "Latency min/avg/max",
        "Received",
        "Sent",
        "Connections",
        "Outstanding",
    ] {
        assert!(after.contains_key(key), "srvr lacks {key:?}:\n{srvr}");
    }
    assert_eq!(
        after["Node count"].parse::<u64>().unwrap(),
        nodes_before + 3
    );
    assert_eq!(after["Zxid"], format!("{last_zxid:#x}"));
    let latency: Vec<&str> = after["Latency min/avg/max"].split('/').collect();
    assert_eq!(latency.len(), 3);
    assert!(after["Received"].parse::<u64>().unwrap() > 0);
    // The client session and this four-letter connection.
    assert!(after["Connections"].parse::<u64>().unwrap() >= 2);

    let stat = four_letter(addr, "stat").await;
    assert!(stat.contains("Clients:\n /127.0.0.1:"), "{stat}");
    assert_eq!(parse(&stat, ": ")["Node count"], after["Node count"]);

    let mntr = parse(&four_letter(addr, "mntr").await, "\t");
    assert_eq!(mntr["zk_server_state"], "standalone");
    assert_eq!(mntr["zk_znode_count"], after["Node count"]);
    assert_eq!(mntr["zk_global_sessions"], "1");
    assert!(mntr["zk_approximate_data_size"].parse::<u64>().unwrap() >= 9);

    let conf = parse(&four_letter(addr, "conf").await, "=");
    assert_eq!(conf["clientPort"], addr.port().to_string());
    assert_eq!(conf["tickTime"], "2000");
    assert_eq!(conf["minSessionTimeout"], "4000");
    assert_eq!(conf["maxSessionTimeout"], "40000");

    let envi = four_letter(addr, "envi").await;
    assert!(envi.starts_with("Environment:\n"), "{envi}");
    assert!(parse(&envi, "=").contains_key("zookeeper.version"));

    drop(zk);
    server.stop().await;
}

#[tokio::test]
async fn whitelist_is_enforced_like_zookeeper() {
    let server = Server::start(ServerConfig {
        four_letter_words: FourLetterWhitelist::default(),
        ..ServerConfig::ephemeral()
    })
    .await
    .unwrap();
    let addr = server.addr();
    assert_eq!(
        four_letter(addr, "ruok").await,
        "ruok is not executed because it is not in the whitelist.\n"
    );
    assert_eq!(
        four_letter(addr, "mntr").await,
        "mntr is not executed because it is not in the whitelist.\n"
    );
    assert!(four_letter(addr, "srvr")
        .await
        .starts_with("Zookeeper version: "));
    server.stop().await;
}
