//! How incarnations travel: the hellos a quorum node says to its members and the answers it
//! records, by which it tells them its incarnation and learns theirs (identity.rs, rules 3 and
//! 4); its answers to the hellos it is said ([`Hellos::answer`], judged by identity.rs); and the
//! voters' incarnations a leader writes into the log before it changes the members
//! ([`Hellos::log_incarnations`], rule 5). Every hello this node sends goes through
//! [`Hellos::ask`]; its data dir's incarnation is taken at start ([`take_identity`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use openraft::Raft;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::election::ElectionTiming;
use super::identity::{self, Recognition};
use super::protocol::{Hello, HelloAnswer, PATH_HELLO};
use super::storage::Store;
use super::types::{changed, membership_index, Command, TypeConfig};
use crate::config::ValidConfig;
use crate::engine::{Flaws, MembershipError};
use crate::role::NodeId;
use crate::transport::{Transport, TransportError};

/// How many rounds of hellos a confirmed node sends the members of one membership: from a
/// beat apart to a second apart, about 15 s in all at the default timings.
const HELLO_ROUNDS: u32 = 20;

/// One node's hellos: what it says, to whom, what it records of the answers, and the
/// incarnations a leader writes into the log before a membership change.
#[derive(Clone)]
pub struct Hellos {
    id: NodeId,
    transport: Arc<Transport>,
    store: Arc<Store>,
    /// openraft: the membership entry this node's log names, and the log a leader writes.
    raft: Raft<TypeConfig>,
    timing: ElectionTiming,
    /// The lab's flaw: a change leaves voters whose incarnations are not in the log.
    unlogged_incarnations: bool,
}

impl Hellos {
    pub fn new(
        cfg: &ValidConfig,
        transport: &Arc<Transport>,
        store: &Arc<Store>,
        raft: &Raft<TypeConfig>,
        flaws: &Flaws,
    ) -> Hellos {
        Hellos {
            id: cfg.id,
            transport: transport.clone(),
            store: store.clone(),
            raft: raft.clone(),
            timing: ElectionTiming::from_config(&cfg.timing),
            unlogged_incarnations: flaws.unlogged_incarnations(),
        }
    }

    /// The answer to `from`'s hello (identity.rs): this node's confirmed incarnation, and
    /// whether it recognises `from`'s, which it records if it knew none. `stranger` says
    /// whether `from` is no member of the membership in force; it is asked only once this
    /// node's log is not behind.
    pub async fn answer(
        &self,
        from: NodeId,
        hello: Hello,
        stranger: impl FnOnce() -> bool,
    ) -> Result<HelloAnswer, String> {
        let mine = HelloAnswer {
            member: true,
            incarnation: self.store.confirmed_incarnation(),
            ..HelloAnswer::default()
        };
        let applied = (self.store.applied_index(), self.store.unapplied());
        if let Some(answer) = identity::unjudged_hello(from, &hello, applied, stranger, mine) {
            return Ok(answer);
        }
        let r = self
            .store
            .recognise_peer(from, hello.incarnation)
            .await
            .map_err(|e| e.to_string())?;
        Ok(identity::answer_hello(from, hello.incarnation, r, mine))
    }

    /// The hello this node says: its incarnation and the membership its log names.
    pub fn own(&self) -> Hello {
        Hello {
            incarnation: self.store.identity().map_or(0, |i| i.incarnation),
            membership: membership_index(&self.raft.metrics().borrow()),
        }
    }

    /// Says `hello` to `to` and, when it accepts, records the incarnation it answers with, as
    /// if that member had said hello (identity.rs, rule 4).
    pub async fn ask(
        &self,
        to: NodeId,
        hello: &Hello,
        deadline: Duration,
    ) -> Result<HelloAnswer, TransportError> {
        let answer: HelloAnswer = self
            .transport
            .call(to, PATH_HELLO, "hello", hello, deadline)
            .await?;
        self.record_answer(to, &answer).await;
        Ok(answer)
    }

    /// Records the incarnation a member that accepted this node's hello answered with.
    pub async fn record_answer(&self, from: NodeId, answer: &HelloAnswer) {
        let Some(incarnation) = answer.incarnation.filter(|_| answer.accepted) else {
            return;
        };
        match self.store.recognise_peer(from, incarnation).await {
            Ok(Recognition::New) => tracing::info!(
                peer = from,
                incarnation = format!("{incarnation:#x}"),
                "recorded a member's incarnation from its answer"
            ),
            Ok(Recognition::Same) => {}
            Ok(Recognition::Stranger) => tracing::debug!(
                peer = from,
                "a node the applied membership does not name answered a hello: not recorded"
            ),
            Ok(Recognition::Replaced { was }) => tracing::warn!(
                peer = from,
                incarnation = format!("{incarnation:#x}"),
                known = format!("{was:#x}"),
                "member {from} answered with another incarnation than the one recorded"
            ),
            Err(e) => tracing::warn!(peer = from, error = %e, "cannot record an incarnation"),
        }
    }

    /// Asks `id` every beat until it answers with a confirmed incarnation (it may vote:
    /// identity.rs) or `until` is a beat away; whether it did.
    pub async fn until_confirmed(&self, id: NodeId, until: Instant) -> bool {
        let hello = self.own();
        let beat = Duration::from_nanos(self.timing.heartbeat_ns);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let answer = self.ask(id, &hello, left).await;
            if answer.is_ok_and(|a| a.incarnation.is_some()) {
                return true;
            }
            if Instant::now() + beat >= until {
                return false;
            }
            tokio::time::sleep(beat).await;
        }
    }

    /// Tells `to` this node's incarnation, and records theirs from the answers (identity.rs,
    /// rules 3 and 4): asks again, less and less often, those that did not answer or were
    /// behind, for at most [`HELLO_ROUNDS`] rounds, while the membership is the one of entry
    /// `at` and `stop` is not cancelled (a change starts another round of hellos). A member
    /// that knows another incarnation is logged.
    pub async fn say(
        self,
        mut to: Vec<NodeId>,
        incarnation: u64,
        at: Option<u64>,
        stop: CancellationToken,
    ) {
        let deadline = Duration::from_nanos(self.timing.follower_lease_ns);
        let hello = Hello {
            incarnation,
            membership: at,
        };
        let mut pause = Duration::from_nanos(self.timing.heartbeat_ns);
        for _ in 0..HELLO_ROUNDS {
            let (me, hello) = (&self, &hello);
            let asks = to
                .iter()
                .map(|&peer| async move { (peer, me.ask(peer, hello, deadline).await) });
            let mut again = Vec::new();
            for (peer, r) in futures_util::future::join_all(asks).await {
                match r {
                    Ok(HelloAnswer { accepted: true, .. }) => {}
                    Ok(HelloAnswer { behind: true, .. }) | Err(_) => again.push(peer),
                    Ok(HelloAnswer {
                        member: true,
                        known,
                        ..
                    }) => tracing::error!(
                        peer,
                        known = format!("{:#x}", known.unwrap_or_default()),
                        "a member knows this node by another incarnation"
                    ),
                    Ok(_) => {}
                }
            }
            to = again;
            if to.is_empty() {
                return;
            }
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(pause) => {}
            }
            if membership_index(&self.raft.metrics().borrow()) != at {
                return;
            }
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }

    /// Writes into the log the incarnations of `voters` (the voters a change leaves in force)
    /// that it does not hold yet (identity.rs, rule 5): as this leader recorded them or, for a
    /// voter it recorded none of, as that voter answers a hello now. Fails, naming them, when
    /// some voter's incarnation cannot be learnt (down, or on a data dir not confirmed): the
    /// change would leave a voter whose earlier data dir the new majorities might not know.
    pub async fn log_incarnations(
        &self,
        voters: &BTreeSet<NodeId>,
        until: Instant,
    ) -> Result<(), MembershipError> {
        if self.unlogged_incarnations {
            return Ok(());
        }
        let logged = self.store.logged();
        let mut write = BTreeMap::new();
        let mut unknown = Vec::new();
        for &v in voters.iter().filter(|v| !logged.contains_key(v)) {
            let incarnation = if v == self.id {
                self.store.confirmed_incarnation()
            } else {
                if self.store.recorded(v).is_none() {
                    let deadline = until
                        .saturating_duration_since(Instant::now())
                        .min(Duration::from_nanos(self.timing.heartbeat_ns * 4));
                    let _ = self.ask(v, &self.own(), deadline).await;
                }
                self.store.recorded(v)
            };
            match incarnation {
                Some(i) => {
                    write.insert(v, i);
                }
                None => unknown.push(v),
            }
        }
        if !unknown.is_empty() {
            return Err(MembershipError::Failed(format!(
                "the incarnations of voters {unknown:?} are not in the log, and they did not \
                 answer with a confirmed one: a change waits until every voter it leaves can be \
                 named (start them, or remove them first)"
            )));
        }
        if write.is_empty() {
            return Ok(());
        }
        tracing::info!(?write, "writing the voters' incarnations into the log");
        let w = self.raft.client_write(Command::Incarnations(write));
        let left = until.saturating_duration_since(Instant::now());
        changed(self.id, tokio::time::timeout(left, w).await)?;
        Ok(())
    }
}

/// Takes this data dir's incarnation at start: the one it has, or a new one drawn now,
/// unconfirmed (identity.rs).
pub async fn take_identity(
    store: &Store,
    cfg: &ValidConfig,
    seed: u64,
    started_ns: u64,
) -> Result<(), String> {
    let me = store
        .take_identity(identity::draw_incarnation(seed, cfg.id, started_ns))
        .await
        .map_err(|e| format!("cannot record the incarnation: {e}"))?;
    if !me.confirmed {
        tracing::info!(
            incarnation = format!("{:#x}", me.incarnation),
            need = identity::confirmations_needed(cfg.peers.len()),
            "a new data dir: no votes until enough members have recorded its incarnation"
        );
    }
    Ok(())
}
