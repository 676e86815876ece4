//! The cluster directory's files: node configs for test and chaos clusters, and the timing
//! flags of the last `ctl up`.

use std::fs;
use std::path::Path;

use electd::config::{Config, NonVoters, Peer, Timing};
use electd_client::{Mode, NodeId};

use super::dir::{io, Cluster, CtlError, TIMING_FLAGS};

/// Who votes in a cluster the lab writes: nodes `1..=voters` vote; the `nonvoters` after them
/// join by themselves as members that don't vote (docs/design/nonvoters.md), through node 1,
/// and the voters remove one absent for `remove_after_ms` (the config's default when `None`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub voters: usize,
    pub nonvoters: usize,
    pub remove_after_ms: Option<u64>,
}

impl Shape {
    /// `n` voters: every cluster but those with non-voters.
    pub fn all_voters(n: usize) -> Shape {
        Shape {
            voters: n,
            nonvoters: 0,
            remove_after_ms: None,
        }
    }

    /// Every node.
    pub fn len(&self) -> usize {
        self.voters + self.nonvoters
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn voter_ids(&self) -> Vec<NodeId> {
        (1..=self.voters as NodeId).collect()
    }

    pub fn nonvoter_ids(&self) -> Vec<NodeId> {
        (self.voters as NodeId + 1..=self.len() as NodeId).collect()
    }
}

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
        let shape = Shape::all_voters(addrs.len());
        Cluster::write_configs_shaped(dir, addrs, mode, timing, cluster_id, shape)
    }

    /// [`Cluster::write_configs`] for a cluster of `shape`: a voter's peers are the voters; a
    /// non-voter's, the voters and itself, and it joins through node 1.
    pub fn write_configs_shaped(
        dir: &Path,
        addrs: &[String],
        mode: Mode,
        timing: Timing,
        cluster_id: &str,
        shape: Shape,
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
        let voters = shape.voters.min(peers.len());
        for p in &peers {
            let nonvoter = p.id as usize > voters;
            let mut known: Vec<Peer> = peers[..voters].to_vec();
            if nonvoter {
                known.push(p.clone());
            }
            let nonvoters = NonVoters {
                remove_after_ms: shape.remove_after_ms,
                ..NonVoters::default()
            };
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
                join: nonvoter.then(|| peers[0].addr.clone()),
                priority_settle_ms: None,
                nonvoter,
                nonvoters: if nonvoter {
                    NonVoters::default()
                } else {
                    nonvoters
                },
                tls: None,
                peers: known,
            };
            let path = dir.join(format!("node{}.toml", p.id));
            let text = toml::to_string(&cfg).map_err(|e| CtlError::Usage(e.to_string()))?;
            fs::write(&path, text).map_err(io(&path))?;
        }
        Ok(())
    }
}
