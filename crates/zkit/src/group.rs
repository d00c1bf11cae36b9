//! [`GroupMember`]: party membership (Curator's `GroupMember`): each member keeps an ephemeral
//! node `<path>/<id>` with its payload in place (a [`PersistentNode`], so membership comes back
//! after a session loss), and anyone can list the members.
//!
//! The listing's decoding is the pure [`member_ids`].

use std::collections::BTreeMap;
use std::time::Duration;

use zkit_client as zk;

use crate::error::{Error, Result};
use crate::persistent_node::PersistentNode;
use crate::protected::join;
use crate::session::Session;

/// The member ids among `children`, sorted (every child is a member; ids are node names).
pub fn member_ids<S: AsRef<str>>(children: &[S]) -> Vec<String> {
    let mut ids: Vec<String> = children.iter().map(|c| c.as_ref().to_string()).collect();
    ids.sort();
    ids
}

/// One member of a group. See the module docs.
#[derive(Debug)]
pub struct GroupMember {
    session: Session,
    path: String,
    node: PersistentNode,
}

impl GroupMember {
    /// Joins the group at `path` as `id` with `payload`.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path or id (empty, or containing `/`).
    pub fn join(session: &Session, path: &str, id: &str, payload: &[u8]) -> Result<Self> {
        if id.is_empty() || id.contains('/') || id == "." || id == ".." {
            return Err(Error::BadArguments(format!("invalid member id {id:?}")));
        }
        let path = crate::config::resolve_key("/", path)?;
        let node = PersistentNode::start(
            session,
            &join(&path, id),
            payload,
            zk::CreateMode::Ephemeral,
        )?;
        Ok(GroupMember {
            session: session.clone(),
            path,
            node,
        })
    }

    /// Waits until our membership node is in place.
    ///
    /// # Errors
    /// [`Error::Timeout`].
    pub async fn wait_joined(&self, timeout: Duration) -> Result<()> {
        self.node.wait_present(timeout).await
    }

    /// The current members and their payloads.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn members(&self) -> Result<BTreeMap<String, Vec<u8>>> {
        members(&self.session, &self.path).await
    }

    /// Leaves the group (deletes our node).
    pub async fn leave(self) {
        self.node.close().await;
    }
}

/// The members of the group at `path` and their payloads (empty if it does not exist).
///
/// As seen by the server this session is connected to: on an ensemble, a member that joined
/// or left through another session may not show yet; `sync` the path first for a view that
/// includes every change acknowledged before the call.
///
/// # Errors
/// ZooKeeper errors.
pub async fn members(session: &Session, path: &str) -> Result<BTreeMap<String, Vec<u8>>> {
    let client = session.client();
    let children = match client.list_children(path).await {
        Ok(c) => c,
        Err(zk::Error::NoNode) => return Ok(BTreeMap::new()),
        Err(err) => return Err(err.into()),
    };
    let mut out = BTreeMap::new();
    for id in member_ids(&children) {
        match client.get_data(&join(path, &id)).await {
            Ok((data, _)) => {
                out.insert(id, data);
            }
            Err(zk::Error::NoNode) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_are_sorted_ids() {
        assert_eq!(
            member_ids(&["b", "a"]),
            vec!["a".to_string(), "b".to_string()]
        );
    }
}
