//! multi (14) and multiRead (22): success, a failure at each position with ZooKeeper's exact
//! per-op error encoding (earlier ops Ok, the failing one its code, later ones
//! RuntimeInconsistency, all as type -1 ErrorResponse), nothing applied on failure, sequential
//! numbering inside one multi, and multiRead with mixed per-op results.

use anyhow::Result;

use crate::harness::Ctx;
use crate::scenarios::nodes::{EPHEMERAL, EPHEMERAL_SEQUENTIAL, PERSISTENT, PERSISTENT_SEQUENTIAL};
use crate::wire::{body::SubOp, op};

pub async fn multi_success(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.create(&ctx.p("/old"), "", PERSISTENT).await?;
    let (a, b, old, cont) = (ctx.p("/a"), ctx.p("/b"), ctx.p("/old"), ctx.p("/cont"));
    let (ab, e) = (ctx.p("/a/b"), ctx.p("/e"));
    c.multi(
        "create a, create2 b, create a/b, setData a, check a, delete old, create2 container, create eph",
        &[
            SubOp::Create { path: &a, data: b"1", flags: PERSISTENT },
            SubOp::Create2 { path: &b, data: b"2", flags: PERSISTENT },
            SubOp::Create { path: &ab, data: b"", flags: PERSISTENT },
            SubOp::SetData { path: &a, data: b"new", version: 0 },
            SubOp::Check { path: &a, version: 1 },
            SubOp::Delete { path: &old, version: 0 },
            SubOp::Create2 { path: &cont, data: b"", flags: 4 },
            SubOp::Create2 { path: &e, data: b"", flags: EPHEMERAL },
        ],
    )
    .await?;
    c.get_data(&ctx.p("/a"), false).await?;
    c.exists(&ctx.p("/old"), false).await?;
    c.get_children2(&ctx.p(""), false).await?;
    c.multi("empty", &[]).await?;
    ctx.note("-- delete then re-create the same path in one multi");
    c.multi(
        "delete b, create b",
        &[
            SubOp::Delete {
                path: &b,
                version: -1,
            },
            SubOp::Create2 {
                path: &b,
                data: b"again",
                flags: PERSISTENT,
            },
        ],
    )
    .await?;
    c.multi(
        "check only",
        &[SubOp::Check {
            path: &b,
            version: 0,
        }],
    )
    .await?;
    c.close().await
}

pub async fn multi_failure_positions(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.create(&ctx.p("/a"), "v", PERSISTENT).await?;
    c.create(&ctx.p("/full"), "", PERSISTENT).await?;
    c.create(&ctx.p("/full/c"), "", PERSISTENT).await?;
    c.create(&ctx.p("/eph"), "", EPHEMERAL).await?;
    let (a, x, y, missing) = (ctx.p("/a"), ctx.p("/x"), ctx.p("/y"), ctx.p("/missing"));
    let (full, eph_child, bad) = (ctx.p("/full"), ctx.p("/eph/c"), ctx.p("//bad"));
    let cases: Vec<(&str, Vec<SubOp<'_>>)> = vec![
        (
            "fail first: create existing",
            vec![
                SubOp::Create {
                    path: &a,
                    data: b"",
                    flags: PERSISTENT,
                },
                SubOp::Create {
                    path: &x,
                    data: b"",
                    flags: PERSISTENT,
                },
                SubOp::SetData {
                    path: &a,
                    data: b"z",
                    version: -1,
                },
            ],
        ),
        (
            "fail middle: setData bad version",
            vec![
                SubOp::Create {
                    path: &x,
                    data: b"",
                    flags: PERSISTENT,
                },
                SubOp::SetData {
                    path: &a,
                    data: b"z",
                    version: 99,
                },
                SubOp::Create {
                    path: &y,
                    data: b"",
                    flags: PERSISTENT,
                },
            ],
        ),
        (
            "fail last: check bad version",
            vec![
                SubOp::Create2 {
                    path: &x,
                    data: b"",
                    flags: PERSISTENT,
                },
                SubOp::SetData {
                    path: &a,
                    data: b"z",
                    version: -1,
                },
                SubOp::Check {
                    path: &a,
                    version: 5,
                },
            ],
        ),
        (
            "check on a missing node",
            vec![
                SubOp::Check {
                    path: &missing,
                    version: -1,
                },
                SubOp::Create {
                    path: &x,
                    data: b"",
                    flags: PERSISTENT,
                },
            ],
        ),
        (
            "delete not empty",
            vec![
                SubOp::Create {
                    path: &x,
                    data: b"",
                    flags: PERSISTENT,
                },
                SubOp::Delete {
                    path: &full,
                    version: -1,
                },
            ],
        ),
        (
            "delete missing",
            vec![SubOp::Delete {
                path: &missing,
                version: -1,
            }],
        ),
        (
            "child of ephemeral",
            vec![
                SubOp::Create {
                    path: &x,
                    data: b"",
                    flags: PERSISTENT,
                },
                SubOp::Create {
                    path: &eph_child,
                    data: b"",
                    flags: PERSISTENT,
                },
            ],
        ),
        (
            "bad path",
            vec![
                SubOp::Create {
                    path: &x,
                    data: b"",
                    flags: PERSISTENT,
                },
                SubOp::Create {
                    path: &bad,
                    data: b"",
                    flags: PERSISTENT,
                },
            ],
        ),
        (
            "two failures: the first is reported, the second is RuntimeInconsistency",
            vec![
                SubOp::Create {
                    path: &x,
                    data: b"",
                    flags: PERSISTENT,
                },
                SubOp::Delete {
                    path: &missing,
                    version: -1,
                },
                SubOp::Create {
                    path: &a,
                    data: b"",
                    flags: PERSISTENT,
                },
                SubOp::Create {
                    path: &y,
                    data: b"",
                    flags: PERSISTENT,
                },
            ],
        ),
        (
            "a later op depends on an earlier one that would succeed",
            vec![
                SubOp::Create {
                    path: &x,
                    data: b"",
                    flags: PERSISTENT,
                },
                SubOp::SetData {
                    path: &x,
                    data: b"1",
                    version: 0,
                },
                SubOp::Check {
                    path: &x,
                    version: 0,
                },
            ],
        ),
        (
            "deleting the child makes full deletable",
            vec![SubOp::Delete {
                path: &full,
                version: -1,
            }],
        ),
    ];
    for (label, ops) in &cases {
        c.multi(label, ops).await?;
        ctx.note("   nothing applied:");
        c.exists(&ctx.p("/x"), false).await?;
        c.get_data(&ctx.p("/a"), false).await?;
    }
    c.exists(&ctx.p(""), false).await?;
    ctx.note("-- a read op inside multi");
    let mut b = crate::wire::body::multi(&[SubOp::Create {
        path: &x,
        data: b"",
        flags: 0,
    }]);
    // Replace the terminator with a getData sub-op and a fresh terminator.
    b.truncate(b.len() - 9);
    let extra = crate::wire::body::multi(&[SubOp::GetData { path: &a }]);
    b.extend_from_slice(&extra);
    c.call("multi(create x, getData a)", op::MULTI, &b).await?;
    c.exists(&ctx.p("/x"), false).await?;
    c.close().await
}

pub async fn multi_sequential(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.create(&ctx.p("/first"), "", PERSISTENT).await?;
    let (s, e, child) = (ctx.p("/s-"), ctx.p("/e-"), ctx.p("/s-0000000001/child"));
    c.multi(
        "two sequential, an ephemeral sequential, a child of the first",
        &[
            SubOp::Create {
                path: &s,
                data: b"",
                flags: PERSISTENT_SEQUENTIAL,
            },
            SubOp::Create2 {
                path: &s,
                data: b"",
                flags: PERSISTENT_SEQUENTIAL,
            },
            SubOp::Create2 {
                path: &e,
                data: b"",
                flags: EPHEMERAL_SEQUENTIAL,
            },
            SubOp::Create {
                path: &child,
                data: b"",
                flags: PERSISTENT,
            },
        ],
    )
    .await?;
    ctx.note("-- a failed multi with sequential creates does not advance the counter");
    let missing = ctx.p("/missing");
    c.multi(
        "sequential then failure",
        &[
            SubOp::Create {
                path: &s,
                data: b"",
                flags: PERSISTENT_SEQUENTIAL,
            },
            SubOp::Check {
                path: &missing,
                version: -1,
            },
        ],
    )
    .await?;
    c.create(&ctx.p("/s-"), "", PERSISTENT_SEQUENTIAL).await?;
    c.get_children2(&ctx.p(""), false).await?;
    c.close().await
}

pub async fn multi_read_mixed(ctx: Ctx) -> Result<()> {
    let mut c = ctx.client().await?;
    c.create(&ctx.p(""), "", PERSISTENT).await?;
    c.create(&ctx.p("/a"), "va", PERSISTENT).await?;
    c.create(&ctx.p("/a/k"), "", PERSISTENT).await?;
    let (root, a, missing, bad) = (ctx.p(""), ctx.p("/a"), ctx.p("/missing"), "bad".to_owned());
    c.multi_read(
        "mixed",
        &[
            SubOp::GetData { path: &a },
            SubOp::GetChildren { path: &root },
            SubOp::GetData { path: &missing },
            SubOp::GetChildren { path: &missing },
            SubOp::GetChildren { path: &a },
            SubOp::GetData { path: &bad },
        ],
    )
    .await?;
    c.multi_read("empty", &[]).await?;
    ctx.note("-- a write op inside multiRead");
    let mark = ctx.mark();
    c.multi_read(
        "create inside",
        &[SubOp::Create {
            path: &missing,
            data: b"",
            flags: 0,
        }],
    )
    .await?;
    // Both answer MarshallingError. Apache also sends a 9-byte body: it answers the failed
    // multiRead with an empty MultiResponse (just the done header {-1, true, -1}) under the
    // error header. Clients ignore the body of a reply whose err is non-zero (the Java client's
    // ClientCnxn reads a body only when err == 0), so zkit sends none, as for every error.
    ctx.known_difference(
        mark,
        "body of a multiRead error reply",
        &["[s1] multiRead(create inside) -> MarshallingError +9 body bytes"],
        &["[s1] multiRead(create inside) -> MarshallingError"],
    )?;
    c.exists(&ctx.p("/missing"), false).await?;
    c.close().await
}
