//! `electd`: runs one node. See `electd --help` and README.md.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use electd::config::{Config, ConfigError, Mode, Peer};
use electd::node::Node;
use electd::server::serve;
use tokio_util::sync::CancellationToken;

/// Exit code for a config error (bad file, bad field, bad flag).
const EXIT_CONFIG: u8 = 2;
/// Exit code for a failure at run time (state file unreadable, port taken, engine stopped).
const EXIT_RUNTIME: u8 = 1;

/// electd: a leader-election node (quorum, bully or ring mode).
///
/// Reads the TOML config given by --config; every flag overrides the file's value.
#[derive(Parser, Debug)]
#[command(version, about, long_about = None)]
struct Cli {
    /// TOML config file (see README.md, "Configuration").
    #[arg(long, short = 'c', value_name = "FILE")]
    config: Option<PathBuf>,
    /// This node's id (must be one of the peers).
    #[arg(long)]
    id: Option<u64>,
    /// Address to bind, ip:port (default: this node's own peer address).
    #[arg(long, value_name = "IP:PORT")]
    listen: Option<std::net::SocketAddr>,
    /// Directory for the vote, the log and events.jsonl.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Election mode: quorum, bully or ring.
    #[arg(long)]
    mode: Option<Mode>,
    /// Cluster id carried by every peer request.
    #[arg(long)]
    cluster_id: Option<String>,
    /// A cluster member as ID=IP:PORT; repeat for each (replaces the file's [[peers]]).
    #[arg(long = "peer", value_name = "ID=IP:PORT", value_parser = parse_peer)]
    peers: Vec<Peer>,
    /// Leader heartbeat (and quorum probe) interval, ms.
    #[arg(long)]
    heartbeat_ms: Option<u64>,
    /// How long a follower tolerates leader silence before it may campaign or vote for
    /// another node, ms (openraft's election_timeout_max). Old name: --election-timeout-max-ms.
    #[arg(long, alias = "election-timeout-max-ms")]
    follower_lease_ms: Option<u64>,
    /// Gone (electd staggers candidates itself); kept only to say so.
    #[arg(long, hide = true)]
    election_timeout_min_ms: Option<u64>,
    /// How long a quorum-acknowledged probe lets the leader claim the role, ms
    /// (default: the follower lease less a fifth; must be below it).
    #[arg(long)]
    lease_ms: Option<u64>,
    /// Seed of the node's random source (fault-layer drops); printed at start.
    #[arg(long)]
    seed: Option<u64>,
    /// Log filter (tracing EnvFilter syntax), e.g. info or electd=debug. Env: RUST_LOG.
    #[arg(long, default_value = "info,openraft=warn")]
    log: String,
    /// Check the config and exit (0 when valid).
    #[arg(long)]
    check_config: bool,
}

fn parse_peer(s: &str) -> Result<Peer, String> {
    let (id, addr) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not ID=IP:PORT"))?;
    let id = id.parse().map_err(|_| format!("{id:?} is not a node id"))?;
    Ok(Peer {
        id,
        addr: addr.to_string(),
    })
}

/// Merges the file and the flags, then validates.
fn build_config(cli: &Cli) -> Result<Config, ConfigError> {
    let mut cfg = match &cli.config {
        Some(path) => Config::load(path)?,
        None => {
            let missing = |field: &str| ConfigError::Invalid {
                field: field.to_string(),
                message: "is required (no --config file given)".to_string(),
            };
            Config {
                id: cli.id.ok_or_else(|| missing("id"))?,
                listen: None,
                data_dir: cli.data_dir.clone().ok_or_else(|| missing("data_dir"))?,
                mode: Mode::default(),
                cluster_id: "electd".into(),
                cluster_secret: None,
                admin_token: None,
                seed: None,
                timing: Default::default(),
                peers: Vec::new(),
            }
        }
    };
    if let Some(v) = cli.id {
        cfg.id = v;
    }
    if let Some(v) = cli.listen {
        cfg.listen = Some(v);
    }
    if let Some(v) = &cli.data_dir {
        cfg.data_dir = v.clone();
    }
    if let Some(v) = cli.mode {
        cfg.mode = v;
    }
    if let Some(v) = &cli.cluster_id {
        cfg.cluster_id = v.clone();
    }
    if !cli.peers.is_empty() {
        cfg.peers = cli.peers.clone();
    }
    if let Some(v) = cli.heartbeat_ms {
        cfg.timing.heartbeat_ms = v;
    }
    if cli.election_timeout_min_ms.is_some() {
        return Err(ConfigError::Invalid {
            field: "--election-timeout-min-ms".into(),
            message: "is no longer used: electd staggers candidates itself; \
                      --follower-lease-ms sets how long followers tolerate leader silence"
                .into(),
        });
    }
    if let Some(v) = cli.follower_lease_ms {
        cfg.timing.follower_lease_ms = v;
    }
    if let Some(v) = cli.lease_ms {
        cfg.timing.lease_ms = v;
    }
    if let Some(v) = cli.seed {
        cfg.seed = Some(v);
    }
    if let Ok(secret) = std::env::var("ELECTD_CLUSTER_SECRET") {
        if !secret.is_empty() {
            cfg.cluster_secret = Some(electd::config::Secret::from(secret));
        }
    }
    if let Ok(token) = std::env::var("ELECTD_ADMIN_TOKEN") {
        if !token.is_empty() {
            cfg.admin_token = Some(electd::config::Secret::from(token));
        }
    }
    cfg.validate()?;
    Ok(cfg)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| cli.log.clone());
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&filter)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_ansi(false)
        .init();
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
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run(cfg)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("electd: {e}");
            ExitCode::from(EXIT_RUNTIME)
        }
    }
}

async fn run(cfg: Config) -> Result<(), String> {
    let seed = cfg.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    });
    let listen = cfg.listen_addr();
    // Bind first: a taken port fails before any state is touched.
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?;
    tracing::info!(
        id = cfg.id,
        mode = cfg.mode.as_str(),
        %listen,
        data_dir = %cfg.data_dir.display(),
        seed,
        "electd starting"
    );
    let stop = CancellationToken::new();
    let fatal = CancellationToken::new();
    let node = Node::start(cfg, seed, stop.clone(), fatal.clone())
        .await
        .map_err(|e| e.to_string())?;
    let app = electd::api::app(node.clone());
    let server_stop = CancellationToken::new();
    let server = tokio::spawn(serve(listener, app, server_stop.clone().cancelled_owned()));
    let failed = tokio::select! {
        sig = electd::node::terminate_signal() => {
            tracing::info!("{sig}: stepping down");
            false
        }
        _ = fatal.cancelled() => true,
    };
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
