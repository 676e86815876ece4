//! A quorum node's identity: the incarnation of its data dir, and the rule that keeps a wiped or
//! replaced data dir from voting a second time in a term it already voted in (docs/safety.md, "A wiped
//! disk never votes twice").
//!
//! A node's vote lives in its data dir. A node whose data dir was wiped (a replaced disk, an
//! operator's `rm -rf`) comes back with no vote and could grant a second one in a term where its
//! first one already helped elect a leader: two leaders in one term. openraft cannot tell such a
//! node from one that never voted. electd tells them apart by the **incarnation**: a random
//! number drawn when a data dir is created and kept in it. Each node records, durably, the
//! incarnation it first heard from every other member (`hello`, [`recognise`]).
//!
//! 1. A new incarnation votes (and grants pre-votes, and campaigns) only after
//!    [`confirmations_needed`] (⌈n/2⌉) *other* members have recorded it and answered that it is
//!    the one they know, or that they knew none; then it is *confirmed*, durably.
//! 2. A member that knows another incarnation of that node refuses it, and the node stops
//!    with a message that says how to rejoin.
//!
//! So a node that ever voted was recorded by ⌈n/2⌉ of the other n−1 members, and its wiped
//! successor needs ⌈n/2⌉ of them to answer: two such sets intersect (2⌈n/2⌉ > n−1), and the
//! member in both refuses. A first start of a new cluster, or a member that starts late for the
//! first time, is known to nobody and confirmed by the first ⌈n/2⌉ members it reaches. The
//! argument needs the recording members to keep their own disks; a wiped recorder is itself a
//! new incarnation, confirmed the same way.
//!
//! 3. A member forgets a node's incarnation when it applies the node's removal, so that the
//!    node can be added back on a new data dir; it counts a node as a member once it applies
//!    the node's addition. A member that has not applied the log that far still knows the old
//!    incarnation, or does not know the node yet, and would refuse a node the cluster has
//!    since removed and added back, or just added. So a hello names the membership entry its
//!    sender's log is at, and a member that has not applied that entry answers that it is
//!    behind ([`is_behind`]): it neither records nor refuses, and does not count. And a member
//!    records an incarnation only while the membership it applied names the node, checked in
//!    the same step as the record, under the lock `apply` (`storage/raft.rs`) forgets under
//!    (`storage/mod.rs`, `recognise_peer`): otherwise a hello (or a hello's answer) from a node being removed,
//!    judged against the membership openraft reports, which lags the apply, could be recorded
//!    just after the removal was applied, and that stale record would refuse the node's new data
//!    dir once it is added back, for ever ([`Recognition::Stranger`]).
//! 4. Members change, and the argument needs every member's incarnation recorded by the
//!    members of the membership in force, new ones included. So a member answers a hello
//!    with its own confirmed incarnation, which the sender records in turn; a confirmed node
//!    says hello to every member at start and whenever the membership changes, asking again
//!    those that did not answer or were behind (hellos.rs, `Hellos::say`); and a learner is
//!    promoted to voter only once its own incarnation is confirmed (`until_confirmed`), so
//!    that no voter counts against a majority it may not vote in. Abstaining never confirms
//!    anyone, so the argument above is unchanged.
//! 5. Rules 1-4 fix n; when the members change, the members that recorded a node are fixed at
//!    its confirmation and those added later may never hear it. So the log carries the
//!    incarnations (`types::Command::Incarnations`, applied in `storage/raft.rs`: the first one of
//!    a member stays, a removal forgets, snapshots carry them): before it changes the
//!    membership, the leader writes the incarnation of every voter the change leaves that the
//!    log lacks (hellos.rs, `log_incarnations`), or fails the change. A member judges a
//!    hello by the applied log before its own record, and abstains while it holds incarnation
//!    entries not yet applied. Take X confirmed and the first change C after: X's entry came
//!    before C in the log, so every member holding C holds it, and a majority of each voter set
//!    of C holds C for good; of the n−1 others at most ⌈n/2⌉−1 lack the entry, so a new
//!    incarnation of X never gathers ⌈n/2⌉ accepting answers. Without a change since X's
//!    confirmation, the fixed-n argument above holds.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::protocol::{Hello, HelloAnswer};
use crate::role::NodeId;

/// The incarnation of this node's data dir, and whether enough members have recorded it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    pub incarnation: u64,
    /// ⌈n/2⌉ other members recorded it (durable: once confirmed, never asked again).
    pub confirmed: bool,
}

/// What a member makes of a peer's incarnation, given the one it recorded for that peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recognition {
    /// None was recorded: this one is recorded now.
    New,
    /// The one recorded.
    Same,
    /// Another one was recorded: the peer's data dir was replaced since.
    Replaced { was: u64 },
    /// The membership this member applied does not name the peer: nothing recorded (rule 3).
    Stranger,
}

impl Recognition {
    /// Whether the peer may count this member as one that recorded it.
    pub fn accepted(self) -> bool {
        matches!(self, Recognition::New | Recognition::Same)
    }
}

/// Whether a member that applied its log up to `applied` is behind a hello whose sender's log
/// names the membership of entry `membership` (rule 3): it has not applied that entry, nor so
/// perhaps the sender's addition and any removal before it. The initial membership (entry 0,
/// which every member of a new cluster writes from its own config), or none yet: never behind.
pub fn is_behind(applied: Option<u64>, membership: Option<u64>) -> bool {
    match membership {
        None | Some(0) => false,
        Some(m) => applied.is_none_or(|a| a < m),
    }
}

/// The recognition of `incarnation` by a member that recorded `known` for its sender.
pub fn recognise(known: Option<u64>, incarnation: u64) -> Recognition {
    match known {
        None => Recognition::New,
        Some(k) if k == incarnation => Recognition::Same,
        Some(was) => Recognition::Replaced { was },
    }
}

/// How many of the other members must record a new incarnation before it may vote, in a
/// cluster of `members`: ⌈n/2⌉, so that any two such sets of the n−1 others intersect. A
/// cluster of one has nobody to ask (and nobody to vote twice for).
pub fn confirmations_needed(members: usize) -> usize {
    if members <= 1 {
        0
    } else {
        members.div_ceil(2)
    }
}

/// A new incarnation for the data dir of node `id`, from the node's seed and the instant it
/// starts (two starts with the same `--seed` still draw different ones).
pub fn draw_incarnation(seed: u64, id: NodeId, now_ns: u64) -> u64 {
    // Each input mixed in after the last is scrambled, so that no combination of them cancels
    // another (a seed that itself is some x ^ id << 32 would, with a plain XOR).
    mix(mix(mix(seed) ^ id) ^ now_ns)
}

/// splitmix64's finaliser.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Why a node must not run on this data dir: a member knows it by another one.
pub fn replaced_message(id: NodeId, by: NodeId, was: u64, now: u64) -> String {
    format!(
        "node {id} started on a new data dir (incarnation {now:#x}), but member {by} knows it by \
         an earlier one ({was:#x}): the votes that data dir held are lost, and this node could \
         vote twice in one term. Refusing to vote or run. To rejoin: remove it (electd member \
         remove {id} --node LEADER), then start it again on an empty data dir with --join \
         HOST:PORT of a member; or restore its data dir from a backup"
    )
}

/// Why a node on a new data dir stops when the members do not count it among them: it was
/// removed (and its disk wiped since), and a start without `--join` would bootstrap the
/// membership of its config, in which it still is.
pub fn not_a_member_message(id: NodeId, by: &BTreeSet<NodeId>) -> String {
    format!(
        "node {id} started on a new data dir, but members {by:?} do not count it among the \
         cluster's members (it was removed): refusing to run. To rejoin: start it on an empty \
         data dir with --join HOST:PORT of a member, and add it (electd member add {id} ADDR \
         --node LEADER; with the admin token it asks itself)"
    )
}

/// A hello this member answers without judging the sender's incarnation, or `None` to judge
/// it. It abstains while it has not applied the membership entry the hello names (rule 3;
/// applied entries only grow, so a member not behind now is not behind when it records), and
/// while it holds incarnation entries it has not applied, which may record the sender's
/// (`applied`: the last applied index, and whether such entries wait; rule 5). A `stranger`,
/// whom the committed membership in force does not name (asked only of a member not behind),
/// is not recorded.
pub fn unjudged_hello(
    from: NodeId,
    hello: &Hello,
    applied: (Option<u64>, bool),
    stranger: impl FnOnce() -> bool,
    mine: HelloAnswer,
) -> Option<HelloAnswer> {
    let (applied_index, unapplied) = applied;
    if is_behind(applied_index, hello.membership) || unapplied {
        tracing::debug!(
            peer = from,
            membership = hello.membership,
            "node {from} said hello from a membership this node has not applied yet"
        );
        return Some(HelloAnswer {
            behind: true,
            ..mine
        });
    }
    if stranger() {
        tracing::warn!(
            peer = from,
            "node {from} said hello but is no member of the membership in force: not recorded"
        );
        return Some(HelloAnswer {
            member: false,
            ..mine
        });
    }
    None
}

/// What a member answers a hello with, once it has recorded (or refused) `from`'s
/// `incarnation` as `r` says (this file); `mine` carries its own identity.
pub fn answer_hello(
    from: NodeId,
    incarnation: u64,
    r: Recognition,
    mine: HelloAnswer,
) -> HelloAnswer {
    match r {
        Recognition::New => tracing::info!(
            peer = from,
            incarnation = format!("{incarnation:#x}"),
            "recorded a member's incarnation"
        ),
        Recognition::Same => {}
        Recognition::Replaced { was } => tracing::error!(
            peer = from,
            incarnation = format!("{incarnation:#x}"),
            known = format!("{was:#x}"),
            "member {from} came back on a new data dir: refused (it lost its votes)"
        ),
        // Removed between the membership check (openraft's view) and the record (rule 3).
        Recognition::Stranger => tracing::warn!(
            peer = from,
            "node {from} said hello but the applied membership does not name it: not recorded"
        ),
    }
    hello_answer(r, mine)
}

/// The answer that recognition `r` of a hello makes (the model checker's members answer with
/// it too, lab/src/model/mod.rs): accepted, refused naming the incarnation it knows, or
/// "not a member".
pub fn hello_answer(r: Recognition, mine: HelloAnswer) -> HelloAnswer {
    if r == Recognition::Stranger {
        return HelloAnswer {
            member: false,
            ..mine
        };
    }
    HelloAnswer {
        accepted: r.accepted(),
        known: match r {
            Recognition::Replaced { was } => Some(was),
            _ => None,
        },
        ..mine
    }
}

/// A new data dir's confirmation (rule 1), as its node's core keeps it (core/mod.rs; the
/// hellos are driver/confirm.rs): the members that recorded its incarnation, those whose
/// applied membership does not name it, and those whose refusal a joining node has logged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Confirmation {
    recorded: BTreeSet<NodeId>,
    strangers: BTreeSet<NodeId>,
    warned: BTreeSet<NodeId>,
}

/// What a new data dir's hellos tell its core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Heard {
    /// A round is due: the `members` this node counts (itself among them); `known`: its log
    /// names a membership (a joining node's does not yet, so it cannot know how many).
    Round { members: Vec<NodeId>, known: bool },
    /// `from`, one of `members` members, answered the hello of `incarnation` (`None`: no
    /// answer in time); `joins`: this node was started with `join`.
    Answer {
        from: NodeId,
        incarnation: u64,
        answer: Option<HelloAnswer>,
        members: usize,
        joins: bool,
    },
}

/// What the core makes of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// ⌈n/2⌉ members recorded the incarnation (these, in id order): it is confirmed (to be
    /// marked durably).
    Confirmed(Vec<NodeId>),
    /// The members to say hello to in this round (those that have not recorded it).
    Ask(Vec<NodeId>),
    /// Counted, or nothing to count.
    Noted,
    /// A member knows an earlier incarnation, or as many as would confirm it do not count
    /// this node among the members: it stops, saying why.
    Refused(String),
    /// The same refusal, to a node that joins: it logs it (once a member) and waits, since the
    /// log its hello names may be older than its own addition.
    Waits(String),
}

impl Confirmation {
    /// What `heard` means to node `me` (rules 1 and 2).
    pub fn step(&mut self, me: NodeId, heard: Heard) -> Verdict {
        match heard {
            Heard::Round { members, known } => {
                if known && self.recorded.len() >= confirmations_needed(members.len()) {
                    return Verdict::Confirmed(self.recorded.iter().copied().collect());
                }
                let ask = members
                    .into_iter()
                    .filter(|id| *id != me && !self.recorded.contains(id));
                Verdict::Ask(ask.collect())
            }
            Heard::Answer {
                from,
                incarnation,
                answer,
                members,
                joins,
            } => {
                let Some(refusal) = self.refusal(me, from, incarnation, answer, members) else {
                    return Verdict::Noted;
                };
                if !joins {
                    Verdict::Refused(refusal)
                } else if self.warned.insert(from) {
                    Verdict::Waits(refusal)
                } else {
                    Verdict::Noted
                }
            }
        }
    }

    /// Counts `from`'s answer; why it refuses this node, if it does.
    fn refusal(
        &mut self,
        me: NodeId,
        from: NodeId,
        incarnation: u64,
        answer: Option<HelloAnswer>,
        members: usize,
    ) -> Option<String> {
        match answer? {
            HelloAnswer { accepted: true, .. } => {
                self.recorded.insert(from);
                None
            }
            // It has not applied the log up to this node's membership: asked again in the
            // next round (rule 3).
            HelloAnswer { behind: true, .. } => None,
            HelloAnswer { member: false, .. } => {
                // A member that applied this node's membership and does not name it: as many
                // as would confirm it are proof that it was removed.
                self.strangers.insert(from);
                (self.strangers.len() >= confirmations_needed(members))
                    .then(|| not_a_member_message(me, &self.strangers))
            }
            HelloAnswer { known, .. } => Some(replaced_message(
                me,
                from,
                known.unwrap_or_default(),
                incarnation,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_records_a_new_incarnation_and_refuses_a_replaced_one() {
        assert_eq!(recognise(None, 7), Recognition::New);
        assert_eq!(recognise(Some(7), 7), Recognition::Same);
        assert_eq!(recognise(Some(7), 8), Recognition::Replaced { was: 7 });
        assert!(Recognition::New.accepted() && Recognition::Same.accepted());
        assert!(!Recognition::Replaced { was: 7 }.accepted());
    }

    #[test]
    fn a_member_behind_the_senders_membership_cannot_judge() {
        // The first start of a cluster: the initial membership has nothing before it.
        assert!(!is_behind(None, None));
        assert!(!is_behind(None, Some(0)));
        // Added (back) at entry 18, its removal before it: a member must have applied 18.
        assert!(is_behind(None, Some(18)));
        assert!(is_behind(Some(12), Some(18)));
        assert!(is_behind(Some(17), Some(18)));
        assert!(!is_behind(Some(18), Some(18)));
        assert!(!is_behind(Some(30), Some(18)));
    }

    /// The safety argument: the members that recorded an old incarnation and those that
    /// confirm a new one always share a member, for every cluster size.
    #[test]
    fn any_two_confirming_sets_of_the_others_intersect() {
        assert_eq!(confirmations_needed(1), 0);
        for n in 2..=31usize {
            let k = confirmations_needed(n);
            assert!(
                2 * k > n - 1,
                "n={n}: two sets of {k} among {} others",
                n - 1
            );
            assert!(k < n, "n={n}: needs {k} of {} others", n - 1);
        }
        assert_eq!(
            (2..=7).map(confirmations_needed).collect::<Vec<_>>(),
            vec![1, 2, 2, 3, 3, 4]
        );
    }

    #[test]
    fn incarnations_differ_across_nodes_starts_and_seeds() {
        let a = draw_incarnation(1, 1, 1000);
        assert_ne!(a, draw_incarnation(1, 2, 1000));
        assert_ne!(a, draw_incarnation(1, 1, 1001));
        assert_ne!(a, draw_incarnation(2, 1, 1000));
        assert_eq!(a, draw_incarnation(1, 1, 1000));
        // A seed derived from the id (as the simulator derives its nodes' seeds) does not
        // cancel the id out.
        assert_ne!(
            draw_incarnation(9 ^ (2 << 32), 2, 1000),
            draw_incarnation(9 ^ (4 << 32), 4, 1000)
        );
    }

    /// A new data dir is confirmed by ⌈n/2⌉ members' records, asking in each round only those
    /// that have not recorded it; an answer that is late or behind counts nothing; a member
    /// that knows an earlier incarnation, or ⌈n/2⌉ that do not count the node, refuse it: for
    /// good, or, to a node that joins, logged once per member while it waits.
    #[test]
    fn a_confirmation_counts_records_and_stops_at_a_refusal() {
        let round = |known| Heard::Round {
            members: vec![1, 2, 3, 4, 5],
            known,
        };
        let answer = |from, answer: Option<HelloAnswer>, joins| Heard::Answer {
            from,
            incarnation: 7,
            answer,
            members: 5,
            joins,
        };
        let yes = HelloAnswer {
            accepted: true,
            ..HelloAnswer::default()
        };
        let behind = HelloAnswer {
            behind: true,
            ..HelloAnswer::default()
        };
        let replaced = HelloAnswer {
            known: Some(6),
            member: true,
            ..HelloAnswer::default()
        };
        let stranger = HelloAnswer {
            member: false,
            ..HelloAnswer::default()
        };
        let mut c = Confirmation::default();
        assert_eq!(c.step(1, round(true)), Verdict::Ask(vec![2, 3, 4, 5]));
        assert_eq!(c.step(1, answer(2, Some(yes), false)), Verdict::Noted);
        assert_eq!(c.step(1, answer(3, None, false)), Verdict::Noted);
        assert_eq!(c.step(1, answer(4, Some(behind), false)), Verdict::Noted);
        assert_eq!(c.step(1, round(true)), Verdict::Ask(vec![3, 4, 5]));
        assert_eq!(c.step(1, answer(5, Some(yes), false)), Verdict::Noted);
        // Not before the log names a membership (a joining node's does not yet).
        assert_eq!(c.step(1, round(false)), Verdict::Ask(vec![3, 4]));
        assert_eq!(c.step(1, round(true)), Verdict::Ask(vec![3, 4]));
        assert_eq!(c.step(1, answer(3, Some(yes), false)), Verdict::Noted);
        assert_eq!(c.step(1, round(true)), Verdict::Confirmed(vec![2, 3, 5]));

        let mut c = Confirmation::default();
        assert!(matches!(
            c.step(1, answer(2, Some(replaced), false)),
            Verdict::Refused(why) if why.contains("earlier one")
        ));
        assert!(matches!(
            c.step(1, answer(2, Some(replaced), true)),
            Verdict::Waits(_)
        ));
        assert_eq!(
            c.step(1, answer(2, Some(replaced), true)),
            Verdict::Noted,
            "logged once a member"
        );
        let mut c = Confirmation::default();
        assert_eq!(c.step(1, answer(2, Some(stranger), false)), Verdict::Noted);
        assert_eq!(c.step(1, answer(3, Some(stranger), false)), Verdict::Noted);
        assert!(matches!(
            c.step(1, answer(4, Some(stranger), false)),
            Verdict::Refused(why) if why.contains("do not count it")
        ));
    }
}
