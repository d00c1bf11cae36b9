//! The replicated ledger (BookKeeper-style), client side: a durable, replicated, append-only
//! log of entries on bookies (`zkit_bookie`), with its metadata in ZooKeeper in BookKeeper's
//! layout. One writer per ledger at a time; a ledger left open by a dead writer is recovered
//! by the next one to open it, with no one's help.
//!
//! # Layout
//! - [`layout`]: znode paths and the metadata encoding (pure).
//! - [`schedule`]: round-robin striping, quorum coverage, recovery-read decisions, bookie
//!   placement (pure).
//! - [`pipeline`]: the writer's pure core: ids, acknowledgement in order, ensemble changes.
//! - [`metadata`]: every ZooKeeper call ([`metadata::MetadataStore`]).
//! - [`bookies`]: the shared bookie connections.
//! - [`writer`]: [`LedgerWriter`], the pipelined writer.
//! - [`reader`]: [`LedgerReader`]: reads with speculative retries, LAC reads and long polls.
//! - `recovery`: fencing, recovery reads, re-replication and the close.
//! - [`auditor`]: the auditor (one per cluster, elected) that marks the ledgers of a lost
//!   bookie under-replicated, and the replication workers that copy them back to `Qw` copies.
//! - [`registration`]: [`ZkRegistrationManager`], the ZooKeeper-backed
//!   [`zkit_bookie::RegistrationManager`] bookies announce themselves with.
//!
//! # Guarantees
//! - An entry is acknowledged once `Qa` bookies of its write set stored it durably and every
//!   earlier entry is acknowledged; acknowledgements arrive in entry order.
//! - A recovered (or closed) ledger holds a gap-free prefix of what was appended that contains
//!   every acknowledged entry; everyone who opens it reads the same entries.
//! - After a recovery fenced a ledger, none of its old writer's later adds is acknowledged.
//! - Metadata changes only by versioned CAS; a conflict is re-read and re-decided.
//!
//! `docs/LEDGER.md` describes the design, the metadata format and the failure handling.

pub mod auditor;
pub mod bookies;
mod error;
mod inner;
pub mod layout;
pub mod metadata;
mod options;
pub mod pipeline;
pub mod reader;
mod recovery;
pub mod registration;
pub mod schedule;
pub mod writer;

use std::sync::Arc;

use bytes::Bytes;
use zkit_bookie::protocol::entry::{master_key, DigestType, Digester};
use zkit_bookie::ClientOptions;

pub use auditor::{AutoRecovery, AutoRecoveryOptions};
pub use error::LedgerError;
pub(crate) use inner::ClientInner;
pub use layout::{LedgerMetadata, LedgerState};
pub use options::{CreateOptions, LedgerOptions, DEFAULT_ROOT};
pub use reader::{LedgerEntry, LedgerReader};
pub use registration::ZkRegistrationManager;
pub use writer::{LedgerWriter, PendingAdd};
pub use zkit_bookie::protocol::entry::DigestType as Digest;

use bookies::BookiePool;
use layout::Layout;
use metadata::{MetadataStore, Version};
use reader::Verifier;
use schedule::choose_ensemble;

use crate::session::Session;

/// What [`LedgerClient::info`] reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerInfo {
    /// Ledger id.
    pub ledger_id: i64,
    /// Its metadata.
    pub metadata: LedgerMetadata,
    /// Its metadata version.
    pub version: Version,
    /// Its metadata node.
    pub path: String,
}

/// The ledger client (BookKeeper's `BookKeeper` handle): creates, opens, deletes and lists
/// ledgers. Cheap to clone; clones share bookie connections.
#[derive(Clone)]
pub struct LedgerClient {
    inner: Arc<ClientInner>,
}

impl std::fmt::Debug for LedgerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerClient")
            .field("root", &self.inner.store.layout().root())
            .finish()
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

impl LedgerClient {
    /// A client on `session` with default options.
    ///
    /// # Errors
    /// [`LedgerError::BadArguments`] for a bad root.
    pub fn new(session: &Session) -> Result<LedgerClient, LedgerError> {
        LedgerClient::with_options(session, LedgerOptions::default())
    }

    /// A client on `session` with `options`.
    ///
    /// # Errors
    /// [`LedgerError::BadArguments`] for a bad root.
    pub fn with_options(
        session: &Session,
        options: LedgerOptions,
    ) -> Result<LedgerClient, LedgerError> {
        let layout = Layout::new(&options.root)?;
        let store = MetadataStore::new(session, layout, options.metadata_timeout);
        let pool = BookiePool::new(ClientOptions {
            connect_timeout: options.connect_timeout,
            request_timeout: options.request_timeout,
            ..ClientOptions::default()
        });
        Ok(LedgerClient {
            inner: Arc::new(ClientInner {
                store,
                pool,
                options,
            }),
        })
    }

    /// The metadata store (for tools: marks, bookie lists).
    pub fn store(&self) -> &MetadataStore {
        &self.inner.store
    }

    /// The options.
    pub fn options(&self) -> &LedgerOptions {
        &self.inner.options
    }

    /// Creates a ledger on `E` bookies chosen at random from the writable ones and returns its
    /// writer.
    ///
    /// # Errors
    /// [`LedgerError::InvalidQuorum`] unless E ≥ Qw ≥ Qa ≥ 1, [`LedgerError::NotEnoughBookies`],
    /// ZooKeeper errors.
    pub async fn create(&self, opts: &CreateOptions) -> Result<LedgerWriter, LedgerError> {
        layout::check_quorums(opts.ensemble, opts.write_quorum, opts.ack_quorum)
            .map_err(LedgerError::InvalidQuorum)?;
        let (writable, _) = self.inner.store.bookies().await?;
        let ensemble = choose_ensemble(&writable, &[], opts.ensemble, &mut rand::thread_rng())?;
        let key = master_key(&opts.password);
        let metadata = LedgerMetadata::new_open(
            opts.write_quorum,
            opts.ack_quorum,
            ensemble,
            opts.digest,
            key,
            now_ms(),
        )?;
        let (ledger_id, version) = loop {
            let id = self.inner.store.generate_ledger_id().await?;
            if let Some(v) = self.inner.store.create(id, &metadata).await? {
                break (id, v);
            }
            tracing::warn!(ledger_id = id, "ledger id already taken; drawing another");
        };
        tracing::info!(ledger_id, ensemble = ?metadata.ensembles[&0], "ledger created");
        Ok(writer::start(writer::WriterParams {
            ledger_id,
            metadata,
            version,
            master_key: key,
            digester: Digester::new(opts.digest, &opts.password),
            mode: writer::Mode::Owner,
            lac: -1,
            length: 0,
            store: self.inner.store.clone(),
            pool: self.inner.pool.clone(),
            window: self.inner.options.max_in_flight,
            max_entry_size: self.inner.options.max_entry_size,
        }))
    }

    async fn checked(
        &self,
        ledger_id: i64,
        password: &[u8],
    ) -> Result<(LedgerMetadata, Digester), LedgerError> {
        let (m, _) = self.inner.store.read(ledger_id).await?;
        if m.master_key != master_key(password) {
            return Err(LedgerError::WrongPassword(ledger_id));
        }
        let d = Digester::new(m.digest_type, password);
        Ok((m, d))
    }

    /// Opens a ledger to read it, recovering it first when it is not closed (which fences its
    /// writer, if one is still alive).
    ///
    /// # Errors
    /// [`LedgerError::NoSuchLedger`], [`LedgerError::WrongPassword`],
    /// [`LedgerError::RecoveryFailed`], ZooKeeper errors.
    pub async fn open(&self, ledger_id: i64, password: &[u8]) -> Result<LedgerReader, LedgerError> {
        let (m, d) = self.checked(ledger_id, password).await?;
        let m = if m.is_closed() {
            m
        } else {
            recovery::recover(
                &self.inner,
                ledger_id,
                &Verifier::Digest(d.clone()),
                &d,
                m.master_key,
            )
            .await?
            .0
        };
        Ok(LedgerReader::new(
            Arc::clone(&self.inner),
            ledger_id,
            Verifier::Digest(d),
            m,
        ))
    }

    /// Recovers a ledger if it is open (see [`LedgerClient::open`]) and returns its closed
    /// metadata.
    ///
    /// # Errors
    /// As [`LedgerClient::open`].
    pub async fn recover(
        &self,
        ledger_id: i64,
        password: &[u8],
    ) -> Result<LedgerMetadata, LedgerError> {
        Ok(self.open(ledger_id, password).await?.metadata())
    }

    /// Recovers with the master key from the metadata (the replication worker's way in, as
    /// BookKeeper's admin opens with the stored password). Entries of HMAC ledgers are then
    /// checked by header only.
    pub(crate) async fn recover_as_admin(
        &self,
        ledger_id: i64,
    ) -> Result<(LedgerMetadata, Version), LedgerError> {
        let (m, v) = self.inner.store.read(ledger_id).await?;
        if m.is_closed() {
            return Ok((m, v));
        }
        let (verifier, digester) = admin_verifier(&m);
        recovery::recover(&self.inner, ledger_id, &verifier, &digester, m.master_key).await
    }

    /// Opens a ledger without recovery, as a tailing reader: it may read up to the
    /// last-add-confirmed and long-polls the bookies for more; the writer is not disturbed.
    ///
    /// # Errors
    /// [`LedgerError::NoSuchLedger`], [`LedgerError::WrongPassword`], ZooKeeper errors.
    pub async fn open_no_recovery(
        &self,
        ledger_id: i64,
        password: &[u8],
    ) -> Result<LedgerReader, LedgerError> {
        let (m, d) = self.checked(ledger_id, password).await?;
        Ok(LedgerReader::new(
            Arc::clone(&self.inner),
            ledger_id,
            Verifier::Digest(d),
            m,
        ))
    }

    /// Deletes a ledger's metadata (as BookKeeper's `deleteLedger`; the bookies' copies are
    /// left to their garbage collection).
    ///
    /// # Errors
    /// [`LedgerError::NoSuchLedger`], ZooKeeper errors.
    pub async fn delete(&self, ledger_id: i64) -> Result<(), LedgerError> {
        self.inner.store.delete(ledger_id).await
    }

    /// Every ledger id, ascending.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn list(&self) -> Result<Vec<i64>, LedgerError> {
        self.inner.store.list().await
    }

    /// A ledger's metadata.
    ///
    /// # Errors
    /// [`LedgerError::NoSuchLedger`], ZooKeeper errors.
    pub async fn info(&self, ledger_id: i64) -> Result<LedgerInfo, LedgerError> {
        let (metadata, version) = self.inner.store.read(ledger_id).await?;
        Ok(LedgerInfo {
            ledger_id,
            metadata,
            version,
            path: self.inner.store.layout().ledger(ledger_id)?,
        })
    }

    /// Writable and read-only bookies.
    ///
    /// # Errors
    /// ZooKeeper errors.
    pub async fn bookies(&self) -> Result<(Vec<String>, Vec<String>), LedgerError> {
        self.inner.store.bookies().await
    }

    /// Appends `entries` to a new ledger and closes it (a convenience for tools and tests).
    ///
    /// # Errors
    /// As [`LedgerClient::create`] and [`LedgerWriter::append_batch`].
    pub async fn write_all(
        &self,
        opts: &CreateOptions,
        entries: Vec<Bytes>,
    ) -> Result<LedgerMetadata, LedgerError> {
        let w = self.create(opts).await?;
        if !entries.is_empty() {
            w.append_batch(entries).await?;
        }
        w.close().await
    }

    /// Closes every bookie connection.
    pub fn close(&self) {
        self.inner.pool.close_all();
    }

    pub(crate) fn inner(&self) -> &Arc<ClientInner> {
        &self.inner
    }
}

/// The verifier and digester the replication worker uses: the digest is checked for CRC32C
/// ledgers (no password needed); HMAC entries are checked by header only.
pub(crate) fn admin_verifier(m: &LedgerMetadata) -> (Verifier, Digester) {
    let d = Digester::new(m.digest_type, b"");
    match m.digest_type {
        DigestType::Crc32c => (Verifier::Digest(d.clone()), d),
        DigestType::HmacSha256 => (Verifier::HeaderOnly, d),
    }
}
