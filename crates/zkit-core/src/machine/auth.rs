//! Identities: auth packets (digest, ip, the super digest), the sasl answer of a server
//! without SASL, whoAmI, and the ids a connection is authenticated as, which every ACL check
//! (requests and watch delivery) is made against.

use std::sync::Arc;

use zkit_proto::{AuthPacket, ClientInfo, ErrorCode, Id, ReplyHeader, Response};

use crate::acl;
use crate::conn::ConnId;
use crate::{Core, Outbound};

impl Core {
    /// Everything `conn` is authenticated as ([`Conn::identities`](crate::conn::Conn)); empty
    /// for a connection the core does not know.
    pub(super) fn auth_info(&self, conn: ConnId) -> Arc<[Id]> {
        match self.conns.get(&conn) {
            Some(c) => c.identities(),
            None => Arc::from(Vec::new()),
        }
    }

    /// An auth packet (xid -4): `digest` adds `digest:user:hash` (and `super` when it is the
    /// configured super digest); `ip` succeeds when the shell gave the peer address, which is
    /// an identity of the connection anyway; `x509` succeeds when the connection presented a
    /// client certificate (`X509AuthenticationProvider.handleAuthentication` checks the
    /// connection's chain, which gives the id it already has); any other scheme fails the
    /// connection (AuthFailed, then close).
    pub(super) fn auth(&mut self, conn: ConnId, xid: i32, p: AuthPacket) {
        let id = match p.scheme.as_str() {
            "digest" => Some(Id {
                scheme: "digest".into(),
                id: acl::digest_id(&String::from_utf8_lossy(&p.auth)),
            }),
            "ip" => self
                .conns
                .get(&conn)
                .and_then(|c| c.peer_ip().map(str::to_owned))
                .map(|ip| Id {
                    scheme: "ip".into(),
                    id: ip,
                }),
            "x509" => self
                .conns
                .get(&conn)
                .and_then(|c| c.auth().iter().find(|id| id.scheme == "x509").cloned()),
            _ => None,
        };
        // Apache answers auth with zxid 0, outside the pipeline.
        let header = |err| ReplyHeader { xid, zxid: 0, err };
        // DigestAuthenticationProvider: the super digest adds `super:` beside the id.
        let is_super = id.as_ref().is_some_and(|id| {
            id.scheme == "digest" && self.config.super_digest.as_ref() == Some(&id.id)
        });
        match id {
            Some(id) => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    if is_super {
                        c.add_auth(acl::super_id());
                    }
                    if id.scheme != "ip" {
                        c.add_auth(id);
                    }
                }
                self.push(
                    conn,
                    Outbound::Reply {
                        header: header(0),
                        body: Response::Empty,
                    },
                );
            }
            None => {
                self.push(
                    conn,
                    Outbound::Reply {
                        header: header(ErrorCode::AuthFailed as i32),
                        body: Response::Empty,
                    },
                );
                self.detach(conn);
                self.push(conn, Outbound::Close);
            }
        }
    }

    /// sasl (102).
    pub(super) fn sasl(&mut self, conn: ConnId, xid: i32) {
        // A standalone 3.8 server without a JAAS login has no SASL server on the
        // connection: the NullPointerException is caught and it answers err 0 with a
        // SetSASLResponse whose token is null. A null buffer is the int -1 on the wire,
        // which is exactly what ErrorResponse{-1} encodes.
        let header = ReplyHeader {
            xid,
            zxid: 0,
            err: 0,
        };
        self.push(
            conn,
            Outbound::Reply {
                header,
                body: Response::Error(-1),
            },
        );
    }

    /// whoAmI (107): every id the connection is authenticated as.
    pub(super) fn who_am_i(&mut self, conn: ConnId, xid: i32) {
        let infos = self
            .auth_info(conn)
            .iter()
            .map(|id| ClientInfo {
                auth_scheme: id.scheme.clone(),
                user: acl::user_of(id),
            })
            .collect();
        self.reply(conn, xid, 0, Response::WhoAmI(infos));
    }
}
