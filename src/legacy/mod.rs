//! Legacy leader-election algorithms: the Bully algorithm (Garcia-Molina 1982) and a ring
//! election (LeLann / Tanenbaum list form with Chang–Roberts-style duplicate dropping).
//!
//! - [`core`]: what both share: the [`Algorithm`] trait, [`Ticks`], the [`Outbox`], and one
//!   shared core state machine (members, epochs, view, phase; following, leading and the
//!   `become_*` transitions, all through one `reset`) that each algorithm wraps with its own
//!   election state.
//! - [`bully`], [`ring`]: the two algorithms.
//! - `node.rs`: [`LegacyNode`], which runs either on the shared peer transport.
//!
//! Both are I/O-free state machines behind the [`Algorithm`] trait: the legacy node feeds them
//! `start`, `tick`, `step` (a received message), `delivered` / `delivery_failed` (transport
//! outcome of a message they sent) and drains [`Outbox`] after every input. Inside the
//! algorithms time is counted in ticks only; there are no clocks, no I/O and no randomness.
//!
//! **Neither algorithm has any quorum check.** Under a network partition every side elects its
//! own coordinator (for example `1,2 | 3,4,5` gives coordinators 2 and 5). This split brain is
//! the documented weakness of the legacy algorithms; they converge again on the highest id once
//! the partition heals.
//!
//! # Roles and epochs
//!
//! * The coordinator reports [`Role::Leader`](crate::role::Role::Leader); a node running an election (bully: waiting for
//!   ANSWERs or for a COORDINATOR; ring: having forwarded an ELECTION that has not completed)
//!   reports [`Role::Candidate`](crate::role::Role::Candidate) with `leader: None`; every other node reports
//!   [`Role::Follower`](crate::role::Role::Follower) with `leader` = its coordinator. A node that has been created but not
//!   yet started reports `Follower` with `leader: None` and is passive (no timers run) until it
//!   is started or a message reaches it.
//! * `epoch` is the coordinator epoch. Every message carries an epoch and a node adopts the
//!   highest epoch it sees; a new coordinator takes *max epoch seen + 1*. The highest epoch is
//!   kept in the data dir (`epoch_file.rs`) before a message names it, so a restarted node
//!   never makes an epoch (a group number) it made before; a message naming an epoch above
//!   [`core::MAX_EPOCH`] is refused.
//! * Claims of a coordinator are compared by *rank* `(epoch, leader id)`, lexicographically.
//!   A follower ignores a claim that ranks below the coordinator it follows (a stale or
//!   weaker claim; the stronger coordinator's periodic announcements will reach the weaker
//!   one and make it step down). A candidate holds `(last coordinator epoch, none)`: in the
//!   bully algorithm it therefore accepts its old coordinator again (that coordinator was
//!   alive after all); in the ring it only accepts a claim with a newer epoch than the last
//!   one it knew, so late announcements of a dead coordinator cannot interrupt an election.
//! * Neither algorithm ever follows a coordinator with a lower id than its own: hearing a
//!   newer claim of a lower id makes the node call an election instead (the bully rule, used
//!   by both). That is what makes both converge on the highest live id after a partition
//!   heals or after the highest id restarts.
//!
//! # Timeouts (ticks)
//!
//! One tick is one `timing.heartbeat_ms`; [`Ticks::from_timing`] converts the node's timing
//! settings (all values rounded up, each at least 1):
//!
//! | field | formula | with heartbeat 30, follower lease 150 ms |
//! |---|---|---|
//! | `announce_interval` | `1` (one heartbeat) | 1 |
//! | `failure_timeout` | `max(ceil(follower_lease / heartbeat), announce_interval + 1)` | 5 |
//! | `answer_timeout` | `ceil(follower_lease / 2 / heartbeat)` | 3 |
//! | `coordinator_timeout` | `failure_timeout` | 5 |
//! | ring election deadline | `coordinator_timeout × n` ([`Ticks::ring_election_deadline`]) | 25 for n = 5 |
//!
//! * A follower that hears nothing from its coordinator for `failure_timeout` ticks calls an
//!   election; the coordinator re-announces itself every `announce_interval` ticks, so with
//!   the defaults five announcements in a row must be lost (or delayed) before a follower gives
//!   up on a live coordinator.
//! * Bully: an initiator waits `answer_timeout` ticks for an ANSWER (this should exceed a
//!   round trip; if it does not, a lower node may briefly claim the role and is then overruled
//!   by the higher one), then `coordinator_timeout` ticks for the COORDINATOR after an ANSWER.
//!   A coordinator that gets an ELECTION only answers it and lets its next periodic
//!   announcement end the sender's wait, so `announce_interval` should stay below
//!   `coordinator_timeout` (it does with `from_timing`: 1 < `failure_timeout`).
//! * `failure_timeout` must exceed `announce_interval` plus the worst delivery latency, or
//!   followers of a healthy coordinator call elections.
//! * Ring: a node that has forwarded an ELECTION (a candidate) gives up on it after
//!   `coordinator_timeout × n` ticks (n = ring size: one `coordinator_timeout` per hop is a
//!   generous budget for delivery plus skipping dead successors) and starts a new election.
//!   This is what ends an election whose message was lost (for example the node holding it
//!   crashed after acknowledging it).
//!
//! # Messages per election (ids 1..=n, everybody up, nobody coordinator yet)
//!
//! * Bully, only the lowest id initiates (worst case): node 1 sends ELECTION to the n−1
//!   higher nodes, each node i = 2..n−1 sends ELECTION to its n−i higher nodes
//!   ((n−1)(n−2)/2 in all), so n(n−1)/2 ELECTIONs, as many ANSWERs, and n−1 COORDINATORs:
//!   **n² − 1** messages, O(n²). This is exact when every message takes the same time. With
//!   varying latency it costs more: a node that already follows n and only then receives
//!   node 1's late ELECTION answers it and, as the algorithm says, holds its own election
//!   (the test table shows about 1.2× for n = 5 and 1.7× for n = 15).
//! * Bully, the highest id initiates (best case): **n − 1** COORDINATORs.
//! * Ring, one initiator: n ELECTION hops and n − 1 COORDINATOR hops (the circulation stops
//!   before it would reach the node that started it): **2n − 1**; textbooks say 2n because
//!   they count the final hop back to the initiator.
//! * Ring, everybody initiates at once: the ring is ordered by ascending id, so every
//!   ELECTION except the highest id's is dropped after one hop (Chang–Roberts best case):
//!   n + (n − 1) ELECTION hops and n − 1 COORDINATOR hops, **3n − 2** (plain LeLann without
//!   dropping would need n² ELECTION hops).
//!
//! Periodic announcements (bully COORDINATOR re-announcements, ring ANNOUNCE) are not
//! part of these figures. `cargo test -p electd-lab -- --nocapture message_counts` prints the
//! measured table (the simulator, `lab/src/sim/legacy.rs`).

pub mod bully;
pub mod core;
mod epoch_file;
pub mod invitation;
mod node;
pub mod ring;

pub use self::bully::{Bully, BullyMsg};
pub use self::core::{Algorithm, MsgKind, Outbox, Ticks, MAX_EPOCH};
pub use self::epoch_file::EPOCH_FILE;
pub use self::invitation::{Invitation, InvitationMsg};
pub use self::node::LegacyNode;
pub use self::ring::{Ring, RingMsg};
