//! How quorum mode starts openraft: on the store (`storage/raft.rs`), over the peer transport
//! (`network.rs`, [`RaftNet`]), with its config from electd's timings (`types.rs`,
//! `raft_config`); then the membership bootstrapped from the config on a new data dir. And why
//! that could fail ([`QuorumError`]). What the node does next (its identity, its core) is
//! `node/mod.rs`'s.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{InitializeError, RaftError};
use openraft::{BasicNode, Raft};

use super::network::RaftNet;
use super::storage::{LogStore, StateMachine, Store, StoreError};
use super::types::{raft_config, TypeConfig};
use crate::config::ValidConfig;
use crate::role::NodeId;
use crate::transport::Transport;

/// Why quorum mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum QuorumError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("openraft refused the timing config: {0}")]
    Config(Box<openraft::ConfigError>),
    #[error("openraft failed to start: {0}")]
    Start(String),
}

/// Starts openraft on `store`, over `transport`, and bootstraps the membership from the config.
pub async fn start_raft(
    cfg: &ValidConfig,
    transport: &Arc<Transport>,
    store: &Arc<Store>,
) -> Result<Raft<TypeConfig>, QuorumError> {
    let raft_cfg = raft_config(&cfg.cluster_id, &cfg.timing).map_err(QuorumError::Config)?;
    let net = RaftNet {
        transport: transport.clone(),
        backoff: Duration::from_millis(cfg.timing.heartbeat_ms),
    };
    let raft = Raft::new(
        cfg.id,
        Arc::new(raft_cfg),
        net,
        LogStore(store.clone()),
        StateMachine(store.clone()),
    )
    .await
    .map_err(|e| QuorumError::Start(e.to_string()))?;
    bootstrap(&raft, cfg).await?;
    Ok(raft)
}

/// Bootstraps the membership from the config on a new data dir; a node that joins, or has
/// voted or kept a log, keeps what it has.
async fn bootstrap(raft: &Raft<TypeConfig>, cfg: &ValidConfig) -> Result<(), QuorumError> {
    let members: BTreeMap<NodeId, BasicNode> = cfg
        .peers
        .iter()
        .map(|p| (p.id, BasicNode::new(&p.addr)))
        .collect();
    let bootstrap = if cfg.join.is_some() {
        // A node that joins takes its membership from the cluster's log.
        tracing::info!("joining: the membership comes from the cluster, not from peers");
        Ok(())
    } else if raft
        .is_initialized()
        .await
        .map_err(|e| QuorumError::Start(e.to_string()))?
    {
        // openraft refuses to initialise a node that has voted or has a log, and logs an
        // ERROR saying so: only a new data dir is initialised. (Asked of openraft's core, a
        // round trip that also has its metrics, the term among them, loaded before the node
        // answers: a node skipping the call answered term 0 after a restart.)
        tracing::debug!("membership already initialised (the node has voted or has a log)");
        Ok(())
    } else {
        raft.initialize(members).await
    };
    match bootstrap {
        Ok(()) => tracing::info!("bootstrapped the membership from the config"),
        Err(RaftError::APIError(InitializeError::NotAllowed(_))) => {
            tracing::debug!("membership already initialised (the node has voted or has a log)")
        }
        Err(e) => tracing::warn!(error = %e, "initialize failed"),
    }
    Ok(())
}
