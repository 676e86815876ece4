//! Who may step the quorum core (core/mod.rs): its one owner, the driver (driver/mod.rs), which
//! holds the [`CoreOwner`]. Every other task of the node holds the [`Inbox`]: it asks the
//! driver to step the core with an input and waits for the answer (a peer's request, an
//! admin's resign, the stop), and it reads the core as the driver last left it (`/v1/leader`,
//! the event log's stamps). The driver steps what is asked in the order it arrives, beside its
//! own turns, and carries out what each step says before it answers.
//!
//! A read and a step never interleave: the core sits in a `watch` channel, whose writing end
//! only the owner holds, and a step reads its instant while it writes. A reader that reads
//! its instant while it holds the core (`QuorumNode::judge`) is therefore ordered with the
//! steps by their instants, as the claim's judgement needs (lease.rs).

use tokio::sync::{mpsc, oneshot, watch};

use super::core::{Action, Answer, Input, QuorumCore, RaftView};
use crate::clock::Reading;
use crate::lease::{HoldsLease, Lease};

/// An input to step, and where its answer goes.
pub struct Ask {
    pub input: Input,
    pub answer: oneshot::Sender<Option<Answer>>,
}

/// The core's other end: ask it, read it.
pub struct Inbox {
    asks: mpsc::UnboundedSender<Ask>,
    core: watch::Receiver<QuorumCore>,
}

/// The core's writing end and the asks waiting for it: the driver's alone.
pub struct CoreOwner {
    core: watch::Sender<QuorumCore>,
    asks: mpsc::UnboundedReceiver<Ask>,
}

/// The two ends of `core`.
pub fn own(core: QuorumCore) -> (Inbox, CoreOwner) {
    let (tx, rx) = mpsc::unbounded_channel();
    let (core_tx, core_rx) = watch::channel(core);
    let inbox = Inbox {
        asks: tx,
        core: core_rx,
    };
    let owner = CoreOwner {
        core: core_tx,
        asks: rx,
    };
    (inbox, owner)
}

impl Inbox {
    /// Steps the core with `input` (in the driver's task) and returns its answer; `None` when
    /// it has none, or the driver has stopped.
    pub async fn ask(&self, input: Input) -> Option<Answer> {
        let (answer, answered) = oneshot::channel();
        self.asks.send(Ask { input, answer }).ok()?;
        answered.await.ok().flatten()
    }

    /// The core as its owner last left it; no step comes while it is held (never across an
    /// `.await`).
    pub fn read(&self) -> watch::Ref<'_, QuorumCore> {
        self.core.borrow()
    }
}

/// Quorum mode's lease, inside the core (the event log's stamps: events.rs,
/// `record_leased_view`).
impl HoldsLease for Inbox {
    fn with_lease<R>(&self, f: impl FnOnce(&Lease) -> R) -> R {
        f(self.read().lease())
    }
}

impl CoreOwner {
    /// Steps the core with `input` at the instant `now` reads, while no one reads it.
    pub fn step(&mut self, now: impl FnOnce() -> Reading, input: Input) -> Vec<Action> {
        let mut actions = Vec::new();
        self.core
            .send_modify(|core| actions = core.step(now(), input));
        actions
    }

    /// Ticks the core at the instant `now` reads, while no one reads it.
    pub fn tick(&mut self, now: impl FnOnce() -> Reading, raft: &RaftView) -> Vec<Action> {
        let mut actions = Vec::new();
        self.core
            .send_modify(|core| actions = core.tick(now(), raft));
        actions
    }

    /// The core as it is.
    pub fn read(&self) -> watch::Ref<'_, QuorumCore> {
        self.core.borrow()
    }

    /// The next ask; `None` once no [`Inbox`] is left.
    pub async fn asked(&mut self) -> Option<Ask> {
        self.asks.recv().await
    }

    /// Changes the core by hand (the node's tests).
    #[cfg(test)]
    pub fn modify(&mut self, f: impl FnOnce(&mut QuorumCore)) {
        self.core.send_modify(f);
    }
}
