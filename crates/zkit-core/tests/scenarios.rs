//! Data-driven scenarios (raft-rs style): every `testdata/*.txt` file is a list of blocks
//!
//! ```text
//! <command>
//! ----
//! <expected output, one message per line>
//! ```
//!
//! separated by blank lines. Commands:
//! `connect C [timeout]`, `reconnect C FROM [badpw]`, `disconnect C`, `tick MS` (advance the
//! clock by MS and tick), and requests `C OP ARGS…`: `create PATH [DATA] [FLAGS]`, `create2`,
//! `container PATH`, `ttl PATH TTL [FLAGS]`, `delete PATH [VERSION]`, `set PATH DATA [VERSION]`,
//! `get PATH [w]`, `exists PATH [w]`, `ls PATH [w]`, `ls2 PATH [w]`, `addwatch PATH MODE`,
//! `setwatches ZXID data=a,b exist=… child=…`, `rmwatch PATH TYPE`, `checkwatch PATH TYPE`,
//! `check PATH VERSION`, `ping`, `close`, `multi OP;OP…` (create/delete/set/check with the same
//! arguments).
//! Run with `REWRITE=1` to regenerate the expected blocks, then review the diff.

mod common;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use common::*;
use zkit_core::{Config, ConnId, Outbound};
use zkit_proto::*;

struct Runner {
    h: H,
    /// Session id → the connection that created it (printed as `sN`).
    names: BTreeMap<i64, ConnId>,
    creds: BTreeMap<ConnId, (i64, Vec<u8>)>,
    xid: i32,
}

fn err_name(code: i32) -> String {
    const NAMES: &[(i32, &str)] = &[
        (0, "ok"),
        (-2, "RuntimeInconsistency"),
        (-5, "MarshallingError"),
        (-6, "Unimplemented"),
        (-8, "BadArguments"),
        (-101, "NoNode"),
        (-103, "BadVersion"),
        (-108, "NoChildrenForEphemerals"),
        (-110, "NodeExists"),
        (-111, "NotEmpty"),
        (-112, "SessionExpired"),
        (-114, "InvalidACL"),
        (-121, "NoWatcher"),
    ];
    NAMES
        .iter()
        .find(|(c, _)| *c == code)
        .map_or_else(|| code.to_string(), |(_, n)| (*n).to_owned())
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

impl Runner {
    fn owner(&self, owner: i64) -> String {
        match self.names.get(&owner) {
            Some(c) => format!("s{c}"),
            None => format!("{owner:#x}"),
        }
    }

    fn stat(&self, s: &Stat) -> String {
        format!(
            "czxid={} mzxid={} pzxid={} ver={} cver={} aver={} owner={} len={} kids={}",
            s.czxid,
            s.mzxid,
            s.pzxid,
            s.version,
            s.cversion,
            s.aversion,
            self.owner(s.ephemeral_owner),
            s.data_length,
            s.num_children
        )
    }

    fn body(&self, body: &Response) -> String {
        match body {
            Response::Empty => String::new(),
            Response::Create { path } => format!(" path={path}"),
            Response::Create2 { path, stat } => format!(" path={path} {}", self.stat(stat)),
            Response::Stat(s) => format!(" {}", self.stat(s)),
            Response::GetData { data, stat } => match data {
                Some(data) => format!(
                    " data={:?} {}",
                    String::from_utf8_lossy(data),
                    self.stat(stat)
                ),
                None => format!(" data=null {}", self.stat(stat)),
            },
            Response::GetChildren { children } => format!(" children={children:?}"),
            Response::GetChildren2 { children, stat } => {
                format!(" children={children:?} {}", self.stat(stat))
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
            other => format!(" {other:?}"),
        }
    }

    fn render(&mut self, msgs: Vec<(ConnId, Outbound)>) -> String {
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
                Outbound::Reply { header, body } => format!(
                    "{c} reply zxid={} {}{}",
                    header.zxid,
                    err_name(header.err),
                    self.body(&body)
                ),
                Outbound::Event { event, .. } => {
                    format!("{c} event {} {}", event_name(event.event_type), event.path)
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
                self.render(msgs)
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
                self.render(msgs)
            }
            Some("disconnect") => {
                self.h.core.disconnect(self.h.now, num(1) as u64);
                let msgs = self.h.ready();
                self.render(msgs)
            }
            Some("tick") => {
                self.h.now += num(1);
                self.h.core.tick(self.h.now);
                let msgs = self.h.ready();
                self.render(msgs)
            }
            Some(c) => {
                let conn: u64 = c.parse().unwrap_or_else(|_| panic!("bad command {cmd}"));
                let req = request(&words[1..]);
                self.xid += 1;
                self.h.core.handle(self.h.now, conn, self.xid, req);
                let msgs = self.h.ready();
                self.render(msgs)
            }
            None => String::new(),
        }
    }
}

fn flag(words: &[&str], i: usize, default: i32) -> i32 {
    words.get(i).and_then(|w| w.parse().ok()).unwrap_or(default)
}

fn request(w: &[&str]) -> Request {
    let path = w.get(1).copied().unwrap_or("").to_owned();
    let watch = w.last() == Some(&"w");
    // The word `null` is a null buffer (length -1); a missing word is empty data.
    let data = |i: usize| match w.get(i).copied() {
        Some("null") => None,
        word => Some(word.unwrap_or("").as_bytes().to_vec()),
    };
    let pw = PathWatchRequest {
        path: path.clone(),
        watch,
    };
    let cr = |flags: i32| CreateRequest {
        path: path.clone(),
        data: data(2),
        acl: open_acl(),
        flags,
    };
    match w.first().copied().unwrap_or("") {
        "create" => Request::Create(cr(flag(w, 3, 0))),
        "create2" => Request::Create2(cr(flag(w, 3, 0))),
        "container" => Request::CreateContainer(CreateRequest {
            data: Some(vec![]),
            ..cr(4)
        }),
        "ttl" => Request::CreateTtl(CreateTtlRequest {
            path: path.clone(),
            data: Some(vec![]),
            acl: open_acl(),
            flags: flag(w, 3, 5),
            ttl: i64::from(flag(w, 2, 0)),
        }),
        "delete" => Request::Delete(DeleteRequest {
            path,
            version: flag(w, 2, -1),
        }),
        "set" => Request::SetData(SetDataRequest {
            path,
            data: data(2),
            version: flag(w, 3, -1),
        }),
        "get" => Request::GetData(pw),
        "exists" => Request::Exists(pw),
        "ls" => Request::GetChildren(pw),
        "ls2" => Request::GetChildren2(pw),
        "addwatch" => Request::AddWatch(AddWatchRequest {
            path,
            mode: flag(w, 2, 0),
        }),
        "rmwatch" => Request::RemoveWatches(WatchesRequest {
            path,
            watcher_type: flag(w, 2, 3),
        }),
        "checkwatch" => Request::CheckWatches(WatchesRequest {
            path,
            watcher_type: flag(w, 2, 3),
        }),
        "setwatches" => {
            let list = |key: &str| -> Vec<String> {
                w.iter()
                    .filter_map(|x| x.strip_prefix(key))
                    .flat_map(|v| v.split(',').filter(|s| !s.is_empty()))
                    .map(str::to_owned)
                    .collect()
            };
            Request::SetWatches(SetWatches {
                relative_zxid: w.get(1).and_then(|z| z.parse().ok()).unwrap_or(0),
                data_watches: list("data="),
                exist_watches: list("exist="),
                child_watches: list("child="),
            })
        }
        "check" => Request::Check(CheckVersionRequest {
            path,
            version: flag(w, 2, -1),
        }),
        "ping" => Request::Ping,
        "close" => Request::CloseSession,
        "multi" => {
            let rest = w[1..].join(" ");
            let ops = rest
                .split(';')
                .filter(|op| !op.trim().is_empty())
                .map(|op| {
                    let ow: Vec<&str> = op.split_whitespace().collect();
                    match request(&ow) {
                        Request::Create(r) => MultiOp::Create(r),
                        Request::Create2(r) => MultiOp::Create2(r),
                        Request::CreateContainer(r) => MultiOp::CreateContainer(r),
                        Request::CreateTtl(r) => MultiOp::CreateTtl(r),
                        Request::Delete(r) => MultiOp::Delete(r),
                        Request::SetData(r) => MultiOp::SetData(r),
                        Request::Check(r) => MultiOp::Check(r),
                        other => panic!("not a multi op: {other:?}"),
                    }
                })
                .collect();
            Request::Multi(ops)
        }
        other => panic!("unknown op {other}"),
    }
}

fn run_file(path: &std::path::Path) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
    let config = if text.starts_with("# extended") {
        Config {
            extended_types: true,
            container_check_interval_ms: 1000,
            ..Config::default()
        }
    } else {
        Config::default()
    };
    let mut r = Runner {
        h: H::with(config),
        names: BTreeMap::new(),
        creds: BTreeMap::new(),
        xid: 0,
    };
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
}

#[test]
fn testdata_scenarios() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir:?}: {e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scenario files in {dir:?}");
    for f in files {
        run_file(&f);
    }
}
