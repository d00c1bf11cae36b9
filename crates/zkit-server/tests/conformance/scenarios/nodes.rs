//! Node operations: create in every mode, the create error checks and their order, sequential
//! naming, parent cversion/pzxid bookkeeping, delete, setData, ACL reads and writes, the
//! child/ephemeral/count reads and the special `/zookeeper` paths.

use anyhow::Result;

use crate::harness::Ctx;
use crate::wire::{body, op, open_acl, AclEntry};

pub const PERSISTENT: i32 = 0;
pub const EPHEMERAL: i32 = 1;
pub const PERSISTENT_SEQUENTIAL: i32 = 2;
pub const EPHEMERAL_SEQUENTIAL: i32 = 3;
pub const CONTAINER: i32 = 4;
pub const PERSISTENT_WITH_TTL: i32 = 5;
pub const PERSISTENT_SEQUENTIAL_WITH_TTL: i32 = 6;

fn acl(perms: i32, scheme: &str, id: &str) -> Vec<AclEntry> {
    vec![AclEntry {
        perms,
        scheme: scheme.into(),
        id: id.into(),
    }]
}

pub async fn create_modes_and_stats(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "root", PERSISTENT).await?;
    c.create2(&ctx.p("/p"), "hello", PERSISTENT).await?;
    c.create2(&ctx.p("/e"), "eph", EPHEMERAL).await?;
    c.create2(&ctx.p("/ps-"), "", PERSISTENT_SEQUENTIAL).await?;
    c.create2(&ctx.p("/es-"), "x", EPHEMERAL_SEQUENTIAL).await?;
    c.create_container(&ctx.p("/c")).await?;
    c.create_ttl(&ctx.p("/t"), PERSISTENT_WITH_TTL, 60_000)
        .await?;
    c.create_ttl(&ctx.p("/ts-"), PERSISTENT_SEQUENTIAL_WITH_TTL, 60_000)
        .await?;
    // Plain create (op 1) answers with the path only, in every mode.
    c.create(&ctx.p("/plain"), "", PERSISTENT).await?;
    c.create(&ctx.p("/plain-seq-"), "", PERSISTENT_SEQUENTIAL)
        .await?;
    c.create(&ctx.p("/plain-eph"), "", EPHEMERAL).await?;
    // Container and TTL modes through create2 (op 15) rather than their own op codes.
    c.create2(&ctx.p("/c-via-create2"), "", CONTAINER).await?;
    c.create2(&ctx.p("/t-via-create2"), "", PERSISTENT_WITH_TTL)
        .await?;
    // Null data (buffer length -1, what zkCli's `create /a` sends) is kept: getData returns
    // null again (zkCli prints "null"), dataLength is 0, and it is not the same as empty.
    c.call(
        "create(/R/nulldata, data=null)",
        op::CREATE2,
        &body::create_opt(&ctx.p("/nulldata"), None, &open_acl(), 0, None),
    )
    .await?;
    c.get_data(&ctx.p("/nulldata"), false).await?;
    c.multi_read(
        "getData of null data",
        &[body::SubOp::GetData {
            path: &ctx.p("/nulldata"),
        }],
    )
    .await?;
    c.set_data(&ctx.p("/nulldata"), "", -1).await?;
    c.get_data(&ctx.p("/nulldata"), false).await?;
    c.call(
        "setData(/R/nulldata, data=null)",
        op::SET_DATA,
        &body::set_data_opt(&ctx.p("/nulldata"), None, -1),
    )
    .await?;
    c.get_data(&ctx.p("/nulldata"), false).await?;
    for rel in ["/p", "/e", "/c", "/t", "/plain-eph"] {
        c.exists(&ctx.p(rel), false).await?;
    }
    c.get_data(&ctx.p("/p"), false).await?;
    c.get_children2(&ctx.p(""), false).await?;
    c.get_data(&ctx.p(""), false).await?;
    c.close().await
}

pub async fn create_errors_in_order(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.create(&ctx.p("/a"), "", PERSISTENT).await?;
    c.create(&ctx.p("/e"), "", EPHEMERAL).await?;

    ctx.note("-- NoNode, NodeExists, NoChildrenForEphemerals");
    c.create(&ctx.p("/missing/x"), "", PERSISTENT).await?;
    c.create(&ctx.p("/a"), "", PERSISTENT).await?;
    c.create(&ctx.p("/e/x"), "", PERSISTENT).await?;
    c.create(&ctx.p("/e/x-"), "", EPHEMERAL_SEQUENTIAL).await?;

    ctx.note("-- bad paths");
    for (label, path) in [
        ("empty", String::new()),
        ("no slash", "noslash".to_owned()),
        ("root", "/".to_owned()),
        ("trailing slash, existing parent", ctx.p("/a/")),
        ("trailing slash, missing parent", ctx.p("/nope/")),
        ("double slash", ctx.p("//x")),
        ("double slash under existing", ctx.p("/a//x")),
        ("dot", ctx.p("/a/.")),
        ("dotdot", ctx.p("/a/..")),
        ("dot segment", ctx.p("/./x")),
        ("NUL", ctx.p("/a\0b")),
        ("control char", ctx.p("/a\u{1}b")),
        ("DEL char", ctx.p("/a\u{7f}b")),
        ("unicode ok", ctx.p("/ünï")),
        ("dot under ephemeral", ctx.p("/e/.")),
        ("dot prefix ok", ctx.p("/.hidden")),
    ] {
        ctx.note(format!("path case: {label}"));
        c.create(&path, "", PERSISTENT).await?;
    }
    ctx.note("-- sequential with a trailing slash names the child by suffix alone");
    c.create(&ctx.p("/a/"), "", PERSISTENT_SEQUENTIAL).await?;
    c.create(&ctx.p("/a//"), "", PERSISTENT_SEQUENTIAL).await?;

    ctx.note("-- ACLs");
    c.create_acl(&ctx.p("/acl-empty"), &[], "[]").await?;
    c.create_acl(
        &ctx.p("/acl-unknown-scheme"),
        &acl(31, "nosuch", "x"),
        "nosuch:x",
    )
    .await?;
    c.create_acl(
        &ctx.p("/acl-world-other"),
        &acl(31, "world", "someone"),
        "world:someone",
    )
    .await?;
    c.create_acl(&ctx.p("/acl-auth-noauth"), &acl(31, "auth", ""), "auth:")
        .await?;
    c.create_acl(
        &ctx.p("/acl-bad-ip"),
        &acl(31, "ip", "not-an-ip"),
        "ip:not-an-ip",
    )
    .await?;
    c.create_acl(
        &ctx.p("/acl-ip"),
        &acl(31, "ip", "127.0.0.1"),
        "ip:127.0.0.1",
    )
    .await?;
    c.create_acl(
        &ctx.p("/acl-ip-cidr"),
        &acl(31, "ip", "10.0.0.0/8"),
        "ip:10.0.0.0/8",
    )
    .await?;
    c.create_acl(
        &ctx.p("/acl-digest-bad"),
        &acl(31, "digest", "nocolon"),
        "digest:nocolon",
    )
    .await?;
    c.create_acl(
        &ctx.p("/acl-digest"),
        &acl(31, "digest", "u:abc="),
        "digest:u:abc=",
    )
    .await?;
    c.create_acl(
        &ctx.p("/acl-read-only"),
        &acl(1, "world", "anyone"),
        "1:world:anyone",
    )
    .await?;
    c.create_acl(
        &ctx.p("/acl-perms-zero"),
        &acl(0, "world", "anyone"),
        "0:world:anyone",
    )
    .await?;
    ctx.note("ACL is checked before the parent: invalid ACL under a missing parent");
    c.create_acl(&ctx.p("/missing/acl"), &acl(31, "nosuch", "x"), "nosuch:x")
        .await?;

    ctx.note("-- modes and TTLs");
    c.create(&ctx.p("/flags7"), "", 7).await?;
    c.create(&ctx.p("/flags-1"), "", -1).await?;
    c.create(&ctx.p("/flags99"), "", 99).await?;
    c.create(&ctx.p("/ttl-mode-via-create"), "", PERSISTENT_WITH_TTL)
        .await?;
    c.create(&ctx.p("/container-via-create"), "", CONTAINER)
        .await?;
    c.create_ttl(&ctx.p("/ttl-non-ttl-mode"), PERSISTENT, 1000)
        .await?;
    c.create_ttl(&ctx.p("/ttl-ephemeral-mode"), EPHEMERAL, 1000)
        .await?;
    c.create_ttl(&ctx.p("/ttl-zero"), PERSISTENT_WITH_TTL, 0)
        .await?;
    c.create_ttl(&ctx.p("/ttl-negative"), PERSISTENT_WITH_TTL, -5)
        .await?;
    c.create_ttl(&ctx.p("/ttl-max"), PERSISTENT_WITH_TTL, 1_099_511_627_775)
        .await?;
    c.create_ttl(
        &ctx.p("/ttl-over-max"),
        PERSISTENT_WITH_TTL,
        1_099_511_627_776,
    )
    .await?;
    // A 1 ms TTL node may be reaped at any moment after its create (Apache's reaper runs every
    // second here), so it lives in a directory of its own that no listing below looks into.
    c.create(&ctx.p("/ttl-one-dir"), "", PERSISTENT).await?;
    c.create_ttl(&ctx.p("/ttl-one-dir/ttl-one"), PERSISTENT_WITH_TTL, 1)
        .await?;
    ctx.note("TTL is checked before the parent");
    c.create_ttl(&ctx.p("/missing/ttl"), PERSISTENT_WITH_TTL, 0)
        .await?;
    c.create_ttl(&ctx.p("/e/ttl-under-ephemeral"), PERSISTENT_WITH_TTL, 1000)
        .await?;
    c.call(
        "createContainer(/R/container-flag0, mode=0)",
        op::CREATE_CONTAINER,
        &crate::wire::body::create(
            &ctx.p("/container-flag0"),
            b"",
            &open_acl(),
            PERSISTENT,
            None,
        ),
    )
    .await?;
    c.get_children(&ctx.p(""), false).await?;
    c.get_children(&ctx.p("/a"), false).await?;
    c.close().await
}

pub async fn sequential_naming(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.create(&ctx.p("/q-"), "", PERSISTENT_SEQUENTIAL).await?;
    c.create(&ctx.p("/q-"), "", PERSISTENT_SEQUENTIAL).await?;
    ctx.note("-- a non-sequential create advances the counter");
    c.create(&ctx.p("/plain"), "", PERSISTENT).await?;
    c.create(&ctx.p("/q-"), "", EPHEMERAL_SEQUENTIAL).await?;
    ctx.note("-- deletes do not move it back");
    c.delete(&ctx.p("/q-0000000000"), -1).await?;
    c.delete(&ctx.p("/q-0000000001"), -1).await?;
    c.create(&ctx.p("/q-"), "", PERSISTENT_SEQUENTIAL).await?;
    ctx.note("-- failed creates do not advance it");
    c.create(&ctx.p("/plain"), "", PERSISTENT).await?;
    c.create(&ctx.p("/q-"), "", PERSISTENT_SEQUENTIAL).await?;
    ctx.note(
        "-- different prefixes share the parent's counter; the suffix can collide with a name",
    );
    c.create(&ctx.p("/other-"), "", PERSISTENT_SEQUENTIAL)
        .await?;
    c.create(&ctx.p("/x0000000007"), "", PERSISTENT).await?;
    c.create(&ctx.p("/x"), "", PERSISTENT_SEQUENTIAL).await?;
    c.create(&ctx.p("/x"), "", PERSISTENT_SEQUENTIAL).await?;
    ctx.note(
        "-- setData on the parent does not affect naming; sequential TTL and container children",
    );
    c.set_data(&ctx.p(""), "d", -1).await?;
    c.create_ttl(&ctx.p("/ttl-"), PERSISTENT_SEQUENTIAL_WITH_TTL, 60_000)
        .await?;
    c.get_children2(&ctx.p(""), false).await?;
    c.close().await
}

pub async fn parent_versions_and_zxids(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create2(&ctx.p(""), "", PERSISTENT).await?;
    c.create2(&ctx.p("/a"), "", PERSISTENT).await?;
    c.exists(&ctx.p(""), false).await?;
    c.create2(&ctx.p("/b"), "", EPHEMERAL).await?;
    c.exists(&ctx.p(""), false).await?;
    c.set_data(&ctx.p("/a"), "changed", -1).await?;
    ctx.note("-- setData on a child leaves the parent's cversion/pzxid");
    c.exists(&ctx.p(""), false).await?;
    c.delete(&ctx.p("/a"), -1).await?;
    ctx.note("-- delete bumps cversion and pzxid");
    c.exists(&ctx.p(""), false).await?;
    c.set_data(&ctx.p(""), "parent", -1).await?;
    c.exists(&ctx.p(""), false).await?;
    ctx.note("-- failed child ops leave the parent alone");
    c.create(&ctx.p("/b"), "", PERSISTENT).await?;
    c.delete(&ctx.p("/nope"), -1).await?;
    c.exists(&ctx.p(""), false).await?;
    c.create2(&ctx.p("/a"), "", PERSISTENT).await?;
    c.create2(&ctx.p("/a/x"), "", PERSISTENT).await?;
    c.exists(&ctx.p("/a"), false).await?;
    c.exists(&ctx.p(""), false).await?;
    c.close().await?;
    ctx.note("-- closeSession deleted the ephemeral child");
    let mut d = ctx.client().await?;
    d.exists(&ctx.p(""), false).await?;
    d.close().await
}

pub async fn delete_paths_and_versions(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.create(&ctx.p("/a"), "", PERSISTENT).await?;
    c.create(&ctx.p("/a/child"), "", PERSISTENT).await?;
    c.set_data(&ctx.p("/a/child"), "1", -1).await?;
    c.delete(&ctx.p("/missing"), -1).await?;
    c.delete(&ctx.p("/missing"), 5).await?;
    ctx.note("-- NotEmpty vs BadVersion order");
    c.delete(&ctx.p("/a"), -1).await?;
    c.delete(&ctx.p("/a"), 3).await?;
    c.delete(&ctx.p("/a/child"), 0).await?;
    c.delete(&ctx.p("/a/child"), 2).await?;
    c.delete(&ctx.p("/a/child"), -2).await?;
    c.delete(&ctx.p("/a/child"), 1).await?;
    c.delete(&ctx.p("/a/child"), 1).await?;
    c.delete(&ctx.p("/a"), 0).await?;
    ctx.note("-- bad paths and special nodes");
    for path in [
        String::new(),
        "noslash".to_owned(),
        "/".to_owned(),
        ctx.p("/"),
        ctx.p("//a"),
        ctx.p("/."),
        "/zookeeper".to_owned(),
        "/zookeeper/quota".to_owned(),
        "/zookeeper/config".to_owned(),
    ] {
        c.delete(&path, -1).await?;
    }
    c.close().await
}

pub async fn set_data_versions(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.create2(&ctx.p("/n"), "v0", PERSISTENT).await?;
    c.set_data(&ctx.p("/n"), "v1", 0).await?;
    c.set_data(&ctx.p("/n"), "v2", 0).await?;
    c.set_data(&ctx.p("/n"), "v2", 1).await?;
    c.set_data(&ctx.p("/n"), "same", -1).await?;
    c.set_data(&ctx.p("/n"), "same", -1).await?;
    c.set_data(&ctx.p("/n"), "", -1).await?;
    c.get_data(&ctx.p("/n"), false).await?;
    c.set_data(&ctx.p("/missing"), "x", -1).await?;
    c.set_data(&ctx.p("/missing"), "x", 7).await?;
    c.set_data(&ctx.p("/n"), "neg", -2).await?;
    c.set_data("/", "root", 99).await?;
    c.set_data("bad", "x", -1).await?;
    c.set_data(&ctx.p("/n/"), "x", -1).await?;
    c.close().await
}

pub async fn acl_read_and_write(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.create(&ctx.p("/n"), "", PERSISTENT).await?;
    c.get_acl(&ctx.p("/n")).await?;
    let read_all = acl(31, "world", "anyone");
    let ip = acl(31, "ip", "127.0.0.1");
    c.set_acl(&ctx.p("/n"), &ip, 0).await?;
    c.set_acl(&ctx.p("/n"), &read_all, 0).await?;
    c.set_acl(&ctx.p("/n"), &read_all, 1).await?;
    c.set_acl(&ctx.p("/n"), &read_all, -1).await?;
    c.get_acl(&ctx.p("/n")).await?;
    c.exists(&ctx.p("/n"), false).await?;
    c.set_acl(&ctx.p("/n"), &[], -1).await?;
    c.set_acl(&ctx.p("/n"), &acl(31, "nosuch", "x"), -1).await?;
    c.set_acl(&ctx.p("/missing"), &read_all, -1).await?;
    // A version that cannot match: Apache allows setACL on "/" and "/zookeeper", and a shared
    // Apache server must not be changed by the suite.
    c.set_acl("/", &read_all, 12345).await?;
    c.set_acl("/zookeeper", &read_all, 12345).await?;
    c.get_acl(&ctx.p("/missing")).await?;
    c.get_acl("/zookeeper").await?;
    c.get_acl("bad").await?;
    ctx.note("-- multi-entry ACLs are stored and returned in order");
    let two = vec![
        AclEntry {
            perms: 1,
            scheme: "world".into(),
            id: "anyone".into(),
        },
        AclEntry {
            perms: 31,
            scheme: "ip".into(),
            id: "127.0.0.1".into(),
        },
    ];
    c.set_acl(&ctx.p("/n"), &two, -1).await?;
    c.get_acl(&ctx.p("/n")).await?;
    c.close().await
}

pub async fn reads_and_counts(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.create(&ctx.p("/a"), "", PERSISTENT).await?;
    c.create(&ctx.p("/a/b"), "", PERSISTENT).await?;
    c.create(&ctx.p("/a/b/c"), "", EPHEMERAL).await?;
    c.create(&ctx.p("/e1"), "", EPHEMERAL).await?;
    c.create(&ctx.p("/e2-"), "", EPHEMERAL_SEQUENTIAL).await?;
    c.get_children(&ctx.p(""), false).await?;
    c.get_children2(&ctx.p(""), false).await?;
    c.get_children(&ctx.p("/a/b/c"), false).await?;
    c.get_children(&ctx.p("/missing"), false).await?;
    c.get_children2(&ctx.p("/missing"), false).await?;
    c.get_children("bad", false).await?;
    c.exists(&ctx.p("/missing"), false).await?;
    c.exists("bad", false).await?;
    c.get_data(&ctx.p("/missing"), false).await?;
    c.get_data(&ctx.p("/a/"), false).await?;
    for (label, path) in [
        ("root", ctx.p("")),
        ("a", ctx.p("/a")),
        ("leaf", ctx.p("/a/b/c")),
        ("missing", ctx.p("/missing")),
        ("bad", "bad".to_owned()),
    ] {
        ctx.note(format!("getAllChildrenNumber {label}"));
        c.call(
            "getAllChildrenNumber",
            op::GET_ALL_CHILDREN_NUMBER,
            &crate::wire::body::path(&path),
        )
        .await?;
    }
    for (label, path) in [
        ("root prefix", ctx.p("")),
        ("prefix with slash", ctx.p("/")),
        ("name prefix", ctx.p("/e")),
        ("sub tree", ctx.p("/a")),
        ("missing", ctx.p("/missing")),
        ("bad", "bad".to_owned()),
    ] {
        ctx.note(format!("getEphemerals {label}"));
        c.call(
            "getEphemerals",
            op::GET_EPHEMERALS,
            &crate::wire::body::path(&path),
        )
        .await?;
    }
    ctx.note("-- another session sees none of the first one's ephemerals as its own");
    let mut d = ctx.client().await?;
    d.call(
        "getEphemerals",
        op::GET_EPHEMERALS,
        &crate::wire::body::path(&ctx.p("")),
    )
    .await?;
    d.exists(&ctx.p("/e1"), false).await?;
    for path in [ctx.p(""), ctx.p("/missing"), "bad".to_owned()] {
        c.call("sync", op::SYNC, &crate::wire::body::path(&path))
            .await?;
    }
    d.close().await?;
    c.close().await
}

pub async fn special_paths(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    // Never a successful write here: the suite must leave a shared Apache server as it was.
    c.exists("/zookeeper", false).await?;
    c.exists("/zookeeper/quota", false).await?;
    c.exists("/zookeeper/config", false).await?;
    c.get_data("/zookeeper/quota", false).await?;
    c.get_children("/zookeeper", false).await?;
    c.get_acl("/zookeeper/config").await?;
    c.set_data("/zookeeper", "x", 12345).await?;
    c.set_data("/zookeeper/quota", "x", 12345).await?;
    c.set_data("/zookeeper/config", "x", 12345).await?;
    c.set_acl("/zookeeper/config", &open_acl(), 12345).await?;
    c.get_children("/zookeeper/quota", false).await?;
    c.call(
        "getAllChildrenNumber(/zookeeper)",
        op::GET_ALL_CHILDREN_NUMBER,
        &crate::wire::body::path("/zookeeper"),
    )
    .await?;
    c.create("/zookeeper", "", PERSISTENT).await?;
    c.create("/zookeeper/quota", "", PERSISTENT).await?;
    c.create("/zookeeper/config", "", PERSISTENT).await?;
    c.delete("/zookeeper/config", -1).await?;
    c.delete("/zookeeper/quota", -1).await?;
    c.close().await
}
