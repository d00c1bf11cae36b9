//! The cookie: which bookie a set of data dirs belongs to, in which cluster (BookKeeper's
//! `Cookie`). It is written in every data dir (`DIR/current/VERSION`) and in the metadata store
//! (through the [`RegistrationManager`]); at start, [`check_environment`] compares them, as
//! BookKeeper's `BookieImpl.checkEnvironment` / `Cookie.verify` do, and refuses to start when
//! one is missing (a wiped data dir, or lost metadata) or they disagree (a data dir of another
//! bookie or cluster), naming what differs. A bookie with no cookie anywhere and empty dirs is
//! new: its cookie is written to the metadata store first, then to the dirs.
//!
//! Text format (one `key: "value"` per line after a version line), like BookKeeper's:
//! ```text
//! zkit-bookie-cookie 1
//! bookieHost: "127.0.0.1:3181"
//! journalDir: "/var/lib/bookie/journal"
//! ledgerDirs: "/var/lib/bookie/data"
//! instanceId: "6f1c…"
//! ```

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::registration::{RegistrationError, RegistrationManager};
use crate::storage::file::current_dir;

const HEADER: &str = "zkit-bookie-cookie 1";
const FILE: &str = "VERSION";

/// A bookie's identity on disk and in the metadata store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cookie {
    /// `HOST:PORT`.
    pub bookie_id: String,
    /// Journal dir (absolute).
    pub journal_dir: String,
    /// Ledger dirs (absolute), `,`-separated in the text form.
    pub ledger_dirs: Vec<String>,
    /// The cluster's instance id.
    pub instance_id: String,
}

/// Why the bookie may not start on these dirs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CookieError {
    /// Two cookies disagree.
    #[error("cookie mismatch in {location}: {field} is {found:?}, expected {expected:?} (a data dir of another bookie or cluster?)")]
    Mismatch {
        /// Which cookie (a dir, or the metadata store).
        location: String,
        /// The field.
        field: &'static str,
        /// What this bookie expects.
        expected: String,
        /// What the cookie says.
        found: String,
    },
    /// The metadata store has the bookie's cookie but a dir has none.
    #[error("no cookie in {0}, but the metadata store has one for this bookie: the dir was wiped or is new; refusing to start")]
    MissingLocal(PathBuf),
    /// A dir has a cookie but the metadata store has none.
    #[error("{dir} has a cookie but the metadata store has none for {bookie_id}: metadata lost or wrong cluster; refusing to start")]
    MissingRemote {
        /// The dir.
        dir: PathBuf,
        /// The bookie.
        bookie_id: String,
    },
    /// A dir holds data but no cookie.
    #[error("{0} holds bookie data but no cookie; refusing to start")]
    DataWithoutCookie(PathBuf),
    /// A cookie does not parse.
    #[error("malformed cookie in {location}: {reason}")]
    Malformed {
        /// Where.
        location: String,
        /// What is wrong.
        reason: String,
    },
    /// Reading or writing a cookie file failed.
    #[error("{0}")]
    Io(String),
    /// The metadata store failed.
    #[error(transparent)]
    Registration(#[from] RegistrationError),
}

impl Cookie {
    /// The text form.
    pub fn encode(&self) -> String {
        format!(
            "{HEADER}\nbookieHost: {:?}\njournalDir: {:?}\nledgerDirs: {:?}\ninstanceId: {:?}\n",
            self.bookie_id,
            self.journal_dir,
            self.ledger_dirs.join(","),
            self.instance_id
        )
    }

    /// Parses the text form; `location` names the source in errors.
    ///
    /// # Errors
    /// [`CookieError::Malformed`].
    pub fn parse(text: &str, location: &str) -> Result<Cookie, CookieError> {
        let bad = |reason: &str| CookieError::Malformed {
            location: location.to_string(),
            reason: reason.to_string(),
        };
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(bad("unknown cookie format"));
        }
        let mut field = |name: &str| -> Result<String, CookieError> {
            let line = lines.next().ok_or_else(|| bad("truncated"))?;
            let value = line
                .strip_prefix(name)
                .and_then(|r| r.strip_prefix(": \""))
                .and_then(|r| r.strip_suffix('"'))
                .ok_or_else(|| bad(&format!("expected {name}")))?;
            Ok(value.replace("\\\"", "\"").replace("\\\\", "\\"))
        };
        let bookie_id = field("bookieHost")?;
        let journal_dir = field("journalDir")?;
        let ledger_dirs = field("ledgerDirs")?
            .split(',')
            .map(str::to_string)
            .collect();
        let instance_id = field("instanceId")?;
        Ok(Cookie {
            bookie_id,
            journal_dir,
            ledger_dirs,
            instance_id,
        })
    }

    /// The first field where `found` differs from `self`.
    fn verify(&self, found: &Cookie, location: &str) -> Result<(), CookieError> {
        let fields: [(&'static str, String, String); 4] = [
            (
                "bookieHost",
                self.bookie_id.clone(),
                found.bookie_id.clone(),
            ),
            (
                "instanceId",
                self.instance_id.clone(),
                found.instance_id.clone(),
            ),
            (
                "journalDir",
                self.journal_dir.clone(),
                found.journal_dir.clone(),
            ),
            (
                "ledgerDirs",
                self.ledger_dirs.join(","),
                found.ledger_dirs.join(","),
            ),
        ];
        for (field, expected, got) in fields {
            if expected != got {
                return Err(CookieError::Mismatch {
                    location: location.to_string(),
                    field,
                    expected,
                    found: got,
                });
            }
        }
        Ok(())
    }
}

fn io(what: &str, path: &Path, e: std::io::Error) -> CookieError {
    CookieError::Io(format!("{what} {}: {e}", path.display()))
}

/// Absolute, canonical form of a dir (created if missing), as cookies record it.
///
/// # Errors
/// [`CookieError::Io`].
pub fn canonical_dir(dir: &Path) -> Result<PathBuf, CookieError> {
    fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
    fs::canonicalize(dir).map_err(|e| io("resolve", dir, e))
}

fn read_local(dir: &Path) -> Result<Option<Cookie>, CookieError> {
    let path = current_dir(dir).join(FILE);
    match fs::read_to_string(&path) {
        Ok(text) => Cookie::parse(&text, &path.display().to_string()).map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io("read", &path, e)),
    }
}

fn has_data(dir: &Path) -> bool {
    fs::read_dir(current_dir(dir)).is_ok_and(|rd| {
        rd.filter_map(Result::ok)
            .any(|e| e.file_name() != FILE && e.file_name() != "VERSION.tmp")
    })
}

fn write_local(dir: &Path, cookie: &Cookie) -> Result<(), CookieError> {
    let cur = current_dir(dir);
    fs::create_dir_all(&cur).map_err(|e| io("create", &cur, e))?;
    let tmp = cur.join("VERSION.tmp");
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(cookie.encode().as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, cur.join(FILE))?;
        fs::File::open(&cur)?.sync_all()
    };
    write().map_err(|e| io("write cookie in", &cur, e))
}

/// Checks the cookies of `dirs` (journal and ledger dirs, each once) and of the metadata store
/// against `expected`; writes them for a new bookie. See the module docs.
///
/// # Errors
/// [`CookieError`] naming what is missing or differs.
pub async fn check_environment(
    registration: &dyn RegistrationManager,
    expected: &Cookie,
    dirs: &[PathBuf],
) -> Result<(), CookieError> {
    let mut local = Vec::new();
    for d in dirs {
        local.push((d.clone(), read_local(d)?));
    }
    let remote = registration.read_cookie(&expected.bookie_id).await?;
    let remote_cookie = match &remote {
        Some(v) => Some(Cookie::parse(
            &String::from_utf8_lossy(&v.value),
            "the metadata store",
        )?),
        None => None,
    };
    if remote_cookie.is_none() && local.iter().all(|(_, c)| c.is_none()) {
        if let Some((d, _)) = local.iter().find(|(d, _)| has_data(d)) {
            return Err(CookieError::DataWithoutCookie(d.clone()));
        }
        registration
            .write_cookie(&expected.bookie_id, expected.encode().as_bytes(), None)
            .await?;
        for (d, _) in &local {
            write_local(d, expected)?;
        }
        return Ok(());
    }
    let Some(remote_cookie) = remote_cookie else {
        let dir = local
            .iter()
            .find(|(_, c)| c.is_some())
            .map(|(d, _)| d.clone())
            .unwrap_or_default();
        // A dir whose own cookie names another bookie was swapped in: say that first.
        for (d, c) in &local {
            if let Some(c) = c {
                expected.verify(c, &d.display().to_string())?;
            }
        }
        return Err(CookieError::MissingRemote {
            dir,
            bookie_id: expected.bookie_id.clone(),
        });
    };
    for (d, c) in &local {
        match c {
            Some(c) => expected.verify(c, &d.display().to_string())?,
            None => return Err(CookieError::MissingLocal(d.clone())),
        }
    }
    expected.verify(&remote_cookie, "the metadata store")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registration::MemoryRegistration;

    fn cookie(id: &str, dir: &Path) -> Cookie {
        let d = dir.display().to_string();
        Cookie {
            bookie_id: id.into(),
            journal_dir: d.clone(),
            ledger_dirs: vec![d],
            instance_id: "inst".into(),
        }
    }

    #[test]
    fn text_round_trip() {
        let c = cookie("127.0.0.1:1", Path::new("/a \"b\""));
        assert_eq!(Cookie::parse(&c.encode(), "x").unwrap(), c);
        assert!(matches!(
            Cookie::parse("garbage", "x"),
            Err(CookieError::Malformed { .. })
        ));
    }

    #[tokio::test]
    async fn new_then_same_passes_wiped_swapped_and_lost_metadata_refuse() {
        let reg = MemoryRegistration::new();
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let ca = cookie("127.0.0.1:1", a.path());
        let cb = cookie("127.0.0.1:2", b.path());
        let dirs_a = vec![a.path().to_path_buf()];
        let dirs_b = vec![b.path().to_path_buf()];
        check_environment(&reg, &ca, &dirs_a).await.unwrap();
        check_environment(&reg, &ca, &dirs_a).await.unwrap();
        check_environment(&reg, &cb, &dirs_b).await.unwrap();

        // Bookie 1 started on bookie 2's dir: the dir's cookie names another bookie.
        let swapped = Cookie {
            ledger_dirs: cb.ledger_dirs.clone(),
            journal_dir: cb.journal_dir.clone(),
            ..ca.clone()
        };
        match check_environment(&reg, &swapped, &dirs_b).await {
            Err(CookieError::Mismatch { field, .. }) => assert_eq!(field, "bookieHost"),
            other => panic!("swapped dir accepted: {other:?}"),
        }

        // Wiped dir: the metadata store still has the cookie.
        fs::remove_dir_all(current_dir(a.path())).unwrap();
        assert_eq!(
            check_environment(&reg, &ca, &dirs_a).await,
            Err(CookieError::MissingLocal(a.path().to_path_buf()))
        );

        // Metadata lost, dir intact.
        reg.remove_cookie("127.0.0.1:2");
        assert!(matches!(
            check_environment(&reg, &cb, &dirs_b).await,
            Err(CookieError::MissingRemote { .. })
        ));

        // Another cluster.
        let reg2 = MemoryRegistration::new();
        let c = tempfile::tempdir().unwrap();
        let cc = cookie("127.0.0.1:3", c.path());
        check_environment(&reg2, &cc, &[c.path().to_path_buf()])
            .await
            .unwrap();
        let other_cluster = Cookie {
            instance_id: "other".into(),
            ..cc
        };
        match check_environment(&reg2, &other_cluster, &[c.path().to_path_buf()]).await {
            Err(CookieError::Mismatch { field, .. }) => assert_eq!(field, "instanceId"),
            other => panic!("other cluster accepted: {other:?}"),
        }
    }

    #[tokio::test]
    async fn data_without_a_cookie_refuses() {
        let reg = MemoryRegistration::new();
        let a = tempfile::tempdir().unwrap();
        fs::create_dir_all(current_dir(a.path())).unwrap();
        fs::write(
            current_dir(a.path()).join("journal-0000000000000000.log"),
            b"x",
        )
        .unwrap();
        assert!(matches!(
            check_environment(&reg, &cookie("h:1", a.path()), &[a.path().to_path_buf()]).await,
            Err(CookieError::DataWithoutCookie(_))
        ));
    }
}
