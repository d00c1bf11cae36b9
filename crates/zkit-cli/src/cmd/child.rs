//! The user's command (CMD) under `zkit lock`, `zkit elect` and `zkit proc member`: how it is
//! started, how signals to zkit reach it, and how it is stopped. One module for the three, so
//! that they keep the one rule that makes them safe:
//!
//! **zkit gives up the lock (leadership, membership) only after CMD has exited.** A SIGTERM,
//! SIGINT or SIGHUP to zkit is passed on to CMD ([`Signals`]); zkit waits for CMD, at most
//! `--grace`, then SIGKILLs it and waits for that; only then does it release and exit, with
//! CMD's status ([`exit_code`]). Had zkit exited first, the lock would pass to the next holder
//! one session timeout later while CMD still ran: two holders at once.
//!
//! A zkit killed with SIGKILL runs no code, so it can neither wait for CMD nor stop it. For that
//! case every CMD is started with `PR_SET_PDEATHSIG` = SIGKILL ([`Child::spawn`]): the kernel
//! kills CMD when zkit dies. SIGKILL rather than SIGTERM because no one is left to enforce a
//! grace period: a CMD that ignored or took long over a SIGTERM would still be running when the
//! session expires and the next holder starts, which is the very overlap this prevents.
//! Limits: the signal reaches CMD itself, not processes CMD started (a shell script should
//! `exec` its last command); it is cleared when CMD execs a set-user-ID or privileged binary;
//! and nothing local helps when the whole machine stops (a VM paused, a laptop lid closed) while
//! the session expires elsewhere. For those, fence the resource with `ZKIT_FENCING_TOKEN`.
//!
//! CMD stays in zkit's process group, so that an interactive CMD keeps the terminal; a Ctrl-C in
//! that terminal therefore reaches CMD twice, from the terminal and passed on by zkit (programs
//! treat a second SIGINT while stopping as the first).
//!
//! What this module must not do: decide when CMD must stop (the callers own that: a lost lock,
//! a lost leadership, a signal), or touch ZooKeeper.
//!
//! All of the CLI's `unsafe` for processes (`kill(2)`, `prctl(2)` in `pre_exec`) is here.

use std::future::Future;
use std::io;
use std::process::ExitStatus;
use std::sync::{mpsc, Arc, OnceLock};
use std::time::Duration;

use tokio::process::Command;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

/// The signals zkit passes on to CMD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forwarded {
    /// SIGTERM (a service manager's stop, `kill PID`).
    Term,
    /// SIGINT (Ctrl-C).
    Int,
    /// SIGHUP (the terminal went away).
    Hup,
}

impl Forwarded {
    /// The signal's number.
    pub fn number(self) -> libc::c_int {
        match self {
            Forwarded::Term => libc::SIGTERM,
            Forwarded::Int => libc::SIGINT,
            Forwarded::Hup => libc::SIGHUP,
        }
    }

    /// The signal's name, as in `kill -l`.
    pub fn name(self) -> &'static str {
        match self {
            Forwarded::Term => "SIGTERM",
            Forwarded::Int => "SIGINT",
            Forwarded::Hup => "SIGHUP",
        }
    }

    /// The exit code of a process killed by this signal (128 + its number), which zkit uses when
    /// it was asked to stop while no CMD ran.
    pub fn exit_code(self) -> i32 {
        128 + self.number()
    }
}

/// zkit's handlers for SIGTERM, SIGINT and SIGHUP. Once installed, these signals no longer
/// kill zkit (for the rest of the process's life): every command must then [`Signals::recv`]
/// them in every state and stop as documented.
#[derive(Debug)]
pub struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    /// Installs the handlers. Call it first thing in the command, before connecting, so that no
    /// window is left in which a signal kills zkit with its CMD running.
    ///
    /// # Errors
    /// When a handler cannot be installed.
    pub fn install() -> io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal. Cancellation safe: a signal that arrives while no one is waiting is
    /// kept for the next call.
    pub async fn recv(&mut self) -> Forwarded {
        // `None` only when the runtime is shutting down: then no signal comes any more.
        tokio::select! {
            Some(()) = self.term.recv() => Forwarded::Term,
            Some(()) = self.int.recv() => Forwarded::Int,
            Some(()) = self.hup.recv() => Forwarded::Hup,
            else => std::future::pending().await,
        }
    }
}

/// The exit code that reports `status`: CMD's own code, or 128 + N when it died of signal N
/// (as shells report it).
pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// Sends `signal` to process `pid`. For processes that are our own unreaped children (tokio
/// reaps a child only inside `wait`), so the pid cannot have been given to another process.
///
/// # Errors
/// `kill(2)`'s error; ESRCH (already exited) is not one.
pub fn send_signal(pid: u32, signal: libc::c_int) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
    // SAFETY: kill(2) takes no pointers and has no memory-safety preconditions.
    if unsafe { libc::kill(pid, signal) } == 0 {
        return Ok(());
    }
    match io::Error::last_os_error() {
        err if err.raw_os_error() == Some(libc::ESRCH) => Ok(()),
        err => Err(err),
    }
}

/// A running CMD: a tokio child started by [`Child::spawn`], SIGKILLed if dropped (an error
/// path must not leave it running either) and by the kernel if zkit dies.
#[derive(Debug)]
pub struct Child {
    child: tokio::process::Child,
    label: &'static str,
}

/// How a CMD run by [`Child::run_until`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// CMD exited by itself.
    Exited(ExitStatus),
    /// zkit got this signal, passed it on, and CMD has exited (SIGKILLed after the grace if it
    /// did not exit in time).
    Signalled(Forwarded, ExitStatus),
    /// The caller's stop condition came (a lost lock or leadership); CMD was sent SIGTERM,
    /// then SIGKILL after the grace, and has exited.
    Stopped(ExitStatus),
}

impl Child {
    /// Starts `command` as a CMD: `kill_on_drop`, and `PR_SET_PDEATHSIG` = SIGKILL (see the
    /// module docs). `label` prefixes zkit's messages about it (`"zkit lock"`).
    ///
    /// The fork happens on one thread kept for that, which lives as long as zkit: the kernel
    /// sends the parent-death signal when the *thread* that forked exits (prctl(2)), and
    /// tokio's threads do not all live that long (blocking-pool threads end after 10 s idle,
    /// and `block_in_place` moves a worker's scheduler to a new thread).
    ///
    /// # Errors
    /// When CMD cannot be started (not found, not executable, fork failed).
    pub async fn spawn(mut command: Command, label: &'static str) -> io::Result<Child> {
        command.kill_on_drop(true);
        let parent = std::process::id();
        // SAFETY: the closure runs in the forked child before exec; it only makes the
        // async-signal-safe calls prctl(2) and getppid(2) and allocates nothing (io::Error's
        // last_os_error and from_raw_os_error do not allocate).
        unsafe {
            command.pre_exec(move || {
                // prctl is variadic and the kernel reads unsigned longs: pass them at full width.
                let (sigkill, unused): (libc::c_ulong, libc::c_ulong) = (libc::SIGKILL as _, 0);
                if libc::prctl(libc::PR_SET_PDEATHSIG, sigkill, unused, unused, unused) == -1 {
                    return Err(io::Error::last_os_error());
                }
                // zkit may have died between the fork and the prctl: then the signal will never
                // come (we have a new parent already), so do not start CMD at all.
                if u32::try_from(libc::getppid()).ok() != Some(parent) {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        let child = spawn_on_forking_thread(command).await?;
        Ok(Child { child, label })
    }

    /// Takes CMD's stdout pipe (when it was started with `Stdio::piped()`).
    pub fn take_stdout(&mut self) -> Option<tokio::process::ChildStdout> {
        self.child.stdout.take()
    }

    /// Takes CMD's stderr pipe (when it was started with `Stdio::piped()`).
    pub fn take_stderr(&mut self) -> Option<tokio::process::ChildStderr> {
        self.child.stderr.take()
    }

    /// Sends `signal` to CMD; nothing when it has exited already.
    pub fn signal(&self, signal: libc::c_int) {
        if let Some(pid) = self.child.id() {
            if let Err(err) = send_signal(pid, signal) {
                eprintln!("{}: cannot signal CMD (pid {pid}): {err}", self.label);
            }
        }
    }

    /// Waits for CMD to exit by itself.
    ///
    /// # Errors
    /// When waiting fails.
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// Runs CMD until it exits, a signal comes to zkit, or `stop_when` completes; in the last
    /// two cases stops CMD ([`Child::stop`]) and returns once it has exited.
    ///
    /// # Errors
    /// When waiting for CMD fails.
    pub async fn run_until(
        &mut self,
        signals: &mut Signals,
        grace: Duration,
        stop_when: impl Future<Output = ()>,
    ) -> io::Result<Ended> {
        tokio::select! {
            status = self.child.wait() => Ok(Ended::Exited(status?)),
            received = signals.recv() => {
                eprintln!(
                    "{}: got {}; passing it on to CMD and waiting for it (at most {grace:?})",
                    self.label,
                    received.name()
                );
                let status = self.stop(received.number(), signals, grace).await?;
                Ok(Ended::Signalled(received, status))
            }
            () = stop_when => Ok(Ended::Stopped(self.stop(libc::SIGTERM, signals, grace).await?)),
        }
    }

    /// Sends `first` to CMD and waits for it to exit; after `grace`, SIGKILL. Signals zkit gets
    /// meanwhile are passed on too (a second Ctrl-C reaches CMD). Returns CMD's status.
    ///
    /// # Errors
    /// When waiting for CMD fails.
    pub async fn stop(
        &mut self,
        first: libc::c_int,
        signals: &mut Signals,
        grace: Duration,
    ) -> io::Result<ExitStatus> {
        self.signal(first);
        let deadline = Instant::now() + grace;
        loop {
            tokio::select! {
                status = self.child.wait() => return status,
                received = signals.recv() => self.signal(received.number()),
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        self.kill_after_grace(grace).await
    }

    async fn kill_after_grace(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        eprintln!(
            "{}: CMD did not exit within {grace:?} (--grace); SIGKILL",
            self.label
        );
        // InvalidInput: it exited just now; wait() below collects it either way.
        match self.child.start_kill() {
            Ok(()) => {}
            Err(err) if err.kind() == io::ErrorKind::InvalidInput => {}
            Err(err) => return Err(err),
        }
        self.child.wait().await
    }
}

type SpawnRequest = (
    Command,
    tokio::runtime::Handle,
    oneshot::Sender<io::Result<tokio::process::Child>>,
);

/// Forks `command` on the forking thread (see [`Child::spawn`]), started on first use and never
/// ended; tokio's child reaping is registered with the caller's runtime.
async fn spawn_on_forking_thread(command: Command) -> io::Result<tokio::process::Child> {
    static FORKER: OnceLock<io::Result<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let forker = FORKER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("zkit-cmd-forker".into())
            .spawn(move || {
                for (mut command, runtime, reply) in rx {
                    let _entered = runtime.enter();
                    let _ = reply.send(command.spawn());
                }
            })
            .map(|_| tx)
    });
    let forker = forker
        .as_ref()
        .map_err(|err| io::Error::new(err.kind(), format!("starting the forking thread: {err}")))?;
    let (reply, spawned) = oneshot::channel();
    forker
        .send((command, tokio::runtime::Handle::current(), reply))
        .map_err(|_| io::Error::other("the forking thread is gone"))?;
    spawned
        .await
        .map_err(|_| io::Error::other("the forking thread is gone"))?
}

/// The CMDs of one zkit process that run concurrently (the phase commands of `zkit proc
/// member`): once a signal comes, [`CmdGroup::stop`] passes it on to each, waits until all have
/// exited (each SIGKILLed after the grace), and refuses to start new ones.
#[derive(Debug, Clone)]
pub struct CmdGroup {
    state: Arc<watch::Sender<GroupState>>,
    grace: Duration,
    label: &'static str,
}

#[derive(Debug, Default)]
struct GroupState {
    /// Signals received since stopping began (each is passed on to every CMD).
    received: Vec<Forwarded>,
    /// CMDs running now.
    running: usize,
    /// The status of the CMD that ended last after stopping began.
    last_status: Option<ExitStatus>,
}

/// What [`CmdGroup::run`] collected from a CMD.
#[derive(Debug)]
pub struct GroupOutput {
    /// Its exit status.
    pub status: ExitStatus,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything it wrote to stderr.
    pub stderr: Vec<u8>,
}

/// Decrements the running count when a CMD of the group ends, however its future ends
/// (including being dropped, when `kill_on_drop` has killed CMD).
struct Running<'a> {
    group: &'a CmdGroup,
    status: Option<ExitStatus>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let status = self.status;
        self.group.state.send_modify(|state| {
            state.running -= 1;
            if !state.received.is_empty() && status.is_some() {
                state.last_status = status;
            }
        });
    }
}

impl CmdGroup {
    /// An empty group; `grace` is the time between the signal and SIGKILL.
    pub fn new(grace: Duration, label: &'static str) -> CmdGroup {
        CmdGroup {
            state: Arc::new(watch::Sender::new(GroupState::default())),
            grace,
            label,
        }
    }

    /// Runs `command` (piped stdout and stderr, collected) as a member of the group.
    /// `Ok(None)` when the group is stopping: the command was not started.
    ///
    /// # Errors
    /// When CMD cannot be started or waited for.
    pub async fn run(&self, mut command: Command) -> io::Result<Option<GroupOutput>> {
        use tokio::io::AsyncReadExt as _;
        let mut registered = false;
        self.state.send_if_modified(|state| {
            registered = state.received.is_empty();
            if registered {
                state.running += 1;
            }
            registered
        });
        if !registered {
            return Ok(None);
        }
        let mut running = Running {
            group: self,
            status: None,
        };
        command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = Child::spawn(command, self.label).await?;
        let (mut out, mut err) = (child.take_stdout(), child.take_stderr());
        let read_out = async {
            let mut buf = Vec::new();
            if let Some(out) = out.as_mut() {
                out.read_to_end(&mut buf).await?;
            }
            Ok::<_, io::Error>(buf)
        };
        let read_err = async {
            let mut buf = Vec::new();
            if let Some(err) = err.as_mut() {
                err.read_to_end(&mut buf).await?;
            }
            Ok::<_, io::Error>(buf)
        };
        let (stdout, stderr, status) =
            tokio::try_join!(read_out, read_err, self.supervise(&mut child))?;
        running.status = Some(status);
        Ok(Some(GroupOutput {
            status,
            stdout,
            stderr,
        }))
    }

    /// Waits for `child`, passing on every signal the group receives; SIGKILL `grace` after
    /// the first.
    async fn supervise(&self, child: &mut Child) -> io::Result<ExitStatus> {
        let mut changes = self.state.subscribe();
        let mut passed_on = 0;
        let mut deadline: Option<Instant> = None;
        loop {
            let pending: Vec<Forwarded> =
                changes.borrow_and_update().received[passed_on..].to_vec();
            for signal in pending {
                child.signal(signal.number());
                passed_on += 1;
                deadline.get_or_insert_with(|| Instant::now() + self.grace);
            }
            let kill_at = async {
                match deadline {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                status = child.wait() => return status,
                // The sender lives in `self`, so this cannot fail while we run.
                _ = changes.changed() => {}
                () = kill_at => return child.kill_after_grace(self.grace).await,
            }
        }
    }

    /// Stops the group on `signal`: passes it on to every running CMD, refuses new ones, and
    /// returns once none runs, with the status of the CMD that ended last (`None` when none
    /// was running). Further signals from `signals` are passed on as well meanwhile.
    pub async fn stop(&self, signal: Forwarded, signals: &mut Signals) -> Option<ExitStatus> {
        eprintln!(
            "{}: got {}; passing it on to running commands and waiting for them (at most {:?})",
            self.label,
            signal.name(),
            self.grace
        );
        self.state.send_modify(|state| state.received.push(signal));
        let mut changes = self.state.subscribe();
        loop {
            {
                let state = changes.borrow_and_update();
                if state.running == 0 {
                    return state.last_status;
                }
            }
            tokio::select! {
                _ = changes.changed() => {}
                received = signals.recv() => {
                    self.state.send_modify(|state| state.received.push(received));
                }
            }
        }
    }
}
