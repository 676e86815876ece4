//! What a quorum node adds to `/v1/status` (`engine`): openraft's own state, the campaign, and
//! whether it is a member that does not vote.

use crate::quorum::node::QuorumNode;

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
