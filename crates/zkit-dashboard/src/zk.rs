//! Every ZooKeeper call the dashboard makes, in one place: the dashboard's own [`Session`]
//! (anonymous, for the periodic scan and for visitors who did not sign in) and the per-visitor
//! sessions of signed-in users (digest `user:password` added to the connection, so the server
//! applies its ACLs to what they read and write).
//!
//! Only this module names the client crate; the rest of the dashboard sees [`NodeView`],
//! [`Owner`] and [`zkit::Error`]. Replacing the client means changing this file.

use zkit::zkit_client as zk;
use zkit::{Session, SessionOptions};

/// A ZooKeeper connection as the dashboard uses it.
#[derive(Clone)]
pub struct Zk {
    session: Session,
}

impl std::fmt::Debug for Zk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zk")
            .field("session", &format_args!("{:#x}", self.session.session_id()))
            .finish()
    }
}

/// Stat fields, with ZooKeeper's names.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StatView {
    /// Zxid of the create.
    pub czxid: i64,
    /// Zxid of the last data change.
    pub mzxid: i64,
    /// Zxid of the last change of the children.
    pub pzxid: i64,
    /// Create time (Unix ms).
    pub ctime: i64,
    /// Last modification time (Unix ms).
    pub mtime: i64,
    /// Data version.
    pub version: i32,
    /// Children version.
    pub cversion: i32,
    /// ACL version.
    pub aversion: i32,
    /// Owner session of an ephemeral node (0 otherwise; TTL nodes carry 0xFF in the top byte).
    pub ephemeral_owner: i64,
    /// Data length.
    pub data_length: i32,
    /// Number of children.
    pub num_children: i32,
}

impl From<&zk::Stat> for StatView {
    fn from(s: &zk::Stat) -> Self {
        StatView {
            czxid: s.czxid,
            mzxid: s.mzxid,
            pzxid: s.pzxid,
            ctime: s.ctime,
            mtime: s.mtime,
            version: s.version,
            cversion: s.cversion,
            aversion: s.aversion,
            ephemeral_owner: s.ephemeral_owner,
            data_length: s.data_length,
            num_children: s.num_children,
        }
    }
}

/// One ACL entry.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AclView {
    /// `world`, `digest`, `ip`, `auth`, `sasl`, ...
    pub scheme: String,
    /// The id within the scheme (`anyone`, `user:base64hash`, ...).
    pub id: String,
    /// Permissions as ZooKeeper's letters (`cdrwa`).
    pub perms: String,
}

/// A node as the tree browser shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeView {
    /// The path.
    pub path: String,
    /// Child names, sorted.
    pub children: Vec<String>,
    /// The data; `None` when reading it was refused (`NoAuth`).
    pub data: Option<Vec<u8>>,
    /// The stat.
    pub stat: StatView,
    /// The ACL (empty when refused).
    pub acl: Vec<AclView>,
    /// Why a part could not be read (e.g. `data: not authorized`).
    pub notes: Vec<String>,
}

/// How to create a node from the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CreateKind {
    /// Persistent.
    #[default]
    Persistent,
    /// Ephemeral (lives as long as the signed-in user's dashboard session).
    Ephemeral,
    /// Persistent sequential.
    PersistentSequential,
    /// Container.
    Container,
}

fn perms_text(p: zk::Permission) -> String {
    let mut s = String::new();
    for (perm, c) in [
        (zk::Permission::CREATE, 'c'),
        (zk::Permission::DELETE, 'd'),
        (zk::Permission::READ, 'r'),
        (zk::Permission::WRITE, 'w'),
        (zk::Permission::ADMIN, 'a'),
    ] {
        if p.has(perm) {
            s.push(c);
        }
    }
    s
}

impl Zk {
    /// Connects to `connect` (`host:port[,host:port][/chroot]`) with `options` (session
    /// timeout, TLS, authentication) or, with `digest = Some("user:password")`, as that digest
    /// identity only (the options' own authentication is dropped). Returns once connected.
    ///
    /// # Errors
    /// Whatever [`Session::connect`] fails with.
    pub async fn connect(
        connect: &str,
        digest: Option<&str>,
        options: &SessionOptions,
    ) -> zkit::Result<Zk> {
        let mut options = options.clone();
        if let Some(d) = digest {
            // A signed-in user's session authenticates as that user only.
            options.auth.clear();
            options = options.with_digest_auth(d);
        }
        Ok(Zk {
            session: Session::connect(connect, options).await?,
        })
    }

    /// The current ZooKeeper session id.
    pub fn session_id(&self) -> i64 {
        self.session.session_id()
    }

    /// Closes the session (its ephemerals go at once).
    pub fn close(&self) {
        self.session.close();
    }

    /// The session layer itself, for the recipe inspectors of the `zkit` crate.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Children of `path`; `Ok(None)` when the node does not exist.
    ///
    /// # Errors
    /// ZooKeeper errors (`NoAuth` included).
    pub async fn children(&self, path: &str) -> zkit::Result<Option<Vec<String>>> {
        match self.session.client().list_children(path).await {
            Ok(c) => Ok(Some(c)),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The owner session of `path` if it is ephemeral (`Some(0)`: persistent; `None`: gone).
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn owner(&self, path: &str) -> zkit::Result<Option<i64>> {
        Ok(self
            .session
            .client()
            .check_stat(path)
            .await?
            .map(|s| s.ephemeral_owner))
    }

    /// The data of `path`; `Ok(None)` when it does not exist.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn data(&self, path: &str) -> zkit::Result<Option<Vec<u8>>> {
        match self.session.client().get_data(path).await {
            Ok((d, _)) => Ok(Some(d)),
            Err(zk::Error::NoNode) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Everything the tree browser shows of `path`: children, data, stat, ACL. A refused part
    /// (`NoAuth`) is left empty with a note; a missing node is `Ok(None)`.
    ///
    /// # Errors
    /// Other ZooKeeper errors.
    pub async fn node(&self, path: &str) -> zkit::Result<Option<NodeView>> {
        let client = self.session.client();
        let mut notes = Vec::new();
        // getACL needs READ or ADMIN (ZOOKEEPER-1392); the stat then comes from exists.
        let (acl, stat) = match client.get_acl(path).await {
            Ok(a) => a,
            Err(zk::Error::NoNode) => return Ok(None),
            Err(zk::Error::NoAuth) => {
                notes.push("acl: not authorized (needs READ or ADMIN)".into());
                match client.check_stat(path).await? {
                    Some(stat) => (Vec::new(), stat),
                    None => return Ok(None),
                }
            }
            Err(e) => return Err(e.into()),
        };
        let (children, data) = futures::join!(client.list_children(path), client.get_data(path));
        let children = match children {
            Ok(mut c) => {
                c.sort();
                c
            }
            Err(zk::Error::NoNode) => return Ok(None),
            Err(zk::Error::NoAuth) => {
                notes.push("children: not authorized (no READ permission)".into());
                Vec::new()
            }
            Err(e) => return Err(e.into()),
        };
        let (data, stat) = match data {
            Ok((d, s)) => (Some(d), s),
            Err(zk::Error::NoNode) => return Ok(None),
            Err(zk::Error::NoAuth) => {
                notes.push("data: not authorized (no READ permission)".into());
                (None, stat)
            }
            Err(e) => return Err(e.into()),
        };
        Ok(Some(NodeView {
            path: path.to_string(),
            children,
            data,
            stat: StatView::from(&stat),
            acl: acl
                .iter()
                .map(|a| AclView {
                    scheme: a.scheme().to_string(),
                    id: a.id().to_string(),
                    perms: perms_text(a.permission()),
                })
                .collect(),
            notes,
        }))
    }

    /// Creates `path` with `data`, open to everyone (`world:anyone`, all permissions), or,
    /// with `creator_only`, readable and writable by the creating identity only (`auth`).
    /// Returns the created path (sequential nodes get their suffix).
    ///
    /// # Errors
    /// ZooKeeper errors (`NodeExists`, `NoNode` for a missing parent, `NoAuth`, ...).
    pub async fn create(
        &self,
        path: &str,
        data: &[u8],
        kind: CreateKind,
        creator_only: bool,
    ) -> zkit::Result<String> {
        let mode = match kind {
            CreateKind::Persistent => zk::CreateMode::Persistent,
            CreateKind::Ephemeral => zk::CreateMode::Ephemeral,
            CreateKind::PersistentSequential => zk::CreateMode::PersistentSequential,
            CreateKind::Container => zk::CreateMode::Container,
        };
        let acls = if creator_only {
            zk::Acls::creator_all()
        } else {
            zk::Acls::anyone_all()
        };
        let options = mode.with_acls(acls);
        let (_, sequence) = self.session.client().create(path, data, &options).await?;
        Ok(if kind == CreateKind::PersistentSequential {
            format!("{path}{sequence}")
        } else {
            path.to_string()
        })
    }

    /// Sets the data of `path` if its version is `version` (`None`: any version); returns the
    /// new version.
    ///
    /// # Errors
    /// ZooKeeper errors (`BadVersion`, `NoNode`, `NoAuth`).
    pub async fn set(&self, path: &str, data: &[u8], version: Option<i32>) -> zkit::Result<i32> {
        let stat = self.session.client().set_data(path, data, version).await?;
        Ok(stat.version)
    }

    /// Deletes `path` if its version is `version` (`None`: any).
    ///
    /// # Errors
    /// ZooKeeper errors (`BadVersion`, `NoNode`, `NotEmpty`, `NoAuth`).
    pub async fn delete(&self, path: &str, version: Option<i32>) -> zkit::Result<()> {
        Ok(self.session.client().delete(path, version).await?)
    }
}

impl Zk {
    /// The 2PC transactions under `root` (`zkit::txn`'s layout), through its inspector.
    pub async fn transactions(&self, root: &str) -> crate::model::TxnTree {
        use zkit::txn::inspect::{self, Phase};
        let mut tree = crate::model::TxnTree {
            root: root.to_string(),
            members: Vec::new(),
            txns: Vec::new(),
            error: None,
        };
        let layout = match zkit::txn::layout::Layout::new(root) {
            Ok(l) => l,
            Err(e) => {
                tree.error = Some(e.to_string());
                return tree;
            }
        };
        match inspect::members(&self.session, &layout).await {
            Ok(m) => tree.members = m,
            Err(e) => tree.error = Some(e.to_string()),
        }
        match inspect::list(&self.session, &layout).await {
            Ok(txns) => {
                tree.txns = txns
                    .into_iter()
                    .map(|t| crate::model::TxnRow {
                        phase: match t.phase() {
                            Phase::InFlight => "in flight",
                            Phase::InDoubt => "in doubt",
                            Phase::Done => "decided",
                        },
                        votes: t
                            .header
                            .participants
                            .iter()
                            .map(|p| {
                                let vote = match t.votes.get(p) {
                                    Some(zkit::txn::Vote::Yes) => "yes".to_string(),
                                    Some(zkit::txn::Vote::No(r)) => format!("no: {r}"),
                                    None => "-".to_string(),
                                };
                                (p.clone(), vote)
                            })
                            .collect(),
                        decision: t.decision.as_ref().map(|(d, by)| match d {
                            zkit::txn::Decision::Commit => format!("commit (by {by})"),
                            zkit::txn::Decision::Abort(r) => format!("abort: {r} (by {by})"),
                        }),
                        unacked: t.unacked().into_iter().collect(),
                        coordinator: t.header.coordinator.clone(),
                        txid: t.txid,
                    })
                    .collect();
            }
            Err(e) => tree.error = Some(e.to_string()),
        }
        tree
    }
}
