//! [`FileResource`]: a durable directory-backed [`Resource`] for demos and tests. `prepare`
//! writes `prepared/<txid>` (the payload; temp file, fsync, rename, fsync the directory);
//! `commit` renames it to `committed/<txid>`; `abort` to `aborted/<txid>` (or writes an empty
//! marker when nothing was prepared). A rename is atomic, so a crash leaves each transaction in
//! exactly one of the three directories.
//!
//! Voting rule (for demos): the vote is `no` when the payload contains `veto=<name>`, where
//! `<name>` is the resource's name; otherwise `yes`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;

use super::decide::Vote;
use super::participant::Resource;
use super::TxnError;

/// Where a transaction is in a [`FileResource`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileState {
    /// Not known.
    Unknown,
    /// Prepared, outcome not applied (in doubt).
    Prepared,
    /// Committed.
    Committed,
    /// Aborted.
    Aborted,
}

/// A directory of prepared/committed/aborted records (see the module docs).
#[derive(Debug, Clone)]
pub struct FileResource {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    name: String,
    dir: PathBuf,
    prepare_delay: Duration,
}

const STATES: [(&str, FileState); 3] = [
    ("prepared", FileState::Prepared),
    ("committed", FileState::Committed),
    ("aborted", FileState::Aborted),
];

fn io(err: std::io::Error, what: &str) -> TxnError {
    TxnError::Resource(format!("{what}: {err}"))
}

impl FileResource {
    /// Opens (creating) the directory `dir` for participant `name`.
    ///
    /// # Errors
    /// [`TxnError::Resource`] when the directories cannot be created.
    pub fn open(name: &str, dir: impl AsRef<Path>) -> Result<FileResource, TxnError> {
        let dir = dir.as_ref().to_path_buf();
        for (sub, _) in STATES {
            std::fs::create_dir_all(dir.join(sub)).map_err(|e| io(e, "create directory"))?;
        }
        Ok(FileResource {
            inner: Arc::new(Inner {
                name: name.to_string(),
                dir,
                prepare_delay: Duration::ZERO,
            }),
        })
    }

    /// Fault injection for demos: wait this long inside `prepare` before voting (the window in
    /// which a demo kills a participant "before voting").
    pub fn with_prepare_delay(self, delay: Duration) -> FileResource {
        FileResource {
            inner: Arc::new(Inner {
                name: self.inner.name.clone(),
                dir: self.inner.dir.clone(),
                prepare_delay: delay,
            }),
        }
    }

    /// Where `txid` is.
    pub fn state(&self, txid: &str) -> FileState {
        STATES
            .iter()
            .find(|(sub, _)| self.inner.dir.join(sub).join(txid).exists())
            .map_or(FileState::Unknown, |(_, state)| *state)
    }

    /// The transaction ids in state `state` (not `Unknown`).
    pub fn list(&self, state: FileState) -> Vec<String> {
        let Some((sub, _)) = STATES.iter().find(|(_, s)| *s == state) else {
            return Vec::new();
        };
        let mut out: Vec<String> = std::fs::read_dir(self.inner.dir.join(sub))
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter(|n| !n.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Inner) -> Result<T, TxnError> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, TxnError>> {
        let inner = Arc::clone(&self.inner);
        async move {
            tokio::task::spawn_blocking(move || f(&inner))
                .await
                .map_err(|e| TxnError::Resource(format!("file task: {e}")))?
        }
        .boxed()
    }
}

fn sync_dir(dir: &Path) -> Result<(), TxnError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io(e, "fsync directory"))
}

/// Moves `prepared/<txid>` to `<to>/<txid>` durably; writes an empty `<to>/<txid>` when nothing
/// was prepared and `allow_unprepared`. The opposite outcome already applied is an error.
fn finish(inner: &Inner, txid: &str, to: &str, allow_unprepared: bool) -> Result<(), TxnError> {
    let other = if to == "committed" {
        "aborted"
    } else {
        "committed"
    };
    let target = inner.dir.join(to).join(txid);
    if target.exists() {
        return Ok(());
    }
    if inner.dir.join(other).join(txid).exists() {
        return Err(TxnError::Resource(format!(
            "{}: {txid} is already {other}, cannot make it {to}",
            inner.name
        )));
    }
    let prepared = inner.dir.join("prepared").join(txid);
    if prepared.exists() {
        std::fs::rename(&prepared, &target).map_err(|e| io(e, "rename"))?;
    } else if allow_unprepared {
        std::fs::File::create(&target)
            .and_then(|f| f.sync_all())
            .map_err(|e| io(e, "write marker"))?;
    } else {
        return Err(TxnError::Resource(format!(
            "{}: commit of {txid}, which was never prepared",
            inner.name
        )));
    }
    sync_dir(&inner.dir.join(to))?;
    sync_dir(&inner.dir.join("prepared"))
}

impl Resource for FileResource {
    fn prepare<'a>(
        &'a self,
        txid: &'a str,
        payload: &'a [u8],
    ) -> BoxFuture<'a, Result<Vote, TxnError>> {
        let veto = format!("veto={}", self.inner.name);
        let refuses = String::from_utf8_lossy(payload).contains(&veto);
        let delay = self.inner.prepare_delay;
        let txid = txid.to_string();
        let payload = payload.to_vec();
        let write = self.blocking(move |inner| {
            if refuses {
                return Ok(Vote::No(format!(
                    "{} refuses (payload has {veto})",
                    inner.name
                )));
            }
            let dir = inner.dir.join("prepared");
            let tmp = dir.join(format!(".{txid}.tmp"));
            std::fs::write(&tmp, &payload)
                .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
                .map_err(|e| io(e, "write prepared"))?;
            std::fs::rename(&tmp, dir.join(&txid)).map_err(|e| io(e, "rename prepared"))?;
            sync_dir(&dir)?;
            Ok(Vote::Yes)
        });
        async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            write.await
        }
        .boxed()
    }

    fn commit<'a>(&'a self, txid: &'a str) -> BoxFuture<'a, Result<(), TxnError>> {
        let txid = txid.to_string();
        self.blocking(move |inner| finish(inner, &txid, "committed", false))
    }

    fn abort<'a>(&'a self, txid: &'a str) -> BoxFuture<'a, Result<(), TxnError>> {
        let txid = txid.to_string();
        self.blocking(move |inner| finish(inner, &txid, "aborted", true))
    }

    fn in_doubt(&self) -> BoxFuture<'_, Result<Vec<String>, TxnError>> {
        let this = self.clone();
        async move { Ok(this.list(FileState::Prepared)) }.boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn prepare_commit_abort_are_durable_idempotent_and_exclusive() {
        let dir = tempfile::tempdir().expect("tempdir");
        let r = FileResource::open("P1", dir.path()).expect("open");
        assert_eq!(r.prepare("t1", b"x").await, Ok(Vote::Yes));
        assert_eq!(r.in_doubt().await, Ok(vec!["t1".to_string()]));
        r.commit("t1").await.expect("commit");
        r.commit("t1").await.expect("commit again");
        assert_eq!(r.state("t1"), FileState::Committed);
        assert!(r.abort("t1").await.is_err(), "abort after commit must fail");

        assert!(matches!(r.prepare("t2", b"veto=P1").await, Ok(Vote::No(_))));
        r.abort("t2").await.expect("abort unprepared");
        r.abort("t2").await.expect("abort again");
        assert_eq!(r.state("t2"), FileState::Aborted);
        assert!(r.commit("t2").await.is_err());
        assert!(r.commit("t3").await.is_err(), "commit of unprepared");

        // A reopened resource (a restart) sees the same states.
        let again = FileResource::open("P1", dir.path()).expect("reopen");
        assert_eq!(again.state("t1"), FileState::Committed);
        assert_eq!(again.in_doubt().await, Ok(vec![]));
    }
}
