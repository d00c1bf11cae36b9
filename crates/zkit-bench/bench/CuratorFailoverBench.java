// The Curator side of `zkit-bench failover`: Apache Curator clients looping on the ensemble while
// the harness kill -9s its leader, printing a timestamped line for every lock acquired and every
// transaction committed, so that the harness can tell how long after the kill work resumed.
//
// - LOCK_CLIENTS clients, each its own CuratorFramework (so its own ZooKeeper session), loop on
//   one InterProcessMutex: acquire, hold HOLD_MS, release.
// - One more client loops on Curator's transaction API: a multi (client.transaction()
//   .forOperations(...)) setting the data of three nodes at once, then sleeps HOLD_MS. Curator
//   has no two-phase-commit recipe; this multi is its atomic write of several nodes, the nearest
//   thing to zkit's 2PC coordinator committing across three participants.
//
// Every client is built as a Curator user would: CuratorFrameworkFactory.newClient with
// ExponentialBackoffRetry(1000, 3) (Curator's documented default policy; its first retry sleeps
// at least 1 s: getSleepTimeMs is base * max(1, random(2^(n+1)))), the given session timeout
// and Curator's default connection timeout (15 s). An operation that fails after the retries
// (ConnectionLoss while the ensemble elects) is reported and the loop goes on, as a service
// would.
//
// Compiled at run time with javac against Debian's libcurator-recipes-java jars, as
// CuratorLockBench.java is. Usage:
//
//   java -cp CLASSPATH CuratorFailoverBench CONNECT BASE_PATH LOCK_CLIENTS HOLD_MS SESSION_MS
//
// Output (parsed by zkit-bench failover; times are microseconds since the Unix epoch):
//
//   READY
//   EVENT lock 1764619200123456
//   EVENT txn 1764619200124000
//   EVENT connected 1764619200120000      (a lock client's RECONNECTED)
//   ERROR lock KeeperErrorCode = ConnectionLoss
//
// It runs until killed.
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.transaction.CuratorOp;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorFailoverBench {
    static final int CONNECTION_TIMEOUT_MS = 15000;

    static long nowMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1000;
    }

    static synchronized void print(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static String describe(Throwable t) {
        String message = t.getMessage();
        return (message == null ? t.getClass().getSimpleName() : message).replace('\n', ' ');
    }

    static CuratorFramework connect(String connect, int sessionMs) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, sessionMs,
            CONNECTION_TIMEOUT_MS, new ExponentialBackoffRetry(1000, 3));
        client.start();
        if (!client.blockUntilConnected(60, TimeUnit.SECONDS)) {
            throw new IllegalStateException("cannot connect to " + connect);
        }
        return client;
    }

    static void pause(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static Thread lockLoop(InterProcessMutex mutex, long holdMs) {
        return new Thread(() -> {
            while (true) {
                boolean held = false;
                try {
                    mutex.acquire();
                    held = true;
                    print("EVENT lock " + nowMicros());
                    pause(holdMs);
                } catch (Exception e) {
                    print("ERROR lock " + describe(e));
                } finally {
                    if (held) {
                        try {
                            mutex.release();
                        } catch (Exception e) {
                            print("ERROR lock release: " + describe(e));
                        }
                    }
                }
            }
        });
    }

    static Thread multiLoop(CuratorFramework client, String base, long holdMs) {
        return new Thread(() -> {
            long n = 0;
            while (true) {
                try {
                    byte[] data = Long.toString(n++).getBytes(StandardCharsets.UTF_8);
                    List<CuratorOp> ops = new ArrayList<>();
                    for (String p : new String[] {"a", "b", "c"}) {
                        ops.add(client.transactionOp().setData().forPath(base + "/" + p, data));
                    }
                    client.transaction().forOperations(ops);
                    print("EVENT txn " + nowMicros());
                } catch (Exception e) {
                    print("ERROR txn " + describe(e));
                }
                pause(holdMs);
            }
        });
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println(
                "usage: CuratorFailoverBench CONNECT BASE_PATH LOCK_CLIENTS HOLD_MS SESSION_MS");
            System.exit(2);
        }
        String connect = args[0], base = args[1];
        int clients = Integer.parseInt(args[2]);
        long holdMs = Long.parseLong(args[3]);
        int sessionMs = Integer.parseInt(args[4]);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            CuratorFramework client = connect(connect, sessionMs);
            client.getConnectionStateListenable().addListener((c, state) -> {
                if (state == ConnectionState.RECONNECTED) {
                    print("EVENT connected " + nowMicros());
                }
            });
            threads.add(lockLoop(new InterProcessMutex(client, base + "/lock"), holdMs));
        }
        CuratorFramework writer = connect(connect, sessionMs);
        for (String p : new String[] {"a", "b", "c"}) {
            if (writer.checkExists().forPath(base + "/multi/" + p) == null) {
                writer.create().creatingParentsIfNeeded().forPath(base + "/multi/" + p);
            }
        }
        threads.add(multiLoop(writer, base + "/multi", holdMs));
        for (Thread t : threads) {
            t.setDaemon(true);
            t.start();
        }
        print("READY");
        for (Thread t : threads) {
            t.join();
        }
    }
}
