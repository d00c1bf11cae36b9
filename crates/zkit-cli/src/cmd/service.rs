//! `zkit service`: service discovery from the shell, in curator-x-discovery's layout
//! (`/services/NAME/ID`, Curator's JSON; see `zkit::discovery`), so that Java services and
//! shell-started ones find each other.
//!
//! - `zkit service register NAME --port N [--address A] [--payload JSON] -- CMD ARGS…`:
//!   registers an instance (ephemeral: it goes with zkit's session, and is registered again on
//!   a new session after a session loss), runs CMD while it is registered, and unregisters
//!   once CMD has exited. CMD sees `ZKIT_SERVICE_NAME`, `ZKIT_SERVICE_ID`, `ZKIT_SERVICE_PATH`.
//!   SIGTERM, SIGINT and SIGHUP to zkit are passed on to CMD; zkit waits for CMD (SIGKILL after
//!   `--grace`), then unregisters and exits with CMD's status (128 + N when CMD died of signal
//!   N). Exit 126 when CMD cannot be started (the instance is unregistered first).
//! - `zkit service list NAME`: one line per instance, `ID ADDRESS:PORT PAYLOAD` (or Curator's
//!   JSON with `--json`).
//! - `zkit service watch NAME`: the instances, then `+ …` / `~ …` / `- ID` lines as they come,
//!   change and go, until interrupted.
//! - `zkit service names`: the services under the base path.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use zkit::discovery::{JsonInstanceSerializer, ServiceDiscovery, ServiceInstance, UriSpec};
use zkit::Session;

use super::child::{exit_code, Child, Ended, Signals};
use super::conn::{ConnArgs, DEFAULT_SESSION_TIMEOUT};

/// zkit's exit code when CMD could not be started.
pub const EXIT_CANNOT_EXECUTE: i32 = 126;

/// `zkit service …`.
#[derive(Debug, clap::Subcommand)]
pub enum ServiceCommand {
    /// Register an instance while CMD runs (unregistered when it exits).
    Register(RegisterArgs),
    /// List the instances of a service.
    List(ListArgs),
    /// Print a service's instances, then every change, until interrupted.
    Watch(ListArgs),
    /// List the services.
    Names(NamesArgs),
}

/// Where the services are.
#[derive(Debug, clap::Args)]
pub struct Connection {
    #[command(flatten)]
    pub conn: ConnArgs,
    /// The discovery base path (Curator's `basePath`).
    #[arg(long, default_value = zkit::discovery::DEFAULT_BASE_PATH)]
    pub base: String,
    /// The Java class named in object payloads' `@class` (what a Java `ServiceDiscovery` casts
    /// the payload to); "none" writes no type information.
    #[arg(long, default_value = zkit::discovery::instance::DEFAULT_PAYLOAD_CLASS)]
    pub payload_class: String,
}

/// Arguments of `zkit service register`.
#[derive(Debug, clap::Args)]
pub struct RegisterArgs {
    /// The service's name.
    pub name: String,
    /// The port clients connect to.
    #[arg(long)]
    pub port: Option<u16>,
    /// The TLS port.
    #[arg(long)]
    pub ssl_port: Option<u16>,
    /// The address clients connect to (default: this host's outgoing IP address, else
    /// 127.0.0.1).
    #[arg(long)]
    pub address: Option<String>,
    /// The instance id (default: a random UUID).
    #[arg(long)]
    pub id: Option<String>,
    /// The payload, as JSON.
    #[arg(long)]
    pub payload: Option<String>,
    /// A URI template (Curator's `UriSpec`), e.g. "{scheme}://{address}:{port}".
    #[arg(long)]
    pub uri_spec: Option<String>,
    /// Time between passing a signal on to CMD and SIGKILL.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub grace: Duration,
    #[command(flatten)]
    pub connection: Connection,
    /// The command to run while registered, after `--`.
    #[arg(last = true, required = true, num_args = 1..)]
    pub command: Vec<String>,
}

/// Arguments of `zkit service list` and `zkit service watch`.
#[derive(Debug, clap::Args)]
pub struct ListArgs {
    /// The service's name.
    pub name: String,
    /// Print Curator's JSON of each instance instead of `ID ADDRESS:PORT PAYLOAD`.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub connection: Connection,
}

/// Arguments of `zkit service names`.
#[derive(Debug, clap::Args)]
pub struct NamesArgs {
    #[command(flatten)]
    pub connection: Connection,
}

/// Runs `zkit service …`; returns the exit code.
///
/// # Errors
/// Connection and ZooKeeper errors, a payload that is not JSON, a CMD that cannot be waited for.
pub async fn run(command: ServiceCommand) -> anyhow::Result<std::process::ExitCode> {
    run_exit_code(command).await.map(super::process_exit)
}

/// What [`run`] does, with the exit code as a number.
async fn run_exit_code(command: ServiceCommand) -> anyhow::Result<i32> {
    match command {
        ServiceCommand::Register(args) => register(args).await,
        ServiceCommand::List(args) => list(args).await,
        ServiceCommand::Watch(args) => watch(args).await,
        ServiceCommand::Names(args) => names(args).await,
    }
}

fn serializer(connection: &Connection) -> JsonInstanceSerializer {
    let class = (connection.payload_class != "none").then_some(connection.payload_class.as_str());
    JsonInstanceSerializer::new().with_payload_class(class)
}

async fn connect(connection: &Connection) -> Result<(Session, ServiceDiscovery)> {
    let session = connection.conn.session(DEFAULT_SESSION_TIMEOUT).await?;
    let discovery =
        ServiceDiscovery::new(&session, &connection.base)?.with_serializer(serializer(connection));
    Ok((session, discovery))
}

/// This host's outgoing address: the local end of a UDP "connection" to a documentation
/// address (no packet is sent), else loopback.
fn local_address() -> String {
    let guess = std::net::UdpSocket::bind("0.0.0.0:0").and_then(|socket| {
        socket.connect("192.0.2.1:9")?;
        socket.local_addr()
    });
    match guess {
        Ok(addr) if !addr.ip().is_unspecified() => addr.ip().to_string(),
        _ => "127.0.0.1".to_string(),
    }
}

fn instance_of(args: &RegisterArgs) -> Result<ServiceInstance> {
    let mut instance = ServiceInstance::new(&args.name)
        .with_address(args.address.clone().unwrap_or_else(local_address));
    if let Some(id) = &args.id {
        instance = instance.with_id(id.clone());
    }
    if let Some(port) = args.port {
        instance = instance.with_port(port);
    }
    if let Some(port) = args.ssl_port {
        instance = instance.with_ssl_port(port);
    }
    if let Some(payload) = &args.payload {
        let value: serde_json::Value =
            serde_json::from_str(payload).context("--payload is not JSON")?;
        instance = instance.with_payload(value);
    }
    if let Some(spec) = &args.uri_spec {
        instance = instance.with_uri_spec(UriSpec::parse(spec)?);
    }
    Ok(instance)
}

async fn register(args: RegisterArgs) -> Result<i32> {
    // Before anything else: no window in which a signal kills zkit while CMD runs.
    let mut signals = Signals::install().context("installing signal handlers")?;
    let Some((program, rest)) = args.command.split_first() else {
        bail!("no command given after --");
    };
    let instance = instance_of(&args)?;
    let (session, discovery) = connect(&args.connection).await?;
    discovery
        .register(&instance)
        .await
        .with_context(|| format!("registering {} in {}", instance.name, args.connection.base))?;
    let path = discovery.path_for_instance(&instance.name, &instance.id);
    eprintln!("zkit service: registered {path}");
    let mut command = tokio::process::Command::new(program);
    command
        .args(rest)
        .env("ZKIT_SERVICE_NAME", &instance.name)
        .env("ZKIT_SERVICE_ID", &instance.id)
        .env("ZKIT_SERVICE_PATH", &path)
        .stdin(Stdio::inherit());
    // As `zkit lock` runs CMD: killed with zkit (PR_SET_PDEATHSIG), signals passed on, SIGKILL
    // after --grace.
    let code = match Child::spawn(command, "zkit service").await {
        Ok(mut child) => {
            let never = std::future::pending::<()>();
            match child
                .run_until(&mut signals, args.grace, never)
                .await
                .context("waiting for CMD")?
            {
                Ended::Exited(status) | Ended::Signalled(_, status) | Ended::Stopped(status) => {
                    exit_code(status)
                }
            }
        }
        Err(err) => {
            eprintln!("zkit service: cannot run {program}: {err}");
            EXIT_CANNOT_EXECUTE
        }
    };
    // Unregister only now that CMD has exited: never listed while not running, never running
    // unlisted for longer than a session loss.
    match tokio::time::timeout(
        args.connection
            .conn
            .session_timeout_or(DEFAULT_SESSION_TIMEOUT),
        discovery.unregister(&instance.id),
    )
    .await
    {
        Ok(Ok(())) => eprintln!("zkit service: unregistered {path}"),
        Ok(Err(err)) => {
            eprintln!("zkit service: unregister failed ({err}); the node goes with the session")
        }
        Err(_) => eprintln!("zkit service: unregister timed out; the node goes with the session"),
    }
    session.close();
    Ok(code)
}

fn line_of(instance: &ServiceInstance, json: bool, serializer: &JsonInstanceSerializer) -> String {
    if json {
        return serializer
            .serialize(instance)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
    }
    let address = instance.address.as_deref().unwrap_or("-");
    let port = instance
        .port
        .or(instance.ssl_port)
        .map(|p| p.to_string())
        .unwrap_or_else(|| "-".into());
    let payload = instance
        .payload
        .as_ref()
        .map(|p| p.to_string())
        .unwrap_or_else(|| "null".into());
    format!("{} {address}:{port} {payload}", instance.id)
}

async fn list(args: ListArgs) -> Result<i32> {
    let (session, discovery) = connect(&args.connection).await?;
    let serializer = serializer(&args.connection);
    for instance in discovery.query_for_instances(&args.name).await? {
        println!("{}", line_of(&instance, args.json, &serializer));
    }
    session.close();
    Ok(0)
}

async fn names(args: NamesArgs) -> Result<i32> {
    let (session, discovery) = connect(&args.connection).await?;
    for name in discovery.query_for_names().await? {
        println!("{name}");
    }
    session.close();
    Ok(0)
}

async fn watch(args: ListArgs) -> Result<i32> {
    let mut signals = Signals::install().context("installing signal handlers")?;
    let (session, discovery) = connect(&args.connection).await?;
    let serializer = serializer(&args.connection);
    let cache = discovery.cache(&args.name)?;
    let mut updates = cache.subscribe();
    let mut shown: BTreeMap<String, String> = BTreeMap::new();
    let mut initialized = false;
    loop {
        {
            let snapshot = updates.borrow_and_update().clone();
            if snapshot.initialized {
                let now: BTreeMap<String, String> = snapshot
                    .instances
                    .iter()
                    .map(|i| (i.id.clone(), line_of(i, args.json, &serializer)))
                    .collect();
                for (id, line) in &now {
                    match shown.get(id) {
                        None if !initialized => println!("{line}"),
                        None => println!("+ {line}"),
                        Some(old) if old != line => println!("~ {line}"),
                        Some(_) => {}
                    }
                }
                for id in shown.keys().filter(|id| !now.contains_key(*id)) {
                    println!("- {id}");
                }
                if !initialized {
                    // The initial listing is complete.
                    println!("--");
                }
                initialized = true;
                shown = now;
            }
        }
        tokio::select! {
            changed = updates.changed() => {
                if changed.is_err() {
                    break;
                }
            }
            _ = signals.recv() => break,
        }
    }
    session.close();
    Ok(0)
}
