//! The pure decision core of every sequential-node lock: given our node's name and the children
//! of the lock directory, do we hold the lock, or whose deletion do we wait for?
//!
//! No I/O here. Names follow Curator: a contender is any child whose last 10 characters are its
//! sequence number (`_c_<uuid>-lock-0000000007`, `_c_<uuid>-__READ__0000000008`, kazoo's
//! `<uuid>__lock__0000000009`...). Contenders are ordered by sequence number, **not** by full
//! name: protected names start with a random UUID, so a lexicographic sort would be wrong (the
//! bug class of CURATOR-45/-79). Children without a sequence suffix are ignored.

use crate::protected::sequence_of;

/// Marker in read-lock node names (Curator's `InterProcessReadWriteLock.READ_LOCK_NAME`).
pub const READ_MARKER: &str = "__READ__";
/// Marker in write-lock node names (Curator's `InterProcessReadWriteLock.WRITE_LOCK_NAME`).
pub const WRITE_MARKER: &str = "__WRIT__";
/// Name part of mutex nodes (Curator's `InterProcessMutex` `LOCK_NAME`).
pub const MUTEX_NAME: &str = "lock-";

/// What a contender node asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A shared (read) lock: the name contains `__READ__` (or kazoo's `__rlock__`).
    Read,
    /// Anything else: an exclusive lock (mutex, write lock).
    Exclusive,
}

/// The role of a node by its name.
pub fn role_of(name: &str) -> Role {
    if name.contains(READ_MARKER) || name.contains("__rlock__") {
        Role::Read
    } else {
        Role::Exclusive
    }
}

/// The outcome of [`decide`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// We hold the lock.
    Acquired,
    /// Wait until this node (a child name of the lock directory) is deleted, then decide again.
    WatchPredecessor(String),
    /// Our node is not among the children: it was deleted (session expired, or removed by hand).
    NodeGone,
}

/// Which rule a contender follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Holds when fewer than `max_leases` contenders are ahead (1: mutex / write lock). Waits
    /// for the contender `max_leases` places ahead, as Curator's `StandardLockInternalsDriver`.
    Exclusive {
        /// How many may hold at once.
        max_leases: usize,
    },
    /// A read lock: holds when no exclusive contender is ahead; otherwise waits for the nearest
    /// exclusive contender ahead (Curator waits for the first one; the nearest causes fewer
    /// wake-ups and is equally correct because we decide again after every deletion).
    Shared,
}

/// Contenders sorted by sequence number (ties, which cannot happen under one parent, by name).
pub fn sorted_contenders<S: AsRef<str>>(children: &[S]) -> Vec<(i64, &str)> {
    let mut contenders: Vec<(i64, &str)> = children
        .iter()
        .filter_map(|c| sequence_of(c.as_ref()).map(|seq| (seq, c.as_ref())))
        .collect();
    contenders.sort_unstable();
    contenders
}

/// Mutex rule: [`decide_with`] with `Rule::Exclusive { max_leases: 1 }` and no exemption.
pub fn decide<S: AsRef<str>>(my_node: &str, children: &[S]) -> Decision {
    decide_with(my_node, children, Rule::Exclusive { max_leases: 1 }, None)
}

/// Decides for `my_node` (a child name) among `children` under `rule`. `exempt` names a node
/// that never blocks us: the write node of the same `ReadWriteLock` when its holder takes the
/// read lock (a writer may also read, as in Curator).
pub fn decide_with<S: AsRef<str>>(
    my_node: &str,
    children: &[S],
    rule: Rule,
    exempt: Option<&str>,
) -> Decision {
    let contenders = sorted_contenders(children);
    let Some(me) = contenders.iter().position(|(_, name)| *name == my_node) else {
        return Decision::NodeGone;
    };
    let ahead = contenders[..me]
        .iter()
        .filter(|(_, name)| Some(*name) != exempt);
    match rule {
        Rule::Exclusive { max_leases } => {
            let ahead: Vec<&str> = ahead.map(|(_, name)| *name).collect();
            let max_leases = max_leases.max(1);
            if ahead.len() < max_leases {
                Decision::Acquired
            } else {
                Decision::WatchPredecessor(ahead[ahead.len() - max_leases].to_string())
            }
        }
        Rule::Shared => match ahead
            .clone()
            .rfind(|(_, name)| role_of(name) == Role::Exclusive)
        {
            None => Decision::Acquired,
            Some((_, name)) => Decision::WatchPredecessor(name.to_string()),
        },
    }
}

/// Whether `my_node` holds once the node it waits for (the [`Decision::WatchPredecessor`] of
/// the same arguments) is deleted, with no new listing. Sound because sequence numbers under
/// one parent only grow: no contender can appear ahead of us later, so the contenders ahead of
/// us after the deletion are a subset of `children` minus the deleted one, and every rule here
/// holds for a subset of what it holds for. A hand-off then costs the deletion event alone,
/// where Curator lists the children again.
pub fn holds_when_gone<S: AsRef<str>>(
    my_node: &str,
    children: &[S],
    rule: Rule,
    exempt: Option<&str>,
) -> bool {
    let Decision::WatchPredecessor(gone) = decide_with(my_node, children, rule, exempt) else {
        return false;
    };
    let rest: Vec<&str> = children
        .iter()
        .map(AsRef::as_ref)
        .filter(|name| *name != gone)
        .collect();
    decide_with(my_node, &rest, rule, exempt) == Decision::Acquired
}

/// For a mutex contender that is not next in line: the contender its predecessor waits for
/// (the one two places ahead). When that one goes, our predecessor typically holds the lock, and
/// a listing taken then tells whether our predecessor's deletion will make us the holder
/// ([`holds_when_gone`]), so that no listing is needed after it. `None` for other rules, when we
/// are next in line, or when we are not waiting at all. Watching it only makes a listing
/// happen sooner; it is never a reason to hold by itself. Each node is still watched by at most
/// two contenders: no herd.
pub fn early_watch<S: AsRef<str>>(
    my_node: &str,
    children: &[S],
    rule: Rule,
    exempt: Option<&str>,
) -> Option<String> {
    if rule != (Rule::Exclusive { max_leases: 1 }) {
        return None;
    }
    let Decision::WatchPredecessor(predecessor) = decide_with(my_node, children, rule, exempt)
    else {
        return None;
    };
    match decide_with(&predecessor, children, rule, exempt) {
        Decision::WatchPredecessor(ahead) => Some(ahead),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn early_watch_is_the_contender_two_places_ahead() {
        let children = names(&[
            "_c_d-lock-0000000007",
            "_c_a-lock-0000000001",
            "junk",
            "_c_c-lock-0000000004",
            "_c_b-lock-0000000002",
        ]);
        let mutex = Rule::Exclusive { max_leases: 1 };
        // Fourth (by sequence, not by name): waits for the third, early-watches the second.
        assert_eq!(
            early_watch("_c_d-lock-0000000007", &children, mutex, None),
            Some("_c_b-lock-0000000002".to_string())
        );
        assert_eq!(
            early_watch("_c_c-lock-0000000004", &children, mutex, None),
            Some("_c_a-lock-0000000001".to_string())
        );
        // Next in line, holder, not listed: nothing to watch early.
        assert_eq!(
            early_watch("_c_b-lock-0000000002", &children, mutex, None),
            None
        );
        assert_eq!(
            early_watch("_c_a-lock-0000000001", &children, mutex, None),
            None
        );
        assert_eq!(
            early_watch("_c_z-lock-0000000009", &children, mutex, None),
            None
        );
        // Other rules keep Curator's single watch.
        let two = Rule::Exclusive { max_leases: 2 };
        assert_eq!(
            early_watch("_c_d-lock-0000000007", &children, two, None),
            None
        );
        assert_eq!(
            early_watch("_c_d-lock-0000000007", &children, Rule::Shared, None),
            None
        );
        // After the early-watched node goes, a new listing shows whether we are next in line.
        let later = names(&[
            "_c_c-lock-0000000004",
            "_c_d-lock-0000000007",
            "_c_e-lock-0000000009",
        ]);
        assert!(holds_when_gone("_c_d-lock-0000000007", &later, mutex, None));
        assert_eq!(
            early_watch("_c_e-lock-0000000009", &later, mutex, None),
            Some("_c_c-lock-0000000004".to_string())
        );
    }

    #[test]
    fn second_in_line_holds_when_its_predecessor_goes() {
        let children = names(&[
            "_c_a-lock-0000000001",
            "_c_b-lock-0000000002",
            "_c_c-lock-0000000003",
        ]);
        let mutex = Rule::Exclusive { max_leases: 1 };
        // Second: the head's deletion hands over the lock.
        assert!(holds_when_gone(
            "_c_b-lock-0000000002",
            &children,
            mutex,
            None
        ));
        // Third: someone is still ahead after its predecessor goes.
        assert!(!holds_when_gone(
            "_c_c-lock-0000000003",
            &children,
            mutex,
            None
        ));
        // The head holds already: nothing to wait for.
        assert!(!holds_when_gone(
            "_c_a-lock-0000000001",
            &children,
            mutex,
            None
        ));
        // Not listed (our node is gone): never.
        assert!(!holds_when_gone(
            "_c_z-lock-0000000009",
            &children,
            mutex,
            None
        ));
        // Semaphore of 2: the third waits for the first; its deletion leaves one ahead (< 2).
        let two = Rule::Exclusive { max_leases: 2 };
        assert!(holds_when_gone(
            "_c_c-lock-0000000003",
            &children,
            two,
            None
        ));
        // A reader behind two writers waits for the nearer; the farther one still blocks.
        let rw = names(&[
            "_c_a-__WRIT__0000000001",
            "_c_b-__WRIT__0000000002",
            "_c_c-__READ__0000000003",
        ]);
        assert!(!holds_when_gone(
            "_c_c-__READ__0000000003",
            &rw,
            Rule::Shared,
            None
        ));
        let rw = names(&["_c_a-__WRIT__0000000001", "_c_c-__READ__0000000002"]);
        assert!(holds_when_gone(
            "_c_c-__READ__0000000002",
            &rw,
            Rule::Shared,
            None
        ));
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn mutex_orders_by_sequence_not_by_uuid() {
        // UUID order (a < f) is the reverse of sequence order.
        let children = names(&[
            "_c_ffff-lock-0000000001",
            "_c_aaaa-lock-0000000002",
            "_c_0000-lock-0000000003",
            "unrelated",
        ]);
        assert_eq!(
            decide("_c_ffff-lock-0000000001", &children),
            Decision::Acquired
        );
        assert_eq!(
            decide("_c_aaaa-lock-0000000002", &children),
            Decision::WatchPredecessor("_c_ffff-lock-0000000001".into())
        );
        // Only the immediate predecessor is watched: no herd effect.
        assert_eq!(
            decide("_c_0000-lock-0000000003", &children),
            Decision::WatchPredecessor("_c_aaaa-lock-0000000002".into())
        );
        assert_eq!(
            decide("_c_gone-lock-0000000004", &children),
            Decision::NodeGone
        );
    }

    #[test]
    fn mixed_curator_kazoo_and_unprotected_names_share_one_order() {
        let children = names(&[
            "9c1d__lock__0000000005",
            "_c_b-lock-0000000004",
            "lock-0000000006",
        ]);
        assert_eq!(
            decide("lock-0000000006", &children),
            Decision::WatchPredecessor("9c1d__lock__0000000005".into())
        );
        assert_eq!(
            decide("_c_b-lock-0000000004", &children),
            Decision::Acquired
        );
    }

    #[test]
    fn read_write_rules() {
        let children = names(&[
            "_c_1-__READ__0000000001",
            "_c_2-__READ__0000000002",
            "_c_3-__WRIT__0000000003",
            "_c_4-__READ__0000000004",
            "_c_5-__WRIT__0000000005",
        ]);
        // Readers ahead of any writer share the lock.
        assert_eq!(
            decide_with("_c_2-__READ__0000000002", &children, Rule::Shared, None),
            Decision::Acquired
        );
        // A writer waits for everyone ahead, readers included.
        assert_eq!(
            decide_with(
                "_c_3-__WRIT__0000000003",
                &children,
                Rule::Exclusive { max_leases: 1 },
                None
            ),
            Decision::WatchPredecessor("_c_2-__READ__0000000002".into())
        );
        // A reader behind a writer waits for that writer.
        assert_eq!(
            decide_with("_c_4-__READ__0000000004", &children, Rule::Shared, None),
            Decision::WatchPredecessor("_c_3-__WRIT__0000000003".into())
        );
        // The holder of the write lock may take the read lock.
        assert_eq!(
            decide_with(
                "_c_4-__READ__0000000004",
                &children,
                Rule::Shared,
                Some("_c_3-__WRIT__0000000003")
            ),
            Decision::Acquired
        );
        // A later writer waits for the reader right before it, not for the first writer.
        assert_eq!(
            decide_with(
                "_c_5-__WRIT__0000000005",
                &children,
                Rule::Exclusive { max_leases: 1 },
                None
            ),
            Decision::WatchPredecessor("_c_4-__READ__0000000004".into())
        );
    }

    #[test]
    fn semaphore_style_max_leases() {
        let children = names(&["a0000000001", "b0000000002", "c0000000003", "d0000000004"]);
        let rule = Rule::Exclusive { max_leases: 2 };
        assert_eq!(
            decide_with("b0000000002", &children, rule, None),
            Decision::Acquired
        );
        assert_eq!(
            decide_with("c0000000003", &children, rule, None),
            Decision::WatchPredecessor("a0000000001".into())
        );
        assert_eq!(
            decide_with("d0000000004", &children, rule, None),
            Decision::WatchPredecessor("b0000000002".into())
        );
    }
}
