//! openraft's network over the shared peer transport: the sending side of openraft's RPCs
//! ([`RaftNet`]: one connection value per target, all on the transport and its HTTP client);
//! the receiving side is protocol.rs.
//!
//! Error mapping of the sending side (`docs/design/openraft.md`): a refused connection is
//! `Unreachable` (the replication stream then backs off for one heartbeat interval, well below
//! the follower lease, so a healed peer is back within a beat); a timeout is `Timeout`;
//! anything else is `Network`.

use std::sync::Arc;
use std::time::Duration;

use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Timeout, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, RPCTypes};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::protocol::{PATH_APPEND, PATH_SNAPSHOT, PATH_VOTE};
use super::types::TypeConfig;
use crate::role::NodeId;
use crate::transport::{Transport, TransportError};

/// openraft's network: creates one connection value per target; all share the transport and
/// its HTTP client.
#[derive(Clone)]
pub struct RaftNet {
    pub transport: Arc<Transport>,
    /// Backoff after `Unreachable`: one heartbeat interval.
    pub backoff: Duration,
}

/// openraft's connection to one peer.
pub struct RaftConn {
    target: NodeId,
    net: RaftNet,
}

impl RaftNetworkFactory<TypeConfig> for RaftNet {
    type Network = RaftConn;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> RaftConn {
        RaftConn {
            target,
            net: self.clone(),
        }
    }
}

impl RaftConn {
    async fn rpc<Req, Resp, E>(
        &self,
        path: &str,
        kind: &'static str,
        action: RPCTypes,
        req: &Req,
        option: &RPCOption,
    ) -> Result<Resp, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let ttl = option.soft_ttl();
        let res: Result<Result<Resp, RaftError<NodeId, E>>, TransportError> = self
            .net
            .transport
            .call(self.target, path, kind, req, ttl)
            .await;
        match res {
            Ok(Ok(resp)) => Ok(resp),
            Ok(Err(remote)) => Err(RPCError::RemoteError(RemoteError::new(self.target, remote))),
            Err(e @ TransportError::Unreachable(..)) => {
                Err(RPCError::Unreachable(Unreachable::new(&e)))
            }
            Err(TransportError::Timeout(..)) => Err(RPCError::Timeout(Timeout {
                action,
                id: self.net.transport.id(),
                target: self.target,
                timeout: ttl,
            })),
            Err(e) => Err(RPCError::Network(NetworkError::new(&e))),
        }
    }
}

impl RaftNetwork<TypeConfig> for RaftConn {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let kind = if rpc.entries.is_empty() {
            "heartbeat"
        } else {
            "append"
        };
        self.rpc(PATH_APPEND, kind, RPCTypes::AppendEntries, &rpc, &option)
            .await
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        self.rpc(
            PATH_SNAPSHOT,
            "snapshot",
            RPCTypes::InstallSnapshot,
            &rpc,
            &option,
        )
        .await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        self.rpc(PATH_VOTE, "vote", RPCTypes::Vote, &rpc, &option)
            .await
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(self.net.backoff))
    }
}
