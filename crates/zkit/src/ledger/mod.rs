//! The replicated ledger (BookKeeper-style), client side. For now: [`registration`], the
//! ZooKeeper-backed [`zkit_bookie::RegistrationManager`] bookies announce themselves with.
//! The bookie itself, its protocol and a low-level bookie connection are in `zkit_bookie`.

pub mod registration;

pub use registration::ZkRegistrationManager;
