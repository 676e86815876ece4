//! `electd`: runs one node, or (with a subcommand) asks one. See `electd --help` and docs/configuration.md.
//!
//! - `flags.rs`: the command line (config fields as flags and variables, the subcommands);
//! - `client.rs`: the client commands against one node or several (`leader`, `status`, `watch`,
//!   `resign`, `member`);
//! - `doctor/`: `electd doctor`, a health check of every member of a cluster (its checks, what it
//!   read, its report, and its check of refused peer requests);
//! - `run.rs`: `electd run`, the supervisor that runs a command only while its node claims;
//! - `join.rs`: `--join`, a new node asks the cluster's leader to add it;
//! - `addr.rs`: `--node` and `--endpoints`, where the nodes are;
//! - here: `completions` and `man`, from the command line's definition.

mod addr;
mod client;
mod contain;
mod doctor;
mod flags;
mod health;
mod join;
mod plan;
mod recover;
mod roles;
mod run;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use electd::config::ValidConfig;
use electd::serve;
use electd::Node;
use tokio_util::sync::CancellationToken;

use flags::{build_config, Cli, Command, LogFormat};

/// Exit code for a config error (bad file, bad field, bad flag).
const EXIT_CONFIG: u8 = 2;
/// Exit code for a failure at run time (state file unreadable, port taken, engine stopped).
const EXIT_RUNTIME: u8 = 1;

/// Runs a client command on a runtime of its own.
fn client_command(cmd: Command) -> ExitCode {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        match cmd {
            Command::Leader(a) => client::leader(a).await,
            Command::Status(a) => client::status(a).await,
            Command::Watch(a) => client::watch(a).await,
            Command::Resign(a) => client::resign(a).await,
            Command::Member(a) => client::member(a).await,
            Command::Roles(a) => roles::roles(a).await,
            Command::Doctor(a) => doctor::doctor(a).await,
            Command::Run(a) => run::run(a).await,
            Command::KeepGroup { group, cgroup } => run::keep_group(group, cgroup),
            Command::Completions { shell } => completions(shell),
            Command::Man { command } => man(&command),
        }
    })
}

/// `electd completions SHELL`: the completion script of the command line, on stdout.
fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut cli = Cli::command();
    if shell == clap_complete::Shell::Zsh {
        cli = zsh_value_names(cli);
    }
    // Into memory first: clap_complete panics on a write that fails (a closed pipe).
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cli, "electd", &mut script);
    print_out("completions", &script)
}

/// Writes `bytes` to stdout: exit 0, or 1 and why (a closed pipe, a full disk).
fn print_out(what: &str, bytes: &[u8]) -> ExitCode {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("electd {what}: cannot write to stdout: {e}");
            ExitCode::from(EXIT_RUNTIME)
        }
    }
}

/// zsh's `_arguments` reads `:` in a value's description as a separator, and clap_complete
/// writes value names as they are (`--listen IP:PORT`): escaped here, so that completing after
/// such a flag offers no stray action. (The escaped names are leaked: clap takes `&'static str`,
/// and the process prints the script and exits.)
fn zsh_value_names(cmd: clap::Command) -> clap::Command {
    cmd.mut_args(|a| {
        let names = a.get_value_names().unwrap_or_default();
        if !names.iter().any(|n| n.contains(':')) {
            return a;
        }
        let escaped: Vec<&'static str> = names
            .iter()
            .map(|n| &*Box::leak(n.replace(':', "\\:").into_boxed_str()))
            .collect();
        a.value_names(escaped)
    })
    .mut_subcommands(zsh_value_names)
}

/// `electd man [COMMAND…]`: the man page of electd, or of one of its commands, in roff, on
/// stdout. Exit 2 for a command that does not exist.
fn man(path: &[String]) -> ExitCode {
    let mut page = Cli::command().disable_help_subcommand(true);
    // Names the commands' pages electd-member-add and so on, as electd(1) cites them.
    page.build();
    for name in path {
        let Some(sub) = page
            .get_subcommands()
            .find(|c| c.get_name() == name && !c.is_hide_set())
        else {
            eprintln!(
                "electd man: {:?} has no command {name:?} (commands: {})",
                page.get_display_name().unwrap_or(page.get_name()),
                page.get_subcommands()
                    .filter(|c| !c.is_hide_set())
                    .map(|c| c.get_name())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            return ExitCode::from(EXIT_CONFIG);
        };
        page = sub.clone();
    }
    let mut roff = Vec::new();
    match clap_mangen::Man::new(page).render(&mut roff) {
        Ok(()) => print_out("man", &roff),
        Err(e) => {
            eprintln!("electd man: {e}");
            ExitCode::from(EXIT_RUNTIME)
        }
    }
}

/// The lab's deliberate flaws, `--lab-flaw NAME` (repeatable), taken out of the command line
/// before it is parsed: only the lab's `electd-flawed` binary (feature `flaws`) reads them;
/// `electd` has no such flag, whatever features its library was built with.
#[derive(Default)]
struct LabFlaws {
    flaws: electd::Flaws,
    /// The claim lease set to three follower leases after the config was validated: the
    /// claim outlives the election timeout (docs/safety.md's step 3 left out).
    #[cfg(feature = "flaws")]
    long_lease: bool,
    /// Node 5 aborts 3 s after its start (a panic the scenario did not cause): the chaos runner
    /// must fail the run and name it (issue 48, item 6).
    #[cfg(feature = "flaws")]
    abort_node_5: bool,
}

/// `--lab-flaw long-lease`: the claim lease set past its bound, after validation.
#[cfg(feature = "flaws")]
fn with_long_lease(cfg: ValidConfig, lab: &LabFlaws) -> ValidConfig {
    if !lab.long_lease {
        return cfg;
    }
    let mut broken = cfg.into_inner();
    broken.timing.lease_ms = 3 * broken.timing.follower_lease_ms;
    ValidConfig::unchecked(broken)
}

/// Without the feature the config stays as validated.
#[cfg(not(feature = "flaws"))]
fn with_long_lease(cfg: ValidConfig, _: &LabFlaws) -> ValidConfig {
    cfg
}

/// `--lab-flaw abort-node-5`: node 5 aborts 3 s after its start.
#[cfg(feature = "flaws")]
fn abort_node_5(cfg: &ValidConfig, lab: &LabFlaws) {
    if lab.abort_node_5 && cfg.id == 5 {
        std::thread::spawn(|| {
            std::thread::sleep(std::time::Duration::from_secs(3));
            eprintln!("electd-flawed: abort-node-5: aborting");
            std::process::abort();
        });
    }
}

/// Without the feature nothing aborts.
#[cfg(not(feature = "flaws"))]
fn abort_node_5(_: &ValidConfig, _: &LabFlaws) {}

/// `std::env::args` less the `--lab-flaw NAME` pairs, and the flaws they name.
#[cfg(feature = "flaws")]
fn lab_flaws() -> Result<(Vec<String>, LabFlaws), String> {
    let mut args = Vec::new();
    let mut lab = LabFlaws::default();
    let mut named = false;
    let mut it = std::env::args();
    while let Some(a) = it.next() {
        if env!("CARGO_BIN_NAME") != "electd-flawed" || a != "--lab-flaw" {
            args.push(a);
            continue;
        }
        named = true;
        let name = it.next();
        if let Some(f) = name.as_deref().and_then(electd::roles::RoleFlaw::named) {
            lab.flaws.role_flaw = Some(f);
            continue;
        }
        match name.as_deref() {
            Some("long-lease") => lab.long_lease = true,
            Some("vote-while-leading") => lab.flaws.vote_while_leading = true,
            Some("trust-new-incarnation") => lab.flaws.trust_new_incarnation = true,
            Some("record-between-probes") => lab.flaws.record_between_probes = true,
            Some("accept-unsigned-answers") => lab.flaws.accept_unsigned_answers = true,
            Some("release-from-ended-claim") => lab.flaws.release_from_ended_claim = true,
            Some("unlogged-incarnations") => lab.flaws.unlogged_incarnations = true,
            Some("handover-to-unconfirmed") => lab.flaws.handover_to_unconfirmed = true,
            Some("snapshot-keeps-incarnations") => lab.flaws.snapshot_keeps_incarnations = true,
            Some("count-learner-ack") => lab.flaws.count_learner_acks = true,
            Some("abort-node-5") => lab.abort_node_5 = true,
            other => return Err(format!("--lab-flaw: unknown flaw {other:?}")),
        }
    }
    if named {
        eprintln!("electd-flawed: running with deliberate flaws: never use this binary");
    }
    Ok((args, lab))
}

/// Without the feature there is no flaw to take.
#[cfg(not(feature = "flaws"))]
fn lab_flaws() -> Result<(Vec<String>, LabFlaws), String> {
    Ok((std::env::args().collect(), LabFlaws::default()))
}

fn main() -> ExitCode {
    let (args, lab) = match lab_flaws() {
        Ok(x) => x,
        Err(e) => {
            eprintln!("electd: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let matches = Cli::command().get_matches_from(args);
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Some(mut cmd) = cli.command.take() {
        if let Some(nodes) = cmd.nodes_mut() {
            if let Err(e) = nodes.settle(&matches) {
                // A usage error as clap's own, with the command's usage line.
                let mut cli = Cli::command();
                cli.build();
                let name = matches.subcommand_name().unwrap_or_default();
                match cli.find_subcommand_mut(name) {
                    Some(sub) => sub.error(clap::error::ErrorKind::ArgumentConflict, e),
                    None => cli.error(clap::error::ErrorKind::ArgumentConflict, e),
                }
                .exit();
            }
        }
        return client_command(cmd);
    }
    init_logs(&cli);
    let cfg = match build_config(&cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("electd: config error: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if cli.check_config {
        println!("config ok");
        return ExitCode::SUCCESS;
    }
    if cli.inspect_data_dir || cli.force_new_cluster {
        return recover::main(&cfg, cli.force_new_cluster, cli.term_above);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    abort_node_5(&cfg, &lab);
    match rt.block_on(run(with_long_lease(cfg, &lab), lab.flaws)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("electd: {e}");
            ExitCode::from(EXIT_RUNTIME)
        }
    }
}

/// Starts the node's log: filtered by `RUST_LOG`, else `--log` (`info` when the filter does
/// not parse), in `--log-format`.
fn init_logs(cli: &Cli) {
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| cli.log.clone());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false);
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
}

/// On every SIGHUP, reads the TLS files again (a reload that fails keeps what was loaded), or,
/// without TLS, says that there is nothing to read.
async fn reload_on_sighup(
    mut hangups: tokio::signal::unix::Signal,
    tls: Option<std::sync::Arc<electd::tls::Tls>>,
) {
    while hangups.recv().await.is_some() {
        match tls.as_ref().map(|t| t.reload()) {
            Some(Ok(())) => {
                tracing::info!("SIGHUP: TLS files read again; new connections use them")
            }
            Some(Err(e)) => {
                tracing::error!("SIGHUP: TLS files not reloaded, the old ones stay: {e}")
            }
            None => tracing::info!("SIGHUP: no TLS files to read again; nothing else changes"),
        }
    }
}

/// Raises the process's limit on open files to its hard limit, and lowers `max_connections`
/// to what that holds beside the members' reserve and the node's own descriptors
/// (src/connections.rs), saying so in the log.
fn fit_connections(cfg: &mut ValidConfig) {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let soft = match limit.maximum {
        Some(hard) if limit.current.is_some_and(|c| c < hard) => {
            let raised = Rlimit {
                current: Some(hard),
                maximum: Some(hard),
            };
            if setrlimit(Resource::Nofile, raised).is_ok() {
                Some(hard)
            } else {
                limit.current
            }
        }
        _ => limit.current,
    };
    let Some(soft) = soft else {
        return;
    };
    // The members of the config: a membership grown at run time past it is not counted.
    let members = cfg.peers.len();
    if let Some(fits) = electd::connections::fit_to_descriptors(cfg.max_connections, soft, members)
    {
        tracing::warn!(
            max_connections = cfg.max_connections,
            open_files_limit = soft,
            serving = fits,
            "max_connections lowered to what the open-files limit holds (raise it: \
             LimitNOFILE= in systemd, ulimit -n)"
        );
        cfg.lower_max_connections(fits);
    }
}

/// The config's seed, else one from the wall clock.
fn seed_of(cfg: &ValidConfig) -> u64 {
    cfg.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    })
}

/// Says in the log that the node starts, with what, and warns of what the config leaves
/// unguarded: a mode without a lease-bound claim, no cluster_secret; and says that the admin
/// API is disabled without an admin_token.
fn log_start(cfg: &ValidConfig, listen: std::net::SocketAddr, seed: u64) {
    tracing::info!(
        id = cfg.id,
        mode = cfg.mode.as_str(),
        %listen,
        data_dir = %cfg.data_dir.display(),
        seed,
        "electd starting"
    );
    if !cfg.mode.leased() {
        tracing::warn!(
            mode = cfg.mode.as_str(),
            "{} mode is kept for comparison: under a partition two nodes may lead at once (no \
             claim is a lease-bound promise here); use quorum mode for one leader \
             (docs/modes.md)",
            cfg.mode.as_str()
        );
    }
    if cfg.runs_insecure() {
        tracing::warn!(
            "INSECURE: no cluster_secret: peer requests are not authenticated, so any process \
             that reaches this node's port can vote and append as a peer (insecure = true)"
        );
    }
    if cfg.admin_token.is_none() {
        tracing::info!("admin API disabled (403): no admin_token");
    }
}

/// Waits for SIGTERM or SIGINT (false: the node steps down) or for the election engine to
/// stop (`fatal`; true).
async fn until_stopped(fatal: &CancellationToken) -> bool {
    tokio::select! {
        sig = electd::terminate_signal() => {
            tracing::info!("{sig}: stepping down");
            false
        }
        _ = fatal.cancelled() => true,
    }
}

async fn run(mut cfg: ValidConfig, flaws: electd::Flaws) -> Result<(), String> {
    // SIGHUP is taken first thing: its default action ends the process, and a SIGHUP meant to
    // reload (or a logrotate's) must not stop a node, with TLS or without.
    let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| format!("cannot listen for SIGHUP: {e}"))?;
    let seed = seed_of(&cfg);
    fit_connections(&mut cfg);
    let listen = cfg.listen_addr();
    // Bind first: a taken port fails before any state is touched.
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    log_start(&cfg, listen, seed);
    let stop = CancellationToken::new();
    let fatal = CancellationToken::new();
    let node_cfg = cfg.clone();
    let around = electd::Surroundings {
        flaws,
        ..electd::Surroundings::host()
    };
    let node = Node::start_in(cfg, seed, stop.clone(), fatal.clone(), around)
        .await
        .map_err(|e| e.to_string())?;
    let app = electd::app(node.clone());
    let server_stop = CancellationToken::new();
    let server = tokio::spawn(serve(
        listener,
        app,
        node.tls.clone(),
        node.connections.clone(),
        server_stop.clone().cancelled_owned(),
    ));
    // SIGHUP: read the TLS files again (the claim and open connections are untouched).
    let reloads = tokio_util::task::AbortOnDropHandle::new(tokio::spawn(reload_on_sighup(
        hangups,
        node.tls.clone(),
    )));
    let joining = {
        let cfg = node_cfg;
        tokio_util::task::AbortOnDropHandle::new(tokio::spawn(async move {
            join::ask_to_be_added(&cfg).await
        }))
    };
    let failed = until_stopped(&fatal).await;
    drop(joining);
    drop(reloads);
    // Step down first (stop claiming, stop heartbeats), then stop serving.
    let _ = tokio::time::timeout(std::time::Duration::from_millis(1500), node.shutdown()).await;
    server_stop.cancel();
    let _ = tokio::time::timeout(std::time::Duration::from_millis(400), server).await;
    if failed {
        Err("the election engine stopped; see the log above".into())
    } else {
        tracing::info!("stopped");
        Ok(())
    }
}
