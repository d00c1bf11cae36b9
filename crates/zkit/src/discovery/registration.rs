//! Keeping one registered instance's node in place, as Curator's `ServiceDiscoveryImpl` does
//! with its re-registration on `CONNECTED`/`RECONNECTED`, but only when something is actually
//! wrong: the decision is the pure [`registration_action`], and a background task per instance
//! carries it out whenever the node, the session or the registered data change.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use zkit_client as zk;

use super::instance::ServiceType;
use crate::error::{Error, Result};
use crate::protected::join;
use crate::session::Session;

/// What to do about a registered instance's node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RegistrationAction {
    /// It is there, ours, with our data: watch it.
    Keep,
    /// It is missing: create it.
    Create,
    /// It is ours with other data (an update not written yet): set our data.
    Update,
    /// It is there but not ours to keep — the ephemeral node of another session (our previous
    /// one, which the server has not expired yet, or a crashed process with the same id), or a
    /// node of the wrong kind: delete it and create ours, as Curator's
    /// `internalRegisterService` does on `NodeExists` ("must delete then re-create so that
    /// watchers fire").
    Replace,
}

/// Decides from the node (`None`: missing; else its `ephemeralOwner` and data), our session
/// id, our data, and whether the instance is registered as an ephemeral node.
pub fn registration_action(
    node: Option<(i64, &[u8])>,
    my_session: i64,
    ours: &[u8],
    ephemeral: bool,
) -> RegistrationAction {
    match node {
        None => RegistrationAction::Create,
        Some((owner, _)) if ephemeral && owner != my_session => RegistrationAction::Replace,
        Some((owner, _)) if !ephemeral && owner != 0 => RegistrationAction::Replace,
        Some((_, data)) if data != ours => RegistrationAction::Update,
        Some(_) => RegistrationAction::Keep,
    }
}

/// The create mode of an instance node (Curator's mapping of `ServiceType`).
pub(crate) fn create_mode(service_type: ServiceType) -> zk::CreateMode {
    match service_type {
        ServiceType::Dynamic => zk::CreateMode::Ephemeral,
        ServiceType::DynamicSequential => zk::CreateMode::EphemeralSequential,
        ServiceType::Static | ServiceType::Permanent => zk::CreateMode::Persistent,
    }
}

/// Creates `parent` and its ancestors as containers (Curator's
/// `creatingParentContainersIfNeeded`), as persistent nodes on servers without containers.
pub(crate) async fn make_parents(client: &zk::Client, parent: &str) -> Result<()> {
    if parent == "/" || parent.is_empty() {
        return Ok(());
    }
    let container = zk::CreateMode::Container.with_acls(zk::Acls::anyone_all());
    match client.mkdir(parent, &container).await {
        Ok(()) => Ok(()),
        Err(zk::Error::Unimplemented | zk::Error::BadArguments(_)) => {
            let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
            Ok(client.mkdir(parent, &persistent).await?)
        }
        Err(err) => Err(err.into()),
    }
}

/// Creates the instance node; returns its path (with the sequence for sequential nodes).
/// A missing parent is created (the container may also be reaped between the two steps, so
/// this tries a few times).
pub(crate) async fn create_node(
    client: &zk::Client,
    parent: &str,
    name: &str,
    data: &[u8],
    mode: zk::CreateMode,
) -> Result<String> {
    let path = join(parent, name);
    let options = mode.with_acls(zk::Acls::anyone_all());
    let mut last = Error::NoNode;
    for _ in 0..5 {
        match client.create(&path, data, &options).await {
            Ok((_, sequence)) => {
                return Ok(if mode == zk::CreateMode::EphemeralSequential {
                    format!("{path}{:010}", sequence.into_i64())
                } else {
                    path
                })
            }
            Err(zk::Error::NoNode) => {
                make_parents(client, parent).await?;
                last = Error::NoNode;
            }
            Err(err) => return Err(err.into()),
        }
    }
    Err(last)
}

/// One registered instance.
pub(crate) struct Registration {
    pub session: Session,
    /// The service node.
    pub parent: String,
    /// The instance id (the node name, before any sequence suffix).
    pub id: String,
    pub mode: zk::CreateMode,
    /// The data to keep in place (changed by updates).
    pub desired: watch::Sender<Vec<u8>>,
    /// The node's path once created (fixed except for sequential nodes).
    pub path: std::sync::Mutex<Option<String>>,
    /// Whether the node is known to be in place.
    pub present: watch::Sender<bool>,
    pub cancel: CancellationToken,
}

impl Registration {
    pub fn ephemeral(&self) -> bool {
        matches!(
            self.mode,
            zk::CreateMode::Ephemeral | zk::CreateMode::EphemeralSequential
        )
    }

    pub fn current_path(&self) -> Option<String> {
        self.path.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set_path(&self, path: Option<String>) {
        *self.path.lock().unwrap_or_else(|e| e.into_inner()) = path;
    }

    /// Makes the node right once; returns a watcher on it when it is in place.
    pub async fn ensure(&self) -> Result<Option<zk::OneshotWatcher>> {
        let client = self.session.client();
        let my_session = client.session_id().0;
        let desired = self.desired.borrow().clone();
        let sequential = self.mode == zk::CreateMode::EphemeralSequential;
        let path = match self.current_path() {
            Some(path) => path,
            None if sequential => {
                let path =
                    create_node(&client, &self.parent, &self.id, &desired, self.mode).await?;
                self.set_path(Some(path));
                return Ok(None);
            }
            None => join(&self.parent, &self.id),
        };
        let read = match client.get_and_watch_data(&path).await {
            Ok((data, stat, watcher)) => Some((stat.ephemeral_owner, data, stat.version, watcher)),
            Err(zk::Error::NoNode) => None,
            Err(err) => return Err(err.into()),
        };
        let action = registration_action(
            read.as_ref()
                .map(|(owner, data, _, _)| (*owner, data.as_slice())),
            my_session,
            &desired,
            self.ephemeral(),
        );
        match (action, read) {
            (RegistrationAction::Keep, Some((_, _, _, watcher))) => {
                self.present.send_replace(true);
                Ok(Some(watcher))
            }
            (RegistrationAction::Update, Some((_, _, version, _))) => {
                match client.set_data(&path, &desired, Some(version)).await {
                    // Decide again on the next round (the watch fires on our own write too).
                    Ok(_) | Err(zk::Error::BadVersion | zk::Error::NoNode) => Ok(None),
                    Err(err) => Err(err.into()),
                }
            }
            (RegistrationAction::Replace, Some((_, _, version, _))) => {
                tracing::info!(%path, "replacing a registration left by another session");
                match client.delete(&path, Some(version)).await {
                    Ok(()) | Err(zk::Error::NoNode | zk::Error::BadVersion) => {}
                    Err(err) => return Err(err.into()),
                }
                if sequential {
                    self.set_path(None);
                }
                Ok(None)
            }
            _ => {
                // Missing.
                self.present.send_replace(false);
                if sequential {
                    self.set_path(None);
                    return Ok(None);
                }
                match create_node(&client, &self.parent, &self.id, &desired, self.mode).await {
                    Ok(path) => self.set_path(Some(path)),
                    // Created meanwhile (our own uncertain attempt, or a racer): decide again.
                    Err(Error::NodeExists) => {}
                    Err(err) => return Err(err),
                }
                Ok(None)
            }
        }
    }
}

/// The background task of one registration: ensure, wait for a reason to look again, repeat.
pub(crate) async fn keep(registration: Arc<Registration>) {
    let mut state = registration.session.watch_state();
    let mut desired = registration.desired.subscribe();
    loop {
        if registration.cancel.is_cancelled() {
            return;
        }
        let connected = tokio::select! {
            () = registration.cancel.cancelled() => return,
            c = registration.session.wait_connected() => c,
        };
        if connected.is_err() {
            return;
        }
        state.mark_unchanged();
        desired.mark_unchanged();
        let round = tokio::select! {
            () = registration.cancel.cancelled() => return,
            r = registration.ensure() => r,
        };
        match round {
            Ok(Some(watcher)) => {
                tokio::select! {
                    () = registration.cancel.cancelled() => return,
                    _ = watcher.changed() => {}
                    _ = state.changed() => {
                        if !state.borrow().state.is_connected() {
                            registration.present.send_replace(false);
                        }
                    }
                    _ = desired.changed() => {}
                }
            }
            Ok(None) => {}
            Err(Error::Closed) => return,
            Err(err) => {
                registration.present.send_replace(false);
                tracing::debug!(id = %registration.id, error = %err, "registration retrying");
                tokio::select! {
                    () = registration.cancel.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_millis(200)) => {}
                    _ = state.changed() => {}
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RegistrationAction::*;

    #[test]
    fn only_what_is_wrong_is_fixed() {
        let ours = b"ours".as_slice();
        assert_eq!(registration_action(None, 7, ours, true), Create);
        assert_eq!(registration_action(Some((7, ours)), 7, ours, true), Keep);
        assert_eq!(
            registration_action(Some((7, b"old")), 7, ours, true),
            Update
        );
        // Our previous session's node (not expired yet) or anyone else's: replaced.
        assert_eq!(registration_action(Some((6, ours)), 7, ours, true), Replace);
        // A persistent node where an ephemeral one belongs, and the other way round.
        assert_eq!(registration_action(Some((0, ours)), 7, ours, true), Replace);
        assert_eq!(
            registration_action(Some((7, ours)), 7, ours, false),
            Replace
        );
        assert_eq!(registration_action(Some((0, ours)), 7, ours, false), Keep);
        assert_eq!(registration_action(Some((0, b"x")), 7, ours, false), Update);
    }
}
