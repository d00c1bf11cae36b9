//! Queue interop with Apache Curator (Java) `SimpleDistributedQueue` on the same path: items a
//! Curator producer offers are claimed and acked by zkit in FIFO order, and items zkit offers are
//! taken by Curator in FIFO order (the `qn-` names are shared; zkit's claim nodes are removed by
//! the acks, so Curator never sees one here). The Java side is compiled with `javac` from
//! Debian's `libcurator-recipes-java` jars, as in `curator_interop.rs`.
//!
//! Runs against Apache ZooKeeper and the zkit server. Skips (with a SKIP line) when `javac` or
//! the Curator jars are missing, except under `CI`, where that fails.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{javac, servers, session, skip_curator};
use zkit::queue::Queue;
use zkit_testkit::curator_classpath;
use zkit_testkit::unique_path;

const ITEMS: usize = 20;

const JAVA: &str = r#"
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.*;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.framework.recipes.queue.SimpleDistributedQueue;

public class CuratorQueue {
    public static void main(String[] args) throws Exception {
        String connect = args[0], path = args[1], mode = args[2];
        int n = Integer.parseInt(args[3]);
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 10000, 5000,
            new ExponentialBackoffRetry(100, 5));
        client.start();
        client.blockUntilConnected(30, TimeUnit.SECONDS);
        SimpleDistributedQueue queue = new SimpleDistributedQueue(client, path);
        for (int i = 0; i < n; i++) {
            if (mode.equals("offer")) {
                if (!queue.offer(("java-" + i).getBytes())) throw new IllegalStateException("offer");
            } else {
                byte[] item = queue.poll(60, TimeUnit.SECONDS);
                if (item == null) throw new IllegalStateException("nothing to take");
                System.out.println(new String(item));
            }
        }
        client.close();
    }
}
"#;

/// Runs the Java side to completion (bounded) and returns its stdout lines.
async fn java(dir: &Path, classpath: &str, args: &[&str]) -> Vec<String> {
    let child = tokio::process::Command::new("java")
        .arg("-cp")
        .arg(format!("{}:{classpath}", dir.display()))
        .arg("CuratorQueue")
        .args(args)
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start java");
    let out = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .expect("java finishes")
        .expect("java output");
    assert!(out.status.success(), "java {args:?} failed: {out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_simple_queue_and_zkit_claims_share_a_queue() {
    let Some(classpath) = curator_classpath() else {
        return skip_curator(
            "curator queue interop",
            "Curator jars not found in /usr/share/java (libcurator-recipes-java)",
        );
    };
    let dir = tempfile::tempdir().expect("tempdir");
    if !javac(dir.path(), "CuratorQueue", JAVA, &classpath) {
        return skip_curator("curator queue interop", "javac failed or is missing");
    }
    let n = ITEMS.to_string();
    for target in servers().await {
        let name = target.name;
        let path = unique_path("curator-queue");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let queue = Queue::new(&s, &path).unwrap();

        // Curator produces, zkit claims and acks: FIFO, nothing left.
        java(dir.path(), &classpath, &[&target.addr, &path, "offer", &n]).await;
        let mut got = Vec::new();
        for _ in 0..ITEMS {
            let claim = tokio::time::timeout(Duration::from_secs(20), queue.claim())
                .await
                .expect("an item")
                .expect("claim");
            got.push(String::from_utf8_lossy(&claim.item().data).into_owned());
            claim.ack().await.expect("ack");
        }
        let want: Vec<String> = (0..ITEMS).map(|i| format!("java-{i}")).collect();
        assert_eq!(got, want, "{name}");
        assert!(queue.try_claim().await.unwrap().is_none(), "{name}");

        // zkit produces, Curator takes: FIFO.
        for i in 0..ITEMS {
            queue.offer(format!("zkit-{i}").as_bytes()).await.unwrap();
        }
        let taken = java(dir.path(), &classpath, &[&target.addr, &path, "take", &n]).await;
        let want: Vec<String> = (0..ITEMS).map(|i| format!("zkit-{i}")).collect();
        assert_eq!(taken, want, "{name}");
        assert!(queue.poll().await.unwrap().is_none(), "{name}");
        eprintln!("{name}: curator queue interop ok");
    }
}
