//! The `electd` binary's flags: the command line of a node (every config field as a flag and
//! an `ELECTD_<FIELD>` variable, laid over the config file) and its subcommands.

use std::path::PathBuf;

use clap::Parser;
use electd::config::{Config, ConfigError, Peer, ValidConfig};
use electd_client::Mode;
use serde::Serialize;

/// `electd --version`: the crate's version and the commit it was built from (build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("ELECTD_COMMIT"),
    ")"
);

/// electd: a leader-election node (quorum, mutex, bully, ring or invitation mode).
///
/// Without a command, runs a node. Every config field can be given in the TOML file
/// (--config), as an environment variable ELECTD_<FIELD>, or as a flag; a flag wins over the
/// environment, the environment over the file, the file over the default.
///
/// The commands ask one node (--node, or ELECTD_NODE), or the first of several that answers
/// (--endpoints, or ELECTD_ENDPOINTS; admin requests go to the leader they name). Exit codes: 0
/// yes/done, 1 the node could not be reached, 2 bad flags, 3 the node answered no (no leader
/// known; resignation refused), 4 (doctor) no check failed but some warned; doctor exits 1
/// when a member is unreachable or a check fails.
#[derive(Parser, Debug)]
#[command(version = VERSION, about, args_conflicts_with_subcommands = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// TOML config file (see docs/configuration.md).
    #[arg(long, short = 'c', value_name = "FILE", env = "ELECTD_CONFIG")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub fields: Fields,
    /// Log filter (tracing EnvFilter syntax), e.g. info or electd=debug. Env: RUST_LOG.
    #[arg(long, default_value = "info,openraft=warn")]
    pub log: String,
    /// Log lines as text, or as one JSON object a line (for log collectors).
    #[arg(long, value_enum, default_value_t = LogFormat::Text, env = "ELECTD_LOG_FORMAT")]
    pub log_format: LogFormat,
    /// Check the config and exit (0 when valid).
    #[arg(long)]
    pub check_config: bool,
    /// Disaster recovery, quorum mode (docs/operations.md): print what this node's data dir
    /// holds (its last log entry, its vote, the highest term) and exit, to find the survivor
    /// with the most of the log.
    #[arg(long)]
    pub inspect_data_dir: bool,
    /// Disaster recovery, quorum mode: UNSAFE. Make this stopped node's data dir the only
    /// member of a new cluster at a term above every one it knows, and exit; start it, then
    /// add members with --join. Only for a cluster that lost a majority for good.
    #[arg(long)]
    pub force_new_cluster: bool,
    /// With --force-new-cluster: the new term is above this one too (the highest term a lost
    /// member or a client may have seen).
    #[arg(
        long,
        value_name = "TERM",
        default_value_t = 0,
        requires = "force_new_cluster"
    )]
    pub term_above: u64,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Who the node says leads (exit 0), or that it knows no leader (exit 3).
    Leader(crate::client::NodeArgs),
    /// The node's status: view, peers, timings, counters.
    Status(crate::client::NodeArgs),
    /// One line per change of the node's view (role, term, leader), from the current one on.
    Watch(crate::client::WatchArgs),
    /// Hand the leader role over (the node must be the leader; needs the admin token).
    Resign(crate::client::ResignArgs),
    /// Quorum mode's members: list them, add one, remove one (add and remove need the admin
    /// token and go to the leader).
    Member(crate::client::MemberArgs),
    /// The named roles (quorum mode): each with its holder, its token and who stands for it,
    /// as the node's applied log has them.
    Roles(crate::client::NodeArgs),
    /// Check the whole cluster: every member reachable, secret, TLS and cluster id mismatches,
    /// membership and leader agreement, health, event-log lag, clock offsets, the mode's
    /// warning; one line per check, OK, WARN or FAIL. Exit 0 all OK, 1 a member unreachable or
    /// a FAIL, 4 WARNs only.
    Doctor(crate::client::NodeArgs),
    /// Run a command only while the node holds the claim (SIGTERM before the claim can end,
    /// SIGKILL at the latest when it does; started again when the claim comes back).
    Run(crate::run::RunArgs),
    /// Print a completion script for SHELL to stdout, e.g. electd completions bash >
    /// /etc/bash_completion.d/electd.
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) to stdout: electd(1), or a command's (electd man member add),
    /// e.g. electd man > /usr/local/share/man/man1/electd.1.
    Man {
        /// The command whose page to print (none: electd's own).
        command: Vec<String>,
    },
    /// The keeper of a child's process group (started by `run`): kills the group when its
    /// standard input ends, that is when its supervisor is gone.
    #[command(name = "__keep-group", hide = true)]
    KeepGroup {
        /// The process group to kill.
        group: i32,
        /// The child's cgroup (v2), killed too (`cgroup.kill`).
        cgroup: Option<std::path::PathBuf>,
    },
}

impl Command {
    /// The `--node`/`--endpoints` of a command that asks a node (all but `run`, which runs
    /// under one node's claim, and those that ask none).
    pub fn nodes_mut(&mut self) -> Option<&mut crate::addr::Nodes> {
        match self {
            Command::Leader(a) | Command::Status(a) | Command::Doctor(a) | Command::Roles(a) => {
                Some(&mut a.at)
            }
            Command::Watch(a) => Some(&mut a.node.at),
            Command::Resign(a) => Some(&mut a.node.at),
            Command::Member(a) => Some(&mut a.node.at),
            Command::Run(_)
            | Command::Completions { .. }
            | Command::Man { .. }
            | Command::KeepGroup { .. } => None,
        }
    }
}

/// The config fields as flags and environment variables, serialised as a TOML table of the
/// config file's shape and laid over the file ([`Config::resolve`]). Unset ones are left out.
#[derive(clap::Args, Debug, Serialize)]
pub struct Fields {
    /// This node's id (must be one of the peers).
    #[arg(long, env = "ELECTD_ID")]
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<u64>,
    /// Address to bind, ip:port (default: this node's own peer address).
    #[arg(long, value_name = "IP:PORT", env = "ELECTD_LISTEN")]
    #[serde(skip_serializing_if = "Option::is_none")]
    listen: Option<std::net::SocketAddr>,
    /// Directory for the vote, the log and events.jsonl.
    #[arg(long, value_name = "DIR", env = "ELECTD_DATA_DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    data_dir: Option<PathBuf>,
    /// Election mode: quorum, mutex, bully, ring or invitation.
    #[arg(long, env = "ELECTD_MODE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<Mode>,
    /// Cluster id carried by every peer request.
    #[arg(long, env = "ELECTD_CLUSTER_ID")]
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_id: Option<String>,
    /// Shared secret that authenticates peer requests (prefer the environment: a flag shows
    /// in the process list).
    #[arg(long, env = "ELECTD_CLUSTER_SECRET", hide_env_values = true)]
    #[serde(skip_serializing_if = "unset")]
    cluster_secret: Option<String>,
    /// A second secret taken besides the cluster secret (never signed with), while the
    /// cluster's secret is changed node by node (prefer the environment).
    #[arg(long, env = "ELECTD_CLUSTER_SECRET_ACCEPTED", hide_env_values = true)]
    #[serde(skip_serializing_if = "unset")]
    cluster_secret_accepted: Option<String>,
    /// Bearer token of the admin API (prefer the environment, as for the secret).
    #[arg(long, env = "ELECTD_ADMIN_TOKEN", hide_env_values = true)]
    #[serde(skip_serializing_if = "unset")]
    admin_token: Option<String>,
    /// Mutex mode: the PostgreSQL database of the lease row,
    /// postgres://USER:PASSWORD@HOST:PORT/DB (prefer the environment: it may hold a password).
    #[arg(long, env = "ELECTD_STORE_URL", hide_env_values = true)]
    #[serde(skip_serializing_if = "unset")]
    store_url: Option<String>,
    /// Run a cluster without a cluster secret (any process that reaches a node may then vote
    /// as a peer); refused unless given.
    #[arg(long, env = "ELECTD_INSECURE")]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    insecure: bool,
    /// Seed of the node's random sources, printed at start: the fault layer's drops, quorum
    /// mode's election jitter and its data dir's incarnation, mutex mode's instance.
    #[arg(long, env = "ELECTD_SEED")]
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<u64>,
    /// A cluster member as ID=IP:PORT; repeat for each (replaces the file's [[peers]]).
    /// In the environment: ELECTD_PEERS=1=IP:PORT,2=IP:PORT,...
    #[arg(long = "peer", value_name = "ID=IP:PORT", value_parser = parse_peer,
          env = "ELECTD_PEERS", value_delimiter = ',')]
    #[serde(skip_serializing_if = "Vec::is_empty")]
    peers: Vec<Peer>,
    /// How many GET /v1/watch streams the node serves at once (default 64); one more gets 429.
    #[arg(long, env = "ELECTD_MAX_WATCHERS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    max_watchers: Option<usize>,
    /// How many GET /v1/watch streams one client (source IP) may hold at once (default 16).
    #[arg(long, env = "ELECTD_MAX_WATCHERS_PER_CLIENT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    max_watchers_per_client: Option<usize>,
    /// How many connections the node serves at once (default 1024); members get a small
    /// reserve beyond it for peer requests.
    #[arg(long, env = "ELECTD_MAX_CONNECTIONS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    max_connections: Option<usize>,
    /// Quorum mode: join the running cluster through the member at HOST:PORT (its membership
    /// comes from the cluster; with an admin token the node asks to be added), instead of
    /// bootstrapping one from the peers. For a node whose data dir is new.
    #[arg(long, value_name = "HOST:PORT", env = "ELECTD_JOIN")]
    #[serde(skip_serializing_if = "Option::is_none")]
    join: Option<String>,
    /// Quorum mode: how long a member of higher priority (`priority` in [[peers]]) must be
    /// connected and up to date before the leader hands over to it, and the least time
    /// between two such handovers, ms (default 10000, at least two follower leases).
    #[arg(long, value_name = "MS", env = "ELECTD_PRIORITY_SETTLE_MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    priority_settle_ms: Option<u64>,
    /// Quorum mode: join (with --join) as a member that does not vote: it follows the log,
    /// may hold named roles, never claims the cluster's election, and needs no admin token.
    #[arg(long, env = "ELECTD_NONVOTER")]
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    nonvoter: bool,
    #[command(flatten)]
    #[serde(skip_serializing_if = "NonVotersFields::is_empty")]
    nonvoters: NonVotersFields,
    #[command(flatten)]
    #[serde(skip_serializing_if = "TimingFields::is_empty")]
    timing: TimingFields,
    #[command(flatten)]
    #[serde(skip_serializing_if = "TlsFields::is_empty")]
    tls: TlsFields,
}

/// `[nonvoters]` as flags and environment variables (read by the leader).
#[derive(clap::Args, Debug, Serialize)]
pub struct NonVotersFields {
    /// The most members that don't vote the cluster takes (default 64; 0 refuses every join).
    #[arg(long = "nonvoters-max", value_name = "N", env = "ELECTD_NONVOTERS_MAX")]
    #[serde(rename = "max", skip_serializing_if = "Option::is_none")]
    nonvoters_max: Option<usize>,
    /// How long the leader hears nothing from a non-voter before it removes it, ms (default
    /// 30000; at least four follower leases and 1000).
    #[arg(
        long = "nonvoters-remove-after-ms",
        value_name = "MS",
        env = "ELECTD_NONVOTERS_REMOVE_AFTER_MS"
    )]
    #[serde(rename = "remove_after_ms", skip_serializing_if = "Option::is_none")]
    nonvoters_remove_after_ms: Option<u64>,
}

impl NonVotersFields {
    fn is_empty(&self) -> bool {
        self.nonvoters_max.is_none() && self.nonvoters_remove_after_ms.is_none()
    }
}

/// `[tls]` as flags and environment variables (docs/security.md, "TLS").
#[derive(clap::Args, Debug, Serialize)]
pub struct TlsFields {
    /// The cluster CA's certificate (PEM): serve the API and the peer RPC over TLS.
    #[arg(long = "tls-ca", value_name = "FILE", env = "ELECTD_TLS_CA")]
    #[serde(rename = "ca", skip_serializing_if = "Option::is_none")]
    tls_ca: Option<std::path::PathBuf>,
    /// This node's certificate (PEM), signed by the cluster CA.
    #[arg(long = "tls-cert", value_name = "FILE", env = "ELECTD_TLS_CERT")]
    #[serde(rename = "cert", skip_serializing_if = "Option::is_none")]
    tls_cert: Option<std::path::PathBuf>,
    /// Its private key (PEM).
    #[arg(long = "tls-key", value_name = "FILE", env = "ELECTD_TLS_KEY")]
    #[serde(rename = "key", skip_serializing_if = "Option::is_none")]
    tls_key: Option<std::path::PathBuf>,
    /// The admin API also asks for a client certificate signed by the cluster CA.
    #[arg(long = "tls-admin-client-cert", env = "ELECTD_TLS_ADMIN_CLIENT_CERT")]
    #[serde(
        rename = "admin_client_cert",
        skip_serializing_if = "std::ops::Not::not"
    )]
    tls_admin_client_cert: bool,
}

impl TlsFields {
    fn is_empty(&self) -> bool {
        self.tls_ca.is_none()
            && self.tls_cert.is_none()
            && self.tls_key.is_none()
            && !self.tls_admin_client_cert
    }
}

/// `[timing]` as flags and environment variables.
#[derive(clap::Args, Debug, Serialize)]
pub struct TimingFields {
    /// A named set of the timings below: lan (the default: 30, 150, 120 ms) or shared (for
    /// shared or CPU-limited hosts: 100, 1000, 800 ms); any of them given as well overrides
    /// the profile's.
    #[arg(long = "timing-profile", env = "ELECTD_TIMING_PROFILE")]
    #[serde(rename = "profile", skip_serializing_if = "Option::is_none")]
    timing_profile: Option<String>,
    /// Leader heartbeat (and quorum probe) interval, ms.
    #[arg(long, env = "ELECTD_HEARTBEAT_MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    heartbeat_ms: Option<u64>,
    /// How long a follower tolerates leader silence before it may campaign or vote for
    /// another node, ms (openraft's election_timeout_max). Old name: --election-timeout-max-ms.
    #[arg(
        long,
        alias = "election-timeout-max-ms",
        env = "ELECTD_FOLLOWER_LEASE_MS"
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    follower_lease_ms: Option<u64>,
    /// Gone (electd staggers candidates itself); kept only so that the config says so.
    #[arg(long, hide = true)]
    #[serde(skip_serializing_if = "Option::is_none")]
    election_timeout_min_ms: Option<u64>,
    /// How long a quorum-acknowledged probe lets the leader claim the role, ms
    /// (default: the follower lease less a fifth; must be below it).
    #[arg(long, env = "ELECTD_LEASE_MS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_ms: Option<u64>,
}

/// An empty secret (`ELECTD_CLUSTER_SECRET=`) counts as not given.
fn unset(secret: &Option<String>) -> bool {
    secret.as_deref().is_none_or(str::is_empty)
}

impl TimingFields {
    fn is_empty(&self) -> bool {
        self.timing_profile.is_none()
            && self.heartbeat_ms.is_none()
            && self.follower_lease_ms.is_none()
            && self.election_timeout_min_ms.is_none()
            && self.lease_ms.is_none()
    }
}

fn parse_peer(s: &str) -> Result<Peer, String> {
    let (id, addr) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not ID=IP:PORT"))?;
    let id = id.parse().map_err(|_| format!("{id:?} is not a node id"))?;
    Ok(Peer {
        id,
        addr: addr.to_string(),
        priority: 0,
    })
}

/// Lays the flags and the environment over the file, then validates.
pub fn build_config(cli: &Cli) -> Result<ValidConfig, ConfigError> {
    let overrides = toml::Table::try_from(&cli.fields).map_err(|e| ConfigError::Invalid {
        field: "flags".into(),
        message: e.to_string(),
    })?;
    ValidConfig::new(Config::resolve(cli.config.as_deref(), overrides)?)
}
