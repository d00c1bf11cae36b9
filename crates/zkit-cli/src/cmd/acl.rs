//! `zkit acl get|set PATH [ACL…]` and zkCli's ACL syntax (`world:anyone:r`,
//! `digest:user:hash:cdrwa`, `auth::cdrwa`, `ip:10.0.0.0/8:r`; several entries as separate
//! arguments or comma-separated), parsed here for every command that takes ACLs.

use std::process::ExitCode;

use anyhow::{anyhow, bail, Context, Result};
use clap::Subcommand;
use zkit_client::{Acl, AuthId, Permission};

use super::conn::{close, ConnArgs};

/// `zkit acl get|set`.
#[derive(Debug, Subcommand)]
pub enum AclCommand {
    /// Print a node's ACL (zkCli's `getAcl` format) and its aversion.
    Get {
        /// Node path.
        path: String,
        #[command(flatten)]
        conn: ConnArgs,
    },
    /// Replace a node's ACL.
    Set {
        /// Node path.
        path: String,
        /// Entries as `scheme:id:perms` (perms from `cdrwa`), e.g. `world:anyone:r`,
        /// `digest:user:hash:cdrwa`, `auth::cdrwa`, `ip:127.0.0.1/8:r`.
        #[arg(required = true, num_args = 1..)]
        acl: Vec<String>,
        /// Expected ACL version (aversion); fails with BadVersion if different.
        #[arg(long, short = 'v', allow_negative_numbers = true)]
        version: Option<i32>,
        #[command(flatten)]
        conn: ConnArgs,
    },
}

/// Runs `zkit acl get|set`.
pub async fn run_acl(command: AclCommand) -> Result<ExitCode> {
    let conn = match &command {
        AclCommand::Get { conn, .. } | AclCommand::Set { conn, .. } => conn.clone(),
    };
    // Parse before connecting: a typo should not cost a session.
    let parsed = match &command {
        AclCommand::Set { acl, .. } => Some(parse_acl_list(acl)?),
        AclCommand::Get { .. } => None,
    };
    let client = conn.client().await?;
    let result = async {
        match command {
            AclCommand::Get { path, .. } => {
                let (acl, stat) = client
                    .get_acl(&path)
                    .await
                    .with_context(|| format!("getAcl {path}"))?;
                for a in &acl {
                    println!(
                        "'{},'{}\n: {}",
                        a.scheme(),
                        a.id(),
                        perms_text(a.permission())
                    );
                }
                eprintln!("aversion = {}", stat.aversion);
            }
            AclCommand::Set { path, version, .. } => {
                let acl = parsed.unwrap_or_default();
                client
                    .set_acl(&path, &acl, version)
                    .await
                    .with_context(|| format!("setAcl {path}"))?;
            }
        }
        Ok::<_, anyhow::Error>(())
    }
    .await;
    close(client).await;
    result.map(|()| ExitCode::SUCCESS)
}

/// zkCli's permission letters.
pub(crate) fn perms_text(p: Permission) -> String {
    [
        (Permission::CREATE, 'c'),
        (Permission::DELETE, 'd'),
        (Permission::READ, 'r'),
        (Permission::WRITE, 'w'),
        (Permission::ADMIN, 'a'),
    ]
    .iter()
    .filter(|(bit, _)| p.has(*bit))
    .map(|(_, c)| *c)
    .collect()
}

/// Parses entries given as arguments, each possibly a comma-separated list.
pub fn parse_acl_list(args: &[String]) -> Result<Vec<Acl>> {
    args.iter()
        .flat_map(|a| a.split(','))
        .filter(|s| !s.trim().is_empty())
        .map(|s| parse_acl(s.trim()))
        .collect()
}

/// One `scheme:id:perms` entry. The id may itself contain ':' (digest `user:hash`), so the
/// scheme ends at the first ':' and the permissions start after the last one.
pub fn parse_acl(text: &str) -> Result<Acl> {
    let (scheme, rest) = text
        .split_once(':')
        .ok_or_else(|| anyhow!("ACL {text:?}: expected scheme:id:perms"))?;
    let (id, letters) = rest
        .rsplit_once(':')
        .ok_or_else(|| anyhow!("ACL {text:?}: expected scheme:id:perms"))?;
    if scheme.is_empty() {
        bail!("ACL {text:?}: empty scheme");
    }
    let mut perms = Permission::NONE;
    for c in letters.chars() {
        perms = perms
            | match c {
                'c' => Permission::CREATE,
                'd' => Permission::DELETE,
                'r' => Permission::READ,
                'w' => Permission::WRITE,
                'a' => Permission::ADMIN,
                other => bail!("ACL {text:?}: unknown permission {other:?} (use cdrwa)"),
            };
    }
    Ok(Acl::new(perms, AuthId::new(scheme, id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_zkcli_acl_syntax() {
        let a = parse_acl("digest:user:abc=:cdrwa").unwrap();
        assert_eq!((a.scheme(), a.id()), ("digest", "user:abc="));
        assert_eq!(a.permission(), Permission::ALL);
        let a = parse_acl("world:anyone:r").unwrap();
        assert_eq!(
            (a.scheme(), a.id(), a.permission()),
            ("world", "anyone", Permission::READ)
        );
        let a = parse_acl("auth::cdrwa").unwrap();
        assert_eq!((a.scheme(), a.id()), ("auth", ""));
        let a = parse_acl("ip:127.0.0.1/8:rw").unwrap();
        assert_eq!(a.id(), "127.0.0.1/8");
        assert_eq!(perms_text(a.permission()), "rw");
        let list =
            parse_acl_list(&["world:anyone:r,auth::cdrwa".into(), "ip:1.2.3.4:a".into()]).unwrap();
        assert_eq!(list.len(), 3);
        for bad in ["world", "world:anyone", "world:anyone:x", ":anyone:r"] {
            assert!(parse_acl(bad).is_err(), "{bad}");
        }
    }
}
