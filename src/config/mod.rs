//! Node configuration: the TOML file, the command-line flags that override it, and the
//! validation that runs before anything starts (its rules in `config/validate.rs`).
//!
//! Every rule names the field it checks, so a bad config fails with a message such as
//! `timing.heartbeat_ms (5000) must be at most 1/3 of the default claim lease,
//! timing.follower_lease_ms less a fifth (120), or the claim lapses between two probes`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::role::Mode;
use crate::role::NodeId;

mod profile;
mod validate;
pub use profile::TimingProfile;
pub use validate::{LEASE_BEATS, MAX_FOLLOWER_LEASE_MS, MIN_FOLLOWER_LEASE_MS, MIN_MARGIN_MS};

/// One member of the cluster, self included.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Peer {
    pub id: NodeId,
    /// `host:port` where the member serves its API and peer RPC.
    pub addr: String,
    /// Quorum mode: the preferred leader is the member of the highest priority; a leader
    /// hands over to a member of higher priority that has been connected and up to date for
    /// `priority_settle_ms` (docs/operations.md, "Preferred leader"). Default 0: all equal.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub priority: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Timings in milliseconds (docs/configuration.md; docs/safety.md, "Timings: the margins").
///
/// `heartbeat_ms < lease_ms < follower_lease_ms`: the leader's claim after an acknowledged
/// probe ends before any follower that acknowledged it may vote for someone else.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "TimingFile")]
pub struct Timing {
    /// How often a leader sends heartbeats and, in quorum mode, probes its quorum.
    pub heartbeat_ms: u64,
    /// How long a follower tolerates leader silence before it may campaign or vote for anyone
    /// else (openraft's `election_timeout_max`, its leader lease). Quorum mode: a follower
    /// campaigns only after this long without an accepted AppendEntries, and refuses votes
    /// and pre-votes meanwhile. Bully and ring: a follower calls an election after this long
    /// without hearing its coordinator.
    pub follower_lease_ms: u64,
    /// How long a quorum-acknowledged probe lets the leader claim the role. 0 means the
    /// default, `follower_lease_ms - follower_lease_ms / 5` (a margin of a fifth). Must stay
    /// below `follower_lease_ms` so that the claim ends before any other node can be elected.
    pub lease_ms: u64,
}

/// `[timing]` as written in a file: the fields of [`Timing`], plus the names of an earlier
/// config format, so that an old file either keeps working or says what to write instead.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TimingFile {
    /// A named set of the three timings (`config/profile.rs`); fields given override it.
    profile: Option<String>,
    heartbeat_ms: Option<u64>,
    follower_lease_ms: Option<u64>,
    lease_ms: Option<u64>,
    /// The old name of `follower_lease_ms`; still accepted.
    election_timeout_max_ms: Option<u64>,
    /// Gone: electd staggers candidates itself instead of drawing a random election timeout.
    election_timeout_min_ms: Option<u64>,
}

impl TryFrom<TimingFile> for Timing {
    type Error = String;
    fn try_from(f: TimingFile) -> Result<Timing, String> {
        if f.election_timeout_min_ms.is_some() {
            return Err(
                "timing.election_timeout_min_ms is no longer used: electd staggers \
                        candidates itself; remove it (timing.follower_lease_ms sets how long \
                        followers tolerate leader silence)"
                    .into(),
            );
        }
        if let (Some(_), Some(_)) = (f.follower_lease_ms, f.election_timeout_max_ms) {
            return Err("timing.election_timeout_max_ms is the old name of \
                        timing.follower_lease_ms: give only follower_lease_ms"
                .into());
        }
        let d = match &f.profile {
            Some(name) => TimingProfile::parse(name)?.timing(),
            None => Timing::default(),
        };
        Ok(Timing {
            heartbeat_ms: f.heartbeat_ms.unwrap_or(d.heartbeat_ms),
            follower_lease_ms: f
                .follower_lease_ms
                .or(f.election_timeout_max_ms)
                .unwrap_or(d.follower_lease_ms),
            lease_ms: f.lease_ms.unwrap_or(d.lease_ms),
        })
    }
}

impl Default for Timing {
    /// The `lan` profile: heartbeat 30 ms, follower lease 150 ms, the tolerance of etcd at
    /// `--heartbeat-interval 30 --election-timeout 150`, so that comparisons are fair.
    fn default() -> Self {
        TimingProfile::Lan.timing()
    }
}

impl Timing {
    /// The claim lease in force: the configured one, or the follower lease less a fifth.
    pub fn effective_lease_ms(&self) -> u64 {
        if self.lease_ms == 0 {
            self.follower_lease_ms - self.follower_lease_ms / 5
        } else {
            self.lease_ms
        }
    }
}

/// A secret (the cluster secret, the admin token): read from the config or the environment,
/// never serialised, redacted in `Debug` (so that no log line can carry it) and zeroed when
/// dropped. Read it with [`ExposeSecret::expose_secret`], for signing and comparing only.
pub type Secret = secrecy::SecretString;
pub use secrecy::ExposeSecret;

/// A [`Config`] that passed [`Config::validate`]: the only kind a node starts from
/// (`Node::start` takes it), so no caller can skip the checks against the margins the safety
/// argument states. Made only by [`ValidConfig::new`]; read through `Deref`. One field may
/// leave its range afterwards, and only downward: `max_connections`, lowered to what the
/// host's open-files limit holds ([`ValidConfig::lower_max_connections`]).
#[derive(Clone, Debug)]
pub struct ValidConfig(Config);

impl ValidConfig {
    /// Validates `cfg`; the first broken rule is the error, naming its field.
    pub fn new(cfg: Config) -> Result<ValidConfig, ConfigError> {
        cfg.validate()?;
        Ok(ValidConfig(cfg))
    }

    /// The config itself, to change and validate anew.
    pub fn into_inner(self) -> Config {
        self.0
    }

    /// Lowers `max_connections` to what the host's open-files limit holds (never raises it):
    /// the range bounds what an operator asks for, not what the host can give.
    pub fn lower_max_connections(&mut self, to: usize) {
        self.0.max_connections = self.0.max_connections.min(to);
    }

    /// For the lab's broken variants only (feature `flaws`): a config taken without the
    /// checks, as a claim lease past its bound (`--lab-flaw long-lease`) needs.
    #[cfg(feature = "flaws")]
    pub fn unchecked(cfg: Config) -> ValidConfig {
        ValidConfig(cfg)
    }
}

impl std::ops::Deref for ValidConfig {
    type Target = Config;

    fn deref(&self) -> &Config {
        &self.0
    }
}

/// A node's whole configuration after the file and the flags are merged.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// This node's id; must be one of `peers`.
    pub id: NodeId,
    /// Address to bind; defaults to this node's own `peers` address. Its IP is also the source
    /// address of outgoing peer traffic, so that kernel-level faults (iptables) can tell nodes apart.
    #[serde(default)]
    pub listen: Option<SocketAddr>,
    /// Where the node keeps its vote, log and event log.
    pub data_dir: PathBuf,
    #[serde(default)]
    pub mode: Mode,
    /// Every peer request names its cluster; requests for another cluster are refused.
    #[serde(default = "default_cluster_id")]
    pub cluster_id: String,
    /// Shared secret that authenticates peer requests (docs/security.md, "Hardening"). Never logged or served.
    #[serde(default, skip_serializing)]
    pub cluster_secret: Option<Secret>,
    /// A second secret taken besides `cluster_secret` (never signed with), while the cluster's
    /// secret is changed node by node without stopping it (docs/operations.md, "Changing the
    /// cluster secret"). Never logged or served.
    #[serde(default, skip_serializing)]
    pub cluster_secret_accepted: Option<Secret>,
    /// Bearer token for the admin API; when unset the admin API is disabled (403).
    #[serde(default, skip_serializing)]
    pub admin_token: Option<Secret>,
    /// Mutex mode: the PostgreSQL database that holds the lease row,
    /// `postgres://USER:PASSWORD@HOST:PORT/DB` (the table is created if missing). A secret: it
    /// may carry a password.
    #[serde(default, skip_serializing)]
    pub store_url: Option<Secret>,
    /// Run a cluster of several members without `cluster_secret`: any process that reaches a
    /// node's port may then vote and append as a peer. Refused unless set; said in the log
    /// and in `/v1/status` when it is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// Seed of the node's own random source (fault layer drop decisions). Unset: taken from the
    /// clock and printed at start, so that a run can be replayed.
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default)]
    pub timing: Timing,
    /// How many `GET /v1/watch` streams the node serves at once; one more gets 429.
    #[serde(default = "default_max_watchers")]
    pub max_watchers: usize,
    /// How many of those streams one client (one source IP address) may hold at once, so
    /// that no single client takes every slot; one more gets 429. A value above
    /// `max_watchers` acts as `max_watchers`.
    #[serde(
        default = "default_max_watchers_per_client",
        skip_serializing_if = "is_default_max_watchers_per_client"
    )]
    pub max_watchers_per_client: usize,
    /// How many connections the node serves at once (API clients and members together).
    /// Beyond it, connections from a member's address still get one of a small reserve
    /// ([`crate::connections::MEMBER_RESERVE`]) for peer requests only; any other is closed
    /// at once. Lowered at start to what the process's descriptor limit can hold.
    #[serde(
        default = "default_max_connections",
        skip_serializing_if = "is_default_max_connections"
    )]
    pub max_connections: usize,
    /// Quorum mode: join a running cluster through the member at this `HOST:PORT` instead of
    /// bootstrapping one from `peers`: the node takes its membership from the cluster's log,
    /// and (with an `admin_token`) asks to be added. Only for a node whose data dir is new.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub join: Option<String>,
    /// Quorum mode: how long a member of higher priority than the leader must have been
    /// connected and up to date before the leader hands over to it, and the least time
    /// between two such handovers (at least two follower leases; default 10 s, or two
    /// follower leases if that is longer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_settle_ms: Option<u64>,
    /// Quorum mode: this node joins (through `join`) as a member that does not vote: it
    /// follows the log, may hold named roles, never claims the cluster's election, and needs
    /// no admin token to join (docs/design/nonvoters.md).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nonvoter: bool,
    /// Quorum mode, read by the leader: how the cluster takes members that don't vote.
    #[serde(default, skip_serializing_if = "NonVoters::is_default")]
    pub nonvoters: NonVoters,
    /// TLS for the API and the peer RPC (docs/security.md, "TLS"); unset: plain HTTP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsFiles>,
    pub peers: Vec<Peer>,
}

/// `[nonvoters]`: how the leader takes members that don't vote (src/quorum/nonvoters.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NonVoters {
    /// The most non-voters the cluster takes at once; 0 refuses every join.
    #[serde(default = "default_nonvoters_max")]
    pub max: usize,
    /// How long the leader hears nothing from a non-voter before it removes it, ms (at least
    /// four follower leases and 1000, at most a day; default 30000, or four follower leases if
    /// that is longer: [`Config::effective_remove_after_ms`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remove_after_ms: Option<u64>,
}

/// The default of [`NonVoters::max`].
pub const DEFAULT_NONVOTERS_MAX: usize = 64;
/// The default of [`NonVoters::remove_after_ms`] (or four follower leases if that is longer).
pub const DEFAULT_REMOVE_AFTER_MS: u64 = 30_000;

fn default_nonvoters_max() -> usize {
    DEFAULT_NONVOTERS_MAX
}

impl Default for NonVoters {
    fn default() -> NonVoters {
        NonVoters {
            max: DEFAULT_NONVOTERS_MAX,
            remove_after_ms: None,
        }
    }
}

impl NonVoters {
    fn is_default(&self) -> bool {
        *self == NonVoters::default()
    }
}

/// `[tls]`: the PEM files of a node's TLS (src/tls.rs), read at start and again on SIGHUP.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// The cluster CA's certificate: every member's certificate is signed by it, and so is an
    /// admin's client certificate.
    pub ca: PathBuf,
    /// This node's certificate (then any intermediates): valid for the host of its address
    /// (clients and peers check it), naming its member id as the DNS name
    /// `member-ID.electd.invalid` (peers check that), for both server and client use.
    pub cert: PathBuf,
    /// Its private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The admin API also asks for a client certificate signed by the cluster CA.
    #[serde(default)]
    pub admin_client_cert: bool,
}

/// The default of [`Config::priority_settle_ms`] (unless two follower leases are longer).
pub const DEFAULT_PRIORITY_SETTLE_MS: u64 = 10_000;

fn default_cluster_id() -> String {
    "electd".to_string()
}

/// The default of [`Config::max_watchers`].
pub const DEFAULT_MAX_WATCHERS: usize = 64;
/// The most [`Config::max_watchers`] may be.
pub const MAX_WATCHERS_LIMIT: usize = 10_000;

fn default_max_watchers() -> usize {
    DEFAULT_MAX_WATCHERS
}

/// The default of [`Config::max_watchers_per_client`].
pub const DEFAULT_MAX_WATCHERS_PER_CLIENT: usize = 16;

fn default_max_watchers_per_client() -> usize {
    DEFAULT_MAX_WATCHERS_PER_CLIENT
}

// Fields added after electd-peer-v2 are written only when they differ from their defaults, so
// that the configs the lab writes start the binaries before them too (`bench cost
// --baseline-bin`).
fn is_default_max_watchers_per_client(n: &usize) -> bool {
    *n == DEFAULT_MAX_WATCHERS_PER_CLIENT
}

fn is_default_max_connections(n: &usize) -> bool {
    *n == DEFAULT_MAX_CONNECTIONS
}

/// The default of [`Config::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// The range [`Config::max_connections`] must be in.
pub const MAX_CONNECTIONS_RANGE: std::ops::RangeInclusive<usize> = 16..=65_536;

fn default_max_connections() -> usize {
    DEFAULT_MAX_CONNECTIONS
}

/// Why a config was refused. Every variant names the file or the field.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The config file is not valid TOML or has fields of the wrong type or unknown fields.
    #[error("config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// A field breaks a rule: "timing.heartbeat_ms (5000) must be at most ..." for a value
    /// rule, "id: 9 is not among the peers" otherwise.
    #[error("{field}{}{message}", if message.starts_with('(') { " " } else { ": " })]
    Invalid { field: String, message: String },
}

/// Why `addr` cannot be a member's address, if it cannot.
pub(crate) fn check_addr(addr: &str) -> Result<(), String> {
    if is_host_port(addr) {
        Ok(())
    } else {
        Err(format!("addr {addr:?} must be HOST:PORT"))
    }
}

/// `IPv4:PORT`, `[IPv6]:PORT`, or `HOST:PORT` with a DNS name for HOST (ASCII letters, digits,
/// `-` and `.`, labels of 1 to 63 characters not starting with `-`, not all digits), as in a
/// Kubernetes StatefulSet's stable pod names; PORT is digits only, 1 to 65535. The one check of
/// a member's address, in the config (`[[peers]]`, `join`) and in `POST /v1/admin/members`,
/// whose OpenAPI pattern (docs/openapi.yaml, `AddMember`) admits a superset of it.
pub(crate) fn is_host_port(addr: &str) -> bool {
    let Some((host, port)) = addr.rsplit_once(':') else {
        return false;
    };
    let port_ok = !port.is_empty()
        && port.bytes().all(|b| b.is_ascii_digit())
        && port.parse::<u16>().is_ok_and(|p| p > 0);
    if !port_ok {
        return false;
    }
    if let Some(ip) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return ip.parse::<std::net::Ipv6Addr>().is_ok();
    }
    if host.parse::<std::net::Ipv4Addr>().is_ok() {
        return true;
    }
    !host.is_empty()
        && host.len() <= 253
        && host
            .split('.')
            .all(|label| !label.is_empty() && label.len() <= 63 && !label.starts_with('-'))
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
        && !host.chars().all(|c| c.is_ascii_digit() || c == '.')
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

impl Config {
    /// Parses a TOML document (no validation: call [`Config::validate`] after overrides).
    pub fn from_toml(text: &str, path: &Path) -> Result<Config, ConfigError> {
        toml::from_str(text).map_err(|e| parse_error(path, text, e))
    }

    /// The config of a node: the file at `path` (if any), with `overrides` (a TOML table of the
    /// same fields, from flags and environment variables) laid over it field by field; a
    /// relative `data_dir` from the file is taken relative to the file. Not validated yet.
    pub fn resolve(path: Option<&Path>, overrides: toml::Table) -> Result<Config, ConfigError> {
        let mut table = match path {
            Some(path) => read_table(path)?,
            None => toml::Table::new(),
        };
        profile_replaces_timings(&mut table, &overrides);
        merge(&mut table, overrides);
        toml::Value::Table(table)
            .try_into()
            .map_err(|e: toml::de::Error| {
                let message = e.message().to_string();
                match (path, message.strip_prefix("missing field `")) {
                    (Some(path), _) => ConfigError::Parse {
                        path: path.to_path_buf(),
                        message,
                    },
                    (None, Some(rest)) => invalid(
                        rest.trim_end_matches('`'),
                        "is required (no --config file given)",
                    ),
                    (None, None) => invalid("flags", message),
                }
            })
    }

    /// Reads and parses a config file, as [`Config::resolve`] does without overrides.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Self::resolve(Some(path), toml::Table::new())
    }

    /// Whether the node runs among peers that nothing authenticates: neither a cluster secret
    /// nor TLS (allowed by `insecure`).
    pub fn runs_insecure(&self) -> bool {
        self.peers.len() > 1 && self.cluster_secret.is_none() && self.tls.is_none()
    }

    /// The address this node binds.
    pub fn listen_addr(&self) -> SocketAddr {
        match self.listen {
            Some(a) => a,
            None => self
                .own_peer()
                .and_then(|p| p.addr.parse().ok())
                .expect("validated config has a parseable own address"),
        }
    }

    pub fn own_peer(&self) -> Option<&Peer> {
        self.peers.iter().find(|p| p.id == self.id)
    }

    pub fn peer_addr(&self, id: NodeId) -> Option<&str> {
        self.peers
            .iter()
            .find(|p| p.id == id)
            .map(|p| p.addr.as_str())
    }

    /// Member ids, ascending, self included.
    /// [`Config::priority_settle_ms`], or its default.
    pub fn effective_priority_settle_ms(&self) -> u64 {
        self.priority_settle_ms
            .unwrap_or(DEFAULT_PRIORITY_SETTLE_MS.max(2 * self.timing.follower_lease_ms))
    }

    /// How long the leader hears nothing from a non-voter before it removes it, ms.
    pub fn effective_remove_after_ms(&self) -> u64 {
        self.nonvoters
            .remove_after_ms
            .unwrap_or(DEFAULT_REMOVE_AFTER_MS.max(4 * self.timing.follower_lease_ms))
    }

    pub fn member_ids(&self) -> Vec<NodeId> {
        let mut ids: Vec<NodeId> = self.peers.iter().map(|p| p.id).collect();
        ids.sort_unstable();
        ids
    }

    /// Checks every field and every relation between fields, in five parts (identity, limits,
    /// peers, secrets, timing); the first broken rule is returned, naming its field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate::identity(self)?;
        validate::limits(self)?;
        validate::peers(self)?;
        validate::secrets(self)?;
        validate::timing(self)
    }
}

impl Timing {
    /// The least margin between the claim lease and the follower lease: a tenth of the
    /// follower lease, at least [`MIN_MARGIN_MS`].
    pub fn min_margin_ms(&self) -> u64 {
        (self.follower_lease_ms / 10).max(MIN_MARGIN_MS)
    }
}

/// A timing profile given by a flag or the environment wins over the file's timings as any
/// flag wins over the file: the file's `[timing]` values are dropped before the flags' are laid
/// over it (timings given beside the profile in the flags still override it).
fn profile_replaces_timings(file: &mut toml::Table, overrides: &toml::Table) {
    let flag_profile = overrides
        .get("timing")
        .and_then(toml::Value::as_table)
        .is_some_and(|t| t.contains_key("profile"));
    if let (true, Some(toml::Value::Table(timing))) = (flag_profile, file.get_mut("timing")) {
        for field in [
            "profile",
            "heartbeat_ms",
            "follower_lease_ms",
            "lease_ms",
            "election_timeout_max_ms",
        ] {
            timing.remove(field);
        }
    }
}

/// The config file at `path` as a TOML table, a relative `data_dir` in it made relative to
/// the file (so that a cluster works from any working directory).
fn read_table(path: &Path) -> Result<toml::Table, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| parse_error(path, &text, e))?;
    if let (Some(toml::Value::String(d)), Some(dir)) = (table.get_mut("data_dir"), path.parent()) {
        if Path::new(d.as_str()).is_relative() {
            *d = dir.join(&*d).to_string_lossy().into_owned();
        }
    }
    Ok(table)
}

/// A TOML error in the file at `path`, its message pointing at the line.
fn parse_error(path: &Path, text: &str, e: toml::de::Error) -> ConfigError {
    ConfigError::Parse {
        path: path.to_path_buf(),
        message: e.message().to_string() + &span_hint(text, e.span()),
    }
}

/// Lays `over` onto `base`: tables are merged key by key, any other value replaces.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(key, v);
            }
        }
    }
}

/// Turns a TOML error span into " (line L)" so the message points into the file.
fn span_hint(text: &str, span: Option<std::ops::Range<usize>>) -> String {
    match span {
        Some(r) => {
            let line = text[..r.start.min(text.len())].matches('\n').count() + 1;
            format!(" (line {line})")
        }
        None => String::new(),
    }
}

/// The config of a one-member cluster in `data_dir`, for in-process tests.
#[cfg(test)]
pub(crate) fn single_member(data_dir: &Path, mode: Mode) -> Config {
    let cfg = Config {
        id: 1,
        listen: Some("127.0.0.1:0".parse().expect("an address")),
        data_dir: data_dir.to_path_buf(),
        mode,
        cluster_id: "t".into(),
        cluster_secret: None,
        cluster_secret_accepted: None,
        admin_token: None,
        store_url: None,
        insecure: false,
        seed: Some(1),
        timing: Timing::default(),
        max_watchers: DEFAULT_MAX_WATCHERS,
        max_watchers_per_client: DEFAULT_MAX_WATCHERS_PER_CLIENT,
        max_connections: DEFAULT_MAX_CONNECTIONS,
        join: None,
        priority_settle_ms: None,
        nonvoter: false,
        nonvoters: NonVoters::default(),
        tls: None,
        peers: vec![Peer {
            id: 1,
            addr: "127.0.0.1:9".into(),
            priority: 0,
        }],
    };
    cfg.validate().expect("a valid config");
    cfg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_addresses_are_host_and_port() {
        assert!(check_addr("127.0.0.1:7001").is_ok());
        assert!(check_addr("electd-3.electd:7000").is_ok());
        for bad in ["", "x", ":7000", "h:", "h:0", "h:99999"] {
            assert!(check_addr(bad).is_err(), "{bad}");
        }
    }

    const GOOD: &str = r#"
id = 2
data_dir = "/tmp/x"
insecure = true
[[peers]]
id = 1
addr = "127.0.0.1:7001"
[[peers]]
id = 2
addr = "127.0.0.1:7002"
[[peers]]
id = 3
addr = "127.0.0.1:7003"
"#;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        let c = Config::from_toml(text, Path::new("test.toml"))?;
        c.validate()?;
        Ok(c)
    }

    fn err(text: &str) -> String {
        parse(text).expect_err("config must be refused").to_string()
    }

    /// Issue 33: `sslmode=require` passed validation and could never connect (the client has
    /// no TLS); now it is refused, naming the field.
    #[test]
    fn a_store_url_that_requires_tls_is_refused_naming_the_field() {
        let with = |url: &str| format!("mode = \"mutex\"\nstore_url = \"{url}\"\n{GOOD}");
        let e = err(&with("postgres://u:p@127.0.0.1:5432/db?sslmode=require"));
        assert!(e.starts_with("store_url: sets sslmode=require"), "{e}");
        assert!(parse(&with("postgres://u:p@127.0.0.1:5432/db?sslmode=disable")).is_ok());
        assert!(parse(&with("postgres://u:p@127.0.0.1:5432/db")).is_ok());
    }

    #[test]
    fn defaults_fill_in() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.mode, Mode::Quorum);
        assert_eq!(c.cluster_id, "electd");
        assert_eq!(c.timing, Timing::default());
        assert_eq!(c.timing.effective_lease_ms(), 120);
        assert_eq!(c.listen_addr(), "127.0.0.1:7002".parse().unwrap());
        assert_eq!(c.member_ids(), vec![1, 2, 3]);
    }

    #[test]
    fn heartbeat_must_be_at_most_a_third_of_the_claim_lease() {
        let text = format!("{GOOD}\n[timing]\nheartbeat_ms = 5000\n");
        assert_eq!(
            err(&text),
            "timing.heartbeat_ms (5000) must be at most 1/3 of the default claim lease, \
             timing.follower_lease_ms less a fifth (120), or the claim lapses between two probes"
        );
        let text = format!("{GOOD}\n[timing]\nheartbeat_ms = 41\n");
        assert!(err(&text).starts_with("timing.heartbeat_ms (41) must be at most 1/3"));
        let text = format!("{GOOD}\n[timing]\nheartbeat_ms = 40\n");
        assert!(parse(&text).is_ok());
        let text = format!("{GOOD}\n[timing]\nlease_ms = 80\n");
        assert!(err(&text)
            .starts_with("timing.heartbeat_ms (30) must be at most 1/3 of timing.lease_ms (80)"));
    }

    /// The preferred leader's settle time and `join` are checked up front, naming the field.
    #[test]
    fn the_settle_time_and_join_are_checked() {
        // Top-level fields go before the first [[peers]] table.
        let with = |line: &str| format!("{line}\n{GOOD}");
        assert!(err(&with("priority_settle_ms = 100")).starts_with(
            "priority_settle_ms (100) must be from two follower leases (300) to one hour"
        ));
        let cfg = parse(&with("priority_settle_ms = 300")).unwrap();
        assert_eq!(cfg.effective_priority_settle_ms(), 300);
        assert_eq!(parse(GOOD).unwrap().effective_priority_settle_ms(), 10_000);
        assert!(err(&with("join = \"nowhere\"")).starts_with("join: \"nowhere\" must be HOST:PORT"));
        assert!(parse(&with("join = \"127.0.0.1:7001\"")).is_ok());
        assert!(err(&with("join = \"127.0.0.1:7001\"\nmode = \"bully\""))
            .starts_with("join: bully mode keeps the members of its config"));
        let prio = GOOD.replace(
            "id = 3\naddr = \"127.0.0.1:7003\"",
            "id = 3\naddr = \"127.0.0.1:7003\"\npriority = 7",
        );
        assert_eq!(parse(&prio).unwrap().peers[2].priority, 7);
    }

    /// A non-voter needs `join`; the absence rule's bounds name the field.
    #[test]
    fn nonvoters_are_checked() {
        let with = |line: &str| format!("{line}\n{GOOD}");
        assert!(err(&with("nonvoter = true")).starts_with("nonvoter: needs join"));
        let nv = parse(&with("nonvoter = true\njoin = \"127.0.0.1:7001\"")).unwrap();
        assert!(nv.nonvoter);
        assert_eq!(nv.nonvoters, NonVoters::default());
        let section = |body: &str| format!("{GOOD}[nonvoters]\n{body}\n");
        assert!(err(&section("remove_after_ms = 999")).starts_with(
            "nonvoters.remove_after_ms (999) must be from four follower leases and 1000 (1000)"
        ));
        assert!(err(&section("remove_after_ms = 86400001")).contains("to one day"));
        let cfg = parse(&section("max = 0\nremove_after_ms = 1000")).unwrap();
        assert_eq!(
            (cfg.nonvoters.max, cfg.effective_remove_after_ms()),
            (0, 1000)
        );
        assert_eq!(parse(GOOD).unwrap().effective_remove_after_ms(), 30_000);
        assert!(err(&section("maximum = 3")).contains("maximum"));
    }

    /// What was seen accepted before: heartbeat 1 / follower lease 4 (the default lease then
    /// equalled the follower lease), and a 1 ms margin over ten minutes.
    #[test]
    fn the_claim_lease_keeps_the_margin_the_safety_argument_states() {
        let timing = |hb: u64, f: u64, l: u64| {
            format!(
                "{GOOD}\n[timing]\nheartbeat_ms = {hb}\nfollower_lease_ms = {f}\nlease_ms = {l}\n"
            )
        };
        assert_eq!(
            err(&timing(1, 4, 0)),
            "timing.follower_lease_ms (4) must be between 10 and 600000"
        );
        assert_eq!(
            err(&timing(30, 600_000, 599_999)),
            "timing.lease_ms (599999) must stay at least 60000 ms below \
             timing.follower_lease_ms (600000): at most 540000 (the margin is a tenth of the \
             follower lease, at least 2 ms)"
        );
        assert!(parse(&timing(30, 600_000, 540_000)).is_ok());
        assert!(err(&timing(30, 150, 150))
            .starts_with("timing.lease_ms (150) must stay at least 15 ms below"));
        assert!(parse(&timing(30, 150, 135)).is_ok());
        // Small leases: the margin is at least 2 ms.
        assert!(err(&timing(2, 12, 11))
            .starts_with("timing.lease_ms (11) must stay at least 2 ms below"));
        assert!(
            parse(&timing(2, 12, 0)).is_ok(),
            "beat 2 / follower lease 12 by default"
        );
        assert!(parse(&timing(100, 1000, 0)).is_ok());
    }

    #[test]
    fn old_timing_names_work_or_say_what_to_use() {
        let text = format!("{GOOD}\n[timing]\nelection_timeout_max_ms = 300\n");
        let c = parse(&text).unwrap();
        assert_eq!(c.timing.follower_lease_ms, 300);
        assert_eq!(c.timing.effective_lease_ms(), 240);
        let text = format!("{GOOD}\n[timing]\nelection_timeout_min_ms = 150\n");
        let e = err(&text);
        assert!(
            e.contains("timing.election_timeout_min_ms is no longer used")
                && e.contains("follower_lease_ms"),
            "{e}"
        );
        let text =
            format!("{GOOD}\n[timing]\nelection_timeout_max_ms = 300\nfollower_lease_ms = 200\n");
        assert!(err(&text).contains("give only follower_lease_ms"));
        let text = format!("{GOOD}\n[timing]\nelection_timeout = 300\n");
        assert!(err(&text).contains("unknown field `election_timeout`"));
    }

    #[test]
    fn self_must_be_a_peer() {
        let text = GOOD.replace("id = 2\ndata_dir", "id = 9\ndata_dir");
        assert!(err(&text).starts_with("id: 9 is not among the peers"));
    }

    #[test]
    fn duplicate_ids_and_addrs_refused() {
        let text = GOOD.replace("id = 3", "id = 1");
        assert_eq!(err(&text), "peers[2].id: 1 appears more than once");
        let text = GOOD.replace("7003", "7001");
        assert_eq!(
            err(&text),
            "peers[2].addr: 127.0.0.1:7001 appears more than once"
        );
    }

    #[test]
    fn bad_addr_and_mode_and_unknown_field() {
        let text = GOOD.replace("127.0.0.1:7003", "nowhere");
        assert!(err(&text).starts_with("peers[2].addr: \"nowhere\" is not an address"));
        // A host name is an address (Kubernetes' stable pod names) …
        let named = GOOD.replace("127.0.0.1:7003", "electd-2.electd.default.svc:7000");
        assert!(parse(&named).is_ok());
        for bad in [
            "999.1.1.1:7000",
            "host:0",
            "host:x",
            "-host:7000",
            "ho st:7000",
            ":7000",
            "1.2.3.4:0",
            "host:+80",
            "[::1]x:80",
            "\u{1892e}:65535",
        ] {
            let text = GOOD.replace("127.0.0.1:7003", bad);
            assert!(err(&text).starts_with("peers[2].addr:"), "{bad}");
        }
        // … but a node must be told where to bind when its own address is one.
        let own = GOOD.replace("127.0.0.1:7002", "electd-1.electd:7000");
        assert!(
            err(&own).starts_with("listen: must be given"),
            "{}",
            err(&own)
        );
        let own = format!("listen = \"0.0.0.0:7000\"\n{own}");
        assert_eq!(
            parse(&own).unwrap().listen_addr(),
            "0.0.0.0:7000".parse().unwrap()
        );
        let text = format!("mode = \"paxos\"\n{GOOD}");
        assert!(
            err(&text).contains("unknown variant `paxos`"),
            "{}",
            err(&text)
        );
        let text = format!("colour = 1\n{GOOD}");
        assert!(err(&text).contains("unknown field `colour`"));
        let text = GOOD.replace("id = 2\n", "");
        assert!(err(&text).contains("missing field `id`"));
    }

    #[test]
    fn cluster_id_and_secret_rules() {
        let text = format!("cluster_id = \"a b\"\n{GOOD}");
        assert!(err(&text).starts_with("cluster_id:"));
        let text = format!("cluster_secret = \"short\"\n{GOOD}");
        assert!(err(&text).starts_with("cluster_secret: must be at least 16"));
    }

    #[test]
    fn a_cluster_without_a_secret_is_refused_unless_insecure() {
        let secure = GOOD.replace("insecure = true\n", "");
        let e = err(&secure);
        assert!(
            e.starts_with("cluster_secret: a cluster of 3 members needs one"),
            "{e}"
        );
        assert!(e.contains("insecure = true"), "{e}");
        let with = format!("cluster_secret = \"0123456789abcdef0123\"\n{secure}");
        assert!(!parse(&with).unwrap().insecure);
        // One member has no peers to authenticate.
        let alone = "id = 1\ndata_dir = \"/tmp/x\"\n[[peers]]\nid = 1\naddr = \"127.0.0.1:7001\"\n";
        assert!(parse(alone).is_ok());
    }

    #[test]
    fn secrets_are_never_serialised() {
        let text = format!("cluster_secret = \"0123456789abcdef0123\"\nadmin_token = \"0123456789abcdef0123\"\n{GOOD}");
        let c = parse(&text).unwrap();
        let json = serde_json::to_string(&c).unwrap();
        assert!(!json.contains("0123456789abcdef"));
        let debug = format!("{c:?}");
        assert!(!debug.contains("0123456789abcdef"), "{debug}");
        assert!(debug.contains("REDACTED"), "{debug}");
    }
}
