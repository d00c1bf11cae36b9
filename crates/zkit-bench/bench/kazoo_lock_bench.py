#!/usr/bin/python3
"""The kazoo side of `zkit-bench lock-compare`: acquire+release cycles of kazoo's Lock with N
clients, each its own KazooClient (so its own ZooKeeper session, and its own connection thread),
for S seconds, printing cycles/s and p50/p99 acquire latency per client count.

Usage: kazoo_lock_bench.py CONNECT BASE_PATH CLIENTS(1,4,16) SECONDS

Output, one line per client count (parsed by `zkit-bench lock-compare`):

    RESULT clients=4 cycles=3012 seconds=5.002 p50_us=1203 p99_us=5120

Needs Debian's python3-kazoo (run with /usr/bin/python3).
"""

import math
import sys
import threading
import time

from kazoo.client import KazooClient


def percentile(sorted_values, q):
    if not sorted_values:
        return 0
    index = max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[index]


def run(connect, path, clients, seconds):
    sessions = []
    for _ in range(clients):
        zk = KazooClient(hosts=connect, timeout=30.0)
        zk.start(timeout=30)
        sessions.append(zk)
    results = [None] * clients
    errors = []
    start = time.perf_counter()
    deadline = start + seconds

    def worker(i):
        lock = sessions[i].Lock(path, "kazoo-bench-%d" % i)
        latencies = []
        try:
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                if not lock.acquire(timeout=60):
                    raise RuntimeError("acquire timed out after 60 s")
                latencies.append(int((time.perf_counter() - t0) * 1e6))
                lock.release()
        except Exception as err:  # reported below; the bench fails as a whole
            errors.append(err)
        results[i] = latencies

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    everything = sorted(v for r in results for v in r)
    print(
        "RESULT clients=%d cycles=%d seconds=%.3f p50_us=%d p99_us=%d"
        % (clients, len(everything), elapsed, percentile(everything, 0.50),
           percentile(everything, 0.99)),
        flush=True,
    )
    try:
        sessions[0].delete(path)
    except Exception:  # leftovers of a racing delete: not part of the figure
        pass
    for zk in sessions:
        zk.stop()
        zk.close()


def main():
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    connect, base, counts, seconds = sys.argv[1:]
    for n in counts.split(","):
        clients = int(n)
        run(connect, "%s/kazoo-%d" % (base, clients), clients, float(seconds))


if __name__ == "__main__":
    main()
