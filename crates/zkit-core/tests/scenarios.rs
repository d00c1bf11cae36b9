//! Data-driven scenarios (raft-rs style): every `testdata/*.txt` file is a list of blocks
//!
//! ```text
//! # comment lines, then one command
//! <command>
//! ----
//! <expected output, one message per line>
//! ```
//!
//! separated by blank lines. Run with `REWRITE=1` to regenerate the expected blocks, then
//! review the diff.
//!
//! # Commands
//! - `config KEY…` (first command only): `extended` (TTL nodes), `check=MS` (container check
//!   interval), `super=USER:PASSWORD` (the super digest), `tick=MS`.
//! - `connect C [TIMEOUT]`, `reconnect C FROM [badpw]`, `disconnect C`, `peer C IP` (the
//!   connection's `ip:` identity), `tick MS` (advance the clock by MS and tick).
//! - `txns` (the txns logged since the last `txns`), `stats` (the core's counters), `dump PATH` (the node's line of [`Core::dump`]: stored
//!   stat, raw owner, ACL).
//! - Requests, `C OP ARGS…`:
//!   - `create PATH [DATA] [FLAGS]`, `create2 …`, `container PATH`, `ttl PATH TTL [FLAGS]`;
//!     any create takes `acl=SPEC` (default world:anyone:cdrwa);
//!   - `delete PATH [VERSION]`, `deletecontainer PATH`, `set PATH DATA [VERSION]`,
//!     `setacl PATH SPEC [VERSION]`, `check PATH VERSION`, `reconfig`, `close`,
//!     `multi OP; OP…` (create/create2/container/ttl/delete/set/check);
//!   - `get PATH [w]`, `exists PATH [w]`, `ls PATH [w]`, `ls2 PATH [w]`, `getacl PATH`,
//!     `allchildren PATH`, `ephemerals PREFIX`, `sync PATH`, `ping`,
//!     `multiread OP; OP…` (get/ls);
//!   - `addwatch PATH MODE`, `rmwatch PATH TYPE`, `checkwatch PATH TYPE`,
//!     `setwatches ZXID data=a,b exist=… child=…`, `setwatches2 … persistent=… recursive=…`;
//!   - `auth SCHEME [CREDENTIAL]`, `whoami`, `sasl`;
//!   - `reject OP ERROR`: a request with op code OP the shell could not decode, answered with
//!     ERROR (a name such as `MarshallingError`, or a number).
//!
//! A DATA word `null` is a null buffer, a missing one empty data. Any word may be `""` (empty)
//! and take the escapes `\0`, `\xHH` and `\\`. An ACL SPEC is a comma-separated list of
//! `scheme:id:perms` (perms from `cdrwa`; the id may hold colons, as digest ids do), or
//! empty (`acl=`) for an empty list.
//!
//! # Output
//! One line per message the command queued, in order: `C connect …`, `C reply zxid=Z CODE
//! [body]` (with `xid=X` when the reply carries another xid than the request's), `C event
//! TYPE PATH` (with `zxid=Z` if it is not 3.8's -1), `C close`. Stats show ctime and mtime
//! as milliseconds after the scenario's start (`+N`), owners as `sN` (the session of connection N).
//!
//! # Invariants checked on every command
//! Apache's "a failed write changes nothing but the zxid": an error reply to a write comes
//! with exactly one txn, an error txn with that code, one zxid after the last; an error reply
//! to a read logs no txn; and a command that logs an error txn (a failed multi too) leaves the
//! tree as it was. At the end of every file the txns it logged are replayed, through their
//! binary encoding, into a fresh core, and a snapshot is restored: both must give the same
//! state as the live core.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bytes::BytesMut;
use common::*;
use zkit_core::{Config, ConnId, Core, Outbound, Txn, TxnOp};
use zkit_proto::op::perms;
use zkit_proto::*;

struct Runner {
    h: H,
    /// Session id → the connection that created it (printed as `sN`).
    names: BTreeMap<i64, ConnId>,
    creds: BTreeMap<ConnId, (i64, Vec<u8>)>,
    xid: i32,
    /// Whether a command other than `config` ran.
    started: bool,
    /// Txns already listed by a `txns` command.
    txns_listed: usize,
}

fn err_name(code: i32) -> String {
    if code == 0 {
        return "ok".into();
    }
    match ErrorCode::from_i32(code) {
        Some(ErrorCode::InvalidAcl) => "InvalidACL".into(),
        Some(e) => format!("{e:?}"),
        None => code.to_string(),
    }
}

fn err_code(name: &str) -> ErrorCode {
    ErrorCode::ALL
        .iter()
        .copied()
        .find(|e| format!("{e:?}") == name || e.code().to_string() == name)
        .unwrap_or_else(|| panic!("unknown error code {name}"))
}

/// A ctime/mtime: ms after the scenario's start (`+N`), or as stored when earlier (the special
/// nodes' 0).
fn time(ms: i64) -> String {
    if ms >= T0 {
        format!("+{}", ms - T0)
    } else {
        ms.to_string()
    }
}

fn event_name(t: i32) -> &'static str {
    match t {
        1 => "NodeCreated",
        2 => "NodeDeleted",
        3 => "NodeDataChanged",
        4 => "NodeChildrenChanged",
        _ => "Other",
    }
}

/// `cdrwa` letters of a permission mask, as zkCli prints them.
fn perm_letters(p: i32) -> String {
    [
        (perms::CREATE, 'c'),
        (perms::DELETE, 'd'),
        (perms::READ, 'r'),
        (perms::WRITE, 'w'),
        (perms::ADMIN, 'a'),
    ]
    .iter()
    .filter(|(bit, _)| p & bit != 0)
    .map(|(_, c)| *c)
    .collect()
}

fn acl_text(acl: &[Acl]) -> String {
    let parts: Vec<String> = acl
        .iter()
        .map(|a| format!("{}:{}:{}", a.id.scheme, a.id.id, perm_letters(a.perms)))
        .collect();
    format!("[{}]", parts.join(", "))
}

/// An ACL SPEC: `scheme:id:perms,…` (the id is everything between the first and the last
/// colon), or empty for the empty list.
fn parse_acl(spec: &str) -> Vec<Acl> {
    spec.split(',')
        .filter(|e| !e.is_empty())
        .map(|entry| {
            let (scheme, rest) = entry
                .split_once(':')
                .unwrap_or_else(|| panic!("bad ACL entry {entry}"));
            let (id, letters) = rest
                .rsplit_once(':')
                .unwrap_or_else(|| panic!("bad ACL entry {entry}"));
            let perms = letters
                .chars()
                .map(|c| match c {
                    'c' => perms::CREATE,
                    'd' => perms::DELETE,
                    'r' => perms::READ,
                    'w' => perms::WRITE,
                    'a' => perms::ADMIN,
                    other => panic!("bad permission {other} in {entry}"),
                })
                .fold(0, |a, b| a | b);
            Acl {
                perms,
                id: Id {
                    scheme: scheme.into(),
                    id: unescape(id),
                },
            }
        })
        .collect()
}

/// `\0`, `\xHH` and `\\` in a word; `""` is the empty word.
fn unescape(word: &str) -> String {
    if word == "\"\"" {
        return String::new();
    }
    let mut out = String::new();
    let mut chars = word.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('0') => out.push('\0'),
            Some('\\') => out.push('\\'),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                let v = u32::from_str_radix(&hex, 16).unwrap_or_else(|_| panic!("bad \\x{hex}"));
                out.push(char::from_u32(v).unwrap_or_else(|| panic!("bad \\x{hex}")));
            }
            other => panic!("bad escape \\{other:?} in {word}"),
        }
    }
    out
}

impl Runner {
    fn new(config: Config) -> Runner {
        Runner {
            h: H::with(config),
            names: BTreeMap::new(),
            creds: BTreeMap::new(),
            xid: 0,
            started: false,
            txns_listed: 0,
        }
    }

    fn owner(&self, owner: i64) -> String {
        match self.names.get(&owner) {
            Some(c) => format!("s{c}"),
            None => format!("{owner:#x}"),
        }
    }

    fn stat(&self, s: &Stat) -> String {
        format!(
            "czxid={} mzxid={} pzxid={} ctime={} mtime={} ver={} cver={} aver={} owner={} \
             len={} kids={}",
            s.czxid,
            s.mzxid,
            s.pzxid,
            time(s.ctime),
            time(s.mtime),
            s.version,
            s.cversion,
            s.aversion,
            self.owner(s.ephemeral_owner),
            s.data_length,
            s.num_children
        )
    }

    fn txn_op(&self, op: &TxnOp) -> String {
        match op {
            TxnOp::CreateSession { timeout_ms, .. } => {
                format!("createSession timeout={timeout_ms}")
            }
            TxnOp::CloseSession => "closeSession".into(),
            TxnOp::Create {
                path,
                ephemeral_owner,
                parent_cversion,
                ..
            } => format!(
                "create {path} owner={} parent_cversion={parent_cversion}",
                self.owner(*ephemeral_owner)
            ),
            TxnOp::Delete { path } => format!("delete {path}"),
            TxnOp::DeleteContainer { path } => format!("deleteContainer {path}"),
            TxnOp::SetData { path, version, .. } => format!("setData {path} version={version}"),
            TxnOp::SetAcl { path, acl, version } => {
                format!("setACL {path} {} version={version}", acl_text(acl))
            }
            TxnOp::Check { path, version } => format!("check {path} version={version}"),
            TxnOp::Multi(ops) => {
                let ops: Vec<String> = ops.iter().map(|op| self.txn_op(op)).collect();
                format!("multi [{}]", ops.join("; "))
            }
            TxnOp::Error { err } => format!("error {}", err_name(*err)),
            other => format!("{other:?}"),
        }
    }

    fn data(&self, data: &Option<Vec<u8>>, stat: &Stat) -> String {
        match data {
            Some(data) => format!(
                "data={:?} {}",
                String::from_utf8_lossy(data),
                self.stat(stat)
            ),
            None => format!("data=null {}", self.stat(stat)),
        }
    }

    fn body(&self, body: &Response) -> String {
        match body {
            Response::Empty => String::new(),
            Response::Create { path } | Response::Sync { path } => format!(" path={path}"),
            Response::Create2 { path, stat } => format!(" path={path} {}", self.stat(stat)),
            Response::Stat(s) => format!(" {}", self.stat(s)),
            Response::GetData { data, stat } => format!(" {}", self.data(data, stat)),
            Response::GetChildren { children } => format!(" children={children:?}"),
            Response::GetChildren2 { children, stat } => {
                format!(" children={children:?} {}", self.stat(stat))
            }
            Response::GetAcl { acl, stat } => format!(" acl={} {}", acl_text(acl), self.stat(stat)),
            Response::Ephemerals(paths) => format!(" ephemerals={paths:?}"),
            Response::AllChildrenNumber(n) => format!(" count={n}"),
            Response::WhoAmI(infos) => {
                let who: Vec<String> = infos
                    .iter()
                    .map(|i| format!("{}:{}", i.auth_scheme, i.user))
                    .collect();
                format!(" who=[{}]", who.join(", "))
            }
            Response::Multi(results) => {
                let parts: Vec<String> = results
                    .iter()
                    .map(|r| match r {
                        MultiResult::Create { path } => format!("create({path})"),
                        MultiResult::Create2 { path, stat } => {
                            format!("create2({path} {})", self.stat(stat))
                        }
                        MultiResult::Delete => "delete".into(),
                        MultiResult::SetData { stat } => format!("set(ver={})", stat.version),
                        MultiResult::Check => "check".into(),
                        MultiResult::Error { err } => format!("error({})", err_name(*err)),
                    })
                    .collect();
                format!(" [{}]", parts.join(", "))
            }
            Response::MultiRead(results) => {
                let parts: Vec<String> = results
                    .iter()
                    .map(|r| match r {
                        MultiReadResult::GetChildren { children } => format!("ls({children:?})"),
                        MultiReadResult::GetData { data, stat } => {
                            format!("get({})", self.data(data, stat))
                        }
                        MultiReadResult::Error { err } => format!("error({})", err_name(*err)),
                    })
                    .collect();
                format!(" [{}]", parts.join(", "))
            }
            other => format!(" {other:?}"),
        }
    }

    fn render(&mut self, msgs: Vec<(ConnId, Outbound)>, xid: Option<i32>) -> String {
        let mut out = String::new();
        for (c, m) in msgs {
            let line = match m {
                Outbound::Connect {
                    response,
                    close_after,
                } => {
                    if response.session_id != 0 {
                        self.names.entry(response.session_id).or_insert(c);
                    }
                    format!(
                        "{c} connect session={} timeout={}{}",
                        self.owner(response.session_id),
                        response.time_out,
                        if close_after { " close_after" } else { "" }
                    )
                }
                Outbound::Reply { header, body } => {
                    let other_xid = match xid {
                        Some(x) if x != header.xid => format!("xid={} ", header.xid),
                        _ => String::new(),
                    };
                    format!(
                        "{c} reply {other_xid}zxid={} {}{}",
                        header.zxid,
                        err_name(header.err),
                        self.body(&body)
                    )
                }
                Outbound::Event { zxid, event } => {
                    let zxid = if zxid == -1 {
                        String::new()
                    } else {
                        format!("zxid={zxid} ")
                    };
                    format!(
                        "{c} event {zxid}{} {}",
                        event_name(event.event_type),
                        event.path
                    )
                }
                Outbound::Close => format!("{c} close"),
            };
            let _ = writeln!(out, "{line}");
        }
        out
    }

    fn run(&mut self, cmd: &str) -> String {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        let num = |i: usize| -> i64 { words.get(i).and_then(|w| w.parse().ok()).unwrap_or(0) };
        if words.first() == Some(&"config") {
            assert!(!self.started, "`config` must be the first command");
            *self = Runner::new(config(&words[1..]));
            self.started = true;
            return String::new();
        }
        self.started = true;
        match words.first().copied() {
            Some("connect") => {
                let c = num(1) as u64;
                let timeout = if words.len() > 2 {
                    num(2) as i32
                } else {
                    10_000
                };
                let passwd = [c as u8; 16];
                self.h
                    .core
                    .connect(self.h.now, c, connect_req(0, vec![0; 16], timeout), passwd);
                let msgs = self.h.ready();
                if let Some((_, Outbound::Connect { response, .. })) = msgs.first() {
                    self.creds
                        .insert(c, (response.session_id, response.passwd.clone()));
                }
                self.render(msgs, None)
            }
            Some("reconnect") => {
                let (c, from) = (num(1) as u64, num(2) as u64);
                let (sid, mut pw) = self.creds.get(&from).cloned().unwrap_or_default();
                if words.get(3) == Some(&"badpw") {
                    pw = vec![0xee; 16];
                }
                self.h
                    .core
                    .connect(self.h.now, c, connect_req(sid, pw, 10_000), [0; 16]);
                let msgs = self.h.ready();
                self.render(msgs, None)
            }
            Some("disconnect") => {
                self.h.core.disconnect(self.h.now, num(1) as u64);
                let msgs = self.h.ready();
                self.render(msgs, None)
            }
            Some("peer") => {
                let ip = words.get(2).unwrap_or_else(|| panic!("peer C IP"));
                self.h.core.set_peer_ip(num(1) as u64, (*ip).to_owned());
                String::new()
            }
            Some("tick") => {
                self.h.now += num(1);
                self.h.core.tick(self.h.now);
                let msgs = self.h.ready();
                self.render(msgs, None)
            }
            Some("stats") => {
                let s = self.h.core.stats();
                format!(
                    "stats nodes={} sessions={} ephemerals={} watches={} watched_paths={}\n",
                    s.node_count, s.sessions, s.ephemerals, s.watches, s.watched_paths
                )
            }
            Some("txns") => {
                let mut out = String::new();
                for txn in &self.h.txns[self.txns_listed..] {
                    let _ = writeln!(
                        out,
                        "txn {} session={} {}",
                        txn.zxid,
                        self.owner(txn.session),
                        self.txn_op(&txn.op)
                    );
                }
                self.txns_listed = self.h.txns.len();
                out
            }
            Some("dump") => {
                let path = words.get(1).unwrap_or_else(|| panic!("dump PATH"));
                let prefix = format!("node {path} ");
                let mut out = String::new();
                for line in self.h.core.dump().lines() {
                    if line.starts_with(&prefix) {
                        let _ = writeln!(out, "{line}");
                    }
                }
                out
            }
            Some(c) => {
                let conn: u64 = c.parse().unwrap_or_else(|_| panic!("bad command {cmd}"));
                self.request(conn, &words[1..])
            }
            None => String::new(),
        }
    }

    /// A request command: sends it, renders what came out and checks the invariants of
    /// failed requests (see the module docs).
    fn request(&mut self, conn: ConnId, words: &[&str]) -> String {
        self.xid += 1;
        let xid = self.xid;
        let before = self.h.tree_dump();
        let last_zxid = self.h.core.last_zxid();
        let logged = self.h.txns.len();
        let op = if words.first() == Some(&"reject") {
            let op = words.get(1).and_then(|w| w.parse().ok()).unwrap_or(0);
            let err = err_code(words.get(2).copied().unwrap_or(""));
            self.h.core.reject(self.h.now, conn, xid, op, err);
            OpCode::from_i32(op)
        } else {
            let req = request(words);
            let op = req.op_code();
            self.h.core.handle(self.h.now, conn, xid, req);
            Some(op)
        };
        let msgs = self.h.ready();
        let txns = &self.h.txns[logged..];
        let cmd = words.join(" ");
        for (c, m) in &msgs {
            let Outbound::Reply { header, .. } = m else {
                continue;
            };
            if *c != conn || header.xid != xid || header.err == 0 {
                continue;
            }
            if op.is_some_and(OpCode::is_write) {
                assert!(
                    matches!(txns, [Txn { op: TxnOp::Error { err }, .. }] if *err == header.err),
                    "failed write `{cmd}` logged {txns:?}, not one error txn"
                );
                assert_eq!(
                    header.zxid,
                    last_zxid + 1,
                    "failed write `{cmd}` must consume one zxid"
                );
            } else {
                assert!(txns.is_empty(), "failed read `{cmd}` logged {txns:?}");
            }
        }
        if txns.iter().any(|t| matches!(t.op, TxnOp::Error { .. })) {
            assert_eq!(
                self.h.tree_dump(),
                before,
                "`{cmd}` logged an error txn but changed the state"
            );
        }
        self.render(msgs, Some(xid))
    }

    /// Replays every logged txn (through its encoding) into a fresh core and restores a
    /// snapshot: both must be the live state.
    fn check_replay(&self, file: &std::path::Path) {
        let config = self.h.core.config().clone();
        let mut fresh = Core::new(config.clone(), T0);
        for txn in &self.h.txns {
            let mut bytes = BytesMut::new();
            txn.encode(&mut bytes);
            let decoded = Txn::decode(&bytes).unwrap_or_else(|e| panic!("{file:?}: {e}"));
            assert_eq!(&decoded, txn, "{file:?}: txn encoding round trip");
            fresh.apply(&decoded);
        }
        assert_eq!(fresh.dump(), self.h.core.dump(), "{file:?}: replay");
        let restored = Core::restore(config, self.h.now, &self.h.core.snapshot())
            .unwrap_or_else(|e| panic!("{file:?}: {e}"));
        assert_eq!(restored.dump(), self.h.core.dump(), "{file:?}: restore");
    }
}

fn config(words: &[&str]) -> Config {
    let mut config = Config::default();
    for w in words {
        match w.split_once('=') {
            None if *w == "extended" => config.extended_types = true,
            Some(("check", ms)) => {
                config.container_check_interval_ms = ms.parse().expect("check=MS")
            }
            Some(("tick", ms)) => config.tick_time_ms = ms.parse().expect("tick=MS"),
            Some(("super", user_password)) => {
                config.super_digest = Some(zkit_core::acl::digest_id(user_password))
            }
            _ => panic!("unknown config word {w}"),
        }
    }
    config
}

fn flag(words: &[&str], i: usize, default: i32) -> i32 {
    words.get(i).and_then(|w| w.parse().ok()).unwrap_or(default)
}

/// The watch lists of a setWatches command: `key=a,b`.
fn watch_list(w: &[&str], key: &str) -> Vec<String> {
    w.iter()
        .filter_map(|x| x.strip_prefix(key))
        .flat_map(|v| v.split(',').filter(|s| !s.is_empty()))
        .map(unescape)
        .collect()
}

/// `OP ARGS; OP ARGS…` of a multi or multiRead.
fn sub_ops(w: &[&str]) -> Vec<Request> {
    w.join(" ")
        .split(';')
        .filter(|op| !op.trim().is_empty())
        .map(|op| request(&op.split_whitespace().collect::<Vec<_>>()))
        .collect()
}

fn request(w: &[&str]) -> Request {
    // `acl=SPEC` may stand anywhere in a create; the other words are positional.
    let acl = w
        .iter()
        .find_map(|x| x.strip_prefix("acl="))
        .map_or_else(open_acl, parse_acl);
    let w: Vec<&str> = w
        .iter()
        .copied()
        .filter(|x| !x.starts_with("acl="))
        .collect();
    let path = unescape(w.get(1).copied().unwrap_or(""));
    let watch = w.last() == Some(&"w");
    // The word `null` is a null buffer (length -1); a missing word is empty data.
    let data = |i: usize| match w.get(i).copied() {
        Some("null") => None,
        word => Some(unescape(word.unwrap_or("")).into_bytes()),
    };
    let pw = PathWatchRequest {
        path: path.clone(),
        watch,
    };
    let cr = |flags: i32| CreateRequest {
        path: path.clone(),
        data: data(2),
        acl: acl.clone(),
        flags,
    };
    match w.first().copied().unwrap_or("") {
        "create" => Request::Create(cr(flag(&w, 3, 0))),
        "create2" => Request::Create2(cr(flag(&w, 3, 0))),
        "container" => Request::CreateContainer(CreateRequest {
            data: Some(vec![]),
            ..cr(4)
        }),
        "ttl" => Request::CreateTtl(CreateTtlRequest {
            path: path.clone(),
            data: Some(vec![]),
            acl: acl.clone(),
            flags: flag(&w, 3, 5),
            ttl: w.get(2).and_then(|t| t.parse().ok()).unwrap_or(0),
        }),
        "delete" => Request::Delete(DeleteRequest {
            path,
            version: flag(&w, 2, -1),
        }),
        "deletecontainer" => Request::DeleteContainer { path },
        "set" => Request::SetData(SetDataRequest {
            path,
            data: data(2),
            version: flag(&w, 3, -1),
        }),
        "setacl" => Request::SetAcl(SetAclRequest {
            path,
            acl: parse_acl(w.get(2).copied().unwrap_or("")),
            version: flag(&w, 3, -1),
        }),
        "getacl" => Request::GetAcl { path },
        "get" => Request::GetData(pw),
        "exists" => Request::Exists(pw),
        "ls" => Request::GetChildren(pw),
        "ls2" => Request::GetChildren2(pw),
        "allchildren" => Request::GetAllChildrenNumber { path },
        "ephemerals" => Request::GetEphemerals { prefix_path: path },
        "sync" => Request::Sync { path },
        "addwatch" => Request::AddWatch(AddWatchRequest {
            path,
            mode: flag(&w, 2, 0),
        }),
        "rmwatch" => Request::RemoveWatches(WatchesRequest {
            path,
            watcher_type: flag(&w, 2, 3),
        }),
        "checkwatch" => Request::CheckWatches(WatchesRequest {
            path,
            watcher_type: flag(&w, 2, 3),
        }),
        "setwatches" => Request::SetWatches(SetWatches {
            relative_zxid: w.get(1).and_then(|z| z.parse().ok()).unwrap_or(0),
            data_watches: watch_list(&w, "data="),
            exist_watches: watch_list(&w, "exist="),
            child_watches: watch_list(&w, "child="),
        }),
        "setwatches2" => Request::SetWatches2(SetWatches2 {
            relative_zxid: w.get(1).and_then(|z| z.parse().ok()).unwrap_or(0),
            data_watches: watch_list(&w, "data="),
            exist_watches: watch_list(&w, "exist="),
            child_watches: watch_list(&w, "child="),
            persistent_watches: watch_list(&w, "persistent="),
            persistent_recursive_watches: watch_list(&w, "recursive="),
        }),
        "check" => Request::Check(CheckVersionRequest {
            path,
            version: flag(&w, 2, -1),
        }),
        "reconfig" => Request::Reconfig(ReconfigRequest {
            joining_servers: None,
            leaving_servers: None,
            new_members: None,
            cur_config_id: -1,
        }),
        "auth" => Request::Auth(AuthPacket {
            auth_type: 0,
            scheme: w.get(1).copied().unwrap_or("").to_owned(),
            auth: unescape(w.get(2).copied().unwrap_or("")).into_bytes(),
        }),
        "whoami" => Request::WhoAmI,
        "sasl" => Request::Sasl(SaslRequest { token: vec![] }),
        "ping" => Request::Ping,
        "close" => Request::CloseSession,
        "multi" => Request::Multi(
            sub_ops(&w[1..])
                .into_iter()
                .map(|r| match r {
                    Request::Create(r) => MultiOp::Create(r),
                    Request::Create2(r) => MultiOp::Create2(r),
                    Request::CreateContainer(r) => MultiOp::CreateContainer(r),
                    Request::CreateTtl(r) => MultiOp::CreateTtl(r),
                    Request::Delete(r) => MultiOp::Delete(r),
                    Request::SetData(r) => MultiOp::SetData(r),
                    Request::Check(r) => MultiOp::Check(r),
                    other => panic!("not a multi op: {other:?}"),
                })
                .collect(),
        ),
        "multiread" => Request::MultiRead(
            sub_ops(&w[1..])
                .into_iter()
                .map(|r| match r {
                    Request::GetData(r) => MultiReadOp::GetData(r),
                    Request::GetChildren(r) => MultiReadOp::GetChildren(r),
                    other => panic!("not a multiRead op: {other:?}"),
                })
                .collect(),
        ),
        other => panic!("unknown op {other}"),
    }
}

fn run_file(path: &std::path::Path) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let mut r = Runner::new(Config::default());
    let mut rewritten = String::new();
    let mut failures = Vec::new();
    for block in text.split("\n\n") {
        let block = block.trim_matches('\n');
        if block.is_empty() {
            continue;
        }
        let (head, expected) = block.split_once("\n----").unwrap_or((block, ""));
        let expected = expected.trim_start_matches('\n');
        // Comment lines lead a block; the command is the last line of the head.
        let mut cmd = "";
        for line in head.lines() {
            let _ = writeln!(rewritten, "{line}");
            if !line.starts_with('#') {
                cmd = line;
            }
        }
        if cmd.is_empty() {
            rewritten.push('\n');
            continue;
        }
        let actual = r.run(cmd);
        let _ = write!(rewritten, "----\n{actual}\n");
        if actual.trim_end() != expected.trim_end() {
            failures.push(format!(
                "{cmd}\n  expected:\n{expected}\n  actual:\n{actual}"
            ));
        }
    }
    if std::env::var_os("REWRITE").is_some() {
        let _ = std::fs::write(path, rewritten.trim_end().to_owned() + "\n");
        return;
    }
    assert!(failures.is_empty(), "{path:?}:\n{}", failures.join("\n"));
    r.check_replay(path);
}

fn testdata() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata")
}

/// One test per data file, so that each fails on its own.
macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                run_file(&testdata().join(concat!(stringify!($name), ".txt")));
            }
        )*

        /// The list above names every data file.
        #[test]
        fn every_data_file_has_a_test() {
            let dir = testdata();
            let mut files: Vec<String> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("{dir:?}: {e}"))
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().into_string().ok())
                .filter_map(|n| n.strip_suffix(".txt").map(str::to_owned))
                .collect();
            files.sort();
            assert_eq!(files, [$(stringify!($name)),*], "add new data files to `scenarios!`");
        }
    };
}

scenarios!(
    acl,
    expiry,
    extended,
    misc,
    multi,
    nodes,
    reaper,
    sequential,
    sessions,
    watch_requests,
    watches,
);
