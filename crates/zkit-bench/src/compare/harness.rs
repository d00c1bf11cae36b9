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

/// Lifts the soft open-files limit to the hard one: 10,000 idle sessions are 10,000 sockets.
pub(super) fn raise_fd_limit() {
    #[cfg(unix)]
    {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit/setrlimit only read/write the struct we pass.
        #[allow(unsafe_code)]
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0
                && limit.rlim_cur < limit.rlim_max
            {
                limit.rlim_cur = limit.rlim_max;
                libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            }
        }
    }
}
