//! What every handle of one ledger client shares.

use super::bookies::BookiePool;
use super::metadata::MetadataStore;
use super::options::LedgerOptions;

/// The metadata store, the bookie connections and the options of one client.
pub(crate) struct ClientInner {
    pub(crate) store: MetadataStore,
    pub(crate) pool: BookiePool,
    pub(crate) options: LedgerOptions,
}
