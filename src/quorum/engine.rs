//! [`QuorumNode`] as the node's [`Engine`]: its judged view, its `/peer/raft/*` routes (the
//! handlers are in `peer.rs`), its status, its handover and its shutdown.

use std::sync::Arc;

use axum::routing::post;
use axum::Router;
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::network::{PATH_APPEND, PATH_PREVOTE, PATH_RESIGN, PATH_SNAPSHOT, PATH_VOTE};
use super::node::QuorumNode;
use super::peer::{append, prevote, resign, snapshot, vote};
use crate::engine::{Engine, Judged, ResignError};
use crate::role::{NodeId, Resigned};

impl Engine for QuorumNode {
    fn view(&self) -> Judged {
        self.view_with(&self.metrics())
    }

    /// The `/peer/raft/*` routes.
    fn routes(self: Arc<Self>) -> Router {
        Router::new()
            .route(PATH_APPEND, post(append))
            .route(PATH_PREVOTE, post(prevote))
            .route(PATH_RESIGN, post(resign))
            .route(PATH_VOTE, post(vote))
            .route(PATH_SNAPSHOT, post(snapshot))
            .with_state(self)
    }

    fn status(&self) -> serde_json::Value {
        self.status_extra()
    }

    fn resign(&self, to: Option<NodeId>) -> BoxFuture<'_, Result<Resigned, ResignError>> {
        Box::pin(self.hand_over(to))
    }

    /// The claim is closed before the loops are stopped, so that the election driver cannot
    /// start a campaign on its way out.
    fn shutdown(&self, stop: CancellationToken) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.step_down().await;
            stop.cancel();
        })
    }
}
