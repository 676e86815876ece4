//! What a quorum node adds to `/v1/status` (`engine`): openraft's own state, the campaign, and
//! whether it is a member that does not vote; and `/v1/members` as the node sees it.

use electd_client::Members;

use crate::quorum::node::QuorumNode;

/// The membership in force (`/v1/members`); on the leader, how long each non-voter has not
/// answered its requests (`absent_ms`: what the absence rule counts, driver/nonvoters.rs).
pub(super) fn members(node: &QuorumNode) -> Members {
    let mut m = node.members.members_now();
    if node.members.must_lead().is_ok() {
        let now = node.clock.mono_ns();
        for x in m.members.iter_mut().filter(|x| !x.voter && x.id != node.id) {
            let answered = node.counters.last_answer_ns(x.id);
            x.absent_ms = answered.map(|at| now.saturating_sub(at) / 1_000_000);
        }
    }
    m
}

/// Extra status for `/v1/status`: what openraft itself says, the campaign, and whether the node
/// is a member that does not vote.
pub(super) fn of(node: &QuorumNode) -> serde_json::Value {
    let m = node.raft_metrics();
    let (contact, failed_attempts) = {
        let core = node.core.read();
        (core.contact(), core.failed_attempts())
    };
    let since_contact = node.clock.boot_ns().saturating_sub(contact.at_ns) / 1_000_000;
    serde_json::json!({
        "raft_state": format!("{:?}", m.state),
        "vote": node.store.vote().map(|v| v.to_string()),
        "last_log_index": m.last_log_index,
        "last_applied": m.last_applied.map(|l| l.to_string()),
        "millis_since_quorum_ack": m.millis_since_quorum_ack,
        "running": m.running_state.is_ok(),
        "identity": node.store.identity_status(),
        "nonvoter": node.admission.nonvoter,
        "election": {
            "ms_since_contact": since_contact,
            "failed_attempts": failed_attempts,
        },
    })
}
