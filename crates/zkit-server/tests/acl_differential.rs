//! ACLs and authentication, differentially: one scenario of raw requests runs against zkit and
//! against Apache ZooKeeper 3.8 (ZKIT_APACHE_ZK, started by scripts/test with the superDigest of
//! `super:test`), and the two transcripts — error codes, ACL lists, whoAmI answers, watch
//! events, closed connections — must be identical. A second test checks, on zkit alone, that an
//! unauthenticated client reads, writes and watches nothing it may not.

mod common;

use std::net::SocketAddr;

use common::Raw;
use zkit_proto::op::{perms, OpCode};
use zkit_proto::{
    Acl, AddWatchRequest, AuthPacket, CheckVersionRequest, CreateRequest, DeleteRequest, Id,
    MultiOp, MultiReadOp, MultiReadResult, MultiResult, PathWatchRequest, Request, Response,
    SetAclRequest, SetDataRequest, WatcherEvent,
};
use zkit_server::{Server, ServerConfig};

/// `DigestAuthenticationProvider.generateDigest("super:test")`: what scripts/apache-zk passes
/// as `zookeeper.DigestAuthenticationProvider.superDigest`.
const SUPER_DIGEST: &str = "super:D/InIHSb7yEEbrWz8b9l71RjZJU=";

fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
    Acl {
        perms,
        id: Id {
            scheme: scheme.into(),
            id: id.into(),
        },
    }
}

fn world(perms: i32) -> Vec<Acl> {
    vec![acl(perms, "world", "anyone")]
}

fn create(path: &str, acl: Vec<Acl>) -> Request {
    Request::Create(CreateRequest {
        path: path.into(),
        data: Some(b"d".to_vec()),
        acl,
        flags: 0,
    })
}

fn read(path: &str, watch: bool) -> PathWatchRequest {
    PathWatchRequest {
        path: path.into(),
        watch,
    }
}

fn set_data(path: &str, version: i32) -> Request {
    Request::SetData(SetDataRequest {
        path: path.into(),
        data: Some(b"x".to_vec()),
        version,
    })
}

fn set_acl(path: &str, acl: Vec<Acl>, version: i32) -> Request {
    Request::SetAcl(SetAclRequest {
        path: path.into(),
        acl,
        version,
    })
}

fn delete(path: &str, version: i32) -> Request {
    Request::Delete(DeleteRequest {
        path: path.into(),
        version,
    })
}

/// One raw session whose every answer is written to the shared transcript.
struct Client {
    name: &'static str,
    raw: Raw,
    xid: i32,
    closed: bool,
    base: String,
}

impl Client {
    async fn new(addr: SocketAddr, name: &'static str, base: &str) -> Client {
        let (raw, _) = Raw::session(addr).await;
        Client {
            name,
            raw,
            xid: 0,
            closed: false,
            base: base.to_string(),
        }
    }

    fn rel(&self, text: &str) -> String {
        text.replace(&self.base, "BASE")
    }

    /// Reads until the reply to `xid`, writing any watch event seen on the way.
    async fn reply_to(&mut self, xid: i32, log: &mut Vec<String>) -> Option<(i32, Vec<u8>)> {
        loop {
            let Some((header, body)) = self.raw.read_reply().await else {
                self.closed = true;
                log.push(format!("{}: connection closed", self.name));
                return None;
            };
            if header.xid == -1 {
                let event = <WatcherEvent as zkit_proto::Record>::decode_from(&body)
                    .expect("decode WatcherEvent");
                log.push(format!(
                    "{}: event type={} path={}",
                    self.name,
                    event.event_type,
                    self.rel(&event.path)
                ));
                continue;
            }
            if header.xid == xid {
                return Some((header.err, body));
            }
        }
    }

    /// Sends `req` and writes `label: err [summary]` to the log.
    async fn call(&mut self, label: &str, req: Request, log: &mut Vec<String>) {
        assert!(
            !self.closed,
            "{}: {label} on a closed connection",
            self.name
        );
        self.xid += 1;
        let xid = self.xid;
        let op = req.op_code();
        self.raw.send_request(xid, &req).await;
        let Some((err, body)) = self.reply_to(xid, log).await else {
            return;
        };
        let summary = if err == 0 {
            self.summarize(op, &body)
        } else {
            String::new()
        };
        log.push(format!("{}: {label}: err={err}{summary}", self.name));
    }

    fn summarize(&self, op: OpCode, body: &[u8]) -> String {
        match Response::decode(op, body) {
            Ok(Response::GetAcl { acl, stat }) => {
                let list: Vec<String> = acl
                    .iter()
                    .map(|a| format!("{}:{}:{}", a.id.scheme, a.id.id, a.perms))
                    .collect();
                format!(" acl={list:?} aversion={}", stat.aversion)
            }
            Ok(Response::Stat(stat)) if op == OpCode::SetAcl => {
                format!(" aversion={}", stat.aversion)
            }
            Ok(Response::WhoAmI(infos)) => {
                let mut list: Vec<String> = infos
                    .iter()
                    .map(|i| format!("{}:{}", i.auth_scheme, i.user))
                    .collect();
                list.sort();
                format!(" whoami={list:?}")
            }
            Ok(Response::Multi(results)) => {
                let codes: Vec<i32> = results
                    .iter()
                    .map(|r| match r {
                        MultiResult::Error { err } => *err,
                        _ => 0,
                    })
                    .collect();
                format!(" results={codes:?}")
            }
            Ok(Response::MultiRead(results)) => {
                let codes: Vec<i32> = results
                    .iter()
                    .map(|r| match r {
                        MultiReadResult::Error { err } => *err,
                        _ => 0,
                    })
                    .collect();
                format!(" results={codes:?}")
            }
            Ok(Response::GetChildren { children } | Response::GetChildren2 { children, .. }) => {
                let mut c = children;
                c.sort();
                format!(" children={c:?}")
            }
            Ok(Response::AllChildrenNumber(n)) => format!(" count={n}"),
            Ok(_) => String::new(),
            Err(e) => format!(" undecodable ({e})"),
        }
    }

    /// Sends an auth packet (xid -4) and writes the answer; AuthFailed also closes.
    async fn auth(&mut self, scheme: &str, secret: &str, log: &mut Vec<String>) {
        let packet = Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: scheme.into(),
            auth: secret.as_bytes().to_vec(),
        });
        self.raw.send_request(-4, &packet).await;
        if let Some((err, _)) = self.reply_to(-4, log).await {
            log.push(format!("{}: auth {scheme}: err={err}", self.name));
            if err != 0 {
                // AuthFailed: the server closes the connection after the reply.
                self.raw.expect_closed().await;
                self.closed = true;
                log.push(format!("{}: connection closed", self.name));
            }
        }
    }

    /// A round trip, so every event the server sent before it has been read and logged.
    async fn settle(&mut self, log: &mut Vec<String>) {
        self.xid += 1;
        let xid = self.xid;
        self.raw
            .send_request(xid, &Request::Sync { path: "/".into() })
            .await;
        self.reply_to(xid, log).await;
    }
}

/// The whole scenario against one server; returns its transcript.
async fn scenario(addr: SocketAddr, base: &str) -> Vec<String> {
    let mut log = Vec::new();
    let l = &mut log;
    let p = |rel: &str| format!("{base}{rel}");
    let all = perms::ALL;

    let mut a = Client::new(addr, "alice", base).await; // digest alice:secret
    let mut b = Client::new(addr, "anon", base).await; // nothing but its ip
    let mut c = Client::new(addr, "bob", base).await; // digest bob:pw
    let mut s = Client::new(addr, "super", base).await; // super:test
    a.auth("digest", "alice:secret", l).await;
    c.auth("digest", "bob:pw", l).await;
    s.auth("digest", "super:test", l).await;
    let alice = zkit_core::acl::digest_id("alice:secret");

    a.call("create base", create(base, world(all)), l).await;
    a.call(
        "create priv (auth)",
        create(&p("/priv"), vec![acl(all, "auth", "")]),
        l,
    )
    .await;
    a.call(
        "create nobody",
        create(&p("/nobody"), vec![acl(all, "digest", "nobody:xyz")]),
        l,
    )
    .await;

    // InvalidACL, and where it ranks among the create checks.
    for (label, list) in [
        ("auth without ids", vec![acl(all, "auth", "")]),
        ("digest without hash", vec![acl(all, "digest", "bad")]),
        ("ip /33", vec![acl(all, "ip", "1.2.3.4/33")]),
        ("ip not an address", vec![acl(all, "ip", "localhost")]),
        ("empty list", vec![]),
        ("unknown scheme", vec![acl(all, "foo", "bar")]),
        ("world somebody", vec![acl(all, "world", "somebody")]),
    ] {
        b.call(
            &format!("create invalid acl: {label}"),
            create(&p("/inv"), list),
            l,
        )
        .await;
    }
    b.call(
        "create invalid acl under priv",
        create(&p("/priv/x"), vec![acl(all, "auth", "")]),
        l,
    )
    .await;
    b.call(
        "create under missing parent",
        create(&p("/missing/x"), world(all)),
        l,
    )
    .await;
    b.call("create under priv", create(&p("/priv/x"), world(all)), l)
        .await;
    b.call("create existing priv", create(&p("/priv"), world(all)), l)
        .await;
    a.call("create priv/kid", create(&p("/priv/kid"), world(all)), l)
        .await;

    // Every op on a node anon may not touch.
    let priv_ = p("/priv");
    b.call("getData priv", Request::GetData(read(&priv_, false)), l)
        .await;
    b.call(
        "getChildren priv",
        Request::GetChildren(read(&priv_, false)),
        l,
    )
    .await;
    b.call(
        "getChildren2 priv",
        Request::GetChildren2(read(&priv_, false)),
        l,
    )
    .await;
    b.call("exists priv", Request::Exists(read(&priv_, false)), l)
        .await;
    b.call(
        "getACL priv",
        Request::GetAcl {
            path: priv_.clone(),
        },
        l,
    )
    .await;
    b.call(
        "getAllChildrenNumber priv",
        Request::GetAllChildrenNumber {
            path: priv_.clone(),
        },
        l,
    )
    .await;
    b.call("setData priv", set_data(&priv_, -1), l).await;
    b.call("setData priv bad version", set_data(&priv_, 99), l)
        .await;
    b.call("setACL priv", set_acl(&priv_, world(all), -1), l)
        .await;
    b.call(
        "setACL priv bad version",
        set_acl(&priv_, world(all), 99),
        l,
    )
    .await;
    b.call("delete priv/missing", delete(&p("/priv/missing"), -1), l)
        .await;
    b.call("delete priv/kid", delete(&p("/priv/kid"), -1), l)
        .await;
    b.call(
        "getData priv/missing",
        Request::GetData(read(&p("/priv/missing"), false)),
        l,
    )
    .await;
    b.call("delete priv bad version", delete(&priv_, 99), l)
        .await;
    b.call(
        "check priv",
        Request::Check(CheckVersionRequest {
            path: priv_.clone(),
            version: -1,
        }),
        l,
    )
    .await;
    b.call(
        "multi check base + setData priv",
        Request::Multi(vec![
            MultiOp::Check(CheckVersionRequest {
                path: base.into(),
                version: -1,
            }),
            MultiOp::SetData(SetDataRequest {
                path: priv_.clone(),
                data: Some(b"m".to_vec()),
                version: -1,
            }),
            MultiOp::Create(CreateRequest {
                path: p("/m1"),
                data: None,
                acl: world(all),
                flags: 0,
            }),
        ]),
        l,
    )
    .await;
    b.call(
        "multi create under priv",
        Request::Multi(vec![MultiOp::Create(CreateRequest {
            path: p("/priv/m"),
            data: None,
            acl: world(all),
            flags: 0,
        })]),
        l,
    )
    .await;
    b.call(
        "multiRead priv + base",
        Request::MultiRead(vec![
            MultiReadOp::GetData(read(&priv_, false)),
            MultiReadOp::GetChildren(read(base, false)),
            MultiReadOp::GetChildren(read(&priv_, false)),
        ]),
        l,
    )
    .await;
    c.call("bob getData priv", Request::GetData(read(&priv_, false)), l)
        .await;

    // setACL: aversion checks, InvalidACL, ADMIN.
    a.call("setACL priv version 5", set_acl(&priv_, world(all), 5), l)
        .await;
    a.call("setACL priv empty", set_acl(&priv_, Vec::new(), -1), l)
        .await;
    a.call(
        "setACL priv version 0",
        set_acl(&priv_, vec![acl(all, "digest", &alice)], 0),
        l,
    )
    .await;
    a.call(
        "setACL priv version 0 again",
        set_acl(&priv_, vec![acl(all, "digest", &alice)], 0),
        l,
    )
    .await;
    a.call(
        "getACL priv",
        Request::GetAcl {
            path: priv_.clone(),
        },
        l,
    )
    .await;

    // getACL with READ but not ADMIN hides digest hashes (ZOOKEEPER-1392).
    a.call(
        "create mixed",
        create(
            &p("/mixed"),
            vec![acl(all, "auth", ""), acl(perms::READ, "world", "anyone")],
        ),
        l,
    )
    .await;
    a.call(
        "create admin-for-all",
        create(
            &p("/adm"),
            vec![acl(all, "auth", ""), acl(perms::ADMIN, "world", "anyone")],
        ),
        l,
    )
    .await;
    for who in [&mut a, &mut b, &mut c] {
        who.call("getACL mixed", Request::GetAcl { path: p("/mixed") }, l)
            .await;
        who.call("getACL adm", Request::GetAcl { path: p("/adm") }, l)
            .await;
    }
    b.call(
        "getData mixed",
        Request::GetData(read(&p("/mixed"), false)),
        l,
    )
    .await;
    b.call("setData mixed", set_data(&p("/mixed"), -1), l).await;
    b.call("getData adm", Request::GetData(read(&p("/adm"), false)), l)
        .await;
    b.call(
        "setACL adm",
        set_acl(&p("/adm"), world(perms::ADMIN | perms::READ), -1),
        l,
    )
    .await;
    b.call(
        "getData adm after",
        Request::GetData(read(&p("/adm"), false)),
        l,
    )
    .await;

    // ip ACLs with CIDR (every connection here comes from 127.0.0.1).
    for (name, expr) in [
        ("/ip8", "127.0.0.0/8"),
        ("/ip32", "127.0.0.1/32"),
        ("/ipexact", "127.0.0.1"),
        ("/ipother", "10.0.0.0/8"),
        ("/ip0", "0.0.0.0/0"),
    ] {
        a.call(
            &format!("create {name}"),
            create(&p(name), vec![acl(perms::READ, "ip", expr)]),
            l,
        )
        .await;
        b.call(
            &format!("getData {name}"),
            Request::GetData(read(&p(name), false)),
            l,
        )
        .await;
        b.call(&format!("setData {name}"), set_data(&p(name), -1), l)
            .await;
    }

    // super bypasses everything.
    s.call(
        "super getData nobody",
        Request::GetData(read(&p("/nobody"), false)),
        l,
    )
    .await;
    s.call("super setData nobody", set_data(&p("/nobody"), -1), l)
        .await;
    s.call(
        "super getACL nobody",
        Request::GetAcl { path: p("/nobody") },
        l,
    )
    .await;

    // whoAmI.
    for who in [&mut a, &mut b, &mut c, &mut s] {
        who.call("whoAmI", Request::WhoAmI, l).await;
    }

    // Watches: no event about a node the watcher may not READ (CVE-2024-23944 fix, in
    // Debian's 3.8.0-11+deb12u2 as in 3.8.4+).
    b.call(
        "exists+watch priv/kid2",
        Request::Exists(read(&p("/priv/kid2"), true)),
        l,
    )
    .await;
    b.call(
        "exists+watch pub",
        Request::Exists(read(&p("/pub"), true)),
        l,
    )
    .await;
    b.call(
        "getChildren+watch base",
        Request::GetChildren(read(base, true)),
        l,
    )
    .await;
    b.call(
        "getData+watch priv",
        Request::GetData(read(&priv_, true)),
        l,
    )
    .await;
    b.call(
        "addWatch recursive base",
        Request::AddWatch(AddWatchRequest {
            path: base.into(),
            mode: 1,
        }),
        l,
    )
    .await;
    b.call(
        "addWatch persistent priv",
        Request::AddWatch(AddWatchRequest {
            path: priv_.clone(),
            mode: 0,
        }),
        l,
    )
    .await;
    a.call(
        "create priv/kid2 (auth)",
        create(&p("/priv/kid2"), vec![acl(all, "auth", "")]),
        l,
    )
    .await;
    a.call("create pub", create(&p("/pub"), world(all)), l)
        .await;
    a.call("setData priv", set_data(&priv_, -1), l).await;
    a.call("setData pub", set_data(&p("/pub"), -1), l).await;
    a.call(
        "create priv2 (auth)",
        create(&p("/priv2"), vec![acl(all, "auth", "")]),
        l,
    )
    .await;
    a.call("delete priv/kid2", delete(&p("/priv/kid2"), -1), l)
        .await;
    s.call("super delete nobody", delete(&p("/nobody"), -1), l)
        .await;
    b.settle(l).await;
    s.call(
        "super getData+watch priv",
        Request::GetData(read(&priv_, true)),
        l,
    )
    .await;
    a.call("setData priv again", set_data(&priv_, -1), l).await;
    s.settle(l).await;

    // Auth packets: unknown schemes fail and close; ip always succeeds; digest never fails.
    let mut x = Client::new(addr, "x", base).await;
    x.auth("ip", "", l).await;
    x.auth("digest", "no-colon", l).await;
    x.call("whoAmI", Request::WhoAmI, l).await;
    x.auth("world", "anyone", l).await;
    let mut y = Client::new(addr, "y", base).await;
    y.auth("nope", "secret", l).await;
    log
}

#[tokio::test]
async fn acl_rules_match_apache() {
    let Some(apache) = zkit_testkit::apache_zk() else {
        return;
    };
    let apache: SocketAddr = apache.parse().expect("ZKIT_APACHE_ZK is host:port");
    let server = Server::start(ServerConfig {
        super_digest: Some(SUPER_DIGEST.into()),
        ..ServerConfig::ephemeral()
    })
    .await
    .expect("start zkit");
    let base = zkit_testkit::unique_path("acl");
    let ours = scenario(server.addr(), &base).await;
    let theirs = scenario(apache, &base).await;
    server.stop().await;
    if std::env::var_os("ZKIT_SHOW_TRANSCRIPT").is_some() {
        eprintln!("{}", theirs.join("\n"));
    }
    let diff: Vec<String> = ours
        .iter()
        .zip(&theirs)
        .filter(|(o, t)| o != t)
        .map(|(o, t)| format!("zkit:   {o}\napache: {t}"))
        .collect();
    assert!(
        ours.len() == theirs.len() && diff.is_empty(),
        "transcripts differ ({} vs {} lines):\n{}\n\nfull apache transcript:\n{}",
        ours.len(),
        theirs.len(),
        diff.join("\n"),
        theirs.join("\n")
    );
}

/// zkit alone (no Apache needed): a client with no credentials reads, writes and watches
/// nothing on nodes whose ACL does not admit it, and still gets what `world` allows.
#[tokio::test]
async fn unauthenticated_client_reads_writes_and_watches_nothing_it_may_not() {
    let server = Server::start(ServerConfig::ephemeral())
        .await
        .expect("start zkit");
    let addr = server.addr();
    let base = zkit_testkit::unique_path("noauth");
    let mut log = Vec::new();
    let l = &mut log;
    let mut owner = Client::new(addr, "owner", &base).await;
    let mut anon = Client::new(addr, "anon", &base).await;
    owner.auth("digest", "owner:pw", l).await;
    owner
        .call("base", create(&base, world(perms::ALL)), l)
        .await;
    let secret = format!("{base}/secret");
    owner
        .call(
            "secret",
            create(&secret, vec![acl(perms::ALL, "auth", "")]),
            l,
        )
        .await;
    // Watches set where the server allows it (exists needs no permission in ZooKeeper).
    anon.call(
        "exists+watch secret/kid",
        Request::Exists(read(&format!("{secret}/kid"), true)),
        l,
    )
    .await;
    anon.call(
        "addWatch recursive base",
        Request::AddWatch(AddWatchRequest {
            path: base.clone(),
            mode: 1,
        }),
        l,
    )
    .await;
    anon.call(
        "getData+watch secret",
        Request::GetData(read(&secret, true)),
        l,
    )
    .await;
    anon.call(
        "getChildren secret",
        Request::GetChildren(read(&secret, true)),
        l,
    )
    .await;
    anon.call("setData secret", set_data(&secret, -1), l).await;
    anon.call(
        "create under secret",
        create(&format!("{secret}/mine"), world(perms::ALL)),
        l,
    )
    .await;
    anon.call(
        "delete under secret",
        delete(&format!("{secret}/kid"), -1),
        l,
    )
    .await;
    anon.call(
        "getACL secret",
        Request::GetAcl {
            path: secret.clone(),
        },
        l,
    )
    .await;
    anon.call("setACL secret", set_acl(&secret, world(perms::ALL), -1), l)
        .await;
    // Every change the owner makes under the secret node stays invisible to anon.
    owner
        .call(
            "kid",
            create(&format!("{secret}/kid"), vec![acl(perms::ALL, "auth", "")]),
            l,
        )
        .await;
    owner.call("set secret", set_data(&secret, -1), l).await;
    owner
        .call("delete kid", delete(&format!("{secret}/kid"), -1), l)
        .await;
    // A world-readable node is seen (the watch works at all).
    owner
        .call(
            "open",
            create(&format!("{base}/open"), world(perms::ALL)),
            l,
        )
        .await;
    anon.settle(l).await;
    server.stop().await;
    let anon_lines: Vec<&String> = log.iter().filter(|s| s.starts_with("anon:")).collect();
    let expected = [
        "anon: exists+watch secret/kid: err=-101",
        "anon: addWatch recursive base: err=0",
        "anon: getData+watch secret: err=-102",
        "anon: getChildren secret: err=-102",
        "anon: setData secret: err=-102",
        "anon: create under secret: err=-102",
        "anon: delete under secret: err=-102",
        "anon: getACL secret: err=-102",
        "anon: setACL secret: err=-102",
        "anon: event type=1 path=BASE/open",
    ];
    assert_eq!(anon_lines, expected, "full log:\n{}", log.join("\n"));
}
