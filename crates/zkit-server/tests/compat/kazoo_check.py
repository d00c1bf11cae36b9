#!/usr/bin/python3
"""Python kazoo against a ZooKeeper-compatible server: one line per check, non-zero exit on failure.

Usage: kazoo_check.py HOST:PORT [ROOT]

Everything happens under ROOT (default: a fresh /kazoo-<uuid>), deleted at the end, so runs can
share a server. Run by crates/zkit-server/tests/compat_clients.rs against Apache ZooKeeper and
zkit; it is also usable by hand. Every wait is bounded (WAIT seconds), so it always terminates.
"""

import sys
import threading
import time
import traceback
import uuid

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NoNodeError, NodeExistsError
from kazoo.protocol.states import EventType

WAIT = 15.0  # seconds; generous because the test machine is shared


def wait_until(pred, what):
    """Polls pred() until it is true, failing after WAIT seconds."""
    deadline = time.monotonic() + WAIT
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.02)


def check_eq(got, want, what):
    if got != want:
        raise AssertionError("%s: got %r, want %r" % (what, got, want))


def new_client(hosts):
    zk = KazooClient(hosts=hosts, timeout=10.0)
    zk.start(timeout=WAIT)
    return zk


def check_crud(zk, root):
    path = root + "/crud"
    check_eq(zk.create(path, b"v1"), path, "create returns path")
    data, stat = zk.get(path)
    check_eq(data, b"v1", "get data")
    check_eq(stat.version, 0, "initial version")
    stat = zk.set(path, b"v2", version=0)
    check_eq(stat.version, 1, "version after set")
    try:
        zk.set(path, b"v3", version=0)
        raise AssertionError("set with stale version succeeded")
    except BadVersionError:
        pass
    try:
        zk.create(path, b"again")
        raise AssertionError("second create succeeded")
    except NodeExistsError:
        pass
    check_eq(zk.get(path)[0], b"v2", "data unchanged by failed ops")
    zk.create(path + "/a", b"")
    zk.create(path + "/b", b"")
    check_eq(sorted(zk.get_children(path)), ["a", "b"], "children")
    check_eq(zk.exists(path).numChildren, 2, "numChildren")
    zk.delete(path, recursive=True)
    check_eq(zk.exists(path), None, "exists after delete")
    try:
        zk.get(path)
        raise AssertionError("get of deleted node succeeded")
    except NoNodeError:
        pass


def check_data_watch(zk, root):
    path = root + "/data-watch"
    zk.create(path, b"before")
    events = []
    fired = threading.Event()

    def on_event(event):
        events.append(event)
        fired.set()

    zk.get(path, watch=on_event)
    zk.set(path, b"after")
    if not fired.wait(WAIT):
        raise AssertionError("data watch did not fire")
    check_eq(events[0].type, EventType.CHANGED, "event type")
    check_eq(events[0].path, path, "event path")
    # One-shot: a second change must not fire the same watch again; a new watch sees deletion.
    deleted = threading.Event()
    zk.exists(path, watch=lambda e: e.type == EventType.DELETED and deleted.set())
    zk.delete(path)
    if not deleted.wait(WAIT):
        raise AssertionError("exists watch did not fire on delete")
    check_eq(len(events), 1, "one-shot data watch fired once")


def check_child_watch(zk, root):
    path = root + "/child-watch"
    zk.create(path, b"")
    fired = threading.Event()
    events = []

    def on_event(event):
        events.append(event)
        fired.set()

    check_eq(zk.get_children(path, watch=on_event), [], "no children yet")
    zk.create(path + "/kid", b"")
    if not fired.wait(WAIT):
        raise AssertionError("child watch did not fire")
    check_eq(events[0].type, EventType.CHILD, "event type")
    check_eq(events[0].path, path, "event path")


def check_ephemeral_sequential(zk, hosts, root):
    path = root + "/eph-seq"
    zk.create(path, b"")
    other = new_client(hosts)
    try:
        eph = other.create(path + "/eph", b"", ephemeral=True)
        stat = zk.exists(eph)
        check_eq(stat.ephemeralOwner, other.client_id[0], "ephemeralOwner is the creator's session")
        s1 = other.create(path + "/seq-", b"", sequence=True)
        s2 = other.create(path + "/seq-", b"", ephemeral=True, sequence=True)
        # The suffix is the parent's cversion, %010d: 1 child created before each.
        check_eq(s1, path + "/seq-0000000001", "first sequential name")
        check_eq(s2, path + "/seq-0000000002", "second sequential name")
    finally:
        other.stop()
        other.close()
    # Closing the session deletes its ephemerals before the close returns.
    check_eq(sorted(zk.get_children(path)), ["seq-0000000001"], "ephemerals gone with session")


def check_lock(hosts, root):
    path = root + "/lock"
    a = new_client(hosts)
    b = new_client(hosts)
    try:
        lock_a = a.Lock(path, "client-a")
        lock_b = b.Lock(path, "client-b")
        if not lock_a.acquire(timeout=WAIT):
            raise AssertionError("first client could not take a free lock")
        if lock_b.acquire(blocking=False):
            raise AssertionError("second client took a held lock")
        got = threading.Event()

        def take():
            if lock_b.acquire(timeout=WAIT):
                got.set()

        t = threading.Thread(target=take, daemon=True)
        t.start()
        # The waiter is queued once both contenders' nodes exist.
        wait_until(lambda: len(lock_a.contenders()) == 2, "second contender to queue")
        if got.is_set():
            raise AssertionError("second client got the lock while the first held it")
        lock_a.release()
        if not got.wait(WAIT):
            raise AssertionError("second client did not get the lock after release")
        check_eq(lock_b.contenders(), ["client-b"], "contenders while b holds")
        lock_b.release()
        t.join(WAIT)
        check_eq(a.get_children(path), [], "lock nodes gone after release")
    finally:
        for zk in (a, b):
            zk.stop()
            zk.close()


def main():
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    hosts = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) == 3 else "/kazoo-" + uuid.uuid4().hex
    zk = new_client(hosts)
    zk.create(root, b"")
    checks = [
        ("crud", lambda: check_crud(zk, root)),
        ("data watch", lambda: check_data_watch(zk, root)),
        ("child watch", lambda: check_child_watch(zk, root)),
        ("ephemeral + sequential", lambda: check_ephemeral_sequential(zk, hosts, root)),
        ("lock (two clients)", lambda: check_lock(hosts, root)),
    ]
    failed = 0
    for name, check in checks:
        try:
            check()
            print("ok   kazoo %s" % name, flush=True)
        except Exception as e:  # report every check, then fail
            failed += 1
            print("FAIL kazoo %s: %s" % (name, e), flush=True)
            traceback.print_exc()
    try:
        zk.delete(root, recursive=True)
    finally:
        zk.stop()
        zk.close()
    print("kazoo: %d passed, %d failed" % (len(checks) - failed, failed), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
