//! `zkit txn`: two-phase commit over ZooKeeper ([`zkit::txn`]). `participant` serves a resource
//! (`file:DIR` or `postgres:URL`), `coordinator` joins the recovering coordinator group and
//! optionally runs transactions, `list`/`show` inspect, and `demo` runs the four classic
//! 2PC failure scenarios plus two harder ones with separate OS processes ([`demo_txn`]).
//!
//! Child processes print one line per step (`P1 VOTE <txid> yes`, `COORD DECISION …`,
//! `RECOVER DECISION …`): the demo reads those lines to know when to kill whom.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use zkit::txn::decide::Vote;
use zkit::txn::file::FileState;
use zkit::txn::inspect::{self, Phase};
use zkit::txn::layout::Layout;
use zkit::txn::participant::Observer;
use zkit::txn::recovery::{RecoveryEvent, RecoveryObserver};
use zkit::txn::{
    Coordinator, FileResource, Outcome, Participant, ParticipantEvent, Recoverer, Resource,
    TxnOptions,
};
use zkit::{Session, SessionOptions};

use super::conn::ConnArgs;
use super::progress::Progress;

/// The session timeout of `zkit txn` unless `--session-timeout` says otherwise: short, so a
/// participant's death is noticed quickly.
const TXN_SESSION_TIMEOUT: Duration = Duration::from_secs(4);

/// Options every `zkit txn` command shares.
#[derive(Debug, Clone, clap::Args)]
pub struct TxnCommon {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Root znode of the transactions.
    #[arg(long, default_value = zkit::txn::DEFAULT_ROOT)]
    pub root: String,
}

impl TxnCommon {
    async fn session(&self) -> Result<Session> {
        self.conn.session(TXN_SESSION_TIMEOUT).await
    }
}

/// `zkit txn …`.
#[derive(Debug, clap::Subcommand)]
pub enum TxnCommand {
    /// Serve a resource as participant NAME until killed.
    Participant {
        /// Shared options.
        #[command(flatten)]
        common: TxnCommon,
        /// Participant name.
        #[arg(long)]
        name: String,
        /// `file:DIR` (default `file:./zkit-txn-<name>`) or `postgres:URL`.
        #[arg(long)]
        resource: Option<String>,
        /// Fault injection (file resource): wait this long in prepare before voting.
        #[arg(long, value_parser = humantime::parse_duration)]
        prepare_delay: Option<Duration>,
    },
    /// Join the recovering coordinator group and, with --participants, run transactions.
    Coordinator {
        /// Shared options.
        #[command(flatten)]
        common: TxnCommon,
        /// Participants of the transactions to run (comma-separated); none = recover only.
        #[arg(long, value_delimiter = ',')]
        participants: Vec<String>,
        /// Payload of each transaction.
        #[arg(long, default_value = "")]
        payload: String,
        /// How many transactions to run, one after another.
        #[arg(long, default_value_t = 1)]
        count: u32,
        /// Vote timeout.
        #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
        vote_timeout: Duration,
        /// How long to wait for acknowledgements after deciding (the decision stands anyway).
        #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
        ack_timeout: Duration,
        /// How long the leader leaves a live coordinator's transaction past its deadline.
        #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
        recovery_grace: Duration,
        /// Fault injection: wait this long between the votes and writing the decision.
        #[arg(long, value_parser = humantime::parse_duration)]
        decision_delay: Option<Duration>,
        /// Do not join the recovering group.
        #[arg(long)]
        no_recover: bool,
        /// Keep running (recovering) after the transactions.
        #[arg(long)]
        stay: bool,
        /// Coordinator/recoverer id (default: random).
        #[arg(long)]
        id: Option<String>,
    },
    /// List transactions in flight (undecided) and in doubt (not acknowledged by everyone).
    List {
        /// Shared options.
        #[command(flatten)]
        common: TxnCommon,
    },
    /// Show one transaction.
    Show {
        /// Shared options.
        #[command(flatten)]
        common: TxnCommon,
        /// The transaction id.
        txid: String,
    },
    /// Start an embedded server and run the 2PC failure scenarios with separate processes.
    Demo {
        /// Use this server instead of an embedded one.
        #[arg(long)]
        server: Option<String>,
    },
}

/// Runs `zkit txn …`; the exit code is 0 on success.
pub async fn run(command: TxnCommand) -> anyhow::Result<std::process::ExitCode> {
    run_exit_code(command).await.map(super::process_exit)
}

/// What [`run`] does, with the exit code as a number.
async fn run_exit_code(command: TxnCommand) -> anyhow::Result<i32> {
    match command {
        TxnCommand::Participant {
            common,
            name,
            resource,
            prepare_delay,
        } => participant(common, name, resource, prepare_delay).await,
        TxnCommand::Coordinator {
            common,
            participants,
            payload,
            count,
            vote_timeout,
            ack_timeout,
            recovery_grace,
            decision_delay,
            no_recover,
            stay,
            id,
        } => {
            let options = TxnOptions {
                vote_timeout,
                ack_timeout,
                recovery_grace,
                decision_delay: decision_delay.unwrap_or_default(),
                ..TxnOptions::with_root(&common.root)
            };
            coordinator(
                common,
                options,
                participants,
                payload,
                count,
                no_recover,
                stay,
                id,
            )
            .await
        }
        TxnCommand::List { common } => list(common).await,
        TxnCommand::Show { common, txid } => show(common, txid).await,
        TxnCommand::Demo { server } => {
            let embedded = match server {
                Some(_) => None,
                None => Some(
                    zkit_server::Server::start(zkit_server::ServerConfig::ephemeral())
                        .await
                        .context("cannot start the embedded server")?,
                ),
            };
            let addr = match (&server, &embedded) {
                (Some(addr), _) => addr.clone(),
                (None, Some(s)) => s.addr().to_string(),
                (None, None) => bail!("no server"),
            };
            let report = demo_txn(&addr).await;
            if let Some(server) = embedded {
                server.stop().await;
            }
            print!("{}", report?);
            Ok(0)
        }
    }
}

fn vote_word(vote: &Vote) -> String {
    match vote {
        Vote::Yes => "yes".into(),
        Vote::No(reason) => format!("no ({reason})"),
    }
}

async fn open_resource(
    name: &str,
    spec: Option<String>,
    prepare_delay: Option<Duration>,
) -> Result<Arc<dyn Resource>> {
    let spec = spec.unwrap_or_else(|| format!("file:./zkit-txn-{name}"));
    if let Some(dir) = spec.strip_prefix("file:") {
        let mut resource = FileResource::open(name, dir)?;
        if let Some(delay) = prepare_delay {
            resource = resource.with_prepare_delay(delay);
        }
        return Ok(Arc::new(resource));
    }
    if let Some(url) = spec.strip_prefix("postgres:") {
        let resource = zkit::txn::PostgresResource::connect(name, url).await?;
        return Ok(Arc::new(resource));
    }
    bail!("--resource must be file:DIR or postgres:URL, got {spec:?}")
}

async fn participant(
    common: TxnCommon,
    name: String,
    resource: Option<String>,
    prepare_delay: Option<Duration>,
) -> Result<i32> {
    let resource = open_resource(&name, resource, prepare_delay).await?;
    let session = common.session().await?;
    let options = TxnOptions::with_root(&common.root);
    let observer: Observer = Arc::new(|name, event| match event {
        ParticipantEvent::Started { in_doubt } => println!("{name} STARTED in_doubt={in_doubt:?}"),
        ParticipantEvent::Ready => println!("{name} READY"),
        ParticipantEvent::Prepare { txid } => println!("{name} PREPARE {txid}"),
        ParticipantEvent::Voted { txid, vote } => {
            println!("{name} VOTE {txid} {}", vote_word(vote))
        }
        ParticipantEvent::Applied { txid, decision } => {
            println!("{name} APPLIED {txid} {}", decision.word())
        }
        ParticipantEvent::Trouble { txid, error } => {
            println!("{name} TROUBLE {} {error}", txid.as_deref().unwrap_or("-"))
        }
    });
    let participant = Participant::start(&session, &options, &name, resource, Some(observer))?;
    tokio::select! {
        result = participant.join() => {
            result?;
            Ok(0)
        }
        _ = tokio::signal::ctrl_c() => Ok(0),
    }
}

fn recovery_printer() -> RecoveryObserver {
    Arc::new(|event| match event {
        RecoveryEvent::Leading => println!("RECOVER LEADING"),
        RecoveryEvent::Resuming { txid, coordinator } => {
            println!("RECOVER RESUME {txid} from {coordinator}")
        }
        RecoveryEvent::Decided { txid, decision, by } => {
            println!("RECOVER DECISION {txid} {} by {by}", decision.word())
        }
    })
}

#[allow(clippy::too_many_arguments)]
async fn coordinator(
    common: TxnCommon,
    options: TxnOptions,
    participants: Vec<String>,
    payload: String,
    count: u32,
    no_recover: bool,
    stay: bool,
    id: Option<String>,
) -> Result<i32> {
    let session = common.session().await?;
    let id = id.unwrap_or_else(|| format!("c-{}", std::process::id()));
    let _recoverer = if no_recover {
        None
    } else {
        Some(Recoverer::start(
            &session,
            &options,
            &format!("r-{id}"),
            Some(recovery_printer()),
        )?)
    };
    let mut failures = 0;
    if !participants.is_empty() {
        let coordinator = Coordinator::with_id(&session, options, &id)?;
        for _ in 0..count {
            let txn = coordinator.begin(&participants, payload.as_bytes())?;
            let txid = txn.txid().to_string();
            println!("COORD BEGIN {txid}");
            let started = Instant::now();
            match txn.commit().await? {
                // The time is until commit() returned: decided, and acknowledged by everyone
                // (or the ack timeout passed).
                Outcome::Committed => println!(
                    "COORD DECISION {txid} commit {:.1}ms",
                    started.elapsed().as_secs_f64() * 1e3
                ),
                Outcome::Aborted(reason) => {
                    failures += 1;
                    println!(
                        "COORD DECISION {txid} abort {:.1}ms ({reason})",
                        started.elapsed().as_secs_f64() * 1e3
                    )
                }
            }
        }
    }
    if participants.is_empty() || stay {
        if no_recover {
            bail!("nothing to do: no --participants and --no-recover");
        }
        tokio::signal::ctrl_c().await?;
    }
    Ok(if failures > 0 { 1 } else { 0 })
}

async fn list(common: TxnCommon) -> Result<i32> {
    let session = common.session().await?;
    let layout = Layout::new(&common.root)?;
    let members = inspect::members(&session, &layout).await?;
    println!("members: {}", members.join(", "));
    let txns = inspect::list(&session, &layout).await?;
    println!(
        "{:<40} {:<10} {:<8} {:<18} unacked",
        "txid", "phase", "decision", "votes"
    );
    for t in txns {
        let phase = match t.phase() {
            Phase::InFlight => "in-flight",
            Phase::InDoubt => "in-doubt",
            Phase::Done => "done",
        };
        let decision = t.decision.as_ref().map_or("-", |(d, _)| d.word());
        let votes: Vec<String> = t
            .votes
            .iter()
            .map(|(p, v)| format!("{p}={}", if *v == Vote::Yes { "yes" } else { "no" }))
            .collect();
        let unacked: Vec<String> = t.unacked().into_iter().collect();
        println!(
            "{:<40} {:<10} {:<8} {:<18} {}",
            t.txid,
            phase,
            decision,
            votes.join(","),
            unacked.join(",")
        );
    }
    Ok(0)
}

async fn show(common: TxnCommon, txid: String) -> Result<i32> {
    let session = common.session().await?;
    let layout = Layout::new(&common.root)?;
    let t = inspect::show(&session, &layout, &txid).await?;
    println!("txid:         {}", t.txid);
    println!("coordinator:  {}", t.header.coordinator);
    println!(
        "participants: {}",
        t.header
            .participants
            .iter()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "deadline_ms:  {} (created {})",
        t.header.deadline_ms, t.header.created_ms
    );
    println!("payload:      {}", String::from_utf8_lossy(&t.payload));
    for (p, v) in &t.votes {
        println!("vote:         {p} = {}", vote_word(v));
    }
    match &t.decision {
        Some((d, by)) => println!("decision:     {d:?} by {by}"),
        None => println!("decision:     (none yet)"),
    }
    println!(
        "acks:         {}",
        t.acks.iter().cloned().collect::<Vec<_>>().join(", ")
    );
    Ok(0)
}

// ------------------------------------------------------------------------------------------
// The demo.

/// A line printed by a child process, with when it was read.
struct Line {
    who: String,
    text: String,
    at: Instant,
}

struct Procs {
    server: String,
    root: String,
    dir: tempfile::TempDir,
    children: BTreeMap<String, Child>,
    lines_tx: mpsc::UnboundedSender<Line>,
    lines: mpsc::UnboundedReceiver<Line>,
    pending: Vec<Line>,
}

impl Procs {
    fn new(server: &str, root: &str) -> Result<Procs> {
        let (lines_tx, lines) = mpsc::unbounded_channel();
        Ok(Procs {
            server: server.to_string(),
            root: root.to_string(),
            dir: tempfile::tempdir()?,
            children: BTreeMap::new(),
            lines_tx,
            lines,
            pending: Vec::new(),
        })
    }

    fn spawn(&mut self, who: &str, args: &[String]) -> Result<()> {
        // A restarted process: what its previous incarnation printed is history.
        self.pending.retain(|line| line.who != who);
        let exe = std::env::current_exe().context("current_exe")?;
        let mut child = Command::new(exe)
            .arg("txn")
            .args(args)
            .args(["--server", &self.server, "--root", &self.root])
            .stdout(Stdio::piped())
            // ZKIT_TXN_DEMO_VERBOSE=1 shows the children's logs (with RUST_LOG) for debugging.
            .stderr(if std::env::var_os("ZKIT_TXN_DEMO_VERBOSE").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("spawn {who}"))?;
        let stdout = child.stdout.take().context("child stdout")?;
        let tx = self.lines_tx.clone();
        let name = who.to_string();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(text)) = lines.next_line().await {
                let _ = tx.send(Line {
                    who: name.clone(),
                    text,
                    at: Instant::now(),
                });
            }
        });
        self.children.insert(who.to_string(), child);
        Ok(())
    }

    fn participant_dir(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }

    fn spawn_participant(&mut self, name: &str, prepare_delay: Option<&str>) -> Result<()> {
        let mut args = vec![
            "participant".to_string(),
            "--name".into(),
            name.into(),
            "--resource".into(),
            format!("file:{}", self.participant_dir(name).display()),
        ];
        if let Some(delay) = prepare_delay {
            args.extend(["--prepare-delay".into(), delay.into()]);
        }
        self.spawn(name, &args)
    }

    async fn kill9(&mut self, who: &str) -> Result<()> {
        if let Some(mut child) = self.children.remove(who) {
            child.start_kill()?;
            child.wait().await?;
        }
        Ok(())
    }

    /// Waits (bounded) for a line from `who` containing every word of `words`; returns when it
    /// was read and its text. Lines read while waiting for something else are kept for later
    /// `expect`s (a process's lines are searched in order).
    async fn expect(
        &mut self,
        who: &str,
        words: &[&str],
        limit: Duration,
    ) -> Result<(Instant, String)> {
        let hit = |line: &Line| line.who == who && words.iter().all(|w| line.text.contains(w));
        if let Some(i) = self.pending.iter().position(hit) {
            let line = self.pending.remove(i);
            return Ok((line.at, line.text));
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.recv())
                .await
                .map_err(|_| anyhow::anyhow!("timed out waiting for {who}: {words:?}"))?
                .context("child output ended")?;
            if hit(&line) {
                return Ok((line.at, line.text));
            }
            self.pending.push(line);
        }
    }

    fn state(&self, name: &str, txid: &str) -> Result<FileState> {
        Ok(FileResource::open(name, self.participant_dir(name))?.state(txid))
    }

    async fn stop_all(&mut self) {
        let names: Vec<String> = self.children.keys().cloned().collect();
        for name in names {
            let _ = self.kill9(&name).await;
        }
    }
}

const PS: [&str; 3] = ["P1", "P2", "P3"];

fn states_line(procs: &Procs, txid: &str) -> Result<String> {
    let mut parts = Vec::new();
    for p in PS {
        parts.push(format!("{p}={:?}", procs.state(p, txid)?));
    }
    Ok(parts.join(" "))
}

/// The `zkit txn demo` report: the four classic scenarios (20 all-yes transactions; one `no`;
/// a participant killed before voting; the coordinator killed before the decision) plus a
/// participant killed after voting yes that comes back, and an old coordinator racing the
/// recoverer for the decision. Participants, the recovering coordinator group and the crashing
/// coordinators are separate `zkit txn` processes (this executable); the demo kills them with
/// SIGKILL.
///
/// # Errors
/// When a process cannot be started or a scenario does not end as 2PC requires.
pub async fn demo_txn(server_addr: &str) -> Result<String> {
    let root = format!("/zkit-demo-txn-{}", std::process::id());
    let mut procs = Procs::new(server_addr, &root)?;
    let result = scenarios(&mut procs).await;
    procs.stop_all().await;
    result
}

async fn scenarios(procs: &mut Procs) -> Result<String> {
    let mut out = String::new();
    let wait = Duration::from_secs(30);
    let mut progress = Progress::new("zkit txn demo", 7);
    progress.step("starting 3 participant processes and a recoverer");
    for p in PS {
        procs.spawn_participant(p, None)?;
    }
    procs.spawn(
        "RECOVER",
        &[
            "coordinator".into(),
            "--recovery-grace".into(),
            "200ms".into(),
            "--id".into(),
            "group1".into(),
        ],
    )?;
    for p in PS {
        procs.expect(p, &["READY"], wait).await?;
    }
    procs.expect("RECOVER", &["LEADING"], wait).await?;
    let session = Session::connect(&procs.server, SessionOptions::default()).await?;
    let options = TxnOptions {
        vote_timeout: Duration::from_secs(2),
        ack_timeout: Duration::from_secs(2),
        ..TxnOptions::with_root(&procs.root)
    };
    let layout = Layout::new(&procs.root)?;
    let coordinator = Coordinator::new(&session, options.clone())?;

    // 1. 20 all-yes transactions.
    progress.step("1. 20 all-yes transactions");
    let mut took = Vec::new();
    let mut committed = 0;
    let mut last = String::new();
    for i in 0..20 {
        let txn = coordinator.begin(&PS, format!("transfer {i}").as_bytes())?;
        last = txn.txid().to_string();
        let started = Instant::now();
        if txn.commit().await? == Outcome::Committed {
            committed += 1;
        }
        took.push(started.elapsed().as_secs_f64() * 1e3);
    }
    took.sort_by(f64::total_cmp);
    let all_applied = PS
        .iter()
        .all(|p| procs.state(p, &last).ok() == Some(FileState::Committed));
    writeln!(out, "1. normal commit (3 participant processes)")?;
    writeln!(
        out,
        "   {committed} of 20 committed and applied everywhere; prepare→all applied (ms): median {:.1}, min {:.1}, max {:.1}",
        took[10], took[0], took[19]
    )?;
    writeln!(
        out,
        "   last one: {} → {}",
        last,
        states_line(procs, &last)?
    )?;
    if committed != 20 || !all_applied {
        bail!("all-yes transactions did not all commit");
    }

    // 2. One "no" vote.
    progress.step("2. One \"no\" vote");
    let txn = coordinator.begin(&PS, b"veto=P2")?;
    let txid = txn.txid().to_string();
    let outcome = txn.commit().await?;
    writeln!(out, "2. one participant votes no")?;
    writeln!(out, "   decision: {outcome:?}")?;
    writeln!(out, "   applied: {}", states_line(procs, &txid)?)?;
    if !matches!(outcome, Outcome::Aborted(_)) {
        bail!("a no vote did not abort");
    }

    // 3. A participant killed (SIGKILL) before voting.
    progress.step("3. A participant killed (SIGKILL) before voting");
    procs.kill9("P3").await?;
    procs.spawn_participant("P3", Some("60s"))?;
    procs.expect("P3", &["READY"], wait).await?;
    let txn = coordinator.begin(&PS, b"x")?;
    let txid = txn.txid().to_string();
    let started = Instant::now();
    let commit = tokio::spawn(txn.commit());
    procs.expect("P3", &["PREPARE", &txid], wait).await?;
    procs.kill9("P3").await?;
    let (applied_at, _) = procs
        .expect("P1", &["APPLIED", &txid, "abort"], wait)
        .await?;
    let secs = applied_at.duration_since(started).as_secs_f64();
    let outcome = commit.await??;
    let returned = started.elapsed().as_secs_f64();
    let votes = inspect::show(&session, &layout, &txid)
        .await
        .map(|t| t.votes.keys().cloned().collect::<Vec<_>>());
    writeln!(
        out,
        "3. participant P3 killed -9 while preparing (before voting)"
    )?;
    writeln!(
        out,
        "   abort decided and applied by P1 after {secs:.1} s (vote timeout 2 s): {outcome:?}"
    )?;
    writeln!(out, "   commit() returned after {returned:.1} s (it also waited the 2 s ack timeout for dead P3)")?;
    writeln!(
        out,
        "   votes present: {:?}; applied: {}",
        votes.unwrap_or_default(),
        states_line(procs, &txid)?
    )?;
    if !matches!(outcome, Outcome::Aborted(_)) {
        bail!("a dead participant did not abort the transaction");
    }
    procs.spawn_participant("P3", None)?;
    procs
        .expect("P3", &["APPLIED", &txid, "abort"], wait)
        .await?;
    writeln!(
        out,
        "   P3 restarted and applied the abort: P3={:?}",
        procs.state("P3", &txid)?
    )?;
    procs.expect("P3", &["READY"], wait).await?;

    // 4. The coordinator killed before writing the decision: the recovering group commits.
    progress.step(
        "4. The coordinator killed before writing the decision: the recovering group commits",
    );
    procs.spawn(
        "COORD",
        &[
            "coordinator".into(),
            "--no-recover".into(),
            "--participants".into(),
            "P1,P2,P3".into(),
            "--payload".into(),
            "crash".into(),
            "--decision-delay".into(),
            "60s".into(),
            "--vote-timeout".into(),
            "60s".into(),
        ],
    )?;
    let (_, begin) = procs.expect("COORD", &["BEGIN"], wait).await?;
    let txid = begin.replace("COORD BEGIN ", "");
    for p in PS {
        procs.expect(p, &["VOTE", &txid, "yes"], wait).await?;
    }
    procs.kill9("COORD").await?;
    let killed = Instant::now();
    let (decided, _) = procs
        .expect("RECOVER", &["DECISION", &txid], Duration::from_secs(60))
        .await?;
    for p in PS {
        procs.expect(p, &["APPLIED", &txid, "commit"], wait).await?;
    }
    writeln!(
        out,
        "4. coordinator killed -9 after all votes, before the decision"
    )?;
    writeln!(
        out,
        "   recoverer (leader of the coordinator group) committed {:.1} s after the kill (the dead coordinator's session expired first)",
        decided.duration_since(killed).as_secs_f64()
    )?;
    writeln!(out, "   applied: {}", states_line(procs, &txid)?)?;

    // 5. A participant killed after voting yes comes back and applies the decision.
    progress.step("5. A participant killed after voting yes comes back and applies the decision");
    let slow = Coordinator::new(
        &session,
        TxnOptions {
            decision_delay: Duration::from_millis(500),
            ack_timeout: Duration::from_millis(500),
            ..options.clone()
        },
    )?;
    let txn = slow.begin(&PS, b"y")?;
    let txid = txn.txid().to_string();
    let commit = tokio::spawn(txn.commit());
    procs.expect("P3", &["VOTE", &txid, "yes"], wait).await?;
    procs.kill9("P3").await?;
    let outcome = commit.await??;
    let in_doubt = procs.state("P3", &txid)?;
    procs.spawn_participant("P3", None)?;
    procs.expect("P3", &["STARTED", &txid], wait).await?;
    procs
        .expect("P3", &["APPLIED", &txid, "commit"], wait)
        .await?;
    writeln!(
        out,
        "5. participant P3 killed -9 after voting yes, restarted"
    )?;
    writeln!(
        out,
        "   decision: {outcome:?}; P3 while down: {in_doubt:?} (in doubt)"
    )?;
    writeln!(
        out,
        "   P3 restarted, found it in doubt, applied the decision: {}",
        states_line(procs, &txid)?
    )?;
    procs.expect("P3", &["READY"], wait).await?;

    // 6. The old coordinator and the recoverer race for the decision.
    progress.step("6. The old coordinator and the recoverer race for the decision");
    procs.spawn(
        "OLD",
        &[
            "coordinator".into(),
            "--no-recover".into(),
            "--participants".into(),
            "P1,P2,P3".into(),
            "--payload".into(),
            "race".into(),
            "--vote-timeout".into(),
            "300ms".into(),
            "--decision-delay".into(),
            "1500ms".into(),
            "--id".into(),
            "old".into(),
        ],
    )?;
    let (_, begin) = procs.expect("OLD", &["BEGIN"], wait).await?;
    let txid = begin.replace("COORD BEGIN ", "");
    let (_, recover_line) = procs.expect("RECOVER", &["DECISION", &txid], wait).await?;
    let (_, old_line) = procs.expect("OLD", &["DECISION", &txid], wait).await?;
    let stands = match session.client().get_data(&layout.decision(&txid)).await {
        Ok((data, _)) => String::from_utf8_lossy(&data).into_owned(),
        Err(_) => "(collected)".into(),
    };
    writeln!(out, "6. old coordinator (stuck before deciding) vs recoverer (took over after deadline + grace)")?;
    writeln!(out, "   recoverer: {recover_line}")?;
    writeln!(out, "   old coordinator: {old_line}")?;
    writeln!(
        out,
        "   decision node: {stands}; applied: {}",
        states_line(procs, &txid)?
    )?;

    writeln!(out)?;
    writeln!(out, "   {:<58} result", "scenario")?;
    for (name, result) in [
        (
            "20 all-yes transactions",
            format!("{committed}/20 commit, median {:.1} ms", took[10]),
        ),
        ("one no vote", "abort, applied by all".into()),
        (
            "participant killed before voting",
            format!("abort after {secs:.1} s"),
        ),
        (
            "coordinator killed before decision",
            "recovery commits".into(),
        ),
        (
            "participant killed after yes, restarted",
            "applies commit".into(),
        ),
        (
            "old coordinator vs recoverer",
            "one decision, both agree".into(),
        ),
    ] {
        writeln!(out, "   {name:<58} {result}")?;
    }
    progress.finish();
    Ok(out)
}
