//! Quorum mode: Raft-style, term-numbered majority vote on openraft 0.9, plus the lease-bound
//! claim that openraft does not do itself (the claim rules are `src/lease.rs`).
//!
//! | file | holds |
//! |---|---|
//! | `types.rs` | openraft's configuration: its types, and its runtime config from electd's timings |
//! | `start.rs` | how quorum mode starts openraft (on the store, over the transport, with its config) and bootstraps the membership from the config; why that may fail |
//! | `protocol.rs` | the peer protocol: paths, messages, handlers, routes |
//! | `network.rs` | openraft's network: its RPCs sent over the shared peer transport ([`RaftNet`](network::RaftNet)) |
//! | `core/` | [`QuorumCore`](core::QuorumCore): every decision about the claim, the campaign and the contact, as a state machine without I/O (`step`, `tick`) |
//! | `inbox.rs` | who may step the core: its one owner, the driver ([`CoreOwner`](inbox::CoreOwner)), and everyone else through the [`Inbox`](inbox::Inbox) (ask, read) |
//! | `quiet.rs` | when a leader without a quorum goes quiet; which leader a follower reports |
//! | `election/` | when a node may campaign: follower-lease gate, pre-vote and pledge, order of candidates, joint majorities (pure logic and the gate; its tests in `tests.rs`) |
//! | `storage/` | the durable vote and log: the store (`mod.rs`), its two slot files (`slots.rs`), openraft's view of it (`raft.rs`) |
//! | `identity.rs` | the incarnation of a data dir: a wiped one never votes twice |
//! | `hellos.rs` | [`Hellos`](hellos::Hellos): the hellos a node says to its members, the answers it records, its answers to theirs, and the incarnations a leader writes into the log before a change: how incarnations travel |
//! | `preference.rs` | the preferred leader: when a leader hands over to a member of higher priority (pure logic) |
//! | `admission.rs` | [`Admission`](admission::Admission): members that don't vote as one node sees them: a leader's writing of their joins and absence removals |
//! | `nonvoters.rs` | the leader's rules for members that don't vote: which join to admit, which absent non-voter to remove (pure logic) |
//! | `membership.rs` | [`Membership`](membership::Membership): the members in force, and adding and removing them at runtime (joint consensus) |
//! | `node/` | [`QuorumNode`] and what it is as the node's `Engine`: start, view, status, the record of role changes, resignation and graceful stop, what it does when a peer's message arrives, carrying out what the core says (`mod.rs`; what it adds to `/v1/status` in `status.rs`; its tests in `tests.rs`) |
//! | `driver/` | the one task that turns the core and does the node's own I/O: the role's ticks and probes (`driver/probe.rs`), the campaign (`driver/campaign.rs`), a new data dir's confirmation (`driver/confirm.rs`), the preferred leader (`driver/prefer.rs`), a non-voter's join and the removal of absent ones (`driver/nonvoters.rs`) |
//!
//! We enable openraft's `single-term-leader` feature: a term has at most one leader, so the term
//! alone is a fencing token, as `docs/design/api-v1.md` promises (`term` in `/v1/leader`). Without it
//! openraft may elect several leaders in one term, told apart only by node id.

mod admission;
mod core;
mod driver;
mod election;
mod hellos;
mod identity;
mod inbox;
mod membership;
mod network;
mod node;
mod nonvoters;
mod preference;
mod protocol;
mod quiet;
mod start;
mod storage;
mod types;

/// The core and what it speaks, for the lab's model checker (`lab/src/model/`): only with the
/// `flaws` feature, which only the lab enables.
#[cfg(feature = "flaws")]
pub use self::core::{
    Action, Answer, CoreTiming, Input, Observation, QuorumCore, RaftRole, RaftView,
};
pub use self::driver::Driver;
#[cfg(feature = "flaws")]
pub use self::election::{Contact, PreVoteRefusal};
#[cfg(feature = "flaws")]
pub use self::identity::{
    confirmations_needed, hello_answer, recognise, Heard, Recognition, Verdict,
};
pub use self::node::QuorumNode;
#[cfg(feature = "flaws")]
pub use self::preference::Followers;
#[cfg(feature = "flaws")]
pub use self::protocol::HelloAnswer;
pub use self::protocol::{
    PATH_APPEND, PATH_HELLO, PATH_RENEW, PATH_SNAPSHOT, PATH_VOTE, RESIGN_TIMEOUT,
};
pub use self::start::QuorumError;
pub use self::storage::{
    Disk, MemDisk, StateFile, Store, StoreError, RECOVERY_TERM_GAP, SLOT_FILES, STATE_FILE,
};
#[cfg(feature = "flaws")]
pub use openraft::{CommittedLeaderId, LogId};
// For the fuzz targets' decoders (`fuzzing.rs`).
pub(crate) use self::protocol::{Hello, PreVoteRequest, Resign};
pub(crate) use self::types::TypeConfig;
