//! [`Ensemble`]: a private Apache ZooKeeper ensemble for one test, started through
//! `scripts/apache-zk ensemble` (Debian's `zookeeper` package), with faults on its members:
//! kill -9, SIGSTOP/SIGCONT, restart. Tests that inject faults use their own, never the shared
//! `ZKIT_APACHE_ENSEMBLE`, and run in the `ensemble` nextest test group (one at a time).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// The `scripts/apache-zk` of this checkout.
pub fn apache_zk_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/apache-zk")
}

/// Whether an ensemble can be started here (Java and Debian's ZooKeeper installed). Prints
/// `SKIP ensemble: …` when not.
///
/// # Panics
/// When they are missing and `CI` is set: CI must run the ensemble tests.
#[track_caller]
pub fn ensemble_available() -> bool {
    apache_installed("ensemble")
}

/// Whether Java and Debian's ZooKeeper are installed, for tests that start their own Apache
/// server through `scripts/apache-zk`. Prints `SKIP {what}: …` when not.
///
/// # Panics
/// When they are missing and `CI` is set.
#[track_caller]
pub fn apache_installed(what: &str) -> bool {
    let jar = Path::new("/usr/share/java/zookeeper.jar").is_file();
    let java = std::process::Command::new("java")
        .arg("-version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if jar && java {
        return true;
    }
    let why = "Java or Debian's zookeeper package missing (scripts/apache-zk install)";
    assert!(
        std::env::var_os("CI").is_none(),
        "cannot start Apache ZooKeeper ({what}) under CI: {why}"
    );
    eprintln!("SKIP {what}: {why}");
    false
}

/// A running ensemble of Apache ZooKeeper members (numbered from 1), stopped when dropped. Its
/// directory (members' configs, data and logs) is removed then, or kept and named on stderr
/// when the test is panicking.
#[derive(Debug)]
pub struct Ensemble {
    dir: PathBuf,
    connect: String,
    members: usize,
}

impl Ensemble {
    /// Starts `members` members (at least 3) and returns once every one serves.
    ///
    /// # Errors
    /// When the script fails (its output is in the error).
    pub async fn start(members: usize) -> io::Result<Ensemble> {
        let dir = Self::fresh_dir()?;
        let mut ensemble = Ensemble {
            dir,
            connect: String::new(),
            members,
        };
        // From here on, a failure drops `ensemble`, which stops whatever did start.
        let out = ensemble.script(&["start", &members.to_string()]).await?;
        ensemble.connect = out.trim().to_owned();
        Ok(ensemble)
    }

    /// Starts `members` members (at least 3) from configs the caller writes: `config(m, dir)`
    /// returns the whole `zoo.cfg` of member `m` (numbered from 1), whose data dir must be
    /// `dir/data` (created, with its `myid`). Each config names a `clientPort=`; the connect
    /// string lists them in member order. Used to route the members' quorum and election
    /// links through proxies: the script's own `start` picks its ports and writes its configs,
    /// while its `restart` starts a member from whatever config is in `DIR/M/zoo.cfg`, so the
    /// members are launched with one concurrent `restart` each (each returns once its member
    /// serves, which needs a quorum of them up). kill, pause, resume, restart, leader and
    /// status then work as for [`Ensemble::start`].
    ///
    /// # Errors
    /// Writing the configs, a config without `clientPort=`, or a member that does not serve.
    pub async fn start_with_configs(
        members: usize,
        config: impl Fn(usize, &Path) -> String,
    ) -> io::Result<Ensemble> {
        let dir = Self::fresh_dir()?;
        let mut ensemble = Ensemble {
            dir,
            connect: String::new(),
            members,
        };
        let mut ports = Vec::new();
        for m in 1..=members {
            let mdir = ensemble.dir.join(m.to_string());
            std::fs::create_dir_all(mdir.join("data"))?;
            std::fs::write(mdir.join("data/myid"), format!("{m}\n"))?;
            let cfg = config(m, &mdir);
            let port = cfg
                .lines()
                .find_map(|l| l.trim().strip_prefix("clientPort="))
                .map(|p| p.trim().to_owned())
                .ok_or_else(|| io::Error::other(format!("member {m}: no clientPort= in config")))?;
            ports.push(format!("127.0.0.1:{port}"));
            std::fs::write(mdir.join("zoo.cfg"), cfg)?;
        }
        ensemble.connect = ports.join(",");
        std::fs::write(
            ensemble.dir.join("connect"),
            format!("{}\n", ensemble.connect),
        )?;
        // Every member's `restart` is spawned before any is awaited: they run at once.
        let mut children = Vec::new();
        for m in 1..=members {
            let child = tokio::process::Command::new(apache_zk_script())
                .args(["ensemble", "restart"])
                .arg(&ensemble.dir)
                .arg(m.to_string())
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .kill_on_drop(true)
                .spawn()?;
            children.push((m, child));
        }
        for (m, child) in children {
            let out = child.wait_with_output().await?;
            if !out.status.success() {
                return Err(io::Error::other(format!(
                    "scripts/apache-zk ensemble restart {m} failed ({}): {}{}",
                    out.status,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                )));
            }
        }
        Ok(ensemble)
    }

    fn fresh_dir() -> io::Result<PathBuf> {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "zkit-ensemble-{}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// The connect string, `127.0.0.1:P1,127.0.0.1:P2,…`.
    pub fn connect_string(&self) -> &str {
        &self.connect
    }

    /// The client address (`127.0.0.1:P`) of member `m`.
    ///
    /// # Panics
    /// When there is no member `m`.
    pub fn member_addr(&self, m: usize) -> &str {
        assert!((1..=self.members).contains(&m), "no member {m}");
        self.connect
            .split(',')
            .nth(m - 1)
            .expect("one address per member")
    }

    /// The number of members.
    pub fn members(&self) -> usize {
        self.members
    }

    /// The members' directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The member that leads now.
    ///
    /// # Errors
    /// When none does (an election is under way, or the quorum is lost).
    pub async fn leader(&self) -> io::Result<usize> {
        let out = self.script(&["leader"]).await?;
        out.trim()
            .parse()
            .map_err(|_| io::Error::other(format!("leader: unexpected output {out:?}")))
    }

    /// kill -9 of member `m`; returns once it is gone.
    ///
    /// # Errors
    /// When it is not running.
    pub async fn kill(&self, m: usize) -> io::Result<()> {
        self.script(&["kill", &m.to_string()]).await.map(drop)
    }

    /// SIGSTOP of member `m`: its sockets stay open but it answers nothing.
    ///
    /// # Errors
    /// When it is not running.
    pub async fn pause(&self, m: usize) -> io::Result<()> {
        self.script(&["pause", &m.to_string()]).await.map(drop)
    }

    /// SIGCONT of member `m`.
    ///
    /// # Errors
    /// When it is not running.
    pub async fn resume(&self, m: usize) -> io::Result<()> {
        self.script(&["resume", &m.to_string()]).await.map(drop)
    }

    /// Starts killed member `m` again, with its config and data; returns once it serves.
    ///
    /// # Errors
    /// When it runs already, or does not serve in time (no quorum).
    pub async fn restart(&self, m: usize) -> io::Result<()> {
        self.script(&["restart", &m.to_string()]).await.map(drop)
    }

    /// `scripts/apache-zk ensemble status`: one line per member (number, pid, address, and
    /// `leader`, `follower`, `paused`, `down` or `not serving`).
    ///
    /// # Errors
    /// When the script fails.
    pub async fn status(&self) -> io::Result<String> {
        self.script(&["status"]).await
    }

    /// Runs `scripts/apache-zk ensemble SUB DIR ARGS…`; its stdout.
    async fn script(&self, args: &[&str]) -> io::Result<String> {
        let (sub, rest) = args.split_first().expect("a subcommand");
        let out = tokio::process::Command::new(apache_zk_script())
            .arg("ensemble")
            .arg(sub)
            .arg(&self.dir)
            .args(rest)
            .stdin(std::process::Stdio::null())
            .output()
            .await?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(io::Error::other(format!(
                "scripts/apache-zk ensemble {} failed ({}): {}{}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )))
        }
    }
}

impl Drop for Ensemble {
    fn drop(&mut self) {
        let _ = std::process::Command::new(apache_zk_script())
            .args(["ensemble", "stop"])
            .arg(&self.dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .status();
        if std::thread::panicking() {
            eprintln!("ensemble logs kept at {}/*/zk.log", self.dir.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
