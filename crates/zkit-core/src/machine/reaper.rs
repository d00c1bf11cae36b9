//! The container and TTL reaper (Apache's `ContainerManager`), run by `tick` every
//! `container_check_interval_ms`: each candidate goes through deleteContainer's prep and, if
//! that passes, is deleted by its own txn (session 0), firing the usual watches.

use crate::prep::Overlay;
use crate::tree;
use crate::{Core, Txn};

impl Core {
    /// `ContainerManager`: containers that had a child and are empty, TTL nodes that are empty
    /// and older (by mtime) than their ttl; each deleted by its own deleteContainer txn.
    pub(super) fn reap(&mut self, now: i64) {
        let mut candidates = std::collections::BTreeSet::new();
        for path in self.tree.containers() {
            if let Some(n) = self.tree.get(path) {
                // Stored cversion > 0: it has had a child, so a fresh container survives.
                if n.num_children() == 0 && n.cversion > 0 {
                    candidates.insert(path.clone());
                }
            }
        }
        for path in self.tree.ttls() {
            if let Some(n) = self.tree.get(path) {
                if let tree::EphemeralType::Ttl(ttl) =
                    tree::EphemeralType::of(n.ephemeral_owner, self.config.extended_types)
                {
                    if n.num_children() == 0 && ttl != 0 && now.saturating_sub(n.mtime) > ttl {
                        candidates.insert(path.clone());
                    }
                }
            }
        }
        for path in candidates {
            let prepped = Overlay::lone(&self.tree, 0, &[]).delete_container(&path);
            if let Ok(op) = prepped {
                let txn = Txn {
                    zxid: self.next_zxid(),
                    session: 0,
                    time: now,
                    op,
                };
                self.commit(txn);
            }
        }
    }
}
