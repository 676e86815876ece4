//! `/metrics` in Prometheus (OpenMetrics) text form, built from the node's counters at scrape
//! time. Every name starts with `electd_`.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use std::collections::BTreeMap;

use electd_client::Counters;

use crate::engine::Judged;
use crate::node::Node;
use crate::role::Role;

type Labels = Vec<(String, String)>;

fn counter_family(
    reg: &mut Registry,
    name: &str,
    help: &str,
    label: &str,
    values: Vec<(String, u64)>,
) {
    let fam = Family::<Labels, Counter>::default();
    for (k, v) in values {
        fam.get_or_create(&vec![(label.to_string(), k.to_string())])
            .inc_by(v);
    }
    reg.register(name, help, fam);
}

fn gauge(reg: &mut Registry, name: &str, help: &str, value: i64) {
    let g = Gauge::<i64>::default();
    g.set(value);
    reg.register(name, help, g);
}

fn counter(reg: &mut Registry, name: &str, help: &str, value: u64) {
    let c = Counter::<u64>::default();
    c.inc_by(value);
    reg.register(name, help, c);
}

/// Renders the node's metrics.
pub fn render(node: &Node) -> String {
    let mut reg = Registry::with_prefix("electd");
    register_view(&mut reg, node.view());
    register_counters(&mut reg, node.counters.snapshot());
    gauge(
        &mut reg,
        "uptime_ms",
        "milliseconds since the node started",
        node.uptime_ms() as i64,
    );
    gauge(
        &mut reg,
        "watchers",
        "open GET /v1/watch streams",
        node.watchers.open() as i64,
    );
    counter(
        &mut reg,
        "watchers_refused",
        "GET /v1/watch requests refused with 429 (max_watchers reached)",
        node.watchers.refused(),
    );
    let mut out = String::new();
    encode(&mut out, &reg).expect("writing to a String cannot fail");
    out
}

/// The judged view: role, term, leader, claim left.
fn register_view(reg: &mut Registry, judged: Judged) {
    let view = judged.view;
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
    gauge(
        reg,
        "term",
        "Raft term (quorum) or coordinator epoch (bully, ring) or group number (invitation)",
        view.term as i64,
    );
    gauge(
        reg,
        "leader_id",
        "id of the leader this node knows, 0 for none",
        view.leader.map(|l| l as i64).unwrap_or(0),
    );
    gauge(
        reg,
        "lease_remaining_ms",
        "milliseconds of leadership claim left (quorum leader)",
        judged
            .lease_remaining_ns
            .map(|ns| (ns / 1_000_000) as i64)
            .unwrap_or(0),
    );
}

/// The counters of `/v1/status`.
fn register_counters(reg: &mut Registry, snap: Counters) {
    counter(
        reg,
        "elections_started",
        "elections this node started",
        snap.elections_started,
    );
    counter(
        reg,
        "leader_changes",
        "times this node saw a new leader",
        snap.leader_changes,
    );
    let by =
        |map: &BTreeMap<String, u64>| map.iter().map(|(k, v)| (k.clone(), *v)).collect::<Vec<_>>();
    counter_family(
        reg,
        "messages_sent",
        "peer messages sent, by type",
        "type",
        by(&snap.messages_sent),
    );
    counter_family(
        reg,
        "messages_received",
        "peer messages received, by type",
        "type",
        by(&snap.messages_received),
    );
    counter_family(
        reg,
        "peer_requests_rejected",
        "peer requests refused, by reason",
        "reason",
        by(&snap.rejected_peer_requests),
    );
}
