//! Watches: addWatch (persistent, recursive), removeWatches, checkWatches.

use std::future::Future;

use tokio::sync::oneshot;
use zkit_proto::codec::put_i32;
use zkit_proto::OpCode;

use crate::error::{Error, Result};
use crate::session::{Command, Submit};
use crate::types::{AddWatchMode, WatchType};
use crate::watch::WatchKind;
use crate::watcher::PersistentWatcher;

use super::wire::{frame, put_path, reply};
use super::Client;

impl Client {
    /// Adds a persistent watch (addWatch, op 106) on `path`, which need not exist.
    ///
    /// [`AddWatchMode::Persistent`] fires for data changes, creation and deletion of the node
    /// and for its children; [`AddWatchMode::PersistentRecursive`] for creation, deletion and
    /// data changes of the node and every descendant. Re-registered after every reconnect.
    ///
    /// # Cautions
    /// A ZooKeeper 3.8 server keeps one watch mode per path and session: a one-shot watch set on
    /// the same path later turns the server's persistent watch into a one-shot one
    /// (ZOOKEEPER-4466). Hold events: a watcher that is never polled buffers without bound.
    ///
    /// # Errors
    /// [`Error::BadArguments`], connection and session errors.
    ///
    /// # Cancellation safety
    /// Dropping the future drops the watch: it is not registered, and the server's watch is
    /// removed when nothing else on the path needs it.
    pub fn watch(
        &self,
        path: &str,
        mode: AddWatchMode,
    ) -> impl Future<Output = Result<PersistentWatcher>> + Send + 'static {
        let sent = (|| {
            let path = self.validate(path)?;
            let mut buf = frame(OpCode::AddWatch, path.len() + 8);
            put_path(&mut buf, &self.chroot, path);
            let (code, kind) = match mode {
                AddWatchMode::Persistent => (0, WatchKind::Persistent),
                AddWatchMode::PersistentRecursive => (1, WatchKind::PersistentRecursive),
            };
            put_i32(&mut buf, code);
            self.send(buf, Some(self.intent(path, kind, false)))
        })();
        async move {
            let reply = reply(sent).await?;
            let watcher = reply
                .watcher
                .ok_or_else(|| Error::unexpected("watch not registered"))?;
            Ok(PersistentWatcher::new(watcher))
        }
    }

    /// Removes this client's watches of `watch_type` on `path` from the server and locally
    /// (removeWatches, op 18, as `ZooKeeper.removeAllWatches`); each removed watcher gets a
    /// `DataWatchRemoved`, `ChildWatchRemoved` or `PersistentWatchRemoved` event.
    /// [`WatchType::Any`] removes persistent watches too.
    ///
    /// # Errors
    /// [`Error::NoWatcher`] when this client has no such watch (checked locally first, as
    /// `ZKWatchManager.containsWatcher`); connection and session errors (then nothing is
    /// removed).
    ///
    /// # Cancellation safety
    /// The request is sent when this is called; dropping the future does not undo it.
    pub fn remove_watches(
        &self,
        path: &str,
        watch_type: WatchType,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let sent = (|| -> Result<oneshot::Receiver<Result<()>>> {
            let path = self.validate(path)?;
            let mut frame_buf = frame(OpCode::RemoveWatches, path.len() + 8);
            put_path(&mut frame_buf, &self.chroot, path);
            put_i32(&mut frame_buf, watch_type.code());
            let (reply, receiver) = oneshot::channel();
            self.tx
                .send(Command::RemoveWatches {
                    path: self.chroot.server_path(path),
                    watch_type,
                    frame: frame_buf,
                    reply,
                })
                .map_err(|_| self.state_error())?;
            Ok(receiver)
        })();
        async move {
            match sent?.await {
                Ok(result) => result,
                Err(_) => Err(Error::ClientClosed),
            }
        }
    }

    /// Checks that this client has a watch of `watch_type` on `path`, locally and on the
    /// server (checkWatches, op 17).
    ///
    /// # Errors
    /// [`Error::NoWatcher`] when it has none; connection and session errors.
    ///
    /// # Cancellation safety
    /// A read: dropping the future is harmless.
    pub fn check_watches(
        &self,
        path: &str,
        watch_type: WatchType,
    ) -> impl Future<Output = Result<()>> + Send + 'static {
        let sent = (|| {
            let path = self.validate(path)?;
            let mut buf = frame(OpCode::CheckWatches, path.len() + 8);
            put_path(&mut buf, &self.chroot, path);
            put_i32(&mut buf, watch_type.code());
            self.submit(Submit {
                frame: buf,
                watch: None,
                precheck: Some((self.chroot.server_path(path), watch_type)),
                reply: oneshot::channel().0,
            })
        })();
        async move {
            reply(sent).await?;
            Ok(())
        }
    }
}
