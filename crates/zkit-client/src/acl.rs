//! ACLs as callers write them: [`Permission`] bits, [`AuthId`] (`scheme:id`), [`Acl`],
//! [`Acls`] (a borrowed list, with the three lists of `ZooDefs.Ids` ready-made) and
//! [`AuthUser`] (what `whoAmI` reports).

use std::borrow::Cow;

use bytes::BytesMut;
use zkit_proto::codec::{put_i32, put_ustring, Reader};
use zkit_proto::DecodeError;

/// What an [`Acl`] allows (`ZooDefs.Perms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Permission(i32);

impl Permission {
    /// getData, exists, getChildren, check.
    pub const READ: Permission = Permission(1);
    /// setData.
    pub const WRITE: Permission = Permission(2);
    /// Create children.
    pub const CREATE: Permission = Permission(4);
    /// Delete children.
    pub const DELETE: Permission = Permission(8);
    /// setACL.
    pub const ADMIN: Permission = Permission(16);
    /// All of the above.
    pub const ALL: Permission = Permission(31);
    /// Nothing.
    pub const NONE: Permission = Permission(0);

    /// The permission with these wire bits.
    pub const fn from_raw(raw: i32) -> Permission {
        Permission(raw)
    }

    /// The wire bits.
    pub const fn into_raw(self) -> i32 {
        self.0
    }

    /// Whether every bit of `perm` is set here.
    pub fn has(self, perm: Permission) -> bool {
        (self.0 & perm.0) == perm.0
    }
}

impl std::ops::BitAnd for Permission {
    type Output = Self;
    fn bitand(self, rhs: Self) -> Self {
        Permission(self.0 & rhs.0)
    }
}

impl std::ops::BitOr for Permission {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Permission(self.0 | rhs.0)
    }
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if *self == Permission::ALL {
            return f.write_str("ALL");
        }
        if *self == Permission::NONE {
            return f.write_str("NONE");
        }
        let names = [
            (Permission::READ, "READ"),
            (Permission::WRITE, "WRITE"),
            (Permission::CREATE, "CREATE"),
            (Permission::DELETE, "DELETE"),
            (Permission::ADMIN, "ADMIN"),
        ];
        let mut first = true;
        for (perm, name) in names {
            if self.has(perm) {
                if !first {
                    f.write_str("|")?;
                }
                f.write_str(name)?;
                first = false;
            }
        }
        Ok(())
    }
}

/// An identity in an ACL: `scheme:id` (`world:anyone`, `digest:user:hash`, `ip:10.0.0.0/8`,
/// `auth:` for "whoever created it").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AuthId {
    scheme: Cow<'static, str>,
    id: Cow<'static, str>,
}

impl AuthId {
    /// `scheme:id`.
    pub fn new(scheme: &str, id: &str) -> AuthId {
        AuthId {
            scheme: Cow::Owned(scheme.to_owned()),
            id: Cow::Owned(id.to_owned()),
        }
    }

    /// As [`AuthId::new`], in a `const` context.
    pub const fn new_const(scheme: &'static str, id: &'static str) -> AuthId {
        AuthId {
            scheme: Cow::Borrowed(scheme),
            id: Cow::Borrowed(id),
        }
    }

    /// The scheme.
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// The id within the scheme.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `world:anyone`.
    pub const fn anyone() -> AuthId {
        AuthId::new_const("world", "anyone")
    }

    /// `auth:`: the identities of the creating session.
    pub const fn authed() -> AuthId {
        AuthId::new_const("auth", "")
    }
}

/// An authenticated identity of this session, as `whoAmI` reports it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AuthUser {
    scheme: String,
    user: String,
}

impl AuthUser {
    /// `scheme` and user name.
    pub fn new(scheme: &str, user: &str) -> AuthUser {
        AuthUser {
            scheme: scheme.to_owned(),
            user: user.to_owned(),
        }
    }

    /// The auth scheme (`ip`, `digest`, `super`...).
    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// The user within it.
    pub fn user(&self) -> &str {
        &self.user
    }
}

/// One ACL entry: a [`Permission`] for an [`AuthId`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Acl {
    permission: Permission,
    auth_id: AuthId,
}

impl Acl {
    /// `permission` for `auth_id`.
    pub fn new(permission: Permission, auth_id: AuthId) -> Acl {
        Acl {
            permission,
            auth_id,
        }
    }

    /// As [`Acl::new`], in a `const` context.
    pub const fn new_const(permission: Permission, scheme: &'static str, id: &'static str) -> Acl {
        Acl {
            permission,
            auth_id: AuthId::new_const(scheme, id),
        }
    }

    /// The permission.
    pub fn permission(&self) -> Permission {
        self.permission
    }

    /// The identity.
    pub fn auth_id(&self) -> &AuthId {
        &self.auth_id
    }

    /// The identity's scheme.
    pub fn scheme(&self) -> &str {
        self.auth_id.scheme()
    }

    /// The identity's id.
    pub fn id(&self) -> &str {
        self.auth_id.id()
    }

    pub(crate) fn encode(&self, buf: &mut BytesMut) {
        put_i32(buf, self.permission.0);
        put_ustring(buf, &self.auth_id.scheme);
        put_ustring(buf, &self.auth_id.id);
    }

    pub(crate) fn decode(r: &mut Reader<'_>) -> Result<Acl, DecodeError> {
        let permission = Permission(r.read_i32()?);
        let scheme = r.read_ustring()?;
        let id = r.read_ustring()?;
        Ok(Acl {
            permission,
            auth_id: AuthId {
                scheme: Cow::Owned(scheme),
                id: Cow::Owned(id),
            },
        })
    }
}

static ANYONE_ALL: [Acl; 1] = [Acl::new_const(Permission::ALL, "world", "anyone")];
static ANYONE_READ: [Acl; 1] = [Acl::new_const(Permission::READ, "world", "anyone")];
static CREATOR_ALL: [Acl; 1] = [Acl::new_const(Permission::ALL, "auth", "")];

/// A borrowed list of [`Acl`]s, with `ZooDefs.Ids`' three ready-made lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Acls<'a> {
    acls: &'a [Acl],
}

impl<'a> Acls<'a> {
    /// Wraps a list.
    pub fn new(acls: &'a [Acl]) -> Acls<'a> {
        Acls { acls }
    }

    /// `OPEN_ACL_UNSAFE`: anyone may do anything.
    pub const fn anyone_all() -> Acls<'static> {
        Acls { acls: &ANYONE_ALL }
    }

    /// `READ_ACL_UNSAFE`: anyone may read.
    pub const fn anyone_read() -> Acls<'static> {
        Acls { acls: &ANYONE_READ }
    }

    /// `CREATOR_ALL_ACL`: the creating session's identities may do anything (needs `auth`
    /// first, else the server answers InvalidACL).
    pub const fn creator_all() -> Acls<'static> {
        Acls { acls: &CREATOR_ALL }
    }
}

impl<'a> std::ops::Deref for Acls<'a> {
    type Target = [Acl];
    fn deref(&self) -> &'a [Acl] {
        self.acls
    }
}

impl<'a> From<&'a [Acl]> for Acls<'a> {
    fn from(acls: &'a [Acl]) -> Acls<'a> {
        Acls { acls }
    }
}

impl<'a> From<&'a Vec<Acl>> for Acls<'a> {
    fn from(acls: &'a Vec<Acl>) -> Acls<'a> {
        Acls { acls }
    }
}

pub(crate) fn encode_acls(buf: &mut BytesMut, acls: &[Acl]) {
    put_i32(buf, i32::try_from(acls.len()).unwrap_or(i32::MAX));
    for acl in acls {
        acl.encode(buf);
    }
}

pub(crate) fn decode_acls(r: &mut Reader<'_>) -> Result<Vec<Acl>, DecodeError> {
    Ok(r.read_opt_vec(12, Acl::decode)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use zkit_proto::Record;

    #[test]
    fn permissions() {
        let all = Permission::READ
            | Permission::WRITE
            | Permission::CREATE
            | Permission::DELETE
            | Permission::ADMIN;
        assert_eq!(all, Permission::ALL);
        assert_eq!(Permission::ALL & Permission::READ, Permission::READ);
        assert_eq!(
            (Permission::READ | Permission::ADMIN).to_string(),
            "READ|ADMIN"
        );
        assert_eq!(Permission::ALL.to_string(), "ALL");
    }

    #[test]
    fn acl_encoding_is_the_jute_record() {
        let mut buf = BytesMut::new();
        encode_acls(&mut buf, &Acls::anyone_all());
        let mut expected = BytesMut::new();
        zkit_proto::codec::put_vec(
            &mut expected,
            &[zkit_proto::Acl {
                perms: 31,
                id: zkit_proto::Id {
                    scheme: "world".into(),
                    id: "anyone".into(),
                },
            }],
        );
        assert_eq!(buf, expected);
        let decoded = decode_acls(&mut Reader::new(&buf)).unwrap();
        assert_eq!(decoded, ANYONE_ALL.to_vec());
        let _ = zkit_proto::Acl::decode_from(&buf[4..]).unwrap();
    }
}
