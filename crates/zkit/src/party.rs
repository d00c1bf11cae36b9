//! kazoo's parties (`kazoo/recipe/party.py`): a pool of participating processes, in kazoo's
//! layout so that Python and zkit members see each other.
//!
//! - [`Party`]: each member is an ephemeral node `<path>/<uuid-hex>__party__` whose data is its
//!   identifier; listing the members reads every node.
//! - [`ShallowParty`]: the identifier is in the node name, `<path>/<uuid-hex>-<identifier>`
//!   (and in the data too, as kazoo writes it), so listing the members is one `getChildren`.
//!   The identifier must then be a valid node name.
//!
//! Unlike kazoo, whose member node is gone for good after a session loss (`participating`
//! stays true, but nobody sees the member), a zkit member is kept in place: its node is created
//! again on the next session (a [`PersistentNode`]). The pure parts are [`party_nodes`] and
//! [`shallow_identifier`].
//!
//! ```no_run
//! # async fn demo(session: zkit::Session) -> zkit::Result<()> {
//! use std::time::Duration;
//! use zkit::party::Party;
//! let me = Party::join(&session, "/workers", "worker-7")?;
//! me.wait_joined(Duration::from_secs(5)).await?;
//! println!("{:?}", zkit::party::members(&session, "/workers").await?);
//! me.leave().await;
//! # Ok(()) }
//! ```

use std::time::Duration;

use zkit_client as zk;

use crate::error::{Error, Result};
use crate::persistent_node::PersistentNode;
use crate::protected::join;
use crate::session::Session;

/// kazoo's `Party._NODE_NAME`: member node names contain it.
pub const PARTY_NODE_NAME: &str = "__party__";

/// The member nodes of a [`Party`] among `children` (those containing `__party__`), sorted.
pub fn party_nodes<S: AsRef<str>>(children: &[S]) -> Vec<&str> {
    let mut nodes: Vec<&str> = children
        .iter()
        .map(AsRef::as_ref)
        .filter(|c| c.contains(PARTY_NODE_NAME))
        .collect();
    nodes.sort_unstable();
    nodes
}

/// The identifier of a [`ShallowParty`] member node: everything after the first `-` (kazoo's
/// `child[child.find("-") + 1:]`, which is the whole name when there is no `-`).
pub fn shallow_identifier(child: &str) -> &str {
    match child.find('-') {
        Some(i) => &child[i + 1..],
        None => child,
    }
}

/// A member of either kind of party: its ephemeral node `<path>/<name>`, kept in place across
/// sessions by a [`PersistentNode`], with the identifier as its data.
#[derive(Debug)]
struct Member {
    session: Session,
    path: String,
    node: PersistentNode,
}

impl Member {
    fn join(session: &Session, path: &str, name: &str, identifier: &str) -> Result<Member> {
        let path = crate::config::resolve_key("/", path)?;
        let node = PersistentNode::start(
            session,
            &join(&path, name),
            identifier.as_bytes(),
            zk::CreateMode::Ephemeral,
        )?;
        Ok(Member {
            session: session.clone(),
            path,
            node,
        })
    }
}

/// kazoo's `Party`. See the module docs.
#[derive(Debug)]
pub struct Party(Member);

impl Party {
    /// Joins the party at `path` as `identifier`.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path.
    pub fn join(session: &Session, path: &str, identifier: &str) -> Result<Party> {
        let name = format!("{}{PARTY_NODE_NAME}", uuid::Uuid::new_v4().simple());
        Member::join(session, path, &name, identifier).map(Party)
    }

    /// Waits until our member node is in place.
    ///
    /// # Errors
    /// [`Error::Timeout`].
    pub async fn wait_joined(&self, timeout: Duration) -> Result<()> {
        self.0.node.wait_present(timeout).await
    }

    /// Our member node's path.
    pub fn node_path(&self) -> &str {
        self.0.node.path()
    }

    /// The identifiers of the members (kazoo's `list(party)`).
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn members(&self) -> Result<Vec<String>> {
        members(&self.0.session, &self.0.path).await
    }

    /// Leaves the party (deletes our node).
    pub async fn leave(self) {
        self.0.node.close().await;
    }
}

/// The identifiers of the members of the [`Party`] at `path`, in node-name order (empty when it
/// does not exist).
///
/// As seen by the server this session is connected to: on an ensemble, a member that joined
/// or left through another session may not show yet; `sync` the path first for a view that
/// includes every change acknowledged before the call.
///
/// # Errors
/// ZooKeeper errors.
pub async fn members(session: &Session, path: &str) -> Result<Vec<String>> {
    let client = session.client();
    let children = match client.list_children(path).await {
        Ok(c) => c,
        Err(zk::Error::NoNode) => return Ok(Vec::new()),
        Err(err) => return Err(err.into()),
    };
    let mut out = Vec::new();
    for node in party_nodes(&children) {
        match client.get_data(&join(path, node)).await {
            Ok((data, _)) => out.push(String::from_utf8_lossy(&data).into_owned()),
            Err(zk::Error::NoNode) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(out)
}

/// kazoo's `ShallowParty`. See the module docs.
#[derive(Debug)]
pub struct ShallowParty(Member);

impl ShallowParty {
    /// Joins the shallow party at `path` as `identifier`.
    ///
    /// # Errors
    /// [`Error::BadArguments`] for an invalid path, or an identifier that cannot be part of a
    /// node name (containing `/`).
    pub fn join(session: &Session, path: &str, identifier: &str) -> Result<ShallowParty> {
        if identifier.contains('/') {
            return Err(Error::BadArguments(format!(
                "a shallow party identifier is part of a node name: {identifier:?}"
            )));
        }
        let name = format!("{}-{identifier}", uuid::Uuid::new_v4().simple());
        Member::join(session, path, &name, identifier).map(ShallowParty)
    }

    /// Waits until our member node is in place.
    ///
    /// # Errors
    /// [`Error::Timeout`].
    pub async fn wait_joined(&self, timeout: Duration) -> Result<()> {
        self.0.node.wait_present(timeout).await
    }

    /// Our member node's path.
    pub fn node_path(&self) -> &str {
        self.0.node.path()
    }

    /// The identifiers of the members.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn members(&self) -> Result<Vec<String>> {
        shallow_members(&self.0.session, &self.0.path).await
    }

    /// Leaves the party.
    pub async fn leave(self) {
        self.0.node.close().await;
    }
}

/// The identifiers of the members of the [`ShallowParty`] at `path`, in node-name order.
///
/// # Errors
/// ZooKeeper errors.
pub async fn shallow_members(session: &Session, path: &str) -> Result<Vec<String>> {
    let mut children = match session.client().list_children(path).await {
        Ok(c) => c,
        Err(zk::Error::NoNode) => return Ok(Vec::new()),
        Err(err) => return Err(err.into()),
    };
    children.sort();
    Ok(children
        .iter()
        .map(|c| shallow_identifier(c).to_string())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_names_like_kazoo() {
        let children = ["b__party__", "x", "a__party__"];
        assert_eq!(party_nodes(&children), vec!["a__party__", "b__party__"]);
        assert_eq!(shallow_identifier("0f1e-host-7"), "host-7");
        assert_eq!(shallow_identifier("nodash"), "nodash");
        assert_eq!(shallow_identifier("0f1e-"), "");
    }
}
