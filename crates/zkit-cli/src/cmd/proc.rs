//! `zkit proc`: HBase-style distributed two-phase procedures ([`zkit::procedure`]) from the shell.
//!
//! - `zkit proc member --name NAME --signature SIG --acquire CMD --inside CMD --cleanup CMD`
//!   serves as a member until SIGTERM/SIGINT/SIGHUP, which it passes on to the running phase
//!   commands, leaving only once they have exited (see [`super::child`]). Each command runs
//!   through `sh -c` with `ZKIT_PROC_SIGNATURE`, `ZKIT_PROC_INSTANCE`, `ZKIT_PROC_MEMBER`, `ZKIT_PROC_PHASE`
//!   (`acquire`, `inside`, `cleanup`) and `ZKIT_PROC_ARGS` set; cleanup also gets
//!   `ZKIT_PROC_ERROR` (who aborted and why) and `ZKIT_PROC_ABORT_SOURCE`. A non-zero exit of
//!   acquire or inside aborts the procedure with the command's last stderr line as message;
//!   inside's stdout is the member's result. Prints `member NAME ready` once registered.
//! - `zkit proc run SIG --instance ID --members a,b,c [--args …] [--timeout 60s]` prints one
//!   `member<TAB>result` line per member, or the abort reason on stderr and exits with
//!   [`EXIT_ABORTED`].
//! - `zkit proc recover SIG` resolves instances left behind by a crashed coordinator.
//!
//! [`demo_proc`] is the `zkit demo` section.

use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::io::AsyncBufReadExt;
use zkit::procedure::{
    AbortReason, Coordinator, Member, ProcedureError, Subprocedure, SubprocedureFactory,
    DEFAULT_BASE,
};
use zkit::{Session, SessionOptions};

use super::child::{exit_code, send_signal, CmdGroup, Signals};
use super::conn::{human_duration, ConnArgs};

/// The boxed future type of [`Subprocedure`]'s methods.
type BoxedFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Exit code of `zkit proc run` when the procedure was aborted.
pub const EXIT_ABORTED: i32 = 2;

/// Connection options shared by the `proc` subcommands.
#[derive(Debug, Clone, clap::Args)]
pub struct ProcConnection {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// Base znode of procedures.
    #[arg(long, default_value = DEFAULT_BASE)]
    pub base: String,
}

/// `zkit proc …`.
#[derive(Debug, clap::Subcommand)]
pub enum ProcCommand {
    /// Serve as a procedure member, running shell commands for each phase.
    Member(MemberArgs),
    /// Run a procedure instance as its coordinator and print each member's result.
    Run(RunArgs),
    /// Resolve instances whose coordinator died (finish released ones, abort the rest).
    Recover(RecoverArgs),
}

/// Arguments of `zkit proc member`.
#[derive(Debug, clap::Args)]
pub struct MemberArgs {
    #[command(flatten)]
    conn: ProcConnection,
    /// Member name (unique among live members of the signature).
    #[arg(long)]
    name: String,
    /// Procedure signature to serve.
    #[arg(long)]
    signature: String,
    /// Shell command of the acquire phase (default: succeed).
    #[arg(long, default_value = "true")]
    acquire: String,
    /// Shell command of the inside phase; its stdout is the result (default: empty result).
    #[arg(long, default_value = "true")]
    inside: String,
    /// Shell command run on abort (default: nothing).
    #[arg(long, default_value = "true")]
    cleanup: String,
    /// On SIGTERM/SIGINT/SIGHUP, how long running phase commands get to exit after the signal
    /// is passed on to them, before SIGKILL.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    grace: Duration,
}

/// Arguments of `zkit proc run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    conn: ProcConnection,
    /// Procedure signature.
    signature: String,
    /// Instance name (unique per signature while running).
    #[arg(long)]
    instance: String,
    /// Expected members, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    members: Vec<String>,
    /// Arguments handed to every member's acquire phase.
    #[arg(long, default_value = "")]
    args: String,
    /// Abort when the procedure has not completed within this time.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    timeout: Duration,
}

/// Arguments of `zkit proc recover`.
#[derive(Debug, clap::Args)]
pub struct RecoverArgs {
    #[command(flatten)]
    conn: ProcConnection,
    /// Procedure signature.
    signature: String,
}

/// Runs `zkit proc …`; returns the process exit code.
pub async fn run(command: ProcCommand) -> anyhow::Result<std::process::ExitCode> {
    run_exit_code(command).await.map(super::process_exit)
}

/// What [`run`] does, with the exit code as a number.
async fn run_exit_code(command: ProcCommand) -> anyhow::Result<i32> {
    match command {
        ProcCommand::Member(args) => member(args).await,
        ProcCommand::Run(args) => coordinate(args).await,
        ProcCommand::Recover(args) => recover(args).await,
    }
}

/// The session timeout of `zkit proc` unless `--session-timeout` says otherwise: short, so a
/// killed member is noticed quickly.
const PROC_SESSION_TIMEOUT: Duration = Duration::from_secs(4);

async fn connect(conn: &ProcConnection) -> anyhow::Result<Session> {
    conn.conn.session(PROC_SESSION_TIMEOUT).await
}

/// The three phase commands of `zkit proc member`, and the group they run in (so that a
/// signal to zkit reaches each running one, and the member leaves only after they exited).
struct ShellCommands {
    acquire: String,
    inside: String,
    cleanup: String,
    group: CmdGroup,
}

struct ShellFactory(Arc<ShellCommands>);

struct ShellSubprocedure {
    commands: Arc<ShellCommands>,
    signature: String,
    instance: String,
    member: String,
    args: String,
}

impl SubprocedureFactory for ShellFactory {
    fn build(&self, signature: &str, instance: &str, member: &str) -> Box<dyn Subprocedure> {
        Box::new(ShellSubprocedure {
            commands: Arc::clone(&self.0),
            signature: signature.to_string(),
            instance: instance.to_string(),
            member: member.to_string(),
            args: String::new(),
        })
    }
}

impl ShellSubprocedure {
    /// Runs one phase's command; `Ok(stdout)` on exit status 0.
    async fn phase(
        &self,
        phase: &str,
        command: &str,
        abort: Option<&AbortReason>,
    ) -> Result<Vec<u8>, String> {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(command)
            .env("ZKIT_PROC_SIGNATURE", &self.signature)
            .env("ZKIT_PROC_INSTANCE", &self.instance)
            .env("ZKIT_PROC_MEMBER", &self.member)
            .env("ZKIT_PROC_PHASE", phase)
            .env("ZKIT_PROC_ARGS", &self.args)
            .stdin(Stdio::null());
        if let Some(reason) = abort {
            cmd.env("ZKIT_PROC_ERROR", reason.to_string())
                .env("ZKIT_PROC_ABORT_SOURCE", &reason.source);
        }
        let output = match self.commands.group.run(cmd).await {
            Ok(Some(output)) => output,
            // As a stopped member runs no cleanup (MemberHandle::stop), it starts no command.
            Ok(None) => {
                return Err(format!(
                    "{phase} command not started: the member is stopping"
                ))
            }
            Err(err) => return Err(format!("{phase} command could not start: {err}")),
        };
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !stderr.is_empty() {
            eprint!("{stderr}");
        }
        if output.status.success() {
            Ok(output.stdout)
        } else {
            let last = stderr
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            Err(format!(
                "{phase} command failed ({}): {last}",
                output.status
            ))
        }
    }
}

impl Subprocedure for ShellSubprocedure {
    fn acquire_barrier(&mut self, args: Vec<u8>) -> BoxedFuture<'_, Result<(), String>> {
        Box::pin(async move {
            self.args = String::from_utf8_lossy(&args).into_owned();
            let command = self.commands.acquire.clone();
            self.phase("acquire", &command, None).await.map(drop)
        })
    }

    fn inside_barrier(&mut self) -> BoxedFuture<'_, Result<Vec<u8>, String>> {
        Box::pin(async move {
            let command = self.commands.inside.clone();
            self.phase("inside", &command, None).await
        })
    }

    fn cleanup(&mut self, reason: AbortReason) -> BoxedFuture<'_, ()> {
        Box::pin(async move {
            let command = self.commands.cleanup.clone();
            if let Err(err) = self.phase("cleanup", &command, Some(&reason)).await {
                eprintln!("zkit proc member {}: {err}", self.member);
            }
        })
    }
}

/// `zkit proc member`: serves until SIGTERM/SIGINT/SIGHUP. The signal is passed on to the
/// phase commands that are running; the member node is removed only once they have exited
/// (SIGKILL after `--grace`), so no coordinator aborts (and no other member cleans up) while
/// one of them still works. Exits with the status of the last of them to exit (128 + N if it
/// died of signal N), or 0 when none was running.
async fn member(args: MemberArgs) -> anyhow::Result<i32> {
    // First, so that no signal can kill zkit while a phase command runs (see `child`).
    let mut signals = Signals::install().context("installing signal handlers")?;
    let group = CmdGroup::new(args.grace, "zkit proc member");
    let session = tokio::select! {
        session = connect(&args.conn) => session?,
        _ = signals.recv() => return Ok(0),
    };
    let factory = ShellFactory(Arc::new(ShellCommands {
        acquire: args.acquire,
        inside: args.inside,
        cleanup: args.cleanup,
        group: group.clone(),
    }));
    let handle = tokio::select! {
        handle = Member::start(
            &session,
            &args.conn.base,
            &args.signature,
            &args.name,
            Arc::new(factory),
        ) => handle?,
        _ = signals.recv() => {
            session.close();
            return Ok(0);
        }
    };
    println!("member {} ready", args.name);
    std::io::stdout().flush()?;
    let received = signals.recv().await;
    let status = group.stop(received, &mut signals).await;
    handle.stop().await;
    session.close();
    Ok(status.map_or(0, exit_code))
}

async fn coordinate(args: RunArgs) -> anyhow::Result<i32> {
    let session = connect(&args.conn).await?;
    let coordinator = Coordinator::new(&session, &args.conn.base);
    let result = coordinator
        .run(
            &args.signature,
            &args.instance,
            args.args.as_bytes(),
            &args.members,
            args.timeout,
        )
        .await;
    session.close();
    match result {
        Ok(results) => {
            for (member, data) in results {
                println!("{member}\t{}", String::from_utf8_lossy(&data).trim_end());
            }
            Ok(0)
        }
        Err(err @ ProcedureError::Aborted { .. }) => {
            eprintln!("{err}");
            Ok(EXIT_ABORTED)
        }
        Err(err) => Err(err.into()),
    }
}

async fn recover(args: RecoverArgs) -> anyhow::Result<i32> {
    let session = connect(&args.conn).await?;
    let recovered = Coordinator::new(&session, &args.conn.base)
        .recover(&args.signature)
        .await?;
    session.close();
    if recovered.is_empty() {
        println!("nothing to recover");
    }
    for r in recovered {
        match r.outcome {
            Ok(results) => println!("{}\tcompleted ({} results)", r.instance, results.len()),
            Err(err) => println!("{}\t{err}", r.instance),
        }
    }
    Ok(0)
}

/// A spawned `zkit proc member` process; killed (SIGKILL) on drop so the demo leaks nothing.
struct MemberProcess {
    name: String,
    child: tokio::process::Child,
}

impl Drop for MemberProcess {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

async fn spawn_member(
    server: &str,
    base: &str,
    dir: &Path,
    name: &str,
) -> anyhow::Result<MemberProcess> {
    let dir = dir.display();
    // rs3 fails the "fail-*" instances once rs1 and rs2 have acquired (marker files), so that
    // all three have joined when the abort comes; it hangs in the "kill-*" instances, where the
    // demo kills it.
    let acquire = format!(
        "touch '{dir}/acquired-'\"$ZKIT_PROC_INSTANCE-$ZKIT_PROC_MEMBER\"; \
         if [ \"$ZKIT_PROC_MEMBER\" = rs3 ]; then case \"$ZKIT_PROC_INSTANCE\" in \
           fail-*) i=0; while [ ! -e '{dir}/acquired-'\"$ZKIT_PROC_INSTANCE\"-rs1 ] || \
                   [ ! -e '{dir}/acquired-'\"$ZKIT_PROC_INSTANCE\"-rs2 ]; do \
                   i=$((i+1)); [ $i -gt 200 ] && break; sleep 0.05; done; \
                   echo 'rs3: no space left on device' >&2; exit 1;; \
           kill-*) exec sleep 5;; esac; fi"
    );
    let inside = "echo \"flushed $ZKIT_PROC_ARGS on $ZKIT_PROC_MEMBER\"".to_string();
    let cleanup = format!(
        "echo \"$ZKIT_PROC_MEMBER $ZKIT_PROC_INSTANCE $ZKIT_PROC_ERROR\" >> '{dir}/cleanup.log'"
    );
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .args([
            "proc",
            "member",
            "--server",
            server,
            "--base",
            base,
            "--session-timeout",
            "2s",
        ])
        .args(["--signature", "flush", "--name", name])
        .args([
            "--acquire",
            &acquire,
            "--inside",
            &inside,
            "--cleanup",
            &cleanup,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("spawning zkit proc member")?;
    let stdout = child.stdout.take().context("member stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(15), lines.next_line())
        .await
        .context("member did not start in 15 s")??;
    anyhow::ensure!(
        ready.as_deref() == Some(&format!("member {name} ready")),
        "member {name} said {ready:?}"
    );
    Ok(MemberProcess {
        name: name.to_string(),
        child,
    })
}

/// Lines of `cleanup.log` that mention `instance`.
fn cleanups(dir: &Path, instance: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join("cleanup.log"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.split(' ').nth(1) == Some(instance))
        .map(str::to_string)
        .collect()
}

/// Waits (bounded) until `n` cleanup lines for `instance` are there. Cleanups of members that
/// joined are done when `run` returns (acknowledged aborts); a member still inside its acquire
/// command cleans up when that command ends.
async fn wait_cleanups(dir: &Path, instance: &str, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let lines = cleanups(dir, instance);
        if lines.len() >= n || Instant::now() > deadline {
            return lines;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The `zkit demo` section: three `zkit proc member` processes run a "flush"-like procedure;
/// then one fails in acquire and all three clean up; then one is killed (SIGKILL) and the
/// procedure aborts as soon as its session expires, long before the 60 s timeout.
pub async fn demo_proc(server_addr: &str) -> anyhow::Result<String> {
    let mut report = String::new();
    let dir: PathBuf = std::env::temp_dir().join(format!("zkit-demo-proc-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let base = format!("/zkit-demo/procedure-{}", std::process::id());
    let result = demo_steps(server_addr, &base, &dir, &mut report).await;
    let _ = std::fs::remove_dir_all(&dir);
    if let Ok(session) = Session::connect(server_addr, SessionOptions::default()).await {
        let _ = delete_tree(&session.client(), &base).await;
        session.close();
    }
    result.map(|()| report)
}

async fn demo_steps(
    server: &str,
    base: &str,
    dir: &Path,
    report: &mut String,
) -> anyhow::Result<()> {
    use std::fmt::Write as _;
    let mut members = Vec::new();
    for name in ["rs1", "rs2", "rs3"] {
        members.push(spawn_member(server, base, dir, name).await?);
    }
    let names: Vec<String> = members.iter().map(|m| m.name.clone()).collect();
    writeln!(
        report,
        "procedure: 3 member processes ({}) serve signature 'flush'",
        names.join(", ")
    )?;
    let session = Session::connect(server, SessionOptions::default()).await?;
    let coordinator = Coordinator::new(&session, base);
    let timeout = Duration::from_secs(60);

    let start = Instant::now();
    let results = coordinator
        .run("flush", "flush-1", b"table=orders", &names, timeout)
        .await
        .context("flush-1 should complete")?;
    writeln!(
        report,
        "  flush-1 completed in {}:",
        human_duration(start.elapsed())
    )?;
    for (member, data) in &results {
        writeln!(
            report,
            "    {member}: {}",
            String::from_utf8_lossy(data).trim_end()
        )?;
    }

    let err = coordinator
        .run("flush", "fail-1", b"table=orders", &names, timeout)
        .await
        .err()
        .context("fail-1 should abort")?;
    writeln!(report, "  fail-1 aborted: {err}")?;
    let lines = wait_cleanups(dir, "fail-1", 3).await;
    writeln!(report, "    cleanup ran on {} of 3 members:", lines.len())?;
    for line in &lines {
        writeln!(report, "      {line}")?;
    }

    let run = {
        let (coordinator, names) = (coordinator.clone(), names.clone());
        tokio::spawn(async move {
            let start = Instant::now();
            let result = coordinator
                .run("flush", "kill-1", b"table=orders", &names, timeout)
                .await;
            (result, start.elapsed())
        })
    };
    let deadline = Instant::now() + Duration::from_secs(15);
    while !["rs1", "rs2", "rs3"]
        .iter()
        .all(|m| dir.join(format!("acquired-kill-1-{m}")).exists())
    {
        anyhow::ensure!(Instant::now() < deadline, "members did not start kill-1");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let killed = Instant::now();
    if let Some(rs3) = members.iter_mut().find(|m| m.name == "rs3") {
        rs3.child.start_kill()?;
        let _ = rs3.child.wait().await;
    }
    let (result, _) = run.await?;
    let abort_after = killed.elapsed();
    match result {
        Err(err) => writeln!(
            report,
            "  kill-1: rs3 killed with SIGKILL; aborted {} later (timeout {}): {err}",
            human_duration(abort_after),
            human_duration(timeout)
        )?,
        Ok(_) => anyhow::bail!("kill-1 completed although rs3 was killed"),
    }
    let lines = wait_cleanups(dir, "kill-1", 2).await;
    writeln!(
        report,
        "    cleanup ran on {} surviving members",
        lines.len()
    )?;
    session.close();
    for member in &mut members {
        if let Some(pid) = member.child.id() {
            // SIGTERM: the member stops and removes its node. The pid is our own unreaped child's.
            let _ = send_signal(pid, libc::SIGTERM);
        }
        let _ = tokio::time::timeout(Duration::from_secs(5), member.child.wait()).await;
    }
    Ok(())
}

/// Deletes `path` and everything under it (for the demo's base path).
async fn delete_tree(client: &zkit_client::Client, path: &str) -> anyhow::Result<()> {
    let mut stack = vec![path.to_string()];
    let mut order = Vec::new();
    while let Some(p) = stack.pop() {
        match client.list_children(&p).await {
            Ok(children) => {
                stack.extend(children.into_iter().map(|c| format!("{p}/{c}")));
                order.push(p);
            }
            Err(zkit_client::Error::NoNode) => {}
            Err(err) => return Err(err.into()),
        }
    }
    for p in order.into_iter().rev() {
        match client.delete(&p, None).await {
            Ok(()) | Err(zkit_client::Error::NoNode) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}
