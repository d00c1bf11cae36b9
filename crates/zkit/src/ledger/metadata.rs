//! Every ZooKeeper call of the ledger client, auditor and replication workers: ledger
//! metadata (create, read, versioned CAS, delete, list), ledger id generation, the bookie
//! lists, and the under-replication marks and locks. Paths and encodings are
//! [`super::layout`]'s; nothing here decides anything.
//!
//! Idempotent calls are retried across connection loss and session replacement until
//! [`MetadataStore`]'s timeout; a CAS whose answer was lost is retried too, and its
//! `BadVersion` then goes back to the caller, who re-reads and re-decides (which finds its own
//! write in place when it had been applied).

use std::future::Future;
use std::time::Duration;

use zkit_client as zk;

use super::layout::{self, Layout, LedgerMetadata, UnderReplicated};
use super::LedgerError;
use crate::error::Error;
use crate::session::Session;

/// A node's data version (ZooKeeper's `Stat.version`).
pub type Version = i32;

/// The outcome of a versioned write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cas {
    /// Written; the new version.
    Written(Version),
    /// Someone else wrote first: re-read and re-decide.
    Conflict,
}

/// Ledger metadata in ZooKeeper. Cheap to clone.
#[derive(Debug, Clone)]
pub struct MetadataStore {
    session: Session,
    layout: Layout,
    timeout: Duration,
}

fn persistent() -> zk::CreateOptions<'static> {
    zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all())
}

fn ephemeral() -> zk::CreateOptions<'static> {
    zk::CreateMode::Ephemeral.with_acls(zk::Acls::anyone_all())
}

fn parent(path: &str) -> Option<&str> {
    match path.rfind('/') {
        Some(0) | None => None,
        Some(i) => Some(&path[..i]),
    }
}

impl MetadataStore {
    /// The store under `layout`'s root; calls give up after `timeout` of connection trouble.
    pub fn new(session: &Session, layout: Layout, timeout: Duration) -> MetadataStore {
        MetadataStore {
            session: session.clone(),
            layout,
            timeout,
        }
    }

    /// The layout.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// Runs `op` on the current client, retrying recoverable and session errors until the
    /// timeout; state errors (`NoNode`, `BadVersion`, …) are returned at once.
    async fn retrying<T, F, Fut>(&self, mut op: F) -> Result<T, LedgerError>
    where
        F: FnMut(zk::Client) -> Fut,
        Fut: Future<Output = Result<T, zk::Error>>,
    {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let mut attempt = 0u32;
        loop {
            let err = match op(self.session.client()).await {
                Ok(v) => return Ok(v),
                Err(e) => Error::from(e),
            };
            if self.session.is_closed() {
                return Err(LedgerError::Zk(Error::Closed));
            }
            if !(err.is_recoverable() || err.is_unrecoverable())
                || tokio::time::Instant::now() >= deadline
            {
                return Err(LedgerError::Zk(err));
            }
            tracing::debug!(attempt, error = %err, "ledger metadata: retrying");
            let backoff = Duration::from_millis(5u64 << attempt.min(7));
            attempt += 1;
            let wait = async {
                tokio::time::sleep(backoff).await;
                self.session.wait_connected().await
            };
            match tokio::time::timeout_at(deadline, wait).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => return Err(LedgerError::Zk(e)),
                Err(_) => return Err(LedgerError::Zk(err)),
            }
        }
    }

    /// Creates `path` with `data`, creating missing parents (BookKeeper's
    /// `ZkUtils.asyncCreateFullPathOptimistic`). Returns the created path and stat.
    async fn create_full(
        client: &zk::Client,
        path: &str,
        data: &[u8],
        options: &zk::CreateOptions<'_>,
    ) -> Result<(zk::Stat, zk::CreateSequence), zk::Error> {
        match client.create(path, data, options).await {
            Err(zk::Error::NoNode) => {
                if let Some(p) = parent(path) {
                    client.mkdir(p, &persistent()).await?;
                }
                client.create(path, data, options).await
            }
            other => other,
        }
    }

    /// A new ledger id (`ZkLedgerIdGenerator`): the sequence number of an ephemeral
    /// sequential node under `idgen/`, deleted at once. A retry after a lost answer skips an
    /// id (the orphan node goes with the session); ids are unique, not dense.
    pub async fn generate_ledger_id(&self) -> Result<i64, LedgerError> {
        let prefix = self.layout.idgen_prefix();
        let options = zk::CreateMode::EphemeralSequential.with_acls(zk::Acls::anyone_all());
        let seq = self
            .retrying(|client| {
                let prefix = prefix.clone();
                async move {
                    let (_, seq) = Self::create_full(&client, &prefix, &[], &options).await?;
                    // The node only carried the number.
                    let node = format!("{prefix}{seq}");
                    let _ = client.delete(&node, None).await;
                    Ok(seq.into_i64())
                }
            })
            .await?;
        if !(0..layout::MAX_LEDGER_ID).contains(&seq) {
            return Err(LedgerError::Corrupt(format!(
                "ledger id {seq} from the id generator is out of range"
            )));
        }
        Ok(seq)
    }

    /// Creates a ledger's node. `Ok(None)` when the id is taken (a ledger created with a
    /// reused id: the caller draws another).
    pub async fn create(
        &self,
        ledger_id: i64,
        metadata: &LedgerMetadata,
    ) -> Result<Option<Version>, LedgerError> {
        let path = self.layout.ledger(ledger_id)?;
        let data = layout::encode_metadata(metadata);
        let mut retried = false;
        self.retrying(|client| {
            let path = path.clone();
            let data = data.clone();
            let first = !retried;
            retried = true;
            async move {
                match Self::create_full(&client, &path, &data, &persistent()).await {
                    Ok((stat, _)) => Ok(Some(stat.version)),
                    Err(zk::Error::NodeExists) => {
                        // After a lost answer the node may be our own.
                        let (have, stat) = client.get_data(&path).await?;
                        Ok((!first && have == data).then_some(stat.version))
                    }
                    Err(e) => Err(e),
                }
            }
        })
        .await
    }

    /// A ledger's metadata and version.
    ///
    /// # Errors
    /// [`LedgerError::NoSuchLedger`], [`LedgerError::Corrupt`], ZooKeeper errors.
    pub async fn read(&self, ledger_id: i64) -> Result<(LedgerMetadata, Version), LedgerError> {
        let path = self.layout.ledger(ledger_id)?;
        let got = self
            .retrying(|client| {
                let path = path.clone();
                async move { found(client.get_data(&path).await) }
            })
            .await?;
        let (data, stat) = got.ok_or(LedgerError::NoSuchLedger(ledger_id))?;
        let m = layout::decode_metadata(&data)?;
        Ok((m, stat.version))
    }

    /// A ledger's metadata with a watch that fires on its next change or deletion.
    pub async fn read_and_watch(
        &self,
        ledger_id: i64,
    ) -> Result<(LedgerMetadata, Version, zk::OneshotWatcher), LedgerError> {
        let path = self.layout.ledger(ledger_id)?;
        let got = self
            .retrying(|client| {
                let path = path.clone();
                async move { found(client.get_and_watch_data(&path).await) }
            })
            .await?;
        let (data, stat, w) = got.ok_or(LedgerError::NoSuchLedger(ledger_id))?;
        Ok((layout::decode_metadata(&data)?, stat.version, w))
    }

    /// Writes `metadata` if the node is still at `version` (the only way metadata changes).
    pub async fn write(
        &self,
        ledger_id: i64,
        metadata: &LedgerMetadata,
        version: Version,
    ) -> Result<Cas, LedgerError> {
        metadata.validate()?;
        let path = self.layout.ledger(ledger_id)?;
        let data = layout::encode_metadata(metadata);
        let got = self
            .retrying(|client| {
                let path = path.clone();
                let data = data.clone();
                async move {
                    match client.set_data(&path, &data, Some(version)).await {
                        Ok(stat) => Ok(Some(Cas::Written(stat.version))),
                        Err(zk::Error::BadVersion) => Ok(Some(Cas::Conflict)),
                        Err(zk::Error::NoNode) => Ok(None),
                        Err(e) => Err(e),
                    }
                }
            })
            .await?;
        got.ok_or(LedgerError::NoSuchLedger(ledger_id))
    }

    /// Deletes a ledger's node and the directories it leaves empty.
    ///
    /// # Errors
    /// [`LedgerError::NoSuchLedger`] when it is not there.
    pub async fn delete(&self, ledger_id: i64) -> Result<(), LedgerError> {
        let path = self.layout.ledger(ledger_id)?;
        let mut retried = false;
        let deleted = self
            .retrying(|client| {
                let path = path.clone();
                let first = !retried;
                retried = true;
                async move {
                    match client.delete(&path, None).await {
                        Ok(()) => Ok(true),
                        // A retry of a delete whose answer was lost finds nothing.
                        Err(zk::Error::NoNode) => Ok(!first),
                        Err(e) => Err(e),
                    }
                }
            })
            .await?;
        if !deleted {
            return Err(LedgerError::NoSuchLedger(ledger_id));
        }
        let client = self.session.client();
        let mut dir = parent(&path);
        while let Some(d) = dir {
            if d == self.layout.root() || client.delete(d, None).await.is_err() {
                break;
            }
            dir = parent(d);
        }
        Ok(())
    }

    async fn children(&self, path: &str) -> Result<Vec<String>, LedgerError> {
        self.retrying(|client| {
            let path = path.to_string();
            async move {
                match client.list_children(&path).await {
                    Ok(c) => Ok(c),
                    Err(zk::Error::NoNode) => Ok(Vec::new()),
                    Err(e) => Err(e),
                }
            }
        })
        .await
    }

    /// Every ledger id, ascending (a walk of the two directory levels).
    pub async fn list(&self) -> Result<Vec<i64>, LedgerError> {
        let root = self.layout.root().to_string();
        let mut ids = Vec::new();
        for top in self.children(&root).await? {
            if !layout::is_ledger_dir(&top) {
                continue;
            }
            for mid in self.children(&format!("{root}/{top}")).await? {
                if !layout::is_ledger_subdir(&mid) {
                    continue;
                }
                for leaf in self.children(&format!("{root}/{top}/{mid}")).await? {
                    if let Some(id) = layout::ledger_id_of(&top, &mid, &leaf) {
                        ids.push(id);
                    }
                }
            }
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// Writable and read-only bookies (`available/`, `available/readonly/`), sorted.
    ///
    /// `sync` first: a bookie registers through its own session, perhaps on another ensemble
    /// member, and ZooKeeper orders each session's view, not all sessions' together. Without it
    /// a member that has not applied a registration yet could leave out a bookie that was
    /// already serving when this was called.
    pub async fn bookies(&self) -> Result<(Vec<String>, Vec<String>), LedgerError> {
        let available = self.layout.available();
        self.retrying(|client| client.sync(&available)).await?;
        let mut writable: Vec<String> = self
            .children(&self.layout.available())
            .await?
            .into_iter()
            .filter(|c| c != "readonly")
            .collect();
        let mut readonly = self.children(&self.layout.readonly()).await?;
        writable.sort();
        readonly.sort();
        Ok((writable, readonly))
    }

    /// Writable and read-only bookies together, with a watch on the writable list (it fires
    /// when a bookie comes or goes; a read-only switch re-registers, which also fires it).
    pub async fn watch_bookies(
        &self,
    ) -> Result<(Vec<String>, Vec<String>, zk::OneshotWatcher), LedgerError> {
        let path = self.layout.available();
        let (children, watcher) = self
            .retrying(|client| {
                let path = path.clone();
                async move {
                    match client.list_and_watch_children(&path).await {
                        Err(zk::Error::NoNode) => {
                            client.mkdir(&path, &persistent()).await?;
                            client.list_and_watch_children(&path).await
                        }
                        other => other,
                    }
                }
            })
            .await?;
        let mut writable: Vec<String> = children.into_iter().filter(|c| c != "readonly").collect();
        writable.sort();
        let mut readonly = self.children(&self.layout.readonly()).await?;
        readonly.sort();
        Ok((writable, readonly, watcher))
    }

    // -----------------------------------------------------------------------------------------
    // Under-replication (ZkLedgerUnderreplicationManager)

    /// Marks a ledger under-replicated with `missing` bookies, merging with an existing mark
    /// (`markLedgerUnderreplicatedAsync`: a mark that already names them is left alone).
    pub async fn mark_underreplicated(
        &self,
        ledger_id: i64,
        missing: &[String],
        now_ms: u64,
    ) -> Result<(), LedgerError> {
        let path = self.layout.ur_ledger(ledger_id);
        loop {
            let mark = UnderReplicated {
                replicas: missing.to_vec(),
                ctime_ms: now_ms,
            };
            let created = self
                .retrying(|client| {
                    let path = path.clone();
                    let data = mark.encode();
                    async move {
                        match Self::create_full(&client, &path, &data, &persistent()).await {
                            Ok(_) => Ok(true),
                            Err(zk::Error::NodeExists) => Ok(false),
                            Err(e) => Err(e),
                        }
                    }
                })
                .await?;
            if created {
                return Ok(());
            }
            let Some((mut have, version)) = self.read_mark(ledger_id).await? else {
                continue;
            };
            let before = have.replicas.len();
            for m in missing {
                if !have.replicas.contains(m) {
                    have.replicas.push(m.clone());
                }
            }
            if have.replicas.len() == before {
                return Ok(());
            }
            have.ctime_ms = now_ms;
            let written = self
                .retrying(|client| {
                    let path = path.clone();
                    let data = have.encode();
                    async move {
                        match client.set_data(&path, &data, Some(version)).await {
                            Ok(_) => Ok(true),
                            Err(zk::Error::BadVersion) | Err(zk::Error::NoNode) => Ok(false),
                            Err(e) => Err(e),
                        }
                    }
                })
                .await?;
            if written {
                return Ok(());
            }
        }
    }

    /// A ledger's under-replication mark and its version, if marked.
    pub async fn read_mark(
        &self,
        ledger_id: i64,
    ) -> Result<Option<(UnderReplicated, Version)>, LedgerError> {
        let path = self.layout.ur_ledger(ledger_id);
        let got = self
            .retrying(|client| {
                let path = path.clone();
                async move { found(client.get_data(&path).await) }
            })
            .await?;
        match got {
            None => Ok(None),
            Some((data, stat)) => Ok(Some((UnderReplicated::decode(&data)?, stat.version))),
        }
    }

    /// Every under-replicated ledger id, ascending (a walk of the four hex levels).
    pub async fn list_underreplicated(&self) -> Result<Vec<i64>, LedgerError> {
        let mut ids = Vec::new();
        let mut dirs = vec![(self.layout.ur_ledgers(), 0)];
        while let Some((dir, depth)) = dirs.pop() {
            let children = self.children(&dir).await?;
            walk_ur_level(&dir, depth, children, &mut ids, &mut dirs);
        }
        ids.sort_unstable();
        Ok(ids)
    }

    /// Every under-replicated ledger id, with a watch on every directory of the tree walked
    /// (any of them fires when a mark comes or goes under it), as BookKeeper's `SubTreeCache`
    /// watches the hierarchy.
    pub async fn watch_underreplicated(
        &self,
    ) -> Result<(Vec<i64>, Vec<zk::OneshotWatcher>), LedgerError> {
        let mut ids = Vec::new();
        let mut watchers = Vec::new();
        let mut dirs = vec![(self.layout.ur_ledgers(), 0)];
        while let Some((dir, depth)) = dirs.pop() {
            let top = depth == 0;
            let got = self
                .retrying(|client| {
                    let dir = dir.clone();
                    async move {
                        match client.list_and_watch_children(&dir).await {
                            Ok(v) => Ok(Some(v)),
                            Err(zk::Error::NoNode) if top => {
                                client.mkdir(&dir, &persistent()).await?;
                                client.list_and_watch_children(&dir).await.map(Some)
                            }
                            // Cleaned up meanwhile: the parent's watch covers it.
                            Err(zk::Error::NoNode) => Ok(None),
                            Err(e) => Err(e),
                        }
                    }
                })
                .await?;
            let Some((children, w)) = got else { continue };
            watchers.push(w);
            walk_ur_level(&dir, depth, children, &mut ids, &mut dirs);
        }
        ids.sort_unstable();
        Ok((ids, watchers))
    }

    /// Takes the replication lock of a ledger (an ephemeral node of this session). Returns the
    /// mark's version to clear it with, or `None` when the ledger is not marked any more or
    /// someone else holds the lock (`getLedgerToRereplicateFromHierarchy`).
    pub async fn lock_underreplicated(
        &self,
        ledger_id: i64,
        worker: &str,
    ) -> Result<Option<Version>, LedgerError> {
        let Some((_, version)) = self.read_mark(ledger_id).await? else {
            return Ok(None);
        };
        let path = self.layout.ur_lock(ledger_id);
        let mut retried = false;
        let locked = self
            .retrying(|client| {
                let path = path.clone();
                let first = !retried;
                retried = true;
                async move {
                    match Self::create_full(&client, &path, worker.as_bytes(), &ephemeral()).await {
                        Ok(_) => Ok(true),
                        Err(zk::Error::NodeExists) if !first => {
                            // Ours if a lost answer hid our own create.
                            let stat = client.check_stat(&path).await?;
                            Ok(stat.is_some_and(|s| s.ephemeral_owner == client.session_id().0))
                        }
                        Err(zk::Error::NodeExists) => Ok(false),
                        Err(e) => Err(e),
                    }
                }
            })
            .await?;
        Ok(locked.then_some(version))
    }

    /// Releases a replication lock.
    pub async fn unlock_underreplicated(&self, ledger_id: i64) -> Result<(), LedgerError> {
        let path = self.layout.ur_lock(ledger_id);
        self.retrying(|client| {
            let path = path.clone();
            async move {
                match client.delete(&path, None).await {
                    Ok(()) | Err(zk::Error::NoNode) => Ok(()),
                    Err(e) => Err(e),
                }
            }
        })
        .await
    }

    /// Clears a mark if it is still at `version` (`markLedgerReplicated`: a newer mark, made
    /// while the worker copied, stays so the ledger is looked at again), and its empty
    /// directories.
    pub async fn clear_underreplicated(
        &self,
        ledger_id: i64,
        version: Version,
    ) -> Result<bool, LedgerError> {
        let path = self.layout.ur_ledger(ledger_id);
        let cleared = self
            .retrying(|client| {
                let path = path.clone();
                async move {
                    match client.delete(&path, Some(version)).await {
                        Ok(()) | Err(zk::Error::NoNode) => Ok(true),
                        Err(zk::Error::BadVersion) => Ok(false),
                        Err(e) => Err(e),
                    }
                }
            })
            .await?;
        if cleared {
            let client = self.session.client();
            let stop = self.layout.ur_ledgers();
            let mut dir = parent(&path);
            while let Some(d) = dir {
                if d == stop || client.delete(d, None).await.is_err() {
                    break;
                }
                dir = parent(d);
            }
        }
        Ok(cleared)
    }

    /// Makes sure the directories the auditor and workers watch exist.
    pub async fn ensure_dirs(&self) -> Result<(), LedgerError> {
        for p in [
            self.layout.available(),
            self.layout.ur_ledgers(),
            self.layout.ur_locks(),
        ] {
            self.retrying(|client| {
                let p = p.clone();
                async move { client.mkdir(&p, &persistent()).await }
            })
            .await?;
        }
        Ok(())
    }
}

/// One directory of the under-replicated tree's walk (four hex levels): the ledger ids named
/// at the last level, the directories below it otherwise.
fn walk_ur_level(
    dir: &str,
    depth: u32,
    children: Vec<String>,
    ids: &mut Vec<i64>,
    dirs: &mut Vec<(String, u32)>,
) {
    for c in children {
        if depth == 4 {
            if let Some(id) = layout::ledger_id_of_ur(&c) {
                ids.push(id);
            }
        } else {
            dirs.push((format!("{dir}/{c}"), depth + 1));
        }
    }
}

/// `Ok(None)` for a node that does not exist, the rest as it was.
fn found<T>(result: Result<T, zk::Error>) -> Result<Option<T>, zk::Error> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(zk::Error::NoNode) => Ok(None),
        Err(e) => Err(e),
    }
}
