//! Quorum mode: Raft-style, term-numbered majority vote on openraft 0.9, plus the lease-bound
//! claim that openraft does not do itself (see [`lease`]).
//!
//! - [`storage`]: the durable vote and log.
//! - [`network`]: openraft's RPCs over the shared peer transport.
//! - [`lease`]: the claim rules (pure logic).
//! - [`election`]: when a node campaigns: follower-lease gate, pre-vote, staggering (pure logic
//!   and the gate).
//! - [`types`]: openraft's type configuration.
//! - `node.rs`: [`QuorumNode`], which starts openraft (its own elections off), runs the role loop
//!   (probe, claim, demote, record events) and the election driver; `peer.rs`: its
//!   `/peer/raft/*` handlers.
//!
//! We enable openraft's `single-term-leader` feature: a term has at most one leader, so the term
//! alone is a fencing token, as `docs/design/api-v1.md` promises (`term` in `/v1/leader`). Without it
//! openraft may elect several leaders in one term, told apart only by node id.

pub mod election;
mod engine;
pub mod lease;
pub mod network;
mod node;
mod peer;
pub mod storage;
pub mod types;

pub use self::node::{QuorumError, QuorumNode, Resign};
pub use self::types::TypeConfig;
