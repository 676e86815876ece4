//! Local cluster control: start, stop, kill, pause and partition the nodes of a cluster
//! directory (`node*.toml` files, runtime files under `run/`), by pid file, never by name.
//!
//! `electd ctl ...` (and so `scripts/cluster.sh`), the integration tests and the chaos runner
//! all drive clusters through this one module.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::api::LeaderInfo;
use crate::config::{Config, Mode, Timing};
use crate::faults::FaultSet;
use crate::role::{NodeId, Role};

/// The port every node of a test or chaos cluster listens on, each on its own loopback address.
/// Below the kernel's ephemeral range (32768–60999), so no outgoing connection can hold it.
pub const BLOCK_NODE_PORT: u16 = 7100;
/// The port of the claim socket on `127.A.B.254`: whoever holds it owns the block.
const BLOCK_CLAIM_PORT: u16 = 7099;

/// A block of loopback addresses `127.A.B.0/24` that this process owns while the value lives,
/// for one test or chaos cluster: node N listens on `127.A.B.(10+N):7100`.
///
/// Ports taken from the ephemeral range and freed again can be taken by anything else (a
/// parallel test's cluster, an outgoing connection) before a node restarts on them. A block
/// cannot: nothing else binds these addresses, and the block is claimed by a listening socket
/// on `127.A.B.254`, so two processes (two `scripts/test.sh` runs, parallel tests) never share
/// one. The block is picked from the process id and a per-process counter, skipping held ones.
pub struct AddrBlock {
    a: u8,
    b: u8,
    _claim: std::net::TcpListener,
}

impl AddrBlock {
    /// Claims a free block; panics only when 4096 candidates are all held.
    pub fn claim() -> AddrBlock {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let pid = u64::from(std::process::id());
        for _ in 0..4096 {
            let k = splitmix(pid << 20 ^ NEXT.fetch_add(1, Ordering::Relaxed));
            // 127.0.x.x is left to the bundled cluster and to everything else on the host.
            let a = 1 + (k % 254) as u8;
            let b = (k >> 8) as u8;
            let ip = std::net::Ipv4Addr::new(127, a, b, 254);
            if let Ok(l) = std::net::TcpListener::bind((ip, BLOCK_CLAIM_PORT)) {
                return AddrBlock { a, b, _claim: l };
            }
        }
        panic!("no free 127.A.B.0/24 address block among 4096 candidates");
    }

    /// The loopback IP of node `id` (1-based).
    pub fn ip(&self, id: NodeId) -> String {
        format!("127.{}.{}.{}", self.a, self.b, 10 + id)
    }

    /// `ip:port` of nodes 1..=n.
    pub fn addrs(&self, n: usize) -> Vec<String> {
        (1..=n as NodeId)
            .map(|id| format!("{}:{BLOCK_NODE_PORT}", self.ip(id)))
            .collect()
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// File under `run/` with the timing flags of the last `ctl up`.
const TIMING_FLAGS: &str = "timing-flags";

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
    Config(#[from] crate::config::ConfigError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no node {0} in this cluster")]
    NoSuchNode(NodeId),
    #[error("no node*.toml configs in {0}")]
    Empty(PathBuf),
    #[error("node {0}: {1}")]
    Http(NodeId, String),
    #[error("{0}")]
    Usage(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CtlError + '_ {
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
    client: reqwest::Client,
}

/// One row of `status`.
#[derive(Clone, Debug)]
pub enum NodeState {
    Down,
    Paused,
    Unreachable(String),
    Up(LeaderInfo),
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
                cfg.validate()?;
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
        Ok(Cluster {
            dir: dir.to_path_buf(),
            run,
            bin: bin.to_path_buf(),
            members,
            extra_args,
            die_with_parent: false,
            client: reqwest::Client::builder()
                .pool_idle_timeout(crate::server::CLIENT_IDLE)
                .no_proxy()
                .timeout(Duration::from_millis(800))
                .build()
                .expect("client"),
        })
    }

    /// Sets the flags every node of this cluster directory is started with from now on (timing
    /// overrides of `ctl up --heartbeat-ms … --follower-lease-ms …`), and keeps them in
    /// `run/timing-flags` for later `start N`; an empty list removes the file.
    pub fn set_timing_flags(&mut self, flags: Vec<String>) -> Result<(), CtlError> {
        let path = self.run.join(TIMING_FLAGS);
        if flags.is_empty() {
            let _ = fs::remove_file(&path);
        } else {
            fs::write(&path, flags.join(" ")).map_err(io(&path))?;
        }
        self.extra_args = flags;
        Ok(())
    }

    /// Writes the configs of an `n`-node cluster into `dir` (tests and the chaos runner).
    /// `addrs[i]` is node i+1's address.
    pub fn write_configs(
        dir: &Path,
        addrs: &[String],
        mode: Mode,
        timing: Timing,
        cluster_id: &str,
    ) -> Result<(), CtlError> {
        fs::create_dir_all(dir).map_err(io(dir))?;
        let mut peers = String::new();
        for (i, a) in addrs.iter().enumerate() {
            peers.push_str(&format!("[[peers]]\nid = {}\naddr = \"{a}\"\n\n", i + 1));
        }
        for i in 1..=addrs.len() {
            let text = format!(
                "id = {i}\ndata_dir = \"run/data/node{i}\"\nmode = \"{}\"\ncluster_id = \"{cluster_id}\"\n\n[timing]\nheartbeat_ms = {}\nfollower_lease_ms = {}\nlease_ms = {}\n\n{peers}",
                mode.as_str(),
                timing.heartbeat_ms,
                timing.follower_lease_ms,
                timing.lease_ms,
            );
            let path = dir.join(format!("node{i}.toml"));
            fs::write(&path, text).map_err(io(&path))?;
        }
        Ok(())
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

    /// The pid of node `id` if its process is alive (a zombie counts as dead and is reaped).
    pub fn pid(&self, id: NodeId) -> Option<i32> {
        let pid: i32 = fs::read_to_string(self.pid_file(id))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        process_state(pid).filter(|s| *s != 'Z').map(|_| pid)
    }

    /// Starts node `id` in `mode` on its data dir, unless it is already running.
    pub fn start(&self, id: NodeId, mode: Mode) -> Result<i32, CtlError> {
        if let Some(pid) = self.pid(id) {
            return Ok(pid);
        }
        let m = self.member(id)?;
        let mode_file = self.run.join("mode");
        fs::write(&mode_file, mode.as_str()).map_err(io(&mode_file))?;
        let data = self.data_dir(mode, id);
        fs::create_dir_all(&data).map_err(io(&data))?;
        let log_path = self.log_file(id);
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io(&log_path))?;
        let err = log.try_clone().map_err(io(&log_path))?;
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--config")
            .arg(&m.config)
            .arg("--mode")
            .arg(mode.as_str())
            .arg("--data-dir")
            .arg(&data)
            .args(&self.extra_args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err);
        if let Ok(secret) = fs::read_to_string(self.run.join("cluster-secret")) {
            cmd.env("ELECTD_CLUSTER_SECRET", secret.trim());
        }
        if let Some(token) = self.admin_token() {
            cmd.env("ELECTD_ADMIN_TOKEN", token);
        }
        // Own process group: a Ctrl-C in the shell that ran `up` does not reach the nodes.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        if self.die_with_parent {
            let parent = std::process::id() as i32;
            // SAFETY: prctl and getppid are async-signal-safe; nothing is allocated.
            unsafe {
                std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    if libc::getppid() != parent {
                        libc::_exit(1);
                    }
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().map_err(io(&self.bin))?;
        let pid = child.id() as i32;
        let pid_path = self.pid_file(id);
        fs::write(&pid_path, format!("{pid}\n")).map_err(io(&pid_path))?;
        // The child is reaped by `pid()` (waitpid) or by init once we exit.
        std::mem::forget(child);
        Ok(pid)
    }

    /// Generates the admin token (`run/admin-token`) and the cluster secret
    /// (`run/cluster-secret`) unless they exist; nodes started afterwards get both through
    /// their environment, never on their command line.
    pub fn ensure_secrets(&self) -> Result<(), CtlError> {
        for name in ["admin-token", "cluster-secret"] {
            let path = self.run.join(name);
            if fs::metadata(&path).map(|m| m.len() > 0).unwrap_or(false) {
                continue;
            }
            let mut bytes = [0u8; 24];
            rand::RngCore::fill_bytes(&mut rand::rngs::OsRng, &mut bytes);
            fs::write(&path, hex::encode(bytes) + "\n").map_err(io(&path))?;
            use std::os::unix::fs::PermissionsExt;
            let _ = fs::set_permissions(&path, fs::Permissions::from_mode(0o600));
        }
        Ok(())
    }

    /// Sends `sig` to node `id`; `false` if it is not running.
    pub fn signal(&self, id: NodeId, sig: i32) -> bool {
        match self.pid(id) {
            // SAFETY: plain kill(2) on a pid read from our own pid file and checked alive.
            Some(pid) => unsafe { libc::kill(pid, sig) == 0 },
            None => false,
        }
    }

    /// Waits at most `limit` for node `id` to exit; removes its pid file once it has.
    pub fn wait_exit(&self, id: NodeId, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if self.pid(id).is_none() {
                let _ = fs::remove_file(self.pid_file(id));
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        false
    }

    /// SIGKILL, then wait until gone.
    pub fn kill(&self, id: NodeId) -> bool {
        let sent = self.signal(id, libc::SIGKILL);
        self.wait_exit(id, Duration::from_secs(5));
        sent
    }

    /// SIGTERM, wait at most `grace`, then SIGKILL what is left.
    pub fn stop(&self, id: NodeId, grace: Duration) -> bool {
        if !self.signal(id, libc::SIGTERM) {
            let _ = fs::remove_file(self.pid_file(id));
            return false;
        }
        // A paused process cannot act on SIGTERM.
        self.signal(id, libc::SIGCONT);
        if !self.wait_exit(id, grace) {
            self.kill(id);
        }
        true
    }

    /// Stops every node: SIGTERM to all, then SIGKILL to what is left after `grace`.
    pub fn down(&self, grace: Duration) {
        for m in &self.members {
            if self.signal(m.id, libc::SIGTERM) {
                self.signal(m.id, libc::SIGCONT);
            }
        }
        let until = Instant::now() + grace;
        for m in &self.members {
            let left = until.saturating_duration_since(Instant::now());
            if !self.wait_exit(m.id, left) {
                self.kill(m.id);
            }
            let _ = fs::remove_file(self.pid_file(m.id));
        }
    }

    pub fn admin_token(&self) -> Option<String> {
        fs::read_to_string(self.run.join("admin-token"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
    }

    fn url(&self, id: NodeId, path: &str) -> Result<String, CtlError> {
        Ok(format!("http://{}{path}", self.member(id)?.addr))
    }

    /// `GET /v1/leader` of node `id`.
    pub async fn leader_info(&self, id: NodeId) -> Result<LeaderInfo, CtlError> {
        let res = self
            .client
            .get(self.url(id, "/v1/leader")?)
            .send()
            .await
            .map_err(|e| CtlError::Http(id, e.to_string()))?;
        res.json()
            .await
            .map_err(|e| CtlError::Http(id, e.to_string()))
    }

    /// Every node's events of `mode`, read from their `events.jsonl` files (which survive kills).
    pub fn events(&self, mode: Mode) -> Vec<crate::events::Event> {
        self.ids()
            .into_iter()
            .flat_map(|id| {
                crate::events::read_events_file(
                    &self.data_dir(mode, id).join(crate::events::EVENTS_FILE),
                )
                .unwrap_or_default()
            })
            .collect()
    }

    /// `GET /v1/status` of node `id`.
    pub async fn status(&self, id: NodeId) -> Result<serde_json::Value, CtlError> {
        let res = self
            .client
            .get(self.url(id, "/v1/status")?)
            .send()
            .await
            .map_err(|e| CtlError::Http(id, e.to_string()))?;
        res.json()
            .await
            .map_err(|e| CtlError::Http(id, e.to_string()))
    }

    /// Sends an admin request to node `id` with the admin token, if there is one; answers the
    /// HTTP status and the body.
    async fn admin(
        &self,
        id: NodeId,
        mut req: reqwest::RequestBuilder,
    ) -> Result<(reqwest::StatusCode, String), CtlError> {
        if let Some(t) = self.admin_token() {
            req = req.bearer_auth(t);
        }
        let res = req
            .send()
            .await
            .map_err(|e| CtlError::Http(id, e.to_string()))?;
        let status = res.status();
        let text = res
            .text()
            .await
            .map_err(|e| CtlError::Http(id, e.to_string()))?;
        Ok((status, text))
    }

    /// Any admin request to node `id`; answers the fault set now in force.
    async fn faults_request(
        &self,
        id: NodeId,
        set: Option<&FaultSet>,
    ) -> Result<FaultSet, CtlError> {
        let url = self.url(id, "/v1/admin/faults")?;
        let req = match set {
            Some(s) => self.client.put(url).json(s),
            None => self.client.delete(url),
        };
        let (status, text) = self.admin(id, req).await?;
        if !status.is_success() {
            return Err(CtlError::Http(id, format!("{status}: {text}")));
        }
        serde_json::from_str(&text).map_err(|e| CtlError::Http(id, e.to_string()))
    }

    /// `POST /v1/admin/resign` on node `id`, with `{"to": N}` when given: the HTTP status and
    /// the JSON body, whatever they are (tests check the refusals too).
    pub async fn resign(
        &self,
        id: NodeId,
        to: Option<NodeId>,
    ) -> Result<(u16, serde_json::Value), CtlError> {
        let mut req = self.client.post(self.url(id, "/v1/admin/resign")?);
        if let Some(to) = to {
            req = req.json(&serde_json::json!({ "to": to }));
        }
        let (status, text) = self.admin(id, req).await?;
        let body = serde_json::from_str(&text).map_err(|e| CtlError::Http(id, e.to_string()))?;
        Ok((status.as_u16(), body))
    }

    pub async fn set_faults(&self, id: NodeId, set: &FaultSet) -> Result<FaultSet, CtlError> {
        self.faults_request(id, Some(set)).await
    }

    pub async fn clear_faults(&self, id: NodeId) -> Result<FaultSet, CtlError> {
        self.faults_request(id, None).await
    }

    /// Cuts all peer traffic between the groups (each listed node's fault set). Nodes in no
    /// group are left alone.
    pub async fn partition(&self, groups: &[Vec<NodeId>]) -> Result<(), CtlError> {
        for g in groups {
            for id in g {
                self.member(*id)?;
            }
        }
        for (gi, g) in groups.iter().enumerate() {
            let others: std::collections::BTreeSet<NodeId> = groups
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != gi)
                .flat_map(|(_, o)| o.iter().copied())
                .collect();
            for id in g {
                if self.pid(*id).is_none() {
                    continue;
                }
                let set = FaultSet {
                    block_to: others.clone(),
                    block_from: others.clone(),
                    ..Default::default()
                };
                self.set_faults(*id, &set).await?;
            }
        }
        Ok(())
    }

    /// Clears every running node's fault set.
    pub async fn heal(&self) -> Result<(), CtlError> {
        for m in &self.members {
            if self.pid(m.id).is_some() {
                self.clear_faults(m.id).await?;
            }
        }
        Ok(())
    }

    /// The state of every node.
    pub async fn states(&self) -> BTreeMap<NodeId, NodeState> {
        let mut out = BTreeMap::new();
        for m in &self.members {
            let st = match self.pid(m.id) {
                None => NodeState::Down,
                Some(pid) if process_state(pid) == Some('T') => NodeState::Paused,
                Some(_) => match self.leader_info(m.id).await {
                    Ok(info) => NodeState::Up(info),
                    Err(e) => NodeState::Unreachable(e.to_string()),
                },
            };
            out.insert(m.id, st);
        }
        out
    }

    /// The leader every running, unpaused node agrees on, which itself claims the role.
    pub async fn agreed_leader(&self) -> Option<NodeId> {
        agreed(&self.states().await)
    }

    /// Waits at most `limit` for an agreed leader (polling every 50 ms).
    pub async fn wait_agreed(&self, limit: Duration) -> Option<NodeId> {
        let until = Instant::now() + limit;
        loop {
            if let Some(l) = self.agreed_leader().await {
                return Some(l);
            }
            if Instant::now() >= until {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits at most `limit` until `pred` holds for the states.
    pub async fn wait_for(
        &self,
        limit: Duration,
        pred: impl Fn(&BTreeMap<NodeId, NodeState>) -> bool,
    ) -> bool {
        let until = Instant::now() + limit;
        loop {
            if pred(&self.states().await) {
                return true;
            }
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }
}

/// The leader all answering nodes agree on, if it claims the role itself. Down and paused
/// nodes are left out; a running node that does not answer breaks the agreement.
pub fn agreed(states: &BTreeMap<NodeId, NodeState>) -> Option<NodeId> {
    let mut leader = None;
    let mut any = false;
    for st in states.values() {
        match st {
            NodeState::Down | NodeState::Paused => {}
            NodeState::Unreachable(_) => return None,
            NodeState::Up(info) => {
                let l = info.leader.as_ref()?.id;
                if leader.is_some_and(|x| x != l) {
                    return None;
                }
                leader = Some(l);
                any = true;
            }
        }
    }
    let l = leader?;
    match states.get(&l) {
        Some(NodeState::Up(info)) if any && info.role == Role::Leader => Some(l),
        _ => None,
    }
}

/// Ids of the nodes that claim `role = leader` right now.
pub fn claimants(states: &BTreeMap<NodeId, NodeState>) -> Vec<NodeId> {
    states
        .iter()
        .filter_map(|(id, s)| match s {
            NodeState::Up(i) if i.role == Role::Leader => Some(*id),
            _ => None,
        })
        .collect()
}

/// The state letter of a process from /proc (R, S, T, Z…), reaping it if it is our zombie.
fn process_state(pid: i32) -> Option<char> {
    if pid <= 0 {
        return None;
    }
    // SAFETY: waitpid with WNOHANG on a single pid; harmless if it is not our child.
    unsafe {
        libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
    }
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let cmd = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    if !String::from_utf8_lossy(&cmd).contains("electd") {
        return None; // the pid was reused by another program
    }
    // Format: pid (comm) S ...; comm may contain spaces, so split after the last ')'.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next())
}

/// Formats one `status` row.
pub fn status_row(id: NodeId, st: &NodeState) -> String {
    match st {
        NodeState::Down => format!("{id:<4} {:<10}", "down"),
        NodeState::Paused => format!("{id:<4} {:<10}", "paused"),
        NodeState::Unreachable(e) => format!("{id:<4} {:<10} {e}", "unreachable"),
        NodeState::Up(i) => format!(
            "{id:<4} {:<10} term={:<5} leader={}",
            i.role.as_str(),
            i.term,
            i.leader
                .as_ref()
                .map(|l| l.id.to_string())
                .unwrap_or_else(|| "-".into())
        ),
    }
}
