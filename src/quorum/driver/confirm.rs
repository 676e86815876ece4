//! A new data dir's incarnation confirmed (identity.rs) before the node's first campaign: the
//! driver (driver/mod.rs) runs this until it is, and starts no campaign meanwhile. The hellos
//! are said here; what their answers decide is the core's (identity.rs, `Confirmation`).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::quorum::core::{Answer, Input};
use crate::quorum::identity::{Heard, Verdict};
use crate::quorum::node::QuorumNode;
use crate::quorum::protocol::Hello;
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
    let mut pause = Duration::from_nanos(node.election.heartbeat_ns);
    let mut rounds = 0u32;
    let recorded = loop {
        // The members as the log names them (a joining node learns them from the leader),
        // this node counted as a voter.
        let mut members = node.members.voters();
        let known = !members.is_empty();
        if !members.contains(&node.id) {
            members.push(node.id);
        }
        let n = members.len();
        let ask = match heard(node, Heard::Round { members, known }).await {
            Verdict::Confirmed(by) => break by,
            Verdict::Ask(ask) => ask,
            other => return Err(format!("the core answered a round with {other:?}")),
        };
        hello_round(node, me.incarnation, &ask, n).await?;
        rounds += 1;
        if rounds == 10 {
            tracing::warn!(
                waiting_for = ?ask,
                "still waiting for members to record this data dir's incarnation: no votes \
                 until then"
            );
        }
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            _ = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(Duration::from_secs(1));
    };
    node.store
        .confirm_identity()
        .await
        .map_err(|e| format!("cannot record the confirmed incarnation: {e}"))?;
    tracing::info!(
        incarnation = format!("{:#x}", me.incarnation),
        ?recorded,
        "incarnation confirmed: this node votes from now on"
    );
    Ok(())
}

/// One round of [`confirm_identity`]'s hellos to `ask`, of `members` members, each answer
/// told to the core as it comes; `Err` when one refuses this node for good.
async fn hello_round(
    node: &QuorumNode,
    incarnation: u64,
    ask: &[NodeId],
    members: usize,
) -> Result<(), String> {
    use futures_util::StreamExt;
    let deadline = Duration::from_nanos(node.election.follower_lease_ns);
    let hello = &Hello {
        incarnation,
        membership: node.members.membership_index(),
    };
    let mut asks: futures_util::stream::FuturesUnordered<_> = ask
        .iter()
        .map(|&to| async move { (to, node.hellos.ask(to, hello, deadline).await) })
        .collect();
    while let Some((from, answer)) = asks.next().await {
        let answered = Heard::Answer {
            from,
            incarnation,
            answer: answer.ok(),
            members,
            joins: node.joins,
        };
        match heard(node, answered).await {
            Verdict::Refused(why) => return Err(why),
            Verdict::Waits(why) => tracing::warn!(
                member = from,
                "{why} (this node joins: it waits without voting, and asks again)"
            ),
            _ => {}
        }
    }
    Ok(())
}

/// The core's verdict on `heard`.
async fn heard(node: &QuorumNode, heard: Heard) -> Verdict {
    match node.ask(Input::Heard(heard)).await {
        Some(Answer::Heard(v)) => v,
        other => Verdict::Refused(format!("the core answered a hello with {other:?}")),
    }
}
