//! A new data dir's incarnation confirmed (identity.rs) before the node's first campaign: the
//! driver (driver/mod.rs) runs this until it is, and starts no campaign meanwhile.

use std::collections::BTreeSet;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::quorum::identity::{confirmations_needed, not_a_member_message, replaced_message};
use crate::quorum::node::QuorumNode;
use crate::quorum::protocol::{Hello, HelloAnswer};
use crate::role::NodeId;

/// Until this data dir's incarnation is confirmed: says hello to the other members, every
/// beat at first and then less often, until ⌈n/2⌉ of them recorded it (identity.rs), then
/// marks it confirmed, durably. `Err` when a member knows this node by an earlier one, or
/// as many members as would confirm it do not count it among the members; a node that
/// joins logs that and goes on asking instead. `Ok` at once when it was confirmed before,
/// and when the node stops.
pub(super) async fn confirm_identity(
    node: &QuorumNode,
    stop: &CancellationToken,
) -> Result<(), String> {
    let Some(me) = node.store.identity().filter(|i| !i.confirmed) else {
        return Ok(());
    };
    if node.flaws.trust_new_incarnation() {
        return node
            .store
            .confirm_identity()
            .await
            .map_err(|e| format!("cannot record the confirmed incarnation: {e}"));
    }
    let mut tally = Tally::default();
    let mut pause = Duration::from_nanos(node.election.heartbeat_ns);
    let mut rounds = 0u32;
    loop {
        // The members as the log names them (a joining node learns them from the leader),
        // this node counted as a voter.
        // Until its log names a membership (a joining node), it cannot know how many.
        let mut members = node.voters();
        let known = !members.is_empty();
        if !members.contains(&node.id) {
            members.push(node.id);
        }
        let need = confirmations_needed(members.len());
        if known && tally.recorded.len() >= need {
            break;
        }
        hello_round(node, me.incarnation, &members, need, &mut tally).await?;
        rounds += 1;
        if rounds == 10 {
            tracing::warn!(
                need,
                recorded = ?tally.recorded,
                "still waiting for members to record this data dir's incarnation: no votes \
                 until then"
            );
        }
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(Duration::from_secs(1));
    }
    node.store
        .confirm_identity()
        .await
        .map_err(|e| format!("cannot record the confirmed incarnation: {e}"))?;
    tracing::info!(
        incarnation = format!("{:#x}", me.incarnation),
        recorded = ?tally.recorded,
        "incarnation confirmed: this node votes from now on"
    );
    Ok(())
}

/// One round of [`confirm_identity`]'s hellos, to the `members`
/// that have not recorded `incarnation` yet; `Err` when one refuses it for good.
async fn hello_round(
    node: &QuorumNode,
    incarnation: u64,
    members: &[NodeId],
    need: usize,
    tally: &mut Tally,
) -> Result<(), String> {
    use futures_util::StreamExt;
    let deadline = Duration::from_nanos(node.election.follower_lease_ns);
    let hello = &Hello {
        incarnation,
        membership: node.membership_index(),
    };
    let mut asks: futures_util::stream::FuturesUnordered<_> = members
        .iter()
        .filter(|id| **id != node.id && !tally.recorded.contains(*id))
        .map(|&to| async move { (to, node.hellos.ask(to, hello, deadline).await) })
        .collect();
    while let Some((from, answer)) = asks.next().await {
        let refusal = match answer {
            Ok(HelloAnswer { accepted: true, .. }) => {
                tally.recorded.insert(from);
                continue;
            }
            // It has not applied the log up to this node's membership: asked again in the
            // next round (identity.rs, rule 3).
            Ok(HelloAnswer { behind: true, .. }) | Err(_) => continue,
            Ok(HelloAnswer { member: false, .. }) => {
                // A member that applied this node's membership and does not name it: as
                // many as would confirm it are proof that it was removed.
                tally.strangers.insert(from);
                if tally.strangers.len() < need {
                    continue;
                }
                not_a_member_message(node.id, &tally.strangers)
            }
            Ok(HelloAnswer { known, .. }) => {
                replaced_message(node.id, from, known.unwrap_or_default(), incarnation)
            }
        };
        if !node.joins {
            return Err(refusal);
        }
        // A node that joins catches up from the leader meanwhile: the log its hello names
        // may be older than its own addition, which the member then judges by what it knew
        // before. It waits, unconfirmed, and asks again.
        if tally.warned.insert(from) {
            tracing::warn!(
                member = from,
                "{refusal} (this node joins: it waits without voting, and asks again)"
            );
        }
    }
    Ok(())
}

/// What a new data dir's hellos have gathered (`confirm_identity`).
#[derive(Default)]
struct Tally {
    /// Members that recorded this data dir's incarnation.
    recorded: BTreeSet<NodeId>,
    /// Members whose committed membership does not name this node.
    strangers: BTreeSet<NodeId>,
    /// Members whose refusal a joining node has logged.
    warned: BTreeSet<NodeId>,
}
