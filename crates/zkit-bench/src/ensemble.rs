//! A private Apache ZooKeeper ensemble for the harnesses, through `scripts/apache-zk ensemble`
//! (Debian's `zookeeper` package): started under a directory of the harness's choosing, its
//! leader found, a member killed with SIGKILL (sent here, so that the harness knows the instant
//! of the kill to the microsecond), restarted, and stopped. Stopped on drop, also on error
//! paths.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{bail, Context as _, Result};

/// A running ensemble (members numbered from 1).
pub struct RunningEnsemble {
    script: PathBuf,
    dir: PathBuf,
    connect: String,
    members: usize,
    stopped: bool,
}

impl RunningEnsemble {
    /// Starts `members` members under `dir` through `script` (scripts/apache-zk); returns once
    /// every member serves.
    pub async fn start(script: &Path, dir: &Path, members: usize) -> Result<RunningEnsemble> {
        std::fs::create_dir_all(dir)?;
        let mut ensemble = RunningEnsemble {
            script: script.to_path_buf(),
            dir: dir.to_path_buf(),
            connect: String::new(),
            members,
            stopped: false,
        };
        // From here on a failure drops `ensemble`, which stops whatever did start.
        let out = ensemble.script(&["start", &members.to_string()]).await?;
        ensemble.connect = out.trim().to_string();
        if ensemble.connect.split(',').count() != members {
            bail!("unexpected connect string {:?}", ensemble.connect);
        }
        Ok(ensemble)
    }

    /// The connect string with every member, `127.0.0.1:P1,127.0.0.1:P2,…`.
    pub fn connect_string(&self) -> &str {
        &self.connect
    }

    /// The member that leads now.
    pub async fn leader(&self) -> Result<usize> {
        let out = self.script(&["leader"]).await?;
        out.trim()
            .parse()
            .with_context(|| format!("ensemble leader printed {out:?}"))
    }

    /// kill -9 of member `m`; returns the wall-clock instant just before the signal was sent,
    /// once the process is gone.
    pub async fn kill9(&self, m: usize) -> Result<SystemTime> {
        let pid_file = self.dir.join(m.to_string()).join("zk.pid");
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .with_context(|| format!("reading {}", pid_file.display()))?
            .trim()
            .parse()
            .with_context(|| format!("bad pid in {}", pid_file.display()))?;
        if !alive(pid) {
            bail!("member {m} (pid {pid}) is not running");
        }
        let at = SystemTime::now();
        // SAFETY: kill(2) has no memory preconditions; the pid is the member's (from the
        // script's pid file, checked alive just above).
        #[allow(unsafe_code)]
        let rc = unsafe { libc::kill(pid, libc::SIGKILL) };
        if rc != 0 {
            bail!("kill -9 {pid}: {}", std::io::Error::last_os_error());
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while alive(pid) {
            if Instant::now() > deadline {
                bail!("member {m} (pid {pid}) still alive 10 s after kill -9");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // As `scripts/apache-zk ensemble kill` does: a killed member has no pid file.
        let _ = std::fs::remove_file(&pid_file);
        Ok(at)
    }

    /// Starts killed member `m` again (same config and data); returns once it serves.
    pub async fn restart(&self, m: usize) -> Result<()> {
        self.script(&["restart", &m.to_string()]).await.map(drop)
    }

    /// Waits until every member serves (leader or follower), at most `timeout`.
    pub async fn wait_whole(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.script(&["status"]).await?;
            if whole(&status, self.members) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("the ensemble is not whole after {timeout:?}: {status}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Stops every member.
    pub async fn stop(mut self) -> Result<()> {
        self.stopped = true;
        self.script(&["stop"]).await.map(drop)
    }

    /// Runs `SCRIPT ensemble SUB DIR ARGS…`; its stdout.
    async fn script(&self, args: &[&str]) -> Result<String> {
        let (sub, rest) = args.split_first().context("a subcommand")?;
        let out = tokio::process::Command::new(&self.script)
            .arg("ensemble")
            .arg(sub)
            .arg(&self.dir)
            .args(rest)
            .stdin(Stdio::null())
            .output()
            .await
            .with_context(|| format!("cannot run {}", self.script.display()))?;
        if !out.status.success() {
            bail!(
                "{} ensemble {} failed ({}): {}",
                self.script.display(),
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for RunningEnsemble {
    fn drop(&mut self) {
        // On an error path: never leave JVMs behind.
        if !self.stopped {
            let _ = std::process::Command::new(&self.script)
                .arg("ensemble")
                .arg("stop")
                .arg(&self.dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Whether `status` (the script's `ensemble status`: `M PID ADDR STATE` per member) shows
/// `members` members, each leading or following.
fn whole(status: &str, members: usize) -> bool {
    let serving = status
        .lines()
        .filter(|line| {
            matches!(
                line.split_whitespace().nth(3),
                Some("leader") | Some("follower")
            )
        })
        .count();
    serving == members && status.lines().count() == members
}

/// Whether process `pid` exists and is not a zombie (as the script's `alive`).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rfind(") ")
            .and_then(|i| stat[i + 2..].chars().next())
            .is_some_and(|state| state != 'Z'),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_needs_every_member_serving() {
        let ok = "1 10 127.0.0.1:1 follower\n2 11 127.0.0.1:2 leader\n3 12 127.0.0.1:3 follower\n";
        assert!(whole(ok, 3));
        let down = "1 10 127.0.0.1:1 follower\n2 - 127.0.0.1:2 down\n3 12 127.0.0.1:3 leader\n";
        assert!(!whole(down, 3));
        let electing = "1 10 127.0.0.1:1 not serving\n2 11 127.0.0.1:2 leader\n";
        assert!(!whole(electing, 2));
        assert!(!whole(ok, 5));
    }

    #[test]
    fn this_process_is_alive() {
        assert!(alive(std::process::id() as i32));
        assert!(!alive(i32::MAX));
    }
}
