//! `WalStorage`: txns persisted through the `Storage` trait come back after a restart, both at
//! the trait level and through a real server and client.

use zkit_client::{Acls, Client, CreateMode};
use zkit_core::{Txn, TxnOp};
use zkit_server::storage::durable::WalStorage;
use zkit_server::storage::wal::{FsyncMode, WalOptions};
use zkit_server::storage::Storage;
use zkit_server::{Server, ServerConfig};

fn txn(zxid: i64, op: TxnOp) -> Txn {
    Txn {
        zxid,
        session: 0x77,
        time: 1_700_000_000_000 + zxid,
        op,
    }
}

#[tokio::test]
async fn persisted_txns_are_recovered_and_the_dir_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let mut storage = WalStorage::open(dir.path(), WalOptions::default()).unwrap();
    assert!(storage.recover().await.unwrap().is_empty());
    let first = vec![
        txn(
            1,
            TxnOp::CreateSession {
                timeout_ms: 30_000,
                passwd: vec![9; 16],
            },
        ),
        txn(2, TxnOp::Error { err: -101 }),
    ];
    let second = vec![txn(3, TxnOp::CloseSession)];
    storage.submit(&first).await.unwrap();
    storage.submit(&second).await.unwrap();
    // A second server on the same dir is refused while this one lives.
    let err = WalStorage::open(dir.path(), WalOptions::default()).unwrap_err();
    assert!(
        err.to_string().contains("is in use by another zkit server"),
        "{err}"
    );
    drop(storage);

    let mut storage = WalStorage::open(dir.path(), WalOptions::default()).unwrap();
    let mut want = first;
    want.extend(second);
    assert_eq!(storage.recover().await.unwrap(), want);
    // Writing continues after the recovered zxids; reusing one is refused.
    assert!(storage
        .submit(&[txn(3, TxnOp::CloseSession)])
        .await
        .is_err());
}

#[tokio::test]
async fn a_server_on_wal_storage_keeps_nodes_across_restart() {
    let dir = tempfile::tempdir().unwrap();
    let opts = WalOptions {
        fsync: FsyncMode::Always,
        ..WalOptions::default()
    };
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let storage = WalStorage::open(dir.path(), opts.clone()).unwrap();
    let server = Server::start_with_storage(ServerConfig::ephemeral(), Box::new(storage))
        .await
        .unwrap();
    let zk = Client::connect(&server.addr().to_string()).await.unwrap();
    zk.create("/durable", b"v1", &persistent).await.unwrap();
    zk.set_data("/durable", b"v2", None).await.unwrap();
    zk.create("/durable/child", b"c", &persistent)
        .await
        .unwrap();
    zk.delete("/durable/child", None).await.unwrap();
    drop(zk);
    server.stop().await;

    let storage = WalStorage::open(dir.path(), opts).unwrap();
    let server = Server::start_with_storage(ServerConfig::ephemeral(), Box::new(storage))
        .await
        .unwrap();
    let zk = Client::connect(&server.addr().to_string()).await.unwrap();
    let (data, stat) = zk.get_data("/durable").await.unwrap();
    assert_eq!((data.as_slice(), stat.version), (&b"v2"[..], 1));
    assert!(zk.list_children("/durable").await.unwrap().is_empty());
    drop(zk);
    server.stop().await;
}
