//! `/metrics`, built from the node's counters at scrape time: OpenMetrics text for scrapers that
//! ask for it (`Accept: application/openmetrics-text`), Prometheus' classic text format (0.0.4)
//! for the others. Every name starts with `electd_`, durations are in seconds; docs/operations.md's
//! "Metrics" lists them all.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicU64;

use electd_client::Counters;

use crate::counters::Timings;
use crate::engine::{Judged, RoleCounts};
use crate::lease::ClaimEnd;
use crate::node::Node;
use crate::role::Role;

type Labels = Vec<(String, String)>;

/// The content type of OpenMetrics text.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the classic Prometheus text format.
pub const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

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

fn seconds_gauge(reg: &mut Registry, name: &str, help: &str, value: f64) {
    let g = Gauge::<f64, AtomicU64>::default();
    g.set(value);
    reg.register_with_unit(name, help, Unit::Seconds, g);
}

fn counter(reg: &mut Registry, name: &str, help: &str, value: u64) {
    let c = Counter::<u64>::default();
    c.inc_by(value);
    reg.register(name, help, c);
}

/// Renders the node's metrics, as OpenMetrics when `openmetrics`, else in the classic format:
/// electd's own under `electd_`, and the process's under the names every exporter uses
/// (`process_*`, [`register_process`]).
pub fn render(node: &Node, openmetrics: bool, roles: Option<RoleCounts>) -> String {
    let mut root = Registry::default();
    register_process(&mut root, node.started_unix_s);
    let reg = root.sub_registry_with_prefix("electd");
    build_info(reg, node.mode().as_str());
    register_timing_config(reg, &node.cfg.timing);
    register_api(reg, node);
    register_view(reg, node.view());
    let counted = node.counters.snapshot();
    register_members(reg, node, &counted);
    register_counters(reg, counted);
    register_timings(reg, &node.counters.timings);
    if let Some(r) = roles {
        register_roles(reg, r);
    }
    let contact = Family::<Labels, Gauge<f64, AtomicU64>>::default();
    let now = node.clock.mono_ns();
    let peers = node.members_in_force();
    for (id, _) in peers.iter().filter(|(id, _)| *id != node.cfg.id) {
        if let Some(at) = node.counters.last_contact_ns(*id) {
            contact
                .get_or_create(&vec![("peer".into(), id.to_string())])
                .set(now.saturating_sub(at) as f64 / 1e9);
        }
    }
    reg.register_with_unit(
        "peer_last_contact",
        "seconds since the peer last got a message through to this node, or answered one of \
         its requests (no series before the first)",
        Unit::Seconds,
        contact,
    );
    seconds_gauge(
        reg,
        "start_time",
        "when the node started, seconds since the Unix epoch",
        node.started_unix_s,
    );
    let mut out = String::new();
    encode(&mut out, &root).expect("writing to a String cannot fail");
    if openmetrics {
        out
    } else {
        classic(&out)
    }
}

/// Whether an `Accept` header asks for OpenMetrics: one of its media ranges names it with a
/// quality above 0 (`q=0` means "not this", RFC 9110, 12.4.2).
pub fn wants_openmetrics(accept: Option<&str>) -> bool {
    accept.unwrap_or("").split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let refused = parts.any(|p| {
            p.split_once('=').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("q") && v.trim().parse::<f64>() == Ok(0.0)
            })
        });
        media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
    })
}

/// OpenMetrics text as the classic Prometheus text format: a counter family is named with its
/// `_total` (as its samples are), and the `# UNIT` and `# EOF` lines, which that format lacks,
/// are left out. Everything else reads the same in both.
fn classic(openmetrics: &str) -> String {
    let counters: BTreeSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|tag| {
            let rest = line.strip_prefix(tag)?;
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            counters
                .contains(name)
                .then(|| format!("{tag}{name}_total {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// What the API and the server hold: watch streams and connections, and those refused.
fn register_api(reg: &mut Registry, node: &Node) {
    gauge(
        reg,
        "watchers",
        "open GET /v1/watch streams",
        node.watchers.open() as i64,
    );
    counter(
        reg,
        "watchers_refused",
        "GET /v1/watch requests refused with 429 (max_watchers or max_watchers_per_client reached)",
        node.watchers.refused(),
    );
    gauge(
        reg,
        "connections",
        "connections served now, the members' reserve included",
        node.connections.open() as i64,
    );
    counter(
        reg,
        "connections_refused",
        "connections closed unserved: max_connections reached, and not a member's on the reserve",
        node.connections.refused(),
    );
}

/// The stretches without a leader in the node's own follower leases: what the alert rules
/// read, so that one threshold holds for every timing.
fn register_unitless(reg: &mut Registry, leases: Histogram) {
    reg.register(
        "leaderless_follower_leases",
        "each stretch of time this node knew no leader, in follower leases of this node \
         (unitless), observed when it knows one again",
        leases,
    );
}

/// The timings in force (`[timing]`, config/profile.rs), which alert rules scale their
/// thresholds by: `electd_timing_{heartbeat,follower_lease,claim_lease}_seconds`, and
/// `electd_timing_profile{profile}` 1 naming the profile they match (`custom`: none).
fn register_timing_config(reg: &mut Registry, t: &crate::config::Timing) {
    let ms = |v: u64| v as f64 / 1000.0;
    seconds_gauge(
        reg,
        "timing_heartbeat",
        "timing.heartbeat_ms in force: how often a leader sends heartbeats and probes",
        ms(t.heartbeat_ms),
    );
    seconds_gauge(
        reg,
        "timing_follower_lease",
        "timing.follower_lease_ms in force: how long a follower tolerates leader silence",
        ms(t.follower_lease_ms),
    );
    seconds_gauge(
        reg,
        "timing_claim_lease",
        "the claim lease in force: how long an acknowledged probe lets the leader claim",
        ms(t.effective_lease_ms()),
    );
    let profile = Family::<Labels, Gauge>::default();
    let name = crate::config::TimingProfile::of(t).map_or("custom", |p| p.name());
    profile
        .get_or_create(&vec![("profile".into(), name.into())])
        .set(1);
    reg.register(
        "timing_profile",
        "1, labelled with the timing profile the timings in force match (custom: none)",
        profile,
    );
}

/// `electd_build_info{version,commit,mode} 1`: what runs, joinable on its labels.
fn build_info(reg: &mut Registry, mode: &str) {
    let info = Family::<Labels, Gauge>::default();
    info.get_or_create(&vec![
        ("version".into(), env!("CARGO_PKG_VERSION").into()),
        ("commit".into(), env!("ELECTD_COMMIT").into()),
        ("mode".into(), mode.into()),
    ])
    .set(1);
    reg.register(
        "build_info",
        "1, labelled with the version, the commit and the election mode this node runs",
        info,
    );
}

/// The process's own figures, named as Prometheus' client libraries name them (read from
/// `/proc/self` at scrape time): CPU time, resident and virtual memory, open and allowed file
/// descriptors, start time. A figure that cannot be read is left out.
fn register_process(reg: &mut Registry, started_unix_s: f64) {
    let p = crate::counters::process_figures();
    if let Some(cpu) = p.cpu_seconds {
        let c = Counter::<f64, AtomicU64>::default();
        c.inc_by(cpu);
        reg.register_with_unit(
            "process_cpu",
            "user and system CPU time this process spent",
            Unit::Seconds,
            c,
        );
    }
    let bytes = |reg: &mut Registry, name: &str, help: &str, v: Option<u64>| {
        if let Some(v) = v {
            let g = Gauge::<i64>::default();
            g.set(v as i64);
            reg.register_with_unit(name, help, Unit::Bytes, g);
        }
    };
    bytes(
        reg,
        "process_resident_memory",
        "resident memory of this process",
        p.resident_bytes,
    );
    bytes(
        reg,
        "process_virtual_memory",
        "virtual memory of this process",
        p.virtual_bytes,
    );
    if let Some(n) = p.open_fds {
        gauge(reg, "process_open_fds", "open file descriptors", n as i64);
    }
    if let Some(n) = p.max_fds {
        gauge(
            reg,
            "process_max_fds",
            "the most file descriptors this process may open",
            n as i64,
        );
    }
    seconds_gauge(
        reg,
        "process_start_time",
        "when the process started, seconds since the Unix epoch",
        started_unix_s,
    );
}

/// The named roles (quorum mode; docs/design/roles.md): counts only, so that the series stay
/// bounded whatever the number of roles.
fn register_roles(reg: &mut Registry, r: RoleCounts) {
    let roles = Family::<Labels, Gauge>::default();
    for (state, n) in [("held", r.held), ("free", r.roles - r.held)] {
        roles
            .get_or_create(&vec![("state".into(), state.into())])
            .set(n as i64);
    }
    reg.register(
        "roles",
        "named roles in the node's applied log, held and free",
        roles,
    );
    gauge(
        reg,
        "roles_held",
        "named roles this node holds in its applied log",
        r.mine as i64,
    );
    gauge(
        reg,
        "roles_claimed",
        "named roles this node claims now: held, renewed and not stopped (a claim on each \
         would be answered)",
        r.claimed as i64,
    );
    counter(
        reg,
        "role_grants",
        "grants of named roles applied, ever (the last fencing token drawn)",
        r.grants,
    );
}

/// The members by kind (quorum mode: the membership of the log), whether this node is one
/// that does not vote, and the non-voters' joins and removals (docs/design/nonvoters.md).
fn register_members(reg: &mut Registry, node: &Node, snap: &Counters) {
    if let Ok(m) = node.engine().members() {
        let kinds = Family::<Labels, Gauge>::default();
        let voters = m.members.iter().filter(|x| x.voter).count();
        let nonvoters = m.members.len() - voters;
        for (kind, n) in [("voter", voters), ("nonvoter", nonvoters)] {
            kinds
                .get_or_create(&vec![("kind".into(), kind.into())])
                .set(n as i64);
        }
        reg.register(
            "members",
            "members of the membership in force, by kind: voter, nonvoter (a member that does \
             not vote, or a learner being caught up)",
            kinds,
        );
    }
    gauge(
        reg,
        "nonvoter",
        "1 on a member that does not vote (config nonvoter = true), 0 otherwise",
        i64::from(node.cfg.nonvoter),
    );
    let joins = snap.nonvoter_joins.clone().into_iter().collect();
    counter_family(
        reg,
        "nonvoter_joins",
        "quorum mode: joins of members that do not vote this node judged, by outcome: added, \
         member, not_leader, or a refusal's code",
        "outcome",
        joins,
    );
    counter(
        reg,
        "nonvoters_removed",
        "quorum mode: members that do not vote this node, leading, removed as absent",
        snap.nonvoters_removed,
    );
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
        "Raft term (quorum), the row's term (mutex), coordinator epoch (bully, ring) or group \
         number (invitation)",
        view.term as i64,
    );
    gauge(
        reg,
        "leader_id",
        "id of the leader this node knows, 0 for none",
        view.leader.map(|l| l as i64).unwrap_or(0),
    );
    seconds_gauge(
        reg,
        "lease_remaining",
        "seconds of leadership claim left (quorum and mutex leader; 0 otherwise)",
        judged.lease_remaining_ns.unwrap_or(0) as f64 / 1e9,
    );
}

/// The distributions of [`Timings`].
fn register_timings(reg: &mut Registry, t: &Timings) {
    let seconds = [
        (
            "probe_round_trip",
            "from a probe's send to the quorum's acknowledgement (quorum), or from a statement's \
             send to the store's answer that this node holds the row (mutex)",
            &t.probe_round_trip,
        ),
        (
            "election_duration",
            "from the instant this node lost its leader (its follower lease ended, or it began \
             to campaign) to its own claim",
            &t.election,
        ),
        (
            "leaderless",
            "each stretch of time this node knew no leader, observed when it knows one again",
            &t.leaderless,
        ),
        (
            "watch_lag",
            "from an event's record to its write into a GET /v1/watch stream that was open then",
            &t.watch_lag,
        ),
    ];
    for (name, help, h) in seconds {
        reg.register_with_unit(name, help, Unit::Seconds, h.clone());
    }
    let leases = Histogram::clone(&t.leaderless_follower_leases);
    register_unitless(reg, leases);
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
        "peer messages sent, by type (mutex: statements to the store, as claim)",
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
    register_refusals_and_ends(reg, &snap);
}

/// The counters of `/v1/status` that count refusals and ends: bad store rows, votes refused,
/// claims ended.
fn register_refusals_and_ends(reg: &mut Registry, snap: &Counters) {
    let by =
        |map: &BTreeMap<String, u64>| map.iter().map(|(k, v)| (k.clone(), *v)).collect::<Vec<_>>();
    // Every cause from the start (at 0), so that increase() sees the first claim lost.
    let mut ended = by(&snap.claims_ended);
    for cause in [ClaimEnd::Lost, ClaimEnd::Resigned, ClaimEnd::Stopped] {
        if !ended.iter().any(|(k, _)| k == cause.as_str()) {
            ended.push((cause.as_str().to_string(), 0));
        }
    }
    counter_family(
        reg,
        "store_bad_rows",
        "mutex mode: the store's answers whose lease row held a value out of range, by the first \
         such field (holder, term, wait_ms, version)",
        "field",
        by(&snap.bad_store_rows),
    );
    counter_family(
        reg,
        "votes_refused",
        "quorum mode: vote requests refused before the vote was counted, by reason: promise (a \
         promise this node answered can still run, or it stops), unconfirmed (a new data dir)",
        "reason",
        by(&snap.votes_refused),
    );
    counter_family(
        reg,
        "claims_ended",
        "claims of this node that ended, by cause: lost (the renewal failed), resigned, stopped",
        "cause",
        ended,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_classic_format_names_counters_with_their_total_and_drops_what_it_lacks() {
        let om = "# HELP electd_elections_started elections this node started.\n\
                  # TYPE electd_elections_started counter\n\
                  electd_elections_started_total 3\n\
                  # HELP electd_term the term.\n\
                  # TYPE electd_term gauge\n\
                  electd_term 7\n\
                  # HELP electd_start_time_seconds when.\n\
                  # TYPE electd_start_time_seconds gauge\n\
                  # UNIT electd_start_time_seconds seconds\n\
                  electd_start_time_seconds 1.5\n\
                  # EOF\n";
        assert_eq!(
            classic(om),
            "# HELP electd_elections_started_total elections this node started.\n\
             # TYPE electd_elections_started_total counter\n\
             electd_elections_started_total 3\n\
             # HELP electd_term the term.\n\
             # TYPE electd_term gauge\n\
             electd_term 7\n\
             # HELP electd_start_time_seconds when.\n\
             # TYPE electd_start_time_seconds gauge\n\
             electd_start_time_seconds 1.5\n"
        );
    }

    #[test]
    fn openmetrics_only_when_asked_for() {
        assert!(wants_openmetrics(Some(
            "application/openmetrics-text;version=1.0.0,text/plain;q=0.5"
        )));
        assert!(!wants_openmetrics(Some("text/plain")));
        assert!(!wants_openmetrics(Some(
            "application/openmetrics-text;q=0, text/plain"
        )));
        assert!(!wants_openmetrics(None));
    }
}
