//! The cluster directory: its `node*.toml` members, the runtime files under `run/` (data dirs,
//! logs, pid files), and the errors of cluster control.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use electd::config::Config;
use electd_client::{Mode, NodeId};

/// File under `run/` with the timing flags of the last `ctl up`.
pub(super) const TIMING_FLAGS: &str = "timing-flags";

/// A cluster member as the control side sees it.
#[derive(Clone, Debug)]
pub struct Member {
    pub id: NodeId,
    pub addr: String,
    pub config: PathBuf,
}

/// Why a control command failed.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("{0}")]
    Config(#[from] electd::config::ConfigError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no node {0} in this cluster")]
    NoSuchNode(NodeId),
    #[error("no node*.toml configs in {0}")]
    Empty(PathBuf),
    #[error(transparent)]
    Api(#[from] electd_client::Error),
    #[error("{0}")]
    Usage(String),
    /// The cluster's store (mutex mode) could not be started.
    #[error("store: {0}")]
    Store(String),
    /// The cluster's TLS files could not be made or read.
    #[error("tls: {0}")]
    Tls(String),
}

pub(super) fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CtlError + '_ {
    move |source| CtlError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// A cluster directory and the binary that runs its nodes.
pub struct Cluster {
    pub dir: PathBuf,
    pub run: PathBuf,
    pub bin: PathBuf,
    pub members: Vec<Member>,
    /// Flags added to every node's command line (tests use them for timings and seeds).
    pub extra_args: Vec<String>,
    /// Nodes get SIGKILL when the thread that started them exits (tests and the chaos runner,
    /// so that a killed runner leaves no node behind); `ctl up` leaves this off.
    pub die_with_parent: bool,
    /// Nodes whose data dir is a tmpfs of this many bytes, mounted in a mount namespace of
    /// the node's own (root only): a disk a test can fill (through `/proc/PID/root`, see
    /// [`Cluster::disk_path`]) and that vanishes with the node.
    pub small_disks: std::collections::BTreeMap<NodeId, u64>,
    /// Nodes run under this libfaketime library, each with a wall clock of its own that
    /// [`Cluster::set_wall_clock`] moves (src: `wallclock.rs`); `None`: the host's clock.
    pub wall_clocks: Option<PathBuf>,
    /// The store runs under this libfaketime, its wall clock movable (chaos S22).
    pub store_wall_clock: Option<PathBuf>,
    /// One connection pool for every node's [`Client`].
    pub(super) http: reqwest::Client,
    /// Mutex mode: the cluster's PostgreSQL server, stopped and removed with the cluster.
    pub store: Option<super::postgres::Postgres>,
}

impl Cluster {
    /// Opens the cluster whose `node*.toml` configs are in `dir`.
    pub fn open(dir: &Path, bin: &Path) -> Result<Cluster, CtlError> {
        let mut members = Vec::new();
        for entry in fs::read_dir(dir).map_err(io(dir))? {
            let path = entry.map_err(io(dir))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.starts_with("node") && name.ends_with(".toml") {
                let cfg = Config::load(&path)?;
                // The cluster secret and the store's URL are not in the files: the nodes get
                // the cluster's own (`run/cluster-secret`, `run/store-url`) through their
                // environment.
                let mut checked = cfg.clone();
                checked.insecure |= checked.cluster_secret.is_none();
                if checked.store_url.is_none() {
                    checked.store_url =
                        Some("postgres://electd@127.0.0.1/electd".to_string().into());
                }
                checked.validate()?;
                let addr = cfg.own_peer().map(|p| p.addr.clone()).unwrap_or_default();
                members.push(Member {
                    id: cfg.id,
                    addr,
                    config: path,
                });
            }
        }
        if members.is_empty() {
            return Err(CtlError::Empty(dir.to_path_buf()));
        }
        members.sort_by_key(|m| m.id);
        let run = dir.join("run");
        fs::create_dir_all(&run).map_err(io(&run))?;
        // Timing flags of the last `up`, so that a node started later runs like the others.
        let extra_args = fs::read_to_string(run.join(TIMING_FLAGS))
            .map(|s| s.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let mut c = Cluster {
            dir: dir.to_path_buf(),
            run,
            bin: bin.to_path_buf(),
            members,
            extra_args,
            die_with_parent: false,
            small_disks: Default::default(),
            wall_clocks: None,
            store_wall_clock: None,
            http: electd_client::http_client()
                .timeout(Duration::from_millis(800))
                .build()
                .expect("client"),
            store: None,
        };
        // Over TLS when an earlier `up --tls` made the cluster's certificates (certs.rs).
        c.http = c.http_for(Duration::from_millis(800))?;
        Ok(c)
    }

    pub fn member(&self, id: NodeId) -> Result<&Member, CtlError> {
        self.members
            .iter()
            .find(|m| m.id == id)
            .ok_or(CtlError::NoSuchNode(id))
    }

    pub fn ids(&self) -> Vec<NodeId> {
        self.members.iter().map(|m| m.id).collect()
    }

    pub fn pid_file(&self, id: NodeId) -> PathBuf {
        self.run.join(format!("node{id}.pid"))
    }

    pub fn log_file(&self, id: NodeId) -> PathBuf {
        self.run.join(format!("node{id}.log"))
    }

    /// Data dir of node `id` in `mode`: each mode keeps its own state.
    pub fn data_dir(&self, mode: Mode, id: NodeId) -> PathBuf {
        self.run
            .join("data")
            .join(mode.as_str())
            .join(format!("node{id}"))
    }

    /// The mode a node of the cluster was last started in (quorum if never).
    pub fn mode(&self) -> Mode {
        fs::read_to_string(self.run.join("mode"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or_default()
    }
}
