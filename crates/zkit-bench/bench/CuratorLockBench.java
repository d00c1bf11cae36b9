// The Curator side of `zkit-bench lock-compare`: acquire+release cycles of Apache Curator's
// InterProcessMutex with N clients, each its own CuratorFramework (so its own ZooKeeper
// session), for S seconds, printing cycles/s and p50/p99 acquire latency per client count.
//
// Compiled at run time with javac against Debian's libcurator-recipes-java jars (the same way
// crates/zkit/tests/curator_interop.rs does), so the figures come from the Curator a user of this
// machine would run. Usage:
//
//   java -cp CLASSPATH CuratorLockBench CONNECT BASE_PATH CLIENTS(1,4,16) SECONDS
//
// Output, one line per client count (parsed by zkit-bench lock-compare):
//
//   RESULT clients=4 cycles=5123 seconds=5.001 p50_us=701 p99_us=2890
//
// Before the first measured count, that many clients run unmeasured rounds of one second until
// two rounds in a row agree within 10% (at most 15 rounds), so that the JIT has compiled the hot
// paths, contended ones included: the comparison is meant to be fair to Curator.
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;

public class CuratorLockBench {
    static final class Worker extends Thread {
        final InterProcessMutex mutex;
        final long deadline;
        long[] latencies = new long[1 << 12];
        int count;
        Throwable error;

        Worker(InterProcessMutex mutex, long deadline) {
            this.mutex = mutex;
            this.deadline = deadline;
        }

        @Override
        public void run() {
            try {
                while (System.nanoTime() < deadline) {
                    long t0 = System.nanoTime();
                    if (!mutex.acquire(60, TimeUnit.SECONDS)) {
                        throw new IllegalStateException("acquire timed out after 60 s");
                    }
                    long micros = (System.nanoTime() - t0) / 1000;
                    mutex.release();
                    if (count == latencies.length) {
                        latencies = Arrays.copyOf(latencies, count * 2);
                    }
                    latencies[count++] = micros;
                }
            } catch (Throwable t) {
                error = t;
            }
        }
    }

    static CuratorFramework connect(String connect) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(connect, 30000, 15000,
            new ExponentialBackoffRetry(100, 5));
        client.start();
        if (!client.blockUntilConnected(30, TimeUnit.SECONDS)) {
            throw new IllegalStateException("cannot connect to " + connect);
        }
        return client;
    }

    static long percentile(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0;
        }
        int index = (int) Math.ceil(q * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, index))];
    }

    /** Runs one count; returns cycles per second. */
    static double run(String connect, String path, int clients, double seconds, boolean print)
            throws Exception {
        List<CuratorFramework> sessions = new ArrayList<>();
        for (int i = 0; i < clients; i++) {
            sessions.add(connect(connect));
        }
        long start = System.nanoTime();
        long deadline = start + (long) (seconds * 1e9);
        List<Worker> workers = new ArrayList<>();
        for (CuratorFramework session : sessions) {
            workers.add(new Worker(new InterProcessMutex(session, path), deadline));
        }
        for (Worker w : workers) {
            w.start();
        }
        long cycles = 0;
        long[] all = new long[0];
        for (Worker w : workers) {
            w.join();
            if (w.error != null) {
                throw new RuntimeException("worker failed", w.error);
            }
            cycles += w.count;
            int old = all.length;
            all = Arrays.copyOf(all, old + w.count);
            System.arraycopy(w.latencies, 0, all, old, w.count);
        }
        double elapsed = (System.nanoTime() - start) / 1e9;
        Arrays.sort(all);
        if (print) {
            System.out.printf("RESULT clients=%d cycles=%d seconds=%.3f p50_us=%d p99_us=%d%n",
                clients, cycles, elapsed, percentile(all, 0.50), percentile(all, 0.99));
            System.out.flush();
        }
        try {
            sessions.get(0).delete().forPath(path);
        } catch (Exception ignored) {
            // Another run's leftovers or a race with a late delete: not part of the figure.
        }
        for (CuratorFramework session : sessions) {
            session.close();
        }
        return cycles / elapsed;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: CuratorLockBench CONNECT BASE_PATH CLIENTS SECONDS");
            System.exit(2);
        }
        String connect = args[0], base = args[1];
        double seconds = Double.parseDouble(args[3]);
        String[] counts = args[2].split(",");
        int warmupClients = Integer.parseInt(counts[0].trim());
        double previous = 0;
        for (int round = 0; round < 15; round++) {
            double rate = run(connect, base + "/curator-warmup", warmupClients, 1.0, false);
            if (previous > 0 && Math.abs(rate - previous) <= 0.1 * previous) {
                break;
            }
            previous = rate;
        }
        for (String n : counts) {
            int clients = Integer.parseInt(n.trim());
            run(connect, base + "/curator-" + clients, clients, seconds, true);
        }
        System.exit(0);
    }
}
