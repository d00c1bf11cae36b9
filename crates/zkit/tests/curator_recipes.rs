//! Interop of the newer recipes with Apache Curator (Java), both ways, against every server of
//! `common::servers()`: service discovery (curator-x-discovery's `ServiceDiscovery`, Debian's
//! `libcurator-discovery-java`), `InterProcessSemaphoreMutex`, `DistributedPriorityQueue`,
//! `DistributedIdQueue`, `DistributedDelayQueue`, `DistributedAtomicLong` promoted to a lock,
//! `InterProcessMultiLock`, `PersistentTtlNode` and `QueueSharder`; and `zkit service
//! register`/`list` (the command line) against Curator's discovery. The Java side is one
//! program compiled here with `javac`, run in one mode per step (or driven over stdin through a
//! whole scenario: JVM starts are the slow part).
//!
//! Skips (with a SKIP line) when `javac` or the jars are missing, except under `CI`.

mod common;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use common::foreign::{check_exclusion, each_target, finished_lines, Driven};
use common::{contend, javac, skip_curator};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use zkit::atomic::{AtomicOptions, DistributedAtomicLong, PromotedToLock};
use zkit::discovery::{ServiceDiscovery, ServiceInstance};
use zkit::distributed_queue::{
    DelayQueue, IdQueue, PriorityQueue, QueueSharder, QueueSharderPolicies,
};
use zkit::lock::{MultiLock, Mutex, SemaphoreMutex};
use zkit::persistent_watcher::{PersistentWatcher, WatchEvent};
use zkit::ttl_node::PersistentTtlNode;
use zkit::zkit_client as zk;
use zkit::{RetryPolicy, Session};
use zkit_testkit::{curator_classpath, unique_path, zkit_bin, Target};

const LIMIT: Duration = Duration::from_secs(30);

const JAVA: &str = r#"
import java.io.*;
import java.nio.file.*;
import java.util.*;
import java.util.concurrent.*;
import org.apache.curator.framework.*;
import org.apache.curator.framework.recipes.atomic.*;
import org.apache.curator.framework.recipes.locks.*;
import org.apache.curator.framework.recipes.nodes.*;
import org.apache.curator.framework.recipes.queue.*;
import org.apache.curator.framework.recipes.watch.*;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.*;
import org.apache.curator.x.discovery.*;
import org.apache.zookeeper.Watcher;

public class CuratorRecipes {
    static final QueueSerializer<String> TEXT = new QueueSerializer<String>() {
        public byte[] serialize(String s) { return s.getBytes(); }
        public String deserialize(byte[] b) { return new String(b); }
    };

    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 10000, 5000,
            new ExponentialBackoffRetry(100, 5));
        client.start();
        client.blockUntilConnected(30, TimeUnit.SECONDS);
        try {
            run(client, args[1], Arrays.copyOfRange(args, 2, args.length));
        } finally {
            client.close();
        }
    }

    static void run(CuratorFramework client, String mode, String[] a) throws Exception {
        switch (mode) {
        case "discovery-register": {
            Map<String, Object> payload = new LinkedHashMap<>();
            payload.put("zone", "java");
            ServiceInstance<Map> me = ServiceInstance.<Map>builder().name(a[1]).id(a[2])
                .address("10.9.9.9").port(Integer.parseInt(a[3])).payload(payload).build();
            ServiceDiscovery<Map> d = ServiceDiscoveryBuilder.builder(Map.class).client(client)
                .basePath(a[0]).thisInstance(me).build();
            d.start();
            System.out.println("registered");
            System.out.flush();
            new BufferedReader(new InputStreamReader(System.in)).readLine();
            d.close();
            break;
        }
        case "discovery-list": {
            ServiceDiscovery<Map> d = ServiceDiscoveryBuilder.builder(Map.class).client(client)
                .basePath(a[0]).build();
            d.start();
            for (ServiceInstance<Map> i : d.queryForInstances(a[1])) {
                System.out.println(i.getId() + " " + i.getAddress() + " " + i.getPort() + " "
                    + i.getPayload() + " " + i.getServiceType());
            }
            ServiceCache<Map> cache = d.serviceCacheBuilder().name(a[1]).build();
            cache.start();
            System.out.println("cache " + cache.getInstances().size());
            cache.close();
            d.close();
            break;
        }
        case "semaphore-mutex": {
            InterProcessSemaphoreMutex mutex = new InterProcessSemaphoreMutex(client, a[0]);
            for (int i = 0; i < Integer.parseInt(a[2]); i++) {
                if (!mutex.acquire(60, TimeUnit.SECONDS)) throw new IllegalStateException("timeout");
                try {
                    append(a[1], "enter java\n");
                    Thread.sleep(1);
                    append(a[1], "exit java\n");
                } finally {
                    mutex.release();
                }
            }
            break;
        }
        case "queues-put": {
            // One JVM for the three producers: a[0] priority, a[1] id, a[2] delay queue.
            DistributedPriorityQueue<String> p = QueueBuilder.builder(client, null, TEXT, a[0])
                .putInBackground(false).buildPriorityQueue(0);
            p.start();
            p.put("c", 30); p.put("a", -5); p.put("d", 100); p.put("b", 7);
            p.close();
            DistributedIdQueue<String> q = QueueBuilder.builder(client, null, TEXT, a[1])
                .putInBackground(false).buildIdQueue();
            q.start();
            q.put("one", "j1"); q.put("two", "j2"); q.put("three", "j1"); q.put("four", "j4");
            q.close();
            DistributedDelayQueue<String> d = QueueBuilder.builder(client, null, TEXT, a[2])
                .putInBackground(false).buildDelayQueue();
            d.start();
            long now = System.currentTimeMillis();
            d.put("late", now + 1500);
            d.put("soon", now + 700);
            d.close();
            break;
        }
        case "priority-take": {
            int n = Integer.parseInt(a[1]);
            CountDownLatch done = new CountDownLatch(n);
            QueueConsumer<String> consumer = new QueueConsumer<String>() {
                public void consumeMessage(String m) { System.out.println(m); done.countDown(); }
                public void stateChanged(CuratorFramework c, ConnectionState s) {}
            };
            DistributedPriorityQueue<String> q = QueueBuilder.builder(client, consumer, TEXT, a[0])
                .buildPriorityQueue(0);
            q.start();
            if (!done.await(60, TimeUnit.SECONDS)) throw new IllegalStateException("not all taken");
            q.close();
            break;
        }
        case "atomic-add": {
            DistributedAtomicLong n = new DistributedAtomicLong(client, a[0], new RetryNTimes(0, 0),
                PromotedToLock.builder().lockPath(a[1]).retryPolicy(new RetryNTimes(100, 5)).build());
            int ok = 0;
            for (int i = 0; i < Integer.parseInt(a[2]); i++) {
                if (n.increment().succeeded()) ok++;
            }
            System.out.println(ok);
            break;
        }
        case "sharder": { // sharder QUEUE_PATH LEADER_PATH
            // Shards of at most two items, a new one (leader only) when one reaches them.
            QueueSharderPolicies policies = QueueSharderPolicies.builder()
                .newQueueThreshold(2).thresholdCheckMs(100).maxQueues(2).build();
            QueueSharder<String, DistributedQueue<String>> s = new QueueSharder<>(client,
                (c, p) -> QueueBuilder.builder(c, null, TEXT, p).putInBackground(false).buildQueue(),
                a[0], a[1], policies);
            s.start();
            for (int i = 0; i < 3; i++) s.getQueue().put("j" + i);
            long end = System.currentTimeMillis() + 30000;
            while (s.getShardQty() < 2) {
                if (System.currentTimeMillis() > end) throw new IllegalStateException("no shard");
                Thread.sleep(20);
            }
            // QueueSharder counts a new shard once it is in its map, before queue.start()
            // has created the shard's node: a put into it could meet NoNode until then.
            for (String p : s.getQueuePaths()) {
                while (client.checkExists().forPath(p) == null) {
                    if (System.currentTimeMillis() > end) throw new IllegalStateException("no node " + p);
                    Thread.sleep(20);
                }
            }
            for (int i = 3; i < 6; i++) s.getQueue().put("j" + i);
            for (String p : new TreeSet<>(s.getQueuePaths())) System.out.println(p);
            System.out.println("put");
            System.out.flush();
            s.close();
            // Then take as many items as stdin says, from every shard.
            int n = Integer.parseInt(new BufferedReader(new InputStreamReader(System.in)).readLine());
            CountDownLatch done = new CountDownLatch(n);
            QueueConsumer<String> consumer = new QueueConsumer<String>() {
                public void consumeMessage(String m) {
                    synchronized (System.out) { System.out.println(m); System.out.flush(); }
                    done.countDown();
                }
                public void stateChanged(CuratorFramework c, ConnectionState st) {}
            };
            QueueSharder<String, DistributedQueue<String>> t = new QueueSharder<>(client,
                (c, p) -> QueueBuilder.builder(c, consumer, TEXT, p).buildQueue(),
                a[0], a[1], policies);
            t.start();
            if (!done.await(60, TimeUnit.SECONDS)) throw new IllegalStateException("not all taken");
            t.close();
            break;
        }
        case "interactive": {
            // Driven over stdin, one reply line per command, so one JVM serves a whole
            // scenario (JVM starts are the slow part).
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            InterProcessMultiLock multi = null;
            PersistentTtlNode ttl = null;
            BlockingQueue<String> events = new LinkedBlockingQueue<>();
            for (String line; (line = in.readLine()) != null; ) {
                String[] c = line.split(" ");
                String reply;
                switch (c[0]) {
                case "multi": // multi PATH... : a multi-lock over the paths, in this order
                    multi = new InterProcessMultiLock(client,
                        Arrays.asList(Arrays.copyOfRange(c, 1, c.length)));
                    reply = "ok";
                    break;
                case "multi-try": // multi-try MS
                    sync(client, "/");
                    reply = multi.acquire(Long.parseLong(c[1]), TimeUnit.MILLISECONDS)
                        ? "held" : "busy";
                    break;
                case "multi-release":
                    multi.release();
                    reply = "released";
                    break;
                case "mutex-try": { // mutex-try PATH MS: one plain InterProcessMutex
                    sync(client, "/");
                    InterProcessMutex m = new InterProcessMutex(client, c[1]);
                    boolean held = m.acquire(Long.parseLong(c[2]), TimeUnit.MILLISECONDS);
                    if (held) m.release();
                    reply = held ? "held" : "busy";
                    break;
                }
                case "ttl-start": // ttl-start PATH TTL_MS DATA
                    ttl = new PersistentTtlNode(client, c[1], Long.parseLong(c[2]), c[3].getBytes());
                    ttl.start();
                    reply = ttl.waitForInitialCreate(30, TimeUnit.SECONDS) ? "started" : "timeout";
                    break;
                case "watch": { // watch PATH: a recursive PersistentWatcher, once it is added
                    PersistentWatcher w = new PersistentWatcher(client, c[1], true);
                    CountDownLatch added = new CountDownLatch(1);
                    w.getResetListenable().addListener(added::countDown);
                    w.getListenable().addListener(e -> {
                        if (e.getType() != Watcher.Event.EventType.None) {
                            events.add(e.getType() + " " + e.getPath());
                        }
                    });
                    w.start();
                    reply = added.await(30, TimeUnit.SECONDS) ? "watching" : "timeout";
                    break;
                }
                case "events": { // events N: the next N node events, comma-separated
                    List<String> got = new ArrayList<>();
                    for (int i = 0; i < Integer.parseInt(c[1]); i++) {
                        String e = events.poll(30, TimeUnit.SECONDS);
                        got.add(e == null ? "timeout" : e);
                    }
                    reply = String.join(",", got);
                    break;
                }
                case "txn": // txn PATH: one transaction of four writes under PATH
                    client.transaction().forOperations(
                        client.transactionOp().create().forPath(c[1] + "/x", "1".getBytes()),
                        client.transactionOp().setData().forPath(c[1] + "/x", "2".getBytes()),
                        client.transactionOp().create().forPath(c[1] + "/x/y"),
                        client.transactionOp().delete().forPath(c[1] + "/x/y"));
                    reply = "ok";
                    break;
                case "ttl-close":
                    ttl.close();
                    reply = "closed";
                    break;
                default:
                    throw new IllegalArgumentException(line);
                }
                System.out.println(reply);
                System.out.flush();
            }
            break;
        }
        default:
            throw new IllegalArgumentException(mode);
        }
    }

    // Lets this client's server catch up with the leader: on an ensemble, the other side's
    // latest writes may not have reached it yet (reads are only sequentially consistent).
    static void sync(CuratorFramework client, String path) throws Exception {
        CountDownLatch done = new CountDownLatch(1);
        client.getZookeeperClient().getZooKeeper().sync(path, (rc, p, ctx) -> done.countDown(), null);
        if (!done.await(30, TimeUnit.SECONDS)) throw new IllegalStateException("sync");
    }

    static void append(String file, String line) throws Exception {
        Files.write(Paths.get(file), line.getBytes(),
            StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    }
}
"#;

/// Curator, curator-x-discovery and Jackson, as a classpath.
fn classpath() -> Option<String> {
    let base = curator_classpath()?;
    let mut parts = vec![base];
    for jar in [
        "curator-x-discovery.jar",
        "jackson-databind.jar",
        "jackson-core.jar",
        "jackson-annotations.jar",
    ] {
        let path = Path::new("/usr/share/java").join(jar);
        if !path.is_file() {
            return None;
        }
        parts.push(path.display().to_string());
    }
    Some(parts.join(":"))
}

/// Compiles the Java side; `None` (after a SKIP line) when it cannot run here.
fn compiled() -> Option<(tempfile::TempDir, String)> {
    let Some(classpath) = classpath() else {
        skip_curator(
            "curator recipes interop",
            "Curator/curator-x-discovery/Jackson jars not found in /usr/share/java",
        );
        return None;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    if !javac(dir.path(), "CuratorRecipes", JAVA, &classpath) {
        skip_curator("curator recipes interop", "javac failed or is missing");
        return None;
    }
    let full = format!("{}:{classpath}", dir.path().display());
    Some((dir, full))
}

fn java(classpath: &str, args: &[&str]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new("java");
    cmd.arg("-cp")
        .arg(classpath)
        .arg("CuratorRecipes")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// Runs the Java side to completion (bounded) and returns its stdout lines.
async fn java_lines(classpath: &str, args: &[&str]) -> Vec<String> {
    finished_lines(java(classpath, args), &format!("java {args:?}")).await
}

/// Runs `case(classpath, dir, target, session)` against every server once the Java side is
/// compiled ([`each_target`]); nothing, after a SKIP line, when it cannot run here.
async fn each_curator_target<F, Fut>(case: F)
where
    F: FnMut(String, PathBuf, Target, Session) -> Fut,
    Fut: Future<Output = ()>,
{
    let Some((dir, cp)) = compiled() else {
        return;
    };
    each_target(&cp, dir.path(), case).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_instances_are_seen_both_ways() {
    each_curator_target(|cp, _dir, target, s| async move {
        let name = target.name;
        let base = unique_path("services-interop");
        let discovery = ServiceDiscovery::<serde_json::Value>::new(&s, &base).unwrap();

        // Curator registers; zkit queries and caches it, payload and all.
        let mut registrar = Driven::start(java(
            &cp,
            &[
                &target.addr,
                "discovery-register",
                &base,
                "api",
                "java-1",
                "9001",
            ],
        ));
        assert_eq!(registrar.line().await, "registered", "{name}");
        // Curator registered through its own session, perhaps on another ensemble member.
        s.client().sync(&base).await.unwrap();
        let found = discovery.query_for_instances("api").await.unwrap();
        assert_eq!(found.len(), 1, "{name}: {found:?}");
        let java_instance = &found[0];
        assert_eq!(java_instance.id, "java-1");
        assert_eq!(java_instance.address.as_deref(), Some("10.9.9.9"));
        assert_eq!(java_instance.port, Some(9001));
        assert_eq!(
            java_instance.payload,
            Some(serde_json::json!({"zone": "java"}))
        );
        assert_eq!(
            java_instance.payload_class.as_deref(),
            Some("java.util.LinkedHashMap"),
            "{name}: Jackson's type information"
        );
        let cache = discovery.cache("api").unwrap();
        cache
            .wait_for(LIMIT, |s| s.initialized && s.instances.len() == 1)
            .await
            .unwrap_or_else(|e| panic!("{name}: cache: {e}"));

        // zkit registers next to it; Curator lists both (and its cache sees both).
        let me = ServiceInstance::new("api")
            .with_id("zkit-1")
            .with_address("10.0.0.5")
            .with_port(9002)
            .with_payload(serde_json::json!({"zone": "zkit"}));
        discovery.register(&me).await.unwrap();
        let listed = java_lines(&cp, &[&target.addr, "discovery-list", &base, "api"]).await;
        assert!(
            listed.contains(&"zkit-1 10.0.0.5 9002 {zone=zkit} DYNAMIC".to_string()),
            "{name}: Curator does not list zkit's instance: {listed:?}"
        );
        assert!(listed.contains(&"java-1 10.9.9.9 9001 {zone=java} DYNAMIC".to_string()));
        assert_eq!(listed.last().map(String::as_str), Some("cache 2"), "{name}");

        // Curator unregisters on close; zkit's cache sees it go.
        registrar.tell("close").await;
        registrar.finish("java registrar", name).await;
        cache
            .wait_for(LIMIT, |s| s.instances.iter().all(|i| i.id != "java-1"))
            .await
            .unwrap_or_else(|e| panic!("{name}: cache kept the unregistered instance: {e}"));
        discovery.close().await;
        eprintln!("{name}: curator discovery interop ok");
    })
    .await;
}

/// The command line against Curator: Curator lists an instance that `zkit service register`
/// keeps registered while its CMD runs, and `zkit service list` lists one Curator registered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zkit_service_cli_and_curator_see_each_other() {
    each_curator_target(|cp, _dir, target, s| async move {
        let name = target.name;
        let base = unique_path("services-cli-interop");

        // `zkit service register`; CMD runs until its stdin (zkit's) is closed.
        let mut registrar = tokio::process::Command::new(zkit_bin())
            .args([
                "service",
                "register",
                "--server",
                &target.addr,
                "--base",
                &base,
            ])
            .args([
                "api",
                "--id",
                "cli-1",
                "--address",
                "10.0.0.7",
                "--port",
                "9003",
            ])
            .args([
                "--payload",
                r#"{"zone":"cli"}"#,
                "--",
                "sh",
                "-c",
                "read line",
            ])
            .stdin(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn zkit service register");
        let mut cli_stdin = registrar.stdin.take().expect("stdin");
        let mut cli_err = BufReader::new(registrar.stderr.take().expect("stderr")).lines();
        let registered = tokio::time::timeout(LIMIT, cli_err.next_line())
            .await
            .expect("zkit registers in time")
            .expect("read")
            .expect("a line");
        assert_eq!(
            registered,
            format!("zkit service: registered {base}/api/cli-1"),
            "{name}"
        );
        let listed = java_lines(&cp, &[&target.addr, "discovery-list", &base, "api"]).await;
        assert_eq!(
            listed,
            vec![
                "cli-1 10.0.0.7 9003 {zone=cli} DYNAMIC".to_string(),
                "cache 1".to_string()
            ],
            "{name}: Curator's view of zkit service register"
        );

        // Curator registers; `zkit service list` shows both.
        let mut java_registrar = Driven::start(java(
            &cp,
            &[
                &target.addr,
                "discovery-register",
                &base,
                "api",
                "java-2",
                "9001",
            ],
        ));
        assert_eq!(java_registrar.line().await, "registered", "{name}");
        let out = tokio::process::Command::new(zkit_bin())
            .args([
                "service",
                "list",
                "--server",
                &target.addr,
                "--base",
                &base,
                "api",
            ])
            .output()
            .await
            .expect("run zkit service list");
        assert!(out.status.success(), "{name}: zkit service list failed");
        let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect();
        lines.sort();
        assert_eq!(
            lines,
            vec![
                r#"cli-1 10.0.0.7:9003 {"zone":"cli"}"#.to_string(),
                r#"java-2 10.9.9.9:9001 {"zone":"java"}"#.to_string(),
            ],
            "{name}: zkit service list"
        );

        java_registrar.tell("close").await;
        java_registrar.finish("java registrar", name).await;
        cli_stdin.write_all(b"done\n").await.expect("tell CMD");
        let status = tokio::time::timeout(LIMIT, registrar.wait())
            .await
            .expect("zkit service register exits")
            .expect("wait");
        assert_eq!(status.code(), Some(0), "{name}");
        // Both unregistered on their way out (no JVM for this check: JVMs are the slow part).
        let discovery = ServiceDiscovery::<serde_json::Value>::new(&s, &base).unwrap();
        // They left through their own sessions, perhaps on other ensemble members.
        s.client().sync(&base).await.unwrap();
        let left = discovery.query_for_instances("api").await.unwrap();
        assert!(left.is_empty(), "{name}: still registered: {left:?}");
        eprintln!("{name}: zkit service / curator interop ok");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn semaphore_mutexes_exclude_each_other() {
    const ROUNDS: usize = 40;
    each_curator_target(|cp, dir, target, s| async move {
        let path = unique_path("semaphore-mutex-interop");
        let marks = dir.join(format!("marks-{}.txt", target.name));
        let marks_arg = marks.display().to_string();
        let child = java(
            &cp,
            &[
                &target.addr,
                "semaphore-mutex",
                &path,
                &marks_arg,
                &ROUNDS.to_string(),
            ],
        )
        .spawn()
        .expect("start java");
        let mutex = SemaphoreMutex::new(&s, &path);
        let rust = contend(|| mutex.lock(), &marks, ROUNDS);
        check_exclusion(child, "java", rust, &marks, ROUNDS, target.name).await;
        eprintln!("{}: curator semaphore mutex interop ok", target.name);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_id_and_delay_queues_are_shared() {
    each_curator_target(|cp, _dir, target, s| async move {
        let name = target.name;

        // Curator puts: priorities c=30 a=-5 d=100 b=7; ids one=j1 two=j2 three=j1 four=j4;
        // delays late=+1500 ms soon=+700 ms.
        let path = unique_path("priority-interop");
        let id_path = unique_path("id-interop");
        let delay_path = unique_path("delay-interop");
        let before = SystemTime::now();
        java_lines(
            &cp,
            &[&target.addr, "queues-put", &path, &id_path, &delay_path],
        )
        .await;
        // Curator's delay queue: zkit takes nothing before its time, earliest first.
        let delays = DelayQueue::new(&s, &delay_path).unwrap();
        let soon = delays.take_for(LIMIT).await.unwrap().expect("an item");
        let soon_at = SystemTime::now();
        let late = delays.take_for(LIMIT).await.unwrap().expect("an item");
        let late_at = SystemTime::now();
        assert_eq!(
            (soon.items[0].as_slice(), late.items[0].as_slice()),
            (&b"soon"[..], &b"late"[..])
        );
        // The due times are Java's clock + delay after `before`: neither came early.
        assert!(
            soon_at.duration_since(before).unwrap() >= Duration::from_millis(700),
            "{name}"
        );
        assert!(
            late_at.duration_since(before).unwrap() >= Duration::from_millis(1500),
            "{name}"
        );
        // zkit takes the priority queue's items lowest first.
        let queue = PriorityQueue::new(&s, &path).unwrap();
        let mut got = Vec::new();
        for _ in 0..4 {
            let message = queue.take_for(LIMIT).await.unwrap().expect("an item");
            got.push(String::from_utf8(message.items.concat()).unwrap());
        }
        assert_eq!(got, vec!["a", "b", "c", "d"], "{name}");
        // zkit puts; Curator's consumer takes them in priority order.
        for (item, priority) in [("z", 9), ("x", -1), ("y", 3)] {
            queue.put(item.as_bytes(), priority).await.unwrap();
        }
        let taken = java_lines(&cp, &[&target.addr, "priority-take", &path, "3"]).await;
        assert_eq!(taken, vec!["x", "y", "z"], "{name}");

        // Curator's id queue: zkit removes by id and takes the rest in FIFO order.
        let ids = IdQueue::new(&s, &id_path).unwrap();
        assert!(ids.contains("j2").await.unwrap());
        assert_eq!(ids.remove("j1").await.unwrap(), 2, "{name}");
        let first = ids.take_for(LIMIT).await.unwrap().expect("an item");
        let second = ids.take_for(LIMIT).await.unwrap().expect("an item");
        assert_eq!(
            (first.items[0].as_slice(), second.items[0].as_slice()),
            (&b"two"[..], &b"four"[..])
        );
        assert!(ids.poll().await.unwrap().is_none());

        eprintln!("{name}: curator queues interop ok");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_longs_promoted_to_the_same_lock_lose_no_increment() {
    const EACH: usize = 25;
    each_curator_target(|cp, _dir, target, s| async move {
        let path = unique_path("atomic-interop");
        let lock = format!("{path}-lock");
        let java_side = java(
            &cp,
            &[&target.addr, "atomic-add", &path, &lock, &EACH.to_string()],
        )
        .spawn()
        .expect("start java");
        let counter = DistributedAtomicLong::new(
            &s,
            &path,
            AtomicOptions {
                retry: RetryPolicy::Never,
                promoted: Some(PromotedToLock {
                    retry: RetryPolicy::NTimes {
                        n: 100,
                        sleep: Duration::from_millis(5),
                    },
                    ..PromotedToLock::new(&lock)
                }),
            },
        )
        .unwrap();
        let mut ours = 0;
        for _ in 0..EACH {
            if counter.increment().await.unwrap().succeeded {
                ours += 1;
            }
        }
        let out = tokio::time::timeout(Duration::from_secs(120), java_side.wait_with_output())
            .await
            .expect("java finishes")
            .expect("java output");
        assert!(
            out.status.success(),
            "{}: {}",
            target.name,
            String::from_utf8_lossy(&out.stderr)
        );
        let theirs: i64 = String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("count");
        // The Java side counted through its own session, perhaps on another ensemble member.
        s.client().sync(&path).await.unwrap();
        let total = counter.get().await.unwrap();
        assert_eq!(
            total,
            ours + theirs,
            "{}: increments lost or doubled",
            target.name
        );
        assert!(total > 0, "{}", target.name);
        eprintln!(
            "{}: curator atomic interop ok ({ours} + {theirs})",
            target.name
        );
    })
    .await;
}

/// Curator's `InterProcessMultiLock` is a list of `InterProcessMutex`es taken in the order
/// given and released in reverse; zkit's `MultiLock` is a list of `Mutex`es (the same lock
/// node layout) in sorted order. Whoever holds the multi-lock excludes the other's multi-lock
/// and a single mutex on any one of the paths; releasing leaves no lock node behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_locks_exclude_each_other() {
    each_curator_target(|cp, _dir, target, s| async move {
        let name = target.name;
        let base = unique_path("multi-lock-interop");
        let (a, b) = (format!("{base}/a"), format!("{base}/b"));
        let zkit_multi = MultiLock::new(&s, &[&a, &b]).unwrap();
        let mut j = Driven::start(java(&cp, &[&target.addr, "interactive"]));
        // Curator lists them the other way round: order does not matter for exclusion.
        assert_eq!(j.ask(&format!("multi {b} {a}")).await, "ok");

        // Curator holds both: zkit's multi-lock and a mutex on either path wait.
        assert_eq!(j.ask("multi-try 30000").await, "held", "{name}");
        // (On an ensemble, let zkit's server catch up with Curator's writes: see `sync` in Java.)
        s.client().sync("/").await.unwrap();
        for path in [&a, &b] {
            let kids = common::children(&s, path).await;
            assert_eq!(kids.len(), 1, "{name}: {path}: {kids:?}");
            // InterProcessMutex's node: protected (`_c_<uuid>-`) `lock-` sequential.
            assert!(
                kids[0].starts_with("_c_") && kids[0].contains("-lock-"),
                "{name}: {kids:?}"
            );
        }
        let short = Duration::from_millis(300);
        assert!(
            matches!(
                zkit_multi.try_lock_for(short).await,
                Err(zkit::Error::Timeout(_))
            ),
            "{name}: zkit got the multi-lock Curator holds"
        );
        assert!(
            matches!(
                Mutex::new(&s, &b).try_lock_for(short).await,
                Err(zkit::Error::Timeout(_))
            ),
            "{name}: zkit got a mutex under Curator's multi-lock"
        );
        assert_eq!(j.ask("multi-release").await, "released", "{name}");

        // zkit holds both: Curator's multi-lock and a mutex on either path wait.
        let guard = zkit_multi
            .try_lock_for(LIMIT)
            .await
            .expect("zkit multi-lock");
        assert_eq!(j.ask("multi-try 300").await, "busy", "{name}");
        assert_eq!(j.ask(&format!("mutex-try {a} 300")).await, "busy", "{name}");
        // A timed-out Curator multi-lock leaves nothing queued behind zkit's nodes.
        for path in [&a, &b] {
            assert_eq!(common::children(&s, path).await.len(), 1, "{name}: {path}");
        }
        guard.release().await.unwrap();
        assert_eq!(j.ask("multi-try 30000").await, "held", "{name}");
        assert_eq!(j.ask("multi-release").await, "released", "{name}");
        j.finish("java interactive", name).await;
        // (Curator makes the lock parents containers: the server may have reaped them.)
        for path in [&a, &b] {
            let left = common::children(&s, path).await;
            assert!(left.is_empty(), "{name}: {path}: {left:?}");
        }
        eprintln!("{name}: curator multi-lock interop ok");
    })
    .await;
}

/// Curator's `PersistentTtlNode` (a `PERSISTENT_WITH_TTL` node kept by touching its TTL child
/// `touch`; started on an existing node, its `PersistentNode` sets its own data there) and
/// zkit's share one node: whoever starts on the other's node takes it over with its data and
/// keeps it alive through the same child after the other closed; closing deletes nothing, and
/// once both closed the server reaps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_nodes_are_kept_by_each_other() {
    const TTL_MS: u64 = 1000;
    let ttl = Duration::from_millis(TTL_MS);
    each_curator_target(|cp, _dir, target, s| async move {
        let name = target.name;
        let client = s.client();
        let mut j = Driven::start(java(&cp, &[&target.addr, "interactive"]));
        let touch_mzxid = |path: String| {
            let c = client.clone();
            async move {
                c.check_stat(&format!("{path}/touch"))
                    .await
                    .unwrap()
                    .map(|stat| stat.mzxid)
            }
        };

        // Curator creates, zkit takes over, Curator closes: zkit keeps it through `touch`.
        let path = unique_path("ttl-interop-java");
        let started = j.ask(&format!("ttl-start {path} {TTL_MS} java")).await;
        assert_eq!(started, "started", "{name}");
        client.sync("/").await.unwrap();
        assert_eq!(client.get_data(&path).await.unwrap().0, b"java", "{name}");
        let zkit_node = PersistentTtlNode::start(&s, &path, ttl, b"rust").unwrap();
        zkit_node.wait_for_initial_create(LIMIT).await.unwrap();
        assert_eq!(client.get_data(&path).await.unwrap().0, b"rust", "{name}");
        assert_eq!(j.ask("ttl-close").await, "closed", "{name}");
        let before = touch_mzxid(path.clone()).await.expect("touched");
        common::eventually("zkit touches Curator's child", LIMIT, || {
            let t = touch_mzxid(path.clone());
            async move { t.await.is_some_and(|m| m > before) }
        })
        .await;
        // Two TTLs and reaper passes later: still there, one child, zkit's data.
        tokio::time::sleep(ttl * 2).await;
        assert_eq!(client.get_data(&path).await.unwrap().0, b"rust", "{name}");
        assert_eq!(common::children(&s, &path).await, vec!["touch"], "{name}");
        zkit_node.close().await;

        // zkit creates, Curator takes over, zkit closes: Curator keeps it; then both gone.
        let path = unique_path("ttl-interop-zkit");
        let zkit_node = PersistentTtlNode::start(&s, &path, ttl, b"rust").unwrap();
        zkit_node.wait_for_initial_create(LIMIT).await.unwrap();
        let started = j.ask(&format!("ttl-start {path} {TTL_MS} java")).await;
        assert_eq!(started, "started", "{name}");
        common::eventually("Curator sets its data", LIMIT, || {
            let c = client.clone();
            let p = path.clone();
            async move { c.get_data(&p).await.unwrap().0 == b"java" }
        })
        .await;
        zkit_node.close().await;
        let before = touch_mzxid(path.clone()).await.expect("touched");
        common::eventually("Curator touches zkit's child", LIMIT, || {
            let t = touch_mzxid(path.clone());
            async move { t.await.is_some_and(|m| m > before) }
        })
        .await;
        assert_eq!(common::children(&s, &path).await, vec!["touch"], "{name}");
        assert_eq!(j.ask("ttl-close").await, "closed", "{name}");
        j.finish("java interactive", name).await;
        common::eventually("reaped once both closed", LIMIT, || {
            let c = client.clone();
            let p = path.clone();
            async move { c.check_stat(&p).await.unwrap().is_none() }
        })
        .await;
        eprintln!("{name}: curator ttl node interop ok");
    })
    .await;
}

/// Curator's `QueueSharder` keeps shard queues `<queue path>/queue-<uuid>` (`QUEUE_PREFIX`),
/// each a `DistributedQueue`, and its leader adds one when a shard reaches the threshold.
/// zkit's sharder started on Curator's path finds exactly Curator's shards and takes every
/// item Curator put across them; Curator's sharder then takes every item zkit put.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_sharders_share_shards_and_items() {
    each_curator_target(|cp, _dir, target, s| async move {
        let name = target.name;
        let path = unique_path("sharder-interop");
        let leader = format!("{path}-leader");
        let mut j = Driven::start(java(&cp, &[&target.addr, "sharder", &path, &leader]));
        let mut java_shards = Vec::new();
        loop {
            let line = j.line().await;
            if line == "put" {
                break;
            }
            java_shards.push(line);
        }
        assert_eq!(java_shards.len(), 2, "{name}: {java_shards:?}");

        s.client().sync("/").await.unwrap();
        let policies = QueueSharderPolicies {
            new_queue_threshold: 1000,
            ..QueueSharderPolicies::default()
        };
        let sharder = QueueSharder::start(&s, &path, &leader, policies)
            .await
            .unwrap();
        let mut zkit_shards = sharder.shard_paths();
        zkit_shards.sort();
        assert_eq!(zkit_shards, java_shards, "{name}: not Curator's shards");
        let mut taken = Vec::new();
        for _ in 0..6 {
            let message = sharder.take_for(LIMIT).await.unwrap().expect("an item");
            taken.push(String::from_utf8(message.items.concat()).unwrap());
        }
        taken.sort();
        assert_eq!(taken, ["j0", "j1", "j2", "j3", "j4", "j5"], "{name}");
        assert!(sharder.poll().await.unwrap().is_none(), "{name}");

        for i in 0..4 {
            sharder.put(format!("z{i}").as_bytes()).await.unwrap();
        }
        sharder.close().await;
        j.tell("4").await;
        let mut got = Vec::new();
        for _ in 0..4 {
            got.push(j.line().await);
        }
        got.sort();
        assert_eq!(got, ["z0", "z1", "z2", "z3"], "{name}");
        j.finish("java sharder", name).await;
        eprintln!("{name}: curator queue sharder interop ok");
    })
    .await;
}

/// Curator's `PersistentWatcher` (recursive: `addWatch` with `PERSISTENT_RECURSIVE`) and
/// zkit's see the same events, in commit order, for each other's writes: node created, data
/// changed and deleted at any depth, and no child events (a recursive watch has none). Each
/// server must then deliver the Java client's `addWatch` as Apache ZooKeeper does, and a
/// Curator transaction's writes one event each.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persistent_watchers_see_each_others_writes() {
    each_curator_target(|cp, _dir, target, s| async move {
        let name = target.name;
        let root = unique_path("pwatch-interop");
        let c = s.client();
        let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        c.create(&root, b"", &persistent).await.unwrap();
        let mut j = Driven::start(java(&cp, &[&target.addr, "interactive"]));
        assert_eq!(j.ask(&format!("watch {root}")).await, "watching", "{name}");
        let mut w = PersistentWatcher::new(&s, &root, true).unwrap();
        let first = tokio::time::timeout(LIMIT, w.next()).await.expect("reset");
        assert_eq!(first.unwrap(), WatchEvent::Reset, "{name}");

        // zkit writes; Curator's watcher reports them.
        let (a, b) = (format!("{root}/a"), format!("{root}/a/b"));
        c.create(&a, b"", &persistent).await.unwrap();
        c.create(&b, b"1", &persistent).await.unwrap();
        c.set_data(&b, b"2", None).await.unwrap();
        c.delete(&b, None).await.unwrap();
        let seen = j.ask("events 4").await;
        let expected =
            format!("NodeCreated {a},NodeCreated {b},NodeDataChanged {b},NodeDeleted {b}");
        assert_eq!(seen, expected, "{name}: Curator's watcher");

        // Curator writes (one transaction); zkit's watcher reports them, after zkit's own.
        assert_eq!(j.ask(&format!("txn {root}")).await, "ok", "{name}");
        let (x, y) = (format!("{root}/x"), format!("{root}/x/y"));
        let mut got = Vec::new();
        while got.len() < 8 {
            let event = tokio::time::timeout(LIMIT, w.next())
                .await
                .unwrap_or_else(|_| panic!("{name}: zkit watcher saw only {got:?}"))
                .unwrap();
            if let WatchEvent::Node(e) = event {
                got.push(format!("{:?} {}", e.event_type, e.path));
            }
        }
        let want = format!(
            "{expected},NodeCreated {x},NodeDataChanged {x},NodeCreated {y},NodeDeleted {y}"
        );
        assert_eq!(got.join(","), want, "{name}: zkit's watcher");
        // And Curator's own transaction, the same four on Curator's watcher.
        let seen = j.ask("events 4").await;
        assert_eq!(
            seen,
            format!("NodeCreated {x},NodeDataChanged {x},NodeCreated {y},NodeDeleted {y}"),
            "{name}"
        );
        j.finish("java interactive", name).await;
        eprintln!("{name}: curator persistent watcher interop ok");
    })
    .await;
}
