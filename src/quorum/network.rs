//! openraft's network over the shared peer transport: `/peer/raft/append`, `/peer/raft/vote`
//! and `/peer/raft/snapshot`. The remote answers `Result<Response, RaftError>` as JSON.
//!
//! Error mapping (`docs/design/openraft.md`): a refused connection is `Unreachable` (the replication stream
//! then backs off for one heartbeat interval, well below the election timeout, so a healed peer
//! is back within a heartbeat); a timeout is `Timeout`; anything else is `Network`.

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

use super::types::TypeConfig;
use crate::role::NodeId;
use crate::transport::{Transport, TransportError};

pub const PATH_APPEND: &str = "/peer/raft/append";
pub const PATH_VOTE: &str = "/peer/raft/vote";
pub const PATH_SNAPSHOT: &str = "/peer/raft/snapshot";
/// Not an openraft RPC: a leader's resignation (see `Resign`).
pub const PATH_RESIGN: &str = "/peer/raft/resign";
/// Not an openraft RPC: electd's pre-vote (see `election`).
pub const PATH_PREVOTE: &str = "/peer/raft/prevote";

/// Creates one connection value per target; all share the transport and its HTTP client.
#[derive(Clone)]
pub struct RaftNet {
    pub transport: Arc<Transport>,
    /// Backoff after `Unreachable`: one heartbeat interval.
    pub backoff: Duration,
}

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
