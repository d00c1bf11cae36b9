//! The session: connecting, sync, authentication (addAuth, whoAmI) and the ensemble config.

use std::future::Future;

use tokio::sync::oneshot;
use zkit_proto::codec::Reader;
use zkit_proto::{OpCode, Stat};

use crate::acl::AuthUser;
use crate::connector::Connector;
use crate::error::{Error, Result};
use crate::path::Chroot;
use crate::session::Command;
use crate::watcher::OneshotWatcher;

use super::wire::{frame, reply};
use super::Client;

const CONFIG_NODE: &str = "/zookeeper/config";

impl Client {
    /// Connects with default options; see [`Connector::connect`].
    ///
    /// # Errors
    /// As [`Connector::connect`].
    pub async fn connect(cluster: &str) -> Result<Client> {
        Client::connector().connect(cluster).await
    }

    /// A builder with every connection option.
    pub fn connector() -> Connector {
        Connector::new()
    }

    /// Waits until the server this client is connected to has caught up with the leader for
    /// `path` (sync, op 9).
    ///
    /// # Cautions
    /// `sync` + read is not linearizable on an ensemble (ZOOKEEPER-1675, ZOOKEEPER-2136).
    ///
    /// # Errors
    /// [`Error::BadArguments`], connection and session errors.
    ///
    /// # Cancellation safety
    /// Dropping the future is harmless.
    pub fn sync(&self, path: &str) -> impl Future<Output = Result<()>> + Send + 'static {
        let sent = self
            .path_request(OpCode::Sync, path, None)
            .and_then(|buf| self.send(buf, None));
        async move {
            reply(sent).await?;
            Ok(())
        }
    }

    /// Adds authentication (addAuthInfo) for every clone of this client, e.g.
    /// `("digest", b"user:password")`; resent on every reconnect.
    ///
    /// # Errors
    /// [`Error::AuthFailed`] when the server refuses it — which ends the session, as in
    /// ZooKeeper — and the session errors.
    ///
    /// # Cancellation safety
    /// The packet is sent when this is called; dropping the future does not undo it (a refusal
    /// still ends the session). A disconnect does not fail it: it completes with the answer
    /// on the next connection.
    pub fn auth(
        &self,
        scheme: &str,
        auth: &[u8],
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let (reply, receiver) = oneshot::channel();
        let sent = self
            .tx
            .send(Command::Auth {
                scheme: scheme.to_owned(),
                auth: auth.to_vec(),
                reply,
            })
            .map_err(|_| self.state_error());
        async move {
            sent?;
            match receiver.await {
                Ok(result) => result,
                Err(_) => Err(Error::ClientClosed),
            }
        }
    }

    /// This session's identities as the server sees them (whoAmI, op 107; ZooKeeper 3.7+).
    ///
    /// # Errors
    /// [`Error::Unimplemented`] on older servers; connection and session errors.
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn list_auth_users(&self) -> impl Future<Output = Result<Vec<AuthUser>>> + Send + 'static {
        let sent = self.send(frame(OpCode::WhoAmI, 0), None);
        async move {
            let reply = reply(sent).await?;
            let mut r = Reader::new(&reply.body);
            let users = r
                .read_opt_vec(8, |r| {
                    Ok(AuthUser::new(&r.read_ustring()?, &r.read_ustring()?))
                })?
                .unwrap_or_default();
            Ok(users)
        }
    }

    /// The ensemble configuration, `/zookeeper/config` (outside any chroot).
    ///
    /// # Errors
    /// [`Error::NoNode`] on servers without it; connection and session errors.
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn get_config(&self) -> impl Future<Output = Result<(Vec<u8>, Stat)>> + Send + 'static {
        let fut = self.get_data_with(&Chroot::default(), CONFIG_NODE, false);
        async move { fut.await.map(|(data, stat, _)| (data, stat)) }
    }

    /// As [`Client::get_config`], and watches it.
    ///
    /// # Errors
    /// As [`Client::get_config`].
    ///
    /// # Cancellation safety
    /// Dropping the future drops the watch.
    pub fn get_and_watch_config(
        &self,
    ) -> impl Future<Output = Result<(Vec<u8>, Stat, OneshotWatcher)>> + Send + 'static {
        self.get_and_watch_with(&Chroot::default(), CONFIG_NODE)
    }
}
