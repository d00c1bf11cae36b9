//! The compact tree's snapshot machinery: interned ACL reference counts through setACL, delete,
//! snapshot and restore; a capture keeps the state of its moment while writes continue (on
//! another thread); damaged snapshots are refused with an error, never a panic.

mod common;

use bytes::BytesMut;
use common::*;
use zkit_core::tree::DataTree;
use zkit_core::{Config, Core, RestoreError};
use zkit_proto::codec::{put_i32, put_vec};
use zkit_proto::op::perms;
use zkit_proto::*;

const C: u64 = 1;

fn acl(scheme: &str, id: &str, p: i32) -> Vec<Acl> {
    vec![Acl {
        perms: p,
        id: Id {
            scheme: scheme.into(),
            id: id.into(),
        },
    }]
}

fn refs(tree: &DataTree, list: &[Acl]) -> u64 {
    tree.acl_table()
        .entries()
        .find(|(_, l)| &***l == list)
        .map_or(0, |(id, _)| tree.acl_table().refs(id))
}

#[test]
fn acl_table_counts_through_set_acl_delete_and_restore() {
    let mut t = DataTree::new(false);
    let open = acl("world", "anyone", perms::ALL);
    let read = acl("world", "anyone", perms::READ);
    let ip = acl("ip", "10.0.0.1", perms::ALL);
    // `/`, `/zookeeper` and `/zookeeper/quota` share the open list; config has READ.
    assert_eq!((refs(&t, &open), refs(&t, &read)), (3, 1));
    for (i, p) in ["/a", "/b", "/c"].iter().enumerate() {
        t.create(p, Some(b"x"), &ip, 0, 1, 10 + i as i64, 0)
            .unwrap_or_else(|e| panic!("{p}: {e:?}"));
    }
    assert_eq!((refs(&t, &ip), t.acl_table().len()), (3, 3));
    // Setting the same list again keeps it (intern before release).
    t.set_acl("/a", &ip, 1).unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!(refs(&t, &ip), 3);
    t.set_acl("/a", &open, 2)
        .unwrap_or_else(|e| panic!("{e:?}"));
    assert_eq!((refs(&t, &ip), refs(&t, &open)), (2, 4));
    assert_eq!(t.get("/a").map(|n| n.acl().to_vec()), Some(open.clone()));
    t.delete("/b", 20).unwrap_or_else(|e| panic!("{e:?}"));
    t.delete("/c", 21).unwrap_or_else(|e| panic!("{e:?}"));
    // The last node using the ip list is gone: so is the list.
    assert_eq!((refs(&t, &ip), t.acl_table().len()), (0, 2));
    // Through a core: snapshot and restore keep lists and counts.
    let mut h = H::new();
    h.session(C);
    h.create(C, "/x", 0);
    h.create(C, "/y", 0);
    h.ok(
        C,
        Request::SetAcl(SetAclRequest {
            path: "/y".into(),
            acl: ip.clone(),
            version: -1,
        }),
    );
    let restored = Core::restore(Config::default(), h.now, &h.core.snapshot())
        .unwrap_or_else(|e| panic!("{e}"));
    for list in [&open, &read, &ip] {
        assert_eq!(refs(restored.tree(), list), refs(h.core.tree(), list));
    }
    assert_eq!(refs(restored.tree(), &ip), 1);
    assert_eq!(restored.dump(), h.core.dump());
}

/// The parts of a snapshot, split for tampering: (bytes before the ACL table, ACL entries,
/// node records, everything after the nodes).
struct Parts {
    head: Vec<u8>,
    acls: Vec<Vec<u8>>,
    nodes: Vec<Vec<u8>>,
    tail: Vec<u8>,
}

fn split(snap: &[u8]) -> Parts {
    let mut r = Reader::new(snap);
    let head = r.read_bytes(16).unwrap().to_vec();
    let mut acls = Vec::new();
    for _ in 0..r.read_i32().unwrap() {
        let start = r.position();
        r.read_i32().unwrap();
        let _: Vec<Acl> = r.read_vec().unwrap();
        acls.push(snap[start..r.position()].to_vec());
    }
    let mut nodes = Vec::new();
    for _ in 0..r.read_i32().unwrap() {
        let len = r.read_i32().unwrap() as usize;
        nodes.push(r.read_bytes(len).unwrap().to_vec());
    }
    Parts {
        head,
        acls,
        nodes,
        tail: r.rest().to_vec(),
    }
}

fn join(p: &Parts) -> Vec<u8> {
    let mut b = BytesMut::new();
    b.extend_from_slice(&p.head);
    put_i32(&mut b, p.acls.len() as i32);
    for a in &p.acls {
        b.extend_from_slice(a);
    }
    put_i32(&mut b, p.nodes.len() as i32);
    for n in &p.nodes {
        put_i32(&mut b, n.len() as i32);
        b.extend_from_slice(n);
    }
    b.extend_from_slice(&p.tail);
    b.to_vec()
}

fn inconsistent(bytes: &[u8]) -> String {
    match Core::restore(Config::default(), 0, bytes) {
        Err(RestoreError::Inconsistent(why)) => why,
        other => panic!("expected an inconsistent snapshot, got {other:?}"),
    }
}

#[test]
fn damaged_snapshots_are_errors() {
    let mut h = H::new();
    h.session(C);
    h.create(C, "/a", 0);
    h.create(C, "/a/b", 0);
    let snap = h.core.snapshot();
    let parts = split(&snap);
    // The split is faithful.
    assert_eq!(join(&parts), snap);
    // Arena order: "/", "/zookeeper", "/zookeeper/quota", "/zookeeper/config", "/a", "/a/b".
    assert_eq!(parts.nodes.len(), 6);

    let mut no_root = split(&snap);
    no_root.nodes.remove(0);
    assert_eq!(inconsistent(&join(&no_root)), "no root");

    let mut orphan = split(&snap);
    orphan.nodes.remove(4);
    assert_eq!(inconsistent(&join(&orphan)), "/a/b has no parent");

    let mut dup = split(&snap);
    dup.nodes.push(dup.nodes[5].clone());
    assert_eq!(inconsistent(&join(&dup)), "duplicate path /a/b");

    let mut no_acls = split(&snap);
    no_acls.acls.clear();
    assert!(inconsistent(&join(&no_acls)).contains("unknown ACL id"));

    let mut twice = split(&snap);
    twice.acls.push(twice.acls[0].clone());
    assert!(inconsistent(&join(&twice)).contains("appears twice"));
    // An id far out of range is only a key: it sizes nothing.
    let mut far = split(&snap);
    let mut e = BytesMut::new();
    put_i32(&mut e, i32::MAX);
    put_vec(&mut e, &acl("ip", "10.1.1.1", perms::ALL));
    far.acls.push(e.to_vec());
    assert!(Core::restore(Config::default(), 0, &join(&far)).is_ok());

    let mut short = split(&snap);
    short.nodes[5].truncate(3);
    assert!(inconsistent(&join(&short)).contains("shorter than its header"));

    let mut bad_path = split(&snap);
    let at = bad_path.nodes[5].len() - 1;
    bad_path.nodes[5][at] = b'/';
    assert!(inconsistent(&join(&bad_path)).contains("invalid path"));

    let mut bad_version = snap.clone();
    bad_version[7] = 1;
    assert_eq!(
        Core::restore(Config::default(), 0, &bad_version).err(),
        Some(RestoreError::BadHeader)
    );
    // A negative record length.
    let mut b = BytesMut::new();
    b.extend_from_slice(&parts.head);
    put_i32(&mut b, 0);
    put_i32(&mut b, 1);
    put_i32(&mut b, -5);
    assert!(inconsistent(&b).contains("record length"));
    // Every single-byte change either restores or fails cleanly (no panic, no hang).
    for i in 0..snap.len() {
        let mut damaged = snap.clone();
        damaged[i] ^= 0xa5;
        let _ = Core::restore(Config::default(), 0, &damaged);
    }
}

#[test]
fn unused_acl_lists_in_a_snapshot_are_dropped_on_restore() {
    let mut h = H::new();
    h.session(C);
    h.create(C, "/a", 0);
    let snap = h.core.snapshot();
    let mut parts = split(&snap);
    let mut extra = BytesMut::new();
    put_i32(&mut extra, 77);
    put_vec(&mut extra, &acl("ip", "10.9.9.9", perms::READ));
    parts.acls.push(extra.to_vec());
    let restored =
        Core::restore(Config::default(), 0, &join(&parts)).unwrap_or_else(|e| panic!("{e}"));
    let extra = acl("ip", "10.9.9.9", perms::READ);
    assert_eq!(refs(restored.tree(), &extra), 0);
    assert!(restored
        .tree()
        .acl_table()
        .entries()
        .all(|(_, l)| **l != *extra));
    // Open (4 nodes) and the config node's READ list remain.
    assert_eq!(restored.tree().acl_table().len(), 2);
    assert_eq!(restored.dump(), h.core.dump());
}

#[test]
fn a_capture_keeps_its_moment_while_writes_continue() {
    let mut h = H::new();
    h.session(C);
    h.create(C, "/p", 0);
    for i in 0..200 {
        h.create(C, &format!("/p/n{i:03}"), 0);
    }
    let before = h.core.dump();
    let capture = h.core.snapshot_capture();
    assert_eq!(capture.node_count(), h.core.tree().len());
    // Serialize on another thread while this one rewrites, deletes, creates and re-ACLs.
    let writer = std::thread::spawn(move || {
        let mut out = Vec::new();
        capture.write_to(&mut out).map(|_| out)
    });
    for i in 0..200 {
        let p = format!("/p/n{i:03}");
        match i % 4 {
            0 => drop(h.ok(
                C,
                Request::Delete(DeleteRequest {
                    path: p,
                    version: -1,
                }),
            )),
            1 => drop(h.ok(
                C,
                Request::SetData(SetDataRequest {
                    path: p,
                    data: Some(b"changed".to_vec()),
                    version: -1,
                }),
            )),
            2 => drop(h.ok(
                C,
                Request::SetAcl(SetAclRequest {
                    path: p,
                    acl: acl("world", "anyone", perms::READ),
                    version: -1,
                }),
            )),
            _ => {
                h.create(C, &format!("{p}/child"), 0);
            }
        }
        h.create(C, &format!("/q{i}"), 0);
    }
    let old = writer.join().unwrap().unwrap();
    let restored = Core::restore(Config::default(), h.now, &old).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(restored.dump(), before);
    // The live state moved on and snapshots just as well.
    assert_ne!(h.core.dump(), before);
    let now = Core::restore(Config::default(), h.now, &h.core.snapshot())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(now.dump(), h.core.dump());
    assert_eq!(
        now.tree().approximate_data_size(),
        h.core.tree().approximate_data_size()
    );
    assert_eq!(now.tree().descendant_count("/p"), 150 + 50);
}
