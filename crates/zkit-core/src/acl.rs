//! ACL fix-up and identities (Apache's `PrepRequestProcessor.fixupACL` and the `digest`/`ip`
//! authentication providers).
//!
//! [`check`] is the one permission check (Apache's `ZooKeeperServer.checkACL`): every op calls
//! it with the permission Apache requires, and so does watch delivery (CVE-2024-23944 /
//! ZOOKEEPER-4799: an event reaches a watcher only if its connection may READ the node).
//!
//! [`AclTable`] interns the ACL lists of the tree (Apache's `ReferenceCountedACLCache`): a
//! million nodes sharing one list store one copy and a 4-byte id each.

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use sha1::{Digest as _, Sha1};
use zkit_proto::{Acl, ErrorCode, Id};

/// `DigestAuthenticationProvider.generateDigest("user:password")`:
/// `user:base64(sha1("user:password"))`.
pub fn digest_id(user_password: &str) -> String {
    let user = user_password.split(':').next().unwrap_or_default();
    let hash = Sha1::digest(user_password.as_bytes());
    format!(
        "{user}:{}",
        base64::engine::general_purpose::STANDARD.encode(hash)
    )
}

/// Java's `String.split(sep)`: trailing empty strings removed.
fn java_split(s: &str, sep: char) -> Vec<&str> {
    let mut parts: Vec<&str> = s.split(sep).collect();
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    parts
}

/// `DigestAuthenticationProvider.isValid`: exactly `user:hash`.
fn valid_digest(id: &str) -> bool {
    java_split(id, ':').len() == 2
}

/// `IPAuthenticationProvider.isValid`: an IPv4 address with an optional `/bits` (0..=32).
fn valid_ip(id: &str) -> bool {
    let (addr, bits) = match id.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (id, None),
    };
    let parts: Vec<&str> = addr.split('.').collect();
    if parts.len() != 4
        || !parts
            .iter()
            .all(|p| p.parse::<i32>().is_ok_and(|v| (0..=255).contains(&v)))
    {
        return false;
    }
    bits.map_or(true, |b| {
        b.parse::<i32>().is_ok_and(|v| (0..=32).contains(&v))
    })
}

/// Whether an authenticated id of this scheme may stand in for the `auth` scheme
/// (`ServerAuthenticationProvider.isAuthenticated`: digest and x509 yes, ip no).
fn is_authenticated_scheme(scheme: &str) -> bool {
    scheme == "digest" || scheme == "x509"
}

/// `X509AuthenticationProvider.isValid` asks `new X500Principal(id)` to parse the id; this
/// accepts what that parser accepts for the names clients use: comma-separated
/// `attribute=value` pairs (escaped commas inside values allowed), or the empty name.
///
/// Unlike Apache, which registers the `x509` scheme only when TLS is configured (and so
/// refuses such ACLs otherwise), zkit always accepts it: on a server without TLS no
/// connection has an `x509` id, so such an entry grants nothing.
fn valid_x509(id: &str) -> bool {
    if id.is_empty() {
        return true;
    }
    let mut rdns = Vec::new();
    let (mut start, mut escaped) = (0, false);
    for (i, c) in id.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' | ';' | '+' => {
                rdns.push(&id[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    rdns.push(&id[start..]);
    rdns.iter().all(|rdn| {
        rdn.split_once('=')
            .is_some_and(|(attr, _)| !attr.trim().is_empty())
    })
}

/// `fixupACL`: removes duplicates, rejects an empty list, expands `auth` to the connection's
/// authenticated ids, and validates every other id by its scheme. Errors with InvalidAcl.
pub fn fixup(acl: &[Acl], auth_info: &[Id]) -> Result<Vec<Acl>, ErrorCode> {
    let mut unique: Vec<&Acl> = Vec::with_capacity(acl.len());
    for a in acl {
        if !unique.contains(&a) {
            unique.push(a);
        }
    }
    if unique.is_empty() {
        return Err(ErrorCode::InvalidAcl);
    }
    let mut out = Vec::with_capacity(unique.len());
    for a in unique {
        match (a.id.scheme.as_str(), a.id.id.as_str()) {
            ("auth", _) => {
                let mut any = false;
                for id in auth_info
                    .iter()
                    .filter(|id| is_authenticated_scheme(&id.scheme))
                {
                    any = true;
                    out.push(Acl {
                        perms: a.perms,
                        id: id.clone(),
                    });
                }
                if !any {
                    return Err(ErrorCode::InvalidAcl);
                }
            }
            _ if kept_as_is(&a.id) => out.push(a.clone()),
            _ => return Err(ErrorCode::InvalidAcl),
        }
    }
    Ok(out)
}

/// [`fixup`] of a list the caller owns: a list that fixup would return unchanged (no
/// duplicate, no `auth` entry, every id valid, as an open or a digest ACL usually is) is
/// returned as it is, without a copy; any other goes through [`fixup`].
pub fn fixup_owned(acl: Vec<Acl>, auth_info: &[Id]) -> Result<Vec<Acl>, ErrorCode> {
    let unchanged = !acl.is_empty()
        && acl
            .iter()
            .enumerate()
            .all(|(i, a)| kept_as_is(&a.id) && !acl[..i].contains(a));
    if unchanged {
        Ok(acl)
    } else {
        fixup(&acl, auth_info)
    }
}

/// Whether [`fixup`] keeps an entry with this id as it is: `world:anyone`, or a valid
/// `digest`, `ip` or `x509` id.
fn kept_as_is(id: &Id) -> bool {
    match (id.scheme.as_str(), id.id.as_str()) {
        ("world", "anyone") => true,
        ("digest", id) => valid_digest(id),
        ("ip", id) => valid_ip(id),
        ("x509", id) => valid_x509(id),
        _ => false,
    }
}

/// The id a connection gets when it authenticates with the configured `superDigest`
/// (`DigestAuthenticationProvider.handleAuthentication` adds it beside the digest id).
pub fn super_id() -> Id {
    Id {
        scheme: "super".into(),
        id: String::new(),
    }
}

/// `IPAuthenticationProvider.v4addr2Bytes`: exactly four dot-separated integers 0..=255.
fn ipv4_bytes(addr: &str) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    let mut parts = addr.split('.');
    for b in &mut out {
        let v = parts.next()?.parse::<i32>().ok()?;
        *b = u8::try_from(v).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// `IPAuthenticationProvider.matches`: `expr` is `a.b.c.d` or `a.b.c.d/bits`; both addresses
/// are masked to `bits` and compared. Anything unparsable (IPv6 included: 3.8 only parses
/// IPv4) does not match.
pub fn ip_matches(peer: &str, expr: &str) -> bool {
    let (addr, bits) = match expr.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (expr, None),
    };
    let Some(acl_addr) = ipv4_bytes(addr) else {
        return false;
    };
    let bits = match bits.map(str::parse::<i32>) {
        None => 32,
        Some(Ok(b)) if (0..=32).contains(&b) => b,
        Some(_) => return false,
    };
    let Some(peer_addr) = ipv4_bytes(peer) else {
        return false;
    };
    let mask = u32::MAX.checked_shl(32 - bits as u32).unwrap_or(0);
    u32::from_be_bytes(acl_addr) & mask == u32::from_be_bytes(peer_addr) & mask
}

/// `ZooKeeperServer.checkACL`: Ok if `auth_info` may do `perm` on a node with `acl`.
///
/// An empty list allows everything; a `super` id bypasses every check; otherwise some entry
/// granting a bit of `perm` must be `world:anyone` or match an id of the same scheme (digest
/// and x509: equal ids; ip: CIDR match). Anything else is NoAuth.
pub fn check(acl: &[Acl], perm: i32, auth_info: &[Id]) -> Result<(), ErrorCode> {
    if acl.is_empty() || auth_info.iter().any(|id| id.scheme == "super") {
        return Ok(());
    }
    let allowed = acl.iter().filter(|a| a.perms & perm != 0).any(|a| {
        let (scheme, expr) = (a.id.scheme.as_str(), a.id.id.as_str());
        if scheme == "world" && expr == "anyone" {
            return true;
        }
        auth_info
            .iter()
            .filter(|id| id.scheme == scheme)
            .any(|id| match scheme {
                "digest" | "x509" => id.id == expr,
                "ip" => ip_matches(&id.id, expr),
                _ => false,
            })
    });
    if allowed {
        Ok(())
    } else {
        Err(ErrorCode::NoAuth)
    }
}

/// What getACL shows a caller without ADMIN (ZOOKEEPER-1392): digest hashes are replaced by
/// `x` (`id.replaceAll(":.*", ":x")`), so READ alone cannot harvest password hashes.
pub fn redact(acl: &[Acl]) -> Vec<Acl> {
    acl.iter()
        .map(|a| match (a.id.scheme.as_str(), a.id.id.split_once(':')) {
            ("digest", Some((user, _))) => Acl {
                perms: a.perms,
                id: Id {
                    scheme: "digest".into(),
                    id: format!("{user}:x"),
                },
            },
            _ => a.clone(),
        })
        .collect()
}

/// `AuthUtil.getUser`: the user part whoAmI reports (digest: before the first ':').
pub fn user_of(id: &Id) -> String {
    match id.scheme.as_str() {
        "digest" => id.id.split(':').next().unwrap_or_default().to_owned(),
        _ => id.id.clone(),
    }
}

/// One interned list and the number of nodes using it.
#[derive(Debug, Clone)]
struct AclEntry {
    list: Arc<[Acl]>,
    refs: u64,
}

/// Interned ACL lists with reference counts (Apache's `ReferenceCountedACLCache`). Ids are
/// reused once a list has no node left; a snapshot stores the table with its ids and restore
/// recounts the references from the nodes, so a stale count can never survive a restart.
#[derive(Debug, Clone, Default)]
pub struct AclTable {
    entries: Vec<Option<AclEntry>>,
    free: Vec<u32>,
    by_list: BTreeMap<Arc<[Acl]>, u32>,
}

impl AclTable {
    /// The id of `list`, adding it if new, and counts one more reference to it.
    pub fn intern(&mut self, list: &[Acl]) -> u32 {
        if let Some(&id) = self.by_list.get(list) {
            if let Some(Some(e)) = self.entries.get_mut(id as usize) {
                e.refs += 1;
            }
            return id;
        }
        let list: Arc<[Acl]> = list.into();
        let entry = AclEntry {
            list: list.clone(),
            refs: 1,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.entries[id as usize] = Some(entry);
                id
            }
            None => {
                // More than 4 billion distinct lists cannot be held in memory anyway.
                let id = u32::try_from(self.entries.len()).unwrap_or(u32::MAX);
                self.entries.push(Some(entry));
                id
            }
        };
        self.by_list.insert(list, id);
        id
    }

    /// Drops one reference to `id`; the list is forgotten when none is left.
    pub fn release(&mut self, id: u32) {
        let Some(slot) = self.entries.get_mut(id as usize) else {
            return;
        };
        let Some(e) = slot else { return };
        e.refs = e.refs.saturating_sub(1);
        if e.refs == 0 {
            if let Some(e) = slot.take() {
                self.by_list.remove(&e.list);
            }
            self.free.push(id);
        }
    }

    /// The list with id `id` (empty if unknown, which the tree never asks for).
    pub fn get(&self, id: u32) -> &Arc<[Acl]> {
        static EMPTY: std::sync::OnceLock<Arc<[Acl]>> = std::sync::OnceLock::new();
        match self.entries.get(id as usize) {
            Some(Some(e)) => &e.list,
            _ => EMPTY.get_or_init(|| Arc::from(Vec::new())),
        }
    }

    /// Whether `id` names a list.
    pub fn contains(&self, id: u32) -> bool {
        matches!(self.entries.get(id as usize), Some(Some(_)))
    }

    /// References to `id` (0 if unknown).
    pub fn refs(&self, id: u32) -> u64 {
        match self.entries.get(id as usize) {
            Some(Some(e)) => e.refs,
            _ => 0,
        }
    }

    /// Number of distinct lists.
    pub fn len(&self) -> usize {
        self.by_list.len()
    }

    /// Whether no list is interned.
    pub fn is_empty(&self) -> bool {
        self.by_list.is_empty()
    }

    /// Every (id, list), by id (what a snapshot stores).
    pub fn entries(&self) -> impl Iterator<Item = (u32, &Arc<[Acl]>)> {
        self.entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| e.as_ref().map(|e| (i as u32, &e.list)))
    }

    /// Restore: adds `list` with no references yet and returns its id (ids are renumbered
    /// densely on restore, so an id read from a file never sizes anything). `None` if the list
    /// is already present (a snapshot never holds a list twice).
    pub(crate) fn insert_unreferenced(&mut self, list: Vec<Acl>) -> Option<u32> {
        let list: Arc<[Acl]> = list.into();
        if self.by_list.contains_key(&list) {
            return None;
        }
        let id = u32::try_from(self.entries.len()).ok()?;
        self.entries.push(Some(AclEntry {
            list: list.clone(),
            refs: 0,
        }));
        self.by_list.insert(list, id);
        Some(id)
    }

    /// Restore: counts one reference to a known `id`.
    pub(crate) fn add_ref(&mut self, id: u32) {
        if let Some(Some(e)) = self.entries.get_mut(id as usize) {
            e.refs += 1;
        }
    }

    /// Restore: forgets lists no node uses and rebuilds the free-id list.
    pub(crate) fn purge_unused(&mut self) {
        self.free.clear();
        for (i, slot) in self.entries.iter_mut().enumerate() {
            if slot.as_ref().is_some_and(|e| e.refs == 0) {
                if let Some(e) = slot.take() {
                    self.by_list.remove(&e.list);
                }
            }
            if slot.is_none() {
                self.free.push(i as u32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkit_proto::op::perms;

    #[test]
    fn acl_table_counts_and_reuses_ids() {
        let mut t = AclTable::default();
        let open = [acl("world", "anyone")];
        let alice = [acl("digest", "alice:h")];
        let a = t.intern(&open);
        assert_eq!(t.intern(&open), a);
        let b = t.intern(&alice);
        assert_ne!(a, b);
        assert_eq!((t.refs(a), t.refs(b), t.len()), (2, 1, 2));
        t.release(b);
        assert!(!t.contains(b));
        assert_eq!(t.len(), 1);
        // The freed id is reused for the next new list.
        let c = t.intern(&[acl("ip", "10.0.0.1")]);
        assert_eq!(c, b);
        t.release(a);
        assert_eq!(&**t.get(a), &open[..]);
        t.release(a);
        assert!(t.get(a).is_empty());
        // Releasing an unknown id is harmless.
        t.release(999);
    }

    fn acl(scheme: &str, id: &str) -> Acl {
        Acl {
            perms: perms::ALL,
            id: Id {
                scheme: scheme.into(),
                id: id.into(),
            },
        }
    }

    #[test]
    fn digest_matches_zookeeper() {
        // Known value: DigestAuthenticationProvider.generateDigest("super:test").
        assert_eq!(
            digest_id("super:test"),
            "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
        );
    }

    fn id(scheme: &str, id: &str) -> Id {
        Id {
            scheme: scheme.into(),
            id: id.into(),
        }
    }

    #[test]
    fn check_rules() {
        let alice = id("digest", "alice:h");
        let only_alice = [acl("digest", "alice:h")];
        assert_eq!(check(&[], perms::ALL, &[]), Ok(()));
        assert_eq!(check(&only_alice, perms::READ, &[]), Err(ErrorCode::NoAuth));
        assert_eq!(check(&only_alice, perms::READ, &[alice]), Ok(()));
        assert_eq!(
            check(&only_alice, perms::READ, &[id("digest", "bob:h")]),
            Err(ErrorCode::NoAuth)
        );
        assert_eq!(check(&only_alice, perms::READ, &[super_id()]), Ok(()));
        let read_only = [Acl {
            perms: perms::READ,
            id: id("world", "anyone"),
        }];
        assert_eq!(check(&read_only, perms::READ, &[]), Ok(()));
        assert_eq!(check(&read_only, perms::WRITE, &[]), Err(ErrorCode::NoAuth));
        // getACL asks READ | ADMIN: either bit suffices.
        assert_eq!(check(&read_only, perms::READ | perms::ADMIN, &[]), Ok(()));
        let net = [acl("ip", "10.1.0.0/16")];
        assert_eq!(check(&net, perms::READ, &[id("ip", "10.1.2.3")]), Ok(()));
        assert_eq!(
            check(&net, perms::READ, &[id("ip", "10.2.2.3")]),
            Err(ErrorCode::NoAuth)
        );
        // A digest id never matches an ip entry, even with the same text.
        assert_eq!(
            check(
                &[acl("ip", "1.2.3.4")],
                perms::READ,
                &[id("digest", "1.2.3.4")]
            ),
            Err(ErrorCode::NoAuth)
        );
    }

    #[test]
    fn x509_ids_match_exactly_and_stand_in_for_auth() {
        let subject = "CN=client,O=Acme\\, Inc.,C=US";
        let entry = [acl("x509", subject)];
        assert_eq!(check(&entry, perms::READ, &[id("x509", subject)]), Ok(()));
        assert_eq!(
            check(&entry, perms::READ, &[id("x509", "CN=client")]),
            Err(ErrorCode::NoAuth)
        );
        // Another scheme with the same text does not match.
        assert_eq!(
            check(&entry, perms::READ, &[id("digest", subject)]),
            Err(ErrorCode::NoAuth)
        );
        assert_eq!(fixup(&entry, &[]), Ok(entry.to_vec()));
        assert_eq!(fixup(&[acl("x509", "")], &[]).map(|l| l.len()), Ok(1));
        assert_eq!(
            fixup(&[acl("x509", "not a name")], &[]),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(
            fixup(&[acl("x509", "CN=a,junk")], &[]),
            Err(ErrorCode::InvalidAcl)
        );
        // `auth` expands to the connection's x509 id (isAuthenticated is true), not its ip.
        let ids = [id("ip", "127.0.0.1"), id("x509", subject)];
        assert_eq!(
            fixup(&[acl("auth", "")], &ids),
            Ok(vec![Acl {
                perms: perms::ALL,
                id: id("x509", subject),
            }])
        );
    }

    #[test]
    fn ip_matching() {
        assert!(ip_matches("127.0.0.1", "127.0.0.1"));
        assert!(ip_matches("127.9.9.9", "127.0.0.0/8"));
        assert!(ip_matches("8.8.8.8", "0.0.0.0/0"));
        assert!(!ip_matches("127.0.0.2", "127.0.0.1"));
        assert!(!ip_matches("127.0.0.1", "127.0.0.1/33"));
        assert!(!ip_matches("::1", "127.0.0.1"));
        assert!(!ip_matches("127.0.0.1", "127.0.0"));
    }

    #[test]
    fn redaction_hides_digest_hashes_only() {
        let list = [acl("digest", "alice:abc:def"), acl("world", "anyone")];
        let shown = redact(&list);
        assert_eq!(shown[0].id.id, "alice:x");
        assert_eq!(shown[1], list[1]);
    }

    #[test]
    fn fixup_of_an_owned_list_is_fixup() {
        let ids = [Id {
            scheme: "digest".into(),
            id: "u:h".into(),
        }];
        let entries = [
            acl("world", "anyone"),
            acl("world", "me"),
            acl("auth", ""),
            acl("digest", "u:h"),
            acl("digest", "no colon"),
            acl("ip", "10.0.0.0/8"),
            acl("ip", "not an address"),
            acl("x509", "CN=a"),
            acl("sasl", "u"),
        ];
        // Every list of up to three of them (duplicates included), and the empty one.
        let mut lists = vec![vec![]];
        for a in &entries {
            lists.push(vec![a.clone()]);
            for b in &entries {
                lists.push(vec![a.clone(), b.clone()]);
                for c in &entries {
                    lists.push(vec![a.clone(), b.clone(), c.clone()]);
                }
            }
        }
        let mut moved = 0;
        for list in lists {
            let expected = fixup(&list, &ids);
            let unchanged = expected.as_ref().is_ok_and(|out| *out == list);
            let ptr = list.as_ptr();
            let got = fixup_owned(list, &ids);
            assert_eq!(got, expected);
            // A list fixup returns unchanged is the caller's own, not a copy.
            if unchanged {
                assert_eq!(got.map(|l| l.as_ptr()), Ok(ptr));
                moved += 1;
            }
        }
        // The lists of distinct valid entries (4 of them): 4 + 4·3 + 4·3·2.
        assert_eq!(moved, 40);
    }

    #[test]
    fn fixup_rules() {
        assert_eq!(fixup(&[], &[]), Err(ErrorCode::InvalidAcl));
        let w = acl("world", "anyone");
        assert_eq!(fixup(&[w.clone(), w.clone()], &[]), Ok(vec![w.clone()]));
        assert_eq!(
            fixup(&[acl("world", "me")], &[]),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(fixup(&[acl("auth", "")], &[]), Err(ErrorCode::InvalidAcl));
        let ip = Id {
            scheme: "ip".into(),
            id: "127.0.0.1".into(),
        };
        assert_eq!(fixup(&[acl("auth", "")], &[ip]), Err(ErrorCode::InvalidAcl));
        let d = Id {
            scheme: "digest".into(),
            id: "u:h".into(),
        };
        assert_eq!(
            fixup(&[acl("auth", "x")], &[d]),
            Ok(vec![acl("digest", "u:h")])
        );
        assert!(fixup(&[acl("digest", "u:h")], &[]).is_ok());
        for bad in ["u", "u:", "a:b:c", "::"] {
            assert!(fixup(&[acl("digest", bad)], &[]).is_err(), "{bad}");
        }
        for good in ["10.0.0.1", "10.0.0.0/8", "0.0.0.0/0", "1.2.3.4/32"] {
            assert!(fixup(&[acl("ip", good)], &[]).is_ok(), "{good}");
        }
        for bad in [
            "10.0.0",
            "10.0.0.256",
            "1.2.3.4/33",
            "a.b.c.d",
            "1.2.3.4/x",
            "::1",
        ] {
            assert!(fixup(&[acl("ip", bad)], &[]).is_err(), "{bad}");
        }
        assert!(fixup(&[acl("sasl", "x")], &[]).is_err());
    }
}
