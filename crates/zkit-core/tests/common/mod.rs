//! Test harness: drives a `Core` like the shell does and picks replies apart.
#![allow(dead_code)]

use zkit_core::{Config, ConnId, Core, Outbound, Ready, Txn};
use zkit_proto::{
    ConnectRequest, CreateRequest, ReplyHeader, Request, Response, Stat, WatcherEvent,
};

pub const T0: i64 = 1_700_000_000_000;

pub struct H {
    pub core: Core,
    pub now: i64,
    pub txns: Vec<Txn>,
    next_xid: i32,
}

pub use zkit_core::tree::open_acl;

pub fn connect_req(session_id: i64, passwd: Vec<u8>, timeout: i32) -> ConnectRequest {
    ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: 0,
        time_out: timeout,
        session_id,
        passwd,
        read_only: Some(false),
    }
}

pub fn create(path: &str, data: &[u8], flags: i32) -> CreateRequest {
    CreateRequest {
        path: path.into(),
        data: Some(data.to_vec()),
        acl: open_acl(),
        flags,
    }
}

/// One reply: header and body.
#[derive(Debug, Clone, PartialEq)]
pub struct Rep {
    pub header: ReplyHeader,
    pub body: Response,
}

impl Rep {
    pub fn err(&self) -> i32 {
        self.header.err
    }
    pub fn stat(&self) -> Stat {
        match &self.body {
            Response::Stat(s)
            | Response::Create2 { stat: s, .. }
            | Response::GetData { stat: s, .. }
            | Response::GetAcl { stat: s, .. }
            | Response::GetChildren2 { stat: s, .. } => *s,
            other => panic!("no stat in {other:?}"),
        }
    }
}

impl H {
    pub fn new() -> H {
        H::with(Config::default())
    }

    pub fn with(config: Config) -> H {
        H {
            core: Core::new(config, T0),
            now: T0,
            txns: Vec::new(),
            next_xid: 1,
        }
    }

    pub fn ready(&mut self) -> Vec<(ConnId, Outbound)> {
        let Ready { txns, messages } = self.core.ready();
        self.txns.extend(txns);
        messages
    }

    /// Connects `conn` with a new session; returns (session id, passwd).
    pub fn session(&mut self, conn: ConnId) -> (i64, Vec<u8>) {
        let passwd = [conn as u8; 16];
        self.core
            .connect(self.now, conn, connect_req(0, vec![0; 16], 10_000), passwd);
        let msgs = self.ready();
        match &msgs[..] {
            [(
                c,
                Outbound::Connect {
                    response,
                    close_after: false,
                },
            )] if *c == conn => (response.session_id, response.passwd.clone()),
            other => panic!("unexpected connect result {other:?}"),
        }
    }

    /// Sends a request; returns every message queued (all connections).
    pub fn send(&mut self, conn: ConnId, req: Request) -> Vec<(ConnId, Outbound)> {
        let xid = self.next_xid;
        self.next_xid += 1;
        self.core.handle(self.now, conn, xid, req);
        self.ready()
    }

    /// Sends a request and returns the reply to it (panics if there is not exactly one).
    pub fn call(&mut self, conn: ConnId, req: Request) -> Rep {
        let msgs = self.send(conn, req);
        let reps: Vec<Rep> = msgs
            .into_iter()
            .filter_map(|(c, m)| match m {
                Outbound::Reply { header, body } if c == conn => Some(Rep { header, body }),
                _ => None,
            })
            .collect();
        assert_eq!(reps.len(), 1, "replies: {reps:?}");
        reps.into_iter().next().unwrap_or_else(|| unreachable!())
    }

    pub fn ok(&mut self, conn: ConnId, req: Request) -> Rep {
        let r = self.call(conn, req.clone());
        assert_eq!(r.err(), 0, "{req:?} → {r:?}");
        r
    }

    pub fn create(&mut self, conn: ConnId, path: &str, flags: i32) -> String {
        match self
            .ok(conn, Request::Create(create(path, b"", flags)))
            .body
        {
            Response::Create { path } => path,
            other => panic!("{other:?}"),
        }
    }

    pub fn stat(&mut self, conn: ConnId, path: &str) -> Option<Stat> {
        let r = self.call(
            conn,
            Request::Exists(zkit_proto::PathWatchRequest {
                path: path.into(),
                watch: false,
            }),
        );
        (r.err() == 0).then(|| r.stat())
    }

    /// The state dump without the last-zxid line (failed writes advance the zxid only).
    pub fn tree_dump(&self) -> String {
        self.core
            .dump()
            .lines()
            .skip(1)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// The events in `msgs` for `conn`, in order.
pub fn events(msgs: &[(ConnId, Outbound)], conn: ConnId) -> Vec<(i32, String)> {
    msgs.iter()
        .filter_map(|(c, m)| match m {
            Outbound::Event {
                zxid,
                event: WatcherEvent {
                    event_type, path, ..
                },
            } if *c == conn => {
                assert_eq!(*zxid, -1, "3.8 notifications carry zxid -1");
                Some((*event_type, path.clone()))
            }
            _ => None,
        })
        .collect()
}
