//! [`MutexNode`] as the node's [`Engine`]: the trait's verbs are the node's own. Mutex mode
//! has no peer messages: its nodes talk to the store only.

use std::sync::Arc;

use axum::Router;
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::node::MutexNode;
use crate::engine::{Engine, Judged, ResignError};
use crate::role::{NodeId, Resigned};

impl Engine for MutexNode {
    fn view(&self) -> Judged {
        MutexNode::view(self)
    }

    fn routes(self: Arc<Self>) -> Router {
        Router::new()
    }

    fn status(&self) -> serde_json::Value {
        MutexNode::status(self)
    }

    fn health(&self) -> Result<(), String> {
        self.running
            .check("the beat (one statement to the store a heartbeat)")
    }

    fn resign(&self, to: Option<NodeId>) -> BoxFuture<'_, Result<Resigned, ResignError>> {
        Box::pin(MutexNode::resign(self, to))
    }

    fn shutdown(&self, stop: CancellationToken) -> BoxFuture<'_, ()> {
        MutexNode::shutdown(self);
        stop.cancel();
        Box::pin(async {})
    }
}
