//! ACL fix-up and identities (Apache's `PrepRequestProcessor.fixupACL` and the `digest`/`ip`
//! authentication providers).
//!
//! Enforcement is not done yet (issue 9): [`check`] is the single place a permission check will
//! go, and every op already calls it with the permission Apache requires.

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
/// (`ServerAuthenticationProvider.isAuthenticated`: digest yes, ip no).
fn is_authenticated_scheme(scheme: &str) -> bool {
    scheme == "digest"
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
            ("world", "anyone") => out.push(a.clone()),
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
            ("digest", id) if valid_digest(id) => out.push(a.clone()),
            ("ip", id) if valid_ip(id) => out.push(a.clone()),
            _ => return Err(ErrorCode::InvalidAcl),
        }
    }
    Ok(out)
}

/// The permission check every op passes through. Not enforced yet (issue 9): always allows.
pub fn check(_acl: &[Acl], _perm: i32, _auth_info: &[Id]) -> Result<(), ErrorCode> {
    Ok(())
}

/// `AuthUtil.getUser`: the user part whoAmI reports (digest: before the first ':').
pub fn user_of(id: &Id) -> String {
    match id.scheme.as_str() {
        "digest" => id.id.split(':').next().unwrap_or_default().to_owned(),
        _ => id.id.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkit_proto::op::perms;

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
