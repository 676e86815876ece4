//! [`QuorumNode`] as the node's [`Engine`]: the trait's verbs are the node's own.

use std::sync::Arc;

use axum::Router;
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::node::QuorumNode;
use super::protocol;
use crate::engine::{Engine, Judged, MembershipError, ResignError};
use crate::role::{NodeId, Resigned};
use electd_client::{AddMember, Members};

impl Engine for QuorumNode {
    fn view(&self) -> Judged {
        QuorumNode::view(self)
    }

    fn routes(self: Arc<Self>) -> Router {
        protocol::routes(self)
    }

    fn status(&self) -> serde_json::Value {
        QuorumNode::status(self)
    }

    /// openraft's core stopped (a storage error; the process exits right after).
    fn health(&self) -> Result<(), String> {
        let running = self.raft.metrics().borrow().running_state.clone();
        running.map_err(|e| format!("openraft stopped: {e}"))
    }

    fn resign(&self, to: Option<NodeId>) -> BoxFuture<'_, Result<Resigned, ResignError>> {
        Box::pin(QuorumNode::resign(self, to))
    }

    fn members(&self) -> Result<Members, MembershipError> {
        Ok(self.members_now())
    }

    fn add_member(&self, add: AddMember) -> BoxFuture<'_, Result<Members, MembershipError>> {
        Box::pin(QuorumNode::add_member(self, add))
    }

    fn remove_member(&self, id: NodeId) -> BoxFuture<'_, Result<Members, MembershipError>> {
        Box::pin(QuorumNode::remove_member(self, id))
    }

    /// The claim is closed before the loops are stopped, so that the driver cannot
    /// start a campaign on its way out.
    fn shutdown(&self, stop: CancellationToken) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            QuorumNode::shutdown(self).await;
            stop.cancel();
        })
    }
}
