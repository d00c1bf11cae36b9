//! The harness's own client work: the paths it creates, the open-files limit.

use anyhow::{Context as _, Result};
use zkit_client as zk;

/// Creates `path` and its missing ancestors (persistent, open ACL).
pub(super) async fn ensure_path(client: &zk::Client, path: &str) -> Result<()> {
    let options = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    let mut prefix = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        prefix.push('/');
        prefix.push_str(part);
        match client.create(&prefix, b"", &options).await {
            Ok(_) | Err(zk::Error::NodeExists) => {}
            Err(e) => return Err(e).with_context(|| format!("creating {prefix}")),
        }
    }
    Ok(())
}
