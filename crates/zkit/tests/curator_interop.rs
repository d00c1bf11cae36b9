//! Interop with Apache Curator (Java): a Curator `InterProcessMutex` and a zkit `Mutex` on the
//! same path never hold together. The Java side is compiled here with `javac` from Debian's
//! `libcurator-recipes-java` jars; both sides append `enter`/`exit` marks to one shared file
//! while holding the lock, and the file must show no interleaving.
//!
//! Runs against Apache ZooKeeper and the zkit server. Skips (with a SKIP line) when `javac` or
//! the Curator jars are missing, except under `CI`, where that fails.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::foreign::check_exclusion;
use common::{javac, rust_contender, servers, session, skip_curator};
use zkit_testkit::curator_classpath;
use zkit_testkit::unique_path;

const JAVA: &str = r#"
import java.nio.file.*;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.*;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;

public class CuratorLocker {
    public static void main(String[] args) throws Exception {
        String connect = args[0], path = args[1], file = args[2];
        int rounds = Integer.parseInt(args[3]);
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 10000, 5000,
            new ExponentialBackoffRetry(100, 5));
        client.start();
        client.blockUntilConnected(30, TimeUnit.SECONDS);
        InterProcessMutex mutex = new InterProcessMutex(client, path);
        for (int i = 0; i < rounds; i++) {
            if (!mutex.acquire(60, TimeUnit.SECONDS)) throw new IllegalStateException("timeout");
            try {
                append(file, "enter java\n");
                Thread.sleep(1); // hold a little so that the other side really waits
                append(file, "exit java\n");
            } finally {
                mutex.release();
            }
        }
        client.close();
        System.out.println("java done");
    }

    static void append(String file, String line) throws Exception {
        Files.write(Paths.get(file), line.getBytes(),
            StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    }
}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_zkit_mutexes_exclude_each_other() {
    const ROUNDS: usize = 60;
    let Some(classpath) = curator_classpath() else {
        return skip_curator(
            "curator interop",
            "Curator jars not found in /usr/share/java (libcurator-recipes-java)",
        );
    };
    let dir = tempfile::tempdir().expect("tempdir");
    if !javac(dir.path(), "CuratorLocker", JAVA, &classpath) {
        return skip_curator("curator interop", "javac failed or is missing");
    }
    for target in servers().await {
        let path = unique_path("curator-interop");
        let marks = dir.path().join(format!("marks-{}.txt", target.name));
        let java = tokio::process::Command::new("java")
            .arg("-cp")
            .arg(format!("{}:{classpath}", dir.path().display()))
            .arg("CuratorLocker")
            .arg(&target.addr)
            .arg(&path)
            .arg(&marks)
            .arg(ROUNDS.to_string())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start java");
        let s = session(&target.addr, Duration::from_secs(10)).await;
        let rust = rust_contender(&s, &path, &marks, ROUNDS);
        check_exclusion(java, "java", rust, &marks, ROUNDS, target.name).await;
        eprintln!("{}: curator interop ok", target.name);
    }
}
