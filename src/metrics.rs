//! `/metrics` in Prometheus (OpenMetrics) text form, built from the node's counters at scrape
//! time. Every name starts with `electd_`.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::node::Node;
use crate::role::Role;

type Labels = Vec<(String, String)>;

fn counter_family<'a>(
    reg: &mut Registry,
    name: &str,
    help: &str,
    label: &str,
    values: impl IntoIterator<Item = (&'a str, u64)>,
) {
    let fam = Family::<Labels, Counter>::default();
    for (k, v) in values {
        fam.get_or_create(&vec![(label.to_string(), k.to_string())])
            .inc_by(v);
    }
    reg.register(name, help, fam);
}

/// Renders the node's metrics.
pub fn render(node: &Node) -> String {
    let judged = node.view();
    let view = judged.view;
    let snap = node.stats.snapshot();
    let mut reg = Registry::with_prefix("electd");

    let role = Family::<Labels, Gauge>::default();
    for r in [Role::Leader, Role::Follower, Role::Candidate] {
        role.get_or_create(&vec![("role".into(), r.as_str().into())])
            .set(i64::from(view.role == r));
    }
    reg.register(
        "role",
        "1 for the node's effective role, 0 for the others",
        role,
    );
    let term = Gauge::<i64>::default();
    term.set(view.term as i64);
    reg.register(
        "term",
        "Raft term (quorum) or coordinator epoch (bully, ring)",
        term,
    );
    let leader = Gauge::<i64>::default();
    leader.set(view.leader.map(|l| l as i64).unwrap_or(0));
    reg.register(
        "leader_id",
        "id of the leader this node knows, 0 for none",
        leader,
    );
    let lease = Gauge::<i64>::default();
    lease.set(
        judged
            .lease_remaining_ns
            .map(|ns| (ns / 1_000_000) as i64)
            .unwrap_or(0),
    );
    reg.register(
        "lease_remaining_ms",
        "milliseconds of leadership claim left (quorum leader)",
        lease,
    );

    let elections = Counter::<u64>::default();
    elections.inc_by(snap.elections_started);
    reg.register(
        "elections_started",
        "elections this node started",
        elections,
    );
    let changes = Counter::<u64>::default();
    changes.inc_by(snap.leader_changes);
    reg.register(
        "leader_changes",
        "times this node saw a new leader",
        changes,
    );
    counter_family(
        &mut reg,
        "messages_sent",
        "peer messages sent, by type",
        "type",
        snap.messages_sent.iter().map(|(k, v)| (k.as_str(), *v)),
    );
    counter_family(
        &mut reg,
        "messages_received",
        "peer messages received, by type",
        "type",
        snap.messages_received.iter().map(|(k, v)| (k.as_str(), *v)),
    );
    counter_family(
        &mut reg,
        "peer_requests_rejected",
        "peer requests refused, by reason",
        "reason",
        snap.rejected_peer_requests
            .iter()
            .map(|(k, v)| (k.as_str(), *v)),
    );
    let uptime = Gauge::<i64>::default();
    uptime.set(node.uptime_ms() as i64);
    reg.register("uptime_ms", "milliseconds since the node started", uptime);

    let mut out = String::new();
    encode(&mut out, &reg).expect("writing to a String cannot fail");
    out
}
