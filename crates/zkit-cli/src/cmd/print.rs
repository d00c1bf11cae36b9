//! How the commands print what a server answered: an error naming the node and ZooKeeper's
//! error code. A leaf module, so that every command (`node`, `watch`, `export`, `import`) can
//! use it without importing another command's module.

use anyhow::anyhow;
use zkit_client::Error as ZkError;

/// A readable error naming the node and ZooKeeper's error code.
pub fn node_error(err: ZkError, path: &str) -> anyhow::Error {
    let what = match &err {
        ZkError::NoNode => format!("node {path} does not exist (NoNode)"),
        ZkError::NodeExists => format!("node {path} already exists (NodeExists)"),
        ZkError::BadVersion => format!("node {path} has a different version (BadVersion)"),
        ZkError::NotEmpty => format!("node {path} has children (NotEmpty)"),
        ZkError::NoChildrenForEphemerals => {
            format!("the parent of {path} is ephemeral and cannot have children (NoChildrenForEphemerals)")
        }
        ZkError::NoAuth => format!("not authorized for {path} (NoAuth)"),
        ZkError::InvalidAcl => format!("invalid ACL for {path} (InvalidACL)"),
        ZkError::BadArguments(why) => format!("bad arguments for {path}: {why} (BadArguments)"),
        ZkError::Unimplemented => format!(
            "the server does not support this operation on {path} (Unimplemented; \
             TTL nodes need extended types enabled)"
        ),
        ZkError::SessionExpired => "session expired (SessionExpired)".to_string(),
        ZkError::ConnectionLoss => {
            format!("connection lost during the operation on {path} (ConnectionLoss)")
        }
        other => format!("operation on {path} failed: {other}"),
    };
    anyhow!(what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_path_and_code() {
        let e = node_error(ZkError::NoNode, "/a");
        assert_eq!(e.to_string(), "node /a does not exist (NoNode)");
    }
}
