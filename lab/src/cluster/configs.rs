//! The cluster directory's files: node configs for test and chaos clusters, and the timing
//! flags of the last `ctl up`.

use std::fs;
use std::path::Path;

use electd::config::{Config, Peer, Timing};
use electd_client::Mode;

use super::dir::{io, Cluster, CtlError, TIMING_FLAGS};

impl Cluster {
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
        let peers: Vec<Peer> = (1..)
            .zip(addrs)
            .map(|(id, addr)| Peer {
                id,
                addr: addr.clone(),
                priority: 0,
            })
            .collect();
        for p in &peers {
            let cfg = Config {
                id: p.id,
                listen: None,
                data_dir: format!("run/data/node{}", p.id).into(),
                mode,
                cluster_id: cluster_id.to_string(),
                cluster_secret: None,
                cluster_secret_accepted: None,
                admin_token: None,
                store_url: None,
                insecure: false,
                seed: None,
                timing,
                max_watchers: electd::config::DEFAULT_MAX_WATCHERS,
                max_watchers_per_client: electd::config::DEFAULT_MAX_WATCHERS_PER_CLIENT,
                max_connections: electd::config::DEFAULT_MAX_CONNECTIONS,
                join: None,
                priority_settle_ms: None,
                nonvoter: false,
                nonvoters: Default::default(),
                tls: None,
                peers: peers.clone(),
            };
            let path = dir.join(format!("node{}.toml", p.id));
            let text = toml::to_string(&cfg).map_err(|e| CtlError::Usage(e.to_string()))?;
            fs::write(&path, text).map_err(io(&path))?;
        }
        Ok(())
    }
}
